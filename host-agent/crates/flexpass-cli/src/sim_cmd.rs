//! `flexpass sim` (run an experiment file or a built-in experiment on the model),
//! `flexpass sweep` (a grid of runs on all cores, resumable, with its figure) and
//! `flexpass experiments` (the built-in experiments).

use crate::plot;
use flexpass_sim::experiment::{self, Experiment, Override, Source};
use flexpass_sim::sweep::{self, point_id, sweep_points, Finished};
use flexpass_sim::{run, FlowKind, Progress, RunReport};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

/// Options shared by `sim` and `sweep`.
#[derive(clap::Args, Clone, Debug)]
pub struct ExperimentArgs {
    /// A built-in experiment (`flexpass experiments`) or an experiment file (TOML).
    pub experiment: String,
    /// Override a key of the experiment: KEY=VALUE, VALUE in TOML syntax (repeatable):
    /// --set workload.load=0.6 --set switch.profile=naive --set flow.0.bytes=100000
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Runs in parallel (sweeps); default: the number of cores.
    #[arg(short = 'j', long)]
    pub jobs: Option<usize>,
    /// Run the experiment once with the given keys, ignoring its [sweep] (one run of a sweep:
    /// what `flexpass sweep --print-commands` prints).
    #[arg(long)]
    pub no_sweep: bool,
    /// Shorthands for --set (the model's former flags): seed.
    #[arg(long)]
    pub seed: Option<u64>,
    /// duration_ms
    #[arg(long)]
    pub duration_ms: Option<f64>,
    /// topology.link_gbps
    #[arg(long)]
    pub link_gbps: Option<f64>,
    /// switch.w_q
    #[arg(long)]
    pub w_q: Option<f64>,
    /// switch.nic_credit_share
    #[arg(long)]
    pub nic_credit_share: Option<f64>,
    /// switch.k_kb (ECN threshold K)
    #[arg(long)]
    pub k_kb: Option<f64>,
    /// switch.red_kb (selective-drop threshold)
    #[arg(long)]
    pub red_kb: Option<f64>,
    /// switch.buffer_kb
    #[arg(long)]
    pub buffer_kb: Option<f64>,
    /// host.alpha (initial credit rate factor α)
    #[arg(long)]
    pub alpha: Option<f64>,
    /// host.w_init
    #[arg(long)]
    pub w_init: Option<f64>,
    /// host.target_loss_scaling (the ExpressPass authors' rate-scaled target loss)
    #[arg(long)]
    pub target_loss_scaling: Option<f64>,
    /// host.rto_min_ms
    #[arg(long)]
    pub rto_min_ms: Option<f64>,
    /// The incast experiment's flow counts (its sweep grid), comma separated.
    #[arg(long, value_delimiter = ',')]
    pub incast_flows: Option<Vec<usize>>,
}

#[derive(clap::Args)]
pub struct SimArgs {
    #[command(flatten)]
    pub exp: ExperimentArgs,
    /// Print the report as JSON on stdout (a sweep: {"experiment", "runs": [...]}).
    #[arg(long)]
    pub json: bool,
    /// Write a PNG: throughput over time (runs with samples) or the sweep's figure.
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// Write result.json, flows.csv (and for a sweep summary.csv and the figures) into DIR.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Print the experiment as the model reads it — every key after defaults, `extends`,
    /// --set and `compat`, one entry per sweep point, and the defaults of the tables — as
    /// JSON, and exit without running: what other backends (`flexpass emulate`) read.
    #[arg(long, conflicts_with_all = ["json", "plot", "out"])]
    pub resolve: bool,
}

#[derive(clap::Args)]
pub struct SweepArgs {
    #[command(flatten)]
    pub exp: ExperimentArgs,
    /// Results: DIR/<run>/result.json + flows.csv per run, DIR/summary.csv and
    /// DIR/figure-<name>.{png,csv,json} per figure.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Print one self-contained `flexpass sim … --out DIR/<run>` command per run still to do
    /// (for a cluster scheduler: a Slurm job array, GNU parallel) and exit; run `flexpass
    /// sweep` again afterwards to collect the summary and the figure.
    #[arg(long)]
    pub print_commands: bool,
}

