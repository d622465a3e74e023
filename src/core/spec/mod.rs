//! All settings of the decision model in one validated place (like Knative's autoscaler spec).
//! `PolicySpec` holds the function-wide settings, `TargetSpec` one managed model/NodePool.
//! Validation returns the name of the offending setting so start-up errors can name it.

mod cron;
mod policy;
mod shared_pool;
mod state;
mod target;

pub use cron::parse_cron;
pub use policy::*;
pub use shared_pool::{shared_pool_conflicts, validate_shared_pools};
pub use state::*;
pub use target::*;

#[cfg(test)]
mod tests;
