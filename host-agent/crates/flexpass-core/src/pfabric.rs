//! pFabric's end host (Alizadeh et al., "pFabric: Minimal Near-Optimal Datacenter Transport",
//! SIGCOMM'13): the priority every data packet carries and the minimal rate control.
//!
//! - §4.1 "each packet carries a single number in its header that encodes its priority":
//!   the flow's remaining size. Here: `flow_size` − bytes acknowledged when the packet
//!   leaves (so a retransmission is never behind the flow's newer packets), in the PRIO
//!   field of the data header (docs/protocol.md §6.2). The switch (the model's `pfabric`
//!   profile) serves the smallest and drops the largest.
//! - §4.2 rate control: flows start at line rate, the window is the bandwidth-delay product
//!   (BDP); no ECN; a small fixed RTO of about 3 RTTs (§5: 45 µs for the 14.6 µs fabric) so
//!   a flow whose packets were dropped by higher-priority traffic retries soon; on a timeout
//!   the window restarts from one packet (slow start back up to the BDP).
//! - §4.2 probe mode: a flow whose packets keep being dropped (higher-priority traffic
//!   holds the queue) would resend its window at every timeout. After
//!   `PFabricConfig::probe_after_timeouts` consecutive timeouts it sends only minimum-size
//!   probes instead, one per (un-backed-off) RTO, and resumes data with the first answer.
//!   Here a probe is the header-only DATA of PASE's probing (flexpass-wire `FLAG_PROBE`,
//!   `PROBE_SEQ`, with the flow's PRIO; `crate::pase::probing` holds the state), not the
//!   paper's one-byte segment: it is as small, and its answer is told apart from data ACKs.

pub use crate::config::PFABRIC_PROBE_AFTER_TIMEOUTS as PROBE_AFTER_TIMEOUTS;
use crate::config::{DctcpConfig, PFabricConfig};

/// pFabric §5: the RTO is about this many base RTTs.
pub const RTO_RTTS: u64 = 3;

/// The window of a pFabric flow (`cfg`) of `segment` payload bytes per packet: the DCTCP window's
/// mechanics (`base`: its loss reaction, RTT estimator, backoff) started and capped at the
/// BDP, with the small RTO (floor and initial value `RTO_RTTS` · base_rtt). Without ECN
/// marks (pFabric's packets are Not-ECT) α never cuts it.
pub fn window(cfg: &PFabricConfig, base: &DctcpConfig, segment: usize) -> DctcpConfig {
    let bdp = (cfg.bdp_bytes as f64 / segment.max(1) as f64)
        .ceil()
        .max(1.0);
    let rto = RTO_RTTS * cfg.base_rtt;
    DctcpConfig {
        init_cwnd: bdp,
        max_cwnd: bdp,
        min_cwnd: base.min_cwnd.min(bdp),
        rto_min: rto,
        rto_init: rto,
        rto_max: base.rto_max.max(rto),
        ..base.clone()
    }
}

/// §4.1: the priority of a packet of a flow of `flow_size` bytes of which `acked` are
/// acknowledged: the remaining size, saturating at 2^32 − 1 (smaller is served first). A
/// flow of unknown size (0) has the lowest priority.
pub fn priority(flow_size: u64, acked: u64) -> u32 {
    if flow_size == 0 {
        return u32::MAX;
    }
    u32::try_from(flow_size.saturating_sub(acked)).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn priority_is_the_remaining_size_and_saturates() {
        assert_eq!(priority(100_000, 0), 100_000);
        assert_eq!(priority(100_000, 40_000), 60_000);
        assert_eq!(priority(100_000, 100_000), 0);
        assert_eq!(priority(1 << 40, 0), u32::MAX);
        assert_eq!(priority(0, 0), u32::MAX, "unknown size: lowest priority");
        // A shorter remainder is a higher priority (smaller number).
        assert!(priority(10_000, 0) < priority(1_000_000, 990_000 - 1));
    }

    #[test]
    fn window_starts_and_stays_at_the_bdp_with_a_small_rto() {
        let cfg = PFabricConfig {
            bdp_bytes: 18_000,
            base_rtt: 12_000,
            ..PFabricConfig::default()
        };
        let w = window(&cfg, &DctcpConfig::default(), 1440);
        assert_eq!(w.init_cwnd, 13.0); // ceil(18000 / 1440)
        assert_eq!(w.max_cwnd, 13.0);
        assert_eq!(w.rto_min, 36_000);
        assert_eq!(w.rto_init, 36_000);
        assert!(w.validate().is_ok());
        assert!(PFabricConfig {
            bdp_bytes: 0,
            base_rtt: 1,
            ..PFabricConfig::default()
        }
        .validate()
        .is_err());
    }
}
