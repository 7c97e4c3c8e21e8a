//! The endpoints under test, wrapped with what the invariants need. Every packet an endpoint
//! receives goes through the wire codec first (encode, then decode, as the agent does), every
//! packet it emits is checked, and [`SenderSut::check`] / [`ReceiverSut::check`] run after
//! every operation. A violated invariant panics with a message naming it.

use crate::alloc::{PER_BYTE, PER_PACKET};
use crate::pattern;
use bytes::Bytes;
use flexpass_core::config::uses_credits;
use flexpass_core::{
    CreditConfig, FlashPassConfig, Nanos, Receiver, ReceiverConfig, Sender, SenderConfig,
    TargetLossRule, Transmit, MICROS, MILLIS,
};
use flexpass_wire::{
    Ecn, EmulationGrant, HelloStatus, Packet, SubFlow, TrafficClass, TransportKind,
    CREDIT_PADDING_MAX, CREDIT_PADDING_MIN, MAX_EMULATION_GRANTS,
};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// Flow id of the flow under test.
pub const FLOW: u32 = 7;
/// Time advances stop here (about 52 days); timers still fire beyond it. Far below overflow.
pub const MAX_TIME: Nanos = 1 << 52;
/// No deadline may lie beyond this (it would be an overflow in the making).
pub const MAX_DEADLINE: Nanos = 1 << 62;

/// The clock after an `Advance` of `dt`: it stops at MAX_TIME, and never runs backwards
/// (timers fire beyond MAX_TIME; an advance from there leaves the clock where it is: it
/// once moved it back 5.5 s, and the receiver's next credit was then 5.5 s away).
pub fn advanced(now: Nanos, dt: u64) -> Nanos {
    now.max(now.saturating_add(dt).min(MAX_TIME))
}

/// The clock after jumping to deadline `t`.
pub fn jump(now: Nanos, t: Nanos) -> Nanos {
    assert!(
        t < MAX_DEADLINE,
        "deadline {t} ns is absurdly far (now {now})"
    );
    now.max(t)
}
/// Most packets one poll operation drains.
pub const DRAIN_MAX: usize = 4096;

pub fn sf(s: SubFlow) -> usize {
    match s {
        SubFlow::Proactive => 0,
        SubFlow::Reactive => 1,
    }
}

const SUBFLOWS: [SubFlow; 2] = [SubFlow::Proactive, SubFlow::Reactive];

/// Whether a `transport` endpoint may carry data on `subflow`.
pub fn subflow_allowed(transport: TransportKind, subflow: SubFlow) -> bool {
    match transport {
        TransportKind::FlexPass => true,
        TransportKind::ExpressPass => subflow == SubFlow::Proactive,
        TransportKind::Dctcp => subflow == SubFlow::Reactive,
        TransportKind::Ppt | TransportKind::FlashPass => true,
    }
}

/// The packet as the peer's decoder would hand it over: encode, decode. None when the
/// decoder rejects the encoding (the agent drops such a datagram before any flow sees it).
/// A packet that validates must come back unchanged.
pub fn through_wire(p: &Packet) -> Option<Packet> {
    let q = Packet::decode(&p.encode_to_vec()).ok()?;
    if p.validate().is_ok() {
        assert_eq!(&q, p, "a valid packet survives encode → decode");
    }
    Some(q)
}

/// Checks every endpoint applies to what it emits.
fn check_emitted(t: &Transmit, transport: TransportKind) {
    let p = &t.packet;
    assert_eq!(
        p.validate(),
        Ok(()),
        "emitted packet must be encodable: {p:?}"
    );
    assert_eq!(p.flow_id(), FLOW, "emitted packet of another flow: {p:?}");
    let (class, ecn) = p.marking(transport);
    match (transport, p) {
        // FlashPass §III-C: emulation packets take the emulation (credit) queue; the ECN
        // field is their dropping priority, ECT(0) ordinary, Not-ECT over-provisioned
        // (SenderSut checks which).
        (TransportKind::FlashPass, Packet::Emulation(_)) => {
            assert_eq!(t.class, TrafficClass::Credit, "marking of {p:?}");
            assert!(matches!(t.ecn, Ecn::Ect0 | Ecn::NotEct), "marking of {p:?}");
        }
        // PPT data carries its flow's priority (SIGCOMM'24 §4.2): the HCP one of P0–P3, the
        // LCP the mirror image P4–P7; the marking gives each half's top.
        (TransportKind::Ppt, Packet::Data(d)) => {
            let level = t.class.priority().expect("PPT data has a priority");
            let lcp = d.subflow == SubFlow::Proactive;
            assert_eq!(level >= 4, lcp, "PPT {:?} data at P{level}", d.subflow);
            assert_eq!(t.ecn, ecn, "marking of {p:?}");
        }
        _ => assert_eq!((t.class, t.ecn), (class, ecn), "marking of {p:?}"),
    }
    assert_eq!(
        Packet::decode(&p.encode_to_vec()).as_ref(),
        Ok(p),
        "emitted packet round-trips"
    );
}

/// What one endpoint saw, for the seed generator: the time and the event.
#[derive(Clone, Debug)]
pub enum Event {
    Write(usize),
    Finish,
    Deliver(Packet, bool),
    Poll(usize),
    Read(usize),
    /// `handle_timeout` after jumping to the endpoint's own deadline; the event's time is
    /// the clock before the jump, `after` the clock after it.
    Timeout {
        after: Nanos,
    },
}

