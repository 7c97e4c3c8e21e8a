//! Packet types, strict decoder and canonical encoder.
//!
//! Byte layouts are specified in docs/protocol.md; offsets below are relative
//! to the start of the FlexPass message (= start of the UDP payload).
//!
//! One piece (over 1 000 lines): every message type next to its decoder and encoder, in
//! docs/protocol.md's order, so a layout change is one diff read against the spec; split
//! in two, each offset would sit apart from the field it fills.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::arbitration::{ArbitrationRequest, ArbitrationResponse};
use crate::dscp::{Ecn, TrafficClass};
use crate::error::{DecodeError, EncodeError};
use crate::read::{array_at, exact_len, u16_at, u32_at, u64_at, u8_at};
use crate::sack::SackBlocks;
use crate::{
    ethernet_frame_len, ethernet_wire_len, ACK_BASE_LEN, ARBITRATION_REQUEST_LEN,
    ARBITRATION_RESPONSE_LEN, COMMON_HEADER_LEN, COOKIE_LEN, CREDIT_HEADER_LEN, CREDIT_MSG_MAX,
    CREDIT_MSG_MIN, CREDIT_PADDING_MAX, CREDIT_PADDING_MIN, CREDIT_REQUEST_LEN, CREDIT_STOP_LEN,
    DATA_HEADER_LEN, EMULATION_CREDIT_BASE_LEN, EMULATION_GRANT_LEN, EMULATION_LEN, FLAG_CONN,
    FLAG_COOKIE, FLAG_ECE, FLAG_FIN, FLAG_IDLE, FLAG_PRIO, FLAG_PROBE, FLAG_RETX,
    HELLO_ACK_COOKIE_LEN, HELLO_ACK_LEN, HELLO_CONN_LEN, HELLO_LEN, MAX_EMULATION_GRANTS,
    MAX_MESSAGE_LEN, MAX_SACK_BLOCKS, PRIORITY_LEN, RESET_LEN, SACK_BLOCK_LEN, VERSION,
};

// ---------------------------------------------------------------------------
// Enumerations
// ---------------------------------------------------------------------------

/// Message type (low nibble of byte 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum PacketType {
    /// 0x1 CREDIT.
    Credit = 1,
    /// 0x2 PROACTIVE_DATA.
    ProactiveData = 2,
    /// 0x3 REACTIVE_DATA.
    ReactiveData = 3,
    /// 0x4 ACK.
    Ack = 4,
    /// 0x5 CREDIT_REQUEST.
    CreditRequest = 5,
    /// 0x6 CREDIT_STOP.
    CreditStop = 6,
    /// 0x7 HELLO.
    Hello = 7,
    /// 0x8 HELLO_ACK.
    HelloAck = 8,
    /// 0x9 RESET.
    Reset = 9,
    /// 0xA EMULATION (FlashPass: sender → receiver through the emulation queue).
    Emulation = 10,
    /// 0xB EMULATION_CREDIT (FlashPass: receiver → sender, the credits of emulation packets).
    EmulationCredit = 11,
    /// 0xC ARBITRATION_REQUEST (PASE: sender → arbitrator, the flow's criterion and demand).
    ArbitrationRequest = 12,
    /// 0xD ARBITRATION_RESPONSE (PASE: arbitrator → sender, queue and reference rate).
    ArbitrationResponse = 13,
}

impl PacketType {
    /// Parses a type nibble.
    pub fn from_wire(v: u8) -> Option<PacketType> {
        Some(match v {
            1 => PacketType::Credit,
            2 => PacketType::ProactiveData,
            3 => PacketType::ReactiveData,
            4 => PacketType::Ack,
            5 => PacketType::CreditRequest,
            6 => PacketType::CreditStop,
            7 => PacketType::Hello,
            8 => PacketType::HelloAck,
            9 => PacketType::Reset,
            10 => PacketType::Emulation,
            11 => PacketType::EmulationCredit,
            12 => PacketType::ArbitrationRequest,
            13 => PacketType::ArbitrationResponse,
            _ => return None,
        })
    }

    /// Wire value of the type nibble.
    pub fn to_wire(self) -> u8 {
        self as u8
    }

    /// Flag bits that may be set for this type (all others must be zero).
    pub fn allowed_flags(self) -> u8 {
        match self {
            PacketType::ProactiveData => FLAG_FIN | FLAG_RETX | FLAG_PRIO,
            PacketType::ReactiveData => FLAG_FIN | FLAG_RETX | FLAG_PRIO | FLAG_PROBE,
            PacketType::Ack => FLAG_ECE,
            PacketType::Hello => FLAG_CONN | FLAG_COOKIE | FLAG_IDLE,
            PacketType::HelloAck => FLAG_COOKIE,
            _ => 0,
        }
    }

    /// Specification name, e.g. `"PROACTIVE_DATA"`.
    pub fn name(self) -> &'static str {
        match self {
            PacketType::Credit => "CREDIT",
            PacketType::ProactiveData => "PROACTIVE_DATA",
            PacketType::ReactiveData => "REACTIVE_DATA",
            PacketType::Ack => "ACK",
            PacketType::CreditRequest => "CREDIT_REQUEST",
            PacketType::CreditStop => "CREDIT_STOP",
            PacketType::Hello => "HELLO",
            PacketType::HelloAck => "HELLO_ACK",
            PacketType::Reset => "RESET",
            PacketType::Emulation => "EMULATION",
            PacketType::EmulationCredit => "EMULATION_CREDIT",
            PacketType::ArbitrationRequest => "ARBITRATION_REQUEST",
            PacketType::ArbitrationResponse => "ARBITRATION_RESPONSE",
        }
    }
}

/// Data sub-flow: credit-scheduled (proactive) or window-based (reactive).
/// Each sub-flow has its own `subflow_seq` space and its own ACK stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SubFlow {
    /// Data sent in response to credits (wire value 0 in ACKs, type 0x2 for data).
    Proactive,
    /// Data sent without credits (wire value 1 in ACKs, type 0x3 for data).
    Reactive,
}

impl SubFlow {
    /// Parses the ACK `subflow` byte.
    pub fn from_wire(v: u8) -> Option<SubFlow> {
        match v {
            0 => Some(SubFlow::Proactive),
            1 => Some(SubFlow::Reactive),
            _ => None,
        }
    }

    /// ACK `subflow` byte.
    pub fn to_wire(self) -> u8 {
        match self {
            SubFlow::Proactive => 0,
            SubFlow::Reactive => 1,
        }
    }
}

