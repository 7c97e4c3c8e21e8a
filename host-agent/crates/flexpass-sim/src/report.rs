//! One report for every run: the numbers the papers report. Per-flow records (size,
//! transport, start, FCT, slowdown, retransmissions, timeouts); FCT statistics overall and
//! per transport type (legacy vs new) by size bucket, with the 99th percentile and standard
//! deviation of small flows (FlexPass §6.2); shares of the bottleneck per flow, sub-flow and
//! transport with the starvation-time fraction (FlexPass Fig. 9c: share < 20 % of the link);
//! utilisation per port group; queue occupancy of monitored ports; drops; timeouts; and the
//! check that credits and data crossed the same links (symmetric ECMP).

use crate::build::{Prepared, DETAILED_FLOWS};
use crate::experiment::{Experiment, FaultKind, Override};
use crate::net::{Flow, FlowKind, PortReport, Sample};
use crate::queue::{Profile, QueueStats};
use crate::traffic::wire_factor;
use flexpass_core::{Nanos, ReceiverStats, SenderStats};
use flexpass_wire::TransportKind;
use flexpass_workload::{quantile, summarize_with, FctSummary};
use serde::Serialize;
use std::collections::BTreeMap;

/// A transport "starves" in an interval where it gets less than this share of the link.
pub const STARVATION_SHARE: f64 = 0.2;

#[derive(Clone, Debug, Serialize)]
pub struct FlowReport {
    pub id: u32,
    pub kind: FlowKind,
    pub transport: TransportKind,
    pub src: usize,
    pub dst: usize,
    pub size: Option<u64>,
    pub start_us: f64,
    pub fct_us: Option<f64>,
    /// FCT over the ideal one: one-way propagation plus the flow's bytes on the wire at the
    /// host link rate.
    pub slowdown: Option<f64>,
    pub delivered_bytes: u64,
    pub retransmissions: u64,
    pub timeouts: u64,
    /// FlexPass reactive RTOs that moved the reactive sub-flow's packets to the credits
    /// without stalling the flow (`SenderStats::reactive_rto_reclassified`).
    pub reactive_rtos: u64,
    /// Longest gap between two deliveries to the receiving application, µs.
    pub max_stall_us: f64,
    /// Application goodput over the measurement window, Gbit/s (sampled runs).
    pub goodput_gbps: f64,
    /// Data wire bytes received over the window / link capacity, total and per sub-flow.
    pub share: f64,
    pub proactive_share: f64,
    pub reactive_share: f64,
    pub corrupted_bytes: u64,
    pub error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sender: Option<SenderStats>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub receiver: Option<ReceiverStats>,
}

