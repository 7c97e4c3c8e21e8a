//! Switch / NIC egress port with the FlexPass queue semantics (FlexPass §4.1, ExpressPass §3.1):
//!
//! - Q0 (credits): strict priority, shaped by a token bucket to `credit_rate_bps` with a
//!   burst of two credits, buffer of `credit_capacity` credits (8); excess credits dropped.
//! - Q1 (FlexPass data + control) and Q2 (legacy): DWRR with weights w_q and 1 − w_q.
//! - ECN: a data packet that finds its queue above that queue's K at enqueue is CE-marked
//!   (if ECN-capable).
//! - Selective dropping: a red (reactive) packet that finds Q1 above `red_threshold` is dropped;
//!   green packets are dropped only when the buffer refuses them.
//! - Buffer: a per-port data buffer, or the switch's shared buffer with a dynamic threshold
//!   per queue (`SharedBuffer`, Broadcom-style: a queue may hold α × the free buffer).
//!
//! The four profiles are the deployment schemes of FlexPass §6.2: `FlexPass`; `Owf` (oracle
//! weighted fair: the same two data queues, weight and credit rate from the true fraction of
//! ExpressPass traffic, no red packets); `Naive` (ExpressPass data and legacy traffic share one
//! data queue, credits shaped to the full link's credit rate) and `Layering` (the naive
//! queues; the hosts add a DCTCP window on top of ExpressPass).
//!
//! The fifth profile, `Ppt`, is PPT's switch (SIGCOMM'24 §4.2, §5): eight strict-priority
//! queues, Q0 (P0) served first, each with its own ECN threshold K (PPT Eq. 3, K = λ·C·RTT:
//! λ 0.17 for the HCP queues P0–P3, 0.1 for the LCP queues P4–P7) and one data buffer per
//! port (or the shared buffer) for all eight. A `Priority(p)` packet goes to queue p; any
//! other class (legacy DCTCP) to Q3, the HCP priority of large flows.
//!
//! The sixth, `PFabric`, is pFabric's switch (SIGCOMM'13 §4.1; `queue/pfabric.rs`): one
//! small queue (Q1) served highest priority first, dropping the lowest priority when full.

use flexpass_wire::{Ecn, Packet, TrafficClass};
use serde::Serialize;
use std::collections::VecDeque;

use crate::packet::SimPacket;
use flexpass_core::Nanos;

/// Queues of a FlexPass-family port: Q0 credits, Q1 FlexPass, Q2 legacy.
pub const NUM_QUEUES: usize = 3;
/// Queues a port can have: the eight priorities of the PPT profile.
pub const MAX_QUEUES: usize = flexpass_wire::PRIORITY_LEVELS;
/// PPT profile: the queue of traffic without a PPT priority (legacy DCTCP), P3.
pub const PPT_LEGACY_QUEUE: usize = 3;
/// FlashPass profile with `feedback_priority`: the control packets' queue (the profile has
/// one data queue, Q1, so Q2 is free).
pub const FEEDBACK_QUEUE: usize = 2;
/// PPT profile: the LCP's queues P4–P7 (the HCP's are P0–P3).
pub const PPT_LCP_QUEUES: std::ops::Range<usize> = 4..MAX_QUEUES;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Profile {
    /// Q0 credits (w_q of the credit rate), Q1 FlexPass data (w_q), Q2 legacy (1 − w_q);
    /// red (reactive) packets dropped above the selective-drop threshold.
    FlexPass,
    /// ExpressPass as originally deployed: credits at full rate, one shared data queue.
    Naive,
    /// Oracle weighted fair: ExpressPass data in Q1 and legacy in Q2 under DWRR, weight and
    /// credit rate set in advance from the true fraction of ExpressPass traffic.
    Owf,
    /// Layering: the naive queues; the hosts' ExpressPass senders keep a DCTCP window.
    Layering,
    /// PPT (SIGCOMM'24): eight strict-priority queues with per-queue ECN, no credits.
    Ppt,
    /// FlashPass (WAN): Q0 is the emulation queue (shaped to C·84/(84 + 1538), 8 packets,
    /// single threshold: Not-ECT emulation packets dropped above `emulation_threshold`), one
    /// data queue Q1 for everything else (FlashPass, ExpressPass and Cubic data) with red
    /// (unscheduled, Aeolus) packets dropped above the selective-drop threshold.
    FlashPass,
    /// pFabric (SIGCOMM'13): every packet in one queue (Q1), the highest priority (the
    /// smallest PRIO field) served first, the lowest dropped when the buffer is full; no ECN.
    PFabric,
}