/// Transport a flow uses (HELLO / HELLO_ACK `transport` byte).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TransportKind {
    /// FlexPass (credits + proactive and reactive sub-flows); wire 1.
    FlexPass,
    /// ExpressPass (credits + proactive sub-flow only); wire 2.
    ExpressPass,
    /// DCTCP-style window transport (reactive sub-flow only); wire 3.
    Dctcp,
    /// PPT (SIGCOMM'24): DCTCP as the high-priority loop (HCP) on the reactive sub-flow and
    /// the low-priority loop (LCP) of opportunistic packets on sub-flow 0; no credits; wire 4.
    Ppt,
    /// FlashPass (ICNP'21 / WAN): sender-driven emulation — EMULATION packets through the
    /// emulation queue, EMULATION_CREDIT back, one PROACTIVE_DATA at T + T_wait per credit;
    /// first-RTT unscheduled data as REACTIVE_DATA (red); wire 5.
    FlashPass,
    /// pFabric (SIGCOMM'13): one window on the reactive sub-flow starting at the BDP (line
    /// rate), a small RTO, and every data packet carries its priority, the flow's remaining
    /// size (flag PRIO); the switch serves the highest priority and drops the lowest; wire 6.
    PFabric,
    /// PASE (SIGCOMM'14): one DCTCP window on the reactive sub-flow, sent in the priority
    /// queue (P0..P7) and at the reference rate its arbitrators assign; wire 7.
    Pase,
}

impl TransportKind {
    /// Parses the `transport` byte.
    pub fn from_wire(v: u8) -> Option<TransportKind> {
        match v {
            1 => Some(TransportKind::FlexPass),
            2 => Some(TransportKind::ExpressPass),
            3 => Some(TransportKind::Dctcp),
            4 => Some(TransportKind::Ppt),
            5 => Some(TransportKind::FlashPass),
            6 => Some(TransportKind::PFabric),
            7 => Some(TransportKind::Pase),
            _ => None,
        }
    }

    /// `transport` byte.
    pub fn to_wire(self) -> u8 {
        match self {
            TransportKind::FlexPass => 1,
            TransportKind::ExpressPass => 2,
            TransportKind::Dctcp => 3,
            TransportKind::Ppt => 4,
            TransportKind::FlashPass => 5,
            TransportKind::PFabric => 6,
            TransportKind::Pase => 7,
        }
    }

    /// The transport's name on command lines, in configs and records: flexpass,
    /// expresspass, dctcp, ppt, flashpass, pfabric, pase.
    pub fn name(self) -> &'static str {
        match self {
            TransportKind::FlexPass => "flexpass",
            TransportKind::ExpressPass => "expresspass",
            TransportKind::Dctcp => "dctcp",
            TransportKind::Ppt => "ppt",
            TransportKind::FlashPass => "flashpass",
            TransportKind::PFabric => "pfabric",
            TransportKind::Pase => "pase",
        }
    }

    /// Every transport, in wire order (all of them run in the core, the model and the host
    /// agent).
    pub const ALL: [TransportKind; 7] = [
        TransportKind::FlexPass,
        TransportKind::ExpressPass,
        TransportKind::Dctcp,
        TransportKind::Ppt,
        TransportKind::FlashPass,
        TransportKind::PFabric,
        TransportKind::Pase,
    ];

    /// The transport named `s` among [`ALL`](Self::ALL) (see [`name`](Self::name)).
    pub fn from_name(s: &str) -> Option<TransportKind> {
        Self::ALL.into_iter().find(|t| t.name() == s)
    }

    /// True for transports whose receiver sends CREDIT messages (ExpressPass-style credit
    /// feedback; FlashPass's EMULATION_CREDITs are not such credits).
    pub fn is_credit_based(self) -> bool {
        matches!(self, TransportKind::FlexPass | TransportKind::ExpressPass)
    }
}

/// HELLO_ACK status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HelloStatus {
    /// 0: flow accepted.
    Accepted,
    /// 1: the requested transport is not supported.
    UnsupportedTransport,
    /// 2: refused / busy.
    Refused,
    /// 3 (with flag COOKIE): no state was kept; send the HELLO again with this cookie
    /// (docs/protocol.md §6.7, §11 "Half-open flows and cookies").
    Retry {
        /// Opaque to the sender; the HELLO sent again echoes it.
        cookie: u64,
    },
}

/// `status` byte of [`HelloStatus::Retry`].
pub const STATUS_RETRY: u8 = 3;

impl HelloStatus {
    /// Parses a `status` byte that carries no cookie (0..=2). `retry` (3) carries the cookie
    /// of its HELLO_ACK: the decoder builds [`HelloStatus::Retry`] itself.
    pub fn from_wire(v: u8) -> Option<HelloStatus> {
        match v {
            0 => Some(HelloStatus::Accepted),
            1 => Some(HelloStatus::UnsupportedTransport),
            2 => Some(HelloStatus::Refused),
            _ => None,
        }
    }

    /// `status` byte.
    pub fn to_wire(self) -> u8 {
        match self {
            HelloStatus::Accepted => 0,
            HelloStatus::UnsupportedTransport => 1,
            HelloStatus::Refused => 2,
            HelloStatus::Retry { .. } => STATUS_RETRY,
        }
    }

    /// The cookie of a `Retry`.
    pub fn cookie(self) -> Option<u64> {
        match self {
            HelloStatus::Retry { cookie } => Some(cookie),
            _ => None,
        }
    }
}

/// RESET reason.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResetReason {
    /// 0: unspecified.
    Unspecified,
    /// 1: the flow_id is not known to the sender of the RESET.
    UnknownFlow,
    /// 2: the peer violated the protocol.
    ProtocolViolation,
    /// 3: the endpoint is shutting down.
    Shutdown,
}

impl ResetReason {
    /// Parses the `reason` byte.
    pub fn from_wire(v: u8) -> Option<ResetReason> {
        match v {
            0 => Some(ResetReason::Unspecified),
            1 => Some(ResetReason::UnknownFlow),
            2 => Some(ResetReason::ProtocolViolation),
            3 => Some(ResetReason::Shutdown),
            _ => None,
        }
    }

    /// `reason` byte.
    pub fn to_wire(self) -> u8 {
        match self {
            ResetReason::Unspecified => 0,
            ResetReason::UnknownFlow => 1,
            ResetReason::ProtocolViolation => 2,
            ResetReason::Shutdown => 3,
        }
    }
}