/// An experiment as loaded: its source, overrides, the experiment and its sweep points.
type Loaded = (Source, Vec<Override>, Experiment, Vec<Vec<Override>>);

impl ExperimentArgs {
    fn overrides(&self) -> Result<Vec<Override>, String> {
        let mut o: Vec<Override> = self
            .set
            .iter()
            .map(|s| Override::parse(s))
            .collect::<Result<_, _>>()?;
        let mut put = |key: &str, v: Option<toml::Value>| {
            if let Some(value) = v {
                o.push(Override {
                    key: key.into(),
                    value,
                })
            }
        };
        let f = |v: Option<f64>| v.map(toml::Value::Float);
        put("seed", self.seed.map(|s| toml::Value::Integer(s as i64)));
        put("duration_ms", f(self.duration_ms));
        put("topology.link_gbps", f(self.link_gbps));
        put("switch.w_q", f(self.w_q));
        put("switch.nic_credit_share", f(self.nic_credit_share));
        put("switch.k_kb", f(self.k_kb));
        put("switch.red_kb", f(self.red_kb));
        put("switch.buffer_kb", f(self.buffer_kb));
        put("host.alpha", f(self.alpha));
        put("host.w_init", f(self.w_init));
        put("host.target_loss_scaling", f(self.target_loss_scaling));
        put("host.rto_min_ms", f(self.rto_min_ms));
        Ok(o)
    }

    /// The experiment, its overrides, and its runs (sweep points).
    fn load(&self) -> Result<Loaded, String> {
        let src = Source::load(&self.experiment)?;
        let overrides = self.overrides()?;
        let mut exp = src.experiment(&overrides)?;
        if let Some(counts) = &self.incast_flows {
            if counts.is_empty() || counts.contains(&0) {
                return Err("--incast-flows needs positive counts".into());
            }
            let grid = &mut exp.sweep.get_or_insert_with(Default::default).grid;
            let key = "incast.0.flows".to_string();
            if exp.incast.is_empty() {
                return Err(format!("--incast-flows: {} has no [[incast]]", src.name));
            }
            grid.insert(
                key,
                counts
                    .iter()
                    .map(|&c| toml::Value::Integer(c as i64))
                    .collect(),
            );
        }
        if self.no_sweep {
            exp.sweep = None;
            exp.figures.clear();
        }
        let points: Vec<Vec<Override>> = sweep_points(&exp)
            .into_iter()
            .map(|p| {
                let mut all = overrides.clone();
                all.extend(p);
                all
            })
            .collect();
        // Every point must be valid before anything runs.
        for p in &points {
            src.experiment(p)?;
        }
        Ok((src, overrides, exp, points))
    }

    fn jobs(&self) -> usize {
        self.jobs
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
            .max(1)
    }
}

/// The overrides a sweep point adds to the command line's.
fn own(point: &[Override], base: &[Override]) -> Vec<Override> {
    point[base.len()..].to_vec()
}

/// A progress line on stderr for runs longer than two seconds.
struct Status {
    started: Instant,
    last: Mutex<Instant>,
}

impl Status {
    fn new() -> Self {
        Status {
            started: Instant::now(),
            last: Mutex::new(Instant::now()),
        }
    }

    fn show(&self, line: impl FnOnce() -> String) {
        if self.started.elapsed().as_secs_f64() < 2.0 {
            return;
        }
        let mut last = self.last.lock().expect("not poisoned");
        if last.elapsed().as_secs_f64() < 1.0 {
            return;
        }
        *last = Instant::now();
        eprint!("\r{}\x1b[K", line());
        let _ = std::io::stderr().flush();
    }

    fn done(&self, what: &str) {
        if self.started.elapsed().as_secs_f64() >= 2.0 {
            eprintln!(
                "\r{what}: done in {:.1} s\x1b[K",
                self.started.elapsed().as_secs_f64()
            );
        }
    }
}

fn run_point(
    src: &Source,
    point: &[Override],
    mut progress: impl FnMut(Progress),
) -> Result<RunReport, String> {
    let exp = src.experiment(point)?;
    run(&exp, point, &mut progress)
}

