//! `flexpass workload --trace`: a host replays the flows of a trace that leave it (what
//! `flexpass emulate` runs for the flows the model drew), each at its start time, to the
//! address of its destination host; every record carries the flow's trace id and the
//! SHA-256 of its bytes, which the receiver's record matches. Loopback only.

mod common;

use common::{free_udp_port, pattern_sha, Kill};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

#[test]
fn a_host_replays_its_flows_of_a_trace_at_their_times_byte_exact() {
    let bin = env!("CARGO_BIN_EXE_flexpass");
    let dir = std::env::temp_dir().join(format!("fp-trace-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let trace = dir.join("flows.trace");
    // Host 0 sends flows 7 and 9 (at 0 s and 0.3 s), host 1 sends flow 8: not ours.
    std::fs::write(
        &trace,
        "7 0.0 0 1 20000\n8 0.1 1 0 5000\n9 0.3 0 1 300000\n",
    )
    .unwrap();
    let hosts: Vec<String> = (0..2)
        .map(|_| format!("127.0.0.1:{}", free_udp_port()))
        .collect();
    let serve = Kill(
        Command::new(bin)
            .args(["serve", "--listen", &hosts[1], "--count", "2"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    std::thread::sleep(Duration::from_millis(200));
    let out = Command::new(bin)
        .args([
            "workload",
            "--trace",
            trace.to_str().unwrap(),
            "--host",
            "0",
        ])
        .args(["--hosts", &hosts.join(","), "--transport", "flexpass"])
        .args(["--sample-ms", "0", "--bind", "127.0.0.1:0"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let flows: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["event"] == "flow")
        .collect();
    let ids: Vec<u64> = flows
        .iter()
        .map(|f| f["trace_id"].as_u64().unwrap())
        .collect();
    assert_eq!(ids, [7, 9], "only the flows that leave host 0, in order");
    for f in &flows {
        assert!(f["error"].is_null(), "{f}");
        assert_eq!(f["dst"], hosts[1].as_str());
        let size = f["size"].as_u64().unwrap();
        assert_eq!(f["sha256"], pattern_sha(size).as_str(), "{f}");
    }
    // Flow 9 starts at its time (0.3 s after the command), not at once.
    let start = flows[1]["start_us"].as_f64().unwrap();
    assert!((300_000.0..1_000_000.0).contains(&start), "{start} µs");
    // The receiver has both, byte-exact.
    let mut serve = serve;
    let stdout = serve.0.stdout.take().unwrap();
    let received: Vec<serde_json::Value> = BufReader::new(stdout)
        .lines()
        .map_while(Result::ok)
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(&l).ok())
        .filter(|v| v["event"] == "flow_received")
        .take(2)
        .collect();
    let mut got: Vec<(u64, String)> = received
        .iter()
        .map(|r| {
            (
                r["bytes"].as_u64().unwrap(),
                r["sha256"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    got.sort();
    assert_eq!(
        got,
        [
            (20_000, pattern_sha(20_000)),
            (300_000, pattern_sha(300_000))
        ]
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_trace_the_hosts_do_not_cover_is_refused_by_name() {
    let bin = env!("CARGO_BIN_EXE_flexpass");
    let dir = std::env::temp_dir().join(format!("fp-trace-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let trace = dir.join("flows.trace");
    std::fs::write(&trace, "1 0.0 0 3 1000\n").unwrap();
    let run = |host: &str| {
        let o = Command::new(bin)
            .args([
                "workload",
                "--trace",
                trace.to_str().unwrap(),
                "--host",
                host,
            ])
            .args(["--hosts", "127.0.0.1:9,127.0.0.1:10"])
            .output()
            .unwrap();
        assert!(!o.status.success());
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    assert!(run("0").contains("flow 1 goes to host 3, but --hosts lists 2 addresses"));
    assert!(run("5").contains("--host 5: --hosts lists 2 addresses"));
    let _ = std::fs::remove_dir_all(&dir);
}
