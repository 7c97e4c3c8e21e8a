//! A counting global allocator: the fuzz targets install it (`#[global_allocator]`) and the
//! drivers check after every step that the bytes live on the heap stay within a budget that
//! grows linearly with the input (bytes written, packets in and out, operations). A structure
//! that grows with time, or quadratically with the input, fails the check. Without the
//! allocator installed (e.g. in unit tests) the check is skipped.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

static LIVE: AtomicUsize = AtomicUsize::new(0);

pub struct Counting;

// SAFETY: every call is forwarded unchanged to the system allocator; only a counter is kept.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc(layout);
        if !p.is_null() {
            LIVE.fetch_add(layout.size(), Relaxed);
        }
        p
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc_zeroed(layout);
        if !p.is_null() {
            LIVE.fetch_add(layout.size(), Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout);
        LIVE.fetch_sub(layout.size(), Relaxed);
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = System.realloc(ptr, layout, new_size);
        if !p.is_null() {
            LIVE.fetch_sub(layout.size(), Relaxed);
            LIVE.fetch_add(new_size, Relaxed);
        }
        p
    }
}

/// Heap bytes live now, or None when the counting allocator is not installed.
pub fn live_bytes() -> Option<usize> {
    match LIVE.load(Relaxed) {
        0 => None,
        n => Some(n),
    }
}

/// Heap budget of one fuzz input: what was live when it started, plus [`BASE`], plus what
/// the input's operations, packets and bytes were granted.
pub struct Budget {
    start: usize,
}

/// Fixed allowance of one input (the endpoints' initial state, e.g. the receiver's
/// 1024-slot credit table, scratch buffers).
pub const BASE: usize = 256 << 10;
/// Per packet handled or emitted (queues, scoreboard slots, segments, harness records).
pub const PER_PACKET: usize = 1024;
/// Per operation.
pub const PER_OP: usize = 256;
/// Per byte written or injected (the send buffer, payload copies, reassembly).
pub const PER_BYTE: usize = 4;

impl Budget {
    pub fn new() -> Self {
        Budget {
            start: live_bytes().unwrap_or(0),
        }
    }

    /// Panics if the heap grew beyond the budget.
    pub fn check(&self, granted: usize, what: &dyn std::fmt::Debug) {
        if let Some(live) = live_bytes() {
            let limit = self.start.saturating_add(BASE).saturating_add(granted);
            assert!(
                live <= limit,
                "memory bound: {live} B live after {what:?}, budget {limit} B"
            );
        }
    }
}

impl Default for Budget {
    fn default() -> Self {
        Self::new()
    }
}
