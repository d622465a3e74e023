//! The pure core: no tokio, kube or AWS imports. Everything here is a function of its inputs,
//! with the current time passed in as seconds since the Unix epoch (`now: f64`).

pub mod forecast;
pub mod interruption;
pub mod plan;
pub mod policy;
pub mod rails;
pub mod signal;
pub mod signals;
pub mod sizing;
pub mod spec;

pub use plan::{Action, Plan, Reason};
pub use policy::decide;
pub use signal::{Observation, Sample};
pub use spec::{HeadroomKind, HeadroomState, PolicySpec, ServerKind, TargetSpec};
