//! The event-driven network model: hosts and switches joined by links (rate, propagation
//! delay, optional impairments), egress ports with the FlexPass queues of `queue.rs`, and
//! the sans-IO transport core running on the hosts. Deterministic for a given seed: events
//! at equal times run in scheduling order and all randomness comes from one seeded RNG.

use crate::packet::{HostId, SimPacket};
use crate::queue::{Dequeued, Enqueued, PortConfig, PortQueue, QueueStats};
use bytes::Bytes;
use flexpass_core::{Nanos, Receiver, ReceiverConfig, Sender, SenderConfig, Transmit};
use flexpass_wire::{Ecn, Packet, TransportKind};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

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

#[derive(Clone, Debug)]
pub struct LinkSpec {
    pub bps: f64,
    pub delay: Nanos,
    pub impairment: Impairment,
}

struct Port {
    queue: PortQueue,
    peer: NodeId,
    link: LinkSpec,
    busy: bool,
    wake_at: Option<Nanos>,
    tx_bytes: u64,
}

struct Node {
    name: String,
    host: Option<HostId>,
    ports: Vec<Port>,
    /// Egress port towards each host.
    routes: Vec<Option<usize>>,
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
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Side {
    Sender,
    Receiver,
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
    timers: [Option<Nanos>; 2],
}

/// Per-interval samples for throughput plots and starvation analysis.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Sample {
    pub t_us: f64,
    /// Delivered bytes per flow in this interval.
    pub delivered: Vec<u64>,
    /// Data bytes on the wire (Ethernet, incl. headers, preamble, IFG) received per flow on
    /// each sub-flow in this interval.
    pub proactive: Vec<u64>,
    pub reactive: Vec<u64>,
    /// Bytes in the monitored port's Q1 and Q2 at the sample instant.
    pub queue_bytes: [u64; 3],
}

enum Ev {
    Arrive { node: NodeId, pkt: SimPacket },
    TxDone { node: NodeId, port: usize },
    Wake { node: NodeId, port: usize },
    Timer { flow: usize, side: Side, at: Nanos },
    Start { flow: usize },
    Sample,
}

struct Scheduled {
    at: Nanos,
    seq: u64,
    ev: Ev,
}
impl PartialEq for Scheduled {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.seq) == (o.at, o.seq)
    }
}
impl Eq for Scheduled {}
impl PartialOrd for Scheduled {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Scheduled {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(o.at, o.seq))
    }
}

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

pub struct Network {
    now: Nanos,
    nodes: Vec<Node>,
    hosts: Vec<NodeId>,
    pub flows: Vec<Flow>,
    flow_index: HashMap<u32, usize>,
    events: BinaryHeap<Reverse<Scheduled>>,
    seq: u64,
    rng: ChaCha8Rng,
    pattern: Vec<u8>,
    sender_cfg: Box<dyn Fn(TransportKind) -> SenderConfig>,
    receiver_cfg: Box<dyn Fn(TransportKind, HostId) -> ReceiverConfig>,
    /// Encode and decode every packet on delivery (exercises the wire format end to end).
    pub wire_check: bool,
    pub sample_interval: Nanos,
    pub samples: Vec<Sample>,
    monitor: Option<(NodeId, usize)>,
    last_delivered: Vec<[u64; 3]>,
    pub events_processed: u64,
    pub stray_packets: u64,
}

