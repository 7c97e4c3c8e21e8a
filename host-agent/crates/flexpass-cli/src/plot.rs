//! Throughput-over-time PNG (per flow and per sub-flow), or, for the incast scenario (no
//! samples), max FCT against the number of flows per transport.

use flexpass_sim::net::Sample;
use flexpass_sim::Report;
use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use std::path::Path;

const SIZE: (u32, u32) = (1200, 700);
/// Length of the line sample in a legend entry, pixels.
pub const LEGEND_LINE: i32 = 34;

/// Distinct, print-friendly colours (one per flow / transport).
const COLORS: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(23, 190, 207),
];

pub fn color(i: usize) -> RGBColor {
    COLORS[i % COLORS.len()]
}

/// Write the plot of `r` to `path` (a `.png` file).
pub fn throughput_png(r: &Report, path: &Path) -> Result<(), String> {
    let fail = |e: &dyn std::fmt::Display| format!("cannot write plot {}: {e}", path.display());
    match path.extension().and_then(|e| e.to_str()) {
        Some(e) if e.eq_ignore_ascii_case("png") => {}
        _ => return Err(format!("plot path {} must end in .png", path.display())),
    }
    // Surface unwritable paths (missing directory, permissions) with the OS's reason before
    // spending time on drawing.
    std::fs::File::create(path).map_err(|e| fail(&e))?;
    let root = BitMapBackend::new(path, SIZE).into_drawing_area();
    let drawn = if r.samples.is_empty() {
        incast_chart(r, &root)
    } else {
        throughput_chart(r, &root)
    };
    drawn.map_err(|e| fail(&e))?;
    root.present().map_err(|e| fail(&e))?;
    Ok(())
}

pub type DrawResult =
    Result<(), DrawingAreaErrorKind<<BitMapBackend<'static> as DrawingBackend>::ErrorType>>;

/// Axes, grid and tick labels of the throughput and incast figures (linear f64 axes).
fn draw_mesh(
    chart: &mut ChartContext<
        '_,
        BitMapBackend<'_>,
        Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
    >,
    x_desc: &str,
    y_desc: &str,
) -> DrawResult {
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .x_label_formatter(&|v| tick(*v))
        .y_label_formatter(&|v| tick(*v))
        .axis_desc_style(("sans-serif", 20))
        .label_style(("sans-serif", 16))
        .light_line_style(WHITE.mix(0.0))
        .bold_line_style(BLACK.mix(0.08))
        .draw()
}

/// The legend box every figure uses.
pub fn draw_legend<'a, 'b: 'a, CT: plotters::coord::CoordTranslate>(
    chart: &mut ChartContext<'a, BitMapBackend<'b>, CT>,
    at: SeriesLabelPosition,
    font_size: u32,
) -> DrawResult {
    chart
        .configure_series_labels()
        .position(at)
        .label_font(("sans-serif", font_size))
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK.mix(0.4))
        .margin(10)
        .legend_area_size(LEGEND_LINE + 12)
        .draw()
}

/// Axis tick text without float noise or needless decimals: 10, 2.5, 0.25.
pub fn tick(v: f64) -> String {
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

fn gbps(bytes: u64, interval_us: f64) -> f64 {
    bytes as f64 * 8.0 / (interval_us * 1e3)
}

fn throughput_chart(r: &Report, root: &DrawingArea<BitMapBackend<'_>, Shift>) -> DrawResult {
    root.fill(&WHITE)?;
    let interval = if r.sample_interval_us > 0.0 {
        r.sample_interval_us
    } else {
        1.0
    };
    let t_max = r
        .samples
        .iter()
        .map(|s| s.t_us / 1e3)
        .fold(0.0, f64::max)
        .max(1e-3);
    let at = |v: &[u64], i: usize| v.get(i).copied().unwrap_or(0);
    let has = |i: usize, v: fn(&Sample) -> &[u64]| r.samples.iter().any(|s| at(v(s), i) > 0);
    let split: Vec<bool> = (0..r.flows.len())
        .map(|i| has(i, |s| &s.proactive) && has(i, |s| &s.reactive))
        .collect();
    let mut data_max = r.link_gbps;
    for s in &r.samples {
        for i in 0..r.flows.len() {
            data_max = data_max.max(gbps(at(&s.proactive, i) + at(&s.reactive, i), interval));
        }
    }
    // Head-room above the data for the legend (~22 px per entry of a ~570 px high plot).
    let entries = 1 + r.flows.len() + 2 * split.iter().filter(|&&x| x).count();
    let legend_frac = ((22 * entries + 40) as f64 / 570.0).min(0.6);
    let y_max = data_max / (1.0 - legend_frac);

    let title = format!(
        "{:?}: throughput per flow ({} Gbit/s bottleneck, {:.0} µs samples)",
        r.scenario, r.link_gbps, interval
    );
    let mut chart = ChartBuilder::on(root)
        .caption(title, ("sans-serif", 26))
        .margin(20)
        .x_label_area_size(50)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..t_max, 0.0..y_max)?;
    draw_mesh(&mut chart, "time (ms)", "throughput (Gbit/s)")?;

    for (i, f) in r.flows.iter().enumerate() {
        let c = color(i);
        let series = |g: &dyn Fn(&Sample) -> u64| -> Vec<(f64, f64)> {
            r.samples
                .iter()
                .map(|s| (s.t_us / 1e3, gbps(g(s), interval)))
                .collect()
        };
        let total = series(&|s| at(&s.proactive, i) + at(&s.reactive, i));
        chart
            .draw_series(LineSeries::new(total, c.stroke_width(3)))?
            .label(format!("flow {} ({:?})", f.id, f.transport))
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + LEGEND_LINE, y)], c.stroke_width(3))
            });
        if split[i] {
            let pro = series(&|s| at(&s.proactive, i));
            chart
                .draw_series(DashedLineSeries::new(
                    pro,
                    10,
                    5,
                    c.mix(0.9).stroke_width(2),
                ))?
                .label(format!("flow {} proactive", f.id))
                .legend(move |(x, y)| {
                    DashedPathElement::new(
                        vec![(x, y), (x + LEGEND_LINE, y)],
                        8,
                        4,
                        c.mix(0.9).stroke_width(2),
                    )
                });
            let rea = series(&|s| at(&s.reactive, i));
            chart
                .draw_series(DashedLineSeries::new(rea, 3, 4, c.mix(0.9).stroke_width(2)))?
                .label(format!("flow {} reactive", f.id))
                .legend(move |(x, y)| {
                    DashedPathElement::new(
                        vec![(x, y), (x + LEGEND_LINE, y)],
                        3,
                        4,
                        c.mix(0.9).stroke_width(2),
                    )
                });
        }
    }

    let link = r.link_gbps;
    chart
        .draw_series(DashedLineSeries::new(
            vec![(0.0, link), (t_max, link)],
            10,
            6,
            BLACK.mix(0.75).stroke_width(1),
        ))?
        .label(format!("link rate ({link} Gbit/s)"))
        .legend(|(x, y)| {
            DashedPathElement::new(
                vec![(x, y), (x + LEGEND_LINE, y)],
                6,
                4,
                BLACK.mix(0.75).stroke_width(1),
            )
        });

    draw_legend(&mut chart, SeriesLabelPosition::UpperRight, 17)?;
    Ok(())
}

