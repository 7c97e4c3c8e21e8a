//! Fuzz target `pair`: a Sender and a Receiver over an adversarial channel (drop, duplicate,
//! reorder, CE-mark, forge); safety invariants after every step, eventual consistency at the
//! end of benign inputs (harness/src/pair.rs, docs/fuzzing.md).
#![no_main]

use libfuzzer_sys::fuzz_target;

// Counts heap bytes for the memory-bound invariant.
#[global_allocator]
static ALLOC: flexpass_fuzz_harness::alloc::Counting = flexpass_fuzz_harness::alloc::Counting;

fuzz_target!(|data: &[u8]| {
    flexpass_fuzz_harness::pair::run(data);
});