/// `fp`: the FlashPass variant ([`flashpass_config`]; ignored for other transports).
pub fn sender_config(transport: TransportKind, mss: usize, fp: u8) -> SenderConfig {
    let mut c = SenderConfig::new(transport);
    c.mss = mss;
    c.flashpass = flashpass_config(fp, mss);
    c
}

/// FlashPass variants a header picks from (a tag below this).
pub const FLASHPASS_VARIANTS: u8 = 64;

/// FlashPass variant `v`: bits 0–1 pick the path (link rate, base RTT, T_wait), bit 2 turns
/// the pre-credit phase (Aeolus) off, bit 3 over-provisioning, bit 4 delayed feedback; bit 5
/// makes Algorithm 1 wait for 16 resolved packets (`min_update_samples`, the agent's). The
/// pre-credit phase is capped at four segments (a BDP would cover every input's bytes).
pub fn flashpass_config(v: u8, mss: usize) -> FlashPassConfig {
    const PATHS: [(f64, Nanos, Nanos); 4] = [
        (10e9, 100 * MICROS, MILLIS),
        (1e9, 10 * MICROS, 200 * MICROS),
        (10e9, MILLIS, MILLIS),
        (1e9, 40 * MILLIS, 40 * MILLIS),
    ];
    let (link, base_rtt, t_wait) = PATHS[usize::from(v & 3)];
    let mut c = FlashPassConfig::for_link(link, base_rtt, t_wait);
    c.unscheduled = v & 4 == 0;
    c.unscheduled_bytes = c.unscheduled_bytes.min(4 * mss as u64);
    c.over_provisioning = v & 8 == 0;
    c.delayed_feedback = v & 16 == 0;
    c.min_update_samples = if v & 32 == 0 { 1 } else { 16 };
    c
}

/// What the sender target and the invariants remember of one emulation packet sent.
#[derive(Clone, Copy, Debug)]
pub struct EmulationSent {
    pub emu_seq: u32,
    pub timestamp: u32,
    pub sent: Nanos,
    pub hold: u16,
}

/// FlashPass sender bookkeeping of the invariants.
#[derive(Default)]
struct FlashPassCheck {
    cfg: FlashPassConfig,
    /// emu_seq → the emulation packet, until a grant echoing it (seq and T) licenses a slot.
    uncredited: BTreeMap<u32, EmulationSent>,
    /// Data slots T + T_wait licensed by genuine grants (a multiset: slot → count).
    slots: BTreeMap<Nanos, u32>,
    next_emu_seq: u32,
    emulations: u64,
    over_provisioned: u64,
    unscheduled_packets: u64,
    unscheduled_bytes: u64,
    created: Nanos,
    /// The pacers' floor gap: 1 / max_emulation_rate.
    min_gap: Nanos,
}

/// `rate_scaled`: Algorithm 1 with the ns-2 target-loss rule instead of the paper's.
/// One seed in four paces credits in batches of 8 (`CreditConfig::batch`); half of the
/// seeds window credits as the host agent does (`credit_window_segment`).
pub fn receiver_config(max_reorder: u64, seed: u64, rate_scaled: bool) -> ReceiverConfig {
    let mut c = ReceiverConfig::new(CreditConfig::for_link(10e9, 0.5, 25 * MICROS));
    c.max_reorder_bytes = max_reorder;
    c.seed = seed;
    c.credit.batch = if seed % 4 == 3 { 8 } else { 1 };
    c.credit_window_segment = if (seed / 4) % 2 == 1 { 1448 } else { 0 };
    if rate_scaled {
        c.credit.target_loss_rule = TargetLossRule::RateScaled {
            target_loss_scaling: TargetLossRule::NS2_SCALING,
        };
    }
    c
}

// ---------------------------------------------------------------------------------------
// Sender
// ---------------------------------------------------------------------------------------

pub struct SenderSut {
    pub s: Sender,
    pub transport: TransportKind,
    mss: usize,
    pub now: Nanos,
    /// Bytes the application wrote (accepted by `write`).
    pub written: u64,
    pub finished: bool,
    /// End of the highest byte ever transmitted.
    pub max_end_sent: u64,
    /// Distinct bytes transmitted (PPT sends the tail first, so not `max_end_sent`).
    sent_distinct: u64,
    /// Sub-flow sequence numbers seen on the wire so far (next expected).
    pub next_seq: [u32; 2],
    /// Every data packet transmitted (the sender target's honest receiver picks from it).
    pub sent: Vec<flexpass_wire::Data>,
    last_cum: [u32; 2],
    last_acked: u64,
    /// Credits accepted, not yet echoed by proactive data (or skipped: wasted).
    credits: VecDeque<u32>,
    /// flow_seq → (length, FIN) of every segment transmitted.
    segments: BTreeMap<u64, (usize, bool)>,
    was_complete: bool,
    was_failed: bool,
    /// FlashPass: emulation packets sent, in order (the sender target's honest receiver
    /// grants from them).
    pub emulations: Vec<EmulationSent>,
    fp: Option<Box<FlashPassCheck>>,
    /// Heap budget granted by this endpoint's activity.
    pub cost: usize,
    pub trace: Option<Vec<(Nanos, Event)>>,
}

impl FlashPassCheck {
    /// A grant licenses one data slot at T + T_wait (at once when that has passed) iff it
    /// echoes an emulation packet this sender sent, seq and T, and no grant did before: a
    /// duplicated, replayed or forged grant licenses nothing.
    fn on_grant(&mut self, now: Nanos, g: &EmulationGrant) {
        let Some(e) = self.uncredited.get(&g.emu_seq) else {
            return;
        };
        if e.timestamp != g.timestamp {
            return;
        }
        let slot = (e.sent + self.cfg.t_wait).max(now);
        self.uncredited.remove(&g.emu_seq);
        *self.slots.entry(slot).or_default() += 1;
    }

