//! `flexpass serve` / `send` / `cat`: applications on the host agent (real UDP sockets),
//! plus plain kernel TCP as the legacy baseline (`--transport tcp`).

use bytes::Bytes;
use flexpass_agent::{Dir, Endpoint, EndpointConfig, FlowKey};
use flexpass_core::TargetLossRule;
use flexpass_wire::TransportKind;
use serde::Serialize;
use sha2::{Digest, Sha256};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

/// Unacknowledged bytes an application keeps queued in a flow (back-pressure).
const SEND_WINDOW: u64 = 8 << 20;
const CHUNK: usize = 256 << 10;

#[derive(clap::Args, Clone)]
pub struct NetArgs {
    /// Rate of this host's link, Gbit/s (credit rate limit and max credit rate).
    #[arg(long, default_value_t = 10.0)]
    pub link_gbps: f64,
    /// IP MTU of the path, bytes (576..=9000; 9000: jumbo frames), or `auto`: the route's
    /// MTU towards the peers (`send`, `workload`, `incast`), else the bound interface's.
    /// Data segments fill it and credits stand for frames of MTU + 38 bytes
    /// (docs/protocol.md §9); every host of a path must use the same.
    #[arg(long, default_value = "1500")]
    pub mtu: MtuArg,
    /// w_q: share of the link FlexPass credits may claim.
    #[arg(long, default_value_t = 0.5)]
    pub w_q: f64,
    /// Base RTT of the path, µs (floor of the credit feedback update period).
    #[arg(long, default_value_t = 100.0)]
    pub rtt_us: f64,
    /// FlashPass T_wait, µs: a granted data packet leaves T_wait after its emulation packet
    /// (FlashPass §III-B: at least the network's largest RTT, as the agents see it, their
    /// own scheduling delays included; default 2 × --rtt-us, at least 2 ms).
    #[arg(long)]
    pub t_wait_us: Option<f64>,
    /// FlashPass without the Aeolus pre-credit phase (no unscheduled first-RTT data: every
    /// data packet waits for its emulation's grant).
    #[arg(long)]
    pub flashpass_no_unscheduled: bool,
    /// Tail-loss probe for dctcp and ppt flows (RFC 8985 §7, as Linux's TLP): with no ACK
    /// progress for 2·SRTT, one probe packet, so a lost last packet is recovered in a few
    /// RTTs instead of the retransmission timeout.
    #[arg(long)]
    pub tlp: bool,
    /// Busy-wait the last µs before each credit deadline (0: sleep only; costs up to this
    /// much CPU per credit; worth it with a core to spare).
    #[arg(long, default_value_t = flexpass_agent::endpoint::DEFAULT_SPIN as f64 / 1e3)]
    pub spin_us: f64,
    /// Pace each flow's credits in batches of this many, sent as one write (1: one by one,
    /// the papers' pacing). Fewer wake-ups and system calls for a busy host; keep it within
    /// the switches' credit queue (ExpressPass: 8 credits), whose rate limiter spaces them.
    #[arg(long, default_value_t = flexpass_agent::endpoint::DEFAULT_CREDIT_BATCH)]
    pub credit_batch: u32,
    /// Poll mode: while packets arrive closely spaced, check the socket without sleeping
    /// for up to this many µs after the last one (0: always sleep).
    #[arg(long, default_value_t = flexpass_agent::endpoint::DEFAULT_BUSY_POLL as f64 / 1e3)]
    pub busy_poll_us: f64,
    /// Credit feedback: tolerate target_loss_scaling·(1 − rate/max_rate) credit loss, the
    /// rule of the ExpressPass authors' simulator (they use 0.125), instead of the paper's
    /// fixed target_loss = 0.1 (docs/protocol.md §11, "Credit feedback").
    #[arg(long)]
    pub target_loss_scaling: Option<f64>,
    /// Do not use UDP GSO (by default runs of equal-sized datagrams to one peer leave as
    /// one UDP_SEGMENT send where the kernel and device support it).
    #[arg(long)]
    pub no_gso: bool,
    /// Incoming flows at most (lingering ones included; about 2.5 kB each idle, 16 KiB more
    /// while sending credits): beyond, HELLOs get cookies (as with a full half-open table)
    /// and then HELLO_ACK refused.
    #[arg(long, default_value_t = flexpass_agent::endpoint::DEFAULT_MAX_FLOWS)]
    pub max_flows: usize,
    /// Half-open flows (created by a HELLO without a cookie, no data yet) kept at most;
    /// beyond, see --hello-cookies (docs/protocol.md §11, "Half-open flows and cookies").
    #[arg(long, default_value_t = flexpass_agent::endpoint::DEFAULT_MAX_HALF_OPEN)]
    pub max_half_open: usize,
    /// When the half-open table is full, half-open flows older than this are dropped first.
    #[arg(long, default_value_t = flexpass_agent::endpoint::DEFAULT_HALF_OPEN_TIMEOUT / 1_000_000)]
    pub half_open_timeout_ms: u64,
    /// Credits a half-open flow may send per HELLO / CREDIT_REQUEST before its first data.
    #[arg(long, default_value_t = flexpass_agent::endpoint::DEFAULT_HALF_OPEN_CREDITS)]
    pub half_open_credits: u32,
    /// Share of the link's credit rate all half-open flows together may use.
    #[arg(long, default_value_t = flexpass_agent::endpoint::DEFAULT_HALF_OPEN_CREDIT_SHARE)]
    pub half_open_credit_share: f64,
    /// HELLO_ACK retry with a cookie, no state kept: `auto` while the half-open table is
    /// full (SYN-cookie style), `always`, or `off` (evict the oldest half-open flow).
    #[arg(long, default_value = "auto")]
    pub hello_cookies: flexpass_agent::endpoint::CookieMode,
    /// Give-up timeout, seconds: a FlexPass / ExpressPass flow fails when nothing (no credit,
    /// no ACK) has come from its peer for this long; shorter outages of the path are survived
    /// (its recovery timer keeps re-requesting credits, backed off).
    #[arg(long, default_value_t = flexpass_core::DEFAULT_GIVE_UP_TIMEOUT as f64 / 1e9)]
    pub give_up_s: f64,
    /// `auto`: AF_XDP where it can be set up (root, an XDP-capable interface, not loopback,
    /// MTU ≤ 3826), else the kernel UDP socket, logged with the reason; `xdp`: AF_XDP or
    /// fail; `udp`: the kernel UDP socket (docs/datapath.md).
    #[arg(long, default_value = "auto")]
    pub datapath: flexpass_agent::datapath::DatapathMode,
    /// AF_XDP: interface to attach to (default: the one holding the bound address, or for
    /// 0.0.0.0 the one routing to the peer, or the only one up).
    #[arg(long)]
    pub xdp_iface: Option<String>,
    /// AF_XDP: receive queues to bind, `0`, `0,1,…` or `all` (every receive queue, at most
    /// 64; one AF_XDP socket each). FlexPass datagrams on other queues reach the kernel UDP
    /// socket; on a multi-queue NIC bind `all`, or steer the port to one queue (ethtool -N).
    #[arg(long, default_value = "0")]
    pub xdp_queue: flexpass_agent::xdp::XdpQueues,
}

