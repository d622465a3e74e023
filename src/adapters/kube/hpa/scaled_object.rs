//! The floor of a KEDA-managed workload: an HPA owned by a KEDA ScaledObject is rewritten by
//! KEDA's operator from the ScaledObject (`minReplicaCount` becomes the HPA's `minReplicas`), so
//! a raise written on the HPA would be undone at KEDA's next reconcile. prewarm drives
//! `spec.minReplicaCount` of the owning ScaledObject instead, with the same lease as on an HPA
//! (`hpa::floor`): the user's value saved in `prewarm.io/user-min-replicas` on the ScaledObject,
//! restored exactly, a user's edit made while raised kept, never above `maxReplicaCount`.
//!
//! KEDA's defaults (keda.sh/v1alpha1 ScaledObject CRD, v2.21): `minReplicaCount` 0 and
//! `maxReplicaCount` 100 when absent. A ScaledObject without `minReplicaCount` gets an explicit
//! `minReplicaCount: 0` back on restore (KEDA's default, the same behaviour). Reading and writing
//! needs `get` and `patch` on `scaledobjects.keda.sh` in the workload's namespace
//! (infra/helm/prewarm/permissions.yaml).

use crate::core::floor::FloorView;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};

/// KEDA's defaults when the fields are absent.
pub const DEFAULT_MIN: u32 = 0;
pub const DEFAULT_MAX: u32 = 100;
/// The field prewarm writes.
pub const FIELD: &str = "minReplicaCount";

/// `keda.sh/v1alpha1` ScaledObject.
pub fn resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("keda.sh", "v1alpha1", "ScaledObject"),
        "scaledobjects",
    )
}

/// The ScaledObject's view for `plan_floor`.
pub fn floor_view(so: &DynamicObject) -> FloorView {
    let count = |field: &str, default: u32| {
        so.data["spec"][field]
            .as_u64()
            .map_or(default, |v| u32::try_from(v).unwrap_or(u32::MAX))
    };
    FloorView {
        min_replicas: count("minReplicaCount", DEFAULT_MIN),
        max_replicas: count("maxReplicaCount", DEFAULT_MAX),
        annotations: so.metadata.annotations.clone().unwrap_or_default(),
        keda_owner: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn so(spec: Value, annotations: Value) -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
            "metadata": {"name": "llama", "namespace": "ml", "annotations": annotations},
            "spec": spec
        }))
        .unwrap()
    }

    #[test]
    fn view_takes_kedas_defaults_for_absent_counts() {
        let target = json!({"name": "llama"});
        // (spec, min, max) - KEDA's defaults by hand: 0 and 100.
        let cases = [
            (json!({"scaleTargetRef": target}), 0, 100),
            (
                json!({"scaleTargetRef": target, "minReplicaCount": 2}),
                2,
                100,
            ),
            (
                json!({"scaleTargetRef": target, "minReplicaCount": 1, "maxReplicaCount": 8}),
                1,
                8,
            ),
        ];
        for (spec, min, max) in cases {
            let v = floor_view(&so(spec.clone(), json!({"team": "ml"})));
            assert_eq!((v.min_replicas, v.max_replicas), (min, max), "{spec}");
            assert_eq!(v.annotations.get("team").map(String::as_str), Some("ml"));
            assert_eq!(v.keda_owner, None);
        }
    }
}
