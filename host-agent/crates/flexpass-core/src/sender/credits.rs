//! The credit loop of the credit-based transports (FlexPass, ExpressPass): the sender half of
//! the credit request / stop state machine (ExpressPass Fig. 7), the credits waiting to be
//! spent, and the proactive sub-flow's recovery timer.

use super::timers::Timer;
use super::{Handshake, Rejected, Sender, SenderError, TransportPart};
use crate::{Nanos, MILLIS};
use flexpass_wire::{CreditRequest, Packet};
use std::collections::VecDeque;
use std::ops::ControlFlow;

/// Cap of the recovery timer's exponential backoff: 2^6 = 64 × `recovery_timeout`.
const MAX_RECOVERY_BACKOFF: u32 = 6;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum CreditState {
    /// Credits requested (HELLO or CREDIT_REQUEST sent); credits expected.
    Requested,
    /// CREDIT_STOP sent (or an IDLE HELLO).
    Stopped,
}

pub(super) struct CreditLoop {
    pub(super) state: CreditState,
    /// Credits received and not yet spent (their `credit_seq`).
    pub(super) queue: VecDeque<u32>,
    /// Start of the current proactive recovery-timer interval: the last proactive progress
    /// (a credit spent on data, a proactive ACK that acknowledged something, or a credit
    /// request). Wasted credits do not count: a lost tail packet of the proactive sub-flow
    /// leaves nothing to spend credits on, and only this timer finds it.
    pub(super) recovery_anchor: Nanos,
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
    pub(super) idle_since: Option<Nanos>,
    /// A credit arrived after CREDIT_STOP: the receiver did not get it (lost, or overtaken
    /// by an older CREDIT_REQUEST), so CREDIT_STOP is sent again, at most once per RTT.
    credit_after_stop: bool,
    last_stop_at: Option<Nanos>,
    /// The last HELLO sent said IDLE: no data yet, no credits until CREDIT_REQUEST.
    idle_hello: bool,
    /// FlexPass, credits stopped: when new bytes were left to the reactive sub-flow alone
    /// because its window sent them whole (`SenderConfig::resume_reactively`). Credits are
    /// requested if no ACK progress comes within `resume_timeout`.
    resumed_at: Option<Nanos>,
}

impl CreditLoop {
    /// The HELLO requests credits.
    pub(super) fn new(now: Nanos) -> Self {
        CreditLoop {
            state: CreditState::Requested,
            queue: VecDeque::new(),
            recovery_anchor: now,
            recovery_expiries: 0,
            last_heard: now,
            last_credit_at: now,
            credit_gap: None,
            idle_since: None,
            credit_after_stop: false,
            last_stop_at: None,
            idle_hello: false,
            resumed_at: None,
        }
    }

    /// A packet from the peer was accepted: it is alive.
    pub(super) fn on_heard(&mut self, now: Nanos) {
        self.recovery_expiries = 0;
        self.last_heard = self.last_heard.max(now);
    }

    /// Credits are expected: requested, and the recovery timer has not expired since the
    /// peer last spoke.
    pub(super) fn is_flowing(&self) -> bool {
        self.state == CreditState::Requested && self.recovery_expiries == 0
    }

    /// A HELLO leaves, saying IDLE or not. A flow with nothing written yet says IDLE and
    /// waits for data, as after CREDIT_STOP (its first bytes send CREDIT_REQUEST once
    /// established), so opening many idle connections costs no credits (docs/protocol.md
    /// §11, "Idle HELLO").
    pub(super) fn hello_leaves(&mut self, idle: bool) {
        if idle && self.state == CreditState::Requested {
            self.state = CreditState::Stopped;
        } else if !idle && self.idle_hello && self.state == CreditState::Stopped {
            // A HELLO sent again after data arrived: the receiver credits on this one.
            self.state = CreditState::Requested;
        }
        self.idle_hello = idle;
    }
}

/// What the credit state machine sends.
enum CreditSignal {
    Request,
    Stop,
}

impl Sender {
    pub(super) fn on_credit(&mut self, now: Nanos, credit_seq: u32) -> Result<(), Rejected> {
        let received = self.stats.credits_received;
        let Some(c) = self.part.credits_mut() else {
            return Err(Rejected::UnexpectedType(self.cfg.transport));
        };
        if received > 0 {
            let gap = now.saturating_sub(c.last_credit_at) as f64;
            c.credit_gap = Some(c.credit_gap.map_or(gap, |g| 0.875 * g + 0.125 * gap));
        }
        c.last_credit_at = now;
        c.credit_after_stop |= c.state == CreditState::Stopped;
        self.stats.credits_received += 1;
        self.established(now);
        if self.error().is_some() || self.buf.is_complete() {
            self.stats.credits_wasted += 1;
        } else if let Some(c) = self.part.credits_mut() {
            c.queue.push_back(credit_seq);
        }
        Ok(())
    }