/// `--mtu`: a number of bytes or `auto`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MtuArg {
    Auto,
    Bytes(usize),
}

impl std::str::FromStr for MtuArg {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s == "auto" {
            return Ok(MtuArg::Auto);
        }
        let m: usize = s
            .parse()
            .map_err(|_| format!("--mtu takes bytes or auto, got {s:?}"))?;
        if !flexpass_wire::mtu_supported(m) {
            return Err(format!(
                "--mtu must be in {}..={} bytes, got {m}",
                flexpass_wire::MIN_MTU,
                flexpass_wire::MAX_MTU
            ));
        }
        Ok(MtuArg::Bytes(m))
    }
}

impl NetArgs {
    pub fn validate(&self) -> Result<(), String> {
        if !(self.link_gbps.is_finite() && self.link_gbps > 0.0) {
            return Err(format!("--link-gbps must be > 0, got {}", self.link_gbps));
        }
        if !(self.w_q > 0.0 && self.w_q < 1.0) {
            return Err(format!("--w-q must be in (0, 1), got {}", self.w_q));
        }
        if !(self.rtt_us.is_finite() && self.rtt_us >= 0.001) {
            return Err(format!(
                "--rtt-us must be at least 0.001, got {}",
                self.rtt_us
            ));
        }
        if let Some(t) = self.t_wait_us {
            if !(1.0..=1e6).contains(&t) {
                return Err(format!("--t-wait-us must be in 1..=1000000, got {t}"));
            }
        }
        if let Some(s) = self.target_loss_scaling {
            TargetLossRule::from_scaling(Some(s))
                .map_err(|_| format!("--target-loss-scaling must be in [0, 1), got {s}"))?;
        }
        let batches = 1..=flexpass_core::config::MAX_CREDIT_BATCH;
        if !batches.contains(&self.credit_batch) {
            return Err(format!(
                "--credit-batch must be in {}..={} credits, got {}",
                batches.start(),
                batches.end(),
                self.credit_batch
            ));
        }
        if self.spin_us.is_nan() {
            return Err("--spin-us must be a number".into());
        }
        if self.busy_poll_us.is_nan() {
            return Err("--busy-poll-us must be a number".into());
        }
        if !(self.give_up_s.is_finite() && self.give_up_s >= 0.001) {
            return Err(format!(
                "--give-up-s must be at least 0.001, got {}",
                self.give_up_s
            ));
        }
        Ok(())
    }

    pub fn endpoint(&self, bind: SocketAddr, accept: bool) -> Result<Endpoint, String> {
        self.endpoint_towards(bind, accept, &[])
    }

    /// The endpoint, with `--mtu auto` resolved towards `peers` (logged).
    pub fn endpoint_towards(
        &self,
        bind: SocketAddr,
        accept: bool,
        peers: &[SocketAddr],
    ) -> Result<Endpoint, String> {
        self.validate()?;
        let mut c = EndpointConfig::new(bind);
        c.accept = accept;
        c.link_bps = self.link_gbps * 1e9;
        c.mtu = match self.mtu {
            MtuArg::Bytes(m) => m,
            MtuArg::Auto => {
                let (m, how) = flexpass_agent::mtu::detect(bind, peers);
                log::info!("flexpass: MTU {m} ({how})");
                m
            }
        };
        c.w_q = self.w_q;
        c.base_rtt = (self.rtt_us * 1e3) as u64;
        c.t_wait = (self.t_wait_us.unwrap_or((2.0 * self.rtt_us).max(2000.0)) * 1e3) as u64;
        c.flashpass_unscheduled = !self.flashpass_no_unscheduled;
        c.tlp = self.tlp;
        c.target_loss_rule = TargetLossRule::from_scaling(self.target_loss_scaling)?;
        c.spin = (self.spin_us.max(0.0) * 1e3) as u64;
        c.gso = !self.no_gso;
        c.credit_batch = self.credit_batch;
        c.busy_poll = (self.busy_poll_us.max(0.0) * 1e3) as u64;
        c.max_flows = self.max_flows;
        c.max_half_open = self.max_half_open;
        c.half_open_timeout = self.half_open_timeout_ms.saturating_mul(1_000_000);
        c.half_open_credits = self.half_open_credits;
        c.half_open_credit_share = self.half_open_credit_share;
        c.hello_cookies = self.hello_cookies;
        c.give_up_timeout = (self.give_up_s * 1e9) as u64;
        c.datapath = self.datapath;
        c.xdp_iface = self.xdp_iface.clone();
        c.xdp_queue = self.xdp_queue.clone();
        c.route_hint = peers.iter().find_map(|p| match p {
            SocketAddr::V4(a) => Some(*a.ip()),
            SocketAddr::V6(_) => None,
        });
        Endpoint::bind(c).map_err(|e| format!("cannot open UDP {bind}: {e}"))
    }
}

