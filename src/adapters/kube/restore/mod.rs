//! `prewarm restore`: puts back what prewarm changed in the cluster, so that uninstalling leaves
//! it as the user had it. Per target: the NodePool's `spec.limits` (from the
//! prewarm.io/saved-limits annotation, nodepool::limits), its frozen disruption budgets (from the
//! prewarm.io/saved-budgets annotation) and every prewarm.io/ annotation; the headroom object's
//! prewarm.io/ annotations, and its size back to 0 for balloons and CapacityBuffers (the size the
//! chart creates them with). Not restorable, and reported as such: limits written by a prewarm
//! older than the saved-limits annotation, and a nodePoolReplicas target's `spec.replicas` (its
//! earlier count is not kept).
//!
//! The HPA floor of a target that names its HPA (`hpa.raiseMinReplicas`, also when the option
//! has been turned off since): the user's `minReplicas` (or, for an HPA owned by a KEDA
//! ScaledObject, the ScaledObject's `minReplicaCount`) from prewarm.io/user-min-replicas, unless
//! the user edited it while it was raised (then the edit stays; only prewarm's annotations go).
//!
//! Drain reservations (`restore_reservations`): every drain's replacement placeholder pod in the
//! target's balloon namespace is deleted, and every drain surge in its podNamespace given back
//! (Deployment replicas or the HPA / ScaledObject floor back to the user's value exactly, a
//! user's edit made while surged kept).
//!
//! Each kind of change is one step (`RESTORE_STEPS`).

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

pub mod found;

use super::api_error::from_kube;
use super::conflict::retry_on_conflict;
use super::drain::{replacement, surge};
use super::hpa;
use super::nodepool::limits::{LimitsIntent, SAVED_LIMITS};
use super::nodepool::{self, NodePoolView};
use super::resources::HeadroomRef;
use crate::core::lease::LeaseOutcome;
use crate::core::{HeadroomKind, TargetSpec};
use crate::error::{Error, Result};
use kube::api::{Patch, PatchParams};

/// Annotations prewarm writes all start with this.
pub const PREFIX: &str = "prewarm.io/";

/// What restoring one object did (or, dry, would do).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Restored {
    pub target: String,
    pub object: String,
    pub outcome: RestoreOutcome,
    pub detail: String,
}

/// The outcome column of `prewarm restore` (its text is the output's, and the JSON's).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RestoreOutcome {
    /// prewarm's change was undone (dry: would be).
    Restored,
    /// Nothing of prewarm's there.
    Unchanged,
    /// Left as it is, with the reason: a user's edit made while prewarm held the field
    /// (`LeaseOutcome::UserEditKept`), or what prewarm cannot put back.
    Kept,
}

impl RestoreOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            RestoreOutcome::Restored => "restored",
            RestoreOutcome::Unchanged => "unchanged",
            RestoreOutcome::Kept => "kept",
        }
    }
}

