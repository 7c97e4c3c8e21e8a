//! Credit pacing at the receiver (ExpressPass §3.1): credits leave spaced by `1 / cur_rate`
//! with random jitter `j` relative to the gap, and with random sizes from 84 to 92 bytes on
//! the wire, so that synchronised credit streams are dropped fairly at shared credit queues.
//! A host whose loop turn spans many gaps may pace them in batches (`CreditConfig::batch`).

use crate::Nanos;
use rand::rngs::SmallRng;
use rand::Rng;

// Credit padding 6..=14 B gives 18..=26 B FlexPass messages = 84..=92 B on the wire.
use flexpass_wire::{
    CREDIT_PADDING_MAX as MAX_CREDIT_PADDING, CREDIT_PADDING_MIN as MIN_CREDIT_PADDING,
};

#[derive(Clone, Debug)]
pub struct CreditPacer {
    jitter: f64,
    randomize_size: bool,
    /// Credits per batch (1: one by one; see `CreditConfig::batch`).
    batch: u32,
    /// When the next credit is due.
    next_at: Option<Nanos>,
    /// The slot that was next when the pacer was stopped: a restart before it waits for it.
    stopped_at_slot: Option<Nanos>,
    /// The jittered gap between the credits of the current batch, drawn once a batch (ns; 0
    /// before the first batch, which leaves at once).
    step: Nanos,
    /// Credits of the current batch already sent.
    in_batch: u32,
    /// When the last credit left, how many left at that instant, and its padding.
    last_sent: Option<Nanos>,
    at_instant: u32,
    last_padding: u8,
}

impl CreditPacer {
    pub fn new(jitter: f64, randomize_size: bool, batch: u32) -> Self {
        CreditPacer {
            jitter,
            randomize_size,
            batch: batch.max(1),
            next_at: None,
            stopped_at_slot: None,
            step: 0,
            in_batch: 0,
            last_sent: None,
            at_instant: 0,
            last_padding: MIN_CREDIT_PADDING,
        }
    }

    /// Start pacing: the first credit (the first batch) is due now. A restart before the
    /// slot that was next when the pacer stopped resumes there instead, so stopping and
    /// starting again (a credit window that fills and opens) never bursts.
    pub fn start(&mut self, now: Nanos) {
        if self.next_at.is_some() {
            return;
        }
        match self.stopped_at_slot.filter(|&t| t > now) {
            Some(slot) => self.next_at = Some(slot),
            None => {
                self.next_at = Some(now);
                self.step = 0;
                self.in_batch = 0;
            }
        }
    }

    pub fn stop(&mut self) {
        self.stopped_at_slot = self.next_at.take().or(self.stopped_at_slot);
    }

    pub fn is_running(&self) -> bool {
        self.next_at.is_some()
    }

    /// When the caller should poll next: the slot of the last credit of the current batch
    /// (with batch 1, the next credit's).
    pub fn next_at(&self) -> Option<Nanos> {
        let rest = u64::from(self.batch - 1 - self.in_batch);
        self.next_at.map(|t| t + rest * self.step)
    }

