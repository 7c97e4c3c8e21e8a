//! `flexpass workload` (Poisson arrivals, sizes from the papers' CDFs) and `flexpass incast`
//! (N-to-1 synchronized requests): one JSON line per flow, periodic per-flow / per-sub-flow
//! throughput samples, and a summary (average and p99 FCT by size bucket).

use crate::agent_cmd::{parse_transport, pattern_bytes, stop_flag, Touched};
use crate::net_args::NetArgs;
use flexpass_agent::workload::{next_gap_ns, summarize, FlowSizeCdf, FlowTrace};
use flexpass_agent::{Dir, Endpoint, FlowKey};
use flexpass_wire::TransportKind;
use rand::{Rng, SeedableRng};
use serde_json::json;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::time::{Duration, Instant};

const WINDOW: u64 = 8 << 20;
const CHUNK: u64 = 256 << 10;

#[derive(clap::Args)]
pub struct WorkloadArgs {
    /// Destinations (flexpass serve), comma separated; each flow picks one at random.
    #[arg(long, value_delimiter = ',', required_unless_present = "trace")]
    pub to: Vec<SocketAddr>,
    /// Replay the flows of a trace that leave host --host instead of drawing them (the
    /// model's trace format, `ID START_S SRC DST SIZE` with host indices: what `flexpass
    /// emulate` writes from the flows the model drew): each goes to --hosts[DST] START_S
    /// seconds after the command starts, with SIZE bytes, and its record carries ID as
    /// `trace_id`; --cdf, --load, --count and --seed are not used.
    #[arg(long, requires_all = ["host", "hosts"], conflicts_with = "to")]
    pub trace: Option<std::path::PathBuf>,
    /// This host's index in the trace.
    #[arg(long)]
    pub host: Option<usize>,
    /// Every host's `flexpass serve` address, by index, comma separated.
    #[arg(long, value_delimiter = ',')]
    pub hosts: Vec<SocketAddr>,
    /// Flow-size CDF: search, mining, cachefollower, webserver, facebook, google, alibaba-wan,
    /// flashpass-10-80mb, or a file.
    #[arg(long, default_value = "search")]
    pub cdf: String,
    /// Offered load as a fraction of --link-gbps.
    #[arg(long, default_value_t = 0.5)]
    pub load: f64,
    /// Number of flows.
    #[arg(long, default_value_t = 100)]
    pub count: usize,
    /// flexpass, expresspass, dctcp, ppt, flashpass, pfabric, pase or tcp.
    #[arg(long, default_value = "flexpass")]
    pub transport: String,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Throughput sample period, ms (0: none).
    #[arg(long, default_value_t = 10.0)]
    pub sample_ms: f64,
    #[arg(long, default_value = "0.0.0.0:0")]
    pub bind: SocketAddr,
    /// Idle flows besides the workload (many-flows tests and benchmarks): opened first,
    /// --idle-wave at a time, each sends --idle-bytes and then stays open, sending nothing,
    /// until the workload's flows are done and --hold-s has passed (or SIGINT / SIGTERM);
    /// then each sends --idle-bytes more and finishes. One "idle_open" line once all are
    /// open, one "idle_flow" line per idle flow at the end.
    #[arg(long, default_value_t = 0)]
    pub idle: usize,
    #[arg(long, default_value_t = 1000)]
    pub idle_bytes: u64,
    /// Idle flows opened at once (each wave's first bytes are acknowledged before the next:
    /// a burst of thousands of credit-based flows would make every receiver start
    /// crediting at once, docs/agent-api.md "Scale").
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u64).range(1..))]
    pub idle_wave: u64,
    /// Keep the idle flows open at least this long after they are all open, s.
    #[arg(long, default_value_t = 0.0)]
    pub hold_s: f64,
    #[command(flatten)]
    pub net: NetArgs,
    #[command(flatten)]
    pub config: crate::config::ConfigArg,
}

