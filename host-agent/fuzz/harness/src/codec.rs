//! The fuzz input format: a header and a list of operations, read by a total decoder (every
//! byte string is some input: missing bytes read as 0) and written back by an encoder, so
//! that `decode(encode(input)) == input` for every value the decoder produces. Tags are one
//! byte taken modulo the number of variants; integers are LEB128 varints. The format is
//! deliberately plain (not `arbitrary`'s, which is not a stable serialisation): the seed
//! generator writes inputs that replay exactly the exchange it recorded, and libFuzzer's
//! byte-level mutations (and its comparison tracing) still map to structural changes: a
//! flipped tag byte is another operation, a changed varint another sequence number.

use flexpass_wire::{HelloStatus, ResetReason, SubFlow, TransportKind};

/// Reads an input; past the end every read returns 0.
pub struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Reader { data, pos: 0 }
    }

    pub fn is_empty(&self) -> bool {
        self.pos >= self.data.len()
    }

    pub fn u8(&mut self) -> u8 {
        let b = self.data.get(self.pos).copied().unwrap_or(0);
        self.pos = self.pos.saturating_add(1);
        b
    }

    /// A tag in `0..n`.
    pub fn tag(&mut self, n: u8) -> u8 {
        self.u8() % n
    }

    pub fn bool(&mut self) -> bool {
        self.u8() & 1 == 1
    }

    /// LEB128, at most 10 bytes.
    pub fn varint(&mut self) -> u64 {
        let mut v = 0u64;
        for i in 0..10 {
            if self.is_empty() {
                break;
            }
            let b = self.u8();
            v |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                break;
            }
        }
        v
    }

    pub fn u32(&mut self) -> u32 {
        self.varint() as u32
    }

    /// A varint reduced to `0..=max` (modulo, so that every value in range round-trips).
    pub fn upto(&mut self, max: u64) -> u64 {
        match max.checked_add(1) {
            Some(m) => self.varint() % m,
            None => self.varint(),
        }
    }

    /// One of the five transports. The writer writes `wire − 1` (0..=4), so every input it
    /// wrote (the seeds) keeps its transport; a mutated byte ≥ 4 picks by its value mod 5.
    pub fn transport(&mut self) -> TransportKind {
        TransportKind::from_wire(1 + self.tag(5)).expect("1..=5")
    }

    pub fn subflow(&mut self) -> SubFlow {
        SubFlow::from_wire(self.tag(2)).expect("0..=1")
    }

    /// The FlashPass variant of a header: read for transport flashpass only (0 otherwise),
    /// so the other transports' inputs are unchanged.
    pub fn flashpass_variant(&mut self, t: TransportKind) -> u8 {
        match t {
            TransportKind::FlashPass => self.tag(crate::sut::FLASHPASS_VARIANTS),
            _ => 0,
        }
    }

    pub fn status(&mut self) -> HelloStatus {
        HelloStatus::from_wire(self.tag(3)).expect("0..=2")
    }

    pub fn reason(&mut self) -> ResetReason {
        ResetReason::from_wire(self.tag(4)).expect("0..=3")
    }
}

/// Writes an input in the format [`Reader`] reads.
#[derive(Default)]
pub struct Writer {
    pub buf: Vec<u8>,
}

impl Writer {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn u8(&mut self, b: u8) {
        self.buf.push(b);
    }

    pub fn tag(&mut self, t: u8) {
        self.buf.push(t);
    }

    pub fn bool(&mut self, b: bool) {
        self.buf.push(u8::from(b));
    }

    pub fn varint(&mut self, mut v: u64) {
        loop {
            let b = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                self.buf.push(b);
                return;
            }
            self.buf.push(b | 0x80);
        }
    }

    pub fn u32(&mut self, v: u32) {
        self.varint(u64::from(v));
    }

    pub fn transport(&mut self, t: TransportKind) {
        self.tag(t.to_wire() - 1);
    }

    pub fn subflow(&mut self, s: SubFlow) {
        self.tag(s.to_wire());
    }

    pub fn flashpass_variant(&mut self, t: TransportKind, v: u8) {
        if t == TransportKind::FlashPass {
            self.tag(v);
        }
    }

    pub fn status(&mut self, s: HelloStatus) {
        self.tag(s.to_wire());
    }

    pub fn reason(&mut self, r: ResetReason) {
        self.tag(r.to_wire());
    }
}