    /// If a credit is due at `now`, consume the slot, schedule the next one for `rate`
    /// credits/s and return the credit's padding. The gap is drawn (with its jitter) once a
    /// batch, when the batch before it closes, so a caller that polls at `next_at` finds
    /// exactly a batch due, all of one size (a datapath sends them as one segmented write).
    /// A caller late by more than a batch of gaps is re-anchored so that the rest of the
    /// batch leaves now (missed slots are not replayed: with batch 1, one credit); and the
    /// credit after the `batch`-th of one instant re-anchors to `now`: bursts ≤ `batch + 1`
    /// credits. (Without that rule, jittered gaps as short as 0.1 gap let a caller late by
    /// less than a gap take ten credits at once.)
    pub fn poll(&mut self, now: Nanos, rate: f64, rng: &mut SmallRng) -> Option<u8> {
        let due = self.next_at?;
        if now < due {
            return None;
        }
        let gap = 1e9 / rate;
        let same_instant = self.last_sent == Some(now);
        let before = if same_instant { self.at_instant } else { 0 };
        // The credit after a batch's worth at one instant closes the batch, so its gap is
        // drawn (a restarted pacer's first batch has none yet).
        let closes_batch = self.in_batch + 1 >= self.batch || before >= self.batch;
        let anchor = if before >= self.batch {
            now
        } else if now.saturating_sub(due) as f64 > gap * self.batch as f64 {
            // The credits left in this batch follow this one at once.
            now.saturating_sub(u64::from(self.batch - 1 - self.in_batch) * self.step)
        } else {
            due
        };
        if closes_batch {
            let factor = if self.jitter > 0.0 {
                1.0 + rng.gen_range(-self.jitter..self.jitter)
            } else {
                1.0
            };
            self.step = (gap * factor).max(1.0) as Nanos;
            self.in_batch = 0;
        } else {
            self.in_batch += 1;
        }
        self.next_at = Some(anchor + self.step);
        self.last_sent = Some(now);
        self.at_instant = before + 1;
        let padding = if !self.randomize_size {
            MIN_CREDIT_PADDING
        } else if same_instant && self.batch > 1 {
            self.last_padding
        } else {
            rng.gen_range(MIN_CREDIT_PADDING..=MAX_CREDIT_PADDING)
        };
        self.last_padding = padding;
        Some(padding)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn mean_gap_matches_rate_with_bounded_jitter() {
        let mut rng = SmallRng::seed_from_u64(7);
        let mut p = CreditPacer::new(0.05, true, 1);
        p.start(0);
        let rate = 1e6; // 1 µs gap
        let mut now = 0;
        let mut times = vec![];
        while times.len() < 10_000 {
            if p.poll(now, rate, &mut rng).is_some() {
                times.push(now);
            }
            now = p.next_at().unwrap();
        }
        let gaps: Vec<f64> = times.windows(2).map(|w| (w[1] - w[0]) as f64).collect();
        let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
        assert!((mean - 1000.0).abs() < 5.0, "mean gap {mean}");
        assert!(gaps.iter().all(|g| (949.0..=1051.0).contains(g)));
        assert!(
            gaps.iter().any(|g| *g < 990.0) && gaps.iter().any(|g| *g > 1010.0),
            "jitter present"
        );
    }

    #[test]
    fn sizes_cover_84_to_92_bytes() {
        let mut rng = SmallRng::seed_from_u64(1);
        let mut p = CreditPacer::new(0.0, true, 1);
        p.start(0);
        let mut seen = std::collections::BTreeSet::new();
        let mut now = 0;
        for _ in 0..2000 {
            if let Some(pad) = p.poll(now, 1e6, &mut rng) {
                seen.insert(flexpass_wire::ethernet_wire_len(12 + pad as usize));
            }
            now = p.next_at().unwrap();
        }
        assert_eq!(seen.first(), Some(&84));
        assert_eq!(seen.last(), Some(&92));
    }

    #[test]
    fn jittered_gaps_and_a_late_caller_give_at_most_two_credits_at_once() {
        // Found by the `receiver` fuzz target: with jitter 0.9 a gap can be 0.1 of the
        // mean, so a caller less than a gap late took up to ten credits at one instant.
        for seed in 0..200 {
            let mut rng = SmallRng::seed_from_u64(seed);
            let mut p = CreditPacer::new(0.9, false, 1);
            p.start(0);
            let mut now = 0;
            for _ in 0..50 {
                let mut burst = 0;
                while p.poll(now, 1e6, &mut rng).is_some() {
                    burst += 1;
                }
                assert!(burst <= 2, "seed {seed}: {burst} credits at {now}");
                // Wake up almost a whole mean gap (1 µs) after the next slot.
                now = p.next_at().unwrap() + 999;
            }
        }
    }

    #[test]
    fn late_caller_does_not_burst() {
        let mut rng = SmallRng::seed_from_u64(1);
        let mut p = CreditPacer::new(0.0, false, 1);
        p.start(0);
        assert!(p.poll(0, 1e6, &mut rng).is_some());
        // Caller wakes 100 gaps late: one credit now, the next a gap later.
        assert!(p.poll(100_000, 1e6, &mut rng).is_some());
        assert!(p.poll(100_000, 1e6, &mut rng).is_none());
        assert_eq!(p.next_at(), Some(101_000));
    }

    #[test]
    fn stopping_and_starting_again_resumes_at_the_next_slot_not_at_once() {
        // Found by the `receiver` and `pair` fuzz targets (windowed seeds): a credit window
        // that fills and opens again at one instant (several data packets read together)
        // restarted the pacer each time, one more credit each: three at one instant with
        // batch 1.
        let mut rng = SmallRng::seed_from_u64(1);
        for batch in [1, 8] {
            let mut p = CreditPacer::new(0.0, false, batch);
            p.start(0);
            let first = std::iter::from_fn(|| p.poll(0, 1e6, &mut rng)).count();
            assert_eq!(first, batch as usize);
            for _ in 0..5 {
                p.stop();
                p.start(0);
                assert!(p.poll(0, 1e6, &mut rng).is_none(), "batch {batch}: a burst");
            }
            assert_eq!(p.next_at(), Some(1_000 * u64::from(batch)));
            // Stopped for longer than a gap: the next start is a fresh one, at once.
            p.stop();
            p.start(50_000);
            assert!(p.poll(50_000, 1e6, &mut rng).is_some());
        }
        // Stopped within the first batch and started again at the same instant (a fresh
        // start each time): still at most batch + 1 at that instant (was 10 for batch 8).
        let mut p = CreditPacer::new(0.9, false, 8);
        let mut at_once = 0;
        for _ in 0..4 {
            p.start(0);
            at_once += std::iter::from_fn(|| p.poll(0, 1e6, &mut rng))
                .take(4)
                .count();
            p.stop();
        }
        assert!(at_once <= 9, "{at_once} credits at one instant");
    }

    /// Batch sizes 1, 4, 8, 16, each without and with the model's jitter (0.9).
    const BATCH_CASES: [(u32, f64); 8] = [
        (1, 0.0),
        (1, 0.9),
        (4, 0.0),
        (4, 0.9),
        (8, 0.0),
        (8, 0.9),
        (16, 0.0),
        (16, 0.9),
    ];

    /// 10 ms of 1 µs credit gaps, polled by a caller that wakes `late` ns after the time the
    /// pacer asks for; `each` sees the paddings of every wake-up. Returns (credits, wake-ups).
    fn drive(batch: u32, jitter: f64, late: Nanos, mut each: impl FnMut(&[u8])) -> (u64, u64) {
        let mut rng = SmallRng::seed_from_u64(u64::from(batch));
        let mut p = CreditPacer::new(jitter, true, batch);
        p.start(0);
        let (mut now, mut sent, mut wakes) = (0, 0u64, 0u64);
        while now < 10_000_000 {
            let mut sizes = Vec::new();
            while let Some(pad) = p.poll(now, 1e6, &mut rng) {
                sizes.push(pad);
            }
            assert!(
                sizes.len() <= batch as usize + 1,
                "{batch}: {} at once",
                sizes.len()
            );
            each(&sizes);
            sent += sizes.len() as u64;
            wakes += 1;
            now = p.next_at().unwrap() + late;
        }
        (sent, wakes)
    }

    #[test]
    fn batches_leave_together_with_one_size_and_keep_the_rate() {
        for (batch, jitter) in BATCH_CASES {
            let mut sizes_seen = std::collections::BTreeSet::new();
            let (sent, wakes) = drive(batch, jitter, 0, |sizes| {
                if batch > 1 {
                    assert!(sizes.iter().all(|&s| s == sizes[0]), "one size: {sizes:?}");
                }
                sizes_seen.extend(sizes.iter().copied());
            });
            // The rate is kept (the jitter's mean over fewer draws is noisier: ±3 %), and a
            // caller that polls when asked finds a whole batch due each time.
            assert!(
                (9_700..=10_300).contains(&sent),
                "{batch}, j {jitter}: {sent} credits"
            );
            assert_eq!(
                sent,
                wakes * u64::from(batch),
                "{batch}, j {jitter}: whole batches"
            );
            // Batches draw their sizes independently.
            assert!(sizes_seen.len() > 5, "{batch}: sizes {sizes_seen:?}");
        }
    }

    #[test]
    fn a_caller_late_by_ten_gaps_gets_about_a_batch_at_once() {
        for (batch, jitter) in BATCH_CASES {
            let (sent, wakes) = drive(batch, jitter, 10_000, |_| {});
            // batch + 9 credits are due at each wake-up, more than a batch late: about a
            // batch leaves, the rest is skipped.
            let per_wake = sent as f64 / wakes as f64;
            let ok = per_wake > batch as f64 * 0.7 && per_wake <= (batch + 1) as f64;
            assert!(ok, "{batch}, j {jitter}: {per_wake} credits a wake-up");
        }
    }
}
