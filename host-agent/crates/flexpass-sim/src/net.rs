//! The event-driven network model: hosts and switches joined by links (rate, propagation
//! delay, optional impairments), egress ports with the FlexPass queues of `queue.rs`, ECMP
//! with a symmetric per-flow hash, shared switch buffers, and the sans-IO transport core
//! running on the hosts. Deterministic for a given seed: events at equal times run in
//! scheduling order and all randomness comes from one seeded RNG.
//!
//! This file is the event loop (flows, timers, forwarding, links); `event` holds the events
//! and what is loaded ahead of them, `fabric` builds the nodes, links and routes, `measure`
//! samples and counts.

mod arbitration;
mod arbitration_packets;
mod event;
mod fabric;
mod measure;

pub use arbitration::{ArbitrationStats, PaseArbitration};
use event::Ev;
pub use measure::{PortReport, QueueTrace, Sample};

use crate::events::EventQueue;
use crate::packet::{HostId, PathHash, SimPacket};
use crate::queue::{Dequeued, Enqueued, PortQueue, SharedBuffer};
use bytes::Bytes;
use flexpass_core::{
    Nanos, Receiver, ReceiverConfig, ReceiverStats, Sender, SenderConfig, SenderStats, Transmit,
};
use flexpass_wire::{Ecn, Packet, SubFlow, TransportKind};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use std::collections::HashMap;

pub type NodeId = usize;

/// Faults a link injects on delivery (property tests of reliable delivery).
#[derive(Clone, Debug, Default)]
pub struct Impairment {
    pub loss: f64,
    pub duplicate: f64,
    /// Probability that a packet is held back by `reorder_delay` (and so overtaken).
    pub reorder: f64,
    pub reorder_delay: Nanos,
}

impl Impairment {
    /// No fault is injected (the packet is delivered once, in order).
    fn is_none(&self) -> bool {
        self.loss <= 0.0 && self.duplicate <= 0.0 && self.reorder <= 0.0
    }
}

#[derive(Clone, Debug)]
pub struct LinkSpec {
    pub bps: f64,
    pub delay: Nanos,
    pub impairment: Impairment,
}

/// Laid out hot fields first (`repr(C)`): an event at a port touches its first lines only
/// (and `prefetch_next` loads them ahead).
#[repr(C)]
struct Port {
    /// The transmitter is busy until then (end of the frame on the wire).
    busy_until: Nanos,
    /// Scheduling sequence number reserved for the end-of-transmission event of the frame
    /// on the wire; the event itself is only queued when a packet is waiting for it (an idle
    /// port needs none). Reserving the number keeps the order of simultaneous events as if
    /// every end of transmission were an event.
    tx_done_seq: Option<u64>,
    wake_at: Option<Nanos>,
    tx_bytes: u64,
    peer: NodeId,
    /// The peer's port of the same link.
    peer_port: usize,
    tx_done_queued: bool,
    /// Serialization times of the last two frame lengths (wire_len, ns) (a port sends few
    /// distinct lengths; (0, 0) holds as it is).
    ser_memo: [(u32, u32); 2],
    /// The link is up (a failed link drops what it holds and what is sent to it).
    up: bool,
    link: LinkSpec,
    queue: PortQueue,
}

struct Node {
    name: String,
    host: Option<HostId>,
    /// ECMP hash salt: switches at the same tier (mirror images of each other on the two
    /// halves of a path) share it, so the choice is symmetric; different tiers differ, so
    /// their choices are not correlated (no polarisation).
    tier: u8,
    ports: Vec<Port>,
    /// Per destination host: the equal-cost egress ports, `route_ports[start..start + len]`.
    routes: Vec<Route>,
    route_ports: Vec<u16>,
    shared: Option<SharedBuffer>,
}

/// A node's route to one host. `first` repeats `route_ports[start]`: a hop with one next
/// hop (or single-path routing) needs no second, dependent load (a cache miss per packet).
#[derive(Clone, Copy)]
struct Route {
    start: u32,
    first: u16,
    len: u8,
}

/// What the flow is in its experiment (reports group FCTs by it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FlowKind {
    /// Listed in the experiment (`[[flow]]`).
    Listed,
    /// Background workload: sizes from a CDF, Poisson arrivals.
    Background,
    /// Foreground incast of a mixed workload.
    Foreground,
    /// An incast group (`[[incast]]`).
    Incast,
}

