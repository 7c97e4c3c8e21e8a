//! What the model's integration tests share: running one of the small experiment files of
//! tests/experiments/ with overrides, to its end.

use flexpass_sim::{Override, RunReport, Source};

/// tests/experiments/`file` with `sets` (`key=value`, as `--set` takes them) applied.
pub fn run_small<S: AsRef<str>>(file: &str, sets: &[S]) -> RunReport {
    let path = format!("{}/tests/experiments/{file}", env!("CARGO_MANIFEST_DIR"));
    let o: Vec<Override> = sets
        .iter()
        .map(|s| Override::parse(s.as_ref()).unwrap_or_else(|e| panic!("{e}")))
        .collect();
    let e = Source::load(&path)
        .unwrap_or_else(|e| panic!("{e}"))
        .experiment(&o)
        .unwrap_or_else(|e| panic!("{e}"));
    flexpass_sim::run(&e, &o, &mut |_| {}).unwrap_or_else(|e| panic!("{e}"))
}