    /// Credit request / stop state machine. A finished flow stops credits at once; a stream
    /// with nothing to send stops them after `credit_stop_timeout`; new data re-requests.
    pub(super) fn update_credit_state(&mut self, now: Nanos) {
        if self.part.credits().is_none() || self.error().is_some() {
            return;
        }
        let complete = self.buf.is_complete();
        let busy = !complete && (self.owes_proactive() || self.proactive.outstanding() > 0);
        let idle = self.buf.is_idle();
        let established = self.handshake == Handshake::Established;
        // Asked only with credits stopped (not per packet of a flow whose credits flow).
        let reactive_covers = self
            .part
            .credits()
            .is_some_and(|c| c.state == CreditState::Stopped)
            && self.reactive_covers_burst();
        // Credits already in flight when a CREDIT_STOP left come for up to an RTT; the RTT
        // estimate may be inflated, e.g. by a late handshake, so at most rto_max.
        let rtt = self
            .window
            .rtt
            .srtt()
            .unwrap_or(self.cfg.recovery_timeout)
            .min(self.cfg.dctcp.rto_max);
        let Some(c) = self.part.credits_mut() else {
            return;
        };
        let credit_after_stop = std::mem::take(&mut c.credit_after_stop);
        let signal = match c.state {
            CreditState::Requested if complete => Some(CreditSignal::Stop),
            CreditState::Requested => {
                if busy || !idle {
                    c.idle_since = None;
                } else if c.idle_since.is_none() {
                    c.idle_since = Some(now);
                }
                None
            }
            CreditState::Stopped if busy && established => {
                if reactive_covers {
                    // The burst leaves whole on the reactive sub-flow: credits only if it is
                    // not acknowledged in time (the recovery timer) or a loss shows.
                    c.resumed_at.get_or_insert(now);
                    None
                } else {
                    // With its credits stopped the flow waited for nothing (an idle flow may
                    // stay so for hours): the silence that can fail it (give_up_timeout)
                    // starts now.
                    c.last_heard = c.last_heard.max(now);
                    Some(CreditSignal::Request)
                }
            }
            // Credits keep coming although nothing needs them: say CREDIT_STOP again.
            CreditState::Stopped => {
                c.resumed_at = None; // nothing owed: a reactive burst is acknowledged
                (credit_after_stop && c.last_stop_at.is_none_or(|t| now >= t + rtt))
                    .then_some(CreditSignal::Stop)
            }
        };
        match signal {
            Some(CreditSignal::Stop) => self.send_credit_stop(now),
            Some(CreditSignal::Request) => self.send_credit_request(now),
            None => {}
        }
    }

    pub(super) fn send_credit_stop(&mut self, now: Nanos) {
        self.control.push_back(Packet::CreditStop {
            flow_id: self.flow_id,
        });
        self.stats.credit_stops += 1;
        if let Some(c) = self.part.credits_mut() {
            c.state = CreditState::Stopped;
            c.idle_since = None;
            c.last_stop_at = Some(now);
        }
    }

    fn send_credit_request(&mut self, now: Nanos) {
        let pending_bytes = self.buf.pending_bytes();
        self.control.push_back(Packet::CreditRequest(CreditRequest {
            flow_id: self.flow_id,
            pending_bytes,
        }));
        self.stats.credit_requests += 1;
        if let Some(c) = self.part.credits_mut() {
            c.state = CreditState::Requested;
            c.recovery_anchor = now;
            c.resumed_at = None;
        }
    }

    /// FlexPass with `resume_reactively` and nothing lost: the reactive window has room for
    /// every byte waiting to be sent (a small request or reply on a connection whose credits
    /// were stopped). The paper's flows are one burst each and request credits at their
    /// start; a persistent connection's later bursts that the window sends whole need
    /// credits only to recover a loss. (A credit that came after CREDIT_STOP may still send
    /// a packet proactively; the burst's timer covers it as it covers the reactive ones.)
    fn reactive_covers_burst(&mut self) -> bool {
        if !self.cfg.resume_reactively
            || !matches!(self.part, TransportPart::FlexPass(_))
            || self.buf.has_lost()
        {
            return false;
        }
        let mss = self.cfg.mss.max(1) as u64;
        let packets = self
            .buf
            .pending_bytes()
            .div_ceil(mss)
            .max(u64::from(self.buf.has_pending()));
        let room = self.window.cwnd().max(1.0) - f64::from(self.reactive.outstanding());
        packets as f64 <= room.floor()
    }

