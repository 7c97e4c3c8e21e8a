//! Compiles the experiment files of host-agent/experiments/ into the binary: each file is a
//! built-in experiment named after it (`flexpass sim incast`).

use std::fmt::Write as _;
use std::path::Path;

fn main() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments");
    // The folder and its subfolders (figures/): names are file stems, so they must be unique.
    let mut files = vec![];
    let mut dirs = vec![dir.clone()];
    while let Some(d) = dirs.pop() {
        println!("cargo:rerun-if-changed={}", d.display());
        for e in std::fs::read_dir(&d).expect("host-agent/experiments/ exists") {
            let p = e.expect("readable").path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "toml") {
                files.push(p);
            }
        }
    }
    files.sort_by_key(|f| f.file_stem().map(|s| s.to_os_string()));
    for w in files.windows(2) {
        assert!(
            w[0].file_stem() != w[1].file_stem(),
            "two experiments named {:?}",
            w[0].file_stem()
        );
    }
    let mut out = String::from(
        "/// Built-in experiments: (name, TOML text), from host-agent/experiments/.\npub const BUILTIN: &[(&str, &str)] = &[\n",
    );
    for f in files {
        println!("cargo:rerun-if-changed={}", f.display());
        let name = f.file_stem().unwrap().to_string_lossy();
        let path = f.canonicalize().unwrap();
        writeln!(
            out,
            "    ({name:?}, include_str!({:?})),",
            path.display().to_string()
        )
        .unwrap();
    }
    out.push_str("];\n");
    let dest = Path::new(&std::env::var("OUT_DIR").unwrap()).join("builtin_experiments.rs");
    std::fs::write(dest, out).unwrap();
}
