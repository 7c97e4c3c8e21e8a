//! `flexpass`: command-line front end. Today: `flexpass sim <scenario>` on the embedded model.

mod plot;

use clap::{Parser, Subcommand};
use flexpass_sim::{run_scenario, Report, Scenario, ScenarioParams, SCENARIOS};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

#[derive(Parser)]
#[command(
    name = "flexpass",
    version,
    about = "FlexPass / ExpressPass / DCTCP: credit-based datacenter transport"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run a scenario on the embedded, deterministic network model.
    Sim(SimArgs),
    /// List the scenarios.
    Scenarios,
}

#[derive(clap::Args)]
struct SimArgs {
    /// Scenario name (see `flexpass scenarios`).
    scenario: String,
    /// Print one JSON object with the results on stdout.
    #[arg(long)]
    json: bool,
    /// Write a throughput-over-time PNG (per flow and per sub-flow).
    #[arg(long)]
    plot: Option<PathBuf>,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Simulated time of long-running scenarios, milliseconds.
    #[arg(long, default_value_t = 30.0)]
    duration_ms: f64,
    /// Bottleneck link rate, Gbit/s.
    #[arg(long, default_value_t = 10.0)]
    link_gbps: f64,
    /// w_q: weight of the FlexPass queue and credit share.
    #[arg(long, default_value_t = 0.5)]
    w_q: f64,
    /// Credit share the receiver NIC shapes aggregate credits to (default: w_q; 1.0 = the
    /// FlexPass testbed's Fig. 7b behaviour, see docs).
    #[arg(long)]
    nic_credit_share: Option<f64>,
    /// ECN marking threshold K, kB.
    #[arg(long, default_value_t = 60.0)]
    k_kb: f64,
    /// Selective-drop threshold for reactive (red) packets, kB.
    #[arg(long, default_value_t = 100.0)]
    red_kb: f64,
    /// Shared data buffer per switch port, kB.
    #[arg(long, default_value_t = 600.0)]
    buffer_kb: f64,
    /// Initial credit rate factor α (= w_init).
    #[arg(long, default_value_t = 1.0 / 16.0)]
    alpha: f64,
    /// DCTCP RTO_min, milliseconds.
    #[arg(long, default_value_t = 4.0)]
    rto_min_ms: f64,
    /// Incast flow counts, comma separated.
    #[arg(long, value_delimiter = ',')]
    incast_flows: Option<Vec<usize>>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Scenarios => {
            for (name, what) in SCENARIOS {
                println!("{name:26} {what}");
            }
            ExitCode::SUCCESS
        }
        Cmd::Sim(a) => match sim(a) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("flexpass: {e}");
                ExitCode::from(2)
            }
        },
    }
}

fn params(a: &SimArgs) -> Result<ScenarioParams, String> {
    let positive = |v: f64, what: &str| {
        if v.is_finite() && v > 0.0 {
            Ok(v)
        } else {
            Err(format!("{what} must be > 0, got {v}"))
        }
    };
    if !(a.w_q > 0.0 && a.w_q < 1.0) {
        return Err(format!("--w-q must be in (0, 1), got {}", a.w_q));
    }
    if !(a.alpha > 0.0 && a.alpha <= 1.0) {
        return Err(format!("--alpha must be in (0, 1], got {}", a.alpha));
    }
    let k = positive(a.k_kb, "--k-kb")?;
    let red = positive(a.red_kb, "--red-kb")?;
    if red <= k {
        return Err(format!(
            "the selective-drop threshold (--red-kb {red}) must be larger than K (--k-kb {k})"
        ));
    }
    let mut p = ScenarioParams {
        seed: a.seed,
        link_bps: positive(a.link_gbps, "--link-gbps")? * 1e9,
        w_q: a.w_q,
        k_bytes: (k * 1000.0) as u64,
        red_threshold: (red * 1000.0) as u64,
        buffer: (positive(a.buffer_kb, "--buffer-kb")? * 1000.0) as u64,
        duration: (positive(a.duration_ms, "--duration-ms")? * 1e6) as u64,
        alpha: a.alpha,
        nic_credit_share: match a.nic_credit_share {
            Some(v) if !(v > 0.0 && v <= 1.0) => {
                return Err(format!("--nic-credit-share must be in (0, 1], got {v}"))
            }
            v => v,
        },
        rto_min: (positive(a.rto_min_ms, "--rto-min-ms")? * 1e6) as u64,
        ..Default::default()
    };
    if let Some(f) = &a.incast_flows {
        if f.is_empty() || f.contains(&0) {
            return Err("--incast-flows needs positive counts".into());
        }
        p.incast_flows = f.clone();
    }
    Ok(p)
}

