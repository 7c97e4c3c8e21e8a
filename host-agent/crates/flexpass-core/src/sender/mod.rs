//! Per-flow sender: FlexPass (proactive + reactive sub-flows over one send buffer),
//! ExpressPass (proactive only), DCTCP (reactive only, with its own retransmissions), PPT
//! (DCTCP as the high-priority loop plus a low-priority loop) and FlashPass (data in the
//! slots its emulation earns).
//!
//! `Sender` holds what every transport shares: the send buffer, the two sub-flow
//! scoreboards, the DCTCP window, the handshake, the control queue and the timer table
//! (`timers`). What one transport adds is its `TransportPart` (`transport`): the credit loop
//! of FlexPass and ExpressPass (`credits`), PPT's low-priority loop (`ppt`), FlashPass's
//! emulation (`flashpass`), PASE's arbitrations and probes (`pase`).

mod credits;
mod flashpass;
mod pase;
mod ppt;
mod stats;
mod timers;
mod transport;

pub use stats::{Rejected, SenderError, SenderStats};

use crate::config::SenderConfig;
use crate::dctcp::DctcpWindow;
use crate::lcp::Lcp;
use crate::pase::probing::Probing;
use crate::scoreboard::{AckEvents, Scoreboard};
use crate::send_buffer::{CreditChoice, Segment, SendBuffer};
use crate::{wire_timestamp, Nanos, Transmit, MICROS};
use bytes::Bytes;
use credits::CreditState;
use flexpass_wire::{
    Ack, Data, Hello, HelloConn, HelloStatus, Packet, SubFlow, TrafficClass, TransportKind,
    PROBE_SEQ,
};
use std::collections::VecDeque;
use std::ops::ControlFlow;
use timers::{Timer, TimerTable};
use transport::{ReactiveSource, TransportPart};

/// At most this many HELLO_ACK `retry` answers make the sender re-send its HELLO at once;
/// after that only the HELLO timer does (a receiver, or a forger, answering every HELLO with
/// a fresh cookie cannot make it ping-pong).
const MAX_COOKIE_RETRIES: u64 = 8;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Handshake {
    /// HELLO sent at `at`, `tries` retransmissions so far.
    Pending {
        at: Nanos,
        tries: u32,
    },
    Established,
    Failed(SenderError),
}

/// Tail-loss probe (RFC 8985 §7) of the DCTCP window: at most one probe per episode.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum TlpState {
    /// No probe in flight; the PTO is armed whenever packets are.
    #[default]
    Armed,
    /// The PTO fired: the next reactive transmission goes out beyond the window.
    Due,
    /// The probe went out as this reactive sequence; it ends with its ACK (RACK marks what
    /// was sent before it), the RTO, or an empty pipe.
    InFlight(u32),
    /// The PTO fired with nothing to send: no probe until the next ACK progress or the RTO.
    Spent,
}

pub struct Sender {
    flow_id: u32,
    cfg: SenderConfig,
    buf: SendBuffer,
    proactive: Scoreboard,
    reactive: Scoreboard,
    window: DctcpWindow,
    handshake: Handshake,
    control: VecDeque<Packet>,
    flow_size: u64,
    /// Connection extension carried by this flow's HELLOs (docs/protocol.md §6.6).
    conn: Option<HelloConn>,
    /// Cookie of the receiver's last HELLO_ACK `retry`, echoed by every HELLO from then on.
    cookie: Option<u64>,
    events: AckEvents,
    acked_scratch: Vec<(u64, Segment)>,
    stats: SenderStats,
    tlp: TlpState,
    timers: TimerTable,
    part: TransportPart,
    /// PASE with probing (§3.3, `crate::pase::probing`).
    probing: Option<Probing>,
}

