//! Target `sender`: one [`Sender`](flexpass_core::Sender) (any transport) fed what a
//! receiver — honest or not — could send it: HELLO_ACKs of every status, credits with any
//! sequence, FlashPass EMULATION_CREDITs granting emulation packets really sent (any of
//! them, batched, duplicated) or forged (any emu_seq, T stale, in the future or anywhere), ACKs built by an honest receiver from packets the sender really
//! sent (any subset, any order: loss and reordering) or forged field by field (cum_ack,
//! ack_seq, SACK blocks and flow_ack anywhere, relative to what was sent or absolute),
//! RESETs, and packets that only a receiver accepts; interleaved with application writes,
//! finish, polls and timer events after arbitrary time advances.

use crate::alloc::{Budget, PER_OP};
use crate::codec::{decode_input, Codec, OffRef, Reader, SeqRef, Writer};
use crate::sut::{receiver_config, sf, SenderSut, FLOW};
use bytes::Bytes;
use flexpass_core::{Nanos, Receiver, MICROS};
use flexpass_wire::{
    Ack, Credit, CreditRequest, Data, Emulation, EmulationCredit, EmulationGrant, Hello, HelloAck,
    HelloStatus, Packet, Reset, ResetReason, SackBlocks, SubFlow, TransportKind,
    MAX_EMULATION_GRANTS,
};

/// Payload sizes the targets pick from (1 B makes many segments out of few bytes).
pub const MSS: [usize; 5] = [1, 16, 128, 512, 1444];
/// Largest single write.
pub const MAX_WRITE: u64 = 4096;
/// Segments one input may write (bounds the work per input).
pub const MAX_SEGMENTS: u64 = 2048;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SenderHeader {
    pub transport: TransportKind,
    pub mss: u8,
    pub flow_size: u64,
    /// Clock at the start (ns): lets the µs timestamps wrap early.
    pub start: u64,
    /// FlashPass variant ([`crate::sut::flashpass_config`]); in the input for FlashPass only.
    pub fp: u8,
}

impl SenderHeader {
    pub fn mss(&self) -> usize {
        MSS[self.mss as usize]
    }
}

impl Codec for SenderHeader {
    fn decode(r: &mut Reader) -> Self {
        let transport = r.transport();
        SenderHeader {
            transport,
            mss: r.tag(MSS.len() as u8),
            flow_size: r.varint(),
            start: r.upto(crate::sut::MAX_TIME),
            fp: r.flashpass_variant(transport),
        }
    }
    fn encode(&self, w: &mut Writer) {
        w.transport(self.transport);
        w.tag(self.mss);
        w.varint(self.flow_size);
        w.varint(self.start);
        w.flashpass_variant(self.transport, self.fp);
    }
}

/// `tsecr`: absolute, or "sent `us` µs ago" on the sender's clock (a plausible RTT).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ts {
    Abs(u32),
    Ago(u32),
}

impl Codec for Ts {
    fn decode(r: &mut Reader) -> Self {
        match r.tag(2) {
            0 => Ts::Abs(r.u32()),
            _ => Ts::Ago(r.u32()),
        }
    }
    fn encode(&self, w: &mut Writer) {
        match *self {
            Ts::Abs(v) => {
                w.tag(0);
                w.u32(v)
            }
            Ts::Ago(v) => {
                w.tag(1);
                w.u32(v)
            }
        }
    }
}

/// A packet towards a sender (valid-looking or forged).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SenderPkt {
    HelloAck {
        transport: TransportKind,
        status: HelloStatus,
    },
    /// Relative to the number of credits delivered so far.
    Credit {
        seq: SeqRef,
    },
    /// Sequence fields relative to the sub-flow's next sequence; flow_ack relative to the
    /// bytes sent; SACK blocks as (start, length).
    Ack {
        subflow: SubFlow,
        ece: bool,
        cum: SeqRef,
        ack_seq: SeqRef,
        tsecr: Ts,
        flow_ack: OffRef,
        sack: Vec<(SeqRef, u32)>,
    },
    Reset {
        reason: ResetReason,
    },
    /// A packet the sender must reject: receiver-bound types, or another flow's.
    Stray {
        kind: u8,
    },
    /// FlashPass: an EMULATION_CREDIT of `grants.len()` grants (0 and 33+ do not encode:
    /// the codec drops them).
    EmulationCredit {
        grants: Vec<GrantRef>,
    },
}

