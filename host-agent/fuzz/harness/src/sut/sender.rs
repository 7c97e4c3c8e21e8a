//! The sender under test ([`SenderSut`]) and its invariants.

use super::*;

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
