//! Per-sub-flow send scoreboard (FlexPass §4.2 "Loss recovery"): every transmission on a
//! sub-flow takes the next number of that sub-flow's own sequence space; the receiver
//! acknowledges per packet with a cumulative ACK plus SACK blocks in that space, and a packet
//! is declared lost once `dupthresh` later packets of the same sub-flow are acknowledged
//! (FlexPass assumes no reordering within a path, so its sub-flows use dupthresh = 1).
//!
//! Sub-flow sequence numbers start at 0 and never wrap (2^32 − 1 packets per sub-flow).

use crate::Nanos;
use flexpass_wire::Ack;
use std::collections::VecDeque;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SlotState {
    /// Sent, neither acknowledged nor declared lost: counts towards the pipe.
    Outstanding,
    Acked,
    Lost,
    /// The segment was acknowledged through another transmission (e.g. the other sub-flow).
    Resolved,
}

#[derive(Clone, Copy, Debug)]
struct Slot {
    segment: u64,
    state: SlotState,
}

/// What one ACK changed, in sub-flow sequence order.
#[derive(Clone, Debug, Default)]
pub struct AckEvents {
    /// (sub-flow seq, segment, was outstanding until now)
    pub acked: Vec<(u32, u64, bool)>,
    /// (sub-flow seq, segment) newly declared lost.
    pub lost: Vec<(u32, u64)>,
}

