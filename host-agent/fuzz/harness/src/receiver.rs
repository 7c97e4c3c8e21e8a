//! Target `receiver`: one [`Receiver`](flexpass_core::Receiver) fed what a sender — honest
//! or not — could send it: data on either sub-flow at any flow offset (near its in-order
//! point or anywhere, with FIN or not, empty or not), any sub-flow and credit sequence,
//! HELLOs (matching transport or not), CREDIT_REQUEST, CREDIT_STOP, RESET, FlashPass
//! EMULATION packets (any emu_seq, T and hold), and packets only a sender accepts; interleaved with application reads, polls and timer events after
//! arbitrary time advances. Payloads always carry the flow's bytes for their offset
//! ([`crate::pattern`]), so whatever the receiver delivers must be a prefix of the flow.

use crate::alloc::{Budget, PER_OP};
use crate::codec::{decode_input, Codec, OffRef, Reader, SeqRef, Writer};
use crate::pattern;
use crate::sender::poll_count;
use crate::sut::{ReceiverSut, FLOW};
use bytes::Bytes;
use flexpass_wire::{
    Ack, Credit, CreditRequest, Data, Emulation, EmulationCredit, EmulationGrant, Hello, HelloAck,
    HelloStatus, Packet, Reset, ResetReason, SackBlocks, SubFlow, TransportKind,
};

/// Reorder limits the targets pick from.
pub const REORDER: [u64; 3] = [1 << 12, 1 << 16, 64 << 20];
/// Largest payload the targets build (the wire allows 65 507).
pub const MAX_PAYLOAD: u64 = 4096;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReceiverHeader {
    pub transport: TransportKind,
    pub reorder: u8,
    pub seed: u64,
    pub start: u64,
    /// Algorithm 1's target-loss rule: the ns-2 rate-scaled one instead of the paper's.
    pub rate_scaled: bool,
}

impl ReceiverHeader {
    pub fn max_reorder(&self) -> u64 {
        REORDER[self.reorder as usize]
    }
}

impl Codec for ReceiverHeader {
    fn decode(r: &mut Reader) -> Self {
        ReceiverHeader {
            transport: r.transport(),
            reorder: r.tag(REORDER.len() as u8),
            seed: r.varint(),
            start: r.upto(crate::sut::MAX_TIME),
            rate_scaled: r.bool(),
        }
    }
    fn encode(&self, w: &mut Writer) {
        w.transport(self.transport);
        w.tag(self.reorder);
        w.varint(self.seed);
        w.varint(self.start);
        w.bool(self.rate_scaled);
    }
}

/// A packet towards a receiver (valid-looking or forged).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReceiverPkt {
    /// `flow_seq` relative to the receiver's flow_ack, `subflow_seq` to its cum_ack on the
    /// sub-flow, `credit_seq` to the next credit it will send; the payload is the flow's.
    Data {
        subflow: SubFlow,
        flow_seq: OffRef,
        len: u64,
        fin: bool,
        subflow_seq: SeqRef,
        credit_seq: SeqRef,
        tsval: u32,
        retx: bool,
    },
    Hello {
        transport: TransportKind,
        flow_size: u64,
        idle: bool,
    },
    CreditRequest {
        pending: u64,
    },
    CreditStop,
    Reset {
        reason: ResetReason,
    },
    /// A packet the receiver must reject: sender-bound types, or another flow's data.
    Stray {
        kind: u8,
    },
    /// FlashPass: `emu_seq` relative to the emulation packets the receiver accepted so far,
    /// T and hold as given.
    Emulation {
        seq: SeqRef,
        timestamp: u32,
        hold: u16,
    },
}

pub const STRAY_KINDS: u8 = 6;

