//! What a drain's surge writes on one workload: the floor of the HPA that targets its Deployment
//! (`floor`: the HPA's `minReplicas`, or the `minReplicaCount` of the KEDA ScaledObject that owns
//! the HPA), else the Deployment's `spec.replicas` (`plan_workload_surge`); the floor a surge holds
//! there, and the tick's floor plan beside it, which never lowers it (only the drain's release
//! does).

use std::collections::BTreeMap;

use super::surge::{
    plan_deployment_surge, plan_surge, SurgeDecision, SurgeIntent, SurgeRecord, SURGE_BASE,
    SURGE_DRAINS, SURGE_WRITTEN_REPLICAS,
};
use crate::floor::{plan_floor, FloorIntent, FloorPatch, FloorView};
use crate::lease::LeaseOutcome;

/// The HPA floor lease of a surge: the tick's own floor logic restores an HPA it manages once
/// this has passed; a drain renews it at every step, and the drain's end or the tick's
/// collection restores it long before.
pub const SURGE_FLOOR_LEASE_S: f64 = 3600.0;

/// Where a workload's surge is raised, as observed.
#[derive(Clone, Debug, PartialEq)]
pub enum SurgeOn {
    /// The floor of the HPA that targets the Deployment (or of the ScaledObject that owns it).
    Floor(FloorView),
    /// The Deployment's own `spec.replicas`, with the Deployment's annotations.
    Replicas(BTreeMap<String, String>),
}

/// What one surge write does to a workload.
#[derive(Clone, Debug, PartialEq)]
pub struct WorkloadSurge {
    /// The count to write (the floor, or `spec.replicas`); None: leave it.
    pub count: Option<u32>,
    /// Annotations to set (a None value: remove), the surge record's and the lease's.
    pub annotations: BTreeMap<String, Option<String>>,
    /// The lease's outcome; None: nothing planned on the floor at all.
    pub outcome: Option<LeaseOutcome>,
    /// The user changed the surged field while it was raised: their value stays and the surge
    /// ends (nothing of prewarm's is put back).
    pub user_edit_kept: bool,
    /// The replicas a held surge waits for (None: no surge held).
    pub want: Option<u32>,
}

/// The surge record's annotations set to null (merge-patch removal).
fn record_removed() -> BTreeMap<String, Option<String>> {
    [
        (SURGE_DRAINS.to_string(), None),
        (SURGE_BASE.to_string(), None),
    ]
    .into()
}

/// Plans `intent` on a workload whose Deployment has `replicas` and whose surge goes `on`. Err
/// (naming the annotation) when prewarm's annotations there cannot be read.
pub fn plan_workload_surge(
    replicas: u32,
    on: &SurgeOn,
    intent: &SurgeIntent,
    now: f64,
) -> Result<WorkloadSurge, String> {
    let view = match on {
        SurgeOn::Floor(view) => view,
        SurgeOn::Replicas(annotations) => {
            let patch = plan_deployment_surge(replicas, annotations, intent)?;
            let user_edit_kept = patch.outcome == LeaseOutcome::UserEditKept;
            let want = if user_edit_kept || matches!(intent, SurgeIntent::Release { .. }) {
                None
            } else {
                patch.replicas.or_else(|| {
                    annotations
                        .get(SURGE_WRITTEN_REPLICAS)
                        .and_then(|w| w.parse().ok())
                })
            };
            return Ok(WorkloadSurge {
                count: patch.replicas,
                annotations: patch.annotations,
                outcome: Some(patch.outcome),
                user_edit_kept,
                want,
            });
        }
    };
    // The floor and the surge's record live on the object the floor is on; one write carries
    // both, so the tick's forecast floor sees the surge (`surge_floor`).
    let record = SurgeRecord::from_annotations(&view.annotations)?;
    let max = view.max_replicas;
    let (floor_intent, mut surge_annotations, want) =
        match plan_surge(record.as_ref(), replicas, Some(max), intent) {
            SurgeDecision::Set { want, record } => (
                FloorIntent::AtLeast(want),
                [
                    (
                        SURGE_DRAINS.to_string(),
                        Some(serde_json::to_string(&record.drains).unwrap_or_default()),
                    ),
                    (SURGE_BASE.to_string(), Some(record.base.to_string())),
                ]
                .into(),
                Some(want),
            ),
            SurgeDecision::Restore => (FloorIntent::Restore, record_removed(), None),
            SurgeDecision::Unchanged => {
                let held = record
                    .as_ref()
                    .filter(|_| matches!(intent, SurgeIntent::Hold { .. }));
                match held.map(|r| r.want(Some(max))) {
                    // A live surge renews its floor lease.
                    Some(w) => (FloorIntent::AtLeast(w), BTreeMap::new(), Some(w)),
                    None => {
                        return Ok(WorkloadSurge {
                            count: None,
                            annotations: BTreeMap::new(),
                            outcome: None,
                            user_edit_kept: false,
                            want: None,
                        })
                    }
                }
            }
        };
    let floor = plan_floor(view, floor_intent, now, SURGE_FLOOR_LEASE_S)?;
    // The user changed the floor while it was raised: the edit is theirs; the surge ends.
    let user_edit_kept = floor.outcome == LeaseOutcome::UserEditKept;
    if user_edit_kept {
        surge_annotations = record_removed();
    }
    let mut annotations = floor.annotations;
    annotations.extend(surge_annotations);
    Ok(WorkloadSurge {
        count: floor.min_replicas,
        annotations,
        outcome: Some(floor.outcome),
        user_edit_kept,
        want: want.filter(|_| !user_edit_kept),
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
mod tests {
    use super::*;
    use crate::floor::tests::{view, LEASE, NOW};
    use crate::floor::{LEASE_UNTIL, RAISED_MIN, USER_MIN};
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
