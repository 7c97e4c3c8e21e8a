//! Seed corpora from real exchanges: a Sender and a Receiver (flexpass-core only) talk over
//! an in-memory link that loses, reorders, duplicates and CE-marks packets at chosen rates
//! (deterministic: one xorshift generator per trace). The link is the `pair` target's own
//! channel driven by a fixed policy, so the recorded operations are a `pair` input that
//! replays the exchange exactly; each endpoint's view of it (the packets it got, when, and
//! its polls, reads and timers) becomes a `sender` and a `receiver` input that replay that
//! endpoint exactly. `tests/seeds.rs` checks the round trips and the replays.

use crate::codec::encode_input;
use crate::pair::{receiver_header, Action, Dir, PairHarness, PairHeader, PairOp, Side};
use crate::receiver::{ReceiverHeader, ReceiverOp, ReceiverPkt};
use crate::sender::{SenderHeader, SenderOp, SenderPkt};
use crate::sut::Event;
use flexpass_core::{Nanos, MILLIS};
use flexpass_wire::TransportKind;

/// One exchange to record. `mss` indexes [`crate::sender::MSS`].
#[derive(Clone, Debug)]
pub struct TraceSpec {
    pub name: &'static str,
    pub transport: TransportKind,
    /// Index into [`MSS`].
    pub mss: u8,
    pub bytes: u64,
    /// Per mille of packets (either direction) dropped, delivered out of order,
    /// duplicated, CE-marked.
    pub loss: u32,
    pub reorder: u32,
    pub dup: u32,
    pub ce: u32,
    /// A stream: never finished; the trace ends once everything written is ACKed and the
    /// credits have stopped.
    pub stream: bool,
    pub seed: u64,
    /// The receiver runs Algorithm 1 with the ns-2 rate-scaled target-loss rule.
    pub rate_scaled: bool,
    /// FlashPass variant ([`crate::sut::flashpass_config`]); 0 for the other transports.
    pub fp: u8,
}

/// The seed set: every transport, clean and lossy links, small and large segments, a stream.
/// FlashPass's traces each use another variant: clean (100 µs path, T_wait 1 ms), lossy
/// (10 µs, 200 µs), tiny segments (1 ms, 1 ms, no pre-credit phase), heavy loss (no
/// over-provisioning), stream (no delayed feedback).
pub fn specs() -> Vec<TraceSpec> {
    let mut v = Vec::new();
    for (t, tn) in [
        (TransportKind::FlexPass, "flexpass"),
        (TransportKind::ExpressPass, "expresspass"),
        (TransportKind::Dctcp, "dctcp"),
        (TransportKind::Ppt, "ppt"),
        (TransportKind::FlashPass, "flashpass"),
    ] {
        let fp = |v: u8| if t == TransportKind::FlashPass { v } else { 0 };
        let base = TraceSpec {
            name: "",
            transport: t,
            mss: 4,
            bytes: 8000,
            loss: 0,
            reorder: 0,
            dup: 0,
            ce: 0,
            stream: false,
            seed: 1,
            rate_scaled: false,
            fp: 0,
        };
        let leak = |s: String| -> &'static str { Box::leak(s.into_boxed_str()) };
        v.push(TraceSpec {
            name: leak(format!("{tn}-clean")),
            ..base.clone()
        });
        v.push(TraceSpec {
            name: leak(format!("{tn}-lossy")),
            mss: 2,
            bytes: 4000,
            loss: 50,
            reorder: 50,
            dup: 20,
            ce: 100,
            seed: 2,
            rate_scaled: true,
            fp: fp(1),
            ..base.clone()
        });
        v.push(TraceSpec {
            name: leak(format!("{tn}-tiny-segments")),
            mss: 1,
            bytes: 300,
            loss: 100,
            // (FlashPass: seed 3 loses the first HELLO; emulating towards no receiver until
            // it is sent again makes a trace longer than an input may be.)
            seed: if t == TransportKind::FlashPass { 13 } else { 3 },
            fp: fp(2 | 4),
            ..base.clone()
        });
        v.push(TraceSpec {
            name: leak(format!("{tn}-heavy-loss")),
            mss: 2,
            bytes: 1500,
            loss: 300,
            reorder: 100,
            seed: 4,
            fp: fp(8),
            ..base.clone()
        });
        v.push(TraceSpec {
            name: leak(format!("{tn}-stream")),
            mss: 3,
            bytes: 3000,
            loss: 20,
            stream: true,
            seed: 5,
            fp: fp(16 | 1),
            ..base.clone()
        });
    }
    v
}

