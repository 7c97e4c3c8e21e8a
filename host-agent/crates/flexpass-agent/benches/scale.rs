//! Many flows (docs/agent-api.md, "Scale"), measured (part of `make bench`):
//!
//! * memory per idle flow: RSS growth of a sending and a receiving endpoint (separate
//!   processes) holding N open idle flows on loopback, divided by N;
//! * per-turn cost with N idle flows, for N = 10 and N = 10 000: the median time of one
//!   `Endpoint::poll(0)` on each side, and the ratio (flat: the loop only looks at due and
//!   touched flows);
//! * the daemon's per-turn cost with N idle API clients, each with an open idle flow
//!   (`connect`, a few bytes, no FIN), N = 10 vs `SCALE_CLIENTS` (default 9 000: two file descriptors per client in this process).
//!
//! Prints one JSON line `scale bench: {...}`. Ratios within one run; never a pass/fail.
//! `SCALE_DAEMON_ONLY=1` runs the daemon case alone, `SCALE_DEBUG=1` prints progress.
//! `SCALE_FLOWS` (default 10 000) changes N. The receiving side is this binary again, run
//! as a child with `FLEXPASS_SCALE_CHILD=1`.

use bytes::Bytes;
use flexpass_agent::daemon::Daemon;
use flexpass_agent::{Dir, Endpoint, EndpointConfig, FlowKey};
use flexpass_wire::TransportKind;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::SocketAddr;
use std::os::unix::net::UnixStream;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

/// Turns timed per measurement, in batches.
const TURNS: u32 = 40_000;
const BATCHES: u32 = 40;
const WAVE: usize = 250;
const FIRST_BYTES: usize = 1_000;

fn env_usize(k: &str, d: usize) -> usize {
    std::env::var(k)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(d)
}

fn rss_kb() -> u64 {
    let st = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    st.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn endpoint(accept: bool, flows: usize) -> Endpoint {
    let mut cfg = EndpointConfig::new("127.0.0.1:0".parse().unwrap());
    cfg.accept = accept;
    cfg.link_bps = 10e9;
    cfg.max_flows = 2 * flows + 64;
    cfg.max_half_open = 2 * flows + 64;
    cfg.spin = 0;
    Endpoint::bind(cfg).unwrap()
}

/// ns of one turn: the median over `BATCHES` batches of `TURNS / BATCHES` turns (after a
/// warm-up), so that a batch preempted on a shared machine does not count.
fn median_turn(mut turn: impl FnMut()) -> f64 {
    for _ in 0..1000 {
        turn();
    }
    let per = TURNS / BATCHES;
    let mut v: Vec<f64> = (0..BATCHES)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..per {
                turn();
            }
            t.elapsed().as_nanos() as f64 / f64::from(per)
        })
        .collect();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn time_turns(ep: &mut Endpoint) -> f64 {
    median_turn(|| ep.poll(Duration::ZERO).unwrap())
}

/// The receiving side: accepts flows and reads them; answers commands on stdin ("rss",
/// "turns", "quit") with one line each on stdout.
fn child() {
    let flows = env_usize("SCALE_CHILD_FLOWS", 10_000);
    let mut ep = endpoint(true, flows);
    // Warm: the first allocations (socket buffers) are not per flow.
    for _ in 0..100 {
        ep.poll(Duration::ZERO).unwrap();
    }
    println!("addr {} rss {}", ep.local_addr().unwrap(), rss_kb());
    let (tx, rx) = mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    ep.track_changes(true);
    let mut changed = Vec::new();
    let mut keys: Vec<FlowKey> = Vec::new();
    let mut delivered = 0usize;
    loop {
        ep.poll(Duration::from_micros(200)).unwrap();
        let mut read = |ep: &mut Endpoint, k: FlowKey| {
            if let Some(r) = ep.receiver_mut(k) {
                while let Some(b) = r.read() {
                    delivered += b.len();
                }
            }
        };
        while let Some(k) = ep.accept() {
            keys.push(k);
            read(&mut ep, k);
        }
        ep.take_changed(&mut changed);
        for &(dir, k) in &changed {
            if dir == Dir::Recv {
                read(&mut ep, k);
            }
        }
        match rx.try_recv() {
            Ok(cmd) if cmd == "rss" => {
                if std::env::var_os("SCALE_DEBUG").is_some() {
                    let crediting = keys
                        .iter()
                        .filter(|&&k| ep.receiver(k).is_some_and(|r| r.is_sending_credits()))
                        .count();
                    eprintln!(
                        "child: {crediting} receivers crediting, timers {:?}",
                        ep.timer_entries()
                    );
                }
                println!(
                    "rss {} flows {} delivered {delivered}",
                    rss_kb(),
                    ep.flows().1
                );
            }
            Ok(cmd) if cmd == "turns" => println!("turn_ns {}", time_turns(&mut ep)),
            Ok(_) | Err(mpsc::TryRecvError::Disconnected) => return,
            Err(mpsc::TryRecvError::Empty) => {}
        }
    }
}

