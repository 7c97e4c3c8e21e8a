//! Topology builders: star, dumbbell, parking lot, leaf-spine, the 3-tier Clos of
//! FlexPass §6.2 and FlashPass §IV-B2's three data centres joined by WAN links. A builder adds hosts, switches and links to a `Network` (ports configured
//! by `PortFactory`) and returns what the experiment needs to know about the result: racks,
//! named groups of ports (for utilisation and queue monitoring) and path delays.

use crate::net::{Impairment, LinkSpec, Network, NodeId};
use crate::packet::HostId;
use crate::queue::{PortConfig, SharedBuffer};
use flexpass_core::Nanos;
use serde::Serialize;
use std::collections::BTreeMap;

/// A built topology, as data. Dimensions and rates are validated by the experiment.
#[derive(Clone, Debug, Serialize)]
pub enum Shape {
    /// `hosts` hosts on one switch `s1` (h0 is usually the receiver).
    Star { hosts: usize },
    /// `left` hosts on `s1`, `right` hosts on `s2`, `s1`–`s2` at `bottleneck_bps`.
    Dumbbell {
        left: usize,
        right: usize,
        bottleneck_bps: f64,
        /// Link delays of the left hosts spread evenly over [lo, hi] (host i: lo + (hi − lo)
        /// · (i + ½)/left), instead of the common link delay (FlashPass §IV-B1: senders 0–20
        /// ms from the bottleneck switch).
        left_delay: Option<(Nanos, Nanos)>,
        /// Delay of the s1–s2 link, instead of the common link delay.
        bottleneck_delay: Option<Nanos>,
    },
    /// Switches `s0 … sN` in a chain (N = `bottlenecks` links between them, each at
    /// `bottleneck_bps`), `hosts_per_switch` hosts on each.
    ParkingLot {
        bottlenecks: usize,
        hosts_per_switch: usize,
        bottleneck_bps: f64,
    },
    /// Two tiers: every leaf connects to every spine at `uplink_bps`.
    LeafSpine {
        leaves: usize,
        spines: usize,
        hosts_per_leaf: usize,
        uplink_bps: f64,
    },
    /// Three tiers (FlexPass §6.2 / kaist-ina/ns2-flexpass `large-scale.tcl`): `tors` ToRs of
    /// `hosts / tors` hosts; `aggs` aggregation switches in pods of `aggs_per_pod`, each ToR
    /// linked to every aggregation switch of its pod; aggregation switch at position `a` of its
    /// pod linked to cores `a, a + aggs_per_pod, …` at `core_bps`.
    Clos3 {
        cores: usize,
        aggs: usize,
        tors: usize,
        hosts: usize,
        aggs_per_pod: usize,
        core_bps: f64,
    },
    /// FlashPass §IV-B2 / Fig. 13: three data centres, each `hosts_per_dc` hosts on its
    /// border router `dc0`, `dc1`, `dc2` (host links at the common rate and delay); the
    /// border routers joined in a triangle by WAN links at `wan_bps` with one-way delays
    /// `wan_delay` = [dc0–dc1, dc1–dc2, dc2–dc0]. Routing is by hop count, so every
    /// inter-DC flow takes its direct WAN link (one WAN hop), whatever the delays.
    ThreeDc {
        hosts_per_dc: usize,
        wan_bps: f64,
        wan_delay: [Nanos; 3],
    },
}

/// Link parameters shared by all builders.
#[derive(Clone, Debug, Serialize)]
pub struct Links {
    /// Host links (and every other link unless the shape says otherwise), bits/s.
    pub bps: f64,
    /// Propagation delay of every link.
    pub delay: Nanos,
    /// Added to each host's link in both directions (host processing delay).
    pub host_delay: Nanos,
    #[serde(skip)]
    pub impairment: Impairment,
}

