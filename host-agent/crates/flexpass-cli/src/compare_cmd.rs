//! `flexpass compare DIR_A DIR_B`: two runs of one experiment side by side — the model
//! (`flexpass sim --out`) and an emulation (`flexpass emulate --out`), or any two runs in the
//! report shape: summary metrics, flow by flow, and a figure. An emulation's times are
//! scaled (its `time_scale`, emulated seconds per model second) and are compared in model
//! time; both values are printed.

use plotters::prelude::*;
use serde_json::Value;
use std::path::{Path, PathBuf};

#[derive(clap::Args)]
pub struct CompareArgs {
    /// A run folder (result.json), or a sweep folder (one run folder per point).
    pub a: PathBuf,
    /// The other run or sweep folder; points are matched by folder name.
    pub b: PathBuf,
    /// The figure: per-flow FCT and share of both runs [default: B/compare.png].
    #[arg(long)]
    pub plot: Option<PathBuf>,
}

/// One run as compared: its label, its time scale, its byte scale (an emulation's BDP ratio:
/// emulated bytes / model bytes), and its report.
struct Run {
    /// "model", or the emulation backend's name ("mininet").
    backend: String,
    label: String,
    scale: f64,
    bytes_scale: f64,
    report: Value,
}

fn load(dir: &Path) -> Result<Run, String> {
    let path = dir.join("result.json");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let report: Value =
        serde_json::from_str(&text).map_err(|e| format!("{}: not JSON: {e}", path.display()))?;
    if !report.get("fct").is_some_and(Value::is_object)
        || !report.get("flows").is_some_and(Value::is_array)
    {
        return Err(format!(
            "{}: not a run report (no `fct` and `flows`: written by flexpass sim --out or flexpass emulate --out)",
            path.display()
        ));
    }
    let backend = report
        .get("backend")
        .and_then(Value::as_str)
        .unwrap_or("model");
    let scale = report
        .get("time_scale")
        .and_then(Value::as_f64)
        .unwrap_or(1.0);
    if scale <= 0.0 || !scale.is_finite() {
        return Err(format!(
            "{}: time_scale {scale} is not a positive number",
            path.display()
        ));
    }
    let bytes_scale = report
        .get("bdp_ratio")
        .and_then(Value::as_f64)
        .filter(|r| *r > 0.0 && r.is_finite())
        .unwrap_or(1.0);
    Ok(Run {
        backend: backend.to_string(),
        label: format!("{backend} ({})", dir.display()),
        scale,
        bytes_scale,
        report,
    })
}

/// The run folders to compare: (point, A, B); a sweep's points by folder name.
fn pairs(a: &Path, b: &Path) -> Result<Vec<(String, PathBuf, PathBuf)>, String> {
    if a.join("result.json").is_file() || b.join("result.json").is_file() {
        return Ok(vec![(String::new(), a.to_path_buf(), b.to_path_buf())]);
    }
    let points = |d: &Path| -> Result<Vec<String>, String> {
        let mut v: Vec<String> = std::fs::read_dir(d)
            .map_err(|e| format!("{}: {e}", d.display()))?
            .filter_map(|e| e.ok())
            .filter(|e| e.path().join("result.json").is_file())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        Ok(v)
    };
    let (pa, pb) = (points(a)?, points(b)?);
    let both: Vec<_> = pa.iter().filter(|p| pb.contains(p)).cloned().collect();
    if both.is_empty() {
        return Err(format!(
            "no run to compare: {} and {} hold no result.json, nor run folders of the same name",
            a.display(),
            b.display()
        ));
    }
    for p in pa.iter().chain(&pb).filter(|p| !both.contains(p)) {
        eprintln!("flexpass compare: {p} is in one folder only; skipped");
    }
    Ok(both
        .into_iter()
        .map(|p| (p.clone(), a.join(&p), b.join(&p)))
        .collect())
}

/// A value by dotted path; a number in the path indexes an array (`bottleneck.max_queue_bytes.1`).
fn get<'a>(v: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.')
        .try_fold(v, |v, k| match k.parse::<usize>() {
            Ok(i) if v.is_array() => v.get(i),
            _ => v.get(k),
        })
}

fn num(v: &Value, path: &str) -> Option<f64> {
    get(v, path).and_then(Value::as_f64)
}

