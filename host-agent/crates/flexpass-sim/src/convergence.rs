//! ExpressPass Fig. 8a as an analysis: a long flow runs alone, a second one joins; how many
//! RTTs until the two share fairly (Jain's index ≥ 0.98 over windows of a few RTTs), next to
//! what ExpressPass §4's discrete model of Algorithm 1 needs for the same setting.

use crate::build::{prepare, Prepared, Progress};
use crate::experiment::{ConvergenceSpec, Experiment, Override};
use crate::net::Network;
use crate::report::{self, jain, ConvergenceReport, RunReport};
use flexpass_core::credit_feedback::CreditFeedback;
use flexpass_core::{CreditConfig, Nanos, TargetLossRule, MILLIS};
use std::time::Instant;

/// Windows of this many RTTs for Jain's index: a per-RTT window holds ~16 packets at
/// 10 Gbps, too few for the index to mean anything.
const JAIN_WINDOW_RTTS: usize = 4;

/// The first two flows' data per sample, and the sample in which the second flow's first data
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

/// The experiment with its last listed flow joining at `join_ms` and the run lasting
/// `after_ms` more; shares are measured from 1 ms after the join.
fn joining(exp: &Experiment, c: &ConvergenceSpec) -> Experiment {
    let mut e = exp.clone();
    if let Some(f) = e.flows.last_mut() {
        f.start_us = c.join_ms * 1e3;
    }
    e.duration_ms = Some(c.join_ms + c.after_ms);
    e.measure.warmup_ms = c.join_ms + 1.0;
    e
}

/// Run `exp` sampled every `interval`; with `measure`, also the mean credit RTT of the
/// receivers after the join (read once per base RTT), ns.
fn sampled_run(
    e: &Experiment,
    join: Nanos,
    interval: Option<Nanos>,
    measure: bool,
) -> Result<(Prepared, f64), String> {
    let mut p = prepare(e)?;
    let step = p.stack.base_rtt;
    p.net.sample_interval = interval.unwrap_or(step);
    let end = e.duration();
    if !measure {
        p.net.run_until(end, |_, _| {});
        return Ok((p, 0.0));
    }
    let (mut sum, mut n) = (0.0, 0u32);
    let mut t = join;
    while t < end {
        t = (t + step).min(end);
        p.net.run_until(t, |_, _| {});
        for f in &p.net.flows {
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
    Ok((p, mean))
}

/// ExpressPass Fig. 8a on the experiment's two listed flows.
pub fn run(
    exp: &Experiment,
    c: &ConvergenceSpec,
    point: &[Override],
    progress: &mut dyn FnMut(Progress),
) -> Result<RunReport, String> {
    let started = Instant::now();
    let e = joining(exp, c);
    let join = (c.join_ms * MILLIS as f64) as Nanos;
    // First run: per-base-RTT samples; the two receivers' credit RTT (their update period:
    // base RTT plus credit queueing) is read once per base RTT after the join.
    let (p, mean_rtt) = sampled_run(&e, join, None, true)?;
    progress(Progress {
        fraction: 0.5,
        sim_time: p.net.now(),
        completed_flows: 0,
        flows: p.net.flows.len(),
    });
    let jains = jain_windows(&p.net);
    // Second run, identical but sampled once per mean measured RTT: the paper counts
    // convergence in RTTs as measured ("in just 100 µs (four RTTs)" with a 25 µs average
    // RTT, ExpressPass §6.1), and Algorithm 1 runs once per measured RTT.
    let measured_rtt = mean_rtt.round().max(1.0) as Nanos;
    let measured = jain_windows(&sampled_run(&e, join, Some(measured_rtt), false)?.0.net);
    let first_fair_measured = measured.iter().position(|&j| j >= 0.98).map(|k| k as f64);
    let (rates, first) = flow_rates(&p.net);
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
    let w_init = p.stack.receiver_config(&p.net.flows[0].spec).credit.w_init;
    let rule = e.target_loss_rule();
    let alpha = e.host.alpha;
    let result = ConvergenceReport {
        alpha,
        w_init,
        target_loss_rule: rule.name(),
        discrete_model_periods: discrete_model_periods(rule, alpha, w_init),
        first_fair_rtts: first_fair,
        measured_rtt_us: measured_rtt as f64 / 1e3,
        first_fair_measured_rtts: first_fair_measured,
        convergence_rtts: convergence,
        mean_jain_after_16_rtts: mean_after,
        long_term_jain: jain(&totals),
    };
    let mut r = report::build(&e, point, &p, started.elapsed().as_secs_f64());
    r.convergence = Some(result);
    Ok(r)
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
    const PERIOD: Nanos = MILLIS;
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