// ---------------------------------------------------------------------------
// Message bodies
// ---------------------------------------------------------------------------

/// CREDIT (0x1): receiver → sender, one credit = permission to send one
/// proactive data packet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Credit {
    /// Flow identifier.
    pub flow_id: u32,
    /// Credit sequence number (per flow, incremented by the receiver per credit).
    pub credit_seq: u32,
    /// Number of padding bytes (6..=14) → message length 18..=26. The padding
    /// *content* is not represented: it is written as zeros and ignored on
    /// receive.
    pub padding: u8,
}

/// PROACTIVE_DATA (0x2) or REACTIVE_DATA (0x3), selected by `subflow`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Data {
    /// Flow identifier.
    pub flow_id: u32,
    /// Proactive (type 0x2) or reactive (type 0x3).
    pub subflow: SubFlow,
    /// Byte offset of the first payload byte in the flow's byte stream.
    pub flow_seq: u64,
    /// Packet number in this sub-flow's own sequence space.
    pub subflow_seq: u32,
    /// Proactive: the consumed credit's credit_seq. Reactive: must be 0.
    pub credit_seq: u32,
    /// Sender timestamp, microseconds, wrapping.
    pub tsval: u32,
    /// FIN flag: last segment of the flow (flow length = flow_seq + payload len).
    pub fin: bool,
    /// RETX flag (informational): this payload was sent before.
    pub retransmission: bool,
    /// PRIO flag and field: the packet's priority, smaller first (pFabric §4.1: the flow's
    /// remaining size in bytes, saturating at 2^32 − 1). None: no field (every transport
    /// but pFabric).
    pub priority: Option<u32>,
    /// Payload (may be empty only when `fin`, or in a probe: `is_probe`).
    pub payload: Bytes,
}

impl Data {
    /// A probe (flag PROBE, §6.2; PASE's probing, pFabric's probe mode with PRIO): a
    /// header-only REACTIVE_DATA, not a FIN.
    pub fn is_probe(&self) -> bool {
        self.payload.is_empty() && !self.fin && self.subflow == SubFlow::Reactive
    }

    /// Bytes before the payload: `DATA_HEADER_LEN`, plus `PRIORITY_LEN` with flag PRIO.
    pub fn header_len(&self) -> usize {
        DATA_HEADER_LEN
            + if self.priority.is_some() {
                PRIORITY_LEN
            } else {
                0
            }
    }
}

/// ACK (0x4): per data packet, per sub-flow.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ack {
    /// Flow identifier.
    pub flow_id: u32,
    /// Sub-flow whose sequence space `cum_ack`, `ack_seq` and SACK refer to.
    pub subflow: SubFlow,
    /// ECE flag: the triggering data packet arrived with CE.
    pub ece: bool,
    /// Next expected subflow_seq (every subflow_seq < cum_ack was received).
    pub cum_ack: u32,
    /// subflow_seq of the data packet that triggered this ACK.
    pub ack_seq: u32,
    /// tsval echoed from the triggering packet.
    pub tsecr: u32,
    /// Receiver's in-order delivered byte offset in the flow.
    pub flow_ack: u64,
    /// Up to 4 blocks `[start, end)` with `cum_ack < start < end`.
    pub sack: SackBlocks,
}

/// CREDIT_REQUEST (0x5): sender → receiver, "please (re)start credits".
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CreditRequest {
    /// Flow identifier.
    pub flow_id: u32,
    /// Bytes the sender has waiting; 0 = unknown.
    pub pending_bytes: u64,
}

/// EMULATION (0xA), FlashPass §III-B: sender → receiver through the emulation queue (the
/// credit class); it rehearses one data packet. Ordinary emulation packets are ECT(0),
/// over-provisioned ones Not-ECT (dropped first by the queue's single threshold, §III-C).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Emulation {
    /// Flow identifier.
    pub flow_id: u32,
    /// Emulation packet number within the flow.
    pub emu_seq: u32,
    /// T: the sender's clock when it sent this packet, nanoseconds modulo 2^32 (the sender
    /// sends the data packet at T + T_wait).
    pub timestamp: u32,
    /// How long the receiver may hold this packet's credit to batch it with later ones, in
    /// units of 10 µs (0: return it at once).
    pub hold: u16,
}

/// One credit of an EMULATION_CREDIT: the echo of an emulation packet's seq and timestamp.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EmulationGrant {
    /// `emu_seq` of the emulation packet that got through.
    pub emu_seq: u32,
    /// Its `timestamp` T, echoed.
    pub timestamp: u32,
}

/// EMULATION_CREDIT (0xB), FlashPass §III-B: receiver → sender, 1..=32 grants (delayed,
/// batched credit feedback); each licenses one data packet at T + T_wait.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EmulationCredit {
    /// Flow identifier.
    pub flow_id: u32,
    /// The grants, in the order the emulation packets arrived.
    pub grants: Vec<EmulationGrant>,
}

/// HELLO (0x7): flow open, sender → receiver.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hello {
    /// Flow identifier chosen by the sender.
    pub flow_id: u32,
    /// Requested transport.
    pub transport: TransportKind,
    /// Flow size in bytes; 0 = unknown / stream.
    pub flow_size: u64,
    /// Connection extension (flag CONN): this flow is one direction of a TCP-like
    /// connection (docs/protocol.md §6.6).
    pub conn: Option<HelloConn>,
    /// Cookie (flag COOKIE): the echo of a HELLO_ACK `retry`'s cookie, sent by a sender whose
    /// first HELLO the receiver answered without keeping state (docs/protocol.md §6.6).
    pub cookie: Option<u64>,
    /// Flag IDLE: the sender has no data yet; a credit-based receiver waits for its
    /// CREDIT_REQUEST before sending credits.
    pub idle: bool,
}

/// Role of a flow in a connection (HELLO `role` byte, with flag CONN).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ConnRole {
    /// 1: the opening side's flow (client → server), asking for the service `dst_port`.
    Open,
    /// 2: the answering side's flow (server → client) of the connection `conn_id`.
    Reply,
}

impl ConnRole {
    /// Parses the `role` byte.
    pub fn from_wire(v: u8) -> Option<ConnRole> {
        match v {
            1 => Some(ConnRole::Open),
            2 => Some(ConnRole::Reply),
            _ => None,
        }
    }

    /// `role` byte.
    pub fn to_wire(self) -> u8 {
        match self {
            ConnRole::Open => 1,
            ConnRole::Reply => 2,
        }
    }
}