impl Profile {
    pub const ALL: [Profile; 7] = [
        Profile::FlexPass,
        Profile::Naive,
        Profile::Owf,
        Profile::Layering,
        Profile::Ppt,
        Profile::FlashPass,
        Profile::PFabric,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Profile::FlexPass => "flexpass",
            Profile::Naive => "naive",
            Profile::Owf => "owf",
            Profile::Layering => "layering",
            Profile::Ppt => "ppt",
            Profile::FlashPass => "flashpass",
            Profile::PFabric => "pfabric",
        }
    }

    /// Queues of a port: 3 (credits, FlexPass, legacy) or 8 strict priorities (PPT).
    pub fn num_queues(self) -> usize {
        match self {
            Profile::Ppt => MAX_QUEUES,
            _ => NUM_QUEUES,
        }
    }

    /// The queues that hold data (and count against the data buffer): Q1–Q2, or all eight.
    pub fn data_queues(self) -> std::ops::Range<usize> {
        match self {
            Profile::Ppt => 0..MAX_QUEUES,
            _ => 1..NUM_QUEUES,
        }
    }

    /// Legacy traffic has its own queue (Q2) next to the credit-scheduled data (Q1).
    pub fn separates_legacy(self) -> bool {
        matches!(self, Profile::FlexPass | Profile::Owf)
    }
}

impl std::str::FromStr for Profile {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Profile::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| {
                format!(
                    "unknown profile '{s}' (flexpass, naive, owf, layering, ppt, flashpass, pfabric)"
                )
            })
    }
}

/// Where a port's data packets are buffered.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum BufferLimit {
    /// A data buffer of its own, bytes (Q1 + Q2).
    PerPort { bytes: u64 },
    /// The node's shared buffer (`SharedBuffer`) with its dynamic threshold.
    Shared,
}

/// A switch's shared packet buffer with Broadcom-style dynamic thresholds (Choudhury and
/// Hahne; FlexPass §6.2 "a 4.5 MB shared buffer … egress dynamic buffer threshold 1/4"):
/// a data queue may grow while its bytes stay within α × (size − bytes in use by all queues).
#[derive(Clone, Debug, Serialize)]
pub struct SharedBuffer {
    pub size: u64,
    pub alpha: f64,
    pub used: u64,
    pub max_used: u64,
}

impl SharedBuffer {
    pub fn new(size: u64, alpha: f64) -> Self {
        SharedBuffer {
            size,
            alpha,
            used: 0,
            max_used: 0,
        }
    }

    /// May a queue holding `queue_bytes` take `len` more bytes?
    pub fn admits(&self, queue_bytes: u64, len: u64) -> bool {
        let free = self.size.saturating_sub(self.used);
        len <= free && (queue_bytes + len) as f64 <= self.alpha * free as f64
    }

    fn take(&mut self, len: u64) {
        self.used += len;
        self.max_used = self.max_used.max(self.used);
    }

