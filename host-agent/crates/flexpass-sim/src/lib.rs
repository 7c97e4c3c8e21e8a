//! Embedded, deterministic network model for FlexPass: the default target that runs
//! anywhere (no root, no switch), used by the acceptance tests and `flexpass sim`.

pub mod net;
pub mod packet;
pub mod queue;
pub mod report;
pub mod scenarios;

pub use net::{FlowSpec, Impairment, LinkSpec, Network};
pub use queue::{PortConfig, Profile};
pub use report::Report;
pub use scenarios::{run_scenario, Scenario, ScenarioParams, SCENARIOS};
