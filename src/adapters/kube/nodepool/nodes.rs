//! The nodes of a NodePool as the limits room needs them (`core::limits_room::PoolNode`): their
//! capacity and drain state. Read by the tick and at a drain's claim (`limits_room`), and again
//! by every NodePool write that retries after a conflict (`nodepool::apply_node_pool`): the
//! conflicting writer may be another drain that has just claimed a node of the pool.

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams};

use crate::adapters::kube::api_error::api_failure;
use crate::adapters::kube::shape::{node_pool_of, NODEPOOL_LABEL};
use crate::core::interruption::DrainState;
use crate::core::limits_room::PoolNode;
use crate::error::Result;

/// What the room needs of a node. A drain state that cannot be read counts as none (the tick's
/// reservation collection reports it).
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
        .map_err(|e| api_failure("list", &format!("nodes of NodePool {pool}"), e))?;
    Ok(nodes.items.iter().map(pool_node).collect())
}
