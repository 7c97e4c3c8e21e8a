//! Many concurrent flows through one `flexpass serve` on loopback (docs/agent-api.md,
//! "Scale"): `flexpass workload --idle 2000` opens 2000 flows that each send a few bytes and
//! then stay open and idle while 50 workload flows come and go, then finish them. `serve`
//! services only the flows a packet or a timer touched each turn, so a lost wake-up leaves a
//! flow unread: it never completes, `serve --count` never reaches its count and the test
//! fails (after the timeout) naming the missing flows. Every flow must arrive byte-exact.

mod common;

use common::{free_udp_port, pattern_sha, Kill};
use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const IDLE: usize = 2000;
const IDLE_BYTES: u64 = 700;
const ACTIVE: usize = 50;

fn many_idle_flows_through_one_serve(transport: &str) {
    let bin = env!("CARGO_BIN_EXE_flexpass");
    let dir = std::env::temp_dir().join(format!("fp-many-{}-{transport}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cdf = dir.join("cdf.txt");
    // Workload flow sizes 1 kB … 200 kB.
    std::fs::write(&cdf, "1000 1 0\n200000 1 1\n").unwrap();
    let port = free_udp_port();
    let addr = format!("127.0.0.1:{port}");
    let total = IDLE + ACTIVE;
    let mut serve = Kill(
        Command::new(bin)
            .args(["serve", "--listen", &addr, "--count", &total.to_string()])
            .args(["--max-flows", "20000", "--max-half-open", "4096"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    // Read serve's records from the start (a full pipe would block it).
    let stdout = serve.0.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for l in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    std::thread::sleep(Duration::from_millis(200));
    let client = Command::new(bin)
        .args([
            "workload",
            "--bind",
            "127.0.0.1:0",
            "--to",
            &addr,
            "--transport",
            transport,
        ])
        .args([
            "--cdf",
            cdf.to_str().unwrap(),
            "--count",
            &ACTIVE.to_string(),
        ])
        .args(["--load", "0.05", "--sample-ms", "0", "--hold-s", "0.5"])
        // Small waves (as the default): every opening credit-based receiver credits at
        // full rate until its sender stops it (docs/agent-api.md, "Scale", not covered).
        .args(["--idle-wave", "50"])
        .args([
            "--idle",
            &IDLE.to_string(),
            "--idle-bytes",
            &IDLE_BYTES.to_string(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = client.wait_with_output().unwrap();
    let client_out = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "workload failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        client_out.lines().last().unwrap_or("")
    );
    // Expected bytes per flow id, from the client's records.
    let mut want: HashMap<u64, u64> = HashMap::new();
    for l in client_out.lines() {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        match v["event"].as_str() {
            Some("flow") | Some("idle_flow") => {
                assert!(v["error"].is_null(), "client flow failed: {l}");
                want.insert(v["flow_id"].as_u64().unwrap(), v["size"].as_u64().unwrap());
            }
            _ => {}
        }
    }
    assert_eq!(want.len(), total, "client reported {} flows", want.len());
    // Every flow through serve, byte-exact; serve exits after `total` (it must not starve one).
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut got: HashMap<u64, (u64, String)> = HashMap::new();
    while got.len() < total {
        let left = deadline.saturating_duration_since(Instant::now());
        let Ok(l) = rx.recv_timeout(left) else {
            let missing: Vec<_> = want
                .keys()
                .filter(|k| !got.contains_key(k))
                .take(10)
                .collect();
            panic!(
                "serve reported {} of {total} flows within 30 s of the client's end (starved: {missing:?} …)",
                got.len()
            );
        };
        let v: serde_json::Value = serde_json::from_str(&l).unwrap();
        if v["event"] == "flow_received" {
            let id = v["flow_id"].as_u64().unwrap();
            let rec = (
                v["bytes"].as_u64().unwrap(),
                v["sha256"].as_str().unwrap().to_string(),
            );
            assert!(got.insert(id, rec).is_none(), "flow {id} reported twice");
        }
    }
    let mut shas: HashMap<u64, String> = HashMap::new();
    for (id, (bytes, sha)) in &got {
        let size = want
            .get(id)
            .unwrap_or_else(|| panic!("serve got unknown flow {id}"));
        assert_eq!(bytes, size, "flow {id}: bytes");
        let expect = shas.entry(*size).or_insert_with(|| pattern_sha(*size));
        assert_eq!(sha, expect, "flow {id} ({size} B): content differs");
    }
    let status = serve.0.wait().unwrap();
    assert!(status.success(), "serve exited with {status}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn two_thousand_idle_flexpass_flows_and_a_workload_through_one_serve_byte_exact() {
    many_idle_flows_through_one_serve("flexpass");
}

#[test]
fn two_thousand_idle_dctcp_flows_and_a_workload_through_one_serve_byte_exact() {
    many_idle_flows_through_one_serve("dctcp");
}
