//! A sweep's runs (its points) and what it makes of them: the summary table and the
//! figure's data.

use crate::experiment::{Experiment, FigureSpec, Override};
use crate::report::metric;
use serde::Serialize;
use serde_json::Value;

/// The runs of a sweep: every case combined with every grid point (one run without a sweep).
pub fn sweep_points(exp: &Experiment) -> Vec<Vec<Override>> {
    let Some(s) = &exp.sweep else {
        return vec![vec![]];
    };
    let cases: Vec<Vec<Override>> = if s.cases.is_empty() {
        vec![vec![]]
    } else {
        s.cases
            .iter()
            .map(|c| {
                c.iter()
                    .map(|(k, v)| Override {
                        key: k.clone(),
                        value: v.clone(),
                    })
                    .collect()
            })
            .collect()
    };
    let mut points = cases;
    for (k, values) in &s.grid {
        let mut next = vec![];
        for p in &points {
            for v in values {
                let mut q = p.clone();
                q.push(Override {
                    key: k.clone(),
                    value: v.clone(),
                });
                next.push(q);
            }
        }
        points = next;
    }
    points
}

/// A sweep point's name: "key=value,key=value" with characters unsafe in file names replaced.
pub fn point_id(point: &[Override]) -> String {
    if point.is_empty() {
        return "run".into();
    }
    point
        .iter()
        .map(|o| format!("{}={}", o.key, o.value_text()))
        .collect::<Vec<_>>()
        .join(",")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "=,.-_".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// A finished run of a sweep: its overrides and its report as JSON.
pub struct Finished {
    pub point: Vec<Override>,
    pub report: Value,
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => match n.as_f64() {
            Some(f) if f.fract() != 0.0 => format!("{f:.4}")
                .trim_end_matches('0')
                .trim_end_matches('.')
                .to_string(),
            _ => n.to_string(),
        },
        Value::Null => "-".into(),
        v => v.to_string(),
    }
}

/// The value of a sweep key in a run: its override, else the report or the experiment.
fn lookup(run: &Finished, key: &str) -> Option<Value> {
    run.point
        .iter()
        .find(|o| o.key == key)
        .map(|o| serde_json::to_value(&o.value).expect("TOML values are JSON"))
        .or_else(|| metric(&run.report, key))
}

/// Columns of the summary table: the sweep's keys that vary, then its `columns` (or a
/// default set of metrics).
pub fn columns(exp: &Experiment) -> Vec<String> {
    let mut cols: Vec<String> = vec![];
    if let Some(s) = &exp.sweep {
        for c in &s.cases {
            for k in c.keys() {
                if !cols.contains(k) {
                    cols.push(k.clone());
                }
            }
        }
        for k in s.grid.keys() {
            if !cols.contains(k) {
                cols.push(k.clone());
            }
        }
        if !s.columns.is_empty() {
            cols.extend(
                s.columns
                    .iter()
                    .filter(|c| !cols.contains(c))
                    .cloned()
                    .collect::<Vec<_>>(),
            );
            return cols;
        }
    }
    cols.extend(
        [
            "fct.overall.all.avg_us",
            "fct.overall.small.p99_us",
            "fct.overall.incomplete",
            "timeouts",
            "data_drops_full",
            "data_drops_red",
            "paths.mismatches",
        ]
        .map(String::from),
    );
    cols
}

/// The summary table: a header and one row per run.
pub fn table(cols: &[String], runs: &[Finished]) -> Vec<Vec<String>> {
    let mut out = vec![cols.to_vec()];
    for r in runs {
        out.push(
            cols.iter()
                .map(|c| lookup(r, c).map_or("-".into(), |v| text(&v)))
                .collect(),
        );
    }
    out
}

/// CSV of a table (fields with commas or quotes are quoted).
pub fn csv(rows: &[Vec<String>]) -> String {
    let mut s = String::new();
    for r in rows {
        let cells: Vec<String> = r
            .iter()
            .map(|c| {
                if c.contains(',') || c.contains('"') {
                    format!("\"{}\"", c.replace('"', "\"\""))
                } else {
                    c.clone()
                }
            })
            .collect();
        s.push_str(&cells.join(","));
        s.push('\n');
    }
    s
}

