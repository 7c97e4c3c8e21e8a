//! The single FlexPass send buffer and its sub-flow scheduler (FlexPass §4.2, Fig. 4).
//!
//! Per-packet states: **Pending** (application bytes never transmitted; they are cut into
//! segments only when a sub-flow takes them, like MPTCP's shared send buffer),
//! **SentAsReactive**, **SentAsProactive**, **Lost**, **Acked**. On a credit the proactive
//! sub-flow takes Lost first, else Pending, else the oldest unACKed SentAsReactive segment
//! ("proactive retransmission", only when nothing is Lost or Pending). The reactive
//! sub-flow takes only Pending in FlexPass (it never retransmits); standalone DCTCP
//! retransmits its Lost segments on the same sub-flow.
//!
//! PPT (SIGCOMM'24 §3) sends from both ends of the buffer: the HCP from the first byte not
//! yet acknowledged that it has not sent itself (`next_for_hcp`), the LCP opportunistic
//! packets from the last unsent byte below the receiver's limit (`next_from_tail`). Taking
//! the tail cuts every pending byte below that limit into segments (one MSS each: the
//! metadata ahead of the HCP is bounded by the limit / MSS); segments cut but not yet sent
//! stay Pending in `unsent`, keyed by flow offset. Opportunistic packets are never retransmitted by the LCP and never declared lost:
//! as in the paper's kernel implementation, where they stay in the write queue beyond
//! `snd_nxt` until SACKed, the HCP sends again those still unacknowledged when it reaches
//! them in order ("SACK across both loops").

use bytes::{Bytes, BytesMut};
use flexpass_wire::SubFlow;
use std::collections::{BTreeMap, BTreeSet, VecDeque};

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum SegmentState {
    Pending,
    SentAsReactive,
    SentAsProactive,
    Lost,
    Acked,
}

#[derive(Clone, Debug)]
pub struct Segment {
    pub flow_seq: u64,
    pub payload: Bytes,
    pub fin: bool,
    pub state: SegmentState,
    /// Sub-flow sequence of the latest transmission on each sub-flow.
    pub reactive_seq: Option<u32>,
    pub proactive_seq: Option<u32>,
    pub transmissions: u32,
}

impl Segment {
    pub fn end(&self) -> u64 {
        self.flow_seq + self.payload.len() as u64
    }
    pub fn seq_on(&self, subflow: SubFlow) -> Option<u32> {
        match subflow {
            SubFlow::Proactive => self.proactive_seq,
            SubFlow::Reactive => self.reactive_seq,
        }
    }
}

/// Which rule picked the segment for a credit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CreditChoice {
    Lost,
    Pending,
    ProactiveRetransmission,
}

#[derive(Clone, Debug)]
pub struct SendBuffer {
    mss: usize,
    /// Segments cut so far and not yet trimmed; `segs[0]` has index `base`.
    segs: VecDeque<Segment>,
    base: u64,
    /// Pending application bytes, not yet cut into segments.
    pending: VecDeque<Bytes>,
    pending_bytes: u64,
    /// Flow offset of the first pending byte.
    next_flow_seq: u64,
    /// Segments cut but never sent (Pending), by flow offset → index (PPT's tail sending).
    unsent: BTreeMap<u64, u64>,
    unsent_bytes: u64,
    /// PPT: segments sent only by the LCP and not acknowledged, by flow offset → index.
    lcp_unacked: BTreeMap<u64, u64>,
    fin_requested: bool,
    fin_cut: bool,
    lost: BTreeSet<u64>,
    /// Segments in the order they were sent as reactive; entries whose segment has moved on
    /// are skipped lazily.
    reactive_order: VecDeque<u64>,
    /// Segments `< flow_acked_prefix` are all ACKed (by index).
    flow_acked_prefix: u64,
    acked_bytes: u64,
}

