//! FlexPass host agent: the transport core on real UDP sockets.

pub mod admission;
pub mod api;
pub mod arbitrator;
pub mod daemon;
pub mod datapath;
pub mod edge;
pub mod endpoint;
mod flow;
pub mod frame;
pub mod mtu;
pub mod pase_arbitration;
mod peer_move;
pub mod poller;
pub mod shaper;
pub mod socket;
mod stats;
pub mod tcp;
pub mod timers;
pub mod xdp;

pub use endpoint::{Dir, Endpoint, EndpointConfig, EndpointStats, FlowKey, HandedHello};
/// Flow-size CDFs, Poisson arrivals and FCT summaries (shared with the network model).
pub use flexpass_workload as workload;
