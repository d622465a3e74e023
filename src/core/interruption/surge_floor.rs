//! What a drain's surge writes on one workload: the floor of the HPA that targets its Deployment
//! (`floor`: the HPA's `minReplicas`, or the `minReplicaCount` of the KEDA ScaledObject that owns
//! the HPA), else the Deployment's `spec.replicas` (`plan_workload_surge`). The floor a surge holds
//! there and the tick's plan beside it, which never lowers it, are `crate::floor`'s.

use std::collections::BTreeMap;

use super::surge::{
    plan_deployment_surge, plan_surge, SurgeDecision, SurgeIntent, SurgeRecord, SURGE_BASE,
    SURGE_DRAINS, SURGE_WRITTEN_REPLICAS,
};
use crate::floor::{plan_floor, FloorIntent, FloorView};
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