#[derive(clap::Args)]
pub struct IncastArgs {
    /// Responders (flexpass serve --respond), comma separated.
    #[arg(long, value_delimiter = ',', required = true)]
    pub servers: Vec<SocketAddr>,
    /// Total synchronized requests, spread evenly over the servers.
    #[arg(long, default_value_t = 8)]
    pub flows: usize,
    /// Response size in bytes (FlexPass §6.1: 64 kB).
    #[arg(long, default_value_t = 64_000)]
    pub size: u64,
    /// flexpass, expresspass, dctcp, ppt, flashpass, pfabric, pase or tcp.
    #[arg(long, default_value = "flexpass")]
    pub transport: String,
    /// Local UDP address (responses come back to it).
    #[arg(long, default_value = "0.0.0.0:0")]
    pub bind: SocketAddr,
    #[arg(long, default_value_t = 60.0)]
    pub timeout_s: f64,
    #[command(flatten)]
    pub net: NetArgs,
    #[command(flatten)]
    pub config: crate::config::ConfigArg,
}

fn line(v: serde_json::Value) {
    println!("{v}");
}

/// A flow to start: when (after the start), where, how many bytes, and its trace id.
struct Planned {
    at: Duration,
    dst: SocketAddr,
    size: u64,
    trace_id: Option<u64>,
}

/// Where the flows come from: Poisson arrivals at `--load` with sizes from the CDF to
/// random destinations (`--count` of them), or the flows of a trace leaving this host.
enum Arrivals {
    Poisson {
        cdf: FlowSizeCdf,
        rng: rand::rngs::SmallRng,
        load: f64,
        link_bps: f64,
        to: Vec<SocketAddr>,
        count: usize,
        /// Offset of the next arrival.
        next: Duration,
    },
    Trace(std::collections::VecDeque<Planned>),
}

impl Arrivals {
    fn new(a: &WorkloadArgs) -> Result<Arrivals, String> {
        let Some(path) = &a.trace else {
            return Ok(Arrivals::Poisson {
                cdf: FlowSizeCdf::load(&a.cdf)?,
                rng: rand::rngs::SmallRng::seed_from_u64(a.seed),
                load: a.load,
                link_bps: a.net.link_gbps * 1e9,
                to: a.to.clone(),
                count: a.count,
                next: Duration::ZERO,
            });
        };
        let (host, hosts) = (a.host.expect("clap: --trace requires --host"), &a.hosts);
        if host >= hosts.len() {
            return Err(format!(
                "--host {host}: --hosts lists {} addresses (indices 0..{})",
                hosts.len(),
                hosts.len()
            ));
        }
        let trace = FlowTrace::load(&path.display().to_string())
            .map_err(|e| format!("--trace {}: {e}", path.display()))?;
        let mut flows = std::collections::VecDeque::new();
        for f in trace.flows.iter().filter(|f| f.src == host) {
            let dst = *hosts.get(f.dst).ok_or_else(|| {
                format!(
                    "--trace {}: flow {} goes to host {}, but --hosts lists {} addresses",
                    path.display(),
                    f.id,
                    f.dst,
                    hosts.len()
                )
            })?;
            flows.push_back(Planned {
                at: Duration::from_secs_f64(f.start_s),
                dst,
                size: f.bytes,
                trace_id: Some(f.id),
            });
        }
        Ok(Arrivals::Trace(flows))
    }

    /// Flows still to start.
    fn pending(&self, launched: usize) -> bool {
        match self {
            Arrivals::Poisson { count, .. } => launched < *count,
            Arrivals::Trace(q) => !q.is_empty(),
        }
    }

    /// Offset of the next flow's start (None: no flow left).
    fn next_at(&self, launched: usize) -> Option<Duration> {
        match self {
            Arrivals::Poisson { next, .. } => self.pending(launched).then_some(*next),
            Arrivals::Trace(q) => q.front().map(|p| p.at),
        }
    }

    /// The next flow, if it is due at `elapsed` after the start.
    fn due(&mut self, elapsed: Duration, launched: usize) -> Option<Planned> {
        if self.next_at(launched)? > elapsed {
            return None;
        }
        match self {
            Arrivals::Poisson {
                cdf,
                rng,
                load,
                link_bps,
                to,
                next,
                ..
            } => {
                let size = cdf.sample(rng);
                let dst = to[rng.gen_range(0..to.len())];
                let at = *next;
                *next += Duration::from_nanos(next_gap_ns(rng, *load, *link_bps, cdf.mean()));
                Some(Planned {
                    at,
                    dst,
                    size,
                    trace_id: None,
                })
            }
            Arrivals::Trace(q) => q.pop_front(),
        }
    }
}