#[derive(Clone, Debug)]
pub struct FlowSpec {
    pub id: u32,
    pub src: HostId,
    pub dst: HostId,
    pub transport: TransportKind,
    /// Bytes to send; `None`: long-running, never finishes.
    pub size: Option<u64>,
    pub start: Nanos,
    pub kind: FlowKind,
    /// Index of the entry of its kind it comes from (`[[flow]]`, `[[incast]]`,
    /// `[[workload]]`; u32::MAX for a trace's): a backend finds the entry's own keys.
    pub entry: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Side {
    Sender,
    Receiver,
}

/// Paths of one credit-scheduled flow (see `PathHash`).
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct FlowPaths {
    /// Path hash of the flow's data (sender → receiver), first seen.
    pub data: Option<u64>,
    /// Path hash of its credits (receiver → sender), first seen.
    pub credit: Option<u64>,
    /// Packets whose path differed from the first one seen in their direction.
    pub changes: u64,
}

impl FlowPaths {
    fn record(slot: &mut Option<u64>, changes: &mut u64, h: u64) {
        match slot {
            None => *slot = Some(h),
            Some(first) if *first != h => *changes += 1,
            _ => {}
        }
    }

    /// Data and credits crossed different links.
    pub fn mismatch(&self) -> bool {
        matches!((self.data, self.credit), (Some(d), Some(c)) if d != c)
    }
}

pub struct Flow {
    pub spec: FlowSpec,
    pub sender: Option<Sender>,
    pub receiver: Option<Receiver>,
    written: u64,
    /// Bytes delivered in order to the receiving application, verified against the pattern.
    pub delivered: u64,
    pub corrupted_bytes: u64,
    pub completed_at: Option<Nanos>,
    pub error: Option<String>,
    pub paths: FlowPaths,
    /// When the receiving application last got bytes, and the longest gap between two such
    /// deliveries (a flow stalled by a failed link until its recovery).
    last_delivery: Option<Nanos>,
    pub max_stall: Nanos,
    /// The sender's and receiver's statistics, kept when their state is released.
    retired: Option<Box<(SenderStats, Option<ReceiverStats>)>>,
    timers: [Option<Nanos>; 2],
}

impl Flow {
    pub fn sender_stats(&self) -> Option<&SenderStats> {
        match (&self.sender, &self.retired) {
            (Some(s), _) => Some(s.stats()),
            (None, Some(r)) => Some(&r.0),
            _ => None,
        }
    }