impl Sender {
    /// Open a flow: HELLO (which, for credit-based transports, also requests credits) is the
    /// first packet out. `flow_size` is advisory (0 = unknown / stream).
    pub fn new(
        flow_id: u32,
        cfg: SenderConfig,
        flow_size: u64,
        now: Nanos,
    ) -> Result<Self, String> {
        cfg.validate()?;
        let mut control = VecDeque::new();
        control.push_back(Packet::Hello(Hello {
            flow_id,
            transport: cfg.transport,
            flow_size,
            conn: None,
            cookie: None,
            idle: false,
        }));
        let part = TransportPart::new(&cfg, now);
        let reactive_dupthresh = if part.is_one_window() {
            cfg.dctcp.dupthresh
        } else {
            cfg.subflow_dupthresh
        };
        // The PRIO field takes 4 bytes of the packet: the segments are that much shorter,
        // so a full packet still fits the MTU.
        let segment = if part.carries_priority() {
            cfg.mss - flexpass_wire::PRIORITY_LEN
        } else {
            cfg.mss
        };
        let window = match part {
            TransportPart::PFabric => {
                DctcpWindow::new(&crate::pfabric::window(&cfg.pfabric, &cfg.dctcp, segment))
            }
            TransportPart::Pase(a) if cfg.pase.reference_rate => {
                // §3.3: the first window is the local arbitration's rate × RTT.
                let w = crate::pase::window_for(&a, cfg.pase.base_rtt, segment);
                DctcpWindow::new(&crate::config::DctcpConfig {
                    init_cwnd: w,
                    ..cfg.dctcp.clone()
                })
            }
            TransportPart::FlexPass(_)
            | TransportPart::ExpressPass(_)
            | TransportPart::Dctcp
            | TransportPart::Ppt(_)
            | TransportPart::FlashPass(_)
            | TransportPart::Pase(_) => DctcpWindow::new(&cfg.dctcp),
        };
        Ok(Sender {
            flow_id,
            buf: SendBuffer::new(segment),
            proactive: Scoreboard::new(cfg.subflow_dupthresh),
            reactive: Scoreboard::new(reactive_dupthresh),
            window,
            handshake: Handshake::Pending { at: now, tries: 0 },
            control,
            flow_size,
            conn: None,
            cookie: None,
            events: AckEvents::default(),
            acked_scratch: Vec::new(),
            stats: SenderStats::default(),
            tlp: TlpState::Armed,
            timers: TimerTable::default(),
            part,
            probing: ((cfg.transport == TransportKind::Pase && cfg.pase.probing)
                || (cfg.transport == TransportKind::PFabric
                    && cfg.pfabric.probe_after_timeouts > 0))
                .then(Probing::default),
            cfg,
        })
    }

    pub fn flow_id(&self) -> u32 {
        self.flow_id
    }

    /// Make this flow one direction of a connection: its HELLO (and every retransmission of
    /// it) carries the connection extension. Call right after `new`, before any transmit.
    pub fn set_conn(&mut self, conn: HelloConn) {
        self.conn = Some(conn);
        for p in self.control.iter_mut() {
            if let Packet::Hello(h) = p {
                h.conn = Some(conn);
            }
        }
    }

    /// The connection extension of this flow's HELLO, if any.
    pub fn conn(&self) -> Option<HelloConn> {
        self.conn
    }
    pub fn transport(&self) -> TransportKind {
        self.cfg.transport
    }
    /// The flow's parameters.
    pub fn config(&self) -> &SenderConfig {
        &self.cfg
    }
    pub fn stats(&self) -> &SenderStats {
        &self.stats
    }
    pub fn cwnd(&self) -> f64 {
        self.window.cwnd()
    }
    pub fn dctcp_alpha(&self) -> f64 {
        self.window.alpha()
    }
    pub fn srtt(&self) -> Option<Nanos> {
        self.window.rtt.srtt()
    }
    pub fn error(&self) -> Option<SenderError> {
        match self.handshake {
            Handshake::Failed(e) => Some(e),
            _ => None,
        }
    }
    pub fn is_established(&self) -> bool {
        self.handshake == Handshake::Established
    }

    /// PPT: the low-priority loop (None for other transports).
    pub fn lcp(&self) -> Option<&Lcp> {
        self.part.ppt().map(|p| &p.lcp)
    }

    /// PPT: the priorities of the next HCP and LCP packets (§4.2).
    pub fn ppt_priorities(&self) -> Option<(u8, u8)> {
        self.part
            .ppt()
            .map(|p| (p.sched.hcp_priority(), p.sched.lcp_priority()))
    }

    /// Queue application bytes. Returns false after `finish` or failure.
    pub fn write(&mut self, data: Bytes) -> bool {
        if self.error().is_some() {
            return false;
        }
        if let Some(c) = self.part.credits_mut() {
            c.idle_since = None;
        }
        self.buf.write(data)
    }

    /// The application has no more data: the flow ends with a FIN once everything is sent.
    pub fn finish(&mut self) {
        self.buf.finish();
    }

