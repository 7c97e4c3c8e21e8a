//! `flexpass plot-fct`: flow completion times from the JSON lines of `flexpass workload`
//! ("flow" records) and `flexpass incast` ("response" records), one input file per series:
//! the CDF of the small flows' FCT (left) and the average and p99 FCT per flow-size bucket
//! (right).

use crate::plot::{color, draw_legend, tick, DrawResult, LEGEND_LINE};
use flexpass_agent::workload::{summarize, FctStats, FctSummary, SMALL_FLOW};
use plotters::coord::ranged1d::{AsRangedCoord, Ranged, ValueFormatter};
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::{Path, PathBuf};

const SIZE: (u32, u32) = (1500, 650);

#[derive(clap::Args)]
pub struct PlotFctArgs {
    /// JSON-lines output of `flexpass workload` or `flexpass incast`, one series per file.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// PNG to write.
    #[arg(long, value_name = "PNG")]
    pub out: PathBuf,
    /// Series names, one per file, comma separated [default: file name and transport].
    #[arg(long, value_delimiter = ',')]
    pub labels: Option<Vec<String>>,
}

/// The FCT records of one input file.
#[derive(Debug, Default)]
pub struct Series {
    pub label: String,
    /// (size in bytes, FCT in ms) of the flows that completed.
    pub flows: Vec<(u64, f64)>,
    /// Flows reported with an error (left out).
    pub failed: usize,
    /// Transports named by the records, in first-seen order.
    pub transports: Vec<String>,
}

impl Series {
    fn small_fcts(&self) -> Vec<f64> {
        let mut v: Vec<f64> = self
            .flows
            .iter()
            .filter(|f| f.0 < SMALL_FLOW)
            .map(|f| f.1)
            .collect();
        v.sort_by(f64::total_cmp);
        v
    }
}

/// Parses the JSON lines of `path`.
pub fn load(path: &Path) -> Result<Series, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    parse(path, &text)
}

pub fn parse(path: &Path, text: &str) -> Result<Series, String> {
    let mut s = Series::default();
    for (i, line) in text.lines().enumerate() {
        let at = || format!("{}:{}", path.display(), i + 1);
        if line.trim().is_empty() {
            continue;
        }
        let v: serde_json::Value = serde_json::from_str(line)
            .map_err(|e| format!("{}: not a JSON line ({e}): {}", at(), shorten(line)))?;
        let Some(event) = v.get("event").and_then(|e| e.as_str()) else {
            if v.is_object() {
                continue;
            }
            return Err(format!("{}: not a JSON object: {}", at(), shorten(line)));
        };
        if !matches!(event, "flow" | "response" | "flow_sent") {
            continue;
        }
        let fct = v.get("fct_us").and_then(|x| x.as_f64());
        let size = v
            .get("size")
            .or_else(|| v.get("bytes"))
            .and_then(|x| x.as_u64());
        let (Some(fct), Some(size)) = (fct, size) else {
            return Err(format!(
                "{}: '{event}' record without numeric fct_us and size",
                at()
            ));
        };
        if let Some(t) = v.get("transport").and_then(|t| t.as_str()) {
            if !s.transports.iter().any(|x| x == t) {
                s.transports.push(t.to_string());
            }
        }
        if v.get("error").is_some_and(|e| !e.is_null()) {
            s.failed += 1;
        } else {
            s.flows.push((size, fct / 1e3));
        }
    }
    if s.flows.is_empty() {
        return Err(format!(
            "{}: no FCT records (\"flow\" events of `flexpass workload` or \"response\" events \
             of `flexpass incast`){}",
            path.display(),
            if s.failed > 0 {
                format!("; all {} flows failed", s.failed)
            } else {
                String::new()
            }
        ));
    }
    Ok(s)
}

fn shorten(line: &str) -> String {
    match line.char_indices().nth(60) {
        Some((i, _)) => format!("{}…", &line[..i]),
        None => line.to_string(),
    }
}