pub const STRAY_KINDS: u8 = 10;
/// Most grants a built EMULATION_CREDIT carries (one beyond the wire's limit).
pub const MAX_GRANTS_BUILT: u8 = 34;

/// One grant of a built EMULATION_CREDIT: `emu_seq` relative to the number of emulation
/// packets the sender sent (Back(1): the latest), and its T.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GrantRef {
    pub seq: SeqRef,
    pub ts: GrantTs,
}

/// A grant's T: the one the named emulation packet carried (an honest echo; "now" if the
/// sender never sent that packet), that plus an offset (forged), an absolute value, or
/// relative to the sender's clock (stale: in the past; future: ahead of it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GrantTs {
    Echo,
    EchoPlus(u32),
    Abs(u32),
    Ago(u64),
    Ahead(u64),
}

impl Codec for GrantRef {
    fn decode(r: &mut Reader) -> Self {
        let seq = SeqRef::decode(r);
        let ts = match r.tag(5) {
            0 => GrantTs::Echo,
            1 => GrantTs::EchoPlus(r.u32()),
            2 => GrantTs::Abs(r.u32()),
            3 => GrantTs::Ago(r.varint()),
            _ => GrantTs::Ahead(r.varint()),
        };
        GrantRef { seq, ts }
    }
    fn encode(&self, w: &mut Writer) {
        self.seq.encode(w);
        match self.ts {
            GrantTs::Echo => w.tag(0),
            GrantTs::EchoPlus(v) => {
                w.tag(1);
                w.u32(v)
            }
            GrantTs::Abs(v) => {
                w.tag(2);
                w.u32(v)
            }
            GrantTs::Ago(v) => {
                w.tag(3);
                w.varint(v)
            }
            GrantTs::Ahead(v) => {
                w.tag(4);
                w.varint(v)
            }
        }
    }
}

impl GrantRef {
    fn build(&self, s: &SenderSut) -> EmulationGrant {
        let emu_seq = self.seq.eval(s.emulations.len() as u32);
        let echo = s
            .emulations
            .get(emu_seq as usize)
            .map_or(s.now as u32, |e| e.timestamp);
        let timestamp = match self.ts {
            GrantTs::Echo => echo,
            GrantTs::EchoPlus(d) => echo.wrapping_add(d),
            GrantTs::Abs(v) => v,
            GrantTs::Ago(d) => s.now.wrapping_sub(d) as u32,
            GrantTs::Ahead(d) => s.now.wrapping_add(d) as u32,
        };
        EmulationGrant { emu_seq, timestamp }
    }
}

impl Codec for SenderPkt {
    fn decode(r: &mut Reader) -> Self {
        match r.tag(6) {
            0 => SenderPkt::HelloAck {
                transport: r.transport(),
                status: r.status(),
            },
            1 => SenderPkt::Credit {
                seq: SeqRef::decode(r),
            },
            2 => {
                let subflow = r.subflow();
                let ece = r.bool();
                let cum = SeqRef::decode(r);
                let ack_seq = SeqRef::decode(r);
                let tsecr = Ts::decode(r);
                let flow_ack = OffRef::decode(r);
                let n = r.tag(5);
                let sack = (0..n).map(|_| (SeqRef::decode(r), r.u32())).collect();
                SenderPkt::Ack {
                    subflow,
                    ece,
                    cum,
                    ack_seq,
                    tsecr,
                    flow_ack,
                    sack,
                }
            }
            3 => SenderPkt::Reset { reason: r.reason() },
            4 => SenderPkt::Stray {
                kind: r.tag(STRAY_KINDS),
            },
            _ => {
                let n = r.tag(MAX_GRANTS_BUILT);
                SenderPkt::EmulationCredit {
                    grants: (0..n).map(|_| GrantRef::decode(r)).collect(),
                }
            }
        }
    }
    fn encode(&self, w: &mut Writer) {
        match self {
            SenderPkt::HelloAck { transport, status } => {
                w.tag(0);
                w.transport(*transport);
                w.status(*status);
            }
            SenderPkt::Credit { seq } => {
                w.tag(1);
                seq.encode(w);
            }
            SenderPkt::Ack {
                subflow,
                ece,
                cum,
                ack_seq,
                tsecr,
                flow_ack,
                sack,
            } => {
                w.tag(2);
                w.subflow(*subflow);
                w.bool(*ece);
                cum.encode(w);
                ack_seq.encode(w);
                tsecr.encode(w);
                flow_ack.encode(w);
                w.tag(sack.len() as u8);
                for (s, len) in sack {
                    s.encode(w);
                    w.u32(*len);
                }
            }
            SenderPkt::Reset { reason } => {
                w.tag(3);
                w.reason(*reason);
            }
            SenderPkt::Stray { kind } => {
                w.tag(4);
                w.tag(*kind);
            }
            SenderPkt::EmulationCredit { grants } => {
                w.tag(5);
                w.tag(grants.len() as u8);
                for g in grants {
                    g.encode(w);
                }
            }
        }
    }
}

