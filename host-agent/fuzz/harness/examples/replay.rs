//! Replays one fuzz input on stable and prints its decoded operations:
//! `cargo run --example replay -- <sender|receiver|pair> FILE [-v]`.
use flexpass_fuzz_harness::codec::decode_input;
use flexpass_fuzz_harness::{pair, receiver, sender};

#[global_allocator]
static ALLOC: flexpass_fuzz_harness::alloc::Counting = flexpass_fuzz_harness::alloc::Counting;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let data = std::fs::read(&args[2]).expect("read input");
    let verbose = args.get(3).is_some_and(|a| a == "-v");
    match args[1].as_str() {
        "sender" => {
            let (h, ops) = decode_input::<sender::SenderHeader, sender::SenderOp>(&data);
            if verbose {
                println!("{h:?}");
                ops.iter().for_each(|o| println!("  {o:?}"));
            }
            sender::run(&data);
        }
        "receiver" => {
            let (h, ops) = decode_input::<receiver::ReceiverHeader, receiver::ReceiverOp>(&data);
            if verbose {
                println!("{h:?}");
                ops.iter().for_each(|o| println!("  {o:?}"));
            }
            receiver::run(&data);
        }
        "pair" => {
            let (h, ops) = decode_input::<pair::PairHeader, pair::PairOp>(&data);
            if verbose {
                println!("{h:?}");
                ops.iter().for_each(|o| println!("  {o:?}"));
            }
            pair::run(&data);
        }
        t => panic!("unknown target {t}"),
    }
    println!("ok");
}