#[derive(clap::Args)]
pub struct ServeArgs {
    /// UDP address to serve FlexPass / ExpressPass / DCTCP flows on.
    #[arg(long, default_value = "0.0.0.0:7890")]
    pub listen: SocketAddr,
    /// Also accept kernel TCP connections on this address (legacy baseline).
    #[arg(long)]
    pub tcp: Option<SocketAddr>,
    /// Write received bytes to stdout (for `flexpass cat`); records then go to stderr.
    #[arg(long)]
    pub stdout: bool,
    /// Exit after this many flows completed.
    #[arg(long)]
    pub count: Option<u64>,
    /// Answer request flows "GET <bytes>\n" with a response flow of that size (incast).
    #[arg(long)]
    pub respond: bool,
    /// Every this many ms, print one "sample" line with each open flow's bytes received
    /// since the last sample, per sub-flow (proactive / reactive); 0: none.
    #[arg(long, default_value_t = 0.0)]
    pub sample_ms: f64,
    /// Every this many ms, print one "agent_stats" line: event-loop turns so far, open
    /// flows and the endpoint's counters (for benchmarks; 0: none).
    #[arg(long, default_value_t = 0.0)]
    pub stats_ms: f64,
    #[command(flatten)]
    pub net: NetArgs,
    #[command(flatten)]
    pub config: crate::config::ConfigArg,
}

#[derive(clap::Args)]
pub struct SendArgs {
    /// Peer's UDP (or, with --transport tcp, TCP) address.
    #[arg(long)]
    pub to: SocketAddr,
    /// flexpass, expresspass, dctcp, ppt, flashpass or tcp (kernel TCP).
    #[arg(long, default_value = "flexpass")]
    pub transport: String,
    /// Send this many generated bytes (default: stdin, or --file).
    #[arg(long)]
    pub size: Option<u64>,
    /// Send this file.
    #[arg(long, conflicts_with = "size")]
    pub file: Option<PathBuf>,
    /// Message mode: send the --size bytes (or the --file) this many times, one flow per
    /// message, back to back on one endpoint, one record per message.
    #[arg(long, default_value_t = 1)]
    pub messages: u64,
    /// Local UDP address.
    #[arg(long, default_value = "0.0.0.0:0")]
    pub bind: SocketAddr,
    /// Give up if the flow has not completed after this many seconds.
    #[arg(long, default_value_t = 600.0)]
    pub timeout_s: f64,
    #[command(flatten)]
    pub net: NetArgs,
    #[command(flatten)]
    pub config: crate::config::ConfigArg,
}

/// Kernel TCP baseline: use DCTCP where the kernel has it (FlexPass §6.1 compares against
/// kernel DCTCP), otherwise keep the kernel's default; returns the algorithm in use.
pub fn prefer_dctcp(s: &TcpStream) -> String {
    use nix::sys::socket::{getsockopt, setsockopt, sockopt::TcpCongestion};
    let _ = setsockopt(s, TcpCongestion, &std::ffi::OsString::from("dctcp"));
    getsockopt(s, TcpCongestion)
        .map(|c| c.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "unknown".into())
}

/// One record per flow (JSON lines).
#[derive(Serialize)]
pub struct FlowRecord {
    pub event: &'static str,
    pub transport: String,
    pub peer: String,
    pub flow_id: u32,
    pub bytes: u64,
    pub sha256: String,
    pub fct_us: f64,
    pub packets_proactive: u64,
    pub packets_reactive: u64,
    pub retransmissions: u64,
    pub timeouts: u64,
    pub credits_received: u64,
    pub credits_wasted: u64,
    /// HELLOs sent again: timeouts, and answers HELLO_ACK retry (a cookie: the receiver was
    /// under a flood of HELLOs; docs/protocol.md §11).
    pub hello_retransmissions: u64,
    pub cookie_retries: u64,
    /// FlashPass senders: the emulation's counters (emulation packets sent, lost and
    /// over-provisioned, grants received, late and wasted; Algorithm 1's updates).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub emulation: Option<flexpass_core::flashpass::EmulationStats>,
    pub error: Option<String>,
}

/// A transport of the agent, or None for kernel TCP (`tcp`).
pub fn parse_transport(s: &str) -> Result<Option<TransportKind>, String> {
    if s == "tcp" {
        return Ok(None);
    }
    TransportKind::from_name(s).map(Some).ok_or_else(|| {
        format!("unknown transport '{s}' (flexpass, expresspass, dctcp, ppt, flashpass, tcp)")
    })
}

