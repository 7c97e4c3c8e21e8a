//! The flows of an experiment: listed flows, incast groups, a background workload (sizes
//! from a CDF, Poisson arrivals at a target load, random host pairs) with optional
//! foreground incast (mixed traffic), and the deployment rule that picks each flow's
//! transport (FlexPass §6.2: the new transport only when both ends' racks run it).

use crate::experiment::{resolve_hosts, Experiment};
use crate::net::{FlowKind, FlowSpec};
use crate::topology::Built;
use flexpass_core::{Nanos, MICROS, MILLIS};
use flexpass_wire::{max_frame_wire, max_payload_for_mtu, TransportKind};
use flexpass_workload::{next_gap_ns, FlowSizeCdf, FlowTrace};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// `FlowSpec::entry` of a trace's flows.
const NO_ENTRY: usize = u32::MAX as usize;

/// Salt of the traffic generator's seed (the network model has its own RNG).
const TRAFFIC_SEED_SALT: u64 = 0x7261_6666_6963;

/// Wire bytes per payload byte of a full-sized data packet at an IP MTU of `mtu`.
pub fn wire_factor(mtu: usize) -> f64 {
    max_frame_wire(mtu) as f64 / max_payload_for_mtu(mtu) as f64
}

/// Racks enabled for the new transport: the first `round(fraction · racks)`.
pub fn enabled_racks(fraction: f64, racks: usize) -> usize {
    (fraction * racks as f64).round() as usize
}

/// Transport of a flow between `src` and `dst` without an explicit one.
fn deployed(exp: &Experiment, built: &Built, src: usize, dst: usize) -> TransportKind {
    let n = enabled_racks(exp.deployment.fraction, built.racks);
    if built.rack_of[src] < n && built.rack_of[dst] < n {
        exp.new_transport()
    } else {
        TransportKind::Dctcp
    }
}

fn us(v: f64) -> Nanos {
    (v * MICROS as f64).round() as Nanos
}

