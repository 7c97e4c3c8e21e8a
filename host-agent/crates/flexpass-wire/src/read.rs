//! Panic-free big-endian readers of a message buffer, shared by the decoders of
//! `crate::packet` and `crate::arbitration`.

use crate::error::DecodeError;

/// Reads `N` bytes at `off`; `Truncated` if the buffer is too short.
pub(crate) fn array_at<const N: usize>(buf: &[u8], off: usize) -> Result<[u8; N], DecodeError> {
    let end = off.saturating_add(N);
    buf.get(off..end)
        .and_then(|s| <[u8; N]>::try_from(s).ok())
        .ok_or(DecodeError::Truncated {
            needed: end,
            got: buf.len(),
        })
}

pub(crate) fn u8_at(buf: &[u8], off: usize) -> Result<u8, DecodeError> {
    array_at::<1>(buf, off).map(|[b]| b)
}

pub(crate) fn u16_at(buf: &[u8], off: usize) -> Result<u16, DecodeError> {
    array_at(buf, off).map(u16::from_be_bytes)
}

pub(crate) fn u32_at(buf: &[u8], off: usize) -> Result<u32, DecodeError> {
    array_at(buf, off).map(u32::from_be_bytes)
}

pub(crate) fn u64_at(buf: &[u8], off: usize) -> Result<u64, DecodeError> {
    array_at(buf, off).map(u64::from_be_bytes)
}

/// Fixed-size types: shorter → `Truncated`, longer → `LengthMismatch`.
pub(crate) fn exact_len(len: usize, need: usize) -> Result<(), DecodeError> {
    if len < need {
        Err(DecodeError::Truncated {
            needed: need,
            got: len,
        })
    } else if len > need {
        Err(DecodeError::LengthMismatch {
            expected: need,
            got: len,
        })
    } else {
        Ok(())
    }
}
