//! One runner for every experiment: prepare the network (`build`), run it to the end of the
//! experiment, and hand it to `report`; convergence experiments go to `convergence`.

use crate::build::{prepare, Progress};
use crate::convergence;
use crate::experiment::{Experiment, Override};
use crate::net::Network;
use crate::report::{self, RunReport};
use flexpass_core::{Nanos, MILLIS};
use std::time::Instant;

/// Run `prepared` to the end of the experiment: `duration` for long-lived flows, else until
/// every flow completed (checked every millisecond) or `duration`.
pub fn drive(exp: &Experiment, net: &mut Network, progress: &mut dyn FnMut(Progress)) {
    let end = exp.duration();
    let flows = net.flows.len();
    let mut report = |t: Nanos, done: usize| {
        progress(Progress {
            fraction: (t as f64 / end as f64).max(done as f64 / flows.max(1) as f64),
            sim_time: t,
            completed_flows: done,
            flows,
        })
    };
    if exp.has_long_flows() {
        net.run_until(end, &mut report);
        return;
    }
    let mut t = 0;
    while t < end && !net.all_finite_flows_done() {
        t = (t + MILLIS).min(end);
        net.run_until(t, &mut report);
    }
}

/// Run one experiment (one point of a sweep: `point` are its overrides, for the report).
pub fn run(
    exp: &Experiment,
    point: &[Override],
    progress: &mut dyn FnMut(Progress),
) -> Result<RunReport, String> {
    let started = Instant::now();
    exp.refuse_emulation_only()?;
    if let Some(c) = &exp.convergence {
        return convergence::run(exp, c, point, progress);
    }
    let mut p = prepare(exp)?;
    drive(exp, &mut p.net, progress);
    Ok(report::build(
        exp,
        point,
        &p,
        started.elapsed().as_secs_f64(),
    ))
}
