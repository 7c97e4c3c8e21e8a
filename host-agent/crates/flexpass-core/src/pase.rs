//! PASE (Munir et al., "Friends, not Foes — Synthesizing Existing Transport Strategies for
//! Data Center Networks", SIGCOMM'14): the arbitration algorithm of one link's arbitrator,
//! the end-to-end combination of the path's arbitrators, and the endpoint's use of the
//! result (the arbitration a sender accepts, and the window it implies).
//!
//! - Arbitration (PASE §3.1, Algorithm 1): an arbitrator keeps the flows that cross its link
//!   sorted by the criterion (remaining size, smallest first). With C the link's capacity and
//!   ADH ("aggregate demand higher") the demand of the flows ahead of a flow: the reference
//!   rate is min(demand, C − ADH) while ADH < C, else the base rate (one packet per RTT);
//!   the queue is ⌊ADH / C⌋, capped at the lowest queue. So the flows that fit in C share
//!   the top queue at their rates, and each further C of demand ahead pushes a flow one queue
//!   down.
//! - End-to-end arbitration (§3.1, bottom-up ToR → aggregation → core): a flow takes the
//!   smallest reference rate and the lowest queue its path's arbitrators give it
//!   (`Arbitration::combine`). Local-only arbitration asks the host link's arbitrator only.
//! - Endpoint (§3.3): data goes out in the assigned queue (DSCP priority P0..P7 of the
//!   eight-priority switch, strict priority, ECN per queue); each arbitration sets the
//!   window to the reference rate × RTT (`window_for`), and between arbitrations the DCTCP
//!   window adjusts it on ECN marks within that queue. PASE-DCTCP (the paper's ablation,
//!   `PaseConfig::reference_rate` false) keeps DCTCP's own window. Ordinary RTO.
//!
//! On real packets: the ARBITRATION_REQUEST / ARBITRATION_RESPONSE messages
//! (flexpass-wire, docs/protocol.md §6.11–6.12), the agent's requests
//! (flexpass-agent pase_arbitration.rs) and the arbitrator process (arbitrator.rs,
//! `flexpass arbitrator`), which runs `arbitrate` below.
//!
//! Delegation (§3.1: a parent arbitrator's capacity split into virtual links its children
//! arbitrate locally) is `delegation`; the header-only probes of a flow in the lowest queue
//! (§3.3) are `probing`.

pub mod delegation;
pub mod probing;

use crate::Nanos;

/// One arbitrator's (or the path's) decision for one flow: the priority queue (0 is the
/// highest) and the reference rate in bit/s.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Arbitration {
    pub queue: u8,
    pub reference_rate_bps: f64,
}

/// Why an arbitration message was rejected by a sender.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ArbitrationError {
    #[error("arbitration for flow {got}, not {expected}")]
    WrongFlow { expected: u32, got: u32 },
    #[error("arbitration queue {queue} beyond the {queues} priority queues")]
    QueueOutOfRange { queue: u8, queues: u8 },
    #[error("arbitration reference rate {0} bit/s is not a rate in (0, line rate]")]
    BadRate(f64),
    #[error("arbitration sent to a {0} flow (PASE only)")]
    NotPase(&'static str),
}

impl Arbitration {
    /// End-to-end: the path's arbitrators each bound the flow; it takes the smallest rate
    /// and the lowest (largest-numbered) queue.
    pub fn combine(self, other: Arbitration) -> Arbitration {
        Arbitration {
            queue: self.queue.max(other.queue),
            reference_rate_bps: self.reference_rate_bps.min(other.reference_rate_bps),
        }
    }

    /// A sender's check of an arbitration (it may be forged or corrupted): the queue exists
    /// and the rate is a positive rate no larger than the line rate.
    pub fn validate(&self, cfg: &PaseConfig) -> Result<(), ArbitrationError> {
        if self.queue >= cfg.queues {
            return Err(ArbitrationError::QueueOutOfRange {
                queue: self.queue,
                queues: cfg.queues,
            });
        }
        let r = self.reference_rate_bps;
        if !(r.is_finite() && r > 0.0 && r <= cfg.line_rate_bps) {
            return Err(ArbitrationError::BadRate(r));
        }
        Ok(())
    }
}

/// A PASE sender's parameters.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PaseConfig {
    /// Priority queues of the switches (1..=8).
    pub queues: u8,
    /// The host link's rate, bit/s: the largest reference rate.
    pub line_rate_bps: f64,
    /// Base RTT of the path: reference rate × RTT is the window until an RTT is measured.
    pub base_rtt: Nanos,
    /// Use the reference rate (PASE); false: PASE-DCTCP, the queue only (§5 ablation).
    pub reference_rate: bool,
    /// Probing (§3.3, `probing`): in the lowest queue, a header-only probe every RTT
    /// instead of data. Off by default (§5 evaluates it as an addition).
    #[serde(default)]
    pub probing: bool,
}

