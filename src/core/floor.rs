//! The floor prewarm raises on a workload's HPA (or on the KEDA ScaledObject that owns it), as a
//! lease kept in annotations on that object (like the NodePool's saved budgets):
//!
//! - `prewarm.io/user-min-replicas`: the user's value, saved when prewarm first raises;
//! - `prewarm.io/raised-min-replicas`: what prewarm wrote;
//! - `prewarm.io/floor-lease-until`: when the raise expires unless a tick renews it.
//!
//! Rules (`plan_floor`, over the lease protocol of `core::lease`), each in the table test:
//! - never above `maxReplicas`, never below the user's value;
//! - restore (user's value back, annotations removed) when the forecast no longer asks for more,
//!   when the lease has expired (the tick, or `prewarm restore`, finds it so), or on request;
//! - a user's edit made while raised (`minReplicas` is no longer what prewarm wrote) is kept: the
//!   annotations are dropped and the edit becomes the user's value;
//! - fail static: while the metrics are missing the floor is neither raised nor lowered (the
//!   lease is renewed so a metrics outage does not drop warm replicas).
//!
//! The tick plans with it through `plan_beside_surge` (below: a drain's surge on the same floor is
//! never lowered by it), and so does a drain's surge; `adapters::kube::hpa::floor` reads and writes.

use std::collections::BTreeMap;

use crate::interruption::state::{format_time, parse_annotation_time};
use crate::interruption::surge::SurgeRecord;
use crate::lease::{lease_step, Held, LeaseOutcome, Want};

/// The user's value, saved when prewarm first raises the floor.
pub const USER_MIN: &str = "prewarm.io/user-min-replicas";
/// What prewarm wrote.
pub const RAISED_MIN: &str = "prewarm.io/raised-min-replicas";
/// When the raise expires unless a tick renews it.
pub const LEASE_UNTIL: &str = "prewarm.io/floor-lease-until";

/// The HPA as the floor logic needs it.
#[derive(Clone, Debug, PartialEq)]
pub struct FloorView {
    pub min_replicas: u32,
    pub max_replicas: u32,
    pub annotations: BTreeMap<String, String>,
    pub keda_owner: Option<String>,
}

impl FloorView {
    /// A count kept in annotation `key`: None when absent, Err when malformed.
    pub fn count(&self, key: &str) -> Result<Option<u32>, String> {
        self.annotations
            .get(key)
            .map(|raw| {
                raw.trim()
                    .parse::<u32>()
                    .map_err(|_| format!("annotation {key}: expected a count, got {raw:?}"))
            })
            .transpose()
    }

    /// The user's floor while prewarm holds a raise (both annotations readable and the floor
    /// still what prewarm wrote); None when the floor on the object is the user's own (not
    /// raised, a user's edit made while raised, or annotations that cannot be read).
    pub fn saved_user_floor(&self) -> Option<u32> {
        match (self.count(USER_MIN), self.count(RAISED_MIN)) {
            (Ok(Some(user)), Ok(Some(raised))) if raised == self.min_replicas => Some(user),
            _ => None,
        }
    }
}

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
        .map(|raw| parse_annotation_time(raw).map_err(|e| format!("annotation {LEASE_UNTIL}: {e}")))
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

/// The floor a drain's surge holds on this HPA, if any (an unreadable record counts as none).
pub fn surge_floor(view: &FloorView) -> Option<u32> {
    SurgeRecord::from_annotations(&view.annotations)
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

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::test_util::string_map;

    pub(crate) const NOW: f64 = 1_795_953_600.0; // 2026-11-29T12:00:00Z
    pub(crate) const LEASE: f64 = 300.0;

    /// A floor object's view (the tables of `surge_floor` use it too).
    pub(crate) fn view(min: u32, max: u32, ann: &[(&str, &str)]) -> FloorView {
        FloorView {
            min_replicas: min,
            max_replicas: max,
            annotations: string_map(ann),
            keda_owner: None,
        }
    }

    /// The annotation writes a plan makes (None: remove), the tables of `surge` use it too.
    pub(crate) fn set(pairs: &[(&str, Option<&str>)]) -> BTreeMap<String, Option<String>> {
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
    fn malformed_annotations_are_refused() {
        let bad = view(5, 10, &[(USER_MIN, "two"), (RAISED_MIN, "5")]);
        let e = plan_floor(&bad, FloorIntent::Restore, NOW, LEASE).unwrap_err();
        assert!(e.contains(USER_MIN), "{e}");
    }

    #[test]
    fn the_users_floor_is_the_saved_one_only_while_prewarm_holds_the_raise() {
        let view = |min: u32, ann: &[(&str, &str)]| FloorView {
            min_replicas: min,
            max_replicas: 10,
            annotations: string_map(ann),
            keda_owner: None,
        };
        // (name, floor on the object, annotations, the user's floor) - by hand from the rule.
        type Row<'a> = (&'a str, u32, &'a [(&'a str, &'a str)], Option<u32>);
        let rows: [Row; 5] = [
            ("not raised", 2, &[], None),
            (
                "raised 2 -> 6",
                6,
                &[(USER_MIN, "2"), (RAISED_MIN, "6")],
                Some(2),
            ),
            (
                "user edited to 4 while raised to 6: 4 is the user's",
                4,
                &[(USER_MIN, "2"), (RAISED_MIN, "6")],
                None,
            ),
            ("half a lease", 6, &[(USER_MIN, "2")], None),
            (
                "malformed",
                6,
                &[(USER_MIN, "two"), (RAISED_MIN, "6")],
                None,
            ),
        ];
        for (name, min, ann, want) in rows {
            assert_eq!(view(min, ann).saved_user_floor(), want, "{name}");
        }
    }

    use crate::interruption::surge::{SURGE_BASE, SURGE_DRAINS};

    #[test]
    fn a_drain_surge_holds_the_floor_for_the_forecast() {
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
}