    /// A proactive data packet at `now` uses the earliest licensed slot, which must be due.
    fn use_slot(&mut self, now: Nanos) {
        let Some(mut first) = self.slots.first_entry() else {
            panic!("FlashPass proactive data at {now} without a grant");
        };
        let slot = *first.key();
        assert!(
            slot <= now,
            "FlashPass proactive data at {now} before its slot T + T_wait = {slot}"
        );
        *first.get_mut() -= 1;
        if *first.get() == 0 {
            first.remove();
        }
    }
}

impl SenderSut {
    pub fn new(transport: TransportKind, mss: usize, fp: u8, flow_size: u64, start: Nanos) -> Self {
        let cfg = sender_config(transport, mss, fp);
        let fp = (transport == TransportKind::FlashPass).then(|| {
            Box::new(FlashPassCheck {
                min_gap: ((1e9 / cfg.flashpass.max_emulation_rate) as Nanos).max(1),
                cfg: cfg.flashpass.clone(),
                created: start,
                ..Default::default()
            })
        });
        let s = Sender::new(FLOW, cfg, flow_size, start).expect("valid sender config");
        SenderSut {
            emulations: Vec::new(),
            fp,
            s,
            transport,
            mss: mss.max(1),
            now: start,
            written: 0,
            finished: false,
            max_end_sent: 0,
            sent_distinct: 0,
            next_seq: [0; 2],
            sent: Vec::new(),
            last_cum: [0; 2],
            last_acked: 0,
            credits: VecDeque::new(),
            segments: BTreeMap::new(),
            was_complete: false,
            was_failed: false,
            cost: 0,
            trace: None,
        }
    }

    fn record(&mut self, e: Event) {
        if let Some(t) = &mut self.trace {
            t.push((self.now, e));
        }
    }

    pub fn advance(&mut self, dt: u64) {
        self.now = advanced(self.now, dt);
    }

    pub fn write(&mut self, len: usize) {
        self.record(Event::Write(len));
        let expect = !self.finished && self.s.error().is_none();
        let ok = self.s.write(Bytes::from(pattern::fill(self.written, len)));
        assert_eq!(
            ok, expect,
            "write is accepted iff not finished and not failed"
        );
        if ok {
            self.written += len as u64;
        }
        self.cost += PER_BYTE * len + PER_PACKET;
        if self.transport == TransportKind::Ppt {
            // PPT cuts written bytes into segments before sending them (the LCP sends from
            // the tail of the buffer): a segment per MSS written, ahead of its packet.
            self.cost += PER_PACKET * len.div_ceil(self.mss);
        }
    }

    pub fn finish(&mut self) {
        self.record(Event::Finish);
        self.s.finish();
        self.finished = true;
    }

    /// Hand `p` (through the codec) to the sender. None: the decoder dropped it.
    pub fn deliver(&mut self, p: &Packet) -> Option<bool> {
        self.record(Event::Deliver(p.clone(), false));
        self.cost += PER_PACKET;
        let p = through_wire(p)?;
        let acked_before = self.s.acked_bytes();
        let r = self.s.handle_packet(self.now, &p);
        let must_reject = p.flow_id() != FLOW
            || p.is_sender_to_receiver()
            || match &p {
                Packet::Credit(_) => !uses_credits(self.transport),
                Packet::EmulationCredit(_) => self.fp.is_none(),
                Packet::HelloAck(h) => h.transport != self.transport,
                Packet::Ack(a) => !subflow_allowed(self.transport, a.subflow),
                _ => false,
            };
        if must_reject {
            assert!(r.is_err(), "sender accepted {p:?}");
        }
        if r.is_err() {
            assert_eq!(
                self.s.acked_bytes(),
                acked_before,
                "a rejected packet acknowledged data"
            );
        }
        match (&p, r.is_ok()) {
            (Packet::Credit(c), true) => self.credits.push_back(c.credit_seq),
            (Packet::EmulationCredit(c), true) => {
                let fp = self.fp.as_mut().expect("accepted by FlashPass only");
                for g in &c.grants {
                    fp.on_grant(self.now, g);
                }
            }
            (Packet::Ack(a), true) => {
                // The sender never accepts an acknowledgement of something it did not send.
                let next = self.next_seq[sf(a.subflow)];
                assert!(
                    a.flow_ack <= self.max_end_sent,
                    "sender accepted flow_ack {} beyond the {} bytes sent",
                    a.flow_ack,
                    self.max_end_sent
                );
                assert!(
                    a.cum_ack <= next && a.ack_seq < next,
                    "sender accepted an ACK of unsent packets (next {next}): {a:?}"
                );
                assert!(
                    a.sack.iter().all(|&(_, e)| e <= next),
                    "sender accepted SACK of unsent packets (next {next}): {a:?}"
                );
            }
            _ => {}
        }
        Some(r.is_ok())
    }

    /// The application's poll: up to `max` packets at `now` (recorded for seeds).
    pub fn poll(&mut self, max: usize, out: &mut Vec<Packet>) -> usize {
        self.record(Event::Poll(max));
        self.poll_into(max, out)
    }

