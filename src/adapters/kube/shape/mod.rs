//! Pure shaping on Kubernetes types: a drain's replacement placeholder from the pods it moves
//! (their scheduling constraints and resource requests), and label selectors. No API calls here.

pub mod constraints;
pub mod owners;
pub mod placeholder;
pub mod requests;
pub mod selector;

/// The taint prewarm puts on a draining node (value: the notice kind).
pub const DRAINING_TAINT: &str = "prewarm.io/draining";
pub const NODEPOOL_LABEL: &str = "karpenter.sh/nodepool";

/// The NodePool a node belongs to (its `karpenter.sh/nodepool` label).
pub fn node_pool_of(node: &k8s_openapi::api::core::v1::Node) -> Option<&str> {
    node.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(NODEPOOL_LABEL))
        .map(String::as_str)
}

/// The capacity reservation a node was launched into, as the AWS provider of Karpenter labels
/// it (`LabelCapacityReservationID` in aws/karpenter-provider-aws `pkg/apis/v1/labels.go`).
pub const CAPACITY_RESERVATION_LABEL: &str = "karpenter.k8s.aws/capacity-reservation-id";
