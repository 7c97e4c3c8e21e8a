//! One FlexPass endpoint: a UDP socket serving many concurrent flows in both directions,
//! driving the sans-IO core with the real clock. The host's credit rate limit (ExpressPass:
//! "host and switch perform credit rate-limiting") is applied here, like a NIC's Q0.

use crate::datapath::{Datapath, DatapathMode, POLL_FDS};
use crate::socket::BATCH;
use crate::timers::{DeadlineHeap, Timer};
use crate::xdp::XdpConfig;
use bytes::Bytes;
use flexpass_core::config::{credit_queue_bps_mtu, credit_rate_for_link_mtu};
use flexpass_core::{
    CreditConfig, FlashPassConfig, Nanos, PptConfig, Receiver, ReceiverConfig, Sender,
    SenderConfig, TargetLossRule, Transmit,
};
use flexpass_wire::{
    CreditRequest, DscpPlan, Ecn, Hello, HelloAck, HelloConn, HelloStatus, Packet, Reset,
    ResetReason, TransportKind, DEFAULT_MTU, MAX_MTU, MIN_ETHERNET_WIRE, MIN_MTU,
};
use serde::Serialize;
use sha2::{Digest, Sha256};
use std::collections::{HashMap, VecDeque};
use std::io;
use std::net::SocketAddr;
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

/// Datagrams read per recvmmsg(2), and handled between two runs of the timers.
const RECV_BATCH: usize = 16;
/// recvmmsg(2) batches per `poll` call at most.
const MAX_BATCHES: usize = 16;
/// Step (ns) of the wake-up latency estimate per timer wake-up (median tracking).
const WAKE_LEAD_STEP: f64 = 200.0;
/// While busy-waiting for a credit, the socket is checked this often (ns).
const SPIN_CHECK: Nanos = 2_000;

#[derive(Clone, Debug)]
pub struct EndpointConfig {
    pub bind: SocketAddr,
    /// Rate of this host's link (bits/s): sets the credit rate limit and max_rate.
    pub link_bps: f64,
    /// IP MTU of the path (576 ..= 9000; every host of a path must use the same): data
    /// segments fill it (`max_payload_for_mtu`), and a credit stands for one frame of
    /// `max_frame_wire(mtu)` bytes, so the credit rates are `share · C · 84 / (84 + mtu +
    /// 38)` (docs/protocol.md §9, "Frame sizes and MTU").
    pub mtu: usize,
    /// w_q: FlexPass credits may fill this share of the link.
    pub w_q: f64,
    /// Floor of the credit feedback update period (the path's base RTT).
    pub base_rtt: Nanos,
    /// FlashPass T_wait: a granted data packet leaves at T + T_wait, T its emulation
    /// packet's send time (FlashPass §III-B: at least the network's max RTT; a grant that
    /// arrives later is used at once and counted in `late_grants`).
    pub t_wait: Nanos,
    /// FlashPass: the Aeolus pre-credit phase (one host-link BDP of unscheduled, red data in
    /// the first RTT, §III-C); off: plain FlashPass (every data packet scheduled).
    pub flashpass_unscheduled: bool,
    /// DCTCP's tail-loss probe for the flows this endpoint sends with dctcp and ppt (RFC 8985
    /// §7, `DctcpConfig::tlp`): a lost last packet is recovered after 2·SRTT, not RTO_min.
    pub tlp: bool,
    /// Algorithm 1's target-loss rule for the flows this endpoint receives.
    pub target_loss_rule: TargetLossRule,
    pub dscp: DscpPlan,
    /// Accept incoming flows.
    pub accept: bool,
    /// Template for the flows this endpoint opens.
    pub sender: fn(TransportKind) -> SenderConfig,
    pub seed: u64,
    /// Hybrid sleep/spin for credits: when the next deadline is a credit, the loop sleeps in
    /// ppoll(2) (ns timeout, 1 µs timer slack) until a learned lead before it — the running
    /// median of the timer wake-up latency, capped at `spin` — and busy-waits the rest
    /// (leaving early for arriving packets). A wake-up later than the lead spins not at
    /// all, so the CPU cost is well below `spin` per credit. Other deadlines (feedback
    /// updates, retransmission timers) never spin. 0: sleep only.
    pub spin: Nanos,
    /// Poll mode: while datagrams arrive less than half this apart on average, the loop
    /// checks the socket without sleeping for up to this long after the last one (no
    /// wake-up per packet; costs up to this much CPU each time traffic pauses). 0: off.
    pub busy_poll: Nanos,
    /// Credits of a flow paced in batches of this many (`CreditConfig::batch`; 1: one by
    /// one, the papers' pacing). The host credit shaper is two batches deep.
    pub credit_batch: u32,
    /// Send runs of equal-sized datagrams to one peer as one UDP GSO send (UDP_SEGMENT)
    /// when the kernel supports it; falls back to one datagram per message otherwise.
    pub gso: bool,
    /// Incoming flows (receivers, lingering ones included) at most: beyond, a HELLO is a
    /// pressure like a full half-open table (cookies), and a HELLO with a valid cookie is
    /// answered HELLO_ACK refused.
    pub max_flows: usize,
    /// Half-open flows (created by a HELLO without a valid cookie, no proof yet that the
    /// sender's address is real: docs/protocol.md §11, "Half-open flows and cookies") kept
    /// at most. What happens to a HELLO beyond it: `hello_cookies`.
    pub max_half_open: usize,
    /// When the half-open table is full, half-open flows older than this are dropped first
    /// (never otherwise: an idle half-open flow is kept while there is room).
    pub half_open_timeout: Nanos,
    /// Credits a half-open flow may send per HELLO or CREDIT_REQUEST it receives (its
    /// credits then stop until its first data packet, or the sender asks again).
    pub half_open_credits: u32,
    /// Share of the link's credit rate all half-open flows together may use.
    pub half_open_credit_share: f64,
    pub hello_cookies: CookieMode,
    /// Give-up timeout of every sender (`SenderConfig::give_up_timeout`): silence from the
    /// peer this long fails a flow.
    pub give_up_timeout: Nanos,
    /// Kernel UDP socket or AF_XDP (docs/datapath.md); `auto` falls back to UDP, logged.
    pub datapath: DatapathMode,
    /// AF_XDP: interface (None: from the bound address or the route to `route_hint`) and
    /// receive queue.
    pub xdp_iface: Option<String>,
    pub xdp_queue: crate::xdp::XdpQueues,
    /// A peer's address, to pick the interface for a wildcard bind.
    pub route_hint: Option<std::net::Ipv4Addr>,
}

/// When a HELLO is answered with HELLO_ACK `retry` and a cookie, without keeping state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CookieMode {
    /// Never: a HELLO beyond `max_half_open` evicts the oldest half-open flow (for senders
    /// that do not know cookies; under a flood, a real flow may be evicted before its first
    /// data arrives).
    Off,
    /// While the half-open table is full (like TCP SYN cookies): no cost without a flood.
    Auto,
    /// For every HELLO without a valid cookie: no half-open state ever, one more RTT for
    /// every flow.
    Always,
}

impl std::str::FromStr for CookieMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "off" => Ok(CookieMode::Off),
            "auto" => Ok(CookieMode::Auto),
            "always" => Ok(CookieMode::Always),
            _ => Err(format!(
                "cookie mode must be off, auto or always, got {s:?}"
            )),
        }
    }
}

/// Defaults of the half-open bounds (docs/protocol.md §11, "Half-open flows and cookies").
pub const DEFAULT_MAX_HALF_OPEN: usize = 256;
pub const DEFAULT_MAX_FLOWS: usize = 8192;
pub const DEFAULT_HALF_OPEN_TIMEOUT: Nanos = 5_000_000_000;
pub const DEFAULT_HALF_OPEN_CREDITS: u32 = 16;
pub const DEFAULT_HALF_OPEN_CREDIT_SHARE: f64 = 0.125;

impl EndpointConfig {
    pub fn new(bind: SocketAddr) -> Self {
        EndpointConfig {
            bind,
            link_bps: 10e9,
            mtu: DEFAULT_MTU,
            w_q: 0.5,
            base_rtt: 100_000,
            t_wait: 2_000_000,
            flashpass_unscheduled: true,
            tlp: false,
            target_loss_rule: TargetLossRule::Fixed,
            dscp: DscpPlan::default(),
            accept: true,
            sender: SenderConfig::new,
            seed: 0,
            spin: DEFAULT_SPIN,
            credit_batch: DEFAULT_CREDIT_BATCH,
            gso: true,
            busy_poll: DEFAULT_BUSY_POLL,
            max_flows: DEFAULT_MAX_FLOWS,
            max_half_open: DEFAULT_MAX_HALF_OPEN,
            half_open_timeout: DEFAULT_HALF_OPEN_TIMEOUT,
            half_open_credits: DEFAULT_HALF_OPEN_CREDITS,
            half_open_credit_share: DEFAULT_HALF_OPEN_CREDIT_SHARE,
            hello_cookies: CookieMode::Auto,
            give_up_timeout: flexpass_core::DEFAULT_GIVE_UP_TIMEOUT,
            datapath: DatapathMode::Udp,
            xdp_iface: None,
            xdp_queue: crate::xdp::XdpQueues::default(),
            route_hint: None,
        }
    }