impl Codec for ReceiverPkt {
    fn decode(r: &mut Reader) -> Self {
        match r.tag(7) {
            0 => ReceiverPkt::Data {
                subflow: r.subflow(),
                flow_seq: OffRef::decode(r),
                len: r.upto(MAX_PAYLOAD),
                fin: r.bool(),
                subflow_seq: SeqRef::decode(r),
                credit_seq: SeqRef::decode(r),
                tsval: r.u32(),
                retx: r.bool(),
            },
            1 => ReceiverPkt::Hello {
                transport: r.transport(),
                flow_size: r.varint(),
                idle: r.bool(),
            },
            2 => ReceiverPkt::CreditRequest {
                pending: r.varint(),
            },
            3 => ReceiverPkt::CreditStop,
            4 => ReceiverPkt::Reset { reason: r.reason() },
            5 => ReceiverPkt::Stray {
                kind: r.tag(STRAY_KINDS),
            },
            _ => ReceiverPkt::Emulation {
                seq: SeqRef::decode(r),
                timestamp: r.u32(),
                hold: r.varint() as u16,
            },
        }
    }
    fn encode(&self, w: &mut Writer) {
        match self {
            ReceiverPkt::Data {
                subflow,
                flow_seq,
                len,
                fin,
                subflow_seq,
                credit_seq,
                tsval,
                retx,
            } => {
                w.tag(0);
                w.subflow(*subflow);
                flow_seq.encode(w);
                w.varint(*len);
                w.bool(*fin);
                subflow_seq.encode(w);
                credit_seq.encode(w);
                w.u32(*tsval);
                w.bool(*retx);
            }
            ReceiverPkt::Hello {
                transport,
                flow_size,
                idle,
            } => {
                w.tag(1);
                w.transport(*transport);
                w.varint(*flow_size);
                w.bool(*idle);
            }
            ReceiverPkt::CreditRequest { pending } => {
                w.tag(2);
                w.varint(*pending);
            }
            ReceiverPkt::CreditStop => w.tag(3),
            ReceiverPkt::Reset { reason } => {
                w.tag(4);
                w.reason(*reason);
            }
            ReceiverPkt::Stray { kind } => {
                w.tag(5);
                w.tag(*kind);
            }
            ReceiverPkt::Emulation {
                seq,
                timestamp,
                hold,
            } => {
                w.tag(6);
                seq.encode(w);
                w.u32(*timestamp);
                w.varint(u64::from(*hold));
            }
        }
    }
}

impl ReceiverPkt {
    /// The packet, relative to the receiver's state (`None`: no receiver yet, references
    /// are 0).
    pub fn build(&self, r: Option<&ReceiverSut>) -> Packet {
        match self {
            ReceiverPkt::Data {
                subflow,
                flow_seq,
                len,
                fin,
                subflow_seq,
                credit_seq,
                tsval,
                retx,
            } => {
                let flow_seq = flow_seq.eval(r.map_or(0, |r| r.r.flow_ack()));
                // Near the end of the offset space the payload shrinks rather than overflow.
                let len = (*len).min(u64::MAX - flow_seq) as usize;
                let credit_seq = match subflow {
                    SubFlow::Proactive => credit_seq.eval(r.map_or(0, |r| r.next_credit_seq())),
                    SubFlow::Reactive => 0,
                };
                Packet::Data(Data {
                    flow_id: FLOW,
                    subflow: *subflow,
                    flow_seq,
                    subflow_seq: subflow_seq.eval(r.map_or(0, |r| r.r.subflow_cum_ack(*subflow))),
                    credit_seq,
                    tsval: *tsval,
                    fin: *fin,
                    retransmission: *retx,
                    priority: None,
                    payload: Bytes::from(pattern::fill(flow_seq, len)),
                })
            }
            ReceiverPkt::Hello {
                transport,
                flow_size,
                idle,
            } => Packet::Hello(Hello {
                flow_id: FLOW,
                transport: *transport,
                flow_size: *flow_size,
                conn: None,
                cookie: None,
                idle: *idle,
            }),
            ReceiverPkt::CreditRequest { pending } => Packet::CreditRequest(CreditRequest {
                flow_id: FLOW,
                pending_bytes: *pending,
            }),
            ReceiverPkt::CreditStop => Packet::CreditStop { flow_id: FLOW },
            ReceiverPkt::Reset { reason } => Packet::Reset(Reset {
                flow_id: FLOW,
                reason: *reason,
            }),
            ReceiverPkt::Stray { kind } => stray_for_receiver(*kind),
            ReceiverPkt::Emulation {
                seq,
                timestamp,
                hold,
            } => Packet::Emulation(Emulation {
                flow_id: FLOW,
                emu_seq: seq.eval(r.map_or(0, |r| r.emulations)),
                timestamp: *timestamp,
                hold: *hold,
            }),
        }
    }

    /// The exact packet (for replaying a recorded trace); None for sender-bound types.
    /// Data payloads are the flow's bytes, so a recorded data packet is reproduced exactly.
    pub fn exact(p: &Packet) -> Option<ReceiverPkt> {
        Some(match p {
            Packet::Data(d) => ReceiverPkt::Data {
                subflow: d.subflow,
                flow_seq: OffRef::Abs(d.flow_seq),
                len: d.payload.len() as u64,
                fin: d.fin,
                subflow_seq: SeqRef::Abs(d.subflow_seq),
                credit_seq: SeqRef::Abs(d.credit_seq),
                tsval: d.tsval,
                retx: d.retransmission,
            },
            Packet::Hello(h) => ReceiverPkt::Hello {
                transport: h.transport,
                flow_size: h.flow_size,
                idle: h.idle,
            },
            Packet::CreditRequest(c) => ReceiverPkt::CreditRequest {
                pending: c.pending_bytes,
            },
            Packet::CreditStop { .. } => ReceiverPkt::CreditStop,
            Packet::Reset(r) => ReceiverPkt::Reset { reason: r.reason },
            Packet::Emulation(e) => ReceiverPkt::Emulation {
                seq: SeqRef::Abs(e.emu_seq),
                timestamp: e.timestamp,
                hold: e.hold,
            },
            _ => return None,
        })
    }
}

