//! FlexPass wire protocol.
//!
//! This crate is the Rust implementation of the message formats specified in
//! `docs/protocol.md` (the single source of truth). It provides:
//!
//! * the packet types ([`Packet`] and its bodies),
//! * a strict, panic-free decoder ([`Packet::decode`]) that rejects every
//!   non-canonical or inconsistent message with a typed [`DecodeError`],
//! * a canonical encoder ([`Packet::encode`]) with a matching pre-flight
//!   check ([`Packet::validate`]),
//! * wire-size helpers ([`ethernet_wire_len`], [`ethernet_wire_len_ip`]) and the frame
//!   sizes of an MTU ([`max_payload_for_mtu`], [`max_frame_wire`]),
//! * the DSCP/ECN plan ([`DscpPlan`], [`TrafficClass`], [`Ecn`], [`tos`]).
//!
//! Invariants (checked by `tests/vectors.rs`, proptests and the fuzz target):
//!
//! * `Packet::decode` never panics, for any input.
//! * If `p.validate()` is `Ok`, then `Packet::decode(&p.encode_to_vec()) == Ok(p)`.
//! * If `Packet::decode(b)` is `Ok(p)`, then `p.encode_to_vec() == b`, except
//!   for the *content* of CREDIT padding bytes, which the decoder ignores and
//!   the encoder always writes as zeros.
//!
//! The crate contains no `unsafe` code.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod arbitration;
mod dscp;
mod error;
mod packet;
mod read;
mod sack;

pub use arbitration::{ArbitrationRequest, ArbitrationResponse};
pub use dscp::{
    split_tos, tos, DscpPlan, Ecn, TrafficClass, DEFAULT_PRIORITY_DSCP, PRIORITY_LEVELS,
};
pub use error::{DecodeError, EncodeError};
pub use packet::{
    Ack, ConnRole, Credit, CreditRequest, Data, Emulation, EmulationCredit, EmulationGrant, Hello,
    HelloAck, HelloConn, HelloStatus, Packet, PacketType, Reset, ResetReason, SubFlow,
    TransportKind, STATUS_RETRY,
};
pub use sack::SackBlocks;

/// Protocol version carried in the high nibble of byte 0.
pub const VERSION: u8 = 1;
/// Default UDP port (both source and destination) for FlexPass messages.
pub const DEFAULT_UDP_PORT: u16 = 7890;
/// Length of the common header present in every message.
pub const COMMON_HEADER_LEN: usize = 8;
/// Length of the PROACTIVE_DATA / REACTIVE_DATA header (common header included).
pub const DATA_HEADER_LEN: usize = 28;
/// Length of an ACK without SACK blocks (common header included).
pub const ACK_BASE_LEN: usize = 32;
/// Length of one SACK block (start u32, end u32).
pub const SACK_BLOCK_LEN: usize = 8;
/// Maximum number of SACK blocks in one ACK.
pub const MAX_SACK_BLOCKS: usize = 4;
/// Length of a CREDIT message without padding (common header + credit_seq).
pub const CREDIT_HEADER_LEN: usize = 12;
/// Smallest legal CREDIT message (84 B on an Ethernet wire).
pub const CREDIT_MSG_MIN: usize = 18;
/// Largest legal CREDIT message (92 B on an Ethernet wire).
pub const CREDIT_MSG_MAX: usize = 26;
/// Smallest legal CREDIT padding (bytes).
pub const CREDIT_PADDING_MIN: u8 = (CREDIT_MSG_MIN - CREDIT_HEADER_LEN) as u8;
/// Largest legal CREDIT padding (bytes).
pub const CREDIT_PADDING_MAX: u8 = (CREDIT_MSG_MAX - CREDIT_HEADER_LEN) as u8;
/// Length of a CREDIT_REQUEST message.
pub const CREDIT_REQUEST_LEN: usize = 16;
/// Length of a CREDIT_STOP message.
pub const CREDIT_STOP_LEN: usize = 8;
/// Length of a HELLO message.
pub const HELLO_LEN: usize = 20;
/// Length of a HELLO message with the connection extension (flag CONN).
pub const HELLO_CONN_LEN: usize = 32;
/// Bytes a HELLO cookie adds (flag COOKIE): a HELLO is 28 bytes with it, 40 with CONN too.
pub const COOKIE_LEN: usize = 8;
/// Length of a HELLO_ACK message.
pub const HELLO_ACK_LEN: usize = 12;
/// Length of a HELLO_ACK carrying a cookie (flag COOKIE, status retry).
pub const HELLO_ACK_COOKIE_LEN: usize = 20;
/// Length of an EMULATION message (FlashPass): an 84-byte frame on an Ethernet wire.
pub const EMULATION_LEN: usize = 18;
/// Length of an EMULATION_CREDIT message without grants (common header + count + reserved).
pub const EMULATION_CREDIT_BASE_LEN: usize = 12;
/// Length of one EMULATION_CREDIT grant (emu_seq u32, timestamp u32).
pub const EMULATION_GRANT_LEN: usize = 8;
/// Most grants one EMULATION_CREDIT carries (delayed, batched credit feedback).
pub const MAX_EMULATION_GRANTS: usize = 32;
/// Length of an ARBITRATION_REQUEST message (PASE; docs/protocol.md §6.11).
pub const ARBITRATION_REQUEST_LEN: usize = 28;
/// Length of an ARBITRATION_RESPONSE message (PASE; docs/protocol.md §6.12).
pub const ARBITRATION_RESPONSE_LEN: usize = 24;
/// Length of a RESET message.
pub const RESET_LEN: usize = 12;
/// Largest value the 16-bit `length` field can carry.
pub const MAX_MESSAGE_LEN: usize = u16::MAX as usize;
/// IPv4 header (20, no options) + UDP header (8).
pub const IPV4_UDP_OVERHEAD: usize = 28;
/// Ethernet per-frame overhead on the wire: 14 header + 4 FCS + 8 preamble/SFD + 12 IFG.
pub const ETHERNET_WIRE_OVERHEAD: usize = 38;
/// Minimum bytes one frame occupies on an Ethernet wire (64 B frame + 8 + 12).
pub const MIN_ETHERNET_WIRE: usize = 84;
/// Wire bytes of a frame that a NIC edge does not count (docs/protocol.md §9, "Credits in
/// frame bytes"): preamble/SFD 8 + IFG 12 + FCS 4. A frame as tc (`skb->len`), BMv2 and a
/// PNA/DPDK meter count it is its wire bytes minus these: an 84..=92 B credit is 60..=68 B.
pub const WIRE_BYTES_NOT_IN_FRAME: usize = 24;
/// Largest DATA payload that fits a 1500 B IP MTU: 1500 - 20 - 8 - 28.
pub const MAX_PAYLOAD_1500: usize = max_payload_for_mtu(DEFAULT_MTU);