    /// Poll up to `max` packets at `now`; every one is checked. Returns how many came out.
    fn poll_into(&mut self, max: usize, out: &mut Vec<Packet>) -> usize {
        let mut n = 0;
        while n < max {
            let Some(t) = self.s.poll_transmit(self.now) else {
                break;
            };
            self.cost += PER_PACKET;
            self.check_transmit(&t);
            out.push(t.packet);
            n += 1;
        }
        n
    }

    fn check_transmit(&mut self, t: &Transmit) {
        check_emitted(t, self.transport);
        let p = &t.packet;
        assert!(!self.was_failed, "a failed sender transmitted {p:?}");
        assert!(p.is_sender_to_receiver(), "sender emitted {p:?}");
        if let (Some(fp), Packet::Data(d)) = (self.fp.as_mut(), p) {
            match d.subflow {
                // Scheduled data: one per genuine grant, never before T + T_wait.
                SubFlow::Proactive => fp.use_slot(self.now),
                // Unscheduled data (Aeolus pre-credit phase): new data only, at most
                // `unscheduled_bytes` (the last packet may cross it), paced at most one per
                // 1 / max_emulation_rate since the flow opened.
                SubFlow::Reactive => {
                    assert!(fp.cfg.unscheduled, "unscheduled data with the phase off");
                    assert!(!d.retransmission, "FlashPass retransmits on slots only");
                    assert!(
                        fp.unscheduled_bytes < fp.cfg.unscheduled_bytes,
                        "unscheduled data beyond the pre-credit budget of {} B",
                        fp.cfg.unscheduled_bytes
                    );
                    assert!(
                        fp.unscheduled_packets <= self.now.saturating_sub(fp.created) / fp.min_gap,
                        "unscheduled data faster than line rate"
                    );
                    fp.unscheduled_packets += 1;
                    fp.unscheduled_bytes += d.payload.len() as u64;
                }
            }
        }
        match p {
            Packet::Data(d) => {
                assert!(!self.was_complete, "a complete sender sent data");
                assert!(
                    subflow_allowed(self.transport, d.subflow),
                    "{:?} sender used the {:?} sub-flow",
                    self.transport,
                    d.subflow
                );
                let i = sf(d.subflow);
                assert_eq!(
                    d.subflow_seq, self.next_seq[i],
                    "every transmission takes the next sub-flow sequence"
                );
                self.next_seq[i] += 1;
                let end = d.flow_seq + d.payload.len() as u64;
                assert!(end <= self.written, "data beyond what was written");
                assert!(
                    pattern::matches(d.flow_seq, &d.payload),
                    "payload at {} is not the application's bytes",
                    d.flow_seq
                );
                if d.fin {
                    assert!(self.finished && end == self.written, "FIN before the end");
                }
                match self.segments.get(&d.flow_seq) {
                    Some(&seg) => {
                        assert_eq!(seg, (d.payload.len(), d.fin), "segment boundaries change");
                        assert!(d.retransmission, "a retransmission without RETX");
                    }
                    None if self.transport == TransportKind::Ppt => {
                        // PPT: the LCP cuts from the tail; segments never overlap.
                        assert!(!d.retransmission, "RETX on a first transmission");
                        let below = self.segments.range(..d.flow_seq).next_back();
                        assert!(
                            below.is_none_or(|(&s, &(l, _))| s + l as u64 <= d.flow_seq),
                            "new segment at {} overlaps an earlier one",
                            d.flow_seq
                        );
                        let above = self.segments.range(d.flow_seq..).next();
                        assert!(
                            above.is_none_or(
                                |(&s, _)| end <= s && (end < s || !d.payload.is_empty())
                            ),
                            "new segment at {} overlaps a later one",
                            d.flow_seq
                        );
                        self.segments.insert(d.flow_seq, (d.payload.len(), d.fin));
                        self.max_end_sent = self.max_end_sent.max(end);
                        self.sent_distinct += d.payload.len() as u64;
                    }
                    None => {
                        assert!(!d.retransmission, "RETX on a first transmission");
                        assert_eq!(d.flow_seq, self.max_end_sent, "new data is cut in order");
                        self.segments.insert(d.flow_seq, (d.payload.len(), d.fin));
                        self.max_end_sent = end;
                        self.sent_distinct += d.payload.len() as u64;
                    }
                }
                match d.subflow {
                    // PPT's opportunistic packets consume no credit; FlashPass data uses a
                    // slot (checked above), not a CREDIT.
                    SubFlow::Proactive
                        if matches!(
                            self.transport,
                            TransportKind::Ppt | TransportKind::FlashPass
                        ) =>
                    {
                        assert_eq!(d.credit_seq, 0)
                    }
                    SubFlow::Proactive => {
                        // One proactive packet per credit, echoing it; skipped credits were wasted.
                        loop {
                            match self.credits.pop_front() {
                                Some(c) if c == d.credit_seq => break,
                                Some(_) => {}
                                None => panic!(
                                    "proactive data echoes credit {} that was not received",
                                    d.credit_seq
                                ),
                            }
                        }
                    }
                    SubFlow::Reactive => assert_eq!(d.credit_seq, 0),
                }
                self.sent.push(d.clone());
            }
            Packet::Emulation(e) => {
                let fp = self
                    .fp
                    .as_mut()
                    .unwrap_or_else(|| panic!("{:?} sender emitted {p:?}", self.transport));
                assert!(!self.was_complete, "a complete sender emulates");
                assert_eq!(e.emu_seq, fp.next_emu_seq, "emu_seq numbering");
                assert_eq!(
                    e.timestamp, self.now as u32,
                    "T is the send time (ns mod 2^32)"
                );
                let max_hold = fp.cfg.t_wait / 2 / (10 * MICROS);
                assert!(
                    if fp.cfg.delayed_feedback {
                        u64::from(e.hold) <= max_hold
                    } else {
                        e.hold == 0
                    },
                    "hold {} (× 10 µs) beyond (T_wait − 2·RTT)/2",
                    e.hold
                );
                // Paced at cur_rate ≤ max_emulation_rate from the flow's start.
                assert!(
                    fp.emulations <= self.now.saturating_sub(fp.created) / fp.min_gap,
                    "emulation faster than max_emulation_rate: {} packets in {} ns",
                    fp.emulations + 1,
                    self.now - fp.created
                );
                // Over-provisioned (Not-ECT) iff the sender counts it so, only when the
                // demand is known (after finish) and the mechanism is on.
                let over = self.s.stats().emulation.over_provisioned_sent;
                let not_ect = t.ecn == Ecn::NotEct;
                assert_eq!(
                    over,
                    fp.over_provisioned + u64::from(not_ect),
                    "over-provisioned emulation packets are exactly the Not-ECT ones"
                );
                assert!(
                    !not_ect || (fp.cfg.over_provisioning && self.finished),
                    "over-provisioned emulation before the demand is known, or with it off"
                );
                fp.over_provisioned = over;
                fp.emulations += 1;
                fp.next_emu_seq = fp.next_emu_seq.wrapping_add(1);
                let sent = EmulationSent {
                    emu_seq: e.emu_seq,
                    timestamp: e.timestamp,
                    sent: self.now,
                    hold: e.hold,
                };
                fp.uncredited.insert(e.emu_seq, sent);
                self.emulations.push(sent);
            }
            Packet::Hello(h) => assert_eq!(h.transport, self.transport),
            Packet::CreditRequest(_) | Packet::CreditStop { .. } => {
                assert!(uses_credits(self.transport), "a DCTCP sender sent {p:?}")
            }
            _ => unreachable!("checked is_sender_to_receiver"),
        }
    }