    pub fn validate(&self) -> Result<(), String> {
        if !(self.link_bps.is_finite() && self.link_bps > 0.0) {
            return Err(format!(
                "link rate must be > 0 bit/s, got {}",
                self.link_bps
            ));
        }
        if !(self.w_q > 0.0 && self.w_q < 1.0) {
            return Err(format!("w_q must be in (0, 1), got {}", self.w_q));
        }
        if !flexpass_wire::mtu_supported(self.mtu) {
            return Err(format!(
                "MTU must be in {MIN_MTU}..={MAX_MTU} bytes, got {}",
                self.mtu
            ));
        }
        if self.base_rtt == 0 {
            return Err("base RTT must be > 0".into());
        }
        // T_wait + RTT must stay below the 2^32 ns an EMULATION timestamp spans (§6.9).
        if self.t_wait == 0 || self.t_wait > 1_000_000_000 {
            return Err(format!(
                "FlashPass T_wait must be in (0, 1 s], got {} ns",
                self.t_wait
            ));
        }
        if !(self.half_open_credit_share > 0.0 && self.half_open_credit_share <= 1.0) {
            return Err(format!(
                "half-open credit share must be in (0, 1], got {}",
                self.half_open_credit_share
            ));
        }
        if self.half_open_credits == 0 {
            return Err("half-open credits must be ≥ 1 (credit-based flows need them)".into());
        }
        // The credit settings every receiver will get (the credit batch among them).
        self.receiver_config(TransportKind::ExpressPass)
            .validate()
            .map_err(|e| format!("credit settings: {e}"))?;
        if self.max_flows == 0 {
            return Err("max flows must be ≥ 1".into());
        }
        if self.max_half_open == 0 && self.hello_cookies != CookieMode::Always {
            return Err("max half-open 0 needs cookies always".into());
        }
        self.dscp.validate()
    }

    fn receiver_config(&self, t: TransportKind) -> ReceiverConfig {
        let share = if t == TransportKind::FlexPass {
            self.w_q
        } else {
            1.0
        };
        let mut credit = CreditConfig::for_link_mtu(self.link_bps, share, self.base_rtt, self.mtu);
        credit.target_loss_rule = self.target_loss_rule;
        credit.batch = self.credit_batch;
        let mut c = ReceiverConfig::new(credit);
        c.seed = self.seed;
        // Credits restarted on an idle stream, or for a flow of known size, are windowed by
        // what the sender has to send.
        c.credit_window_segment = flexpass_wire::max_payload_for_mtu(self.mtu) as u64;
        c
    }
}

/// Default busy-wait before a credit deadline (see `EndpointConfig::spin`).
pub const DEFAULT_SPIN: Nanos = 30_000;
/// Default `EndpointConfig::credit_batch`.
pub const DEFAULT_CREDIT_BATCH: u32 = 1;
/// Default poll-mode window (see `EndpointConfig::busy_poll`): off — on 2 shared cores a
/// 20 µs window changed one flow's goodput by < 5 % (within run-to-run noise) for a core's
/// worth of spinning.
pub const DEFAULT_BUSY_POLL: Nanos = 0;

/// Counters of everything the endpoint refused; the flows themselves are unaffected.
#[derive(Clone, Debug, Default, Serialize)]
pub struct EndpointStats {
    pub datagrams_in: u64,
    pub datagrams_out: u64,
    pub malformed: u64,
    pub unknown_flow: u64,
    pub rejected_by_flow: u64,
    pub credits_rate_limited: u64,
    /// Credits not sent because this host's receive buffer was more than
    /// `RX_BACKLOG_CREDIT_LIMIT` full (it cannot keep up with the data it credits).
    pub credits_dropped_rx_backlog: u64,
    /// FlashPass: emulation packets the host's emulation queue dropped (over the link's
    /// emulation share, or over-provisioned above the threshold).
    pub emulation_dropped: u64,
    pub send_errors: u64,
    /// recvmmsg(2) / sendmmsg(2) calls (datagrams per call = datagrams_in / recv_calls).
    pub recv_calls: u64,
    pub send_calls: u64,
    /// RESET(unknown_flow) answers sent (rate-limited).
    pub resets_sent: u64,
    /// Credit pacing error (actual send time − pacer's due time), ns: p50 / p99 / max over
    /// the credits sent so far (see `Endpoint::pacing_error`).
    pub credit_pacing_error_ns: [u64; 3],
    /// Half-open flows now (created by a HELLO without a valid cookie, no data yet) and at
    /// most so far.
    pub half_open: u64,
    pub half_open_peak: u64,
    /// Half-open flows confirmed (first data, connection answered, or a cookie HELLO).
    pub half_open_confirmed: u64,
    /// Half-open flows dropped: older than the timeout when the table was full, or the
    /// oldest with cookies off.
    pub half_open_expired: u64,
    pub half_open_evicted: u64,
    /// HELLOs answered with HELLO_ACK retry and a cookie, keeping no state.
    pub cookies_sent: u64,
    /// HELLOs with a cookie: valid (flow created, confirmed) or not (handled as without).
    pub cookies_valid: u64,
    pub cookies_invalid: u64,
    /// Credits of half-open flows not sent: beyond the half-open share of the credit rate,
    /// and half-open flows whose credits were stopped after `half_open_credits`.
    pub half_open_credits_limited: u64,
    pub half_open_credit_stops: u64,
    /// Credits of half-open flows sent (within the half-open share).
    pub half_open_credits_sent: u64,
    /// HELLOs refused (HELLO_ACK refused) because `max_flows` flows exist.
    pub flows_refused: u64,
    /// Credits received for our flows above the link's credit rate, dropped on arrival.
    pub credits_in_rate_limited: u64,
    /// "udp" or "xdp" (docs/datapath.md), and the AF_XDP packet counts.
    pub datapath: &'static str,
    pub xdp: Option<crate::xdp::XdpCounters>,
}

fn libc_pollfd(fd: RawFd, events: i16) -> nix::libc::pollfd {
    nix::libc::pollfd {
        fd,
        events,
        revents: 0,
    }
}

fn libc_pollin() -> i16 {
    nix::libc::POLLIN
}

/// Keeps at most this many pacing-error samples (the first ones).
const PACING_SAMPLES: usize = 200_000;

/// A flow is named by its peer and the flow id the opening side chose.
pub type FlowKey = (SocketAddr, u32);

/// Which table a flow is in: the flows this endpoint sends, or those it receives (a sender
/// and a receiver may share a key: same peer, same id chosen by either side).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Dir {
    Send,
    Recv,
}

/// One flow and its bookkeeping for the event loop (docs/agent-api.md, "Scale"): the timer
/// it has in the deadline heap, and whether it waits in the dirty list.
struct Slot<T> {
    flow: T,
    /// The entry of this flow in the deadline heap that counts (others are stale).
    timer: Option<Timer>,
    /// DIRTY: in the dirty list; NET: touched by a packet or a timer since its last turn.
    dirty: u8,
}

const DIRTY: u8 = 1;
const NET: u8 = 2;

impl<T> Slot<T> {
    fn new(flow: T) -> Self {
        Slot {
            flow,
            timer: None,
            dirty: 0,
        }
    }
}

/// Mark a flow for the next `run_timers_and_flush` (once in the dirty list).
fn mark<T>(slot: &mut Slot<T>, dirty: &mut Vec<(Dir, FlowKey)>, dir: Dir, key: FlowKey, net: bool) {
    if slot.dirty & DIRTY == 0 {
        dirty.push((dir, key));
    }
    slot.dirty |= DIRTY | if net { NET } else { 0 };
}

/// A receiver created by a HELLO without a valid cookie, not confirmed yet.
struct HalfOpen {
    since: Nanos,
    /// Credits it may still send before they are stopped (refilled by HELLO and
    /// CREDIT_REQUEST).
    credits_left: u32,
    /// Its credits were stopped here (not by its sender): restarted on confirmation.
    stopped: bool,
    /// Already handed to the application (connections are, at once).
    delivered: bool,
}