/// The flows a packet, a timer or a close touched since the last `take`, each once
/// (docs/agent-api.md, "Scale"). The CLI's loops (`serve`, `workload`, `incast`) service
/// these and the flows they just opened or accepted, never every flow each turn: data to
/// read, room in the send window, completion and failure all come with a packet or a timer.
pub struct Touched {
    buf: Vec<(Dir, FlowKey)>,
}

impl Touched {
    pub fn new(ep: &mut Endpoint) -> Self {
        ep.track_changes(true);
        Touched { buf: Vec::new() }
    }

    /// Sorted, without duplicates (a flow touched in several turns is listed once).
    pub fn take(&mut self, ep: &mut Endpoint) -> &[(Dir, FlowKey)] {
        ep.take_changed(&mut self.buf);
        self.buf.sort_unstable();
        self.buf.dedup();
        &self.buf
    }
}

pub(crate) fn stop_flag() -> Result<Arc<AtomicBool>, String> {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, Arc::clone(&stop))
            .map_err(|e| format!("cannot install signal handler: {e}"))?;
    }
    Ok(stop)
}

fn emit(rec: &FlowRecord, to_stderr: bool) {
    let line = serde_json::to_string(rec).expect("record serialises");
    if to_stderr {
        eprintln!("{line}");
    } else {
        println!("{line}");
    }
}

fn hex(d: impl AsRef<[u8]>) -> String {
    d.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// Bytes from a generated pattern, a file or stdin, produced by a reader thread so the
/// event loop never blocks on input. The pattern's chunks are slices of one table (no copy).
fn source(args: &SendArgs) -> Result<mpsc::Receiver<Bytes>, String> {
    let (tx, rx) = mpsc::sync_channel::<Bytes>(32);
    let mut input: Box<dyn Read + Send> = match (&args.size, &args.file) {
        (Some(n), _) => {
            let n = *n;
            std::thread::spawn(move || {
                let mut pos = 0;
                while pos < n {
                    let chunk = pattern_slice(pos, (n - pos).min(CHUNK as u64) as usize);
                    pos += chunk.len() as u64;
                    if tx.send(chunk).is_err() {
                        return;
                    }
                }
            });
            return Ok(rx);
        }
        (None, Some(p)) => Box::new(
            std::fs::File::open(p).map_err(|e| format!("cannot read {}: {e}", p.display()))?,
        ),
        (None, None) => Box::new(std::io::stdin()),
    };
    std::thread::spawn(move || loop {
        let mut buf = vec![0u8; CHUNK];
        match input.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                buf.truncate(n);
                if tx.send(Bytes::from(buf)).is_err() {
                    return;
                }
            }
        }
    });
    Ok(rx)
}

/// The deterministic test payload: byte i is (i·2654435761 >> 13) as u8. Only bits 13..20
/// of the product count, so it repeats every 2^21 bytes: one table, sliced.
const PATTERN_PERIOD: usize = 1 << 21;

fn pattern_table() -> &'static Bytes {
    static TABLE: std::sync::OnceLock<Bytes> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        (0..PATTERN_PERIOD as u64)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect::<Vec<u8>>()
            .into()
    })
}

/// The pattern from `offset`: `len` bytes, or fewer where the table's period ends.
fn pattern_slice(offset: u64, len: usize) -> Bytes {
    let at = (offset % PATTERN_PERIOD as u64) as usize;
    pattern_table().slice(at..(at + len).min(PATTERN_PERIOD))
}

pub fn send(args: SendArgs) -> Result<(), String> {
    let transport = parse_transport(&args.transport)?;
    if args.messages == 0 || (args.messages > 1 && args.size.is_none() && args.file.is_none()) {
        return Err("--messages needs a count ≥ 1, and --size or --file when above 1 (stdin can be read once)".into());
    }
    let input = source(&args)?;
    let stop = stop_flag()?;
    let started = Instant::now();
    let Some(t) = transport else {
        if args.messages > 1 {
            return Err(
                "--messages is for flexpass, expresspass, dctcp, ppt and flashpass flows".into(),
            );
        }
        let mut hasher = Sha256::new();
        // Kernel TCP baseline.
        let mut s = TcpStream::connect(args.to)
            .map_err(|e| format!("cannot connect to {}: {e}", args.to))?;
        let mut total = 0u64;
        for chunk in input {
            hasher.update(&chunk);
            total += chunk.len() as u64;
            s.write_all(&chunk)
                .map_err(|e| format!("TCP send failed: {e}"))?;
        }
        s.shutdown(std::net::Shutdown::Write)
            .map_err(|e| e.to_string())?;
        let mut ack = [0u8; 1];
        let _ = s.read(&mut ack); // the server closes after reading everything
        emit(
            &record(
                "flow_sent",
                "tcp",
                args.to,
                0,
                total,
                hasher,
                started,
                None,
                None,
            ),
            false,
        );
        return Ok(());
    };
    let mut ep = args.net.endpoint_towards(args.bind, false, &[args.to])?;
    let mut input = Some(input);
    for message in 0..args.messages {
        let input = match input.take() {
            Some(i) => i,
            None => source(&args)?,
        };
        let started = if message == 0 {
            started
        } else {
            Instant::now()
        };
        let deadline = started + Duration::from_secs_f64(args.timeout_s);
        send_flow(&mut ep, &args, t, input, &stop, started, deadline)?;
    }
    // Let the final CREDIT_STOP leave.
    ep.poll(Duration::ZERO).map_err(|e| e.to_string())?;
    eprintln!(
        "flexpass send: {}",
        serde_json::to_string(&ep.stats).expect("stats serialise")
    );
    Ok(())
}