    pub fn receiver_stats(&self) -> Option<&ReceiverStats> {
        match (&self.receiver, &self.retired) {
            (Some(r), _) => Some(r.stats()),
            (None, Some(r)) => r.1.as_ref(),
            _ => None,
        }
    }
}

/// After a reroute, flows' paths are compared afresh from this much later on (packets sent
/// before it may still cross the old path).
const PATH_EPOCH_DELAY: Nanos = flexpass_core::MILLIS;

/// Wire bytes of a data packet beyond its payload: FlexPass data header, IPv4/UDP, Ethernet.
pub const DATA_WIRE_OVERHEAD: u64 = (flexpass_wire::DATA_HEADER_LEN
    + flexpass_wire::IPV4_UDP_OVERHEAD
    + flexpass_wire::ETHERNET_WIRE_OVERHEAD) as u64;

/// Long-running flows keep at least this much never-sent (Pending) data in the sender, so
/// neither sub-flow ever runs dry (an application with an endless backlog).
const BULK_REFILL_BELOW: u64 = 1 << 20;
const BULK_CHUNK: u64 = 256 << 10;
/// Period of the payload pattern; prime, so a misplaced segment never matches.
const PATTERN_LEN: usize = 4093;
/// Payload is written in slices of one shared buffer holding the pattern repeated: no
/// per-flow copy of the bytes (a flow of the web-search workload can be 30 MB).
const PATTERN_SLICE: usize = 64 << 10;
/// Packet boxes kept for reuse.
const PACKET_POOL: usize = 1 << 12;

/// Who builds the transport configuration of a flow's two ends.
pub type SenderConfigFn = Box<dyn Fn(&FlowSpec) -> SenderConfig>;
pub type ReceiverConfigFn = Box<dyn Fn(&FlowSpec) -> ReceiverConfig>;

pub struct Network {
    now: Nanos,
    nodes: Vec<Node>,
    hosts: Vec<NodeId>,
    pub flows: Vec<Flow>,
    flow_index: HashMap<u32, usize>,
    /// `service`'s buffer of a connection's transmissions (kept: no allocation per call).
    transmits: Vec<Transmit>,
    /// `drain_delivered`'s buffer.
    delivered_chunks: Vec<Bytes>,
    /// Boxes of delivered packets, reused by `host_send` (no allocation per packet).
    #[allow(clippy::vec_box)] // the boxes are what is reused
    packet_pool: Vec<Box<SimPacket>>,
    /// Every flow's id is its index in `flows` (then `flow_index` is not needed to find it).
    ids_are_indexes: bool,
    events: EventQueue<Ev>,
    seq: u64,
    /// Scheduling number of the event being dispatched.
    current_seq: u64,
    rng: ChaCha8Rng,
    /// The payload pattern repeated to `PATTERN_LEN + PATTERN_SLICE` bytes.
    pattern: Bytes,
    sender_cfg: SenderConfigFn,
    receiver_cfg: ReceiverConfigFn,
    /// Encode and decode every packet on delivery (exercises the wire format end to end).
    pub wire_check: bool,
    /// Debugging: every packet of this flow is printed to stderr as it is sent, dropped and
    /// received (environment variable FLEXPASS_TRACE_FLOW=<flow id>).
    trace_flow: Option<u32>,
    /// Release the transport state of a completed flow (its statistics are kept) once it has
    /// been quiet for this long: long runs with many flows stay small. None: keep everything.
    pub retire_after: Option<Nanos>,
    /// DCTCP flows complete when their sender has the ACK of the last byte
    /// (`measure.tcp_fct = "acked"`), not when the receiver has it.
    pub tcp_fct_at_ack: bool,
    /// Every switch sends a destination's traffic over its first shortest-path port, not
    /// the ECMP hash's choice (`topology.routing = "single-path"`).
    pub single_path: bool,
    /// Flows pinned through a switch (`flow.via`), by flow id: where a switch picks among
    /// equal-cost next hops and the pinned one is among them, it takes it.
    pinned: HashMap<u32, NodeId>,
    pub sample_interval: Nanos,
    pub samples: Vec<Sample>,
    /// Record per-flow throughput in the samples (one entry per flow and sample).
    pub sample_flows: bool,
    monitors: Vec<(NodeId, usize)>,
    pub queue_traces: Vec<QueueTrace>,
    last_delivered: Vec<[u64; 3]>,
    pub events_processed: u64,
    pub stray_packets: u64,
    /// Route recomputations after link failures or repairs.
    pub reroutes: u64,
    /// Completed flows whose state is still held (`retire_after`).
    to_retire: Vec<usize>,
    retire_scheduled: bool,
    /// The sampling chain is scheduled (once: `run_until` runs in slices).
    sampling_scheduled: bool,
    completed_flows: usize,
    /// PASE's arbitrators (runs with PASE flows).
    pub pase: Option<PaseArbitration>,
}

impl Network {
    pub fn new(seed: u64, sender_cfg: SenderConfigFn, receiver_cfg: ReceiverConfigFn) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let period: Vec<u8> = (0..PATTERN_LEN).map(|_| rng.gen()).collect();
        let pattern: Vec<u8> = period
            .iter()
            .cycle()
            .take(PATTERN_LEN + PATTERN_SLICE)
            .copied()
            .collect();
        Network {
            now: 0,
            nodes: vec![],
            hosts: vec![],
            flows: vec![],
            flow_index: HashMap::new(),
            ids_are_indexes: true,
            transmits: vec![],
            delivered_chunks: vec![],
            packet_pool: vec![],
            events: EventQueue::new(),
            seq: 0,
            current_seq: 0,
            rng,
            pattern: Bytes::from(pattern),
            sender_cfg,
            receiver_cfg,
            wire_check: false,
            trace_flow: std::env::var("FLEXPASS_TRACE_FLOW")
                .ok()
                .and_then(|v| v.parse().ok()),
            retire_after: None,
            tcp_fct_at_ack: false,
            single_path: false,
            pinned: HashMap::new(),
            sample_interval: 0,
            samples: vec![],
            sample_flows: true,
            monitors: vec![],
            queue_traces: vec![],
            last_delivered: vec![],
            events_processed: 0,
            stray_packets: 0,
            reroutes: 0,
            to_retire: vec![],
            retire_scheduled: false,
            sampling_scheduled: false,
            completed_flows: 0,
            pase: None,
        }
    }