fn write(path: &Path, data: &[u8]) -> Result<(), String> {
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d).map_err(|e| format!("cannot create {}: {e}", d.display()))?;
    }
    // Write then rename: an interrupted run never leaves a half-written result behind (a
    // resumed sweep takes an existing result.json as done).
    let tmp = path.with_extension("partial");
    std::fs::write(&tmp, data).map_err(|e| format!("cannot write {}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, path).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// result.json, flows.csv and (with samples) throughput.png of one run into `dir`.
fn save_run(r: &RunReport, dir: &Path) -> Result<(), String> {
    write(
        &dir.join("flows.csv"),
        flexpass_sim::report::flows_csv(r).as_bytes(),
    )?;
    if !r.samples.is_empty() {
        plot::throughput_png(r, &dir.join("throughput.png"))?;
    }
    let json = serde_json::to_vec(r).map_err(|e| e.to_string())?;
    write(&dir.join("result.json"), &json)
}

/// Run `points` on `jobs` threads; results in point order. `on_done` sees each as it ends.
fn run_all(
    src: &Source,
    points: &[Vec<Override>],
    jobs: usize,
    status: &Status,
    on_done: &(dyn Fn(usize, &Result<RunReport, String>) + Sync),
) -> Vec<Result<RunReport, String>> {
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Result<RunReport, String>>>> =
        Mutex::new((0..points.len()).map(|_| None).collect());
    let fractions = Mutex::new(vec![0.0f64; points.len()]);
    std::thread::scope(|s| {
        for _ in 0..jobs.min(points.len()) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                if i >= points.len() {
                    break;
                }
                let r = run_point(src, &points[i], |p| {
                    fractions.lock().expect("not poisoned")[i] = p.fraction;
                    status.show(|| {
                        let f = fractions.lock().expect("not poisoned");
                        let total: f64 = f.iter().sum::<f64>() / f.len() as f64;
                        let secs = status.started.elapsed().as_secs_f64();
                        let eta = if total > 0.0 { secs * (1.0 - total) / total } else { 0.0 };
                        format!(
                            "{}: {:5.1}% ({}/{} runs done, {:.0} s, ETA {:.0} s; run {}: {:.0}%, {} of {} flows done, {:.2} ms simulated)",
                            src.name,
                            100.0 * total,
                            done.load(Ordering::SeqCst),
                            points.len(),
                            secs,
                            eta,
                            i + 1,
                            100.0 * p.fraction,
                            p.completed_flows,
                            p.flows,
                            p.sim_time as f64 / 1e6
                        )
                    });
                });
                fractions.lock().expect("not poisoned")[i] = 1.0;
                done.fetch_add(1, Ordering::SeqCst);
                on_done(i, &r);
                results.lock().expect("not poisoned")[i] = Some(r);
            });
        }
    });
    results
        .into_inner()
        .expect("not poisoned")
        .into_iter()
        .map(|r| r.expect("every point ran"))
        .collect()
}

fn finished(points: &[Vec<Override>], base: &[Override], reports: &[RunReport]) -> Vec<Finished> {
    points
        .iter()
        .zip(reports)
        .map(|(p, r)| Finished {
            point: own(p, base),
            report: serde_json::to_value(r).expect("serializable"),
        })
        .collect()
}

/// The summary table, and the figure (data and PNG) when the experiment has one, into `dir`.
fn save_sweep(exp: &Experiment, runs: &[Finished], dir: &Path) -> Result<(), String> {
    let table = sweep::table(&sweep::columns(exp), runs);
    write(&dir.join("summary.csv"), sweep::csv(&table).as_bytes())?;
    for fig in &exp.figures {
        let data = sweep::figure(fig, runs)?;
        let name = format!("figure-{}", fig.name);
        write(
            &dir.join(format!("{name}.csv")),
            sweep::figure_csv(&data).as_bytes(),
        )?;
        write(
            &dir.join(format!("{name}.json")),
            &serde_json::to_vec_pretty(&data).map_err(|e| e.to_string())?,
        )?;
        plot::figure_png(&data, &dir.join(format!("{name}.png")))?;
    }
    Ok(())
}

