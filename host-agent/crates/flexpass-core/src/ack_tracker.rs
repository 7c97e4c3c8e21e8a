//! Receiver side of one sub-flow's sequence space: cumulative ACK + up to four SACK blocks
//! (RFC 2018 order: the block holding the packet just received first, then the highest).

use flexpass_wire::{SackBlocks, MAX_SACK_BLOCKS};
use std::collections::BTreeMap;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Recorded {
    New,
    Duplicate,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TrackError {
    #[error("sub-flow sequence {seq} is too far ahead of cumulative ACK {cum}")]
    TooFarAhead { seq: u32, cum: u32 },
    #[error("too many holes in the sub-flow sequence space")]
    TooFragmented,
}

#[derive(Clone, Debug)]
pub struct AckTracker {
    cum: u32,
    /// Received ranges above `cum`: start → end (half-open), disjoint and non-adjacent.
    above: BTreeMap<u32, u32>,
    max_ahead: u32,
    max_ranges: usize,
}

impl Default for AckTracker {
    fn default() -> Self {
        Self::new()
    }
}

impl AckTracker {
    pub fn new() -> Self {
        AckTracker {
            cum: 0,
            above: BTreeMap::new(),
            max_ahead: 1 << 20,
            max_ranges: 4096,
        }
    }

    /// Next expected sequence: every sequence below it has been received.
    pub fn cum_ack(&self) -> u32 {
        self.cum
    }

    pub fn record(&mut self, seq: u32) -> Result<Recorded, TrackError> {
        if seq < self.cum {
            return Ok(Recorded::Duplicate);
        }
        if seq - self.cum >= self.max_ahead {
            return Err(TrackError::TooFarAhead { seq, cum: self.cum });
        }
        if seq == self.cum {
            self.cum += 1;
            if let Some(end) = self.above.remove(&self.cum) {
                self.cum = end;
            }
            return Ok(Recorded::New);
        }
        // Range at or below seq.
        let below = self.above.range(..=seq).next_back().map(|(&s, &e)| (s, e));
        if let Some((_, e)) = below {
            if seq < e {
                return Ok(Recorded::Duplicate);
            }
        }
        let next_start = seq + 1;
        let after = self.above.remove(&next_start);
        match below {
            Some((s, e)) if e == seq => {
                self.above.insert(s, after.unwrap_or(seq + 1));
            }
            _ => {
                if after.is_none() && self.above.len() >= self.max_ranges {
                    return Err(TrackError::TooFragmented);
                }
                self.above.insert(seq, after.unwrap_or(seq + 1));
            }
        }
        Ok(Recorded::New)
    }

    /// SACK blocks for an ACK triggered by `recent`.
    pub fn sack_blocks(&self, recent: u32) -> SackBlocks {
        let mut blocks = SackBlocks::new();
        let first = self
            .above
            .range(..=recent)
            .next_back()
            .filter(|(_, &e)| recent < e)
            .map(|(&s, &e)| (s, e));
        if let Some((s, e)) = first {
            blocks.push(s, e);
        }
        for (&s, &e) in self.above.iter().rev() {
            if blocks.len() >= MAX_SACK_BLOCKS {
                break;
            }
            if Some((s, e)) != first {
                blocks.push(s, e);
            }
        }
        blocks
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cumulative_and_sack() {
        let mut t = AckTracker::new();
        assert_eq!(t.record(0), Ok(Recorded::New));
        assert_eq!(t.record(2), Ok(Recorded::New));
        assert_eq!(t.record(3), Ok(Recorded::New));
        assert_eq!(t.record(6), Ok(Recorded::New));
        assert_eq!(t.cum_ack(), 1);
        assert_eq!(t.sack_blocks(3).as_slice(), &[(2, 4), (6, 7)]);
        assert_eq!(t.sack_blocks(6).as_slice(), &[(6, 7), (2, 4)]);
        assert_eq!(t.record(3), Ok(Recorded::Duplicate));
        assert_eq!(t.record(1), Ok(Recorded::New));
        assert_eq!(t.cum_ack(), 4);
        assert_eq!(t.record(5), Ok(Recorded::New));
        assert_eq!(t.record(4), Ok(Recorded::New));
        assert_eq!(t.cum_ack(), 7);
        assert!(t.sack_blocks(4).is_empty());
        assert_eq!(t.record(0), Ok(Recorded::Duplicate));
    }

    #[test]
    fn at_most_four_blocks_and_bounded_state() {
        let mut t = AckTracker::new();
        for s in (2..40).step_by(2) {
            t.record(s).unwrap();
        }
        let b = t.sack_blocks(10);
        assert_eq!(b.len(), 4);
        assert_eq!(b.as_slice()[0], (10, 11));
        assert_eq!(b.as_slice()[1], (38, 39));
        assert!(t.record(1 << 21).is_err());
    }
}
