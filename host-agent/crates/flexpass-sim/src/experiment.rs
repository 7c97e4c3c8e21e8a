//! Experiments are data: one TOML file describes the topology, switches, host stacks,
//! traffic, deployment and measurements of a run, and optionally a sweep (a grid of runs)
//! and the figure drawn from it. The schema is documented in docs/experiments.md; every
//! key is checked (unknown keys and bad values are errors that name the key).
//!
//! Built-in experiments are the files of host-agent/experiments/, compiled into the binary:
//! `flexpass sim incast` is `flexpass sim host-agent/experiments/incast.toml`.

use crate::queue::Profile;
use crate::topology::{self, Shape};
use flexpass_core::{Nanos, TargetLossRule, MICROS, MILLIS};
use flexpass_wire::TransportKind;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

include!(concat!(env!("OUT_DIR"), "/builtin_experiments.rs"));

/// One experiment as written in its file (after `--set` overrides).
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Experiment {
    /// Defaults to the file name.
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default = "one")]
    pub seed: u64,
    /// Simulated time: runs with long-lived flows stop here; runs with only finite flows
    /// stop when all completed, or here at the latest.
    pub duration_ms: Option<f64>,
    /// A preset of behavioural keys that reproduce another simulator's choices (keys set
    /// in the file or by --set win): "ns2-flexpass", the FlexPass artifact (`COMPAT_NS2`).
    pub compat: Option<String>,
    pub topology: TopologySpec,
    #[serde(default)]
    pub switch: SwitchSpec,
    #[serde(default)]
    pub host: HostSpec,
    /// Flows listed one by one.
    #[serde(default, rename = "flow")]
    pub flows: Vec<FlowEntry>,
    /// N-to-1 incast groups.
    #[serde(default)]
    pub incast: Vec<IncastEntry>,
    pub workload: Option<WorkloadSpec>,
    /// Flows replayed from a trace (another simulator's flow list).
    pub trace: Option<TraceSpec>,
    #[serde(default)]
    pub deployment: DeploymentSpec,
    #[serde(default)]
    pub measure: MeasureSpec,
    pub convergence: Option<ConvergenceSpec>,
    /// Faults every link injects (tests of reliable delivery).
    pub impairment: Option<ImpairmentSpec>,
    /// Links that fail or come back during the run.
    #[serde(default, rename = "fault")]
    pub faults: Vec<FaultSpec>,
    pub sweep: Option<SweepSpec>,
    /// Figures drawn from the sweep's runs.
    #[serde(default, rename = "figure")]
    pub figures: Vec<FigureSpec>,
}

