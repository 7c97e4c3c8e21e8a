//! The receiver under test ([`ReceiverSut`]) and its invariants.

use super::*;


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
                // A header-only reactive segment is a PASE probe (protocol.md §6.2): a
                // receiver of another transport, or a probe without PROBE_SEQ, refuses it.
                Packet::Data(d) => {
                    !subflow_allowed(self.transport, d.subflow)
                        || (d.is_probe()
                            && (self.transport != TransportKind::Pase
                                || d.subflow_seq != flexpass_wire::PROBE_SEQ))
                }
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
