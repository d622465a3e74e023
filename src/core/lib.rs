//! The pure core: no tokio, kube or AWS imports (its Cargo.toml has none). Everything here is a
//! function of its inputs, with the current time passed in as seconds since the Unix epoch
//! (`now: f64`).
//!
//! - [`policy`]: the tick's decision, one file per stage.
//! - [`spec`]: every setting of the decision model, validated in one place.
//! - [`interruption`]: notice kinds, deadlines and drain planning.
//! - [`limits_room`], [`quantity`]: NodePool limits room for drains, in exact Kubernetes quantities.
//! - [`node_index`]: which node holds an instance, without a full node list per notice.
//! - [`lead`]: lead times learned from NodeClaims and pods, and the horizon they give.
//! - [`floor`]: the HPA (or KEDA ScaledObject) floor prewarm raises, as a lease.
//! - [`lease`]: the lease prewarm holds on a field of a user's object (save, write, keep an edit,
//!   give back), one decision for every such field.
//! - [`cloudwatch_periods`]: CloudWatch's period arithmetic and the publish intervals a step can
//!   be read at (checked at start-up by the config, used by the CloudWatch source).

pub mod cloudwatch_periods;
pub mod floor;
pub mod interruption;
pub mod lead;
pub mod lease;
pub mod limits_room;
pub mod names;
pub mod node_index;
pub mod policy;
pub mod quantity;
pub mod spec;
#[cfg(test)]
mod test_util;

pub use policy::decide;
pub use policy::observation::{Observation, Sample};
pub use policy::plan::{Action, Plan, Reason};
pub use spec::{HeadroomKind, HeadroomState, PolicySpec, ServerKind, TargetSpec};
