//! A target's `limits` on its NodePool's `spec.limits` (a spend cap), and how `prewarm restore`
//! puts the user's limits back.
//!
//! Before prewarm first writes a limit it saves, in the `prewarm.io/saved-limits` annotation,
//! whether `spec.limits` existed and, per limit it writes, the user's value (verbatim JSON: a
//! quantity may be a string or a number; absent when the key was not there) and the value prewarm
//! wrote. Restoring puts back every limit that still holds prewarm's value: the user's value,
//! or no key when there was none, or no `spec.limits` at all when the NodePool had none. A limit
//! someone changed after prewarm wrote it is theirs and is kept; if they change it and prewarm
//! writes it again, their value is the one restore gives back (the value before prewarm's last
//! write). Each limit is a lease (`core::lease`): the saved value is the user's, the written
//! one prewarm's.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::view::NodePoolView;
use crate::core::lease::{lease_step, Held, LeaseOutcome, Want};
use crate::core::limits_room::{limits_with_room, PoolNode};

pub const SAVED_LIMITS: &str = "prewarm.io/saved-limits";

/// The content of the `prewarm.io/saved-limits` annotation.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SavedLimits {
    /// Whether the NodePool had a `spec.limits` before prewarm's first write.
    pub had_limits: bool,
    /// Per limit prewarm wrote.
    pub limits: BTreeMap<String, SavedLimit>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SavedLimit {
    /// The user's value before prewarm's write; None when the key was absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<Value>,
    /// The value prewarm wrote last.
    pub written: String,
}

/// A quantity as text: Kubernetes accepts `1000` and `"1000"` for the same limit.
pub fn quantity_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// A limit's value as the lease compares it: verbatim JSON (restored as the user wrote it), or
/// absent; two quantities are the same limit when their text is (`1000` and `"1000"`).
#[derive(Clone, Debug)]
struct Limit(Option<Value>);

impl PartialEq for Limit {
    fn eq(&self, other: &Limit) -> bool {
        match (&self.0, &other.0) {
            (Some(a), Some(b)) => match (quantity_text(a), quantity_text(b)) {
                (Some(a), Some(b)) => a == b,
                _ => a == b,
            },
            (a, b) => a.is_none() && b.is_none(),
        }
    }
}

/// What the saved-limits annotation holds of one limit, as a lease.
fn held_limit(entry: &SavedLimit) -> Held<Limit> {
    Held {
        user: Limit(entry.before.clone()),
        written: Limit(Some(Value::String(entry.written.clone()))),
    }
}

fn current_limit(view: &NodePoolView, key: &str) -> Option<Value> {
    view.spec
        .get("limits")
        .and_then(|l| l.get(key))
        .filter(|v| !v.is_null())
        .cloned()
}

/// The saved limits, None when prewarm has not written limits (or they were restored).
pub fn saved_limits(view: &NodePoolView) -> std::result::Result<Option<SavedLimits>, String> {
    view.annotations
        .get(SAVED_LIMITS)
        .map(|raw| {
            serde_json::from_str(raw).map_err(|e| {
                format!("annotation {SAVED_LIMITS} is not what prewarm writes ({e}): {raw}")
            })
        })
        .transpose()
}

/// The `spec.limits` entries that differ from `wanted` (other limits are left alone).
pub fn limits_changes(view: &NodePoolView, wanted: &BTreeMap<String, String>) -> Option<Value> {
    let changed: Map<String, Value> = wanted
        .iter()
        .filter(|(k, v)| {
            current_limit(view, k)
                .as_ref()
                .and_then(quantity_text)
                .as_deref()
                != Some(v.as_str())
        })
        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
        .collect();
    (!changed.is_empty()).then_some(Value::Object(changed))
}

