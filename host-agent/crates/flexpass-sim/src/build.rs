//! From an experiment to a network ready to run: the switches' and hosts' configuration
//! (`Stack`), the topology built with it, the traffic loaded, the monitors and faults set
//! (`prepare`). The runners (`run`, `convergence`) drive what it prepares and `report` reads
//! the result.

use crate::experiment::{Experiment, FaultKind, FlashPassSpec, PFabricSpec, PaseSpec, PptSpec};
use crate::net::{FlowKind, FlowSpec, Network, NodeId, PaseArbitration};
use crate::queue::{BufferLimit, PortConfig, Profile, SharedBuffer, MAX_QUEUES};
use crate::topology::{self, Built, Links, PortFactory};
use crate::traffic;
use flexpass_core::config::credit_queue_bps_mtu;
use flexpass_core::{
    CreditConfig, FlashPassConfig, Nanos, PFabricConfig, PptConfig, ReceiverConfig, SenderConfig,
    MILLIS,
};
use flexpass_wire::TransportKind;
use flexpass_wire::{max_frame_wire, max_payload_for_mtu, MIN_ETHERNET_WIRE};

/// Runs with more flows than this keep only the per-flow record, not the full transport
/// statistics of each flow nor per-flow throughput samples (256: FlashPass Fig. 10b's 200
/// long flows still get their shares).
pub const DETAILED_FLOWS: usize = 256;

/// The switches' and hosts' configuration of one experiment (one place that turns the
/// experiment's parameters into port and transport configurations).
#[derive(Clone, Debug)]
pub struct Stack {
    pub profile: Profile,
    /// Weight of Q1 and credit share: w_q (FlexPass), the oracle weight (oWF), 1 (naive, LY).
    pub w_q: f64,
    pub credit_share: f64,
    pub k_legacy: u64,
    pub k_q1: u64,
    /// PPT profile: K of the LCP queues P4–P7 (the HCP queues P0–P3 use `k_legacy`), or
    /// λ_HCP / λ_LCP for K = λ·C·RTT per port.
    pub k_lcp: u64,
    pub lambda_hcp: Option<f64>,
    pub lambda_lcp: Option<f64>,
    /// PPT profile: ECN compares K with the port's occupancy (all queues), not the queue's.
    pub ecn_on_port: bool,
    /// PPT profile, switch ports: LCP packets are dropped beyond this occupancy.
    pub lcp_drop: u64,
    /// PPT profile, switch ports: HCP packets push queued LCP packets out of a full buffer.
    pub lcp_pushout: bool,
    pub ppt: PptSpec,
    pub pase: PaseSpec,
    pub pfabric: PFabricSpec,
    pub tcp: flexpass_core::WindowCc,
    pub flashpass: FlashPassSpec,
    pub emulation_threshold: usize,
    /// FlashPass profile: control packets in a strict-priority queue above data.
    pub feedback_priority: bool,
    pub red_threshold: u64,
    /// `switch.red_basis = "red"`: the threshold counts red bytes only.
    pub red_counts_red_only: bool,
    pub buffer: u64,
    /// Per-port buffer in bytes per Gbit/s of the port's link, replacing `buffer` when set.
    pub buffer_per_gbps: Option<u64>,
    pub shared_buffer: Option<(u64, f64)>,
    /// Host NIC buffer (default: a switch port's).
    pub nic_buffer: Option<u64>,
    pub credit_queue: usize,
    pub credit_burst: f64,
    pub nic_credit_share: Option<f64>,
    /// `switch.port_credit_share`: the ports' credit shapers, when not `credit_share`.
    pub port_credit_share: Option<f64>,
    pub seed: u64,
    pub rto_min: Nanos,
    pub give_up: Nanos,
    pub init_cwnd: Option<f64>,
    /// `host.reactive_init_cwnd`: FlexPass's reactive sub-flow's initial window.
    pub reactive_init_cwnd: Option<f64>,
    /// DCTCP's tail-loss probe (dctcp and ppt senders).
    pub tlp: bool,
    pub alpha: f64,
    pub w_init: Option<f64>,
    pub target_loss_rule: flexpass_core::TargetLossRule,
    pub credit_batch: u32,
    /// `host.max_cwnd`, `host.dctcp_alpha_init`: the DCTCP window's cap and first α.
    pub max_cwnd: Option<f64>,
    pub dctcp_alpha_init: Option<f64>,
    /// `host.tcp_handshake`: reactive data waits for the handshake.
    pub tcp_handshake: bool,
    /// `host.flexpass_beta`: FlexPass receivers pace at `credit_share` × their rate.
    pub flexpass_beta: bool,
    /// `host.credit_jitter`: the receivers' pacing jitter.
    pub credit_jitter: Option<f64>,
    /// Algorithm 1's initial update period: the base RTT across the topology.
    pub base_rtt: Nanos,
    pub host_bps: f64,
    /// IP MTU of the links: segment size, credit rates (docs/protocol.md §9).
    pub mtu: usize,
}