pub fn plot_fct(a: PlotFctArgs) -> Result<(), String> {
    if let Some(l) = &a.labels {
        if l.len() != a.files.len() {
            return Err(format!(
                "--labels has {} names for {} input file{}",
                l.len(),
                a.files.len(),
                if a.files.len() == 1 { "" } else { "s" }
            ));
        }
    }
    match a.out.extension().and_then(|e| e.to_str()) {
        Some(e) if e.eq_ignore_ascii_case("png") => {}
        _ => return Err(format!("--out {} must end in .png", a.out.display())),
    }
    let mut series = a
        .files
        .iter()
        .map(|p| load(p))
        .collect::<Result<Vec<_>, _>>()?;
    for (i, s) in series.iter_mut().enumerate() {
        s.label = match &a.labels {
            Some(l) => l[i].clone(),
            None => default_label(&a.files[i], &s.transports),
        };
    }
    fct_png(&series, &a.out)?;
    for s in &series {
        let sum = summarize(&s.flows);
        let b = |x: &FctStats| {
            if x.flows == 0 {
                "-".to_string()
            } else {
                format!("{} flows avg {:.3} p99 {:.3}", x.flows, x.avg_us, x.p99_us)
            }
        };
        log::info!(
            "{}: small {}; medium {}; large {} (ms){}",
            s.label,
            b(&sum.small),
            b(&sum.medium),
            b(&sum.large),
            if s.failed > 0 {
                format!("; {} failed flows left out", s.failed)
            } else {
                String::new()
            }
        );
    }
    Ok(())
}

fn default_label(path: &Path, transports: &[String]) -> String {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string());
    if transports.is_empty() {
        stem
    } else {
        format!("{stem} ({})", transports.join(", "))
    }
}

type Area<'a> = DrawingArea<BitMapBackend<'a>, Shift>;

/// Writes the two-panel figure for `series` to `path`.
pub fn fct_png(series: &[Series], path: &Path) -> Result<(), String> {
    let fail = |e: &dyn std::fmt::Display| format!("cannot write plot {}: {e}", path.display());
    std::fs::File::create(path).map_err(|e| fail(&e))?;
    let root = BitMapBackend::new(path, SIZE).into_drawing_area();
    draw(series, &root).map_err(|e| fail(&e))?;
    root.present().map_err(|e| fail(&e))?;
    Ok(())
}

fn draw(series: &[Series], root: &Area) -> DrawResult {
    root.fill(&WHITE)?;
    let body = root.titled("Flow completion time", ("sans-serif", 28))?;
    let (left, right) = body.split_horizontally(SIZE.0 / 2);
    let smalls: Vec<Vec<f64>> = series.iter().map(Series::small_fcts).collect();
    let (lo, hi) = smalls
        .iter()
        .flatten()
        .fold((f64::INFINITY, 0.0f64), |(lo, hi), &v| {
            (lo.min(v), hi.max(v))
        });
    if hi <= 0.0 {
        left.draw(&Text::new(
            "no flows < 100 KB",
            (SIZE.0 as i32 / 4 - 90, SIZE.1 as i32 / 2),
            ("sans-serif", 22).into_font(),
        ))?;
    } else {
        let lo = lo.max(hi * 1e-6);
        if hi / lo > 100.0 {
            cdf_panel(
                &left,
                (lo / 1.25..hi * 1.25).log_scale(),
                series,
                &smalls,
                true,
            )?;
        } else {
            cdf_panel(&left, 0.0..hi * 1.05, series, &smalls, false)?;
        }
    }
    let sums: Vec<FctSummary> = series.iter().map(|s| summarize(&s.flows)).collect();
    bucket_panel(&right, series, &sums)
}

fn cdf_panel<X>(
    area: &Area,
    x: X,
    series: &[Series],
    smalls: &[Vec<f64>],
    log_x: bool,
) -> DrawResult
where
    X: AsRangedCoord<Value = f64>,
    X::CoordDescType: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    let mut chart = ChartBuilder::on(area)
        .caption("CDF of FCT, flows < 100 KB", ("sans-serif", 22))
        .margin(15)
        .margin_right(30)
        .x_label_area_size(50)
        .y_label_area_size(60)
        .build_cartesian_2d(x, 0.0..1.0)?;
    chart
        .configure_mesh()
        .x_desc(if log_x {
            "flow completion time (ms, log scale)"
        } else {
            "flow completion time (ms)"
        })
        .y_desc("fraction of flows")
        .x_label_formatter(&|v| ms(*v))
        .y_label_formatter(&|v| tick(*v))
        .axis_desc_style(("sans-serif", 18))
        .label_style(("sans-serif", 15))
        .light_line_style(BLACK.mix(0.03))
        .bold_line_style(BLACK.mix(0.1))
        .draw()?;
    for (i, (s, v)) in series.iter().zip(smalls).enumerate() {
        let c = color(i);
        if v.is_empty() {
            // Keep the colours of the two panels in step; say why there is no line.
            chart
                .draw_series(std::iter::empty::<Circle<(f64, f64), i32>>())?
                .label(format!("{}: no flows < 100 KB", s.label))
                .legend(move |(x, y)| {
                    PathElement::new(
                        vec![(x, y), (x + LEGEND_LINE, y)],
                        c.mix(0.3).stroke_width(3),
                    )
                });
            continue;
        }
        let n = v.len() as f64;
        let mut pts = Vec::with_capacity(2 * v.len() + 1);
        pts.push((v[0], 0.0));
        for (k, &x) in v.iter().enumerate() {
            pts.push((x, k as f64 / n));
            pts.push((x, (k + 1) as f64 / n));
        }
        chart
            .draw_series(LineSeries::new(pts, c.stroke_width(3)))?
            .label(format!("{} ({} flows)", s.label, v.len()))
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + LEGEND_LINE, y)], c.stroke_width(3))
            });
    }
    draw_legend(&mut chart, SeriesLabelPosition::LowerRight, 16)?;
    Ok(())
}

