//! PPT's buffer-aware flow scheduling (Suo et al., SIGCOMM'24 §4).
//!
//! - **Identification** (§4.1): when the flow first has data to send, the sender looks at its
//!   send buffer; if the application's first write put more than `large_flow_threshold` bytes
//!   there, the flow is *identified as large* from its first packet. Other flows fall back to
//!   PIAS-style demotion: the more bytes they have sent, the lower their priority.
//! - **Mirror-symmetric tagging** (§4.2, Fig. 6): eight strict priorities, P0 highest. The
//!   HCP uses P0–P3 and the LCP P4–P7; a large flow uses the lowest of each half (P3 / P7),
//!   an unidentified flow starts at P0 / P4 and both halves are demoted together (P_i /
//!   P_{i+4}) as its bytes sent cross `demotion_thresholds`.
//!
//! Without scheduling (the Fig. 17 ablation) every HCP packet is P0 and every LCP packet P4:
//! the LCP is still below the HCP.

use crate::config::PptConfig;

/// Number of priorities in each half (HCP: P0–P3, LCP: P4–P7).
pub const HALF: u8 = 4;

#[derive(Clone, Debug)]
pub struct FlowScheduler {
    threshold: u64,
    demotion: [u64; 3],
    scheduling: bool,
    identification: bool,
    /// None until the send buffer was first looked at.
    large: Option<bool>,
    bytes_sent: u64,
}

impl FlowScheduler {
    pub fn new(cfg: &PptConfig) -> Self {
        FlowScheduler {
            threshold: cfg.large_flow_threshold,
            demotion: cfg.demotion_thresholds,
            scheduling: cfg.scheduling,
            identification: cfg.identification,
            large: None,
            bytes_sent: 0,
        }
    }

    /// The flow is about to send its first data packet with `buffered` bytes in the send
    /// buffer (what the application's first write put there). Only the first call counts.
    pub fn identify(&mut self, buffered: u64) {
        if self.large.is_none() {
            self.large = Some(self.identification && buffered > self.threshold);
        }
    }

    pub fn is_identified(&self) -> bool {
        self.large.is_some()
    }

    /// Identified as large by the buffer-aware approach.
    pub fn is_large(&self) -> bool {
        self.large == Some(true)
    }

    /// Payload bytes sent by either loop (PIAS's "bytes sent").
    pub fn bytes_sent(&self) -> u64 {
        self.bytes_sent
    }

    pub fn on_sent(&mut self, bytes: u64) {
        self.bytes_sent += bytes;
    }

    /// Level within a half: 0 (highest) ..= 3 (large flows).
    fn level(&self) -> u8 {
        if !self.scheduling {
            return 0;
        }
        if self.is_large() {
            return HALF - 1;
        }
        self.demotion
            .iter()
            .filter(|&&t| self.bytes_sent >= t)
            .count() as u8
    }

    /// Priority of the flow's next HCP packet: P0..=P3.
    pub fn hcp_priority(&self) -> u8 {
        self.level()
    }

    /// Priority of the flow's next LCP (opportunistic) packet: P4..=P7, the mirror image.
    pub fn lcp_priority(&self) -> u8 {
        self.level() + HALF
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_flows_take_the_lowest_priority_of_each_half() {
        let cfg = PptConfig::default();
        let mut s = FlowScheduler::new(&cfg);
        s.identify(cfg.large_flow_threshold + 1);
        assert!(s.is_large());
        assert_eq!((s.hcp_priority(), s.lcp_priority()), (3, 7));
        // Only the first look counts.
        s.identify(0);
        assert!(s.is_large());
    }

    #[test]
    fn unidentified_flows_are_demoted_by_bytes_sent_in_both_halves() {
        let cfg = PptConfig::default();
        let mut s = FlowScheduler::new(&cfg);
        s.identify(cfg.large_flow_threshold);
        assert!(!s.is_large());
        let mut seen = vec![];
        for step in [0, 99_999, 1, 900_000, 9_000_000, 1 << 40] {
            s.on_sent(step);
            seen.push((s.hcp_priority(), s.lcp_priority()));
        }
        assert_eq!(seen, [(0, 4), (0, 4), (1, 5), (2, 6), (3, 7), (3, 7)]);
    }

    #[test]
    fn ablations() {
        let cfg = PptConfig {
            scheduling: false,
            ..PptConfig::default()
        };
        let mut s = FlowScheduler::new(&cfg);
        s.identify(1 << 30);
        s.on_sent(1 << 30);
        assert_eq!((s.hcp_priority(), s.lcp_priority()), (0, 4));
        let cfg = PptConfig {
            identification: false,
            ..PptConfig::default()
        };
        let mut s = FlowScheduler::new(&cfg);
        s.identify(1 << 30);
        assert!(!s.is_large());
        assert_eq!(s.hcp_priority(), 0);
    }
}