/// PPT receivers in the model buffer this much out of order (the LCP sends from the tail of
/// flows up to a few hundred MB in the data-mining workload; the model's payloads are
/// slices of one shared pattern, so holding them costs no copy), and senders send
/// opportunistic packets only within it.
const PPT_REORDER_BYTES: u64 = 1 << 30;

fn ms(v: f64) -> Nanos {
    (v * MILLIS as f64).round() as Nanos
}

fn kb(v: f64) -> u64 {
    (v * 1000.0) as u64
}

impl Stack {
    /// `owf_weight`: oWF's oracle weight (`traffic::owf_oracle_weight`).
    pub fn new(exp: &Experiment, base_rtt: Nanos, owf_weight: f64) -> Self {
        let s = &exp.switch;
        let (w_q, credit_share) = match s.profile {
            // The artifact's actual_xpass_queue_weight: w_q of the bandwidth net of credits.
            Profile::FlexPass if s.credit_share_net => {
                let f = max_frame_wire(exp.topology.mtu()) as f64;
                (s.w_q, s.w_q * (f - MIN_ETHERNET_WIRE as f64) / f)
            }
            Profile::FlexPass => (s.w_q, s.w_q),
            // A weight of 0 or 1 would leave one queue without service: the oracle is kept
            // inside (1 %, 99 %).
            Profile::Owf => {
                let w = s.owf_weight.unwrap_or(owf_weight).clamp(0.01, 0.99);
                (w, w)
            }
            Profile::Naive | Profile::Layering => (s.w_q, 1.0),
            // No credits: the share only sizes the (unused) credit queue.
            Profile::Ppt => (s.w_q, 1.0),
            // One data queue; Q0 (the emulation queue, or ExpressPass's credits) at 84/(84+1538).
            Profile::FlashPass => (1.0, 1.0),
            // One queue, no credits.
            Profile::PFabric => (1.0, 1.0),
        };
        Stack {
            profile: s.profile,
            w_q,
            credit_share,
            k_legacy: kb(s.k_kb),
            k_q1: kb(s.k_q1_kb.unwrap_or(s.k_kb)),
            k_lcp: kb(s.k_lcp_kb.unwrap_or(s.k_kb * 0.1 / 0.17)),
            lambda_hcp: s.lambda_hcp,
            lambda_lcp: s.lambda_lcp,
            ecn_on_port: s.ecn_basis.as_deref() != Some("queue"),
            lcp_drop: s.lcp_drop_kb.map_or(u64::MAX, kb),
            lcp_pushout: s.lcp_pushout,
            ppt: exp.host.ppt.clone(),
            pase: exp.host.pase.clone(),
            pfabric: exp.host.pfabric.clone(),
            tcp: exp.host.tcp,
            flashpass: exp.host.flashpass.clone(),
            emulation_threshold: if s.profile == Profile::FlashPass {
                s.emulation_threshold
            } else {
                usize::MAX
            },
            feedback_priority: s.feedback_priority,
            red_threshold: kb(s.red_kb),
            red_counts_red_only: s.red_basis.as_deref() == Some("red"),
            buffer: kb(s.buffer_kb),
            buffer_per_gbps: s.buffer_kb_per_gbps.map(kb),
            shared_buffer: s
                .shared_buffer_mb
                .map(|mb| ((mb * 1e6) as u64, s.buffer_alpha)),
            nic_buffer: s.nic_buffer_kb.map(kb),
            credit_queue: s.credit_queue,
            credit_burst: s.credit_burst,
            nic_credit_share: s.nic_credit_share,
            port_credit_share: s.port_credit_share,
            seed: exp.seed,
            rto_min: (exp.host.rto_min_ms * MILLIS as f64) as Nanos,
            give_up: (exp.host.give_up_ms * MILLIS as f64) as Nanos,
            init_cwnd: exp.host.init_cwnd,
            reactive_init_cwnd: exp.host.reactive_init_cwnd,
            tlp: exp.host.tlp,
            alpha: exp.host.alpha,
            w_init: exp.host.w_init,
            target_loss_rule: exp.target_loss_rule(),
            credit_batch: exp.host.credit_batch,
            tcp_handshake: exp.host.tcp_handshake,
            max_cwnd: exp.host.max_cwnd,
            dctcp_alpha_init: exp.host.dctcp_alpha_init,
            flexpass_beta: exp.host.flexpass_beta,
            credit_jitter: exp.host.credit_jitter,
            base_rtt,
            host_bps: exp.topology.link_bps(),
            mtu: exp.topology.mtu(),
        }
    }