pub fn sim(a: SimArgs) -> Result<(), String> {
    let (src, base, exp, points) = a.exp.load()?;
    if a.resolve {
        return resolve(&src, &base, &exp, &points);
    }
    let status = Status::new();
    let sweep = exp.sweep.is_some();
    let reports: Vec<RunReport> = run_all(&src, &points, a.exp.jobs(), &status, &|_, _| {})
        .into_iter()
        .collect::<Result<_, _>>()?;
    status.done(&src.name);
    if !sweep {
        let r = &reports[0];
        if let Some(path) = &a.plot {
            plot::throughput_png(r, path)?;
        }
        if let Some(dir) = &a.out {
            save_run(r, dir)?;
        }
        if a.json {
            println!("{}", serde_json::to_string(r).map_err(|e| e.to_string())?);
        } else {
            print!("{}", summary(r));
        }
        return Ok(());
    }
    let runs = finished(&points, &base, &reports);
    if let Some(dir) = &a.out {
        for (p, r) in points.iter().zip(&reports) {
            save_run(r, &dir.join(point_id(&own(p, &base))))?;
        }
        save_sweep(&exp, &runs, dir)?;
    }
    if let Some(path) = &a.plot {
        let fig = exp
            .figures
            .first()
            .ok_or_else(|| format!("--plot: {} has no [[figure]]", src.name))?;
        plot::figure_png(&sweep::figure(fig, &runs)?, path)?;
    }
    if a.json {
        let v = serde_json::json!({ "experiment": exp.name, "runs": reports });
        println!("{}", serde_json::to_string(&v).map_err(|e| e.to_string())?);
    } else {
        println!("{}: {} ({} runs)", exp.name, exp.description, reports.len());
        print!(
            "{}",
            sweep::aligned(&sweep::table(&sweep::columns(&exp), &runs))
        );
        for r in &reports {
            if let Some(c) = &r.convergence {
                println!("  {}", convergence_line(c));
            }
        }
    }
    Ok(())
}

/// `sim --resolve`: the experiment of every point as JSON (the model's one reader of
/// experiment files, for the other backends), with the defaults a key is compared with to
/// know whether the file set it.
fn resolve(
    src: &Source,
    base: &[Override],
    exp: &Experiment,
    points: &[Vec<Override>],
) -> Result<(), String> {
    let mut runs = Vec::new();
    for p in points {
        let mut e = src.experiment(p)?;
        e.sweep = None;
        e.figures.clear();
        // The flows of a workload or trace, as the model draws them (seeded): a backend runs
        // the same flows. Listed flows and incast groups are in the experiment itself.
        // (Drawn for every point: that checks `flow.via` as a run would.)
        let all = flexpass_sim::build::flows(&e)?;
        let drawn: Vec<serde_json::Value> = if !e.workload.is_empty() || e.trace.is_some() {
            all.iter()
                .filter(|f| matches!(f.kind, FlowKind::Background | FlowKind::Foreground))
                .map(|f| {
                    serde_json::json!({
                        "src": f.src, "dst": f.dst, "transport": drawn_transport(&e, f),
                        "bytes": f.size, "start_us": f.start as f64 / 1e3,
                        "kind": f.kind, "entry": f.entry,
                    })
                })
                .collect()
        } else {
            Vec::new()
        };
        runs.push(serde_json::json!({
            "id": if exp.sweep.is_some() { point_id(&own(p, base)) } else { String::new() },
            "set": own(p, base).iter().map(|o| format!("{}={}", o.key, o.value_text())).collect::<Vec<_>>(),
            // The model's defaults applied, so no backend repeats them.
            "derived": {
                "hosts": e.num_hosts()?,
                "link_bps": e.topology.link_bps(),
                "link_delay_us": e.topology.link_delay() as f64 / 1e3,
                "host_delay_us": e.topology.host_delay() as f64 / 1e3,
                "mtu": e.topology.mtu(),
            },
            "experiment": e,
            "workload_flows": drawn,
        }));
    }
    let v = serde_json::json!({
        "name": exp.name,
        "description": exp.description,
        "source": src.path.as_ref().map(|p| p.display().to_string()),
        "sweep": exp.sweep.is_some(),
        "points": runs,
        "defaults": {
            "switch": experiment::SwitchSpec::default(),
            "host": experiment::HostSpec::default(),
            "deployment": experiment::DeploymentSpec::default(),
            "measure": experiment::MeasureSpec::default(),
        },
    });
    println!(
        "{}",
        serde_json::to_string_pretty(&v).map_err(|e| e.to_string())?
    );
    Ok(())
}