/// The limits to write and the annotation that keeps the user's values, or None when every
/// wanted limit is already there. A broken annotation is an error: overwriting it would lose the
/// user's values.
pub fn limits_write(
    view: &NodePoolView,
    wanted: &BTreeMap<String, String>,
) -> std::result::Result<Option<(Value, String)>, String> {
    let Some(changed) = limits_changes(view, wanted) else {
        return Ok(None);
    };
    let mut saved = saved_limits(view)?.unwrap_or_else(|| SavedLimits {
        had_limits: view.spec.get("limits").is_some_and(|l| !l.is_null()),
        limits: BTreeMap::new(),
    });
    for (key, value) in changed.as_object().expect("limits_changes gives an object") {
        let written = value
            .as_str()
            .expect("limits are written as text")
            .to_string();
        let live = Limit(current_limit(view, key));
        let want = Want::Value(Limit(Some(value.clone())));
        let held = saved.limits.get(key).map(held_limit);
        let mut step = lease_step(held.as_ref(), &live, want.clone());
        // Changed by someone since prewarm's last write: the edit is kept as the user's value,
        // and the cap is written over it at once (the limit is changed, so it is raised).
        if step.outcome == LeaseOutcome::UserEditKept {
            step = lease_step(None, &live, want);
        }
        let user = step
            .held
            .map(|h| h.user.0)
            .expect("a changed limit is raised");
        saved.limits.insert(
            key.clone(),
            SavedLimit {
                before: user,
                written,
            },
        );
    }
    let annotation = serde_json::to_string(&saved).expect("JSON always serialises");
    Ok(Some((changed, annotation)))
}

/// What the NodePool's `spec.limits` would be after a restore (key -> verbatim value), the merge
/// patch per key that gets there, and the outcome: every limit that still holds prewarm's value
/// goes back to the user's (or away when the user had none); an edited one is kept.
fn restored(
    view: &NodePoolView,
    saved: &SavedLimits,
) -> (BTreeMap<String, Value>, Map<String, Value>, LeaseOutcome) {
    let mut patch = Map::new();
    let mut after: BTreeMap<String, Value> = view
        .spec
        .get("limits")
        .and_then(Value::as_object)
        .map(|m| m.clone().into_iter().collect())
        .unwrap_or_default();
    let mut outcomes = Vec::new();
    for (key, entry) in &saved.limits {
        let live = Limit(current_limit(view, key));
        let step = lease_step(Some(&held_limit(entry)), &live, Want::GiveBack);
        outcomes.push(step.outcome);
        match step.write.map(|user| user.0) {
            Some(Some(v)) => {
                after.insert(key.clone(), v.clone());
                patch.insert(key.clone(), v);
            }
            Some(None) => {
                after.remove(key);
                patch.insert(key.clone(), Value::Null);
            }
            None => {}
        }
    }
    after.retain(|_, v| !v.is_null());
    (after, patch, restore_outcome(&outcomes))
}

/// The outcome of giving several limits back: restored if any was, else kept if any was edited.
fn restore_outcome(outcomes: &[LeaseOutcome]) -> LeaseOutcome {
    [LeaseOutcome::Restored, LeaseOutcome::UserEditKept]
        .into_iter()
        .find(|o| outcomes.contains(o))
        .unwrap_or(LeaseOutcome::Unchanged)
}

/// The user's own limits, as text: `spec.limits` with prewarm's writes taken back (what
/// `prewarm restore` would leave). A value that is not a quantity is an error naming it.
pub fn user_limits(view: &NodePoolView) -> std::result::Result<BTreeMap<String, String>, String> {
    let after = match saved_limits(view)? {
        Some(saved) => restored(view, &saved).0,
        None => view
            .spec
            .get("limits")
            .and_then(Value::as_object)
            .map(|m| {
                m.clone()
                    .into_iter()
                    .filter(|(_, v)| !v.is_null())
                    .collect()
            })
            .unwrap_or_default(),
    };
    after
        .into_iter()
        .map(|(k, v)| match quantity_text(&v) {
            Some(text) => Ok((k, text)),
            None => Err(format!(
                "limit {k} of NodePool {} is not a quantity: {v}",
                view.name
            )),
        })
        .collect()
}

