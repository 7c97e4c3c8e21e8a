//! Switch / NIC egress port with the FlexPass queue semantics (FlexPass §4.1, ExpressPass §3.1):
//!
//! - Q0 (credits): strict priority, shaped by a token bucket to `credit_rate_bps` with a
//!   burst of two credits, buffer of `credit_capacity` credits (8); excess credits dropped.
//! - Q1 (FlexPass data + control) and Q2 (legacy): DWRR with weights w_q and 1 − w_q.
//! - ECN: a data packet that finds its queue above that queue's K at enqueue is CE-marked
//!   (if ECN-capable).
//! - Selective dropping: a red (reactive) packet that finds Q1 above `red_threshold` is dropped;
//!   green packets are dropped only when the port buffer is full.
//!
//! The `Naive` profile reproduces the paper's problem: ExpressPass data and legacy traffic
//! share one data queue and credits are shaped to the full link's credit rate.

use flexpass_wire::{Ecn, TrafficClass};
use serde::Serialize;
use std::collections::VecDeque;

use crate::packet::SimPacket;
use flexpass_core::Nanos;

pub const NUM_QUEUES: usize = 3;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Profile {
    /// Q0 credits, Q1 FlexPass data (w_q), Q2 legacy (1 − w_q).
    FlexPass,
    /// ExpressPass as originally deployed: credits at full rate, one shared data queue.
    Naive,
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
    /// ECN marking threshold K per queue, bytes (u64::MAX: never).
    pub ecn_k: [u64; NUM_QUEUES],
    /// Selective-drop threshold for red packets in Q1, bytes.
    pub red_threshold: u64,
    /// Shared data buffer of the port, bytes.
    pub buffer: u64,
}

impl PortConfig {
    /// The profile's queue for a traffic class.
    pub fn queue_of(&self, class: TrafficClass) -> usize {
        match (self.profile, class) {
            (_, TrafficClass::Credit) => 0,
            (Profile::FlexPass, TrafficClass::Legacy) => 2,
            _ => 1,
        }
    }

    /// Red packets are subject to selective dropping (FlexPass profile only).
    pub fn is_red(&self, class: TrafficClass) -> bool {
        self.profile == Profile::FlexPass && class == TrafficClass::ReactiveData
    }

    fn quantum(&self, q: usize) -> f64 {
        // Quanta proportional to the weights; the larger one is two maximum frames.
        let (w1, w2) = match self.profile {
            Profile::FlexPass => (self.w_q, 1.0 - self.w_q),
            Profile::Naive => (1.0, 0.0),
        };
        let scale = 2.0 * 1538.0 / w1.max(w2);
        match q {
            1 => w1 * scale,
            2 => w2 * scale,
            _ => 0.0,
        }
    }
}

#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct QueueStats {
    pub enqueued: u64,
    pub dequeued_bytes: u64,
    pub ecn_marked: u64,
    /// Dropped because the queue (Q0) or port buffer was full.
    pub dropped_full: u64,
    /// Red packets dropped by selective dropping.
    pub dropped_red: u64,
    pub max_bytes: u64,
    pub max_packets: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Enqueued {
    Accepted,
    Dropped,
}

pub enum Dequeued {
    Packet(SimPacket),
    /// Only shaped credits are waiting: try again at this time.
    WaitUntil(Nanos),
    Empty,
}

pub struct PortQueue {
    pub cfg: PortConfig,
    queues: [VecDeque<SimPacket>; NUM_QUEUES],
    bytes: [u64; NUM_QUEUES],
    pub stats: [QueueStats; NUM_QUEUES],
    tokens: f64,
    tokens_at: Nanos,
    deficit: [f64; NUM_QUEUES],
    /// DWRR pointer (1 or 2) and whether it already got its quantum this visit.
    current: usize,
    credited: bool,
}

impl PortQueue {
    pub fn new(cfg: PortConfig) -> Self {
        PortQueue {
            tokens: cfg.credit_burst_bytes,
            cfg,
            queues: Default::default(),
            bytes: [0; NUM_QUEUES],
            stats: Default::default(),
            tokens_at: 0,
            deficit: [0.0; NUM_QUEUES],
            current: 1,
            credited: false,
        }
    }

    pub fn bytes(&self, q: usize) -> u64 {
        self.bytes[q]
    }

    pub fn is_empty(&self) -> bool {
        self.queues.iter().all(|q| q.is_empty())
    }

    fn data_bytes(&self) -> u64 {
        self.bytes[1] + self.bytes[2]
    }