/// Cookie time slot (docs/protocol.md §11): a cookie is valid in its slot and the next.
const COOKIE_SLOT: Nanos = 8_000_000_000;
/// Depth of the incoming credit bucket (credits): what a loop stall of ~300 µs at 10 Gbit/s
/// queues in the socket (credits are timed when read, and coalesced reads hand the loop up
/// to 64 at once); the long-run rate is what the bucket bounds.
const CREDIT_IN_BURST: f64 = 256.0;

/// Token bucket (starts full): the host credit shaper (bytes at the link's credit rate, two
/// credits deep as Q0, or two credit batches), and the RESET rate limit (one token per RESET).
struct TokenBucket {
    per_ns: f64,
    depth: f64,
    tokens: f64,
    at: Nanos,
}

impl TokenBucket {
    fn new(per_second: f64, depth: f64) -> Self {
        TokenBucket {
            per_ns: per_second / 1e9,
            depth,
            tokens: depth,
            at: 0,
        }
    }

    fn refill(&mut self, now: Nanos) {
        self.tokens =
            (self.tokens + now.saturating_sub(self.at) as f64 * self.per_ns).min(self.depth);
        self.at = now;
    }

    fn admit(&mut self, now: Nanos, len: usize) -> bool {
        self.refill(now);
        if self.tokens >= len as f64 {
            self.tokens -= len as f64;
            true
        } else {
            false
        }
    }
}

/// Algorithm 1 of the agent's FlashPass senders updates over at least this many resolved
/// emulation packets: a loss rate resolves 1/16 (between the target band's edges, 1 % and
/// 10 %, a period of 16 tells "none", "some" and "many" apart).
pub const FLASHPASS_MIN_UPDATE_SAMPLES: u64 = 16;

/// Floor of the agent's FlashPass emulation rate, as a fraction of the link's emulation
/// rate (Algorithm 1 grows back from it by × 1.1 per update: 44 updates).
pub const FLASHPASS_MIN_RATE_FRACTION: f64 = 1.0 / 64.0;

/// Depth of a FlashPass emulation queue and its single threshold, in packets (FlashPass
/// §IV-A: "8 packets", "2 packets"; docs/protocol.md §10).
pub const EMULATION_QUEUE_PACKETS: u32 = 8;
pub const EMULATION_THRESHOLD_PACKETS: u32 = 2;

/// The host's emulation queue, as a switch port's Q0 in the profile `flashpass` (FlashPass
/// §III-B, §III-C): EMULATION packets of all the host's flows leave at most at the link's
/// emulation share C·84/(84 + max frame), `EMULATION_QUEUE_PACKETS` deep; with more than
/// `EMULATION_THRESHOLD_PACKETS` queued, an over-provisioned (Not-ECT) packet is dropped.
/// A policer: the backlog a queue would hold is the bucket's spent tokens.
struct EmulationQueue {
    bucket: TokenBucket,
}

impl EmulationQueue {
    fn new(link_bps: f64, mtu: usize) -> Self {
        let bytes = MIN_ETHERNET_WIRE as f64;
        EmulationQueue {
            bucket: TokenBucket::new(
                credit_queue_bps_mtu(link_bps, 1.0, mtu) / 8.0,
                f64::from(EMULATION_QUEUE_PACKETS) * bytes,
            ),
        }
    }

    /// Whether an emulation packet with this ECN code point gets through.
    fn admit(&mut self, now: Nanos, ecn: Ecn) -> bool {
        let b = &mut self.bucket;
        b.refill(now);
        let bytes = MIN_ETHERNET_WIRE as f64;
        let queued = (b.depth - b.tokens) / bytes;
        if ecn == Ecn::NotEct && queued >= f64::from(EMULATION_THRESHOLD_PACKETS) {
            return false;
        }
        b.admit(now, MIN_ETHERNET_WIRE)
    }
}

pub struct Endpoint {
    sock: Datapath,
    cfg: EndpointConfig,
    epoch: Instant,
    senders: HashMap<FlowKey, Slot<Sender>>,
    receivers: HashMap<FlowKey, Slot<Receiver>>,
    /// Flows touched (a packet, a write, open, confirmation) since the last turn: each turn
    /// handles these and the due timers only, never every flow.
    dirty: Vec<(Dir, FlowKey)>,
    /// Deadline heap (earliest first) with lazy deletion: an entry counts only while it
    /// equals its flow's `Slot::timer` (crate::timers).
    timers: DeadlineHeap<(Dir, FlowKey)>,
    /// Flows a packet or a timer touched, and flows closed, since the last `take_changed`
    /// (only while `track_changes` is on: the daemon services their owners only).
    changed: Vec<(Dir, FlowKey)>,
    track_changes: bool,
    accepted: VecDeque<FlowKey>,
    /// Receivers holding back ACKs during the current receive batch.
    ack_holds: Vec<FlowKey>,
    shaper: TokenBucket,
    emulation: EmulationQueue,
    /// RESET(unknown_flow) answers (docs/protocol.md §7: "with rate limiting").
    reset_limiter: TokenBucket,
    next_flow_id: u32,
    /// Earliest deadline of all flows after the last `run_timers_and_flush`, and whether it
    /// is a credit (a receiver that is sending credits).
    next_due: Option<Nanos>,
    credit_due: bool,
    /// How early (ns) the loop wakes before a credit deadline to busy-wait the rest: a
    /// running estimate of the median wake-up latency, at most `cfg.spin`.
    wake_lead: f64,
    /// When the last datagram arrived, and the running mean gap between datagrams (ns).
    last_rx: Nanos,
    rx_gap: f64,
    pacing_errors: Vec<u32>,
    /// Finished receivers kept to re-acknowledge late retransmissions (like TIME_WAIT).
    retired: VecDeque<(Nanos, FlowKey)>,
    /// Flows this endpoint had and dropped (closed senders, receivers after their linger),
    /// remembered for FORGOTTEN_MEMORY: only their packets are answered with RESET. A packet
    /// of a flow never seen (first-RTT data ahead of its HELLO, a forgery) is just dropped.
    forgotten: HashMap<FlowKey, Nanos>,
    forgotten_order: VecDeque<(Nanos, FlowKey)>,
    /// Connection extension of the HELLO that opened each accepted flow that had one.
    hello_conn: HashMap<FlowKey, HelloConn>,
    /// Receivers not confirmed yet (docs/protocol.md §11, "Half-open flows and cookies"),
    /// and their creation order (entries of flows no longer half-open are skipped).
    half_open: HashMap<FlowKey, HalfOpen>,
    half_open_order: VecDeque<(Nanos, FlowKey)>,
    /// Credits of all half-open flows together: a share of the link's credit rate.
    half_open_shaper: TokenBucket,
    /// Credits accepted for our senders: at most the link's credit rate (a credit is a
    /// licence for one frame of at most `max_frame_wire(mtu)` B: 1538 at a 1500 B MTU).
    credit_in: TokenBucket,
    cookie_secret: [u8; 32],
    /// Other file descriptors whose readiness (events as in poll(2)) ends a wait in `poll`
    /// (the daemon's API and application sockets).
    wake_fds: Vec<(RawFd, i16)>,
    pub stats: EndpointStats,
}

/// Receive backlog (share of the datapath's receive buffer not read yet; AF_XDP: of the
/// fullest queue's receive frames) above which this host sends no credits. At a quarter of
/// 2048 frames, the 1536 left absorb the credits already in flight (one frame each); the UDP
/// socket's buffer is 4 MiB.
const RX_BACKLOG_CREDIT_LIMIT: f64 = 0.25;

/// The send side of one loop turn: the host credit shaper, then the socket's send batch.
struct Tx<'a> {
    sock: &'a mut Datapath,
    shaper: &'a mut TokenBucket,
    emulation: &'a mut EmulationQueue,
    stats: &'a mut EndpointStats,
    dscp: &'a DscpPlan,
}

impl Tx<'_> {
    /// Queue one packet (sent by `flush`, or right away once a batch is full).
    fn send(&mut self, peer: SocketAddr, t: Transmit, now: Nanos) {
        if matches!(t.packet, Packet::Credit(_)) {
            // The host as the bottleneck: credits it cannot serve are dropped here, where
            // the receiver's credit feedback sees them lost and slows down, and not as data
            // at its full receive buffer (ExpressPass: credits are dropped, data is not).
            if self.sock.rx_backlog() > RX_BACKLOG_CREDIT_LIMIT {
                self.stats.credits_dropped_rx_backlog += 1;
                return;
            }
            if !self.shaper.admit(now, t.packet.wire_len()) {
                self.stats.credits_rate_limited += 1;
                return;
            }
        }
        if matches!(t.packet, Packet::Emulation(_)) && !self.emulation.admit(now, t.ecn) {
            self.stats.emulation_dropped += 1;
            return;
        }
        let tos = self.dscp.tos(t.class, t.ecn);
        if self
            .sock
            .queue(peer, tos, |out| t.packet.encode(out))
            .is_err()
        {
            self.stats.send_errors += 1;
            return;
        }
        if self.sock.queued() >= BATCH {
            self.flush();
        }
    }

    /// A full socket buffer or an unreachable peer drops a datagram, as a NIC would; the
    /// transport recovers it like any other loss.
    fn flush(&mut self) {
        if self.sock.queued() == 0 {
            return;
        }
        let f = self.sock.flush();
        self.stats.datagrams_out += f.sent;
        self.stats.send_errors += f.errors;
        self.stats.send_calls += f.calls;
    }
}

