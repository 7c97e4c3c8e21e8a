//! Per-flow receiver: reassembly, per-sub-flow ACKs with SACK and ECN echo, and — for
//! credit-based transports — the credit generator (request/stop state machine, Algorithm 1
//! feedback control, paced and jittered credits). PPT receivers acknowledge the LCP's
//! opportunistic packets (sub-flow 0) with one low-priority ACK per two packets
//! (SIGCOMM'24 §3.2, exponential window decrease).

use crate::ack_tracker::{AckTracker, Recorded};
use crate::config::{uses_credits, ReceiverConfig};
use crate::credit_feedback::CreditFeedback;
use crate::pacer::CreditPacer;
use crate::reassembly::{Inserted, Reassembly};
use crate::{Nanos, Transmit};
use bytes::Bytes;
use flexpass_wire::{
    Ack, Credit, Data, EmulationCredit, EmulationGrant, HelloAck, HelloStatus, Packet, SubFlow,
    TransportKind, MAX_EMULATION_GRANTS,
};
use rand::rngs::SmallRng;
use rand::SeedableRng;
use serde::Serialize;
use std::collections::VecDeque;

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ReceiverStats {
    /// Payload bytes accepted per sub-flow [proactive, reactive], duplicates included.
    pub bytes_proactive: u64,
    pub bytes_reactive: u64,
    pub packets_proactive: u64,
    pub packets_reactive: u64,
    /// Data packets whose payload the receiver already had.
    pub duplicates: u64,
    pub ce_marked: u64,
    pub credits_sent: u64,
    /// Credits stopped because the credit window stayed full (nothing answered its
    /// credits) for `WINDOW_PAUSE_UPDATES` feedback periods.
    pub credit_windows_expired: u64,
    pub acks_sent: u64,
    /// ACKs replaced, before they were sent, by a later ACK covering everything they said.
    pub acks_coalesced: u64,
    pub rejected_packets: u64,
    /// Packets acknowledged only through `ack_seq` because the sub-flow's hole list was full.
    pub untracked: u64,
    /// PPT: low-priority ACKs sent (one per two opportunistic packets).
    pub lp_acks_sent: u64,
    /// FlashPass: emulation packets received, and EMULATION_CREDITs sent (one carries up
    /// to 32 grants: delayed, batched feedback).
    pub emulation_received: u64,
    pub emulation_credits_sent: u64,
}

/// Why an incoming packet was dropped (counted; the flow keeps going).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Rejected {
    #[error("packet belongs to flow {got}, not {expected}")]
    WrongFlow { expected: u32, got: u32 },
    #[error("packet type not expected by a {0:?} receiver")]
    UnexpectedType(TransportKind),
    #[error("{0}")]
    BadSequence(String),
    /// Every data packet of a pfabric flow carries its priority (flag PRIO), and no other
    /// transport's does (docs/protocol.md §6.2).
    #[error("data with priority {got:?} on a {transport:?} flow: flag PRIO is pfabric's, on all of its data")]
    Priority {
        transport: TransportKind,
        got: Option<u32>,
    },
}

const CREDIT_RTT_SLOTS: usize = 1024;
/// A credit RTT sample counts at most this many configured update periods: a data packet
/// that echoes a credit from long ago (a credit window paused for minutes, or a forged
/// echo) would otherwise set an update period of minutes and freeze the credit feedback.
const MAX_CREDIT_RTT_PERIODS: f64 = 1024.0;
/// A credit window paused full for this many feedback periods stops the credits (as a
/// CREDIT_STOP would): its sender has nothing to send, or lost its CREDIT_STOP, or lost
/// the credits; in the last case its recovery timer asks again (CREDIT_REQUEST). So a
/// paused flow keeps no timer running.
const WINDOW_PAUSE_UPDATES: u32 = 4;
/// Feedback updates that measure nothing run at their period this many times in a row
/// (a flow's first round trips, a pause), then back off, up to 2^MAX_UNMEASURED_BACKOFF
/// periods apart.
const UNMEASURED_GRACE: u32 = 4;
const MAX_UNMEASURED_BACKOFF: u32 = 6;