impl SenderPkt {
    /// The packet, given the sender's state and the credits delivered so far. Forged ACKs
    /// may not encode (e.g. a SACK block at or below cum_ack); the codec then drops them.
    pub fn build(&self, s: &SenderSut, credits_delivered: u32) -> Packet {
        match self {
            SenderPkt::HelloAck { transport, status } => Packet::HelloAck(HelloAck {
                flow_id: FLOW,
                transport: *transport,
                status: *status,
            }),
            SenderPkt::Credit { seq } => Packet::Credit(Credit {
                flow_id: FLOW,
                credit_seq: seq.eval(credits_delivered),
                padding: flexpass_wire::CREDIT_PADDING_MIN,
            }),
            SenderPkt::Ack {
                subflow,
                ece,
                cum,
                ack_seq,
                tsecr,
                flow_ack,
                sack,
            } => {
                let next = s.next_seq[sf(*subflow)];
                let mut blocks = SackBlocks::new();
                for &(start, len) in sack {
                    let start = start.eval(next);
                    blocks.push(start, start.saturating_add(len));
                }
                Packet::Ack(Ack {
                    flow_id: FLOW,
                    subflow: *subflow,
                    ece: *ece,
                    cum_ack: cum.eval(next),
                    ack_seq: ack_seq.eval(next),
                    tsecr: match *tsecr {
                        Ts::Abs(v) => v,
                        Ts::Ago(us) => wire_ts(s.now).wrapping_sub(us),
                    },
                    flow_ack: flow_ack.eval(s.max_end_sent),
                    sack: blocks,
                })
            }
            SenderPkt::Reset { reason } => Packet::Reset(Reset {
                flow_id: FLOW,
                reason: *reason,
            }),
            SenderPkt::Stray { kind } => stray_for_sender(*kind),
            SenderPkt::EmulationCredit { grants } => Packet::EmulationCredit(EmulationCredit {
                flow_id: FLOW,
                grants: grants.iter().map(|g| g.build(s)).collect(),
            }),
        }
    }

    /// The exact packet (for replaying a recorded trace), or None for a packet a sender
    /// target cannot express (receiver-bound types).
    pub fn exact(p: &Packet) -> Option<SenderPkt> {
        Some(match p {
            Packet::HelloAck(h) => SenderPkt::HelloAck {
                transport: h.transport,
                status: h.status,
            },
            Packet::Credit(c) => SenderPkt::Credit {
                seq: SeqRef::Abs(c.credit_seq),
            },
            Packet::Ack(a) => SenderPkt::Ack {
                subflow: a.subflow,
                ece: a.ece,
                cum: SeqRef::Abs(a.cum_ack),
                ack_seq: SeqRef::Abs(a.ack_seq),
                tsecr: Ts::Abs(a.tsecr),
                flow_ack: OffRef::Abs(a.flow_ack),
                sack: a
                    .sack
                    .iter()
                    .map(|&(s, e)| (SeqRef::Abs(s), e - s))
                    .collect(),
            },
            Packet::Reset(r) => SenderPkt::Reset { reason: r.reason },
            Packet::EmulationCredit(c) => SenderPkt::EmulationCredit {
                grants: c
                    .grants
                    .iter()
                    .map(|g| GrantRef {
                        seq: SeqRef::Abs(g.emu_seq),
                        ts: GrantTs::Abs(g.timestamp),
                    })
                    .collect(),
            },
            _ => return None,
        })
    }
}