    pub fn now(&self) -> Nanos {
        self.now
    }

    pub fn add_flow(&mut self, spec: FlowSpec) {
        let idx = self.flows.len();
        self.flow_index.insert(spec.id, idx);
        self.ids_are_indexes &= spec.id as usize == idx;
        let start = spec.start;
        self.flows.push(Flow {
            spec,
            sender: None,
            receiver: None,
            written: 0,
            delivered: 0,
            corrupted_bytes: 0,
            completed_at: None,
            error: None,
            paths: FlowPaths::default(),
            last_delivery: None,
            max_stall: 0,
            retired: None,
            timers: [None, None],
        });
        self.last_delivered.push([0; 3]);
        let flow =
            u32::try_from(idx).expect("fewer than 2^32 flows (events index them in 32 bits)");
        self.schedule(start, Ev::Start { flow });
    }

    fn schedule(&mut self, at: Nanos, ev: Ev) {
        self.seq += 1;
        let seq = self.seq;
        self.schedule_with(at, seq, ev);
    }

    fn schedule_with(&mut self, at: Nanos, seq: u64, ev: Ev) {
        self.events.push(at.max(self.now), seq, ev);
    }

    /// Offset of flow `id`'s byte `offset` in the pattern.
    fn pattern_offset(id: u32, offset: u64) -> usize {
        ((offset + u64::from(id) * 1009) % PATTERN_LEN as u64) as usize
    }

    /// Flow `id`'s payload from `offset`, `len` bytes, as slices of the shared pattern.
    fn payload_slices(&self, id: u32, offset: u64, len: u64) -> Vec<Bytes> {
        let mut out = vec![];
        let mut done = 0;
        while done < len {
            let n = (len - done).min(PATTERN_SLICE as u64) as usize;
            let start = Self::pattern_offset(id, offset + done);
            out.push(self.pattern.slice(start..start + n));
            done += n as u64;
        }
        out
    }

    /// Bytes of `chunk` (flow `id`, from `offset`) that differ from the pattern.
    fn corrupted_in(&self, id: u32, offset: u64, chunk: &[u8]) -> u64 {
        let mut bad = 0;
        let mut done = 0;
        while done < chunk.len() {
            let n = (chunk.len() - done).min(PATTERN_SLICE);
            let start = Self::pattern_offset(id, offset + done as u64);
            let want = &self.pattern[start..start + n];
            let got = &chunk[done..done + n];
            if want != got {
                bad += want.iter().zip(got).filter(|(a, b)| a != b).count() as u64;
            }
            done += n;
        }
        bad
    }

    /// Run until `end` or until no event is left; `progress` is called now and then.
    pub fn run_until(&mut self, end: Nanos, mut progress: impl FnMut(Nanos, usize)) {
        if self.sample_interval > 0 && !self.sampling_scheduled {
            self.sampling_scheduled = true;
            self.schedule(self.sample_interval, Ev::Sample);
        }
        if let (Some(after), false) = (self.retire_after, self.retire_scheduled) {
            self.retire_scheduled = true;
            self.schedule(self.now + after, Ev::Retire);
        }
        while let Some(at) = self.events.peek_time() {
            if at > end {
                break;
            }
            let e = self.events.pop().expect("peeked");
            self.prefetch_next();
            self.now = at;
            self.current_seq = e.seq;
            let ev = e.item;
            self.events_processed += 1;
            if self.events_processed.is_multiple_of(1 << 16) {
                progress(self.now, self.completed_flows);
            }
            self.dispatch(ev);
        }
        let next = self.events.peek_time().unwrap_or(end);
        self.now = self.now.max(end.min(next));
    }

    /// True when every finite flow has completed and no long-running flow exists.
    pub fn all_finite_flows_done(&self) -> bool {
        self.flows
            .iter()
            .all(|f| f.spec.size.is_some() && (f.completed_at.is_some() || f.error.is_some()))
    }

    /// Flows completed (delivered in full) so far.
    pub fn completed_flows(&self) -> usize {
        self.completed_flows
    }