fn stray_for_receiver(kind: u8) -> Packet {
    match kind % STRAY_KINDS {
        0 => Packet::Credit(Credit {
            flow_id: FLOW,
            credit_seq: 0,
            padding: flexpass_wire::CREDIT_PADDING_MIN,
        }),
        1 => Packet::Ack(Ack {
            flow_id: FLOW,
            subflow: SubFlow::Proactive,
            ece: false,
            cum_ack: 0,
            ack_seq: 0,
            tsecr: 0,
            flow_ack: 0,
            sack: SackBlocks::new(),
        }),
        2 => Packet::HelloAck(HelloAck {
            flow_id: FLOW,
            transport: TransportKind::FlexPass,
            status: HelloStatus::Accepted,
        }),
        4 => Packet::EmulationCredit(EmulationCredit {
            flow_id: FLOW,
            grants: vec![EmulationGrant {
                emu_seq: 0,
                timestamp: 0,
            }],
        }),
        5 => Packet::Emulation(Emulation {
            flow_id: FLOW + 1,
            emu_seq: 0,
            timestamp: 0,
            hold: 0,
        }),
        _ => Packet::Data(Data {
            flow_id: FLOW + 1,
            subflow: SubFlow::Reactive,
            flow_seq: 0,
            subflow_seq: 0,
            credit_seq: 0,
            tsval: 0,
            fin: false,
            retransmission: false,
            priority: None,
            payload: Bytes::from(pattern::fill(0, 8)),
        }),
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReceiverOp {
    Pkt { pkt: ReceiverPkt, ce: bool },
    Read { max: u8 },
    Poll { max: u8 },
    Advance { dt: u64 },
    Timeout,
    Spurious,
}

impl Codec for ReceiverOp {
    fn decode(r: &mut Reader) -> Self {
        match r.tag(6) {
            0 => ReceiverOp::Pkt {
                pkt: ReceiverPkt::decode(r),
                ce: r.bool(),
            },
            1 => ReceiverOp::Read { max: r.u8() },
            2 => ReceiverOp::Poll { max: r.u8() },
            3 => ReceiverOp::Advance { dt: r.varint() },
            4 => ReceiverOp::Timeout,
            _ => ReceiverOp::Spurious,
        }
    }
    fn encode(&self, w: &mut Writer) {
        match self {
            ReceiverOp::Pkt { pkt, ce } => {
                w.tag(0);
                pkt.encode(w);
                w.bool(*ce);
            }
            ReceiverOp::Read { max } => {
                w.tag(1);
                w.u8(*max);
            }
            ReceiverOp::Poll { max } => {
                w.tag(2);
                w.u8(*max);
            }
            ReceiverOp::Advance { dt } => {
                w.tag(3);
                w.varint(*dt);
            }
            ReceiverOp::Timeout => w.tag(4),
            ReceiverOp::Spurious => w.tag(5),
        }
    }
}

pub struct ReceiverHarness {
    pub sut: ReceiverSut,
    out: Vec<Packet>,
}

impl ReceiverHarness {
    pub fn new(h: &ReceiverHeader) -> Self {
        ReceiverHarness {
            sut: ReceiverSut::new(h.transport, h.max_reorder(), h.seed, h.rate_scaled, h.start),
            out: Vec::new(),
        }
    }

    pub fn step(&mut self, op: &ReceiverOp) {
        self.out.clear();
        let mut out = std::mem::take(&mut self.out);
        match op {
            ReceiverOp::Pkt { pkt, ce } => {
                let p = pkt.build(Some(&self.sut));
                self.sut.deliver(&p, *ce);
            }
            ReceiverOp::Read { max } => self.sut.read(poll_count(*max)),
            ReceiverOp::Poll { max } => {
                self.sut.poll(poll_count(*max), &mut out);
            }
            ReceiverOp::Advance { dt } => self.sut.advance(*dt),
            ReceiverOp::Timeout => self.sut.timeout(&mut out),
            ReceiverOp::Spurious => self.sut.spurious_timeout(),
        }
        self.out = out;
    }
}

/// One fuzz input of the `receiver` target.
pub fn run(data: &[u8]) -> ReceiverHarness {
    let (header, ops): (ReceiverHeader, Vec<ReceiverOp>) = decode_input(data);
    let budget = Budget::new();
    let mut h = ReceiverHarness::new(&header);
    for (i, op) in ops.iter().enumerate() {
        h.step(op);
        h.sut.check();
        budget.check(h.sut.cost + (i + 1) * PER_OP, op);
    }
    h
}
