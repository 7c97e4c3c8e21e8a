//! The per-transport tables of `[host]` (`[host.flashpass]`, `[host.pfabric]`,
//! `[host.pase]`, `[host.ppt]`), each named as its paper; `schema::HostSpec` holds them.

use serde::{Deserialize, Serialize};

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

/// pFabric's end hosts (SIGCOMM'13 §4.2; `flexpass_core::pfabric`). The window (the host
/// link's BDP) and the RTO (3 base RTTs) follow from the topology.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct PFabricSpec {
    /// Probe mode: after this many consecutive timeouts a flow sends header-only probes, one
    /// per RTO, until one is answered (`flexpass_core::pfabric::PROBE_AFTER_TIMEOUTS`,
    /// 5); 0: off (the flow resends its window at every timeout).
    pub probe_after_timeouts: u32,
}

impl Default for PFabricSpec {
    fn default() -> Self {
        PFabricSpec {
            probe_after_timeouts: flexpass_core::pfabric::PROBE_AFTER_TIMEOUTS,
        }
    }
}

impl PFabricSpec {
    pub(super) fn is_default(&self) -> bool {
        *self == PFabricSpec::default()
    }
}

/// PASE's endpoints and arbitrators (SIGCOMM'14 §3; `flexpass_core::pase`).
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct PaseSpec {
    /// "end-to-end" (every link of the path, bottom-up) or "local" (the host link only).
    pub arbitration: String,
    /// Use the reference rate; false: PASE-DCTCP (the queue only, §5 Fig. 13(a)).
    pub reference_rate: bool,
    /// Priority queues the arbitrators map flows to (1..=8; the switch has eight).
    pub queues: u8,
    /// Early pruning (§3.1, Fig. 11): going up the path level by level, only flows in the
    /// top `early_pruning_queues` queues after a level are sent to the next level's
    /// arbitrators; the others keep the arbitration so far. 0: off (every flow asks every
    /// arbitrator of its path).
    pub early_pruning_queues: u8,
    /// (The keys below are left out of the echoed parameters when off, so the records of
    /// runs without them stay as they were.)
    /// Delegation (§3.1, Fig. 11): the arbitrators of links above a flow's ToR divide their
    /// capacity into virtual links, one per ToR, from the ToRs' demand; a ToR arbitrates its
    /// flows on them locally (end-to-end arbitration only).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub delegation: bool,
    /// How often a parent re-divides its link among its children, µs; 0: ten arbitration
    /// intervals (ten base RTTs).
    #[serde(skip_serializing_if = "is_zero_u64")]
    pub delegation_period_us: u64,
    /// Probing (§3.3): a flow in the lowest queue sends a header-only probe every RTT
    /// instead of data (at most one unanswered), and resumes data when a probe's answer is
    /// not ECN-marked.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub probing: bool,
    /// The arbitration messages: "packets" (requests and answers cross the links hop by hop,
    /// queued in P0 behind data; a decision applies when its answers are back) or "counted"
    /// (counted as overhead, answers after the propagation delay: the earlier model).
    #[serde(skip_serializing_if = "is_packets")]
    pub messages: String,
}

fn is_packets(v: &String) -> bool {
    v == "packets"
}

fn is_zero_u64(v: &u64) -> bool {
    *v == 0
}

impl Default for PaseSpec {
    fn default() -> Self {
        PaseSpec {
            arbitration: "end-to-end".into(),
            reference_rate: true,
            queues: 8,
            early_pruning_queues: 0,
            delegation: false,
            delegation_period_us: 0,
            probing: false,
            messages: "packets".into(),
        }
    }
}

impl PaseSpec {
    pub(super) fn is_default(&self) -> bool {
        let d = PaseSpec::default();
        self.arbitration == d.arbitration
            && self.reference_rate == d.reference_rate
            && self.queues == d.queues
            && self.early_pruning_queues == d.early_pruning_queues
            && self.delegation == d.delegation
            && self.delegation_period_us == d.delegation_period_us
            && self.probing == d.probing
            && self.messages == d.messages
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
