//! Room in a NodePool's `spec.limits` for its draining nodes' replacements, from the cluster:
//! the pool's nodes (label `karpenter.sh/nodepool`), their capacity and drain state, handed to
//! `core::limits_room` through `LimitsIntent::Room`. The tick writes it with its other NodePool
//! changes every tick; the interruption function writes it at a drain's claim (the next tick may
//! be a minute away and a spot warning gives 120 s) and at each step until the placeholder runs.
//! Both compute the same function of the same cluster state, so they converge.

use std::collections::BTreeMap;

use super::limits::LimitsIntent;
pub use super::nodes::pool_nodes;
use super::{apply_node_pool, read_node_pool, NodePoolOutcome};
use crate::error::Result;

/// Makes (or gives back) the room in NodePool `pool` now, over `cap` (a target's `limits`; None:
/// the user's own `spec.limits`). Touches `spec.limits` and the saved-limits annotation only.
///
/// The NodePool is read before its nodes are listed, never alongside: a drain that claims a node
/// after the list made its room after the read, so the write (guarded by the resourceVersion
/// read) conflicts and is planned again from a fresh list. Listed first, the nodes could miss a
/// claim whose room the NodePool read already holds, and the write would take that room away.
pub async fn sync_room(
    client: &kube::Client,
    pool: &str,
    cap: Option<&BTreeMap<String, String>>,
    now: f64,
) -> Result<NodePoolOutcome> {
    let view = read_node_pool(client, pool).await?;
    let nodes = pool_nodes(client, pool).await?;
    let intent = LimitsIntent::Room {
        cap: cap.cloned(),
        nodes,
        now,
    };
    apply_node_pool(client, &view, &intent, None, false).await
}