struct Active {
    size: u64,
    written: u64,
    start: Instant,
    dst: SocketAddr,
    last: (u64, u64),
    trace_id: Option<u64>,
    /// SHA-256 of the bytes written: the receiver's record must match it.
    hasher: Sha256,
}

/// Write what the window allows of a flow's pattern bytes (finishing it after the last),
/// then report whether the flow is done (complete or failed).
fn top_up(ep: &mut Endpoint, k: FlowKey, f: &mut Active) -> bool {
    let s = ep.sender_mut(k).expect("open");
    while f.written < f.size && s.unacked_bytes() < WINDOW {
        let n = (f.size - f.written).min(CHUNK);
        let chunk = pattern_bytes(f.written, n as usize);
        f.hasher.update(&chunk);
        s.write(chunk);
        f.written += n;
        if f.written == f.size {
            s.finish();
        }
    }
    s.is_complete() || s.error().is_some()
}

/// `--idle`: open `a.idle` flows, each sending `a.idle_bytes` pattern bytes (not finished),
/// `a.idle_wave` at a time; returns them once every one has its bytes acknowledged.
fn open_idle(
    ep: &mut Endpoint,
    a: &WorkloadArgs,
    t: TransportKind,
    timeout: Duration,
) -> Result<Vec<FlowKey>, String> {
    let (to, n, bytes, wave) = (&a.to, a.idle, a.idle_bytes, a.idle_wave as usize);
    let mut keys = Vec::with_capacity(n);
    let started = Instant::now();
    while keys.len() < n {
        let wave: Vec<FlowKey> = (0..wave.min(n - keys.len()))
            .map(|i| {
                let dst = to[(keys.len() + i) % to.len()];
                let k = ep.open(dst, t, 2 * bytes).map_err(|e| e.to_string())?;
                ep.write(k, pattern_bytes(0, bytes as usize));
                Ok(k)
            })
            .collect::<Result<_, String>>()?;
        // Looks at one wave's flows per turn (at most --idle-wave), not at all idle flows.
        let mut waiting = wave.clone();
        while !waiting.is_empty() {
            if started.elapsed() > timeout {
                return Err(format!(
                    "idle flows: {} of {n} open, {} not acknowledged after {} s",
                    keys.len(),
                    waiting.len(),
                    timeout.as_secs()
                ));
            }
            ep.poll(Duration::from_millis(1))
                .map_err(|e| e.to_string())?;
            waiting.retain(|&k| {
                let s = ep.sender(k).expect("open");
                s.error().is_none() && s.unacked_bytes() > 0
            });
        }
        for &k in &wave {
            if let Some(e) = ep.sender(k).and_then(|s| s.error()) {
                return Err(format!("idle flow {} failed while opening: {e}", k.1));
            }
        }
        keys.extend(wave);
    }
    Ok(keys)
}