/// Every flow of the experiment, ids from 1.
pub fn generate(exp: &Experiment, built: &Built) -> Result<Vec<FlowSpec>, String> {
    let hosts = built.rack_of.len();
    let mut out: Vec<FlowSpec> = vec![];
    let push = |out: &mut Vec<FlowSpec>,
                src,
                dst,
                t: Option<TransportKind>,
                size,
                start,
                kind,
                entry: usize| {
        let transport = t.unwrap_or_else(|| deployed(exp, built, src, dst));
        let id = out.len() as u32 + 1;
        out.push(FlowSpec {
            id,
            src,
            dst,
            transport,
            size,
            start,
            kind,
            entry: entry as u32,
        });
    };
    for (fi, f) in exp.flows.iter().enumerate() {
        let dst = f.dst.resolve(hosts)?;
        for (src, start_us) in f.expand(hosts)? {
            push(
                &mut out,
                src,
                dst,
                f.transport.and_then(|t| t.model()),
                f.bytes,
                us(start_us),
                FlowKind::Listed,
                fi,
            );
        }
    }
    for (gi, g) in exp.incast.iter().enumerate() {
        let r = g.receiver.resolve(hosts)?;
        let senders: Vec<usize> = match &g.senders {
            Some(s) => s
                .iter()
                .map(|h| h.resolve(hosts))
                .collect::<Result<_, _>>()?,
            None => (0..hosts).filter(|&h| h != r).collect(),
        };
        for k in 0..g.repetitions(exp.duration_ms) {
            let transport = match g.transports.len() {
                0 => g.transport,
                n => Some(g.transports[k % n]),
            };
            for i in 0..g.flows {
                push(
                    &mut out,
                    senders[i % senders.len()],
                    r,
                    transport.and_then(|t| t.model()),
                    Some(g.bytes),
                    us(g.start_us + g.repeat_step_us * k as f64),
                    FlowKind::Incast,
                    gi,
                );
            }
        }
    }
    // One generator for all workloads, in order: the first workload's flows do not depend
    // on the others.
    let mut rng = ChaCha8Rng::seed_from_u64(exp.seed ^ TRAFFIC_SEED_SALT);
    for (wi, w) in exp.workload.iter().enumerate() {
        let at = format!("workload[{wi}]");
        let cdf = FlowSizeCdf::load(&w.cdf)?;
        let fg_fraction = w.foreground.as_ref().map_or(0.0, |f| f.volume_fraction);
        let srcs = resolve_hosts(w.src.as_deref(), hosts, &format!("{at}.src"))?;
        let dsts = resolve_hosts(w.dst.as_deref(), hosts, &format!("{at}.dst"))?;
        let capacity = match (w.load_on.as_deref(), &w.src) {
            (Some("hosts"), _) => hosts as f64 * exp.topology.link_bps(),
            // Many-to-few (PASE's testbed: 9 clients, 1 server): the load is on the
            // destinations' links.
            (Some("destinations"), _) => dsts.len() as f64 * exp.topology.link_bps(),
            // Sources named: the load is on their links.
            (None, Some(_)) => srcs.len() as f64 * exp.topology.link_bps(),
            _ => built.load_capacity_bps,
        };
        // Flow sizes are payload bytes; the load counts them on the wire (FlexPass's
        // simulator: avgFlowSize · 8 / maxPayload · maxEthernetSize).
        let mean_wire = cdf.mean() * wire_factor(exp.topology.mtu());
        let inter_rack = w.pairs.as_deref() == Some("inter-rack");
        if inter_rack && built.racks < 2 {
            return Err(format!(
                "{at}.pairs = \"inter-rack\" needs a topology with two racks or more"
            ));
        }
        let transport = w.transport.and_then(|t| t.model());
        let start = (w.start_ms * MILLIS as f64) as Nanos;
        // Without `flows`, arrivals until the experiment's end (validate: duration_ms is set).
        let until = match (w.flows, exp.duration_ms) {
            (Some(_), _) => Nanos::MAX,
            (None, Some(d)) => (d * MILLIS as f64) as Nanos,
            (None, None) => return Err(format!("{at}.flows: give it, or duration_ms")),
        };
        let mut t = start;
        let mut n = 0;
        while w.flows.is_none_or(|f| n < f) {
            let gap = next_gap_ns(&mut rng, w.load * (1.0 - fg_fraction), capacity, mean_wire);
            if t.saturating_add(gap) >= until {
                break;
            }
            t += gap;
            n += 1;
            // Every host (the default): the generator's draws as they always were.
            let src = if w.src.is_none() {
                rng.gen_range(0..hosts)
            } else {
                srcs[rng.gen_range(0..srcs.len())]
            };
            let pick = |rng: &mut ChaCha8Rng| {
                if w.dst.is_none() {
                    rng.gen_range(0..hosts)
                } else {
                    dsts[rng.gen_range(0..dsts.len())]
                }
            };
            let mut dst = pick(&mut rng);
            // Rejection keeps the destination uniform over the hosts allowed (validate: at
            // least one differs from every source).
            while dst == src || (inter_rack && built.rack_of[dst] == built.rack_of[src]) {
                if dsts.len() == 1 && dsts[0] == src {
                    break;
                }
                dst = pick(&mut rng);
            }
            if dst == src {
                continue; // a source whose only destination is itself
            }
            let size = cdf.sample(&mut rng).max(1);
            push(
                &mut out,
                src,
                dst,
                transport,
                Some(size),
                t,
                FlowKind::Background,
                wi,
            );
        }
        if let Some(fg) = &w.foreground {
            // Incast events over the background's arrival span: a random receiver, every
            // other host sends `flows_per_sender` flows of `bytes`.
            let end = t;
            let event_wire = ((hosts - 1) * fg.flows_per_sender) as f64
                * fg.bytes as f64
                * wire_factor(exp.topology.mtu());
            let mut te = start;
            loop {
                te += next_gap_ns(&mut rng, w.load * fg.volume_fraction, capacity, event_wire);
                if te > end {
                    break;
                }
                let r = rng.gen_range(0..hosts);
                for s in (0..hosts).filter(|&s| s != r) {
                    for _ in 0..fg.flows_per_sender {
                        push(
                            &mut out,
                            s,
                            r,
                            transport,
                            Some(fg.bytes),
                            te,
                            FlowKind::Foreground,
                            wi,
                        );
                    }
                }
            }
        }
    }
    if let Some(tr) = &exp.trace {
        let trace = FlowTrace::load(&tr.file).map_err(|e| format!("trace.file: {e}"))?;
        let first = trace.flows[0].start_s;
        let start = (tr.start_ms * MILLIS as f64) as Nanos;
        for f in &trace.flows {
            if f.src >= hosts || f.dst >= hosts {
                return Err(format!(
                    "trace.file: flow {} goes from host {} to host {}, but the topology has {hosts} hosts",
                    f.id, f.src, f.dst
                ));
            }
            let at = start + ((f.start_s - first) * 1e9).round() as Nanos;
            push(
                &mut out,
                f.src,
                f.dst,
                None,
                Some(f.bytes),
                at,
                FlowKind::Background,
                NO_ENTRY,
            );
        }
    }
    if out.len() > u32::MAX as usize / 2 {
        return Err(format!("{} flows: too many", out.len()));
    }
    Ok(out)
}

/// oWF's oracle weight: the fraction of ExpressPass bytes in what the enabled racks' hosts
/// send, i.e. on the links where ExpressPass runs (by flow count when no flow is finite).
/// With random host pairs and a fraction f of racks enabled that is f — the authors'
/// simulator sets oWF's weight to the enabled fraction; the fraction over all traffic, f²,
/// would cap ExpressPass flows where they run at a fraction of their share.
pub fn owf_oracle_weight(exp: &Experiment, built: &Built, flows: &[FlowSpec]) -> f64 {
    let n = enabled_racks(exp.deployment.fraction, built.racks);
    let from_enabled: Vec<&FlowSpec> = flows.iter().filter(|f| built.rack_of[f.src] < n).collect();
    let credit = |f: &&&FlowSpec| f.transport != TransportKind::Dctcp;
    let total: u64 = from_enabled.iter().filter_map(|f| f.size).sum();
    if total == 0 {
        if from_enabled.is_empty() {
            return 0.0;
        }
        return from_enabled.iter().filter(credit).count() as f64 / from_enabled.len() as f64;
    }
    from_enabled
        .iter()
        .filter(credit)
        .filter_map(|f| f.size)
        .sum::<u64>() as f64
        / total as f64
}