    pub fn enqueue(&mut self, mut pkt: SimPacket) -> Enqueued {
        let q = self.cfg.queue_of(pkt.class);
        let len = u64::from(pkt.wire_len);
        let data_bytes = self.data_bytes();
        let st = &mut self.stats[q];
        if q == 0 {
            if self.queues[0].len() >= self.cfg.credit_capacity {
                st.dropped_full += 1;
                return Enqueued::Dropped;
            }
        } else {
            if data_bytes + len > self.cfg.buffer {
                st.dropped_full += 1;
                return Enqueued::Dropped;
            }
            if self.cfg.is_red(pkt.class) && self.bytes[q] >= self.cfg.red_threshold {
                st.dropped_red += 1;
                return Enqueued::Dropped;
            }
            if self.bytes[q] > self.cfg.ecn_k[q] && pkt.ecn != Ecn::NotEct {
                if pkt.ecn != Ecn::Ce {
                    st.ecn_marked += 1;
                }
                pkt.ecn = Ecn::Ce;
            }
        }
        st.enqueued += 1;
        self.bytes[q] += len;
        self.queues[q].push_back(pkt);
        st.max_bytes = st.max_bytes.max(self.bytes[q]);
        st.max_packets = st.max_packets.max(self.queues[q].len());
        Enqueued::Accepted
    }

    fn pop(&mut self, q: usize) -> SimPacket {
        let pkt = self.queues[q]
            .pop_front()
            .expect("caller checked non-empty");
        self.bytes[q] -= u64::from(pkt.wire_len);
        self.stats[q].dequeued_bytes += u64::from(pkt.wire_len);
        pkt
    }

    fn refill(&mut self, now: Nanos) {
        let dt = now.saturating_sub(self.tokens_at) as f64 * 1e-9;
        self.tokens =
            (self.tokens + dt * self.cfg.credit_rate_bps / 8.0).min(self.cfg.credit_burst_bytes);
        self.tokens_at = now;
    }

    /// Next packet to put on the wire at `now`.
    pub fn dequeue(&mut self, now: Nanos) -> Dequeued {
        let mut credit_wait = None;
        if let Some(need) = self.queues[0].front().map(|h| f64::from(h.wire_len)) {
            self.refill(now);
            if self.tokens >= need {
                self.tokens -= need;
                return Dequeued::Packet(self.pop(0));
            }
            let wait_s = (need - self.tokens) * 8.0 / self.cfg.credit_rate_bps;
            credit_wait = Some(now + (wait_s * 1e9).ceil() as Nanos);
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
                return Dequeued::Packet(self.pop(q));
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
            ecn_k: [u64::MAX, 60_000, 60_000],
            red_threshold: 100_000,
            buffer: 1_000_000,
        }
    }

    #[test]
    fn dwrr_shares_follow_weights() {
        for w_q in [0.5, 0.25, 0.8] {
            let mut c = cfg(Profile::FlexPass);
            c.w_q = w_q;
            c.buffer = u64::MAX;
            let mut pq = PortQueue::new(c);
            for _ in 0..4000 {
                pq.enqueue(test_packet(TrafficClass::ProactiveData, 1538));
                pq.enqueue(test_packet(TrafficClass::Legacy, 800));
            }
            let mut sent = [0u64; 3];
            for _ in 0..3000 {
                if let Dequeued::Packet(p) = pq.dequeue(0) {
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
                pq.enqueue(test_packet(TrafficClass::Credit, 84)),
                Enqueued::Accepted
            );
        }
        assert_eq!(
            pq.enqueue(test_packet(TrafficClass::Credit, 84)),
            Enqueued::Dropped
        );
        pq.enqueue(test_packet(TrafficClass::ProactiveData, 1538));
        // Burst of two credits, then data while tokens refill.
        assert!(matches!(pq.dequeue(0), Dequeued::Packet(p) if p.class == TrafficClass::Credit));
        assert!(matches!(pq.dequeue(0), Dequeued::Packet(p) if p.class == TrafficClass::Credit));
        assert!(
            matches!(pq.dequeue(0), Dequeued::Packet(p) if p.class == TrafficClass::ProactiveData)
        );
        match pq.dequeue(0) {
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
            pq.enqueue(p);
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
            pq.enqueue(test_packet(TrafficClass::ProactiveData, 1538)),
            Enqueued::Accepted
        );
        assert_eq!(pq.stats[1].dropped_red, 14);
    }

    #[test]
    fn naive_profile_shares_one_data_queue() {
        let c = cfg(Profile::Naive);
        assert_eq!(c.queue_of(TrafficClass::Legacy), 1);
        assert_eq!(c.queue_of(TrafficClass::ProactiveData), 1);
        assert!(!c.is_red(TrafficClass::ReactiveData));
    }
}
