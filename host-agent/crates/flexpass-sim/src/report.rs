//! Turning a finished run into the numbers the papers report: shares of the bottleneck per
//! flow, sub-flow and transport, utilisation, queue maxima, drops, timeouts, starvation-time
//! fraction (FlexPass Fig. 9c: share < 20% of the link), FCTs and convergence.

use crate::net::{FlowSpec, Network, PortReport, Sample};
use crate::queue::{Profile, QueueStats};
use crate::scenarios::{profile_of, star, Scenario, ScenarioParams};
use flexpass_core::credit_feedback::CreditFeedback;
use flexpass_core::{CreditConfig, Nanos, ReceiverStats, SenderStats, TargetLossRule, MICROS};
use flexpass_wire::TransportKind;
use serde::Serialize;

/// A transport "starves" in an interval where it gets less than this share of the link.
pub const STARVATION_SHARE: f64 = 0.2;

#[derive(Clone, Debug, Serialize)]
pub struct FlowReport {
    pub id: u32,
    pub transport: TransportKind,
    pub src: usize,
    pub dst: usize,
    pub size: Option<u64>,
    pub start_us: f64,
    pub fct_us: Option<f64>,
    pub delivered_bytes: u64,
    /// Application goodput over the measurement window, Gbit/s.
    pub goodput_gbps: f64,
    /// Data wire bytes received over the window / link capacity, total and per sub-flow.
    pub share: f64,
    pub proactive_share: f64,
    pub reactive_share: f64,
    pub corrupted_bytes: u64,
    pub error: Option<String>,
    pub sender: Option<SenderStats>,
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
    /// All bytes on the wire / capacity over the window.
    pub utilization: f64,
    /// Data bytes on the wire / capacity over the window.
    pub data_utilization: f64,
    pub max_queue_bytes: [u64; 3],
    pub max_queue_packets: [usize; 3],
    pub queues: [QueueStats; 3],
}

#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub scenario: Scenario,
    pub profile: Profile,
    pub seed: u64,
    pub link_gbps: f64,
    pub w_q: f64,
    pub base_rtt_us: f64,
    pub duration_us: f64,
    pub window_us: [f64; 2],
    pub flows: Vec<FlowReport>,
    pub transports: Vec<TransportReport>,
    pub bottleneck: Option<BottleneckReport>,
    /// Data packets dropped anywhere: by full buffers (green or red) and by selective dropping (red).
    pub data_drops_full: u64,
    pub data_drops_red: u64,
    pub credit_drops: u64,
    pub timeouts: u64,
    pub recovery_timeouts: u64,
    pub jain_index: Option<f64>,
    /// Scenario-specific results (incast table, convergence times).
    pub extra: serde_json::Value,
    pub switch_ports: Vec<PortReport>,
    pub samples: Vec<Sample>,
    pub sample_interval_us: f64,
    pub events: u64,
}

pub fn jain(xs: &[f64]) -> f64 {
    let s: f64 = xs.iter().sum();
    let q: f64 = xs.iter().map(|x| x * x).sum();
    if q == 0.0 {
        return 1.0;
    }
    s * s / (xs.len() as f64 * q)
}

fn drops(net: &Network) -> (u64, u64, u64) {
    let mut full = 0;
    let mut red = 0;
    let mut credit = 0;
    for p in net.switch_ports() {
        credit += p.queues[0].dropped_full;
        for q in &p.queues[1..] {
            full += q.dropped_full;
            red += q.dropped_red;
        }
    }
    (full, red, credit)
}

