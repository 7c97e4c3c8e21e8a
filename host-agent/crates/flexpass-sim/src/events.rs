//! The model's event queue: a calendar queue (a ring of time buckets, each sorted when it is
//! reached, and a heap for events beyond the ring's horizon) that pops events in exactly the
//! order of a binary heap keyed by (time, scheduling number) — deterministic runs do not
//! depend on it — at a fraction of the cost in large networks (a binary heap of 10^5 events
//! misses the cache at every level).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// An entry: ordered by `(at, seq)`; `seq` is unique.
pub struct Entry<T> {
    pub at: u64,
    pub seq: u64,
    pub item: T,
}

impl<T> PartialEq for Entry<T> {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.seq) == (o.at, o.seq)
    }
}
impl<T> Eq for Entry<T> {}
impl<T> PartialOrd for Entry<T> {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl<T> Ord for Entry<T> {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(o.at, o.seq))
    }
}

/// Bucket width 2^6 ns; 2^16 buckets: a 4.2 ms horizon (retransmission timers go beyond it).
const WIDTH_SHIFT: u32 = 6;
const RING_BITS: u32 = 16;
const RING: u64 = 1 << RING_BITS;

pub struct EventQueue<T> {
    /// Bucket `b` (absolute: `at >> WIDTH_SHIFT`) lives at `ring[b % RING]` while
    /// `current <= b < current + RING`.
    ring: Vec<Vec<Entry<T>>>,
    /// One bit per ring slot: the bucket is not empty.
    occupied: Vec<u64>,
    in_ring: usize,
    /// Absolute index of the bucket being drained.
    current: u64,
    /// The drained bucket's entries, sorted so that the next one is last.
    now: Vec<Entry<T>>,
    /// Entries beyond the ring's horizon.
    far: BinaryHeap<Reverse<Entry<T>>>,
    /// Emptied bucket buffers, most recently used last: a bucket that gets its first entry
    /// takes one of these (still in the cache) instead of its own buffer from one ring turn
    /// ago (the ring's buffers together can reach hundreds of MB in a large network).
    spare: Vec<Vec<Entry<T>>>,
    /// Buffer of `sort_now`'s counting sort (swapped with `now`).
    scratch: Vec<Entry<T>>,
    len: usize,
}

