//! Stateful fuzzing of flexpass-core (issue 14): the `sender`, `receiver` and `pair` fuzz
//! targets drive the real [`Sender`](flexpass_core::Sender) and
//! [`Receiver`](flexpass_core::Receiver) with arbitrary interleavings of packets (valid-looking
//! and forged), application calls and timer events, and check invariants after every step.
//!
//! * [`codec`]: the input format. Every target reads a header and then a list of operations
//!   from the fuzzer's bytes with a total decoder (any bytes decode to some input), and the
//!   same types encode back to bytes, so the seed generator writes inputs that decode to
//!   exactly the operations it ran (`tests/seeds.rs` checks the round trip).
//! * [`sut`]: [`SenderSut`](sut::SenderSut) and [`ReceiverSut`](sut::ReceiverSut), the
//!   endpoints wrapped with everything the invariants need (what the application wrote,
//!   what went on the wire, what came back).
//! * [`sender`], [`receiver`], [`pair`]: the three targets' operations and drivers.
//! * [`seeds`]: seed corpora from Sender ↔ Receiver exchanges over an in-memory lossy link.
//! * [`decode_seeds`]: one message of every type for the `decode` target.
//! * [`text_seeds`]: real inputs of the text-parser targets (`api`, `edge_text`).
//! * [`alloc`]: a counting global allocator for the memory-bound invariant.
//!
//! docs/fuzzing.md lists the invariants.

pub mod alloc;
pub mod codec;
pub mod decode_seeds;
pub mod pair;
pub mod pattern;
pub mod receiver;
pub mod seeds;
pub mod sender;
pub mod sut;
pub mod text_seeds;