    /// The agent's timer step: jump to the deadline (if any), `handle_timeout`, drain. After
    /// that the next deadline must lie in the future, or the agent would spin.
    pub fn timeout(&mut self, out: &mut Vec<Packet>) {
        let Some(t) = self.s.poll_timeout() else {
            return;
        };
        let before = self.now;
        self.now = jump(self.now, t);
        if let Some(tr) = &mut self.trace {
            tr.push((before, Event::Timeout { after: self.now }));
        }
        self.s.handle_timeout(self.now);
        self.check_no_spin(out);
    }

    /// `handle_timeout` at `now` whether or not anything is due (must be harmless).
    pub fn spurious_timeout(&mut self) {
        self.s.handle_timeout(self.now);
    }

    /// Drain, then the deadline must be in the future.
    fn check_no_spin(&mut self, out: &mut Vec<Packet>) {
        if self.poll_into(DRAIN_MAX, out) < DRAIN_MAX {
            if let Some(t) = self.s.poll_timeout() {
                assert!(
                    t > self.now,
                    "sender deadline {t} not after now {} once timers ran and output drained",
                    self.now
                );
            }
        }
    }

    /// Invariants after every operation.
    pub fn check(&mut self) {
        let s = &self.s;
        let acked = s.acked_bytes();
        assert!(
            acked <= self.max_end_sent,
            "sender counts {acked} bytes ACKed but sent only {}",
            self.max_end_sent
        );
        assert!(acked >= self.last_acked, "ACKed bytes went backwards");
        assert_eq!(acked, s.stats().bytes_acked, "stats.bytes_acked");
        assert_eq!(s.unacked_bytes(), self.written - acked, "unacked_bytes");
        assert_eq!(
            s.pending_bytes(),
            self.written - self.sent_distinct,
            "pending = written − transmitted"
        );
        for sub in SUBFLOWS {
            let i = sf(sub);
            let cum = s.subflow_cum_ack(sub);
            assert!(
                cum >= self.last_cum[i],
                "{sub:?} cumulative ACK moved backwards: {} → {cum}",
                self.last_cum[i]
            );
            assert!(
                cum <= self.next_seq[i],
                "{sub:?} cum_ack beyond what was sent"
            );
            assert_eq!(
                s.subflow_next_seq(sub),
                self.next_seq[i],
                "{sub:?} next_seq"
            );
            self.last_cum[i] = cum;
        }
        if s.is_complete() {
            assert!(
                self.finished && acked == self.written && self.max_end_sent == self.written,
                "complete before everything was written, sent and ACKed"
            );
        }
        assert!(!self.was_complete || s.is_complete(), "completion is final");
        assert!(!self.was_failed || s.error().is_some(), "failure is final");
        self.last_acked = acked;
        self.was_complete = s.is_complete();
        self.was_failed = s.error().is_some();
    }
}

// ---------------------------------------------------------------------------------------
// Receiver
// ---------------------------------------------------------------------------------------

#[derive(Clone, Debug, PartialEq, Eq)]
enum Expect {
    Ack {
        subflow: SubFlow,
        ack_seq: u32,
        tsecr: u32,
        ece: bool,
    },
    HelloAck {
        transport: TransportKind,
        status: HelloStatus,
    },
    /// FlashPass: the grants of the emulation packets accepted, in arrival order.
    EmulationCredit(Vec<EmulationGrant>),
}