/// HELLO connection extension: ties the two flows (one per direction) of a bidirectional
/// connection together and names the service (a TCP port) it is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct HelloConn {
    /// Connection identifier chosen by the opening side (both HELLOs carry it).
    pub conn_id: u32,
    /// The opening side's port, as its application sees it (both HELLOs carry it).
    pub src_port: u16,
    /// The service: the TCP port the opening application connected to.
    pub dst_port: u16,
    /// Which direction of the connection this flow is.
    pub role: ConnRole,
}

/// HELLO_ACK (0x8): receiver → sender.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HelloAck {
    /// Flow identifier (echo).
    pub flow_id: u32,
    /// Transport (echo of the HELLO).
    pub transport: TransportKind,
    /// Outcome.
    pub status: HelloStatus,
}

/// RESET (0x9): abort a flow (either direction).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reset {
    /// Flow identifier.
    pub flow_id: u32,
    /// Reason.
    pub reason: ResetReason,
}

/// Any FlexPass message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Packet {
    /// CREDIT (0x1).
    Credit(Credit),
    /// PROACTIVE_DATA (0x2) / REACTIVE_DATA (0x3).
    Data(Data),
    /// ACK (0x4).
    Ack(Ack),
    /// CREDIT_REQUEST (0x5).
    CreditRequest(CreditRequest),
    /// CREDIT_STOP (0x6): sender → receiver, "stop sending credits".
    CreditStop {
        /// Flow identifier.
        flow_id: u32,
    },
    /// HELLO (0x7).
    Hello(Hello),
    /// HELLO_ACK (0x8).
    HelloAck(HelloAck),
    /// RESET (0x9).
    Reset(Reset),
    /// EMULATION (0xA).
    Emulation(Emulation),
    /// EMULATION_CREDIT (0xB).
    EmulationCredit(EmulationCredit),
    /// ARBITRATION_REQUEST (0xC).
    ArbitrationRequest(ArbitrationRequest),
    /// ARBITRATION_RESPONSE (0xD).
    ArbitrationResponse(ArbitrationResponse),
}

/// The SACK block rule shared by decoder and `validate()`.
fn sack_block_ok(cum_ack: u32, start: u32, end: u32) -> bool {
    start < end && start > cum_ack
}

// ---------------------------------------------------------------------------
// Packet methods
// ---------------------------------------------------------------------------

impl Packet {
    /// Whether the flow's sender emits this message (and its receiver consumes it):
    /// data, HELLO, CREDIT_REQUEST and CREDIT_STOP, EMULATION, and ARBITRATION_REQUEST (for
    /// the sender's arbitrator, not its receiver). Credits, ACKs, HELLO_ACK, RESET (a
    /// receiver refusing or aborting the flow) and ARBITRATION_RESPONSE go the other way.
    pub fn is_sender_to_receiver(&self) -> bool {
        matches!(
            self,
            Packet::Data(_)
                | Packet::Hello(_)
                | Packet::CreditRequest(_)
                | Packet::CreditStop { .. }
                | Packet::Emulation(_)
                | Packet::ArbitrationRequest(_)
        )
    }

    /// Flow identifier of any message.
    pub fn flow_id(&self) -> u32 {
        match self {
            Packet::Credit(c) => c.flow_id,
            Packet::Data(d) => d.flow_id,
            Packet::Ack(a) => a.flow_id,
            Packet::CreditRequest(r) => r.flow_id,
            Packet::CreditStop { flow_id } => *flow_id,
            Packet::Hello(h) => h.flow_id,
            Packet::HelloAck(h) => h.flow_id,
            Packet::Reset(r) => r.flow_id,
            Packet::Emulation(e) => e.flow_id,
            Packet::EmulationCredit(c) => c.flow_id,
            Packet::ArbitrationRequest(r) => r.flow_id,
            Packet::ArbitrationResponse(r) => r.flow_id,
        }
    }

    /// Message type.
    pub fn packet_type(&self) -> PacketType {
        match self {
            Packet::Credit(_) => PacketType::Credit,
            Packet::Data(d) => match d.subflow {
                SubFlow::Proactive => PacketType::ProactiveData,
                SubFlow::Reactive => PacketType::ReactiveData,
            },
            Packet::Ack(_) => PacketType::Ack,
            Packet::CreditRequest(_) => PacketType::CreditRequest,
            Packet::CreditStop { .. } => PacketType::CreditStop,
            Packet::Hello(_) => PacketType::Hello,
            Packet::HelloAck(_) => PacketType::HelloAck,
            Packet::Reset(_) => PacketType::Reset,
            Packet::Emulation(_) => PacketType::Emulation,
            Packet::EmulationCredit(_) => PacketType::EmulationCredit,
            Packet::ArbitrationRequest(_) => PacketType::ArbitrationRequest,
            Packet::ArbitrationResponse(_) => PacketType::ArbitrationResponse,
        }
    }

    /// Flags byte as it will be encoded.
    pub fn flags(&self) -> u8 {
        match self {
            Packet::Data(d) => {
                (if d.fin { FLAG_FIN } else { 0 })
                    | (if d.retransmission { FLAG_RETX } else { 0 })
                    | (if d.priority.is_some() { FLAG_PRIO } else { 0 })
                    | (if d.is_probe() { FLAG_PROBE } else { 0 })
            }
            Packet::Ack(a) if a.ece => FLAG_ECE,
            Packet::Hello(h) => {
                (if h.conn.is_some() { FLAG_CONN } else { 0 })
                    | (if h.cookie.is_some() { FLAG_COOKIE } else { 0 })
                    | (if h.idle { FLAG_IDLE } else { 0 })
            }
            Packet::HelloAck(h) if h.status.cookie().is_some() => FLAG_COOKIE,
            _ => 0,
        }
    }

