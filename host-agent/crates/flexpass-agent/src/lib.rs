//! FlexPass host agent: the transport core on real UDP sockets.

pub mod daemon;
pub mod endpoint;
pub mod socket;

pub use endpoint::{Endpoint, EndpointConfig, EndpointStats, FlowKey};
pub mod workload;