/// Port configuration of a switch port and of a host NIC, for a link of the given rate.
pub trait PortFactory {
    fn switch_port(&self, link_bps: f64) -> PortConfig;
    fn nic_port(&self, link_bps: f64) -> PortConfig;
    /// A switch's shared buffer, if switches have one.
    fn shared_buffer(&self) -> Option<SharedBuffer>;
}

/// What the experiment needs from a built topology.
#[derive(Clone, Debug, Serialize)]
pub struct Built {
    /// Rack (ToR / leaf / switch) of each host: the unit of deployment.
    pub rack_of: Vec<usize>,
    pub racks: usize,
    /// Named groups of egress ports, e.g. "tor-up" (ToR uplinks), "host-down" (the last hop
    /// to each host), "bottleneck".
    #[serde(skip)]
    pub groups: BTreeMap<String, Vec<(NodeId, usize)>>,
    /// Capacity the workload load is defined on (bits/s): the ToR / leaf uplinks where the
    /// topology has racks with uplinks (FlexPass §6.2: "the load … of the core (up links of
    /// ToR)"), else the hosts' links.
    pub load_capacity_bps: f64,
    /// Host link rate, bits/s.
    pub host_bps: f64,
    /// The switch node names, for port selectors.
    pub switches: Vec<String>,
    /// One-way propagation delay (links and host delays) from a host to another, by the
    /// number of links between them: `one_way[links]`.
    #[serde(skip)]
    hops: Vec<Vec<u8>>,
    /// One-way propagation delay (links, host delays included) from a host to another,
    /// along the first shortest route: `delays[a][b]`.
    #[serde(skip)]
    delays: Vec<Vec<Nanos>>,
}

impl Built {
    /// Links between two hosts.
    pub fn hops(&self, a: HostId, b: HostId) -> usize {
        self.hops[a][b] as usize
    }

    /// One-way propagation delay between two hosts (links and host delays).
    pub fn one_way_delay(&self, a: HostId, b: HostId) -> Nanos {
        self.delays[a][b]
    }

    /// The largest number of links between two hosts.
    pub fn diameter(&self) -> usize {
        self.hops
            .iter()
            .flat_map(|r| r.iter())
            .copied()
            .max()
            .unwrap_or(0) as usize
    }

    /// The pair of hosts farthest apart in propagation delay (ties: more links), as
    /// (links, one-way delay): the path of the topology's base RTT.
    pub fn longest_path(&self) -> (usize, Nanos) {
        let mut best = (0, 0);
        for (a, row) in self.delays.iter().enumerate() {
            for (b, &d) in row.iter().enumerate() {
                let links = self.hops(a, b);
                if (d, links) > (best.1, best.0) {
                    best = (links, d);
                }
            }
        }
        best
    }
}

/// ECMP tiers (hash salts, `Node::tier`).
const TIER_EDGE: u8 = 1;
const TIER_AGG: u8 = 2;
const TIER_CORE: u8 = 3;

struct Builder<'a> {
    net: &'a mut Network,
    ports: &'a dyn PortFactory,
    links: &'a Links,
    groups: BTreeMap<String, Vec<(NodeId, usize)>>,
    rack_of: Vec<usize>,
    switches: Vec<String>,
}

