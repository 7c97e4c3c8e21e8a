//! No source file of flexpass-sim over 1000 lines unless its header says why it is one
//! piece (a line of its leading `//!` comment starting "One piece:").

use std::path::{Path, PathBuf};

const MAX_LINES: usize = 1000;

#[test]
fn long_files_say_why_they_are_one_piece() {
    let mut files = vec![];
    rs_files(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &mut files,
    );
    let long: Vec<String> = files
        .iter()
        .filter_map(|f| {
            let text = std::fs::read_to_string(f).unwrap();
            let noted = text
                .lines()
                .take_while(|l| l.starts_with("//!"))
                .any(|l| l.trim_start_matches("//!").trim().starts_with("One piece:"));
            let n = text.lines().count();
            (n > MAX_LINES && !noted).then(|| format!("{} ({n} lines)", f.display()))
        })
        .collect();
    assert!(
        long.is_empty(),
        "over {MAX_LINES} lines without a \"One piece:\" note in the header: {long:?}"
    );
}

fn rs_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rs_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}