#[derive(Clone, Debug, Serialize)]
pub struct TransportReport {
    pub transport: TransportKind,
    pub share: f64,
    /// Fraction of sample intervals in the window in which this transport got < 20% of the link.
    pub starvation_fraction: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct BottleneckReport {
    pub port: String,
    /// All bytes on the wire / capacity over the run.
    pub utilization: f64,
    /// Data bytes on the wire / capacity over the window.
    pub data_utilization: f64,
    /// Per queue (3, or the 8 priorities of the PPT profile).
    pub max_queue_bytes: Vec<u64>,
    pub max_queue_packets: Vec<usize>,
    pub queues: Vec<QueueStats>,
}

/// FCTs of a set of flows.
#[derive(Clone, Debug, Default, Serialize)]
pub struct FctGroup {
    pub flows: usize,
    pub completed: usize,
    pub incomplete: usize,
    /// By size: all, small (< measure.small_flow_kb), medium, large (≥ 10 MB).
    #[serde(flatten)]
    pub buckets: FctSummary,
    pub avg_slowdown: f64,
    pub p99_slowdown: f64,
    pub timeouts: u64,
    pub retransmissions: u64,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct FctReport {
    pub overall: FctGroup,
    /// DCTCP flows.
    pub legacy: FctGroup,
    /// FlexPass / ExpressPass flows.
    pub new: FctGroup,
    /// By flow kind (background, foreground, incast, listed).
    pub by_kind: BTreeMap<String, FctGroup>,
}

#[derive(Clone, Debug, Serialize)]
pub struct QueueReport {
    pub port: String,
    /// Bytes in Q1 (of which red) and Q2 over the samples: mean, 90th percentile, max.
    pub q1: [f64; 3],
    pub q1_red: [f64; 3],
    pub q2: [f64; 3],
    /// Q1 and its red bytes over the samples in which Q1 was not empty (a queue's build-up
    /// when it has one; most ports of a fabric are idle most of the time).
    pub q1_busy: [f64; 3],
    pub q1_red_busy: [f64; 3],
}

fn queue_report(port: String, q1: &[u64], q1_red: &[u64], q2: &[u64]) -> QueueReport {
    let busy: Vec<usize> = (0..q1.len()).filter(|&i| q1[i] > 0).collect();
    let pick = |v: &[u64]| busy.iter().map(|&i| v[i]).collect::<Vec<u64>>();
    QueueReport {
        port,
        q1: occupancy(q1),
        q1_red: occupancy(q1_red),
        q2: occupancy(q2),
        q1_busy: occupancy(&pick(q1)),
        q1_red_busy: occupancy(&pick(q1_red)),
    }
}

/// PPT (SIGCOMM'24) in a run: what the high- and low-priority loops sent, how the LCP's
/// loops opened (§3.1) and were clocked (§3.2), and the switch ports' priority queues.
#[derive(Clone, Debug, Default, Serialize)]
pub struct PptReport {
    pub flows: usize,
    /// Flows identified as large by their first write (§4.1).
    pub identified_large: usize,
    pub hcp_packets: u64,
    pub lcp_packets: u64,
    /// Opportunistic payload bytes over all payload bytes the PPT senders sent.
    pub lcp_byte_share: f64,
    /// HCP transmissions of bytes sent before (its own losses, and opportunistic packets
    /// still unacknowledged when it reached them).
    pub retransmissions: u64,
    pub loops_first_rtts: u64,
    pub loops_alpha_min: u64,
    pub lcp_initial_window_packets: u64,
    pub lp_acks: u64,
    pub lp_acks_ece: u64,
    /// Switch ports (not NICs), per priority queue P0..P7: packets dropped because the port
    /// buffer was full, ECN marks, and the largest occupancy of any port, bytes.
    pub switch_drops: Vec<u64>,
    /// Of `switch_drops`, per queue: packets refused while lower-priority queues held bytes
    /// (for P0–P3: HCP packets that found LCP packets in the buffer they needed).
    pub switch_drops_lower_held: Vec<u64>,
    /// HCP packets (P0–P3) the switches dropped for want of buffer while LCP packets held
    /// some of it; HCP packets (P0–P3, switches and NICs) that arrived while an LCP frame (P4–P7) was on
    /// the wire, and the longest wait that caused, ns (strict priority without preemption:
    /// at most one frame's serialization).
    pub hcp_drops_lcp_held: u64,
    /// Switch ports with push-out admission (`switch.lcp_pushout`): LCP packets evicted to
    /// admit HCP packets.
    pub lcp_pushed_out: u64,
    pub hcp_arrivals_behind_lcp: u64,
    pub hcp_max_wait_behind_lcp_ns: u64,
    pub switch_ecn_marks: Vec<u64>,
    pub switch_max_bytes: Vec<u64>,
}

/// FlashPass flows' emulation (§III-B/C), summed over the flows.
#[derive(Clone, Debug, Default, Serialize)]
pub struct FlashPassReport {
    pub flows: usize,
    pub emulation_sent: u64,
    pub over_provisioned_sent: u64,
    pub emulation_lost: u64,
    /// Emulation packets lost / sent over the whole run (start-up included).
    pub emulation_loss: f64,
    pub grants_received: u64,
    pub grants_wasted: u64,
    pub late_grants: u64,
    /// Algorithm 1 updates above, inside and below [min_target_loss, max_target_loss].
    pub updates_above: u64,
    pub updates_in_band: u64,
    pub updates_below: u64,
    pub bytes_unscheduled: u64,
}

fn flashpass_report(net: &crate::net::Network) -> Option<FlashPassReport> {
    let mut r = FlashPassReport::default();
    for f in net
        .flows
        .iter()
        .filter(|f| f.spec.transport == TransportKind::FlashPass)
    {
        r.flows += 1;
        let Some(s) = f.sender_stats() else { continue };
        let e = &s.emulation;
        r.emulation_sent += e.emulation_sent;
        r.over_provisioned_sent += e.over_provisioned_sent;
        r.emulation_lost += e.emulation_lost;
        r.grants_received += e.grants_received;
        r.grants_wasted += e.grants_wasted;
        r.late_grants += e.late_grants;
        r.updates_above += e.updates_above;
        r.updates_in_band += e.updates_in_band;
        r.updates_below += e.updates_below;
        r.bytes_unscheduled += s.bytes_unscheduled;
    }
    r.emulation_loss = r.emulation_lost as f64 / r.emulation_sent.max(1) as f64;
    (r.flows > 0).then_some(r)
}

fn ppt_report(net: &crate::net::Network, ports: &[PortReport]) -> Option<PptReport> {
    let flows: Vec<&Flow> = net
        .flows
        .iter()
        .filter(|f| f.spec.transport == TransportKind::Ppt)
        .collect();
    let ppt_ports: Vec<&PortReport> = ports
        .iter()
        .filter(|p| !p.host && p.queues.len() == crate::queue::MAX_QUEUES)
        .collect();
    if flows.is_empty() && ppt_ports.is_empty() {
        return None;
    }
    let mut r = PptReport {
        flows: flows.len(),
        ..Default::default()
    };
    let (mut lcp_bytes, mut all_bytes) = (0u64, 0u64);
    for s in flows.iter().filter_map(|f| f.sender_stats()) {
        r.identified_large += usize::from(s.identified_large);
        r.hcp_packets += s.packets_reactive;
        r.lcp_packets += s.packets_proactive;
        lcp_bytes += s.bytes_proactive;
        all_bytes += s.bytes_proactive + s.bytes_reactive;
        r.retransmissions += s.retransmissions;
        r.loops_first_rtts += s.lcp.loops_case1;
        r.loops_alpha_min += s.lcp.loops_case2;
        r.lcp_initial_window_packets += s.lcp.initial_window_packets;
        r.lp_acks += s.lcp.lp_acks;
        r.lp_acks_ece += s.lcp.lp_acks_ece;
    }
    r.lcp_byte_share = lcp_bytes as f64 / all_bytes.max(1) as f64;
    let q = crate::queue::MAX_QUEUES;
    r.switch_drops = (0..q)
        .map(|i| ppt_ports.iter().map(|p| p.queues[i].dropped_full).sum())
        .collect();
    r.switch_drops_lower_held = (0..q)
        .map(|i| {
            ppt_ports
                .iter()
                .map(|p| p.queues[i].dropped_full_lower_held)
                .sum()
        })
        .collect();
    for p in ports.iter().filter(|p| p.queues.len() == q) {
        for st in &p.queues[..crate::queue::PPT_LCP_QUEUES.start] {
            r.hcp_arrivals_behind_lcp += st.arrived_behind_lcp;
            if !p.host {
                r.hcp_drops_lcp_held += st.dropped_full_lcp_held;
            }
            r.hcp_max_wait_behind_lcp_ns =
                r.hcp_max_wait_behind_lcp_ns.max(st.max_wait_behind_lcp_ns);
        }
        if !p.host {
            r.lcp_pushed_out += p.queues[crate::queue::PPT_LCP_QUEUES]
                .iter()
                .map(|st| st.dropped_pushout)
                .sum::<u64>();
        }
    }
    r.switch_ecn_marks = (0..q)
        .map(|i| ppt_ports.iter().map(|p| p.queues[i].ecn_marked).sum())
        .collect();
    r.switch_max_bytes = (0..q)
        .map(|i| {
            ppt_ports
                .iter()
                .map(|p| p.queues[i].max_bytes)
                .max()
                .unwrap_or(0)
        })
        .collect();
    Some(r)
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct PathReport {
    /// Credit-scheduled flows whose data and credits were both seen.
    pub flows_checked: usize,
    /// Flows whose data and credits crossed different links (must be 0 with symmetric ECMP).
    pub mismatches: usize,
    /// Packets that took another path than their flow's first (link failures only).
    pub changes: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct TopologyReport {
    pub kind: String,
    pub hosts: usize,
    pub switches: usize,
    pub racks: usize,
    pub host_gbps: f64,
    /// Base RTT across the topology's longest path (Algorithm 1's initial update period).
    pub base_rtt_us: f64,
    /// The capacity the workload's load is defined on, Gbit/s.
    pub load_capacity_gbps: f64,
}

#[derive(Clone, Debug, Serialize)]
/// ExpressPass Fig. 8a: time to fairness after a second flow joins (`convergence`).
pub struct ConvergenceReport {
    pub alpha: f64,
    pub w_init: f64,
    /// Algorithm 1's target-loss rule ("fixed": the paper's; "rate-scaled(s)": the authors'
    /// simulator's).
    pub target_loss_rule: String,
    /// Update periods the same setting needs in the paper's §4 discrete model
    /// (`discrete_model_periods`): what the control law alone gives.
    pub discrete_model_periods: Option<usize>,
    /// RTTs from the second flow's first data until Jain's index over a 4-RTT window first
    /// reaches 0.98 (None: never).
    pub first_fair_rtts: Option<f64>,
    /// Mean credit RTT of the two receivers after the join (their update period: base RTT
    /// plus credit queueing), µs.
    pub measured_rtt_us: f64,
    /// `first_fair_rtts` counted in measured RTTs (`measured_rtt_us`) and with 4-measured-RTT
    /// windows, as the paper counts RTTs (ExpressPass §6.1: 100 µs = "four RTTs" at a 25 µs
    /// average RTT; 10 µs minimum).
    pub first_fair_measured_rtts: Option<f64>,
    /// RTTs until the index reaches 0.98 and stays there for the rest of the run (95% of the
    /// windows); None: never.
    pub convergence_rtts: Option<f64>,
    /// Mean Jain's index (4-RTT windows) from 16 RTTs after the join to the end.
    pub mean_jain_after_16_rtts: f64,
    /// Jain's index of the two flows' throughput over the whole shared period.
    pub long_term_jain: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct RunReport {
    pub experiment: String,
    /// The sweep point's overrides.
    pub point: Vec<Override>,
    pub seed: u64,
    pub profile: Profile,
    /// w_q (FlexPass), the oracle weight (oWF); 1 − the legacy queue's share.
    pub w_q: f64,
    pub new_transport: TransportKind,
    pub deployment_fraction: f64,
    pub topology: TopologyReport,
    /// Simulated time at the end of the run.
    pub duration_us: f64,
    /// Shares are measured over this window.
    pub window_us: [f64; 2],
    pub events: u64,
    pub wall_seconds: f64,
    pub events_per_second: f64,
    /// Simulated seconds per wall-clock second.
    pub speed: f64,
    pub fct: FctReport,
    pub transports: Vec<TransportReport>,
    pub bottleneck: Option<BottleneckReport>,
    pub queues: Vec<QueueReport>,
    /// The same over every sample of every monitored port together (FlexPass §6.2's
    /// "average and 90%-ile queue buildup of Q1").
    pub queue_summary: Option<QueueReport>,
    /// Mean utilisation of each port group over the run (bytes on the wire / capacity).
    pub utilization: BTreeMap<String, f64>,
    /// Data packets dropped at switch ports: buffer full (green or red) and selective
    /// dropping (red); credits dropped at switch ports; data dropped at host NICs.
    pub data_drops_full: u64,
    pub data_drops_red: u64,
    pub credit_drops: u64,
    pub nic_data_drops: u64,
    /// Packets (data, credits, control) lost to failed links, and route recomputations.
    pub link_drops: u64,
    pub reroutes: u64,
    /// The longest delivery stall of any flow, µs.
    pub max_stall_us: f64,
    pub max_shared_buffer_bytes: Option<u64>,
    pub timeouts: u64,
    pub recovery_timeouts: u64,
    /// Tail-loss probes sent by dctcp / ppt senders (`host.tlp`), and those whose ACK
    /// declared earlier packets lost (`SenderStats::tlp_recoveries`).
    pub tlp_probes: u64,
    pub tlp_recoveries: u64,
    /// pFabric's probe mode (§4.2, `host.pfabric.probe_after_timeouts`): times flows entered
    /// it, and the header-only probes they sent (left out when none, as for other transports).
    #[serde(skip_serializing_if = "is_zero_u64")]
    pub pfabric_probe_modes: u64,
    #[serde(skip_serializing_if = "is_zero_u64")]
    pub pfabric_probes: u64,
    /// PPT flows' two loops and the switches' priority queues (runs with PPT flows or the
    /// ppt profile).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ppt: Option<PptReport>,
    /// FlashPass flows' emulation (runs with FlashPass flows).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flashpass: Option<FlashPassReport>,
    /// PASE's arbitration overhead (runs with PASE flows).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pase: Option<crate::net::ArbitrationStats>,
    /// Packets without payload (ACKs, EMULATION_CREDITs, other control messages) dropped
    /// for a full data buffer, switches and NICs; counted in `data_drops_full` /
    /// `nic_data_drops` (they share the data queue), not in `data_loss_rate`.
    pub control_drops: u64,
    /// Data packets dropped anywhere (switch buffers, selective dropping, host NICs) per
    /// data packet the senders sent.
    pub data_loss_rate: f64,
    /// Of `data_loss_rate`: red data selectively dropped (FlexPass's reactive packets,
    /// FlashPass*'s unscheduled pre-credit packets), switches and NICs. The rest is data
    /// dropped for a full buffer: for FlashPass, scheduled data.
    pub red_loss_rate: f64,
    pub corrupted_bytes: u64,
    pub jain_index: Option<f64>,
    pub paths: PathReport,
    pub convergence: Option<ConvergenceReport>,
    /// Every `[[fault]]` and each flow's recovery from it (from the samples).
    pub faults: Vec<FaultReport>,
    pub flows: Vec<FlowReport>,
    pub ports: Vec<PortReport>,
    pub samples: Vec<Sample>,
    pub sample_interval_us: f64,
    /// The experiment as run (after overrides).
    pub params: Experiment,
}

pub fn jain(xs: &[f64]) -> f64 {
    let s: f64 = xs.iter().sum();
    let q: f64 = xs.iter().map(|x| x * x).sum();
    if q == 0.0 {
        return 1.0;
    }
    s * s / (xs.len() as f64 * q)
}

/// Mean, 90th percentile and maximum.
fn occupancy(v: &[u64]) -> [f64; 3] {
    if v.is_empty() {
        return [0.0; 3];
    }
    let mut s: Vec<f64> = v.iter().map(|&x| x as f64).collect();
    s.sort_by(|a, b| a.total_cmp(b));
    [
        s.iter().sum::<f64>() / s.len() as f64,
        quantile(&s, 0.9),
        *s.last().expect("non-empty"),
    ]
}

fn fct_group<'a>(flows: impl Iterator<Item = (&'a Flow, &'a FlowReport)>, small: u64) -> FctGroup {
    let mut g = FctGroup::default();
    let mut records = vec![];
    let mut slowdowns = vec![];
    for (f, r) in flows {
        let Some(size) = f.spec.size else { continue };
        g.flows += 1;
        g.timeouts += r.timeouts;
        g.retransmissions += r.retransmissions;
        match r.fct_us {
            Some(fct) => {
                g.completed += 1;
                records.push((size, fct));
                slowdowns.extend(r.slowdown);
            }
            None => g.incomplete += 1,
        }
    }
    g.buckets = summarize_with(&records, small);
    slowdowns.sort_by(|a, b| a.total_cmp(b));
    if !slowdowns.is_empty() {
        g.avg_slowdown = slowdowns.iter().sum::<f64>() / slowdowns.len() as f64;
        g.p99_slowdown = quantile(&slowdowns, 0.99);
    }
    g
}

/// The report of a finished run.
pub fn build(exp: &Experiment, point: &[Override], p: &Prepared, wall_seconds: f64) -> RunReport {
    let net = &p.net;
    let built = &p.built;
    let end: Nanos = net.now();
    let warmup = exp.warmup();
    let interval = net.sample_interval as f64 / 1e9;
    // Shares are of the monitored bottleneck's link (else of a host link).
    let bottleneck = p.monitors.first().copied();
    let cap_bps = bottleneck.map_or(built.host_bps, |(n, port)| net.port_link_bps(n, port));
    let cap_bytes = cap_bps / 8.0 * interval;
    let window: Vec<&Sample> = net
        .samples
        .iter()
        .filter(|x| x.t_us * 1e3 > warmup as f64)
        .collect();
    let n = window.len().max(1) as f64;
    let sampled = !window.is_empty() && net.sample_flows && cap_bytes > 0.0;
    let sum = |f: &dyn Fn(&Sample) -> u64| window.iter().map(|x| f(x)).sum::<u64>() as f64;
    let detailed = net.flows.len() <= DETAILED_FLOWS;
    let mut flows = vec![];
    for (i, f) in net.flows.iter().enumerate() {
        let (pro, rea, good) = if sampled {
            (
                sum(&|x| x.proactive[i]) / (cap_bytes * n),
                sum(&|x| x.reactive[i]) / (cap_bytes * n),
                sum(&|x| x.delivered[i]) * 8.0 / (interval * n) / 1e9,
            )
        } else {
            (0.0, 0.0, 0.0)
        };
        let fct = f.completed_at.map(|c| (c - f.spec.start) as f64 / 1e3);
        let ideal_us = f.spec.size.map(|s| {
            (built.one_way_delay(f.spec.src, f.spec.dst) as f64
                + s as f64 * wire_factor(exp.topology.mtu()) * 8.0 / built.host_bps * 1e9)
                / 1e3
        });
        let ss = f.sender_stats();
        flows.push(FlowReport {
            id: f.spec.id,
            kind: f.spec.kind,
            transport: f.spec.transport,
            src: f.spec.src,
            dst: f.spec.dst,
            size: f.spec.size,
            start_us: f.spec.start as f64 / 1e3,
            fct_us: fct,
            slowdown: fct.zip(ideal_us).map(|(a, b)| a / b),
            delivered_bytes: f.delivered,
            retransmissions: ss.map_or(0, |s| s.retransmissions),
            timeouts: ss.map_or(0, |s| s.timeouts),
            reactive_rtos: ss.map_or(0, |s| s.reactive_rto_reclassified),
            max_stall_us: f.max_stall as f64 / 1e3,
            goodput_gbps: good,
            share: pro + rea,
            proactive_share: pro,
            reactive_share: rea,
            corrupted_bytes: f.corrupted_bytes,
            error: f.error.clone(),
            sender: ss.filter(|_| detailed).cloned(),
            receiver: f.receiver_stats().filter(|_| detailed).cloned(),
        });
    }
    let small = (exp.measure.small_flow_kb * 1000.0) as u64;
    let pairs = || net.flows.iter().zip(flows.iter());
    let mut by_kind = BTreeMap::new();
    for kind in [
        FlowKind::Listed,
        FlowKind::Background,
        FlowKind::Foreground,
        FlowKind::Incast,
    ] {
        let g = fct_group(pairs().filter(|(f, _)| f.spec.kind == kind), small);
        if g.flows > 0 {
            let name = serde_json::to_value(kind).expect("serializable");
            by_kind.insert(name.as_str().unwrap_or("?").to_string(), g);
        }
    }
    let fct = FctReport {
        overall: fct_group(pairs(), small),
        legacy: fct_group(
            pairs().filter(|(f, _)| f.spec.transport == TransportKind::Dctcp),
            small,
        ),
        new: fct_group(
            pairs().filter(|(f, _)| f.spec.transport != TransportKind::Dctcp),
            small,
        ),
        by_kind,
    };
    let mut transports = vec![];
    if sampled {
        for t in [
            TransportKind::FlexPass,
            TransportKind::ExpressPass,
            TransportKind::Dctcp,
            TransportKind::Ppt,
        ] {
            let idx: Vec<usize> = (0..net.flows.len())
                .filter(|&i| net.flows[i].spec.transport == t)
                .collect();
            if idx.is_empty() {
                continue;
            }
            let per_sample: Vec<f64> = window
                .iter()
                .map(|x| {
                    idx.iter()
                        .map(|&i| (x.proactive[i] + x.reactive[i]) as f64)
                        .sum::<f64>()
                        / cap_bytes
                })
                .collect();
            let share = per_sample.iter().sum::<f64>() / n;
            let starved = per_sample.iter().filter(|&&v| v < STARVATION_SHARE).count() as f64 / n;
            transports.push(TransportReport {
                transport: t,
                share,
                starvation_fraction: starved,
            });
        }
    }
    let duration_s = exp.duration() as f64 / 1e9;
    let bottleneck = bottleneck.map(|(node, port)| {
        let stats = net.port_stats(node, port);
        BottleneckReport {
            port: net.port_name(node, port),
            utilization: net.port_tx_bytes(node, port) as f64 * 8.0 / (cap_bps * duration_s),
            data_utilization: flows.iter().map(|f| f.share).sum::<f64>(),
            max_queue_bytes: stats.iter().map(|q| q.max_bytes).collect(),
            max_queue_packets: stats.iter().map(|q| q.max_packets).collect(),
            queues: stats,
        }
    });
    let queues = net
        .queue_traces
        .iter()
        .map(|t| queue_report(t.port.clone(), &t.q1, &t.q1_red, &t.q2))
        .collect();
    let queue_summary = (!net.queue_traces.is_empty()).then(|| {
        let all = |f: fn(&crate::net::QueueTrace) -> &Vec<u64>| -> Vec<u64> {
            net.queue_traces
                .iter()
                .flat_map(|t| f(t).iter().copied())
                .collect()
        };
        queue_report(
            format!("{} ports", net.queue_traces.len()),
            &all(|t| &t.q1),
            &all(|t| &t.q1_red),
            &all(|t| &t.q2),
        )
    });
    let elapsed_s = (end as f64 / 1e9).max(1e-12);
    let utilization = built
        .groups
        .iter()
        .map(|(g, ports)| {
            let u = ports
                .iter()
                .map(|&(n, p)| {
                    net.port_tx_bytes(n, p) as f64 * 8.0 / (net.port_link_bps(n, p) * elapsed_s)
                })
                .sum::<f64>()
                / ports.len().max(1) as f64;
            (g.clone(), u)
        })
        .collect();
    let ports = net.port_reports();
    let (mut full, mut red, mut credit, mut nic, mut control) = (0, 0, 0, 0, 0);
    let mut nic_red = 0;
    let link_drops = ports
        .iter()
        .flat_map(|p| p.queues.iter())
        .map(|q| q.dropped_link)
        .sum();
    for p in &ports {
        let data_queues = &p.queues[p.data_queues.clone()];
        let data: u64 = data_queues
            .iter()
            .map(|q| q.dropped_full + q.dropped_red)
            .sum();
        control += data_queues
            .iter()
            .map(|q| q.dropped_full_control)
            .sum::<u64>();
        if p.host {
            nic += data;
            nic_red += data_queues.iter().map(|q| q.dropped_red).sum::<u64>();
            continue;
        }
        if p.data_queues.start > 0 {
            credit += p.queues[0].dropped_full;
        }
        for q in data_queues {
            full += q.dropped_full;
            red += q.dropped_red;
        }
    }
    let data_sent: u64 = net
        .flows
        .iter()
        .filter_map(|f| f.sender_stats())
        .map(|s| s.packets_proactive + s.packets_reactive)
        .sum();
    let mut paths = PathReport::default();
    for f in &net.flows {
        if f.paths.data.is_some() && f.paths.credit.is_some() {
            paths.flows_checked += 1;
            paths.mismatches += usize::from(f.paths.mismatch());
        }
        paths.changes += f.paths.changes;
    }
    let shares: Vec<f64> = flows.iter().map(|f| f.share).collect();
    let sender_sum = |g: fn(&SenderStats) -> u64| {
        net.flows
            .iter()
            .filter_map(|f| f.sender_stats())
            .map(g)
            .sum::<u64>()
    };
    let switches = built.switches.len();
    RunReport {
        experiment: exp.name.clone(),
        point: point.to_vec(),
        seed: exp.seed,
        profile: exp.switch.profile,
        w_q: p.stack.w_q,
        new_transport: exp.new_transport(),
        deployment_fraction: exp.deployment.fraction,
        topology: TopologyReport {
            kind: exp.topology.kind.name().to_string(),
            hosts: built.rack_of.len(),
            switches,
            racks: built.racks,
            host_gbps: built.host_bps / 1e9,
            base_rtt_us: p.stack.base_rtt as f64 / 1e3,
            load_capacity_gbps: built.load_capacity_bps / 1e9,
        },
        duration_us: end as f64 / 1e3,
        window_us: [warmup as f64 / 1e3, exp.duration() as f64 / 1e3],
        events: net.events_processed,
        wall_seconds,
        events_per_second: net.events_processed as f64 / wall_seconds.max(1e-9),
        speed: elapsed_s / wall_seconds.max(1e-9),
        fct,
        transports,
        bottleneck,
        queues,
        queue_summary,
        utilization,
        data_drops_full: full,
        data_drops_red: red,
        credit_drops: credit,
        nic_data_drops: nic,
        link_drops,
        reroutes: net.reroutes,
        max_stall_us: flows.iter().map(|f| f.max_stall_us).fold(0.0, f64::max),
        max_shared_buffer_bytes: net.max_shared_buffer_used(),
        timeouts: sender_sum(|s| s.timeouts),
        recovery_timeouts: sender_sum(|s| s.recovery_timeouts),
        tlp_probes: sender_sum(|s| s.tlp_probes),
        tlp_recoveries: sender_sum(|s| s.tlp_recoveries),
        pfabric_probe_modes: sender_sum(|s| s.pfabric_probe_modes),
        pfabric_probes: sender_sum(|s| s.pfabric_probes),
        ppt: ppt_report(net, &ports),
        flashpass: flashpass_report(net),
        pase: net.pase.as_ref().map(|p| crate::net::ArbitrationStats {
            probes: sender_sum(|s| s.pase_probes),
            probe_resumes: sender_sum(|s| s.pase_probe_resumes),
            ..p.stats
        }),
        control_drops: control,
        red_loss_rate: (red + nic_red) as f64 / data_sent.max(1) as f64,
        data_loss_rate: (full + red + nic - control) as f64 / data_sent.max(1) as f64,
        corrupted_bytes: net.flows.iter().map(|f| f.corrupted_bytes).sum(),
        jain_index: (flows.len() > 1 && sampled).then(|| jain(&shares)),
        paths,
        convergence: None,
        faults: fault_reports(
            exp,
            &net.samples,
            net.sample_flows,
            &flows,
            end as f64 / 1e3,
        ),
        flows,
        ports,
        samples: net.samples.clone(),
        sample_interval_us: net.sample_interval as f64 / 1e3,
        params: exp.clone(),
    }
}

/// A fault and how the flows came through it.
#[derive(Clone, Debug, Serialize)]
pub struct FaultReport {
    pub index: usize,
    pub kind: FaultKind,
    pub event: String,
    pub at_us: f64,
    /// Gaps are looked for from the fault until the next one (or the end of the run), µs.
    pub window_us: f64,
    /// Flows under way at the fault (started, not completed), by id; empty when the run
    /// did not sample per-flow throughput (`measure.sample_us`, at most DETAILED_FLOWS).
    pub recovery: Vec<FlowRecovery>,
    /// The longest gap of any flow under way, µs.
    pub max_gap_us: Option<f64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct FlowRecovery {
    pub flow: u32,
    /// The longest run of sample intervals without a delivered byte among those ending
    /// after the fault and starting within the window (and before the flow completed).
    pub gap_us: f64,
}

/// The faults' recovery from the per-flow samples: the same measure as the Mininet
/// backend's, from its receivers' samples (mininet-topos/flexpass_mininet/emulate.py).
fn fault_reports(
    exp: &Experiment,
    samples: &[Sample],
    per_flow: bool,
    flows: &[FlowReport],
    end_us: f64,
) -> Vec<FaultReport> {
    let times: Vec<f64> = exp.faults.iter().map(|f| f.at_ms * 1e3).collect();
    let dt = exp.sample_interval() as f64 / 1e3;
    exp.faults
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let at = times[i];
            let next = times
                .iter()
                .copied()
                .filter(|&t| t > at)
                .fold(end_us, f64::min);
            let mut recovery = vec![];
            if per_flow && dt > 0.0 {
                for (k, fl) in flows.iter().enumerate() {
                    let done = fl.fct_us.map_or(f64::INFINITY, |x| fl.start_us + x);
                    if fl.start_us > at || done <= at {
                        continue;
                    }
                    let (mut best, mut run) = (0.0f64, 0.0f64);
                    for s in samples {
                        let start = s.t_us - dt;
                        if s.t_us <= at || start >= next || start >= done {
                            continue;
                        }
                        let empty = s.delivered.get(k).copied().unwrap_or(0) == 0;
                        run = if empty { run + dt } else { 0.0 };
                        best = best.max(run);
                    }
                    recovery.push(FlowRecovery {
                        flow: fl.id,
                        gap_us: best,
                    });
                }
            }
            let max_gap_us = recovery.iter().map(|r| r.gap_us).reduce(f64::max);
            FaultReport {
                index: i,
                kind: f.kind,
                event: f.describe(),
                at_us: at,
                window_us: next - at,
                recovery,
                max_gap_us,
            }
        })
        .collect()
}

/// A metric of a report by dotted path ("fct.overall.small.p99_us"), or a key of the
/// experiment ("switch.profile"); numbers, strings and booleans. A statistic of a set of
/// flows that has none (the legacy flows at 100 % deployment) is absent, not 0.
pub fn metric(report: &serde_json::Value, path: &str) -> Option<serde_json::Value> {
    let find = |root: &serde_json::Value| {
        let mut parent = None;
        let v = path.split('.').try_fold(root, |v, k| {
            parent = Some(v);
            match v {
                serde_json::Value::Object(m) => m.get(k),
                serde_json::Value::Array(a) => k.parse::<usize>().ok().and_then(|i| a.get(i)),
                _ => None,
            }
        })?;
        let empty = parent
            .and_then(|p| p.get("flows"))
            .is_some_and(|n| n.as_u64() == Some(0));
        (!(empty && path.ends_with("_us"))).then(|| v.clone())
    };
    find(report).or_else(|| report.get("params").and_then(find))
}

/// Per-flow records as CSV.
pub fn flows_csv(r: &RunReport) -> String {
    use std::fmt::Write as _;
    let mut s = String::from(
        "id,kind,transport,src,dst,size_bytes,start_us,fct_us,slowdown,retransmissions,timeouts,delivered_bytes,corrupted_bytes,reactive_rtos\n",
    );
    let opt = |v: Option<f64>| v.map_or(String::new(), |x| format!("{x:.3}"));
    for f in &r.flows {
        let kind = serde_json::to_value(f.kind).expect("serializable");
        let t = serde_json::to_value(f.transport).expect("serializable");
        let _ = writeln!(
            s,
            "{},{},{},{},{},{},{:.3},{},{},{},{},{},{},{}",
            f.id,
            kind.as_str().unwrap_or("?"),
            t.as_str().unwrap_or("?"),
            f.src,
            f.dst,
            f.size.map_or(String::new(), |x| x.to_string()),
            f.start_us,
            opt(f.fct_us),
            opt(f.slowdown),
            f.retransmissions,
            f.timeouts,
            f.delivered_bytes,
            f.corrupted_bytes,
            f.reactive_rtos
        );
    }
    s
}

fn is_zero_u64(v: &u64) -> bool {
    *v == 0
}