    fn dispatch(&mut self, ev: Ev) {
        match ev {
            Ev::Arrive { node, pkt, .. } => self.arrive(node as usize, pkt),
            Ev::TxDone { node, port } => {
                let (node, port) = (node as usize, port as usize);
                let p = &mut self.nodes[node].ports[port];
                p.tx_done_seq = None;
                p.tx_done_queued = false;
                self.try_send(node, port);
            }
            Ev::Wake { node, port } => {
                let (node, port) = (node as usize, port as usize);
                if self.nodes[node].ports[port].wake_at == Some(self.now) {
                    self.nodes[node].ports[port].wake_at = None;
                    self.try_send(node, port);
                }
            }
            Ev::Timer { flow, side } => {
                let flow = flow as usize;
                if self.flows[flow].timers[side as usize] == Some(self.now) {
                    self.flows[flow].timers[side as usize] = None;
                    let now = self.now;
                    match side {
                        Side::Sender => {
                            if let Some(s) = self.flows[flow].sender.as_mut() {
                                s.handle_timeout(now)
                            }
                        }
                        Side::Receiver => {
                            if let Some(r) = self.flows[flow].receiver.as_mut() {
                                r.handle_timeout(now)
                            }
                        }
                    }
                    self.service(flow, side);
                }
            }
            Ev::Start { flow } => self.start_flow(flow as usize),
            Ev::Arbitrate => self.arbitration_round(),
            Ev::Arbitration {
                flow,
                queue,
                rate_kbps,
            } => {
                let a = flexpass_core::pase::Arbitration {
                    queue,
                    reference_rate_bps: f64::from(rate_kbps) * 1e3,
                };
                self.apply_arbitration(flow as usize, a);
                self.service(flow as usize, Side::Sender);
            }
            Ev::Sample => self.sample(),
            Ev::Link { node, port, up } => self.set_link(node as usize, port as usize, up),
            Ev::Reroute => {
                self.compute_routes();
                self.reroutes += 1;
                // Packets already on their way keep the old path for up to a queueing delay.
                let at = self.now + PATH_EPOCH_DELAY;
                self.schedule(at, Ev::PathEpoch);
            }
            Ev::Retire => {
                let pending = std::mem::take(&mut self.to_retire);
                for f in pending {
                    if !self.maybe_retire(f) {
                        self.to_retire.push(f);
                    }
                }
                if let Some(after) = self.retire_after {
                    let at = self.now + after;
                    self.schedule(at, Ev::Retire);
                }
            }
            Ev::PathEpoch => {
                for f in &mut self.flows {
                    f.paths.data = None;
                    f.paths.credit = None;
                }
            }
        }
    }

    fn start_flow(&mut self, flow: usize) {
        let spec = self.flows[flow].spec.clone();
        let cfg = (self.sender_cfg)(&spec);
        match Sender::new(spec.id, cfg, spec.size.unwrap_or(0), self.now) {
            Ok(mut s) => {
                if let Some(size) = spec.size {
                    for chunk in self.payload_slices(spec.id, 0, size) {
                        s.write(chunk);
                    }
                    s.finish();
                    self.flows[flow].written = size;
                }
                self.flows[flow].sender = Some(s);
                self.pase_flow_started(flow);
                self.refill(flow);
                self.service(flow, Side::Sender);
            }
            Err(e) => self.flows[flow].error = Some(e),
        }
    }

    /// Long-running flows: keep the send buffer topped up.
    fn refill(&mut self, flow: usize) {
        let f = &self.flows[flow];
        if f.spec.size.is_some() {
            return;
        }
        let Some(s) = f.sender.as_ref() else { return };
        if s.pending_bytes() < BULK_REFILL_BELOW {
            let chunks = self.payload_slices(f.spec.id, f.written, BULK_CHUNK);
            let f = &mut self.flows[flow];
            let s = f.sender.as_mut().expect("checked");
            for c in chunks {
                s.write(c);
            }
            f.written += BULK_CHUNK;
        }
    }

