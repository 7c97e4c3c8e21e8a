//! `flexpass sim` / `sweep` / `experiments` as a user runs them.

use std::path::PathBuf;
use std::process::Command;

fn flexpass(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_flexpass"))
        .args(args)
        .output()
        .expect("runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("fp-cli-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn built_in_names_files_and_errors() {
    let (ok, out, _) = flexpass(&["experiments"]);
    assert!(ok && out.contains("flexpass-vs-dctcp") && out.contains("fig10-deployment"));
    // The former scenario flags still work, as shorthands for --set.
    let (ok, out, err) = flexpass(&[
        "sim",
        "single-flexpass",
        "--duration-ms",
        "3",
        "--w-q",
        "0.4",
    ]);
    assert!(ok, "{err}");
    assert!(
        out.contains("w_q 0.4") && out.contains("flow 1 FlexPass"),
        "{out}"
    );
    // A bad key or value is an error naming it.
    let (ok, _, err) = flexpass(&["sim", "single-flexpass", "--set", "switch.wq=0.5"]);
    assert!(!ok && err.contains("unknown field `wq`"), "{err}");
    let (ok, _, err) = flexpass(&["sim", "single-flexpass", "--set", "workload.load=2"]);
    assert!(!ok && err.contains("workload"), "{err}");
    let (ok, _, err) = flexpass(&["sim", "no-such-experiment"]);
    assert!(
        !ok && err.contains("neither a built-in experiment"),
        "{err}"
    );
}

#[test]
fn sweep_resumes_and_prints_one_command_per_run() {
    let dir = tmp("sweep");
    let d = dir.to_str().unwrap();
    let args = [
        "sweep",
        "incast",
        "--incast-flows",
        "8",
        "--out",
        d,
        "-j",
        "2",
    ];
    // One command per run still to do; running one of them is the same as the sweep's run.
    let (ok, cmds, err) = flexpass(&[&args[..], &["--print-commands"]].concat());
    assert!(ok, "{err}");
    let cmds: Vec<&str> = cmds.lines().collect();
    assert_eq!(cmds.len(), 3, "{cmds:?}");
    assert!(cmds
        .iter()
        .all(|c| c.contains(" sim incast --no-sweep ") && c.contains("--out")));
    let first = Command::new("sh").arg("-c").arg(cmds[0]).output().unwrap();
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    let (ok, out, err) = flexpass(&args);
    assert!(ok, "{err}");
    assert!(err.contains("3 runs, 1 already done"), "{err}");
    assert!(out.contains("results:") && dir.join("summary.csv").is_file());
    assert!(dir.join("figure-max-fct.png").is_file() && dir.join("figure-max-fct.csv").is_file());
    let (ok, _, err) = flexpass(&args);
    assert!(ok && err.contains("3 already done"), "{err}");
    let summary = std::fs::read_to_string(dir.join("summary.csv")).unwrap();
    assert_eq!(summary.lines().count(), 4, "{summary}");
    std::fs::remove_dir_all(&dir).unwrap();
}
