//! Fixed-capacity SACK block list (no heap allocation).

use crate::MAX_SACK_BLOCKS;
use std::fmt;

/// Up to [`MAX_SACK_BLOCKS`] half-open `[start, end)` ranges of sub-flow
/// sequence numbers received above `cum_ack`.
///
/// Invariant: slots at index `>= len` are always `(0, 0)`, so the derived
/// `PartialEq`/`Eq`/`Hash` compare exactly the visible blocks.
///
/// `SackBlocks` does not itself enforce the wire rules (`start < end`,
/// `start > cum_ack`); [`crate::Packet::validate`] and the decoder do.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct SackBlocks {
    blocks: [(u32, u32); MAX_SACK_BLOCKS],
    len: u8,
}

impl SackBlocks {
    /// Empty list.
    pub fn new() -> Self {
        Self::default()
    }

    /// Builds a list from a slice; `None` if it has more than 4 blocks.
    pub fn from_slice(blocks: &[(u32, u32)]) -> Option<Self> {
        let mut s = Self::new();
        for &(start, end) in blocks {
            if !s.push(start, end) {
                return None;
            }
        }
        Some(s)
    }

    /// Appends a block; returns `false` (and changes nothing) if full.
    pub fn push(&mut self, start: u32, end: u32) -> bool {
        match self.blocks.get_mut(usize::from(self.len)) {
            Some(slot) => {
                *slot = (start, end);
                self.len += 1;
                true
            }
            None => false,
        }
    }

    /// Removes all blocks.
    pub fn clear(&mut self) {
        *self = Self::default();
    }

    /// The blocks, in wire order.
    pub fn as_slice(&self) -> &[(u32, u32)] {
        // `len <= MAX_SACK_BLOCKS` always holds; `get` keeps this panic-free anyway.
        self.blocks.get(..usize::from(self.len)).unwrap_or(&[])
    }

    /// Number of blocks.
    pub fn len(&self) -> usize {
        usize::from(self.len)
    }

    /// True if there are no blocks.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// True if no more blocks can be pushed.
    pub fn is_full(&self) -> bool {
        self.len() >= MAX_SACK_BLOCKS
    }

    /// Iterates over the blocks.
    pub fn iter(&self) -> std::slice::Iter<'_, (u32, u32)> {
        self.as_slice().iter()
    }
}

impl fmt::Debug for SackBlocks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.as_slice()).finish()
    }
}

impl<'a> IntoIterator for &'a SackBlocks {
    type Item = &'a (u32, u32);
    type IntoIter = std::slice::Iter<'a, (u32, u32)>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn push_until_full_and_clear() {
        let mut s = SackBlocks::new();
        assert!(s.is_empty());
        for i in 0..4u32 {
            assert!(s.push(10 * i + 1, 10 * i + 5));
        }
        assert!(s.is_full());
        assert!(!s.push(100, 200));
        assert_eq!(s.len(), 4);
        assert_eq!(s.as_slice()[3], (31, 35));
        s.clear();
        assert_eq!(s, SackBlocks::new());
        assert_eq!(format!("{s:?}"), "[]");
        assert!(SackBlocks::from_slice(&[(1, 2); 5]).is_none());
        assert_eq!(SackBlocks::from_slice(&[(1, 2)]).unwrap().len(), 1);
    }
}