impl Default for PaseConfig {
    fn default() -> Self {
        PaseConfig {
            queues: 8,
            line_rate_bps: 10e9,
            base_rtt: 40_000,
            reference_rate: true,
            probing: false,
        }
    }
}

impl PaseConfig {
    pub fn validate(&self) -> Result<(), String> {
        if !(1..=8).contains(&self.queues) {
            return Err(format!("pase queues must be 1..=8, got {}", self.queues));
        }
        if !(self.line_rate_bps.is_finite() && self.line_rate_bps > 0.0) || self.base_rtt == 0 {
            return Err("pase needs line_rate_bps > 0 and base_rtt > 0".into());
        }
        Ok(())
    }

    /// Before any arbitration the flow is alone on its link: top queue, line rate.
    /// Is `queue` the lowest of several (where probing applies)?
    pub fn is_lowest(&self, queue: u8) -> bool {
        self.queues > 1 && queue == self.queues - 1
    }

    pub fn initial(&self) -> Arbitration {
        Arbitration {
            queue: 0,
            reference_rate_bps: self.line_rate_bps,
        }
    }
}

/// One flow as an arbitrator sees it: the criterion (remaining bytes) and its demand, bit/s
/// (the host's line rate unless the flow says less).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FlowDemand {
    pub flow: u32,
    pub remaining: u64,
    pub demand_bps: f64,
}

/// Algorithm 1 for one link of `capacity_bps` and `queues` priority queues over `flows`
/// (any order): sorted by remaining size (ties by flow id, so the result is deterministic),
/// each gets its queue and reference rate. `base_rate_bps` is the rate of a flow that does
/// not fit (one packet per RTT). Invariant: the reference rates of the flows that fit sum to
/// at most `capacity_bps`.
pub fn arbitrate(
    capacity_bps: f64,
    queues: u8,
    base_rate_bps: f64,
    flows: &mut [FlowDemand],
    out: &mut Vec<(u32, Arbitration)>,
) {
    flows.sort_by_key(|f| (f.remaining, f.flow));
    let mut adh = 0.0f64;
    for f in flows.iter() {
        let a = arbitrate_flow(capacity_bps, queues, base_rate_bps, adh, f.demand_bps);
        out.push((f.flow, a));
        adh += f.demand_bps;
    }
}

/// Algorithm 1's step for one flow of `demand_bps` with `adh_bps` of demand ahead of it (the
/// flows with less remaining, ties by flow id): an arbitrator that answers one flow at a
/// time from its table (the model's, answering each update as it arrives).
pub fn arbitrate_flow(
    capacity_bps: f64,
    queues: u8,
    base_rate_bps: f64,
    adh_bps: f64,
    demand_bps: f64,
) -> Arbitration {
    let lowest = queues.saturating_sub(1);
    let reference_rate_bps = if adh_bps < capacity_bps {
        demand_bps.min(capacity_bps - adh_bps)
    } else {
        base_rate_bps
    };
    let queue = ((adh_bps / capacity_bps).floor() as u64).min(u64::from(lowest)) as u8;
    Arbitration {
        queue,
        reference_rate_bps,
    }
}