impl std::fmt::Display for RestoreOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `prewarm.io/` annotations set to null (merge patch removal), but for `keep` (what a step of
/// its own still has to restore from).
fn removed_annotations_but(
    annotations: &BTreeMap<String, String>,
    keep: &[&str],
) -> Map<String, Value> {
    annotations
        .keys()
        .filter(|k| k.starts_with(PREFIX) && !keep.contains(&k.as_str()))
        .map(|k| (k.clone(), Value::Null))
        .collect()
}

/// The merge patch that restores a headroom object, or None when there is nothing to undo.
pub fn headroom_patch(
    kind: &HeadroomKind,
    resource_version: &str,
    annotations: &BTreeMap<String, String>,
    size: u32,
) -> Option<Value> {
    let removed = removed_annotations_but(annotations, &[]);
    let resize = !matches!(kind, HeadroomKind::NodePoolReplicas) && size != 0;
    if removed.is_empty() && !resize {
        return None;
    }
    let mut patch = json!({"metadata": {"resourceVersion": resource_version}});
    if !removed.is_empty() {
        patch["metadata"]["annotations"] = Value::Object(removed);
    }
    if resize {
        patch["spec"] = json!({"replicas": 0});
    }
    Some(patch)
}

/// The merge patch that restores a NodePool's limits (nodepool::limits::limits_restore) and
/// removes prewarm.io/saved-limits; None when prewarm never wrote limits. Its own step, before
/// the budgets step: if it fails, the annotation it needs stays.
pub fn node_pool_limits_patch(view: &NodePoolView) -> std::result::Result<Option<Value>, String> {
    if !view.annotations.contains_key(SAVED_LIMITS) {
        return Ok(None);
    }
    let mut patch = json!({"metadata": {"resourceVersion": view.resource_version,
        "annotations": {SAVED_LIMITS: null}}});
    if let Some(limits) = nodepool::limits::limits_restore(view)? {
        patch["spec"] = json!({ "limits": limits });
    }
    Ok(Some(patch))
}

/// The merge patch that restores a NodePool: the user's budgets back (nodepool's restore step)
/// and every prewarm.io/ annotation but saved-limits removed; None when there is nothing to undo.
pub fn node_pool_patch(view: &NodePoolView) -> std::result::Result<Option<Value>, String> {
    let mut patch = nodepool::node_pool_patch(view, &LimitsIntent::Leave, Some(false))?
        .unwrap_or_else(|| json!({}));
    let removed = removed_annotations_but(&view.annotations, &[SAVED_LIMITS]);
    if removed.is_empty() && patch.get("spec").is_none() {
        return Ok(None);
    }
    patch["metadata"]["resourceVersion"] = json!(view.resource_version);
    let annotations = patch["metadata"]
        .as_object_mut()
        .expect("metadata is an object")
        .entry("annotations")
        .or_insert_with(|| json!({}));
    for (k, v) in removed {
        annotations[k] = v;
    }
    Ok(Some(patch))
}

/// One kind of change undone on one target at `now` (Unix seconds; the held values restore compares
/// and writes are judged at it), dry or not.
type Step = for<'a> fn(
    &'a kube::Client,
    &'a TargetSpec,
    f64,
    bool,
) -> futures::future::BoxFuture<'a, Result<Vec<Restored>>>;

/// Where `restore_reservations` stands in `RESTORE_STEPS`.
const RESERVATIONS_STEP: usize = 3;

/// The kinds of change `prewarm restore` undoes, in order. Add a step for a new kind of change.
pub const RESTORE_STEPS: [Step; 5] = [
    |c, t, _, dry| Box::pin(restore_node_pool_limits(c, t, dry)),
    |c, t, _, dry| Box::pin(restore_node_pool(c, t, dry)),
    |c, t, _, dry| Box::pin(restore_headroom(c, t, dry)),
    |c, t, now, dry| Box::pin(restore_reservations(c, t, now, dry)),
    |c, t, now, dry| Box::pin(restore_hpa_floor(c, t, now, dry)),
];

/// Whether a restore gives back what running drains hold (their placeholders and surges).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Drains {
    /// `prewarm restore` and the stack's delete: prewarm is going away, so nothing would collect
    /// them later.
    GiveBack,
    /// PAUSED: drains keep running and finish (or are collected by the tick's reservation collection,
    /// which runs under PAUSED too); a placeholder deleted or a surge given back mid-drain would
    /// evict pods with nowhere to go.
    KeepRunning,
}

/// Runs every step for every target at `now` (the caller's clock); an error on one target does
/// not stop the others. `Drains::KeepRunning` skips the drain reservations step.
pub async fn restore_all(
    client: &kube::Client,
    targets: &[TargetSpec],
    now: f64,
    dry_run: bool,
    drains: Drains,
) -> Vec<Result<Vec<Restored>>> {
    let mut out = Vec::new();
    for target in targets {
        for (i, step) in RESTORE_STEPS.iter().enumerate() {
            if drains == Drains::KeepRunning && i == RESERVATIONS_STEP {
                continue;
            }
            out.push(step(client, target, now, dry_run).await);
        }
    }
    out
}

fn outcome(target: &TargetSpec, object: &str, outcome: RestoreOutcome, detail: String) -> Restored {
    Restored {
        target: target.name.clone(),
        object: object.to_string(),
        outcome,
        detail,
    }
}

