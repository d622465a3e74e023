//! The NodePool side of a target: `spec.limits` as a spend cap and a consolidation freeze through
//! `spec.disruption.budgets` while demand ramps.
//!
//! Freezing appends one budget `{nodes: "0", reasons: [Underutilized, Empty]}` to the user's
//! budgets (Karpenter applies the most restrictive active budget, so drift and expiry budgets keep
//! working) and saves the user's list verbatim in the `prewarm.io/saved-budgets` annotation;
//! restoring writes that list back exactly (a lease on the list, `core::lease`). Every patch is a
//! JSON merge patch that touches only `spec.limits`, `spec.disruption` (always with
//! `consolidateAfter`, which Karpenter 1.14 requires whenever `disruption` is sent, copied from the
//! object) and annotations, never `spec.template`: a template change drifts and replaces every
//! node of the pool.

pub mod limits;
pub mod limits_room;
pub mod nodes;
pub mod paths;
pub mod view;

use kube::api::{Patch, PatchParams};
use serde_json::{json, Map, Value};

use super::api_error::from_kube;
use super::conflict::retry_on_conflict;
use limits::{limits_restore_step, limits_write, LimitsIntent, SAVED_LIMITS};
use nodes::pool_nodes;
// The view and the freeze's annotation live in a leaf both this file and `limits` read.
use super::resources::node_pool_api;
use crate::core::lease::{lease_step, Held, LeaseOutcome, Want};
use crate::error::{Error, Result};
pub use view::{NodePoolView, SAVED_BUDGETS};

/// The budget prewarm adds while consolidation is frozen.
pub fn freeze_budget() -> Value {
    json!({"nodes": "0", "reasons": ["Underutilized", "Empty"]})
}

/// The disruption block to send: `budgets` plus the current `consolidateAfter`.
fn disruption(view: &NodePoolView, budgets: Value) -> std::result::Result<Value, String> {
    Ok(json!({"consolidateAfter": view.consolidate_after()?, "budgets": budgets}))
}

/// The user's budgets with the freeze budget appended: what prewarm writes while frozen.
fn with_freeze(user: &Value) -> std::result::Result<Value, String> {
    let mut frozen = match user {
        Value::Array(items) => items.clone(),
        Value::Null => Vec::new(),
        other => return Err(format!("spec.disruption.budgets is not a list: {other}")),
    };
    frozen.push(freeze_budget());
    Ok(Value::Array(frozen))
}

/// Freeze: budgets + the freeze budget, the user's list saved. None when already frozen (an
/// edit of the budgets during the freeze is the user's, and waits for the restore).
pub fn freeze_changes(view: &NodePoolView) -> std::result::Result<Option<(Value, Value)>, String> {
    if view.consolidation_frozen() {
        return Ok(None);
    }
    let current = view.budgets();
    let step = lease_step(None, &current, Want::Value(with_freeze(&current)?));
    let (Some(frozen), Some(held)) = (step.write, step.held) else {
        return Ok(None);
    };
    let annotation = serde_json::to_string(&held.user).expect("JSON always serialises");
    Ok(Some((disruption(view, frozen)?, Value::String(annotation))))
}

/// Restore: the saved budgets back, the annotation removed, and the outcome (restored, or the
/// user's edit kept). None when not frozen. If someone edited the budgets during the freeze,
/// their edit is kept and only prewarm's budget removed.
fn restore_step(view: &NodePoolView) -> std::result::Result<Option<(Value, LeaseOutcome)>, String> {
    let Some(raw) = view.annotations.get(SAVED_BUDGETS) else {
        return Ok(None);
    };
    let saved: Value = serde_json::from_str(raw)
        .map_err(|e| format!("annotation {SAVED_BUDGETS} is not JSON: {e}"))?;
    if !(saved.is_array() || saved.is_null()) {
        return Err(format!(
            "annotation {SAVED_BUDGETS} is not a list of budgets"
        ));
    }
    let current = view.budgets();
    let held = Held {
        written: with_freeze(&saved)?,
        user: saved,
    };
    let step = lease_step(Some(&held), &current, Want::GiveBack);
    let budgets = step.write.unwrap_or_else(|| {
        let mut edited = current.as_array().cloned().unwrap_or_default();
        if let Some(i) = edited.iter().position(|b| *b == freeze_budget()) {
            edited.remove(i);
        }
        Value::Array(edited)
    });
    Ok(Some((disruption(view, budgets)?, step.outcome)))
}