impl SendBuffer {
    pub fn new(mss: usize) -> Self {
        SendBuffer {
            mss,
            segs: VecDeque::new(),
            base: 0,
            pending: VecDeque::new(),
            pending_bytes: 0,
            next_flow_seq: 0,
            unsent: BTreeMap::new(),
            unsent_bytes: 0,
            lcp_unacked: BTreeMap::new(),
            fin_requested: false,
            fin_cut: false,
            lost: BTreeSet::new(),
            reactive_order: VecDeque::new(),
            flow_acked_prefix: 0,
            acked_bytes: 0,
        }
    }

    /// Append application bytes. Ignored after `finish`.
    pub fn write(&mut self, data: Bytes) -> bool {
        if self.fin_requested {
            return false;
        }
        if !data.is_empty() {
            self.pending_bytes += data.len() as u64;
            self.pending.push_back(data);
        }
        true
    }

    /// Payload bytes of a full segment.
    pub fn segment_size(&self) -> usize {
        self.mss
    }

    /// No more application bytes: the last segment carries FIN.
    pub fn finish(&mut self) {
        self.fin_requested = true;
    }

    pub fn fin_requested(&self) -> bool {
        self.fin_requested
    }

    /// Bytes never transmitted: pending application bytes and cut-but-unsent segments.
    pub fn pending_bytes(&self) -> u64 {
        self.pending_bytes + self.unsent_bytes
    }

    /// Bytes handed to the buffer so far (pending or cut).
    pub fn written_bytes(&self) -> u64 {
        self.next_flow_seq + self.pending_bytes
    }

    /// What an ACK's `flow_ack` may cover: the end of the data cut into segments so far, or
    /// the first byte never sent if a cut segment is still unsent (PPT).
    pub fn sent_limit(&self) -> u64 {
        self.unsent
            .first_key_value()
            .map_or(self.next_flow_seq, |(&seq, _)| seq)
    }

    pub fn acked_bytes(&self) -> u64 {
        self.acked_bytes
    }

    pub fn has_pending(&self) -> bool {
        self.pending_bytes > 0 || (self.fin_requested && !self.fin_cut) || !self.unsent.is_empty()
    }

    /// Segments waiting for retransmission.
    pub fn lost_count(&self) -> usize {
        self.lost.len()
    }

    pub fn has_lost(&self) -> bool {
        !self.lost.is_empty()
    }

    pub fn has_unacked_reactive(&mut self) -> bool {
        self.skip_stale_reactive();
        !self.reactive_order.is_empty()
    }

    /// Every byte written, and the FIN, acknowledged.
    pub fn is_complete(&self) -> bool {
        self.fin_requested && self.fin_cut && self.pending_bytes == 0 && self.segs.is_empty()
    }

    /// Nothing sent is waiting for an ACK and nothing is waiting to be sent.
    pub fn is_idle(&self) -> bool {
        self.segs.is_empty() && !self.has_pending()
    }

    pub fn get(&self, idx: u64) -> Option<&Segment> {
        idx.checked_sub(self.base)
            .and_then(|i| self.segs.get(i as usize))
    }

    fn get_mut(&mut self, idx: u64) -> Option<&mut Segment> {
        idx.checked_sub(self.base)
            .and_then(|i| self.segs.get_mut(i as usize))
    }

    /// Cut the next Pending segment (up to one MSS).
    fn cut_pending(&mut self) -> Option<u64> {
        if self.pending_bytes == 0 && (self.fin_cut || !self.fin_requested) {
            return None;
        }
        let take = (self.pending_bytes as usize).min(self.mss);
        let payload = if take == 0 {
            Bytes::new()
        } else if self.pending.front().map_or(0, |b| b.len()) >= take {
            let front = self.pending.front_mut().expect("pending non-empty");
            let p = front.split_to(take);
            if front.is_empty() {
                self.pending.pop_front();
            }
            p
        } else {
            let mut buf = BytesMut::with_capacity(take);
            while buf.len() < take {
                let front = self
                    .pending
                    .front_mut()
                    .expect("pending_bytes counts these");
                let n = (take - buf.len()).min(front.len());
                buf.extend_from_slice(&front.split_to(n));
                if front.is_empty() {
                    self.pending.pop_front();
                }
            }
            buf.freeze()
        };
        self.pending_bytes -= take as u64;
        let fin = self.fin_requested && self.pending_bytes == 0;
        self.fin_cut |= fin;
        let idx = self.base + self.segs.len() as u64;
        self.segs.push_back(Segment {
            flow_seq: self.next_flow_seq,
            payload,
            fin,
            state: SegmentState::Pending,
            reactive_seq: None,
            proactive_seq: None,
            transmissions: 0,
        });
        self.next_flow_seq += take as u64;
        Some(idx)
    }