fn one() -> u64 {
    1
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct TopologySpec {
    /// star | dumbbell | parking-lot | leaf-spine | clos3 | three-dc
    pub kind: String,
    /// Host link rate (and every other link's unless set), Gbit/s.
    pub link_gbps: Option<f64>,
    /// Propagation delay of every link, µs.
    pub link_delay_us: Option<f64>,
    /// Host processing delay, added to each host link in both directions, µs.
    pub host_delay_us: Option<f64>,
    /// star, clos3: number of hosts.
    pub hosts: Option<usize>,
    /// dumbbell: hosts on each side.
    pub left: Option<usize>,
    pub right: Option<usize>,
    /// dumbbell, parking-lot: rate of the links between switches, Gbit/s.
    pub bottleneck_gbps: Option<f64>,
    /// dumbbell: the left hosts' link delays spread evenly over [lo, hi] µs, and the s1–s2
    /// link's delay, µs (default: `link_delay_us` for both).
    pub left_delay_us: Option<[f64; 2]>,
    pub bottleneck_delay_us: Option<f64>,
    /// parking-lot: links between switches (bottlenecks), hosts on each switch.
    pub bottlenecks: Option<usize>,
    pub hosts_per_switch: Option<usize>,
    /// leaf-spine.
    pub leaves: Option<usize>,
    pub spines: Option<usize>,
    pub hosts_per_leaf: Option<usize>,
    /// leaf-spine: leaf uplink rate, Gbit/s (or derive it from `oversubscription`).
    pub uplink_gbps: Option<f64>,
    /// leaf-spine, clos3: hosts' capacity / uplink capacity at a leaf or ToR.
    pub oversubscription: Option<f64>,
    /// clos3 (defaults: FlexPass §6.2).
    pub cores: Option<usize>,
    pub aggs: Option<usize>,
    pub tors: Option<usize>,
    pub aggs_per_pod: Option<usize>,
    /// clos3: aggregation–core link rate, Gbit/s (default: `link_gbps`).
    pub core_gbps: Option<f64>,
    /// three-dc (FlashPass §IV-B2): hosts in each data centre (20), WAN link rate, Gbit/s
    /// (10), and the WAN links' one-way delays [dc0–dc1, dc1–dc2, dc2–dc0], µs
    /// ([20000, 30000, 40000]).
    pub hosts_per_dc: Option<usize>,
    pub wan_gbps: Option<f64>,
    pub wan_delay_us: Option<Vec<f64>>,
    /// IP MTU of every link, bytes (default 1500; 9000: jumbo frames): the senders' segment
    /// size and the credit rates, share · C · 84 / (84 + mtu + 38) (docs/protocol.md §9).
    pub mtu: Option<usize>,
    /// How a switch picks among equal-cost next hops: "ecmp" (default: a symmetric per-flow
    /// hash, ExpressPass §3.1) or "single-path" (always its first shortest-path port, as ns-2's
    /// static routing installs one route per destination: the FlexPass artifact never
    /// reaches its `Classifier/MultiPath`, which needs `$ns rtproto DV`).
    pub routing: Option<String>,
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct SwitchSpec {
    /// The deployment scheme of FlexPass §6.2: flexpass | naive | owf | layering.
    pub profile: Profile,
    /// w_q: weight of the FlexPass queue Q1 and share of the credit rate.
    pub w_q: f64,
    /// ECN marking threshold K of the legacy queue (and of the shared data queue of the
    /// naive and layering profiles), kB.
    pub k_kb: f64,
    /// K of Q1 (FlexPass, oWF), kB; default `k_kb`.
    pub k_q1_kb: Option<f64>,
    /// Selective-drop threshold for red (reactive) packets in Q1, kB.
    pub red_kb: f64,
    /// Per-port data buffer, kB (ignored by switches when `shared_buffer_mb` is set).
    pub buffer_kb: f64,
    /// Per-port data buffer in kB per Gbit/s of the port's link (FlashPass §IV-A: "20KB per
    /// port per Gbps"), replacing `buffer_kb` when set.
    pub buffer_kb_per_gbps: Option<f64>,
    /// A shared buffer per switch, MB, with a dynamic threshold α (`buffer_alpha`).
    pub shared_buffer_mb: Option<f64>,
    pub buffer_alpha: f64,
    /// Host NIC data buffer, kB; default `buffer_kb`.
    pub nic_buffer_kb: Option<f64>,
    /// Credit queue (Q0) capacity and token-bucket burst, in credits. Profile "flashpass":
    /// Q0 is the emulation queue (shaped to C·84/(84 + 1538), `credit_queue` = 8 packets).
    pub credit_queue: usize,
    /// Profile "flashpass": the emulation queue's single threshold, packets (§IV-A: 2): an
    /// arriving Not-ECT (over-provisioned) emulation packet is dropped when the queue holds
    /// this many; an ECT one is CE-marked.
    pub emulation_threshold: usize,
    /// Profile "flashpass": control packets (EMULATION_CREDITs, ACKs, handshakes; their own
    /// DSCP) leave each port through a strict-priority queue between the emulation queue and
    /// the data queue, with a buffer of its own (the port's data buffer size, not shared with
    /// data), so feedback is neither delayed nor dropped behind data (FlashPass footnote 4:
    /// "we can put it on a high priority queue"). Default false: the data queue.
    pub feedback_priority: bool,
    pub credit_burst: f64,
    /// Credit share the receiver NIC shapes aggregate credits to (FlexPass profile; default
    /// w_q; 1.0 reproduces the FlexPass testbed's Fig. 7b).
    pub nic_credit_share: Option<f64>,
    /// oWF's queue weight and credit share; default: the oracle, the true fraction of
    /// ExpressPass bytes in the traffic of the enabled racks (`traffic::owf_oracle_weight`).
    pub owf_weight: Option<f64>,
    /// PPT profile: K of the LCP queues P4–P7, kB (the HCP queues P0–P3 use `k_kb`);
    /// default `k_kb` · 0.1/0.17, the ratio of PPT's λ_LCP to λ_HCP.
    pub k_lcp_kb: Option<f64>,
    /// PPT profile: K = λ·C·RTT (PPT Eq. 3) per port, from its link rate C and the base RTT,
    /// for the HCP queues (λ_HCP; the paper: 0.17) and the LCP queues (λ_LCP: 0.1);
    /// each, when set, replaces `k_kb` / `k_lcp_kb`.
    pub lambda_hcp: Option<f64>,
    pub lambda_lcp: Option<f64>,
    /// PPT profile: what K is compared with: "port" (default: the bytes of all the port's
    /// queues, PPT §3.2's "buffer occupancy") or "queue" (the packet's own queue).
    pub ecn_basis: Option<String>,
    /// PPT profile, switch ports: an LCP packet (P4–P7) is dropped when the port's occupancy
    /// would exceed this, kB (default: never; not in the paper — a sensitivity knob that keeps
    /// the LCP out of the buffer the HCP needs).
    pub lcp_drop_kb: Option<f64>,
    /// PPT profile, switch ports: priority-aware admission by push-out — an HCP packet
    /// (P0–P3) that finds the port's buffer full evicts queued LCP packets (P4–P7), lowest
    /// priority first, so the LCP never holds buffer the HCP needs (default false: the
    /// paper's drop-tail switch; not in the paper; per-port buffers only).
    pub lcp_pushout: bool,
    /// FlexPass profile: the credit share is w_q·(F − 84)/F (F: the maximum frame, 1538 B),
    /// w_q of the data bandwidth net of the credits' own, as the FlexPass artifact computes
    /// it (`actual_xpass_queue_weight`); default false: w_q.
    pub credit_share_net: bool,
    /// Share of the link's credit rate the credit queues of switch ports and host NICs are
    /// shaped to, when it differs from the receivers' (default: the profile's credit share;
    /// `nic_credit_share` still sets the NICs'). The artifact's dumbbell script shapes
    /// ports to its FlexPass share squared.
    pub port_credit_share: Option<f64>,
    /// What the selective-drop threshold `red_kb` is compared with: "queue" (default: Q1's
    /// depth, what a switch's colour-aware threshold does) or "red" (the red bytes queued
    /// only, as the FlexPass artifact counts them).
    pub red_basis: Option<String>,
}

impl Default for SwitchSpec {
    fn default() -> Self {
        SwitchSpec {
            profile: Profile::FlexPass,
            w_q: 0.5,
            k_kb: 60.0,
            k_q1_kb: None,
            red_kb: 100.0,
            buffer_kb: 600.0,
            buffer_kb_per_gbps: None,
            shared_buffer_mb: None,
            buffer_alpha: 0.25,
            nic_buffer_kb: None,
            credit_queue: 8,
            emulation_threshold: 2,
            feedback_priority: false,
            credit_burst: 2.0,
            nic_credit_share: None,
            owf_weight: None,
            k_lcp_kb: None,
            lambda_hcp: None,
            lambda_lcp: None,
            ecn_basis: None,
            lcp_drop_kb: None,
            lcp_pushout: false,
            credit_share_net: false,
            port_credit_share: None,
            red_basis: None,
        }
    }
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct HostSpec {
    /// DCTCP RTO_min (also FlexPass's reactive sub-flow), ms.
    pub rto_min_ms: f64,
    /// Give-up timeout of FlexPass / ExpressPass senders, ms: silence from the peer this long
    /// fails a flow (default 30 000, the core's).
    pub give_up_ms: f64,
    /// DCTCP initial window, packets (default: the core's, 10).
    pub init_cwnd: Option<f64>,
    /// Initial window of FlexPass's reactive sub-flow, packets (default `init_cwnd`; the
    /// FlexPass artifact's flexpassReactiveInitWindow).
    pub reactive_init_cwnd: Option<f64>,
    /// DCTCP tail-loss probe (RFC 8985 §7, as Linux): dctcp and ppt senders probe 2·SRTT
    /// after the last ACK instead of waiting for the RTO (default false; `DctcpConfig::tlp`).
    pub tlp: bool,
    /// ExpressPass initial credit rate factor α (initial rate = α · max_rate).
    pub alpha: f64,
    /// Initial aggressiveness factor w_init; default = α (ExpressPass §6.3).
    pub w_init: Option<f64>,
    /// Algorithm 1's target loss: "fixed" (the paper's target_loss 0.1) or "rate-scaled"
    /// (the ExpressPass authors' simulator: target_loss_scaling·(1 − rate/max_rate)).
    /// Default: rate-scaled if `target_loss_scaling` is given, else fixed.
    pub target_loss_rule: Option<String>,
    /// The rate-scaled rule's scaling (default 0.125, the authors' scripts).
    pub target_loss_scaling: Option<f64>,
    /// Receivers pace credits in batches of this many (`CreditConfig::batch`, the agent's
    /// `--credit-batch`; default 1, one by one as in the papers). Ports pass bursts of
    /// `switch.credit_burst` credits.
    pub credit_batch: u32,
    /// DCTCP flows and FlexPass's reactive sub-flow send data only once the peer answered
    /// the HELLO, as TCP waits for its SYN-ACK (ns-2 FullTcp in the FlexPass artifact);
    /// default false: the first window leaves with the HELLO.
    pub tcp_handshake: bool,
    /// Largest DCTCP window, packets (default: the core's, 10 000; ns-2's `window_` in the
    /// FlexPass artifact: 180).
    pub max_cwnd: Option<f64>,
    /// DCTCP's α before the first update (default 1, as Linux: the first marked window
    /// halves cwnd; ns-2's `dctcp_alpha_` starts at 0: the first cut takes nothing).
    pub dctcp_alpha_init: Option<f64>,
    /// FlexPass receivers pace credits at the credit share times their rate, whose maximum
    /// already is the share of the link's credit rate: the share applied twice, as the
    /// FlexPass artifact's `flexpass_beta_` does (default false).
    pub flexpass_beta: bool,
    /// Credit pacing jitter j: each gap drawn from gap·[1 − j, 1 + j] (default: the core's,
    /// 0.9, standing in for a real host's natural jitter; ns-2's ExpressPass: 0.1).
    pub credit_jitter: Option<f64>,
    /// PPT senders (`[host.ppt]`).
    pub ppt: PptSpec,
    /// Congestion control of the window transport (transport dctcp): "dctcp" (default) or
    /// "cubic" (RFC 8312, FlashPass's WAN baseline; ignores ECN).
    pub tcp: flexpass_core::WindowCc,
    /// FlashPass senders (`[host.flashpass]`).
    pub flashpass: FlashPassSpec,
}

/// FlashPass's host parameters (names as the paper).
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct FlashPassSpec {
    /// T_wait, ms: ≥ the network's max RTT (§III-B). Default: the topology's base RTT.
    pub t_wait_ms: Option<f64>,
    /// The RTT the emulation assumes before it measures one (and the BDP of the pre-credit
    /// phase), ms. Default: T_wait.
    pub rtt_ms: Option<f64>,
    /// Algorithm 1's target band (1 %, 10 %).
    pub min_target_loss: f64,
    pub max_target_loss: f64,
    /// Over-provisioning with selective dropping (§III-C); false: the §IV-C2 ablation.
    pub over_provisioning: bool,
    /// Aeolus-style unscheduled first RTT (FlashPass*); false: plain FlashPass.
    pub unscheduled: bool,
    /// Delayed, batched credit feedback.
    pub delayed_feedback: bool,
}

impl Default for FlashPassSpec {
    fn default() -> Self {
        FlashPassSpec {
            t_wait_ms: None,
            rtt_ms: None,
            min_target_loss: 0.01,
            max_target_loss: 0.10,
            over_provisioning: true,
            unscheduled: true,
            delayed_feedback: true,
        }
    }
}

/// PPT's host parameters (SIGCOMM'24) and the switches of its ablations.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct PptSpec {
    /// Exponential window decrease (§3.2); false: Fig. 16's "w.o. EWD".
    pub ewd: bool,
    /// Flow scheduling (§4); false: Fig. 17's "w.o. scheduling" (HCP P0, LCP P4).
    pub scheduling: bool,
    /// Buffer-aware identification (§4.1); false: Fig. 18's "w.o. identification".
    pub identification: bool,
    /// The low-priority loop; false: DCTCP with PPT's priorities.
    pub lcp: bool,
    /// Identification threshold on the first write, kB (testbed Table 3: 100).
    pub large_flow_kb: f64,
    /// PIAS-style demotion of unidentified flows: bytes sent for P0→P1, P1→P2, P2→P3, kB.
    pub demotion_kb: [f64; 3],
    /// α_min is taken over the last this-many α updates.
    pub alpha_history: usize,
}

impl Default for PptSpec {
    fn default() -> Self {
        PptSpec {
            ewd: true,
            scheduling: true,
            identification: true,
            lcp: true,
            large_flow_kb: 100.0,
            demotion_kb: [100.0, 1000.0, 10_000.0],
            alpha_history: 8,
        }
    }
}

impl Default for HostSpec {
    fn default() -> Self {
        HostSpec {
            rto_min_ms: 4.0,
            give_up_ms: flexpass_core::DEFAULT_GIVE_UP_TIMEOUT as f64 / 1e6,
            init_cwnd: None,
            reactive_init_cwnd: None,
            tlp: false,
            alpha: 1.0 / 16.0,
            w_init: None,
            target_loss_rule: None,
            target_loss_scaling: None,
            credit_batch: 1,
            tcp_handshake: false,
            max_cwnd: None,
            dctcp_alpha_init: None,
            flexpass_beta: false,
            credit_jitter: None,
            ppt: PptSpec::default(),
            tcp: flexpass_core::WindowCc::Dctcp,
            flashpass: FlashPassSpec::default(),
        }
    }
}

impl HostSpec {
    fn rule(&self) -> Result<TargetLossRule, String> {
        let scaled = |s: Option<f64>| {
            TargetLossRule::from_scaling(Some(s.unwrap_or(TargetLossRule::NS2_SCALING)))
                .map_err(|e| format!("host.{e}"))
        };
        match self.target_loss_rule.as_deref() {
            None if self.target_loss_scaling.is_none() => Ok(TargetLossRule::Fixed),
            None | Some("rate-scaled") => scaled(self.target_loss_scaling),
            Some("fixed") if self.target_loss_scaling.is_some() => Err(
                "host.target_loss_scaling applies to target_loss_rule = \"rate-scaled\" only"
                    .into(),
            ),
            Some("fixed") => Ok(TargetLossRule::Fixed),
            Some(r) => Err(format!(
                "host.target_loss_rule '{r}' is not \"fixed\" or \"rate-scaled\""
            )),
        }
    }
}

/// A host by index or by name ("h3").
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(untagged)]
pub enum HostRef {
    Index(usize),
    Name(String),
}

impl HostRef {
    pub fn resolve(&self, hosts: usize) -> Result<usize, String> {
        let i = match self {
            HostRef::Index(i) => *i,
            HostRef::Name(n) => n
                .strip_prefix('h')
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| format!("'{n}' is not a host name (h0, h1, …)"))?,
        };
        if i < hosts {
            Ok(i)
        } else {
            Err(format!(
                "host {i} does not exist (the topology has {hosts})"
            ))
        }
    }
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct FlowEntry {
    pub src: HostRef,
    pub dst: HostRef,
    /// flexpass | expresspass | dctcp; default: by deployment.
    pub transport: Option<TransportKind>,
    #[serde(default)]
    pub start_us: f64,
    /// Bytes to send; absent: long-lived (an endless backlog).
    pub bytes: Option<u64>,
    /// `count` flows from consecutive sources `src`, `src` + 1, …, the k-th starting
    /// `start_step_us` · k after `start_us`: many senders in one entry.
    #[serde(default = "one_flow")]
    pub count: usize,
    #[serde(default)]
    pub start_step_us: f64,
}

fn one_flow() -> usize {
    1
}

impl FlowEntry {
    /// (source, start_us) of each flow of the entry; `hosts` bounds the sources.
    pub fn expand(&self, hosts: usize) -> Result<Vec<(usize, f64)>, String> {
        let first = self.src.resolve(hosts)?;
        (0..self.count)
            .map(|k| {
                let src = first + k;
                if src >= hosts {
                    return Err(format!(
                        "count = {} from host {first} needs host {src}, the topology has {hosts}",
                        self.count
                    ));
                }
                Ok((src, self.start_us + self.start_step_us * k as f64))
            })
            .collect()
    }
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct IncastEntry {
    pub receiver: HostRef,
    /// The senders; default: every other host.
    pub senders: Option<Vec<HostRef>>,
    /// Flows in the group, spread round-robin over the senders.
    pub flows: usize,
    pub bytes: u64,
    #[serde(default)]
    pub start_us: f64,
    pub transport: Option<TransportKind>,
    /// The group happens this many times, the k-th `repeat_step_us`·k after the first
    /// (1: once): repetitions of one incast give the spread of its maximum FCT.
    #[serde(default = "one_flow")]
    pub repeat: usize,
    #[serde(default)]
    pub repeat_step_us: f64,
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadSpec {
    /// A built-in CDF (search, mining, cachefollower, webserver, facebook, google,
    /// alibaba-wan, flashpass-10-80mb) or a file.
    pub cdf: String,
    /// Offered load on the topology's load capacity (ToR / leaf uplinks, else host links).
    pub load: f64,
    /// What `load` is relative to: "uplinks" (default: the ToR / leaf uplinks where the
    /// topology has them, FlexPass §6.2) or "hosts" (every host's link, as the simulators of
    /// Homa and HPCC generate traffic: λ = load · C · hosts / mean size).
    #[serde(default)]
    pub load_on: Option<String>,
    /// Who talks to whom: "any" (default: uniformly random distinct hosts) or "inter-rack"
    /// (source and destination in different racks — FlashPass §IV-B2: "chosen uniformly
    /// random from different DCs").
    #[serde(default)]
    pub pairs: Option<String>,
    /// Background flows.
    pub flows: usize,
    #[serde(default)]
    pub start_ms: f64,
    /// Mixed traffic: a share of the volume is foreground incast.
    pub foreground: Option<ForegroundSpec>,
}

/// Flows replayed from a file in the FlexPass artifact's flow-list format (`ID START_S SRC
/// DST SIZE`, its `outputs/flowfile_ID.tr`): the model runs exactly the flows another
/// simulator ran. Each flow's transport follows the deployment, as a workload flow's.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct TraceSpec {
    /// A built-in trace (host-agent/workloads/*.trace) or a file.
    pub file: String,
    /// The trace's first flow starts at this time (ms); the others keep their spacing.
    #[serde(default)]
    pub start_ms: f64,
}

/// FlexPass §6.2 mixed traffic: "10% of the total traffic volume as foreground traffic …
/// we randomly select a receiver, and each of the other hosts sends four 8 kB flows".
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct ForegroundSpec {
    pub volume_fraction: f64,
    pub bytes: u64,
    pub flows_per_sender: usize,
}

impl Default for ForegroundSpec {
    fn default() -> Self {
        ForegroundSpec {
            volume_fraction: 0.1,
            bytes: 8000,
            flows_per_sender: 4,
        }
    }
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct DeploymentSpec {
    /// Fraction of racks (ToRs / leaves) whose hosts run the new transport; a flow uses it
    /// only when both ends do (FlexPass §6.2). Racks are enabled in order (rack 0 first), as
    /// the authors' simulator enables whole pods.
    pub fraction: f64,
    /// The new transport; default: flexpass for the flexpass profile, else expresspass.
    pub transport: Option<TransportKind>,
}

impl Default for DeploymentSpec {
    fn default() -> Self {
        DeploymentSpec {
            fraction: 1.0,
            transport: None,
        }
    }
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct MeasureSpec {
    /// Throughput / queue samples every this many µs (0: none).
    pub sample_us: f64,
    /// Shares and starvation are measured after this.
    pub warmup_ms: f64,
    /// Ports whose queues are traced: "node->peer", or a port group of the topology
    /// ("bottleneck", "tor-up", "tor-down", "host-down", …). The first port is the
    /// bottleneck of the shares report.
    pub monitor: Vec<String>,
    /// Flows smaller than this are "small" (FlexPass §6.2: 100 kB).
    pub small_flow_kb: f64,
    /// Release the state of completed flows (runs with many flows).
    pub retire_flows: bool,
    /// Encode and decode every packet through the wire format.
    pub wire_check: bool,
    /// When a DCTCP flow completes: "delivered" (default: the receiver has the last byte,
    /// as for every transport) or "acked" (the sender has the ACK of the last byte, as ns-2
    /// FullTcp reports it in the FlexPass artifact).
    pub tcp_fct: Option<String>,
}

impl Default for MeasureSpec {
    fn default() -> Self {
        MeasureSpec {
            sample_us: 0.0,
            warmup_ms: 0.0,
            monitor: vec![],
            small_flow_kb: 100.0,
            retire_flows: false,
            wire_check: false,
            tcp_fct: None,
        }
    }
}

#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct ImpairmentSpec {
    /// Probability that a link loses a packet.
    pub loss: f64,
    /// Probability that a link delivers a packet twice.
    pub duplicate: f64,
    /// Probability that a link holds a packet back by `reorder_delay_us` (so later ones
    /// overtake it).
    pub reorder: f64,
    pub reorder_delay_us: f64,
}

impl ImpairmentSpec {
    pub fn impairment(&self) -> crate::Impairment {
        crate::Impairment {
            loss: self.loss,
            duplicate: self.duplicate,
            reorder: self.reorder,
            reorder_delay: us(self.reorder_delay_us),
        }
    }
}

/// A link failure (or repair) at a time; the control plane recomputes the routes
/// `reroute_after_ms` later (ECMP groups lose or regain the member, in the same order on
/// every switch).
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct FaultSpec {
    pub at_ms: f64,
    /// The link, by one of its ports: "node->peer" (both directions fail).
    pub link: String,
    /// false: the link fails; true: it comes back.
    #[serde(default)]
    pub up: bool,
    #[serde(default)]
    pub reroute_after_ms: f64,
}

/// ExpressPass Fig. 8a: a second long flow joins; time to fairness.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ConvergenceSpec {
    /// When the listed flow that starts last joins (its `start_us` is overridden), ms.
    pub join_ms: f64,
    /// Simulated time after the join, ms.
    pub after_ms: f64,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SweepSpec {
    /// Keys and their values; the runs are every combination.
    #[serde(default)]
    pub grid: BTreeMap<String, Vec<toml::Value>>,
    /// Sets of keys that vary together; every case is combined with every grid point.
    #[serde(default)]
    pub cases: Vec<BTreeMap<String, toml::Value>>,
    /// Columns of the summary table: keys of the experiment or metrics of the run report
    /// (e.g. "fct.overall.small.p99_us").
    #[serde(default)]
    pub columns: Vec<String>,
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct FigureSpec {
    /// File names: figure-<name>.png / .csv.
    pub name: String,
    pub title: String,
    /// The sweep key on the x axis.
    pub x: String,
    #[serde(default)]
    pub x_label: String,
    /// Multiply x values by this for the axis (e.g. 100 for percent).
    #[serde(default = "unit")]
    pub x_scale: f64,
    /// The sweep key that makes the lines (none: one line).
    pub series: Option<String>,
    #[serde(rename = "panel")]
    pub panels: Vec<PanelSpec>,
    /// Text under the figure (what the paper reports).
    #[serde(default)]
    pub paper: String,
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PanelSpec {
    /// Metric of the run report, e.g. "fct.overall.all.avg_us".
    pub y: String,
    pub label: String,
    #[serde(default = "unit")]
    pub scale: f64,
    /// Normalise each series to its value at this x (e.g. 0: relative to 0 % deployment).
    pub normalize_at: Option<f64>,
    /// Only runs whose keys have these values (e.g. { "switch.profile" = "naive" }).
    #[serde(default, rename = "where")]
    pub filter: BTreeMap<String, toml::Value>,
}

fn unit() -> f64 {
    1.0
}

/// One `key=value` override (`--set`, and each sweep point).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Override {
    pub key: String,
    pub value: toml::Value,
}

impl Override {
    /// `key=value`, the value in TOML syntax (a bare word is a string).
    pub fn parse(s: &str) -> Result<Self, String> {
        let (k, v) = s
            .split_once('=')
            .ok_or_else(|| format!("--set '{s}': expected KEY=VALUE"))?;
        let key = k.trim().to_string();
        if key.is_empty() {
            return Err(format!("--set '{s}': empty key"));
        }
        let v = v.trim();
        let value = match toml::from_str::<toml::Table>(&format!("v = {v}")) {
            Ok(mut t) => t.remove("v").expect("parsed"),
            Err(_) => toml::Value::String(v.to_string()),
        };
        Ok(Override { key, value })
    }

    fn apply(&self, table: &mut toml::Table) -> Result<(), String> {
        let parts: Vec<&str> = self.key.split('.').collect();
        let mut cur = table;
        for (i, part) in parts.iter().enumerate() {
            let last = i + 1 == parts.len();
            if last {
                cur.insert(part.to_string(), self.value.clone());
                return Ok(());
            }
            let next = cur
                .entry(part.to_string())
                .or_insert_with(|| toml::Value::Table(toml::Table::new()));
            cur = match next {
                toml::Value::Table(t) => t,
                toml::Value::Array(a) => {
                    // key.N.rest: the N-th table of an array of tables.
                    let idx: usize =
                        parts
                            .get(i + 1)
                            .and_then(|n| n.parse().ok())
                            .ok_or_else(|| {
                                format!("'{}': '{part}' is a list: give an index", self.key)
                            })?;
                    let n = a.len();
                    let t = a.get_mut(idx).ok_or_else(|| {
                        format!("'{}': '{part}' has {n} entries, no index {idx}", self.key)
                    })?;
                    let toml::Value::Table(t) = t else {
                        return Err(format!("'{}': '{part}' is not a list of tables", self.key));
                    };
                    if i + 2 == parts.len() {
                        return Err(format!("'{}': a key is missing after the index", self.key));
                    }
                    // Skip the index segment.
                    return Override {
                        key: parts[i + 2..].join("."),
                        value: self.value.clone(),
                    }
                    .apply(t);
                }
                _ => return Err(format!("'{}': '{part}' is not a table", self.key)),
            };
        }
        Ok(())
    }

    /// The value as it reads in a table cell or a directory name.
    pub fn value_text(&self) -> String {
        match &self.value {
            toml::Value::String(s) => s.clone(),
            v => v.to_string(),
        }
    }
}

/// `compat = "ns2-flexpass"`: the FlexPass artifact's choices where they differ from the
/// papers (kaist-ina/ns2-flexpass, scripts/large-scale.tcl; docs/fidelity.md measures what
/// each costs, docs/experiments.md says where each comes from). Parameters (rates, K,
/// thresholds, windows) are not here: the experiment sets them.
pub const COMPAT_NS2: &str = r#"
[host]
tcp_handshake = true
max_cwnd = 180
dctcp_alpha_init = 0.0
flexpass_beta = true
[topology]
routing = "single-path"
[switch]
credit_share_net = true
red_basis = "red"
[measure]
tcp_fct = "acked"
"#;

/// The compat presets by name.
pub const COMPAT_PRESETS: &[(&str, &str)] = &[("ns2-flexpass", COMPAT_NS2)];

/// Put the preset named by the table's `compat` under the table (its own keys win).
fn apply_compat(table: &mut toml::Table) -> Result<(), String> {
    let Some(v) = table.get("compat") else {
        return Ok(());
    };
    let name = v
        .as_str()
        .ok_or_else(|| "compat must be a string".to_string())?;
    let (_, preset) = COMPAT_PRESETS
        .iter()
        .find(|(n, _)| *n == name)
        .ok_or_else(|| {
            let names: Vec<_> = COMPAT_PRESETS.iter().map(|(n, _)| *n).collect();
            format!("compat must be one of {}, got {name:?}", names.join(", "))
        })?;
    let mut merged: toml::Table = toml::from_str(preset).expect("the preset parses");
    merge(&mut merged, std::mem::take(table));
    *table = merged;
    Ok(())
}

/// Where an experiment comes from: a built-in name or a file.
#[derive(Clone, Debug)]
pub struct Source {
    pub name: String,
    pub text: String,
    /// The file, or None for a built-in.
    pub path: Option<std::path::PathBuf>,
}

impl Source {
    /// A built-in experiment by name, or a TOML file.
    pub fn load(name_or_path: &str) -> Result<Self, String> {
        if let Some((name, text)) = BUILTIN.iter().find(|(n, _)| *n == name_or_path) {
            return Ok(Source {
                name: name.to_string(),
                text: text.to_string(),
                path: None,
            });
        }
        let path = Path::new(name_or_path);
        let text = std::fs::read_to_string(path).map_err(|e| {
            let names: Vec<_> = BUILTIN.iter().map(|(n, _)| *n).collect();
            format!(
                "'{name_or_path}' is neither a built-in experiment ({}) nor a readable file: {e}",
                names.join(", ")
            )
        })?;
        Ok(Source {
            name: path
                .file_stem()
                .map_or("experiment".into(), |s| s.to_string_lossy().into_owned()),
            text,
            path: Some(path.to_path_buf()),
        })
    }

    fn label(&self) -> String {
        self.path
            .as_ref()
            .map_or(format!("built-in experiment '{}'", self.name), |p| {
                p.display().to_string()
            })
    }

    /// The file's table with the experiment it `extends` merged under it (recursively).
    fn table(&self, depth: usize) -> Result<toml::Table, String> {
        let mut table: toml::Table =
            toml::from_str(&self.text).map_err(|e| format!("{}: {e}", self.label()))?;
        let Some(base) = table.remove("extends") else {
            return Ok(table);
        };
        let toml::Value::String(base) = base else {
            return Err(format!("{}: extends must be a string", self.label()));
        };
        if depth >= 8 {
            return Err(format!(
                "{}: extends nests more than 8 levels (a cycle?)",
                self.label()
            ));
        }
        // A built-in name, or a path relative to this file.
        let parent = BUILTIN
            .iter()
            .any(|(n, _)| *n == base)
            .then(|| base.clone());
        let parent = parent.unwrap_or_else(|| match &self.path {
            Some(p) => p
                .parent()
                .unwrap_or(Path::new("."))
                .join(&base)
                .display()
                .to_string(),
            None => base.clone(),
        });
        let mut merged = Source::load(&parent)
            .map_err(|e| format!("{}: extends: {e}", self.label()))?
            .table(depth + 1)?;
        merge(&mut merged, table);
        Ok(merged)
    }

    /// The experiment with `overrides` applied, validated.
    pub fn experiment(&self, overrides: &[Override]) -> Result<Experiment, String> {
        let extends =
            toml::from_str::<toml::Table>(&self.text).is_ok_and(|t| t.contains_key("extends"));
        let mut table = self.table(0)?;
        if !extends {
            // Parse the file as written first: its errors carry line and column.
            toml::from_str::<Experiment>(&self.text)
                .map_err(|e| format!("{}: {}", self.label(), e.to_string().trim_end()))?;
        }
        for o in overrides {
            o.apply(&mut table)
                .map_err(|e| format!("{}: --set {e}", self.label()))?;
        }
        apply_compat(&mut table).map_err(|e| format!("{}: {e}", self.label()))?;
        let mut exp: Experiment = serde_path_to_error::deserialize(toml::Value::Table(table))
            .map_err(|e| {
                format!(
                    "{} (with --set {}): {}: {}",
                    self.label(),
                    overrides
                        .iter()
                        .map(|o| format!("{}={}", o.key, o.value_text()))
                        .collect::<Vec<_>>()
                        .join(" "),
                    e.path(),
                    e.inner()
                )
            })?;
        if exp.name.is_empty() {
            exp.name = self.name.clone();
        }
        exp.validate()
            .map_err(|e| format!("{}: {e}", self.label()))?;
        Ok(exp)
    }
}

/// Deep merge: `top`'s values replace `base`'s, tables merge key by key.
fn merge(base: &mut toml::Table, top: toml::Table) {
    for (k, v) in top {
        match (base.get_mut(&k), v) {
            (Some(toml::Value::Table(b)), toml::Value::Table(t)) => merge(b, t),
            (_, v) => {
                base.insert(k, v);
            }
        }
    }
}

/// Names of the built-in experiments with their descriptions.
pub fn builtin() -> Vec<(&'static str, String)> {
    BUILTIN
        .iter()
        .map(|(n, text)| {
            let d = toml::from_str::<toml::Table>(text)
                .ok()
                .and_then(|t| {
                    t.get("description")
                        .and_then(|d| d.as_str().map(String::from))
                })
                .unwrap_or_default();
            (*n, d)
        })
        .collect()
}

fn check(ok: bool, msg: impl FnOnce() -> String) -> Result<(), String> {
    if ok {
        Ok(())
    } else {
        Err(msg())
    }
}

fn positive(v: f64, key: &str) -> Result<f64, String> {
    check(v.is_finite() && v > 0.0, || {
        format!("{key} must be > 0, got {v}")
    })?;
    Ok(v)
}

fn non_negative(v: f64, key: &str) -> Result<f64, String> {
    check(v.is_finite() && v >= 0.0, || {
        format!("{key} must be >= 0, got {v}")
    })?;
    Ok(v)
}

fn us(v: f64) -> Nanos {
    (v * MICROS as f64).round() as Nanos
}

fn ms(v: f64) -> Nanos {
    (v * MILLIS as f64).round() as Nanos
}

impl TopologySpec {
    /// Keys that apply to each kind (besides kind, link_gbps, link_delay_us, host_delay_us).
    fn keys_of(kind: &str) -> &'static [&'static str] {
        match kind {
            "star" => &["hosts"],
            "dumbbell" => &[
                "left",
                "right",
                "bottleneck_gbps",
                "left_delay_us",
                "bottleneck_delay_us",
            ],
            "parking-lot" => &["bottlenecks", "hosts_per_switch", "bottleneck_gbps"],
            "leaf-spine" => &[
                "leaves",
                "spines",
                "hosts_per_leaf",
                "uplink_gbps",
                "oversubscription",
            ],
            "clos3" => &[
                "cores",
                "aggs",
                "tors",
                "hosts",
                "aggs_per_pod",
                "core_gbps",
                "oversubscription",
            ],
            "three-dc" => &["hosts_per_dc", "wan_gbps", "wan_delay_us"],
            _ => &[],
        }
    }

    fn set_keys(&self) -> Vec<&'static str> {
        let mut out = vec![];
        let mut k = |name, set: bool| {
            if set {
                out.push(name)
            }
        };
        k("hosts", self.hosts.is_some());
        k("left", self.left.is_some());
        k("right", self.right.is_some());
        k("bottleneck_gbps", self.bottleneck_gbps.is_some());
        k("left_delay_us", self.left_delay_us.is_some());
        k("bottleneck_delay_us", self.bottleneck_delay_us.is_some());
        k("bottlenecks", self.bottlenecks.is_some());
        k("hosts_per_switch", self.hosts_per_switch.is_some());
        k("leaves", self.leaves.is_some());
        k("spines", self.spines.is_some());
        k("hosts_per_leaf", self.hosts_per_leaf.is_some());
        k("uplink_gbps", self.uplink_gbps.is_some());
        k("oversubscription", self.oversubscription.is_some());
        k("cores", self.cores.is_some());
        k("aggs", self.aggs.is_some());
        k("tors", self.tors.is_some());
        k("aggs_per_pod", self.aggs_per_pod.is_some());
        k("core_gbps", self.core_gbps.is_some());
        k("hosts_per_dc", self.hosts_per_dc.is_some());
        k("wan_gbps", self.wan_gbps.is_some());
        k("wan_delay_us", self.wan_delay_us.is_some());
        out
    }

    /// Host link rate, bits/s (default 10 Gbit/s; clos3: 40; three-dc: 1, FlashPass §IV-B2).
    pub fn link_bps(&self) -> f64 {
        let default = match self.kind.as_str() {
            "clos3" => 40.0,
            "three-dc" => 1.0,
            _ => 10.0,
        };
        self.link_gbps.unwrap_or(default) * 1e9
    }

    /// Link delay (default 5 µs; clos3: 4; three-dc: the DC links' 10 µs, FlashPass §IV-B2).
    pub fn link_delay(&self) -> Nanos {
        let default = match self.kind.as_str() {
            "clos3" => 4.0,
            "three-dc" => 10.0,
            _ => 5.0,
        };
        us(self.link_delay_us.unwrap_or(default))
    }

    pub fn host_delay(&self) -> Nanos {
        let default = if self.kind == "clos3" { 2.0 } else { 0.0 };
        us(self.host_delay_us.unwrap_or(default))
    }

    /// IP MTU of the links (default 1500).
    pub fn mtu(&self) -> usize {
        self.mtu.unwrap_or(flexpass_wire::DEFAULT_MTU)
    }

    /// The validated shape.
    pub fn shape(&self) -> Result<Shape, String> {
        let kind = self.kind.as_str();
        check(topology::KINDS.contains(&kind), || {
            format!(
                "topology.kind '{kind}' is not one of {}",
                topology::KINDS.join(", ")
            )
        })?;
        let allowed = Self::keys_of(kind);
        for k in self.set_keys() {
            check(allowed.contains(&k), || {
                format!(
                    "topology.{k} does not apply to kind '{kind}' (its keys: {}, link_gbps, link_delay_us, host_delay_us)",
                    allowed.join(", ")
                )
            })?;
        }
        let c = positive(self.link_bps() / 1e9, "topology.link_gbps")? * 1e9;
        non_negative(self.link_delay_us.unwrap_or(0.0), "topology.link_delay_us")?;
        non_negative(self.host_delay_us.unwrap_or(0.0), "topology.host_delay_us")?;
        let count = |v: Option<usize>, key: &str, default: Option<usize>, min: usize| {
            let v = v
                .or(default)
                .ok_or_else(|| format!("topology.{key} is required for kind '{kind}'"))?;
            check(v >= min, || {
                format!("topology.{key} must be >= {min}, got {v}")
            })?;
            Ok::<usize, String>(v)
        };
        let gbps = |v: Option<f64>, key: &str| match v {
            Some(g) => positive(g, &format!("topology.{key}")).map(|g| g * 1e9),
            None => Ok(c),
        };
        Ok(match kind {
            "star" => Shape::Star {
                hosts: count(self.hosts, "hosts", None, 2)?,
            },
            "dumbbell" => Shape::Dumbbell {
                left: count(self.left, "left", None, 1)?,
                right: count(self.right, "right", None, 1)?,
                bottleneck_bps: gbps(self.bottleneck_gbps, "bottleneck_gbps")?,
                left_delay: match self.left_delay_us {
                    Some([lo, hi]) => {
                        non_negative(lo, "topology.left_delay_us[0]")?;
                        check(hi >= lo, || {
                            format!("topology.left_delay_us must be [lo, hi] with hi >= lo, got [{lo}, {hi}]")
                        })?;
                        Some(((lo * 1e3) as Nanos, (hi * 1e3) as Nanos))
                    }
                    None => None,
                },
                bottleneck_delay: match self.bottleneck_delay_us {
                    Some(d) => {
                        Some((non_negative(d, "topology.bottleneck_delay_us")? * 1e3) as Nanos)
                    }
                    None => None,
                },
            },
            "parking-lot" => Shape::ParkingLot {
                bottlenecks: count(self.bottlenecks, "bottlenecks", None, 1)?,
                hosts_per_switch: count(self.hosts_per_switch, "hosts_per_switch", None, 1)?,
                bottleneck_bps: gbps(self.bottleneck_gbps, "bottleneck_gbps")?,
            },
            "leaf-spine" => {
                let leaves = count(self.leaves, "leaves", None, 2)?;
                let spines = count(self.spines, "spines", None, 1)?;
                let per_leaf = count(self.hosts_per_leaf, "hosts_per_leaf", None, 1)?;
                let uplink_bps = match (self.uplink_gbps, self.oversubscription) {
                    (Some(_), Some(_)) => {
                        return Err(
                            "topology: give uplink_gbps or oversubscription, not both".into()
                        )
                    }
                    (Some(g), None) => positive(g, "topology.uplink_gbps")? * 1e9,
                    (None, Some(o)) => {
                        per_leaf as f64 * c
                            / (spines as f64 * positive(o, "topology.oversubscription")?)
                    }
                    (None, None) => c,
                };
                Shape::LeafSpine {
                    leaves,
                    spines,
                    hosts_per_leaf: per_leaf,
                    uplink_bps,
                }
            }
            "clos3" => {
                let cores = count(self.cores, "cores", Some(8), 1)?;
                let aggs = count(self.aggs, "aggs", Some(16), 1)?;
                let tors = count(self.tors, "tors", Some(32), 1)?;
                let hosts = count(self.hosts, "hosts", Some(192), 1)?;
                let per_pod = count(self.aggs_per_pod, "aggs_per_pod", Some(2), 1)?;
                check(aggs % per_pod == 0, || {
                    format!("topology.aggs ({aggs}) must be a multiple of aggs_per_pod ({per_pod})")
                })?;
                let pods = aggs / per_pod;
                check(tors % pods == 0, || {
                    format!("topology.tors ({tors}) must be a multiple of the pods (aggs / aggs_per_pod = {pods})")
                })?;
                check(hosts % tors == 0, || {
                    format!("topology.hosts ({hosts}) must be a multiple of tors ({tors})")
                })?;
                check(cores % per_pod == 0, || {
                    format!("topology.cores ({cores}) must be a multiple of aggs_per_pod ({per_pod}): aggregation switch a of a pod links to cores a, a + aggs_per_pod, …")
                })?;
                if let Some(o) = self.oversubscription {
                    let expect = (hosts / tors) as f64 / per_pod as f64;
                    check((o - expect).abs() < 1e-9, || {
                        format!("topology.oversubscription {o} does not match the shape: {} hosts per ToR over {per_pod} uplinks is {expect}", hosts / tors)
                    })?;
                }
                Shape::Clos3 {
                    cores,
                    aggs,
                    tors,
                    hosts,
                    aggs_per_pod: per_pod,
                    core_bps: gbps(self.core_gbps, "core_gbps")?,
                }
            }
            "three-dc" => {
                let wan_delay = match self.wan_delay_us.as_deref() {
                    None => [20 * MILLIS, 30 * MILLIS, 40 * MILLIS],
                    Some(&[a, b, c]) => {
                        let mut out = [0; 3];
                        for (i, (d, link)) in [a, b, c]
                            .into_iter()
                            .zip(["dc0–dc1", "dc1–dc2", "dc2–dc0"])
                            .enumerate()
                        {
                            non_negative(d, &format!("topology.wan_delay_us[{i}] ({link})"))?;
                            out[i] = us(d);
                        }
                        out
                    }
                    Some(v) => {
                        return Err(format!(
                            "topology.wan_delay_us must be three one-way delays [dc0–dc1, dc1–dc2, dc2–dc0] in µs, got {} value(s)",
                            v.len()
                        ))
                    }
                };
                Shape::ThreeDc {
                    hosts_per_dc: count(self.hosts_per_dc, "hosts_per_dc", Some(20), 1)?,
                    wan_bps: match self.wan_gbps {
                        Some(g) => positive(g, "topology.wan_gbps")? * 1e9,
                        None => 10e9,
                    },
                    wan_delay,
                }
            }
            _ => unreachable!("checked above"),
        })
    }
}

impl Experiment {
    /// Everything the schema cannot say by itself.
    pub fn validate(&self) -> Result<(), String> {
        if let Some(d) = self.duration_ms {
            positive(d, "duration_ms")?;
        }
        self.topology.shape()?;
        check(
            matches!(
                self.topology.routing.as_deref(),
                None | Some("ecmp") | Some("single-path")
            ),
            || {
                format!(
                    "topology.routing must be \"ecmp\" or \"single-path\", got {:?}",
                    self.topology.routing.as_deref().unwrap_or("")
                )
            },
        )?;
        let s = &self.switch;
        check(s.w_q > 0.0 && s.w_q < 1.0, || {
            format!("switch.w_q must be in (0, 1), got {}", s.w_q)
        })?;
        let k = positive(s.k_kb, "switch.k_kb")?;
        positive(s.k_q1_kb.unwrap_or(k), "switch.k_q1_kb")?;
        // FlexPass sets the selective-drop threshold above Q1's K (reactive sub-flows react to
        // ECN first); FlexPass Fig. 17 also explores thresholds below it, so that is allowed.
        let mtu = self.topology.mtu();
        check(flexpass_wire::mtu_supported(mtu), || {
            format!(
                "topology.mtu must be in {}..={} bytes, got {mtu}",
                flexpass_wire::MIN_MTU,
                flexpass_wire::MAX_MTU
            )
        })?;
        let frame = flexpass_wire::max_frame_wire(mtu);
        let red = positive(s.red_kb, "switch.red_kb")?;
        check(red * 1000.0 >= frame as f64, || {
            format!("switch.red_kb ({red}) must hold at least one frame ({frame} B)")
        })?;
        if let Some(v) = s.k_lcp_kb {
            positive(v, "switch.k_lcp_kb")?;
        }
        if let Some(v) = s.lcp_drop_kb {
            positive(v, "switch.lcp_drop_kb")?;
        }
        for (key, v) in [("lambda_hcp", s.lambda_hcp), ("lambda_lcp", s.lambda_lcp)] {
            if let Some(v) = v {
                check(v > 0.0 && v.is_finite(), || {
                    format!("switch.{key} must be > 0, got {v}")
                })?;
            }
        }
        check(
            matches!(s.ecn_basis.as_deref(), None | Some("port") | Some("queue")),
            || {
                format!(
                    "switch.ecn_basis must be \"port\" or \"queue\", got {:?}",
                    s.ecn_basis.as_deref().unwrap_or("")
                )
            },
        )?;
        for (key, set) in [
            ("ecn_basis", s.ecn_basis.is_some()),
            ("lcp_drop_kb", s.lcp_drop_kb.is_some()),
            ("lcp_pushout", s.lcp_pushout),
            ("k_lcp_kb", s.k_lcp_kb.is_some()),
            ("lambda_hcp", s.lambda_hcp.is_some()),
            ("lambda_lcp", s.lambda_lcp.is_some()),
        ] {
            check(!set || s.profile == Profile::Ppt, || {
                format!("switch.{key} applies to profile \"ppt\" only")
            })?;
        }
        if let Some(v) = s.port_credit_share {
            check(v > 0.0 && v <= 1.0, || {
                format!("switch.port_credit_share must be in (0, 1], got {v}")
            })?;
        }
        check(
            matches!(s.red_basis.as_deref(), None | Some("queue") | Some("red")),
            || {
                format!(
                    "switch.red_basis must be \"queue\" or \"red\", got {:?}",
                    s.red_basis.as_deref().unwrap_or("")
                )
            },
        )?;
        check(
            !s.feedback_priority || s.profile == Profile::FlashPass,
            || "switch.feedback_priority applies to profile \"flashpass\" only".into(),
        )?;
        check(!(s.lcp_pushout && s.shared_buffer_mb.is_some()), || {
            "switch.lcp_pushout needs per-port buffers (no switch.shared_buffer_mb)".into()
        })?;
        let pp = &self.host.ppt;
        positive(pp.large_flow_kb, "host.ppt.large_flow_kb")?;
        check(
            pp.demotion_kb.iter().all(|v| *v >= 0.0 && v.is_finite())
                && pp.demotion_kb[0] <= pp.demotion_kb[1]
                && pp.demotion_kb[1] <= pp.demotion_kb[2],
            || {
                format!(
                    "host.ppt.demotion_kb must be three non-decreasing sizes, got {:?}",
                    pp.demotion_kb
                )
            },
        )?;
        check(pp.alpha_history >= 1, || {
            "host.ppt.alpha_history must be >= 1".into()
        })?;
        positive(s.buffer_kb, "switch.buffer_kb")?;
        if let Some(b) = s.buffer_kb_per_gbps {
            positive(b, "switch.buffer_kb_per_gbps")?;
            check(s.shared_buffer_mb.is_none(), || {
                "switch.buffer_kb_per_gbps sizes per-port buffers: it does not apply with shared_buffer_mb".into()
            })?;
        }
        if let Some(b) = s.shared_buffer_mb {
            positive(b, "switch.shared_buffer_mb")?;
        }
        check(s.buffer_alpha > 0.0 && s.buffer_alpha.is_finite(), || {
            format!("switch.buffer_alpha must be > 0, got {}", s.buffer_alpha)
        })?;
        if let Some(b) = s.nic_buffer_kb {
            positive(b, "switch.nic_buffer_kb")?;
        }
        check(s.credit_queue >= 1, || {
            "switch.credit_queue must be >= 1 credit".into()
        })?;
        check(s.credit_burst >= 1.0 && s.credit_burst.is_finite(), || {
            format!(
                "switch.credit_burst must be >= 1 credit, got {}",
                s.credit_burst
            )
        })?;
        if let Some(v) = s.nic_credit_share {
            check(v > 0.0 && v <= 1.0, || {
                format!("switch.nic_credit_share must be in (0, 1], got {v}")
            })?;
        }
        if let Some(v) = s.owf_weight {
            check(v > 0.0 && v < 1.0, || {
                format!("switch.owf_weight must be in (0, 1), got {v}")
            })?;
        }
        let h = &self.host;
        positive(h.rto_min_ms, "host.rto_min_ms")?;
        positive(h.give_up_ms, "host.give_up_ms")?;
        for (key, w) in [
            ("init_cwnd", h.init_cwnd),
            ("reactive_init_cwnd", h.reactive_init_cwnd),
        ] {
            if let Some(w) = w {
                check(w >= 1.0 && w.is_finite(), || {
                    format!("host.{key} must be >= 1 packet, got {w}")
                })?;
            }
        }
        if let Some(w) = h.max_cwnd {
            check(w >= h.init_cwnd.unwrap_or(1.0) && w.is_finite(), || {
                format!("host.max_cwnd must be a number of packets >= host.init_cwnd, got {w}")
            })?;
        }
        if let Some(j) = h.credit_jitter {
            check((0.0..1.0).contains(&j), || {
                format!("host.credit_jitter must be in [0, 1), got {j}")
            })?;
        }
        if let Some(a) = h.dctcp_alpha_init {
            check((0.0..=1.0).contains(&a), || {
                format!("host.dctcp_alpha_init must be in [0, 1], got {a}")
            })?;
        }
        let batches = 1..=flexpass_core::config::MAX_CREDIT_BATCH;
        check(batches.contains(&h.credit_batch), || {
            format!(
                "host.credit_batch must be in 1..={} credits, got {}",
                batches.end(),
                h.credit_batch
            )
        })?;
        check(h.alpha > 0.0 && h.alpha <= 1.0, || {
            format!("host.alpha must be in (0, 1], got {}", h.alpha)
        })?;
        if let Some(w) = h.w_init {
            check((0.01..=0.5).contains(&w), || {
                format!("host.w_init must be in [w_min, w_max] = [0.01, 0.5], got {w}")
            })?;
        }
        self.host.rule()?;
        let hosts = self.num_hosts()?;
        for (i, f) in self.flows.iter().enumerate() {
            check(f.count >= 1, || format!("flow[{i}].count must be >= 1"))?;
            non_negative(f.start_step_us, &format!("flow[{i}].start_step_us"))?;
            let srcs = f.expand(hosts).map_err(|e| format!("flow[{i}].src: {e}"))?;
            let dst = f
                .dst
                .resolve(hosts)
                .map_err(|e| format!("flow[{i}].dst: {e}"))?;
            check(srcs.iter().all(|&(src, _)| src != dst), || {
                format!("flow[{i}]: src and dst are the same host")
            })?;
            non_negative(f.start_us, &format!("flow[{i}].start_us"))?;
            check(f.bytes != Some(0), || {
                format!("flow[{i}].bytes must be > 0")
            })?;
        }
        for (i, g) in self.incast.iter().enumerate() {
            let r = g
                .receiver
                .resolve(hosts)
                .map_err(|e| format!("incast[{i}].receiver: {e}"))?;
            if let Some(ss) = &g.senders {
                check(!ss.is_empty(), || format!("incast[{i}].senders is empty"))?;
                for s in ss {
                    let s = s
                        .resolve(hosts)
                        .map_err(|e| format!("incast[{i}].senders: {e}"))?;
                    check(s != r, || {
                        format!("incast[{i}]: the receiver is also a sender")
                    })?;
                }
            }
            check(g.flows >= 1, || format!("incast[{i}].flows must be >= 1"))?;
            check(g.bytes >= 1, || format!("incast[{i}].bytes must be >= 1"))?;
            non_negative(g.start_us, &format!("incast[{i}].start_us"))?;
            check(g.repeat >= 1, || format!("incast[{i}].repeat must be >= 1"))?;
            non_negative(g.repeat_step_us, &format!("incast[{i}].repeat_step_us"))?;
            check(g.repeat == 1 || g.repeat_step_us > 0.0, || {
                format!("incast[{i}].repeat_step_us must be > 0 when repeat > 1")
            })?;
        }
        if let Some(w) = &self.workload {
            flexpass_workload::FlowSizeCdf::load(&w.cdf)
                .map_err(|e| format!("workload.cdf: {e}"))?;
            check(w.load > 0.0 && w.load <= 1.0, || {
                format!("workload.load must be in (0, 1], got {}", w.load)
            })?;
            check(w.flows >= 1, || "workload.flows must be >= 1".into())?;
            check(
                matches!(w.load_on.as_deref(), None | Some("uplinks") | Some("hosts")),
                || {
                    format!(
                        "workload.load_on must be \"uplinks\" or \"hosts\", got {:?}",
                        w.load_on.as_deref().unwrap_or("")
                    )
                },
            )?;
            check(
                matches!(w.pairs.as_deref(), None | Some("any") | Some("inter-rack")),
                || {
                    format!(
                        "workload.pairs must be \"any\" or \"inter-rack\", got {:?}",
                        w.pairs.as_deref().unwrap_or("")
                    )
                },
            )?;
            non_negative(w.start_ms, "workload.start_ms")?;
            if let Some(fg) = &w.foreground {
                check(fg.volume_fraction > 0.0 && fg.volume_fraction < 1.0, || {
                    format!(
                        "workload.foreground.volume_fraction must be in (0, 1), got {}",
                        fg.volume_fraction
                    )
                })?;
                check(fg.bytes >= 1 && fg.flows_per_sender >= 1, || {
                    "workload.foreground: bytes and flows_per_sender must be >= 1".into()
                })?;
            }
        }
        if let Some(t) = &self.trace {
            flexpass_workload::FlowTrace::load(&t.file).map_err(|e| format!("trace.file: {e}"))?;
            non_negative(t.start_ms, "trace.start_ms")?;
        }
        check((0.0..=1.0).contains(&self.deployment.fraction), || {
            format!(
                "deployment.fraction must be in [0, 1], got {}",
                self.deployment.fraction
            )
        })?;
        if let Some(t) = self.deployment.transport {
            check(t != TransportKind::Dctcp, || {
                "deployment.transport is the new transport: flexpass, expresspass, ppt or flashpass"
                    .into()
            })?;
        }
        let m = &self.measure;
        non_negative(m.sample_us, "measure.sample_us")?;
        non_negative(m.warmup_ms, "measure.warmup_ms")?;
        positive(m.small_flow_kb, "measure.small_flow_kb")?;
        check(
            matches!(
                m.tcp_fct.as_deref(),
                None | Some("delivered") | Some("acked")
            ),
            || {
                format!(
                    "measure.tcp_fct must be \"delivered\" or \"acked\", got {:?}",
                    m.tcp_fct.as_deref().unwrap_or("")
                )
            },
        )?;
        check(
            !self.flows.is_empty()
                || !self.incast.is_empty()
                || self.workload.is_some()
                || self.trace.is_some(),
            || {
                "the experiment has no traffic: add [[flow]], [[incast]], [workload] or [trace]"
                    .into()
            },
        )?;
        if let Some(c) = &self.convergence {
            positive(c.join_ms, "convergence.join_ms")?;
            positive(c.after_ms, "convergence.after_ms")?;
            check(
                self.flows.iter().map(|f| f.count).sum::<usize>() >= 2,
                || "convergence needs two listed flows: the last one joins".into(),
            )?;
        }
        for (i, f) in self.faults.iter().enumerate() {
            non_negative(f.at_ms, &format!("fault[{i}].at_ms"))?;
            non_negative(f.reroute_after_ms, &format!("fault[{i}].reroute_after_ms"))?;
            check(f.link.contains("->"), || {
                format!(
                    "fault[{i}].link '{}' must name a port: \"node->peer\"",
                    f.link
                )
            })?;
        }
        if let Some(i) = &self.impairment {
            for (k, v) in [
                ("loss", i.loss),
                ("duplicate", i.duplicate),
                ("reorder", i.reorder),
            ] {
                check((0.0..1.0).contains(&v), || {
                    format!("impairment.{k} must be a probability in [0, 1), got {v}")
                })?;
            }
            non_negative(i.reorder_delay_us, "impairment.reorder_delay_us")?;
        }
        for (i, f) in self.figures.iter().enumerate() {
            check(!f.panels.is_empty(), || {
                format!(
                    "figure[{i}] ({}): add at least one [[figure.panel]]",
                    f.name
                )
            })?;
            check(
                !f.name.is_empty()
                    && f.name
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'),
                || {
                    format!(
                        "figure[{i}].name '{}' must be letters, digits, - or _",
                        f.name
                    )
                },
            )?;
            check(self.sweep.is_some(), || {
                format!("figure[{i}] ({}) needs a [sweep] to draw from", f.name)
            })?;
        }
        Ok(())
    }

    pub fn num_hosts(&self) -> Result<usize, String> {
        Ok(match self.topology.shape()? {
            Shape::Star { hosts } => hosts,
            Shape::Dumbbell { left, right, .. } => left + right,
            Shape::ParkingLot {
                bottlenecks,
                hosts_per_switch,
                ..
            } => (bottlenecks + 1) * hosts_per_switch,
            Shape::LeafSpine {
                leaves,
                hosts_per_leaf,
                ..
            } => leaves * hosts_per_leaf,
            Shape::Clos3 { hosts, .. } => hosts,
            Shape::ThreeDc { hosts_per_dc, .. } => 3 * hosts_per_dc,
        })
    }

    /// The new transport of the deployment.
    pub fn new_transport(&self) -> TransportKind {
        self.deployment
            .transport
            .unwrap_or(match self.switch.profile {
                Profile::FlexPass => TransportKind::FlexPass,
                Profile::Ppt => TransportKind::Ppt,
                Profile::FlashPass => TransportKind::FlashPass,
                _ => TransportKind::ExpressPass,
            })
    }

    /// Algorithm 1's target-loss rule.
    pub fn target_loss_rule(&self) -> TargetLossRule {
        self.host.rule().expect("validated")
    }

    pub fn has_long_flows(&self) -> bool {
        self.flows.iter().any(|f| f.bytes.is_none())
    }

    /// Simulated time limit.
    pub fn duration(&self) -> Nanos {
        ms(self
            .duration_ms
            .unwrap_or(if self.has_long_flows() { 30.0 } else { 500.0 }))
    }

    pub fn warmup(&self) -> Nanos {
        ms(self.measure.warmup_ms)
    }

    pub fn sample_interval(&self) -> Nanos {
        us(self.measure.sample_us)
    }
}

/// The runs of a sweep: every case combined with every grid point (one run without a sweep).
pub fn sweep_points(exp: &Experiment) -> Vec<Vec<Override>> {
    let Some(s) = &exp.sweep else {
        return vec![vec![]];
    };
    let cases: Vec<Vec<Override>> = if s.cases.is_empty() {
        vec![vec![]]
    } else {
        s.cases
            .iter()
            .map(|c| {
                c.iter()
                    .map(|(k, v)| Override {
                        key: k.clone(),
                        value: v.clone(),
                    })
                    .collect()
            })
            .collect()
    };
    let mut points = cases;
    for (k, values) in &s.grid {
        let mut next = vec![];
        for p in &points {
            for v in values {
                let mut q = p.clone();
                q.push(Override {
                    key: k.clone(),
                    value: v.clone(),
                });
                next.push(q);
            }
        }
        points = next;
    }
    points
}

/// A sweep point's name: "key=value,key=value" with characters unsafe in file names replaced.
pub fn point_id(point: &[Override]) -> String {
    if point.is_empty() {
        return "run".into();
    }
    point
        .iter()
        .map(|o| format!("{}={}", o.key, o.value_text()))
        .collect::<Vec<_>>()
        .join(",")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "=,.-_".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn src(text: &str) -> Source {
        Source {
            name: "t".into(),
            text: text.into(),
            path: None,
        }
    }

    const STAR: &str = r#"
[topology]
kind = "star"
hosts = 3
[[flow]]
src = 1
dst = "h0"
transport = "flexpass"
"#;

    #[test]
    fn a_flow_entry_with_count_lists_consecutive_senders() {
        let many = "[topology]\nkind = \"star\"\nhosts = 5\n[[flow]]\nsrc = \"h1\"\ndst = 0\n\
                    start_us = 10\ncount = 3\nstart_step_us = 5\n";
        let e = src(many).experiment(&[]).unwrap();
        assert_eq!(
            e.flows[0].expand(5).unwrap(),
            vec![(1, 10.0), (2, 15.0), (3, 20.0)]
        );
        let err = src(&many.replace("count = 3", "count = 5"))
            .experiment(&[])
            .unwrap_err();
        assert!(
            err.contains("flow[0].src: count = 5 from host 1 needs host 5"),
            "{err}"
        );
        let err = src(&many.replace("count = 3", "count = 0"))
            .experiment(&[])
            .unwrap_err();
        assert!(err.contains("flow[0].count must be >= 1"), "{err}");
        let err = src(&many.replace("dst = 0", "dst = 2"))
            .experiment(&[])
            .unwrap_err();
        assert!(err.contains("src and dst are the same host"), "{err}");
    }

    #[test]
    fn every_builtin_experiment_parses_and_validates() {
        for (name, _) in BUILTIN {
            let s = Source::load(name).unwrap();
            let e = s.experiment(&[]).unwrap_or_else(|e| panic!("{name}: {e}"));
            for p in sweep_points(&e) {
                s.experiment(&p)
                    .unwrap_or_else(|e| panic!("{name} {p:?}: {e}"));
            }
        }
    }

    #[test]
    fn unknown_keys_and_bad_values_are_named() {
        let e = src(&format!("{STAR}\n[switch]\nwq = 0.5\n"))
            .experiment(&[])
            .unwrap_err();
        assert!(
            e.contains("unknown field `wq`") && e.contains("line"),
            "{e}"
        );
        let e = src(STAR)
            .experiment(&[Override::parse("switch.w_q=1.5").unwrap()])
            .unwrap_err();
        assert!(e.contains("switch.w_q must be in (0, 1), got 1.5"), "{e}");
        let e = src(STAR)
            .experiment(&[Override::parse("switch.w_q=high").unwrap()])
            .unwrap_err();
        assert!(
            e.contains("switch.w_q") && e.contains("invalid type"),
            "{e}"
        );
        let e = src(STAR)
            .experiment(&[Override::parse("topology.spines=2").unwrap()])
            .unwrap_err();
        assert!(
            e.contains("topology.spines does not apply to kind 'star'"),
            "{e}"
        );
        let e = src(&STAR.replace("dst = \"h0\"", "dst = \"h9\""))
            .experiment(&[])
            .unwrap_err();
        assert!(e.contains("flow[0].dst: host 9 does not exist"), "{e}");
        let e = src(STAR)
            .experiment(&[Override::parse("switch.red_kb=1").unwrap()])
            .unwrap_err();
        assert!(
            e.contains("switch.red_kb (1) must hold at least one frame"),
            "{e}"
        );
        let e = src(STAR)
            .experiment(&[Override::parse("switch.feedback_priority=true").unwrap()])
            .unwrap_err();
        assert!(
            e.contains("switch.feedback_priority applies to profile \"flashpass\" only"),
            "{e}"
        );
        let e = src("[topology]\nkind = \"ring\"\nhosts = 2\n[[flow]]\nsrc = 0\ndst = 1\n")
            .experiment(&[])
            .unwrap_err();
        assert!(e.contains("topology.kind 'ring'"), "{e}");
    }

    #[test]
    fn three_dc_keys_and_values_are_checked() {
        const WAN: &str = "[topology]\nkind = \"three-dc\"\n[[flow]]\nsrc = 0\ndst = 59\n";
        let err = |sets: &[&str]| {
            let o: Vec<Override> = sets.iter().map(|s| Override::parse(s).unwrap()).collect();
            src(WAN).experiment(&o).unwrap_err()
        };
        let e = src(WAN).experiment(&[]).unwrap();
        assert_eq!(
            e.num_hosts().unwrap(),
            60,
            "20 hosts in each of 3 DCs by default"
        );
        assert_eq!(e.topology.link_bps(), 1e9);
        assert_eq!(e.topology.link_delay(), 10 * MICROS);
        let e = err(&["topology.wan_delay_us=[20000, 30000]"]);
        assert!(
            e.contains("topology.wan_delay_us must be three one-way delays") && e.contains("got 2"),
            "{e}"
        );
        let e = err(&["topology.wan_delay_us=[20000, -1, 40000]"]);
        assert!(
            e.contains("topology.wan_delay_us[1] (dc1–dc2) must be >= 0, got -1"),
            "{e}"
        );
        let e = err(&["topology.wan_gbps=0"]);
        assert!(e.contains("topology.wan_gbps must be > 0, got 0"), "{e}");
        let e = err(&["topology.hosts_per_dc=0"]);
        assert!(
            e.contains("topology.hosts_per_dc must be >= 1, got 0"),
            "{e}"
        );
        let e = err(&["topology.hosts=4"]);
        assert!(
            e.contains("topology.hosts does not apply to kind 'three-dc'")
                && e.contains("hosts_per_dc, wan_gbps, wan_delay_us"),
            "{e}"
        );
        let e = err(&["topology.wan_gbps=\"fast\""]);
        assert!(e.contains("wan_gbps") && e.contains("invalid type"), "{e}");
        let e = src(STAR)
            .experiment(&[Override::parse("topology.wan_gbps=10").unwrap()])
            .unwrap_err();
        assert!(
            e.contains("topology.wan_gbps does not apply to kind 'star'"),
            "{e}"
        );
        let e = err(&["switch.buffer_kb_per_gbps=-20"]);
        assert!(
            e.contains("switch.buffer_kb_per_gbps must be > 0, got -20"),
            "{e}"
        );
        let e = err(&[
            "workload.cdf=\"alibaba-wan\"",
            "workload.load=0.4",
            "workload.flows=3",
            "workload.pairs=\"cross\"",
        ]);
        assert!(
            e.contains("workload.pairs must be \"any\" or \"inter-rack\", got \"cross\""),
            "{e}"
        );
    }

    #[test]
    fn overrides_reach_nested_keys_and_lists() {
        let s = src(STAR);
        let e = s
            .experiment(&[
                Override::parse("flow.0.bytes=1000").unwrap(),
                Override::parse("switch.profile=naive").unwrap(),
                Override::parse("topology.hosts=5").unwrap(),
            ])
            .unwrap();
        assert_eq!(e.flows[0].bytes, Some(1000));
        assert_eq!(e.switch.profile, Profile::Naive);
        assert_eq!(e.num_hosts().unwrap(), 5);
        assert!(s
            .experiment(&[Override::parse("flow.3.bytes=1").unwrap()])
            .unwrap_err()
            .contains("no index 3"));
        assert!(Override::parse("novalue").is_err());
    }

    #[test]
    fn extends_merges_the_base_under_the_file() {
        let dir = std::env::temp_dir().join(format!("fp-extends-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("base.toml"), STAR).unwrap();
        let top = dir.join("top.toml");
        std::fs::write(
            &top,
            "extends = \"base.toml\"\ndescription = \"top\"\n[switch]\nprofile = \"naive\"\n",
        )
        .unwrap();
        let e = Source::load(top.to_str().unwrap())
            .unwrap()
            .experiment(&[])
            .unwrap();
        assert_eq!(e.switch.profile, Profile::Naive);
        assert_eq!(e.switch.w_q, 0.5);
        assert_eq!(e.flows.len(), 1);
        assert_eq!(e.description, "top");
        std::fs::write(&top, "extends = \"top.toml\"\n").unwrap();
        assert!(Source::load(top.to_str().unwrap())
            .unwrap()
            .experiment(&[])
            .unwrap_err()
            .contains("8 levels"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn sweeps_combine_cases_and_grid() {
        let text = format!(
            "{STAR}\n[sweep]\ngrid = {{ \"switch.w_q\" = [0.25, 0.5], \"seed\" = [1, 2, 3] }}\ncases = [{{ \"host.alpha\" = 1.0 }}, {{ \"host.alpha\" = 0.5 }}]\n"
        );
        let e = src(&text).experiment(&[]).unwrap();
        let pts = sweep_points(&e);
        assert_eq!(pts.len(), 12);
        assert_eq!(point_id(&pts[0]), "host.alpha=1.0,seed=1,switch.w_q=0.25");
    }
}