/// The sender's wire clock (µs, wrapping), as in flexpass-core.
pub fn wire_ts(now: Nanos) -> u32 {
    (now / MICROS) as u32
}

fn stray_for_sender(kind: u8) -> Packet {
    let other = FLOW + 1;
    match kind % STRAY_KINDS {
        0 => Packet::Data(Data {
            flow_id: FLOW,
            subflow: SubFlow::Reactive,
            flow_seq: 0,
            subflow_seq: 0,
            credit_seq: 0,
            tsval: 0,
            fin: true,
            retransmission: false,
            priority: None,
            payload: Bytes::new(),
        }),
        1 => Packet::Hello(Hello {
            flow_id: FLOW,
            transport: TransportKind::FlexPass,
            flow_size: 0,
            conn: None,
            cookie: None,
            idle: false,
        }),
        2 => Packet::CreditRequest(CreditRequest {
            flow_id: FLOW,
            pending_bytes: 1,
        }),
        3 => Packet::CreditStop { flow_id: FLOW },
        4 => Packet::Credit(Credit {
            flow_id: other,
            credit_seq: 0,
            padding: flexpass_wire::CREDIT_PADDING_MAX,
        }),
        5 => Packet::Reset(Reset {
            flow_id: other,
            reason: ResetReason::Unspecified,
        }),
        6 => Packet::HelloAck(HelloAck {
            flow_id: other,
            transport: TransportKind::FlexPass,
            status: HelloStatus::Refused,
        }),
        8 => Packet::Emulation(Emulation {
            flow_id: FLOW,
            emu_seq: 0,
            timestamp: 0,
            hold: 0,
        }),
        9 => Packet::EmulationCredit(EmulationCredit {
            flow_id: other,
            grants: vec![EmulationGrant {
                emu_seq: 0,
                timestamp: 0,
            }],
        }),
        _ => Packet::Ack(Ack {
            flow_id: other,
            subflow: SubFlow::Reactive,
            ece: false,
            cum_ack: 0,
            ack_seq: 0,
            tsecr: 0,
            flow_ack: 0,
            sack: SackBlocks::new(),
        }),
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SenderOp {
    Write {
        len: u64,
    },
    Finish,
    Poll {
        max: u8,
    },
    Advance {
        dt: u64,
    },
    Timeout,
    Spurious,
    /// An honest receiver gets the `pick`-th most recent data packet the sender sent
    /// (modulo the count) and its ACK goes back.
    HonestAck {
        pick: u32,
        ece: bool,
    },
    Pkt(SenderPkt),
    /// FlashPass: an honest receiver grants `count + 1` emulation packets the sender sent,
    /// from the `pick`-th most recent on (modulo the count), in one EMULATION_CREDIT.
    HonestGrant {
        pick: u32,
        count: u8,
    },
}

impl Codec for SenderOp {
    fn decode(r: &mut Reader) -> Self {
        match r.tag(9) {
            0 => SenderOp::Write {
                len: r.upto(MAX_WRITE),
            },
            1 => SenderOp::Finish,
            2 => SenderOp::Poll { max: r.u8() },
            3 => SenderOp::Advance { dt: r.varint() },
            4 => SenderOp::Timeout,
            5 => SenderOp::Spurious,
            6 => SenderOp::HonestAck {
                pick: r.u32(),
                ece: r.bool(),
            },
            7 => SenderOp::Pkt(SenderPkt::decode(r)),
            _ => SenderOp::HonestGrant {
                pick: r.u32(),
                count: r.tag(MAX_EMULATION_GRANTS as u8),
            },
        }
    }
    fn encode(&self, w: &mut Writer) {
        match self {
            SenderOp::Write { len } => {
                w.tag(0);
                w.varint(*len);
            }
            SenderOp::Finish => w.tag(1),
            SenderOp::Poll { max } => {
                w.tag(2);
                w.u8(*max);
            }
            SenderOp::Advance { dt } => {
                w.tag(3);
                w.varint(*dt);
            }
            SenderOp::Timeout => w.tag(4),
            SenderOp::Spurious => w.tag(5),
            SenderOp::HonestAck { pick, ece } => {
                w.tag(6);
                w.u32(*pick);
                w.bool(*ece);
            }
            SenderOp::Pkt(p) => {
                w.tag(7);
                p.encode(w);
            }
            SenderOp::HonestGrant { pick, count } => {
                w.tag(8);
                w.u32(*pick);
                w.tag(*count);
            }
        }
    }
}

/// Poll operations drain up to `max + 1` packets.
pub fn poll_count(max: u8) -> usize {
    usize::from(max) + 1
}

pub struct SenderHarness {
    pub sut: SenderSut,
    /// The honest receiver behind `HonestAck`.
    mirror: Receiver,
    credits_delivered: u32,
    max_written: u64,
    out: Vec<Packet>,
}

impl SenderHarness {
    pub fn new(h: &SenderHeader) -> Self {
        let mirror = Receiver::new(FLOW, h.transport, &receiver_config(64 << 20, 0, false))
            .expect("valid receiver config");
        SenderHarness {
            sut: SenderSut::new(h.transport, h.mss(), h.fp, h.flow_size, h.start),
            mirror,
            credits_delivered: 0,
            max_written: MAX_SEGMENTS * h.mss() as u64,
            out: Vec::new(),
        }
    }

    pub fn deliver(&mut self, p: &Packet) {
        if self.sut.deliver(p) == Some(true) && matches!(p, Packet::Credit(_)) {
            self.credits_delivered = self.credits_delivered.wrapping_add(1);
        }
    }

    pub fn step(&mut self, op: &SenderOp) {
        self.out.clear();
        match op {
            SenderOp::Write { len } => {
                let len = (*len).min(self.max_written - self.sut.written.min(self.max_written));
                self.sut.write(len as usize);
            }
            SenderOp::Finish => self.sut.finish(),
            SenderOp::Poll { max } => {
                let mut out = std::mem::take(&mut self.out);
                self.sut.poll(poll_count(*max), &mut out);
                self.out = out;
            }
            SenderOp::Advance { dt } => self.sut.advance(*dt),
            SenderOp::Timeout => {
                let mut out = std::mem::take(&mut self.out);
                self.sut.timeout(&mut out);
                self.out = out;
            }
            SenderOp::Spurious => self.sut.spurious_timeout(),
            SenderOp::HonestAck { pick, ece } => {
                let n = self.sut.sent.len();
                if n == 0 {
                    return;
                }
                let d = self.sut.sent[n - 1 - (*pick as usize % n)].clone();
                let now = self.sut.now;
                if self
                    .mirror
                    .handle_packet(now, &Packet::Data(d), *ece)
                    .is_err()
                {
                    return;
                }
                while let Some(t) = self.mirror.poll_transmit(now) {
                    if let Packet::Ack(_) = t.packet {
                        self.deliver(&t.packet);
                        break;
                    }
                }
            }
            SenderOp::Pkt(p) => {
                let p = p.build(&self.sut, self.credits_delivered);
                self.deliver(&p);
            }
            SenderOp::HonestGrant { pick, count } => {
                let n = self.sut.emulations.len();
                if n == 0 {
                    return;
                }
                let first = n - 1 - (*pick as usize % n);
                let grants = self.sut.emulations[first..]
                    .iter()
                    .take(usize::from(*count) + 1)
                    .map(|e| EmulationGrant {
                        emu_seq: e.emu_seq,
                        timestamp: e.timestamp,
                    })
                    .collect();
                self.deliver(&Packet::EmulationCredit(EmulationCredit {
                    flow_id: FLOW,
                    grants,
                }));
            }
        }
    }
}

/// One fuzz input of the `sender` target.
pub fn run(data: &[u8]) -> SenderHarness {
    let (header, ops): (SenderHeader, Vec<SenderOp>) = decode_input(data);
    let budget = Budget::new();
    let mut h = SenderHarness::new(&header);
    for (i, op) in ops.iter().enumerate() {
        h.step(op);
        h.sut.check();
        budget.check(h.sut.cost + (i + 1) * PER_OP, op);
    }
    h
}