pub struct Receiver {
    flow_id: u32,
    transport: TransportKind,
    reassembly: Reassembly,
    proactive: AckTracker,
    reactive: AckTracker,
    feedback: CreditFeedback,
    pacer: CreditPacer,
    /// `CreditConfig::pacing_scale`: credits leave at this share of the feedback's rate.
    pacing_scale: f64,
    /// Configured update period: the floor of the measured credit RTT.
    base_period: Nanos,
    /// Smoothed credit → data RTT: Algorithm 1 runs once per this period ("RTT by default").
    credit_rtt: Option<f64>,
    /// Send times of recent credits, indexed by credit_seq % len, for RTT samples. Empty
    /// while no credits flow (16 KiB a flow otherwise: idle and DCTCP flows do without).
    credit_sent_at: Vec<(u32, Nanos)>,
    next_update: Option<Nanos>,
    next_credit_seq: u32,
    rng: SmallRng,
    out: VecDeque<Packet>,
    delivered: u64,
    /// The sender aborted the flow (RESET).
    reset: bool,
    stats: ReceiverStats,
    /// PPT: opportunistic packets received since the last low-priority ACK, and whether one
    /// of them carried CE.
    lcp_unacked: u32,
    lcp_ce: bool,
    /// FlashPass: grants held for batching, and when the first of them must leave.
    grants: Vec<EmulationGrant>,
    grants_due: Option<Nanos>,
    /// ACK coalescing (`set_ack_hold`): on, and the ACK held back.
    hold_acks: bool,
    held_ack: Option<Ack>,
    /// `ReceiverConfig::credit_window_segment`, and the window of credits restarted by
    /// the last CREDIT_REQUEST or started by a HELLO of known size (None: not windowed).
    credit_window_segment: u64,
    window: Option<CreditWindow>,
    /// Feedback periods the window has stayed paused full.
    paused_updates: u32,
    /// Feedback periods in a row that measured nothing (see `handle_timeout`).
    unmeasured: u32,
    /// `ReceiverConfig::feedback_backoff`.
    feedback_backoff: bool,
}

/// Credits restarted by a CREDIT_REQUEST, or started by the HELLO of a flow of known size:
/// at most `limit` sent and not yet answered by a data packet. Each data packet answers one
/// and raises the limit by one (the window doubles per round trip while every credit is
/// used, as slow start), so a bulk sender reaches the pacer's rate within a few round trips
/// and a small message stops the credits after a few. While full the pacer is stopped
/// (paused: a window with no pacer running, since stopping the credits drops the window);
/// a data packet resumes it, and `WINDOW_PAUSE_UPDATES` feedback periods paused stop the
/// credits.
#[derive(Clone, Copy, Debug)]
struct CreditWindow {
    limit: u64,
    outstanding: u64,
}

impl Receiver {
    pub fn new(
        flow_id: u32,
        transport: TransportKind,
        cfg: &ReceiverConfig,
    ) -> Result<Self, String> {
        cfg.validate()?;
        Ok(Receiver {
            flow_id,
            transport,
            reassembly: Reassembly::new(cfg.max_reorder_bytes),
            proactive: AckTracker::new(),
            reactive: AckTracker::new(),
            feedback: CreditFeedback::new(&cfg.credit),
            pacer: CreditPacer::new(
                cfg.credit.jitter,
                cfg.credit.randomize_size,
                cfg.credit.batch,
            ),
            pacing_scale: cfg.credit.pacing_scale,
            base_period: cfg.credit.update_period,
            credit_rtt: None,
            credit_sent_at: Vec::new(),
            next_update: None,
            next_credit_seq: 0,
            rng: SmallRng::seed_from_u64(
                cfg.seed ^ u64::from(flow_id).wrapping_mul(0x9E37_79B9_7F4A_7C15),
            ),
            out: VecDeque::new(),
            delivered: 0,
            reset: false,
            stats: ReceiverStats::default(),
            lcp_unacked: 0,
            lcp_ce: false,
            grants: Vec::new(),
            grants_due: None,
            hold_acks: false,
            held_ack: None,
            credit_window_segment: cfg.credit_window_segment,
            window: None,
            paused_updates: 0,
            unmeasured: 0,
            feedback_backoff: cfg.feedback_backoff,
        })
    }