    /// Length of the encoded message (= UDP payload length). Saturates for
    /// absurd payload sizes (such values fail `validate()`).
    pub fn encoded_len(&self) -> usize {
        match self {
            Packet::Credit(c) => CREDIT_HEADER_LEN + usize::from(c.padding),
            Packet::Data(d) => d.header_len().saturating_add(d.payload.len()),
            Packet::Ack(a) => ACK_BASE_LEN + SACK_BLOCK_LEN * a.sack.len(),
            Packet::CreditRequest(_) => CREDIT_REQUEST_LEN,
            Packet::CreditStop { .. } => CREDIT_STOP_LEN,
            Packet::Hello(h) => {
                (if h.conn.is_some() {
                    HELLO_CONN_LEN
                } else {
                    HELLO_LEN
                }) + if h.cookie.is_some() { COOKIE_LEN } else { 0 }
            }
            Packet::HelloAck(h) if h.status.cookie().is_some() => HELLO_ACK_COOKIE_LEN,
            Packet::HelloAck(_) => HELLO_ACK_LEN,
            Packet::Reset(_) => RESET_LEN,
            Packet::Emulation(_) => EMULATION_LEN,
            Packet::EmulationCredit(c) => EMULATION_CREDIT_BASE_LEN
                .saturating_add(EMULATION_GRANT_LEN.saturating_mul(c.grants.len())),
            Packet::ArbitrationRequest(_) => ARBITRATION_REQUEST_LEN,
            Packet::ArbitrationResponse(_) => ARBITRATION_RESPONSE_LEN,
        }
    }

    /// Bytes this message occupies on an Ethernet wire over IPv4/UDP.
    pub fn wire_len(&self) -> usize {
        ethernet_wire_len(self.encoded_len())
    }

    /// Bytes of this message's frame as a NIC edge counts it (no preamble, IFG or FCS):
    /// `wire_len() − 24` (`ethernet_frame_len`); a credit is 60..=68.
    pub fn frame_len(&self) -> usize {
        ethernet_frame_len(self.encoded_len())
    }

    /// Traffic class and ECN code point for this message, for a flow using
    /// `transport` (docs/protocol.md, "ECN rules").
    ///
    /// Credit-based transports: CREDIT → (Credit, Not-ECT); proactive data →
    /// (ProactiveData, ECT(0)); reactive data → (ReactiveData, ECT(0));
    /// everything else → (Control, ECT(0)). `Dctcp`: data → (Legacy, ECT(0)),
    /// everything else → (Legacy, Not-ECT). `Ppt` (defaults; a PPT sender overrides the
    /// priority of its data by flow scheduling, SIGCOMM'24 §4.2): reactive data (HCP) →
    /// (P0, ECT(0)); proactive-sub-flow data (LCP) → (P4, ECT(0)); an ACK of sub-flow 0 (a
    /// low-priority ACK) → (P4, Not-ECT); everything else → (P0, Not-ECT). `FlashPass` uses
    /// the credit-based classes; its EMULATION → (Credit, ECT(0)) (the emulation queue; an
    /// over-provisioned one is sent Not-ECT by the sender), EMULATION_CREDIT → Control.
    /// `PFabric`: everything → (Legacy, Not-ECT).
    pub fn marking(&self, transport: TransportKind) -> (TrafficClass, Ecn) {
        if transport == TransportKind::PFabric {
            // pFabric §4: no ECN; the priority travels in the PRIO field.
            return (TrafficClass::Legacy, Ecn::NotEct);
        }
        if transport == TransportKind::Pase {
            // PASE §3.3: data in the queue its arbitrators assign (the sender overrides this
            // P0 with it), ECN-capable; everything else in the top queue.
            return match self {
                Packet::Data(_) => (TrafficClass::Priority(0), Ecn::Ect0),
                _ => (TrafficClass::Priority(0), Ecn::NotEct),
            };
        }
        if transport == TransportKind::Dctcp {
            return match self {
                Packet::Data(_) => (TrafficClass::Legacy, Ecn::Ect0),
                _ => (TrafficClass::Legacy, Ecn::NotEct),
            };
        }
        if transport == TransportKind::Ppt {
            return match self {
                Packet::Data(d) => match d.subflow {
                    SubFlow::Reactive => (TrafficClass::Priority(0), Ecn::Ect0),
                    SubFlow::Proactive => (TrafficClass::Priority(4), Ecn::Ect0),
                },
                Packet::Ack(a) if a.subflow == SubFlow::Proactive => {
                    (TrafficClass::Priority(4), Ecn::NotEct)
                }
                _ => (TrafficClass::Priority(0), Ecn::NotEct),
            };
        }
        match self {
            Packet::Credit(_) => (TrafficClass::Credit, Ecn::NotEct),
            Packet::Emulation(_) => (TrafficClass::Credit, Ecn::Ect0),
            Packet::Data(d) => match d.subflow {
                SubFlow::Proactive => (TrafficClass::ProactiveData, Ecn::Ect0),
                SubFlow::Reactive => (TrafficClass::ReactiveData, Ecn::Ect0),
            },
            _ => (TrafficClass::Control, Ecn::Ect0),
        }
    }

    /// Checks that this value has a valid encoding, i.e. that
    /// `Packet::decode(&self.encode_to_vec()) == Ok(self.clone())`.
    pub fn validate(&self) -> Result<(), EncodeError> {
        match self {
            Packet::Credit(c) => {
                if !(CREDIT_PADDING_MIN..=CREDIT_PADDING_MAX).contains(&c.padding) {
                    return Err(EncodeError::BadCreditPadding(c.padding));
                }
            }
            Packet::Data(d) => {
                if d.subflow == SubFlow::Reactive && d.credit_seq != 0 {
                    return Err(EncodeError::NonZeroCreditSeq(d.credit_seq));
                }
                // An empty segment is a FIN or a probe (REACTIVE_DATA, nothing else set but
                // PRIO: PASE's, pFabric's).
                if d.payload.is_empty()
                    && !d.fin
                    && (d.subflow != SubFlow::Reactive || d.retransmission)
                {
                    return Err(EncodeError::EmptyPayload);
                }
                let len = self.encoded_len();
                if len > MAX_MESSAGE_LEN {
                    return Err(EncodeError::TooLong(len));
                }
                // payload.len() <= 65507 here, so the cast is lossless.
                if d.flow_seq.checked_add(d.payload.len() as u64).is_none() {
                    return Err(EncodeError::SeqOverflow);
                }
            }
            Packet::Ack(a) => {
                for (index, &(start, end)) in a.sack.iter().enumerate() {
                    if !sack_block_ok(a.cum_ack, start, end) {
                        return Err(EncodeError::BadSackBlock {
                            index,
                            start,
                            end,
                            cum_ack: a.cum_ack,
                        });
                    }
                }
            }
            Packet::EmulationCredit(c) => {
                if c.grants.is_empty() || c.grants.len() > MAX_EMULATION_GRANTS {
                    return Err(EncodeError::BadGrantCount(c.grants.len()));
                }
            }
            Packet::ArbitrationRequest(r) => crate::arbitration::validate_request(r)?,
            Packet::ArbitrationResponse(r) => crate::arbitration::validate_response(r)?,
            Packet::CreditRequest(_)
            | Packet::CreditStop { .. }
            | Packet::Hello(_)
            | Packet::HelloAck(_)
            | Packet::Reset(_)
            | Packet::Emulation(_) => {}
        }
        Ok(())
    }

