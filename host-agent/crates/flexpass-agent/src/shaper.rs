//! What the host lets out and in, like a NIC's Q0 (ExpressPass: "host and switch perform
//! credit rate-limiting"): the credit shaper at the link's credit rate (off when the NIC edge
//! polices the host's credits: crate::edge), the limit on credits arriving for this host's
//! senders, and FlashPass's emulation queue. All are token buckets.

use crate::stats::EndpointStats;
use flexpass_core::config::{
    credit_limit_frame_bytes_per_s, credit_queue_bps_mtu, credit_rate_for_link_mtu,
};
use flexpass_core::{Nanos, Transmit};
use flexpass_wire::{ethernet_frame_len, Ecn, Packet, CREDIT_MSG_MAX, MIN_ETHERNET_WIRE};

/// Token bucket (starts full); tokens are bytes or packets, as the caller counts them.
pub(crate) struct TokenBucket {
    pub(crate) per_ns: f64,
    pub(crate) depth: f64,
    tokens: f64,
    at: Nanos,
}

impl TokenBucket {
    pub(crate) fn new(per_second: f64, depth: f64) -> Self {
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

    /// Take `len` tokens if there are that many.
    pub(crate) fn admit(&mut self, now: Nanos, len: usize) -> bool {
        self.refill(now);
        if self.tokens >= len as f64 {
            self.tokens -= len as f64;
            true
        } else {
            false
        }
    }
}

/// The link's credit limit in frame bytes/s (credits of all flows together: the full
/// share), counted as every NIC edge counts it: a credit costs its frame, 60..=68 B
/// (`credit_limit_frame_bytes_per_s`, docs/protocol.md §9 "Credits in frame bytes").
pub(crate) fn credit_bytes_per_second(link_bps: f64, mtu: usize) -> f64 {
    credit_limit_frame_bytes_per_s(link_bps, 1.0, mtu)
}

/// Depth of a credit shaper, frame bytes: two credit batches of the largest credit (as Q0,
/// two credits deep), so a batch whose jittered gap came short still passes whole.
pub(crate) fn credit_burst_bytes(credit_batch: u32) -> f64 {
    2.0 * credit_batch as f64 * ethernet_frame_len(CREDIT_MSG_MAX) as f64
}

/// Depth of the incoming credit bucket (credits; `credit_in_burst`): the credits of a loop
/// stall of `CREDIT_IN_STALL_NS` at the link's credit rate, within
/// [`CREDIT_IN_BURST_MIN`, `CREDIT_IN_BURST_MAX`]. Credits are timed when read: after a
/// longer stall of this host's loop, the credits queued in the socket meanwhile would leave
/// as one burst of data that the receiver's downlink cannot take (on Mininet at 20 Mbit/s a
/// sender stopped for 60 ms sent 40 packets at once into a 39-packet buffer and lost 38).
/// Those beyond the depth are dropped as beyond the link's rate, and the receiver's credit
/// feedback sees them lost (ExpressPass: credits are dropped, data is not).
const CREDIT_IN_STALL_NS: f64 = 5e6;
/// At 10 Gbit/s (~770 000 credits/s) the cap: ~300 µs, what coalesced reads hand the loop.
const CREDIT_IN_BURST_MAX: f64 = 256.0;
/// What arrives back to back from the network: ExpressPass's 8-credit queue and its
/// 2-credit bucket, with room (and two batches of B + 1 where credits come in batches).
const CREDIT_IN_BURST_MIN: f64 = 16.0;

pub(crate) fn credit_in_burst(credits_per_s: f64, credit_batch: u32) -> f64 {
    let min = CREDIT_IN_BURST_MIN.max(2.0 * f64::from(credit_batch + 1));
    (credits_per_s * CREDIT_IN_STALL_NS / 1e9).clamp(min, CREDIT_IN_BURST_MAX.max(min))
}

/// Receive backlog (share of the datapath's receive buffer not read yet; AF_XDP: of the
/// fullest queue's receive frames) above which this host sends no credits. At a quarter of
/// 2048 frames, the 1536 left absorb the credits already in flight (one frame each); the UDP
/// socket's buffer is 4 MiB.
const RX_BACKLOG_CREDIT_LIMIT: f64 = 0.25;

/// Depth of a FlashPass emulation queue and its single threshold, in packets (FlashPass
/// §IV-A: "8 packets", "2 packets"; docs/protocol.md §10).
pub const EMULATION_QUEUE_PACKETS: u32 = 8;
pub const EMULATION_THRESHOLD_PACKETS: u32 = 2;

/// The host's emulation queue, as a switch port's Q0 in the profile `flashpass` (FlashPass
/// §III-B, §III-C): EMULATION packets of all the host's flows leave at most at the link's
/// emulation share C·84/(84 + max frame), `EMULATION_QUEUE_PACKETS` deep; with more than
/// `EMULATION_THRESHOLD_PACKETS` queued, an over-provisioned (Not-ECT) packet is dropped.
/// A policer: the backlog a queue would hold is the bucket's spent tokens.
pub(crate) struct EmulationQueue {
    bucket: TokenBucket,
}

impl EmulationQueue {
    pub(crate) fn new(link_bps: f64, mtu: usize) -> Self {
        let bytes = MIN_ETHERNET_WIRE as f64;
        EmulationQueue {
            bucket: TokenBucket::new(
                credit_queue_bps_mtu(link_bps, 1.0, mtu) / 8.0,
                f64::from(EMULATION_QUEUE_PACKETS) * bytes,
            ),
        }
    }