    pub fn flow_id(&self) -> u32 {
        self.flow_id
    }
    pub fn transport(&self) -> TransportKind {
        self.transport
    }
    pub fn stats(&self) -> &ReceiverStats {
        &self.stats
    }
    /// Current credit rate of Algorithm 1 (credits/s).
    pub fn credit_rate(&self) -> f64 {
        self.feedback.cur_rate()
    }
    /// Algorithm 1 state: (w, credit loss measured at the last update).
    pub fn feedback_state(&self) -> (f64, f64) {
        (self.feedback.w(), self.feedback.last_loss())
    }
    /// Current update period of the credit feedback control: the smoothed credit RTT,
    /// never below the configured one.
    pub fn update_period(&self) -> Nanos {
        self.credit_rtt
            .map_or(self.base_period, |r| (r as Nanos).max(self.base_period))
    }
    /// Credits are on (the CREDIT_REQUEST / CREDIT_STOP state machine), paced, or paused
    /// by a full credit window until data arrives.
    pub fn is_sending_credits(&self) -> bool {
        self.pacer.is_running() || self.window.is_some()
    }

    /// A credit deadline is armed (credits on and not paused by a full window).
    pub fn is_pacing_credits(&self) -> bool {
        self.pacer.is_running()
    }
    /// In-order bytes handed to the application so far.
    pub fn delivered_bytes(&self) -> u64 {
        self.delivered
    }
    /// The `flow_ack` the next ACK carries: every byte below it has arrived in order
    /// (delivered or ready to read). Never decreases (read-only).
    pub fn flow_ack(&self) -> u64 {
        self.reassembly.next()
    }
    /// The `cum_ack` the next ACK on `subflow` carries: every sub-flow sequence below it
    /// was received. Never decreases (read-only).
    pub fn subflow_cum_ack(&self, subflow: SubFlow) -> u32 {
        match subflow {
            SubFlow::Proactive => self.proactive.cum_ack(),
            SubFlow::Reactive => self.reactive.cum_ack(),
        }
    }
    /// Payload bytes held out of order, waiting for a hole to fill (read-only).
    pub fn out_of_order_bytes(&self) -> u64 {
        self.reassembly.out_of_order_bytes()
    }
    /// In-order bytes not yet read by the application (read-only).
    pub fn ready_bytes(&self) -> u64 {
        self.reassembly.ready_bytes()
    }
    /// The whole flow (up to its FIN) has arrived in order.
    pub fn is_complete(&self) -> bool {
        self.reassembly.is_complete()
    }
    /// The sender aborted the flow with RESET: no more bytes will come.
    pub fn was_reset(&self) -> bool {
        self.reset
    }
    /// All bytes read by the application, FIN included.
    pub fn is_finished(&self) -> bool {
        self.is_complete() && self.reassembly.ready_bytes() == 0
    }

    /// Next in-order chunk of the flow's bytes.
    pub fn read(&mut self) -> Option<Bytes> {
        let b = self.reassembly.read()?;
        self.delivered += b.len() as u64;
        Some(b)
    }

    /// Start pacing credits. A complete flow gets none (`even_if_complete`: see
    /// CREDIT_REQUEST in `handle_inner`).
    fn start_credits(&mut self, now: Nanos, even_if_complete: bool) {
        if !uses_credits(self.transport)
            || (self.reassembly.is_complete() && !even_if_complete)
            || self.pacer.is_running()
        {
            return;
        }
        self.feedback.resync(self.next_credit_seq);
        self.pacer.start(now);
        self.unmeasured = 0;
        self.next_update = Some(now + self.update_period());
    }

    fn stop_credits(&mut self) {
        self.window = None;
        self.paused_updates = 0;
        self.pacer.stop();
        self.next_update = None;
        // Credits still in flight lose their RTT sample only.
        self.credit_sent_at = Vec::new();
    }