impl Network {
    pub fn new(
        seed: u64,
        sender_cfg: impl Fn(TransportKind) -> SenderConfig + 'static,
        receiver_cfg: impl Fn(TransportKind, HostId) -> ReceiverConfig + 'static,
    ) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let pattern = (0..PATTERN_LEN).map(|_| rng.gen()).collect();
        Network {
            now: 0,
            nodes: vec![],
            hosts: vec![],
            flows: vec![],
            flow_index: HashMap::new(),
            events: BinaryHeap::new(),
            seq: 0,
            rng,
            pattern,
            sender_cfg: Box::new(sender_cfg),
            receiver_cfg: Box::new(receiver_cfg),
            wire_check: false,
            sample_interval: 0,
            samples: vec![],
            monitor: None,
            last_delivered: vec![],
            events_processed: 0,
            stray_packets: 0,
        }
    }

    pub fn now(&self) -> Nanos {
        self.now
    }

    pub fn add_host(&mut self, name: &str) -> HostId {
        let id = self.hosts.len();
        self.nodes.push(Node {
            name: name.into(),
            host: Some(id),
            ports: vec![],
            routes: vec![],
        });
        self.hosts.push(self.nodes.len() - 1);
        id
    }

    pub fn add_switch(&mut self, name: &str) -> NodeId {
        self.nodes.push(Node {
            name: name.into(),
            host: None,
            ports: vec![],
            routes: vec![],
        });
        self.nodes.len() - 1
    }

    pub fn host_node(&self, h: HostId) -> NodeId {
        self.hosts[h]
    }

    /// Connect two nodes with a full-duplex link; each side gets an egress port configured by
    /// its `PortConfig`. Returns the two port indices.
    pub fn connect(
        &mut self,
        a: NodeId,
        a_cfg: PortConfig,
        b: NodeId,
        b_cfg: PortConfig,
        link: LinkSpec,
    ) -> (usize, usize) {
        let mk = |cfg, peer| Port {
            queue: PortQueue::new(cfg),
            peer,
            link: link.clone(),
            busy: false,
            wake_at: None,
            tx_bytes: 0,
        };
        self.nodes[a].ports.push(mk(a_cfg, b));
        self.nodes[b].ports.push(mk(b_cfg, a));
        (self.nodes[a].ports.len() - 1, self.nodes[b].ports.len() - 1)
    }

    /// Shortest-path routes from every node to every host (first port wins on ties).
    pub fn compute_routes(&mut self) {
        let n = self.nodes.len();
        for (h, &hn) in self.hosts.clone().iter().enumerate() {
            let mut dist = vec![usize::MAX; n];
            dist[hn] = 0;
            let mut frontier = vec![hn];
            while !frontier.is_empty() {
                let mut next = vec![];
                for &u in &frontier {
                    for v in 0..n {
                        if dist[v] == usize::MAX && self.nodes[v].ports.iter().any(|p| p.peer == u)
                        {
                            dist[v] = dist[u] + 1;
                            next.push(v);
                        }
                    }
                }
                frontier = next;
            }
            for v in 0..n {
                let port = self.nodes[v]
                    .ports
                    .iter()
                    .position(|p| dist[p.peer] != usize::MAX && dist[p.peer] + 1 == dist[v]);
                let routes = &mut self.nodes[v].routes;
                if routes.len() <= h {
                    routes.resize(h + 1, None);
                }
                routes[h] = port;
            }
        }
    }

    /// Monitor one egress port (the bottleneck) in the samples.
    pub fn monitor(&mut self, node: NodeId, port: usize) {
        self.monitor = Some((node, port));
    }

    pub fn add_flow(&mut self, spec: FlowSpec) {
        let idx = self.flows.len();
        self.flow_index.insert(spec.id, idx);
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
            timers: [None, None],
        });
        self.last_delivered.push([0; 3]);
        self.schedule(start, Ev::Start { flow: idx });
    }

    fn schedule(&mut self, at: Nanos, ev: Ev) {
        self.seq += 1;
        self.events.push(Reverse(Scheduled {
            at: at.max(self.now),
            seq: self.seq,
            ev,
        }));
    }

    /// Payload bytes of flow `id` at `offset` (deterministic pattern).
    fn pattern_at(&self, id: u32, offset: u64) -> impl Iterator<Item = u8> + '_ {
        let start = ((offset + u64::from(id) * 1009) % PATTERN_LEN as u64) as usize;
        self.pattern[start..]
            .iter()
            .chain(self.pattern.iter().cycle())
            .copied()
    }

    fn make_payload(&self, id: u32, offset: u64, len: u64) -> Bytes {
        Bytes::from(
            self.pattern_at(id, offset)
                .take(len as usize)
                .collect::<Vec<u8>>(),
        )
    }

    /// Run until `end` or until no event is left; `progress` is called now and then.
    pub fn run_until(&mut self, end: Nanos, mut progress: impl FnMut(Nanos)) {
        if self.sample_interval > 0 && self.samples.is_empty() {
            self.schedule(self.sample_interval, Ev::Sample);
        }
        while let Some(Reverse(top)) = self.events.peek() {
            if top.at > end {
                break;
            }
            let Reverse(Scheduled { at, ev, .. }) = self.events.pop().expect("peeked");
            self.now = at;
            self.events_processed += 1;
            if self.events_processed.is_multiple_of(1 << 16) {
                progress(self.now);
            }
            self.dispatch(ev);
        }
        self.now = self
            .now
            .max(end.min(self.events.peek().map_or(end, |e| e.0.at)));
    }

    /// True when every finite flow has completed and no long-running flow exists.
    pub fn all_finite_flows_done(&self) -> bool {
        self.flows
            .iter()
            .all(|f| f.spec.size.is_some() && (f.completed_at.is_some() || f.error.is_some()))
    }

    fn dispatch(&mut self, ev: Ev) {
        match ev {
            Ev::Arrive { node, pkt } => self.arrive(node, pkt),
            Ev::TxDone { node, port } => {
                self.nodes[node].ports[port].busy = false;
                self.try_send(node, port);
            }
            Ev::Wake { node, port } => {
                if self.nodes[node].ports[port].wake_at == Some(self.now) {
                    self.nodes[node].ports[port].wake_at = None;
                    self.try_send(node, port);
                }
            }
            Ev::Timer { flow, side, at } => {
                if self.flows[flow].timers[side as usize] == Some(at) {
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
            Ev::Start { flow } => self.start_flow(flow),
            Ev::Sample => self.sample(),
        }
    }

    fn start_flow(&mut self, flow: usize) {
        let spec = self.flows[flow].spec.clone();
        let cfg = (self.sender_cfg)(spec.transport);
        match Sender::new(spec.id, cfg, spec.size.unwrap_or(0), self.now) {
            Ok(mut s) => {
                if let Some(size) = spec.size {
                    s.write(self.make_payload(spec.id, 0, size));
                    s.finish();
                    self.flows[flow].written = size;
                }
                self.flows[flow].sender = Some(s);
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
            let chunk = self.make_payload(f.spec.id, f.written, BULK_CHUNK);
            let f = &mut self.flows[flow];
            f.sender.as_mut().expect("checked").write(chunk);
            f.written += BULK_CHUNK;
        }
    }

    /// Drain a connection's transmissions into its host's NIC and re-arm its timer.
    fn service(&mut self, flow: usize, side: Side) {
        let now = self.now;
        let (host, transmits, deadline) = {
            let f = &mut self.flows[flow];
            let mut out = vec![];
            let (host, deadline) = match side {
                Side::Sender => {
                    let Some(s) = f.sender.as_mut() else { return };
                    while let Some(t) = s.poll_transmit(now) {
                        out.push(t);
                    }
                    if f.completed_at.is_none() && s.is_complete() {
                        // FCT is measured at the receiver (below); the sender side just stops.
                    }
                    if let Some(e) = s.error() {
                        f.error.get_or_insert_with(|| e.to_string());
                    }
                    (f.spec.src, s.poll_timeout())
                }
                Side::Receiver => {
                    let Some(r) = f.receiver.as_mut() else { return };
                    while let Some(t) = r.poll_transmit(now) {
                        out.push(t);
                    }
                    (f.spec.dst, r.poll_timeout())
                }
            };
            (host, out, deadline)
        };
        let dst = match side {
            Side::Sender => self.flows[flow].spec.dst,
            Side::Receiver => self.flows[flow].spec.src,
        };
        for t in transmits {
            self.host_send(host, dst, t);
        }
        if let Some(d) = deadline {
            let slot = &mut self.flows[flow].timers[side as usize];
            if slot.is_none_or(|cur| d < cur) {
                let at = d.max(now);
                *slot = Some(at);
                self.schedule(at, Ev::Timer { flow, side, at });
            }
        }
    }

    fn host_send(&mut self, host: HostId, dst: HostId, t: Transmit) {
        let pkt = SimPacket {
            src: host,
            dst,
            class: t.class,
            ecn: t.ecn,
            wire_len: t.packet.wire_len() as u32,
            packet: t.packet,
            created: self.now,
        };
        let node = self.hosts[host];
        self.forward(node, pkt);
    }

    fn forward(&mut self, node: NodeId, pkt: SimPacket) {
        let Some(port) = self.nodes[node].routes.get(pkt.dst).copied().flatten() else {
            self.stray_packets += 1;
            return;
        };
        if self.nodes[node].ports[port].queue.enqueue(pkt) == Enqueued::Accepted {
            self.try_send(node, port);
        }
    }

    fn try_send(&mut self, node: NodeId, port: usize) {
        let now = self.now;
        let p = &mut self.nodes[node].ports[port];
        if p.busy {
            return;
        }
        match p.queue.dequeue(now) {
            Dequeued::Packet(pkt) => {
                let ser = (f64::from(pkt.wire_len) * 8.0 / p.link.bps * 1e9).round() as Nanos;
                p.busy = true;
                p.tx_bytes += u64::from(pkt.wire_len);
                let peer = p.peer;
                let imp = p.link.impairment.clone();
                let arrive = now + ser + p.link.delay;
                self.schedule(now + ser, Ev::TxDone { node, port });
                self.deliver_over_link(peer, pkt, arrive, &imp);
            }
            Dequeued::WaitUntil(t) => {
                if p.wake_at.is_none_or(|w| t < w) {
                    p.wake_at = Some(t);
                    self.schedule(t, Ev::Wake { node, port });
                }
            }
            Dequeued::Empty => {}
        }
    }

    fn deliver_over_link(&mut self, peer: NodeId, pkt: SimPacket, at: Nanos, imp: &Impairment) {
        if imp.loss > 0.0 && self.rng.gen_bool(imp.loss) {
            return;
        }
        if imp.duplicate > 0.0 && self.rng.gen_bool(imp.duplicate) {
            self.schedule(
                at,
                Ev::Arrive {
                    node: peer,
                    pkt: pkt.clone(),
                },
            );
        }
        let delay = if imp.reorder > 0.0 && self.rng.gen_bool(imp.reorder) {
            imp.reorder_delay
        } else {
            0
        };
        self.schedule(at + delay, Ev::Arrive { node: peer, pkt });
    }

    fn arrive(&mut self, node: NodeId, pkt: SimPacket) {
        match self.nodes[node].host {
            Some(h) if h == pkt.dst => self.host_receive(h, pkt),
            Some(_) => self.stray_packets += 1,
            None => self.forward(node, pkt),
        }
    }

    fn host_receive(&mut self, host: HostId, pkt: SimPacket) {
        let packet = if self.wire_check {
            match Packet::decode(&pkt.packet.encode_to_vec()) {
                Ok(p) => p,
                Err(_) => {
                    self.stray_packets += 1;
                    return;
                }
            }
        } else {
            pkt.packet
        };
        let Some(&flow) = self.flow_index.get(&packet.flow_id()) else {
            self.stray_packets += 1;
            return;
        };
        let now = self.now;
        let ce = pkt.ecn == Ecn::Ce;
        let to_receiver = packet.is_sender_to_receiver();
        if to_receiver {
            if self.flows[flow].spec.dst != host {
                self.stray_packets += 1;
                return;
            }
            if self.flows[flow].receiver.is_none() {
                let spec = &self.flows[flow].spec;
                let cfg = (self.receiver_cfg)(spec.transport, host);
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
            self.refill(flow);
            self.service(flow, Side::Sender);
        }
    }

    /// Hand in-order bytes to the "application", checking them against the pattern.
    fn drain_delivered(&mut self, flow: usize) {
        let id = self.flows[flow].spec.id;
        let mut chunks = vec![];
        if let Some(r) = self.flows[flow].receiver.as_mut() {
            while let Some(b) = r.read() {
                chunks.push(b);
            }
        }
        for b in chunks {
            let offset = self.flows[flow].delivered;
            let bad = b
                .iter()
                .zip(self.pattern_at(id, offset))
                .filter(|(a, e)| *a != e)
                .count() as u64;
            let f = &mut self.flows[flow];
            f.corrupted_bytes += bad;
            f.delivered += b.len() as u64;
        }
        let f = &mut self.flows[flow];
        if f.completed_at.is_none() && f.receiver.as_ref().is_some_and(|r| r.is_finished()) {
            f.completed_at = Some(self.now);
        }
    }

    fn sample(&mut self) {
        let mut s = Sample {
            t_us: self.now as f64 / 1e3,
            ..Default::default()
        };
        for (i, f) in self.flows.iter().enumerate() {
            let (p, r) = f.receiver.as_ref().map_or((0, 0), |r| {
                let st = r.stats();
                (
                    st.bytes_proactive + st.packets_proactive * DATA_WIRE_OVERHEAD,
                    st.bytes_reactive + st.packets_reactive * DATA_WIRE_OVERHEAD,
                )
            });
            let last = &mut self.last_delivered[i];
            s.delivered.push(f.delivered - last[0]);
            s.proactive.push(p - last[1]);
            s.reactive.push(r - last[2]);
            *last = [f.delivered, p, r];
        }
        if let Some((n, p)) = self.monitor {
            let q = &self.nodes[n].ports[p].queue;
            s.queue_bytes = [q.bytes(0), q.bytes(1), q.bytes(2)];
        }
        self.samples.push(s);
        let next = self.now + self.sample_interval;
        self.schedule(next, Ev::Sample);
    }

    /// (node name, port index, peer name, link bps, bytes transmitted, per-queue stats) of every switch port.
    pub fn switch_ports(&self) -> Vec<PortReport> {
        let mut out = vec![];
        for n in &self.nodes {
            if n.host.is_some() {
                continue;
            }
            for (i, p) in n.ports.iter().enumerate() {
                out.push(PortReport {
                    node: n.name.clone(),
                    port: i,
                    towards: self.nodes[p.peer].name.clone(),
                    link_bps: p.link.bps,
                    tx_bytes: p.tx_bytes,
                    queues: p.queue.stats,
                });
            }
        }
        out
    }

    pub fn port_tx_bytes(&self, node: NodeId, port: usize) -> u64 {
        self.nodes[node].ports[port].tx_bytes
    }

    pub fn port_stats(&self, node: NodeId, port: usize) -> [QueueStats; 3] {
        self.nodes[node].ports[port].queue.stats
    }

    /// Data packets dropped anywhere (credits excluded: dropping them is by design).
    pub fn data_drops(&self) -> u64 {
        self.nodes
            .iter()
            .flat_map(|n| n.ports.iter())
            .map(|p| {
                p.queue.stats[1..]
                    .iter()
                    .map(|s| s.dropped_full + s.dropped_red)
                    .sum::<u64>()
            })
            .sum()
    }
}

#[derive(Clone, Debug, serde::Serialize)]
pub struct PortReport {
    pub node: String,
    pub port: usize,
    pub towards: String,
    pub link_bps: f64,
    pub tx_bytes: u64,
    pub queues: [QueueStats; 3],
}