/// One flow (one message) on an open endpoint: bytes from `input` until it closes.
fn send_flow(
    ep: &mut Endpoint,
    args: &SendArgs,
    t: TransportKind,
    input: mpsc::Receiver<Bytes>,
    stop: &AtomicBool,
    started: Instant,
    deadline: Instant,
) -> Result<(), String> {
    let mut hasher = Sha256::new();
    let key = ep
        .open(args.to, t, args.size.unwrap_or(0))
        .map_err(|e| e.to_string())?;
    let mut total = 0u64;
    let mut eof = false;
    // The flow's one record, whichever way it ends.
    let report = |event, s: &flexpass_core::Sender, error, hasher, total| {
        let rec = record(
            event,
            &args.transport,
            args.to,
            key.1,
            total,
            hasher,
            started,
            Some(s),
            error,
        );
        emit(&rec, false);
    };
    loop {
        if stop.load(Ordering::Relaxed) {
            let s = ep.sender(key).expect("open");
            report(
                "flow_interrupted",
                s,
                Some("interrupted".into()),
                hasher,
                total,
            );
            return Err(format!(
                "interrupted with {} bytes unacknowledged",
                s.unacked_bytes()
            ));
        }
        if Instant::now() > deadline {
            return Err(format!("flow not complete after {} s", args.timeout_s));
        }
        let sender = ep.sender_mut(key).expect("open");
        while !eof && sender.unacked_bytes() < SEND_WINDOW {
            match input.try_recv() {
                Ok(chunk) => {
                    hasher.update(&chunk);
                    total += chunk.len() as u64;
                    sender.write(chunk);
                }
                Err(mpsc::TryRecvError::Empty) => break,
                Err(mpsc::TryRecvError::Disconnected) => {
                    eof = true;
                    sender.finish();
                }
            }
        }
        if let Some(e) = sender.error() {
            report("flow_failed", sender, Some(e.to_string()), hasher, total);
            return Err(format!("flow to {} failed: {e}", args.to));
        }
        if sender.is_complete() {
            report("flow_sent", sender, None, hasher, total);
            ep.close_sender(key);
            return Ok(());
        }
        // Packets in flight wake the loop; input from the reader thread does not, so poll
        // briefly while the application's next bytes are due.
        let waiting_for_input = !eof && ep.sender(key).expect("open").unacked_bytes() < SEND_WINDOW;
        let wait = if waiting_for_input {
            Duration::from_micros(20)
        } else {
            Duration::from_millis(5)
        };
        ep.poll(wait).map_err(|e| e.to_string())?;
    }
}

#[allow(clippy::too_many_arguments)]
fn record(
    event: &'static str,
    transport: &str,
    peer: SocketAddr,
    flow_id: u32,
    bytes: u64,
    hasher: Sha256,
    started: Instant,
    s: Option<&flexpass_core::Sender>,
    error: Option<String>,
) -> FlowRecord {
    let st = s.map(|s| s.stats().clone()).unwrap_or_default();
    FlowRecord {
        event,
        transport: transport.into(),
        peer: peer.to_string(),
        flow_id,
        bytes,
        sha256: hex(hasher.finalize()),
        fct_us: started.elapsed().as_secs_f64() * 1e6,
        packets_proactive: st.packets_proactive,
        packets_reactive: st.packets_reactive,
        retransmissions: st.retransmissions,
        timeouts: st.timeouts,
        credits_received: st.credits_received,
        credits_wasted: st.credits_wasted,
        hello_retransmissions: st.hello_retransmissions,
        cookie_retries: st.cookie_retries,
        emulation: s
            .filter(|s| s.transport() == TransportKind::FlashPass)
            .map(|_| st.emulation.clone()),
        error,
    }
}

struct Incoming {
    hasher: Sha256,
    bytes: u64,
    started: Instant,
    /// First bytes, to recognise a request.
    head: Vec<u8>,
    /// Receiver (proactive, reactive) payload bytes at the last sample.
    sampled: (u64, u64),
}

/// Largest response a request may ask for.
const MAX_RESPONSE: u64 = 1 << 34;

/// "GET <bytes>\n" → bytes.
/// Bytes `serve` reads (and hashes) from one flow per loop turn: the loop sends credits
/// between turns, so this bounds their pacing error (16 KiB: about 8 µs of SHA-256).
const READ_PER_TURN: usize = 16 << 10;

pub fn parse_request(head: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(head).ok()?;
    let n: u64 = text.strip_prefix("GET ")?.trim_end().parse().ok()?;
    (n <= MAX_RESPONSE).then_some(n)
}

pub fn pattern_bytes(offset: u64, len: usize) -> Bytes {
    let first = pattern_slice(offset, len);
    if first.len() == len {
        return first;
    }
    let mut v = Vec::with_capacity(len);
    while v.len() < len {
        v.extend_from_slice(&pattern_slice(offset + v.len() as u64, len - v.len()));
    }
    Bytes::from(v)
}

/// A response flow being sent: bytes still to write.
struct Outgoing {
    left: u64,
    offset: u64,
    started: Instant,
    transport: String,
}

