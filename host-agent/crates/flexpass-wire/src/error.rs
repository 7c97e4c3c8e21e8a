//! Decode and encode errors.
//!
//! The `kind()` strings are part of the specification (docs/protocol.md,
//! "Error kinds"): the JSON test vectors and the Python implementation use
//! exactly the same strings.

use thiserror::Error;

/// Why a byte buffer is not a valid FlexPass message.
///
/// The decoder checks the rules in the order given in docs/protocol.md
/// ("Decoding algorithm"); the first failing rule determines the error.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum DecodeError {
    /// The buffer (whose length equals the `length` field, once that has been
    /// checked) is shorter than the header/body the message type requires.
    #[error("truncated message: need {needed} bytes, got {got}")]
    Truncated {
        /// Bytes required.
        needed: usize,
        /// Bytes available.
        got: usize,
    },
    /// The version nibble is not [`crate::VERSION`].
    #[error("unsupported protocol version {0}")]
    UnsupportedVersion(u8),
    /// The type nibble is not an assigned message type.
    #[error("unknown message type {0:#x}")]
    UnknownType(u8),
    /// The `length` field differs from the buffer length, or the message is
    /// longer than its (fixed or sack_count-derived) size.
    #[error("length mismatch: expected {expected} bytes, got {got}")]
    LengthMismatch {
        /// Length required by the `length` field or by the message type.
        expected: usize,
        /// Actual length.
        got: usize,
    },
    /// A flag bit is set that is not allowed for this message type.
    #[error("flags {flags:#04x} not allowed for message type {msg_type:#x}")]
    InvalidFlags {
        /// Message type nibble.
        msg_type: u8,
        /// The full flags byte.
        flags: u8,
    },
    /// CREDIT message length outside 18..=26.
    #[error("credit message length {0} outside 18..=26")]
    BadCreditSize(usize),
    /// REACTIVE_DATA with a non-zero credit_seq.
    #[error("reactive data carries non-zero credit_seq {0}")]
    NonZeroCreditSeq(u32),
    /// DATA with an empty payload and no FIN flag.
    #[error("data message with empty payload and no FIN")]
    EmptyPayload,
    /// `flow_seq + payload length` overflows u64.
    #[error("flow_seq {flow_seq} + payload length {payload_len} overflows u64")]
    SeqOverflow {
        /// The flow_seq field.
        flow_seq: u64,
        /// Payload length.
        payload_len: usize,
    },
    /// ACK subflow byte is neither 0 (proactive) nor 1 (reactive).
    #[error("bad subflow value {0}")]
    BadSubflow(u8),
    /// ACK sack_count greater than 4.
    #[error("too many SACK blocks: {0} (max 4)")]
    TooManySackBlocks(u8),
    /// A SACK block violates `cum_ack < start < end`.
    #[error("bad SACK block #{index} [{start}, {end}) with cum_ack {cum_ack}")]
    BadSackBlock {
        /// Index of the offending block (0-based).
        index: usize,
        /// Block start.
        start: u32,
        /// Block end (exclusive).
        end: u32,
        /// The ACK's cum_ack.
        cum_ack: u32,
    },
    /// A reserved field is not zero.
    #[error("reserved field is not zero")]
    NonZeroReserved,
    /// HELLO / HELLO_ACK transport byte is not 1, 2 or 3.
    #[error("unknown transport {0}")]
    UnknownTransport(u8),
    /// HELLO_ACK status byte is not 0..=3, or `retry` (3) and flag COOKIE are not both set.
    #[error("bad HELLO_ACK status {0}")]
    BadStatus(u8),
    /// RESET reason byte is not 0..=3.
    #[error("bad RESET reason {0}")]
    BadReason(u8),
    /// HELLO (flag CONN) role byte is not 1 (open) or 2 (reply).
    #[error("bad HELLO connection role {0}")]
    BadConnRole(u8),
    /// EMULATION_CREDIT grant count is 0 or above `MAX_EMULATION_GRANTS`.
    #[error("bad EMULATION_CREDIT grant count {0} (1..=32)")]
    BadGrantCount(u8),
    /// ARBITRATION_RESPONSE queue above 7 (the eight priorities P0..P7).
    #[error("bad arbitration queue {0} (0..=7)")]
    BadQueue(u8),
    /// ARBITRATION_REQUEST demand 0 or ARBITRATION_RESPONSE reference rate 0.
    #[error("arbitration rate 0 (a demand or reference rate is at least 1 bit/s)")]
    BadRate,
}