/// Reads the target's NodePool, builds `plan`'s patch and (unless dry) sends it. Karpenter
/// writes the NodePool's status often, so a 409 re-reads and rebuilds the patch (the plans are
/// idempotent); still conflicting after nodepool::WRITE_ATTEMPTS is a retryable error, never a
/// silent "restored".
async fn restore_node_pool_with(
    client: &kube::Client,
    target: &TargetSpec,
    dry_run: bool,
    plan: fn(&NodePoolView) -> std::result::Result<Option<Value>, String>,
    nothing: &str,
) -> Result<Restored> {
    let object = &format!("nodepool {}", target.node_pool);
    retry_on_conflict(nodepool::WRITE_ATTEMPTS, |_| async move {
        let view = nodepool::read_node_pool(client, &target.node_pool).await?;
        let patch = plan(&view)
            .map_err(|message| Error::kube("restore", object.clone(), message, false))?;
        let Some(p) = patch else {
            return Ok(outcome(
                target,
                object,
                RestoreOutcome::Unchanged,
                nothing.into(),
            ));
        };
        if !dry_run {
            nodepool::send_node_pool_patch(client, &target.node_pool, &p).await?;
        }
        Ok(outcome(
            target,
            object,
            RestoreOutcome::Restored,
            p.to_string(),
        ))
    })
    .await
}

async fn restore_node_pool_limits(
    client: &kube::Client,
    target: &TargetSpec,
    dry_run: bool,
) -> Result<Vec<Restored>> {
    let nothing = if target.limits.is_some() {
        "no prewarm.io/saved-limits: limits never written by prewarm, or by one older than the annotation (kept as they are)"
    } else {
        "no limits of prewarm's"
    };
    let done = restore_node_pool_with(client, target, dry_run, node_pool_limits_patch, nothing);
    Ok(vec![done.await?])
}

async fn restore_node_pool(
    client: &kube::Client,
    target: &TargetSpec,
    dry_run: bool,
) -> Result<Vec<Restored>> {
    let done = restore_node_pool_with(
        client,
        target,
        dry_run,
        node_pool_patch,
        "nothing of prewarm's",
    );
    Ok(vec![done.await?])
}

async fn restore_headroom(
    client: &kube::Client,
    target: &TargetSpec,
    dry_run: bool,
) -> Result<Vec<Restored>> {
    let object = HeadroomRef::of(target);
    let found = object
        .api(client)
        .get(&object.name)
        .await
        .map_err(|e| from_kube("get", object.kind, &object.display, e))?;
    let size = super::headroom::object_size(&object, &found.data)?;
    let annotations: BTreeMap<String, String> = found
        .metadata
        .annotations
        .clone()
        .unwrap_or_default()
        .into_iter()
        .collect();
    let version = found.metadata.resource_version.clone().unwrap_or_default();
    let mut out = Vec::new();
    match headroom_patch(&target.headroom, &version, &annotations, size) {
        None => out.push(outcome(
            target,
            &object.display,
            RestoreOutcome::Unchanged,
            "nothing of prewarm's".into(),
        )),
        Some(p) => {
            if !dry_run {
                object
                    .api(client)
                    .patch(&object.name, &PatchParams::default(), &Patch::Merge(&p))
                    .await
                    .map_err(|e| from_kube("patch", object.kind, &object.display, e))?;
            }
            out.push(outcome(
                target,
                &object.display,
                RestoreOutcome::Restored,
                p.to_string(),
            ));
        }
    }
    if matches!(target.headroom, HeadroomKind::NodePoolReplicas) {
        out.push(outcome(
            target,
            &object.display,
            RestoreOutcome::Kept,
            format!("spec.replicas stays {size}: the count before prewarm is not kept"),
        ));
    }
    Ok(out)
}