/// What one NodePool patch does to the two leases prewarm holds there.
#[derive(Clone, Debug, PartialEq)]
pub struct NodePoolChange {
    /// The merge patch, None when nothing changes.
    pub patch: Option<Value>,
    /// `spec.limits`: raised (written), restored, user_edit_kept (given back, but every limit
    /// was edited since) or unchanged.
    pub limits: LeaseOutcome,
    /// `spec.disruption.budgets`: raised (frozen), restored, user_edit_kept (given back with the
    /// user's edit) or unchanged.
    pub budgets: LeaseOutcome,
}

/// The one merge patch for a NodePool this tick, or None when nothing changes.
/// `freeze`: Some(true) freeze, Some(false) restore, None leave as it is.
pub fn node_pool_patch(
    view: &NodePoolView,
    limits: &LimitsIntent,
    freeze: Option<bool>,
) -> std::result::Result<Option<Value>, String> {
    Ok(node_pool_change(view, limits, freeze)?.patch)
}

/// `node_pool_patch` with what it does to each lease.
pub fn node_pool_change(
    view: &NodePoolView,
    limits: &LimitsIntent,
    freeze: Option<bool>,
) -> std::result::Result<NodePoolChange, String> {
    let mut spec = Map::new();
    let mut annotations = Map::new();
    let mut change = NodePoolChange {
        patch: None,
        limits: LeaseOutcome::Unchanged,
        budgets: LeaseOutcome::Unchanged,
    };
    match limits.resolve(view)? {
        LimitsIntent::Leave | LimitsIntent::Room { .. } => {}
        LimitsIntent::Write(wanted) => {
            if let Some((changed, saved)) = limits_write(view, &wanted)? {
                spec.insert("limits".into(), changed);
                annotations.insert(SAVED_LIMITS.into(), Value::String(saved));
                change.limits = LeaseOutcome::Raised;
            }
        }
        LimitsIntent::Restore if view.annotations.contains_key(SAVED_LIMITS) => {
            let (restored, outcome) = limits_restore_step(view)?;
            if let Some(restored) = restored {
                spec.insert("limits".into(), restored);
            }
            annotations.insert(SAVED_LIMITS.into(), Value::Null);
            change.limits = outcome;
        }
        LimitsIntent::Restore => {}
    }
    match freeze {
        Some(true) => {
            if let Some((disruption, saved)) = freeze_changes(view)? {
                spec.insert("disruption".into(), disruption);
                annotations.insert(SAVED_BUDGETS.into(), saved);
                change.budgets = LeaseOutcome::Raised;
            }
        }
        Some(false) => {
            if let Some((disruption, outcome)) = restore_step(view)? {
                spec.insert("disruption".into(), disruption);
                annotations.insert(SAVED_BUDGETS.into(), Value::Null);
                change.budgets = outcome;
            }
        }
        None => {}
    }
    if spec.is_empty() && annotations.is_empty() {
        return Ok(change);
    }
    let mut metadata = json!({"resourceVersion": view.resource_version});
    if !annotations.is_empty() {
        metadata["annotations"] = Value::Object(annotations);
    }
    let mut patch = json!({ "metadata": metadata });
    if !spec.is_empty() {
        patch["spec"] = Value::Object(spec);
    }
    change.patch = Some(patch);
    Ok(change)
}

/// Reads a NodePool; a missing one is `Error::NotFound` naming it.
pub async fn read_node_pool(client: &kube::Client, name: &str) -> Result<NodePoolView> {
    let found = node_pool_api(client)
        .get(name)
        .await
        .map_err(|e| from_kube("get", "NodePool", name, e))?;
    Ok(NodePoolView {
        name: name.to_string(),
        resource_version: found.metadata.resource_version.unwrap_or_default(),
        annotations: found.metadata.annotations.unwrap_or_default(),
        spec: found.data.get("spec").cloned().unwrap_or(Value::Null),
    })
}