struct XorShift(u64);

impl XorShift {
    fn per_mille(&mut self, p: u32) -> bool {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % 1000) < u64::from(p)
    }
}

/// The three seeds of one exchange, and the harness after it (for tests).
pub struct Seeds {
    pub pair: Vec<u8>,
    pub sender: Vec<u8>,
    pub receiver: Vec<u8>,
    pub pair_ops: (PairHeader, Vec<PairOp>),
    pub sender_ops: (SenderHeader, Vec<SenderOp>),
    pub receiver_ops: (ReceiverHeader, Vec<ReceiverOp>),
    pub harness: PairHarness,
}

/// Rounds of the recording loop before giving up (a trace must finish well before).
const MAX_ROUNDS: usize = 20_000;

pub fn record(spec: &TraceSpec) -> Seeds {
    let header = PairHeader {
        transport: spec.transport,
        mss: spec.mss,
        reorder: 2,
        seed: spec.seed,
        start: 1_000_000,
        rate_scaled: spec.rate_scaled,
        fp: spec.fp,
    };
    let mut h = PairHarness::new(&header).with_recording();
    let mut ops = Vec::new();
    let mut apply = |h: &mut PairHarness, op: PairOp| {
        h.step(&op);
        h.check();
        ops.push(op);
    };
    let mut rng = XorShift(0x2545_F491_4F6C_DD1D ^ spec.seed.wrapping_mul(0x9E37_79B9));
    let mut left = spec.bytes;
    while left > 0 {
        let n = left.min(1000);
        apply(&mut h, PairOp::Write { len: n });
        left -= n;
    }
    if !spec.stream {
        apply(&mut h, PairOp::Finish);
    }
    let mut idle_until: Option<Nanos> = None;
    for _ in 0..MAX_ROUNDS {
        let done = if spec.stream {
            h.s.s.unacked_bytes() == 0
                && h.r.as_ref().is_some_and(|r| !r.r.is_sending_credits())
                && idle_until.is_some_and(|t| h.now >= t)
        } else {
            h.s.s.is_complete() && h.r.as_ref().is_some_and(|r| r.r.is_finished())
        };
        if done || h.s.s.error().is_some() {
            break;
        }
        if spec.stream && idle_until.is_none() && h.s.s.unacked_bytes() == 0 {
            idle_until = Some(h.now + MILLIS);
        }
        let mut moved = false;
        for side in [Dir::ToReceiver, Dir::ToSender] {
            loop {
                let before = h.s2r.len() + h.r2s.len();
                apply(
                    &mut h,
                    match side {
                        Dir::ToReceiver => PairOp::SenderPoll { max: 255 },
                        Dir::ToSender => PairOp::ReceiverPoll { max: 255 },
                    },
                );
                if h.s2r.len() + h.r2s.len() - before < 256 {
                    break;
                }
            }
        }
        for d in [Dir::ToReceiver, Dir::ToSender] {
            let n = match d {
                Dir::ToReceiver => h.s2r.len(),
                Dir::ToSender => h.r2s.len(),
            };
            moved |= n > 0;
            let mut left = n;
            while left > 0 {
                let pick = if left > 1 && rng.per_mille(spec.reorder) {
                    1
                } else {
                    0
                };
                let action = if rng.per_mille(spec.loss) {
                    Action::Drop
                } else if rng.per_mille(spec.dup) {
                    Action::Duplicate
                } else if d == Dir::ToReceiver && rng.per_mille(spec.ce) {
                    Action::DeliverCe
                } else {
                    Action::Deliver
                };
                apply(
                    &mut h,
                    PairOp::Deliver {
                        dir: d,
                        pick,
                        action,
                    },
                );
                if action != Action::Duplicate {
                    left -= 1;
                }
            }
        }
        if h.r.as_ref().is_some_and(|r| r.r.ready_bytes() > 0) {
            apply(&mut h, PairOp::Read { max: 255 });
        }
        if !moved {
            let scheduled = h.s.s.poll_timeout().is_some()
                || h.r.as_ref().is_some_and(|r| r.r.poll_timeout().is_some());
            apply(
                &mut h,
                if scheduled {
                    PairOp::Timeout { side: Side::Both }
                } else {
                    PairOp::Advance { dt: 100_000 }
                },
            );
        }
    }
    let pair_ops = (header, ops);
    let sender_ops = sender_trace(&h, spec);
    let receiver_ops = receiver_trace(&h);
    Seeds {
        pair: encode_input(&pair_ops.0, &pair_ops.1),
        sender: encode_input(&sender_ops.0, &sender_ops.1),
        receiver: encode_input(&receiver_ops.0, &receiver_ops.1),
        pair_ops,
        sender_ops,
        receiver_ops,
        harness: h,
    }
}