    /// Drain a connection's transmissions into its host's NIC and re-arm its timer.
    fn service(&mut self, flow: usize, side: Side) {
        let now = self.now;
        let mut out = std::mem::take(&mut self.transmits);
        let (host, deadline) = {
            let f = &mut self.flows[flow];
            let (host, deadline) = match side {
                Side::Sender => {
                    let Some(s) = f.sender.as_mut() else {
                        self.transmits = out;
                        return;
                    };
                    while let Some(t) = s.poll_transmit(now) {
                        out.push(t);
                    }
                    if let Some(e) = s.error() {
                        f.error.get_or_insert_with(|| e.to_string());
                    }
                    (f.spec.src, s.poll_timeout())
                }
                Side::Receiver => {
                    let Some(r) = f.receiver.as_mut() else {
                        self.transmits = out;
                        return;
                    };
                    while let Some(t) = r.poll_transmit(now) {
                        out.push(t);
                    }
                    (f.spec.dst, r.poll_timeout())
                }
            };
            (host, deadline)
        };
        let dst = match side {
            Side::Sender => self.flows[flow].spec.dst,
            Side::Receiver => self.flows[flow].spec.src,
        };
        for t in out.drain(..) {
            self.host_send(host, dst, t);
        }
        self.transmits = out;
        if let Some(d) = deadline {
            let slot = &mut self.flows[flow].timers[side as usize];
            if slot.is_none_or(|cur| d < cur) {
                let at = d.max(now);
                *slot = Some(at);
                self.schedule(
                    at,
                    Ev::Timer {
                        flow: flow as u32,
                        side,
                    },
                );
            }
        }
    }

    /// Release a finished flow's transport state (keeping its statistics) once both ends are
    /// quiet: everything delivered and acknowledged, no credits flowing, no timer armed, and
    /// `retire_after` since it completed. Returns whether the flow is retired.
    fn maybe_retire(&mut self, flow: usize) -> bool {
        let Some(after) = self.retire_after else {
            return false;
        };
        let now = self.now;
        let f = &mut self.flows[flow];
        if f.retired.is_some() {
            return true;
        }
        let (Some(done), Some(s)) = (f.completed_at, f.sender.as_mut()) else {
            return false;
        };
        if now < done + after || !s.is_complete() || s.poll_timeout().is_some() {
            return false;
        }
        if let Some(r) = f.receiver.as_ref() {
            if r.is_sending_credits() || r.poll_timeout().is_some() {
                return false;
            }
        }
        let s = f.sender.take().expect("checked");
        let r = f.receiver.take();
        f.retired = Some(Box::new((s.stats().clone(), r.map(|r| r.stats().clone()))));
        true
    }

    fn host_send(&mut self, host: HostId, dst: HostId, t: Transmit) {
        if self.trace_flow == Some(t.packet.flow_id()) {
            eprintln!(
                "{:>10} SEND h{host} {:?} {}",
                self.now,
                t.class,
                brief(&t.packet)
            );
        }
        let sp = SimPacket {
            src: host,
            dst,
            class: t.class,
            ecn: t.ecn,
            wire_len: t.packet.wire_len() as u32,
            packet: t.packet,
            created: self.now,
            path: PathHash::new(),
        };
        let pkt = match self.packet_pool.pop() {
            Some(mut b) => {
                *b = sp;
                b
            }
            None => Box::new(sp),
        };
        let node = self.hosts[host];
        self.forward(node, pkt);
    }

    fn forward(&mut self, node: NodeId, mut pkt: Box<SimPacket>) {
        let Some(port) = self.route(node, &pkt) else {
            self.stray_packets += 1;
            return;
        };
        let n = &mut self.nodes[node];
        if !n.ports[port].up {
            // Routed to a failed link before the control plane reacted.
            n.ports[port].queue.count_link_drop(&pkt);
            return;
        }
        if n.host.is_none() {
            pkt.path.cross(node, pkt.packet.is_sender_to_receiver());
        }
        let traced = self
            .trace_flow
            .is_some_and(|id| id == pkt.packet.flow_id())
            .then(|| brief(&pkt.packet));
        let r = n.ports[port]
            .queue
            .enqueue_at(self.now, pkt, n.shared.as_mut());
        if let (Some(b), Enqueued::Dropped(why)) = (&traced, r) {
            eprintln!(
                "{:>10} DROP {why:?} at {} port {port}: {b}",
                self.now, n.name
            );
        }
        if r == Enqueued::Accepted {
            self.try_send(node, port);
        }
    }