impl DecodeError {
    /// Every error kind string, in the order of the specification table.
    pub const KINDS: [&'static str; 20] = [
        "Truncated",
        "UnsupportedVersion",
        "UnknownType",
        "LengthMismatch",
        "InvalidFlags",
        "BadCreditSize",
        "NonZeroCreditSeq",
        "EmptyPayload",
        "SeqOverflow",
        "BadSubflow",
        "TooManySackBlocks",
        "BadSackBlock",
        "NonZeroReserved",
        "UnknownTransport",
        "BadStatus",
        "BadReason",
        "BadConnRole",
        "BadGrantCount",
        "BadQueue",
        "BadRate",
    ];

    /// Stable error-kind string shared with the JSON vectors and Python.
    pub fn kind(&self) -> &'static str {
        match self {
            DecodeError::Truncated { .. } => "Truncated",
            DecodeError::UnsupportedVersion(_) => "UnsupportedVersion",
            DecodeError::UnknownType(_) => "UnknownType",
            DecodeError::LengthMismatch { .. } => "LengthMismatch",
            DecodeError::InvalidFlags { .. } => "InvalidFlags",
            DecodeError::BadCreditSize(_) => "BadCreditSize",
            DecodeError::NonZeroCreditSeq(_) => "NonZeroCreditSeq",
            DecodeError::EmptyPayload => "EmptyPayload",
            DecodeError::SeqOverflow { .. } => "SeqOverflow",
            DecodeError::BadSubflow(_) => "BadSubflow",
            DecodeError::TooManySackBlocks(_) => "TooManySackBlocks",
            DecodeError::BadSackBlock { .. } => "BadSackBlock",
            DecodeError::NonZeroReserved => "NonZeroReserved",
            DecodeError::UnknownTransport(_) => "UnknownTransport",
            DecodeError::BadStatus(_) => "BadStatus",
            DecodeError::BadReason(_) => "BadReason",
            DecodeError::BadConnRole(_) => "BadConnRole",
            DecodeError::BadGrantCount(_) => "BadGrantCount",
            DecodeError::BadQueue(_) => "BadQueue",
            DecodeError::BadRate => "BadRate",
        }
    }
}

/// Why a [`crate::Packet`] value cannot be encoded as a valid message.
///
/// `Packet::validate() == Ok(())` exactly when the encoding decodes back to
/// the same value.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum EncodeError {
    /// Credit padding outside 6..=14 bytes.
    #[error("credit padding {0} outside 6..=14")]
    BadCreditPadding(u8),
    /// Reactive data with a non-zero credit_seq.
    #[error("reactive data carries non-zero credit_seq {0}")]
    NonZeroCreditSeq(u32),
    /// Data with empty payload and no FIN.
    #[error("data with empty payload and no FIN")]
    EmptyPayload,
    /// `flow_seq + payload length` overflows u64.
    #[error("flow_seq + payload length overflows u64")]
    SeqOverflow,
    /// Encoded length would not fit the 16-bit length field.
    #[error("message length {0} exceeds 65535")]
    TooLong(usize),
    /// A SACK block violates `cum_ack < start < end`.
    #[error("bad SACK block #{index} [{start}, {end}) with cum_ack {cum_ack}")]
    BadSackBlock {
        /// Index of the offending block (0-based).
        index: usize,
        /// Block start.
        start: u32,
        /// Block end (exclusive).
        end: u32,
        /// The ACK's cum_ack.
        cum_ack: u32,
    },
    /// EMULATION_CREDIT with no grant or more than `MAX_EMULATION_GRANTS`.
    #[error("EMULATION_CREDIT carries {0} grants (1..=32)")]
    BadGrantCount(usize),
    /// ARBITRATION_RESPONSE queue above 7.
    #[error("arbitration queue {0} outside 0..=7")]
    BadQueue(u8),
    /// ARBITRATION_REQUEST demand or ARBITRATION_RESPONSE reference rate of 0.
    #[error("arbitration rate 0")]
    BadRate,
}

impl EncodeError {
    /// Stable error-kind string (the variant name).
    pub fn kind(&self) -> &'static str {
        match self {
            EncodeError::BadCreditPadding(_) => "BadCreditPadding",
            EncodeError::NonZeroCreditSeq(_) => "NonZeroCreditSeq",
            EncodeError::EmptyPayload => "EmptyPayload",
            EncodeError::SeqOverflow => "SeqOverflow",
            EncodeError::TooLong(_) => "TooLong",
            EncodeError::BadSackBlock { .. } => "BadSackBlock",
            EncodeError::BadGrantCount(_) => "BadGrantCount",
            EncodeError::BadQueue(_) => "BadQueue",
            EncodeError::BadRate => "BadRate",
        }
    }
}