impl<T> Default for EventQueue<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> EventQueue<T> {
    pub fn new() -> Self {
        EventQueue {
            ring: (0..RING).map(|_| Vec::new()).collect(),
            occupied: vec![0; (RING / 64) as usize],
            in_ring: 0,
            current: 0,
            now: Vec::new(),
            far: BinaryHeap::new(),
            spare: Vec::new(),
            scratch: Vec::new(),
            len: 0,
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.len
    }

    #[cfg(test)]
    fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Add an entry. Its time must not be before that of the last entry popped.
    pub fn push(&mut self, at: u64, seq: u64, item: T) {
        self.len += 1;
        let e = Entry { at, seq, item };
        let b = at >> WIDTH_SHIFT;
        if b <= self.current {
            // The bucket being drained: keep `now` sorted (next entry last).
            let pos = self.now.partition_point(|x| x > &e);
            self.now.insert(pos, e);
        } else if b < self.current + RING {
            self.put(b, e);
        } else {
            self.far.push(Reverse(e));
        }
    }

    fn put(&mut self, b: u64, e: Entry<T>) {
        let slot = (b % RING) as usize;
        let bucket = &mut self.ring[slot];
        if bucket.capacity() == 0 {
            if let Some(v) = self.spare.pop() {
                *bucket = v;
            }
        }
        bucket.push(e);
        self.occupied[slot / 64] |= 1 << (slot % 64);
        self.in_ring += 1;
    }

    /// Make `now` hold the next entries (the earliest non-empty bucket), if any.
    fn fill(&mut self) {
        while self.now.is_empty() {
            if self.in_ring == 0 {
                // Jump to the far heap's earliest entry.
                let Some(Reverse(top)) = self.far.peek() else {
                    return;
                };
                self.current = top.at >> WIDTH_SHIFT;
            } else {
                self.current = self.next_occupied();
            }
            // Entries of the far heap that the ring's window now covers.
            while let Some(Reverse(top)) = self.far.peek() {
                let b = top.at >> WIDTH_SHIFT;
                if b >= self.current + RING {
                    break;
                }
                let Reverse(e) = self.far.pop().expect("peeked");
                if b <= self.current {
                    self.now.push(e);
                } else {
                    self.put(b, e);
                }
            }
            let slot = (self.current % RING) as usize;
            if self.occupied[slot / 64] & (1 << (slot % 64)) != 0 {
                self.occupied[slot / 64] &= !(1 << (slot % 64));
                let mut bucket = std::mem::take(&mut self.ring[slot]);
                self.in_ring -= bucket.len();
                if self.now.is_empty() {
                    std::mem::swap(&mut self.now, &mut bucket);
                } else {
                    self.now.append(&mut bucket);
                }
                self.spare.push(bucket);
            }
            self.sort_now();
        }
    }

    /// Sort `now` (all of bucket `current`) so that the next entry is last. A counting sort
    /// on the time within the bucket, ties kept in reverse insertion order: entries go into
    /// a bucket mostly in scheduling order (ascending `seq`), so what is left out of order
    /// (reserved sequence numbers, entries from the far heap) is fixed by an insertion pass.
    fn sort_now(&mut self) {
        const KEYS: usize = 1 << WIDTH_SHIFT;
        let n = self.now.len();
        let base = self.current << WIDTH_SHIFT;
        if n < 32
            || self
                .now
                .iter()
                .any(|e| e.at.wrapping_sub(base) >= KEYS as u64)
        {
            self.now.sort_unstable_by(|a, b| b.cmp(a));
            return;
        }
        let key = |e: &Entry<T>| (e.at - base) as usize;
        // pos[k]: first index of key k (descending keys).
        let mut pos = [0usize; KEYS];
        for e in &self.now {
            pos[key(e)] += 1;
        }
        let mut next = 0;
        for k in (0..KEYS).rev() {
            let c = pos[k];
            pos[k] = next;
            next += c;
        }
        let mut out = std::mem::take(&mut self.scratch);
        out.clear();
        out.reserve(n);
        let dst = out.as_mut_ptr();
        for e in self.now.drain(..).rev() {
            let k = key(&e);
            // SAFETY: the positions of key k are pos[k]..pos[k] + count[k] < n ≤ capacity;
            // each is written once; `out`'s length is set after all n are written.
            unsafe { dst.add(pos[k]).write(e) };
            pos[k] += 1;
        }
        // SAFETY: all n slots were written above.
        unsafe { out.set_len(n) };
        self.scratch = std::mem::replace(&mut self.now, out);
        // Insertion pass (descending); a bucket far out of order falls back to a full sort.
        let mut budget = 4 * n;
        let v = &mut self.now;
        for i in 1..n {
            let mut j = i;
            while j > 0 && v[j - 1] < v[j] {
                v.swap(j - 1, j);
                j -= 1;
                budget = budget.saturating_sub(1);
            }
            if budget == 0 {
                v.sort_unstable_by(|a, b| b.cmp(a));
                return;
            }
        }
    }

    /// Absolute index of the first occupied bucket at or after `current` (the ring holds at
    /// least one entry).
    fn next_occupied(&self) -> u64 {
        let start = (self.current % RING) as usize;
        let words = self.occupied.len();
        let (w0, bit) = (start / 64, start % 64);
        let first = self.occupied[w0] & (!0u64 << bit);
        if first != 0 {
            return self.current + (first.trailing_zeros() as usize - bit) as u64;
        }
        for k in 1..=words {
            let w = (w0 + k) % words;
            let word = if k == words {
                self.occupied[w] & !(!0u64 << bit)
            } else {
                self.occupied[w]
            };
            if word != 0 {
                let slot = w * 64 + word.trailing_zeros() as usize;
                let dist = (slot + RING as usize - start) % RING as usize;
                return self.current + dist as u64;
            }
        }
        unreachable!("in_ring > 0 but no occupied bucket")
    }

    /// Time of the next entry.
    pub fn peek_time(&mut self) -> Option<u64> {
        self.fill();
        self.now.last().map(|e| e.at)
    }

    /// The entry `k` places after the next one if it is already known without work (same
    /// bucket): the caller may prefetch what it will touch.
    pub fn peek_ahead(&self, k: usize) -> Option<&T> {
        self.now.len().checked_sub(k + 1).map(|i| &self.now[i].item)
    }

    pub fn pop(&mut self) -> Option<Entry<T>> {
        self.fill();
        let e = self.now.pop()?;
        self.len -= 1;
        Some(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    #[test]
    fn pops_in_the_order_of_a_binary_heap() {
        // Random interleavings of pushes (near, same-bucket, same-time, far beyond the
        // horizon, after long idle gaps) and pops, against a binary heap.
        for seed in 0..40u64 {
            let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
            let mut q = EventQueue::new();
            let mut h = BinaryHeap::new();
            let (mut now, mut seq) = (0u64, 0u64);
            for _ in 0..20_000 {
                if rng.gen_bool(0.55) {
                    let dt = match rng.gen_range(0..6) {
                        0 => 0,
                        1 => rng.gen_range(0..64),
                        2 => rng.gen_range(0..5_000),
                        3 => rng.gen_range(0..10_000_000),
                        4 => rng.gen_range(0..1_000_000_000),
                        _ => rng.gen_range(0..300),
                    };
                    seq += 1;
                    q.push(now + dt, seq, seq);
                    h.push(Reverse((now + dt, seq)));
                } else {
                    let a = q.pop().map(|e| (e.at, e.seq, e.item));
                    let b = h.pop().map(|Reverse((t, s))| (t, s, s));
                    assert_eq!(a, b, "seed {seed}");
                    if let Some((t, ..)) = a {
                        now = t;
                    }
                }
                assert_eq!(q.len(), h.len());
            }
            while let Some(Reverse((t, s))) = h.pop() {
                assert_eq!(q.peek_time(), Some(t));
                let e = q.pop().unwrap();
                assert_eq!((e.at, e.seq), (t, s), "seed {seed}");
            }
            assert!(q.pop().is_none() && q.is_empty());
        }
    }

    #[test]
    fn crowded_buckets_pop_in_order() {
        // Buckets of hundreds of entries (the counting sort), with sequence numbers mostly in
        // scheduling order (a few reserved earlier, as ports do) or shuffled (its fallback).
        for seed in 0..20u64 {
            let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
            let mut q = EventQueue::new();
            let mut h = BinaryHeap::new();
            let (mut now, mut seq) = (0u64, 1_000_000u64);
            let shuffled = seed % 4 == 3;
            let mut used = std::collections::HashSet::new();
            for _ in 0..200 {
                for _ in 0..rng.gen_range(0..400) {
                    let at = now + rng.gen_range(0..3 << WIDTH_SHIFT);
                    seq += 1;
                    let s = if shuffled || rng.gen_bool(0.05) {
                        rng.gen_range(0..seq)
                    } else {
                        seq
                    };
                    if !used.insert(s) {
                        continue;
                    }
                    q.push(at, s, s);
                    h.push(Reverse((at, s)));
                }
                for _ in 0..rng.gen_range(0..400) {
                    let a = q.pop().map(|e| (e.at, e.seq, e.item));
                    let b = h.pop().map(|Reverse((t, s))| (t, s, s));
                    assert_eq!(a, b, "seed {seed}");
                    if let Some((t, ..)) = a {
                        now = t;
                    }
                }
            }
        }
    }
}
