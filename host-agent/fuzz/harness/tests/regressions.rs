//! Inputs that once failed a target (host-agent/fuzz/regressions/<target>/, in git): each
//! must now run clean. run.sh also hands them to libFuzzer with the seeds.

use flexpass_fuzz_harness::{pair, receiver, sender};
use std::path::Path;

#[test]
fn regression_inputs_run_clean() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../regressions");
    let mut n = 0;
    for target in ["sender", "receiver", "pair"] {
        let Ok(files) = std::fs::read_dir(dir.join(target)) else {
            continue;
        };
        for f in files {
            let path = f.expect("list regressions").path();
            let data = std::fs::read(&path).expect("read regression input");
            println!("{target} {}", path.display());
            match target {
                "sender" => drop(sender::run(&data)),
                "receiver" => drop(receiver::run(&data)),
                _ => drop(pair::run(&data)),
            }
            n += 1;
        }
    }
    assert!(n > 0, "no regression inputs found in {}", dir.display());
}