pub struct ReceiverSut {
    pub r: Receiver,
    pub transport: TransportKind,
    pub now: Nanos,
    pub max_reorder: u64,
    max_credit_rate: f64,
    /// Bytes the application read.
    pub delivered: u64,
    /// ACKs and HELLO_ACKs owed, in order.
    expected: VecDeque<Expect>,
    /// Sub-flow sequences of accepted data.
    received: [BTreeSet<u32>; 2],
    /// PPT: opportunistic packets accepted since the last low-priority ACK, any with CE.
    lcp_pending: u32,
    lcp_ce: bool,
    /// Highest cum_ack / flow_ack seen in an emitted ACK.
    ack_cum: [u32; 2],
    /// Sub-flow cumulative ACKs at the last check.
    last_cum: [u32; 2],
    ack_flow: u64,
    /// Union of accepted payload ranges, merged: start → end.
    have: BTreeMap<u64, u64>,
    fin_at: Option<u64>,
    /// Model of the credit request / stop state machine.
    credits_on: bool,
    next_credit_seq: u32,
    /// Credits emitted at the same instant (the pacer bounds bursts to a batch + 1).
    burst: (Nanos, u32),
    max_burst: u32,
    /// Credit windows the receiver stopped after staying full (`credit_windows_expired`).
    windows_expired: u64,
    /// FlashPass: grants held (delayed feedback) and when the first of them is due.
    held: Vec<EmulationGrant>,
    held_due: Option<Nanos>,
    /// Emulation packets accepted (the receiver target's emu_seq reference).
    pub emulations: u32,
    pub cost: usize,
    pub trace: Option<Vec<(Nanos, Event)>>,
}

impl ReceiverSut {
    pub fn new(
        transport: TransportKind,
        max_reorder: u64,
        seed: u64,
        rate_scaled: bool,
        start: Nanos,
    ) -> Self {
        let cfg = receiver_config(max_reorder, seed, rate_scaled);
        let r = Receiver::new(FLOW, transport, &cfg).expect("valid receiver config");
        ReceiverSut {
            r,
            transport,
            now: start,
            max_reorder,
            max_credit_rate: cfg.credit.max_rate * (1.0 + cfg.credit.target_loss),
            delivered: 0,
            expected: VecDeque::new(),
            received: [BTreeSet::new(), BTreeSet::new()],
            lcp_pending: 0,
            lcp_ce: false,
            ack_cum: [0; 2],
            last_cum: [0; 2],
            ack_flow: 0,
            have: BTreeMap::new(),
            fin_at: None,
            credits_on: false,
            next_credit_seq: 0,
            burst: (Nanos::MAX, 0),
            max_burst: cfg.credit.batch + 1,
            windows_expired: 0,
            held: Vec::new(),
            held_due: None,
            emulations: 0,
            cost: 0,
            trace: None,
        }
    }

    fn record(&mut self, e: Event) {
        if let Some(t) = &mut self.trace {
            t.push((self.now, e));
        }
    }

    pub fn advance(&mut self, dt: u64) {
        self.now = advanced(self.now, dt);
    }

    /// In-order prefix of everything accepted.
    /// The credit_seq of the next credit.
    pub fn next_credit_seq(&self) -> u32 {
        self.next_credit_seq
    }

    fn have_prefix(&self) -> u64 {
        match self.have.first_key_value() {
            Some((&0, &end)) => end,
            _ => 0,
        }
    }

    fn add_range(&mut self, start: u64, end: u64) {
        if start >= end {
            return;
        }
        let (mut s, mut e) = (start, end);
        // Merge with every range that overlaps or touches [s, e).
        while let Some((&ks, &ke)) = self.have.range(..=e).next_back() {
            if ke < s {
                break;
            }
            self.have.remove(&ks);
            s = s.min(ks);
            e = e.max(ke);
        }
        self.have.insert(s, e);
    }