    /// Bytes written and not yet ACKed (for application back-pressure).
    pub fn unacked_bytes(&self) -> u64 {
        self.buf.written_bytes() - self.buf.acked_bytes()
    }

    /// Payload bytes acknowledged so far, each byte counted once (read-only; the fuzz
    /// targets check that it never exceeds what was transmitted).
    pub fn acked_bytes(&self) -> u64 {
        self.buf.acked_bytes()
    }

    /// The cumulative ACK the sender has applied on `subflow` (sub-flow sequence space):
    /// the highest `cum_ack` of an accepted ACK, never decreasing (read-only).
    pub fn subflow_cum_ack(&self, subflow: SubFlow) -> u32 {
        match subflow {
            SubFlow::Proactive => self.proactive.cum_ack(),
            SubFlow::Reactive => self.reactive.cum_ack(),
        }
    }

    /// The `subflow_seq` the next transmission on `subflow` takes, i.e. the number of
    /// packets sent on it so far (read-only).
    pub fn subflow_next_seq(&self, subflow: SubFlow) -> u32 {
        match subflow {
            SubFlow::Proactive => self.proactive.next_seq(),
            SubFlow::Reactive => self.reactive.next_seq(),
        }
    }

    /// Bytes written and never transmitted (the Pending state).
    pub fn pending_bytes(&self) -> u64 {
        self.buf.pending_bytes()
    }

    /// Everything written, and the FIN, was acknowledged.
    pub fn is_complete(&self) -> bool {
        self.buf.is_complete()
    }

    pub fn handle_packet(&mut self, now: Nanos, packet: &Packet) -> Result<(), Rejected> {
        let r = self.handle_inner(now, packet);
        if r.is_err() {
            self.stats.rejected_packets += 1;
        } else {
            if let Some(c) = self.part.credits_mut() {
                c.on_heard(now);
            }
            self.ppt_second_rtt(now);
        }
        self.update_credit_state(now);
        r
    }

    fn handle_inner(&mut self, now: Nanos, packet: &Packet) -> Result<(), Rejected> {
        if packet.flow_id() != self.flow_id {
            return Err(Rejected::WrongFlow {
                expected: self.flow_id,
                got: packet.flow_id(),
            });
        }
        let unexpected = Rejected::UnexpectedType(self.cfg.transport);
        match packet {
            Packet::HelloAck(h) => {
                if h.transport != self.cfg.transport {
                    return Err(unexpected);
                }
                match h.status {
                    HelloStatus::Accepted => self.established(now),
                    HelloStatus::UnsupportedTransport => {
                        self.fail(SenderError::UnsupportedTransport)
                    }
                    HelloStatus::Refused => self.fail(SenderError::Refused),
                    HelloStatus::Retry { cookie } => self.retry(now, cookie),
                }
                Ok(())
            }
            Packet::Credit(c) => self.on_credit(now, c.credit_seq),
            Packet::Ack(a) => self.on_ack(now, a),
            Packet::EmulationCredit(c) => self.on_emulation_credit(now, c),
            Packet::Reset(_) => {
                self.fail(SenderError::Reset);
                Ok(())
            }
            _ => Err(unexpected),
        }
    }

    /// The peer answered. A HELLO answered on its first transmission gives the first RTT
    /// sample (Karn: none after a retransmission), as a SYN does, so the recovery timer
    /// starts from the path's RTT rather than its floor; the timer starts now.
    fn established(&mut self, now: Nanos) {
        if let Handshake::Pending { at, tries } = self.handshake {
            if tries == 0 && self.window.rtt.srtt().is_none() {
                self.window.rtt.on_sample(now.saturating_sub(at).max(1));
            }
            self.handshake = Handshake::Established;
            if let Some(c) = self.part.credits_mut() {
                c.recovery_anchor = now;
            }
        }
    }