/// IP MTU (bytes of an IPv4 packet) of a path unless configured: Ethernet's 1500.
pub const DEFAULT_MTU: usize = 1500;
/// Smallest IP MTU FlexPass runs on (the IPv4 minimum every host must accept).
pub const MIN_MTU: usize = 576;
/// Largest IP MTU FlexPass runs on (jumbo frames).
pub const MAX_MTU: usize = 9000;

/// Largest FlexPass message (UDP payload) in one IPv4 packet of `mtu` bytes, unfragmented:
/// `mtu − 28` (docs/protocol.md §9, "Frame sizes and MTU").
pub const fn max_message_for_mtu(mtu: usize) -> usize {
    mtu - IPV4_UDP_OVERHEAD
}

/// Largest DATA payload (the senders' segment size) for an IP MTU of `mtu` bytes:
/// `mtu − 20 − 8 − 28` (1444 at 1500, 8944 at 9000).
pub const fn max_payload_for_mtu(mtu: usize) -> usize {
    max_message_for_mtu(mtu) - DATA_HEADER_LEN
}

/// The maximum frame for MTU `mtu`: the bytes a full-size data packet occupies on an
/// Ethernet wire, preamble, IFG and FCS included, `mtu + 38` (1538 at 1500, 9038 at 9000).
/// A credit is a licence for one such frame: credit rates are `share · C · 84 / (84 +
/// max_frame_wire(mtu))` (docs/protocol.md §10).
pub const fn max_frame_wire(mtu: usize) -> usize {
    mtu + ETHERNET_WIRE_OVERHEAD
}

/// Whether FlexPass runs on an IP MTU of `mtu` bytes (`MIN_MTU ..= MAX_MTU`).
pub fn mtu_supported(mtu: usize) -> bool {
    (MIN_MTU..=MAX_MTU).contains(&mtu)
}

