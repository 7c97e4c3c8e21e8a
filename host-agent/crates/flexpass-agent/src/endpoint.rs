//! One FlexPass endpoint: a UDP socket serving many concurrent flows in both directions,
//! driving the sans-IO core with the real clock. The host's credit rate limit (ExpressPass:
//! "host and switch perform credit rate-limiting") is applied here, like a NIC's Q0.

use crate::socket::TosSocket;
use bytes::Bytes;
use flexpass_core::config::MAX_DATA_WIRE;
use flexpass_core::{
    CreditConfig, Nanos, Receiver, ReceiverConfig, Sender, SenderConfig, Transmit,
};
use flexpass_wire::{DscpPlan, Ecn, Packet, Reset, ResetReason, TransportKind, MIN_ETHERNET_WIRE};
use serde::Serialize;
use std::collections::{HashMap, VecDeque};
use std::io;
use std::net::SocketAddr;
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

/// Datagrams handled between two runs of the timers.
const RECV_BATCH: usize = 16;

#[derive(Clone, Debug)]
pub struct EndpointConfig {
    pub bind: SocketAddr,
    /// Rate of this host's link (bits/s): sets the credit rate limit and max_rate.
    pub link_bps: f64,
    /// w_q: FlexPass credits may fill this share of the link.
    pub w_q: f64,
    /// Floor of the credit feedback update period (the path's base RTT).
    pub base_rtt: Nanos,
    pub dscp: DscpPlan,
    /// Accept incoming flows.
    pub accept: bool,
    /// Template for the flows this endpoint opens.
    pub sender: fn(TransportKind) -> SenderConfig,
    pub seed: u64,
    /// Hybrid sleep/spin: the loop sleeps in ppoll(2) (ns timeout, 1 µs timer slack) until
    /// this close to the next deadline and busy-polls the rest. 0 (default) never spins:
    /// measured on 2 shared cores, spinning costs a core per agent and made pacing worse;
    /// with a dedicated core, 20–50 µs tightens credit pacing further.
    pub spin: Nanos,
}

impl EndpointConfig {
    pub fn new(bind: SocketAddr) -> Self {
        EndpointConfig {
            bind,
            link_bps: 10e9,
            w_q: 0.5,
            base_rtt: 100_000,
            dscp: DscpPlan::default(),
            accept: true,
            sender: SenderConfig::new,
            seed: 0,
            spin: 0,
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
        if self.base_rtt == 0 {
            return Err("base RTT must be > 0".into());
        }
        self.dscp.validate()
    }

    fn receiver_config(&self, t: TransportKind) -> ReceiverConfig {
        let share = if t == TransportKind::FlexPass {
            self.w_q
        } else {
            1.0
        };
        let mut c =
            ReceiverConfig::new(CreditConfig::for_link(self.link_bps, share, self.base_rtt));
        c.seed = self.seed;
        c
    }
}

/// Counters of everything the endpoint refused; the flows themselves are unaffected.
#[derive(Clone, Debug, Default, Serialize)]
pub struct EndpointStats {
    pub datagrams_in: u64,
    pub datagrams_out: u64,
    pub malformed: u64,
    pub unknown_flow: u64,
    pub rejected_by_flow: u64,
    pub credits_rate_limited: u64,
    pub send_errors: u64,
    /// RESET(unknown_flow) answers sent (rate-limited).
    pub resets_sent: u64,
    /// Credit pacing error (actual send time − pacer's due time), ns: p50 / p99 / max over
    /// the credits sent so far (see `Endpoint::pacing_error`).
    pub credit_pacing_error_ns: [u64; 3],
}

/// Keeps at most this many pacing-error samples (the first ones).
const PACING_SAMPLES: usize = 200_000;

/// A flow is named by its peer and the flow id the opening side chose.
pub type FlowKey = (SocketAddr, u32);

/// Token bucket (starts full): the host credit shaper (bytes at the link's credit rate, two
/// credits deep, as Q0) and the RESET rate limit (one token per RESET).
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

    fn admit(&mut self, now: Nanos, len: usize) -> bool {
        self.tokens =
            (self.tokens + now.saturating_sub(self.at) as f64 * self.per_ns).min(self.depth);
        self.at = now;
        if self.tokens >= len as f64 {
            self.tokens -= len as f64;
            true
        } else {
            false
        }
    }
}