    /// Whether an emulation packet with this ECN code point gets through.
    pub(crate) fn admit(&mut self, now: Nanos, ecn: Ecn) -> bool {
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

/// The host's shapers: credits out (bytes at the link's credit rate), credits in for this
/// host's senders (at most the link's credit rate: a credit is a licence for one frame of
/// at most `max_frame_wire(mtu)` B, 1538 at a 1500 B MTU), EMULATION packets out.
pub(crate) struct HostShaper {
    pub(crate) credits_out: TokenBucket,
    /// Whether `credits_out` applies: false when the NIC edge polices the host's credits
    /// (crate::edge; the edge polices egress only, so `credits_in` always applies).
    pub(crate) police_credits_out: bool,
    pub(crate) credits_in: TokenBucket,
    emulation: EmulationQueue,
    /// Set when the receive-backlog guard drops a credit; the event loop takes it (and
    /// tells the credit's flow: `Receiver::credit_dropped_by_host`).
    pub(crate) host_behind: bool,
}

impl HostShaper {
    pub(crate) fn new(
        link_bps: f64,
        mtu: usize,
        credit_batch: u32,
        police_credits_out: bool,
    ) -> Self {
        HostShaper {
            police_credits_out,
            // Credits of all flows share the link's full credit rate at most; FlexPass flows
            // additionally stay within w_q through their max_rate (FlexPass §4.1).
            credits_out: TokenBucket::new(
                credit_bytes_per_second(link_bps, mtu),
                credit_burst_bytes(credit_batch),
            ),
            credits_in: {
                let per_s = credit_rate_for_link_mtu(link_bps, 1.0, mtu);
                TokenBucket::new(per_s, credit_in_burst(per_s, credit_batch))
            },
            emulation: EmulationQueue::new(link_bps, mtu),
            host_behind: false,
        }
    }

    /// Whether `t` may leave now; a packet dropped here is counted in `stats`.
    /// `rx_backlog`: the datapath's receive backlog (share of its buffer).
    pub(crate) fn admit_out(
        &mut self,
        t: &Transmit,
        now: Nanos,
        rx_backlog: impl FnOnce() -> f64,
        stats: &mut EndpointStats,
    ) -> bool {
        match t.packet {
            Packet::Credit(_) => {
                // The host as the bottleneck: credits it cannot serve are dropped here, where
                // the receiver's credit feedback sees them lost and slows down, and not as
                // data at its full receive buffer (ExpressPass: credits are dropped, data is
                // not).
                if rx_backlog() > RX_BACKLOG_CREDIT_LIMIT {
                    stats.credits_dropped_rx_backlog += 1;
                    self.host_behind = true;
                    return false;
                }
                if self.police_credits_out && !self.credits_out.admit(now, t.packet.frame_len()) {
                    stats.credits_rate_limited += 1;
                    return false;
                }
                true
            }
            Packet::Emulation(_) => {
                if !self.emulation.admit(now, t.ecn) {
                    stats.emulation_dropped += 1;
                    return false;
                }
                true
            }
            _ => true,
        }
    }

    /// A credit arrived for one of this host's senders: whether it is within the link's
    /// credit rate (beyond it, credits cannot be used: dropped, as the sender's switch port
    /// would, against forged credit floods).
    pub(crate) fn admit_credit_in(&mut self, now: Nanos) -> bool {
        self.credits_in.admit(now, 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flexpass_wire::{Credit, TransportKind};

    fn credit(padding: u8) -> Transmit {
        Transmit::new(
            Packet::Credit(Credit {
                flow_id: 1,
                credit_seq: 0,
                padding,
            }),
            TransportKind::ExpressPass,
        )
    }

    /// The shaper counts a credit as the NIC edges do: its frame, 60 B without options and
    /// 68 B with 8 B of them, at share·C·84/(84+F) converted to frame bytes (×60/84). So
    /// minimum credits pass at exactly share·C/(8·(84+F)) credits/s and 68-byte ones at
    /// 60/68 of that, the numbers of the eBPF bucket and the PNA meter
    /// (nic/tests/test_nic_from_config.py checks the edges against the same rate).
    #[test]
    fn credits_cost_their_frame_bytes_as_at_the_edges() {
        let (link, mtu) = (10e9, 9000);
        let per_s = credit_rate_for_link_mtu(link, 1.0, mtu);
        assert!((credit_bytes_per_second(link, mtu) - per_s * 60.0).abs() < 1e-6);
        for (padding, frame) in [(6, 60), (14, 68)] {
            let c = credit(padding);
            assert_eq!(
                (c.packet.frame_len(), c.packet.wire_len()),
                (frame, frame + 24)
            );
            let mut h = HostShaper::new(link, mtu, 1, true);
            let mut stats = EndpointStats::default();
            let offered = (3.0 * per_s) as u64; // 1 s at three times the rate
            let passed = (0..offered)
                .filter(|i| h.admit_out(&c, i * 1_000_000_000 / offered, || 0.0, &mut stats))
                .count() as f64;
            let want = per_s * 60.0 / frame as f64 + 2.0 * 68.0 / frame as f64;
            assert!(
                (passed - want).abs() <= 1.5,
                "{frame} B: {passed} vs {want}"
            );
        }
    }

    /// Credits offered at twice the link's credit rate for 10 ms: the agent's shaper passes
    /// the rate when it polices, and every credit when the NIC edge does (the edge has no
    /// timers: the flows' pacing is untouched); the receive-backlog stop applies either way.
    #[test]
    fn the_host_credit_limit_applies_only_when_the_agent_polices() {
        let (link, mtu) = (10e9, 1500);
        let credit = credit(6);
        let per_s = credit_rate_for_link_mtu(link, 1.0, mtu);
        let offered = (2.0 * per_s / 100.0) as u64; // in 10 ms
        for police in [true, false] {
            let mut h = HostShaper::new(link, mtu, 1, police);
            let mut stats = EndpointStats::default();
            let passed = (0..offered)
                .filter(|i| h.admit_out(&credit, i * 10_000_000 / offered, || 0.0, &mut stats))
                .count() as f64;
            if police {
                assert!(
                    (passed - per_s / 100.0).abs() <= 3.0,
                    "{passed} vs {}",
                    per_s / 100.0
                );
                assert_eq!(stats.credits_rate_limited, offered - passed as u64);
            } else {
                assert_eq!((passed as u64, stats.credits_rate_limited), (offered, 0));
            }
            assert!(!h.admit_out(&credit, 20_000_000, || 0.5, &mut stats));
            assert_eq!(stats.credits_dropped_rx_backlog, 1);
        }
    }

    /// After a 60 ms stall of the sender's loop, at most the bucket's depth of the credits
    /// read at once pass: at 20 Mbit/s (Mininet's scale) 16, not the 256 that bound only
    /// 10 Gbit/s (where the depth stays 256); batches of B raise the floor to 2(B + 1).
    #[test]
    fn credits_read_after_a_stall_pass_at_most_the_depth_the_network_can_deliver() {
        for (link, batch, depth) in [
            (20e6, 1, 16.0),
            (20e6, 8, 18.0),
            (10e9, 1, 256.0),
            (1e9, 1, 256.0),
        ] {
            let mut h = HostShaper::new(link, 1500, batch, true);
            assert_eq!(h.credits_in.depth, depth, "{link} B={batch}");
            // 60 ms of credits at the link's credit rate, all read at one instant.
            let queued = (credit_rate_for_link_mtu(link, 1.0, 1500) * 0.06) as usize;
            let passed = (0..queued)
                .filter(|_| h.admit_credit_in(60_000_000))
                .count();
            assert_eq!(passed as f64, depth.min(queued as f64), "{link} B={batch}");
        }
    }
}