    fn release(&mut self, len: u64) {
        self.used -= len;
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct PortConfig {
    pub profile: Profile,
    pub link_bps: f64,
    /// w_q: DWRR weight of Q1 (Q2 gets 1 − w_q).
    pub w_q: f64,
    /// Q0 shaping rate in bits/s (w_q·C·84/(84+1538) for FlexPass, C·84/(84+1538) naive).
    pub credit_rate_bps: f64,
    /// Q0 token bucket depth in bytes (two credits).
    pub credit_burst_bytes: f64,
    /// Q0 buffer in credits.
    pub credit_capacity: usize,
    /// ECN marking threshold K per queue, bytes (u64::MAX: never); the profile's first
    /// `num_queues()` entries are used.
    pub ecn_k: [u64; MAX_QUEUES],
    /// ECN compares K with the bytes of the packet's queue (false) or of every data queue of
    /// the port (true: PPT §3.2, an opportunistic packet "will be marked with ECN if buffer
    /// occupancy is greater than a predefined threshold upon its arrival"; with K_LCP <
    /// K_HCP < buffer the LCP is told to stop before the HCP, and both before drops).
    pub ecn_on_port: bool,
    /// PPT profile: an LCP packet (P4–P7) that would take the port's data bytes beyond this
    /// is dropped (counted as `dropped_red`); u64::MAX: never.
    pub lcp_drop: u64,
    /// PPT profile, priority-aware admission (push-out): an HCP packet (P0–P3) that finds the
    /// port's buffer full evicts queued LCP packets (P4–P7), lowest priority and latest
    /// arrival first, until it fits, so LCP packets never take buffer an HCP packet needs
    /// (per-port buffers only). false: drop-tail for every priority (the paper's switch).
    pub lcp_pushout: bool,
    /// Selective-drop threshold for red packets in Q1, bytes.
    pub red_threshold: u64,
    /// The threshold is compared with the red bytes in Q1 only (the FlexPass artifact's
    /// counter), not with Q1's depth.
    pub red_counts_red_only: bool,
    /// FlashPass profile: Q0's single threshold in packets (usize::MAX: none).
    pub emulation_threshold: usize,
    /// FlashPass profile: control packets go to Q2 (otherwise unused), served with strict
    /// priority after Q0 and before the data queue Q1, with a buffer of its own the size of
    /// the port's data buffer (per-port buffers; unbounded beside a shared buffer): a
    /// reserved queue, FlashPass footnote 4.
    pub feedback_priority: bool,
    /// Data buffer of the port.
    pub buffer: BufferLimit,
}

impl PortConfig {
    /// The profile's queue for a traffic class.
    pub fn queue_of(&self, class: TrafficClass) -> usize {
        if self.profile == Profile::Ppt {
            return class.priority().map_or(PPT_LEGACY_QUEUE, usize::from);
        }
        if self.profile == Profile::PFabric {
            return pfabric::QUEUE;
        }
        match class {
            TrafficClass::Credit => 0,
            TrafficClass::Legacy if self.profile.separates_legacy() => 2,
            TrafficClass::Control if self.feedback_priority => FEEDBACK_QUEUE,
            _ => 1,
        }
    }

    /// Red packets are subject to selective dropping (FlexPass profile only).
    pub fn is_red(&self, class: TrafficClass) -> bool {
        matches!(self.profile, Profile::FlexPass | Profile::FlashPass)
            && class == TrafficClass::ReactiveData
    }

    fn quantum(&self, q: usize) -> f64 {
        // Quanta proportional to the weights; the larger one is two maximum frames.
        let (w1, w2) = if self.profile.separates_legacy() {
            (self.w_q, 1.0 - self.w_q)
        } else {
            (1.0, 0.0)
        };
        let scale = 2.0 * 1538.0 / w1.max(w2);
        match q {
            1 => w1 * scale,
            2 => w2 * scale,
            _ => 0.0,
        }
    }
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct QueueStats {
    pub enqueued: u64,
    pub dequeued_bytes: u64,
    pub ecn_marked: u64,
    /// Dropped because the queue (Q0) or port buffer was full.
    pub dropped_full: u64,
    /// Of `dropped_full` in a data queue, packets without payload (ACKs, EMULATION_CREDITs and
    /// other control messages, which share the data queue).
    #[serde(skip_serializing_if = "is_zero")]
    pub dropped_full_control: u64,
    /// PPT profile: of `dropped_full`, packets refused while lower-priority queues of the
    /// port held bytes (strict priority never lets those delay this packet on the wire, but
    /// they took the buffer it needed).
    #[serde(skip_serializing_if = "is_zero")]
    pub dropped_full_lower_held: u64,
    /// Of those, HCP packets (P0–P3) refused while LCP queues (P4–P7) held bytes.
    #[serde(skip_serializing_if = "is_zero")]
    pub dropped_full_lcp_held: u64,
    /// PPT profile, HCP queues (P0–P3): packets that arrived while an LCP frame (P4–P7) was
    /// on the wire (strict priority does not preempt a frame in transmission), and the
    /// longest such wait, ns: at most one frame's serialization.
    #[serde(skip_serializing_if = "is_zero")]
    pub arrived_behind_lcp: u64,
    #[serde(skip_serializing_if = "is_zero")]
    pub max_wait_behind_lcp_ns: u64,
    /// Red packets dropped by selective dropping.
    pub dropped_red: u64,
    /// PPT push-out: queued LCP packets evicted to admit an HCP packet. pFabric: queued
    /// packets of the lowest priority dropped to admit a higher-priority one.
    #[serde(skip_serializing_if = "is_zero")]
    pub dropped_pushout: u64,
    /// Packets lost to a failed link (held by the port when it failed, or routed to it
    /// before the routes were recomputed).
    pub dropped_link: u64,
    pub max_bytes: u64,
    pub max_packets: usize,
}

/// What a port was asked to take, and what it did with it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    /// The credit queue (Q0) was full.
    CreditQueueFull,
    /// The port's buffer, or the shared buffer's dynamic threshold, refused the packet.
    BufferFull,
    /// A red packet found Q1 at the selective-drop threshold.
    SelectiveDrop,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Enqueued {
    Accepted,
    Dropped(Refused),
}

pub enum Dequeued {
    /// The packet and what the port needs of it (known without touching the packet, which
    /// has waited in the queue long enough to leave the cache).
    Packet(Box<SimPacket>, Head),
    /// Only shaped credits are waiting: try again at this time.
    WaitUntil(Nanos),
    Empty,
}

/// A dequeued packet's fields that the port reads.
#[derive(Clone, Copy, Debug)]
pub struct Head {
    pub wire_len: u32,
    /// `SimPacket::short_dst`.
    pub dst: u16,
}

/// A queued packet with what dequeuing needs from it (16 bytes).
struct Queued {
    pkt: Box<SimPacket>,
    wire_len: u32,
    dst: u16,
    red: bool,
}

impl Queued {
    fn new(pkt: Box<SimPacket>, red: bool) -> Self {
        Queued {
            wire_len: pkt.wire_len,
            dst: pkt.short_dst(),
            pkt,
            red,
        }
    }

    fn dequeued(self) -> Dequeued {
        let head = Head {
            wire_len: self.wire_len,
            dst: self.dst,
        };
        Dequeued::Packet(self.pkt, head)
    }
}

const _: () = assert!(std::mem::size_of::<Queued>() == 16);

/// Laid out hot fields first (`repr(C)`, after the port's own: see `net::Port`).
#[repr(C)]
pub struct PortQueue {
    bytes: [u64; MAX_QUEUES],
    /// Red (reactive) bytes in Q1.
    red_bytes: u64,
    tokens: f64,
    tokens_at: Nanos,
    deficit: [f64; NUM_QUEUES],
    /// `cfg.quantum(q)` of each queue.
    quanta: [f64; NUM_QUEUES],
    /// DWRR pointer (1 or 2) and whether it already got its quantum this visit.
    current: usize,
    credited: bool,
    /// PPT profile: the queue of the frame last put on the wire and when its transmission
    /// ends.
    on_wire: (usize, Nanos),
    pub cfg: PortConfig,
    queues: [VecDeque<Queued>; MAX_QUEUES],
    stats: [QueueStats; MAX_QUEUES],
}

impl PortQueue {
    pub fn new(cfg: PortConfig) -> Self {
        let quanta = [0, 1, 2].map(|q| cfg.quantum(q));
        PortQueue {
            tokens: cfg.credit_burst_bytes,
            cfg,
            queues: Default::default(),
            bytes: [0; MAX_QUEUES],
            red_bytes: 0,
            stats: Default::default(),
            tokens_at: 0,
            deficit: [0.0; NUM_QUEUES],
            quanta,
            current: 1,
            credited: false,
            on_wire: (0, 0),
        }
    }

    /// `enqueue` at time `now`: on a PPT port, an HCP packet arriving while an LCP frame is
    /// still on the wire counts the time it waits for that frame.
    pub fn enqueue_at(
        &mut self,
        now: Nanos,
        pkt: Box<SimPacket>,
        shared: Option<&mut SharedBuffer>,
    ) -> Enqueued {
        if self.cfg.profile == Profile::Ppt {
            let q = self.cfg.queue_of(pkt.class);
            let (wire_q, end) = self.on_wire;
            let r = self.enqueue(pkt, shared);
            if r == Enqueued::Accepted
                && q < PPT_LCP_QUEUES.start
                && wire_q >= PPT_LCP_QUEUES.start
                && end > now
            {
                let st = &mut self.stats[q];
                st.arrived_behind_lcp += 1;
                st.max_wait_behind_lcp_ns = st.max_wait_behind_lcp_ns.max(end - now);
            }
            return r;
        }
        self.enqueue(pkt, shared)
    }

    pub fn bytes(&self, q: usize) -> u64 {
        self.bytes[q]
    }

    /// Counters of the profile's queues.
    pub fn stats(&self) -> &[QueueStats] {
        &self.stats[..self.cfg.profile.num_queues()]
    }

    /// Red (reactive) bytes waiting in Q1.
    pub fn red_bytes(&self) -> u64 {
        self.red_bytes
    }

    /// Every queued packet has bytes on the wire, so `bytes` (first cache line) tells
    /// without touching the queues.
    pub fn is_empty(&self) -> bool {
        let empty = self.bytes.iter().fold(0, |a, &b| a | b) == 0;
        debug_assert_eq!(empty, self.queues.iter().all(|q| q.is_empty()));
        empty
    }

    /// The queues that share the data buffer: the profile's, less a feedback queue (which has
    /// its own).
    fn data_queues(&self) -> std::ops::Range<usize> {
        if self.cfg.feedback_priority {
            1..FEEDBACK_QUEUE
        } else {
            self.cfg.profile.data_queues()
        }
    }

    fn data_bytes(&self) -> u64 {
        self.bytes[self.data_queues()].iter().sum()
    }

    fn is_data_queue(&self, q: usize) -> bool {
        self.data_queues().contains(&q)
    }

    /// Admit `pkt` (or refuse it and count why). `shared` is the node's shared buffer when
    /// the port's buffer is `BufferLimit::Shared`.
    pub fn enqueue(
        &mut self,
        mut pkt: Box<SimPacket>,
        shared: Option<&mut SharedBuffer>,
    ) -> Enqueued {
        if self.cfg.profile == Profile::PFabric {
            return self.pfabric_enqueue(pkt);
        }
        let q = self.cfg.queue_of(pkt.class);
        let len = u64::from(pkt.wire_len);
        let data_bytes = self.data_bytes();
        let red = self.cfg.is_red(pkt.class);
        let data = self.is_data_queue(q);
        if self.cfg.feedback_priority && q == FEEDBACK_QUEUE {
            // A reserved queue: a port buffer of its own, not shared with data.
            let limit = match self.cfg.buffer {
                BufferLimit::PerPort { bytes } => bytes,
                BufferLimit::Shared => u64::MAX,
            };
            if self.bytes[q] + len > limit {
                self.stats[q].dropped_full += 1;
                self.stats[q].dropped_full_control += 1;
                return Enqueued::Dropped(Refused::BufferFull);
            }
        } else if !data {
            if self.queues[0].len() >= self.cfg.credit_capacity {
                self.stats[q].dropped_full += 1;
                return Enqueued::Dropped(Refused::CreditQueueFull);
            }
            // FlashPass §III-C: RED/ECN with one threshold repurposed for selective dropping.
            if self.queues[0].len() >= self.cfg.emulation_threshold {
                if pkt.ecn == Ecn::NotEct {
                    self.stats[q].dropped_red += 1;
                    return Enqueued::Dropped(Refused::SelectiveDrop);
                }
                if pkt.ecn != Ecn::Ce {
                    self.stats[q].ecn_marked += 1;
                }
                pkt.ecn = Ecn::Ce;
            }
        } else {
            let mut fits = match (self.cfg.buffer, shared.as_deref()) {
                (BufferLimit::PerPort { bytes }, _) => data_bytes + len <= bytes,
                (BufferLimit::Shared, Some(b)) => b.admits(self.bytes[q], len),
                (BufferLimit::Shared, None) => false,
            };
            let hcp = self.cfg.profile == Profile::Ppt && q < PPT_LCP_QUEUES.start;
            if let (false, true, true, BufferLimit::PerPort { bytes }) =
                (fits, hcp, self.cfg.lcp_pushout, self.cfg.buffer)
            {
                fits = self.push_out_lcp(bytes.saturating_sub(len));
            }
            let data_bytes = self.data_bytes();
            let st = &mut self.stats[q];
            if !fits {
                st.dropped_full += 1;
                if !matches!(pkt.packet, Packet::Data(_)) {
                    st.dropped_full_control += 1;
                }
                if self.cfg.profile == Profile::Ppt && self.bytes[q + 1..].iter().any(|&b| b > 0) {
                    st.dropped_full_lower_held += 1;
                    if q < PPT_LCP_QUEUES.start && self.bytes[PPT_LCP_QUEUES].iter().any(|&b| b > 0)
                    {
                        st.dropped_full_lcp_held += 1;
                    }
                }
                return Enqueued::Dropped(Refused::BufferFull);
            }
            let lcp = self.cfg.profile == Profile::Ppt && PPT_LCP_QUEUES.contains(&q);
            if lcp && data_bytes + len > self.cfg.lcp_drop {
                st.dropped_red += 1;
                return Enqueued::Dropped(Refused::SelectiveDrop);
            }
            let red_depth = if self.cfg.red_counts_red_only {
                self.red_bytes
            } else {
                self.bytes[q]
            };
            if red && red_depth >= self.cfg.red_threshold {
                st.dropped_red += 1;
                return Enqueued::Dropped(Refused::SelectiveDrop);
            }
            let occupancy = if self.cfg.ecn_on_port {
                data_bytes
            } else {
                self.bytes[q]
            };
            if occupancy > self.cfg.ecn_k[q] && pkt.ecn != Ecn::NotEct {
                if pkt.ecn != Ecn::Ce {
                    st.ecn_marked += 1;
                }
                pkt.ecn = Ecn::Ce;
            }
            if let (BufferLimit::Shared, Some(b)) = (self.cfg.buffer, shared) {
                b.take(len);
            }
            if red {
                self.red_bytes += len;
            }
        }
        let st = &mut self.stats[q];
        st.enqueued += 1;
        self.bytes[q] += len;
        self.queues[q].push_back(Queued::new(pkt, red));
        st.max_bytes = st.max_bytes.max(self.bytes[q]);
        st.max_packets = st.max_packets.max(self.queues[q].len());
        Enqueued::Accepted
    }

    /// Push-out: evict queued LCP packets (lowest priority, latest arrival first) until the
    /// port's data bytes are at most `limit`; false if the LCP queues cannot free enough
    /// (then nothing is evicted).
    fn push_out_lcp(&mut self, limit: u64) -> bool {
        let data = self.data_bytes();
        let lcp: u64 = self.bytes[PPT_LCP_QUEUES].iter().sum();
        if data.saturating_sub(lcp) > limit {
            return false;
        }
        let mut data = data;
        for lq in PPT_LCP_QUEUES.rev() {
            while data > limit {
                let Some(p) = self.queues[lq].pop_back() else {
                    break;
                };
                let l = u64::from(p.wire_len);
                self.bytes[lq] -= l;
                data -= l;
                self.stats[lq].dropped_pushout += 1;
            }
        }
        true
    }

    fn pop(&mut self, q: usize, shared: Option<&mut SharedBuffer>) -> Dequeued {
        let head = self.queues[q]
            .pop_front()
            .expect("caller checked non-empty");
        let (len, red) = (u64::from(head.wire_len), head.red);
        self.bytes[q] -= len;
        self.stats[q].dequeued_bytes += len;
        if self.is_data_queue(q) {
            if let (BufferLimit::Shared, Some(b)) = (self.cfg.buffer, shared) {
                b.release(len);
            }
            if red {
                self.red_bytes -= len;
            }
        }
        head.dequeued()
    }

    fn refill(&mut self, now: Nanos) {
        let dt = now.saturating_sub(self.tokens_at) as f64 * 1e-9;
        self.tokens =
            (self.tokens + dt * self.cfg.credit_rate_bps / 8.0).min(self.cfg.credit_burst_bytes);
        self.tokens_at = now;
    }

    /// The link failed: everything queued is lost.
    pub fn flush(&mut self, mut shared: Option<&mut SharedBuffer>) {
        for q in 0..self.cfg.profile.num_queues() {
            while let Some(len) = self.queues[q].front().map(|h| h.wire_len) {
                self.pop(q, shared.as_deref_mut());
                self.stats[q].dropped_link += 1;
                self.stats[q].dequeued_bytes -= u64::from(len);
            }
        }
    }

    /// A packet routed to this port while its link is down.
    pub fn count_link_drop(&mut self, pkt: &SimPacket) {
        self.stats[self.cfg.queue_of(pkt.class)].dropped_link += 1;
    }

    /// Next packet to put on the wire at `now`.
    pub fn dequeue(&mut self, now: Nanos, shared: Option<&mut SharedBuffer>) -> Dequeued {
        if self.cfg.profile == Profile::PFabric {
            return self.pfabric_dequeue();
        }
        if self.cfg.profile == Profile::Ppt {
            // Strict priority: the lowest non-empty queue (P0 first).
            return match (0..MAX_QUEUES).find(|&q| !self.queues[q].is_empty()) {
                Some(q) => {
                    let popped = self.pop(q, shared);
                    if let Dequeued::Packet(_, head) = popped {
                        let ser =
                            (f64::from(head.wire_len) * 8.0 / self.cfg.link_bps * 1e9).round();
                        self.on_wire = (q, now + ser as Nanos);
                    }
                    popped
                }
                None => Dequeued::Empty,
            };
        }
        let mut credit_wait = None;
        if let Some(need) = self.queues[0].front().map(|h| f64::from(h.wire_len)) {
            self.refill(now);
            if self.tokens >= need {
                self.tokens -= need;
                return self.pop(0, None);
            }
            let wait_s = (need - self.tokens) * 8.0 / self.cfg.credit_rate_bps;
            credit_wait = Some(now + (wait_s * 1e9).ceil() as Nanos);
        }
        if self.cfg.feedback_priority && !self.queues[FEEDBACK_QUEUE].is_empty() {
            return self.pop(FEEDBACK_QUEUE, shared);
        }
        if self.queues[1].is_empty() && self.queues[2].is_empty() {
            return credit_wait.map_or(Dequeued::Empty, Dequeued::WaitUntil);
        }
        // DWRR over Q1/Q2: a queue's deficit grows by its quantum once per visit and pays for
        // the packets it sends; an empty queue forfeits its deficit.
        loop {
            let q = self.current;
            if self.queues[q].is_empty() {
                self.deficit[q] = 0.0;
                self.advance();
                continue;
            }
            if !self.credited {
                self.deficit[q] += self.quanta[q];
                self.credited = true;
            }
            let need = f64::from(self.queues[q].front().expect("non-empty").wire_len);
            if self.deficit[q] >= need {
                self.deficit[q] -= need;
                return self.pop(q, shared);
            }
            self.advance();
        }
    }

    fn advance(&mut self) {
        self.current = if self.current == 1 { 2 } else { 1 };
        self.credited = false;
    }
}

mod pfabric;
#[cfg(test)]
mod tests;