/// RESET(unknown_flow) rate limit per endpoint: a peer still sending for a flow this host
/// has forgotten learns it (its sender fails, its receiver stops crediting) without the
/// host becoming a reflector.
const RESETS_PER_SECOND: f64 = 200.0;
const RESET_BURST: f64 = 20.0;
/// How long (and how many) dropped flows are remembered for RESET answers.
const FORGOTTEN_MEMORY: Nanos = 60_000_000_000;
const FORGOTTEN_MAX: usize = 65_536;

/// How long a finished receiver keeps answering retransmitted data before it is dropped.
pub const RECEIVER_LINGER: Nanos = 2_000_000_000;

impl Endpoint {
    pub fn bind(cfg: EndpointConfig) -> io::Result<Self> {
        cfg.validate()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let sock = Datapath::open(
            cfg.datapath,
            &XdpConfig {
                bind: cfg.bind,
                iface: cfg.xdp_iface.clone(),
                queues: cfg.xdp_queue.clone(),
                route_hint: cfg.route_hint,
                mtu: cfg.mtu,
            },
            cfg.gso,
        )?;
        // Wake-ups within 1 µs of the requested time (the default slack is 50 µs).
        let _ = nix::sys::prctl::set_timerslack(1_000);
        // Credits of all flows share the link's full credit rate at most; FlexPass flows
        // additionally stay within w_q through their max_rate (FlexPass §4.1).
        let credit_bps = credit_queue_bps_mtu(cfg.link_bps, 1.0, cfg.mtu);
        // Two batches deep: a batch whose jittered gap came short still passes whole (and
        // a half-open flow's batch too).
        let burst = 2.0 * cfg.credit_batch as f64 * 92.0;
        let shaper = TokenBucket::new(credit_bps / 8.0, burst);
        let half_open_shaper =
            TokenBucket::new(credit_bps / 8.0 * cfg.half_open_credit_share, burst);
        let credit_in = TokenBucket::new(
            credit_rate_for_link_mtu(cfg.link_bps, 1.0, cfg.mtu),
            CREDIT_IN_BURST,
        );
        let seed = cfg.seed;
        let datapath = if sock.xdp_info().is_some() {
            "xdp"
        } else {
            "udp"
        };
        Ok(Endpoint {
            sock,
            epoch: Instant::now(),
            senders: HashMap::new(),
            receivers: HashMap::new(),
            dirty: Vec::new(),
            timers: DeadlineHeap::default(),
            changed: Vec::new(),
            track_changes: false,
            accepted: VecDeque::new(),
            ack_holds: Vec::new(),
            shaper,
            emulation: EmulationQueue::new(cfg.link_bps, cfg.mtu),
            reset_limiter: TokenBucket::new(RESETS_PER_SECOND, RESET_BURST),
            next_flow_id: (seed as u32) ^ rand::random::<u32>() | 1,
            next_due: None,
            credit_due: false,
            wake_lead: 0.0,
            last_rx: 0,
            rx_gap: 1e6,
            pacing_errors: Vec::new(),
            retired: VecDeque::new(),
            forgotten: HashMap::new(),
            forgotten_order: VecDeque::new(),
            hello_conn: HashMap::new(),
            half_open: HashMap::new(),
            half_open_order: VecDeque::new(),
            half_open_shaper,
            credit_in,
            cookie_secret: rand::random(),
            wake_fds: Vec::new(),
            stats: EndpointStats {
                datapath,
                ..EndpointStats::default()
            },
            cfg,
        })
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.sock.local_addr()
    }

    /// Nanoseconds since the endpoint started (the core's clock).
    pub fn now(&self) -> Nanos {
        self.epoch.elapsed().as_nanos() as Nanos
    }

    /// Open a flow to `peer`. Bytes are queued with `write` and closed with `finish`.
    pub fn open(
        &mut self,
        peer: SocketAddr,
        transport: TransportKind,
        size_hint: u64,
    ) -> io::Result<FlowKey> {
        let id = self.next_flow_id;
        self.next_flow_id = self.next_flow_id.wrapping_add(1).max(1);
        let mut cfg = (self.cfg.sender)(transport);
        cfg.give_up_timeout = self.cfg.give_up_timeout;
        cfg.dctcp.tlp |= self.cfg.tlp;
        // Segments fill the path's MTU (docs/protocol.md §9).
        cfg.mss = flexpass_wire::max_payload_for_mtu(self.cfg.mtu);
        if transport == TransportKind::Ppt {
            // PPT §3.1: the LCP's first window is the host path's BDP (C · base RTT) less
            // DCTCP's initial window, paced over the base RTT until the HCP has a sample.
            let link = PptConfig::for_link(self.cfg.link_bps, self.cfg.base_rtt);
            cfg.ppt.bdp_bytes = link.bdp_bytes;
            cfg.ppt.base_rtt = link.base_rtt;
        }
        if transport == TransportKind::FlashPass {
            // FlashPass §III-B: emulation at the host link's full emulation share (one 84-byte
            // packet per maximum frame of the MTU), data at T + T_wait.
            let fp = FlashPassConfig::for_link_mtu(
                self.cfg.link_bps,
                self.cfg.base_rtt,
                self.cfg.t_wait,
                self.cfg.mtu,
            );
            // The template's Algorithm 1 band and ablations stay.
            cfg.flashpass = FlashPassConfig {
                min_target_loss: cfg.flashpass.min_target_loss,
                max_target_loss: cfg.flashpass.max_target_loss,
                over_provisioning: cfg.flashpass.over_provisioning,
                delayed_feedback: cfg.flashpass.delayed_feedback,
                unscheduled: cfg.flashpass.unscheduled && self.cfg.flashpass_unscheduled,
                // A host's RTT may hold only a few emulation packets: Algorithm 1 waits for
                // enough of them to measure a loss rate (FlashPassConfig::min_update_samples).
                min_update_samples: cfg
                    .flashpass
                    .min_update_samples
                    .max(FLASHPASS_MIN_UPDATE_SAMPLES),
                // A stalled host (descheduled longer than T_wait) finds a whole period of
                // emulation lost: the floor bounds how long the rate takes to grow back.
                min_rate_fraction: cfg
                    .flashpass
                    .min_rate_fraction
                    .max(FLASHPASS_MIN_RATE_FRACTION),
                ..fp
            };
        }
        let s = Sender::new(id, cfg, size_hint, self.now())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let key = (peer, id);
        let mut slot = Slot::new(s);
        mark(&mut slot, &mut self.dirty, Dir::Send, key, false);
        self.senders.insert(key, slot);
        Ok(key)
    }

    pub fn sender(&self, key: FlowKey) -> Option<&Sender> {
        self.senders.get(&key).map(|s| &s.flow)
    }
    /// The flow, for the application (writes, finish…): it is looked at in the next turn.
    pub fn sender_mut(&mut self, key: FlowKey) -> Option<&mut Sender> {
        let slot = self.senders.get_mut(&key)?;
        mark(slot, &mut self.dirty, Dir::Send, key, false);
        Some(&mut slot.flow)
    }
    pub fn receiver(&self, key: FlowKey) -> Option<&Receiver> {
        self.receivers.get(&key).map(|r| &r.flow)
    }
    /// The flow, for the application (reads…): it is looked at in the next turn.
    pub fn receiver_mut(&mut self, key: FlowKey) -> Option<&mut Receiver> {
        let slot = self.receivers.get_mut(&key)?;
        mark(slot, &mut self.dirty, Dir::Recv, key, false);
        Some(&mut slot.flow)
    }

    /// Collect the flows a packet or a timer touched, and the flows closed, for
    /// `take_changed` (the daemon: it services the owners of these flows only).
    pub fn track_changes(&mut self, on: bool) {
        self.track_changes = on;
        self.changed.clear();
    }

    /// The flows touched by the network (a packet or a timer) or closed since the last call
    /// (with `track_changes`; a flow may be listed more than once). `out` is cleared first.
    pub fn take_changed(&mut self, out: &mut Vec<(Dir, FlowKey)>) {
        out.clear();
        std::mem::swap(out, &mut self.changed);
    }

    fn note_changed(&mut self, dir: Dir, key: FlowKey) {
        if self.track_changes {
            self.changed.push((dir, key));
        }
    }

