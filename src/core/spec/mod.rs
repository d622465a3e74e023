//! All settings of the decision model in one validated place (like Knative's autoscaler spec).
//! `PolicySpec` holds the function-wide settings, `TargetSpec` one managed model/NodePool.
//! Validation returns the name of the offending setting so start-up errors can name it.

mod policy;
mod state;
mod target;

pub use policy::*;
pub use state::*;
pub use target::*;

#[cfg(test)]
mod tests;
