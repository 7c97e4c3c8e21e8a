//! Sans-IO transport core for FlexPass (EuroSys'23), ExpressPass (SIGCOMM'17), DCTCP (and
//! TCP Cubic as its window), PPT (SIGCOMM'24), FlashPass (shallow-buffered WAN) and pFabric
//! (SIGCOMM'13).
//!
//! Nothing here reads a clock or touches a socket: every entry point takes `now`
//! (nanoseconds on the caller's clock), packets go in through `handle_packet`, and
//! packets to send come out of `poll_transmit`; `poll_timeout` tells the caller when
//! to call `handle_timeout` next. The same code drives the embedded network model
//! (`flexpass-sim`) and the host agent on real sockets.
//!
//! One mechanism, one module, named as in the papers:
//! - [`credit_feedback`]: ExpressPass Algorithm 1 (credit feedback control at the receiver).
//! - [`pacer`]: credit pacing with random jitter and credit-size randomisation (ExpressPass §3.1).
//! - [`dctcp`]: the DCTCP window (α EWMA, ECN cut, slow start, loss and RTO reaction).
//! - [`lcp`]: PPT's low-priority loop (SIGCOMM'24 §3): intermittent loop initialization,
//!   pacing at I/RTT, exponential window decrease, closing after 2 RTTs without LP ACKs.
//! - [`flow_scheduling`]: PPT's buffer-aware identification and mirror-symmetric priority
//!   tagging (§4).
//! - [`flashpass`]: FlashPass's sender-driven emulation (Algorithm 1, T + T_wait data slots,
//!   over-provisioning, §III).
//! - [`pfabric`]: pFabric's end host: the remaining-size priority every data packet carries,
//!   the window at the BDP and the small RTO (§4).
//! - [`pase`]: PASE's arbitration (Algorithm 1: queue and reference rate by remaining size,
//!   end-to-end as the minimum over the path) and its endpoint's window (SIGCOMM'14 §3).
//! - [`scoreboard`]: per-sub-flow send scoreboard: sub-flow sequence space, cumulative ACK +
//!   SACK processing, loss detection by duplicate ACK.
//! - [`send_buffer`]: the single FlexPass send buffer with per-packet states and the
//!   sub-flow scheduler (credit → Lost, else Pending, else Sent-as-reactive).
//! - [`ack_tracker`]: receiver-side per-sub-flow cumulative ACK + SACK generation.
//! - [`reassembly`]: receiver reassembly by flow sequence, in-order delivery.
//! - [`peer`]: the rule that moves an opening flow to where its HELLO_ACK came from.
//! - [`sender`] / [`receiver`]: the per-flow state machines that tie these together,
//!   including the credit request / stop state machine (ExpressPass Fig. 7).

pub mod ack_tracker;
pub mod config;
pub mod credit_feedback;
pub mod dctcp;
pub mod flashpass;
pub mod flow_scheduling;
pub mod lcp;
pub mod pacer;
pub mod pase;
pub mod peer;
pub mod pfabric;
pub mod reassembly;
pub mod receiver;
pub mod scoreboard;
pub mod send_buffer;
pub mod sender;
mod transmit;

pub use config::{
    CreditConfig, DctcpConfig, FlashPassConfig, HostPath, PFabricConfig, PptConfig, ReceiverConfig,
    SenderConfig, TargetLossRule, WindowCc, DEFAULT_GIVE_UP_TIMEOUT, FLASHPASS_MIN_RATE_FRACTION,
    FLASHPASS_MIN_UPDATE_SAMPLES,
};
pub use receiver::{Receiver, ReceiverStats};
pub use sender::{Sender, SenderError, SenderStats};
pub use transmit::Transmit;

pub use flexpass_wire as wire;

/// Time in nanoseconds on the caller's clock (monotonic, arbitrary origin).
pub type Nanos = u64;

pub const MICROS: Nanos = 1_000;
pub const MILLIS: Nanos = 1_000_000;

/// Microsecond timestamp carried in `tsval` / `tsecr` (wrapping, ExpressPass-style RTT probe).
pub(crate) fn wire_timestamp(now: Nanos) -> u32 {
    (now / MICROS) as u32
}