    /// HELLO_ACK `retry`: the receiver kept no state for this flow (it is under a flood of
    /// HELLOs, or always asks for cookies). Send the HELLO again at once with the cookie
    /// (the RTT sample then comes from that HELLO). Reactive data already sent (the first
    /// RTT's) found no flow and was dropped: it is marked lost at once, without a congestion
    /// signal, instead of waiting for the RTO. A retry once the flow is established, or the
    /// same cookie again, changes nothing (the HELLO timer re-sends it).
    fn retry(&mut self, now: Nanos, cookie: u64) {
        let Handshake::Pending { tries, .. } = self.handshake else {
            return;
        };
        let fresh = self.cookie != Some(cookie);
        self.cookie = Some(cookie);
        if !fresh || self.stats.cookie_retries >= MAX_COOKIE_RETRIES {
            return;
        }
        self.stats.cookie_retries += 1;
        self.handshake = Handshake::Pending { at: now, tries };
        self.control.retain(|p| !matches!(p, Packet::Hello(_)));
        self.control.push_back(Packet::Hello(self.hello()));
        let moved = self.mark_reactive_in_flight_lost(now);
        self.stats.losses_reactive += moved as u64;
    }

    /// This flow's HELLO as sent now (connection extension, cookie).
    fn hello(&self) -> Hello {
        Hello {
            flow_id: self.flow_id,
            transport: self.cfg.transport,
            flow_size: self.flow_size,
            conn: self.conn,
            cookie: self.cookie,
            // Decided when it leaves (`hello_leaves`).
            idle: false,
        }
    }

    /// A HELLO is sent: a credit-based flow with nothing written yet says IDLE
    /// (`CreditLoop::hello_leaves`).
    fn hello_leaves(&mut self, h: &mut Hello) {
        let idle = self.buf.is_idle();
        h.idle = match self.part.credits_mut() {
            Some(c) => {
                c.hello_leaves(idle);
                idle
            }
            None => false,
        };
    }

    fn fail(&mut self, e: SenderError) {
        if !self.buf.is_complete() {
            self.handshake = Handshake::Failed(e);
            self.control.clear();
            if let Some(c) = self.part.credits_mut() {
                c.queue.clear();
            }
        }
    }

    fn scoreboard(&mut self, subflow: SubFlow) -> &mut Scoreboard {
        match subflow {
            SubFlow::Proactive => &mut self.proactive,
            SubFlow::Reactive => &mut self.reactive,
        }
    }

    fn on_ack(&mut self, now: Nanos, ack: &Ack) -> Result<(), Rejected> {
        if !self.part.acks_on(ack.subflow) {
            return Err(Rejected::UnexpectedType(self.cfg.transport));
        }
        if ack.ack_seq == PROBE_SEQ && ack.subflow == SubFlow::Reactive {
            // PASE §3.3: a probe's answer (no data packet has this sequence); without ECE
            // it shows room in the lowest queue. pFabric §4.2: any answer ends probe mode.
            let Some(p) = self.probing.as_mut() else {
                return Err(Rejected::UnexpectedType(self.cfg.transport));
            };
            let before = p.resumes;
            p.on_probe_answer(now, ack.ece);
            if self.cfg.transport == TransportKind::PFabric {
                if p.resumes > before {
                    self.window.reset_backoff();
                }
            } else {
                self.stats.pase_probe_resumes += p.resumes - before;
            }
            self.established(now);
            // The answer carries the receiver's in-order point: data whose own ACKs were
            // lost while the flow probed is acknowledged by it, not resent.
            if ack.flow_ack <= self.buf.sent_limit() {
                self.ack_flow_prefix(ack.flow_ack);
                self.buf.trim();
            }
            return Ok(());
        }
        if ack.ece && ack.subflow == SubFlow::Reactive {
            if let Some(p) = self.probing.as_mut() {
                p.on_data_ece(now);
            }
        }
        if ack.flow_ack > self.buf.sent_limit() {
            return Err(Rejected::FlowAckBeyondSent {
                flow_ack: ack.flow_ack,
                sent: self.buf.sent_limit(),
            });
        }
        let mut events = std::mem::take(&mut self.events);
        events.clear();
        let result = self.scoreboard(ack.subflow).on_ack(ack, now, &mut events);
        if let Err(e) = result {
            self.events = events;
            return Err(e.into());
        }
        self.established(now);
        let next_seq = self.scoreboard(ack.subflow).next_seq();
        let mut progress = false;
        self.window.clock(now);
        // PPT's low-priority ACKs time the LCP's queueing, not the HCP's path; PPT never
        // declares an opportunistic packet lost: the HCP covers what is still
        // unacknowledged when it reaches it (`SendBuffer::next_for_hcp`).
        let lcp_ack = self.part.ppt().is_some() && ack.subflow == SubFlow::Proactive;
        for &(seq, seg, was_outstanding) in &events.acked {
            if seq == ack.ack_seq && !lcp_ack {
                let rtt = (wire_timestamp(now).wrapping_sub(ack.tsecr) as Nanos) * MICROS;
                if rtt < 10_000 * crate::MILLIS {
                    self.window.rtt.on_sample(rtt.max(1));
                }
            }
            if was_outstanding && self.windowed(ack.subflow) {
                self.window
                    .on_ack(seq, ack.ece && seq == ack.ack_seq, next_seq);
            }
            progress |= self.segment_acked(seg);
        }
        if ack.subflow == SubFlow::Reactive {
            if self.tlp == TlpState::Spent && !events.acked.is_empty() {
                self.tlp = TlpState::Armed;
            }
            if let TlpState::InFlight(probe) = self.tlp {
                if events.acked.iter().any(|a| a.0 == probe) {
                    // RFC 8985: the probe was delivered, so what was sent before it and is
                    // still unacknowledged was lost: recover it now, not at the RTO.
                    self.reactive.mark_lost_before(probe, &mut events);
                    if !events.lost.is_empty() {
                        self.stats.tlp_recoveries += 1;
                    }
                    self.tlp = TlpState::Armed;
                } else if self.reactive.outstanding() == 0 {
                    self.tlp = TlpState::Armed;
                }
            }
        }
        for &(seq, seg) in events.lost.iter().filter(|_| !lcp_ack) {
            if self.buf.mark_lost(seg, ack.subflow, seq) {
                match ack.subflow {
                    SubFlow::Proactive => {
                        self.stats.losses_proactive += 1;
                        if self.windowed(SubFlow::Proactive) {
                            self.window.on_loss(ack.ack_seq, next_seq);
                        }
                    }
                    SubFlow::Reactive => {
                        self.stats.losses_reactive += 1;
                        self.window.on_loss(ack.ack_seq, next_seq);
                    }
                }
            }
        }
        self.events = events;
        progress |= self.ack_flow_prefix(ack.flow_ack);
        if progress && ack.subflow == SubFlow::Proactive {
            if let Some(c) = self.part.credits_mut() {
                c.recovery_anchor = now;
            }
        }
        self.buf.trim();
        self.ppt_on_ack(now, ack);
        Ok(())
    }