/// The window (packets of `segment` payload bytes) a flow sends at its reference rate over
/// `rtt`: at least one packet.
pub fn window_for(a: &Arbitration, rtt: Nanos, segment: usize) -> f64 {
    let bytes = a.reference_rate_bps / 8.0 * rtt as f64 * 1e-9;
    (bytes / segment.max(1) as f64).max(1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn demands(sizes: &[u64], demand: f64) -> Vec<FlowDemand> {
        sizes
            .iter()
            .enumerate()
            .map(|(i, &remaining)| FlowDemand {
                flow: i as u32,
                remaining,
                demand_bps: demand,
            })
            .collect()
    }

    #[test]
    fn the_shortest_gets_the_top_queue_and_rates_fit_the_link() {
        let mut flows = demands(&[500_000, 100_000, 300_000, 200_000, 400_000], 4e9);
        let mut out = vec![];
        arbitrate(10e9, 8, 1e6, &mut flows, &mut out);
        // Sorted: flow 1 (100 kB) first, at its demand in the top queue.
        assert_eq!(out[0].0, 1);
        assert_eq!(out[0].1.queue, 0);
        assert_eq!(out[0].1.reference_rate_bps, 4e9);
        // 4 + 4 + 2 Gbit/s fill the link; the rest is ≥ C behind: base rate, lower queues.
        let top: f64 = out
            .iter()
            .filter(|(_, a)| a.reference_rate_bps > 1e6)
            .map(|(_, a)| a.reference_rate_bps)
            .sum();
        assert!(top <= 10e9, "reference rates sum to {top} > C");
        assert_eq!(out[2].1.reference_rate_bps, 2e9);
        assert_eq!(
            out.iter().map(|(_, a)| a.queue).collect::<Vec<_>>(),
            [0, 0, 0, 1, 1]
        );
        assert_eq!(out[3].1.reference_rate_bps, 1e6);
    }

    /// Over many random links and flow sets: the rates of the flows that fit sum to at most
    /// C, the shortest flow is in the top queue, and queues never rise with remaining size.
    #[test]
    fn invariants_hold_on_random_links() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move |m: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % m
        };
        let mut out = vec![];
        for _ in 0..2000 {
            let capacity = (1 + next(100)) as f64 * 1e9;
            let queues = 1 + next(8) as u8;
            let base = 1e6;
            let mut flows: Vec<FlowDemand> = (0..1 + next(40))
                .map(|i| FlowDemand {
                    flow: i as u32,
                    remaining: 1 + next(10_000_000),
                    demand_bps: (1 + next(100)) as f64 * 1e9,
                })
                .collect();
            let shortest = flows.iter().map(|f| (f.remaining, f.flow)).min().unwrap();
            out.clear();
            arbitrate(capacity, queues, base, &mut flows, &mut out);
            assert_eq!(out.len(), flows.len());
            assert_eq!(out[0].0, shortest.1);
            assert_eq!(out[0].1.queue, 0);
            let mut adh = 0.0;
            let mut fitting = 0.0;
            for (f, (id, a)) in flows.iter().zip(&out) {
                assert_eq!(f.flow, *id);
                assert!(a.queue < queues);
                if adh < capacity {
                    fitting += a.reference_rate_bps;
                } else {
                    assert_eq!(a.reference_rate_bps, base);
                }
                adh += f.demand_bps;
            }
            assert!(
                fitting <= capacity * (1.0 + 1e-12),
                "{fitting} > {capacity}"
            );
            assert!(out.windows(2).all(|w| w[0].1.queue <= w[1].1.queue));
        }
    }

    #[test]
    fn queues_are_capped_at_the_lowest() {
        let mut flows = demands(&[1, 2, 3, 4, 5, 6], 10e9);
        let mut out = vec![];
        arbitrate(10e9, 4, 1e6, &mut flows, &mut out);
        assert_eq!(
            out.iter().map(|(_, a)| a.queue).collect::<Vec<_>>(),
            [0, 1, 2, 3, 3, 3]
        );
    }

    #[test]
    fn end_to_end_takes_the_smallest_rate_and_lowest_queue() {
        let a = Arbitration {
            queue: 0,
            reference_rate_bps: 5e9,
        };
        let b = Arbitration {
            queue: 2,
            reference_rate_bps: 8e9,
        };
        assert_eq!(
            a.combine(b),
            Arbitration {
                queue: 2,
                reference_rate_bps: 5e9
            }
        );
    }

    #[test]
    fn forged_arbitrations_are_rejected() {
        let cfg = PaseConfig::default();
        let bad = |queue, r| Arbitration {
            queue,
            reference_rate_bps: r,
        };
        assert!(bad(7, 1e9).validate(&cfg).is_ok());
        assert_eq!(
            bad(8, 1e9).validate(&cfg),
            Err(ArbitrationError::QueueOutOfRange {
                queue: 8,
                queues: 8
            })
        );
        for r in [0.0, -1.0, f64::NAN, f64::INFINITY, 11e9] {
            assert!(matches!(
                bad(0, r).validate(&cfg),
                Err(ArbitrationError::BadRate(_))
            ));
        }
    }

    #[test]
    fn the_window_is_rate_times_rtt() {
        let a = Arbitration {
            queue: 0,
            reference_rate_bps: 10e9,
        };
        // 10 Gbit/s × 40 µs = 50 kB = 34.7 packets of 1440 B.
        assert!((window_for(&a, 40_000, 1440) - 50_000.0 / 1440.0).abs() < 1e-9);
        let slow = Arbitration {
            queue: 7,
            reference_rate_bps: 1.0,
        };
        assert_eq!(window_for(&slow, 40_000, 1440), 1.0);
    }
}
