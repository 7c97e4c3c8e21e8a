//! Target `pair`: a real Sender and a real Receiver connected by an adversarial channel. The
//! fuzzer decides when each side polls, which in-flight packet is delivered next (reordering),
//! dropped, duplicated or CE-marked, when time passes and timers fire, and may inject forged
//! packets in either direction (built as in the `sender` and `receiver` targets). The
//! receiver is created by the first HELLO that reaches it, as the agent does.
//!
//! Checked on every step: both endpoints' invariants ([`crate::sut`]); and while nothing was
//! forged (drops, duplicates, reordering and CE marks are a benign network): the sender never
//! counts as ACKed more bytes than the receiver holds, the receiver never holds bytes the
//! sender did not send, a complete sender means a complete receiver, and the flow fails only
//! for lack of answers. At the end of a benign input, eventual consistency: over a reliable
//! channel an idle stream stops its credits, and a finished flow completes with every byte
//! delivered in order, leaving no timer behind.

use crate::alloc::{Budget, PER_BYTE, PER_OP, PER_PACKET};
use crate::codec::{decode_input, Codec, Reader, Writer};
use crate::receiver::{ReceiverHeader, ReceiverPkt, REORDER};
use crate::sender::{poll_count, SenderPkt, MAX_WRITE, MSS};
use crate::sut::{advanced, jump, through_wire, ReceiverSut, SenderSut, FLOW, MAX_TIME};
use flexpass_core::config::uses_credits;
use flexpass_core::{Nanos, SenderError, MILLIS};
use flexpass_wire::{Packet, TransportKind};
use std::collections::VecDeque;

/// Most bytes one pair input writes (each segment costs the eventual-consistency phase work).
pub const MAX_PAIR_BYTES: u64 = 32 << 10;
pub const MAX_PAIR_SEGMENTS: u64 = 512;
/// Iterations of the reliable channel before the liveness checks give up.
pub const LIVENESS_STEPS: usize = 100_000;
/// Iterations at full timer resolution; after them the clock moves at least 1 ms per idle
/// round (so LIVENESS_STEPS cover over a minute of simulated time).
pub const FINE_STEPS: usize = 20_000;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PairHeader {
    pub transport: TransportKind,
    pub mss: u8,
    pub reorder: u8,
    pub seed: u64,
    pub start: u64,
    /// The receiver's target-loss rule (see `ReceiverHeader`).
    pub rate_scaled: bool,
    /// FlashPass variant (see `SenderHeader`); in the input for FlashPass only.
    pub fp: u8,
}