    /// ECN thresholds of a port's queues: Q1 (FlexPass, oWF) and the legacy / shared data
    /// queue; for PPT, K_HCP on P0–P3 and K_LCP on P4–P7, each λ·C·RTT (PPT Eq. 3) when λ
    /// is given.
    fn ecn_k(&self, link_bps: f64) -> [u64; MAX_QUEUES] {
        if self.profile == Profile::PFabric {
            return [u64::MAX; MAX_QUEUES]; // pFabric marks nothing
        }
        if self.profile == Profile::Ppt {
            let k = |lambda: Option<f64>, kb: u64| {
                lambda.map_or(kb, |l| {
                    (l * link_bps / 8.0 * self.base_rtt as f64 * 1e-9) as u64
                })
            };
            let (hcp, lcp) = (
                k(self.lambda_hcp, self.k_legacy),
                k(self.lambda_lcp, self.k_lcp),
            );
            return [hcp, hcp, hcp, hcp, lcp, lcp, lcp, lcp];
        }
        let k_q1 = if self.profile.separates_legacy() {
            self.k_q1
        } else {
            self.k_legacy
        };
        let mut k = [u64::MAX; MAX_QUEUES];
        k[1] = k_q1;
        k[2] = self.k_legacy;
        k
    }

    fn port(&self, link_bps: f64, credit_share: f64, buffer: BufferLimit) -> PortConfig {
        PortConfig {
            profile: self.profile,
            link_bps,
            w_q: self.w_q,
            credit_rate_bps: credit_queue_bps_mtu(link_bps, credit_share, self.mtu),
            credit_burst_bytes: self.credit_burst * MIN_ETHERNET_WIRE as f64,
            credit_capacity: self.credit_queue,
            ecn_k: self.ecn_k(link_bps),
            ecn_on_port: self.profile == Profile::Ppt && self.ecn_on_port,
            lcp_drop: u64::MAX,
            lcp_pushout: false,
            red_threshold: self.red_threshold,
            red_counts_red_only: self.red_counts_red_only,
            emulation_threshold: self.emulation_threshold,
            feedback_priority: self.feedback_priority,
            buffer,
        }
    }

    /// A port's data buffer: `buffer_kb`, or `buffer_kb_per_gbps` × the link's Gbit/s.
    fn port_buffer(&self, link_bps: f64) -> u64 {
        self.buffer_per_gbps
            .map_or(self.buffer, |b| (b as f64 * link_bps / 1e9) as u64)
    }

