//! Fuzz target `receiver`: a Receiver fed data at any offsets, HELLO, CREDIT_REQUEST/STOP,
//! RESET and stray packets, reads, polls and timer events, with invariants checked after
//! every step (harness/src/receiver.rs, harness/src/sut.rs, docs/fuzzing.md).
#![no_main]

use libfuzzer_sys::fuzz_target;

// Counts heap bytes for the memory-bound invariant.
#[global_allocator]
static ALLOC: flexpass_fuzz_harness::alloc::Counting = flexpass_fuzz_harness::alloc::Counting;

fuzz_target!(|data: &[u8]| {
    flexpass_fuzz_harness::receiver::run(data);
});