    /// `ce`: the packet's IP header carried ECN CE.
    pub fn handle_packet(&mut self, now: Nanos, packet: &Packet, ce: bool) -> Result<(), Rejected> {
        let r = self.handle_inner(now, packet, ce);
        if r.is_err() {
            self.stats.rejected_packets += 1;
        }
        r
    }

    fn handle_inner(&mut self, now: Nanos, packet: &Packet, ce: bool) -> Result<(), Rejected> {
        if packet.flow_id() != self.flow_id {
            return Err(Rejected::WrongFlow {
                expected: self.flow_id,
                got: packet.flow_id(),
            });
        }
        let unexpected = Rejected::UnexpectedType(self.transport);
        match packet {
            Packet::Hello(h) => {
                let status = if h.transport == self.transport {
                    HelloStatus::Accepted
                } else {
                    HelloStatus::UnsupportedTransport
                };
                self.out.push_back(Packet::HelloAck(HelloAck {
                    flow_id: self.flow_id,
                    transport: h.transport,
                    status,
                }));
                // IDLE: the sender has no data yet; its CREDIT_REQUEST starts the credits.
                if status == HelloStatus::Accepted && !h.idle {
                    let was_on = self.is_sending_credits();
                    self.start_credits(now, false);
                    // Credits this HELLO started, for a flow of known size, get the window a
                    // CREDIT_REQUEST for that many bytes would (a small flow costs a few
                    // credits, not an RTT of them).
                    let seg = self.credit_window_segment;
                    if seg > 0 && h.flow_size > 0 && !was_on && self.pacer.is_running() {
                        self.window = Some(CreditWindow {
                            limit: h.flow_size.div_ceil(seg) + 1,
                            outstanding: 0,
                        });
                    }
                }
                Ok(())
            }
            Packet::CreditRequest(r) if uses_credits(self.transport) => {
                // Also when the flow is complete: the sender then missed the ACKs of its tail
                // (its recovery timer asks for credits), and only credits let it send a packet
                // again whose ACK tells it that everything arrived. That data packet stops
                // the credits again (`on_data`).
                let seg = self.credit_window_segment;
                if seg > 0 && r.pending_bytes > 0 {
                    let want = r.pending_bytes.div_ceil(seg) + 1;
                    match &mut self.window {
                        Some(w) => w.limit = w.limit.max(w.outstanding + want),
                        None if !self.pacer.is_running() => {
                            self.window = Some(CreditWindow {
                                limit: want,
                                outstanding: 0,
                            })
                        }
                        None => {}
                    }
                }
                self.start_credits(now, true);
                Ok(())
            }
            Packet::CreditStop { .. } if uses_credits(self.transport) => {
                self.stop_credits();
                Ok(())
            }
            Packet::Data(d) => self.on_data(now, d, ce),
            Packet::Emulation(e) if self.transport == TransportKind::FlashPass => {
                // §III-B: the emulation packet got through; its grant goes back at once, or
                // within `hold` together with later ones (delayed credit feedback).
                self.stats.emulation_received += 1;
                self.grants.push(EmulationGrant {
                    emu_seq: e.emu_seq,
                    timestamp: e.timestamp,
                });
                let due = now + u64::from(e.hold) * 10 * crate::MICROS;
                self.grants_due = Some(self.grants_due.map_or(due, |d| d.min(due)));
                if e.hold == 0 || self.grants.len() >= MAX_EMULATION_GRANTS {
                    self.flush_grants();
                }
                Ok(())
            }
            Packet::Reset(_) => {
                self.stop_credits();
                self.reset = true;
                Ok(())
            }
            _ => Err(unexpected),
        }
    }