    pub fn sender_config(&self, f: &FlowSpec) -> SenderConfig {
        let mut c = SenderConfig::new(f.transport);
        c.mss = max_payload_for_mtu(self.mtu);
        c.dctcp.rto_min = self.rto_min;
        c.give_up_timeout = self.give_up;
        c.dctcp.tlp = self.tlp;
        c.dctcp.rto_init = self.rto_min.max(c.dctcp.rto_init.min(self.rto_min * 3));
        let reactive = (f.transport == TransportKind::FlexPass)
            .then_some(self.reactive_init_cwnd)
            .flatten();
        if let Some(w) = reactive.or(self.init_cwnd) {
            c.dctcp.init_cwnd = w;
            c.dctcp.min_cwnd = c.dctcp.min_cwnd.min(w);
        }
        c.layered_window = self.profile == Profile::Layering;
        c.reactive_after_handshake = self.tcp_handshake;
        if let Some(w) = self.max_cwnd {
            c.dctcp.max_cwnd = w;
        }
        if let Some(a) = self.dctcp_alpha_init {
            c.dctcp.alpha_init = a;
        }
        c.seed = self.seed;
        if f.transport == TransportKind::Ppt {
            c.ppt = self.ppt_config();
        }
        if f.transport == TransportKind::Dctcp {
            c.dctcp.cc = self.tcp;
        }
        if f.transport == TransportKind::FlashPass {
            c.flashpass = self.flashpass_config();
        }
        if f.transport == TransportKind::Pase {
            c.pase = flexpass_core::pase::PaseConfig {
                queues: self.pase.queues,
                line_rate_bps: self.host_bps,
                base_rtt: self.base_rtt.max(1),
                reference_rate: self.pase.reference_rate,
                probing: self.pase.probing,
            };
        }
        if f.transport == TransportKind::PFabric {
            // pFabric §4.2: the window is the host link's BDP, the RTO 3 base RTTs.
            c.pfabric = PFabricConfig {
                bdp_bytes: (self.host_bps / 8.0 * self.base_rtt as f64 * 1e-9).ceil() as u64,
                base_rtt: self.base_rtt.max(1),
                probe_after_timeouts: self.pfabric.probe_after_timeouts,
            };
        }
        c
    }

    /// FlashPass senders: the host link's emulation rate, T_wait and the assumed RTT of
    /// `[host.flashpass]` (default: the topology's base RTT), the target band and ablations.
    pub fn flashpass_config(&self) -> FlashPassConfig {
        let p = &self.flashpass;
        let t_wait = p.t_wait_ms.map_or(self.base_rtt.max(1), ms);
        let rtt = p.rtt_ms.map_or(t_wait, ms).max(1);
        let mut c = FlashPassConfig::for_link(self.host_bps, rtt, t_wait);
        c.max_emulation_rate =
            credit_queue_bps_mtu(self.host_bps, 1.0, self.mtu) / (8.0 * MIN_ETHERNET_WIRE as f64);
        c.min_target_loss = p.min_target_loss;
        c.max_target_loss = p.max_target_loss;
        c.over_provisioning = p.over_provisioning;
        c.unscheduled = p.unscheduled;
        c.delayed_feedback = p.delayed_feedback;
        c
    }

    /// PPT senders: I for case 1 from the host link's BDP (C·base RTT), the identification
    /// threshold, demotion thresholds and ablations of `[host.ppt]`.
    pub fn ppt_config(&self) -> PptConfig {
        let p = &self.ppt;
        let kb = |v: f64| (v * 1000.0) as u64;
        PptConfig {
            large_flow_threshold: kb(p.large_flow_kb),
            demotion_thresholds: p.demotion_kb.map(kb),
            alpha_history: p.alpha_history,
            ewd: p.ewd,
            scheduling: p.scheduling,
            identification: p.identification,
            lcp: p.lcp,
            max_ahead_bytes: PPT_REORDER_BYTES,
            ..PptConfig::for_link(self.host_bps, self.base_rtt.max(1))
        }
    }