pub fn sweep_cmd(a: SweepArgs) -> Result<(), String> {
    let (src, base, exp, points) = a.exp.load()?;
    let dir = &a.out;
    let result_of = |p: &[Override]| dir.join(point_id(&own(p, &base))).join("result.json");
    let todo: Vec<usize> = (0..points.len())
        .filter(|&i| !result_of(&points[i]).is_file())
        .collect();
    if a.print_commands {
        let exe = std::env::current_exe().map_err(|e| e.to_string())?;
        let file = match &src.path {
            Some(p) => p
                .canonicalize()
                .map_err(|e| format!("{}: {e}", p.display()))?
                .display()
                .to_string(),
            None => src.name.clone(),
        };
        let abs_dir = std::path::absolute(dir).map_err(|e| e.to_string())?;
        for &i in &todo {
            let mut cmd = format!(
                "{} sim {} --no-sweep",
                shell(&exe.display().to_string()),
                shell(&file)
            );
            for o in &points[i] {
                cmd.push_str(&format!(
                    " --set {}",
                    shell(&format!("{}={}", o.key, o.value))
                ));
            }
            cmd.push_str(&format!(
                " --out {}",
                shell(
                    &abs_dir
                        .join(point_id(&own(&points[i], &base)))
                        .display()
                        .to_string()
                )
            ));
            println!("{cmd}");
        }
        return Ok(());
    }
    eprintln!(
        "{}: {} runs, {} already done in {}, {} to run on {} threads",
        src.name,
        points.len(),
        points.len() - todo.len(),
        dir.display(),
        todo.len(),
        a.exp.jobs().min(todo.len().max(1))
    );
    let status = Status::new();
    let todo_points: Vec<Vec<Override>> = todo.iter().map(|&i| points[i].clone()).collect();
    let failures = Mutex::new(vec![]);
    run_all(&src, &todo_points, a.exp.jobs(), &status, &|k, r| {
        let id = point_id(&own(&todo_points[k], &base));
        let saved = r
            .as_ref()
            .map_err(|e| e.clone())
            .and_then(|r| save_run(r, &dir.join(&id)));
        match saved {
            Ok(()) => eprintln!(
                "\r[{id}] done ({:.0} s of the sweep)\x1b[K",
                status.started.elapsed().as_secs_f64()
            ),
            Err(e) => {
                eprintln!("\r[{id}] failed: {e}\x1b[K");
                failures
                    .lock()
                    .expect("not poisoned")
                    .push(format!("{id}: {e}"));
            }
        }
    });
    status.done(&src.name);
    let failures = failures.into_inner().expect("not poisoned");
    if !failures.is_empty() {
        return Err(format!(
            "{} runs failed:\n  {}",
            failures.len(),
            failures.join("\n  ")
        ));
    }
    // Collect every run (this call's and earlier ones').
    let mut runs = vec![];
    for p in &points {
        let path = result_of(p);
        let text = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let report: serde_json::Value = serde_json::from_slice(&text).map_err(|e| {
            format!(
                "{}: not a run report ({e}); delete it to run it again",
                path.display()
            )
        })?;
        runs.push(Finished {
            point: own(p, &base),
            report,
        });
    }
    save_sweep(&exp, &runs, dir)?;
    print!(
        "{}",
        sweep::aligned(&sweep::table(&sweep::columns(&exp), &runs))
    );
    let figures: Vec<String> = exp
        .figures
        .iter()
        .map(|f| format!(", figure-{}.png/.csv", f.name))
        .collect();
    println!("results: {}/summary.csv{}", dir.display(), figures.concat());
    Ok(())
}

