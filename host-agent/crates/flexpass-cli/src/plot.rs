//! Throughput-over-time PNG of a run (per flow and per sub-flow), and the figure of a sweep
//! (one panel per metric, one line per series).

use flexpass_sim::net::Sample;
use flexpass_sim::sweep::FigureData;
use flexpass_sim::RunReport;
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

/// Checks `path` (a `.png` file the OS lets us create) before drawing.
fn png_path(path: &Path) -> Result<(), String> {
    match path.extension().and_then(|e| e.to_str()) {
        Some(e) if e.eq_ignore_ascii_case("png") => {}
        _ => return Err(format!("plot path {} must end in .png", path.display())),
    }
    // Surface unwritable paths (missing directory, permissions) with the OS's reason before
    // spending time on drawing.
    std::fs::File::create(path)
        .map(|_| ())
        .map_err(|e| format!("cannot write plot {}: {e}", path.display()))
}

/// Write the throughput plot of run `r` to `path` (a `.png` file).
pub fn throughput_png(r: &RunReport, path: &Path) -> Result<(), String> {
    let fail = |e: &dyn std::fmt::Display| format!("cannot write plot {}: {e}", path.display());
    png_path(path)?;
    if r.samples.is_empty() {
        return Err(format!(
            "{}: no throughput samples to plot (set measure.sample_us)",
            r.experiment
        ));
    }
    let root = BitMapBackend::new(path, SIZE).into_drawing_area();
    throughput_chart(r, &root).map_err(|e| fail(&e))?;
    root.present().map_err(|e| fail(&e))?;
    Ok(())
}

/// Write a sweep's figure to `path`: its panels side by side (two rows beyond three).
pub fn figure_png(f: &FigureData, path: &Path) -> Result<(), String> {
    let fail = |e: &dyn std::fmt::Display| format!("cannot write plot {}: {e}", path.display());
    png_path(path)?;
    let n = f.panels.len().max(1);
    let cols = if n > 3 { n.div_ceil(2) } else { n };
    let rows = n.div_ceil(cols);
    let size = (
        620 * cols as u32,
        520 * rows as u32 + 60 + 40 * u32::from(!f.paper.is_empty()),
    );
    let root = BitMapBackend::new(path, size).into_drawing_area();
    figure_chart(f, &root, rows, cols).map_err(|e| fail(&e))?;
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

fn throughput_chart(r: &RunReport, root: &DrawingArea<BitMapBackend<'_>, Shift>) -> DrawResult {
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
    let link = r
        .bottleneck
        .as_ref()
        .and_then(|b| {
            r.ports
                .iter()
                .find(|p| format!("{}->{}", p.node, p.towards) == b.port)
        })
        .map_or(r.topology.host_gbps, |p| p.link_bps / 1e9);
    let mut data_max = link;
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
        "{}: throughput per flow ({} Gbit/s bottleneck, {:.0} µs samples)",
        r.experiment, link, interval
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

fn figure_chart(
    f: &FigureData,
    root: &DrawingArea<BitMapBackend<'_>, Shift>,
    rows: usize,
    cols: usize,
) -> DrawResult {
    root.fill(&WHITE)?;
    let (top, rest) = root.split_vertically(60);
    top.draw(&Text::new(
        f.title.clone(),
        (20, 18),
        ("sans-serif", 26).into_font(),
    ))?;
    let body = if f.paper.is_empty() {
        rest
    } else {
        let h = rest.dim_in_pixel().1;
        let (body, note) = rest.split_vertically(h - 40);
        note.draw(&Text::new(
            format!("paper: {}", f.paper),
            (20, 10),
            ("sans-serif", 16).into_font().color(&BLACK.mix(0.7)),
        ))?;
        body
    };
    let areas = body.split_evenly((rows, cols));
    if !f.x_categories.is_empty() {
        for (panel, area) in f.panels.iter().zip(areas.iter()) {
            bar_panel(f, panel, area)?;
        }
        return Ok(());
    }
    for (panel, area) in f.panels.iter().zip(areas.iter()) {
        let pts = panel.series.iter().flat_map(|s| s.points.iter());
        let x_min = pts.clone().map(|p| p.0).fold(f64::INFINITY, f64::min);
        let x_max = pts.clone().map(|p| p.0).fold(f64::NEG_INFINITY, f64::max);
        let y_max = pts.clone().map(|p| p.1).fold(0.0, f64::max);
        if !x_min.is_finite() {
            area.draw(&Text::new(
                format!("{}: no data", panel.label),
                (40, 200),
                ("sans-serif", 20).into_font(),
            ))?;
            continue;
        }
        let pad = ((x_max - x_min) * 0.05).max(1e-9);
        // Head-room above the data for the legend.
        let y_top = if y_max > 0.0 {
            y_max * (1.15 + 0.07 * panel.series.len() as f64)
        } else {
            1.0
        };
        // Room for the widest tick label and the axis title.
        let widest = tick(y_top).len().max(tick(y_top / 2.0).len()) as u32;
        let mut chart = ChartBuilder::on(area)
            .margin(15)
            .x_label_area_size(45)
            .y_label_area_size(40 + 9 * widest)
            .build_cartesian_2d(x_min - pad..x_max + pad, 0.0..y_top)?;
        draw_mesh(&mut chart, &f.x_label, &panel.label)?;
        for (k, s) in panel.series.iter().enumerate() {
            let c = color(k);
            chart
                .draw_series(LineSeries::new(s.points.clone(), c.stroke_width(3)))?
                .label(s.name.clone())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + LEGEND_LINE, y)], c.stroke_width(3))
                });
            chart.draw_series(s.points.iter().map(|&p| Circle::new(p, 5, c.filled())))?;
        }
        draw_legend(&mut chart, SeriesLabelPosition::UpperLeft, 15)?;
    }
    Ok(())
}