/// Builds and (unless `dry_run`) sends this tick's NodePool patch. A rejected patch (422 from
/// the schema or CEL rules) is a non-retryable `Error::Kube`. Karpenter writes the NodePool's
/// status often (which moves its resourceVersion), so a 409 leads to a re-read and a patch
/// rebuilt from what is there now; the patch builders are idempotent, so this cannot freeze
/// twice or lose the saved budgets.
pub async fn apply_node_pool(
    client: &kube::Client,
    view: &NodePoolView,
    limits: &LimitsIntent,
    freeze: Option<bool>,
    dry_run: bool,
) -> Result<NodePoolOutcome> {
    let outcome = retry_on_conflict(WRITE_ATTEMPTS, |attempt| async move {
        let current = if attempt == 0 {
            view.clone()
        } else {
            read_node_pool(client, &view.name).await?
        };
        // A retry lists the pool's nodes again too: the writer it conflicted with may be a drain
        // that has just claimed a node of this pool and made room for its replacement, and
        // limits computed from the nodes read before would take that room away.
        let relisted;
        let limits = match (attempt, limits) {
            (1.., LimitsIntent::Room { cap, now, .. }) => {
                relisted = LimitsIntent::Room {
                    cap: cap.clone(),
                    nodes: pool_nodes(client, &view.name).await?,
                    now: *now,
                };
                &relisted
            }
            _ => limits,
        };
        let change = node_pool_change(&current, limits, freeze).map_err(|message| {
            Error::kube(
                "plan patch",
                format!("nodepool {}", view.name),
                message,
                false,
            )
        })?;
        let done = |patch| NodePoolOutcome {
            patch,
            limits: change.limits,
            budgets: change.budgets,
        };
        let Some(patch) = &change.patch else {
            return Ok(done(PatchOutcome::Unchanged));
        };
        if dry_run {
            return Ok(done(PatchOutcome::DryRun));
        }
        send_node_pool_patch(client, &view.name, patch).await?;
        Ok(done(PatchOutcome::Written))
    })
    .await;
    match outcome {
        Err(e) if e.is_conflict() => Ok(NodePoolOutcome {
            patch: PatchOutcome::Conflict,
            limits: LeaseOutcome::Unchanged,
            budgets: LeaseOutcome::Unchanged,
        }),
        other => other,
    }
}

/// What became of a NodePool patch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatchOutcome {
    Written,
    /// Nothing to write.
    Unchanged,
    /// DRY_RUN: it would have been written.
    DryRun,
    /// The NodePool kept changing under the writes (409): left to the next tick.
    Conflict,
}

/// What `apply_node_pool` did: the patch, and each lease as it planned it (unchanged after a
/// conflict, which writes nothing).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodePoolOutcome {
    pub patch: PatchOutcome,
    pub limits: LeaseOutcome,
    pub budgets: LeaseOutcome,
}

impl NodePoolOutcome {
    /// The text of the logs: the patch's outcome, as the headroom's (`ApplyOutcome::as_str`).
    pub fn as_str(&self) -> &'static str {
        match self.patch {
            PatchOutcome::Written => "written",
            PatchOutcome::Unchanged => "unchanged",
            PatchOutcome::DryRun => "dry_run",
            PatchOutcome::Conflict => "conflict_skipped",
        }
    }
}

/// Conflicting writes are retried this often before the tick gives up until the next one.
pub const WRITE_ATTEMPTS: usize = 5;

