//! Per-flow sender: FlexPass (proactive + reactive sub-flows over one send buffer),
//! ExpressPass (proactive only), DCTCP (reactive only, with its own retransmissions) and PPT
//! (SIGCOMM'24): DCTCP as the high-priority loop (HCP) on the reactive sub-flow, sending from
//! the head of the send buffer and retransmitting every loss, and the low-priority loop
//! (LCP, `lcp`) on sub-flow 0, sending opportunistic packets from the tail of the buffer;
//! every packet tagged with a priority by `flow_scheduling`.

use crate::config::{uses_credits, SenderConfig};
use crate::dctcp::DctcpWindow;
use crate::flashpass::{Emulation, EmulationStats};
use crate::flow_scheduling::FlowScheduler;
use crate::lcp::{Lcp, LcpStats, OpenCase};
use crate::scoreboard::{AckError, AckEvents, Scoreboard};
use crate::send_buffer::{CreditChoice, Segment, SendBuffer};
use crate::{wire_timestamp, Nanos, Transmit, MICROS};
use bytes::Bytes;
use flexpass_wire::{
    Ack, CreditRequest, Data, Ecn, Hello, HelloConn, HelloStatus, Packet, SubFlow, TrafficClass,
    TransportKind,
};
use serde::Serialize;
use std::collections::VecDeque;

#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error, Serialize)]
pub enum SenderError {
    #[error("peer did not answer HELLO: it does not speak FlexPass (fall back to kernel TCP)")]
    PeerNotResponding,
    #[error("peer refused the flow")]
    Refused,
    #[error("peer does not support this transport")]
    UnsupportedTransport,
    #[error("peer reset the flow")]
    Reset,
    #[error("no credit and no ACK from the peer for {silent_ms} ms ({expiries} recovery timeouts in a row)")]
    NoProgress { silent_ms: u64, expiries: u32 },
    #[error("sub-flow sequence space exhausted")]
    SequenceExhausted,
}

/// Cap of the recovery timer's exponential backoff: 2^6 = 64 × `recovery_timeout`.
const MAX_RECOVERY_BACKOFF: u32 = 6;