    pub fn receiver_config(&self, f: &FlowSpec) -> ReceiverConfig {
        let mut credit =
            CreditConfig::for_link_mtu(self.host_bps, self.credit_share, self.base_rtt, self.mtu);
        credit.alpha = self.alpha;
        credit.w_init = self
            .w_init
            .unwrap_or(self.alpha)
            .clamp(credit.w_min, credit.w_max);
        credit.target_loss_rule = self.target_loss_rule;
        credit.batch = self.credit_batch;
        if let Some(j) = self.credit_jitter {
            credit.jitter = j;
        }
        if self.flexpass_beta && f.transport == TransportKind::FlexPass {
            credit.pacing_scale = self.credit_share;
        }
        let mut c = ReceiverConfig::new(credit);
        c.seed = self.seed;
        if f.transport == TransportKind::Ppt {
            c.max_reorder_bytes = PPT_REORDER_BYTES;
        }
        c
    }
}

impl PortFactory for Stack {
    fn switch_port(&self, link_bps: f64) -> PortConfig {
        let buffer = match self.shared_buffer {
            Some(_) => BufferLimit::Shared,
            None => BufferLimit::PerPort {
                bytes: self.port_buffer(link_bps),
            },
        };
        PortConfig {
            lcp_drop: self.lcp_drop,
            lcp_pushout: self.lcp_pushout,
            ..self.port(
                link_bps,
                self.port_credit_share.unwrap_or(self.credit_share),
                buffer,
            )
        }
    }

    /// A host NIC is an edge switch (FlexPass §4.3 footnote 6; ExpressPass: "host and switch
    /// perform credit rate-limiting"): the same queues, shaping, ECN and selective dropping.
    fn nic_port(&self, link_bps: f64) -> PortConfig {
        let share = match (self.profile, self.nic_credit_share) {
            (Profile::FlexPass, Some(s)) => s,
            _ => self.port_credit_share.unwrap_or(self.credit_share),
        };
        self.port(
            link_bps,
            share,
            BufferLimit::PerPort {
                bytes: self
                    .nic_buffer
                    .unwrap_or_else(|| self.port_buffer(link_bps)),
            },
        )
    }

    fn shared_buffer(&self) -> Option<SharedBuffer> {
        self.shared_buffer
            .map(|(size, a)| SharedBuffer::new(size, a))
    }
}

/// Base RTT of a path of `hops` links with one-way propagation delay `one_way` (links and
/// host delays): propagation both ways plus, at every hop, the serialisation at `bps` of one
/// maximum data frame (of an MTU of `mtu` bytes) and one credit (Algorithm 1's update
/// period).
pub fn base_rtt(hops: usize, one_way: Nanos, bps: f64, mtu: usize) -> Nanos {
    let ser = |bytes: f64| (bytes * 8.0 / bps * 1e9) as Nanos;
    let h = hops as Nanos;
    2 * one_way + h * ser(max_frame_wire(mtu) as f64) + h * ser(MIN_ETHERNET_WIRE as f64)
}

/// A network ready to run: built, configured and loaded with the experiment's flows.
pub struct Prepared {
    pub net: Network,
    pub built: Built,
    pub stack: Stack,
    /// The ports named by `measure.monitor` (the first is the bottleneck of shares).
    pub monitors: Vec<(NodeId, usize)>,
}

fn links(exp: &Experiment) -> Links {
    Links {
        bps: exp.topology.link_bps(),
        delay: exp.topology.link_delay(),
        host_delay: exp.topology.host_delay(),
        impairment: exp
            .impairment
            .as_ref()
            .map(|i| i.impairment())
            .unwrap_or_default(),
    }
}