    /// Hand `p` (through the codec) to the receiver. None: the decoder dropped it.
    pub fn deliver(&mut self, p: &Packet, ce: bool) -> Option<bool> {
        self.record(Event::Deliver(p.clone(), ce));
        self.cost += PER_PACKET;
        let p = through_wire(p)?;
        if let Packet::Data(d) = &p {
            self.cost += PER_BYTE * d.payload.len();
        }
        let before = (
            self.r.flow_ack(),
            self.r.out_of_order_bytes(),
            self.r.is_complete(),
        );
        let credit = uses_credits(self.transport);
        let credits_were_on = self.credits_on;
        let r = self.r.handle_packet(self.now, &p, ce);
        // RESET goes either way (protocol.md §11, Abort).
        let must_reject = p.flow_id() != FLOW
            || !(p.is_sender_to_receiver() || matches!(p, Packet::Reset(_)))
            || match &p {
                Packet::CreditRequest(_) | Packet::CreditStop { .. } => !credit,
                Packet::Emulation(_) => self.transport != TransportKind::FlashPass,
                Packet::Data(d) => !subflow_allowed(self.transport, d.subflow),
                _ => false,
            };
        if must_reject {
            assert!(r.is_err(), "receiver accepted {p:?}");
        }
        if let (Packet::Data(d), false) = (&p, must_reject) {
            // Data within every limit must be taken (a refused packet is never ACKed).
            let (next, held) = (before.0, before.1);
            let len = d.payload.len() as u64;
            let end = d.flow_seq + len;
            let fits = !d.fin
                && end <= self.fin_at.unwrap_or(u64::MAX)
                && end <= next.saturating_add(self.max_reorder)
                && (d.flow_seq <= next || held + len <= self.max_reorder);
            assert!(!fits || r.is_ok(), "receiver refused {d:?}: {r:?}");
        }
        let Ok(()) = r else {
            let after = (
                self.r.flow_ack(),
                self.r.out_of_order_bytes(),
                self.r.is_complete(),
            );
            assert_eq!(before, after, "a rejected packet changed the reassembly");
            return Some(false);
        };
        match &p {
            Packet::Data(d) => {
                let end = d.flow_seq + d.payload.len() as u64;
                let mut ece = ce;
                let mut acked = true;
                if self.transport == TransportKind::Ppt && d.subflow == SubFlow::Proactive {
                    // One low-priority ACK per two opportunistic packets (ECE if either
                    // carried CE), or at once for the packet that completes the flow.
                    self.lcp_pending += 1;
                    self.lcp_ce |= ce;
                    acked = self.lcp_pending >= 2 || self.r.is_complete();
                    if acked {
                        ece = std::mem::take(&mut self.lcp_ce);
                        self.lcp_pending = 0;
                    }
                }
                if acked {
                    self.expected.push_back(Expect::Ack {
                        subflow: d.subflow,
                        ack_seq: d.subflow_seq,
                        tsecr: d.tsval,
                        ece,
                    });
                }
                self.received[sf(d.subflow)].insert(d.subflow_seq);
                self.add_range(d.flow_seq, end);
                if d.fin {
                    assert!(
                        self.fin_at.is_none_or(|f| f == end),
                        "receiver accepted a second, different FIN"
                    );
                    self.fin_at = Some(end);
                }
            }
            Packet::Hello(h) => {
                let status = if h.transport == self.transport {
                    HelloStatus::Accepted
                } else {
                    HelloStatus::UnsupportedTransport
                };
                self.expected.push_back(Expect::HelloAck {
                    transport: h.transport,
                    status,
                });
                // A HELLO (e.g. a duplicate) does not start credits for a complete flow, nor
                // one that says IDLE (the sender has no data yet: docs/protocol.md §11).
                self.credits_on |=
                    credit && status == HelloStatus::Accepted && !self.r.is_complete() && !h.idle;
            }
            // A CREDIT_REQUEST does, even for a complete flow (the sender missed the final
            // ACKs); the next data packet stops them again.
            Packet::CreditRequest(_) => self.credits_on = true,
            Packet::CreditStop { .. } | Packet::Reset(_) => self.credits_on = false,
            // FlashPass §III-B: every emulation packet that got through is granted, at once
            // (hold 0) or within its hold together with later ones, at most 32 a packet.
            Packet::Emulation(e) => {
                self.emulations = self.emulations.wrapping_add(1);
                self.held.push(EmulationGrant {
                    emu_seq: e.emu_seq,
                    timestamp: e.timestamp,
                });
                let due = self.now + u64::from(e.hold) * 10 * MICROS;
                self.held_due = Some(self.held_due.map_or(due, |d| d.min(due)));
                if e.hold == 0 || self.held.len() >= MAX_EMULATION_GRANTS {
                    self.release_grants();
                }
            }
            _ => unreachable!("rejected above"),
        }
        if matches!(p, Packet::Data(_)) && self.r.is_complete() {
            self.credits_on = false;
        }
        if !credits_were_on && self.credits_on {
            // A (re)started pacer's first credit is due at once.
            self.burst = (Nanos::MAX, 0);
        }
        Some(true)
    }

    /// The application's poll: up to `max` packets at `now` (recorded for seeds).
    pub fn poll(&mut self, max: usize, out: &mut Vec<Packet>) -> usize {
        self.record(Event::Poll(max));
        self.poll_into(max, out)
    }

    /// The held grants leave in one EMULATION_CREDIT, after everything owed so far.
    fn release_grants(&mut self) {
        if !self.held.is_empty() {
            self.expected
                .push_back(Expect::EmulationCredit(std::mem::take(&mut self.held)));
        }
        self.held_due = None;
    }

    fn release_due_grants(&mut self) {
        if self.held_due.is_some_and(|d| self.now >= d) {
            self.release_grants();
        }
    }

    fn poll_into(&mut self, max: usize, out: &mut Vec<Packet>) -> usize {
        let mut n = 0;
        while n < max {
            self.release_due_grants();
            let Some(t) = self.r.poll_transmit(self.now) else {
                break;
            };
            self.cost += PER_PACKET;
            self.check_transmit(&t);
            out.push(t.packet);
            n += 1;
        }
        n
    }