/// "12.3 ms" of a model-time µs value; "–" for none.
fn ms(v: Option<f64>) -> String {
    v.map_or("–".into(), |us| format!("{:.3} ms", us / 1e3))
}

fn ratio(a: Option<f64>, b: Option<f64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if a > 0.0 => format!("{:.2}", b / a),
        _ => "–".into(),
    }
}

/// Summary rows: (label, A, B, B/A) in model time.
fn summary(a: &Run, b: &Run) -> Vec<[String; 4]> {
    let mut rows = Vec::new();
    for (what, key) in [
        ("finite flows", "fct.overall.flows"),
        ("completed", "fct.overall.completed"),
        ("incomplete", "fct.overall.incomplete"),
        ("timeouts", "timeouts"),
    ] {
        let (x, y) = (num(&a.report, key), num(&b.report, key));
        let f = |v: Option<f64>| v.map_or("–".into(), |v| format!("{v:.0}"));
        rows.push([what.into(), f(x), f(y), String::new()]);
    }
    // The switches' drops (None where a backend cannot see them: stock BMv2's full queues)
    // and the bottleneck's data queue (Q1) in the model's bytes.
    for (what, key) in [
        ("data drops, full buffer", "data_drops_full"),
        ("data drops, selective (red)", "data_drops_red"),
        ("credit drops", "credit_drops"),
    ] {
        let (x, y) = (num(&a.report, key), num(&b.report, key));
        let f = |v: Option<f64>| v.map_or("–".into(), |v| format!("{v:.0}"));
        rows.push([what.into(), f(x), f(y), String::new()]);
    }
    for (what, key) in [
        ("bottleneck Q1 mean", "queue_summary.q1.0"),
        ("bottleneck Q1 max", "bottleneck.max_queue_bytes.1"),
    ] {
        let v = |r: &Run| num(&r.report, key).map(|x| x / r.bytes_scale);
        let (x, y) = (v(a), v(b));
        let kb = |v: Option<f64>| v.map_or("–".into(), |v| format!("{:.1} kB", v / 1e3));
        rows.push([format!("{what} (model bytes)"), kb(x), kb(y), ratio(x, y)]);
    }
    // Every fault (the same [[fault]] list on both): the longest delivery gap of a flow under
    // way, in model time.
    let faults = |r: &Run| r.report["faults"].as_array().cloned().unwrap_or_default();
    let (fa, fb) = (faults(a), faults(b));
    for i in 0..fa.len().max(fb.len()) {
        let gap = |f: &[Value], r: &Run| num(f.get(i)?, "max_gap_us").map(|x| x / r.scale);
        let what = fa
            .get(i)
            .or(fb.get(i))
            .and_then(|f| f["event"].as_str())
            .unwrap_or("?");
        let (x, y) = (gap(&fa, a), gap(&fb, b));
        rows.push([
            format!("fault {i} ({what}): longest gap"),
            ms(x),
            ms(y),
            ratio(x, y),
        ]);
    }
    let finite = |r: &Run| num(&r.report, "fct.overall.flows").unwrap_or(0.0) > 0.0;
    if !finite(a) && !finite(b) {
        return rows;
    }
    for bucket in ["all", "small"] {
        for stat in ["avg_us", "p50_us", "p99_us", "max_us"] {
            let key = format!("fct.overall.{bucket}.{stat}");
            let n = |r: &Run| num(&r.report, &format!("fct.overall.{bucket}.flows")).unwrap_or(0.0);
            let v = |r: &Run| {
                (n(r) > 0.0)
                    .then(|| num(&r.report, &key))
                    .flatten()
                    .map(|x| x / r.scale)
            };
            let (x, y) = (v(a), v(b));
            rows.push([
                format!("FCT {bucket} {}", stat.trim_end_matches("_us")),
                ms(x),
                ms(y),
                ratio(x, y),
            ]);
        }
    }
    rows
}

/// A flow of a report: (id, description, model-time FCT, share).
struct Flow {
    id: u64,
    what: String,
    fct_us: Option<f64>,
    share: Option<f64>,
}

