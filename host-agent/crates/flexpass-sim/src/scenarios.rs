//! Named experiments on the model, after FlexPass §6.1 (testbed: 10 Gbps, w_q = 0.5,
//! K = 60 kB, selective-drop threshold 100 kB) and ExpressPass §3–4.

use crate::net::{FlowSpec, Impairment, LinkSpec, Network};
use crate::queue::{PortConfig, Profile};
use crate::report::{self, Report};
use flexpass_core::config::credit_queue_bps;
use flexpass_core::{
    CreditConfig, Nanos, ReceiverConfig, SenderConfig, TargetLossRule, MICROS, MILLIS,
};
use flexpass_wire::{TransportKind, MIN_ETHERNET_WIRE};
use serde::Serialize;

pub const SCENARIOS: &[(&str, &str)] = &[
    ("single-flexpass", "one FlexPass flow: proactive ≈ w_q·C, reactive fills the rest (FlexPass Fig. 7a)"),
    ("two-flexpass", "two FlexPass flows: fair, mostly proactive (Fig. 7b)"),
    ("flexpass-vs-dctcp", "FlexPass vs DCTCP on the FlexPass switch profile (Fig. 7c / 9b)"),
    ("expresspass-vs-dctcp", "ExpressPass vs DCTCP on the naive profile: DCTCP starves (Fig. 1a / 9a)"),
    ("single-expresspass", "one ExpressPass flow alone: utilization, zero loss, bounded queue"),
    ("expresspass-convergence", "a second ExpressPass flow joins: time to Jain ≥ 0.98 (ExpressPass Fig. 8a)"),
    ("incast", "8 senders, 64 KB responses, 8…64 flows: max FCT and timeouts per transport (FlexPass Fig. 8)"),
];

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scenario {
    SingleFlexpass,
    TwoFlexpass,
    FlexpassVsDctcp,
    ExpresspassVsDctcp,
    SingleExpresspass,
    ExpresspassConvergence,
    Incast,
}

impl std::str::FromStr for Scenario {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "single-flexpass" => Scenario::SingleFlexpass,
            "two-flexpass" => Scenario::TwoFlexpass,
            "flexpass-vs-dctcp" => Scenario::FlexpassVsDctcp,
            "expresspass-vs-dctcp" => Scenario::ExpresspassVsDctcp,
            "single-expresspass" => Scenario::SingleExpresspass,
            "expresspass-convergence" => Scenario::ExpresspassConvergence,
            "incast" => Scenario::Incast,
            _ => {
                let names: Vec<_> = SCENARIOS.iter().map(|(n, _)| *n).collect();
                return Err(format!(
                    "unknown scenario '{s}'; known: {}",
                    names.join(", ")
                ));
            }
        })
    }
}

/// Knobs of every scenario; defaults are the FlexPass testbed's.
#[derive(Clone, Debug, Serialize)]
pub struct ScenarioParams {
    pub seed: u64,
    pub link_bps: f64,
    /// One-way propagation delay of every link.
    pub link_delay: Nanos,
    /// w_q: Q1 weight and credit share.
    pub w_q: f64,
    /// ECN marking threshold K of the data queues (switch ports).
    pub k_bytes: u64,
    /// Selective-drop threshold for red (reactive) packets in Q1.
    pub red_threshold: u64,
    /// Shared data buffer per switch port. 600 kB makes DCTCP's 8-to-1 incast of 64 kB
    /// responses start timing out between 32 and 48 flows, near the testbed's "above 48".
    pub buffer: u64,
    /// Credit share the receiver host's NIC shapes its aggregate credits to (FlexPass
    /// profile). `None`: w_q, the FlexPass design (a NIC is an edge switch), which bounds
    /// the proactive data of *all* flows into a host to w_q. `Some(1.0)`: the NIC shapes
    /// credits to the full link only (ExpressPass host default), and only each flow's own
    /// credit feedback (max_rate = w_q) and the switch ports towards the senders limit
    /// them: this reproduces the FlexPass testbed's Fig. 7b, where two FlexPass flows
    /// into one host starve their reactive sub-flows.
    pub nic_credit_share: Option<f64>,
    /// Simulated time for long-running scenarios.
    pub duration: Nanos,
    /// Initial credit rate factor α (ExpressPass §6.3 default 1/16).
    pub alpha: f64,
    /// Initial aggressiveness factor w_init; None: = α (the §6.3 default α = w_init).
    /// ExpressPass Fig. 8a varies α with w_init fixed at 0.5.
    pub w_init: Option<f64>,
    /// Algorithm 1's target-loss rule (the paper's fixed target, or the authors' simulator's
    /// rate-scaled one).
    pub target_loss_rule: TargetLossRule,
    pub rto_min: Nanos,
    /// Incast: flow counts to run (each spread evenly over 8 senders) and response size.
    pub incast_flows: Vec<usize>,
    pub incast_senders: usize,
    pub incast_size: u64,
    pub sample_interval: Nanos,
    /// Faults injected on every link.
    #[serde(skip)]
    pub impairment: Impairment,
    /// Encode/decode every packet through the wire format.
    pub wire_check: bool,
}

impl Default for ScenarioParams {
    fn default() -> Self {
        ScenarioParams {
            seed: 1,
            link_bps: 10e9,
            link_delay: 5 * MICROS,
            w_q: 0.5,
            k_bytes: 60_000,
            red_threshold: 100_000,
            buffer: 600_000,
            nic_credit_share: None,
            duration: 30 * MILLIS,
            alpha: 1.0 / 16.0,
            w_init: None,
            target_loss_rule: TargetLossRule::Fixed,
            rto_min: 4 * MILLIS,
            incast_flows: vec![8, 16, 32, 48, 64],
            incast_senders: 8,
            incast_size: 64_000,
            sample_interval: 200 * MICROS,
            impairment: Impairment::default(),
            wire_check: false,
        }
    }
}