/// What this tick (or a drain's claim) does with a NodePool's `spec.limits`.
#[derive(Clone, Debug, PartialEq)]
pub enum LimitsIntent {
    /// Nothing.
    Leave,
    /// These limits (other keys left alone), the user's values saved before the first write.
    Write(BTreeMap<String, String>),
    /// The user's values back exactly and `prewarm.io/saved-limits` removed (nothing when
    /// prewarm holds no limit).
    Restore,
    /// Room for the replacements of the pool's draining nodes (`core::limits_room`) over a cap:
    /// the target's `limits`, or, when it sets none, the user's own `spec.limits` (raised only
    /// while a drain's reservation lasts, then restored exactly). Resolved against the NodePool as
    /// read at each write attempt (`resolve`), so a retry after a conflict sees the user's
    /// latest values.
    Room {
        cap: Option<BTreeMap<String, String>>,
        nodes: Vec<PoolNode>,
        now: f64,
    },
}

impl LimitsIntent {
    /// `Room` as `Write` or `Restore` for the NodePool as it is now; the others as they are.
    pub fn resolve(&self, view: &NodePoolView) -> std::result::Result<LimitsIntent, String> {
        let LimitsIntent::Room { cap, nodes, now } = self else {
            return Ok(self.clone());
        };
        if let Some(cap) = cap {
            let room = limits_with_room(cap, &view.name, nodes, *now)?;
            return Ok(LimitsIntent::Write(room.limits));
        }
        let user = user_limits(view)?;
        let room = limits_with_room(&user, &view.name, nodes, *now)?;
        Ok(if room.draining.is_empty() || room.limits == user {
            LimitsIntent::Restore
        } else {
            LimitsIntent::Write(room.limits)
        })
    }
}

/// What restoring the limits writes: Some(value) for `spec.limits` in a merge patch (an object
/// of the keys to put back, null per key to remove; or null to remove `spec.limits` the user
/// never had), None when nothing changes. Errors on a broken annotation.
pub fn limits_restore(view: &NodePoolView) -> std::result::Result<Option<Value>, String> {
    Ok(limits_restore_step(view)?.0)
}