pub fn workload(a: WorkloadArgs) -> Result<(), String> {
    if !(a.load > 0.0 && a.load <= 1.0) {
        return Err(format!("--load must be in (0, 1], got {}", a.load));
    }
    a.net.validate()?;
    let transport = parse_transport(&a.transport)?;
    let mut arrivals = Arrivals::new(&a)?;
    let t0 = Instant::now();
    let mut launched = 0usize;
    let mut results: Vec<(u64, f64)> = vec![];
    let Some(t) = transport else {
        // Kernel TCP: one thread per flow.
        let (tx, rx) = mpsc::channel();
        while let Some(at) = arrivals.next_at(launched) {
            let now = Instant::now();
            if now < t0 + at {
                std::thread::sleep(t0 + at - now);
            }
            let f = arrivals.due(t0.elapsed(), launched).expect("due");
            let tx = tx.clone();
            std::thread::spawn(move || {
                let start = Instant::now();
                let r = tcp_flow(f.dst, f.size);
                // FCT taken here: the records are collected only after the last arrival.
                let fct = start.elapsed().as_secs_f64() * 1e6;
                let _ = tx.send((f, start, fct, r));
            });
            launched += 1;
        }
        drop(tx);
        for (f, start, fct, r) in rx {
            if r.is_ok() {
                results.push((f.size, fct));
            }
            let (sha, error) = match r {
                Ok(sha) => (Some(sha), None),
                Err(e) => (None, Some(e)),
            };
            line(
                json!({"event": "flow", "transport": "tcp", "dst": f.dst.to_string(), "size": f.size,
                "trace_id": f.trace_id, "start_us": (start - t0).as_secs_f64() * 1e6, "fct_us": fct,
                "sha256": sha, "error": error}),
            );
        }
        line(json!({"event": "summary", "transport": "tcp", "fct": summarize(&results)}));
        return Ok(());
    };
    let peers: &[SocketAddr] = if a.trace.is_some() { &a.hosts } else { &a.to };
    let mut ep = a.net.endpoint_towards(a.bind, false, peers)?;
    let stop = stop_flag()?;
    let idle = open_idle(&mut ep, &a, t, Duration::from_secs(300))?;
    let idle_since = Instant::now();
    if a.idle > 0 {
        line(
            json!({"event": "idle_open", "flows": idle.len(), "t_ms": (idle_since - t0).as_secs_f64() * 1e3}),
        );
    }
    // The workload's arrivals start after the idle flows are open.
    let t0 = Instant::now();
    let mut active: HashMap<FlowKey, Active> = HashMap::new();
    let mut touched = Touched::new(&mut ep);
    let mut to_pump: Vec<FlowKey> = vec![];
    let mut next_sample = t0 + Duration::from_secs_f64(a.sample_ms.max(0.0) / 1e3);
    let hold = Duration::from_secs_f64(a.hold_s.max(0.0));
    let holding = |pending: bool, active: &HashMap<FlowKey, Active>| {
        !stop.load(Ordering::Relaxed)
            && (pending || !active.is_empty() || idle_since.elapsed() < hold)
    };
    while holding(arrivals.pending(launched), &active) {
        let now = Instant::now();
        to_pump.clear();
        while let Some(f) = arrivals.due(now - t0, launched) {
            let key = ep.open(f.dst, t, f.size).map_err(|e| e.to_string())?;
            active.insert(
                key,
                Active {
                    size: f.size,
                    written: 0,
                    start: now,
                    dst: f.dst,
                    last: (0, 0),
                    trace_id: f.trace_id,
                    hasher: Sha256::new(),
                },
            );
            to_pump.push(key);
            launched += 1;
        }
        to_pump.extend(
            touched
                .take(&mut ep)
                .iter()
                .filter(|&&(dir, k)| dir == Dir::Send && active.contains_key(&k))
                .map(|&(_, k)| k),
        );
        for &k in &to_pump {
            let Some(f) = active.get_mut(&k) else {
                continue;
            };
            if !top_up(&mut ep, k, f) {
                continue;
            }
            let f = active.remove(&k).expect("listed");
            let s = ep.close_sender(k).expect("open");
            let fct = f.start.elapsed().as_secs_f64() * 1e6;
            let st = s.stats();
            line(
                json!({"event": "flow", "transport": a.transport, "dst": f.dst.to_string(), "flow_id": k.1, "size": f.size,
                "trace_id": f.trace_id, "sha256": crate::agent_cmd::hex(f.hasher.finalize()),
                "start_us": (f.start - t0).as_secs_f64() * 1e6, "fct_us": fct,
                "retransmissions": st.retransmissions, "timeouts": st.timeouts,
                "credits_received": st.credits_received, "credits_wasted": st.credits_wasted,
                "error": s.error().map(|e| e.to_string())}),
            );
            if s.error().is_none() {
                results.push((f.size, fct));
            }
        }
        if a.sample_ms > 0.0 && now >= next_sample {
            // Every open flow, once per sample period (not per turn).
            let flows: Vec<_> = active
                .iter_mut()
                .map(|(k, f)| {
                    let st = ep.sender(*k).expect("open").stats();
                    let d = (st.bytes_proactive - f.last.0, st.bytes_reactive - f.last.1);
                    f.last = (st.bytes_proactive, st.bytes_reactive);
                    json!({"flow_id": k.1, "proactive_bytes": d.0, "reactive_bytes": d.1})
                })
                .collect();
            line(
                json!({"event": "sample", "t_ms": (now - t0).as_secs_f64() * 1e3, "flows": flows}),
            );
            next_sample += Duration::from_secs_f64(a.sample_ms / 1e3);
        }
        // Wake for the next arrival and the next sample, not only for packets.
        let mut until = now + Duration::from_millis(1);
        if let Some(at) = arrivals.next_at(launched) {
            until = until.min(t0 + at);
        }
        if a.sample_ms > 0.0 {
            until = until.min(next_sample);
        }
        ep.poll(until.saturating_duration_since(Instant::now()))
            .map_err(|e| e.to_string())?;
    }
    let idle_failed = finish_idle(&mut ep, &idle, &a, Duration::from_secs(120))?;
    line(
        json!({"event": "summary", "transport": a.transport, "fct": summarize(&results),
        "flows_done": results.len(), "idle_flows": idle.len(), "idle_failed": idle_failed, "endpoint": ep.stats}),
    );
    if stop.load(Ordering::Relaxed) && arrivals.pending(launched) {
        return Err(format!(
            "interrupted after {launched} flows, before the last"
        ));
    }
    if idle_failed > 0 {
        return Err(format!("{idle_failed} of {} idle flows failed", idle.len()));
    }
    Ok(())
}

