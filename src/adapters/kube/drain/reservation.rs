//! The instances of a capacity reservation, as this cluster knows them: the nodes Karpenter
//! labelled with the reservation's id. A Capacity Block warning names its reservation, not its
//! instances; this is how the handler turns it into instances to drain. (Changes when the label
//! or how a node names its instance does.)

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams};

use super::{api_failure, instance_of_node};
use crate::adapters::kube::shape::CAPACITY_RESERVATION_LABEL;
use crate::error::Result;

/// The label selector of the nodes launched into `reservation_id`.
pub fn reservation_selector(reservation_id: &str) -> String {
    format!("{CAPACITY_RESERVATION_LABEL}={reservation_id}")
}

/// The instance ids of the nodes labelled with `reservation_id`, sorted and each once. Nodes without a
/// providerID (not registered yet) are left out: nothing can find them by instance either.
pub async fn reservation_instances(
    client: &kube::Client,
    reservation_id: &str,
) -> Result<Vec<String>> {
    let nodes = Api::<Node>::all(client.clone())
        .list(&ListParams::default().labels(&reservation_selector(reservation_id)))
        .await
        .map_err(|e| api_failure("list", "nodes", e))?
        .items;
    Ok(instances_of(&nodes))
}

/// The instance ids of `nodes`, sorted and each once (pure: the offline replay takes the
/// reservation's instances from a captured state with it).
pub fn instances_of(nodes: &[Node]) -> Vec<String> {
    let mut ids: Vec<String> = nodes.iter().filter_map(instance_of_node).collect();
    ids.sort();
    ids.dedup();
    ids
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(provider_id: Option<&str>) -> Node {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "n"},
            "spec": provider_id.map(|p| serde_json::json!({"providerID": p})).unwrap_or_default(),
        }))
        .unwrap()
    }

    #[test]
    fn instances_sorted_once_without_unregistered_nodes() {
        let nodes = [
            node(Some("aws:///us-east-1a/i-0bbb0000000000000")),
            node(None),
            node(Some("aws:///us-east-1b/i-0aaa0000000000000")),
            node(Some("aws:///us-east-1a/i-0bbb0000000000000")),
        ];
        // By hand: the two ids, sorted, the duplicate and the node without providerID dropped.
        assert_eq!(
            instances_of(&nodes),
            ["i-0aaa0000000000000", "i-0bbb0000000000000"]
        );
        assert_eq!(
            reservation_selector("cr-0abc9999999999999"),
            "karpenter.k8s.aws/capacity-reservation-id=cr-0abc9999999999999"
        );
    }
}
