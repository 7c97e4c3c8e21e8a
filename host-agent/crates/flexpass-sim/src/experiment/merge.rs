//! Where an experiment comes from and how its layers merge into one table: a built-in or a
//! file, the experiment it `extends`, `--set` overrides and the `compat` preset; the table is
//! then parsed into an `Experiment` and validated.

use super::schema::Experiment;
use serde::Serialize;
use std::path::Path;

include!(concat!(env!("OUT_DIR"), "/builtin_experiments.rs"));

/// One `key=value` override (`--set`, and each sweep point).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Override {
    pub key: String,
    pub value: toml::Value,
}

impl Override {
    /// `key=value`, the value in TOML syntax (a bare word is a string).
    pub fn parse(s: &str) -> Result<Self, String> {
        let (k, v) = s
            .split_once('=')
            .ok_or_else(|| format!("--set '{s}': expected KEY=VALUE"))?;
        let key = k.trim().to_string();
        if key.is_empty() {
            return Err(format!("--set '{s}': empty key"));
        }
        let v = v.trim();
        let value = match toml::from_str::<toml::Table>(&format!("v = {v}")) {
            Ok(mut t) => t.remove("v").expect("parsed"),
            Err(_) => toml::Value::String(v.to_string()),
        };
        Ok(Override { key, value })
    }

    fn apply(&self, table: &mut toml::Table) -> Result<(), String> {
        let parts: Vec<&str> = self.key.split('.').collect();
        let mut cur = table;
        for (i, part) in parts.iter().enumerate() {
            let last = i + 1 == parts.len();
            if last {
                cur.insert(part.to_string(), self.value.clone());
                return Ok(());
            }
            let next = cur
                .entry(part.to_string())
                .or_insert_with(|| toml::Value::Table(toml::Table::new()));
            cur = match next {
                toml::Value::Table(t) => t,
                toml::Value::Array(a) => {
                    // key.N.rest: the N-th table of an array of tables.
                    let idx: usize =
                        parts
                            .get(i + 1)
                            .and_then(|n| n.parse().ok())
                            .ok_or_else(|| {
                                format!("'{}': '{part}' is a list: give an index", self.key)
                            })?;
                    let n = a.len();
                    let t = a.get_mut(idx).ok_or_else(|| {
                        format!("'{}': '{part}' has {n} entries, no index {idx}", self.key)
                    })?;
                    let toml::Value::Table(t) = t else {
                        return Err(format!("'{}': '{part}' is not a list of tables", self.key));
                    };
                    if i + 2 == parts.len() {
                        return Err(format!("'{}': a key is missing after the index", self.key));
                    }
                    // Skip the index segment.
                    return Override {
                        key: parts[i + 2..].join("."),
                        value: self.value.clone(),
                    }
                    .apply(t);
                }
                _ => return Err(format!("'{}': '{part}' is not a table", self.key)),
            };
        }
        Ok(())
    }

    /// The value as it reads in a table cell or a directory name.
    pub fn value_text(&self) -> String {
        match &self.value {
            toml::Value::String(s) => s.clone(),
            v => v.to_string(),
        }
    }
}

/// `compat = "ns2-flexpass"`: the FlexPass artifact's choices where they differ from the
/// papers (kaist-ina/ns2-flexpass, scripts/large-scale.tcl; docs/fidelity.md measures what
/// each costs, docs/experiments.md says where each comes from). Parameters (rates, K,
/// thresholds, windows) are not here: the experiment sets them.
pub const COMPAT_NS2: &str = r#"
[host]
tcp_handshake = true
max_cwnd = 180
dctcp_alpha_init = 0.0
flexpass_beta = true
[topology]
routing = "single-path"
[switch]
credit_share_net = true
red_basis = "red"
[measure]
tcp_fct = "acked"
"#;

/// The compat presets by name.
pub const COMPAT_PRESETS: &[(&str, &str)] = &[("ns2-flexpass", COMPAT_NS2)];

/// Put the preset named by the table's `compat` under the table (its own keys win).
fn apply_compat(table: &mut toml::Table) -> Result<(), String> {
    let Some(v) = table.get("compat") else {
        return Ok(());
    };
    let name = v
        .as_str()
        .ok_or_else(|| "compat must be a string".to_string())?;
    let (_, preset) = COMPAT_PRESETS
        .iter()
        .find(|(n, _)| *n == name)
        .ok_or_else(|| {
            let names: Vec<_> = COMPAT_PRESETS.iter().map(|(n, _)| *n).collect();
            format!("compat must be one of {}, got {name:?}", names.join(", "))
        })?;
    let mut merged: toml::Table = toml::from_str(preset).expect("the preset parses");
    merge(&mut merged, std::mem::take(table));
    *table = merged;
    Ok(())
}