    fn skip_stale_reactive(&mut self) {
        while let Some(&idx) = self.reactive_order.front() {
            if self
                .get(idx)
                .is_some_and(|s| s.state == SegmentState::SentAsReactive)
            {
                break;
            }
            self.reactive_order.pop_front();
        }
    }

    /// The first Pending segment: a cut-but-unsent one, else the next cut.
    fn next_pending(&mut self) -> Option<u64> {
        if let Some((_, idx)) = self.unsent.pop_first() {
            self.unsent_bytes -= self.get(idx).map_or(0, |s| s.payload.len() as u64);
            return Some(idx);
        }
        self.cut_pending()
    }

    /// PPT's LCP: the last Pending segment that ends within `limit` (the flow offset up to
    /// which the receiver can buffer), cutting the pending bytes below `limit` first (the
    /// segments ahead of the HCP are bounded by the receiver's buffer, not by the write).
    pub fn next_from_tail(&mut self, limit: u64) -> Option<u64> {
        while self.next_flow_seq < limit {
            let Some(idx) = self.cut_pending() else {
                break;
            };
            let seg = self.get(idx).expect("just cut");
            let (seq, len) = (seg.flow_seq, seg.payload.len() as u64);
            self.unsent_bytes += len;
            self.unsent.insert(seq, idx);
        }
        let (&seq, &idx) = self.unsent.range(..limit).next_back()?;
        let seg = self.get(idx).expect("unsent segments are held");
        if seg.end() > limit {
            // The segment straddles the limit: the one before it, if any.
            let (&seq, &idx) = self.unsent.range(..seq).next_back()?;
            return self.take_unsent(seq, idx);
        }
        self.take_unsent(seq, idx)
    }

    /// PPT's HCP: its own losses first, then, in flow order, the first segment neither it
    /// nor an acknowledgement has covered: unsent, or sent only by the LCP and not yet
    /// acknowledged.
    pub fn next_for_hcp(&mut self) -> Option<u64> {
        if let Some(idx) = self.lost.pop_first() {
            return Some(idx);
        }
        let unsent = self.unsent.first_key_value().map(|(&k, _)| k);
        let lcp = self.lcp_unacked.first_key_value().map(|(&k, _)| k);
        match (unsent, lcp) {
            (None, None) => self.cut_pending(),
            (Some(u), Some(l)) if l < u => self.lcp_unacked.pop_first().map(|(_, i)| i),
            (None, Some(_)) => self.lcp_unacked.pop_first().map(|(_, i)| i),
            (Some(_), _) => self.next_pending(),
        }
    }

    /// PPT: segment `idx` went out as an opportunistic (LCP) packet.
    pub fn on_sent_opportunistic(&mut self, idx: u64) {
        if let Some(seg) = self.get(idx) {
            if seg.state == SegmentState::SentAsProactive {
                let seq = seg.flow_seq;
                self.lcp_unacked.insert(seq, idx);
            }
        }
    }

    fn take_unsent(&mut self, seq: u64, idx: u64) -> Option<u64> {
        self.unsent.remove(&seq);
        self.unsent_bytes -= self.get(idx).map_or(0, |s| s.payload.len() as u64);
        Some(idx)
    }