/// `limits_restore` and its outcome: restored (some limit given back), kept (every limit prewarm
/// wrote was edited since), unchanged (prewarm holds no limit).
pub fn limits_restore_step(
    view: &NodePoolView,
) -> std::result::Result<(Option<Value>, LeaseOutcome), String> {
    let Some(saved) = saved_limits(view)? else {
        return Ok((None, LeaseOutcome::Unchanged));
    };
    let (after, patch, outcome) = restored(view, &saved);
    let limits_present = view.spec.get("limits").is_some_and(|l| !l.is_null());
    if !saved.had_limits && after.is_empty() && limits_present {
        return Ok((Some(Value::Null), LeaseOutcome::Restored));
    }
    Ok(((!patch.is_empty()).then_some(Value::Object(patch)), outcome))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::string_map;
    use serde_json::json;

    fn view(limits: Option<Value>, saved: Option<&str>) -> NodePoolView {
        let mut spec = json!({"disruption": {"consolidateAfter": "10m"}});
        if let Some(l) = limits {
            spec["limits"] = l;
        }
        NodePoolView {
            name: "gpu".into(),
            resource_version: "1".into(),
            annotations: saved
                .map(|s| (SAVED_LIMITS.to_string(), s.to_string()))
                .into_iter()
                .collect(),
            spec,
        }
    }

    /// (situation, current spec.limits, annotation before, wanted, limits patch, annotation).
    type WriteCase = (
        &'static str,
        Option<Value>,
        Option<&'static str>,
        BTreeMap<String, String>,
        Option<Value>,
        Option<Value>,
    );
    /// (situation, current spec.limits, annotation, spec.limits merge patch).
    type RestoreCase = (
        &'static str,
        Option<Value>,
        Option<&'static str>,
        Option<Value>,
    );

    /// (situation, spec.limits, annotation, the user's limits).
    type UserCase = (
        &'static str,
        Option<Value>,
        Option<&'static str>,
        BTreeMap<String, String>,
    );
    /// (situation, intent, spec.limits, annotation, resolved intent).
    type RoomCase = (
        &'static str,
        LimitsIntent,
        Option<Value>,
        Option<&'static str>,
        LimitsIntent,
    );

    fn parsed(annotation: &str) -> Value {
        serde_json::from_str(annotation).unwrap()
    }

    /// (situation, current spec.limits, annotation before, wanted, expected limits patch,
    /// expected annotation) - written by hand.
    #[test]
    fn the_first_write_saves_the_users_values_and_later_writes_keep_them() {
        let cases: [WriteCase; 6] = [
            (
                "a limit changed: the user's value saved verbatim (a number stays a number)",
                Some(json!({"cpu": 1000, "nvidia.com/gpu": "32"})),
                None,
                string_map(&[("nvidia.com/gpu", "16")]),
                Some(json!({"nvidia.com/gpu": "16"})),
                Some(json!({"hadLimits": true, "limits": {
                    "nvidia.com/gpu": {"before": "32", "written": "16"}}})),
            ),
            (
                "a new key: nothing before it",
                Some(json!({"cpu": "1000"})),
                None,
                string_map(&[("nvidia.com/gpu", "16")]),
                Some(json!({"nvidia.com/gpu": "16"})),
                Some(json!({"hadLimits": true, "limits": {
                    "nvidia.com/gpu": {"written": "16"}}})),
            ),
            (
                "no spec.limits at all",
                None,
                None,
                string_map(&[("nvidia.com/gpu", "16")]),
                Some(json!({"nvidia.com/gpu": "16"})),
                Some(json!({"hadLimits": false, "limits": {
                    "nvidia.com/gpu": {"written": "16"}}})),
            ),
            (
                "prewarm writes again: the user's value stays the one from before its first write",
                Some(json!({"nvidia.com/gpu": "16"})),
                Some(
                    r#"{"hadLimits":true,"limits":{"nvidia.com/gpu":{"before":"32","written":"16"}}}"#,
                ),
                string_map(&[("nvidia.com/gpu", "8")]),
                Some(json!({"nvidia.com/gpu": "8"})),
                Some(json!({"hadLimits": true, "limits": {
                    "nvidia.com/gpu": {"before": "32", "written": "8"}}})),
            ),
            (
                "the user set 24 since prewarm wrote 16: 24 is what restore gives back",
                Some(json!({"nvidia.com/gpu": "24"})),
                Some(
                    r#"{"hadLimits":true,"limits":{"nvidia.com/gpu":{"before":"32","written":"16"}}}"#,
                ),
                string_map(&[("nvidia.com/gpu", "16")]),
                Some(json!({"nvidia.com/gpu": "16"})),
                Some(json!({"hadLimits": true, "limits": {
                    "nvidia.com/gpu": {"before": "24", "written": "16"}}})),
            ),
            (
                "already as wanted: nothing written, nothing saved",
                Some(json!({"nvidia.com/gpu": 16})),
                None,
                string_map(&[("nvidia.com/gpu", "16")]),
                None,
                None,
            ),
        ];
        for (situation, limits, saved, want, patch, annotation) in cases {
            let got = limits_write(&view(limits, saved), &want).unwrap();
            assert_eq!(got.as_ref().map(|g| g.0.clone()), patch, "{situation}");
            assert_eq!(got.map(|g| parsed(&g.1)), annotation, "{situation}");
        }
    }

    /// (situation, current spec.limits, annotation, expected spec.limits merge patch) - by hand.
    #[test]
    fn restore_puts_back_exactly_what_the_user_had_and_keeps_their_edits() {
        let cases: [RestoreCase; 7] = [
            (
                "the user's value back, verbatim",
                Some(json!({"cpu": "1000", "nvidia.com/gpu": "16"})),
                Some(
                    r#"{"hadLimits":true,"limits":{"nvidia.com/gpu":{"before":32,"written":"16"}}}"#,
                ),
                Some(json!({"nvidia.com/gpu": 32})),
            ),
            (
                "a key the user did not have is removed",
                Some(json!({"cpu": "1000", "nvidia.com/gpu": "16"})),
                Some(r#"{"hadLimits":true,"limits":{"nvidia.com/gpu":{"written":"16"}}}"#),
                Some(json!({"nvidia.com/gpu": null})),
            ),
            (
                "an empty spec.limits the user had stays empty",
                Some(json!({"nvidia.com/gpu": "16"})),
                Some(r#"{"hadLimits":true,"limits":{"nvidia.com/gpu":{"written":"16"}}}"#),
                Some(json!({"nvidia.com/gpu": null})),
            ),
            (
                "no spec.limits before: none after",
                Some(json!({"nvidia.com/gpu": "16"})),
                Some(r#"{"hadLimits":false,"limits":{"nvidia.com/gpu":{"written":"16"}}}"#),
                Some(Value::Null),
            ),
            (
                "no spec.limits before, but the user added a limit meanwhile: it stays",
                Some(json!({"cpu": "64", "nvidia.com/gpu": "16"})),
                Some(r#"{"hadLimits":false,"limits":{"nvidia.com/gpu":{"written":"16"}}}"#),
                Some(json!({"nvidia.com/gpu": null})),
            ),
            (
                "the user changed prewarm's limit since: kept",
                Some(json!({"nvidia.com/gpu": "24"})),
                Some(
                    r#"{"hadLimits":true,"limits":{"nvidia.com/gpu":{"before":"32","written":"16"}}}"#,
                ),
                None,
            ),
            (
                "prewarm never wrote limits",
                Some(json!({"nvidia.com/gpu": "16"})),
                None,
                None,
            ),
        ];
        for (situation, limits, saved, want) in cases {
            assert_eq!(
                limits_restore(&view(limits, saved)).unwrap(),
                want,
                "{situation}"
            );
        }
    }

    /// (situation, current spec.limits, annotation, the user's limits) - by hand.
    #[test]
    fn the_users_limits_are_spec_limits_with_prewarms_writes_taken_back() {
        let cases: [UserCase; 5] = [
            (
                "never written by prewarm: spec.limits as text (a number too)",
                Some(json!({"cpu": 1000, "nvidia.com/gpu": "32"})),
                None,
                string_map(&[("cpu", "1000"), ("nvidia.com/gpu", "32")]),
            ),
            (
                "raised by prewarm from 32 to 40: 32",
                Some(json!({"cpu": "1000", "nvidia.com/gpu": "40"})),
                Some(
                    r#"{"hadLimits":true,"limits":{"nvidia.com/gpu":{"before":"32","written":"40"}}}"#,
                ),
                string_map(&[("cpu", "1000"), ("nvidia.com/gpu", "32")]),
            ),
            (
                "a key only prewarm wrote is not the user's",
                Some(json!({"cpu": "1000", "nvidia.com/gpu": "40"})),
                Some(r#"{"hadLimits":true,"limits":{"nvidia.com/gpu":{"written":"40"}}}"#),
                string_map(&[("cpu", "1000")]),
            ),
            (
                "the user changed it since prewarm wrote: their value",
                Some(json!({"nvidia.com/gpu": "48"})),
                Some(
                    r#"{"hadLimits":true,"limits":{"nvidia.com/gpu":{"before":"32","written":"40"}}}"#,
                ),
                string_map(&[("nvidia.com/gpu", "48")]),
            ),
            ("no spec.limits", None, None, string_map(&[])),
        ];
        for (situation, limits, saved, want) in cases {
            assert_eq!(
                user_limits(&view(limits, saved)).unwrap(),
                want,
                "{situation}"
            );
        }
        let odd = view(Some(json!({"cpu": {"a": 1}})), None);
        assert!(user_limits(&odd).unwrap_err().contains("cpu"));
    }

    /// A node of NodePool "gpu" (the test view's name) with 8 GPUs, draining or not.
    fn gpu_node(draining: bool) -> PoolNode {
        use crate::core::interruption::{DrainState, NoticeKind, Phase};
        PoolNode {
            name: "n1".into(),
            node_pool: Some("gpu".into()),
            drain: draining.then(|| DrainState {
                event_id: "ev".into(),
                kind: NoticeKind::SpotInterruption,
                phase: Phase::WaitingForReplacement,
                notice_time: 1000.0,
                deadline: Some(1090.0),
                started_at: 1000.0,
                replacement_requested_at: Some(1000.0),
                replacement_ready_at: None,
                evicting_since: None,
                finished_at: None,
                replacement_gpus: 8,
                instance_end: Some(1120.0),
                last_step_at: Some(1000.0),
                next_check_at: None,
                event_time: None,
                user_cordoned: false,
                pods_moved: 0,
            }),
            capacity: [("nvidia.com/gpu".to_string(), "8".to_string())].into(),
        }
    }

    /// (situation, target cap, spec.limits, annotation, draining, expected intent) - by hand.
    #[test]
    fn room_resolves_over_the_targets_cap_or_the_users_own_limits() {
        let room = |cap: Option<&[(&str, &str)]>, draining: bool| LimitsIntent::Room {
            cap: cap.map(string_map),
            nodes: vec![gpu_node(draining)],
            now: 1010.0,
        };
        let raised =
            r#"{"hadLimits":true,"limits":{"nvidia.com/gpu":{"before":16,"written":"24"}}}"#;
        let cases: [RoomCase; 5] = [
            (
                "target cap 64, a node draining: 72",
                room(Some(&[("nvidia.com/gpu", "64")]), true),
                Some(json!({"nvidia.com/gpu": "64"})),
                None,
                LimitsIntent::Write(string_map(&[("nvidia.com/gpu", "72")])),
            ),
            (
                "target cap 64, nothing draining: 64",
                room(Some(&[("nvidia.com/gpu", "64")]), false),
                Some(json!({"nvidia.com/gpu": "72"})),
                None,
                LimitsIntent::Write(string_map(&[("nvidia.com/gpu", "64")])),
            ),
            (
                "no target cap, the user's 16 (a number), a node draining: 24",
                room(None, true),
                Some(json!({"nvidia.com/gpu": 16})),
                None,
                LimitsIntent::Write(string_map(&[("nvidia.com/gpu", "24")])),
            ),
            (
                "no target cap, raised to 24 and still draining: the user's 16 + 8 again",
                room(None, true),
                Some(json!({"nvidia.com/gpu": "24"})),
                Some(raised),
                LimitsIntent::Write(string_map(&[("nvidia.com/gpu", "24")])),
            ),
            (
                "no target cap, the drain is over: the user's value back",
                room(None, false),
                Some(json!({"nvidia.com/gpu": "24"})),
                Some(raised),
                LimitsIntent::Restore,
            ),
        ];
        for (situation, intent, limits, saved, want) in cases {
            assert_eq!(
                intent.resolve(&view(limits, saved)).unwrap(),
                want,
                "{situation}"
            );
        }
    }

    #[test]
    fn a_broken_annotation_is_reported_and_never_overwritten() {
        let v = view(Some(json!({"nvidia.com/gpu": "16"})), Some("{oops"));
        assert!(limits_restore(&v).unwrap_err().contains(SAVED_LIMITS));
        let err = limits_write(&v, &string_map(&[("nvidia.com/gpu", "8")])).unwrap_err();
        assert!(err.contains(SAVED_LIMITS), "{err}");
        let unknown = view(None, Some(r#"{"hadLimits":true,"limits":{},"extra":1}"#));
        assert!(limits_restore(&unknown).is_err());
    }
}