impl Builder<'_> {
    fn switch(&mut self, name: String, tier: u8) -> NodeId {
        self.switches.push(name.clone());
        self.net.add_switch(&name, tier, self.ports.shared_buffer())
    }

    fn link(&self, bps: f64, delay: Nanos) -> LinkSpec {
        LinkSpec {
            bps,
            delay,
            impairment: self.links.impairment.clone(),
        }
    }

    /// A host on `sw` in `rack`; returns the switch's port towards it.
    fn host(&mut self, sw: NodeId, rack: usize) -> usize {
        self.host_with_delay(sw, rack, self.links.delay)
    }

    /// A host whose link has propagation delay `delay` (plus the host delay).
    fn host_with_delay(&mut self, sw: NodeId, rack: usize, delay: Nanos) -> usize {
        let h = self.net.add_host(&format!("h{}", self.rack_of.len()));
        self.rack_of.push(rack);
        let hn = self.net.host_node(h);
        let bps = self.links.bps;
        let link = self.link(bps, delay + self.links.host_delay);
        let (nic, down) = self.net.connect(
            hn,
            self.ports.nic_port(bps),
            sw,
            self.ports.switch_port(bps),
            link,
        );
        self.group("host-up", hn, nic);
        self.group("host-down", sw, down);
        down
    }

    /// Switch-to-switch link; `a`'s port goes to group `up`, `b`'s to `down`.
    fn trunk(&mut self, a: NodeId, b: NodeId, bps: f64, up: &str, down: &str) {
        self.trunk_with_delay(a, b, bps, self.links.delay, up, down)
    }

    fn trunk_with_delay(
        &mut self,
        a: NodeId,
        b: NodeId,
        bps: f64,
        delay: Nanos,
        up: &str,
        down: &str,
    ) {
        let link = self.link(bps, delay);
        let (pa, pb) = self.net.connect(
            a,
            self.ports.switch_port(bps),
            b,
            self.ports.switch_port(bps),
            link,
        );
        self.group(up, a, pa);
        self.group(down, b, pb);
    }

    fn group(&mut self, name: &str, node: NodeId, port: usize) {
        self.groups
            .entry(name.to_string())
            .or_default()
            .push((node, port));
    }
}

