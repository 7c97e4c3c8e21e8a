//! Writes the seed corpora of the stateful fuzz targets:
//! `gen_seeds DIR` → `DIR/{sender,receiver,pair}/<exchange>` (see `flexpass_fuzz_harness::seeds`),
//! and of the `decode` target: `DIR/decode/<type>` (`flexpass_fuzz_harness::decode_seeds`).
//! Deterministic: the same files every time.

use flexpass_fuzz_harness::decode_seeds::decode_seeds;
use flexpass_fuzz_harness::seeds::{record, specs};
use std::path::PathBuf;

fn main() {
    let dir = PathBuf::from(std::env::args().nth(1).unwrap_or_else(|| "seeds".into()));
    let mut files = 0;
    let mut bytes = 0;
    for target in ["sender", "receiver", "pair", "decode"] {
        std::fs::create_dir_all(dir.join(target)).expect("create seed directory");
    }
    for spec in specs() {
        let s = record(&spec);
        for (target, data) in [
            ("sender", &s.sender),
            ("receiver", &s.receiver),
            ("pair", &s.pair),
        ] {
            std::fs::write(dir.join(target).join(spec.name), data).expect("write seed");
            files += 1;
            bytes += data.len();
        }
    }
    for (name, data) in decode_seeds() {
        std::fs::write(dir.join("decode").join(name), &data).expect("write seed");
        files += 1;
        bytes += data.len();
    }
    println!("gen_seeds: {files} seeds ({bytes} B) in {}", dir.display());
}