    /// The proactive sub-flow's choice for one credit: Lost, else Pending, else (when
    /// `proactive_retransmission`) the oldest unACKed segment sent as reactive.
    pub fn next_for_credit(
        &mut self,
        proactive_retransmission: bool,
    ) -> Option<(u64, CreditChoice)> {
        if let Some(idx) = self.lost.pop_first() {
            return Some((idx, CreditChoice::Lost));
        }
        if let Some(idx) = self.next_pending() {
            return Some((idx, CreditChoice::Pending));
        }
        if proactive_retransmission {
            self.skip_stale_reactive();
            if let Some(idx) = self.reactive_order.pop_front() {
                return Some((idx, CreditChoice::ProactiveRetransmission));
            }
        }
        None
    }

    /// The reactive sub-flow's choice when its window opens: Lost first when it retransmits
    /// itself (standalone DCTCP), else Pending.
    pub fn next_for_reactive(&mut self, retransmit_lost: bool) -> Option<u64> {
        if retransmit_lost {
            if let Some(idx) = self.lost.pop_first() {
                return Some(idx);
            }
        }
        self.next_pending()
    }

    /// Record a transmission of segment `idx` on `subflow` as sub-flow sequence `seq`.
    pub fn on_sent(&mut self, idx: u64, subflow: SubFlow, seq: u32) -> Option<&Segment> {
        let seg = self.get_mut(idx)?;
        seg.transmissions += 1;
        match subflow {
            SubFlow::Proactive => {
                seg.state = SegmentState::SentAsProactive;
                seg.proactive_seq = Some(seq);
            }
            SubFlow::Reactive => {
                seg.state = SegmentState::SentAsReactive;
                seg.reactive_seq = Some(seq);
                self.reactive_order.push_back(idx);
            }
        }
        self.get(idx)
    }

    /// The transmission `seq` of segment `idx` on `subflow` was lost. Only the latest
    /// transmission counts: a segment already re-sent elsewhere (or ACKed) is left alone.
    /// Returns whether the segment became Lost.
    pub fn mark_lost(&mut self, idx: u64, subflow: SubFlow, seq: u32) -> bool {
        let Some(seg) = self.get_mut(idx) else {
            return false;
        };
        let current = match subflow {
            SubFlow::Proactive => seg.state == SegmentState::SentAsProactive,
            SubFlow::Reactive => seg.state == SegmentState::SentAsReactive,
        };
        if current && seg.seq_on(subflow) == Some(seq) {
            seg.state = SegmentState::Lost;
            self.lost.insert(idx);
            true
        } else {
            false
        }
    }

    /// Mark segment `idx` ACKed. Returns the segment if it was not ACKed before.
    pub fn mark_acked(&mut self, idx: u64) -> Option<Segment> {
        let seg = self.get_mut(idx)?;
        if seg.state == SegmentState::Acked {
            return None;
        }
        let was_unsent = seg.state == SegmentState::Pending;
        seg.state = SegmentState::Acked;
        let copy = seg.clone();
        self.acked_bytes += copy.payload.len() as u64;
        self.lost.remove(&idx);
        if was_unsent && self.unsent.remove(&copy.flow_seq).is_some() {
            self.unsent_bytes -= copy.payload.len() as u64;
        }
        self.lcp_unacked.remove(&copy.flow_seq);
        Some(copy)
    }

    /// The receiver has every byte below `flow_ack`: ACK the segments wholly below it.
    /// Returns the newly ACKed segments through `out` (index, segment).
    pub fn ack_flow_prefix(&mut self, flow_ack: u64, out: &mut Vec<(u64, Segment)>) {
        let mut idx = self.flow_acked_prefix.max(self.base);
        while let Some(seg) = self.get(idx) {
            // The only empty segment is a bare FIN; it is known delivered through its own ACK.
            let covered = if seg.payload.is_empty() {
                seg.state == SegmentState::Acked
            } else {
                seg.end() <= flow_ack
            };
            if !covered {
                break;
            }
            if let Some(s) = self.mark_acked(idx) {
                out.push((idx, s));
            }
            idx += 1;
        }
        self.flow_acked_prefix = idx;
    }

