//! Warm replicas, not only warm nodes: for targets with `hpa.raiseMinReplicas`, prewarm raises
//! the workload HPA's `spec.minReplicas` ahead of forecast demand, so model load is out of the
//! request path too, and gives the user's value back afterwards.
//!
//! The raise is a lease, kept in annotations on the HPA (like the NodePool's saved budgets):
//!
//! - `prewarm.io/user-min-replicas`: the user's value, saved when prewarm first raises;
//! - `prewarm.io/raised-min-replicas`: what prewarm wrote;
//! - `prewarm.io/floor-lease-until`: when the raise expires unless a tick renews it.
//!
//! Rules (pure: `plan_floor`, over the lease protocol of `core::lease`), each in the table test:
//! - never above `maxReplicas`, never below the user's value;
//! - restore (user's value back, annotations removed) when the forecast no longer asks for more,
//!   when the lease has expired (the tick, or `prewarm restore`, finds it so), or on request;
//! - a user's edit made while raised (`minReplicas` is no longer what prewarm wrote) is kept: the
//!   annotations are dropped and the edit becomes the user's value;
//! - fail static: while the metrics are missing the floor is neither raised nor lowered (the
//!   lease is renewed so a metrics outage does not drop warm replicas);
//! - an HPA owned by a KEDA ScaledObject (an owner reference of kind ScaledObject, keda.sh) is
//!   driven through the ScaledObject's `spec.minReplicaCount` instead (`scaled_object`), with the
//!   same lease and annotations on the ScaledObject: KEDA rewrites the HPA from it, so a raise
//!   written on the HPA would be undone.
//! - a drain's surge (`drain::surge`) raises the same floor through the same object
//!   (`FloorObject`), its record beside the lease; no intent of the tick lowers it
//!   (`plan_beside_surge`): only the drain's release does.
//!
//! Writes are JSON merge patches with the `resourceVersion` read (409 on a concurrent change)
//! under the field manager `prewarm-hpa-floor`. GitOps: Argo CD needs an `ignoreDifferences`
//! entry for `/spec/minReplicas` of the HPA plus `RespectIgnoreDifferences=true` in the sync
//! options, or it reverts the raise on every sync; with Flux the field must not be in Git (leave
//! `minReplicas` out of the manifest or patch it out with a Kustomization), otherwise the same.

use std::collections::BTreeMap;

use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use serde_json::{json, Value};

use super::scaled_object;
use crate::adapters::kube::api_error::from_kube;
use crate::adapters::kube::headroom::annotations::{format_time, parse_time};
// The view lives in a leaf both this file and `scaled_object` build it from.
pub use super::floor_view::FloorView;
use crate::core::lease::{lease_step, Held, LeaseOutcome, Want};
use crate::core::spec::HpaRef;
use crate::error::{Error, Result};

pub use super::floor_view::{LEASE_UNTIL, RAISED_MIN, USER_MIN};
pub const FIELD_MANAGER: &str = "prewarm-hpa-floor";

/// What the floor of the HPA should be this tick.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum FloorIntent {
    /// Keep at least this many replicas (the forecast's HPA replicas at the horizon).
    AtLeast(u32),
    /// Metrics are missing: change nothing, renew an existing lease.
    Hold,
    /// Give the user's value back (`prewarm restore`, or the option was turned off).
    Restore,
}

/// The change to make: the new `minReplicas` (None = leave) and annotation changes
/// (None value = remove).
#[derive(Clone, Debug, PartialEq)]
pub struct FloorPatch {
    pub min_replicas: Option<u32>,
    pub annotations: BTreeMap<String, Option<String>>,
    /// For the log: raised, renewed, restored, user_edit_kept, unchanged.
    pub outcome: LeaseOutcome,
}

fn remove_all() -> BTreeMap<String, Option<String>> {
    [USER_MIN, RAISED_MIN, LEASE_UNTIL]
        .into_iter()
        .map(|k| (k.to_string(), None))
        .collect()
}