impl AckEvents {
    pub fn clear(&mut self) {
        self.acked.clear();
        self.lost.clear();
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AckError {
    #[error("ACK acknowledges sub-flow sequence {seq} but only {next_seq} packets were sent")]
    UnsentData { seq: u32, next_seq: u32 },
    #[error("sub-flow sequence space exhausted")]
    SequenceExhausted,
}

#[derive(Clone, Debug)]
pub struct Scoreboard {
    /// Sequence number of `slots[0]`.
    base: u32,
    slots: VecDeque<Slot>,
    next_seq: u32,
    cum_ack: u32,
    highest_acked: Option<u32>,
    /// Every sequence below this has been examined for loss.
    loss_scan: u32,
    dupthresh: u32,
    outstanding: u32,
    /// Start of the current retransmission-timer interval: last ACK progress, or the send
    /// that made the pipe non-empty.
    timer_anchor: Nanos,
}

impl Scoreboard {
    pub fn new(dupthresh: u32) -> Self {
        Scoreboard {
            base: 0,
            slots: VecDeque::new(),
            next_seq: 0,
            cum_ack: 0,
            highest_acked: None,
            loss_scan: 0,
            dupthresh,
            outstanding: 0,
            timer_anchor: 0,
        }
    }

    pub fn next_seq(&self) -> u32 {
        self.next_seq
    }

    /// Cumulative ACK applied so far: the highest `cum_ack` of an accepted ACK (never
    /// decreases; packets below it may also have been acknowledged through `ack_seq`/SACK).
    pub fn cum_ack(&self) -> u32 {
        self.cum_ack
    }

    /// Packets in flight: sent and neither acknowledged nor declared lost (the "pipe").
    pub fn outstanding(&self) -> u32 {
        self.outstanding
    }

    pub fn timer_anchor(&self) -> Nanos {
        self.timer_anchor
    }

    /// Record a transmission of `segment`; returns its sub-flow sequence number.
    pub fn on_send(&mut self, segment: u64, now: Nanos) -> Result<u32, AckError> {
        if self.next_seq == u32::MAX {
            return Err(AckError::SequenceExhausted);
        }
        if self.outstanding == 0 {
            self.timer_anchor = now;
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        self.slots.push_back(Slot {
            segment,
            state: SlotState::Outstanding,
        });
        self.outstanding += 1;
        Ok(seq)
    }

    fn slot_mut(&mut self, seq: u32) -> Option<&mut Slot> {
        if seq < self.base {
            return None;
        }
        self.slots.get_mut((seq - self.base) as usize)
    }

    fn ack_one(&mut self, seq: u32, events: &mut AckEvents) {
        let Some(slot) = self.slot_mut(seq) else {
            return;
        };
        let was_outstanding = match slot.state {
            SlotState::Acked => return,
            SlotState::Outstanding => true,
            SlotState::Lost | SlotState::Resolved => false,
        };
        slot.state = SlotState::Acked;
        let segment = slot.segment;
        if was_outstanding {
            self.outstanding -= 1;
        }
        events.acked.push((seq, segment, was_outstanding));
    }

    /// Apply one ACK. An ACK that covers packets never sent is rejected whole (a forged or
    /// corrupted ACK must not acknowledge data the receiver cannot have).
    pub fn on_ack(
        &mut self,
        ack: &Ack,
        now: Nanos,
        events: &mut AckEvents,
    ) -> Result<(), AckError> {
        let unsent = |seq: u32| AckError::UnsentData {
            seq,
            next_seq: self.next_seq,
        };
        if ack.cum_ack > self.next_seq {
            return Err(unsent(ack.cum_ack - 1));
        }
        if ack.ack_seq >= self.next_seq {
            return Err(unsent(ack.ack_seq));
        }
        if let Some(&(_, end)) = ack
            .sack
            .as_slice()
            .iter()
            .find(|&&(_, end)| end > self.next_seq)
        {
            return Err(unsent(end - 1));
        }
        let before = events.acked.len();
        self.ack_one(ack.ack_seq, events);
        if ack.cum_ack > self.cum_ack {
            for seq in self.cum_ack.max(self.base)..ack.cum_ack {
                self.ack_one(seq, events);
            }
            self.cum_ack = ack.cum_ack;
        }
        for &(start, end) in ack.sack.as_slice() {
            for seq in start.max(self.base)..end {
                self.ack_one(seq, events);
            }
        }
        let mut highest = ack.ack_seq;
        if ack.cum_ack > 0 {
            highest = highest.max(ack.cum_ack - 1);
        }
        for &(_, end) in ack.sack.as_slice() {
            highest = highest.max(end - 1);
        }
        self.highest_acked = Some(self.highest_acked.map_or(highest, |h| h.max(highest)));
        if events.acked.len() > before {
            self.timer_anchor = now;
        }
        self.detect_losses(events);
        self.trim();
        Ok(())
    }

    /// Declare lost every outstanding packet at least `dupthresh` below the highest ACKed one.
    fn detect_losses(&mut self, events: &mut AckEvents) {
        let Some(highest) = self.highest_acked else {
            return;
        };
        if highest < self.dupthresh {
            return;
        }
        let limit = highest - self.dupthresh + 1; // seqs < limit are candidates
        let from = self.loss_scan.max(self.base);
        for seq in from..limit {
            let idx = (seq - self.base) as usize;
            let slot = &mut self.slots[idx];
            if slot.state == SlotState::Outstanding {
                slot.state = SlotState::Lost;
                self.outstanding -= 1;
                events.lost.push((seq, slot.segment));
            }
        }
        self.loss_scan = self.loss_scan.max(limit);
    }

    /// The segment sent as `seq` was acknowledged through another transmission.
    pub fn resolve(&mut self, seq: u32) {
        if let Some(slot) = self.slot_mut(seq) {
            if slot.state == SlotState::Outstanding {
                slot.state = SlotState::Resolved;
                self.outstanding -= 1;
            }
        }
        self.trim();
    }

    /// The highest sequence still outstanding (in flight), if any.
    pub fn last_outstanding(&self) -> Option<u32> {
        self.slots
            .iter()
            .rposition(|s| s.state == SlotState::Outstanding)
            .map(|i| self.base + i as u32)
    }

    /// Declare `seq` lost (a tail-loss probe sends its segment again).
    pub fn mark_lost(&mut self, seq: u32, events: &mut AckEvents) {
        if let Some(slot) = self.slot_mut(seq) {
            if slot.state == SlotState::Outstanding {
                slot.state = SlotState::Lost;
                let segment = slot.segment;
                self.outstanding -= 1;
                events.lost.push((seq, segment));
            }
        }
        self.trim();
    }

    /// Declare lost every packet still outstanding that was sent before `seq` (RACK, RFC
    /// 8985 §6.2: a packet sent later was delivered, so these were not merely delayed).
    pub fn mark_lost_before(&mut self, seq: u32, events: &mut AckEvents) {
        let end = seq.saturating_sub(self.base) as usize;
        for (i, slot) in self.slots.iter_mut().enumerate().take(end) {
            if slot.state == SlotState::Outstanding {
                slot.state = SlotState::Lost;
                self.outstanding -= 1;
                events.lost.push((self.base + i as u32, slot.segment));
            }
        }
        self.trim();
    }

    /// Retransmission timer: every outstanding packet is lost.
    pub fn mark_all_lost(&mut self, now: Nanos, events: &mut AckEvents) {
        for (i, slot) in self.slots.iter_mut().enumerate() {
            if slot.state == SlotState::Outstanding {
                slot.state = SlotState::Lost;
                events.lost.push((self.base + i as u32, slot.segment));
            }
        }
        self.outstanding = 0;
        self.timer_anchor = now;
        self.trim();
    }

    fn trim(&mut self) {
        while let Some(front) = self.slots.front() {
            if front.state == SlotState::Outstanding {
                break;
            }
            self.slots.pop_front();
            self.base += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flexpass_wire::{SackBlocks, SubFlow};

    fn ack(cum: u32, ack_seq: u32, sack: &[(u32, u32)]) -> Ack {
        let mut blocks = SackBlocks::new();
        for &(s, e) in sack {
            blocks.push(s, e);
        }
        Ack {
            flow_id: 1,
            subflow: SubFlow::Reactive,
            ece: false,
            cum_ack: cum,
            ack_seq,
            tsecr: 0,
            flow_ack: 0,
            sack: blocks,
        }
    }

    #[test]
    fn hole_is_lost_with_dupthresh_one() {
        let mut sb = Scoreboard::new(1);
        for seg in 0..5 {
            sb.on_send(seg, 0).unwrap();
        }
        let mut ev = AckEvents::default();
        sb.on_ack(&ack(1, 0, &[]), 1, &mut ev).unwrap();
        assert_eq!(ev.acked, vec![(0, 0, true)]);
        ev.clear();
        // Packet 1 lost, 2 arrives.
        sb.on_ack(&ack(1, 2, &[(2, 3)]), 2, &mut ev).unwrap();
        assert_eq!(ev.lost, vec![(1, 1)]);
        assert_eq!(sb.outstanding(), 2);
    }

    #[test]
    fn dupthresh_three_waits_for_three() {
        let mut sb = Scoreboard::new(3);
        for seg in 0..6 {
            sb.on_send(seg, 0).unwrap();
        }
        let mut ev = AckEvents::default();
        sb.on_ack(&ack(0, 1, &[(1, 2)]), 1, &mut ev).unwrap();
        sb.on_ack(&ack(0, 2, &[(1, 3)]), 1, &mut ev).unwrap();
        assert!(ev.lost.is_empty());
        sb.on_ack(&ack(0, 3, &[(1, 4)]), 1, &mut ev).unwrap();
        assert_eq!(ev.lost, vec![(0, 0)]);
    }

    #[test]
    fn lost_acks_recovered_by_cumulative_ack() {
        let mut sb = Scoreboard::new(1);
        for seg in 10..14 {
            sb.on_send(seg, 0).unwrap();
        }
        let mut ev = AckEvents::default();
        sb.on_ack(&ack(4, 3, &[]), 1, &mut ev).unwrap();
        assert_eq!(ev.acked.len(), 4);
        assert!(ev.lost.is_empty());
        assert_eq!(sb.outstanding(), 0);
    }

    #[test]
    fn forged_ack_for_unsent_data_is_rejected_without_effect() {
        let mut sb = Scoreboard::new(1);
        sb.on_send(0, 0).unwrap();
        let mut ev = AckEvents::default();
        assert!(sb.on_ack(&ack(5, 0, &[]), 1, &mut ev).is_err());
        assert!(sb.on_ack(&ack(0, 1, &[]), 1, &mut ev).is_err());
        assert!(sb.on_ack(&ack(0, 0, &[(1, 9)]), 1, &mut ev).is_err());
        assert!(ev.acked.is_empty());
        assert_eq!(sb.outstanding(), 1);
    }

    #[test]
    fn resolve_and_timeout() {
        let mut sb = Scoreboard::new(1);
        for seg in 0..3 {
            sb.on_send(seg, 0).unwrap();
        }
        sb.resolve(1);
        assert_eq!(sb.outstanding(), 2);
        let mut ev = AckEvents::default();
        sb.mark_all_lost(5, &mut ev);
        assert_eq!(ev.lost, vec![(0, 0), (2, 2)]);
        assert_eq!(sb.outstanding(), 0);
        // A late ACK of a packet declared lost still acknowledges it (spurious loss).
        ev.clear();
        sb.on_send(3, 6).unwrap();
        sb.on_ack(&ack(0, 3, &[]), 7, &mut ev).unwrap();
        assert_eq!(ev.acked, vec![(3, 3, true)]);
    }
}