    /// Appends the canonical encoding to `out`.
    ///
    /// Never panics. If `validate()` fails the output is unspecified (it will
    /// not decode back to `self`; e.g. the length field saturates at 65535).
    pub fn encode(&self, out: &mut Vec<u8>) {
        let len = self.encoded_len();
        out.reserve(len);
        // Common header.
        out.push((VERSION << 4) | self.packet_type().to_wire());
        out.push(self.flags());
        out.extend_from_slice(&u16::try_from(len).unwrap_or(u16::MAX).to_be_bytes());
        out.extend_from_slice(&self.flow_id().to_be_bytes());
        // Body.
        match self {
            Packet::Credit(c) => {
                out.extend_from_slice(&c.credit_seq.to_be_bytes());
                out.resize(out.len() + usize::from(c.padding), 0);
            }
            Packet::Data(d) => {
                out.extend_from_slice(&d.flow_seq.to_be_bytes());
                out.extend_from_slice(&d.subflow_seq.to_be_bytes());
                out.extend_from_slice(&d.credit_seq.to_be_bytes());
                out.extend_from_slice(&d.tsval.to_be_bytes());
                if let Some(p) = d.priority {
                    out.extend_from_slice(&p.to_be_bytes());
                }
                out.extend_from_slice(&d.payload);
            }
            Packet::Ack(a) => {
                out.push(a.subflow.to_wire());
                // len() <= MAX_SACK_BLOCKS (4) by construction of SackBlocks.
                out.push(a.sack.len() as u8);
                out.extend_from_slice(&[0, 0]); // reserved
                out.extend_from_slice(&a.cum_ack.to_be_bytes());
                out.extend_from_slice(&a.ack_seq.to_be_bytes());
                out.extend_from_slice(&a.tsecr.to_be_bytes());
                out.extend_from_slice(&a.flow_ack.to_be_bytes());
                for &(start, end) in a.sack.iter() {
                    out.extend_from_slice(&start.to_be_bytes());
                    out.extend_from_slice(&end.to_be_bytes());
                }
            }
            Packet::CreditRequest(r) => out.extend_from_slice(&r.pending_bytes.to_be_bytes()),
            Packet::CreditStop { .. } => {}
            Packet::Hello(h) => {
                out.push(h.transport.to_wire());
                out.extend_from_slice(&[0, 0, 0]); // reserved
                out.extend_from_slice(&h.flow_size.to_be_bytes());
                if let Some(c) = &h.conn {
                    out.extend_from_slice(&c.conn_id.to_be_bytes());
                    out.extend_from_slice(&c.src_port.to_be_bytes());
                    out.extend_from_slice(&c.dst_port.to_be_bytes());
                    out.push(c.role.to_wire());
                    out.extend_from_slice(&[0, 0, 0]); // reserved
                }
                if let Some(cookie) = h.cookie {
                    out.extend_from_slice(&cookie.to_be_bytes());
                }
            }
            Packet::HelloAck(h) => {
                out.push(h.transport.to_wire());
                out.push(h.status.to_wire());
                out.extend_from_slice(&[0, 0]); // reserved
                if let Some(cookie) = h.status.cookie() {
                    out.extend_from_slice(&cookie.to_be_bytes());
                }
            }
            Packet::Reset(r) => {
                out.push(r.reason.to_wire());
                out.extend_from_slice(&[0, 0, 0]); // reserved
            }
            Packet::Emulation(e) => {
                out.extend_from_slice(&e.emu_seq.to_be_bytes());
                out.extend_from_slice(&e.timestamp.to_be_bytes());
                out.extend_from_slice(&e.hold.to_be_bytes());
            }
            Packet::EmulationCredit(c) => {
                out.push(u8::try_from(c.grants.len()).unwrap_or(u8::MAX));
                out.extend_from_slice(&[0, 0, 0]); // reserved
                for g in &c.grants {
                    out.extend_from_slice(&g.emu_seq.to_be_bytes());
                    out.extend_from_slice(&g.timestamp.to_be_bytes());
                }
            }
            Packet::ArbitrationRequest(r) => crate::arbitration::encode_request(r, out),
            Packet::ArbitrationResponse(r) => crate::arbitration::encode_response(r, out),
        }
    }

    /// Canonical encoding in a fresh vector.
    pub fn encode_to_vec(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.encoded_len());
        self.encode(&mut v);
        v
    }

    /// Strictly decodes one message; `buf` must be exactly the UDP payload.
    /// The data payload is copied into a new [`Bytes`].
    pub fn decode(buf: &[u8]) -> Result<Packet, DecodeError> {
        decode_inner(buf, Bytes::copy_from_slice)
    }

    /// Like [`Packet::decode`], but the data payload shares `buf`'s storage
    /// (zero-copy).
    pub fn decode_bytes(buf: &Bytes) -> Result<Packet, DecodeError> {
        // `slice_ref` requires its argument to lie within `buf`, which holds
        // because `decode_inner` only hands out sub-slices of `buf`.
        decode_inner(buf, |payload| buf.slice_ref(payload))
    }
}