/// Resolve a port selector: a port group of the topology, or "node->peer".
fn select_ports(net: &Network, built: &Built, sel: &str) -> Result<Vec<(NodeId, usize)>, String> {
    if let Some(g) = built.groups.get(sel) {
        return Ok(g.clone());
    }
    if let Some((a, b)) = sel.split_once("->") {
        if let Some((n, p, ..)) = net.ports().find(|&(_, _, x, y)| x == a && y == b) {
            return Ok(vec![(n, p)]);
        }
    }
    let groups: Vec<&str> = built.groups.keys().map(|s| s.as_str()).collect();
    Err(format!(
        "measure.monitor: '{sel}' is neither a port group ({}) nor a port 'node->peer' of this topology",
        groups.join(", ")
    ))
}

/// The topology's racks and groups, from a build of the network that carries no traffic
/// (returned too: its routes check `flow.via`).
fn probe_build(exp: &Experiment, shape: &topology::Shape, links: &Links) -> (Built, Network) {
    let probe = Stack::new(exp, 0, 0.5);
    let mut scratch = Network::new(
        exp.seed,
        Box::new(|_| unreachable!()),
        Box::new(|_| unreachable!()),
    );
    let built = topology::build(&mut scratch, shape, links, &probe);
    (built, scratch)
}

fn switch_node(net: &Network, name: &str) -> Option<NodeId> {
    (0..net.num_nodes()).find(|&n| net.node_name(n) == name && !net.is_host_node(n))
}

/// Listed flows with `via`: pinned through that switch where their path picks among
/// equal-cost next hops. The switch must be one of those of the flow's first switch.
fn pin_flows(exp: &Experiment, net: &mut Network, flows: &[FlowSpec]) -> Result<(), String> {
    let mut listed = flows.iter().filter(|f| f.kind == FlowKind::Listed);
    for (i, entry) in exp.flows.iter().enumerate() {
        for _ in 0..entry.count {
            let Some(f) = listed.next() else {
                return Ok(());
            };
            let Some(via) = entry.via.as_deref() else {
                continue;
            };
            let n = switch_node(net, via)
                .ok_or_else(|| format!("flow[{i}].via: no switch '{via}' in this topology"))?;
            let hops = net.next_hops(net.host_node(f.src), f.dst);
            let first = hops.first().map(|&(sw, _)| sw);
            let choices: Vec<NodeId> = first.map_or(vec![], |sw| {
                net.next_hops(sw, f.dst)
                    .into_iter()
                    .map(|(peer, _)| peer)
                    .collect()
            });
            if !choices.contains(&n) {
                let names: Vec<&str> = choices.iter().map(|&c| net.node_name(c)).collect();
                return Err(format!(
                    "flow[{i}].via = '{via}': not an equal-cost next hop of {}'s switch toward {} ({})",
                    net.host_name(f.src),
                    net.host_name(f.dst),
                    if names.is_empty() { "it has one path".into() } else { names.join(", ") }
                ));
            }
            net.pin_flow(f.id, n);
        }
    }
    Ok(())
}

/// Every flow of the experiment as the model draws it (listed, incast, workload, trace),
/// without running it: `sim --resolve` gives them to the other backends. A `flow.via` is
/// checked as a run checks it.
pub fn flows(exp: &Experiment) -> Result<Vec<FlowSpec>, String> {
    let shape = exp.topology.shape()?;
    let (built, mut scratch) = probe_build(exp, &shape, &links(exp));
    let flows = traffic::generate(exp, &built)?;
    pin_flows(exp, &mut scratch, &flows)?;
    Ok(flows)
}