/// Sends a NodePool merge patch (public so stack tests can send patches the apiserver rejects).
/// A 409 is `Error::Conflict`.
pub async fn send_node_pool_patch(client: &kube::Client, name: &str, patch: &Value) -> Result<()> {
    node_pool_api(client)
        .patch(name, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .map_err(|e| from_kube("patch", "NodePool", &format!("nodepool {name}"), e))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::string_map;
    use std::collections::BTreeMap;

    fn user_budgets() -> Value {
        json!([
            {"nodes": "1"},
            {"nodes": "0", "reasons": ["Underutilized", "Empty"], "schedule": "0 8 * * mon-fri", "duration": "10h"}
        ])
    }

    fn view(budgets: Value, annotations: &[(&str, &str)]) -> NodePoolView {
        NodePoolView {
            name: "gpu".into(),
            resource_version: "100".into(),
            annotations: string_map(annotations),
            spec: json!({
                "template": {"spec": {"nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"}}},
                "limits": {"cpu": "1000", "nvidia.com/gpu": "32"},
                "disruption": {
                    "consolidationPolicy": "WhenEmptyOrUnderutilized",
                    "consolidateAfter": "10m",
                    "budgets": budgets
                }
            }),
        }
    }

    /// Applies a JSON merge patch (RFC 7386) to `target`, to follow a freeze/restore round trip.
    fn merge(target: &mut Value, patch: &Value) {
        if let Value::Object(p) = patch {
            if !target.is_object() {
                *target = json!({});
            }
            let t = target.as_object_mut().unwrap();
            for (k, v) in p {
                if v.is_null() {
                    t.remove(k);
                } else {
                    merge(t.entry(k.clone()).or_insert(Value::Null), v);
                }
            }
        } else {
            *target = patch.clone();
        }
    }

    fn applied(view: &NodePoolView, patch: &Value) -> NodePoolView {
        let mut object = json!({"metadata": {"annotations": view.annotations}, "spec": view.spec});
        merge(&mut object, patch);
        NodePoolView {
            name: view.name.clone(),
            resource_version: "101".into(),
            annotations: serde_json::from_value(object["metadata"]["annotations"].clone())
                .unwrap_or_default(),
            spec: object["spec"].clone(),
        }
    }

    #[test]
    fn freezing_appends_the_freeze_budget_and_saves_the_users_list() {
        let v = view(user_budgets(), &[]);
        let patch = node_pool_patch(&v, &LimitsIntent::Leave, Some(true))
            .unwrap()
            .unwrap();
        let saved: Value = serde_json::from_str(
            patch["metadata"]["annotations"][SAVED_BUDGETS]
                .as_str()
                .unwrap(),
        )
        .unwrap();
        assert_eq!(saved, user_budgets());
        assert_eq!(patch["metadata"]["resourceVersion"], "100");
        assert_eq!(
            patch["spec"],
            json!({"disruption": {
                "consolidateAfter": "10m",
                "budgets": [
                    {"nodes": "1"},
                    {"nodes": "0", "reasons": ["Underutilized", "Empty"], "schedule": "0 8 * * mon-fri", "duration": "10h"},
                    {"nodes": "0", "reasons": ["Underutilized", "Empty"]}
                ]
            }})
        );
    }

    #[test]
    fn freeze_then_restore_gives_back_exactly_the_users_budgets() {
        let original = view(user_budgets(), &[]);
        let frozen = applied(
            &original,
            &node_pool_patch(&original, &LimitsIntent::Leave, Some(true))
                .unwrap()
                .unwrap(),
        );
        assert!(frozen.consolidation_frozen());
        assert_eq!(
            node_pool_patch(&frozen, &LimitsIntent::Leave, Some(true)).unwrap(),
            None
        );
        let restored = applied(
            &frozen,
            &node_pool_patch(&frozen, &LimitsIntent::Leave, Some(false))
                .unwrap()
                .unwrap(),
        );
        assert_eq!(restored.spec, original.spec);
        assert_eq!(restored.annotations, original.annotations);
        assert_eq!(
            node_pool_patch(&restored, &LimitsIntent::Leave, Some(false)).unwrap(),
            None
        );
    }

    #[test]
    fn a_budget_edit_during_the_freeze_is_kept_on_restore() {
        let saved = serde_json::to_string(&json!([{"nodes": "1"}])).unwrap();
        let edited = json!([{"nodes": "2"}, {"nodes": "0", "reasons": ["Underutilized", "Empty"]}]);
        let v = view(edited, &[(SAVED_BUDGETS, &saved)]);
        let patch = node_pool_patch(&v, &LimitsIntent::Leave, Some(false))
            .unwrap()
            .unwrap();
        assert_eq!(
            patch["spec"]["disruption"]["budgets"],
            json!([{"nodes": "2"}])
        );
        assert_eq!(patch["metadata"]["annotations"][SAVED_BUDGETS], Value::Null);
    }

    #[test]
    fn a_broken_saved_annotation_is_reported_not_guessed() {
        let v = view(user_budgets(), &[(SAVED_BUDGETS, "{oops")]);
        let err = node_pool_patch(&v, &LimitsIntent::Leave, Some(false)).unwrap_err();
        assert!(err.contains(SAVED_BUDGETS), "{err}");
    }

    #[test]
    fn consolidate_after_is_required_to_touch_disruption() {
        let mut v = view(user_budgets(), &[]);
        v.spec["disruption"]
            .as_object_mut()
            .unwrap()
            .remove("consolidateAfter");
        let err = node_pool_patch(&v, &LimitsIntent::Leave, Some(true)).unwrap_err();
        assert!(err.contains("consolidateAfter"), "{err}");
    }

    #[test]
    fn limits_patch_carries_only_changed_entries() {
        let v = view(user_budgets(), &[]);
        let wanted: BTreeMap<String, String> =
            [("nvidia.com/gpu".to_string(), "16".to_string())].into();
        assert_eq!(
            node_pool_patch(&v, &LimitsIntent::Write(wanted.clone()), None)
                .unwrap()
                .unwrap(),
            json!({"metadata": {"resourceVersion": "100", "annotations": {
                "prewarm.io/saved-limits":
                    r#"{"hadLimits":true,"limits":{"nvidia.com/gpu":{"before":"32","written":"16"}}}"#}},
                "spec": {"limits": {"nvidia.com/gpu": "16"}}})
        );
        let same: BTreeMap<String, String> = [("cpu".to_string(), "1000".to_string())].into();
        assert_eq!(
            node_pool_patch(&v, &LimitsIntent::Write(same.clone()), None).unwrap(),
            None
        );
        let mut numeric = v.clone();
        numeric.spec["limits"]["cpu"] = json!(1000);
        assert_eq!(
            node_pool_patch(&numeric, &LimitsIntent::Write(same.clone()), None).unwrap(),
            None
        );
    }

    /// Tick writes limits (and freezes), then `prewarm restore`'s two NodePool steps: the spec
    /// and annotations are exactly the user's again, for limits that were numbers, absent, an
    /// empty map, or not there at all.
    #[test]
    fn limits_written_by_ticks_then_restored_give_back_the_users_spec() {
        use super::super::restore;
        use super::limits::SAVED_LIMITS;
        let wanted: BTreeMap<String, String> = [
            ("nvidia.com/gpu".to_string(), "16".to_string()),
            ("memory".to_string(), "1Ti".to_string()),
        ]
        .into();
        let fewer: BTreeMap<String, String> =
            [("nvidia.com/gpu".to_string(), "8".to_string())].into();
        for limits in [
            Some(json!({"cpu": 1000, "nvidia.com/gpu": "32"})),
            Some(json!({})),
            None,
        ] {
            let mut original = view(user_budgets(), &[("team", "ml")]);
            match &limits {
                Some(l) => original.spec["limits"] = l.clone(),
                None => {
                    original.spec.as_object_mut().unwrap().remove("limits");
                }
            }
            // Two ticks: the second writes a different gpu limit and freezes.
            let first = node_pool_patch(&original, &LimitsIntent::Write(wanted.clone()), None)
                .unwrap()
                .unwrap();
            let once = applied(&original, &first);
            assert!(once.annotations.contains_key(SAVED_LIMITS), "{limits:?}");
            let second = node_pool_patch(&once, &LimitsIntent::Write(fewer.clone()), Some(true))
                .unwrap()
                .unwrap();
            let twice = applied(&once, &second);
            assert_eq!(twice.spec["limits"]["nvidia.com/gpu"], "8", "{limits:?}");
            let limits_back = applied(
                &twice,
                &restore::node_pool_limits_patch(&twice).unwrap().unwrap(),
            );
            assert!(
                limits_back.consolidation_frozen(),
                "the budgets step still has its annotation"
            );
            let back = applied(
                &limits_back,
                &restore::node_pool_patch(&limits_back).unwrap().unwrap(),
            );
            assert_eq!(back.spec, original.spec, "{limits:?}");
            assert_eq!(back.annotations, original.annotations, "{limits:?}");
        }
    }

    /// The budgets step of `prewarm restore` leaves prewarm.io/saved-limits to the limits step.
    #[test]
    fn the_budgets_restore_keeps_the_saved_limits_for_their_own_step() {
        use super::limits::SAVED_LIMITS;
        let saved = r#"{"hadLimits":true,"limits":{"cpu":{"written":"8"}}}"#;
        let v = view(
            user_budgets(),
            &[(SAVED_LIMITS, saved), ("prewarm.io/last-tick", "x")],
        );
        let p = super::super::restore::node_pool_patch(&v).unwrap().unwrap();
        assert_eq!(
            p["metadata"]["annotations"],
            json!({"prewarm.io/last-tick": null})
        );
    }

    fn keys_named(value: &Value, name: &str, path: &str, found: &mut Vec<String>) {
        match value {
            Value::Object(map) => {
                for (k, v) in map {
                    let here = format!("{path}/{k}");
                    if k == name {
                        found.push(here.clone());
                    }
                    keys_named(v, name, &here, found);
                }
            }
            Value::Array(items) => {
                for (i, v) in items.iter().enumerate() {
                    keys_named(v, name, &format!("{path}/{i}"), found);
                }
            }
            _ => {}
        }
    }

    /// A raise over the user's own limits given back: their value verbatim (a number stays a
    /// number) and the saved-limits annotation removed, in the tick's one patch.
    #[test]
    fn restore_intent_puts_the_users_limits_back_and_drops_the_annotation() {
        let mut v = view(
            user_budgets(),
            &[(
                SAVED_LIMITS,
                r#"{"hadLimits":true,"limits":{"nvidia.com/gpu":{"before":32,"written":"40"}}}"#,
            )],
        );
        v.spec["limits"] = json!({"cpu": "1000", "nvidia.com/gpu": "40"});
        assert_eq!(
            node_pool_patch(&v, &LimitsIntent::Restore, None).unwrap(),
            Some(json!({
                "metadata": {"resourceVersion": "100", "annotations": {SAVED_LIMITS: null}},
                "spec": {"limits": {"nvidia.com/gpu": 32}}
            }))
        );
        // Nothing held: nothing written.
        let untouched = view(user_budgets(), &[]);
        assert_eq!(
            node_pool_patch(&untouched, &LimitsIntent::Restore, None).unwrap(),
            None
        );
    }

    /// (situation, view, limits intent, freeze, expected limits outcome, expected budgets
    /// outcome) - by hand, from what each lease holds and what the patch does to it.
    #[test]
    fn each_lease_of_the_patch_reports_its_outcome() {
        use LeaseOutcome::*;
        let saved = serde_json::to_string(&user_budgets()).unwrap();
        let mut frozen_budgets = user_budgets().as_array().unwrap().clone();
        frozen_budgets.push(freeze_budget());
        let gpu = |limit: &str| {
            let mut v = view(
                user_budgets(),
                &[(
                    SAVED_LIMITS,
                    r#"{"hadLimits":true,"limits":{"nvidia.com/gpu":{"before":"32","written":"40"}}}"#,
                )],
            );
            v.spec["limits"]["nvidia.com/gpu"] = json!(limit);
            v
        };
        let wanted = |k: &str, v: &str| -> BTreeMap<String, String> {
            [(k.to_string(), v.to_string())].into()
        };
        let cases = [
            (
                "freezing a pool not frozen",
                view(user_budgets(), &[]),
                LimitsIntent::Leave,
                Some(true),
                Unchanged,
                Raised,
            ),
            (
                "freezing a frozen pool",
                view(
                    Value::Array(frozen_budgets.clone()),
                    &[(SAVED_BUDGETS, &saved)],
                ),
                LimitsIntent::Leave,
                Some(true),
                Unchanged,
                Unchanged,
            ),
            (
                "the budgets as prewarm froze them, given back",
                view(Value::Array(frozen_budgets), &[(SAVED_BUDGETS, &saved)]),
                LimitsIntent::Leave,
                Some(false),
                Unchanged,
                Restored,
            ),
            (
                "budgets the user edited during the freeze, given back: the edit kept",
                view(
                    json!([{"nodes": "2"}, freeze_budget()]),
                    &[(SAVED_BUDGETS, r#"[{"nodes":"1"}]"#)],
                ),
                LimitsIntent::Leave,
                Some(false),
                Unchanged,
                UserEditKept,
            ),
            (
                "a gpu limit of 16 over the user's 32",
                view(user_budgets(), &[]),
                LimitsIntent::Write(wanted("nvidia.com/gpu", "16")),
                None,
                Raised,
                Unchanged,
            ),
            (
                "the cpu limit already 1000",
                view(user_budgets(), &[]),
                LimitsIntent::Write(wanted("cpu", "1000")),
                None,
                Unchanged,
                Unchanged,
            ),
            (
                "prewarm's 40 still there, given back: the user's 32",
                gpu("40"),
                LimitsIntent::Restore,
                None,
                Restored,
                Unchanged,
            ),
            (
                "prewarm's 40 edited to 48, given back: the 48 kept",
                gpu("48"),
                LimitsIntent::Restore,
                None,
                UserEditKept,
                Unchanged,
            ),
        ];
        for (situation, v, limits, freeze, want_limits, want_budgets) in cases {
            let change = node_pool_change(&v, &limits, freeze).unwrap();
            assert_eq!(change.limits, want_limits, "{situation}: limits");
            assert_eq!(change.budgets, want_budgets, "{situation}: budgets");
        }
    }

    /// Every patch prewarm can build, over NodePools in every state, has no `template` key
    /// anywhere and touches only limits, disruption and metadata.
    #[test]
    fn no_patch_ever_touches_the_template() {
        let wanted: BTreeMap<String, String> =
            [("nvidia.com/gpu".to_string(), "8".to_string())].into();
        let saved = serde_json::to_string(&user_budgets()).unwrap();
        let views = [
            view(user_budgets(), &[]),
            view(Value::Null, &[]),
            view(
                json!([{"nodes": "10%"}, freeze_budget()]),
                &[(SAVED_BUDGETS, "[{\"nodes\":\"10%\"}]")],
            ),
            view(json!([{"nodes": "3"}]), &[(SAVED_BUDGETS, &saved)]),
            view(
                json!([{"nodes": "3"}]),
                &[(
                    SAVED_LIMITS,
                    r#"{"hadLimits":true,"limits":{"nvidia.com/gpu":{"before":"16","written":"32"}}}"#,
                )],
            ),
        ];
        let mut patches = Vec::new();
        for v in &views {
            let intents = [
                LimitsIntent::Leave,
                LimitsIntent::Write(wanted.clone()),
                LimitsIntent::Restore,
            ];
            for limits in &intents {
                for freeze in [None, Some(true), Some(false)] {
                    if let Some(p) = node_pool_patch(v, limits, freeze).unwrap() {
                        patches.push(p);
                    }
                }
            }
        }
        // The headroom patches reach the NodePool too when it is the headroom object.
        let reserved: BTreeMap<String, String> = [(
            crate::adapters::kube::headroom::annotations::REPLACEMENT_DRAINS.to_string(),
            "{\"evt\":1}".to_string(),
        )]
        .into();
        let read =
            crate::adapters::kube::headroom::annotations::parse_headroom(3, &reserved).unwrap();
        patches.extend(super::super::headroom::release_patch(&read, "1", "evt"));
        assert!(patches.len() >= 10, "only {} patches built", patches.len());
        for p in &patches {
            let mut found = Vec::new();
            keys_named(p, "template", "", &mut found);
            assert!(found.is_empty(), "template touched at {found:?} in {p}");
            for key in p["spec"].as_object().into_iter().flat_map(|m| m.keys()) {
                assert!(
                    ["limits", "disruption", "replicas"].contains(&key.as_str()),
                    "unexpected spec key {key} in {p}"
                );
            }
            if let Some(d) = p["spec"].get("disruption") {
                assert!(d.get("consolidateAfter").is_some(), "{p}");
            }
        }
    }
}
