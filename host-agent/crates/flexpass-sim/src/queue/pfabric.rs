//! pFabric's switch port (Alizadeh et al., SIGCOMM'13 §4.1): one small queue in which every
//! packet carries its priority (the PRIO field: its flow's remaining size, smaller first).
//!
//! - Dequeue: "find the highest priority packet", then send "the earliest packet from the
//!   same flow" — a flow's packets leave in order, and a flow is never behind itself.
//! - Enqueue: when the buffer is full, "drop the lowest priority packet", which may be the
//!   arriving one (ties: the arriving packet; among queued ones, the latest arrival).
//!
//! Packets without a priority: control messages (ACKs, HELLOs) are served first (priority
//! 0: an ACK holds its flow back), data of other transports last (priority 2^32 − 1).
//! Scans are linear: pFabric's buffers are a few BDPs (tens of packets).

use super::{Dequeued, Enqueued, PortQueue, Queued, Refused};
use crate::packet::SimPacket;
use flexpass_wire::Packet;

/// The one queue of a pfabric port (a data queue of the profile's layout).
pub(super) const QUEUE: usize = 1;

/// A packet's priority, smaller first.
fn rank(pkt: &SimPacket) -> u32 {
    match &pkt.packet {
        Packet::Data(d) => d.priority.unwrap_or(u32::MAX),
        _ => 0,
    }
}

/// The flow a packet belongs to: its direction and flow id.
fn flow(pkt: &SimPacket) -> (usize, usize, u32) {
    (pkt.src, pkt.dst, pkt.packet.flow_id())
}

impl PortQueue {
    pub(super) fn pfabric_enqueue(&mut self, pkt: Box<SimPacket>) -> Enqueued {
        let len = u64::from(pkt.wire_len);
        let limit = match self.cfg.buffer {
            super::BufferLimit::PerPort { bytes } => bytes,
            // Validation allows pfabric with per-port buffers only.
            super::BufferLimit::Shared => u64::MAX,
        };
        let r = rank(&pkt);
        // Evict strictly lower priorities (latest first among equals) until it fits; if
        // they cannot make room, the arriving packet is the lowest and is dropped.
        let evictable: u64 = self.queues[QUEUE]
            .iter()
            .filter(|q| rank(&q.pkt) > r)
            .map(|q| u64::from(q.wire_len))
            .sum();
        if self.bytes[QUEUE] + len > limit.saturating_add(evictable) || len > limit {
            let st = &mut self.stats[QUEUE];
            st.dropped_full += 1;
            if !matches!(pkt.packet, Packet::Data(_)) {
                st.dropped_full_control += 1;
            }
            return Enqueued::Dropped(Refused::BufferFull);
        }
        while self.bytes[QUEUE] + len > limit {
            let victim = self.lowest();
            let v = self.queues[QUEUE].remove(victim).expect("a victim");
            self.bytes[QUEUE] -= u64::from(v.wire_len);
            self.stats[QUEUE].dropped_pushout += 1;
        }
        let st = &mut self.stats[QUEUE];
        st.enqueued += 1;
        self.bytes[QUEUE] += len;
        self.queues[QUEUE].push_back(Queued::new(pkt, false));
        st.max_bytes = st.max_bytes.max(self.bytes[QUEUE]);
        st.max_packets = st.max_packets.max(self.queues[QUEUE].len());
        Enqueued::Accepted
    }

    /// Index of the lowest-priority queued packet, the latest arrival among equals.
    fn lowest(&self) -> usize {
        let q = &self.queues[QUEUE];
        let mut best = 0;
        for (i, p) in q.iter().enumerate() {
            if rank(&p.pkt) >= rank(&q[best].pkt) {
                best = i;
            }
        }
        best
    }