/// End of `--idle`: every idle flow sends its second `idle_bytes` and finishes; one
/// "idle_flow" line each once complete (or failed). Returns how many failed.
fn finish_idle(
    ep: &mut Endpoint,
    idle: &[FlowKey],
    a: &WorkloadArgs,
    timeout: Duration,
) -> Result<usize, String> {
    let mut open: std::collections::HashSet<FlowKey> = idle.iter().copied().collect();
    for &k in idle {
        let s = ep.sender_mut(k).expect("open");
        s.write(pattern_bytes(a.idle_bytes, a.idle_bytes as usize));
        s.finish();
    }
    let mut touched = Touched::new(ep);
    let mut failed = 0;
    // The first turn looks at every idle flow (all were just written), later ones at the
    // touched ones only.
    let mut check: Vec<FlowKey> = idle.to_vec();
    let started = Instant::now();
    while !open.is_empty() {
        if started.elapsed() > timeout {
            return Err(format!(
                "{} of {} idle flows not complete after {} s",
                open.len(),
                idle.len(),
                timeout.as_secs()
            ));
        }
        for k in check.drain(..) {
            let Some(s) = ep.sender(k).filter(|_| open.contains(&k)) else {
                continue;
            };
            if !(s.is_complete() || s.error().is_some()) {
                continue;
            }
            let err = s.error().map(|e| e.to_string());
            failed += err.is_some() as usize;
            line(
                json!({"event": "idle_flow", "transport": a.transport, "dst": k.0.to_string(),
                "flow_id": k.1, "size": 2 * a.idle_bytes, "error": err}),
            );
            open.remove(&k);
            ep.close_sender(k);
        }
        ep.poll(Duration::from_millis(1))
            .map_err(|e| e.to_string())?;
        check.extend(
            touched
                .take(ep)
                .iter()
                .filter(|&&(dir, _)| dir == Dir::Send)
                .map(|&(_, k)| k),
        );
    }
    Ok(failed)
}

/// One flow over kernel TCP; the SHA-256 of what it sent (as the agent's flows report).
fn tcp_flow(dst: SocketAddr, size: u64) -> Result<String, String> {
    let mut s = TcpStream::connect(dst).map_err(|e| e.to_string())?;
    crate::agent_cmd::prefer_dctcp(&s);
    let mut hasher = Sha256::new();
    let mut off = 0;
    while off < size {
        let n = (size - off).min(CHUNK) as usize;
        let chunk = pattern_bytes(off, n);
        hasher.update(&chunk);
        s.write_all(&chunk).map_err(|e| e.to_string())?;
        off += n as u64;
    }
    s.shutdown(std::net::Shutdown::Write)
        .map_err(|e| e.to_string())?;
    let _ = s.read(&mut [0u8; 1]);
    Ok(crate::agent_cmd::hex(hasher.finalize()))
}

