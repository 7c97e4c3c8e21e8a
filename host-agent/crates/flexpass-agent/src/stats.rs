//! The endpoint's counters (`Endpoint::stats`, the daemon's `status` → `endpoint`).

use serde::Serialize;

/// Counters of everything the endpoint refused; the flows themselves are unaffected.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct EndpointStats {
    pub datagrams_in: u64,
    pub datagrams_out: u64,
    pub malformed: u64,
    /// Empty datagrams: another agent's first-contact probe (it learns from an ICMP port
    /// unreachable whether an agent runs here; `tcp.rs` `start_probe`), not malformed.
    pub probes: u64,
    pub unknown_flow: u64,
    pub rejected_by_flow: u64,
    pub credits_rate_limited: u64,
    /// Credits not sent because this host's receive buffer was more than
    /// `RX_BACKLOG_CREDIT_LIMIT` full (it cannot keep up with the data it credits).
    pub credits_dropped_rx_backlog: u64,
    /// FlashPass: emulation packets the host's emulation queue dropped (over the link's
    /// emulation share, or over-provisioned above the threshold).
    pub emulation_dropped: u64,
    pub send_errors: u64,
    /// recvmmsg(2) / sendmmsg(2) calls (datagrams per call = datagrams_in / recv_calls).
    pub recv_calls: u64,
    pub send_calls: u64,
    /// RESET(unknown_flow) answers sent (rate-limited).
    pub resets_sent: u64,
    /// Credit pacing error (actual send time − pacer's due time), ns: p50 / p99 / max over
    /// the credits sent so far (see `Endpoint::pacing_error`).
    pub credit_pacing_error_ns: [u64; 3],
    /// Half-open flows now (created by a HELLO without a valid cookie, no data yet) and at
    /// most so far.
    pub half_open: u64,
    pub half_open_peak: u64,
    /// Half-open flows confirmed (first data, connection answered, or a cookie HELLO).
    pub half_open_confirmed: u64,
    /// Half-open flows dropped: older than the timeout when the table was full, or the
    /// oldest with cookies off.
    pub half_open_expired: u64,
    pub half_open_evicted: u64,
    /// HELLOs answered with HELLO_ACK retry and a cookie, keeping no state.
    pub cookies_sent: u64,
    /// HELLOs with a cookie: valid (flow created, confirmed) or not (handled as without).
    pub cookies_valid: u64,
    pub cookies_invalid: u64,
    /// Credits of half-open flows not sent: beyond the half-open share of the credit rate,
    /// and half-open flows whose credits were stopped after `half_open_credits`.
    pub half_open_credits_limited: u64,
    pub half_open_credit_stops: u64,
    /// Credits of half-open flows sent (within the half-open share).
    pub half_open_credits_sent: u64,
    /// HELLOs refused (HELLO_ACK refused) because `max_flows` flows exist.
    pub flows_refused: u64,
    /// Credits received for our flows above the link's credit rate, dropped on arrival.
    pub credits_in_rate_limited: u64,
    /// PASE (docs/protocol.md §11, "PASE arbitration"): ARBITRATION_REQUESTs sent, and
    /// ARBITRATION_RESPONSEs accepted, not from the arbitrator's address (forged), for no
    /// request of ours (unasked), or refused by the flow (`ArbitrationError`: a queue or rate
    /// out of range).
    pub arbitration_requests: u64,
    pub arbitrations_accepted: u64,
    pub arbitration_forged: u64,
    pub arbitration_unasked: u64,
    pub arbitration_rejected: u64,
    /// PASE delegation: shares of the arbitrator's link taken, and flow arbitrations this
    /// host made over them (`crate::pase_arbitration`).
    pub pase_shares: u64,
    pub pase_local_arbitrations: u64,
    /// Our flows whose peer moved to the port their HELLO_ACK came from, and datagrams
    /// ignored by that rule (docs/protocol.md §11, "The peer of a flow"): a HELLO_ACK from
    /// another address than the HELLO went to (or from another port, not `accepted`), and
    /// what a moved flow still gets from the address it left.
    pub peer_moved: u64,
    pub peer_ignored: u64,
    /// Hand-over (docs/datapath.md, "Hand-over of a connection to the serving process"):
    /// HELLOs handed to the process serving their port, datagrams of handed flows dropped
    /// at this port, handed flows the process refused, or never answered (both reset).
    pub handed_over: u64,
    pub handed_dropped: u64,
    pub handed_refused: u64,
    pub handed_expired: u64,
    /// "udp" or "xdp" (docs/datapath.md), and the AF_XDP packet counts.
    pub datapath: &'static str,
    pub xdp: Option<crate::xdp::XdpCounters>,
}
