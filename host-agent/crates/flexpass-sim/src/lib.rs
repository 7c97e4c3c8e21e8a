//! Embedded, deterministic network model for FlexPass: the default target that runs
//! anywhere (no root, no switch) and the experiment platform of the project. An experiment
//! is a TOML file (`experiment`): topology (`topology`), switch profile and queues (`queue`),
//! host stacks, traffic and deployment (`traffic`), measurements; `build` turns it into the
//! event-driven model (`net`), `run` (or `convergence`) runs it and `report` turns the
//! finished run into the papers' numbers. `sweep` runs grids of experiments.

pub mod build;
pub mod convergence;
mod events;
pub mod experiment;
pub mod net;
pub mod packet;
pub mod queue;
pub mod report;
pub mod run;
pub mod sweep;
pub mod topology;
pub mod traffic;

pub use build::{prepare, Progress};
pub use experiment::{Experiment, Override, Source};
pub use net::{FlowKind, FlowSpec, Impairment, LinkSpec, Network};
pub use queue::{PortConfig, Profile};
pub use report::RunReport;
pub use run::run;
