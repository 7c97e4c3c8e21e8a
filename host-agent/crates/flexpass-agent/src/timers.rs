//! The event loop's deadline heap (docs/agent-api.md, "Scale"): one entry per (flow,
//! deadline), earliest first, with lazy deletion.
//!
//! Each flow keeps its *registered* timer next to it (in its slot); a heap entry counts only
//! while it equals its flow's registered timer. Rescheduling registers the new timer and
//! pushes a new entry; cancelling clears the registration; the old entries become stale and
//! are dropped when they reach the top (`pop_due`, `peek_current`), or all at once when
//! stale entries pile up (`needs_rebuild` → `rebuild`). So a turn costs O((due + touched) ·
//! log n), never O(flows): flows with no deadline (idle) have no entry.
//!
//! A heap rather than a hierarchical timer wheel: the deadlines range from sub-µs credit
//! gaps to seconds (HELLO backoff, RTO up to 1 s, linger 2 s) and credit pacing needs them
//! to the nanosecond, which a wheel would round to its slot width or need several levels
//! for; and the flows with a deadline are the active ones, whose per-turn work (sending a
//! credit or a segment) dwarfs an O(log n) push.

use flexpass_core::Nanos;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// A registered timer: when, and whether it is a credit (a receiver sending credits: worth
/// a busy-wait before it, see `EndpointConfig::spin`).
pub type Timer = (Nanos, bool);

/// Deadline heap over flow keys `K` (earliest deadline first; ties by credit flag, key).
#[derive(Debug)]
pub struct DeadlineHeap<K: Ord> {
    heap: BinaryHeap<Reverse<(Nanos, bool, K)>>,
}

impl<K: Ord> Default for DeadlineHeap<K> {
    fn default() -> Self {
        DeadlineHeap {
            heap: BinaryHeap::new(),
        }
    }
}