    fn try_send(&mut self, node: NodeId, port: usize) {
        let now = self.now;
        let current = self.current_seq;
        let n = &mut self.nodes[node];
        let p = &mut n.ports[port];
        if let Some(seq) = p.tx_done_seq {
            if (now, current) < (p.busy_until, seq) {
                // A frame is on the wire: its end of transmission sends the next one.
                if !p.tx_done_queued {
                    p.tx_done_queued = true;
                    let at = p.busy_until;
                    self.schedule_with(at, seq, Ev::tx_done(node, port));
                }
                return;
            }
            // Its (unqueued) end of transmission has passed.
            p.tx_done_seq = None;
        }
        if !p.up {
            return;
        }
        match p.queue.dequeue(now, n.shared.as_mut()) {
            Dequeued::Packet(pkt, head) => {
                let wire_len = head.wire_len;
                let ser = p.serialization(wire_len);
                p.busy_until = now + ser;
                p.tx_bytes += u64::from(wire_len);
                let peer = p.peer;
                let arrive = now + ser + p.link.delay;
                let waiting = !p.queue.is_empty();
                self.seq += 1;
                let seq = self.seq;
                let p = &mut self.nodes[node].ports[port];
                p.tx_done_seq = Some(seq);
                p.tx_done_queued = waiting;
                if ser == 0 || waiting {
                    p.tx_done_queued = true;
                    self.schedule_with(now + ser, seq, Ev::tx_done(node, port));
                }
                let imp = &self.nodes[node].ports[port].link.impairment;
                if imp.is_none() {
                    self.schedule(arrive, Ev::arrive_to(peer, head.dst, pkt));
                } else {
                    let imp = imp.clone();
                    self.deliver_over_link(peer, pkt, arrive, &imp);
                }
            }
            Dequeued::WaitUntil(t) => {
                if p.wake_at.is_none_or(|w| t < w) {
                    p.wake_at = Some(t);
                    self.schedule(
                        t,
                        Ev::Wake {
                            node: node as u32,
                            port: port as u32,
                        },
                    );
                }
            }
            Dequeued::Empty => {}
        }
    }

    fn deliver_over_link(
        &mut self,
        peer: NodeId,
        pkt: Box<SimPacket>,
        at: Nanos,
        imp: &Impairment,
    ) {
        if imp.loss > 0.0 && self.rng.gen_bool(imp.loss) {
            return;
        }
        if imp.duplicate > 0.0 && self.rng.gen_bool(imp.duplicate) {
            self.schedule(at, Ev::arrive(peer, pkt.clone()));
        }
        let delay = if imp.reorder > 0.0 && self.rng.gen_bool(imp.reorder) {
            imp.reorder_delay
        } else {
            0
        };
        self.schedule(at + delay, Ev::arrive(peer, pkt));
    }

    fn arrive(&mut self, node: NodeId, pkt: Box<SimPacket>) {
        if let Packet::ArbitrationRequest(_) | Packet::ArbitrationResponse(_) = pkt.packet {
            return self.arbitration_message_arrives(node, pkt); // PASE's, as packets
        }
        match self.nodes[node].host {
            Some(h) if h == pkt.dst => self.host_receive(h, pkt),
            Some(_) => self.stray_packets += 1,
            None => self.forward(node, pkt),
        }
    }