/// Where an experiment comes from: a built-in name or a file.
#[derive(Clone, Debug)]
pub struct Source {
    pub name: String,
    pub text: String,
    /// The file, or None for a built-in.
    pub path: Option<std::path::PathBuf>,
}

impl Source {
    /// A built-in experiment by name, or a TOML file.
    pub fn load(name_or_path: &str) -> Result<Self, String> {
        if let Some((name, text)) = BUILTIN.iter().find(|(n, _)| *n == name_or_path) {
            return Ok(Source {
                name: name.to_string(),
                text: text.to_string(),
                path: None,
            });
        }
        let path = Path::new(name_or_path);
        let text = std::fs::read_to_string(path).map_err(|e| {
            let names: Vec<_> = BUILTIN.iter().map(|(n, _)| *n).collect();
            format!(
                "'{name_or_path}' is neither a built-in experiment ({}) nor a readable file: {e}",
                names.join(", ")
            )
        })?;
        Ok(Source {
            name: path
                .file_stem()
                .map_or("experiment".into(), |s| s.to_string_lossy().into_owned()),
            text,
            path: Some(path.to_path_buf()),
        })
    }

    fn label(&self) -> String {
        self.path
            .as_ref()
            .map_or(format!("built-in experiment '{}'", self.name), |p| {
                p.display().to_string()
            })
    }

    /// The file's table with the experiment it `extends` merged under it (recursively).
    fn table(&self, depth: usize) -> Result<toml::Table, String> {
        let mut table: toml::Table =
            toml::from_str(&self.text).map_err(|e| format!("{}: {e}", self.label()))?;
        let Some(base) = table.remove("extends") else {
            return Ok(table);
        };
        let toml::Value::String(base) = base else {
            return Err(format!("{}: extends must be a string", self.label()));
        };
        if depth >= 8 {
            return Err(format!(
                "{}: extends nests more than 8 levels (a cycle?)",
                self.label()
            ));
        }
        // A built-in name, or a path relative to this file.
        let parent = BUILTIN
            .iter()
            .any(|(n, _)| *n == base)
            .then(|| base.clone());
        let parent = parent.unwrap_or_else(|| match &self.path {
            Some(p) => p
                .parent()
                .unwrap_or(Path::new("."))
                .join(&base)
                .display()
                .to_string(),
            None => base.clone(),
        });
        let mut merged = Source::load(&parent)
            .map_err(|e| format!("{}: extends: {e}", self.label()))?
            .table(depth + 1)?;
        merge(&mut merged, table);
        Ok(merged)
    }

    /// The experiment with `overrides` applied, validated.
    pub fn experiment(&self, overrides: &[Override]) -> Result<Experiment, String> {
        let extends =
            toml::from_str::<toml::Table>(&self.text).is_ok_and(|t| t.contains_key("extends"));
        let mut table = self.table(0)?;
        if !extends {
            // Parse the file as written first: its errors carry line and column.
            toml::from_str::<Experiment>(&self.text)
                .map_err(|e| format!("{}: {}", self.label(), e.to_string().trim_end()))?;
        }
        for o in overrides {
            o.apply(&mut table)
                .map_err(|e| format!("{}: --set {e}", self.label()))?;
        }
        apply_compat(&mut table).map_err(|e| format!("{}: {e}", self.label()))?;
        let mut exp: Experiment = serde_path_to_error::deserialize(toml::Value::Table(table))
            .map_err(|e| {
                let (path, inner) = (e.path().to_string(), e.inner().to_string());
                // Errors of [topology] name their key already.
                let error = if inner.starts_with(&format!("{path}.")) {
                    inner
                } else {
                    format!("{path}: {inner}")
                };
                format!(
                    "{} (with --set {}): {error}",
                    self.label(),
                    overrides
                        .iter()
                        .map(|o| format!("{}={}", o.key, o.value_text()))
                        .collect::<Vec<_>>()
                        .join(" "),
                )
            })?;
        if exp.name.is_empty() {
            exp.name = self.name.clone();
        }
        exp.validate()
            .map_err(|e| format!("{}: {e}", self.label()))?;
        Ok(exp)
    }
}

/// Deep merge: `top`'s values replace `base`'s, tables merge key by key.
fn merge(base: &mut toml::Table, top: toml::Table) {
    for (k, v) in top {
        match (base.get_mut(&k), v) {
            (Some(toml::Value::Table(b)), toml::Value::Table(t)) => merge(b, t),
            (_, v) => {
                base.insert(k, v);
            }
        }
    }
}

/// Names of the built-in experiments with their descriptions.
pub fn builtin() -> Vec<(&'static str, String)> {
    BUILTIN
        .iter()
        .map(|(n, text)| {
            let d = toml::from_str::<toml::Table>(text)
                .ok()
                .and_then(|t| {
                    t.get("description")
                        .and_then(|d| d.as_str().map(String::from))
                })
                .unwrap_or_default();
            (*n, d)
        })
        .collect()
}