impl ScenarioParams {
    /// Base RTT of the star topology: four link traversals plus serialisation of one maximum
    /// data frame and one credit at two hops each (the credit feedback update period).
    pub fn base_rtt(&self) -> Nanos {
        let ser = |bytes: f64| (bytes * 8.0 / self.link_bps * 1e9) as Nanos;
        4 * self.link_delay + 2 * ser(1538.0) + 2 * ser(MIN_ETHERNET_WIRE as f64)
    }

    pub fn switch_port(&self, profile: Profile) -> PortConfig {
        let share = if profile == Profile::FlexPass {
            self.w_q
        } else {
            1.0
        };
        PortConfig {
            profile,
            link_bps: self.link_bps,
            w_q: self.w_q,
            credit_rate_bps: credit_queue_bps(self.link_bps, share),
            credit_burst_bytes: 2.0 * MIN_ETHERNET_WIRE as f64,
            credit_capacity: 8,
            ecn_k: [u64::MAX, self.k_bytes, self.k_bytes],
            red_threshold: self.red_threshold,
            buffer: self.buffer,
        }
    }

    /// A host NIC is an edge switch (FlexPass §4.3 footnote 6; ExpressPass: "host and switch
    /// perform credit rate-limiting"): the same queues, shaping, ECN and selective dropping.
    pub fn nic_port(&self, profile: Profile) -> PortConfig {
        let port = self.switch_port(profile);
        match (profile, self.nic_credit_share) {
            (Profile::FlexPass, Some(share)) => PortConfig {
                credit_rate_bps: credit_queue_bps(self.link_bps, share),
                ..port
            },
            _ => port,
        }
    }

    pub fn sender_config(&self, t: TransportKind) -> SenderConfig {
        let mut c = SenderConfig::new(t);
        c.dctcp.rto_min = self.rto_min;
        c.dctcp.rto_init = self.rto_min.max(c.dctcp.rto_init.min(self.rto_min * 3));
        c.seed = self.seed;
        c
    }

    pub fn receiver_config(&self, profile: Profile) -> ReceiverConfig {
        let share = if profile == Profile::FlexPass {
            self.w_q
        } else {
            1.0
        };
        let mut credit = CreditConfig::for_link(self.link_bps, share, self.base_rtt());
        credit.alpha = self.alpha;
        credit.w_init = self
            .w_init
            .unwrap_or(self.alpha)
            .clamp(credit.w_min, credit.w_max);
        credit.target_loss_rule = self.target_loss_rule;
        let mut c = ReceiverConfig::new(credit);
        c.seed = self.seed;
        c
    }
}

/// A star: `n` hosts on one switch `s1`. Returns the network and the switch node.
pub fn star(params: &ScenarioParams, profile: Profile, n: usize) -> (Network, usize) {
    let p = params.clone();
    let p2 = params.clone();
    let mut net = Network::new(
        params.seed,
        move |t| p.sender_config(t),
        move |_, _| p2.receiver_config(profile),
    );
    net.wire_check = params.wire_check;
    net.sample_interval = params.sample_interval;
    let sw = net.add_switch("s1");
    let link = LinkSpec {
        bps: params.link_bps,
        delay: params.link_delay,
        impairment: params.impairment.clone(),
    };
    for i in 0..n {
        let h = net.add_host(&format!("h{i}"));
        let hn = net.host_node(h);
        net.connect(
            hn,
            params.nic_port(profile),
            sw,
            params.switch_port(profile),
            link.clone(),
        );
    }
    net.compute_routes();
    (net, sw)
}

/// Profile a scenario runs on.
pub fn profile_of(s: Scenario) -> Profile {
    match s {
        Scenario::ExpresspassVsDctcp
        | Scenario::SingleExpresspass
        | Scenario::ExpresspassConvergence => Profile::Naive,
        _ => Profile::FlexPass,
    }
}

/// Run a scenario. `progress(fraction)` is called as simulated time advances.
pub fn run_scenario(s: Scenario, params: &ScenarioParams, progress: &mut dyn FnMut(f64)) -> Report {
    use TransportKind::*;
    let long = |id, src, t, start| FlowSpec {
        id,
        src,
        dst: 0,
        transport: t,
        size: None,
        start,
    };
    match s {
        Scenario::Incast => return report::incast(params, progress),
        Scenario::ExpresspassConvergence => return report::convergence(params, progress),
        _ => {}
    }
    let flows = match s {
        Scenario::SingleFlexpass => vec![long(1, 1, FlexPass, 0)],
        Scenario::TwoFlexpass => vec![long(1, 1, FlexPass, 0), long(2, 2, FlexPass, 0)],
        Scenario::FlexpassVsDctcp => vec![long(1, 1, FlexPass, 0), long(2, 2, Dctcp, 0)],
        Scenario::ExpresspassVsDctcp => vec![long(1, 1, ExpressPass, 0), long(2, 2, Dctcp, 0)],
        Scenario::SingleExpresspass => vec![long(1, 1, ExpressPass, 0)],
        Scenario::Incast | Scenario::ExpresspassConvergence => unreachable!("handled above"),
    };
    let profile = profile_of(s);
    let (mut net, sw) = star(params, profile, flows.len() + 1);
    // Port 0 of the switch faces h0, the receiver: the bottleneck.
    net.monitor(sw, 0);
    for f in flows {
        net.add_flow(f);
    }
    let end = params.duration;
    net.run_until(end, |t| progress(t as f64 / end as f64));
    report::build(s, profile, params, &net, sw, 0, 2 * MILLIS)
}