/// The drain reservations step: the drains' replacement placeholders in the target's balloon
/// namespace deleted, and every drain surge in its podNamespace given back exactly (the user's
/// replicas or floor back; a user's edit made while surged kept). Running drains' too: the tick
/// would otherwise collect them only while it runs, and it is being uninstalled.
pub async fn restore_reservations(
    client: &kube::Client,
    target: &TargetSpec,
    now: f64,
    dry_run: bool,
) -> Result<Vec<Restored>> {
    let mut out = Vec::new();
    for line in replacement::delete_placeholders_of(client, target, dry_run).await? {
        out.push(outcome(
            target,
            "drain placeholder",
            RestoreOutcome::Restored,
            line,
        ));
    }
    for released in surge::release_all(client, std::slice::from_ref(target), now, dry_run).await {
        let released = released?;
        let what = if released.user_edit_kept {
            RestoreOutcome::Kept
        } else {
            RestoreOutcome::Restored
        };
        out.push(outcome(target, "drain surge", what, released.line));
    }
    if out.is_empty() {
        out.push(outcome(
            target,
            "drain reservations",
            RestoreOutcome::Unchanged,
            "no drain placeholder or surge".into(),
        ));
    }
    Ok(out)
}

/// The HPA floor step: nothing for a target without an HPA; a read (and no write) for an HPA
/// prewarm never raised.
async fn restore_hpa_floor(
    client: &kube::Client,
    target: &TargetSpec,
    now: f64,
    dry_run: bool,
) -> Result<Vec<Restored>> {
    let Some(r) = &target.hpa else {
        return Ok(Vec::new());
    };
    let change = hpa::floor::plan_and_apply(
        client,
        r,
        hpa::floor::FloorIntent::Restore,
        now,
        0.0,
        dry_run,
    )
    .await?;
    Ok(vec![floor_outcome(target, &change.object, &change.patch)])
}

