//! What the sender reports: its errors, why it rejected a packet, and its counters.

use crate::flashpass::EmulationStats;
use crate::lcp::LcpStats;
use crate::scoreboard::AckError;
use flexpass_wire::TransportKind;
use serde::Serialize;

#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error, Serialize)]
pub enum SenderError {
    #[error("peer did not answer HELLO: it does not speak FlexPass (fall back to kernel TCP)")]
    PeerNotResponding,
    #[error("peer refused the flow")]
    Refused,
    #[error("peer does not support this transport")]
    UnsupportedTransport,
    #[error("peer reset the flow")]
    Reset,
    #[error("no credit and no ACK from the peer for {silent_ms} ms ({expiries} recovery timeouts in a row)")]
    NoProgress { silent_ms: u64, expiries: u32 },
    #[error("sub-flow sequence space exhausted")]
    SequenceExhausted,
}

/// Why an incoming packet was not accepted (it is counted and otherwise ignored).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Rejected {
    #[error("packet belongs to flow {got}, not {expected}")]
    WrongFlow { expected: u32, got: u32 },
    #[error("packet type not expected by a {0:?} sender")]
    UnexpectedType(TransportKind),
    #[error(transparent)]
    BadAck(#[from] AckError),
    #[error("ACK claims {flow_ack} bytes delivered but only {sent} were sent")]
    FlowAckBeyondSent { flow_ack: u64, sent: u64 },
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SenderStats {
    pub bytes_acked: u64,
    pub packets_proactive: u64,
    pub packets_reactive: u64,
    pub bytes_proactive: u64,
    pub bytes_reactive: u64,
    /// Transmissions of a segment that had been sent before (any reason).
    pub retransmissions: u64,
    /// Credits spent on a segment still sent-as-reactive (FlexPass "proactive retransmission").
    pub proactive_retransmissions: u64,
    pub losses_proactive: u64,
    pub losses_reactive: u64,
    /// Retransmission timeouts that stalled the flow: DCTCP's RTO, or a FlexPass reactive
    /// RTO that fired while the proactive sub-flow had nothing else to send.
    pub timeouts: u64,
    /// FlexPass reactive RTOs that only re-classified unACKed reactive packets as Lost while
    /// credits were still carrying other data (no stall; the credits then carry them).
    pub reactive_rto_reclassified: u64,
    /// Proactive recovery-timer expiries (credits re-requested).
    pub recovery_timeouts: u64,
    pub credits_received: u64,
    /// Credits that arrived when there was nothing to send.
    pub credits_wasted: u64,
    pub credit_requests: u64,
    pub credit_stops: u64,
    pub hello_retransmissions: u64,
    /// HELLO_ACK `retry` answers: the HELLO was sent again with the receiver's cookie
    /// (docs/protocol.md §11, "Half-open flows and cookies").
    pub cookie_retries: u64,
    pub rejected_packets: u64,
    /// PPT: the low-priority loop's counters (all zero for other transports).
    #[serde(skip_serializing_if = "LcpStats::is_zero")]
    pub lcp: LcpStats,
    /// PPT: identified as large by the buffer-aware approach (§4.1).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub identified_large: bool,
    /// FlashPass: the emulation's counters (all zero for other transports).
    #[serde(skip_serializing_if = "is_default")]
    pub emulation: EmulationStats,
    /// FlashPass: bytes sent unscheduled in the pre-credit phase (Aeolus).
    #[serde(skip_serializing_if = "is_zero")]
    pub bytes_unscheduled: u64,
    /// Tail-loss probes sent (`DctcpConfig::tlp`), and those whose ACK declared packets sent
    /// before the probe lost (recovered without waiting for the RTO; a probe that re-sent
    /// the only lost packet repairs the tail itself and is not counted here).
    pub tlp_probes: u64,
    pub tlp_recoveries: u64,
    /// PASE probing (§3.3): header-only probes sent from the lowest queue, and the answers
    /// that showed room (data resumed).
    #[serde(skip_serializing_if = "is_zero")]
    pub pase_probes: u64,
    #[serde(skip_serializing_if = "is_zero")]
    pub pase_probe_resumes: u64,
    /// pFabric's probe mode (§4.2): times entered (after consecutive timeouts), and the
    /// header-only probes sent in it.
    #[serde(skip_serializing_if = "is_zero")]
    pub pfabric_probe_modes: u64,
    #[serde(skip_serializing_if = "is_zero")]
    pub pfabric_probes: u64,
}

fn is_default<T: Default + PartialEq>(v: &T) -> bool {
    *v == T::default()
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}
