//! The application's bytes: byte `i` of every flow is a hash of `i`, so a payload placed at
//! the wrong offset, or delivered twice, shows up as a mismatch.

/// Byte at flow offset `off` (splitmix64 finaliser, top byte).
pub fn byte_at(off: u64) -> u8 {
    let mut x = off.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (x ^ (x >> 31)) as u8
}

/// `len` bytes of the flow starting at offset `off` (offsets wrap; callers keep them sane).
pub fn fill(off: u64, len: usize) -> Vec<u8> {
    (0..len as u64)
        .map(|i| byte_at(off.wrapping_add(i)))
        .collect()
}

/// Whether `bytes` are the flow's bytes at offset `off`.
pub fn matches(off: u64, bytes: &[u8]) -> bool {
    bytes
        .iter()
        .enumerate()
        .all(|(i, &b)| b == byte_at(off.wrapping_add(i as u64)))
}