fn sim(a: SimArgs) -> Result<(), String> {
    let scenario: Scenario = a.scenario.parse()?;
    let p = params(&a)?;
    let started = Instant::now();
    let mut last = Instant::now();
    let mut progress = |frac: f64| {
        if started.elapsed().as_secs_f64() > 2.0 && last.elapsed().as_secs_f64() > 1.0 {
            eprint!("\r{}: {:5.1}% ", a.scenario, frac * 100.0);
            let _ = std::io::stderr().flush();
            last = Instant::now();
        }
    };
    let report = run_scenario(scenario, &p, &mut progress);
    if started.elapsed().as_secs_f64() > 2.0 {
        eprintln!(
            "\r{}: done in {:.1} s",
            a.scenario,
            started.elapsed().as_secs_f64()
        );
    }
    if let Some(path) = &a.plot {
        plot::throughput_png(&report, path)?;
    }
    if a.json {
        println!(
            "{}",
            serde_json::to_string(&report).map_err(|e| e.to_string())?
        );
    } else {
        print!("{}", summary(&report));
    }
    Ok(())
}

/// A short human summary.
pub fn summary(r: &Report) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:?} on the {:?} profile ({} Gbps, w_q {}, base RTT {:.1} µs, seed {})",
        r.scenario, r.profile, r.link_gbps, r.w_q, r.base_rtt_us, r.seed
    );
    for f in &r.flows {
        let _ = writeln!(
            s,
            "  flow {} {:?}: {:5.1}% of link (proactive {:5.1}%, reactive {:5.1}%), goodput {:.2} Gbps, timeouts {}",
            f.id,
            f.transport,
            f.share * 100.0,
            f.proactive_share * 100.0,
            f.reactive_share * 100.0,
            f.goodput_gbps,
            f.sender.as_ref().map_or(0, |x| x.timeouts)
        );
    }
    for t in &r.transports {
        let _ = writeln!(
            s,
            "  {:?}: {:5.1}% of link, starved (<20%) {:5.1}% of the time",
            t.transport,
            t.share * 100.0,
            t.starvation_fraction * 100.0
        );
    }
    if let Some(b) = &r.bottleneck {
        let _ = writeln!(
            s,
            "  bottleneck {}: utilization {:.1}% (data {:.1}%), max queue Q0 {} B, Q1 {} B, Q2 {} B",
            b.port,
            b.utilization * 100.0,
            b.data_utilization * 100.0,
            b.max_queue_bytes[0],
            b.max_queue_bytes[1],
            b.max_queue_bytes[2]
        );
        let _ = writeln!(
            s,
            "  data drops: {} (buffer full) + {} (red, selective), credit drops {}",
            r.data_drops_full, r.data_drops_red, r.credit_drops
        );
    }
    if let Some(rows) = r.extra.get("incast").and_then(|v| v.as_array()) {
        let _ = writeln!(s, "  transport     flows  max FCT (µs)  timeouts  drops");
        for row in rows {
            let _ = writeln!(
                s,
                "  {:12} {:6}  {:>12}  {:8}  {:5}",
                row["transport"].as_str().unwrap_or("?"),
                row["flows"],
                row["max_fct_us"]
                    .as_f64()
                    .map_or("-".into(), |v| format!("{v:.0}")),
                row["timeouts"],
                row["data_drops"]
            );
        }
    }
    if let Some(c) = r.extra.get("convergence").and_then(|v| v.as_array()) {
        for x in c {
            let _ = writeln!(
                s,
                "  α = w_init = {}: Jain ≥ 0.98 first after {} RTTs, for good after {} RTTs; mean Jain after 16 RTTs {:.3}, long-term Jain {:.4}",
                x["alpha"],
                x["first_fair_rtts"],
                x["convergence_rtts"],
                x["mean_jain_after_16_rtts"].as_f64().unwrap_or(0.0),
                x["long_term_jain"].as_f64().unwrap_or(0.0)
            );
        }
    }
    s
}