    fn on_data(&mut self, now: Nanos, d: &Data, ce: bool) -> Result<(), Rejected> {
        let allowed = match (self.transport, d.subflow) {
            (TransportKind::FlexPass, _) => true,
            (TransportKind::ExpressPass, s) => s == SubFlow::Proactive,
            (TransportKind::Dctcp | TransportKind::PFabric | TransportKind::Pase, s) => {
                s == SubFlow::Reactive
            }
            (TransportKind::Ppt | TransportKind::FlashPass, _) => true,
        };
        if !allowed {
            return Err(Rejected::UnexpectedType(self.transport));
        }
        if d.priority.is_some() != (self.transport == TransportKind::PFabric) {
            return Err(Rejected::Priority {
                transport: self.transport,
                got: d.priority,
            });
        }
        if d.is_probe() {
            // PASE §3.3: a header-only probe from the lowest queue; pFabric §4.2: one of
            // probe mode. Nothing to deliver; the answer echoes it (ack_seq PROBE_SEQ) with
            // its CE mark, which tells a PASE sender whether the lowest queue has room.
            if !matches!(self.transport, TransportKind::Pase | TransportKind::PFabric)
                || d.subflow_seq != flexpass_wire::PROBE_SEQ
            {
                return Err(Rejected::UnexpectedType(self.transport));
            }
            self.stats.ce_marked += u64::from(ce);
            self.out.push_back(Packet::Ack(Ack {
                flow_id: self.flow_id,
                subflow: SubFlow::Reactive,
                ece: ce,
                cum_ack: self.reactive.cum_ack(),
                ack_seq: flexpass_wire::PROBE_SEQ,
                tsecr: d.tsval,
                flow_ack: self.reassembly.next(),
                sack: flexpass_wire::SackBlocks::new(),
            }));
            return Ok(());
        }
        // Reassembly limits decide acceptance: a rejected packet is neither buffered nor
        // acknowledged (the sender sends it again).
        let inserted = self
            .reassembly
            .insert(d.flow_seq, d.payload.clone(), d.fin)
            .map_err(|e| Rejected::BadSequence(e.to_string()))?;
        // A FlexPass reactive sub-flow never retransmits, so every reactive loss leaves a
        // permanent hole in that sequence space. The tracker keeps a bounded number of holes;
        // a packet it cannot represent is still acknowledged through `ack_seq` (the sender
        // matches ACKs per packet), only not in cum_ack/SACK.
        let tracker = match d.subflow {
            SubFlow::Proactive => &mut self.proactive,
            SubFlow::Reactive => &mut self.reactive,
        };
        let recorded = tracker.record(d.subflow_seq).unwrap_or_else(|_| {
            self.stats.untracked += 1;
            Recorded::New
        });
        let len = d.payload.len() as u64;
        match d.subflow {
            SubFlow::Proactive => {
                self.stats.packets_proactive += 1;
                self.stats.bytes_proactive += len;
                if let Some(w) = &mut self.window {
                    w.outstanding = w.outstanding.saturating_sub(1);
                    w.limit += 1;
                    if !self.pacer.is_running() && !self.reassembly.is_complete() {
                        self.pacer.start(now);
                    }
                }
                if recorded == Recorded::New && uses_credits(self.transport) {
                    let (seq, sent) = self
                        .credit_sent_at
                        .get(d.credit_seq as usize % CREDIT_RTT_SLOTS)
                        .copied()
                        .unwrap_or((u32::MAX, 0));
                    let sent_at = (seq == d.credit_seq).then_some(sent);
                    self.feedback.on_credit_echo(d.credit_seq, sent_at);
                    if self.unmeasured > 0 {
                        // Measuring again: updates at the normal period.
                        self.unmeasured = 0;
                        let period = self
                            .credit_rtt
                            .map_or(self.base_period, |r| (r as Nanos).max(self.base_period));
                        let soon = now + period;
                        self.next_update = self.next_update.map(|u| u.min(soon));
                    }
                    if seq == d.credit_seq && now >= sent {
                        let cap = MAX_CREDIT_RTT_PERIODS * self.base_period as f64;
                        let sample = ((now - sent) as f64).min(cap);
                        self.credit_rtt = Some(
                            self.credit_rtt
                                .map_or(sample, |r| 0.875 * r + 0.125 * sample),
                        );
                    }
                }
            }
            SubFlow::Reactive => {
                self.stats.packets_reactive += 1;
                self.stats.bytes_reactive += len;
            }
        }
        if inserted == Inserted::Duplicate {
            self.stats.duplicates += 1;
        }
        if ce {
            self.stats.ce_marked += 1;
        }
        let mut ece = ce;
        if self.transport == TransportKind::Ppt && d.subflow == SubFlow::Proactive {
            // §3.2: one low-priority ACK per two opportunistic packets (ECE if either carried
            // CE), so the sender, releasing one packet per ACK, halves the LCP each RTT. The
            // packet that completes the flow is acknowledged at once: nothing follows it.
            self.lcp_unacked += 1;
            self.lcp_ce |= ce;
            if self.lcp_unacked < 2 && !self.reassembly.is_complete() {
                return Ok(());
            }
            ece = std::mem::take(&mut self.lcp_ce);
            self.lcp_unacked = 0;
            self.stats.lp_acks_sent += 1;
        }
        let ack = Ack {
            flow_id: self.flow_id,
            subflow: d.subflow,
            ece,
            cum_ack: tracker.cum_ack(),
            ack_seq: d.subflow_seq,
            tsecr: d.tsval,
            flow_ack: self.reassembly.next(),
            sack: tracker.sack_blocks(d.subflow_seq),
        };
        // Credit-scheduled data is acknowledged for reliability only (nothing is clocked by
        // its ACKs): while the endpoint holds ACKs (`set_ack_hold`, one receive batch), the
        // held ACK is replaced by a later one that covers it whole, so a batch of data is
        // answered by one ACK (docs/protocol.md §11, "ACKs"). A CE mark is never folded away.
        if self.hold_acks && uses_credits(self.transport) && d.subflow == SubFlow::Proactive {
            match self.held_ack.take() {
                Some(prev) if !prev.ece && covers(&ack, &prev) => self.stats.acks_coalesced += 1,
                Some(prev) => self.out.push_back(Packet::Ack(prev)),
                None => {}
            }
            self.held_ack = Some(ack);
            if self.reassembly.is_complete() {
                self.stop_credits();
            }
            return Ok(());
        }
        self.out.push_back(Packet::Ack(ack));
        if self.reassembly.is_complete() {
            self.stop_credits();
        }
        Ok(())
    }