    fn host_receive(&mut self, host: HostId, mut pkt: Box<SimPacket>) {
        if self.trace_flow == Some(pkt.packet.flow_id()) {
            let ce = pkt.ecn == Ecn::Ce;
            eprintln!(
                "{:>10} RECV h{host} ce={ce} {}",
                self.now,
                brief(&pkt.packet)
            );
        }
        let path = pkt.path.value();
        let ce = pkt.ecn == Ecn::Ce;
        let packet = std::mem::replace(&mut pkt.packet, Packet::CreditStop { flow_id: 0 });
        if self.packet_pool.len() < PACKET_POOL {
            self.packet_pool.push(pkt);
        }
        let packet = if self.wire_check {
            match Packet::decode(&packet.encode_to_vec()) {
                Ok(p) => p,
                Err(_) => {
                    self.stray_packets += 1;
                    return;
                }
            }
        } else {
            packet
        };
        let Some(flow) = self.flow_of(packet.flow_id()) else {
            self.stray_packets += 1;
            return;
        };
        let now = self.now;
        let to_receiver = packet.is_sender_to_receiver();
        let f = &mut self.flows[flow];
        match &packet {
            Packet::Data(d) if d.subflow == SubFlow::Proactive => {
                FlowPaths::record(&mut f.paths.data, &mut f.paths.changes, path)
            }
            Packet::Credit(_) => FlowPaths::record(&mut f.paths.credit, &mut f.paths.changes, path),
            _ => {}
        }
        if to_receiver {
            if self.flows[flow].spec.dst != host {
                self.stray_packets += 1;
                return;
            }
            if self.flows[flow].retired.is_some() {
                return;
            }
            if self.flows[flow].receiver.is_none() {
                let spec = &self.flows[flow].spec;
                let cfg = (self.receiver_cfg)(spec);
                match Receiver::new(spec.id, spec.transport, &cfg) {
                    Ok(r) => self.flows[flow].receiver = Some(r),
                    Err(e) => {
                        self.flows[flow].error = Some(e);
                        return;
                    }
                }
            }
            let r = self.flows[flow].receiver.as_mut().expect("created above");
            let _ = r.handle_packet(now, &packet, ce);
            self.drain_delivered(flow);
            self.service(flow, Side::Receiver);
        } else {
            if self.flows[flow].spec.src != host {
                self.stray_packets += 1;
                return;
            }
            if let Some(s) = self.flows[flow].sender.as_mut() {
                let _ = s.handle_packet(now, &packet);
            }
            if self.completes_at_ack(flow) {
                let acked = self.flows[flow].sender_stats().map_or(0, |s| s.bytes_acked);
                if self.flows[flow].spec.size.is_some_and(|size| acked >= size) {
                    self.complete(flow);
                }
            }
            self.refill(flow);
            self.service(flow, Side::Sender);
        }
    }

    /// The index of flow `id`.
    fn flow_of(&self, id: u32) -> Option<usize> {
        if self.ids_are_indexes {
            Some(id as usize).filter(|&i| i < self.flows.len())
        } else {
            self.flow_index.get(&id).copied()
        }
    }

    /// Hand in-order bytes to the "application", checking them against the pattern.
    fn drain_delivered(&mut self, flow: usize) {
        let id = self.flows[flow].spec.id;
        let mut chunks = std::mem::take(&mut self.delivered_chunks);
        if let Some(r) = self.flows[flow].receiver.as_mut() {
            while let Some(b) = r.read() {
                chunks.push(b);
            }
        }
        let now = self.now;
        for b in chunks.drain(..) {
            let offset = self.flows[flow].delivered;
            let bad = self.corrupted_in(id, offset, &b);
            let f = &mut self.flows[flow];
            f.corrupted_bytes += bad;
            f.delivered += b.len() as u64;
            let since = f.last_delivery.unwrap_or(f.spec.start);
            f.max_stall = f.max_stall.max(now.saturating_sub(since));
            f.last_delivery = Some(now);
        }
        self.delivered_chunks = chunks;
        let f = &self.flows[flow];
        if !self.completes_at_ack(flow) && f.receiver.as_ref().is_some_and(|r| r.is_finished()) {
            self.complete(flow);
        }
    }

    /// The flow's completion is its sender's last ACK (`tcp_fct_at_ack`, DCTCP flows).
    fn completes_at_ack(&self, flow: usize) -> bool {
        self.tcp_fct_at_ack && self.flows[flow].spec.transport == TransportKind::Dctcp
    }

    fn complete(&mut self, flow: usize) {
        let f = &mut self.flows[flow];
        if f.completed_at.is_some() {
            return;
        }
        f.completed_at = Some(self.now);
        self.completed_flows += 1;
        if self.retire_after.is_some() {
            self.to_retire.push(flow);
        }
    }
}

/// One line per packet for FLEXPASS_TRACE_FLOW.
fn brief(p: &Packet) -> String {
    match p {
        Packet::Data(d) => format!(
            "DATA {:?} seq {} off {} len {} fin {} retx {}",
            d.subflow,
            d.subflow_seq,
            d.flow_seq,
            d.payload.len(),
            d.fin,
            d.retransmission
        ),
        Packet::Ack(a) => format!(
            "ACK {:?} ece {} cum {} ack_seq {} flow_ack {} sack {:?}",
            a.subflow,
            a.ece,
            a.cum_ack,
            a.ack_seq,
            a.flow_ack,
            a.sack.as_slice()
        ),
        p => format!("{p:?}"),
    }
}
