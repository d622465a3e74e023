//! The replacement of a draining node: extra headroom on the node's NodePool, through the tick's
//! own headroom actuators (`adapters::kube::headroom`), reserved under a drain id so the tick
//! keeps it until the drain is over. The drain id is the instance id: it is known both while the
//! node exists and after it is gone, and it is the same for every notice about that instance, so
//! a redelivered or superseding notice never reserves twice.

use crate::adapters::kube::headroom::{
    release_replacement, replacement_units, reserve_replacement,
};
use crate::core::TargetSpec;
use crate::error::Result;

/// The targets whose headroom lives on `node_pool`. Several targets may share a pool; the
/// replacement goes to the first (by configuration order): one node's worth of warm capacity is
/// what is needed, not one per target.
pub fn target_for_pool<'a>(targets: &'a [TargetSpec], node_pool: &str) -> Option<&'a TargetSpec> {
    targets.iter().find(|t| t.node_pool == node_pool)
}

/// What a request for a replacement did, for the step's log line.
#[derive(Clone, Debug, PartialEq)]
pub enum Requested {
    /// Headroom of this target raised by this many units (false `changed`: already reserved).
    Reserved {
        target: String,
        units: u32,
        changed: bool,
    },
    /// No prewarm target manages the node's NodePool: nothing to raise. The drain then waits for
    /// free capacity in the pool or for its deadline.
    NoTarget { node_pool: Option<String> },
}

pub async fn request(
    client: &kube::Client,
    targets: &[TargetSpec],
    node_pool: Option<&str>,
    node_gpus: u32,
    drain_id: &str,
) -> Result<Requested> {
    let Some(target) = node_pool.and_then(|p| target_for_pool(targets, p)) else {
        return Ok(Requested::NoTarget {
            node_pool: node_pool.map(str::to_string),
        });
    };
    let units = replacement_units(target, node_gpus);
    let r = reserve_replacement(client, target, units, drain_id).await?;
    Ok(Requested::Reserved {
        target: target.name.clone(),
        units,
        changed: r.changed,
    })
}

/// Gives the reservation back. With no NodePool known (the node is gone), every target is asked;
/// releasing a drain id that holds nothing is a no-op. Returns the targets that released.
pub async fn release(
    client: &kube::Client,
    targets: &[TargetSpec],
    node_pool: Option<&str>,
    drain_id: &str,
) -> Vec<Result<String>> {
    let mut out = Vec::new();
    for t in targets
        .iter()
        .filter(|t| node_pool.is_none_or(|p| t.node_pool == p))
    {
        out.push(release_replacement(client, t, drain_id).await.map(|r| {
            format!(
                "{}{}",
                t.name,
                if r.changed { "" } else { " (nothing held)" }
            )
        }));
    }
    out
}