    fn flush_grants(&mut self) {
        if self.grants.is_empty() {
            return;
        }
        self.stats.credits_sent += self.grants.len() as u64;
        self.stats.emulation_credits_sent += 1;
        self.out.push_back(Packet::EmulationCredit(EmulationCredit {
            flow_id: self.flow_id,
            grants: std::mem::take(&mut self.grants),
        }));
        self.grants_due = None;
    }

    /// Hold back the ACKs of credit-scheduled data while `hold` (an endpoint reading a batch
    /// of datagrams): a later ACK that covers the held one replaces it. Turning it off
    /// queues the held ACK for `poll_transmit`.
    pub fn set_ack_hold(&mut self, hold: bool) {
        self.hold_acks = hold;
        if !hold {
            if let Some(a) = self.held_ack.take() {
                self.out.push_back(Packet::Ack(a));
            }
        }
    }

    pub fn ack_hold(&self) -> bool {
        self.hold_acks
    }

    pub fn poll_transmit(&mut self, now: Nanos) -> Option<Transmit> {
        if self.grants_due.is_some_and(|d| now >= d) {
            self.flush_grants();
        }
        if let Some(p) = self.out.pop_front() {
            if matches!(p, Packet::Ack(_)) {
                self.stats.acks_sent += 1;
            }
            return Some(Transmit::new(p, self.transport));
        }
        let rate = self.feedback.cur_rate() * self.pacing_scale;
        let padding = self.pacer.poll(now, rate, &mut self.rng)?;
        if let Some(w) = &mut self.window {
            w.outstanding += 1;
            if w.outstanding >= w.limit {
                // Full: no deadline until a data packet (or a CREDIT_REQUEST) opens it.
                self.pacer.stop();
            }
        }
        let credit = Credit {
            flow_id: self.flow_id,
            credit_seq: self.next_credit_seq,
            padding,
        };
        if self.credit_sent_at.is_empty() {
            self.credit_sent_at = vec![(u32::MAX, 0); CREDIT_RTT_SLOTS];
        }
        self.credit_sent_at[self.next_credit_seq as usize % CREDIT_RTT_SLOTS] =
            (self.next_credit_seq, now);
        self.next_credit_seq = self.next_credit_seq.wrapping_add(1);
        self.stats.credits_sent += 1;
        Some(Transmit::new(Packet::Credit(credit), self.transport))
    }