    /// `Timer::Recovery` and `Timer::CreditStop`.
    pub(super) fn arm_credit_timers(&mut self) {
        let (recovery, stop) = match self.part.credits() {
            Some(c) => (self.recovery_deadline(c), self.credit_stop_deadline(c)),
            None => (None, None),
        };
        // Armed only while data is owed. Asked last: `owes_proactive` trims the send
        // buffer's queue of reactive segments, and the order of that queue is behaviour.
        let recovery =
            recovery.filter(|_| self.owes_proactive() || self.proactive.outstanding() > 0);
        self.timers.set(Timer::Recovery, recovery);
        self.timers.set(Timer::CreditStop, stop);
    }

    /// The recovery timer's deadline if data were owed.
    fn recovery_deadline(&self, c: &CreditLoop) -> Option<Nanos> {
        // Before HELLO_ACK no credit can come: the HELLO retransmission is the timer then.
        if self.buf.is_complete() || matches!(self.handshake, Handshake::Pending { .. }) {
            return None;
        }
        // Credits stopped: none is expected until the request that (re)starts this timer
        // (recovery_anchor) — a stream idle for long that gets new bytes must not find it
        // long expired before its request is even sent.
        if c.state == CreditState::Stopped {
            // A burst left to the reactive sub-flow: credits if its ACKs stop coming for
            // longer than the path allows (a tail loss; dupACKs show other losses sooner).
            // From the burst, or the last ACK progress (small writes that keep a stream
            // busy while every one is acknowledged ask nothing).
            return c.resumed_at.map(|t| {
                let progress = match self.reactive.outstanding() {
                    0 => t,
                    _ => t.max(self.reactive.timer_anchor()),
                };
                progress + self.resume_timeout()
            });
        }
        let backoff = 1u64 << c.recovery_expiries.min(MAX_RECOVERY_BACKOFF);
        // Never longer than the longest RTO: a credit that arrives after a backed-off
        // silence enters the credit-gap estimate, which lengthens the next timeout, and
        // without a cap the two fed each other without bound.
        let cap = self.cfg.dctcp.rto_max.max(self.cfg.recovery_timeout);
        Some(c.recovery_anchor + self.recovery_timeout(c).saturating_mul(backoff).min(cap))
    }

    fn credit_stop_deadline(&self, c: &CreditLoop) -> Option<Nanos> {
        match (c.state, c.idle_since) {
            (CreditState::Requested, Some(t)) => Some(t + self.cfg.credit_stop_timeout),
            _ => None,
        }
    }

    /// The recovery timeout before backoff: the configured floor, but never less than the
    /// path's RTO estimate (srtt + 4·rttvar) nor two credit gaps (the time this flow may
    /// see no credit while its credits are still flowing), so neither queueing delay nor a
    /// small share of the credits (an incast) makes packets in flight look lost.
    fn recovery_timeout(&self, c: &CreditLoop) -> Nanos {
        let rto = self
            .window
            .rtt
            .srtt()
            .map_or(0, |_| self.window.rtt.rto_estimate());
        let gaps = c.credit_gap.map_or(0, |g| (2.0 * g) as Nanos);
        self.cfg.recovery_timeout.max(rto).max(gaps)
    }

    /// How long a burst left to the reactive sub-flow waits for its ACKs before credits are
    /// requested to retransmit it: 2·srtt + 4·rttvar (a tail-loss probe's 2·srtt, RFC 8985
    /// §7.2, with room for jitter; no RTO floor), the recovery timeout before any sample.
    fn resume_timeout(&self) -> Nanos {
        match self.window.rtt.srtt() {
            Some(srtt) => srtt + self.window.rtt.rto_estimate().max(1),
            None => self.cfg.recovery_timeout,
        }
    }

    /// Every proactive packet in flight is lost; credits are requested again, unless the
    /// peer has been silent for `give_up_timeout` (the flow fails).
    pub(super) fn on_recovery_timeout(&mut self, now: Nanos) -> ControlFlow<()> {
        if let Some(c) = self.part.credits_mut() {
            if c.state == CreditState::Stopped && c.resumed_at.is_some() {
                // The reactive burst is not acknowledged in time: credits retransmit it.
                c.last_heard = c.last_heard.max(now);
                self.send_credit_request(now);
                return ControlFlow::Continue(());
            }
        }
        self.mark_proactive_in_flight_lost(now);
        self.stats.recovery_timeouts += 1;
        let Some(c) = self.part.credits_mut() else {
            return ControlFlow::Continue(());
        };
        c.recovery_expiries += 1;
        let silent = now.saturating_sub(c.last_heard);
        if silent >= self.cfg.give_up_timeout {
            let expiries = c.recovery_expiries;
            self.fail(SenderError::NoProgress {
                silent_ms: silent / MILLIS,
                expiries,
            });
            return ControlFlow::Break(());
        }
        self.send_credit_request(now);
        ControlFlow::Continue(())
    }
}