struct Child {
    proc: std::process::Child,
    out: BufReader<std::process::ChildStdout>,
    addr: SocketAddr,
    rss0: u64,
}

impl Child {
    fn start(flows: usize) -> Child {
        let mut proc = Command::new(std::env::current_exe().unwrap())
            .env("FLEXPASS_SCALE_CHILD", "1")
            .env("SCALE_CHILD_FLOWS", flows.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("child");
        let mut out = BufReader::new(proc.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        let w: Vec<&str> = line.split_whitespace().collect();
        Child {
            addr: w[1].parse().unwrap(),
            rss0: w[3].parse().unwrap(),
            proc,
            out,
        }
    }

    fn ask(&mut self, cmd: &str) -> Vec<String> {
        let stdin = self.proc.stdin.as_mut().unwrap();
        writeln!(stdin, "{cmd}").unwrap();
        stdin.flush().unwrap();
        let mut line = String::new();
        self.out.read_line(&mut line).unwrap();
        line.split_whitespace().map(String::from).collect()
    }

    /// (rss KiB, flows, bytes delivered)
    fn status(&mut self) -> (u64, usize, usize) {
        let w = self.ask("rss");
        (
            w[1].parse().unwrap(),
            w[3].parse().unwrap(),
            w[5].parse().unwrap(),
        )
    }

    fn quit(mut self) {
        let _ = writeln!(self.proc.stdin.as_mut().unwrap(), "quit");
        let _ = self.proc.wait();
    }
}

/// N idle flows from this process to a child: memory per flow on both sides and the
/// per-turn cost on both sides.
fn endpoint_case(n: usize) -> serde_json::Value {
    let mut child = Child::start(n);
    let mut ep = endpoint(false, n);
    for _ in 0..100 {
        ep.poll(Duration::ZERO).unwrap();
    }
    let rss0 = rss_kb();
    let data = Bytes::from(vec![0x5a; FIRST_BYTES]);
    let mut keys = Vec::with_capacity(n);
    let start = Instant::now();
    let ts = [
        TransportKind::FlexPass,
        TransportKind::ExpressPass,
        TransportKind::Dctcp,
    ];
    for w in 0..n.div_ceil(WAVE) {
        let m = WAVE.min(n - w * WAVE);
        for j in 0..m {
            let k = ep
                .open(child.addr, ts[(w * WAVE + j) % 3], 2 * FIRST_BYTES as u64)
                .unwrap();
            ep.write(k, data.clone());
            keys.push(k);
        }
        let wave = &keys[w * WAVE..];
        while !wave
            .iter()
            .all(|&k| ep.sender(k).is_some_and(|s| s.unacked_bytes() == 0))
        {
            ep.poll(Duration::from_micros(200)).unwrap();
            assert!(start.elapsed() < Duration::from_secs(300), "setup too slow");
            for &k in wave {
                if let Some(e) = ep.sender(k).and_then(|s| s.error()) {
                    panic!("flow {k:?} failed: {e}");
                }
            }
        }
    }
    // Idle: credits stopped, nothing due.
    let idle = Instant::now() + Duration::from_millis(300);
    while Instant::now() < idle {
        ep.poll(Duration::from_micros(200)).unwrap();
    }
    let (rss_rx, flows_rx, delivered) = child.status();
    assert_eq!(flows_rx, n);
    assert_eq!(delivered, n * FIRST_BYTES);
    let rss_tx = rss_kb();
    let turn_tx = time_turns(&mut ep);
    let turn_rx: f64 = child.ask("turns")[1].parse().unwrap();
    let rx0 = child.rss0;
    child.quit();
    serde_json::json!({
        "flows": n,
        "setup_s": (start.elapsed().as_secs_f64() * 1e3).round() / 1e3,
        "sender_rss_kb": [rss0, rss_tx], "receiver_rss_kb": [rx0, rss_rx],
        "sender_bytes_per_idle_flow": ((rss_tx.saturating_sub(rss0)) * 1024) as f64 / n as f64,
        "receiver_bytes_per_idle_flow": ((rss_rx.saturating_sub(rx0)) * 1024) as f64 / n as f64,
        "sender_turn_ns": turn_tx.round(), "receiver_turn_ns": turn_rx.round(),
    })
}

/// A daemon with N API clients, each with an open idle flow to a child endpoint: the
/// daemon's per-turn cost. DCTCP flows: what is measured is the clients, and 250 new
/// credit-based flows at a time would spend the setup on their initial credit bursts.
fn daemon_case(n: usize) -> serde_json::Value {
    let mut child = Child::start(n);
    let dir = std::env::temp_dir().join(format!("flexpass-scale-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let sock = dir.join(format!("agent-{n}.sock"));
    let mut daemon = Daemon::new(endpoint(false, n), &sock).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = Arc::clone(&stop);
    let runner = std::thread::spawn(move || {
        daemon.run(&stop2).unwrap();
        daemon
    });
    let mut clients = Vec::with_capacity(n);
    let start = Instant::now();
    let req = format!(
        "{{\"op\":\"connect\",\"peer\":\"{}\",\"transport\":\"dctcp\"}}\n",
        child.addr
    );
    for w in 0..n.div_ceil(WAVE) {
        let m = WAVE.min(n - w * WAVE);
        for _ in 0..m {
            let mut c = UnixStream::connect(&sock).unwrap();
            c.write_all(req.as_bytes()).unwrap();
            c.write_all(&[0x33; FIRST_BYTES]).unwrap();
            clients.push(c);
        }
        // Each client's reply line ({"ok":true,"flow_id":N}).
        for c in &mut clients[w * WAVE..] {
            let mut b = [0u8; 64];
            let mut got = Vec::new();
            while !got.contains(&b'\n') {
                let k = c.read(&mut b).unwrap();
                assert!(k > 0, "daemon closed a client");
                got.extend_from_slice(&b[..k]);
            }
            let line = String::from_utf8_lossy(&got);
            assert!(line.contains("\"ok\":true"), "{line}");
        }
        if std::env::var_os("SCALE_DEBUG").is_some() {
            eprintln!("wave {w}: replies at {:?}", start.elapsed());
        }
        while child.status().2 < (w * WAVE + m) * FIRST_BYTES {
            std::thread::sleep(Duration::from_millis(5));
            assert!(
                start.elapsed() < Duration::from_secs(300),
                "daemon setup too slow"
            );
        }
    }
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    let mut daemon = runner.join().unwrap();
    if std::env::var_os("SCALE_DEBUG").is_some() {
        eprintln!(
            "daemon endpoint: timers/dirty {:?} flows {:?} stats {:?}",
            daemon.endpoint().timer_entries(),
            daemon.endpoint().flows(),
            daemon.endpoint().stats
        );
    }
    let turn = median_turn(|| daemon.turn(Duration::ZERO).unwrap());
    drop(clients);
    drop(daemon);
    child.quit();
    let _ = std::fs::remove_dir_all(&dir);
    serde_json::json!({"clients": n, "daemon_turn_ns": turn.round()})
}

fn main() {
    if std::env::var_os("FLEXPASS_SCALE_CHILD").is_some() {
        child();
        return;
    }
    // `cargo bench` passes --bench; `cargo test --benches` would pass nothing else useful.
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    if std::env::var_os("SCALE_DAEMON_ONLY").is_some() {
        let nc = env_usize("SCALE_CLIENTS", 9_000);
        println!("{}", daemon_case(nc));
        return;
    }
    let n = env_usize("SCALE_FLOWS", 10_000);
    let nc = env_usize("SCALE_CLIENTS", 9_000);
    let small = endpoint_case(10);
    let large = endpoint_case(n);
    let dsmall = daemon_case(10);
    let dlarge = daemon_case(nc);
    let ratio = |a: &serde_json::Value, b: &serde_json::Value, k: &str| {
        (a[k].as_f64().unwrap() / b[k].as_f64().unwrap() * 100.0).round() / 100.0
    };
    let out = serde_json::json!({
        "idle_flows": [small, large.clone()],
        "sender_bytes_per_idle_flow": large["sender_bytes_per_idle_flow"],
        "receiver_bytes_per_idle_flow": large["receiver_bytes_per_idle_flow"],
        "turn_cost_ratio_sender": ratio(&large, &small, "sender_turn_ns"),
        "turn_cost_ratio_receiver": ratio(&large, &small, "receiver_turn_ns"),
        "daemon": [dsmall.clone(), dlarge.clone()],
        "turn_cost_ratio_daemon": ratio(&dlarge, &dsmall, "daemon_turn_ns"),
        "note": format!("ratios: median poll(0) / daemon turn time with {n} (daemon: {nc}) idle flows over the same with 10, \
                 one run; bytes per idle flow: RSS growth / flows (sender and receiver in separate processes)"),
    });
    println!("scale bench: {out}");
}