/// Build the report of a run on a star, measuring shares over [warmup, end].
pub fn build(
    s: Scenario,
    profile: Profile,
    params: &ScenarioParams,
    net: &Network,
    sw: usize,
    port: usize,
    warmup: Nanos,
) -> Report {
    let interval = params.sample_interval as f64 / 1e9;
    let cap_bytes = params.link_bps / 8.0 * interval;
    let window: Vec<&Sample> = net
        .samples
        .iter()
        .filter(|x| x.t_us * 1e3 > warmup as f64)
        .collect();
    let n = window.len().max(1) as f64;
    let sum = |f: &dyn Fn(&Sample) -> u64| window.iter().map(|x| f(x)).sum::<u64>() as f64;
    let mut flows = vec![];
    for (i, f) in net.flows.iter().enumerate() {
        let pro = sum(&|x| x.proactive[i]) / (cap_bytes * n);
        let rea = sum(&|x| x.reactive[i]) / (cap_bytes * n);
        let good = sum(&|x| x.delivered[i]) * 8.0 / (interval * n) / 1e9;
        flows.push(flow_report(f, pro, rea, good));
    }
    let mut transports = vec![];
    for t in [
        TransportKind::FlexPass,
        TransportKind::ExpressPass,
        TransportKind::Dctcp,
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
    let stats = net.port_stats(sw, port);
    let data_util = flows.iter().map(|f| f.share).sum::<f64>();
    let bottleneck = BottleneckReport {
        port: format!("s1:{port} -> h0"),
        utilization: net.port_tx_bytes(sw, port) as f64 * 8.0
            / (params.link_bps * (params.duration as f64 / 1e9)),
        data_utilization: data_util,
        max_queue_bytes: [stats[0].max_bytes, stats[1].max_bytes, stats[2].max_bytes],
        max_queue_packets: [
            stats[0].max_packets,
            stats[1].max_packets,
            stats[2].max_packets,
        ],
        queues: stats,
    };
    let (full, red, credit) = drops(net);
    let shares: Vec<f64> = flows.iter().map(|f| f.share).collect();
    Report {
        scenario: s,
        profile,
        seed: params.seed,
        link_gbps: params.link_bps / 1e9,
        w_q: params.w_q,
        base_rtt_us: params.base_rtt() as f64 / 1e3,
        duration_us: net.now() as f64 / 1e3,
        window_us: [warmup as f64 / 1e3, params.duration as f64 / 1e3],
        timeouts: flows
            .iter()
            .filter_map(|f| f.sender.as_ref())
            .map(|s| s.timeouts)
            .sum(),
        recovery_timeouts: flows
            .iter()
            .filter_map(|f| f.sender.as_ref())
            .map(|s| s.recovery_timeouts)
            .sum(),
        jain_index: (flows.len() > 1).then(|| jain(&shares)),
        flows,
        transports,
        bottleneck: Some(bottleneck),
        data_drops_full: full,
        data_drops_red: red,
        credit_drops: credit,
        extra: serde_json::Value::Null,
        switch_ports: net.switch_ports(),
        samples: net.samples.clone(),
        sample_interval_us: params.sample_interval as f64 / 1e3,
        events: net.events_processed,
    }
}

fn flow_report(f: &crate::net::Flow, pro: f64, rea: f64, goodput: f64) -> FlowReport {
    FlowReport {
        id: f.spec.id,
        transport: f.spec.transport,
        src: f.spec.src,
        dst: f.spec.dst,
        size: f.spec.size,
        start_us: f.spec.start as f64 / 1e3,
        fct_us: f.completed_at.map(|c| (c - f.spec.start) as f64 / 1e3),
        delivered_bytes: f.delivered,
        goodput_gbps: goodput,
        share: pro + rea,
        proactive_share: pro,
        reactive_share: rea,
        corrupted_bytes: f.corrupted_bytes,
        error: f.error.clone(),
        sender: f.sender.as_ref().map(|s| s.stats().clone()),
        receiver: f.receiver.as_ref().map(|r| r.stats().clone()),
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct IncastRow {
    pub transport: TransportKind,
    pub flows: usize,
    pub max_fct_us: Option<f64>,
    pub completed: usize,
    pub timeouts: u64,
    pub recovery_timeouts: u64,
    pub data_drops: u64,
    pub corrupted_bytes: u64,
    pub max_q1_bytes: u64,
}

/// Run one incast: `n` flows of `size` bytes from `senders` hosts (round robin) to h0, all
/// requested at t = 0 (FlexPass §6.1 "Incast").
pub fn run_incast(
    params: &ScenarioParams,
    transport: TransportKind,
    n: usize,
) -> (IncastRow, Network) {
    let profile = if transport == TransportKind::ExpressPass {
        Profile::Naive
    } else {
        Profile::FlexPass
    };
    let senders = params.incast_senders.max(1);
    let (mut net, sw) = star(params, profile, senders + 1);
    net.sample_interval = 0;
    for i in 0..n {
        net.add_flow(FlowSpec {
            id: i as u32 + 1,
            src: 1 + i % senders,
            dst: 0,
            transport,
            size: Some(params.incast_size),
            start: 0,
        });
    }
    // Generous horizon: a run that needs it has failed anyway.
    let horizon = 500 * flexpass_core::MILLIS;
    let mut t = 0;
    while t < horizon && !net.all_finite_flows_done() {
        t += flexpass_core::MILLIS;
        net.run_until(t, |_| {});
    }
    let fcts: Vec<f64> = net
        .flows
        .iter()
        .filter_map(|f| f.completed_at.map(|c| c as f64 / 1e3))
        .collect();
    let (full, red, _) = drops(&net);
    let sender_sum = |g: fn(&SenderStats) -> u64| {
        net.flows
            .iter()
            .filter_map(|f| f.sender.as_ref())
            .map(|s| g(s.stats()))
            .sum()
    };
    let row = IncastRow {
        transport,
        flows: n,
        max_fct_us: (fcts.len() == n).then(|| fcts.iter().cloned().fold(0.0, f64::max)),
        completed: fcts.len(),
        timeouts: sender_sum(|s| s.timeouts),
        recovery_timeouts: sender_sum(|s| s.recovery_timeouts),
        data_drops: full + red,
        corrupted_bytes: net.flows.iter().map(|f| f.corrupted_bytes).sum(),
        max_q1_bytes: net.port_stats(sw, 0)[1]
            .max_bytes
            .max(net.port_stats(sw, 0)[2].max_bytes),
    };
    (row, net)
}

pub fn incast(params: &ScenarioParams, progress: &mut dyn FnMut(f64)) -> Report {
    let transports = [
        TransportKind::Dctcp,
        TransportKind::ExpressPass,
        TransportKind::FlexPass,
    ];
    let total = (transports.len() * params.incast_flows.len()) as f64;
    let mut rows = vec![];
    for t in transports {
        for &n in &params.incast_flows {
            rows.push(run_incast(params, t, n).0);
            progress(rows.len() as f64 / total);
        }
    }
    let timeouts = rows.iter().map(|r| r.timeouts).sum();
    let recovery = rows.iter().map(|r| r.recovery_timeouts).sum();
    Report {
        scenario: Scenario::Incast,
        profile: Profile::FlexPass,
        seed: params.seed,
        link_gbps: params.link_bps / 1e9,
        w_q: params.w_q,
        base_rtt_us: params.base_rtt() as f64 / 1e3,
        duration_us: 0.0,
        window_us: [0.0, 0.0],
        flows: vec![],
        transports: vec![],
        bottleneck: None,
        data_drops_full: 0,
        data_drops_red: 0,
        credit_drops: 0,
        timeouts,
        recovery_timeouts: recovery,
        jain_index: None,
        extra: serde_json::json!({ "incast": rows, "response_bytes": params.incast_size, "senders": params.incast_senders }),
        switch_ports: vec![],
        samples: vec![],
        sample_interval_us: 0.0,
        events: 0,
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct ConvergenceResult {
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

/// Windows of this many RTTs for Jain's index: a per-RTT window holds ~16 packets at
/// 10 Gbps, too few for the index to mean anything.
const JAIN_WINDOW_RTTS: usize = 4;

/// Flow 1 alone from 0, flow 2 from `join`, both long ExpressPass flows into host 0. With
/// `measure`, also the mean credit RTT of the two receivers after the join (ns).
fn convergence_run(p: &ScenarioParams, join: Nanos, measure: bool) -> (Network, usize, f64) {
    let (mut net, sw) = star(p, Profile::Naive, 3);
    net.monitor(sw, 0);
    let long = |id, src, start| FlowSpec {
        id,
        src,
        dst: 0,
        transport: TransportKind::ExpressPass,
        size: None,
        start,
    };
    net.add_flow(long(1, 1, 0));
    net.add_flow(long(2, 2, join));
    if !measure {
        net.run_until(p.duration, |_| {});
        return (net, sw, 0.0);
    }
    let step = p.base_rtt();
    let (mut sum, mut n) = (0.0, 0u32);
    let mut t = join;
    while t < p.duration {
        t = (t + step).min(p.duration);
        net.run_until(t, |_| {});
        for f in &net.flows {
            if let Some(r) = f.receiver.as_ref().filter(|r| r.is_sending_credits()) {
                sum += r.update_period() as f64;
                n += 1;
            }
        }
    }
    let mean = if n == 0 {
        step as f64
    } else {
        sum / f64::from(n)
    };
    (net, sw, mean)
}

/// The two flows' data per sample, and the sample in which the second flow's first data
/// arrived (the join).
fn flow_rates(net: &Network) -> (Vec<[f64; 2]>, usize) {
    let rates: Vec<[f64; 2]> = net
        .samples
        .iter()
        .map(|s| [s.proactive[0] as f64, s.proactive[1] as f64])
        .collect();
    let first = rates.iter().position(|r| r[1] > 0.0).unwrap_or(rates.len());
    (rates, first)
}

/// Jain's index of the two flows' data rates over sliding windows of `JAIN_WINDOW_RTTS`
/// samples, from the join.
fn jain_windows(net: &Network) -> Vec<f64> {
    let (rates, first) = flow_rates(net);
    let w = JAIN_WINDOW_RTTS;
    (first..rates.len().saturating_sub(w))
        .map(|i| {
            let a: f64 = rates[i..i + w].iter().map(|r| r[0]).sum();
            let b: f64 = rates[i..i + w].iter().map(|r| r[1]).sum();
            jain(&[a, b])
        })
        .collect()
}

/// ExpressPass Fig. 8a: flow 1 runs alone, flow 2 joins; Jain's index of the two flows'
/// data rates over sliding windows of `JAIN_WINDOW_RTTS` RTTs.
pub fn convergence_time(params: &ScenarioParams, alpha: f64) -> (ConvergenceResult, Report) {
    let mut p = params.clone();
    p.alpha = alpha;
    let rtt = p.base_rtt();
    p.sample_interval = rtt;
    let join = 2 * flexpass_core::MILLIS;
    p.duration = join + 3 * flexpass_core::MILLIS;
    // First run: per-base-RTT samples; the two receivers' credit RTT (their update period:
    // base RTT plus credit queueing) is read once per base RTT after the join.
    let (net, sw, mean_rtt) = convergence_run(&p, join, true);
    let jains = jain_windows(&net);
    // Second run, identical but sampled once per mean measured RTT: the paper counts
    // convergence in RTTs as measured ("in just 100 µs (four RTTs)" with a 25 µs average
    // RTT, ExpressPass §6.1), and Algorithm 1 runs once per measured RTT.
    let measured_rtt = mean_rtt.round().max(1.0) as Nanos;
    let measured = {
        let q = ScenarioParams {
            sample_interval: measured_rtt,
            ..p.clone()
        };
        let (net2, _, _) = convergence_run(&q, join, false);
        jain_windows(&net2)
    };
    let first_fair_measured = measured.iter().position(|&j| j >= 0.98).map(|k| k as f64);
    let (rates, first) = flow_rates(&net);
    let first_fair = jains.iter().position(|&j| j >= 0.98).map(|k| k as f64);
    let convergence = (0..jains.len())
        .find(|&k| {
            let rest = &jains[k..];
            jains[k] >= 0.98
                && rest.iter().filter(|&&j| j < 0.98).count() as f64 <= 0.05 * rest.len() as f64
        })
        .map(|k| k as f64);
    let after = &jains[jains.len().min(16)..];
    let mean_after = if after.is_empty() {
        0.0
    } else {
        after.iter().sum::<f64>() / after.len() as f64
    };
    let totals = rates[first.min(rates.len())..]
        .iter()
        .fold([0.0, 0.0], |acc, r| [acc[0] + r[0], acc[1] + r[1]]);
    let w_init = p.receiver_config(Profile::Naive).credit.w_init;
    let report = build(
        Scenario::ExpresspassConvergence,
        Profile::Naive,
        &p,
        &net,
        sw,
        0,
        join + 1_000 * MICROS,
    );
    let result = ConvergenceResult {
        alpha,
        w_init,
        target_loss_rule: p.target_loss_rule.name(),
        discrete_model_periods: discrete_model_periods(p.target_loss_rule, alpha, w_init),
        first_fair_rtts: first_fair,
        measured_rtt_us: measured_rtt as f64 / 1e3,
        first_fair_measured_rtts: first_fair_measured,
        convergence_rtts: convergence,
        mean_jain_after_16_rtts: mean_after,
        long_term_jain: jain(&totals),
    };
    (result, report)
}

/// ExpressPass §4's discrete model of Algorithm 1, run on the real `CreditFeedback`: two
/// flows share a credit bottleneck of `max_rate`, update in lockstep once per period and lose
/// the same fraction of credits (the excess over `max_rate`). Flow 1 runs alone until it is
/// in steady state; flow 2 joins at `α·max_rate` with `w_init`. Returns the number of update
/// periods after the join until Jain's index of the two flows' delivered credits first
/// reaches 0.98 (None: not within 200 periods). No packets, no jitter, no feedback delay:
/// the pure control law, as in the paper's analysis.
pub fn discrete_model_periods(rule: TargetLossRule, alpha: f64, w_init: f64) -> Option<usize> {
    // 10^4 credits per period at max_rate: loss granularity 10^-4.
    const PERIOD: Nanos = flexpass_core::MILLIS;
    let cfg = CreditConfig {
        max_rate: 1e7,
        alpha,
        w_init,
        target_loss_rule: rule,
        ..CreditConfig::for_link(10e9, 1.0, PERIOD)
    };
    let capacity = cfg.max_rate * PERIOD as f64 / 1e9;
    struct Flow {
        fb: CreditFeedback,
        seq: u32,
    }
    let new_flow = || Flow {
        fb: CreditFeedback::new(&cfg),
        seq: 0,
    };
    // One period: every flow sends cur_rate·PERIOD credits, the excess over the capacity is
    // dropped in proportion; returns the credits each flow got through.
    let period = |flows: &mut [Flow]| -> Vec<f64> {
        let sent: Vec<f64> = flows
            .iter()
            .map(|f| (f.fb.cur_rate() * PERIOD as f64 / 1e9).round().max(1.0))
            .collect();
        let loss = (1.0 - capacity / sent.iter().sum::<f64>()).max(0.0);
        let mut delivered = vec![];
        for (f, &n) in flows.iter_mut().zip(&sent) {
            let through = (n * (1.0 - loss)).round().max(1.0) as u32;
            let dropped = n as u32 - through.min(n as u32);
            // Echo `through` credits; the dropped ones leave a gap before the last echo.
            for i in 0..through {
                f.seq = f
                    .seq
                    .wrapping_add(if i + 1 == through { 1 + dropped } else { 1 });
                f.fb.on_credit_echo(f.seq, None);
            }
            f.fb.update(PERIOD);
            delivered.push(f64::from(through));
        }
        delivered
    };
    let mut flows = vec![new_flow()];
    for _ in 0..300 {
        period(&mut flows);
    }
    flows.push(new_flow());
    (1..=200).find(|_| jain(&period(&mut flows)) >= 0.98)
}

pub fn convergence(params: &ScenarioParams, progress: &mut dyn FnMut(f64)) -> Report {
    // ExpressPass Fig. 8a: α = 1 and α = 1/16 with w_init = 0.5; then the §6.3 defaults
    // α = w_init = 1/16 (a slower start: both the rate and its aggressiveness start low).
    // Each with the paper's fixed target loss and with the authors' simulator's rate-scaled
    // one (the scaling given in `params`, else theirs).
    let rate_scaled = match params.target_loss_rule {
        r @ TargetLossRule::RateScaled { .. } => r,
        TargetLossRule::Fixed => TargetLossRule::RateScaled {
            target_loss_scaling: TargetLossRule::NS2_SCALING,
        },
    };
    let settings = [
        (1.0, Some(0.5)),
        (1.0 / 16.0, Some(0.5)),
        (1.0 / 16.0, None),
    ];
    let runs = 2 * settings.len();
    let mut rows = vec![];
    let mut report = None;
    for rule in [TargetLossRule::Fixed, rate_scaled] {
        for &(alpha, w_init) in &settings {
            let p = ScenarioParams {
                w_init,
                target_loss_rule: rule,
                ..params.clone()
            };
            let (row, r) = convergence_time(&p, alpha);
            rows.push(row);
            // The report body (rates, queues) is that of `params`' own rule at the defaults.
            if rule == params.target_loss_rule || report.is_none() {
                report = Some(r);
            }
            progress(rows.len() as f64 / runs as f64);
        }
    }
    let mut report = report.expect("at least one run");
    report.extra = serde_json::json!({ "convergence": rows });
    report
}

/// Used by tests: the scenario's profile.
pub fn scenario_profile(s: Scenario) -> Profile {
    profile_of(s)
}