    /// Drop ACKed segments from the front.
    pub fn trim(&mut self) {
        while self
            .segs
            .front()
            .is_some_and(|s| s.state == SegmentState::Acked)
        {
            self.segs.pop_front();
            self.base += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn buf_with(n: usize, mss: usize) -> SendBuffer {
        let mut b = SendBuffer::new(mss);
        b.write(Bytes::from(vec![7u8; n]));
        b.finish();
        b
    }

    #[test]
    fn credit_priority_lost_then_pending_then_reactive() {
        let mut b = buf_with(10 * 100, 100);
        // Two reactive sends.
        let r0 = b.next_for_reactive(false).unwrap();
        b.on_sent(r0, SubFlow::Reactive, 0);
        let r1 = b.next_for_reactive(false).unwrap();
        b.on_sent(r1, SubFlow::Reactive, 1);
        // r0 lost.
        assert!(b.mark_lost(r0, SubFlow::Reactive, 0));
        assert_eq!(b.next_for_credit(true), Some((r0, CreditChoice::Lost)));
        b.on_sent(r0, SubFlow::Proactive, 0);
        let (p, why) = b.next_for_credit(true).unwrap();
        assert_eq!(why, CreditChoice::Pending);
        assert_eq!(b.get(p).unwrap().flow_seq, 200);
        b.on_sent(p, SubFlow::Proactive, 1);
        // Drain pending.
        while let Some((i, CreditChoice::Pending)) = b.next_for_credit(false) {
            b.on_sent(i, SubFlow::Proactive, 9);
        }
        // Now only r1 (still SentAsReactive) is eligible, once.
        assert_eq!(
            b.next_for_credit(true),
            Some((r1, CreditChoice::ProactiveRetransmission))
        );
        b.on_sent(r1, SubFlow::Proactive, 10);
        assert_eq!(b.next_for_credit(true), None);
    }

    #[test]
    fn stale_loss_of_resent_segment_is_ignored() {
        let mut b = buf_with(300, 100);
        let i = b.next_for_reactive(false).unwrap();
        b.on_sent(i, SubFlow::Reactive, 0);
        b.on_sent(i, SubFlow::Proactive, 0);
        assert!(!b.mark_lost(i, SubFlow::Reactive, 0));
        assert!(!b.has_lost());
    }

    #[test]
    fn segmentation_across_writes_and_fin() {
        let mut b = SendBuffer::new(4);
        b.write(Bytes::from_static(b"ab"));
        b.write(Bytes::from_static(b"cde"));
        b.finish();
        let i = b.next_for_reactive(false).unwrap();
        assert_eq!(&b.get(i).unwrap().payload[..], b"abcd");
        assert!(!b.get(i).unwrap().fin);
        let j = b.next_for_reactive(false).unwrap();
        assert_eq!(&b.get(j).unwrap().payload[..], b"e");
        assert!(b.get(j).unwrap().fin);
        assert!(b.next_for_reactive(false).is_none());
    }

    #[test]
    fn empty_flow_has_a_fin_segment() {
        let mut b = SendBuffer::new(4);
        b.finish();
        let i = b.next_for_reactive(false).unwrap();
        assert!(b.get(i).unwrap().fin && b.get(i).unwrap().payload.is_empty());
        b.on_sent(i, SubFlow::Reactive, 0);
        let mut out = vec![];
        b.ack_flow_prefix(0, &mut out);
        assert!(out.is_empty(), "an empty FIN is only ACKed by its own ACK");
        b.mark_acked(i);
        b.trim();
        assert!(b.is_complete());
    }

    #[test]
    fn tail_and_head_meet_without_sending_a_byte_twice() {
        let mut b = buf_with(1000, 100);
        let t = b.next_from_tail(u64::MAX).unwrap();
        assert_eq!(b.get(t).unwrap().flow_seq, 900);
        assert!(b.get(t).unwrap().fin, "the tail carries the FIN");
        b.on_sent(t, SubFlow::Proactive, 0);
        assert_eq!(b.pending_bytes(), 900);
        assert_eq!(
            b.sent_limit(),
            0,
            "nothing below an unsent byte may be acknowledged"
        );
        let h = b.next_for_reactive(true).unwrap();
        assert_eq!(b.get(h).unwrap().flow_seq, 0);
        b.on_sent(h, SubFlow::Reactive, 0);
        assert_eq!(b.sent_limit(), 100);
        // The tail within a limit: segments ending at or below 550.
        let t2 = b.next_from_tail(550).unwrap();
        assert_eq!(b.get(t2).unwrap().flow_seq, 400);
        b.on_sent(t2, SubFlow::Proactive, 1);
        b.on_sent_opportunistic(t);
        b.on_sent_opportunistic(t2);
        // The LCP packet at 400 is acknowledged (SACK across both loops); the one at 900 is
        // not: the HCP sends it again when it gets there.
        assert!(b.mark_acked(t2).is_some());
        let mut order = vec![];
        while let Some(i) = b.next_for_hcp() {
            assert!(
                order.len() < 100,
                "the HCP keeps getting segments: {order:?}"
            );
            order.push(b.get(i).unwrap().flow_seq);
            b.on_sent(i, SubFlow::Reactive, 9);
        }
        assert_eq!(order, vec![100, 200, 300, 500, 600, 700, 800, 900]);
        assert_eq!(b.pending_bytes(), 0);
        assert!(b.next_from_tail(u64::MAX).is_none());
    }

    #[test]
    fn the_tail_is_cut_only_below_the_limit() {
        // 1 MB written, MSS 100, the receiver buffers up to 1000 bytes ahead: the LCP's tail
        // is the last segment below 1000, and only the bytes below it are cut (10 segments,
        // not 10 000); the HCP then cuts the rest as it goes.
        let mut b = buf_with(1_000_000, 100);
        let t = b.next_from_tail(1000).unwrap();
        assert_eq!(b.get(t).unwrap().flow_seq, 900);
        assert_eq!(b.segs.len(), 10);
        assert_eq!(b.pending_bytes(), 1_000_000 - 100, "all but the tail taken");
        b.on_sent(t, SubFlow::Proactive, 0);
        b.on_sent_opportunistic(t);
        let t2 = b.next_from_tail(1000).unwrap();
        assert_eq!(b.get(t2).unwrap().flow_seq, 800);
        b.on_sent(t2, SubFlow::Proactive, 1);
        b.on_sent_opportunistic(t2);
        let mut offsets = vec![];
        for _ in 0..12 {
            let i = b.next_for_hcp().unwrap();
            offsets.push(b.get(i).unwrap().flow_seq);
            b.on_sent(i, SubFlow::Reactive, 0);
        }
        // In flow order: the cut segments, the two opportunistic ones still unacknowledged,
        // then new cuts past the limit.
        assert_eq!(
            offsets,
            [0, 100, 200, 300, 400, 500, 600, 700, 800, 900, 1000, 1100]
        );
    }

    #[test]
    fn flow_prefix_ack() {
        let mut b = buf_with(350, 100);
        for s in 0..4 {
            let i = b.next_for_reactive(false).unwrap();
            b.on_sent(i, SubFlow::Reactive, s);
        }
        let mut out = vec![];
        b.ack_flow_prefix(250, &mut out);
        assert_eq!(out.iter().map(|(i, _)| *i).collect::<Vec<_>>(), vec![0, 1]);
        out.clear();
        b.ack_flow_prefix(350, &mut out);
        assert_eq!(out.len(), 2);
        b.trim();
        assert!(b.is_complete());
        assert_eq!(b.acked_bytes(), 350);
    }
}
