//! When each connection is next due (timer.rs): a min-heap of (time, connection) with lazy
//! removal, so a wake of the timer thread touches the due connections only, not all of
//! them. Invariant: a heap entry counts only while it equals the connection's entry in
//! `armed`; re-arming pushes a new entry and leaves the old one to be skipped when it
//! surfaces.

use flexpass_core::Nanos;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

#[derive(Default)]
pub struct Deadlines {
    heap: BinaryHeap<Reverse<(Nanos, u64)>>,
    armed: HashMap<u64, Nanos>,
}

impl Deadlines {
    /// Connection `id` is due at `at` (None: has no deadline), whatever it was before.
    pub fn arm(&mut self, id: u64, at: Option<Nanos>) {
        match at {
            Some(t) => {
                if self.armed.insert(id, t) != Some(t) {
                    self.heap.push(Reverse((t, id)));
                }
            }
            None => {
                self.armed.remove(&id);
            }
        }
        // Stale entries outnumber the live ones (deadlines moved later many times): rebuild.
        if self.heap.len() > 2 * self.armed.len() + 64 {
            self.heap = self
                .armed
                .iter()
                .map(|(&id, &t)| Reverse((t, id)))
                .collect();
        }
    }

    /// Due at `at` at the latest: the earlier of `at` and what is armed.
    pub fn arm_by(&mut self, id: u64, at: Nanos) {
        let t = self.armed.get(&id).map_or(at, |&a| a.min(at));
        self.arm(id, Some(t));
    }

    /// The earliest deadline.
    pub fn next(&mut self) -> Option<Nanos> {
        while let Some(&Reverse((t, id))) = self.heap.peek() {
            if self.armed.get(&id) == Some(&t) {
                return Some(t);
            }
            self.heap.pop();
        }
        None
    }

    /// Every connection due at `now`, earliest first, into `out`; they are disarmed (the
    /// caller arms them again after running their timers).
    pub fn pop_due(&mut self, now: Nanos, out: &mut Vec<u64>) {
        while let Some(t) = self.next() {
            if t > now {
                break;
            }
            let Some(Reverse((_, id))) = self.heap.pop() else {
                break;
            };
            self.armed.remove(&id);
            out.push(id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn due(d: &mut Deadlines, now: Nanos) -> Vec<u64> {
        let mut v = Vec::new();
        d.pop_due(now, &mut v);
        v
    }

    #[test]
    fn only_due_connections_come_out_earliest_first() {
        let mut d = Deadlines::default();
        d.arm(1, Some(300));
        d.arm(2, Some(100));
        d.arm(3, Some(200));
        d.arm(4, None);
        assert_eq!(d.next(), Some(100));
        assert_eq!(due(&mut d, 50), Vec::<u64>::new());
        assert_eq!(due(&mut d, 200), vec![2, 3]);
        // Popped means disarmed: not due again until armed again.
        assert_eq!(due(&mut d, 250), Vec::<u64>::new());
        assert_eq!(d.next(), Some(300));
        assert_eq!(d.armed.len(), 1);
    }

    #[test]
    fn rearming_moves_a_deadline_either_way_and_disarming_removes_it() {
        let mut d = Deadlines::default();
        d.arm(1, Some(100));
        d.arm(2, Some(150));
        d.arm(1, Some(500)); // later: the entry at 100 no longer counts
        assert_eq!(d.next(), Some(150));
        assert_eq!(due(&mut d, 400), vec![2]);
        d.arm(1, Some(50)); // earlier again
        d.arm(3, Some(60));
        d.arm(3, None);
        assert_eq!(due(&mut d, 400), vec![1]);
        assert_eq!(d.next(), None);
        // arm_by keeps the earlier of the two.
        d.arm(5, Some(700));
        d.arm_by(5, 900);
        d.arm_by(6, 800);
        assert_eq!(due(&mut d, 750), vec![5]);
        assert_eq!(due(&mut d, 800), vec![6]);
    }

    #[test]
    fn many_rearms_of_one_connection_keep_the_heap_small() {
        let mut d = Deadlines::default();
        for t in 0..10_000 {
            d.arm(7, Some(1_000 + t));
        }
        assert!(
            d.heap.len() <= 2 * d.armed.len() + 65,
            "{} entries",
            d.heap.len()
        );
        assert_eq!(due(&mut d, 10_998), Vec::<u64>::new());
        assert_eq!(due(&mut d, 10_999), vec![7]);
    }
}