pub fn incast(a: IncastArgs) -> Result<(), String> {
    if a.servers.is_empty() || a.flows == 0 {
        return Err("need at least one server and one flow".into());
    }
    let transport = parse_transport(&a.transport)?;
    let request = format!("GET {}\n", a.size).into_bytes();
    let t0 = Instant::now();
    let deadline = t0 + Duration::from_secs_f64(a.timeout_s);
    let mut fcts = vec![];
    match transport {
        None => {
            let handles: Vec<_> = (0..a.flows)
                .map(|i| {
                    let dst = a.servers[i % a.servers.len()];
                    let (req, size) = (request.clone(), a.size);
                    std::thread::spawn(move || -> Result<f64, String> {
                        let start = Instant::now();
                        let mut s = TcpStream::connect(dst).map_err(|e| e.to_string())?;
                        s.write_all(&req).map_err(|e| e.to_string())?;
                        let mut got = 0u64;
                        let mut buf = vec![0u8; 65536];
                        while got < size {
                            let n = s.read(&mut buf).map_err(|e| e.to_string())?;
                            if n == 0 {
                                return Err(format!("connection closed after {got} bytes"));
                            }
                            got += n as u64;
                        }
                        Ok(start.elapsed().as_secs_f64() * 1e6)
                    })
                })
                .collect();
            for h in handles {
                let fct = h.join().map_err(|_| "worker panicked".to_string())??;
                line(
                    json!({"event": "response", "transport": "tcp", "size": a.size, "fct_us": fct}),
                );
                fcts.push(fct);
            }
        }
        Some(t) => {
            let mut ep = a.net.endpoint_towards(a.bind, true, &a.servers)?;
            let mut pending = 0usize;
            for i in 0..a.flows {
                let dst = a.servers[i % a.servers.len()];
                let key = ep
                    .open(dst, t, request.len() as u64)
                    .map_err(|e| e.to_string())?;
                ep.write(key, request.clone().into());
                ep.sender_mut(key).expect("open").finish();
                pending += 1;
            }
            let mut reading: HashMap<FlowKey, u64> = HashMap::new();
            let mut touched = Touched::new(&mut ep);
            let mut to_read: Vec<FlowKey> = vec![];
            while pending > 0 {
                if Instant::now() > deadline {
                    return Err(format!(
                        "{pending} of {} responses missing after {} s",
                        a.flows, a.timeout_s
                    ));
                }
                ep.poll(Duration::from_millis(1))
                    .map_err(|e| e.to_string())?;
                to_read.clear();
                while let Some(k) = ep.accept() {
                    reading.insert(k, 0);
                    to_read.push(k);
                }
                to_read.extend(
                    touched
                        .take(&mut ep)
                        .iter()
                        .filter(|&&(dir, _)| dir == Dir::Recv)
                        .map(|&(_, k)| k),
                );
                let mut finished = vec![];
                for &k in &to_read {
                    let Some(got) = reading.get_mut(&k) else {
                        continue;
                    };
                    let r = ep.receiver_mut(k).expect("accepted");
                    while let Some(b) = r.read() {
                        *got += b.len() as u64;
                    }
                    if r.is_finished() {
                        finished.push(k);
                    }
                }
                for k in finished {
                    let Some(got) = reading.remove(&k) else {
                        continue;
                    };
                    let fct = t0.elapsed().as_secs_f64() * 1e6;
                    line(
                        json!({"event": "response", "transport": a.transport, "from": k.0.to_string(), "size": got, "fct_us": fct}),
                    );
                    fcts.push(fct);
                    pending -= 1;
                }
            }
        }
    }
    let max = fcts.iter().cloned().fold(0.0, f64::max);
    line(
        json!({"event": "summary", "transport": a.transport, "flows": a.flows, "size": a.size, "max_fct_us": max,
        "avg_fct_us": fcts.iter().sum::<f64>() / fcts.len() as f64}),
    );
    Ok(())
}