impl<K: Ord + Copy> DeadlineHeap<K> {
    /// Entries, stale ones included.
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }

    /// Register `next` as `key`'s timer in its slot's `registered`; pushes an entry only if
    /// it changed (an unchanged deadline costs nothing). `None` cancels.
    pub fn arm(&mut self, registered: &mut Option<Timer>, key: K, next: Option<Timer>) {
        if *registered != next {
            *registered = next;
            if let Some((at, credit)) = next {
                self.heap.push(Reverse((at, credit, key)));
            }
        }
    }

    /// The next entry due at `now` (deadline ≤ now), earliest first, stale or not: the caller
    /// checks it against the flow's registered timer (and clears that registration when it
    /// acts on it). Each entry comes out once.
    pub fn pop_due(&mut self, now: Nanos) -> Option<(K, Timer)> {
        let &Reverse((at, credit, key)) = self.heap.peek()?;
        if at > now {
            return None;
        }
        self.heap.pop();
        Some((key, (at, credit)))
    }

    /// The earliest timer still registered (`registered(key)` is the flow's registered
    /// timer, None if it has none or is gone); stale entries on top are dropped.
    pub fn peek_current(
        &mut self,
        mut registered: impl FnMut(K) -> Option<Timer>,
    ) -> Option<Timer> {
        while let Some(&Reverse((at, credit, key))) = self.heap.peek() {
            let timer = Some((at, credit));
            if registered(key) == timer {
                return timer;
            }
            self.heap.pop();
        }
        None
    }

    /// Whether stale entries outnumber the `flows` enough to rebuild (keeps the heap within
    /// 4 entries per flow + 1024, so pushes stay amortised O(log n)).
    pub fn needs_rebuild(&self, flows: usize) -> bool {
        self.heap.len() > 4 * flows + 1024
    }

    /// Replace every entry by the registered timers (each flow's, from its slot).
    pub fn rebuild(&mut self, registered: impl Iterator<Item = (K, Timer)>) {
        let mut v = std::mem::take(&mut self.heap).into_vec();
        v.clear();
        v.extend(registered.map(|(k, (at, c))| Reverse((at, c, k))));
        self.heap = BinaryHeap::from(v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// A model of the endpoint's use: flows with a registered timer each.
    #[derive(Default)]
    struct Flows {
        heap: DeadlineHeap<u32>,
        reg: HashMap<u32, Option<Timer>>,
    }

    impl Flows {
        fn set(&mut self, k: u32, at: Option<Nanos>) {
            let r = self.reg.entry(k).or_default();
            self.heap.arm(r, k, at.map(|a| (a, false)));
        }
        /// The flows due at `now`, in firing order (stale entries skipped, registration
        /// cleared as the endpoint does).
        fn fire(&mut self, now: Nanos) -> Vec<(u32, Nanos)> {
            let mut out = vec![];
            while let Some((k, t)) = self.heap.pop_due(now) {
                if let Some(r) = self.reg.get_mut(&k).filter(|r| **r == Some(t)) {
                    *r = None;
                    out.push((k, t.0));
                }
            }
            out
        }
        fn next(&mut self) -> Option<Nanos> {
            let reg = &self.reg;
            self.heap
                .peek_current(|k| reg.get(&k).copied().flatten())
                .map(|t| t.0)
        }
    }

    #[test]
    fn fires_in_deadline_order_and_only_when_due() {
        let mut f = Flows::default();
        for (k, at) in [(1, 50), (2, 10), (3, 30), (4, 10), (5, 70)] {
            f.set(k, Some(at));
        }
        assert_eq!(f.next(), Some(10));
        assert_eq!(f.fire(9), vec![]);
        assert_eq!(f.fire(30), vec![(2, 10), (4, 10), (3, 30)]);
        assert_eq!(f.next(), Some(50));
        assert_eq!(f.fire(1000), vec![(1, 50), (5, 70)]);
        assert_eq!(f.next(), None);
        assert!(f.heap.is_empty());
    }

    #[test]
    fn rescheduling_fires_once_at_the_new_deadline_and_cancel_never() {
        let mut f = Flows::default();
        f.set(1, Some(10));
        f.set(2, Some(20));
        f.set(3, Some(30));
        f.set(1, Some(40)); // later: the entry at 10 is stale
        f.set(3, Some(5)); // earlier
        f.set(2, None); // cancelled
        assert_eq!(f.next(), Some(5));
        assert_eq!(f.fire(35), vec![(3, 5)]);
        assert_eq!(f.next(), Some(40));
        assert_eq!(f.fire(100), vec![(1, 40)]);
        assert_eq!(f.next(), None);
        // Re-arming the same deadline pushes nothing.
        f.set(7, Some(200));
        let n = f.heap.len();
        f.set(7, Some(200));
        assert_eq!(f.heap.len(), n);
    }

    #[test]
    fn back_to_a_former_deadline_still_fires_once() {
        // 10 → 20 → 10: two entries equal the registration; the first one fires, the
        // second is then stale (the registration was cleared).
        let mut f = Flows::default();
        f.set(1, Some(10));
        f.set(1, Some(20));
        f.set(1, Some(10));
        assert_eq!(f.fire(100), vec![(1, 10)]);
        assert_eq!(f.next(), None);
    }

    #[test]
    fn no_lost_wake_ups_under_random_rescheduling_and_rebuilds() {
        // A reference model: every flow whose registered deadline passes fires exactly once,
        // in deadline order, whatever happened to its earlier deadlines.
        let mut f = Flows::default();
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut rnd = |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        let mut now = 0;
        for _round in 0..2000 {
            for _ in 0..rnd(20) {
                let k = rnd(300) as u32;
                let at = if rnd(5) == 0 {
                    None
                } else {
                    Some(now + rnd(1000))
                };
                f.set(k, at);
            }
            now += rnd(200);
            let mut want: Vec<(u32, Nanos)> = f
                .reg
                .iter()
                .filter_map(|(&k, r)| r.filter(|t| t.0 <= now).map(|t| (k, t.0)))
                .collect();
            want.sort_by_key(|&(k, at)| (at, k));
            assert_eq!(f.fire(now), want);
            let earliest = f.reg.values().filter_map(|r| r.map(|t| t.0)).min();
            assert_eq!(f.next(), earliest);
            if f.heap.needs_rebuild(f.reg.len()) || rnd(50) == 0 {
                let reg: Vec<_> = f
                    .reg
                    .iter()
                    .filter_map(|(&k, r)| r.map(|t| (k, t)))
                    .collect();
                f.heap.rebuild(reg.into_iter());
                assert_eq!(f.heap.len(), f.reg.values().filter(|r| r.is_some()).count());
            }
            assert!(f.heap.len() <= 4 * 300 + 1024 + 20, "heap bounded");
        }
    }

    #[test]
    fn a_credit_timer_is_distinct_from_a_plain_one_at_the_same_time() {
        let mut heap = DeadlineHeap::default();
        let mut reg = None;
        heap.arm(&mut reg, 1u32, Some((10, false)));
        heap.arm(&mut reg, 1u32, Some((10, true)));
        assert_eq!(reg, Some((10, true)));
        assert_eq!(heap.len(), 2);
        assert_eq!(heap.peek_current(|_| reg), Some((10, true)));
    }
}