    /// The receiver's in-order point acknowledges whole segments even if their own ACKs were
    /// lost. Returns whether that was news.
    fn ack_flow_prefix(&mut self, flow_ack: u64) -> bool {
        let mut acked = std::mem::take(&mut self.acked_scratch);
        acked.clear();
        self.buf.ack_flow_prefix(flow_ack, &mut acked);
        let progress = !acked.is_empty();
        for (_, seg) in acked.drain(..) {
            self.resolve_subflows(&seg);
            self.stats.bytes_acked += seg.payload.len() as u64;
        }
        self.acked_scratch = acked;
        progress
    }

    /// Segment `idx` was ACKed through some transmission. Returns whether that was news.
    fn segment_acked(&mut self, idx: u64) -> bool {
        match self.buf.mark_acked(idx) {
            Some(seg) => {
                self.stats.bytes_acked += seg.payload.len() as u64;
                self.resolve_subflows(&seg);
                true
            }
            None => false,
        }
    }

    /// Other transmissions of an ACKed segment no longer occupy their sub-flow's pipe.
    fn resolve_subflows(&mut self, seg: &Segment) {
        if let Some(s) = seg.reactive_seq {
            self.reactive.resolve(s);
        }
        if let Some(s) = seg.proactive_seq {
            self.proactive.resolve(s);
        }
    }

    /// Is this sub-flow's sending limited by the DCTCP window? The reactive sub-flow always;
    /// the proactive one only for a layered (LY) ExpressPass sender.
    fn windowed(&self, subflow: SubFlow) -> bool {
        match subflow {
            SubFlow::Reactive => true,
            SubFlow::Proactive => self.part.windows_proactive(&self.cfg),
        }
    }

    /// Does the proactive sub-flow have work (something to send on a credit)?
    fn owes_proactive(&mut self) -> bool {
        match self.part {
            TransportPart::ExpressPass(_) => self.buf.has_lost() || self.buf.has_pending(),
            TransportPart::FlexPass(_) => {
                self.buf.has_lost() || self.buf.has_pending() || self.buf.has_unacked_reactive()
            }
            TransportPart::Dctcp
            | TransportPart::Ppt(_)
            | TransportPart::FlashPass(_)
            | TransportPart::PFabric
            | TransportPart::Pase(_) => false,
        }
    }