const BUCKETS: [&str; 3] = [
    "small  < 100 KB",
    "medium  100 KB – 10 MB",
    "large  ≥ 10 MB",
];

fn buckets(s: &FctSummary) -> [&FctStats; 3] {
    [&s.small, &s.medium, &s.large]
}

fn bucket_panel(area: &Area, series: &[Series], sums: &[FctSummary]) -> DrawResult {
    let values = sums
        .iter()
        .flat_map(|s| buckets(s).into_iter())
        .filter(|b| b.flows > 0)
        .flat_map(|b| [b.avg_us, b.p99_us]);
    let (lo, hi) = values.fold((f64::INFINITY, 0.0f64), |(lo, hi), v| {
        (lo.min(v), hi.max(v))
    });
    let lo = lo.max(hi * 1e-6);
    // Head-room above the bars for the legend (one entry per series plus the p99 marker).
    let legend_frac = ((22 * (series.len() + 1) + 50) as f64 / 520.0).min(0.6);
    if hi / lo > 100.0 {
        // Bars start at a labelled power of ten.
        let bottom = 10f64.powf((lo / 1.5).log10().floor()) * 0.999;
        let top = bottom * (hi * 1.5 / bottom).powf(1.0 / (1.0 - legend_frac));
        bucket_chart(area, (bottom..top).log_scale(), bottom, series, sums, true)
    } else {
        let top = hi * 1.1 / (1.0 - legend_frac);
        bucket_chart(area, 0.0..top, 0.0, series, sums, false)
    }
}

fn bucket_chart<Y>(
    area: &Area,
    y: Y,
    bottom: f64,
    series: &[Series],
    sums: &[FctSummary],
    log_y: bool,
) -> DrawResult
where
    Y: AsRangedCoord<Value = f64>,
    Y::CoordDescType: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    let mut chart = ChartBuilder::on(area)
        .caption(
            "average (bar) and p99 (marker) FCT by flow size",
            ("sans-serif", 22),
        )
        .margin(15)
        .margin_right(25)
        .x_label_area_size(50)
        .y_label_area_size(70)
        .build_cartesian_2d(-0.5..2.5, y)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(3)
        .x_label_formatter(&|v: &f64| {
            let i = v.round();
            if (v - i).abs() < 1e-6 && (0.0..3.0).contains(&i) {
                BUCKETS[i as usize].to_string()
            } else {
                String::new()
            }
        })
        .x_desc("flow size")
        .y_desc(if log_y {
            "flow completion time (ms, log scale)"
        } else {
            "flow completion time (ms)"
        })
        .y_label_formatter(&|v| ms(*v))
        .axis_desc_style(("sans-serif", 18))
        .label_style(("sans-serif", 15))
        .light_line_style(BLACK.mix(0.03))
        .bold_line_style(BLACK.mix(0.1))
        .draw()?;
    let n = series.len() as f64;
    let group = 0.8;
    let w = group / n;
    for (i, (s, sum)) in series.iter().zip(sums).enumerate() {
        let c = color(i);
        let label = if s.failed > 0 {
            format!("{} ({} failed flows left out)", s.label, s.failed)
        } else {
            s.label.clone()
        };
        let mut first = true;
        for (b, st) in buckets(sum).into_iter().enumerate() {
            let x0 = b as f64 - group / 2.0 + i as f64 * w;
            let (x1, xm) = (x0 + w * 0.9, x0 + w * 0.45);
            if st.flows == 0 {
                continue;
            }
            let bar = chart.draw_series(std::iter::once(Rectangle::new(
                [(x0 + w * 0.05, bottom), (x1, st.avg_us)],
                c.mix(0.75).filled(),
            )))?;
            if first {
                bar.label(label.clone()).legend(move |(x, y)| {
                    Rectangle::new([(x + 8, y - 7), (x + 26, y + 7)], c.mix(0.75).filled())
                });
                first = false;
            }
            // p99: a whisker from the average up to a black bar-wide marker.
            let half = w * 0.3;
            chart.draw_series([
                PathElement::new(
                    vec![(xm, st.avg_us), (xm, st.p99_us)],
                    BLACK.stroke_width(1),
                ),
                PathElement::new(
                    vec![(xm - half, st.p99_us), (xm + half, st.p99_us)],
                    BLACK.stroke_width(3),
                ),
            ])?;
            chart.draw_series(std::iter::once(
                EmptyElement::at((xm, st.p99_us))
                    + Text::new(
                        format!("n={}", st.flows),
                        (-14, -20),
                        ("sans-serif", 14).into_font().color(&BLACK.mix(0.7)),
                    ),
            ))?;
        }
    }
    for b in 0..3 {
        if sums.iter().all(|s| buckets(s)[b].flows == 0) {
            chart.draw_series(std::iter::once(
                EmptyElement::at((b as f64, bottom))
                    + Text::new(
                        "no flows",
                        (-30, -30),
                        ("sans-serif", 16).into_font().color(&BLACK.mix(0.5)),
                    ),
            ))?;
        }
    }
    // Legend entry of the p99 marker.
    chart
        .draw_series(std::iter::empty::<Circle<(f64, f64), i32>>())?
        .label("p99")
        .legend(|(x, y)| {
            EmptyElement::at((x, y))
                + PathElement::new(vec![(17, 0), (17, 8)], BLACK.stroke_width(1))
                + PathElement::new(vec![(8, 0), (26, 0)], BLACK.stroke_width(3))
        });
    draw_legend(&mut chart, SeriesLabelPosition::UpperLeft, 16)?;
    Ok(())
}