    /// Forget a flow (after the application is done with it).
    pub fn close_sender(&mut self, key: FlowKey) -> Option<Sender> {
        let s = self.senders.remove(&key)?.flow;
        self.note_changed(Dir::Send, key);
        self.forget(key);
        Some(s)
    }
    pub fn close_receiver(&mut self, key: FlowKey) -> Option<Receiver> {
        let r = self.receivers.remove(&key)?.flow;
        self.note_changed(Dir::Recv, key);
        self.hello_conn.remove(&key);
        if self.half_open.remove(&key).is_some() {
            self.stats.half_open = self.half_open.len() as u64;
        }
        self.forget(key);
        Some(r)
    }

    /// Abort a flow this endpoint sends: RESET to the peer, then forget it.
    pub fn abort_sender(&mut self, key: FlowKey, reason: ResetReason) {
        if let Some(s) = self.close_sender(key) {
            self.send_reset(key, reason, s.transport());
        }
    }

    /// Abort (or refuse) a flow this endpoint receives: RESET to the peer (its sender
    /// fails), then forget it.
    pub fn abort_receiver(&mut self, key: FlowKey, reason: ResetReason) {
        if let Some(r) = self.close_receiver(key) {
            self.send_reset(key, reason, r.transport());
        }
    }

    fn send_reset(&mut self, key: FlowKey, reason: ResetReason, transport: TransportKind) {
        let reset = Packet::Reset(Reset {
            flow_id: key.1,
            reason,
        });
        let now = self.now();
        self.transmit(key.0, Transmit::new(reset, transport), now);
        let mut tx = Tx {
            sock: &mut self.sock,
            shaper: &mut self.shaper,
            emulation: &mut self.emulation,
            stats: &mut self.stats,
            dscp: &self.cfg.dscp,
        };
        tx.flush();
    }

    /// The connection extension of the HELLO that opened an accepted flow.
    pub fn hello_conn(&self, key: FlowKey) -> Option<HelloConn> {
        self.hello_conn.get(&key).copied()
    }

    /// File descriptors (with poll(2) events) whose readiness also ends the wait in `poll`.
    pub fn set_wake_fds(&mut self, fds: &[(RawFd, i16)]) {
        self.wake_fds.clear();
        self.wake_fds.extend_from_slice(fds);
    }

    /// UDP address this endpoint's peers use (its port; the IP of the bound address).
    pub fn port(&self) -> u16 {
        self.cfg.bind.port()
    }

    fn forget(&mut self, key: FlowKey) {
        let now = self.now();
        if self.forgotten_order.len() >= FORGOTTEN_MAX {
            if let Some((_, old)) = self.forgotten_order.pop_front() {
                self.forgotten.remove(&old);
            }
        }
        self.forgotten.insert(key, now);
        self.forgotten_order.push_back((now, key));
    }

    /// The application is done with a finished flow: keep acknowledging retransmissions
    /// (the sender may have missed the last ACK) for `RECEIVER_LINGER`, then forget it.
    pub fn retire_receiver(&mut self, key: FlowKey) {
        let at = self.now() + RECEIVER_LINGER;
        self.retired.push_back((at, key));
    }

    /// Next incoming flow accepted since the last call.
    pub fn accept(&mut self) -> Option<FlowKey> {
        self.accepted.pop_front()
    }

    pub fn flows(&self) -> (usize, usize) {
        (self.senders.len(), self.receivers.len())
    }

    /// One turn of the event loop: wait (at most `max_wait`, less if a timer is due) for
    /// packets, handle them, run due timers and send everything the flows have to send.
    pub fn poll(&mut self, max_wait: Duration) -> io::Result<()> {
        self.run_timers_and_flush();
        let now = self.now();
        let max = max_wait.as_nanos().min(u64::MAX as u128) as Nanos;
        let wait = self
            .next_due
            .map_or(max, |d| d.saturating_sub(now))
            .min(max);
        if wait > 0 {
            // Only a credit deadline is worth waking early for, and only if it is the
            // reason for waking up.
            let credit = self.credit_due && self.next_due.is_some_and(|d| d <= now + max);
            let lead = if credit {
                (self.wake_lead as Nanos).min(self.cfg.spin)
            } else {
                0
            };
            // Poll mode while packets arrive closely spaced: check the socket without
            // sleeping until the next deadline, for at most `busy_poll` after the last one.
            let mut readable = false;
            if self.cfg.busy_poll > 0 && self.rx_gap < self.cfg.busy_poll as f64 / 2.0 {
                let end = (self.last_rx + self.cfg.busy_poll).min(now + wait);
                loop {
                    if self.sleep(0)? {
                        readable = true;
                        break;
                    }
                    if self.now() >= end {
                        break;
                    }
                    std::hint::spin_loop();
                }
            }
            let now = self.now();
            let wait = if readable {
                0
            } else {
                self.next_due
                    .map_or(max, |d| d.saturating_sub(now))
                    .min(max)
            };
            if wait > lead {
                let sleep = wait - lead;
                readable = self.sleep(sleep)?;
                if credit && !readable && self.cfg.spin > 0 {
                    // Learn the wake-up latency: the lead tracks its median.
                    let late = self.now().saturating_sub(now + sleep) as f64;
                    self.wake_lead = if late > self.wake_lead {
                        self.wake_lead + WAKE_LEAD_STEP
                    } else {
                        (self.wake_lead - WAKE_LEAD_STEP).max(0.0)
                    }
                    .min(self.cfg.spin as f64);
                }
            }
            if credit && !readable && lead > 0 && wait > 0 {
                // Woke early (or the credit is closer than the lead): busy-wait for it,
                // leaving as soon as a packet arrives.
                let until = now + wait;
                let mut check = self.now() + SPIN_CHECK;
                loop {
                    let t = self.now();
                    if t >= until {
                        break;
                    }
                    if t >= check {
                        if self.sleep(0)? {
                            break;
                        }
                        check = t + SPIN_CHECK;
                    }
                    std::hint::spin_loop();
                }
            }
        }
        // Drain the socket in batches, running due timers (credit pacing) between batches;
        // at most MAX_BATCHES per call, so a caller that also serves other sockets (the
        // daemon's applications) is not starved while datagrams keep arriving.
        let mut batches = 1;
        while self.receive_batch(RECV_BATCH)? == RECV_BATCH && batches < MAX_BATCHES {
            self.run_timers_and_flush();
            batches += 1;
        }
        self.run_timers_and_flush();
        self.stats.xdp = self.sock.xdp_counters();
        Ok(())
    }

    /// The AF_XDP set-up (interface, queue, native/generic, zero-copy), if in use.
    pub fn xdp_info(&self) -> Option<&crate::xdp::XdpInfo> {
        self.sock.xdp_info()
    }

