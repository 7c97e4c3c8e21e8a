//! The network's nodes, links and routes: building it (hosts, switches, links), the
//! shortest-path ECMP routes and the symmetric per-flow hash that picks among them; links
//! failing and coming back, flows pinned through a switch (`flow.via`).

use super::event::Ev;
use super::{LinkSpec, Network, Node, NodeId, Port, Route};
use crate::packet::{HostId, SimPacket};
use crate::queue::{PortConfig, PortQueue, SharedBuffer};
use flexpass_core::Nanos;

impl Network {
    pub fn add_host(&mut self, name: &str) -> HostId {
        let id = self.hosts.len();
        self.nodes.push(Node {
            name: name.into(),
            host: Some(id),
            tier: 0,
            ports: vec![],
            routes: vec![],
            route_ports: vec![],
            shared: None,
        });
        self.hosts.push(self.nodes.len() - 1);
        id
    }

    /// A switch at ECMP tier `tier` (see `Node::tier`), with a shared buffer if given.
    pub fn add_switch(&mut self, name: &str, tier: u8, shared: Option<SharedBuffer>) -> NodeId {
        self.nodes.push(Node {
            name: name.into(),
            host: None,
            tier,
            ports: vec![],
            routes: vec![],
            route_ports: vec![],
            shared,
        });
        self.nodes.len() - 1
    }

    pub fn host_node(&self, h: HostId) -> NodeId {
        self.hosts[h]
    }

    pub fn num_hosts(&self) -> usize {
        self.hosts.len()
    }

    pub fn node_name(&self, n: NodeId) -> &str {
        &self.nodes[n].name
    }

    pub fn host_name(&self, h: HostId) -> &str {
        &self.nodes[self.hosts[h]].name
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
        let (pa, pb) = (self.nodes[a].ports.len(), self.nodes[b].ports.len());
        let mk = |cfg, peer, peer_port| Port {
            queue: PortQueue::new(cfg),
            peer,
            link: link.clone(),
            busy_until: 0,
            tx_done_seq: None,
            tx_done_queued: false,
            ser_memo: [(0, 0); 2],
            wake_at: None,
            tx_bytes: 0,
            peer_port,
            up: true,
        };
        self.nodes[a].ports.push(mk(a_cfg, b, pb));
        self.nodes[b].ports.push(mk(b_cfg, a, pa));
        (self.nodes[a].ports.len() - 1, self.nodes[b].ports.len() - 1)
    }

    /// Shortest-path routes over the links that are up, from every node to every host; every
    /// egress port on a shortest path is an ECMP member, in port order (the same order on
    /// every switch of a tier, so the symmetric hash keeps credits on their data's path after
    /// a failure too). Hosts do not forward.
    pub fn compute_routes(&mut self) {
        let n = self.nodes.len();
        for node in &mut self.nodes {
            node.routes.clear();
            node.route_ports.clear();
        }
        let mut dist = vec![usize::MAX; n];
        let mut frontier = vec![];
        let mut next = vec![];
        for &hn in &self.hosts {
            dist.iter_mut().for_each(|d| *d = usize::MAX);
            dist[hn] = 0;
            frontier.clear();
            frontier.push(hn);
            while !frontier.is_empty() {
                next.clear();
                for &u in &frontier {
                    if u != hn && self.nodes[u].host.is_some() {
                        continue;
                    }
                    for p in self.nodes[u].ports.iter().filter(|p| p.up) {
                        if dist[p.peer] == usize::MAX {
                            dist[p.peer] = dist[u] + 1;
                            next.push(p.peer);
                        }
                    }
                }
                std::mem::swap(&mut frontier, &mut next);
            }
            for (v, node) in self.nodes.iter_mut().enumerate() {
                let start = node.route_ports.len() as u32;
                if dist[v] != usize::MAX && v != hn {
                    for (i, p) in node.ports.iter().enumerate() {
                        if p.up && dist[p.peer] != usize::MAX && dist[p.peer] + 1 == dist[v] {
                            node.route_ports.push(i as u16);
                        }
                    }
                }
                let len = node.route_ports.len() as u32 - start;
                let first = node.route_ports.get(start as usize).copied().unwrap_or(0);
                node.routes.push(Route {
                    start,
                    first,
                    len: len.min(u8::MAX as u32) as u8,
                });
            }
        }
    }

    /// "node->peer": the egress port of `node` towards `peer`.
    pub fn port_name(&self, node: NodeId, port: usize) -> String {
        format!(
            "{}->{}",
            self.nodes[node].name, self.nodes[self.nodes[node].ports[port].peer].name
        )
    }