/// Build `shape` into `net` (which must be empty) and compute its routes.
pub fn build(net: &mut Network, shape: &Shape, links: &Links, ports: &dyn PortFactory) -> Built {
    let mut b = Builder {
        net,
        ports,
        links,
        groups: BTreeMap::new(),
        rack_of: vec![],
        switches: vec![],
    };
    let host_bps = links.bps;
    let load_capacity_bps = match *shape {
        Shape::Star { hosts } => {
            let sw = b.switch("s1".into(), TIER_EDGE);
            for i in 0..hosts {
                let down = b.host(sw, 0);
                if i == 0 {
                    b.group("bottleneck", sw, down);
                }
            }
            hosts as f64 * host_bps
        }
        Shape::Dumbbell {
            left,
            right,
            bottleneck_bps,
            left_delay,
            bottleneck_delay,
        } => {
            let s1 = b.switch("s1".into(), TIER_EDGE);
            let s2 = b.switch("s2".into(), TIER_EDGE);
            for i in 0..left {
                let d = left_delay.map_or(links.delay, |(lo, hi)| {
                    lo + ((hi - lo) as f64 * (i as f64 + 0.5) / left as f64) as Nanos
                });
                b.host_with_delay(s1, 0, d);
            }
            for _ in 0..right {
                b.host(s2, 1);
            }
            b.trunk_with_delay(
                s1,
                s2,
                bottleneck_bps,
                bottleneck_delay.unwrap_or(links.delay),
                "bottleneck",
                "bottleneck-reverse",
            );
            bottleneck_bps
        }
        Shape::ParkingLot {
            bottlenecks,
            hosts_per_switch,
            bottleneck_bps,
        } => {
            let sws: Vec<NodeId> = (0..=bottlenecks)
                .map(|i| b.switch(format!("s{i}"), TIER_EDGE))
                .collect();
            for (i, &sw) in sws.iter().enumerate() {
                for _ in 0..hosts_per_switch {
                    b.host(sw, i);
                }
            }
            for w in sws.windows(2) {
                b.trunk(
                    w[0],
                    w[1],
                    bottleneck_bps,
                    "bottleneck",
                    "bottleneck-reverse",
                );
            }
            bottlenecks as f64 * bottleneck_bps
        }
        Shape::LeafSpine {
            leaves,
            spines,
            hosts_per_leaf,
            uplink_bps,
        } => {
            let spine: Vec<NodeId> = (0..spines)
                .map(|i| b.switch(format!("spine{i}"), TIER_AGG))
                .collect();
            for l in 0..leaves {
                let leaf = b.switch(format!("leaf{l}"), TIER_EDGE);
                for _ in 0..hosts_per_leaf {
                    b.host(leaf, l);
                }
                for &s in &spine {
                    b.trunk(leaf, s, uplink_bps, "tor-up", "tor-down");
                }
            }
            (leaves * spines) as f64 * uplink_bps
        }
        Shape::Clos3 {
            cores,
            aggs,
            tors,
            hosts,
            aggs_per_pod,
            core_bps,
        } => {
            let pods = aggs / aggs_per_pod;
            let tors_per_pod = tors / pods;
            let hosts_per_tor = hosts / tors;
            let core: Vec<NodeId> = (0..cores)
                .map(|i| b.switch(format!("core{i}"), TIER_CORE))
                .collect();
            let agg: Vec<NodeId> = (0..aggs)
                .map(|i| b.switch(format!("agg{i}"), TIER_AGG))
                .collect();
            for (i, &a) in agg.iter().enumerate() {
                let pos = i % aggs_per_pod;
                for j in (pos..cores).step_by(aggs_per_pod) {
                    b.trunk(a, core[j], core_bps, "agg-up", "agg-down");
                }
            }
            for t in 0..tors {
                let tor = b.switch(format!("tor{t}"), TIER_EDGE);
                for _ in 0..hosts_per_tor {
                    b.host(tor, t);
                }
                let pod = t / tors_per_pod;
                for &a in &agg[pod * aggs_per_pod..(pod + 1) * aggs_per_pod] {
                    b.trunk(tor, a, host_bps, "tor-up", "tor-down");
                }
            }
            (tors * aggs_per_pod) as f64 * host_bps
        }
        Shape::ThreeDc {
            hosts_per_dc,
            wan_bps,
            wan_delay,
        } => {
            let dc: Vec<NodeId> = (0..3)
                .map(|i| b.switch(format!("dc{i}"), TIER_EDGE))
                .collect();
            for (i, &router) in dc.iter().enumerate() {
                for _ in 0..hosts_per_dc {
                    b.host(router, i);
                }
            }
            for (i, &delay) in wan_delay.iter().enumerate() {
                b.trunk_with_delay(dc[i], dc[(i + 1) % 3], wan_bps, delay, "wan", "wan");
            }
            // The load is on the WAN links, both directions: with source and destination in
            // different DCs (the paper's traffic) every flow crosses exactly one of the six.
            6.0 * wan_bps
        }
    };
    let racks = b.rack_of.iter().max().map_or(0, |r| r + 1);
    let Builder {
        groups,
        rack_of,
        switches,
        ..
    } = b;
    net.compute_routes();
    let (hops, delays) = host_paths(net);
    Built {
        rack_of,
        racks,
        groups,
        load_capacity_bps,
        host_bps,
        switches,
        hops,
        delays,
    }
}

/// Links and one-way propagation delay between every pair of hosts (breadth-first over
/// the built network; hosts do not forward). The delay is summed along the first shortest
/// route found; in every builder the routes of equal length have equal delays.
fn host_paths(net: &Network) -> (Vec<Vec<u8>>, Vec<Vec<Nanos>>) {
    let nodes = net.num_nodes();
    (0..net.num_hosts())
        .map(|h| {
            let src = net.host_node(h);
            let mut dist = vec![u8::MAX; nodes];
            let mut delay = vec![0; nodes];
            dist[src] = 0;
            let mut frontier = vec![src];
            while !frontier.is_empty() {
                let mut next = vec![];
                for &u in &frontier {
                    if u != src && net.is_host_node(u) {
                        continue;
                    }
                    for (v, d) in net.neighbour_delays(u) {
                        if dist[v] == u8::MAX {
                            dist[v] = dist[u] + 1;
                            delay[v] = delay[u] + d;
                            next.push(v);
                        }
                    }
                }
                frontier = next;
            }
            (0..net.num_hosts())
                .map(|g| (dist[net.host_node(g)], delay[net.host_node(g)]))
                .unzip()
        })
        .unzip()
}
