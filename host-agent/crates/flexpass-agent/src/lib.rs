//! FlexPass host agent: the transport core on real UDP sockets.

pub mod daemon;
pub mod endpoint;
pub mod socket;
pub mod tcp;

pub use endpoint::{Endpoint, EndpointConfig, EndpointStats, FlowKey};
/// Flow-size CDFs, Poisson arrivals and FCT summaries (shared with the network model).
pub use flexpass_workload as workload;
