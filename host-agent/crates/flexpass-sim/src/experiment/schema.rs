//! The experiment file's tables as Rust types: what each key means and its default. The
//! `[topology]` table is `topology.rs`; merging a file with its base, presets and `--set` is
//! `merge.rs`; the checks serde cannot express are `validate.rs`.

use super::topology::TopologySpec;
use crate::net::Impairment;
use crate::queue::Profile;
use crate::topology::Shape;
use flexpass_core::{Nanos, TargetLossRule, MICROS, MILLIS};
use flexpass_wire::TransportKind;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub use super::host_transports::{FlashPassSpec, PFabricSpec, PaseSpec, PptSpec};

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
    /// Background workloads: one `[workload]` table or several `[[workload]]` entries,
    /// each with its own sources, destinations and transport.
    #[serde(default, deserialize_with = "one_or_many")]
    pub workload: Vec<WorkloadSpec>,
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
    /// The scale an emulation backend runs this experiment at (`[emulation]`); the model
    /// ignores it. Left out of the echoed parameters when unset.
    #[serde(default, skip_serializing_if = "EmulationSpec::is_unset")]
    pub emulation: EmulationSpec,
}

/// `[emulation]`: the emulated link rate C' and base RTT `flexpass emulate` scales this
/// experiment to (mininet-topos/flexpass_mininet/scaling.py), when its `--link-mbps` /
/// `--rtt-us` are not given (default 20 Mbit/s, 1000 µs). A file whose transports need a
/// particular scale (pFabric's window is C'·RTT; PASE's flows need C' for the 16-frame
/// floor) says so here instead of in a command line.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct EmulationSpec {
    pub link_mbps: Option<f64>,
    pub rtt_us: Option<f64>,
}

impl EmulationSpec {
    fn is_unset(&self) -> bool {
        *self == EmulationSpec::default()
    }
}

fn one() -> u64 {
    1
}

/// A table or an array of tables (`[workload]` or `[[workload]]`).
fn one_or_many<'de, D, T>(d: D) -> Result<Vec<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    // Not an untagged enum: that would hide the entry's own error.
    let v = toml::Value::deserialize(d)?;
    match v {
        toml::Value::Array(a) => a
            .into_iter()
            .enumerate()
            .map(|(i, e)| {
                T::deserialize(e).map_err(|e| serde::de::Error::custom(format!("entry {i}: {e}")))
            })
            .collect(),
        other => T::deserialize(other)
            .map(|t| vec![t])
            .map_err(serde::de::Error::custom),
    }
}

/// The transport of a flow, an incast group or a workload: one of the model's transports,
/// or `tcp`, the hosts' kernel TCP, which only an emulation backend has (the model refuses
/// it by name, `Experiment::refuse_emulation_only`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlowTransport {
    Model(TransportKind),
    KernelTcp,
}

impl FlowTransport {
    pub const KERNEL_TCP: &'static str = "tcp";

    /// The model's transport; `None` for kernel TCP.
    pub fn model(self) -> Option<TransportKind> {
        match self {
            FlowTransport::Model(t) => Some(t),
            FlowTransport::KernelTcp => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            FlowTransport::Model(t) => t.name(),
            FlowTransport::KernelTcp => Self::KERNEL_TCP,
        }
    }
}

impl Serialize for FlowTransport {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for FlowTransport {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        if name == Self::KERNEL_TCP {
            return Ok(FlowTransport::KernelTcp);
        }
        TransportKind::from_name(&name)
            .map(FlowTransport::Model)
            .ok_or_else(|| {
                let all: Vec<&str> = TransportKind::ALL.iter().map(|t| t.name()).collect();
                serde::de::Error::custom(format!(
                    "unknown transport {name:?}: one of {}, or \"tcp\" (kernel TCP, emulation only)",
                    all.join(", ")
                ))
            })
    }
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
    /// PASE senders and arbitrators (`[host.pase]`); left out of the echoed parameters
    /// when default, so the records of runs without PASE stay as they were.
    #[serde(skip_serializing_if = "PaseSpec::is_default")]
    pub pase: PaseSpec,
    /// pFabric senders (`[host.pfabric]`); left out of the echoed parameters when default.
    #[serde(skip_serializing_if = "PFabricSpec::is_default")]
    pub pfabric: PFabricSpec,
    /// Congestion control of the window transport (transport dctcp): "dctcp" (default) or
    /// "cubic" (RFC 8312, FlashPass's WAN baseline; ignores ECN).
    pub tcp: flexpass_core::WindowCc,
    /// FlashPass senders (`[host.flashpass]`).
    pub flashpass: FlashPassSpec,
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
            pase: PaseSpec::default(),
            pfabric: PFabricSpec::default(),
            tcp: flexpass_core::WindowCc::Dctcp,
            flashpass: FlashPassSpec::default(),
        }
    }
}