/// FIN flag (data only): this segment is the last one of the flow.
pub const FLAG_FIN: u8 = 0x01;
/// ECE flag (ACK only): the data packet that triggered this ACK carried CE.
pub const FLAG_ECE: u8 = 0x02;
/// RETX flag (data only, informational): this payload was sent before.
pub const FLAG_RETX: u8 = 0x04;
/// CONN flag (HELLO only): the HELLO carries the connection extension (32 bytes).
pub const FLAG_CONN: u8 = 0x08;
/// COOKIE flag (HELLO, HELLO_ACK): a HELLO_ACK with status retry carries a cookie that the
/// HELLO sent again echoes (8 bytes at the end of both; docs/protocol.md §6.6, §6.7).
pub const FLAG_COOKIE: u8 = 0x10;
/// IDLE flag (HELLO only): the sender has no data yet; a credit-based receiver sends no
/// credits until a CREDIT_REQUEST (docs/protocol.md §6.6, §11).
pub const FLAG_IDLE: u8 = 0x20;
/// PRIO flag (data only): a 4-byte `priority` follows `tsval`, so the header is
/// `DATA_HEADER_LEN + PRIORITY_LEN` bytes (pFabric §4: each packet carries its priority, the
/// flow's remaining size; docs/protocol.md §6.2).
pub const FLAG_PRIO: u8 = 0x40;
/// PROBE flag (REACTIVE_DATA only): a header-only probe of transport pase (PASE §3.3,
/// probing: a flow in the lowest priority queue sends one every RTT instead of data) or
/// pfabric (probe mode after consecutive timeouts, pFabric §4.2; with PRIO); no payload, no
/// FIN or RETX, `subflow_seq` = `PROBE_SEQ`; the receiver answers with an ACK echoing
/// `PROBE_SEQ` and the probe's CE as ECE (docs/protocol.md §6.2, §11).
pub const FLAG_PROBE: u8 = 0x80;
/// The `subflow_seq` of every PASE probe and the `ack_seq` of its answer: never a data
/// packet's (a sub-flow carries at most 2³² − 1 packets, numbered from 0).
pub const PROBE_SEQ: u32 = u32::MAX;
/// Length of the `priority` field of a DATA message with flag PRIO.
pub const PRIORITY_LEN: usize = 4;

/// Bytes on an Ethernet wire (incl. preamble, IFG, min-frame padding) for a
/// FlexPass message of `msg_len` bytes over IPv4/UDP:
/// `max(msg_len + 28 + 38, 84)`. Saturates instead of overflowing.
pub fn ethernet_wire_len(msg_len: usize) -> usize {
    ethernet_wire_len_ip(msg_len.saturating_add(IPV4_UDP_OVERHEAD))
}

/// The frame of a FlexPass message of `msg_len` bytes as a NIC edge counts it (Ethernet
/// header to the end of the padded frame, no FCS): `ethernet_wire_len(msg_len) − 24`, at
/// least 60. The one wire → frame conversion (`WIRE_BYTES_NOT_IN_FRAME`).
pub fn ethernet_frame_len(msg_len: usize) -> usize {
    ethernet_wire_len(msg_len) - WIRE_BYTES_NOT_IN_FRAME
}

/// Bytes on an Ethernet wire for an arbitrary IPv4 packet of `ip_len` bytes
/// (used for legacy traffic in the model): `max(ip_len + 38, 84)`.
/// Saturates instead of overflowing.
pub fn ethernet_wire_len_ip(ip_len: usize) -> usize {
    ip_len
        .saturating_add(ETHERNET_WIRE_OVERHEAD)
        .max(MIN_ETHERNET_WIRE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_sizes() {
        assert_eq!(ethernet_wire_len(CREDIT_MSG_MIN), 84);
        assert_eq!(ethernet_wire_len(CREDIT_MSG_MAX), 92);
        assert_eq!(ethernet_frame_len(CREDIT_MSG_MIN), 60);
        assert_eq!(ethernet_frame_len(CREDIT_MSG_MAX), 68);
        assert_eq!(ethernet_frame_len(0), 60);
        assert_eq!(ethernet_wire_len(CREDIT_STOP_LEN), 84);
        assert_eq!(ethernet_wire_len(0), 84);
        assert_eq!(ethernet_wire_len(ACK_BASE_LEN), 98);
        assert_eq!(ethernet_wire_len(DATA_HEADER_LEN + MAX_PAYLOAD_1500), 1538);
        assert_eq!(DATA_HEADER_LEN + MAX_PAYLOAD_1500 + IPV4_UDP_OVERHEAD, 1500);
        assert_eq!(ethernet_wire_len_ip(1500), 1538);
        assert_eq!(ethernet_wire_len_ip(40), 84);
        assert_eq!(ethernet_wire_len(usize::MAX), usize::MAX);
        assert_eq!(CREDIT_PADDING_MIN, 6);
        assert_eq!(CREDIT_PADDING_MAX, 14);
    }

    #[test]
    fn frame_sizes_follow_the_mtu() {
        assert_eq!(MAX_PAYLOAD_1500, 1444);
        for mtu in [MIN_MTU, DEFAULT_MTU, 4000, MAX_MTU] {
            let full = DATA_HEADER_LEN + max_payload_for_mtu(mtu);
            assert_eq!(full, max_message_for_mtu(mtu));
            assert_eq!(full + IPV4_UDP_OVERHEAD, mtu, "fills the MTU exactly");
            assert_eq!(ethernet_wire_len(full), max_frame_wire(mtu));
            assert!(mtu_supported(mtu));
        }
        assert_eq!(
            (max_payload_for_mtu(9000), max_frame_wire(9000)),
            (8944, 9038)
        );
        assert!(!mtu_supported(MIN_MTU - 1) && !mtu_supported(MAX_MTU + 1));
    }
}
