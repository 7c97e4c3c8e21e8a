//! Writes the seed corpora of the stateful fuzz targets:
//! `gen_seeds DIR` → `DIR/{sender,receiver,pair}/<exchange>` (see `flexpass_fuzz_harness::seeds`),
//! of the `decode` target: `DIR/decode/<type>` (`flexpass_fuzz_harness::decode_seeds`), and
//! of the text-parser targets: `DIR/{api,edge_text}/<name>` (`flexpass_fuzz_harness::text_seeds`,
//! the `api` ones from docs/agent-api.md's request lines).
//! Deterministic: the same files every time.

use flexpass_fuzz_harness::decode_seeds::decode_seeds;
use flexpass_fuzz_harness::seeds::{record, specs};
use flexpass_fuzz_harness::text_seeds::{api_seeds, edge_text_seeds};
use std::path::PathBuf;

fn main() {
    let dir = PathBuf::from(std::env::args().nth(1).unwrap_or_else(|| "seeds".into()));
    let mut files = 0;
    let mut bytes = 0;
    for target in ["sender", "receiver", "pair", "decode", "api", "edge_text"] {
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
    let doc = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../docs/agent-api.md");
    let doc = std::fs::read_to_string(&doc)
        .unwrap_or_else(|e| panic!("{}: {e} (the api seeds)", doc.display()));
    let text = api_seeds(&doc)
        .into_iter()
        .map(|(n, d)| ("api", n, d))
        .chain(
            edge_text_seeds()
                .into_iter()
                .map(|(n, d)| ("edge_text", n.to_string(), d)),
        );
    for (target, name, data) in text {
        std::fs::write(dir.join(target).join(name), &data).expect("write seed");
        files += 1;
        bytes += data.len();
    }
    println!("gen_seeds: {files} seeds ({bytes} B) in {}", dir.display());
}