    pub fn poll_transmit(&mut self, now: Nanos) -> Option<Transmit> {
        if self
            .part
            .credits()
            .is_some_and(|c| c.state == CreditState::Stopped)
        {
            // New bytes since the credits were stopped (an idle stream resumes): request
            // credits now, not when some timer next runs.
            self.update_credit_state(now);
        }
        let t = self.next_transmit(now);
        if t.is_some() {
            self.update_credit_state(now);
        }
        t
    }

    fn next_transmit(&mut self, now: Nanos) -> Option<Transmit> {
        if self.error().is_some() {
            return None;
        }
        if let Some(mut p) = self.control.pop_front() {
            if let Packet::Hello(h) = &mut p {
                self.hello_leaves(h);
            }
            return Some(Transmit::new(p, self.cfg.transport));
        }
        match self.part {
            TransportPart::FlashPass(_) => self.flashpass_transmit(now),
            TransportPart::FlexPass(_)
            | TransportPart::ExpressPass(_)
            | TransportPart::Dctcp
            | TransportPart::Ppt(_)
            | TransportPart::PFabric
            | TransportPart::Pase(_) => self.credit_or_window_transmit(now),
        }
    }

    /// A data packet for a credit, else within the DCTCP window (or as the tail-loss probe),
    /// else PPT's opportunistic packet.
    fn credit_or_window_transmit(&mut self, now: Nanos) -> Option<Transmit> {
        if self.probing.is_some_and(|p| p.holds_data()) {
            return self.probe(now);
        }
        let proactive_retransmission = self.part.proactive_retransmission();
        while let Some(credit_seq) = self.part.credits_mut().and_then(|c| c.queue.pop_front()) {
            if self.windowed(SubFlow::Proactive)
                && f64::from(self.proactive.outstanding()) + 1.0 > self.window.cwnd().max(1.0)
            {
                // LY: "a data packet can only be sent when a credit arrives and the window
                // allows" (FlexPass §6.2).
                self.stats.credits_wasted += 1;
                continue;
            }
            match self.buf.next_for_credit(proactive_retransmission) {
                Some((idx, choice)) => {
                    if choice == CreditChoice::ProactiveRetransmission {
                        self.stats.proactive_retransmissions += 1;
                    }
                    if let Some(c) = self.part.credits_mut() {
                        c.recovery_anchor = now;
                    }
                    return self.send_segment(idx, SubFlow::Proactive, credit_seq, now);
                }
                None => self.stats.credits_wasted += 1,
            }
        }
        self.ppt_first_data(now);
        let probe = self.tlp == TlpState::Due;
        let handshake_done =
            !self.cfg.reactive_after_handshake || self.handshake == Handshake::Established;
        if self.part.reactive_source().is_some()
            && handshake_done
            && (probe
                || f64::from(self.reactive.outstanding()) + 1.0 <= self.window.cwnd().max(1.0))
        {
            if let Some(idx) = self.next_reactive_segment() {
                let seq = self.reactive.next_seq();
                let t = self.send_segment(idx, SubFlow::Reactive, 0, now);
                if probe && t.is_some() {
                    self.tlp = TlpState::InFlight(seq);
                    self.stats.tlp_probes += 1;
                }
                return t;
            }
            if probe {
                self.tlp = TlpState::Spent; // nothing to probe with
            }
        }
        self.next_opportunistic(now)
    }

    /// The next segment for the reactive sub-flow, taken out of the send buffer.
    fn next_reactive_segment(&mut self) -> Option<u64> {
        match self.part.reactive_source()? {
            ReactiveSource::Head { retransmit_lost } => self.buf.next_for_reactive(retransmit_lost),
            ReactiveSource::Hcp => self.buf.next_for_hcp(),
        }
    }