/// Time advances so that every event happens at its recorded instant.
fn advance_to(now: &mut Nanos, t: Nanos, ops: &mut Vec<impl From<u64>>) {
    if t > *now {
        ops.push((t - *now).into());
        *now = t;
    }
}

impl From<u64> for SenderOp {
    fn from(dt: u64) -> Self {
        SenderOp::Advance { dt }
    }
}

impl From<u64> for ReceiverOp {
    fn from(dt: u64) -> Self {
        ReceiverOp::Advance { dt }
    }
}

fn poll_max(n: usize) -> u8 {
    assert!(
        (1..=256).contains(&n),
        "recorded polls take at most 256 packets"
    );
    (n - 1) as u8
}

fn sender_trace(h: &PairHarness, spec: &TraceSpec) -> (SenderHeader, Vec<SenderOp>) {
    let start = 1_000_000;
    let header = SenderHeader {
        transport: spec.transport,
        mss: spec.mss,
        flow_size: 0,
        start,
        fp: spec.fp,
    };
    let mut now = start;
    let mut ops = Vec::new();
    for (t, e) in h.s.trace.as_deref().unwrap_or(&[]) {
        advance_to(&mut now, *t, &mut ops);
        ops.push(match e {
            Event::Write(n) => SenderOp::Write { len: *n as u64 },
            Event::Finish => SenderOp::Finish,
            Event::Deliver(p, _) => match SenderPkt::exact(p) {
                Some(p) => SenderOp::Pkt(p),
                None => continue,
            },
            Event::Poll(n) => SenderOp::Poll { max: poll_max(*n) },
            Event::Read(_) => continue,
            Event::Timeout { after } => {
                now = *after;
                SenderOp::Timeout
            }
        });
    }
    (header, ops)
}

fn receiver_trace(h: &PairHarness) -> (ReceiverHeader, Vec<ReceiverOp>) {
    let Some(header) = receiver_header(h) else {
        return (
            ReceiverHeader {
                transport: h.s.transport,
                reorder: 0,
                seed: 0,
                start: 0,
                rate_scaled: false,
            },
            Vec::new(),
        );
    };
    let mut now = header.start;
    let mut ops = Vec::new();
    for (t, e) in h.r.as_ref().and_then(|r| r.trace.as_deref()).unwrap_or(&[]) {
        advance_to(&mut now, *t, &mut ops);
        ops.push(match e {
            Event::Deliver(p, ce) => match ReceiverPkt::exact(p) {
                Some(pkt) => ReceiverOp::Pkt { pkt, ce: *ce },
                None => continue,
            },
            Event::Poll(n) => ReceiverOp::Poll { max: poll_max(*n) },
            Event::Read(n) => ReceiverOp::Read { max: poll_max(*n) },
            Event::Timeout { after } => {
                now = *after;
                ReceiverOp::Timeout
            }
            Event::Write(_) | Event::Finish => continue,
        });
    }
    (header, ops)
}