    pub(super) fn pfabric_dequeue(&mut self) -> Dequeued {
        let q = &self.queues[QUEUE];
        let Some(first) = q.front() else {
            return Dequeued::Empty;
        };
        // The highest priority, the earliest arrival among equals …
        let mut best = &first.pkt;
        for p in q.iter().skip(1) {
            if rank(&p.pkt) < rank(best) {
                best = &p.pkt;
            }
        }
        // … then that flow's earliest packet.
        let f = flow(best);
        let at = q
            .iter()
            .position(|p| flow(&p.pkt) == f)
            .expect("the flow has a packet");
        let head = self.queues[QUEUE].remove(at).expect("in range");
        let len = u64::from(head.wire_len);
        self.bytes[QUEUE] -= len;
        self.stats[QUEUE].dequeued_bytes += len;
        head.dequeued()
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::cfg;
    use super::super::{BufferLimit, Dequeued, Enqueued, PortQueue, Profile};
    use crate::packet::{PathHash, SimPacket};
    use bytes::Bytes;
    use flexpass_wire::{Data, Ecn, Packet, SubFlow, TrafficClass};

    /// A pFabric data packet of flow `flow` from host `src`, sequence `seq`, priority `prio`.
    fn data(src: usize, flow: u32, seq: u64, prio: u32) -> Box<SimPacket> {
        Box::new(SimPacket {
            src,
            dst: 9,
            class: TrafficClass::Legacy,
            ecn: Ecn::NotEct,
            wire_len: 1000,
            packet: Packet::Data(Data {
                flow_id: flow,
                subflow: SubFlow::Reactive,
                flow_seq: seq,
                subflow_seq: seq as u32,
                credit_seq: 0,
                tsval: 0,
                fin: false,
                retransmission: false,
                priority: Some(prio),
                payload: Bytes::from_static(b"x"),
            }),
            created: 0,
            path: PathHash::new(),
        })
    }

    fn out(pq: &mut PortQueue) -> Vec<(u32, u64)> {
        let mut v = vec![];
        while let Dequeued::Packet(p, _) = pq.dequeue(0, None) {
            let Packet::Data(d) = &p.packet else {
                panic!("data only")
            };
            v.push((d.flow_id, d.flow_seq));
        }
        v
    }

    fn port(bytes: u64) -> PortQueue {
        let mut c = cfg(Profile::PFabric);
        c.buffer = BufferLimit::PerPort { bytes };
        PortQueue::new(c)
    }

    #[test]
    fn highest_priority_first_and_a_flows_earliest_packet() {
        let mut pq = port(100_000);
        pq.enqueue(data(1, 1, 0, 900), None); // long flow
        pq.enqueue(data(2, 2, 0, 300), None); // short flow, first packet
        pq.enqueue(data(1, 1, 1, 800), None);
        // A retransmission-like packet of flow 2 with a smaller priority arrives last: flow 2
        // is served from its earliest packet, so its packets leave in order.
        pq.enqueue(data(2, 2, 1, 200), None);
        assert_eq!(out(&mut pq), vec![(2, 0), (2, 1), (1, 0), (1, 1)]);
    }

    #[test]
    fn a_full_buffer_drops_the_lowest_priority() {
        let mut pq = port(3_000); // three packets
        for (i, prio) in [500, 900, 700].into_iter().enumerate() {
            assert_eq!(
                pq.enqueue(data(i, i as u32, 0, prio), None),
                Enqueued::Accepted
            );
        }
        // Higher than the lowest queued (900): that one is dropped.
        assert_eq!(pq.enqueue(data(3, 3, 0, 100), None), Enqueued::Accepted);
        // Lower than everything queued: the arriving packet is dropped.
        assert!(matches!(
            pq.enqueue(data(4, 4, 0, 1000), None),
            Enqueued::Dropped(_)
        ));
        assert_eq!(pq.stats()[super::QUEUE].dropped_pushout, 1);
        assert_eq!(pq.stats()[super::QUEUE].dropped_full, 1);
        assert_eq!(out(&mut pq), vec![(3, 0), (0, 0), (2, 0)]);
    }
}
