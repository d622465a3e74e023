//! Warm replicas, not only warm nodes: for targets with `hpa.raiseMinReplicas`, prewarm raises
//! the workload HPA's `spec.minReplicas` ahead of forecast demand, so model load is out of the
//! request path too, and gives the user's value back afterwards.
//!
//! The raise is a lease kept in annotations on the HPA; its rules are the core's
//! (`core::floor::plan_floor`, and `core::floor::plan_beside_surge` beside a
//! drain's surge). This file reads the object and writes what they say. An HPA owned by a KEDA
//! ScaledObject (an owner reference of kind ScaledObject, keda.sh) is driven through the
//! ScaledObject's `spec.minReplicaCount` instead (`scaled_object`), with the same lease and
//! annotations on the ScaledObject: KEDA rewrites the HPA from it, so a raise written on the HPA
//! would be undone. A drain's surge raises the same floor through the same object
//! (`FloorObject`), its record beside the lease.
//!
//! Writes are JSON merge patches with the `resourceVersion` read (409 on a concurrent change)
//! under the field manager `prewarm-hpa-floor`. GitOps: Argo CD needs an `ignoreDifferences`
//! entry for `/spec/minReplicas` of the HPA plus `RespectIgnoreDifferences=true` in the sync
//! options, or it reverts the raise on every sync; with Flux the field must not be in Git (leave
//! `minReplicas` out of the manifest or patch it out with a Kustomization), otherwise the same.

use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use serde_json::{json, Value};

use super::scaled_object;
use crate::adapters::kube::api_error::from_kube;
pub use crate::core::floor::{
    plan_beside_surge, FloorIntent, FloorPatch, FloorView, LEASE_UNTIL, RAISED_MIN, USER_MIN,
};
use crate::core::lease::LeaseOutcome;
use crate::core::spec::HpaRef;
use crate::error::{Error, Result};

pub const FIELD_MANAGER: &str = "prewarm-hpa-floor";

/// The HPA's view for `plan_floor`.
pub fn floor_view(hpa: &HorizontalPodAutoscaler) -> FloorView {
    let spec = hpa.spec.as_ref();
    let keda_owner = hpa
        .metadata
        .owner_references
        .as_ref()
        .and_then(|owners| {
            owners
                .iter()
                .find(|o| o.kind == "ScaledObject" && o.api_version.starts_with("keda.sh/"))
        })
        .map(|o| o.name.clone());
    FloorView {
        min_replicas: spec
            .and_then(|s| s.min_replicas)
            .map_or(1, |v| u32::try_from(v).unwrap_or(1)),
        max_replicas: spec.map_or(0, |s| u32::try_from(s.max_replicas).unwrap_or(0)),
        annotations: hpa.metadata.annotations.clone().unwrap_or_default(),
        keda_owner,
    }
}

/// The JSON merge patch of a floor change, conditional on `resource_version`; the floor is
/// `spec.<field>` (`minReplicas` on an HPA, `minReplicaCount` on a KEDA ScaledObject).
pub fn floor_patch_body(patch: &FloorPatch, resource_version: &str, field: &str) -> Value {
    let annotations: serde_json::Map<String, Value> = patch
        .annotations
        .iter()
        .map(|(k, v)| (k.clone(), v.clone().map_or(Value::Null, Value::String)))
        .collect();
    let mut body = json!({
        "metadata": {"resourceVersion": resource_version, "annotations": annotations}
    });
    if let Some(min) = patch.min_replicas {
        body["spec"] = json!({ field: min });
    }
    body
}

/// Reads the HPA, plans the floor and writes it (unless `dry_run`). Returns the outcome.
pub async fn apply_floor(
    client: &kube::Client,
    r: &HpaRef,
    intent: FloorIntent,
    now: f64,
    lease_s: f64,
    dry_run: bool,
) -> Result<LeaseOutcome> {
    Ok(plan_and_apply(client, r, intent, now, lease_s, dry_run)
        .await?
        .patch
        .outcome)
}

/// What one floor step did: the change (written, or dry, would be) and the object it is on.
#[derive(Clone, Debug, PartialEq)]
pub struct FloorChange {
    pub patch: FloorPatch,
    /// `hpa ns/name`, or `scaledobject ns/name` for a KEDA-owned HPA.
    pub object: String,
}

/// `apply_floor`, returning the whole change, for callers that report it (`prewarm restore`).
/// A KEDA-owned HPA is driven through its ScaledObject (module docs).
pub async fn plan_and_apply(
    client: &kube::Client,
    r: &HpaRef,
    intent: FloorIntent,
    now: f64,
    lease_s: f64,
    dry_run: bool,
) -> Result<FloorChange> {
    let on = read_floor_object(client, &r.namespace, &r.name).await?;
    // A drain's surge (`drain::surge`) holds this floor too, its record on the same object.
    let patch = on.plan_beside_surge(intent, now, lease_s)?;
    if !dry_run && (patch.min_replicas.is_some() || !patch.annotations.is_empty()) {
        on.write(&on.patch_body(&patch)).await?;
    }
    Ok(FloorChange {
        patch,
        object: on.object,
    })
}

/// The object a workload's floor is written on, as read: the HPA itself, or the KEDA
/// ScaledObject that owns it (KEDA rewrites the HPA from it). The tick's floor, `prewarm
/// restore` and a drain's surge all go through here, so none of them writes an HPA that KEDA
/// would overwrite.
pub struct FloorObject {
    api: Api<DynamicObject>,
    /// The object's name (the HPA's, or the ScaledObject's).
    pub name: String,
    pub view: FloorView,
    pub resource_version: String,
    /// `HorizontalPodAutoscaler` or `ScaledObject`.
    pub kind: &'static str,
    /// `namespace/name`.
    pub display: String,
    /// `hpa ns/name` or `scaledobject ns/name`, for reports.
    pub object: String,
    /// The floor field: `minReplicas` or `minReplicaCount`.
    pub field: &'static str,
}