/// How `prewarm restore` reports one HPA floor change.
fn floor_outcome(target: &TargetSpec, object: &str, patch: &hpa::floor::FloorPatch) -> Restored {
    match (patch.outcome, patch.min_replicas) {
        (LeaseOutcome::Restored, Some(min)) => outcome(
            target,
            object,
            RestoreOutcome::Restored,
            format!("the floor back to the user's {min}; prewarm.io/ annotations removed"),
        ),
        (LeaseOutcome::UserEditKept, _) => outcome(
            target,
            object,
            RestoreOutcome::Kept,
            "the floor was edited while raised: the edit stays; prewarm.io/ annotations removed"
                .into(),
        ),
        // A restore plans no raise: held (or lowered to it) for a drain's surge that is still
        // there (`hpa::floor::plan_beside_surge`; a dry run has not released it).
        (LeaseOutcome::Renewed | LeaseOutcome::Raised, _) => outcome(
            target,
            object,
            RestoreOutcome::Kept,
            "a drain's surge holds the floor: the drain surge's release gives it back".into(),
        ),
        _ if !patch.annotations.is_empty() => outcome(
            target,
            object,
            RestoreOutcome::Restored,
            "not raised; stray prewarm.io/ floor annotations removed".into(),
        ),
        _ => outcome(
            target,
            object,
            RestoreOutcome::Unchanged,
            "nothing of prewarm's".into(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::string_map;

    #[test]
    fn headroom_goes_back_to_zero_without_prewarms_annotations() {
        let balloon = HeadroomKind::Balloon {
            namespace: "prewarm".into(),
            name: "balloon-gpu".into(),
        };
        let ours: BTreeMap<String, String> = string_map(&[
            ("prewarm.io/last-tick", "2026-11-30T12:00:00.000Z"),
            ("prewarm.io/cooldown-until", "2026-11-30T12:01:00.000Z"),
            ("team", "ml"),
        ]);
        // (kind, annotations, size, expected patch) - written by hand.
        let cases = [
            (
                balloon.clone(),
                ours.clone(),
                3,
                Some(json!({"metadata": {"resourceVersion": "7", "annotations": {
                    "prewarm.io/last-tick": null, "prewarm.io/cooldown-until": null}},
                    "spec": {"replicas": 0}})),
            ),
            (
                balloon.clone(),
                string_map(&[("team", "ml")]),
                2,
                Some(json!({"metadata": {"resourceVersion": "7"}, "spec": {"replicas": 0}})),
            ),
            (balloon, string_map(&[("team", "ml")]), 0, None),
            (
                HeadroomKind::NodePoolReplicas,
                ours,
                5,
                Some(json!({"metadata": {"resourceVersion": "7", "annotations": {
                    "prewarm.io/last-tick": null, "prewarm.io/cooldown-until": null}}})),
            ),
        ];
        for (kind, ann, size, want) in cases {
            assert_eq!(
                headroom_patch(&kind, "7", &ann, size),
                want,
                "{kind:?} {size}"
            );
        }
    }

    #[test]
    fn a_frozen_node_pool_gets_its_budgets_back() {
        let saved = json!([{"nodes": "20%"}]);
        let view = NodePoolView {
            name: "gpu".into(),
            resource_version: "9".into(),
            annotations: string_map(&[
                ("prewarm.io/saved-budgets", &saved.to_string()),
                ("prewarm.io/last-tick", "x"),
            ]),
            spec: json!({"disruption": {"consolidateAfter": "30s",
                "budgets": [{"nodes": "20%"}, nodepool::freeze_budget()]}}),
        };
        let p = node_pool_patch(&view).unwrap().unwrap();
        assert_eq!(p["spec"]["disruption"]["budgets"], saved);
        assert_eq!(p["metadata"]["resourceVersion"], "9");
        assert_eq!(
            p["metadata"]["annotations"],
            json!({"prewarm.io/saved-budgets": null, "prewarm.io/last-tick": null})
        );
        let untouched = NodePoolView {
            annotations: string_map(&[("team", "ml")]),
            spec: json!({"disruption": {"consolidateAfter": "30s", "budgets": saved}}),
            ..view
        };
        assert_eq!(node_pool_patch(&untouched).unwrap(), None);
    }

    /// The outcome column keeps the words `prewarm restore` always printed (and the JSON the
    /// same), written out by hand.
    #[test]
    fn the_outcome_column_is_the_words_restore_always_printed() {
        let cases = [
            (RestoreOutcome::Restored, "restored"),
            (RestoreOutcome::Unchanged, "unchanged"),
            (RestoreOutcome::Kept, "kept"),
        ];
        for (outcome, text) in cases {
            assert_eq!(outcome.to_string(), text, "{outcome:?}");
            assert_eq!(serde_json::to_value(outcome).unwrap(), json!(text));
        }
        let line = Restored {
            target: "t".into(),
            object: "nodepool gpu".into(),
            outcome: RestoreOutcome::Kept,
            detail: "d".into(),
        };
        assert_eq!(
            serde_json::to_value(&line).unwrap(),
            json!({"target": "t", "object": "nodepool gpu", "outcome": "kept", "detail": "d"})
        );
    }

    #[test]
    fn hpa_floor_outcomes_read_as_restore_lines() {
        use hpa::floor::{FloorPatch, LEASE_UNTIL};
        let t = TargetSpec::new("t", "gpu", HeadroomKind::NodePoolReplicas, 4);
        let removed: BTreeMap<String, Option<String>> = [(LEASE_UNTIL.to_string(), None)].into();
        let patch = |min, annotations: &BTreeMap<String, Option<String>>, outcome| FloorPatch {
            min_replicas: min,
            annotations: annotations.clone(),
            outcome,
        };
        // (patch, expected outcome, a piece of the detail) - by hand.
        let cases = [
            (
                patch(Some(2), &removed, LeaseOutcome::Restored),
                "restored",
                "user's 2",
            ),
            (
                patch(None, &removed, LeaseOutcome::UserEditKept),
                "kept",
                "edit stays",
            ),
            (
                patch(None, &removed, LeaseOutcome::Unchanged),
                "restored",
                "stray",
            ),
            (
                patch(None, &BTreeMap::new(), LeaseOutcome::Unchanged),
                "unchanged",
                "nothing",
            ),
            (
                // A drain's surge still on the floor (a dry run has not released it).
                patch(None, &removed, LeaseOutcome::Renewed),
                "kept",
                "surge",
            ),
        ];
        for (p, want, piece) in cases {
            let r = floor_outcome(&t, "hpa ml/llama", &p);
            assert_eq!(r.outcome.to_string(), want, "{p:?}");
            assert!(r.detail.contains(piece), "{p:?}: {}", r.detail);
        }
    }
}
