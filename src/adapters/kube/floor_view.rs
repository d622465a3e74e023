//! The floor a lease works on, read from an HPA (`hpa_floor::floor_view`) or from the KEDA
//! ScaledObject that owns one (`scaled_object::floor_view`).

use std::collections::BTreeMap;

/// The HPA as the floor logic needs it.
#[derive(Clone, Debug, PartialEq)]
pub struct FloorView {
    pub min_replicas: u32,
    pub max_replicas: u32,
    pub annotations: BTreeMap<String, String>,
    pub keda_owner: Option<String>,
}
