//! Receiver reassembly by flow sequence (byte offset): segments from both sub-flows are put
//! back in order, duplicates (e.g. proactive retransmissions of reactive packets that did
//! arrive) are discarded, and in-order bytes are handed to the application.

use bytes::Bytes;
use std::collections::{BTreeMap, VecDeque};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Inserted {
    New,
    Duplicate,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ReassemblyError {
    #[error("FIN at {got} contradicts the flow end {known} already known")]
    FinConflict { known: u64, got: u64 },
    #[error("data up to {end} lies beyond the flow end {fin}")]
    BeyondFin { end: u64, fin: u64 },
    #[error("data up to {end} is more than the reorder limit ahead of {next}")]
    TooFarAhead { end: u64, next: u64 },
    #[error("{held} bytes already held out of order, limit {limit}")]
    BufferFull { held: u64, limit: u64 },
    #[error("flow offset overflow")]
    Overflow,
}

#[derive(Clone, Debug)]
pub struct Reassembly {
    /// Every byte below this is in order (delivered or ready).
    next: u64,
    out_of_order: BTreeMap<u64, Bytes>,
    /// Payload bytes held in `out_of_order`.
    out_of_order_bytes: u64,
    ready: VecDeque<Bytes>,
    ready_bytes: u64,
    fin: Option<u64>,
    max_ahead: u64,
    /// Highest end offset seen (for FIN consistency).
    highest_end: u64,
}

impl Reassembly {
    pub fn new(max_ahead: u64) -> Self {
        Reassembly {
            next: 0,
            out_of_order: BTreeMap::new(),
            out_of_order_bytes: 0,
            ready: VecDeque::new(),
            ready_bytes: 0,
            fin: None,
            max_ahead,
            highest_end: 0,
        }
    }

    /// In-order bytes received (delivered or waiting to be read).
    pub fn next(&self) -> u64 {
        self.next
    }

    pub fn fin(&self) -> Option<u64> {
        self.fin
    }

    /// All bytes up to the FIN are in order.
    pub fn is_complete(&self) -> bool {
        self.fin == Some(self.next)
    }

    pub fn ready_bytes(&self) -> u64 {
        self.ready_bytes
    }

    /// Payload bytes held out of order (segments above a hole).
    pub fn out_of_order_bytes(&self) -> u64 {
        self.out_of_order_bytes
    }

    pub fn insert(
        &mut self,
        flow_seq: u64,
        payload: Bytes,
        fin: bool,
    ) -> Result<Inserted, ReassemblyError> {
        let end = flow_seq
            .checked_add(payload.len() as u64)
            .ok_or(ReassemblyError::Overflow)?;
        if fin {
            match self.fin {
                Some(known) if known != end => {
                    return Err(ReassemblyError::FinConflict { known, got: end })
                }
                None if self.highest_end > end => {
                    return Err(ReassemblyError::FinConflict {
                        known: self.highest_end,
                        got: end,
                    })
                }
                _ => {}
            }
        }
        if let Some(f) = self.fin {
            if end > f {
                return Err(ReassemblyError::BeyondFin { end, fin: f });
            }
        }
        if end > self.next.saturating_add(self.max_ahead) {
            return Err(ReassemblyError::TooFarAhead {
                end,
                next: self.next,
            });
        }
        // The limit also bounds the bytes held: overlapping segments at different offsets
        // (never sent by a correct sender, whose segment boundaries are fixed) would
        // otherwise each be kept, up to the range times the largest payload.
        if flow_seq > self.next && !payload.is_empty() {
            let have = self
                .out_of_order
                .get(&flow_seq)
                .map_or(0, |b| b.len() as u64);
            let len = payload.len() as u64;
            if len > have && self.out_of_order_bytes - have + len > self.max_ahead {
                return Err(ReassemblyError::BufferFull {
                    held: self.out_of_order_bytes,
                    limit: self.max_ahead,
                });
            }
        }
        let newly_fin = fin && self.fin.is_none();
        if fin {
            self.fin = Some(end);
        }
        self.highest_end = self.highest_end.max(end);
        if end <= self.next || payload.is_empty() {
            return Ok(if newly_fin {
                Inserted::New
            } else {
                Inserted::Duplicate
            });
        }
        if flow_seq <= self.next {
            self.push_ready(payload.slice((self.next - flow_seq) as usize..));
            self.next = end;
            self.drain();
            return Ok(Inserted::New);
        }
        match self.out_of_order.get(&flow_seq) {
            Some(have) if have.len() >= payload.len() => Ok(Inserted::Duplicate),
            _ => {
                self.out_of_order_bytes += payload.len() as u64;
                if let Some(old) = self.out_of_order.insert(flow_seq, payload) {
                    self.out_of_order_bytes -= old.len() as u64;
                }
                Ok(Inserted::New)
            }
        }
    }

    fn push_ready(&mut self, b: Bytes) {
        if !b.is_empty() {
            self.ready_bytes += b.len() as u64;
            self.ready.push_back(b);
        }
    }

    fn drain(&mut self) {
        while let Some(entry) = self.out_of_order.first_entry() {
            if *entry.key() > self.next {
                break;
            }
            let (start, seg) = entry.remove_entry();
            self.out_of_order_bytes -= seg.len() as u64;
            let end = start + seg.len() as u64;
            if end > self.next {
                self.push_ready(seg.slice((self.next - start) as usize..));
                self.next = end;
            }
        }
    }

    /// Next in-order chunk for the application.
    pub fn read(&mut self) -> Option<Bytes> {
        let b = self.ready.pop_front()?;
        self.ready_bytes -= b.len() as u64;
        Some(b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect(r: &mut Reassembly) -> Vec<u8> {
        let mut v = vec![];
        while let Some(b) = r.read() {
            v.extend_from_slice(&b);
        }
        v
    }

    #[test]
    fn reorders_and_discards_duplicates() {
        let mut r = Reassembly::new(1 << 20);
        assert_eq!(
            r.insert(3, Bytes::from_static(b"def"), false),
            Ok(Inserted::New)
        );
        assert_eq!(
            r.insert(3, Bytes::from_static(b"def"), false),
            Ok(Inserted::Duplicate)
        );
        assert_eq!(
            r.insert(0, Bytes::from_static(b"abc"), false),
            Ok(Inserted::New)
        );
        assert_eq!(
            r.insert(0, Bytes::from_static(b"abc"), false),
            Ok(Inserted::Duplicate)
        );
        assert_eq!(
            r.insert(6, Bytes::from_static(b"g"), true),
            Ok(Inserted::New)
        );
        assert!(r.is_complete());
        assert_eq!(collect(&mut r), b"abcdefg");
    }

    #[test]
    fn overlapping_segments_are_trimmed() {
        let mut r = Reassembly::new(1 << 20);
        r.insert(2, Bytes::from_static(b"cdef"), false).unwrap();
        r.insert(0, Bytes::from_static(b"abcd"), false).unwrap();
        assert_eq!(collect(&mut r), b"abcdef");
    }

    #[test]
    fn overlapping_segments_cannot_hold_more_than_the_limit() {
        // Found by the `receiver` fuzz target: the limit bounded the offsets ahead of the
        // in-order point, not the bytes held, so segments overlapping at different offsets
        // (a forged or broken sender) were each kept, beyond the configured limit.
        let mut r = Reassembly::new(100);
        let seg = |at: u64| Bytes::from(vec![at as u8; 90]);
        assert_eq!(r.insert(5, seg(5), false), Ok(Inserted::New));
        assert_eq!(
            r.insert(6, seg(6), false),
            Err(ReassemblyError::BufferFull {
                held: 90,
                limit: 100
            })
        );
        assert_eq!(r.out_of_order_bytes(), 90);
        // A longer copy at the same offset replaces the shorter one within the limit.
        assert_eq!(
            r.insert(5, Bytes::from(vec![5; 95]), false),
            Ok(Inserted::New)
        );
        assert_eq!(r.out_of_order_bytes(), 95);
        // In-order data is never refused for it, and draining frees the space.
        r.insert(0, Bytes::from_static(b"abcde"), false).unwrap();
        assert_eq!((r.next(), r.out_of_order_bytes()), (100, 0));
        assert_eq!(r.insert(110, seg(110), false), Ok(Inserted::New));
    }

    #[test]
    fn inconsistent_fin_and_limits() {
        let mut r = Reassembly::new(100);
        r.insert(0, Bytes::from_static(b"abc"), true).unwrap();
        assert!(r.insert(0, Bytes::from_static(b"abcd"), true).is_err());
        assert!(r.insert(3, Bytes::from_static(b"x"), false).is_err());
        let mut r = Reassembly::new(100);
        assert!(r.insert(200, Bytes::from_static(b"x"), false).is_err());
        r.insert(10, Bytes::from_static(b"x"), false).unwrap();
        assert!(r.insert(0, Bytes::from_static(b"ab"), true).is_err());
    }
}