fn flows(r: &Run) -> Vec<Flow> {
    r.report["flows"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|f| {
            // An emulated flow is described by the model's size (its own is scaled).
            let size = f
                .get("model_size")
                .and_then(Value::as_u64)
                .or_else(|| f["size"].as_u64())
                .map_or("long-lived".into(), |s| format!("{s} B"));
            Flow {
                id: f["id"].as_u64().unwrap_or(0),
                what: format!(
                    "{} {} h{}->h{} {}",
                    f["kind"].as_str().unwrap_or("?"),
                    f["transport"].as_str().unwrap_or("?"),
                    f["src"],
                    f["dst"],
                    size
                ),
                fct_us: f["fct_us"].as_f64().map(|x| x / r.scale),
                // A share of the link is what a long-lived flow is measured by.
                share: f["size"].is_null().then(|| f["share"].as_f64()).flatten(),
            }
        })
        .collect()
}

fn print_table(rows: &[[String; 4]], head: [&str; 4]) {
    let w: Vec<usize> = (0..4)
        .map(|i| {
            rows.iter()
                .map(|r| r[i].len())
                .chain([head[i].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |c: [&str; 4]| {
        println!(
            "  {:<w0$}  {:>w1$}  {:>w2$}  {:>w3$}",
            c[0],
            c[1],
            c[2],
            c[3],
            w0 = w[0],
            w1 = w[1],
            w2 = w[2],
            w3 = w[3]
        )
    };
    line(head);
    for r in rows {
        line([&r[0], &r[1], &r[2], &r[3]]);
    }
}

pub fn compare(a: CompareArgs) -> Result<(), String> {
    let pairs = pairs(&a.a, &a.b)?;
    let mut figure = Vec::new();
    for (point, da, db) in &pairs {
        let (ra, rb) = (load(da)?, load(db)?);
        let name = |r: &Run| r.report["experiment"].as_str().unwrap_or("").to_string();
        if name(&ra) != name(&rb) {
            eprintln!(
                "flexpass compare: different experiments: '{}' and '{}'",
                name(&ra),
                name(&rb)
            );
        }
        println!(
            "{}{}: A = {}, B = {}{}",
            name(&ra),
            if point.is_empty() {
                String::new()
            } else {
                format!(" [{point}]")
            },
            ra.label,
            rb.label,
            if ra.scale != 1.0 || rb.scale != 1.0 {
                format!(" (times in model time: A / {}, B / {})", ra.scale, rb.scale)
            } else {
                String::new()
            }
        );
        print_table(&summary(&ra, &rb), ["", "A", "B", "B / A"]);
        let (fa, fb) = (flows(&ra), flows(&rb));
        let mut rows = Vec::new();
        for f in &fa {
            let g = fb.iter().find(|g| g.id == f.id);
            if let Some(g) = g.filter(|g| g.what != f.what) {
                eprintln!(
                    "flexpass compare: flow {} differs: A {} / B {}",
                    f.id, f.what, g.what
                );
            }
            let (x, y) = (f.fct_us, g.and_then(|g| g.fct_us));
            if f.share.is_some() || g.is_some_and(|g| g.share.is_some()) {
                let pct =
                    |v: Option<f64>| v.map_or("–".into(), |v| format!("{:.1} %", 100.0 * v));
                rows.push([
                    format!("flow {} {} share", f.id, f.what),
                    pct(f.share),
                    pct(g.and_then(|g| g.share)),
                    String::new(),
                ]);
            }
            if x.is_some() || y.is_some() {
                rows.push([
                    format!("flow {} {} FCT", f.id, f.what),
                    ms(x),
                    ms(y),
                    ratio(x, y),
                ]);
            }
        }
        if !rows.is_empty() {
            println!();
            print_table(&rows, ["", "A", "B", "B / A"]);
        }
        println!();
        figure.push((
            point.clone(),
            fa,
            fb,
            [ra.backend.clone(), rb.backend.clone()],
        ));
    }
    let path = a.plot.clone().unwrap_or_else(|| a.b.join("compare.png"));
    draw(&figure, &path)?;
    println!("figure: {}", path.display());
    Ok(())
}

/// A point of the figure: its name, A's and B's flows, and A's and B's backends.
type Point = (String, Vec<Flow>, Vec<Flow>, [String; 2]);

/// Per point: model-time FCT (or share, for long-lived flows) of every flow, A beside B.
fn draw(points: &[Point], path: &Path) -> Result<(), String> {
    let rows = points.len().max(1);
    let root = BitMapBackend::new(path, (1000, 360 * rows as u32)).into_drawing_area();
    let err = |e: &dyn std::fmt::Display| format!("{}: {e}", path.display());
    root.fill(&WHITE).map_err(|e| err(&e))?;
    for ((point, fa, fb, backends), area) in points.iter().zip(root.split_evenly((rows, 1))) {
        let shares = fa.iter().chain(fb).all(|f| f.fct_us.is_none());
        let value = |f: &Flow| {
            if shares {
                f.share.map(|s| 100.0 * s)
            } else {
                f.fct_us.map(|x| x / 1e3)
            }
        };
        let n = fa.len().max(fb.len()).max(1) as f64;
        let top = fa
            .iter()
            .chain(fb)
            .filter_map(value)
            .fold(0.0f64, f64::max)
            .max(1e-3)
            * 1.15;
        let title = format!(
            "{}{}",
            if shares {
                "share of the link (%)"
            } else {
                "FCT, model time (ms)"
            },
            if point.is_empty() {
                String::new()
            } else {
                format!(" — {point}")
            }
        );
        let mut chart = ChartBuilder::on(&area)
            .caption(title, ("sans-serif", 18))
            .margin(10)
            .x_label_area_size(30)
            .y_label_area_size(60)
            .build_cartesian_2d(0.0..n + 1.0, 0.0..top)
            .map_err(|e| err(&e))?;
        // One tick per flow id (the bars' centre), none between.
        let flow_tick = |x: &f64| {
            let id = x.round();
            if (x - id).abs() < 1e-9 && (1.0..=n).contains(&id) {
                format!("{id:.0}")
            } else {
                String::new()
            }
        };
        chart
            .configure_mesh()
            .x_desc("flow")
            .x_labels(n as usize + 2)
            .x_label_formatter(&flow_tick)
            .disable_x_mesh()
            .draw()
            .map_err(|e| err(&e))?;
        let labels = [format!("A: {}", backends[0]), format!("B: {}", backends[1])];
        for (k, (flows, label)) in [(fa, &labels[0]), (fb, &labels[1])].into_iter().enumerate() {
            let c = crate::plot::color(k);
            let off = if k == 0 { -0.18 } else { 0.18 };
            chart
                .draw_series(flows.iter().filter_map(|f| {
                    let x = f.id as f64 + off;
                    value(f).map(|y| Rectangle::new([(x - 0.16, 0.0), (x + 0.16, y)], c.filled()))
                }))
                .map_err(|e| err(&e))?
                .label(label.as_str())
                .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], c.filled()));
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(|e| err(&e))?;
    }
    root.present().map_err(|e| err(&e))
}

/// `flexpass emulate ARGS…`: the Mininet runner (`python3 -m flexpass_mininet emulate`, which
/// reads the experiment through this binary's `sim --resolve`).
#[derive(clap::Args)]
pub struct EmulateArgs {
    /// The runner's arguments: EXPERIMENT [--set K=V]… [--no-sweep] [--switch S]
    /// [--link-mbps M] [--rtt-us U] [--out DIR] [--dry-run] [--controller] (see --help of the runner).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
    pub args: Vec<String>,
}

pub fn emulate(a: EmulateArgs) -> Result<(), String> {
    // The repository: $FLEXPASS_REPO, else where this binary was built from.
    let repo = std::env::var_os("FLEXPASS_REPO")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.."));
    let runner = repo.join("mininet-topos");
    if !runner.join("flexpass_mininet").is_dir() {
        return Err(format!(
            "the Mininet runner is not at {} (set FLEXPASS_REPO to the repository)",
            runner.display()
        ));
    }
    // Mininet comes with the distribution's Python.
    let python = std::env::var("FLEXPASS_PYTHON").unwrap_or_else(|_| "/usr/bin/python3".into());
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let path = [runner.clone(), repo.join("control-plane")]
        .iter()
        .map(|p| p.display().to_string())
        .chain(std::env::var("PYTHONPATH").ok())
        .collect::<Vec<_>>()
        .join(":");
    let status = std::process::Command::new(&python)
        .args(["-m", "flexpass_mininet", "emulate"])
        .args(&a.args)
        .env("PYTHONPATH", path)
        .env("FLEXPASS_BIN", exe)
        .status()
        .map_err(|e| format!("{python}: {e}"))?;
    match status.code() {
        Some(0) => Ok(()),
        Some(c) => Err(format!("the Mininet runner exited with {c}")),
        None => Err("the Mininet runner was killed".into()),
    }
}
