//! How the endpoint names its flows.

use std::net::SocketAddr;

/// A flow is named by its peer and the flow id the opening side chose.
pub type FlowKey = (SocketAddr, u32);

/// Which table a flow is in: the flows this endpoint sends, or those it receives (a sender
/// and a receiver may share a key: same peer, same id chosen by either side).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Dir {
    Send,
    Recv,
}