pub fn serve(args: ServeArgs) -> Result<(), String> {
    let stop = stop_flag()?;
    let mut ep = args.net.endpoint(args.listen, true)?;
    let (tcp_tx, tcp_rx) = mpsc::channel::<FlowRecord>();
    if let Some(addr) = args.tcp {
        let l = TcpListener::bind(addr).map_err(|e| format!("cannot listen on TCP {addr}: {e}"))?;
        std::thread::spawn(move || {
            for conn in l.incoming().flatten() {
                let tx = tcp_tx.clone();
                std::thread::spawn(move || {
                    let peer = conn.peer_addr().map(|a| a.to_string()).unwrap_or_default();
                    let rec = tcp_receive(conn, peer);
                    let _ = tx.send(rec);
                });
            }
        });
    }
    let local = ep.local_addr().map_err(|e| e.to_string())?;
    log::info!(
        "flexpass serve: listening on udp {local}{}",
        args.tcp.map_or(String::new(), |t| format!(", tcp {t}"))
    );
    let mut flows: std::collections::HashMap<FlowKey, Incoming> = Default::default();
    let mut responses: std::collections::HashMap<FlowKey, Outgoing> = Default::default();
    let mut done = 0u64;
    let mut out = std::io::stdout().lock();
    let t0 = Instant::now();
    let sample_every =
        (args.sample_ms > 0.0).then(|| Duration::from_secs_f64(args.sample_ms / 1e3));
    let mut next_sample = sample_every.map(|d| t0 + d);
    let stats_every = (args.stats_ms > 0.0).then(|| Duration::from_secs_f64(args.stats_ms / 1e3));
    let mut next_stats = stats_every.map(|d| t0 + d);
    let mut turns = 0u64;
    let mut touched = Touched::new(&mut ep);
    let mut to_read: Vec<FlowKey> = vec![];
    let mut to_pump: Vec<FlowKey> = vec![];
    // Flows with bytes left unread by the last turn (READ_PER_TURN).
    let mut unread: Vec<FlowKey> = vec![];
    while !stop.load(Ordering::Relaxed) && args.count.is_none_or(|c| done < c) {
        let wait = if unread.is_empty() {
            Duration::from_millis(2)
        } else {
            Duration::ZERO
        };
        ep.poll(wait).map_err(|e| e.to_string())?;
        turns += 1;
        to_read.clear();
        // Flows carried over first; a touched one among them is not read twice in a turn.
        to_read.append(&mut unread);
        let carried = to_read.len();
        to_pump.clear();
        while let Some(k) = ep.accept() {
            flows.insert(
                k,
                Incoming {
                    hasher: Sha256::new(),
                    bytes: 0,
                    started: Instant::now(),
                    head: vec![],
                    sampled: (0, 0),
                },
            );
            to_read.push(k);
        }
        for &(dir, k) in touched.take(&mut ep) {
            match dir {
                Dir::Recv if flows.contains_key(&k) && !to_read[..carried].contains(&k) => {
                    to_read.push(k)
                }
                Dir::Send if responses.contains_key(&k) => to_pump.push(k),
                _ => {}
            }
        }
        let mut finished = vec![];
        for &k in &to_read {
            let Some(inc) = flows.get_mut(&k) else {
                continue;
            };
            let r = ep
                .receiver_mut(k)
                .expect("accepted flows stay until finished");
            let mut budget = READ_PER_TURN;
            while let Some(b) = r.read() {
                budget = budget.saturating_sub(b.len());
                inc.hasher.update(&b);
                inc.bytes += b.len() as u64;
                if inc.head.len() < 32 {
                    inc.head
                        .extend_from_slice(&b[..b.len().min(32 - inc.head.len())]);
                }
                if args.stdout {
                    out.write_all(&b).map_err(|e| format!("stdout: {e}"))?;
                }
                if budget == 0 {
                    break;
                }
            }
            if r.is_finished() {
                finished.push(k);
            } else if budget == 0 && !unread.contains(&k) {
                unread.push(k);
            }
        }
        for k in finished {
            let Some(inc) = flows.remove(&k) else {
                continue;
            };
            let r = ep.receiver(k).expect("present");
            let st = r.stats();
            let rec = FlowRecord {
                event: "flow_received",
                transport: r.transport().name().to_string(),
                peer: k.0.to_string(),
                flow_id: k.1,
                bytes: inc.bytes,
                sha256: hex(inc.hasher.finalize()),
                fct_us: inc.started.elapsed().as_secs_f64() * 1e6,
                packets_proactive: st.packets_proactive,
                packets_reactive: st.packets_reactive,
                retransmissions: st.duplicates,
                timeouts: 0,
                credits_received: 0,
                credits_wasted: 0,
                hello_retransmissions: 0,
                cookie_retries: 0,
                emulation: None,
                error: None,
            };
            let transport = r.transport();
            ep.retire_receiver(k);
            emit(&rec, args.stdout);
            if args.stdout {
                out.flush().map_err(|e| e.to_string())?;
            }
            done += 1;
            if let (true, Some(n)) = (args.respond, parse_request(&inc.head)) {
                let key = ep.open(k.0, transport, n).map_err(|e| e.to_string())?;
                responses.insert(
                    key,
                    Outgoing {
                        left: n,
                        offset: 0,
                        started: Instant::now(),
                        transport: rec.transport.clone(),
                    },
                );
                to_pump.push(key);
            }
        }
        if let (Some(every), Some(due)) = (sample_every, next_sample) {
            if Instant::now() >= due {
                sample_flows(&ep, &mut flows, t0, args.stdout);
                next_sample = Some(due + every);
            }
        }
        if let (Some(every), Some(due)) = (stats_every, next_stats) {
            if Instant::now() >= due {
                let line = serde_json::json!({
                    "event": "agent_stats", "t_ms": t0.elapsed().as_secs_f64() * 1e3,
                    "turns": turns, "flows_open": flows.len(), "responses_open": responses.len(),
                    "tables": ep.table_sizes(), "endpoint": ep.stats,
                });
                if args.stdout {
                    eprintln!("{line}");
                } else {
                    println!("{line}");
                }
                next_stats = Some(due + every);
            }
        }
        for &k in &to_pump {
            pump_response(&mut ep, &mut responses, k, args.stdout);
        }
        while let Ok(rec) = tcp_rx.try_recv() {
            emit(&rec, args.stdout);
            done += 1;
        }
    }
    for (k, inc) in flows {
        log::warn!(
            "flexpass serve: flow {} from {} incomplete at shutdown ({} bytes received)",
            k.1,
            k.0,
            inc.bytes
        );
    }
    ep.pacing_error();
    eprintln!(
        "flexpass serve: {}",
        serde_json::to_string(&ep.stats).expect("stats serialise")
    );
    Ok(())
}