/// Decides the floor change of an HPA (or of the ScaledObject that owns it: the same rules on
/// its `minReplicaCount`). `Err` for malformed annotations.
pub fn plan_floor(
    hpa: &FloorView,
    intent: FloorIntent,
    now: f64,
    lease_s: f64,
) -> std::result::Result<FloorPatch, String> {
    let user_saved = hpa.count(USER_MIN)?;
    let raised = hpa.count(RAISED_MIN)?;
    let lease = hpa
        .annotations
        .get(LEASE_UNTIL)
        .map(|raw| parse_time(raw).map_err(|e| format!("annotation {LEASE_UNTIL}: {e}")))
        .transpose()?;
    let lease_text = Some(format_time(now + lease_s));

    // Held only with both counts (incomplete annotations: the current value is the user's, and
    // the strays are cleaned up).
    let held = match (user_saved, raised) {
        (Some(user), Some(written)) => Some(Held { user, written }),
        _ => None,
    };
    let cleanup = held.is_none() && (user_saved.is_some() || raised.is_some() || lease.is_some());
    let expired = lease.is_none_or(|until| until <= now);
    // A floor: raised above the user's value, given back at or below it; an expired lease is
    // given back when the metrics are missing.
    let want = match (intent, &held) {
        (FloorIntent::AtLeast(want), None) if want.min(hpa.max_replicas) > hpa.min_replicas => {
            Want::Value(want.min(hpa.max_replicas))
        }
        (FloorIntent::AtLeast(want), Some(h)) if want.min(hpa.max_replicas) <= h.user => {
            Want::GiveBack
        }
        (FloorIntent::AtLeast(want), Some(_)) => Want::Value(want.min(hpa.max_replicas)),
        (FloorIntent::AtLeast(_), None) => Want::Keep,
        (FloorIntent::Hold, Some(_)) if expired => Want::GiveBack,
        (FloorIntent::Hold, _) => Want::Keep,
        (FloorIntent::Restore, _) => Want::GiveBack,
    };
    let step = lease_step(held.as_ref(), &hpa.min_replicas, want);
    let annotations = match (step.outcome, &step.held) {
        // A first raise saves the user's value; a later one keeps it.
        (LeaseOutcome::Raised, Some(after)) if held.is_none() => [
            (USER_MIN.to_string(), Some(after.user.to_string())),
            (RAISED_MIN.to_string(), Some(after.written.to_string())),
            (LEASE_UNTIL.to_string(), lease_text),
        ]
        .into(),
        (LeaseOutcome::Raised, Some(after)) => [
            (RAISED_MIN.to_string(), Some(after.written.to_string())),
            (LEASE_UNTIL.to_string(), lease_text),
        ]
        .into(),
        (LeaseOutcome::Renewed, _) => [(LEASE_UNTIL.to_string(), lease_text)].into(),
        (LeaseOutcome::Unchanged, _) if !cleanup => BTreeMap::new(),
        _ => remove_all(),
    };
    Ok(FloorPatch {
        min_replicas: step.write,
        annotations,
        outcome: step.outcome,
    })
}

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

/// The floor a drain's surge holds on this HPA, if any (an unreadable record counts as none).
pub fn surge_floor(view: &FloorView) -> Option<u32> {
    crate::core::interruption::surge::SurgeRecord::from_annotations(&view.annotations)
        .ok()
        .flatten()
        .filter(|r| !r.drains.is_empty())
        .map(|r| r.want(Some(view.max_replicas)))
}