    /// Every port as (node, port index, name of the node, name of the peer).
    pub fn ports(&self) -> impl Iterator<Item = (NodeId, usize, &str, &str)> + '_ {
        self.nodes.iter().enumerate().flat_map(move |(n, node)| {
            node.ports
                .iter()
                .enumerate()
                .map(move |(i, p)| (n, i, node.name.as_str(), self.nodes[p.peer].name.as_str()))
        })
    }

    pub fn num_nodes(&self) -> usize {
        self.nodes.len()
    }

    /// The nodes `n` has a link to, in port order.
    pub fn neighbours(&self, n: NodeId) -> impl Iterator<Item = NodeId> + '_ {
        self.nodes[n].ports.iter().map(|p| p.peer)
    }

    /// Each neighbour with the propagation delay of the link to it.
    pub fn neighbour_delays(&self, n: NodeId) -> impl Iterator<Item = (NodeId, Nanos)> + '_ {
        self.nodes[n].ports.iter().map(|p| (p.peer, p.link.delay))
    }

    pub fn is_host_node(&self, n: NodeId) -> bool {
        self.nodes[n].host.is_some()
    }

    /// Symmetric per-flow ECMP hash: the same for both directions of a flow (the hosts are
    /// taken as an unordered pair) at switches of the same tier.
    pub(super) fn ecmp_hash(flow_id: u32, a: HostId, b: HostId, tier: u8) -> u64 {
        let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
        let mut x =
            u64::from(flow_id) ^ (lo as u64) << 20 ^ (hi as u64) << 40 ^ u64::from(tier) << 60;
        // splitmix64 finaliser
        x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        x ^ (x >> 31)
    }

    pub(super) fn route(&self, node: NodeId, pkt: &SimPacket) -> Option<usize> {
        self.route_flow(node, pkt.packet.flow_id(), pkt.src, pkt.dst)
    }

    /// The egress port `node` sends flow `flow_id` (between hosts `src` and `dst`, toward
    /// `dst`) on: the only route, the first (single-path), the pinned switch's (`flow.via`)
    /// or the symmetric ECMP hash's choice.
    pub(super) fn route_flow(
        &self,
        node: NodeId,
        flow_id: u32,
        src: HostId,
        dst: HostId,
    ) -> Option<usize> {
        let n = &self.nodes[node];
        let r = *n.routes.get(dst)?;
        match r.len {
            0 => None,
            1 => Some(r.first as usize),
            _ if self.single_path => Some(r.first as usize),
            k => {
                let members = &n.route_ports[r.start as usize..r.start as usize + k as usize];
                if !self.pinned.is_empty() {
                    if let Some(&via) = self.pinned.get(&flow_id) {
                        let pinned = members.iter().find(|&&m| n.ports[m as usize].peer == via);
                        if let Some(&m) = pinned {
                            return Some(m as usize);
                        }
                    }
                }
                let h = Self::ecmp_hash(flow_id, src, dst, n.tier);
                Some(members[(h % u64::from(k)) as usize] as usize)
            }
        }
    }

    /// The equal-cost next hops of `node` toward host `dst`: (peer, egress port).
    pub fn next_hops(&self, node: NodeId, dst: HostId) -> Vec<(NodeId, usize)> {
        let n = &self.nodes[node];
        let Some(&Route { start, len, .. }) = n.routes.get(dst) else {
            return vec![];
        };
        n.route_ports[start as usize..start as usize + len as usize]
            .iter()
            .map(|&m| (n.ports[m as usize].peer, m as usize))
            .collect()
    }
}

impl Port {
    /// Time to put a frame of `wire_len` bytes on the link, ns.
    #[inline]
    pub(super) fn serialization(&mut self, wire_len: u32) -> Nanos {
        let [a, b] = self.ser_memo;
        if a.0 == wire_len {
            return Nanos::from(a.1);
        }
        if b.0 == wire_len {
            return Nanos::from(b.1);
        }
        let ser = (f64::from(wire_len) * 8.0 / self.link.bps * 1e9).round() as Nanos;
        if let Ok(ns) = u32::try_from(ser) {
            self.ser_memo = [(wire_len, ns), a];
        }
        ser
    }
}

/// Faults: links failing and coming back, flows pinned through a switch.
impl Network {
    /// Schedule a link failure (`up` false) or repair of the link at `node`'s `port`, and the
    /// route recomputation `reroute_after` later (None: the routes stay).
    pub fn schedule_link(
        &mut self,
        at: Nanos,
        node: NodeId,
        port: usize,
        up: bool,
        reroute_after: Option<Nanos>,
    ) {
        self.schedule(
            at,
            Ev::Link {
                node: node as u32,
                port: port as u32,
                up,
            },
        );
        if let Some(after) = reroute_after {
            self.schedule(at + after, Ev::Reroute);
        }
    }

    /// Pin flow `flow_id` through switch `via` (see `pinned`).
    pub fn pin_flow(&mut self, flow_id: u32, via: NodeId) {
        self.pinned.insert(flow_id, via);
    }

    /// Both directions of the link go down (dropping what their queues hold) or up.
    pub(super) fn set_link(&mut self, node: NodeId, port: usize, up: bool) {
        let (peer, peer_port) = {
            let p = &self.nodes[node].ports[port];
            (p.peer, p.peer_port)
        };
        for (n, i) in [(node, port), (peer, peer_port)] {
            let nd = &mut self.nodes[n];
            nd.ports[i].up = up;
            if !up {
                nd.ports[i].queue.flush(nd.shared.as_mut());
            }
        }
        if up {
            self.try_send(node, port);
            self.try_send(peer, peer_port);
        }
    }
}
