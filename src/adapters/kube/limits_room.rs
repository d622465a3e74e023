//! Room in a NodePool's `spec.limits` for its draining nodes' replacements, from the cluster:
//! the pool's nodes (label `karpenter.sh/nodepool`), their capacity and drain state, handed to
//! `core::limits_room` through `LimitsIntent::Room`. The tick writes it with its other NodePool
//! changes every tick; the interruption function writes it at a drain's claim (the next tick may
//! be a minute away and a spot warning gives 120 s). Both compute the same function of the same
//! cluster state, so they converge.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams};

use super::drain::{kube_error, node_pool_of};
use super::nodepool::{apply_node_pool, read_node_pool, NodePoolOutcome};
use super::nodepool_limits::LimitsIntent;
use super::shape::NODEPOOL_LABEL;
use crate::core::interruption::DrainState;
use crate::core::limits_room::PoolNode;
use crate::error::Result;

/// What the room needs of a node. A drain state that cannot be read counts as none (the tick's
/// lease collection reports it).
pub fn pool_node(node: &Node) -> PoolNode {
    let annotations = node.metadata.annotations.clone().unwrap_or_default();
    PoolNode {
        name: node.metadata.name.clone().unwrap_or_default(),
        node_pool: node_pool_of(node).map(str::to_string),
        drain: DrainState::from_annotations(&annotations).ok().flatten(),
        capacity: node
            .status
            .as_ref()
            .and_then(|s| s.capacity.as_ref())
            .map(|c| c.iter().map(|(k, q)| (k.clone(), q.0.clone())).collect())
            .unwrap_or_default(),
    }
}

/// The nodes of `pool`.
pub async fn pool_nodes(client: &kube::Client, pool: &str) -> Result<Vec<PoolNode>> {
    let selector = format!("{NODEPOOL_LABEL}={pool}");
    let nodes = Api::<Node>::all(client.clone())
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(|e| kube_error("list", &format!("nodes of NodePool {pool}"), e))?;
    Ok(nodes.items.iter().map(pool_node).collect())
}

/// Makes (or gives back) the room in NodePool `pool` now, over `cap` (a target's `limits`; None:
/// the user's own `spec.limits`). Touches `spec.limits` and the saved-limits annotation only.
pub async fn sync_room(
    client: &kube::Client,
    pool: &str,
    cap: Option<&BTreeMap<String, String>>,
    now: f64,
) -> Result<NodePoolOutcome> {
    let (view, nodes) = futures::try_join!(read_node_pool(client, pool), pool_nodes(client, pool))?;
    let intent = LimitsIntent::Room {
        cap: cap.cloned(),
        nodes,
        now,
    };
    apply_node_pool(client, &view, &intent, None, false).await
}
