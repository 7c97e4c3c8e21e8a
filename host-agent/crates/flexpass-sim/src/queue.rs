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
}

impl Profile {
    pub const ALL: [Profile; 6] = [
        Profile::FlexPass,
        Profile::Naive,
        Profile::Owf,
        Profile::Layering,
        Profile::Ppt,
        Profile::FlashPass,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Profile::FlexPass => "flexpass",
            Profile::Naive => "naive",
            Profile::Owf => "owf",
            Profile::Layering => "layering",
            Profile::Ppt => "ppt",
            Profile::FlashPass => "flashpass",
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
                format!("unknown profile '{s}' (flexpass, naive, owf, layering, ppt, flashpass)")
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
    /// PPT push-out: queued LCP packets evicted to admit an HCP packet.
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
    Packet(Box<SimPacket>),
    /// Only shaped credits are waiting: try again at this time.
    WaitUntil(Nanos),
    Empty,
}

pub struct PortQueue {
    pub cfg: PortConfig,
    queues: [VecDeque<Box<SimPacket>>; MAX_QUEUES],
    bytes: [u64; MAX_QUEUES],
    /// Red (reactive) bytes in Q1.
    red_bytes: u64,
    stats: [QueueStats; MAX_QUEUES],
    tokens: f64,
    tokens_at: Nanos,
    deficit: [f64; NUM_QUEUES],
    /// DWRR pointer (1 or 2) and whether it already got its quantum this visit.
    current: usize,
    credited: bool,
    /// PPT profile: the queue of the frame last put on the wire and when its transmission
    /// ends.
    on_wire: (usize, Nanos),
}

impl PortQueue {
    pub fn new(cfg: PortConfig) -> Self {
        PortQueue {
            tokens: cfg.credit_burst_bytes,
            cfg,
            queues: Default::default(),
            bytes: [0; MAX_QUEUES],
            red_bytes: 0,
            stats: Default::default(),
            tokens_at: 0,
            deficit: [0.0; NUM_QUEUES],
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

    pub fn is_empty(&self) -> bool {
        self.queues.iter().all(|q| q.is_empty())
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
        self.queues[q].push_back(pkt);
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

    fn pop(&mut self, q: usize, shared: Option<&mut SharedBuffer>) -> Box<SimPacket> {
        let pkt = self.queues[q]
            .pop_front()
            .expect("caller checked non-empty");
        let len = u64::from(pkt.wire_len);
        self.bytes[q] -= len;
        self.stats[q].dequeued_bytes += len;
        if self.is_data_queue(q) {
            if let (BufferLimit::Shared, Some(b)) = (self.cfg.buffer, shared) {
                b.release(len);
            }
            if self.cfg.is_red(pkt.class) {
                self.red_bytes -= len;
            }
        }
        pkt
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
            while !self.queues[q].is_empty() {
                let p = self.pop(q, shared.as_deref_mut());
                self.stats[q].dropped_link += 1;
                self.stats[q].dequeued_bytes -= u64::from(p.wire_len);
            }
        }
    }

    /// A packet routed to this port while its link is down.
    pub fn count_link_drop(&mut self, pkt: &SimPacket) {
        self.stats[self.cfg.queue_of(pkt.class)].dropped_link += 1;
    }

    /// Next packet to put on the wire at `now`.
    pub fn dequeue(&mut self, now: Nanos, shared: Option<&mut SharedBuffer>) -> Dequeued {
        if self.cfg.profile == Profile::Ppt {
            // Strict priority: the lowest non-empty queue (P0 first).
            return match (0..MAX_QUEUES).find(|&q| !self.queues[q].is_empty()) {
                Some(q) => {
                    let pkt = self.pop(q, shared);
                    let ser = (f64::from(pkt.wire_len) * 8.0 / self.cfg.link_bps * 1e9).round();
                    self.on_wire = (q, now + ser as Nanos);
                    Dequeued::Packet(pkt)
                }
                None => Dequeued::Empty,
            };
        }
        let mut credit_wait = None;
        if let Some(need) = self.queues[0].front().map(|h| f64::from(h.wire_len)) {
            self.refill(now);
            if self.tokens >= need {
                self.tokens -= need;
                return Dequeued::Packet(self.pop(0, None));
            }
            let wait_s = (need - self.tokens) * 8.0 / self.cfg.credit_rate_bps;
            credit_wait = Some(now + (wait_s * 1e9).ceil() as Nanos);
        }
        if self.cfg.feedback_priority && !self.queues[FEEDBACK_QUEUE].is_empty() {
            return Dequeued::Packet(self.pop(FEEDBACK_QUEUE, shared));
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
                self.deficit[q] += self.cfg.quantum(q);
                self.credited = true;
            }
            let need = f64::from(self.queues[q].front().expect("non-empty").wire_len);
            if self.deficit[q] >= need {
                self.deficit[q] -= need;
                return Dequeued::Packet(self.pop(q, shared));
            }
            self.advance();
        }
    }

    fn advance(&mut self) {
        self.current = if self.current == 1 { 2 } else { 1 };
        self.credited = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::test_packet;

    fn cfg(profile: Profile) -> PortConfig {
        PortConfig {
            profile,
            link_bps: 10e9,
            w_q: 0.5,
            credit_rate_bps: flexpass_core::config::credit_queue_bps(10e9, 0.5),
            credit_burst_bytes: 2.0 * 84.0,
            credit_capacity: 8,
            ecn_k: [u64::MAX, 60_000, 60_000, 0, 0, 0, 0, 0],
            ecn_on_port: false,
            lcp_drop: u64::MAX,
            lcp_pushout: false,
            red_threshold: 100_000,
            red_counts_red_only: false,
            emulation_threshold: if profile == Profile::FlashPass {
                2
            } else {
                usize::MAX
            },
            feedback_priority: false,
            buffer: BufferLimit::PerPort { bytes: 1_000_000 },
        }
    }

    #[test]
    fn flashpass_feedback_priority_sends_control_before_queued_data() {
        // FlashPass footnote 4: feedback on a high-priority queue. Without it, an ACK or
        // EMULATION_CREDIT waits behind the data queued before it; with it, it goes next
        // (after the emulation queue), and data keeps its order behind it.
        for priority in [false, true] {
            let mut c = cfg(Profile::FlashPass);
            c.feedback_priority = priority;
            let mut pq = PortQueue::new(c);
            for _ in 0..3 {
                pq.enqueue(test_packet(TrafficClass::ProactiveData, 1538), None);
            }
            pq.enqueue(test_packet(TrafficClass::Control, 84), None);
            pq.enqueue(test_packet(TrafficClass::Credit, 84), None);
            let order: Vec<TrafficClass> = (0..5)
                .map(|_| match pq.dequeue(0, None) {
                    Dequeued::Packet(p) => p.class,
                    _ => panic!("a packet was queued"),
                })
                .collect();
            use TrafficClass::*;
            let want = if priority {
                [Credit, Control, ProactiveData, ProactiveData, ProactiveData]
            } else {
                [Credit, ProactiveData, ProactiveData, ProactiveData, Control]
            };
            assert_eq!(order, want, "feedback_priority {priority}");
        }
    }

    #[test]
    fn flashpass_over_provisioned_emulation_is_dropped_before_ordinary() {
        // FlashPass §III-C: above 2 packets in the emulation queue, Not-ECT (over-provisioned)
        // emulation packets are dropped, ECT (ordinary) ones marked and kept up to 8.
        let mut pq = PortQueue::new(cfg(Profile::FlashPass));
        let emu = |ecn| {
            let mut p = test_packet(TrafficClass::Credit, 84);
            p.ecn = ecn;
            p
        };
        for _ in 0..2 {
            assert_eq!(pq.enqueue(emu(Ecn::NotEct), None), Enqueued::Accepted);
        }
        assert_eq!(
            pq.enqueue(emu(Ecn::NotEct), None),
            Enqueued::Dropped(Refused::SelectiveDrop)
        );
        for _ in 2..8 {
            assert_eq!(pq.enqueue(emu(Ecn::Ect0), None), Enqueued::Accepted);
        }
        assert_eq!(
            pq.enqueue(emu(Ecn::Ect0), None),
            Enqueued::Dropped(Refused::CreditQueueFull)
        );
        let st = pq.stats()[0];
        assert_eq!((st.dropped_red, st.dropped_full, st.ecn_marked), (1, 1, 6));
        // Everything that is not emulation shares the one data queue.
        assert_eq!(pq.cfg.queue_of(TrafficClass::Legacy), 1);
        assert_eq!(pq.cfg.queue_of(TrafficClass::ProactiveData), 1);
        assert!(pq.cfg.is_red(TrafficClass::ReactiveData));
    }

    #[test]
    fn dwrr_shares_follow_weights() {
        for w_q in [0.5, 0.25, 0.8] {
            let mut c = cfg(Profile::FlexPass);
            c.w_q = w_q;
            c.buffer = BufferLimit::PerPort { bytes: u64::MAX };
            let mut pq = PortQueue::new(c);
            for _ in 0..4000 {
                pq.enqueue(test_packet(TrafficClass::ProactiveData, 1538), None);
                pq.enqueue(test_packet(TrafficClass::Legacy, 800), None);
            }
            let mut sent = [0u64; 3];
            for _ in 0..3000 {
                if let Dequeued::Packet(p) = pq.dequeue(0, None) {
                    sent[pq.cfg.queue_of(p.class)] += u64::from(p.wire_len);
                }
            }
            let share = sent[1] as f64 / (sent[1] + sent[2]) as f64;
            assert!((share - w_q).abs() < 0.02, "w_q {w_q}: share {share}");
        }
    }

    #[test]
    fn credits_are_strict_priority_but_shaped() {
        let mut pq = PortQueue::new(cfg(Profile::FlexPass));
        for _ in 0..8 {
            assert_eq!(
                pq.enqueue(test_packet(TrafficClass::Credit, 84), None),
                Enqueued::Accepted
            );
        }
        assert_eq!(
            pq.enqueue(test_packet(TrafficClass::Credit, 84), None),
            Enqueued::Dropped(Refused::CreditQueueFull)
        );
        pq.enqueue(test_packet(TrafficClass::ProactiveData, 1538), None);
        // Burst of two credits, then data while tokens refill.
        assert!(
            matches!(pq.dequeue(0, None), Dequeued::Packet(p) if p.class == TrafficClass::Credit)
        );
        assert!(
            matches!(pq.dequeue(0, None), Dequeued::Packet(p) if p.class == TrafficClass::Credit)
        );
        assert!(
            matches!(pq.dequeue(0, None), Dequeued::Packet(p) if p.class == TrafficClass::ProactiveData)
        );
        match pq.dequeue(0, None) {
            Dequeued::WaitUntil(t) => {
                let expect = 84.0 * 8.0 / pq.cfg.credit_rate_bps * 1e9;
                assert!((t as f64 - expect).abs() <= 1.0, "{t} vs {expect}");
            }
            _ => panic!("credits must wait for tokens"),
        }
    }

    #[test]
    fn ecn_above_k_and_selective_drop_of_red_only() {
        let mut pq = PortQueue::new(cfg(Profile::FlexPass));
        let mut marked = 0;
        for _ in 0..80 {
            let mut p = test_packet(TrafficClass::ReactiveData, 1538);
            p.ecn = Ecn::Ect0;
            pq.enqueue(p, None);
        }
        // Red packets stop being admitted at the red threshold (100 kB ≈ 66 frames).
        assert_eq!(pq.queues[1].len(), 66);
        for p in &pq.queues[1] {
            if p.ecn == Ecn::Ce {
                marked += 1;
            }
        }
        assert_eq!(
            marked,
            66 - 40,
            "marked once the queue exceeds K = 60 kB (39 frames)"
        );
        // Green packets still get in above the red threshold.
        assert_eq!(
            pq.enqueue(test_packet(TrafficClass::ProactiveData, 1538), None),
            Enqueued::Accepted
        );
        assert_eq!(pq.stats[1].dropped_red, 14);
    }

    #[test]
    fn selective_drop_counts_red_bytes_only_when_asked() {
        // 80 green frames (123 kB) in Q1, above the 100 kB threshold: by Q1's depth (the
        // default) a red packet is dropped; counting red bytes only (the FlexPass artifact)
        // it is admitted, and red packets stop at 100 kB of red (66 frames) on top.
        for red_only in [false, true] {
            let mut c = cfg(Profile::FlexPass);
            c.red_counts_red_only = red_only;
            let mut pq = PortQueue::new(c);
            for _ in 0..80 {
                pq.enqueue(test_packet(TrafficClass::ProactiveData, 1538), None);
            }
            let admitted = (0..80)
                .filter(|_| {
                    pq.enqueue(test_packet(TrafficClass::ReactiveData, 1538), None)
                        == Enqueued::Accepted
                })
                .count();
            assert_eq!(
                admitted,
                if red_only { 66 } else { 0 },
                "red_only {red_only}"
            );
            assert_eq!(pq.red_bytes(), admitted as u64 * 1538);
        }
    }

    #[test]
    fn naive_profile_shares_one_data_queue() {
        let c = cfg(Profile::Naive);
        assert_eq!(c.queue_of(TrafficClass::Legacy), 1);
        assert_eq!(c.queue_of(TrafficClass::ProactiveData), 1);
        assert!(!c.is_red(TrafficClass::ReactiveData));
    }

    #[test]
    fn shared_buffer_dynamic_threshold() {
        // Broadcom-style dynamic threshold with α = 1/4: one congested queue settles at
        // α/(1+α) = 20 % of the buffer; two congested queues at α/(1+2α) ≈ 16.7 % each.
        let size = 4_500_000;
        let mut shared = SharedBuffer::new(size, 0.25);
        let mut c = cfg(Profile::FlexPass);
        c.buffer = BufferLimit::Shared;
        c.red_threshold = u64::MAX;
        let mut a = PortQueue::new(c.clone());
        let mut b = PortQueue::new(c);
        let fill = |q: &mut PortQueue, shared: &mut SharedBuffer| {
            while q.enqueue(test_packet(TrafficClass::ProactiveData, 1538), Some(shared))
                == Enqueued::Accepted
            {}
        };
        fill(&mut a, &mut shared);
        let one = a.bytes(1) as f64 / size as f64;
        assert!((one - 0.2).abs() < 0.001, "one queue: {one}");
        // A second queue takes its share of what is free; draining the first frees buffer.
        fill(&mut b, &mut shared);
        for _ in 0..2000 {
            a.dequeue(0, Some(&mut shared));
            fill(&mut a, &mut shared);
            fill(&mut b, &mut shared);
            b.dequeue(0, Some(&mut shared));
            fill(&mut b, &mut shared);
            fill(&mut a, &mut shared);
        }
        for q in [&a, &b] {
            let share = q.bytes(1) as f64 / size as f64;
            assert!((share - 1.0 / 6.0).abs() < 0.005, "two queues: {share}");
        }
        assert_eq!(shared.used, a.bytes(1) + b.bytes(1));
        // Refusals are counted as buffer drops, never as selective drops.
        assert!(a.stats[1].dropped_full > 0 && a.stats[1].dropped_red == 0);
    }

    fn ppt_cfg() -> PortConfig {
        let mut c = cfg(Profile::Ppt);
        c.ecn_k = [
            96_000, 96_000, 96_000, 96_000, 86_000, 86_000, 86_000, 86_000,
        ];
        c.buffer = BufferLimit::PerPort { bytes: 120_000 };
        c
    }

    #[test]
    fn ppt_lcp_packets_never_leave_before_hcp_packets() {
        // PPT §4.2 / §4.3: the LCP (P4–P7) never delays the HCP (P0–P3). Packets of every
        // priority arrive interleaved; whatever the arrival order, no LCP packet leaves
        // while an HCP packet waits, and within each half a higher priority goes first.
        let mut pq = PortQueue::new(ppt_cfg());
        let mut rng = 12345u64;
        let mut order = vec![];
        for round in 0..2000 {
            rng = rng
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let p = (rng >> 61) as u8;
            let len = if rng & 1 == 0 { 1538 } else { 98 };
            pq.enqueue(test_packet(TrafficClass::Priority(p), len), None);
            // Serve roughly one packet per two arrivals, so the queues build up.
            if round % 2 == 0 {
                if let Dequeued::Packet(pkt) = pq.dequeue(0, None) {
                    let served = pkt.class.priority().unwrap() as usize;
                    assert!(
                        (0..served).all(|q| pq.bytes(q) == 0),
                        "P{served} left while a higher priority waited"
                    );
                    order.push(served);
                }
            }
        }
        // Served one per two arrivals, the lowest priorities starved; drained, they leave
        // highest first.
        let mut drained = vec![];
        while let Dequeued::Packet(pkt) = pq.dequeue(0, None) {
            drained.push(pkt.class.priority().unwrap() as usize);
        }
        assert!(drained.windows(2).all(|w| w[0] <= w[1]), "{drained:?}");
        assert!(order.contains(&0) && drained.contains(&7));
        // Legacy traffic goes with the large flows' HCP (P3), above every LCP queue.
        assert_eq!(pq.cfg.queue_of(TrafficClass::Legacy), 3);
        assert_eq!(pq.stats().len(), 8);
    }

    #[test]
    fn ppt_hcp_waits_at_most_the_lcp_frame_on_the_wire_and_lcp_drop() {
        let mut c = ppt_cfg();
        c.link_bps = 40e9;
        c.lcp_drop = 86_000;
        let mut pq = PortQueue::new(c);
        // An LCP frame goes on the wire at t = 0 (307.6 ns at 40 Gbit/s); an HCP packet
        // arriving 100 ns later waits the remaining 208 ns, one arriving after it none.
        pq.enqueue_at(0, test_packet(TrafficClass::Priority(6), 1538), None);
        assert!(matches!(pq.dequeue(0, None), Dequeued::Packet(_)));
        pq.enqueue_at(100, test_packet(TrafficClass::Priority(1), 1538), None);
        pq.enqueue_at(400, test_packet(TrafficClass::Priority(2), 1538), None);
        // An LCP packet behind an LCP frame is not counted (the wait is among LCP packets).
        pq.enqueue_at(200, test_packet(TrafficClass::Priority(7), 1538), None);
        assert_eq!(pq.stats()[1].arrived_behind_lcp, 1);
        assert_eq!(pq.stats()[1].max_wait_behind_lcp_ns, 208);
        assert_eq!(pq.stats()[2].arrived_behind_lcp, 0);
        assert_eq!(pq.stats()[7].arrived_behind_lcp, 0);
        // lcp_drop: LCP packets are refused once the port would hold more than 86 kB; HCP
        // packets still fit up to the buffer, and a refused HCP packet while LCP bytes are
        // held is counted as such.
        let mut pq = PortQueue::new(pq.cfg.clone());
        let mut lcp_ok = 0;
        while pq.enqueue(test_packet(TrafficClass::Priority(5), 1538), None) == Enqueued::Accepted {
            lcp_ok += 1;
        }
        assert_eq!(lcp_ok, 86_000 / 1538);
        assert_eq!(pq.stats()[5].dropped_red, 1);
        while pq.enqueue(test_packet(TrafficClass::Priority(0), 1538), None) == Enqueued::Accepted {
        }
        assert_eq!(pq.data_bytes(), 120_000 / 1538 * 1538);
        assert_eq!(pq.stats()[0].dropped_full, 1);
        assert_eq!(pq.stats()[0].dropped_full_lcp_held, 1);
        assert_eq!(pq.stats()[0].dropped_full_lower_held, 1);
    }

    #[test]
    fn ppt_pushout_evicts_lcp_packets_for_hcp_packets_only() {
        let mut c = ppt_cfg();
        c.lcp_pushout = true;
        let mut pq = PortQueue::new(c);
        // The 120 kB buffer full of LCP frames: 30 in P7, then 48 in P4.
        for i in 0..78 {
            let p = if i < 30 { 7 } else { 4 };
            assert_eq!(
                pq.enqueue(test_packet(TrafficClass::Priority(p), 1538), None),
                Enqueued::Accepted
            );
        }
        // Another LCP packet is refused (no push-out among LCP packets).
        assert_eq!(
            pq.enqueue(test_packet(TrafficClass::Priority(4), 1538), None),
            Enqueued::Dropped(Refused::BufferFull)
        );
        // HCP packets push LCP packets out, lowest priority (P7) first, one frame each.
        for _ in 0..31 {
            assert_eq!(
                pq.enqueue(test_packet(TrafficClass::Priority(2), 1538), None),
                Enqueued::Accepted
            );
        }
        assert_eq!(pq.stats()[7].dropped_pushout, 30);
        assert_eq!(pq.stats()[4].dropped_pushout, 1);
        assert_eq!((pq.bytes(7), pq.bytes(4)), (0, 47 * 1538));
        // Once the HCP alone fills the buffer, HCP packets are dropped and nothing is evicted.
        for _ in 0..47 {
            pq.enqueue(test_packet(TrafficClass::Priority(0), 1538), None);
        }
        assert_eq!(pq.bytes(4), 0);
        assert_eq!(pq.data_bytes(), 78 * 1538);
        assert_eq!(
            pq.enqueue(test_packet(TrafficClass::Priority(0), 1538), None),
            Enqueued::Dropped(Refused::BufferFull)
        );
        assert_eq!(pq.stats()[0].dropped_full_lcp_held, 0);
        // Off (the paper's switch): the same HCP packet is refused while LCP bytes are held.
        let mut pq = PortQueue::new(ppt_cfg());
        for _ in 0..78 {
            pq.enqueue(test_packet(TrafficClass::Priority(7), 1538), None);
        }
        assert_eq!(
            pq.enqueue(test_packet(TrafficClass::Priority(2), 1538), None),
            Enqueued::Dropped(Refused::BufferFull)
        );
        assert_eq!(pq.stats()[2].dropped_full_lcp_held, 1);
    }

    #[test]
    fn ppt_per_queue_ecn_and_one_port_buffer() {
        let mut pq = PortQueue::new(ppt_cfg());
        let ect = |p: u8| {
            let mut pkt = test_packet(TrafficClass::Priority(p), 1538);
            pkt.ecn = Ecn::Ect0;
            pkt
        };
        // 60 LCP frames (92 kB): marked above K_LCP = 86 kB.
        for _ in 0..60 {
            assert_eq!(pq.enqueue(ect(5), None), Enqueued::Accepted);
        }
        assert_eq!(pq.stats()[5].ecn_marked, 60 - 56);
        // The buffer (120 kB) is one for all queues: 18 more frames fit, the 19th does not.
        for _ in 0..18 {
            assert_eq!(pq.enqueue(ect(0), None), Enqueued::Accepted);
        }
        assert_eq!(pq.stats()[0].ecn_marked, 0, "P0 holds 27 kB < K_HCP");
        assert_eq!(
            pq.enqueue(ect(0), None),
            Enqueued::Dropped(Refused::BufferFull)
        );
        // Marking on the port's occupancy: the first P0 packet behind 92 kB of LCP packets is
        // not marked (92 kB ≤ K_HCP 96 kB), the fourth is; an LCP packet is at once (> 86 kB).
        let mut c = ppt_cfg();
        c.ecn_on_port = true;
        let mut pq = PortQueue::new(c);
        for _ in 0..60 {
            pq.enqueue(ect(5), None);
        }
        for _ in 0..4 {
            pq.enqueue(ect(0), None);
        }
        assert_eq!(pq.stats()[0].ecn_marked, 1);
        pq.enqueue(ect(6), None);
        assert_eq!(pq.stats()[6].ecn_marked, 1);
    }

    #[test]
    fn owf_separates_legacy_without_selective_drop() {
        let c = cfg(Profile::Owf);
        assert_eq!(c.queue_of(TrafficClass::Legacy), 2);
        assert_eq!(c.queue_of(TrafficClass::ProactiveData), 1);
        assert!(!c.is_red(TrafficClass::ReactiveData));
        let l = cfg(Profile::Layering);
        assert_eq!(l.queue_of(TrafficClass::Legacy), 1);
    }
}