/// Build the experiment's network and load its traffic.
pub fn prepare(exp: &Experiment) -> Result<Prepared, String> {
    let shape = exp.topology.shape()?;
    let links = links(exp);
    // The traffic (and so oWF's oracle weight) depends on the racks: build once to learn
    // them, then for real with the final port configuration.
    let (built, _) = probe_build(exp, &shape, &links);
    let flows = traffic::generate(exp, &built)?;
    // The base RTT of the topology: that of its longest path in propagation delay.
    let (hops, one_way) = built.longest_path();
    let rtt = base_rtt(hops, one_way, links.bps, exp.topology.mtu());
    let stack = Stack::new(exp, rtt, traffic::owf_oracle_weight(exp, &built, &flows));
    let (s1, s2) = (stack.clone(), stack.clone());
    let mut net = Network::new(
        exp.seed,
        Box::new(move |f| s1.sender_config(f)),
        Box::new(move |f| s2.receiver_config(f)),
    );
    let built = topology::build(&mut net, &shape, &links, &stack);
    net.wire_check = exp.measure.wire_check;
    net.sample_interval = exp.sample_interval();
    // Per-flow throughput in every sample only where shares are reported (a few long
    // flows): a sampled 10 000-flow run would hold gigabytes of them.
    net.sample_flows = flows.len() <= DETAILED_FLOWS;
    net.retire_after = exp.measure.retire_flows.then_some(10 * MILLIS);
    net.tcp_fct_at_ack = exp.measure.tcp_fct.as_deref() == Some("acked");
    net.single_path = exp.topology.common.routing.as_deref() == Some("single-path");
    if flows.iter().any(|f| f.transport == TransportKind::Pase) {
        // PASE §3.1: arbitration every RTT; a flow that does not fit gets one packet per RTT.
        let p = &exp.host.pase;
        let packet_bits = 8.0 * exp.topology.mtu() as f64;
        let mut arb = PaseArbitration::new(
            p.arbitration == "end-to-end",
            p.queues,
            rtt,
            packet_bits / (rtt.max(1) as f64 * 1e-9),
        );
        arb.early_pruning_queues = p.early_pruning_queues;
        arb.packets = p.messages == "packets";
        arb.delegation_period = p.delegation.then(|| match p.delegation_period_us {
            0 => 10 * rtt.max(1),
            us => us * 1000,
        });
        net.pase = Some(arb);
    }
    let mut monitors = vec![];
    for sel in &exp.measure.monitor {
        for (n, p) in select_ports(&net, &built, sel)? {
            if !monitors.contains(&(n, p)) {
                monitors.push((n, p));
                net.monitor(n, p);
            }
        }
    }
    for (i, f) in exp.faults.iter().enumerate() {
        let at = ms(f.at_ms);
        match f.kind {
            FaultKind::Link => {
                let link = f.link.as_deref().unwrap_or_default();
                let (n, port) = net
                    .ports()
                    .find(|&(_, _, a, b)| format!("{a}->{b}") == link)
                    .map(|(n, p, ..)| (n, p))
                    .ok_or_else(|| {
                        format!(
                            "fault[{i}].link: '{link}' is not a port 'node->peer' of this topology"
                        )
                    })?;
                net.schedule_link(at, n, port, f.up, Some(ms(f.reroute_after_ms)));
            }
            FaultKind::SwitchRestart => {
                let name = f.switch.as_deref().unwrap_or_default();
                let n = switch_node(&net, name).ok_or_else(|| {
                    format!("fault[{i}].switch: no switch '{name}' in this topology")
                })?;
                // Down: every port of it (and the peer's toward it) drops; routes unchanged.
                let ports = net.ports().filter(|&(m, ..)| m == n).count();
                for port in 0..ports {
                    net.schedule_link(at, n, port, false, None);
                    net.schedule_link(at + ms(f.down_ms), n, port, true, None);
                }
            }
            // The switches keep forwarding: nothing in the model's data plane.
            FaultKind::ControllerRestart => {}
        }
    }
    pin_flows(exp, &mut net, &flows)?;
    for f in flows {
        net.add_flow(f);
    }
    Ok(Prepared {
        net,
        built,
        stack,
        monitors,
    })
}

/// Progress of a run, for a progress line.
#[derive(Clone, Copy, Debug)]
pub struct Progress {
    /// Fraction of the simulated-time limit, or of the flows completed, whichever is larger.
    pub fraction: f64,
    pub sim_time: Nanos,
    pub completed_flows: usize,
    pub flows: usize,
}
