//! Fuzz target `sender`: a Sender (any transport, FlashPass included) fed packets from an honest
//! or forging receiver, timer events and application calls, with invariants checked after
//! every step (harness/src/sender.rs, harness/src/sut.rs, docs/fuzzing.md).
#![no_main]

use libfuzzer_sys::fuzz_target;

// Counts heap bytes for the memory-bound invariant.
#[global_allocator]
static ALLOC: flexpass_fuzz_harness::alloc::Counting = flexpass_fuzz_harness::alloc::Counting;

fuzz_target!(|data: &[u8]| {
    flexpass_fuzz_harness::sender::run(data);
});