/// Quote for a POSIX shell.
fn shell(s: &str) -> String {
    if s.chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._-=:,+".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

pub fn experiments() {
    for (name, what) in experiment::builtin() {
        println!("{name:28} {what}");
    }
}

fn convergence_line(x: &flexpass_sim::report::ConvergenceReport) -> String {
    let o = |v: Option<f64>| v.map_or("never".into(), |v| format!("{v}"));
    format!(
        "{} target loss, α = {}, w_init = {}: Jain ≥ 0.98 first after {} RTTs ({} measured RTTs of {:.1} µs; discrete model {} periods), for good after {} RTTs; mean Jain after 16 RTTs {:.3}, long-term Jain {:.4}",
        x.target_loss_rule,
        x.alpha,
        x.w_init,
        o(x.first_fair_rtts),
        o(x.first_fair_measured_rtts),
        x.measured_rtt_us,
        x.discrete_model_periods.map_or("> 200".into(), |v| v.to_string()),
        o(x.convergence_rtts),
        x.mean_jain_after_16_rtts,
        x.long_term_jain
    )
}

/// A short human summary of one run.
pub fn summary(r: &RunReport) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{} on the {} profile ({} {} hosts at {} Gbit/s, base RTT {:.1} µs, w_q {}, seed {}; {:.2} ms simulated, {} events)",
        r.experiment,
        r.profile.name(),
        r.topology.kind,
        r.topology.hosts,
        r.topology.host_gbps,
        r.topology.base_rtt_us,
        r.w_q,
        r.seed,
        r.duration_us / 1e3,
        r.events
    );
    if r.flows.len() <= 16 {
        for f in &r.flows {
            // No throughput samples (no monitored port): the mean over the flow's FCT.
            if f.goodput_gbps == 0.0 && f.delivered_bytes > 0 {
                if let Some(fct) = f.fct_us {
                    let _ = writeln!(
                        s,
                        "  flow {} {:?}: {} bytes, mean goodput {:.2} Gbps over its FCT {:.0} µs, timeouts {}",
                        f.id,
                        f.transport,
                        f.delivered_bytes,
                        f.delivered_bytes as f64 * 8.0 / (fct * 1e3),
                        fct,
                        f.timeouts
                    );
                    continue;
                }
            }
            let _ = writeln!(
                s,
                "  flow {} {:?}: {:5.1}% of link (proactive {:5.1}%, reactive {:5.1}%), goodput {:.2} Gbps, FCT {}, timeouts {}",
                f.id,
                f.transport,
                f.share * 100.0,
                f.proactive_share * 100.0,
                f.reactive_share * 100.0,
                f.goodput_gbps,
                f.fct_us.map_or("-".into(), |v| format!("{v:.0} µs")),
                f.timeouts
            );
        }
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
    let g = &r.fct;
    if g.overall.flows > 0 && r.flows.iter().any(|f| f.size.is_some()) {
        for (name, x) in [("all", &g.overall), ("legacy", &g.legacy), ("new", &g.new)] {
            if x.flows == 0 {
                continue;
            }
            let _ = writeln!(
                s,
                "  FCT {name:6} {} flows ({} incomplete): avg {:.1} µs, small (<{} kB) avg {:.1} / p99 {:.1} / std {:.1} µs, max {:.1} µs, timeouts {}",
                x.flows,
                x.incomplete,
                x.buckets.all.avg_us,
                r.params.measure.small_flow_kb,
                x.buckets.small.avg_us,
                x.buckets.small.p99_us,
                x.buckets.small.std_us,
                x.buckets.all.max_us,
                x.timeouts
            );
        }
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
    }
    for (g, u) in r.utilization.iter().filter(|(g, _)| g.as_str() == "tor-up") {
        let _ = writeln!(s, "  utilization {g}: {:.1}%", u * 100.0);
    }
    let _ = writeln!(
        s,
        "  data drops: {} (buffer full) + {} (red, selective), credit drops {}, NIC data drops {}; paths: {} flows checked, {} credit/data mismatches",
        r.data_drops_full,
        r.data_drops_red,
        r.credit_drops,
        r.nic_data_drops,
        r.paths.flows_checked,
        r.paths.mismatches
    );
    if let Some(c) = &r.convergence {
        let _ = writeln!(s, "  {}", convergence_line(c));
    }
    s
}

/// The transport a backend runs a drawn flow with: its workload's own (kernel TCP too,
/// which the model itself refuses), else the model's choice.
fn drawn_transport(e: &Experiment, f: &flexpass_sim::net::FlowSpec) -> &'static str {
    let own = match f.kind {
        FlowKind::Background | FlowKind::Foreground => {
            e.workload.get(f.entry as usize).and_then(|w| w.transport)
        }
        _ => None,
    };
    own.map_or(f.transport.name(), |t| t.name())
}
