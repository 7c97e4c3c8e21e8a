//! PASE's delegation (Munir et al., SIGCOMM'14 §3.1 "Delegation"; evaluated in §5 Fig. 11:
//! "higher-level arbitrators delegate some bandwidth to lower-level arbitrators,
//! significantly reducing control overhead on ToR-Aggregation links").
//!
//! A parent arbitrator (the arbitrator of a link above the ToRs: aggregation or core)
//! splits its link's capacity C into one virtual link per child arbitrator (a ToR). A child
//! then arbitrates the flows it sees on that parent link over its virtual link (Algorithm 1,
//! `arbitrate_virtual`) without asking the parent; the parent re-divides C every
//! delegation period from the children's demand reported in that period.
//!
//! The division rule (`delegate`) is this port's reading, the design text of the paper not
//! being at hand (docs/results-pase.md): a child's demand is the sum of the demands of its
//! flows on the parent link; when the demands fit in C each child gets its demand plus an
//! equal part of what is left, else C in proportion to demand. Invariant: the shares sum to
//! C (to rounding) whenever there is a child, and a child's share never exceeds C.

use super::{arbitrate, arbitrate_flow, Arbitration, FlowDemand};
use crate::Nanos;
use std::collections::BTreeMap;

/// A child arbitrator's demand on its parent's link over the last period, bit/s.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ChildDemand {
    pub child: u32,
    pub demand_bps: f64,
}

/// The parent's division of `capacity_bps` among `children` (any order; a child listed
/// twice counts once with its demands summed): (child, share in bit/s), by child id.
pub fn delegate(capacity_bps: f64, children: &[ChildDemand]) -> Vec<(u32, f64)> {
    let mut demand: BTreeMap<u32, f64> = BTreeMap::new();
    for c in children {
        *demand.entry(c.child).or_default() += c.demand_bps.max(0.0);
    }
    if demand.is_empty() {
        return vec![];
    }
    let total: f64 = demand.values().sum();
    let n = demand.len() as f64;
    demand
        .into_iter()
        .map(|(child, d)| {
            let share = if total <= capacity_bps {
                d + (capacity_bps - total) / n
            } else {
                capacity_bps * d / total
            };
            (child, share)
        })
        .collect()
}

/// Algorithm 1 at a child over its virtual link of `share_bps`: as `arbitrate`, except that
/// a child with no share (its demand arrived after the last division) cannot fit any flow:
/// every flow gets the base rate in the lowest queue until the next division.
pub fn arbitrate_virtual(
    share_bps: f64,
    queues: u8,
    base_rate_bps: f64,
    flows: &mut [FlowDemand],
    out: &mut Vec<(u32, Arbitration)>,
) {
    if share_bps > 0.0 {
        arbitrate(share_bps, queues, base_rate_bps, flows, out);
        return;
    }
    flows.sort_by_key(|f| (f.remaining, f.flow));
    out.extend(flows.iter().map(|f| {
        (
            f.flow,
            arbitrate_virtual_flow(0.0, queues, base_rate_bps, 0.0, 0.0),
        )
    }));
}

/// `arbitrate_virtual` for one flow with `adh_bps` of demand ahead of it on the virtual link
/// (as `pase::arbitrate_flow`).
pub fn arbitrate_virtual_flow(
    share_bps: f64,
    queues: u8,
    base_rate_bps: f64,
    adh_bps: f64,
    demand_bps: f64,
) -> Arbitration {
    if share_bps > 0.0 {
        return arbitrate_flow(share_bps, queues, base_rate_bps, adh_bps, demand_bps);
    }
    Arbitration {
        queue: queues.saturating_sub(1),
        reference_rate_bps: base_rate_bps,
    }
}

/// One parent link's delegation: the shares in force and when they are next divided.
#[derive(Clone, Debug)]
pub struct Delegation {
    pub capacity_bps: f64,
    /// How often the parent re-divides its capacity.
    pub period: Nanos,
    shares: BTreeMap<u32, f64>,
    next_update: Option<Nanos>,
}

impl Delegation {
    pub fn new(capacity_bps: f64, period: Nanos) -> Self {
        Delegation {
            capacity_bps,
            period: period.max(1),
            shares: BTreeMap::new(),
            next_update: None,
        }
    }

    /// Is a division due at `now` (the first one is due at once)?
    pub fn due(&self, now: Nanos) -> bool {
        self.next_update.is_none_or(|t| now >= t)
    }

    /// The children report their demand and the parent divides its capacity; the next
    /// division is one period later. A child of the last division that reports nothing now
    /// has no demand (it keeps a part of any spare capacity). Returns the number of children
    /// (each exchange is one report and one answer).
    pub fn update(&mut self, now: Nanos, children: &[ChildDemand]) -> usize {
        let mut all: Vec<ChildDemand> = children.to_vec();
        all.extend(self.shares.keys().map(|&child| ChildDemand {
            child,
            demand_bps: 0.0,
        }));
        self.shares = delegate(self.capacity_bps, &all).into_iter().collect();
        self.next_update = Some(now + self.period);
        self.shares.len()
    }