    /// ppoll(2) the datapath's sockets (and the wake fds) for `ns` (0: just check); whether
    /// any is readable. AF_XDP frames already on the receive ring end it without a call.
    fn sleep(&mut self, ns: Nanos) -> io::Result<bool> {
        if self.sock.rx_ready() {
            return Ok(true);
        }
        let timeout = nix::sys::time::TimeSpec::from_duration(Duration::from_nanos(ns));
        let mut own = [0 as RawFd; POLL_FDS];
        let k = self.sock.poll_fds(&mut own);
        let mut fds = [libc_pollfd(-1, 0); POLL_FDS];
        for (p, &fd) in fds.iter_mut().zip(&own[..k]) {
            *p = libc_pollfd(fd, libc_pollin());
        }
        let mut extra;
        let all: &mut [nix::libc::pollfd] = if self.wake_fds.is_empty() {
            &mut fds[..k]
        } else {
            // The datapath's sockets plus the daemon's: any of them ready ends the wait.
            extra = Vec::with_capacity(k + self.wake_fds.len());
            extra.extend_from_slice(&fds[..k]);
            extra.extend(self.wake_fds.iter().map(|&(fd, ev)| libc_pollfd(fd, ev)));
            &mut extra
        };
        let ts = timeout.as_ref();
        // SAFETY: `all` is a valid array of pollfd for the duration of the call.
        let n = unsafe { nix::libc::ppoll(all.as_mut_ptr(), all.len() as _, ts, std::ptr::null()) };
        if n < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::Interrupted {
                Ok(false)
            } else {
                Err(e)
            };
        }
        if n > 0 && k > 1 {
            let mut ready = [false; POLL_FDS];
            for (r, p) in ready.iter_mut().zip(&all[..k]) {
                *r = p.revents != 0;
            }
            self.sock.readable(&ready[..k]);
        }
        Ok(n > 0)
    }

    /// Receive (one recvmmsg) and dispatch up to `max` messages (more datagrams if the
    /// kernel coalesced some), running timers whenever one is due; returns how many
    /// messages were read.
    fn receive_batch(&mut self, max: usize) -> io::Result<usize> {
        let n = self.sock.recv_batch(max.min(BATCH))?;
        self.stats.recv_calls += 1;
        if n > 0 {
            let t = self.now();
            let gap = t.saturating_sub(self.last_rx) as f64 / self.sock.datagrams().max(1) as f64;
            self.rx_gap += (gap.min(1e6) - self.rx_gap) / 8.0;
            self.last_rx = t;
        }
        for i in 0..self.sock.datagrams() {
            // Due timers (credit pacing) run as soon as they are due, not only between
            // batches: one clock read per datagram.
            if i > 0 && self.next_due.is_some_and(|d| d <= self.now()) {
                self.run_timers_and_flush();
            }
            let (packet, src, tos) = {
                let m = self.sock.received(i);
                if m.truncated {
                    self.stats.datagrams_in += 1;
                    self.stats.malformed += 1;
                    continue;
                }
                (Packet::decode(m.data), m.src, m.tos)
            };
            self.stats.datagrams_in += 1;
            let packet = match packet {
                Ok(p) => p,
                Err(_) => {
                    self.stats.malformed += 1;
                    continue;
                }
            };
            let ce = Ecn::from_bits(tos) == Ecn::Ce;
            self.dispatch(src, packet, ce);
        }
        for key in self.ack_holds.drain(..) {
            if let Some(r) = self.receivers.get_mut(&key) {
                r.flow.set_ack_hold(false);
                mark(r, &mut self.dirty, Dir::Recv, key, true);
            }
        }
        Ok(n)
    }

    fn dispatch(&mut self, src: SocketAddr, packet: Packet, ce: bool) {
        let now = self.now();
        let key = (src, packet.flow_id());
        if matches!(packet, Packet::Reset(_)) {
            // RESET goes either way (docs/protocol.md §6.8): to the flow we send, or to the
            // flow we receive from this peer with that id (both, in the rare case of two).
            let mut known = false;
            if let Some(s) = self.senders.get_mut(&key) {
                known = true;
                let _ = s.flow.handle_packet(now, &packet);
                mark(s, &mut self.dirty, Dir::Send, key, true);
            }
            if let Some(r) = self.receivers.get_mut(&key) {
                known = true;
                let _ = r.flow.handle_packet(now, &packet, ce);
                mark(r, &mut self.dirty, Dir::Recv, key, true);
            }
            if !known {
                self.stats.unknown_flow += 1;
            }
            return;
        }
        let to_receiver = packet.is_sender_to_receiver();
        if to_receiver {
            let mut cookie_ok = false;
            if !self.receivers.contains_key(&key) {
                match (&packet, self.cfg.accept) {
                    (Packet::Hello(h), true) => {
                        cookie_ok = self.check_cookie(src, h, now);
                        if !self.admit_hello(key, h, cookie_ok, now) {
                            return;
                        }
                    }
                    (Packet::Hello(_), false) => {
                        self.stats.unknown_flow += 1;
                        return;
                    }
                    _ => {
                        self.unknown_flow(src, &packet, now);
                        return;
                    }
                }
            } else if let (Packet::Hello(h), true) = (&packet, self.half_open.contains_key(&key)) {
                cookie_ok = self.check_cookie(src, h, now);
            }
            let r = self.receivers.get_mut(&key).expect("present");
            mark(r, &mut self.dirty, Dir::Recv, key, true);
            if matches!(packet, Packet::Data(_)) && !r.flow.ack_hold() {
                // One ACK per receive batch for credit-scheduled data (released in
                // `receive_batch`).
                r.flow.set_ack_hold(true);
                self.ack_holds.push(key);
            }
            if r.flow.handle_packet(now, &packet, ce).is_err() {
                self.stats.rejected_by_flow += 1;
                return;
            }
            if let Some(h) = self.half_open.get_mut(&key) {
                match packet {
                    Packet::Data(_) => self.confirm_receiver(key),
                    Packet::Hello(_) if cookie_ok => self.confirm_receiver(key),
                    // The receiver (re)starts its credits: a new allowance.
                    Packet::Hello(_) | Packet::CreditRequest(_) => {
                        h.credits_left = self.cfg.half_open_credits;
                        h.stopped = false;
                    }
                    _ => {}
                }
            }
        } else {
            match self.senders.get_mut(&key) {
                Some(s) => {
                    // Credits beyond the link's credit rate cannot be used (one frame each):
                    // dropped here, as the sender's switch port would (forged credit floods).
                    if matches!(packet, Packet::Credit(_)) && !self.credit_in.admit(now, 1) {
                        self.stats.credits_in_rate_limited += 1;
                        return;
                    }
                    mark(s, &mut self.dirty, Dir::Send, key, true);
                    if s.flow.handle_packet(now, &packet).is_err() {
                        self.stats.rejected_by_flow += 1;
                    }
                }
                None => self.unknown_flow(src, &packet, now),
            }
        }
    }

    /// The reference cookie (docs/protocol.md §11): slot byte, then 7 bytes of
    /// SHA-256(secret ‖ slot ‖ address ‖ port ‖ flow_id ‖ transport).
    fn cookie(&self, src: SocketAddr, h: &Hello, slot: u8) -> u64 {
        let ip = match src.ip() {
            std::net::IpAddr::V4(a) => a.to_ipv6_mapped(),
            std::net::IpAddr::V6(a) => a,
        };
        let mut d = Sha256::new();
        d.update(self.cookie_secret);
        d.update([slot]);
        d.update(ip.octets());
        d.update(src.port().to_be_bytes());
        d.update(h.flow_id.to_be_bytes());
        d.update([h.transport.to_wire()]);
        let out = d.finalize();
        let mut b = [0u8; 8];
        b[0] = slot;
        b[1..].copy_from_slice(&out[..7]);
        u64::from_be_bytes(b)
    }

    fn cookie_slot(now: Nanos) -> u8 {
        (now / COOKIE_SLOT) as u8
    }

    /// Whether the HELLO carries a cookie this endpoint issued, for this sender and flow, in
    /// the current slot or the previous one (counted).
    fn check_cookie(&mut self, src: SocketAddr, h: &Hello, now: Nanos) -> bool {
        let Some(c) = h.cookie else { return false };
        let slot = (c >> 56) as u8;
        let cur = Self::cookie_slot(now);
        let ok = (slot == cur || slot == cur.wrapping_sub(1)) && self.cookie(src, h, slot) == c;
        if ok {
            self.stats.cookies_valid += 1;
        } else {
            self.stats.cookies_invalid += 1;
        }
        ok
    }

    /// A HELLO for a flow this endpoint does not have: create the receiver (confirmed with a
    /// valid cookie, half-open otherwise) or, under the half-open bound, answer HELLO_ACK
    /// retry with a cookie and keep nothing (or evict, cookies off). Whether it was created.
    fn admit_hello(&mut self, key: FlowKey, h: &Hello, cookie_ok: bool, now: Nanos) -> bool {
        let flows_full = |e: &Self| e.receivers.len() >= e.cfg.max_flows;
        if !cookie_ok {
            // Pressure: the half-open table is full, or the flows are (a forger that also
            // sends data confirms its flows: they leave the half-open table, but not this).
            let full = |e: &Self| e.half_open.len() >= e.cfg.max_half_open || flows_full(e);
            if full(self) && self.cfg.hello_cookies != CookieMode::Always {
                self.expire_half_open(now);
            }
            if self.cfg.hello_cookies == CookieMode::Always
                || (full(self) && self.cfg.hello_cookies == CookieMode::Auto)
            {
                let ack = Packet::HelloAck(HelloAck {
                    flow_id: h.flow_id,
                    transport: h.transport,
                    status: HelloStatus::Retry {
                        cookie: self.cookie(key.0, h, Self::cookie_slot(now)),
                    },
                });
                self.stats.cookies_sent += 1;
                self.transmit(key.0, Transmit::new(ack, h.transport), now);
                return false;
            }
            while full(self) {
                match self.oldest_half_open() {
                    Some(old) => {
                        self.stats.half_open_evicted += 1;
                        self.drop_half_open(old);
                    }
                    None => break,
                }
            }
        }
        if flows_full(self) {
            // As many flows as allowed: busy (the sender fails; a connection falls back).
            self.stats.flows_refused += 1;
            let ack = Packet::HelloAck(HelloAck {
                flow_id: h.flow_id,
                transport: h.transport,
                status: HelloStatus::Refused,
            });
            self.transmit(key.0, Transmit::new(ack, h.transport), now);
            return false;
        }
        let r = match Receiver::new(
            h.flow_id,
            h.transport,
            &self.cfg.receiver_config(h.transport),
        ) {
            Ok(r) => r,
            Err(_) => {
                self.stats.rejected_by_flow += 1;
                return false;
            }
        };
        self.receivers.insert(key, Slot::new(r));
        if let Some(c) = h.conn {
            self.hello_conn.insert(key, c);
        }
        // Connections are handed over at once (their server side answers first); other
        // flows once confirmed.
        let deliver = cookie_ok || h.conn.is_some();
        if deliver {
            self.accepted.push_back(key);
        }
        if !cookie_ok {
            self.half_open.insert(
                key,
                HalfOpen {
                    since: now,
                    credits_left: self.cfg.half_open_credits,
                    stopped: false,
                    delivered: deliver,
                },
            );
            self.half_open_order.push_back((now, key));
            self.stats.half_open = self.half_open.len() as u64;
            self.stats.half_open_peak = self.stats.half_open_peak.max(self.stats.half_open);
        }
        true
    }

    /// The oldest flow still half-open (stale order entries are dropped on the way).
    fn oldest_half_open(&mut self) -> Option<FlowKey> {
        while let Some(&(since, key)) = self.half_open_order.front() {
            if self.half_open.get(&key).is_some_and(|h| h.since == since) {
                return Some(key);
            }
            self.half_open_order.pop_front();
        }
        None
    }

    /// Drop the half-open flows older than the timeout (the table is full).
    fn expire_half_open(&mut self, now: Nanos) {
        while let Some(key) = self.oldest_half_open() {
            let since = self.half_open[&key].since;
            if since + self.cfg.half_open_timeout > now {
                break;
            }
            self.stats.half_open_expired += 1;
            self.drop_half_open(key);
        }
    }

    /// Forget a half-open flow: its sender, if real, is answered RESET if it sends again.
    fn drop_half_open(&mut self, key: FlowKey) {
        self.accepted.retain(|k| *k != key);
        self.close_receiver(key);
    }

    /// The peer of a half-open flow proved to receive what it is sent (its first data, a
    /// cookie, or — for a connection — the answer to the reverse flow's HELLO): the flow
    /// leaves the half-open table, is handed to the application if it was not yet, and
    /// gets its credits again if they were stopped here. No-op for other flows.
    pub fn confirm_receiver(&mut self, key: FlowKey) {
        let Some(h) = self.half_open.remove(&key) else {
            return;
        };
        self.stats.half_open = self.half_open.len() as u64;
        self.stats.half_open_confirmed += 1;
        if !h.delivered {
            self.accepted.push_back(key);
        }
        if h.stopped {
            let now = self.now();
            if let Some(slot) = self.receivers.get_mut(&key) {
                mark(slot, &mut self.dirty, Dir::Recv, key, false);
                let r = &mut slot.flow;
                if !r.is_complete() {
                    let _ = r.handle_packet(
                        now,
                        &Packet::CreditRequest(CreditRequest {
                            flow_id: key.1,
                            pending_bytes: 0,
                        }),
                        false,
                    );
                }
            }
        }
    }

    /// Whether a receiver is half-open (not confirmed yet).
    pub fn is_half_open(&self, key: FlowKey) -> bool {
        self.half_open.contains_key(&key)
    }

    /// Sizes of the endpoint's tables (memory report).
    pub fn table_sizes(&self) -> serde_json::Value {
        serde_json::json!({
            "senders": self.senders.len(), "receivers": self.receivers.len(),
            "half_open": self.half_open.len(), "half_open_order": self.half_open_order.len(),
            "accepted": self.accepted.len(), "retired": self.retired.len(),
            "timers": self.timers.len(), "dirty": self.dirty.len(),
            "forgotten": self.forgotten.len(), "hello_conn": self.hello_conn.len(),
        })
    }

    /// A valid packet for a flow this endpoint does not have: count it; if the flow is one
    /// this endpoint dropped, answer RESET(unknown_flow), rate-limited; never answer a RESET
    /// or a HELLO (protocol.md §7).
    fn unknown_flow(&mut self, src: SocketAddr, packet: &Packet, now: Nanos) {
        self.stats.unknown_flow += 1;
        if matches!(packet, Packet::Reset(_) | Packet::Hello(_))
            || !self.forgotten.contains_key(&(src, packet.flow_id()))
            || !self.reset_limiter.admit(now, 1)
        {
            return;
        }
        let reset = Packet::Reset(Reset {
            flow_id: packet.flow_id(),
            reason: ResetReason::UnknownFlow,
        });
        self.stats.resets_sent += 1;
        self.transmit(src, Transmit::new(reset, TransportKind::FlexPass), now);
    }

    /// One turn of the flows: the due timers (from the deadline heap) and the dirty flows
    /// run, send what they have, and register their next deadline; then the socket's send
    /// batch is flushed. Nothing here looks at flows that are neither due nor dirty.
    fn run_timers_and_flush(&mut self) {
        let now = self.now();
        while self.retired.front().is_some_and(|&(at, _)| at <= now) {
            let (_, key) = self.retired.pop_front().expect("checked");
            self.close_receiver(key);
        }
        while let Some(&(at, key)) = self.forgotten_order.front() {
            if at + FORGOTTEN_MEMORY > now {
                break;
            }
            self.forgotten_order.pop_front();
            if self.forgotten.get(&key) == Some(&at) {
                self.forgotten.remove(&key);
            }
        }
        // Due timers join the dirty flows (stale heap entries are dropped).
        while let Some(((dir, key), timer)) = self.timers.pop_due(now) {
            let timer = Some(timer);
            match dir {
                Dir::Send => {
                    if let Some(s) = self.senders.get_mut(&key).filter(|s| s.timer == timer) {
                        s.timer = None;
                        mark(s, &mut self.dirty, dir, key, true);
                    }
                }
                Dir::Recv => {
                    if let Some(r) = self.receivers.get_mut(&key).filter(|r| r.timer == timer) {
                        r.timer = None;
                        mark(r, &mut self.dirty, dir, key, true);
                    }
                }
            }
        }
        let mut dirty = std::mem::take(&mut self.dirty);
        let Endpoint {
            senders,
            receivers,
            sock,
            shaper,
            emulation,
            stats,
            cfg,
            pacing_errors,
            half_open,
            half_open_shaper,
            timers,
            changed,
            track_changes,
            ..
        } = self;
        let mut tx = Tx {
            sock,
            shaper,
            emulation,
            stats,
            dscp: &cfg.dscp,
        };
        let any_half_open = !half_open.is_empty();
        for &(dir, key) in &dirty {
            let peer = key.0;
            // Registers the flow's next deadline in the heap if it changed.
            let mut arm = |timer: &mut Option<Timer>, next: Option<Timer>| {
                timers.arm(timer, (dir, key), next)
            };
            let (flags, failed) = match dir {
                Dir::Send => {
                    // Closed since it was marked.
                    let Some(slot) = senders.get_mut(&key) else {
                        continue;
                    };
                    let s = &mut slot.flow;
                    if s.poll_timeout().is_some_and(|d| d <= now) {
                        s.handle_timeout(now);
                    }
                    while let Some(t) = s.poll_transmit(now) {
                        tx.send(peer, t, now);
                    }
                    let next = s.poll_timeout().map(|d| (d, false));
                    let failed = s.error().is_some();
                    arm(&mut slot.timer, next);
                    (std::mem::take(&mut slot.dirty), failed)
                }
                Dir::Recv => {
                    let Some(slot) = receivers.get_mut(&key) else {
                        continue;
                    };
                    let r = &mut slot.flow;
                    let due = r.poll_timeout();
                    if due.is_some_and(|d| d <= now) {
                        r.handle_timeout(now);
                    }
                    let mut first_credit = true;
                    let mut ho = None;
                    while let Some(t) = r.poll_transmit(now) {
                        if let Packet::Credit(c) = &t.packet {
                            if first_credit {
                                first_credit = false;
                                if let (Some(d), true) = (due, pacing_errors.len() < PACING_SAMPLES)
                                {
                                    pacing_errors
                                        .push(now.saturating_sub(d).min(u32::MAX as u64) as u32);
                                }
                                // Looked up only for flows that send a credit now.
                                if any_half_open {
                                    ho = half_open.get_mut(&key);
                                }
                            }
                            if let Some(h) = ho.as_deref_mut() {
                                // Half-open: its own allowance, then the half-open share of
                                // the link.
                                h.credits_left = h.credits_left.saturating_sub(1);
                                if h.credits_left == 0 {
                                    let stop = Packet::CreditStop { flow_id: c.flow_id };
                                    let _ = r.handle_packet(now, &stop, false);
                                    h.stopped = true;
                                    tx.stats.half_open_credit_stops += 1;
                                }
                                if !half_open_shaper.admit(now, t.packet.wire_len()) {
                                    tx.stats.half_open_credits_limited += 1;
                                    continue;
                                }
                                tx.stats.half_open_credits_sent += 1;
                            }
                        }
                        tx.send(peer, t, now);
                    }
                    let next = r.poll_timeout().map(|d| (d, r.is_pacing_credits()));
                    arm(&mut slot.timer, next);
                    (std::mem::take(&mut slot.dirty), false)
                }
            };
            if *track_changes && (flags & NET != 0 || failed) {
                changed.push((dir, key));
            }
        }
        tx.flush();
        dirty.clear();
        self.dirty = dirty;
        // Rebuild the heap once stale entries outnumber the flows (amortised O(1) a push).
        let flows = self.senders.len() + self.receivers.len();
        if self.timers.needs_rebuild(flows) {
            self.rebuild_timers();
        }
        let next = self.next_timer();
        self.next_due = next.map(|(d, _)| d);
        self.credit_due = next.is_some_and(|(_, c)| c);
    }

    /// The earliest registered deadline (stale entries at the top are dropped).
    fn next_timer(&mut self) -> Option<Timer> {
        let (senders, receivers) = (&self.senders, &self.receivers);
        self.timers.peek_current(|(dir, key)| match dir {
            Dir::Send => senders.get(&key).and_then(|s| s.timer),
            Dir::Recv => receivers.get(&key).and_then(|r| r.timer),
        })
    }

    fn rebuild_timers(&mut self) {
        let senders = self
            .senders
            .iter()
            .filter_map(|(&k, s)| s.timer.map(|t| ((Dir::Send, k), t)));
        let receivers = self
            .receivers
            .iter()
            .filter_map(|(&k, r)| r.timer.map(|t| ((Dir::Recv, k), t)));
        self.timers.rebuild(senders.chain(receivers));
    }

    /// Heap entries and dirty flows (the scale test and the memory report).
    pub fn timer_entries(&self) -> (usize, usize) {
        (self.timers.len(), self.dirty.len())
    }

    fn transmit(&mut self, peer: SocketAddr, t: Transmit, now: Nanos) {
        Tx {
            sock: &mut self.sock,
            shaper: &mut self.shaper,
            emulation: &mut self.emulation,
            stats: &mut self.stats,
            dscp: &self.cfg.dscp,
        }
        .send(peer, t, now);
    }

    /// Credit pacing error percentiles (p50, p99, max) in ns, also stored in `stats`.
    pub fn pacing_error(&mut self) -> [u64; 3] {
        let mut v = self.pacing_errors.clone();
        if v.is_empty() {
            return [0; 3];
        }
        v.sort_unstable();
        let at = |q: f64| u64::from(v[((v.len() as f64 * q) as usize).min(v.len() - 1)]);
        self.stats.credit_pacing_error_ns =
            [at(0.5), at(0.99), u64::from(*v.last().expect("non-empty"))];
        self.stats.credit_pacing_error_ns
    }

    /// Bytes queued by `write` on a flow.
    pub fn write(&mut self, key: FlowKey, data: Bytes) -> bool {
        self.sender_mut(key).is_some_and(|s| s.write(data))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credit_batches_are_checked_and_deepen_both_credit_shapers() {
        let mut cfg = EndpointConfig::new("127.0.0.1:0".parse().unwrap());
        for bad in [0, flexpass_core::config::MAX_CREDIT_BATCH + 1] {
            cfg.credit_batch = bad;
            let e = cfg.validate().unwrap_err();
            assert!(e.contains("batch"), "{e}");
        }
        cfg.credit_batch = 8;
        let ep = Endpoint::bind(cfg).unwrap();
        assert_eq!(ep.shaper.depth, 16.0 * 92.0);
        assert_eq!(ep.half_open_shaper.depth, 16.0 * 92.0);
    }

    /// docs/mtu-vectors.json (shared with the core, the model and Python): the agent's
    /// credit rates at 1500 and 9000 — its receivers' max_rate (FlexPass at w_q,
    /// ExpressPass at the whole link), its credit shaper and its incoming-credit limit —
    /// and its segment size.
    #[test]
    fn credit_rates_and_segments_follow_the_mtu_vectors() {
        let p =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../docs/mtu-vectors.json");
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap();
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b.abs();
        let mut checked = 0;
        for r in v["credit_rates"].as_array().unwrap() {
            let mtu = r["mtu"].as_u64().unwrap() as usize;
            let link = r["link_bps"].as_f64().unwrap();
            let share = r["share"].as_f64().unwrap();
            let cps = r["credits_per_second"].as_f64().unwrap();
            let bps = r["credit_queue_bps"].as_f64().unwrap();
            let mut cfg = EndpointConfig::new("127.0.0.1:0".parse().unwrap());
            cfg.link_bps = link;
            cfg.mtu = mtu;
            if share == 1.0 {
                let rc = cfg.receiver_config(TransportKind::ExpressPass);
                assert!(close(rc.credit.max_rate, cps), "{r}");
                let mut ep = Endpoint::bind(cfg).unwrap();
                assert!(close(ep.shaper.per_ns * 8e9, bps), "{r}");
                assert!(close(ep.credit_in.per_ns * 1e9, cps), "{r}");
                let peer = ep.local_addr().unwrap();
                let k = ep.open(peer, TransportKind::FlexPass, 0).unwrap();
                ep.write(k, Bytes::from(vec![7u8; 20_000]));
                let s = ep.senders.get_mut(&k).unwrap();
                let now = 0;
                let mut biggest = 0;
                // Past the HELLO: the first-RTT reactive data (FlexPass) fills the MTU.
                s.flow
                    .handle_packet(
                        now,
                        &Packet::HelloAck(HelloAck {
                            flow_id: k.1,
                            transport: TransportKind::FlexPass,
                            status: HelloStatus::Accepted,
                        }),
                    )
                    .unwrap();
                while let Some(t) = s.flow.poll_transmit(now) {
                    if let Packet::Data(d) = &t.packet {
                        biggest = biggest.max(d.payload.len());
                        assert!(t.packet.encoded_len() + 28 <= mtu, "{r}");
                    }
                }
                assert_eq!(biggest, flexpass_wire::max_payload_for_mtu(mtu), "{r}");
            } else {
                cfg.w_q = share;
                let rc = cfg.receiver_config(TransportKind::FlexPass);
                assert!(close(rc.credit.max_rate, cps), "{r}");
            }
            checked += 1;
        }
        assert!(checked >= 4);
    }

    /// The host's emulation queue (FlashPass §III-C, as a switch's Q0 in the profile
    /// `flashpass`): a burst finds two packets' room for over-provisioned (Not-ECT) packets
    /// and eight for ordinary (ECT(0)) ones; afterwards it drains at the link's emulation
    /// share, C·84/(84 + max frame) — one packet per maximum frame of the MTU — and a FlashPass
    /// sender's first emulation rate is exactly that share.
    #[test]
    fn emulation_queue_drops_over_provisioned_above_two_and_drains_at_the_share() {
        for mtu in [1500, 9000] {
            let link = 1e9;
            let mut q = EmulationQueue::new(link, mtu);
            let per_packet = 1e9 * 8.0 * (84 + flexpass_wire::max_frame_wire(mtu)) as f64 / link;
            assert!(q.admit(0, Ecn::NotEct) && q.admit(0, Ecn::NotEct));
            assert!(
                !q.admit(0, Ecn::NotEct),
                "two queued: over-provisioned dropped"
            );
            for _ in 2..EMULATION_QUEUE_PACKETS {
                assert!(q.admit(0, Ecn::Ect0));
            }
            assert!(!q.admit(0, Ecn::Ect0), "eight queued: full");
            // One packet's time later one more fits, ordinary only (seven still queued).
            let t = per_packet.ceil() as Nanos;
            assert!(!q.admit(t, Ecn::NotEct) && q.admit(t, Ecn::Ect0) && !q.admit(t, Ecn::Ect0));
            // Drained to 2.5 queued: an over-provisioned packet is still dropped; at one
            // queued it gets through.
            assert!(!q.admit(t + (5.5 * per_packet) as Nanos, Ecn::NotEct));
            assert!(q.admit(t + (7.0 * per_packet).ceil() as Nanos, Ecn::NotEct));

            let mut cfg = EndpointConfig::new("127.0.0.1:0".parse().unwrap());
            cfg.link_bps = link;
            cfg.mtu = mtu;
            let mut ep = Endpoint::bind(cfg).unwrap();
            let peer = ep.local_addr().unwrap();
            let k = ep.open(peer, TransportKind::FlashPass, 0).unwrap();
            let fp = &ep.sender(k).unwrap().config().flashpass;
            assert!((fp.max_emulation_rate * per_packet / 1e9 - 1.0).abs() < 1e-9);
        }
    }
}