    fn check_transmit(&mut self, t: &Transmit) {
        check_emitted(t, self.transport);
        match &t.packet {
            Packet::Ack(a) => {
                let want = self.expected.pop_front();
                assert_eq!(
                    want,
                    Some(Expect::Ack {
                        subflow: a.subflow,
                        ack_seq: a.ack_seq,
                        tsecr: a.tsecr,
                        ece: a.ece
                    }),
                    "one ACK per accepted data packet, in order, echoing it"
                );
                let i = sf(a.subflow);
                assert!(
                    a.cum_ack >= self.ack_cum[i],
                    "{:?} cum_ack moved backwards: {} → {}",
                    a.subflow,
                    self.ack_cum[i],
                    a.cum_ack
                );
                assert!(a.flow_ack >= self.ack_flow, "flow_ack moved backwards");
                assert!(a.flow_ack <= self.r.flow_ack());
                // Everything the ACK covers was received.
                let got = &self.received[i];
                let covered = |s: u32, e: u32| {
                    let n = (e - s) as usize;
                    n <= got.len() && got.range(s..e).count() == n
                };
                assert!(
                    covered(self.ack_cum[i], a.cum_ack),
                    "cum_ack {} covers packets never received",
                    a.cum_ack
                );
                for &(s, e) in a.sack.iter() {
                    assert!(
                        covered(s, e),
                        "SACK block {s}..{e} covers packets never received"
                    );
                }
                self.ack_cum[i] = a.cum_ack;
                self.ack_flow = a.flow_ack;
            }
            Packet::HelloAck(h) => {
                let want = self.expected.pop_front();
                assert_eq!(
                    want,
                    Some(Expect::HelloAck {
                        transport: h.transport,
                        status: h.status
                    }),
                    "one HELLO_ACK per HELLO, in order"
                );
            }
            Packet::EmulationCredit(c) => {
                let want = self.expected.pop_front();
                assert_eq!(
                    want.as_ref(),
                    Some(&Expect::EmulationCredit(c.grants.clone())),
                    "one grant per emulation packet, in arrival order, batched as the holds allow"
                );
            }
            Packet::Credit(c) => {
                assert!(self.expected.is_empty(), "credits go after owed ACKs");
                assert!(self.credits_on, "credit sent while credits are stopped");
                assert_eq!(c.credit_seq, self.next_credit_seq, "credit_seq numbering");
                assert!((CREDIT_PADDING_MIN..=CREDIT_PADDING_MAX).contains(&c.padding));
                self.next_credit_seq = self.next_credit_seq.wrapping_add(1);
                if self.burst.0 == self.now {
                    self.burst.1 += 1;
                } else {
                    self.burst = (self.now, 1);
                }
                assert!(
                    self.burst.1 <= self.max_burst,
                    "pacer burst: {} credits at the same instant (batch {})",
                    self.burst.1,
                    self.max_burst - 1
                );
            }
            p => panic!("receiver emitted {p:?}"),
        }
    }

    pub fn read(&mut self, max: usize) {
        self.record(Event::Read(max));
        for _ in 0..max {
            let Some(b) = self.r.read() else { break };
            assert!(!b.is_empty(), "read returned an empty chunk");
            assert!(
                pattern::matches(self.delivered, &b),
                "delivered bytes at {} are not the flow's bytes",
                self.delivered
            );
            self.delivered += b.len() as u64;
        }
        assert_eq!(self.r.delivered_bytes(), self.delivered);
    }

    /// Timer step (see [`SenderSut::timeout`]).
    pub fn timeout(&mut self, out: &mut Vec<Packet>) {
        let Some(t) = self.r.poll_timeout() else {
            return;
        };
        let before = self.now;
        self.now = jump(self.now, t);
        if let Some(tr) = &mut self.trace {
            tr.push((before, Event::Timeout { after: self.now }));
        }
        self.release_due_grants();
        self.r.handle_timeout(self.now);
        self.window_expiry();
        self.check_no_spin(out);
    }

    pub fn spurious_timeout(&mut self) {
        self.release_due_grants();
        self.r.handle_timeout(self.now);
        self.window_expiry();
    }

    /// A credit window that stayed full stops the credits (as a CREDIT_STOP would): only
    /// while they are on.
    fn window_expiry(&mut self) {
        let expired = self.r.stats().credit_windows_expired;
        if expired > self.windows_expired {
            assert!(
                self.credits_on,
                "a credit window expired while credits were off"
            );
            assert_eq!(
                expired,
                self.windows_expired + 1,
                "one expiry per timer step"
            );
            self.windows_expired = expired;
            self.credits_on = false;
        }
    }

    fn check_no_spin(&mut self, out: &mut Vec<Packet>) {
        if self.poll_into(DRAIN_MAX, out) < DRAIN_MAX {
            if let Some(t) = self.r.poll_timeout() {
                assert!(
                    t > self.now,
                    "receiver deadline {t} not after now {} once timers ran and output drained",
                    self.now
                );
            }
        }
    }

    pub fn check(&mut self) {
        let r = &self.r;
        assert_eq!(
            r.flow_ack(),
            self.have_prefix(),
            "flow_ack is the in-order prefix of the accepted data"
        );
        assert!(
            self.delivered + r.ready_bytes() == r.flow_ack(),
            "read + ready = flow_ack"
        );
        assert!(
            r.out_of_order_bytes() <= self.max_reorder,
            "reassembly holds {} B out of order, limit {}",
            r.out_of_order_bytes(),
            self.max_reorder
        );
        assert_eq!(
            r.is_complete(),
            self.fin_at == Some(r.flow_ack()),
            "is_complete"
        );
        assert_eq!(
            r.is_sending_credits(),
            self.credits_on,
            "credit state machine"
        );
        for sub in SUBFLOWS {
            let i = sf(sub);
            let cum = r.subflow_cum_ack(sub);
            assert!(
                cum >= self.last_cum[i] && cum >= self.ack_cum[i],
                "{sub:?} cumulative ACK moved backwards"
            );
            self.last_cum[i] = cum;
        }
        // A held grant is never held past its hold: the deadline covers it.
        if let Some(due) = self.held_due {
            assert!(
                r.poll_timeout().is_some_and(|t| t <= due),
                "held grants due at {due} but the receiver's deadline is {:?}",
                r.poll_timeout()
            );
        }
        let rate = r.credit_rate();
        assert!(
            rate.is_finite() && rate > 0.0 && rate <= self.max_credit_rate * (1.0 + 1e-9),
            "credit rate {rate}"
        );
    }
}
