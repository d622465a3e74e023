//! The pure core: no tokio, kube or AWS imports. Everything here is a function of its inputs,
//! with the current time passed in as seconds since the Unix epoch (`now: f64`).

pub mod band;
pub mod fast_path;
pub mod forecast;
pub mod hpa_sizing;
pub mod interruption;
pub mod limits_room;
pub mod next_step;
pub mod plan;
pub mod policy;
pub mod quantity;
pub mod rails;
pub mod schedule;
pub mod seasonal;
pub mod signal;
pub mod signals;
pub mod sizing;
pub mod spec;

pub use plan::{Action, Plan, Reason};
pub use policy::decide;
pub use signal::{Observation, Sample};
pub use spec::{HeadroomKind, HeadroomState, PolicySpec, ServerKind, TargetSpec};