    fn send_segment(
        &mut self,
        idx: u64,
        subflow: SubFlow,
        credit_seq: u32,
        now: Nanos,
    ) -> Option<Transmit> {
        let seq = match self.scoreboard(subflow).on_send(idx, now) {
            Ok(s) => s,
            Err(_) => {
                self.fail(SenderError::SequenceExhausted);
                return None;
            }
        };
        // pFabric §4.1: the remaining size when the packet leaves.
        let priority = self
            .part
            .carries_priority()
            .then(|| crate::pfabric::priority(self.flow_size, self.buf.acked_bytes()));
        let seg = self.buf.on_sent(idx, subflow, seq)?;
        let data = Data {
            flow_id: self.flow_id,
            subflow,
            flow_seq: seg.flow_seq,
            subflow_seq: seq,
            credit_seq,
            tsval: wire_timestamp(now),
            fin: seg.fin,
            retransmission: seg.transmissions > 1,
            priority,
            payload: seg.payload.clone(),
        };
        let len = data.payload.len() as u64;
        if data.retransmission {
            self.stats.retransmissions += 1;
        }
        match subflow {
            SubFlow::Proactive => {
                self.stats.packets_proactive += 1;
                self.stats.bytes_proactive += len;
            }
            SubFlow::Reactive => {
                self.stats.packets_reactive += 1;
                self.stats.bytes_reactive += len;
            }
        }
        let mut t = Transmit::new(Packet::Data(data), self.cfg.transport);
        if let Some(p) = self.part.ppt_mut() {
            // Mirror-symmetric tagging (§4.2): the priority before this packet's bytes count.
            let level = match subflow {
                SubFlow::Reactive => p.sched.hcp_priority(),
                SubFlow::Proactive => p.sched.lcp_priority(),
            };
            t.class = TrafficClass::Priority(level);
            p.sched.on_sent(len);
        }
        if let Some(a) = self.part.arbitration() {
            t.class = TrafficClass::Priority(a.queue); // PASE §3.3: the assigned queue
        }
        Some(t)
    }

    /// Every proactive packet in flight is lost (a recovery or FlashPass data timeout): their
    /// segments go back to the send buffer for retransmission.
    fn mark_proactive_in_flight_lost(&mut self, now: Nanos) {
        let mut events = std::mem::take(&mut self.events);
        events.clear();
        self.proactive.mark_all_lost(now, &mut events);
        for &(seq, seg) in &events.lost {
            if self.buf.mark_lost(seg, SubFlow::Proactive, seq) {
                self.stats.losses_proactive += 1;
            }
        }
        self.events = events;
    }

    /// Every reactive packet in flight is lost; returns how many segments that made Lost.
    fn mark_reactive_in_flight_lost(&mut self, now: Nanos) -> usize {
        let mut events = std::mem::take(&mut self.events);
        events.clear();
        self.reactive.mark_all_lost(now, &mut events);
        let moved = events
            .lost
            .iter()
            .filter(|&&(seq, seg)| self.buf.mark_lost(seg, SubFlow::Reactive, seq))
            .count();
        self.events = events;
        moved
    }

    /// Earliest time `handle_timeout` must run.
    pub fn poll_timeout(&mut self) -> Option<Nanos> {
        if self.error().is_some() || (self.buf.is_complete() && self.control.is_empty()) {
            return None;
        }
        self.arm_timers();
        self.timers.next()
    }

    pub fn handle_timeout(&mut self, now: Nanos) {
        if self.error().is_some() {
            return;
        }
        self.run_emulation_control(now);
        self.arm_timers();
        for timer in Timer::ALL {
            if timer.is_wake_up() || !self.timers.is_expired(timer, now) {
                continue;
            }
            if self.on_timer(timer, now).is_break() {
                return;
            }
            self.arm_timers();
        }
        self.update_credit_state(now);
    }

    /// Sets every timer from the sender's state (deadlines follow from it, so the table is
    /// refreshed whenever it is read).
    fn arm_timers(&mut self) {
        let hello = match self.handshake {
            Handshake::Pending { at, tries } => Some(at + self.hello_timeout(tries)),
            Handshake::Established | Handshake::Failed(_) => None,
        };
        let rto = (self.reactive.outstanding() > 0)
            .then(|| self.reactive.timer_anchor() + self.window.rto());
        // RFC 8985 §7.2: PTO = 2·SRTT after the last ACK progress (or the send that filled an
        // empty pipe), armed only when it comes before the RTO, for the transports whose
        // whole flow is one DCTCP window.
        let pto = match (self.window.rtt.srtt(), rto) {
            (Some(srtt), Some(rto))
                if self.cfg.dctcp.tlp
                    && self.part.is_one_window()
                    && self.tlp == TlpState::Armed =>
            {
                Some(self.reactive.timer_anchor() + 2 * srtt.max(1)).filter(|&pto| pto < rto)
            }
            _ => None,
        };
        self.timers.set(Timer::Hello, hello);
        self.timers.set(Timer::Rto, rto);
        self.timers.set(Timer::TailLossProbe, pto);
        let probe = self
            .probing
            .and_then(|p| p.next_probe_at())
            .filter(|_| self.handshake == Handshake::Established);
        self.timers.set(Timer::PaseProbe, probe);
        self.arm_credit_timers();
        self.arm_lcp_timers();
        self.arm_flashpass_timers();
    }

