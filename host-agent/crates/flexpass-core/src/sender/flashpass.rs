//! FlashPass's sender: data in the slots its emulation earns (T + T_wait, §III-B), the
//! emulation packets themselves (ordinary, or over-provisioned and Not-ECT, §III-C), and
//! unscheduled data before the first slot (Aeolus's pre-credit phase, red).

use super::timers::Timer;
use super::{Rejected, Sender};
use crate::send_buffer::CreditChoice;
use crate::{Nanos, Transmit};
use flexpass_wire::{Ecn, EmulationCredit, Packet, SubFlow};

impl Sender {
    /// Packets the flow still needs slots for: never-sent segments and lost ones. Until the
    /// application finished writing, the remaining demand is unknown and taken as unbounded
    /// while anything waits to be sent, none otherwise (a stream never over-provisions;
    /// §III-C's footnote uses the send buffer only when the demand is unknown, and the
    /// buffer does not hold a T_wait's worth of data).
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

    /// Unscheduled data may still go out (the pre-credit phase's budget is not spent).
    fn unscheduled_allowed(&self) -> bool {
        let fp = &self.cfg.flashpass;
        fp.unscheduled && self.stats.bytes_unscheduled < fp.unscheduled_bytes
    }

    /// A data packet in every due slot, else the next paced emulation packet, else
    /// unscheduled data.
    pub(super) fn flashpass_transmit(&mut self, now: Nanos) -> Option<Transmit> {
        let proactive_retransmission = self.part.proactive_retransmission();
        while self
            .part
            .emulation_mut()
            .is_some_and(|em| em.take_due_slot(now))
        {
            // Lost, else never sent: unscheduled packets still in flight are not sent again
            // on a slot (SACK or the tail-loss timer declares them lost first).
            match self.buf.next_for_credit(proactive_retransmission) {
                Some((idx, choice)) => {
                    if choice == CreditChoice::ProactiveRetransmission {
                        self.stats.proactive_retransmissions += 1;
                    }
                    return self.send_segment(idx, SubFlow::Proactive, 0, now);
                }
                None => {
                    let em = self.part.emulation_mut()?;
                    em.on_slot_wasted();
                    self.stats.emulation = em.stats().clone();
                }
            }
        }
        let demand = self.flashpass_demand();
        let unscheduled = self.unscheduled_allowed();
        let max_emulation_rate = self.cfg.flashpass.max_emulation_rate;
        let em = self.part.emulation_mut()?;
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
        let next_unscheduled = em.next_unscheduled;
        if unscheduled && now >= next_unscheduled {
            if let Some(idx) = self.next_reactive_segment() {
                // Paced at line rate less the emulation share: one 1622-byte slot (a data
                // frame and an emulation packet) per packet, so the NIC never queues it.
                if let Some(em) = self.part.emulation_mut() {
                    em.next_unscheduled =
                        next_unscheduled.max(now) + (1e9 / max_emulation_rate) as Nanos;
                }
                let t = self.send_segment(idx, SubFlow::Reactive, 0, now);
                if let Some(Packet::Data(d)) = t.as_ref().map(|t| &t.packet) {
                    self.stats.bytes_unscheduled += d.payload.len() as u64;
                }
                return t;
            }
        }
        None
    }

    /// EMULATION_CREDIT: each grant licenses one data slot.
    pub(super) fn on_emulation_credit(
        &mut self,
        now: Nanos,
        c: &EmulationCredit,
    ) -> Result<(), Rejected> {
        let Some(em) = self.part.emulation_mut() else {
            return Err(Rejected::UnexpectedType(self.cfg.transport));
        };
        for g in &c.grants {
            em.on_grant(now, g.emu_seq, g.timestamp);
        }
        self.stats.emulation = em.stats().clone();
        self.established(now);
        Ok(())
    }

    /// The emulation's loss detection and Algorithm 1 run on every timeout.
    pub(super) fn run_emulation_control(&mut self, now: Nanos) {
        if let Some(em) = self.part.emulation_mut() {
            em.on_timer(now);
            self.stats.emulation = em.stats().clone();
        }
    }

    /// The next slot, the next emulation packet while there is demand, the emulation's loss
    /// / Algorithm 1 timer, the next unscheduled packet, and the loss of scheduled data not
    /// acknowledged within an RTO (it goes back to the demand and gets a new slot).
    pub(super) fn arm_flashpass_timers(&mut self) {
        let [slot, emulation, control, unscheduled, loss] = match self.part.emulation() {
            Some(em) => [
                em.next_slot(),
                em.classify(self.flashpass_demand()).map(|_| em.next_send()),
                em.timer_deadline(),
                (self.unscheduled_allowed() && self.buf.has_pending())
                    .then_some(em.next_unscheduled),
                (self.proactive.outstanding() > 0)
                    .then(|| self.proactive.timer_anchor() + self.window.rto()),
            ],
            None => [None; 5],
        };
        self.timers.set(Timer::Slot, slot);
        self.timers.set(Timer::Emulation, emulation);
        self.timers.set(Timer::EmulationControl, control);
        self.timers.set(Timer::Unscheduled, unscheduled);
        self.timers.set(Timer::ScheduledDataLoss, loss);
    }
}