/// One "sample" line: payload bytes each open flow received per sub-flow since the last one.
fn sample_flows(
    ep: &Endpoint,
    flows: &mut std::collections::HashMap<FlowKey, Incoming>,
    t0: Instant,
    to_stderr: bool,
) {
    let mut keys: Vec<_> = flows.keys().copied().collect();
    keys.sort();
    let rows: Vec<_> = keys
        .into_iter()
        .filter_map(|k| {
            let r = ep.receiver(k)?;
            let st = r.stats();
            let inc = flows.get_mut(&k)?;
            let row = serde_json::json!({
                "peer": k.0.to_string(), "flow_id": k.1,
                "transport": r.transport().name().to_string(),
                "proactive_bytes": st.bytes_proactive - inc.sampled.0,
                "reactive_bytes": st.bytes_reactive - inc.sampled.1,
            });
            inc.sampled = (st.bytes_proactive, st.bytes_reactive);
            Some(row)
        })
        .collect();
    let line = serde_json::json!({"event": "sample", "t_ms": t0.elapsed().as_secs_f64() * 1e3, "flows": rows});
    if to_stderr {
        eprintln!("{line}");
    } else {
        println!("{line}");
    }
}

/// Feed a response flow from the pattern; report and close it once finished.
fn pump_response(
    ep: &mut Endpoint,
    responses: &mut std::collections::HashMap<FlowKey, Outgoing>,
    k: FlowKey,
    to_stderr: bool,
) {
    let (Some(o), Some(s)) = (responses.get_mut(&k), ep.sender_mut(k)) else {
        return;
    };
    while o.left > 0 && s.unacked_bytes() < SEND_WINDOW {
        let n = o.left.min(CHUNK as u64) as usize;
        s.write(pattern_bytes(o.offset, n));
        o.offset += n as u64;
        o.left -= n as u64;
        if o.left == 0 {
            s.finish();
        }
    }
    if !(s.is_complete() || s.error().is_some()) {
        return;
    }
    let o = responses.remove(&k).expect("present");
    let s = ep.close_sender(k).expect("open");
    let mut h = Sha256::new();
    h.update(b"");
    let mut rec = record(
        "response_sent",
        &o.transport,
        k.0,
        k.1,
        o.offset,
        h,
        o.started,
        Some(&s),
        s.error().map(|e| e.to_string()),
    );
    rec.sha256.clear();
    emit(&rec, to_stderr);
}

fn tcp_receive(mut conn: TcpStream, peer: String) -> FlowRecord {
    prefer_dctcp(&conn); // responses (incast) are sent on this connection
    let started = Instant::now();
    let mut hasher = Sha256::new();
    let mut bytes = 0u64;
    let mut buf = vec![0u8; CHUNK];
    let mut error = None;
    let mut head = vec![];
    loop {
        match conn.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                hasher.update(&buf[..n]);
                bytes += n as u64;
                if head.len() < 32 {
                    head.extend_from_slice(&buf[..n.min(32 - head.len())]);
                }
                // Incast over kernel TCP: a request is answered on the same connection.
                if let Some(want) = head
                    .ends_with(b"\n")
                    .then(|| parse_request(&head))
                    .flatten()
                {
                    let mut off = 0u64;
                    while off < want {
                        let n = (want - off).min(CHUNK as u64) as usize;
                        if let Err(e) = conn.write_all(&pattern_bytes(off, n)) {
                            error = Some(e.to_string());
                            break;
                        }
                        off += n as u64;
                    }
                    break;
                }
            }
            Err(e) => {
                error = Some(e.to_string());
                break;
            }
        }
    }
    FlowRecord {
        event: "flow_received",
        transport: "tcp".into(),
        peer,
        flow_id: 0,
        bytes,
        sha256: hex(hasher.finalize()),
        fct_us: started.elapsed().as_secs_f64() * 1e6,
        packets_proactive: 0,
        packets_reactive: 0,
        retransmissions: 0,
        timeouts: 0,
        credits_received: 0,
        credits_wasted: 0,
        hello_retransmissions: 0,
        cookie_retries: 0,
        emulation: None,
        error,
    }
}

#[derive(clap::Args)]
pub struct AgentArgs {
    /// UDP address of this host's agent.
    #[arg(long, default_value = "0.0.0.0:7890")]
    pub listen: SocketAddr,
    /// Unix socket of the local API (docs/agent-api.md).
    #[arg(long, default_value = "/run/flexpass/agent.sock")]
    pub socket: PathBuf,
    /// UDP port of the peers' agents, for TCP connections of applications run with
    /// `flexpass run` [default: the port of --listen].
    #[arg(long)]
    pub peer_port: Option<u16>,
    /// A peer that leaves a connection's HELLO unanswered this long does not speak
    /// FlexPass: the application connects to it with kernel TCP (cached per peer for 60 s).
    #[arg(long, default_value_t = 300)]
    pub conn_fallback_ms: u64,
    /// Also let this user (uid) use the API socket (repeatable; the socket file is then
    /// mode 0666 and the peer-credential check is the gate). Root and the agent's own user
    /// always may.
    #[arg(long, value_name = "UID")]
    pub allow_uid: Vec<u32>,
    /// Also let members of this group (gid; primary or supplementary) use the API socket
    /// (repeatable; the socket file is then mode 0660, group the first one).
    #[arg(long, value_name = "GID")]
    pub allow_gid: Vec<u32>,
    #[command(flatten)]
    pub net: NetArgs,
    #[command(flatten)]
    pub config: crate::config::ConfigArg,
}