    /// The host dropped the credit `poll_transmit` just gave because it cannot keep up
    /// with the data it credits (`CreditFeedback::on_host_drop`).
    pub fn credit_dropped_by_host(&mut self) {
        self.feedback.on_host_drop();
    }

    pub fn poll_timeout(&self) -> Option<Nanos> {
        [self.pacer.next_at(), self.next_update, self.grants_due]
            .into_iter()
            .flatten()
            .min()
    }

    pub fn handle_timeout(&mut self, now: Nanos) {
        if self.grants_due.is_some_and(|d| now >= d) {
            self.flush_grants();
        }
        while let Some(t) = self.next_update {
            if now < t {
                break;
            }
            let period = self.update_period();
            let measured = self.feedback.has_samples();
            self.feedback.update(period);
            let paused = self.window.is_some() && !self.pacer.is_running();
            // A period in which no data echoed a credit measured nothing and changed
            // nothing: after UNMEASURED_GRACE of them in a row, each next one is twice as
            // long, up to 2^MAX_UNMEASURED_BACKOFF periods, until an echo comes. So a host
            // with many flows crediting senders whose data does not come back (not sent
            // yet, or lost at a host too busy to read it) does not spend its time on their
            // updates: 1 000 flows at a 100 µs period are 10 million updates a second.
            self.unmeasured = if measured || paused || !self.feedback_backoff {
                0
            } else {
                (self.unmeasured + 1).min(UNMEASURED_GRACE + MAX_UNMEASURED_BACKOFF)
            };
            let next = period << self.unmeasured.saturating_sub(UNMEASURED_GRACE);
            // Missed periods (a late caller) are not replayed: one update per call.
            self.next_update = Some(if now - t > period {
                now + next
            } else {
                t + next
            });
            self.paused_updates = if paused { self.paused_updates + 1 } else { 0 };
            if self.paused_updates >= WINDOW_PAUSE_UPDATES {
                self.stats.credit_windows_expired += 1;
                self.stop_credits();
            }
        }
    }
}