    /// The child's virtual link, bit/s (0 for a child the last division did not know).
    pub fn share(&self, child: u32) -> f64 {
        self.shares.get(&child).copied().unwrap_or(0.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn child(child: u32, demand_bps: f64) -> ChildDemand {
        ChildDemand { child, demand_bps }
    }

    #[test]
    fn shares_follow_demand() {
        // Over-subscribed: 30 + 10 Gbit/s on a 10 Gbit/s link: 7.5 and 2.5.
        let s = delegate(10e9, &[child(1, 30e9), child(2, 10e9)]);
        assert_eq!(s, vec![(1, 7.5e9), (2, 2.5e9)]);
        // Under-subscribed: demands met, the spare 4 Gbit/s split evenly.
        let s = delegate(10e9, &[child(2, 1e9), child(1, 5e9)]);
        assert_eq!(s, vec![(1, 7e9), (2, 3e9)]);
        // A child listed twice sums its demands.
        let s = delegate(10e9, &[child(1, 10e9), child(1, 10e9), child(2, 20e9)]);
        assert_eq!(s, vec![(1, 5e9), (2, 5e9)]);
        assert!(delegate(10e9, &[]).is_empty());
    }

    /// Random children: shares sum to C, none exceeds C, and a child with more demand never
    /// gets less than one with less.
    #[test]
    fn shares_sum_to_capacity_and_keep_demand_order() {
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = move |m: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % m
        };
        for _ in 0..2000 {
            let c = (1 + next(100)) as f64 * 1e9;
            let kids: Vec<ChildDemand> = (0..1 + next(20))
                .map(|i| child(i as u32, next(50) as f64 * 1e9))
                .collect();
            let s = delegate(c, &kids);
            let sum: f64 = s.iter().map(|&(_, v)| v).sum();
            assert!((sum - c).abs() <= c * 1e-9, "{sum} vs {c}");
            for (i, &(id, v)) in s.iter().enumerate() {
                assert!((0.0..=c * (1.0 + 1e-12)).contains(&v));
                let d = kids[id as usize].demand_bps;
                for &(id2, v2) in &s[i + 1..] {
                    let d2 = kids[id2 as usize].demand_bps;
                    if d > d2 {
                        assert!(v >= v2);
                    }
                }
            }
        }
    }

    /// A child answers locally within its share: its flows' reference rates fit the virtual
    /// link, not the parent's whole capacity, and the ones beyond it wait at the base rate.
    #[test]
    fn a_child_arbitrates_within_its_share() {
        let mut d = Delegation::new(10e9, 400_000);
        assert!(d.due(0));
        assert_eq!(d.update(0, &[child(7, 30e9), child(8, 10e9)]), 2);
        assert!(!d.due(399_999));
        assert!(d.due(400_000));
        let share = d.share(7);
        assert_eq!(share, 7.5e9);
        let mut flows: Vec<FlowDemand> = (0..3)
            .map(|i| FlowDemand {
                flow: i,
                remaining: 100_000 * (u64::from(i) + 1),
                demand_bps: 10e9,
            })
            .collect();
        let mut out = vec![];
        arbitrate_virtual(share, 8, 1e6, &mut flows, &mut out);
        assert_eq!(out[0].1.reference_rate_bps, 7.5e9);
        assert_eq!(out[0].1.queue, 0);
        let fitting: f64 = out
            .iter()
            .map(|(_, a)| a.reference_rate_bps)
            .filter(|&r| r > 1e6)
            .sum();
        assert!(fitting <= share, "{fitting} > share {share}");
        assert_eq!(out[1].1.reference_rate_bps, 1e6);
        assert_eq!(out[1].1.queue, 1);
        // A child the last division did not know fits nothing until the next one.
        assert_eq!(d.share(9), 0.0);
        out.clear();
        arbitrate_virtual(d.share(9), 8, 1e6, &mut flows, &mut out);
        assert!(out
            .iter()
            .all(|(_, a)| a.queue == 7 && a.reference_rate_bps == 1e6));
    }

    /// Shares are divided again from the new demand once the period has passed.
    #[test]
    fn the_next_division_follows_the_new_demand() {
        let mut d = Delegation::new(10e9, 1000);
        d.update(0, &[child(1, 20e9), child(2, 20e9)]);
        assert_eq!((d.share(1), d.share(2)), (5e9, 5e9));
        assert!(d.due(1000));
        d.update(1000, &[child(1, 30e9), child(2, 10e9)]);
        assert_eq!((d.share(1), d.share(2)), (7.5e9, 2.5e9));
        // Child 2 reports nothing: no demand, but a part of the spare capacity.
        d.update(2000, &[child(1, 4e9)]);
        assert_eq!((d.share(1), d.share(2)), (7e9, 3e9));
    }
}