/// The floor plan of the tick (and of `prewarm restore`'s floor step) on an object a drain's
/// surge may also hold (`surge_floor`). The surge is the drain's, and only the drain's release
/// lowers it: a plan that would write a floor below it (a lower forecast, a restore, a lease
/// that ran out while metrics are missing) holds it instead, so the tick gives back only the
/// part of a raise above the surge, the part that is its own.
pub fn plan_beside_surge(
    view: &FloorView,
    intent: FloorIntent,
    now: f64,
    lease_s: f64,
) -> std::result::Result<FloorPatch, String> {
    let patch = plan_floor(view, intent, now, lease_s)?;
    match (surge_floor(view), patch.min_replicas) {
        (Some(surge), Some(min)) if min < surge => {
            plan_floor(view, FloorIntent::AtLeast(surge), now, lease_s)
        }
        _ => Ok(patch),
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
    /// `plan_floor` on the object read; malformed annotations are a non-retryable error.
    pub fn plan(&self, intent: FloorIntent, now: f64, lease_s: f64) -> Result<FloorPatch> {
        plan_floor(&self.view, intent, now, lease_s).map_err(|m| self.refused(m))
    }

    /// `plan_beside_surge` on the object read: what the tick and a restore that leaves drains
    /// running write (a drain's own surge plans with `plan`).
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
        Error::Kube {
            operation: "plan the replica floor".into(),
            object: format!("{} {}", self.kind, self.display),
            message,
            retryable: false,
        }
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

/// `prewarm restore` for HPA floors: give the user's `minReplicas` back now, whatever the
/// lease says (a user's own edit is kept).
pub async fn restore_hpa_floor(
    client: &kube::Client,
    r: &HpaRef,
    now: f64,
) -> Result<LeaseOutcome> {
    apply_floor(client, r, FloorIntent::Restore, now, 0.0, false).await
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: f64 = 1_795_953_600.0; // 2026-11-29T12:00:00Z
    const LEASE: f64 = 300.0;

    fn view(min: u32, max: u32, ann: &[(&str, &str)]) -> FloorView {
        FloorView {
            min_replicas: min,
            max_replicas: max,
            annotations: ann
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            keda_owner: None,
        }
    }

    fn set(pairs: &[(&str, Option<&str>)]) -> BTreeMap<String, Option<String>> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.map(str::to_string)))
            .collect()
    }

    #[test]
    fn floor_table() {
        let lease_then = "2026-11-29T12:05:00.000Z"; // NOW + 300 s
        let future = "2026-11-29T12:03:00.000Z";
        let past = "2026-11-29T11:59:00.000Z";
        let raised = |min: &str, raised: &str, until: &str| {
            vec![
                (USER_MIN, min.to_string()),
                (RAISED_MIN, raised.to_string()),
                (LEASE_UNTIL, until.to_string()),
            ]
        };
        let v = |min: u32, ann: Vec<(&str, String)>| {
            let refs: Vec<(&str, &str)> = ann.iter().map(|(k, v)| (*k, v.as_str())).collect();
            view(min, 10, &refs)
        };
        type Row = (
            &'static str,
            FloorView,
            FloorIntent,
            Option<u32>,
            BTreeMap<String, Option<String>>,
            &'static str,
        );
        let rows: Vec<Row> = vec![
            (
                "raise from the user's 2 to 5",
                v(2, vec![]),
                FloorIntent::AtLeast(5),
                Some(5),
                set(&[
                    (USER_MIN, Some("2")),
                    (RAISED_MIN, Some("5")),
                    (LEASE_UNTIL, Some(lease_then)),
                ]),
                "raised",
            ),
            (
                "never above maxReplicas (10)",
                v(2, vec![]),
                FloorIntent::AtLeast(40),
                Some(10),
                set(&[
                    (USER_MIN, Some("2")),
                    (RAISED_MIN, Some("10")),
                    (LEASE_UNTIL, Some(lease_then)),
                ]),
                "raised",
            ),
            (
                "not above the user's value: nothing",
                v(4, vec![]),
                FloorIntent::AtLeast(3),
                None,
                set(&[]),
                "unchanged",
            ),
            (
                "raised further: the user's value stays saved",
                v(5, raised("2", "5", future)),
                FloorIntent::AtLeast(7),
                Some(7),
                set(&[(RAISED_MIN, Some("7")), (LEASE_UNTIL, Some(lease_then))]),
                "raised",
            ),
            (
                "same raise: lease renewed",
                v(5, raised("2", "5", future)),
                FloorIntent::AtLeast(5),
                None,
                set(&[(LEASE_UNTIL, Some(lease_then))]),
                "renewed",
            ),
            (
                "lower but above the user's: follows down",
                v(5, raised("2", "5", future)),
                FloorIntent::AtLeast(3),
                Some(3),
                set(&[(RAISED_MIN, Some("3")), (LEASE_UNTIL, Some(lease_then))]),
                "raised",
            ),
            (
                "forecast at or below the user's: restored exactly",
                v(5, raised("2", "5", future)),
                FloorIntent::AtLeast(2),
                Some(2),
                set(&[(USER_MIN, None), (RAISED_MIN, None), (LEASE_UNTIL, None)]),
                "restored",
            ),
            (
                "restore on request",
                v(5, raised("2", "5", future)),
                FloorIntent::Restore,
                Some(2),
                set(&[(USER_MIN, None), (RAISED_MIN, None), (LEASE_UNTIL, None)]),
                "restored",
            ),
            (
                "user edited while raised: kept",
                v(8, raised("2", "5", future)),
                FloorIntent::Restore,
                None,
                set(&[(USER_MIN, None), (RAISED_MIN, None), (LEASE_UNTIL, None)]),
                "user_edit_kept",
            ),
            (
                "fail static renews a live lease",
                v(5, raised("2", "5", future)),
                FloorIntent::Hold,
                None,
                set(&[(LEASE_UNTIL, Some(lease_then))]),
                "renewed",
            ),
            (
                "fail static with an expired lease restores",
                v(5, raised("2", "5", past)),
                FloorIntent::Hold,
                Some(2),
                set(&[(USER_MIN, None), (RAISED_MIN, None), (LEASE_UNTIL, None)]),
                "restored",
            ),
            (
                "fail static on an unraised HPA: nothing",
                v(3, vec![]),
                FloorIntent::Hold,
                None,
                set(&[]),
                "unchanged",
            ),
            (
                "restore on an unraised HPA: nothing",
                v(3, vec![]),
                FloorIntent::Restore,
                None,
                set(&[]),
                "unchanged",
            ),
            (
                "a stray annotation is cleaned up",
                v(3, vec![(LEASE_UNTIL, past.to_string())]),
                FloorIntent::Restore,
                None,
                set(&[(USER_MIN, None), (RAISED_MIN, None), (LEASE_UNTIL, None)]),
                "unchanged",
            ),
        ];
        for (name, hpa, intent, min, annotations, outcome) in rows {
            let got = plan_floor(&hpa, intent, NOW, LEASE).unwrap();
            assert_eq!(got.min_replicas, min, "{name}: minReplicas");
            assert_eq!(got.annotations, annotations, "{name}: annotations");
            assert_eq!(got.outcome.to_string(), outcome, "{name}: outcome");
        }
    }

    #[test]
    fn a_drain_surge_holds_the_floor_for_the_forecast() {
        use crate::core::interruption::surge::{SURGE_BASE, SURGE_DRAINS};
        // base 3 + k 2 = 5, under maxReplicas 10; capped at maxReplicas 4.
        let surged = [(SURGE_DRAINS, r#"{"i-a":2}"#), (SURGE_BASE, "3")];
        assert_eq!(surge_floor(&view(5, 10, &surged)), Some(5));
        assert_eq!(surge_floor(&view(4, 4, &surged)), Some(4));
        assert_eq!(surge_floor(&view(2, 10, &[])), None);
        assert_eq!(
            surge_floor(&view(3, 10, &[(SURGE_DRAINS, "{}"), (SURGE_BASE, "3")])),
            None
        );
    }

    /// The tick's floor beside a drain's surge, whatever its intent: the user's 2, a drain moving
    /// 2 pods of a workload of 2 (surge record base 2 + 2 = 4, under maxReplicas 10), written
    /// through the floor lease as the drain does (user 2, raised 4, its lease live or past).
    #[test]
    fn a_drain_surge_holds_against_every_tick_intent() {
        use crate::core::interruption::surge::{SURGE_BASE, SURGE_DRAINS};
        let future = "2026-11-29T12:03:00.000Z";
        let past = "2026-11-29T11:59:00.000Z";
        let surged = |min: &str, raised: &str, until: &'static str| {
            vec![
                (USER_MIN, min.to_string()),
                (RAISED_MIN, raised.to_string()),
                (LEASE_UNTIL, until.to_string()),
                (SURGE_DRAINS, r#"{"i-a":2}"#.to_string()),
                (SURGE_BASE, "2".to_string()),
            ]
        };
        let v = |min: u32, ann: Vec<(&str, String)>| {
            let refs: Vec<(&str, &str)> = ann.iter().map(|(k, v)| (*k, v.as_str())).collect();
            view(min, 10, &refs)
        };
        // (situation, view, intent, minReplicas written, outcome) - by hand.
        let rows = [
            (
                // raiseMinReplicas false (the default): nothing of the tick's to give back.
                "a restore keeps the drain's 4",
                v(4, surged("2", "4", future)),
                FloorIntent::Restore,
                None,
                "renewed",
            ),
            (
                // Fail static with the lease run out: the 4 is still the drain's.
                "an expired lease under missing metrics keeps the drain's 4",
                v(4, surged("2", "4", past)),
                FloorIntent::Hold,
                None,
                "renewed",
            ),
            (
                "a live lease under missing metrics is renewed",
                v(4, surged("2", "4", future)),
                FloorIntent::Hold,
                None,
                "renewed",
            ),
            (
                "a forecast of 3 keeps the drain's 4",
                v(4, surged("2", "4", future)),
                FloorIntent::AtLeast(3),
                None,
                "renewed",
            ),
            (
                "a forecast of 6 raises over the drain's 4",
                v(4, surged("2", "4", future)),
                FloorIntent::AtLeast(6),
                Some(6),
                "raised",
            ),
            (
                // The tick had raised to 6 before the option was turned off: its part (6 - 4)
                // goes back, the drain's 4 stays.
                "a restore of the tick's 6 comes down to the drain's 4",
                v(6, surged("2", "6", future)),
                FloorIntent::Restore,
                Some(4),
                "raised",
            ),
            (
                "no drain left in the record: a restore gives the user's 2 back",
                v(
                    4,
                    vec![
                        (USER_MIN, "2".into()),
                        (RAISED_MIN, "4".into()),
                        (LEASE_UNTIL, future.into()),
                        (SURGE_DRAINS, "{}".into()),
                        (SURGE_BASE, "2".into()),
                    ],
                ),
                FloorIntent::Restore,
                Some(2),
                "restored",
            ),
        ];
        for (name, hpa, intent, min, outcome) in rows {
            let got = plan_beside_surge(&hpa, intent, NOW, LEASE).unwrap();
            assert_eq!(got.min_replicas, min, "{name}: minReplicas");
            assert_eq!(got.outcome.to_string(), outcome, "{name}: outcome");
        }
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
    fn malformed_annotations_are_refused() {
        let bad = view(5, 10, &[(USER_MIN, "two"), (RAISED_MIN, "5")]);
        let e = plan_floor(&bad, FloorIntent::Restore, NOW, LEASE).unwrap_err();
        assert!(e.contains(USER_MIN), "{e}");
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