/// The decoding algorithm of docs/protocol.md. Checks are performed in the
/// specified order; the first failure is returned. `make_payload` receives
/// the payload sub-slice of `buf`.
fn decode_inner<'a>(
    buf: &'a [u8],
    make_payload: impl FnOnce(&'a [u8]) -> Bytes,
) -> Result<Packet, DecodeError> {
    let len = buf.len();

    // 1. Common header must be present.
    if len < COMMON_HEADER_LEN {
        return Err(DecodeError::Truncated {
            needed: COMMON_HEADER_LEN,
            got: len,
        });
    }
    let b0 = u8_at(buf, 0)?;
    // 2. Version.
    let version = b0 >> 4;
    if version != VERSION {
        return Err(DecodeError::UnsupportedVersion(version));
    }
    // 3. Type.
    let ty = PacketType::from_wire(b0 & 0x0f).ok_or(DecodeError::UnknownType(b0 & 0x0f))?;
    // 4. Length field == buffer length.
    let length = usize::from(u16_at(buf, 2)?);
    if length != len {
        return Err(DecodeError::LengthMismatch {
            expected: length,
            got: len,
        });
    }
    // 5. Flags allowed for the type.
    let flags = u8_at(buf, 1)?;
    if flags & !ty.allowed_flags() != 0 {
        return Err(DecodeError::InvalidFlags {
            msg_type: ty.to_wire(),
            flags,
        });
    }
    let flow_id = u32_at(buf, 4)?;

    // 6. Type-specific body.
    let packet = match ty {
        PacketType::Credit => {
            if !(CREDIT_MSG_MIN..=CREDIT_MSG_MAX).contains(&len) {
                return Err(DecodeError::BadCreditSize(len));
            }
            Packet::Credit(Credit {
                flow_id,
                credit_seq: u32_at(buf, 8)?,
                // 6..=14 after the range check above; padding content ignored.
                padding: u8::try_from(len - CREDIT_HEADER_LEN).unwrap_or(u8::MAX),
            })
        }
        PacketType::ProactiveData | PacketType::ReactiveData => {
            let with_priority = flags & FLAG_PRIO != 0;
            let header = DATA_HEADER_LEN + if with_priority { PRIORITY_LEN } else { 0 };
            if len < header {
                return Err(DecodeError::Truncated {
                    needed: header,
                    got: len,
                });
            }
            let subflow = if ty == PacketType::ProactiveData {
                SubFlow::Proactive
            } else {
                SubFlow::Reactive
            };
            let flow_seq = u64_at(buf, 8)?;
            let subflow_seq = u32_at(buf, 16)?;
            let credit_seq = u32_at(buf, 20)?;
            let tsval = u32_at(buf, 24)?;
            let fin = flags & FLAG_FIN != 0;
            if subflow == SubFlow::Reactive && credit_seq != 0 {
                return Err(DecodeError::NonZeroCreditSeq(credit_seq));
            }
            let priority = if with_priority {
                Some(u32_at(buf, DATA_HEADER_LEN)?)
            } else {
                None
            };
            let payload = buf.get(header..).unwrap_or(&[]);
            if flags & FLAG_PROBE != 0 {
                // A probe is the bare header (§6.2), with the PRIO field for pFabric's probe
                // mode: nothing else set, no payload.
                if flags & !FLAG_PRIO != FLAG_PROBE {
                    return Err(DecodeError::InvalidFlags {
                        msg_type: ty.to_wire(),
                        flags,
                    });
                }
                if !payload.is_empty() {
                    return Err(DecodeError::LengthMismatch {
                        expected: header,
                        got: len,
                    });
                }
            } else if payload.is_empty() && !fin {
                return Err(DecodeError::EmptyPayload);
            }
            // len <= 65535, so the cast is lossless.
            if flow_seq.checked_add(payload.len() as u64).is_none() {
                return Err(DecodeError::SeqOverflow {
                    flow_seq,
                    payload_len: payload.len(),
                });
            }
            Packet::Data(Data {
                flow_id,
                subflow,
                flow_seq,
                subflow_seq,
                credit_seq,
                tsval,
                fin,
                retransmission: flags & FLAG_RETX != 0,
                priority,
                payload: make_payload(payload),
            })
        }
        PacketType::Ack => {
            if len < ACK_BASE_LEN {
                return Err(DecodeError::Truncated {
                    needed: ACK_BASE_LEN,
                    got: len,
                });
            }
            let sub = u8_at(buf, 8)?;
            let subflow = SubFlow::from_wire(sub).ok_or(DecodeError::BadSubflow(sub))?;
            let count = u8_at(buf, 9)?;
            if usize::from(count) > MAX_SACK_BLOCKS {
                return Err(DecodeError::TooManySackBlocks(count));
            }
            if u16_at(buf, 10)? != 0 {
                return Err(DecodeError::NonZeroReserved);
            }
            exact_len(len, ACK_BASE_LEN + SACK_BLOCK_LEN * usize::from(count))?;
            let cum_ack = u32_at(buf, 12)?;
            let mut sack = SackBlocks::new();
            for index in 0..usize::from(count) {
                let off = ACK_BASE_LEN + SACK_BLOCK_LEN * index;
                let start = u32_at(buf, off)?;
                let end = u32_at(buf, off + 4)?;
                if !sack_block_ok(cum_ack, start, end) {
                    return Err(DecodeError::BadSackBlock {
                        index,
                        start,
                        end,
                        cum_ack,
                    });
                }
                // Cannot fail: count <= MAX_SACK_BLOCKS was checked above.
                sack.push(start, end);
            }
            Packet::Ack(Ack {
                flow_id,
                subflow,
                ece: flags & FLAG_ECE != 0,
                cum_ack,
                ack_seq: u32_at(buf, 16)?,
                tsecr: u32_at(buf, 20)?,
                flow_ack: u64_at(buf, 24)?,
                sack,
            })
        }
        PacketType::CreditRequest => {
            exact_len(len, CREDIT_REQUEST_LEN)?;
            Packet::CreditRequest(CreditRequest {
                flow_id,
                pending_bytes: u64_at(buf, 8)?,
            })
        }
        PacketType::CreditStop => {
            exact_len(len, CREDIT_STOP_LEN)?;
            Packet::CreditStop { flow_id }
        }
        PacketType::Hello => {
            let with_conn = flags & FLAG_CONN != 0;
            let with_cookie = flags & FLAG_COOKIE != 0;
            let base = if with_conn { HELLO_CONN_LEN } else { HELLO_LEN };
            exact_len(len, base + if with_cookie { COOKIE_LEN } else { 0 })?;
            let t = u8_at(buf, 8)?;
            let transport = TransportKind::from_wire(t).ok_or(DecodeError::UnknownTransport(t))?;
            if array_at::<3>(buf, 9)? != [0; 3] {
                return Err(DecodeError::NonZeroReserved);
            }
            let conn = if with_conn {
                let r = u8_at(buf, 28)?;
                let role = ConnRole::from_wire(r).ok_or(DecodeError::BadConnRole(r))?;
                if array_at::<3>(buf, 29)? != [0; 3] {
                    return Err(DecodeError::NonZeroReserved);
                }
                Some(HelloConn {
                    conn_id: u32_at(buf, 20)?,
                    src_port: u16_at(buf, 24)?,
                    dst_port: u16_at(buf, 26)?,
                    role,
                })
            } else {
                None
            };
            Packet::Hello(Hello {
                flow_id,
                transport,
                flow_size: u64_at(buf, 12)?,
                conn,
                cookie: if with_cookie {
                    Some(u64_at(buf, base)?)
                } else {
                    None
                },
                idle: flags & FLAG_IDLE != 0,
            })
        }
        PacketType::HelloAck => {
            let with_cookie = flags & FLAG_COOKIE != 0;
            exact_len(
                len,
                if with_cookie {
                    HELLO_ACK_COOKIE_LEN
                } else {
                    HELLO_ACK_LEN
                },
            )?;
            let t = u8_at(buf, 8)?;
            let transport = TransportKind::from_wire(t).ok_or(DecodeError::UnknownTransport(t))?;
            let s = u8_at(buf, 9)?;
            // Status `retry` and flag COOKIE go together: either without the other is BadStatus.
            let status = match (s, with_cookie) {
                (STATUS_RETRY, true) => HelloStatus::Retry {
                    cookie: u64_at(buf, HELLO_ACK_LEN)?,
                },
                (_, false) => HelloStatus::from_wire(s).ok_or(DecodeError::BadStatus(s))?,
                (_, true) => return Err(DecodeError::BadStatus(s)),
            };
            if u16_at(buf, 10)? != 0 {
                return Err(DecodeError::NonZeroReserved);
            }
            Packet::HelloAck(HelloAck {
                flow_id,
                transport,
                status,
            })
        }
        PacketType::Reset => {
            exact_len(len, RESET_LEN)?;
            let r = u8_at(buf, 8)?;
            let reason = ResetReason::from_wire(r).ok_or(DecodeError::BadReason(r))?;
            if array_at::<3>(buf, 9)? != [0; 3] {
                return Err(DecodeError::NonZeroReserved);
            }
            Packet::Reset(Reset { flow_id, reason })
        }
        PacketType::Emulation => {
            exact_len(len, EMULATION_LEN)?;
            Packet::Emulation(Emulation {
                flow_id,
                emu_seq: u32_at(buf, 8)?,
                timestamp: u32_at(buf, 12)?,
                hold: u16_at(buf, 16)?,
            })
        }
        PacketType::EmulationCredit => {
            if len < EMULATION_CREDIT_BASE_LEN {
                return Err(DecodeError::Truncated {
                    needed: EMULATION_CREDIT_BASE_LEN,
                    got: len,
                });
            }
            let count = u8_at(buf, 8)?;
            if count == 0 || usize::from(count) > MAX_EMULATION_GRANTS {
                return Err(DecodeError::BadGrantCount(count));
            }
            if array_at::<3>(buf, 9)? != [0; 3] {
                return Err(DecodeError::NonZeroReserved);
            }
            exact_len(
                len,
                EMULATION_CREDIT_BASE_LEN + EMULATION_GRANT_LEN * usize::from(count),
            )?;
            let mut grants = Vec::with_capacity(usize::from(count));
            for i in 0..usize::from(count) {
                let off = EMULATION_CREDIT_BASE_LEN + EMULATION_GRANT_LEN * i;
                grants.push(EmulationGrant {
                    emu_seq: u32_at(buf, off)?,
                    timestamp: u32_at(buf, off + 4)?,
                });
            }
            Packet::EmulationCredit(EmulationCredit { flow_id, grants })
        }
        PacketType::ArbitrationRequest => {
            Packet::ArbitrationRequest(crate::arbitration::decode_request(buf, flow_id)?)
        }
        PacketType::ArbitrationResponse => {
            Packet::ArbitrationResponse(crate::arbitration::decode_response(buf, flow_id)?)
        }
    };
    Ok(packet)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(payload: &'static [u8], fin: bool) -> Packet {
        Packet::Data(Data {
            flow_id: 7,
            subflow: SubFlow::Proactive,
            flow_seq: 100,
            subflow_seq: 3,
            credit_seq: 9,
            tsval: 1234,
            fin,
            retransmission: false,
            priority: None,
            payload: Bytes::from_static(payload),
        })
    }

    #[test]
    fn decode_bytes_is_zero_copy() {
        let p = data(b"hello", false);
        let buf = Bytes::from(p.encode_to_vec());
        let q = Packet::decode_bytes(&buf).unwrap();
        assert_eq!(p, q);
        let Packet::Data(d) = q else { unreachable!() };
        assert_eq!(d.payload.as_ptr(), buf[DATA_HEADER_LEN..].as_ptr());
    }

    #[test]
    fn validate_rejects_too_long_and_encode_does_not_panic() {
        static BIG: [u8; 70_000] = [0; 70_000];
        let p = data(&BIG, false);
        assert_eq!(p.validate(), Err(EncodeError::TooLong(70_028)));
        let v = p.encode_to_vec();
        assert_eq!(&v[2..4], &[0xff, 0xff]);
        assert!(Packet::decode(&v).is_err());
    }

    #[test]
    fn marking() {
        let p = data(b"x", false);
        assert_eq!(
            p.marking(TransportKind::FlexPass),
            (TrafficClass::ProactiveData, Ecn::Ect0)
        );
        assert_eq!(
            p.marking(TransportKind::Dctcp),
            (TrafficClass::Legacy, Ecn::Ect0)
        );
        let c = Packet::Credit(Credit {
            flow_id: 1,
            credit_seq: 1,
            padding: 6,
        });
        assert_eq!(
            c.marking(TransportKind::ExpressPass),
            (TrafficClass::Credit, Ecn::NotEct)
        );
        assert_eq!(
            p.marking(TransportKind::Ppt),
            (TrafficClass::Priority(4), Ecn::Ect0),
            "PPT: proactive-sub-flow data is the LCP"
        );
        let e = Packet::Emulation(Emulation {
            flow_id: 1,
            emu_seq: 2,
            timestamp: 3,
            hold: 0,
        });
        assert_eq!(
            e.marking(TransportKind::FlashPass),
            (TrafficClass::Credit, Ecn::Ect0),
            "emulation packets take the emulation (credit) queue, ordinary ones ECN-capable"
        );
        assert_eq!(e.wire_len(), 84, "an emulation packet is a minimum frame");
        let s = Packet::CreditStop { flow_id: 1 };
        assert_eq!(
            s.marking(TransportKind::Ppt),
            (TrafficClass::Priority(0), Ecn::NotEct)
        );
        assert_eq!(
            s.marking(TransportKind::FlexPass),
            (TrafficClass::Control, Ecn::Ect0)
        );
        assert_eq!(
            s.marking(TransportKind::Dctcp),
            (TrafficClass::Legacy, Ecn::NotEct)
        );
    }
}