    fn on_timer(&mut self, timer: Timer, now: Nanos) -> ControlFlow<()> {
        match timer {
            Timer::ScheduledDataLoss => self.mark_proactive_in_flight_lost(now),
            Timer::Hello => return self.on_hello_timeout(now),
            Timer::TailLossProbe => self.on_tail_loss_probe(),
            Timer::Rto => self.on_rto(now),
            Timer::Recovery => return self.on_recovery_timeout(now),
            Timer::CreditStop => {
                if self.buf.is_idle() {
                    self.send_credit_stop(now);
                }
            }
            Timer::LcpClose => self.close_lcp(),
            Timer::LcpPace
            | Timer::PaseProbe
            | Timer::Slot
            | Timer::Emulation
            | Timer::EmulationControl
            | Timer::Unscheduled => {}
        }
        ControlFlow::Continue(())
    }

    /// HELLO retransmission timeout after `tries` retransmissions: doubles each time (as a TCP
    /// SYN's), so HELLOs lost in a congested queue (incast) are retried beyond the burst.
    fn hello_timeout(&self, tries: u32) -> Nanos {
        self.cfg.hello_timeout << tries.min(16)
    }

    fn on_hello_timeout(&mut self, now: Nanos) -> ControlFlow<()> {
        let Handshake::Pending { tries, .. } = self.handshake else {
            return ControlFlow::Continue(());
        };
        if tries >= self.cfg.hello_retries {
            self.fail(SenderError::PeerNotResponding);
            return ControlFlow::Break(());
        }
        self.handshake = Handshake::Pending {
            at: now,
            tries: tries + 1,
        };
        self.stats.hello_retransmissions += 1;
        let hello = self.hello();
        self.control.push_back(Packet::Hello(hello));
        ControlFlow::Continue(())
    }

    /// The probe: new data if there is any, else the last packet in flight again.
    fn on_tail_loss_probe(&mut self) {
        if !self.buf.has_pending() {
            if let Some(last) = self.reactive.last_outstanding() {
                let mut events = std::mem::take(&mut self.events);
                events.clear();
                self.reactive.mark_lost(last, &mut events);
                for &(seq, seg) in &events.lost {
                    self.buf.mark_lost(seg, SubFlow::Reactive, seq);
                }
                self.events = events;
            }
        }
        self.tlp = TlpState::Due;
    }

    /// The reactive sub-flow's RTO: its packets in flight are lost.
    fn on_rto(&mut self, now: Nanos) {
        self.tlp = TlpState::Armed;
        // Is there other work that does not wait on this timer (no stall)? FlexPass: while
        // credits are expected (or there is other data for them) the RTO only hands the
        // unACKed reactive packets to the proactive sub-flow. Credits are expected while they
        // are requested from a live receiver, i.e. the recovery timer has not expired since
        // the peer last spoke: the receiver may legitimately pace this flow down to one credit
        // per update period (many flows sharing its credits), far apart from the RTO.
        // FlashPass: the pre-credit phase's tail-loss timer; unacknowledged unscheduled
        // packets become demand for the emulation (scheduled retransmission).
        let established = self.handshake == Handshake::Established;
        let credit_work = match &self.part {
            TransportPart::FlexPass(c) => {
                self.buf.has_pending() || self.buf.has_lost() || (established && c.is_flowing())
            }
            TransportPart::FlashPass(_) => true,
            TransportPart::ExpressPass(_)
            | TransportPart::Dctcp
            | TransportPart::Ppt(_)
            | TransportPart::PFabric
            | TransportPart::Pase(_) => false,
        };
        let moved = self.mark_reactive_in_flight_lost(now);
        if moved > 0 {
            if credit_work {
                self.stats.reactive_rto_reclassified += 1;
            } else {
                self.stats.timeouts += 1;
            }
            self.stats.losses_reactive += moved as u64;
            let next = self.reactive.next_seq();
            self.window.on_timeout(next);
            self.pfabric_timeout(now);
        }
    }
}
