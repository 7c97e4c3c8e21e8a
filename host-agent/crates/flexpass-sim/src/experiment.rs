//! Experiments are data: one TOML file describes the topology, switches, host stacks,
//! traffic, deployment and measurements of a run, and optionally a sweep (a grid of runs)
//! and the figure drawn from it. The schema is documented in docs/experiments.md; every
//! key is checked (unknown keys and bad values are errors that name the key).
//!
//! Built-in experiments are the files of host-agent/experiments/, compiled into the binary:
//! `flexpass sim incast` is `flexpass sim host-agent/experiments/incast.toml`.
//!
//! `schema`: the tables as types; `topology`: the `[topology]` table, one spec per kind;
//! `merge`: sources, `extends`, `--set` and presets merged into one table and parsed;
//! `validate`: the checks serde cannot express.

mod host_transports;
mod merge;
mod schema;
#[cfg(test)]
mod tests;
mod topology;
mod validate;

pub use merge::{builtin, Override, Source, BUILTIN, COMPAT_NS2, COMPAT_PRESETS};
pub use schema::{
    ConvergenceSpec, DeploymentSpec, Experiment, FaultKind, FaultSpec, FigureSpec, FlashPassSpec,
    FlowEntry, FlowTransport, ForegroundSpec, HostRef, HostSpec, ImpairmentSpec, IncastEntry,
    MeasureSpec, PFabricSpec, PanelSpec, PaseSpec, PptSpec, SweepSpec, SwitchSpec, TraceSpec,
    WorkloadSpec,
};
pub use topology::{
    Clos3Spec, CommonKeys, DumbbellSpec, LeafSpineSpec, ParkingLotSpec, StarSpec, ThreeDcSpec,
    TopologyKind, TopologySpec,
};
pub use validate::resolve_hosts;