/// A value of the input format.
pub trait Codec: Sized {
    fn decode(r: &mut Reader) -> Self;
    fn encode(&self, w: &mut Writer);
}

/// Upper bound on operations per input (keeps one execution in the millisecond range).
pub const MAX_OPS: usize = 4096;

/// A whole input: header, then operations until the bytes run out.
pub fn decode_input<H: Codec, O: Codec>(data: &[u8]) -> (H, Vec<O>) {
    let mut r = Reader::new(data);
    let header = H::decode(&mut r);
    let mut ops = Vec::new();
    while !r.is_empty() && ops.len() < MAX_OPS {
        ops.push(O::decode(&mut r));
    }
    (header, ops)
}

pub fn encode_input<H: Codec, O: Codec>(header: &H, ops: &[O]) -> Vec<u8> {
    let mut w = Writer::new();
    header.encode(&mut w);
    for op in ops {
        op.encode(&mut w);
    }
    w.buf
}

/// A sub-flow sequence number: absolute (replayed traces, forgeries anywhere), or relative
/// to a reference the driver picks (the sender's next sequence, the receiver's cum_ack), so
/// that small mutations stay near the interesting edge.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SeqRef {
    Abs(u32),
    Back(u32),
    Fwd(u32),
}

impl SeqRef {
    pub fn eval(self, reference: u32) -> u32 {
        match self {
            SeqRef::Abs(v) => v,
            SeqRef::Back(d) => reference.saturating_sub(d),
            SeqRef::Fwd(d) => reference.saturating_add(d),
        }
    }
}

impl Codec for SeqRef {
    fn decode(r: &mut Reader) -> Self {
        match r.tag(3) {
            0 => SeqRef::Abs(r.u32()),
            1 => SeqRef::Back(r.u32()),
            _ => SeqRef::Fwd(r.u32()),
        }
    }
    fn encode(&self, w: &mut Writer) {
        match *self {
            SeqRef::Abs(v) => {
                w.tag(0);
                w.u32(v)
            }
            SeqRef::Back(v) => {
                w.tag(1);
                w.u32(v)
            }
            SeqRef::Fwd(v) => {
                w.tag(2);
                w.u32(v)
            }
        }
    }
}

/// A flow byte offset, absolute or relative to a reference (bytes sent, the receiver's
/// flow_ack).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OffRef {
    Abs(u64),
    Back(u64),
    Fwd(u64),
}

impl OffRef {
    pub fn eval(self, reference: u64) -> u64 {
        match self {
            OffRef::Abs(v) => v,
            OffRef::Back(d) => reference.saturating_sub(d),
            OffRef::Fwd(d) => reference.saturating_add(d),
        }
    }
}

impl Codec for OffRef {
    fn decode(r: &mut Reader) -> Self {
        match r.tag(3) {
            0 => OffRef::Abs(r.varint()),
            1 => OffRef::Back(r.varint()),
            _ => OffRef::Fwd(r.varint()),
        }
    }
    fn encode(&self, w: &mut Writer) {
        match *self {
            OffRef::Abs(v) => {
                w.tag(0);
                w.varint(v)
            }
            OffRef::Back(v) => {
                w.tag(1);
                w.varint(v)
            }
            OffRef::Fwd(v) => {
                w.tag(2);
                w.varint(v)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip_and_short_input_reads_zero() {
        for v in [0, 1, 127, 128, 300, u32::MAX as u64, u64::MAX] {
            let mut w = Writer::new();
            w.varint(v);
            assert_eq!(Reader::new(&w.buf).varint(), v);
        }
        let mut r = Reader::new(&[0x80]);
        assert_eq!(r.varint(), 0);
        assert_eq!(r.u8(), 0);
        assert!(r.is_empty());
    }
}