/// Millisecond tick text: 3 significant digits below 1 ms, otherwise like `tick`.
fn ms(v: f64) -> String {
    if v > 0.0 && v < 1.0 {
        let digits = (-v.log10()).floor() as usize + 3;
        let s = format!("{v:.digits$}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        tick(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_workload_and_incast_records() {
        let text = r#"{"event":"flow","transport":"flexpass","size":5000,"fct_us":120.5,"error":null}
{"event":"sample","t_ms":10,"flows":[]}

{"event":"flow","transport":"flexpass","size":20000000,"fct_us":9000,"error":"timeout"}
{"event":"response","transport":"tcp","size":64000,"fct_us":800}
{"event":"summary","transport":"flexpass","fct":{}}
"#;
        let s = parse(Path::new("w.jsonl"), text).unwrap();
        assert_eq!(s.flows, vec![(5000, 0.1205), (64000, 0.8)]);
        assert_eq!(s.failed, 1);
        assert_eq!(s.transports, vec!["flexpass", "tcp"]);
        assert_eq!(
            default_label(Path::new("/tmp/w.jsonl"), &s.transports),
            "w (flexpass, tcp)"
        );
    }

    #[test]
    fn reports_bad_input_with_file_and_line() {
        let e = parse(
            Path::new("a.jsonl"),
            "{\"event\":\"sample\"}\nflexpass serve: listening\n",
        )
        .unwrap_err();
        assert!(e.starts_with("a.jsonl:2: not a JSON line"), "{e}");
        let e = parse(Path::new("b.jsonl"), "{\"event\":\"flow\",\"size\":1}\n").unwrap_err();
        assert!(
            e.starts_with("b.jsonl:1: 'flow' record without numeric fct_us"),
            "{e}"
        );
        let e = parse(Path::new("c.jsonl"), "{\"event\":\"summary\"}\n").unwrap_err();
        assert!(e.starts_with("c.jsonl: no FCT records"), "{e}");
        let e = load(Path::new("/nonexistent/d.jsonl")).unwrap_err();
        assert!(e.starts_with("cannot read /nonexistent/d.jsonl: "), "{e}");
    }

    #[test]
    fn tick_text() {
        assert_eq!(ms(0.0123456), "0.0123");
        assert_eq!(ms(0.5), "0.5");
        assert_eq!(ms(20.0), "20");
        assert_eq!(ms(2.5), "2.5");
    }

    #[test]
    fn draws_a_png() {
        let mk = |label: &str, k: u64| Series {
            label: label.into(),
            flows: (1..200)
                .map(|i| (i * 1000 * k, 0.05 * i as f64 * k as f64))
                .chain([(20_000_000, 80.0)])
                .collect(),
            failed: 0,
            transports: vec![],
        };
        let p = std::env::temp_dir().join(format!("flexpass-fct-{}.png", std::process::id()));
        fct_png(&[mk("a", 1), mk("b", 3)], &p).unwrap();
        assert!(std::fs::metadata(&p).unwrap().len() > 10_000);
        let _ = std::fs::remove_file(&p);
    }
}