/// The long-running agent: every flow of this host's applications, through the local API.
pub fn agent(args: AgentArgs) -> Result<(), String> {
    let stop = stop_flag()?;
    let ep = args.net.endpoint(args.listen, true)?;
    if let Some(dir) = args.socket.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    let mut daemon = flexpass_agent::daemon::Daemon::new(ep, &args.socket)
        .map_err(|e| format!("cannot serve the API on {}: {e}", args.socket.display()))?;
    if let Some(p) = args.peer_port {
        daemon.set_peer_port(p);
    }
    daemon.set_conn_fallback(Duration::from_millis(args.conn_fallback_ms));
    daemon
        .set_access(flexpass_agent::daemon::ApiAccess {
            allow_uids: args.allow_uid.clone(),
            allow_gids: args.allow_gid.clone(),
        })
        .map_err(|e| format!("cannot set the access of {}: {e}", args.socket.display()))?;
    log::info!(
        "flexpass agent: udp {} api {}",
        daemon.endpoint().local_addr().map_err(|e| e.to_string())?,
        args.socket.display()
    );
    daemon.run(&stop).map_err(|e| e.to_string())?;
    let _ = std::fs::remove_file(&args.socket);
    eprintln!(
        "flexpass agent: {}",
        serde_json::to_string(&daemon.endpoint().stats).expect("stats serialise")
    );
    Ok(())
}

#[derive(clap::Args)]
pub struct RunArgs {
    /// Which TCP connections use FlexPass: `ports=5201,8000-8010;nets=10.0.0.0/8` (ports:
    /// destination ports of clients and listening ports of servers; nets: client
    /// destinations; `*` = all; `off`) [default: every port, every non-loopback IPv4
    /// destination].
    #[arg(long)]
    pub policy: Option<String>,
    /// The local agent's API socket.
    #[arg(long, default_value = "/run/flexpass/agent.sock")]
    pub agent_socket: PathBuf,
    /// flexpass, expresspass or dctcp.
    #[arg(long, default_value = "flexpass")]
    pub transport: String,
    /// libflexpass.so to preload [default: $FLEXPASS_PRELOAD, else next to this binary].
    #[arg(long)]
    pub preload: Option<PathBuf>,
    /// The program and its arguments.
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "CMD"
    )]
    pub cmd: Vec<std::ffi::OsString>,
}

/// `flexpass run -- CMD`: exec CMD with libflexpass.so preloaded, so its TCP connections
/// that match the policy go over FlexPass through the local agent (README "Unmodified
/// applications").
pub fn run(args: RunArgs) -> Result<(), String> {
    use std::os::unix::process::CommandExt;
    parse_transport(&args.transport)?
        .ok_or("--transport tcp makes no sense here: without flexpass run it is kernel TCP")?;
    let lib = match args
        .preload
        .or_else(|| std::env::var_os("FLEXPASS_PRELOAD").map(PathBuf::from))
    {
        Some(p) => p,
        None => std::env::current_exe()
            .map_err(|e| format!("cannot find this binary: {e}"))?
            .with_file_name("libflexpass.so"),
    };
    let lib = lib.canonicalize().map_err(|e| {
        format!(
            "{}: {e} (build it: cargo build --release -p flexpass-preload, or --preload PATH)",
            lib.display()
        )
    })?;
    let mut preload = lib.into_os_string();
    if let Some(old) = std::env::var_os("LD_PRELOAD").filter(|o| !o.is_empty()) {
        preload.push(" ");
        preload.push(old);
    }
    let mut cmd = std::process::Command::new(&args.cmd[0]);
    cmd.args(&args.cmd[1..])
        .env("LD_PRELOAD", preload)
        .env("FLEXPASS_AGENT_SOCKET", &args.agent_socket)
        .env("FLEXPASS_TRANSPORT", &args.transport);
    if let Some(p) = &args.policy {
        cmd.env("FLEXPASS_POLICY", p);
    }
    let err = cmd.exec();
    Err(format!(
        "cannot run {}: {err}",
        args.cmd[0].to_string_lossy()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_generated_bytes_follow_the_documented_formula_at_any_offset_and_length() {
        for (offset, len) in [
            (0u64, 0usize),
            (0, 1),
            (0, 8),
            (3, 13),
            (1_000_003, 4097),
            (7 << 30, 65),
        ] {
            let want: Vec<u8> = (offset..offset + len as u64)
                .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
                .collect();
            assert_eq!(
                pattern_bytes(offset, len).as_ref(),
                &want[..],
                "offset {offset} len {len}"
            );
        }
        // Across the table's period, and in the chunks `send` sends.
        let at = PATTERN_PERIOD as u64 - 5;
        let want: Vec<u8> = (at..at + 20)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        assert_eq!(pattern_bytes(at, 20).as_ref(), &want[..]);
        assert_eq!(pattern_slice(at, 20).len(), 5);
    }
}