/// Aligned text of a table.
pub fn aligned(rows: &[Vec<String>]) -> String {
    let n = rows.iter().map(|r| r.len()).max().unwrap_or(0);
    let w: Vec<usize> = (0..n)
        .map(|i| {
            rows.iter()
                .map(|r| r.get(i).map_or(0, |c| c.chars().count()))
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut s = String::new();
    for r in rows {
        let line: Vec<String> = r
            .iter()
            .enumerate()
            .map(|(i, c)| format!("{c:>width$}", width = w[i]))
            .collect();
        s.push_str("  ");
        s.push_str(line.join("  ").trim_end());
        s.push('\n');
    }
    s
}

#[derive(Clone, Debug, Serialize)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Panel {
    pub y: String,
    pub label: String,
    pub series: Vec<Series>,
}

#[derive(Clone, Debug, Serialize)]
pub struct FigureData {
    pub name: String,
    pub title: String,
    pub x_label: String,
    pub paper: String,
    pub panels: Vec<Panel>,
    /// A sweep key whose values are not numbers (a scheme's name) is a categorical x axis:
    /// x is the index of the value here, in the order the runs first show it; empty for a
    /// numeric x.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub x_categories: Vec<String>,
}

/// The figure's lines: per panel, one series per value of `series`, points (x, y) sorted by
/// x; runs without the metric are left out. An x key whose values are not all numbers is
/// categorical (`FigureData::x_categories`).
pub fn figure(fig: &FigureSpec, runs: &[Finished]) -> Result<FigureData, String> {
    let mut panels = vec![];
    let xs: Vec<Option<Value>> = runs.iter().map(|r| lookup(r, &fig.x)).collect();
    let mut x_categories: Vec<String> = vec![];
    if xs.iter().all(Option::is_some) && xs.iter().flatten().any(|v| !v.is_number()) {
        for t in xs.iter().flatten().map(text) {
            if !x_categories.contains(&t) {
                x_categories.push(t);
            }
        }
    }
    for p in &fig.panels {
        let mut series: Vec<Series> = vec![];
        for r in runs {
            let selected = p.filter.iter().all(|(k, want)| {
                let want = serde_json::to_value(want).expect("TOML values are JSON");
                lookup(r, k).is_some_and(|v| v == want || text(&v) == text(&want))
            });
            if !selected {
                continue;
            }
            let x = if x_categories.is_empty() {
                lookup(r, &fig.x)
                    .and_then(|v| v.as_f64())
                    .ok_or_else(|| format!("figure.x '{}' is not a number in every run", fig.x))?
            } else {
                let t = lookup(r, &fig.x).map_or("-".into(), |v| text(&v));
                x_categories.iter().position(|c| *c == t).expect("listed") as f64
            };
            let name = match &fig.series {
                Some(k) => lookup(r, k).map_or("-".into(), |v| text(&v)),
                None => p.label.clone(),
            };
            let Some(y) = metric(&r.report, &p.y).and_then(|v| v.as_f64()) else {
                continue;
            };
            let x = if x_categories.is_empty() {
                x * fig.x_scale
            } else {
                x
            };
            let pt = (x, y * p.scale);
            match series.iter_mut().find(|s| s.name == name) {
                Some(s) => s.points.push(pt),
                None => series.push(Series {
                    name,
                    points: vec![pt],
                }),
            }
        }
        for s in &mut series {
            s.points.sort_by(|a, b| a.0.total_cmp(&b.0));
            if let Some(at) = p.normalize_at {
                let base = s
                    .points
                    .iter()
                    .find(|q| (q.0 - at * fig.x_scale).abs() < 1e-9)
                    .map(|q| q.1);
                match base {
                    Some(b) if b != 0.0 => s.points.iter_mut().for_each(|q| q.1 /= b),
                    _ => {
                        return Err(format!(
                            "figure panel '{}': series '{}' has no non-zero value at x = {at} to normalise by",
                            p.y, s.name
                        ))
                    }
                }
            }
        }
        panels.push(Panel {
            y: p.y.clone(),
            label: p.label.clone(),
            series,
        });
    }
    Ok(FigureData {
        name: fig.name.clone(),
        title: fig.title.clone(),
        x_label: fig.x_label.clone(),
        paper: fig.paper.clone(),
        panels,
        x_categories,
    })
}

/// The figure's data as CSV: panel, series, x, y.
pub fn figure_csv(f: &FigureData) -> String {
    let mut rows = vec![vec![
        "panel".to_string(),
        "series".into(),
        "x".into(),
        "y".into(),
    ]];
    for p in &f.panels {
        for s in &p.series {
            for (x, y) in &s.points {
                let x = match f.x_categories.get(x.round() as usize) {
                    Some(c) if !f.x_categories.is_empty() => c.clone(),
                    _ => format!("{x}"),
                };
                rows.push(vec![p.y.clone(), s.name.clone(), x, format!("{y}")]);
            }
        }
    }
    csv(&rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::{Source, BUILTIN};

    const STAR: &str = "[topology]\nkind = \"star\"\nhosts = 3\n[[flow]]\nsrc = 1\ndst = 0\n";

    fn src(text: &str) -> Source {
        Source {
            name: "t".into(),
            text: text.into(),
            path: None,
        }
    }

    #[test]
    fn every_builtin_experiment_parses_and_validates() {
        for (name, _) in BUILTIN {
            let s = Source::load(name).unwrap();
            let e = s.experiment(&[]).unwrap_or_else(|e| panic!("{name}: {e}"));
            for p in sweep_points(&e) {
                s.experiment(&p)
                    .unwrap_or_else(|e| panic!("{name} {p:?}: {e}"));
            }
        }
    }

    #[test]
    fn sweeps_combine_cases_and_grid() {
        let text = format!(
            "{STAR}\n[sweep]\ngrid = {{ \"switch.w_q\" = [0.25, 0.5], \"seed\" = [1, 2, 3] }}\ncases = [{{ \"host.alpha\" = 1.0 }}, {{ \"host.alpha\" = 0.5 }}]\n"
        );
        let e = src(&text).experiment(&[]).unwrap();
        let pts = sweep_points(&e);
        assert_eq!(pts.len(), 12);
        assert_eq!(point_id(&pts[0]), "host.alpha=1.0,seed=1,switch.w_q=0.25");
    }

    fn run(name: &str, avg: f64) -> Finished {
        Finished {
            point: vec![Override::parse(&format!("name={name}")).unwrap()],
            report: serde_json::json!({ "fct": { "avg": avg }, "params": { "load": 0.5 } }),
        }
    }

    #[test]
    fn a_categorical_x_axis_numbers_its_values_in_order() {
        let fig: FigureSpec = toml::from_str(
            "name = \"f\"\ntitle = \"t\"\nx = \"name\"\n[[panel]]\ny = \"fct.avg\"\nlabel = \"avg\"\n",
        )
        .unwrap();
        let runs = [run("dctcp", 3.0), run("ppt", 1.0), run("dctcp", 3.0)];
        let f = figure(&fig, &runs).unwrap();
        assert_eq!(f.x_categories, ["dctcp", "ppt"]);
        assert_eq!(f.panels[0].series[0].points[..2], [(0.0, 3.0), (0.0, 3.0)]);
        assert_eq!(f.panels[0].series[0].points[2], (1.0, 1.0));
        let csv = figure_csv(&f);
        assert!(csv.lines().nth(3).unwrap().contains(",ppt,"), "{csv}");
        // A numeric x stays numeric.
        let fig: FigureSpec = toml::from_str(
            "name = \"f\"\ntitle = \"t\"\nx = \"params.load\"\nx_scale = 100\n[[panel]]\ny = \"fct.avg\"\nlabel = \"avg\"\n",
        )
        .unwrap();
        let f = figure(&fig, &runs).unwrap();
        assert!(f.x_categories.is_empty());
        assert_eq!(f.panels[0].series[0].points[0], (50.0, 3.0));
    }
}