/// A panel of a figure whose x is categorical (a scheme per group): grouped bars, one per
/// series, the value printed above each.
fn bar_panel(
    f: &FigureData,
    panel: &flexpass_sim::sweep::Panel,
    area: &DrawingArea<BitMapBackend<'_>, Shift>,
) -> DrawResult {
    let n = f.x_categories.len();
    let y_max = panel
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .fold(0.0, f64::max);
    let y_top = if y_max > 0.0 {
        y_max * (1.25 + 0.07 * panel.series.len() as f64)
    } else {
        1.0
    };
    let widest = tick(y_top).len().max(tick(y_top / 2.0).len()) as u32;
    let mut chart = ChartBuilder::on(area)
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(40 + 9 * widest)
        .build_cartesian_2d(-0.5..n as f64 - 0.5, 0.0..y_top)?;
    let cats = f.x_categories.clone();
    chart
        .configure_mesh()
        .x_desc(f.x_label.as_str())
        .y_desc(panel.label.as_str())
        .x_labels(n)
        .x_label_formatter(&|v| {
            let i = v.round();
            if (v - i).abs() < 1e-6 && i >= 0.0 {
                cats.get(i as usize).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        })
        .y_label_formatter(&|v| tick(*v))
        .axis_desc_style(("sans-serif", 20))
        .label_style(("sans-serif", 16))
        .light_line_style(WHITE.mix(0.0))
        .bold_line_style(BLACK.mix(0.08))
        .disable_x_mesh()
        .draw()?;
    let k = panel.series.len().max(1) as f64;
    let width = 0.8 / k;
    for (j, s) in panel.series.iter().enumerate() {
        let c = color(j);
        let x0 = |x: f64| x - 0.4 + j as f64 * width;
        chart
            .draw_series(s.points.iter().map(|&(x, y)| {
                Rectangle::new([(x0(x), 0.0), (x0(x) + width * 0.92, y)], c.filled())
            }))?
            .label(s.name.clone())
            .legend(move |(x, y)| {
                Rectangle::new([(x, y - 6), (x + LEGEND_LINE, y + 6)], c.filled())
            });
        chart.draw_series(s.points.iter().map(|&(x, y)| {
            Text::new(
                tick(y),
                (x0(x), y + y_top * 0.01),
                ("sans-serif", 13).into_font(),
            )
        }))?;
    }
    draw_legend(&mut chart, SeriesLabelPosition::UpperRight, 15)
}