impl HostSpec {
    pub(super) fn rule(&self) -> Result<TargetLossRule, String> {
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
    /// flexpass | expresspass | dctcp | … (or tcp, emulation only); default: by deployment.
    pub transport: Option<FlowTransport>,
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
    /// Pins the flow (both directions) through this switch wherever a switch on its path
    /// chooses among equal-cost next hops and this one is among them (leaf-spine: the
    /// spine). Default: the symmetric ECMP hash picks.
    #[serde(default)]
    pub via: Option<String>,
}

fn one_flow() -> usize {
    1
}

impl IncastEntry {
    /// How many times the group happens: `repeat`, or for 0 every start before
    /// `duration_ms` (validate: then both it and `repeat_step_us` > 0 are set).
    pub fn repetitions(&self, duration_ms: Option<f64>) -> usize {
        match (self.repeat, duration_ms) {
            (0, Some(d)) if self.repeat_step_us > 0.0 => {
                let span = d * 1e3 - self.start_us;
                if span <= 0.0 {
                    0
                } else {
                    (span / self.repeat_step_us).ceil() as usize
                }
            }
            (n, _) => n,
        }
    }
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
    pub transport: Option<FlowTransport>,
    /// Instead of `transport`: the k-th repetition uses `transports[k mod n]` (a soak
    /// cycling its incast bursts through the transports).
    #[serde(default)]
    pub transports: Vec<FlowTransport>,
    /// The group happens this many times, the k-th `repeat_step_us`·k after the first
    /// (1: once): repetitions of one incast give the spread of its maximum FCT. 0: every
    /// `repeat_step_us` until `duration_ms` (bursts through a soak).
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
    /// Homa and HPCC generate traffic: λ = load · C · hosts / mean size) or "destinations"
    /// (the `dst` hosts' links: many-to-one, PASE's testbed).
    #[serde(default)]
    pub load_on: Option<String>,
    /// Who talks to whom: "any" (default: uniformly random distinct hosts) or "inter-rack"
    /// (source and destination in different racks — FlashPass §IV-B2: "chosen uniformly
    /// random from different DCs").
    #[serde(default)]
    pub pairs: Option<String>,
    /// The hosts flows start at (default: every host). With `src` and no `load_on`, `load`
    /// is relative to these hosts' links.
    #[serde(default)]
    pub src: Option<Vec<HostRef>>,
    /// The hosts flows go to (default: every host); never the source itself.
    #[serde(default)]
    pub dst: Option<Vec<HostRef>>,
    /// Every flow's transport (default: by deployment).
    #[serde(default)]
    pub transport: Option<FlowTransport>,
    /// Background flows; absent: arrivals until `duration_ms` (a soak).
    #[serde(default)]
    pub flows: Option<usize>,
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
    pub fn impairment(&self) -> Impairment {
        Impairment {
            loss: self.loss,
            duplicate: self.duplicate,
            reorder: self.reorder,
            reorder_delay: us(self.reorder_delay_us),
        }
    }
}

/// A fault at a time (`kind`):
/// - "link" (default): a link fails (or, `up`, comes back); the control plane recomputes the
///   routes `reroute_after_ms` later (ECMP groups lose or regain the member, in the same order
///   on every switch).
/// - "switch-restart": the switch `switch` loses its state (every queue flushed) and drops
///   every packet for `down_ms`, then forwards again with its routes (a restarted switch
///   reconciled by the control plane: its neighbours keep their routes meanwhile).
/// - "controller-restart": the control plane stops for `down_ms`. The switches keep
///   forwarding, so in the model nothing changes; it is in the file so that every backend
///   runs the same faults (on Mininet the resident controller is killed and restarted).
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct FaultSpec {
    pub at_ms: f64,
    #[serde(default)]
    pub kind: FaultKind,
    /// "link": the link, by one of its ports: "node->peer" (both directions fail).
    #[serde(default)]
    pub link: Option<String>,
    /// "link": false: the link fails; true: it comes back.
    #[serde(default)]
    pub up: bool,
    #[serde(default)]
    pub reroute_after_ms: f64,
    /// "switch-restart": the switch, by name.
    #[serde(default)]
    pub switch: Option<String>,
    /// "switch-restart", "controller-restart": how long it is down, ms.
    #[serde(default)]
    pub down_ms: f64,
}

#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum FaultKind {
    #[default]
    Link,
    SwitchRestart,
    ControllerRestart,
}

impl FaultSpec {
    /// What the fault does, in a few words (reports, plans).
    pub fn describe(&self) -> String {
        match self.kind {
            FaultKind::Link => format!(
                "link {} {}",
                self.link.as_deref().unwrap_or("?"),
                if self.up { "up" } else { "down" }
            ),
            FaultKind::SwitchRestart => format!(
                "{} restarted ({} ms down)",
                self.switch.as_deref().unwrap_or("?"),
                self.down_ms
            ),
            FaultKind::ControllerRestart => {
                format!("controller restarted ({} ms down)", self.down_ms)
            }
        }
    }
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

impl Experiment {
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
                Profile::PFabric => TransportKind::PFabric,
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

pub(super) fn us(v: f64) -> Nanos {
    (v * MICROS as f64).round() as Nanos
}

pub(super) fn ms(v: f64) -> Nanos {
    (v * MILLIS as f64).round() as Nanos
}
