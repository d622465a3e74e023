//! Finding an instance's node through the warm container's index (`core::node_index`): a GET by
//! name on a hit (its providerID checked), one node list per window on a miss, shared by every
//! record of the container. The decisions are the index's; this only calls the apiserver. The
//! list runs under the index's lock, so concurrent records that miss together cost one list.

use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::api::Api;
use tokio::sync::Mutex;

use super::{api_failure, instance_of_node, list_nodes};
use crate::core::node_index::{Lookup, NodeIndex};
use crate::error::Result;

/// The node index of one warm container (the interruption handler holds one).
#[derive(Debug, Default)]
pub struct NodeFinder {
    index: Mutex<NodeIndex>,
}

/// Enough steps for the longest path: a stale hit, the wait for the window, a list, the GET of the
/// name it found.
const MAX_LOOKUPS: usize = 6;

impl NodeFinder {
    /// How many full node lists the index was built from so far.
    pub async fn lists(&self) -> u64 {
        self.index.lock().await.lists()
    }

    /// The node of `instance` for a record sent at `sent`, or None when it is not in this
    /// cluster. A miss inside the relist window waits for its end (at most
    /// `core::node_index::MIN_RELIST_S`).
    pub async fn find(
        &self,
        client: &kube::Client,
        instance: &str,
        sent: f64,
        clock: &impl Fn() -> f64,
    ) -> Result<Option<Node>> {
        let nodes: Api<Node> = Api::all(client.clone());
        let mut next = self.index.lock().await.lookup(instance, sent, clock());
        for _ in 0..MAX_LOOKUPS {
            next = match next {
                Lookup::NotHere => return Ok(None),
                Lookup::Get(name) => {
                    let got = nodes
                        .get_opt(&name)
                        .await
                        .map_err(|e| api_failure("get", &format!("node {name}"), e))?;
                    match got {
                        Some(node) if instance_of_node(&node).as_deref() == Some(instance) => {
                            return Ok(Some(node))
                        }
                        // Gone, or the name now holds another instance.
                        _ => self.index.lock().await.stale(instance, sent, clock()),
                    }
                }
                Lookup::Wait { at } => {
                    tokio::time::sleep(Duration::from_secs_f64((at - clock()).clamp(0.0, 60.0)))
                        .await;
                    self.index.lock().await.lookup(instance, sent, clock())
                }
                Lookup::List => {
                    let mut index = self.index.lock().await;
                    // Another record may have listed while this one waited for the lock.
                    match index.lookup(instance, sent, clock()) {
                        Lookup::List => {
                            let started = clock();
                            let listed = list_nodes(client).await?;
                            index.refreshed(
                                listed.iter().filter_map(|n| {
                                    Some((instance_of_node(n)?, n.metadata.name.clone()?))
                                }),
                                started,
                            );
                            index.lookup(instance, sent, clock())
                        }
                        other => other,
                    }
                }
            };
        }
        Err(crate::error::Error::conflict(
            "get",
            format!("node of {instance}"),
            "the node index kept changing under this lookup".to_string(),
        ))
    }
}