pub struct Endpoint {
    sock: TosSocket,
    cfg: EndpointConfig,
    epoch: Instant,
    senders: HashMap<FlowKey, Sender>,
    receivers: HashMap<FlowKey, Receiver>,
    accepted: VecDeque<FlowKey>,
    shaper: TokenBucket,
    /// RESET(unknown_flow) answers (docs/protocol.md §7: "with rate limiting").
    reset_limiter: TokenBucket,
    next_flow_id: u32,
    buf: Vec<u8>,
    out: Vec<u8>,
    pacing_errors: Vec<u32>,
    /// Finished receivers kept to re-acknowledge late retransmissions (like TIME_WAIT).
    retired: VecDeque<(Nanos, FlowKey)>,
    /// Flows this endpoint had and dropped (closed senders, receivers after their linger),
    /// remembered for FORGOTTEN_MEMORY: only their packets are answered with RESET. A packet
    /// of a flow never seen (first-RTT data ahead of its HELLO, a forgery) is just dropped.
    forgotten: HashMap<FlowKey, Nanos>,
    forgotten_order: VecDeque<(Nanos, FlowKey)>,
    pub stats: EndpointStats,
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
        let sock = TosSocket::bind(cfg.bind)?;
        // Wake-ups within 1 µs of the requested time (the default slack is 50 µs).
        let _ = nix::sys::prctl::set_timerslack(1_000);
        // Credits of all flows share the link's full credit rate at most; FlexPass flows
        // additionally stay within w_q through their max_rate (FlexPass §4.1).
        let credit_bps =
            cfg.link_bps * MIN_ETHERNET_WIRE as f64 / (MIN_ETHERNET_WIRE + MAX_DATA_WIRE) as f64;
        let shaper = TokenBucket::new(credit_bps / 8.0, 2.0 * 92.0);
        let seed = cfg.seed;
        Ok(Endpoint {
            sock,
            epoch: Instant::now(),
            senders: HashMap::new(),
            receivers: HashMap::new(),
            accepted: VecDeque::new(),
            shaper,
            reset_limiter: TokenBucket::new(RESETS_PER_SECOND, RESET_BURST),
            next_flow_id: (seed as u32) ^ rand::random::<u32>() | 1,
            buf: vec![0u8; 65_536],
            out: Vec::with_capacity(2048),
            pacing_errors: Vec::new(),
            retired: VecDeque::new(),
            forgotten: HashMap::new(),
            forgotten_order: VecDeque::new(),
            stats: EndpointStats::default(),
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
        let cfg = (self.cfg.sender)(transport);
        let s = Sender::new(id, cfg, size_hint, self.now())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        self.senders.insert((peer, id), s);
        Ok((peer, id))
    }

    pub fn sender(&self, key: FlowKey) -> Option<&Sender> {
        self.senders.get(&key)
    }
    pub fn sender_mut(&mut self, key: FlowKey) -> Option<&mut Sender> {
        self.senders.get_mut(&key)
    }
    pub fn receiver(&self, key: FlowKey) -> Option<&Receiver> {
        self.receivers.get(&key)
    }
    pub fn receiver_mut(&mut self, key: FlowKey) -> Option<&mut Receiver> {
        self.receivers.get_mut(&key)
    }

    /// Forget a flow (after the application is done with it).
    pub fn close_sender(&mut self, key: FlowKey) -> Option<Sender> {
        let s = self.senders.remove(&key)?;
        self.forget(key);
        Some(s)
    }
    pub fn close_receiver(&mut self, key: FlowKey) -> Option<Receiver> {
        let r = self.receivers.remove(&key)?;
        self.forget(key);
        Some(r)
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
        let wait = self
            .next_deadline()
            .map_or(max_wait.as_nanos() as Nanos, |d| d.saturating_sub(now))
            .min(max_wait.as_nanos() as Nanos);
        if wait > self.cfg.spin {
            let mut fds = [nix::poll::PollFd::new(
                self.sock.as_fd(),
                nix::poll::PollFlags::POLLIN,
            )];
            let timeout =
                nix::sys::time::TimeSpec::from_duration(Duration::from_nanos(wait - self.cfg.spin));
            match nix::poll::ppoll(&mut fds, Some(timeout), None) {
                Ok(_) | Err(nix::errno::Errno::EINTR) => {}
                Err(e) => return Err(e.into()),
            }
        }
        // Drain the socket in batches, running due timers (credit pacing) between batches.
        while self.receive_batch(RECV_BATCH)? == RECV_BATCH {
            self.run_timers_and_flush();
        }
        self.run_timers_and_flush();
        Ok(())
    }

    fn next_deadline(&mut self) -> Option<Nanos> {
        let s = self
            .senders
            .values_mut()
            .filter_map(|s| s.poll_timeout())
            .min();
        let r = self
            .receivers
            .values()
            .filter_map(|r| r.poll_timeout())
            .min();
        s.into_iter().chain(r).min()
    }

    /// Receive and dispatch up to `max` datagrams; returns how many were read.
    fn receive_batch(&mut self, max: usize) -> io::Result<usize> {
        for count in 0..max {
            let (n, src, tos) = match self.sock.recv_from(&mut self.buf) {
                Ok(x) => x,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(count),
                Err(e) if e.kind() == io::ErrorKind::InvalidData => {
                    self.stats.malformed += 1;
                    continue;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            self.stats.datagrams_in += 1;
            let packet = match Packet::decode(&self.buf[..n]) {
                Ok(p) => p,
                Err(_) => {
                    self.stats.malformed += 1;
                    continue;
                }
            };
            let ce = Ecn::from_bits(tos) == Ecn::Ce;
            self.dispatch(src, packet, ce);
        }
        Ok(max)
    }

    fn dispatch(&mut self, src: SocketAddr, packet: Packet, ce: bool) {
        let now = self.now();
        let key = (src, packet.flow_id());
        let to_receiver = packet.is_sender_to_receiver();
        if to_receiver {
            if !self.receivers.contains_key(&key) {
                match (&packet, self.cfg.accept) {
                    (Packet::Hello(h), true) => match Receiver::new(
                        h.flow_id,
                        h.transport,
                        &self.cfg.receiver_config(h.transport),
                    ) {
                        Ok(r) => {
                            self.receivers.insert(key, r);
                            self.accepted.push_back(key);
                        }
                        Err(_) => {
                            self.stats.rejected_by_flow += 1;
                            return;
                        }
                    },
                    (Packet::Hello(_), false) => {
                        self.stats.unknown_flow += 1;
                        return;
                    }
                    _ => {
                        self.unknown_flow(src, &packet, now);
                        return;
                    }
                }
            }
            let r = self.receivers.get_mut(&key).expect("present");
            if r.handle_packet(now, &packet, ce).is_err() {
                self.stats.rejected_by_flow += 1;
            }
        } else {
            match self.senders.get_mut(&key) {
                Some(s) => {
                    if s.handle_packet(now, &packet).is_err() {
                        self.stats.rejected_by_flow += 1;
                    }
                }
                None => self.unknown_flow(src, &packet, now),
            }
        }
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
        let mut out: Vec<(SocketAddr, Transmit)> = Vec::new();
        for (&(peer, _), s) in self.senders.iter_mut() {
            if s.poll_timeout().is_some_and(|d| d <= now) {
                s.handle_timeout(now);
            }
            while let Some(t) = s.poll_transmit(now) {
                out.push((peer, t));
            }
        }
        for (&(peer, _), r) in self.receivers.iter_mut() {
            let due = r.poll_timeout();
            if due.is_some_and(|d| d <= now) {
                r.handle_timeout(now);
            }
            let mut first_credit = true;
            while let Some(t) = r.poll_transmit(now) {
                if first_credit && matches!(t.packet, Packet::Credit(_)) {
                    first_credit = false;
                    if let (Some(d), true) = (due, self.pacing_errors.len() < PACING_SAMPLES) {
                        self.pacing_errors
                            .push(now.saturating_sub(d).min(u32::MAX as u64) as u32);
                    }
                }
                out.push((peer, t));
            }
        }
        for (peer, t) in out {
            self.transmit(peer, t, now);
        }
    }

    fn transmit(&mut self, peer: SocketAddr, t: Transmit, now: Nanos) {
        if matches!(t.packet, Packet::Credit(_)) && !self.shaper.admit(now, t.packet.wire_len()) {
            self.stats.credits_rate_limited += 1;
            return;
        }
        self.out.clear();
        t.packet.encode(&mut self.out);
        let tos = self.cfg.dscp.tos(t.class, t.ecn);
        match self.sock.send_to(&self.out, peer, tos) {
            Ok(_) => self.stats.datagrams_out += 1,
            // A full socket buffer or an unreachable peer drops the datagram, as a NIC
            // would; the transport recovers it like any other loss.
            Err(_) => self.stats.send_errors += 1,
        }
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
        self.senders.get_mut(&key).is_some_and(|s| s.write(data))
    }
}