/// Whether ACK `new` tells the sender everything `old` does: `old`'s packet and its SACK
/// blocks are below `new`'s cumulative ACK or inside its SACK blocks (and `new` is no older).
fn covers(new: &Ack, old: &Ack) -> bool {
    let covered = |s: u32, e: u64| {
        let s = s.max(new.cum_ack);
        u64::from(s) >= e
            || new
                .sack
                .as_slice()
                .iter()
                .any(|&(ns, ne)| ns <= s && e <= u64::from(ne))
    };
    new.cum_ack >= old.cum_ack
        && new.flow_ack >= old.flow_ack
        && covered(old.ack_seq, u64::from(old.ack_seq) + 1)
        && old
            .sack
            .as_slice()
            .iter()
            .all(|&(s, e)| covered(s, u64::from(e)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use flexpass_wire::SackBlocks;

    fn ack(cum_ack: u32, ack_seq: u32, sack: &[(u32, u32)]) -> Ack {
        Ack {
            flow_id: 1,
            subflow: SubFlow::Proactive,
            ece: false,
            cum_ack,
            ack_seq,
            tsecr: 0,
            flow_ack: u64::from(cum_ack) * 1000,
            sack: SackBlocks::from_slice(sack).unwrap(),
        }
    }

    /// An ExpressPass receiver credits a sender whose data never comes back for 200 feedback
    /// periods: the receiver, the time reached and the feedback updates it made.
    fn credit_without_echoes(feedback_backoff: bool) -> (Receiver, Nanos, usize) {
        use crate::{CreditConfig, ReceiverConfig, MICROS};
        let period = 100 * MICROS;
        let mut cfg = ReceiverConfig::new(CreditConfig::for_link(10e9, 1.0, period));
        cfg.feedback_backoff = feedback_backoff;
        let mut r = Receiver::new(7, TransportKind::ExpressPass, &cfg).unwrap();
        let hello = Packet::Hello(flexpass_wire::Hello {
            flow_id: 7,
            transport: TransportKind::ExpressPass,
            flow_size: 0,
            conn: None,
            cookie: None,
            idle: false,
        });
        r.handle_packet(0, &hello, false).unwrap();
        let (mut now, mut updates) = (0, 0);
        while now < 200 * period {
            let Some(t) = r.poll_timeout() else { break };
            now = t;
            let before = r.next_update;
            r.handle_timeout(now);
            while r.poll_transmit(now).is_some() {}
            updates += usize::from(r.next_update != before);
        }
        (r, now, updates)
    }

    /// Without `feedback_backoff` (the model: the papers' receiver) an update every period,
    /// measured or not.
    #[test]
    fn feedback_updates_keep_their_period_without_backoff() {
        let (r, _, updates) = credit_without_echoes(false);
        assert!(updates >= 190, "{updates} feedback updates in 200 periods");
        assert_eq!(r.unmeasured, 0);
    }

    /// A receiver crediting a sender whose data does not come back: its feedback updates
    /// measure nothing and, after UNMEASURED_GRACE periods, back off to
    /// 2^MAX_UNMEASURED_BACKOFF periods apart; the first echo brings the next one back
    /// within a period.
    #[test]
    fn feedback_updates_back_off_while_they_measure_nothing() {
        let (mut r, now, updates) = credit_without_echoes(true);
        assert!(r.is_pacing_credits(), "credits go on");
        // One a period before: 200.
        assert!(updates < 20, "{updates} feedback updates in 200 periods");
        assert_eq!(r.unmeasured, UNMEASURED_GRACE + MAX_UNMEASURED_BACKOFF);
        let data = Packet::Data(flexpass_wire::Data {
            flow_id: 7,
            subflow: SubFlow::Proactive,
            flow_seq: 0,
            subflow_seq: 0,
            credit_seq: 0,
            tsval: 0,
            fin: false,
            retransmission: false,
            priority: None,
            payload: bytes::Bytes::from_static(b"x"),
        });
        r.handle_packet(now, &data, false).unwrap();
        assert_eq!(r.unmeasured, 0);
        assert!(r.next_update.unwrap() <= now + r.update_period());
    }

    #[test]
    fn an_ack_covers_another_only_if_it_says_everything_the_other_says() {
        assert!(covers(&ack(5, 4, &[]), &ack(4, 3, &[])));
        assert!(covers(&ack(3, 6, &[(6, 7), (4, 5)]), &ack(3, 4, &[(4, 5)])));
        // Older packet neither below cum_ack nor in a block.
        assert!(!covers(&ack(3, 6, &[(6, 7)]), &ack(3, 4, &[(4, 5)])));
        // A block of the older ACK the newer one dropped (at most 4 blocks).
        let old = ack(1, 9, &[(9, 10), (7, 8), (5, 6), (3, 4)]);
        let new = ack(1, 11, &[(11, 12), (9, 10), (7, 8), (5, 6)]);
        assert!(!covers(&new, &old));
        // A block below the new cum_ack and in one of its blocks, but for one packet.
        assert!(covers(&ack(5, 7, &[(6, 8)]), &ack(3, 4, &[(4, 5)])));
        assert!(!covers(&ack(5, 7, &[(6, 8)]), &ack(3, 4, &[(4, 7)])));
        // Never an older ACK over a newer one; no wrap at the top of the sequence space.
        assert!(!covers(&ack(4, 3, &[]), &ack(5, 4, &[])));
        assert!(!covers(&ack(0, u32::MAX - 1, &[]), &ack(0, u32::MAX, &[])));
    }
}