impl Codec for PairHeader {
    fn decode(r: &mut Reader) -> Self {
        let transport = r.transport();
        PairHeader {
            transport,
            mss: r.tag(MSS.len() as u8),
            reorder: r.tag(REORDER.len() as u8),
            seed: r.varint(),
            start: r.upto(MAX_TIME),
            rate_scaled: r.bool(),
            fp: r.flashpass_variant(transport),
        }
    }
    fn encode(&self, w: &mut Writer) {
        w.transport(self.transport);
        w.tag(self.mss);
        w.tag(self.reorder);
        w.varint(self.seed);
        w.varint(self.start);
        w.bool(self.rate_scaled);
        w.flashpass_variant(self.transport, self.fp);
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dir {
    ToReceiver,
    ToSender,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    Deliver,
    Drop,
    /// Deliver a copy and keep the packet in flight.
    Duplicate,
    /// Deliver with the IP header's ECN set to CE.
    DeliverCe,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    Sender,
    Receiver,
    /// Whichever deadline comes first.
    Both,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PairOp {
    Write {
        len: u64,
    },
    Finish,
    Read {
        max: u8,
    },
    SenderPoll {
        max: u8,
    },
    ReceiverPoll {
        max: u8,
    },
    /// Act on the `pick`-th packet in flight (modulo the count) in direction `dir`.
    Deliver {
        dir: Dir,
        pick: u32,
        action: Action,
    },
    /// Deliver everything in flight in `dir`, in order.
    Flush {
        dir: Dir,
    },
    Advance {
        dt: u64,
    },
    Timeout {
        side: Side,
    },
    /// `steps + 1` rounds of the reliable channel (see [`PairHarness::run_reliable`]).
    Run {
        steps: u8,
    },
    ForgeToSender(SenderPkt),
    ForgeToReceiver {
        pkt: ReceiverPkt,
        ce: bool,
    },
}

fn dir(r: &mut Reader) -> Dir {
    match r.tag(2) {
        0 => Dir::ToReceiver,
        _ => Dir::ToSender,
    }
}

fn put_dir(w: &mut Writer, d: Dir) {
    w.tag(match d {
        Dir::ToReceiver => 0,
        Dir::ToSender => 1,
    })
}

impl Codec for PairOp {
    fn decode(r: &mut Reader) -> Self {
        match r.tag(12) {
            0 => PairOp::Write {
                len: r.upto(MAX_WRITE),
            },
            1 => PairOp::Finish,
            2 => PairOp::Read { max: r.u8() },
            3 => PairOp::SenderPoll { max: r.u8() },
            4 => PairOp::ReceiverPoll { max: r.u8() },
            5 => PairOp::Deliver {
                dir: dir(r),
                pick: r.u32(),
                action: match r.tag(4) {
                    0 => Action::Deliver,
                    1 => Action::Drop,
                    2 => Action::Duplicate,
                    _ => Action::DeliverCe,
                },
            },
            6 => PairOp::Flush { dir: dir(r) },
            7 => PairOp::Advance { dt: r.varint() },
            8 => PairOp::Timeout {
                side: match r.tag(3) {
                    0 => Side::Sender,
                    1 => Side::Receiver,
                    _ => Side::Both,
                },
            },
            9 => PairOp::Run { steps: r.u8() },
            10 => PairOp::ForgeToSender(SenderPkt::decode(r)),
            _ => PairOp::ForgeToReceiver {
                pkt: ReceiverPkt::decode(r),
                ce: r.bool(),
            },
        }
    }
    fn encode(&self, w: &mut Writer) {
        match self {
            PairOp::Write { len } => {
                w.tag(0);
                w.varint(*len);
            }
            PairOp::Finish => w.tag(1),
            PairOp::Read { max } => {
                w.tag(2);
                w.u8(*max);
            }
            PairOp::SenderPoll { max } => {
                w.tag(3);
                w.u8(*max);
            }
            PairOp::ReceiverPoll { max } => {
                w.tag(4);
                w.u8(*max);
            }
            PairOp::Deliver { dir, pick, action } => {
                w.tag(5);
                put_dir(w, *dir);
                w.u32(*pick);
                w.tag(match action {
                    Action::Deliver => 0,
                    Action::Drop => 1,
                    Action::Duplicate => 2,
                    Action::DeliverCe => 3,
                });
            }
            PairOp::Flush { dir } => {
                w.tag(6);
                put_dir(w, *dir);
            }
            PairOp::Advance { dt } => {
                w.tag(7);
                w.varint(*dt);
            }
            PairOp::Timeout { side } => {
                w.tag(8);
                w.tag(match side {
                    Side::Sender => 0,
                    Side::Receiver => 1,
                    Side::Both => 2,
                });
            }
            PairOp::Run { steps } => {
                w.tag(9);
                w.u8(*steps);
            }
            PairOp::ForgeToSender(p) => {
                w.tag(10);
                p.encode(w);
            }
            PairOp::ForgeToReceiver { pkt, ce } => {
                w.tag(11);
                pkt.encode(w);
                w.bool(*ce);
            }
        }
    }
}

pub struct PairHarness {
    pub now: Nanos,
    pub s: SenderSut,
    pub r: Option<ReceiverSut>,
    max_reorder: u64,
    seed: u64,
    rate_scaled: bool,
    /// In flight: sender → receiver (with the CE mark), receiver → sender.
    pub s2r: VecDeque<(Packet, bool)>,
    pub r2s: VecDeque<Packet>,
    /// A forged packet was injected: from then on only the safety invariants hold.
    pub forged: bool,
    credits_delivered: u32,
    max_written: u64,
    /// Record each endpoint's events (the seed generator).
    pub record: bool,
    /// (start, transport) of the receiver when it was created.
    pub receiver_start: Option<(Nanos, TransportKind)>,
    pub cost: usize,
    scratch: Vec<Packet>,
}

impl PairHarness {
    pub fn new(h: &PairHeader) -> Self {
        let mss = MSS[h.mss as usize] as u64;
        PairHarness {
            now: h.start,
            s: SenderSut::new(h.transport, mss as usize, h.fp, 0, h.start),
            r: None,
            max_reorder: REORDER[h.reorder as usize],
            seed: h.seed,
            rate_scaled: h.rate_scaled,
            s2r: VecDeque::new(),
            r2s: VecDeque::new(),
            forged: false,
            credits_delivered: 0,
            max_written: (MAX_PAIR_SEGMENTS * mss).min(MAX_PAIR_BYTES),
            record: false,
            receiver_start: None,
            cost: 0,
            scratch: Vec::new(),
        }
    }

    pub fn with_recording(mut self) -> Self {
        self.record = true;
        self.s.trace = Some(Vec::new());
        self
    }

    fn sync(&mut self) {
        self.s.now = self.now;
        if let Some(r) = &mut self.r {
            r.now = self.now;
        }
    }

    fn catch_up(&mut self) {
        self.now = self.now.max(self.s.now);
        if let Some(r) = &self.r {
            self.now = self.now.max(r.now);
        }
        self.sync();
    }

    pub fn deliver_to_receiver(&mut self, p: &Packet, ce: bool) {
        if self.r.is_none() {
            // The agent creates a receiver for a HELLO of an unknown flow and drops anything
            // else of an unknown flow.
            match through_wire(p) {
                Some(Packet::Hello(h)) if h.flow_id == FLOW => {
                    let mut r = ReceiverSut::new(
                        h.transport,
                        self.max_reorder,
                        self.seed,
                        self.rate_scaled,
                        self.now,
                    );
                    if self.record {
                        r.trace = Some(Vec::new());
                    }
                    self.receiver_start = Some((self.now, h.transport));
                    self.r = Some(r);
                }
                _ => return,
            }
        }
        self.r.as_mut().expect("created above").deliver(p, ce);
    }

    pub fn deliver_to_sender(&mut self, p: &Packet) {
        if self.s.deliver(p) == Some(true) && matches!(p, Packet::Credit(_)) {
            self.credits_delivered = self.credits_delivered.wrapping_add(1);
        }
    }

    fn poll_sender(&mut self, max: usize) -> usize {
        let mut out = std::mem::take(&mut self.scratch);
        let n = self.s.poll(max, &mut out);
        self.s2r.extend(out.drain(..).map(|p| (p, false)));
        self.scratch = out;
        n
    }

    fn poll_receiver(&mut self, max: usize) -> usize {
        let Some(r) = &mut self.r else { return 0 };
        let mut out = std::mem::take(&mut self.scratch);
        let n = r.poll(max, &mut out);
        self.r2s.extend(out.drain(..));
        self.scratch = out;
        n
    }

    /// Poll in batches of 256 until the endpoint has nothing more.
    fn drain_both(&mut self) -> usize {
        let mut n = 0;
        loop {
            let k = self.poll_sender(256);
            n += k;
            if k < 256 {
                break;
            }
        }
        loop {
            let k = self.poll_receiver(256);
            n += k;
            if k < 256 {
                break;
            }
        }
        n
    }

    fn timeout(&mut self, side: Side) {
        self.timeout_after(side, 0)
    }

    /// Timer step; with `Side::Both` the clock moves at least `min_step` (a late caller).
    fn timeout_after(&mut self, side: Side, min_step: Nanos) {
        let ds = self.s.s.poll_timeout();
        let dr = self.r.as_ref().and_then(|r| r.r.poll_timeout());
        let (run_s, run_r) = match side {
            Side::Sender => (ds.is_some(), false),
            Side::Receiver => (false, dr.is_some()),
            Side::Both => {
                let Some(t) = ds.into_iter().chain(dr).min() else {
                    return;
                };
                self.now = jump(self.now, t.max(self.now.saturating_add(min_step)));
                self.sync();
                (
                    ds.is_some_and(|d| d <= self.now),
                    dr.is_some_and(|d| d <= self.now),
                )
            }
        };
        let mut out = std::mem::take(&mut self.scratch);
        if run_s {
            self.s.timeout(&mut out);
            self.s2r.extend(out.drain(..).map(|p| (p, false)));
            self.catch_up();
        }
        if run_r {
            if let Some(r) = &mut self.r {
                r.timeout(&mut out);
                self.r2s.extend(out.drain(..));
            }
            self.catch_up();
        }
        self.scratch = out;
    }

    fn flush(&mut self, dir: Dir) -> usize {
        match dir {
            Dir::ToReceiver => {
                let n = self.s2r.len();
                for _ in 0..n {
                    let (p, ce) = self.s2r.pop_front().expect("counted");
                    self.deliver_to_receiver(&p, ce);
                }
                n
            }
            Dir::ToSender => {
                let n = self.r2s.len();
                for _ in 0..n {
                    let p = self.r2s.pop_front().expect("counted");
                    self.deliver_to_sender(&p);
                }
                n
            }
        }
    }

    /// The reliable channel, up to `max_steps` rounds or until `done`: both sides poll,
    /// everything in flight is delivered in order with no delay, and when nothing moved time
    /// jumps to the earliest deadline. Returns `done` at the end (false also when nothing
    /// at all is scheduled any more and `done` does not hold).
    pub fn run_reliable(&mut self, max_steps: usize, done: &dyn Fn(&mut Self) -> bool) -> bool {
        for i in 0..max_steps {
            if done(self) {
                return true;
            }
            let moved = self.drain_both() + self.flush(Dir::ToReceiver) + self.flush(Dir::ToSender);
            if moved == 0 {
                let ds = self.s.s.poll_timeout();
                let dr = self.r.as_ref().and_then(|r| r.r.poll_timeout());
                if ds.is_none() && dr.is_none() {
                    break;
                }
                // After FINE_STEPS rounds the endpoints are polled at most once per
                // millisecond, so that timers of up to seconds (an RTT estimate inflated by
                // the adversary's delays) are reached while credits keep coming.
                let min_step = if i < FINE_STEPS { 0 } else { MILLIS };
                self.timeout_after(Side::Both, min_step);
            }
        }
        done(self)
    }

    pub fn step(&mut self, op: &PairOp) {
        self.sync();
        match op {
            PairOp::Write { len } => {
                let len = (*len).min(self.max_written - self.s.written.min(self.max_written));
                self.s.write(len as usize);
            }
            PairOp::Finish => self.s.finish(),
            PairOp::Read { max } => {
                if let Some(r) = &mut self.r {
                    r.read(poll_count(*max));
                }
            }
            PairOp::SenderPoll { max } => {
                self.poll_sender(poll_count(*max));
            }
            PairOp::ReceiverPoll { max } => {
                self.poll_receiver(poll_count(*max));
            }
            PairOp::Deliver { dir, pick, action } => match dir {
                Dir::ToReceiver => {
                    if self.s2r.is_empty() {
                        return;
                    }
                    let i = *pick as usize % self.s2r.len();
                    let (p, ce) = match action {
                        Action::Duplicate => self.s2r[i].clone(),
                        _ => self.s2r.remove(i).expect("in range"),
                    };
                    match action {
                        Action::Drop => {}
                        Action::DeliverCe => self.deliver_to_receiver(&p, true),
                        _ => self.deliver_to_receiver(&p, ce),
                    }
                }
                Dir::ToSender => {
                    if self.r2s.is_empty() {
                        return;
                    }
                    let i = *pick as usize % self.r2s.len();
                    let p = match action {
                        Action::Duplicate => self.r2s[i].clone(),
                        _ => self.r2s.remove(i).expect("in range"),
                    };
                    if *action != Action::Drop {
                        self.deliver_to_sender(&p);
                    }
                }
            },
            PairOp::Flush { dir } => {
                self.flush(*dir);
            }
            PairOp::Advance { dt } => {
                self.now = advanced(self.now, *dt);
                self.sync();
            }
            PairOp::Timeout { side } => self.timeout(*side),
            PairOp::Run { steps } => {
                self.run_reliable(usize::from(*steps) + 1, &|_| false);
            }
            PairOp::ForgeToSender(pkt) => {
                self.forged = true;
                let p = pkt.build(&self.s, self.credits_delivered);
                self.cost += PER_PACKET;
                self.deliver_to_sender(&p);
            }
            PairOp::ForgeToReceiver { pkt, ce } => {
                self.forged = true;
                let p = pkt.build(self.r.as_ref());
                if let Packet::Data(d) = &p {
                    self.cost += PER_PACKET + PER_BYTE * d.payload.len();
                }
                self.deliver_to_receiver(&p, *ce);
            }
        }
        self.catch_up();
    }

    /// Both endpoints' invariants, and the cross-checks of a benign channel.
    pub fn check(&mut self) {
        self.s.check();
        if let Some(r) = &mut self.r {
            r.check();
        }
        if self.forged {
            return;
        }
        let (flow_ack, held, complete) = self.r.as_ref().map_or((0, 0, false), |r| {
            (r.r.flow_ack(), r.r.out_of_order_bytes(), r.r.is_complete())
        });
        let acked = self.s.s.acked_bytes();
        assert!(
            acked <= flow_ack + held,
            "sender counts {acked} B ACKed, receiver holds {flow_ack} in order + {held} out of order"
        );
        assert!(
            flow_ack <= self.s.max_end_sent,
            "receiver has bytes the sender never sent"
        );
        assert!(
            !self.s.s.is_complete() || complete,
            "sender complete, receiver not"
        );
        self.check_benign_error();
    }

    fn check_benign_error(&self) {
        if let Some(e) = self.s.s.error() {
            assert!(
                matches!(
                    e,
                    SenderError::PeerNotResponding | SenderError::NoProgress { .. }
                ),
                "a benign channel failed the flow: {e:?}"
            );
        }
    }

    /// Both endpoints' state, for liveness failures.
    pub fn diagnosis(&mut self) -> String {
        let s = &mut self.s.s;
        let mut d = format!(
            "now {} ns; sender: {} of {} B ACKed, pending {}, deadline {:?}, next seq {:?}, \
             cum {:?}, {:?}",
            self.now,
            s.acked_bytes(),
            self.s.written,
            s.pending_bytes(),
            s.poll_timeout(),
            self.s.next_seq,
            [
                s.subflow_cum_ack(flexpass_wire::SubFlow::Proactive),
                s.subflow_cum_ack(flexpass_wire::SubFlow::Reactive)
            ],
            s.stats()
        );
        if let Some(r) = &self.r {
            d += &format!(
                "; receiver: flow_ack {}, held {}, complete {}, credits {} at {:.0}/s, \
                 deadline {:?}, {:?}",
                r.r.flow_ack(),
                r.r.out_of_order_bytes(),
                r.r.is_complete(),
                r.r.is_sending_credits(),
                r.r.credit_rate(),
                r.r.poll_timeout(),
                r.r.stats()
            );
        }
        d
    }

    fn cost(&self) -> usize {
        self.cost + self.s.cost + self.r.as_ref().map_or(0, |r| r.cost)
    }

    /// Eventual consistency over a reliable channel (benign inputs only).
    pub fn finale(&mut self) {
        if self.forged || self.s.s.error().is_some() {
            return;
        }
        let failed = |h: &mut Self| h.s.s.error().is_some();
        if !self.s.finished {
            let idle =
                self.run_reliable(LIVENESS_STEPS, &|h| failed(h) || h.s.s.unacked_bytes() == 0);
            self.check();
            if failed(self) {
                return;
            }
            assert!(
                idle,
                "liveness: written bytes not ACKed over a reliable channel: {}",
                self.diagnosis()
            );
            let until = self.now + 20 * MILLIS;
            self.run_reliable(LIVENESS_STEPS, &|h| failed(h) || h.now >= until);
            self.check();
            if failed(self) {
                return;
            }
            if uses_credits(self.s.transport) {
                if let Some(r) = &self.r {
                    assert!(
                        !r.r.is_sending_credits(),
                        "an idle stream still gets credits 20 ms later"
                    );
                }
            }
            if self.s.transport == TransportKind::FlashPass {
                // Nothing to send, nothing lost: no more emulation (and so no grants).
                let before = self.s.s.stats().emulation.emulation_sent;
                let until = self.now + 20 * MILLIS;
                self.run_reliable(LIVENESS_STEPS, &|h| failed(h) || h.now >= until);
                let after = self.s.s.stats().emulation.emulation_sent;
                assert!(
                    failed(self) || after == before,
                    "an idle FlashPass stream still emulates 20 ms later: {} packets in 20 ms",
                    after - before
                );
            }
            self.s.finish();
        }
        let done = self.run_reliable(LIVENESS_STEPS, &|h| failed(h) || h.s.s.is_complete());
        self.check();
        if failed(self) {
            return;
        }
        if !done {
            panic!(
                "liveness: finished flow incomplete over a reliable channel: {}",
                self.diagnosis()
            );
        }
        // Let the last control packets (CREDIT_STOP) through: then both sides go quiet.
        self.run_reliable(LIVENESS_STEPS, &|h| {
            h.s2r.is_empty()
                && h.r2s.is_empty()
                && h.s.s.poll_timeout().is_none()
                && h.r.as_ref().is_some_and(|r| r.r.poll_timeout().is_none())
        });
        let r = self.r.as_mut().expect("a complete flow has a receiver");
        r.read(usize::MAX);
        assert_eq!(r.delivered, self.s.written, "every written byte delivered");
        assert!(r.r.is_finished(), "receiver finished");
        let quiet = !r.r.is_sending_credits()
            && r.r.poll_timeout().is_none()
            && self.s.s.poll_timeout().is_none();
        if !quiet {
            panic!(
                "credits or timers left after the flow completed: {}",
                self.diagnosis()
            );
        }
        self.check();
    }
}

/// One fuzz input of the `pair` target: its operations, then (benign inputs) the
/// eventual-consistency phase.
pub fn run(data: &[u8]) -> PairHarness {
    let (header, ops): (PairHeader, Vec<PairOp>) = decode_input(data);
    let budget = Budget::new();
    let mut h = replay_ops(&header, &ops, &budget);
    h.finale();
    budget.check(h.cost() + (ops.len() + 1) * PER_OP, &"the reliable phase");
    h
}

/// The input's operations only, every invariant checked after each.
pub fn replay(data: &[u8]) -> PairHarness {
    let (header, ops): (PairHeader, Vec<PairOp>) = decode_input(data);
    replay_ops(&header, &ops, &Budget::new())
}

fn replay_ops(header: &PairHeader, ops: &[PairOp], budget: &Budget) -> PairHarness {
    let mut h = PairHarness::new(header);
    for (i, op) in ops.iter().enumerate() {
        h.step(op);
        h.check();
        budget.check(h.cost() + (i + 1) * PER_OP, op);
    }
    h
}

/// For the trace conversion: the `receiver` header that recreates this pair's receiver.
pub fn receiver_header(h: &PairHarness) -> Option<ReceiverHeader> {
    let (start, transport) = h.receiver_start?;
    Some(ReceiverHeader {
        transport,
        reorder: REORDER.iter().position(|&r| r == h.max_reorder)? as u8,
        seed: h.seed,
        start,
        rate_scaled: h.rate_scaled,
    })
}