/// Why an incoming packet was not accepted (it is counted and otherwise ignored).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Rejected {
    #[error("packet belongs to flow {got}, not {expected}")]
    WrongFlow { expected: u32, got: u32 },
    #[error("packet type not expected by a {0:?} sender")]
    UnexpectedType(TransportKind),
    #[error(transparent)]
    BadAck(#[from] AckError),
    #[error("ACK claims {flow_ack} bytes delivered but only {sent} were sent")]
    FlowAckBeyondSent { flow_ack: u64, sent: u64 },
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SenderStats {
    pub bytes_acked: u64,
    pub packets_proactive: u64,
    pub packets_reactive: u64,
    pub bytes_proactive: u64,
    pub bytes_reactive: u64,
    /// Transmissions of a segment that had been sent before (any reason).
    pub retransmissions: u64,
    /// Credits spent on a segment still sent-as-reactive (FlexPass "proactive retransmission").
    pub proactive_retransmissions: u64,
    pub losses_proactive: u64,
    pub losses_reactive: u64,
    /// Retransmission timeouts that stalled the flow: DCTCP's RTO, or a FlexPass reactive
    /// RTO that fired while the proactive sub-flow had nothing else to send.
    pub timeouts: u64,
    /// FlexPass reactive RTOs that only re-classified unACKed reactive packets as Lost while
    /// credits were still carrying other data (no stall; the credits then carry them).
    pub reactive_rto_reclassified: u64,
    /// Proactive recovery-timer expiries (credits re-requested).
    pub recovery_timeouts: u64,
    pub credits_received: u64,
    /// Credits that arrived when there was nothing to send.
    pub credits_wasted: u64,
    pub credit_requests: u64,
    pub credit_stops: u64,
    pub hello_retransmissions: u64,
    /// HELLO_ACK `retry` answers: the HELLO was sent again with the receiver's cookie
    /// (docs/protocol.md §11, "Half-open flows and cookies").
    pub cookie_retries: u64,
    pub rejected_packets: u64,
    /// PPT: the low-priority loop's counters (all zero for other transports).
    #[serde(skip_serializing_if = "LcpStats::is_zero")]
    pub lcp: LcpStats,
    /// PPT: identified as large by the buffer-aware approach (§4.1).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub identified_large: bool,
    /// FlashPass: the emulation's counters (all zero for other transports).
    #[serde(skip_serializing_if = "is_default")]
    pub emulation: EmulationStats,
    /// FlashPass: bytes sent unscheduled in the pre-credit phase (Aeolus).
    #[serde(skip_serializing_if = "is_zero")]
    pub bytes_unscheduled: u64,
    /// Tail-loss probes sent (`DctcpConfig::tlp`), and those whose ACK declared packets sent
    /// before the probe lost (recovered without waiting for the RTO; a probe that re-sent
    /// the only lost packet repairs the tail itself and is not counted here).
    pub tlp_probes: u64,
    pub tlp_recoveries: u64,
}

fn is_default<T: Default + PartialEq>(v: &T) -> bool {
    *v == T::default()
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

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

/// PPT's per-flow state next to the DCTCP window (the HCP).
struct Ppt {
    sched: FlowScheduler,
    lcp: Lcp,
    /// The window's α-update count last seen (an update may open an LCP loop).
    alpha_updates: u64,
    /// Highest `flow_ack` received: opportunistic packets stay within `max_ahead_bytes` of it.
    flow_ack: u64,
}

/// Sender half of the credit request / stop state machine (ExpressPass Fig. 7).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CreditState {
    /// Credits requested (HELLO or CREDIT_REQUEST sent); credits expected.
    Requested,
    /// CREDIT_STOP sent (or nothing ever requested).
    Stopped,
}

pub struct Sender {
    flow_id: u32,
    cfg: SenderConfig,
    buf: SendBuffer,
    proactive: Scoreboard,
    reactive: Scoreboard,
    window: DctcpWindow,
    handshake: Handshake,
    credit_state: CreditState,
    control: VecDeque<Packet>,
    credits: VecDeque<u32>,
    /// Start of the current proactive recovery-timer interval: the last proactive progress
    /// (a credit spent on data, a proactive ACK that acknowledged something, or a credit
    /// request). Wasted credits do not count: a lost tail packet of the proactive sub-flow
    /// leaves nothing to spend credits on, and only this timer finds it.
    recovery_anchor: Nanos,
    /// Recovery-timer expiries since anything (a credit or an ACK) last came from the peer:
    /// each one doubles the next timeout (up to 2^MAX_RECOVERY_BACKOFF), so a peer that has
    /// gone away is not sent CREDIT_REQUESTs at the full rate.
    recovery_expiries: u32,
    /// When a packet from the peer was last accepted (the flow's start before that, or when
    /// it re-requested credits after stopping them): an expiry after `give_up_timeout` of
    /// silence fails the flow.
    last_heard: Nanos,
    /// Arrival of the last credit.
    last_credit_at: Nanos,
    /// EWMA (gain 1/8) of the gap between credit arrivals: with many flows sharing the
    /// credit rate it can be far above the RTT, and the recovery timer must wait longer.
    credit_gap: Option<f64>,
    /// When the sender last had nothing at all to do (streams: CREDIT_STOP after a timeout).
    idle_since: Option<Nanos>,
    /// A credit arrived after CREDIT_STOP: the receiver did not get it (lost, or overtaken
    /// by an older CREDIT_REQUEST), so CREDIT_STOP is sent again, at most once per RTT.
    credit_after_stop: bool,
    last_stop_at: Option<Nanos>,
    flow_size: u64,
    /// Connection extension carried by this flow's HELLOs (docs/protocol.md §6.6).
    conn: Option<HelloConn>,
    /// Cookie of the receiver's last HELLO_ACK `retry`, echoed by every HELLO from then on.
    cookie: Option<u64>,
    /// The last HELLO sent said IDLE: no data yet, no credits until CREDIT_REQUEST.
    idle_hello: bool,
    events: AckEvents,
    acked_scratch: Vec<(u64, Segment)>,
    stats: SenderStats,
    ppt: Option<Box<Ppt>>,
    fp: Option<Box<Emulation>>,
    tlp: TlpState,
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
        let credit_state = if uses_credits(cfg.transport) {
            CreditState::Requested
        } else {
            CreditState::Stopped
        };
        Ok(Sender {
            flow_id,
            buf: SendBuffer::new(cfg.mss),
            proactive: Scoreboard::new(cfg.subflow_dupthresh),
            reactive: Scoreboard::new(match cfg.transport {
                TransportKind::Dctcp | TransportKind::Ppt => cfg.dctcp.dupthresh,
                _ => cfg.subflow_dupthresh,
            }),
            window: DctcpWindow::new(&cfg.dctcp),
            handshake: Handshake::Pending { at: now, tries: 0 },
            credit_state,
            control,
            credits: VecDeque::new(),
            recovery_anchor: now,
            recovery_expiries: 0,
            last_heard: now,
            last_credit_at: now,
            credit_gap: None,
            idle_since: None,
            credit_after_stop: false,
            last_stop_at: None,
            flow_size,
            conn: None,
            cookie: None,
            idle_hello: false,
            events: AckEvents::default(),
            acked_scratch: Vec::new(),
            stats: SenderStats::default(),
            ppt: (cfg.transport == TransportKind::Ppt).then(|| {
                Box::new(Ppt {
                    sched: FlowScheduler::new(&cfg.ppt),
                    lcp: Lcp::new(&cfg.ppt),
                    alpha_updates: 0,
                    flow_ack: 0,
                })
            }),
            fp: (cfg.transport == TransportKind::FlashPass)
                .then(|| Box::new(Emulation::new(&cfg.flashpass, now))),
            tlp: TlpState::Armed,
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
        self.ppt.as_ref().map(|p| &p.lcp)
    }

    /// PPT: the priorities of the next HCP and LCP packets (§4.2).
    pub fn ppt_priorities(&self) -> Option<(u8, u8)> {
        self.ppt
            .as_ref()
            .map(|p| (p.sched.hcp_priority(), p.sched.lcp_priority()))
    }

    /// Queue application bytes. Returns false after `finish` or failure.
    pub fn write(&mut self, data: Bytes) -> bool {
        if self.error().is_some() {
            return false;
        }
        self.idle_since = None;
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
            self.recovery_expiries = 0; // the peer is alive
            self.last_heard = self.last_heard.max(now);
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
            Packet::Credit(c) => {
                if !self.cfg.uses_credits() {
                    return Err(unexpected);
                }
                if self.stats.credits_received > 0 {
                    let gap = now.saturating_sub(self.last_credit_at) as f64;
                    self.credit_gap =
                        Some(self.credit_gap.map_or(gap, |g| 0.875 * g + 0.125 * gap));
                }
                self.stats.credits_received += 1;
                self.last_credit_at = now;
                self.credit_after_stop |= self.credit_state == CreditState::Stopped;
                self.established(now);
                if self.error().is_some() || self.buf.is_complete() {
                    self.stats.credits_wasted += 1;
                } else {
                    self.credits.push_back(c.credit_seq);
                }
                Ok(())
            }
            Packet::Ack(a) => self.on_ack(now, a),
            Packet::EmulationCredit(c) => {
                let Some(em) = self.fp.as_mut() else {
                    return Err(unexpected);
                };
                for g in &c.grants {
                    em.on_grant(now, g.emu_seq, g.timestamp);
                }
                self.stats.emulation = em.stats().clone();
                self.established(now);
                Ok(())
            }
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
            self.recovery_anchor = now;
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
        let mut events = std::mem::take(&mut self.events);
        events.clear();
        self.reactive.mark_all_lost(now, &mut events);
        let moved = events
            .lost
            .iter()
            .filter(|&&(seq, seg)| self.buf.mark_lost(seg, SubFlow::Reactive, seq))
            .count();
        self.events = events;
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

    /// A HELLO is sent: a credit-based flow with nothing written yet says IDLE and waits for
    /// data, as after CREDIT_STOP (its first bytes send CREDIT_REQUEST once established), so
    /// opening many idle connections costs no credits (docs/protocol.md §11, "Idle HELLO").
    fn hello_leaves(&mut self, h: &mut Hello) {
        let idle = uses_credits(self.cfg.transport) && self.buf.is_idle();
        h.idle = idle;
        if idle && self.credit_state == CreditState::Requested {
            self.credit_state = CreditState::Stopped;
        } else if !idle && self.idle_hello && self.credit_state == CreditState::Stopped {
            // A HELLO sent again after data arrived: the receiver credits on this one.
            self.credit_state = CreditState::Requested;
        }
        self.idle_hello = idle;
    }

    fn fail(&mut self, e: SenderError) {
        if !self.buf.is_complete() {
            self.handshake = Handshake::Failed(e);
            self.control.clear();
            self.credits.clear();
        }
    }

    fn scoreboard(&mut self, subflow: SubFlow) -> &mut Scoreboard {
        match subflow {
            SubFlow::Proactive => &mut self.proactive,
            SubFlow::Reactive => &mut self.reactive,
        }
    }

    /// PPT §3.1, case 1 for a flow identified as large: its first LCP loop opens in the
    /// second RTT, i.e. with the first answer from the peer.
    fn ppt_second_rtt(&mut self, now: Nanos) {
        let rtt = self.ppt_rtt();
        let window = self.ppt_case1_window();
        if let Some(p) = self.ppt.as_mut() {
            if p.sched.is_large() && self.handshake == Handshake::Established {
                p.lcp.open_first(now, OpenCase::SecondRtt, window, rtt);
            }
        }
    }

    /// PPT: the RTT that paces the LCP and times its loops: the HCP's smoothed RTT, or the
    /// configured base RTT before a sample.
    fn ppt_rtt(&self) -> Nanos {
        self.window
            .rtt
            .srtt()
            .unwrap_or(self.cfg.ppt.base_rtt)
            .max(1)
    }

    /// PPT §3.1 case 1: I = BDP − the DCTCP initial window, in packets.
    fn ppt_case1_window(&self) -> u32 {
        let bdp = self.cfg.ppt.bdp_bytes as f64 / self.cfg.mss as f64;
        (bdp - self.cfg.dctcp.init_cwnd).max(0.0).floor() as u32
    }

    fn on_ack(&mut self, now: Nanos, ack: &Ack) -> Result<(), Rejected> {
        let allowed = !matches!(
            (self.cfg.transport, ack.subflow),
            (TransportKind::ExpressPass, SubFlow::Reactive)
                | (TransportKind::Dctcp, SubFlow::Proactive)
        );
        if !allowed {
            return Err(Rejected::UnexpectedType(self.cfg.transport));
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
        // PPT's low-priority ACKs time the LCP's queueing, not the HCP's path.
        let rtt_sample = !(self.ppt.is_some() && ack.subflow == SubFlow::Proactive);
        for &(seq, seg, was_outstanding) in &events.acked {
            if seq == ack.ack_seq && rtt_sample {
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
        // PPT never declares an opportunistic packet lost: the HCP covers what is still
        // unacknowledged when it reaches it (`SendBuffer::next_for_hcp`).
        let lcp_ack = self.ppt.is_some() && ack.subflow == SubFlow::Proactive;
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
        // The receiver's in-order point acknowledges whole segments even if their own ACKs were lost.
        let mut acked = std::mem::take(&mut self.acked_scratch);
        acked.clear();
        self.buf.ack_flow_prefix(ack.flow_ack, &mut acked);
        for (_, seg) in acked.drain(..) {
            self.resolve_subflows(&seg);
            self.stats.bytes_acked += seg.payload.len() as u64;
            progress = true;
        }
        self.acked_scratch = acked;
        if progress && ack.subflow == SubFlow::Proactive {
            self.recovery_anchor = now;
        }
        self.buf.trim();
        self.ppt_on_ack(now, ack);
        Ok(())
    }

    /// PPT: an accepted ACK. An HCP ACK updates W_max and may find α at its recent minimum
    /// (§3.1 case 2); a low-priority ACK clocks the LCP (§3.2).
    fn ppt_on_ack(&mut self, now: Nanos, ack: &Ack) {
        let rtt = self.ppt_rtt();
        let Some(p) = self.ppt.as_mut() else { return };
        p.flow_ack = p.flow_ack.max(ack.flow_ack);
        match ack.subflow {
            SubFlow::Reactive => {
                p.lcp
                    .on_hcp_window(self.window.cwnd(), self.window.ssthresh());
                let updates = self.window.alpha_updates();
                if updates != p.alpha_updates {
                    p.alpha_updates = updates;
                    let in_flight = self.proactive.outstanding();
                    p.lcp
                        .on_alpha_update(now, self.window.alpha(), in_flight, rtt);
                }
            }
            SubFlow::Proactive => p.lcp.on_lp_ack(now, ack.ece),
        }
        self.stats.lcp = p.lcp.stats().clone();
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

    /// Is this sub-flow's sending limited by the DCTCP window? The reactive sub-flow always
    /// (DCTCP, FlexPass); the proactive one only for a layered (LY) ExpressPass sender.
    fn windowed(&self, subflow: SubFlow) -> bool {
        match subflow {
            SubFlow::Reactive => true,
            SubFlow::Proactive => {
                self.cfg.layered_window && self.cfg.transport == TransportKind::ExpressPass
            }
        }
    }

    /// Does the proactive sub-flow have work (something to send on a credit)?
    fn owes_proactive(&mut self) -> bool {
        match self.cfg.transport {
            TransportKind::Dctcp => false,
            TransportKind::ExpressPass => self.buf.has_lost() || self.buf.has_pending(),
            TransportKind::FlexPass => {
                self.buf.has_lost() || self.buf.has_pending() || self.buf.has_unacked_reactive()
            }
            TransportKind::Ppt | TransportKind::FlashPass => false,
        }
    }

    /// Credit request / stop state machine. A finished flow stops credits at once; a stream
    /// with nothing to send stops them after `credit_stop_timeout`; new data re-requests.
    fn update_credit_state(&mut self, now: Nanos) {
        if !self.cfg.uses_credits() || self.error().is_some() {
            return;
        }
        let complete = self.buf.is_complete();
        let busy = !complete && (self.owes_proactive() || self.proactive.outstanding() > 0);
        let credit_after_stop = std::mem::take(&mut self.credit_after_stop);
        match self.credit_state {
            CreditState::Requested if complete => self.send_credit_stop(now),
            CreditState::Requested => {
                if busy || !self.buf.is_idle() {
                    self.idle_since = None;
                } else if self.idle_since.is_none() {
                    self.idle_since = Some(now);
                }
            }
            CreditState::Stopped if busy && self.handshake == Handshake::Established => {
                // With its credits stopped the flow waited for nothing (an idle flow may stay
                // so for hours): the silence that can fail it (give_up_timeout) starts now.
                self.last_heard = self.last_heard.max(now);
                self.send_credit_request(now);
            }
            CreditState::Stopped => {
                // Credits keep coming although nothing needs them: say CREDIT_STOP again
                // (credits already in flight when it left come for up to an RTT; the RTT
                // estimate may be inflated, e.g. by a late handshake, so at most rto_max).
                let rtt = self
                    .window
                    .rtt
                    .srtt()
                    .unwrap_or(self.cfg.recovery_timeout)
                    .min(self.cfg.dctcp.rto_max);
                if credit_after_stop && self.last_stop_at.is_none_or(|t| now >= t + rtt) {
                    self.send_credit_stop(now);
                }
            }
        }
    }

    fn send_credit_stop(&mut self, now: Nanos) {
        self.control.push_back(Packet::CreditStop {
            flow_id: self.flow_id,
        });
        self.credit_state = CreditState::Stopped;
        self.stats.credit_stops += 1;
        self.idle_since = None;
        self.last_stop_at = Some(now);
    }

    fn send_credit_request(&mut self, now: Nanos) {
        let pending_bytes = self.buf.pending_bytes();
        self.control.push_back(Packet::CreditRequest(CreditRequest {
            flow_id: self.flow_id,
            pending_bytes,
        }));
        self.credit_state = CreditState::Requested;
        self.stats.credit_requests += 1;
        self.recovery_anchor = now;
    }

    pub fn poll_transmit(&mut self, now: Nanos) -> Option<Transmit> {
        if self.credit_state == CreditState::Stopped {
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
        if self.fp.is_some() {
            return self.flashpass_transmit(now);
        }
        let flexpass = self.cfg.transport == TransportKind::FlexPass;
        while let Some(credit_seq) = self.credits.pop_front() {
            if self.windowed(SubFlow::Proactive)
                && f64::from(self.proactive.outstanding()) + 1.0 > self.window.cwnd().max(1.0)
            {
                // LY: "a data packet can only be sent when a credit arrives and the window
                // allows" (FlexPass §6.2).
                self.stats.credits_wasted += 1;
                continue;
            }
            match self.buf.next_for_credit(flexpass) {
                Some((idx, choice)) => {
                    if choice == CreditChoice::ProactiveRetransmission {
                        self.stats.proactive_retransmissions += 1;
                    }
                    self.recovery_anchor = now;
                    return self.send_segment(idx, SubFlow::Proactive, credit_seq, now);
                }
                None => self.stats.credits_wasted += 1,
            }
        }
        self.ppt_first_data(now);
        let probe = self.tlp == TlpState::Due;
        let handshake_done =
            !self.cfg.reactive_after_handshake || self.handshake == Handshake::Established;
        if self.cfg.transport != TransportKind::ExpressPass
            && handshake_done
            && (probe
                || f64::from(self.reactive.outstanding()) + 1.0 <= self.window.cwnd().max(1.0))
        {
            let next = match self.cfg.transport {
                TransportKind::Ppt => self.buf.next_for_hcp(),
                t => self.buf.next_for_reactive(t == TransportKind::Dctcp),
            };
            if let Some(idx) = next {
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

    /// Packets the flow still needs slots for: never-sent segments and lost ones. Until the
    /// application finished writing, the remaining demand is unknown and taken as unbounded
    /// while anything waits to be sent, none otherwise (a stream never over-provisions; §III-C's footnote uses the send buffer only when
    /// the demand is unknown, and the buffer does not hold a T_wait's worth of data).
    fn flashpass_demand(&self) -> u64 {
        if !self.buf.fin_requested() {
            // A stream with nothing to send and nothing lost emulates for nothing: it would
            // keep pacing emulation packets (and draw grants) while idle, forever.
            if !self.buf.has_pending() && !self.buf.has_lost() {
                return 0;
            }
            return u64::MAX / 2;
        }
        self.buf.pending_bytes().div_ceil(self.cfg.mss as u64)
            + self.buf.lost_count() as u64
            + u64::from(self.buf.has_pending() && self.buf.pending_bytes() == 0)
    }

    /// FlashPass: a data packet in every due slot T + T_wait (§III-B), else the next paced
    /// emulation packet (ordinary, or over-provisioned and Not-ECT, §III-C), else unscheduled
    /// data of the pre-credit phase (Aeolus, red).
    fn flashpass_transmit(&mut self, now: Nanos) -> Option<Transmit> {
        while self.fp.as_mut().is_some_and(|em| em.take_due_slot(now)) {
            // Lost, else never sent: unscheduled packets still in flight are not sent again
            // on a slot (SACK or the tail-loss timer declares them lost first).
            match self.buf.next_for_credit(false) {
                Some((idx, choice)) => {
                    if choice == CreditChoice::ProactiveRetransmission {
                        self.stats.proactive_retransmissions += 1;
                    }
                    self.recovery_anchor = now;
                    return self.send_segment(idx, SubFlow::Proactive, 0, now);
                }
                None => {
                    let em = self.fp.as_mut()?;
                    em.on_slot_wasted();
                    self.stats.emulation = em.stats().clone();
                }
            }
        }
        let demand = self.flashpass_demand();
        let em = self.fp.as_mut()?;
        if now >= em.next_send() {
            match em.classify(demand) {
                Some(over_provisioned) => {
                    let (emu_seq, timestamp, hold) = em.on_sent(now, over_provisioned);
                    self.stats.emulation = em.stats().clone();
                    let mut t = Transmit::new(
                        Packet::Emulation(flexpass_wire::Emulation {
                            flow_id: self.flow_id,
                            emu_seq,
                            timestamp,
                            hold,
                        }),
                        self.cfg.transport,
                    );
                    if over_provisioned {
                        t.ecn = Ecn::NotEct;
                    }
                    return Some(t);
                }
                None => em.idle(now),
            }
        }
        let fp = &self.cfg.flashpass;
        let next_unscheduled = em.next_unscheduled;
        if fp.unscheduled
            && self.stats.bytes_unscheduled < fp.unscheduled_bytes
            && now >= next_unscheduled
        {
            if let Some(idx) = self.buf.next_for_reactive(false) {
                // Paced at line rate less the emulation share: one 1622-byte slot (a data
                // frame and an emulation packet) per packet, so the NIC never queues it.
                em.next_unscheduled =
                    next_unscheduled.max(now) + (1e9 / fp.max_emulation_rate) as Nanos;
                let t = self.send_segment(idx, SubFlow::Reactive, 0, now);
                if let Some(Packet::Data(d)) = t.as_ref().map(|t| &t.packet) {
                    self.stats.bytes_unscheduled += d.payload.len() as u64;
                }
                return t;
            }
        }
        None
    }

    /// FlashPass: the next slot, the next emulation packet while there is demand, and the
    /// emulation's loss / Algorithm 1 timer.
    fn flashpass_deadline(&self) -> Option<Nanos> {
        let em = self.fp.as_ref()?;
        let emulate = em.classify(self.flashpass_demand()).map(|_| em.next_send());
        let fp = &self.cfg.flashpass;
        let unscheduled = (fp.unscheduled
            && self.stats.bytes_unscheduled < fp.unscheduled_bytes
            && self.buf.has_pending())
        .then_some(em.next_unscheduled);
        [em.next_slot(), emulate, em.timer_deadline(), unscheduled]
            .into_iter()
            .flatten()
            .min()
    }

    /// PPT: the first time the flow has data to send, look at the send buffer (§4.1
    /// identification) and, unless the flow is large, open the first LCP loop (§3.1 case 1,
    /// first RTT).
    fn ppt_first_data(&mut self, now: Nanos) {
        let rtt = self.ppt_rtt();
        let window = self.ppt_case1_window();
        let Some(p) = self.ppt.as_mut() else { return };
        if p.sched.is_identified() || !self.buf.has_pending() {
            return;
        }
        p.sched.identify(self.buf.written_bytes());
        self.stats.identified_large = p.sched.is_large();
        if !p.sched.is_large() {
            p.lcp.open_first(now, OpenCase::FirstRtt, window, rtt);
        }
    }

    /// PPT's LCP: an opportunistic packet from the tail of the send buffer when the loop
    /// lets one go (paced initial window, or released by a low-priority ACK).
    fn next_opportunistic(&mut self, now: Nanos) -> Option<Transmit> {
        let max_ahead = self.cfg.ppt.max_ahead_bytes;
        let p = self.ppt.as_mut()?;
        if !p.lcp.ready(now) {
            return None;
        }
        let limit = p.flow_ack.saturating_add(max_ahead);
        match self.buf.next_from_tail(limit) {
            Some(idx) => {
                p.lcp.on_sent(now);
                let t = self.send_segment(idx, SubFlow::Proactive, 0, now);
                self.buf.on_sent_opportunistic(idx);
                t
            }
            None => {
                p.lcp.exhausted();
                None
            }
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
        if let Some(p) = self.ppt.as_mut() {
            // Mirror-symmetric tagging (§4.2): the priority before this packet's bytes count.
            let level = match subflow {
                SubFlow::Reactive => p.sched.hcp_priority(),
                SubFlow::Proactive => p.sched.lcp_priority(),
            };
            t.class = TrafficClass::Priority(level);
            p.sched.on_sent(len);
        }
        Some(t)
    }

    /// HELLO retransmission timeout after `tries` retransmissions: doubles each time (as a TCP
    /// SYN's), so HELLOs lost in a congested queue (incast) are retried beyond the burst.
    fn hello_timeout(&self, tries: u32) -> Nanos {
        self.cfg.hello_timeout << tries.min(16)
    }

    fn rto_deadline(&self) -> Option<Nanos> {
        (self.reactive.outstanding() > 0).then(|| self.reactive.timer_anchor() + self.window.rto())
    }

    /// RFC 8985 §7.2: PTO = 2·SRTT after the last ACK progress (or the send that filled an
    /// empty pipe), armed only when it comes before the RTO, for the transports whose whole
    /// flow is one DCTCP window.
    fn tlp_deadline(&self) -> Option<Nanos> {
        let windowed = matches!(
            self.cfg.transport,
            TransportKind::Dctcp | TransportKind::Ppt
        );
        if !self.cfg.dctcp.tlp || !windowed || self.tlp != TlpState::Armed {
            return None;
        }
        let srtt = self.window.rtt.srtt()?;
        let rto = self.rto_deadline()?;
        let pto = self.reactive.timer_anchor() + 2 * srtt.max(1);
        (pto < rto).then_some(pto)
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

    fn recovery_deadline(&mut self) -> Option<Nanos> {
        // Before HELLO_ACK no credit can come: the HELLO retransmission is the timer then.
        if !self.cfg.uses_credits()
            || self.buf.is_complete()
            || matches!(self.handshake, Handshake::Pending { .. })
        {
            return None;
        }
        // Credits stopped: none is expected until the request that (re)starts this timer
        // (recovery_anchor) — a stream idle for long that gets new bytes must not find it
        // long expired before its request is even sent.
        if self.credit_state == CreditState::Stopped {
            return None;
        }
        let waiting = self.owes_proactive() || self.proactive.outstanding() > 0;
        let backoff = 1u64 << self.recovery_expiries.min(MAX_RECOVERY_BACKOFF);
        // Never longer than the longest RTO: a credit that arrives after a backed-off
        // silence enters the credit-gap estimate, which lengthens the next timeout, and
        // without a cap the two fed each other without bound.
        let cap = self.cfg.dctcp.rto_max.max(self.cfg.recovery_timeout);
        waiting.then(|| {
            self.recovery_anchor + self.recovery_timeout().saturating_mul(backoff).min(cap)
        })
    }

    /// Twice the average gap between credit arrivals (0 before two credits): how long this
    /// flow may see no credit while its credits are still flowing.
    fn two_credit_gaps(&self) -> Nanos {
        self.credit_gap.map_or(0, |g| (2.0 * g) as Nanos)
    }

    /// The recovery timeout before backoff: the configured floor, but never less than the
    /// path's RTO estimate (srtt + 4·rttvar) nor two credit gaps, so neither queueing delay
    /// nor a small share of the credits (an incast) makes packets in flight look lost.
    fn recovery_timeout(&self) -> Nanos {
        let rto = self
            .window
            .rtt
            .srtt()
            .map_or(0, |_| self.window.rtt.rto_estimate());
        let gaps = self.two_credit_gaps();
        self.cfg.recovery_timeout.max(rto).max(gaps)
    }

    /// Earliest time `handle_timeout` must run.
    pub fn poll_timeout(&mut self) -> Option<Nanos> {
        if self.error().is_some() || (self.buf.is_complete() && self.control.is_empty()) {
            return None;
        }
        let hello = match self.handshake {
            Handshake::Pending { at, tries } => Some(at + self.hello_timeout(tries)),
            _ => None,
        };
        let stop = match (self.credit_state, self.idle_since) {
            (CreditState::Requested, Some(t)) => Some(t + self.cfg.credit_stop_timeout),
            _ => None,
        };
        [
            hello,
            self.rto_deadline(),
            self.tlp_deadline(),
            self.recovery_deadline(),
            stop,
            self.lcp_deadline(),
            self.flashpass_deadline(),
            self.flashpass_data_deadline(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// PPT: the LCP's next paced packet (when there is data for it) or the loop's close.
    fn lcp_deadline(&self) -> Option<Nanos> {
        let p = self.ppt.as_ref()?;
        let rtt = self.ppt_rtt();
        let pace = p.lcp.next_pace().filter(|_| self.buf.has_pending());
        [pace, p.lcp.close_deadline(rtt)]
            .into_iter()
            .flatten()
            .min()
    }

    /// FlashPass: scheduled data not acknowledged within an RTO is lost (it goes back to the
    /// demand and gets a new slot).
    fn flashpass_data_deadline(&self) -> Option<Nanos> {
        (self.fp.is_some() && self.proactive.outstanding() > 0)
            .then(|| self.proactive.timer_anchor() + self.window.rto())
    }

    pub fn handle_timeout(&mut self, now: Nanos) {
        if self.error().is_some() {
            return;
        }
        if let Some(em) = self.fp.as_mut() {
            em.on_timer(now);
            self.stats.emulation = em.stats().clone();
            if self.flashpass_data_deadline().is_some_and(|d| now >= d) {
                self.mark_proactive_in_flight_lost(now);
            }
        }
        if let Handshake::Pending { at, tries } = self.handshake {
            if now >= at + self.hello_timeout(tries) {
                if tries >= self.cfg.hello_retries {
                    self.fail(SenderError::PeerNotResponding);
                    return;
                }
                self.handshake = Handshake::Pending {
                    at: now,
                    tries: tries + 1,
                };
                self.stats.hello_retransmissions += 1;
                let hello = self.hello();
                self.control.push_back(Packet::Hello(hello));
            }
        }
        if self.tlp_deadline().is_some_and(|d| now >= d) {
            // The probe: new data if there is any, else the last packet in flight again.
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
        if self.rto_deadline().is_some_and(|d| now >= d) {
            self.tlp = TlpState::Armed;
            // FlexPass: while credits are expected (or there is other data for them) the flow
            // is not waiting on this timer; the RTO only hands the unACKed reactive packets to
            // the proactive sub-flow. Credits are expected while they are requested from a
            // live receiver, i.e. the recovery timer has not expired since the peer last
            // spoke: the receiver may legitimately pace this flow down to one credit per
            // update period (many flows sharing its credits), far apart from the RTO.
            let credits_flowing = self.handshake == Handshake::Established
                && self.credit_state == CreditState::Requested
                && self.recovery_expiries == 0;
            // FlashPass: the pre-credit phase's tail-loss timer; unacknowledged unscheduled
            // packets become demand for the emulation (scheduled retransmission).
            let credit_work = (self.cfg.transport == TransportKind::FlexPass
                && (self.buf.has_pending() || self.buf.has_lost() || credits_flowing))
                || self.cfg.transport == TransportKind::FlashPass;
            let mut events = std::mem::take(&mut self.events);
            events.clear();
            self.reactive.mark_all_lost(now, &mut events);
            let moved = events
                .lost
                .iter()
                .filter(|&&(seq, seg)| self.buf.mark_lost(seg, SubFlow::Reactive, seq))
                .count();
            self.events = events;
            if moved > 0 {
                if credit_work {
                    self.stats.reactive_rto_reclassified += 1;
                } else {
                    self.stats.timeouts += 1;
                }
                self.stats.losses_reactive += moved as u64;
                let next = self.reactive.next_seq();
                self.window.on_timeout(next);
            }
        }
        if self.recovery_deadline().is_some_and(|d| now >= d) {
            self.mark_proactive_in_flight_lost(now);
            self.stats.recovery_timeouts += 1;
            self.recovery_expiries += 1;
            let silent = now.saturating_sub(self.last_heard);
            if silent >= self.cfg.give_up_timeout {
                self.fail(SenderError::NoProgress {
                    silent_ms: silent / 1_000_000,
                    expiries: self.recovery_expiries,
                });
                return;
            }
            self.send_credit_request(now);
        }
        if let (CreditState::Requested, Some(t)) = (self.credit_state, self.idle_since) {
            if now >= t + self.cfg.credit_stop_timeout && self.buf.is_idle() {
                self.send_credit_stop(now);
            }
        }
        self.ppt_close_loop(now);
        self.update_credit_state(now);
    }

    /// PPT §3.2: no low-priority ACK for 2 RTTs closes the LCP loop (its packets still
    /// unacknowledged are left to the HCP, which sends them when it reaches them).
    fn ppt_close_loop(&mut self, now: Nanos) {
        let rtt = self.ppt_rtt();
        let Some(p) = self.ppt.as_mut() else { return };
        if p.lcp.close_deadline(rtt).is_some_and(|d| now >= d) {
            p.lcp.close();
            self.stats.lcp = p.lcp.stats().clone();
        }
    }
}
