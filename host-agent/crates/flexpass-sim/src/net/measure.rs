//! What the network measures: throughput and queue samples, queue traces of monitored
//! ports, and every port's counters.

use super::{Ev, Network, NodeId, DATA_WIRE_OVERHEAD};
use crate::queue::{Profile, QueueStats, MAX_QUEUES};
use serde::Serialize;

/// Per-interval samples for throughput plots and starvation analysis.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Sample {
    pub t_us: f64,
    /// Delivered bytes per flow in this interval.
    pub delivered: Vec<u64>,
    /// Data bytes on the wire (Ethernet, incl. headers, preamble, IFG) received per flow on
    /// each sub-flow in this interval.
    pub proactive: Vec<u64>,
    pub reactive: Vec<u64>,
    /// Bytes in the first monitored port's Q0, Q1 and Q2 at the sample instant (PPT
    /// profile: nothing, the HCP queues P0–P3, the LCP queues P4–P7).
    pub queue_bytes: [u64; 3],
}

/// Queue occupancy of one monitored port at every sample instant.
#[derive(Clone, Debug, Default, Serialize)]
pub struct QueueTrace {
    pub port: String,
    /// Bytes in Q1, of which red (reactive), and in Q2, per sample (PPT profile: q1 = the
    /// HCP queues P0–P3, q2 = the LCP queues P4–P7).
    pub q1: Vec<u64>,
    pub q1_red: Vec<u64>,
    pub q2: Vec<u64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct PortReport {
    pub node: String,
    /// The port is a host's NIC.
    pub host: bool,
    pub port: usize,
    pub towards: String,
    pub link_bps: f64,
    pub tx_bytes: u64,
    /// Per queue: 3 (credits, FlexPass, legacy) or the 8 priorities of the PPT profile.
    pub queues: Vec<QueueStats>,
    /// The queues holding data (all but the credit queue).
    #[serde(skip)]
    pub data_queues: std::ops::Range<usize>,
}

impl Network {
    /// Monitor egress ports: the first one's queues are in the samples; every one gets a
    /// `QueueTrace`.
    pub fn monitor(&mut self, node: NodeId, port: usize) {
        let name = self.port_name(node, port);
        self.monitors.push((node, port));
        self.queue_traces.push(QueueTrace {
            port: name,
            ..Default::default()
        });
    }

    pub(super) fn sample(&mut self) {
        let mut s = Sample {
            t_us: self.now as f64 / 1e3,
            ..Default::default()
        };
        if self.sample_flows {
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
        }
        for (i, &(n, p)) in self.monitors.iter().enumerate() {
            let q = &self.nodes[n].ports[p].queue;
            let b = if q.cfg.profile == Profile::Ppt {
                let half = MAX_QUEUES / 2;
                let sum = |r: std::ops::Range<usize>| r.map(|x| q.bytes(x)).sum::<u64>();
                [0, sum(0..half), sum(half..2 * half)]
            } else {
                [q.bytes(0), q.bytes(1), q.bytes(2)]
            };
            if i == 0 {
                s.queue_bytes = b;
            }
            let t = &mut self.queue_traces[i];
            t.q1.push(b[1]);
            t.q1_red.push(q.red_bytes());
            t.q2.push(b[2]);
        }
        self.samples.push(s);
        let next = self.now + self.sample_interval;
        self.schedule(next, Ev::Sample);
    }

    /// Every port's counters.
    pub fn port_reports(&self) -> Vec<PortReport> {
        let mut out = vec![];
        for n in &self.nodes {
            for (i, p) in n.ports.iter().enumerate() {
                out.push(PortReport {
                    node: n.name.clone(),
                    host: n.host.is_some(),
                    port: i,
                    towards: self.nodes[p.peer].name.clone(),
                    link_bps: p.link.bps,
                    tx_bytes: p.tx_bytes,
                    queues: p.queue.stats().to_vec(),
                    data_queues: p.queue.cfg.profile.data_queues(),
                });
            }
        }
        out
    }

    pub fn port_tx_bytes(&self, node: NodeId, port: usize) -> u64 {
        self.nodes[node].ports[port].tx_bytes
    }

    pub fn port_stats(&self, node: NodeId, port: usize) -> Vec<QueueStats> {
        self.nodes[node].ports[port].queue.stats().to_vec()
    }

    pub fn port_link_bps(&self, node: NodeId, port: usize) -> f64 {
        self.nodes[node].ports[port].link.bps
    }

    /// Largest shared-buffer occupancy of any switch, bytes.
    pub fn max_shared_buffer_used(&self) -> Option<u64> {
        self.nodes
            .iter()
            .filter_map(|n| n.shared.as_ref().map(|b| b.max_used))
            .max()
    }
}