/// One incast row as the report's JSON carries it.
struct Row {
    flows: f64,
    max_fct_ms: Option<f64>,
    timeouts: u64,
}

fn incast_chart(r: &Report, root: &DrawingArea<BitMapBackend<'_>, Shift>) -> DrawResult {
    root.fill(&WHITE)?;
    let rows = r
        .extra
        .get("incast")
        .and_then(|v| v.as_array())
        .cloned()
        .unwrap_or_default();
    // Transports in first-seen order.
    let mut transports: Vec<(String, Vec<Row>)> = vec![];
    for row in &rows {
        let t = row["transport"].as_str().unwrap_or("?").to_string();
        let Some(flows) = row["flows"].as_f64() else {
            continue;
        };
        let parsed = Row {
            flows,
            max_fct_ms: row["max_fct_us"].as_f64().map(|v| v / 1e3),
            timeouts: row["timeouts"].as_u64().unwrap_or(0),
        };
        match transports.iter_mut().find(|(name, _)| *name == t) {
            Some((_, v)) => v.push(parsed),
            None => transports.push((t, vec![parsed])),
        }
    }
    let all = transports.iter().flat_map(|(_, v)| v.iter());
    let x_max = all.clone().map(|p| p.flows).fold(0.0, f64::max).max(1.0);
    let y_max = all
        .clone()
        .filter_map(|p| p.max_fct_ms)
        .fold(0.0, f64::max)
        .max(0.1)
        * 1.35;

    let size = r.extra.get("response_bytes").and_then(|v| v.as_u64());
    let senders = r.extra.get("senders").and_then(|v| v.as_u64());
    let mut title = format!("{:?}: max flow completion time", r.scenario);
    if let (Some(b), Some(s)) = (size, senders) {
        title.push_str(&format!(
            " ({} kB responses from {s} senders, {} Gbit/s)",
            b / 1000,
            r.link_gbps
        ));
    }
    let mut chart = ChartBuilder::on(root)
        .caption(title, ("sans-serif", 26))
        .margin(20)
        .x_label_area_size(50)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..x_max * 1.08, 0.0..y_max)?;
    draw_mesh(&mut chart, "number of concurrent flows", "max FCT (ms)")?;

    if transports.is_empty() {
        root.draw(&Text::new(
            "no samples and no incast results to plot",
            (450, 340),
            ("sans-serif", 24).into_font(),
        ))?;
        return Ok(());
    }
    for (k, (name, pts)) in transports.iter().enumerate() {
        let c = color(k);
        let done: Vec<(f64, f64)> = pts
            .iter()
            .filter_map(|p| p.max_fct_ms.map(|y| (p.flows, y)))
            .collect();
        let incomplete = pts.iter().filter(|p| p.max_fct_ms.is_none()).count();
        let timeouts: u64 = pts.iter().map(|p| p.timeouts).sum();
        let mut label = name.clone();
        if timeouts > 0 {
            label.push_str(&format!(" ({timeouts} timeouts)"));
        }
        if incomplete > 0 {
            label.push_str(&format!(" ({incomplete} runs incomplete)"));
        }
        chart
            .draw_series(LineSeries::new(done.clone(), c.stroke_width(3)))?
            .label(label)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + LEGEND_LINE, y)], c.stroke_width(3))
            });
        chart.draw_series(done.iter().map(|&p| Circle::new(p, 6, c.filled())))?;
        // Timeout counts next to the points that had any.
        for p in pts.iter().filter(|p| p.timeouts > 0) {
            if let Some(y) = p.max_fct_ms {
                chart.draw_series(std::iter::once(
                    EmptyElement::at((p.flows, y))
                        + Text::new(
                            format!("{} timeouts", p.timeouts),
                            (10, 6),
                            ("sans-serif", 15).into_font().color(&c),
                        ),
                ))?;
            }
        }
    }
    draw_legend(&mut chart, SeriesLabelPosition::UpperLeft, 17)?;
    Ok(())
}