/// Reads HPA `namespace/name` and, when a KEDA ScaledObject owns it, that ScaledObject.
pub async fn read_floor_object(
    client: &kube::Client,
    namespace: &str,
    name: &str,
) -> Result<FloorObject> {
    let hpas: Api<HorizontalPodAutoscaler> = Api::namespaced(client.clone(), namespace);
    let display = format!("{namespace}/{name}");
    let hpa = hpas
        .get(name)
        .await
        .map_err(|e| from_kube("get", "HorizontalPodAutoscaler", &display, e))?;
    floor_object_of(client, hpa).await
}

/// The floor object of an HPA already read (its ScaledObject read when KEDA owns it).
pub async fn floor_object_of(
    client: &kube::Client,
    hpa: HorizontalPodAutoscaler,
) -> Result<FloorObject> {
    let namespace = hpa.metadata.namespace.clone().unwrap_or_default();
    let name = hpa.metadata.name.clone().unwrap_or_default();
    let display = format!("{namespace}/{name}");
    let view = floor_view(&hpa);
    let Some(owner) = view.keda_owner.clone() else {
        return Ok(FloorObject {
            api: Api::namespaced_with(
                client.clone(),
                &namespace,
                &ApiResource::erase::<HorizontalPodAutoscaler>(&()),
            ),
            name,
            view,
            resource_version: hpa.metadata.resource_version.unwrap_or_default(),
            kind: "HorizontalPodAutoscaler",
            object: format!("hpa {display}"),
            display,
            field: "minReplicas",
        });
    };
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &namespace, &scaled_object::resource());
    let display = format!("{namespace}/{owner}");
    let so = api
        .get(&owner)
        .await
        .map_err(|e| from_kube("get", "ScaledObject", &display, e))?;
    Ok(FloorObject {
        api,
        name: owner,
        view: scaled_object::floor_view(&so),
        resource_version: so.metadata.resource_version.unwrap_or_default(),
        kind: "ScaledObject",
        object: format!("scaledobject {display}"),
        display,
        field: scaled_object::FIELD,
    })
}

impl FloorObject {
    /// `plan_beside_surge` on the object read: what the tick and a restore that leaves drains
    /// running write (a drain's own surge floor is planned by `core::interruption::surge_floor`).
    pub fn plan_beside_surge(
        &self,
        intent: FloorIntent,
        now: f64,
        lease_s: f64,
    ) -> Result<FloorPatch> {
        plan_beside_surge(&self.view, intent, now, lease_s).map_err(|m| self.refused(m))
    }

    /// A plan refused for malformed annotations on this object: not retryable.
    fn refused(&self, message: String) -> Error {
        Error::kube(
            "plan the replica floor",
            format!("{} {}", self.kind, self.display),
            message,
            false,
        )
    }

    /// The merge patch of `patch` on this object, conditional on the version read.
    pub fn patch_body(&self, patch: &FloorPatch) -> Value {
        floor_patch_body(patch, &self.resource_version, self.field)
    }

    /// Sends a merge patch (built from `patch_body`, possibly with more in it) under the floor's
    /// field manager. A concurrent change is `Error::Conflict`.
    pub async fn write(&self, body: &Value) -> Result<()> {
        let params = PatchParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..PatchParams::default()
        };
        self.api
            .patch(&self.name, &params, &Patch::Merge(body))
            .await
            .map_err(|e| from_kube("patch", self.kind, &self.display, e))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn set(pairs: &[(&str, Option<&str>)]) -> BTreeMap<String, Option<String>> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.map(str::to_string)))
            .collect()
    }

    #[test]
    fn a_keda_owner_is_found_by_its_owner_reference() {
        let hpa = |owners: serde_json::Value| -> HorizontalPodAutoscaler {
            serde_json::from_value(json!({
                "metadata": {"name": "keda-hpa-llama", "namespace": "ml", "ownerReferences": owners},
                "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "llama"},
                         "minReplicas": 1, "maxReplicas": 8}
            }))
            .unwrap()
        };
        let owner = |api: &str, kind: &str| json!({"apiVersion": api, "kind": kind, "name": "llama-so", "uid": "u1"});
        // (owner references, KEDA owner) - by hand.
        let cases = [
            (
                json!([owner("keda.sh/v1alpha1", "ScaledObject")]),
                Some("llama-so"),
            ),
            (
                json!([
                    owner("apps/v1", "Deployment"),
                    owner("keda.sh/v1alpha1", "ScaledObject")
                ]),
                Some("llama-so"),
            ),
            (json!([owner("example.com/v1", "ScaledObject")]), None),
            (json!([]), None),
        ];
        for (owners, want) in cases {
            let v = floor_view(&hpa(owners.clone()));
            assert_eq!(v.keda_owner.as_deref(), want, "{owners}");
            assert_eq!((v.min_replicas, v.max_replicas), (1, 8));
        }
    }

    #[test]
    fn the_patch_carries_the_version_and_removals() {
        let p = FloorPatch {
            min_replicas: Some(2),
            annotations: set(&[(USER_MIN, None), (LEASE_UNTIL, Some("x"))]),
            outcome: LeaseOutcome::Restored,
        };
        assert_eq!(
            floor_patch_body(&p, "42", "minReplicas"),
            json!({"metadata": {"resourceVersion": "42", "annotations": {
                USER_MIN: null, LEASE_UNTIL: "x"}}, "spec": {"minReplicas": 2}})
        );
        assert_eq!(
            floor_patch_body(&p, "42", "minReplicaCount")["spec"],
            json!({"minReplicaCount": 2})
        );
    }
}
