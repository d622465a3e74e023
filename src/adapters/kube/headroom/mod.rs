//! Headroom actuators: read a target's headroom object (size + prewarm's annotations) and carry
//! out a plan on it; release replacement capacity a drain reserved here under the earlier design.
//!
//! The object is a balloon Deployment, a CapacityBuffer or a static NodePool; all three keep the
//! size in `spec.replicas`, so one path handles them as dynamic objects. Every write is a JSON
//! merge patch that carries the `metadata.resourceVersion` that was read: the apiserver refuses it
//! with 409 if anyone wrote in between, so two overlapping invocations (or a tick racing a
//! drain's reservation) can never both act on a stale view.

pub mod annotations;

use std::collections::BTreeMap;

use kube::api::{Patch, PatchParams};
use serde_json::{json, Map, Value};

use super::api_error::from_kube;
use super::conflict::retry_on_conflict;
use super::resources::HeadroomRef;
use crate::core::{Action, HeadroomState, Plan, TargetSpec};
use crate::error::{Error, Result};
use annotations::ParsedHeadroom;

/// A headroom object as read, with the version a write must match.
#[derive(Clone, Debug, PartialEq)]
pub struct HeadroomRead {
    pub object: HeadroomRef,
    pub resource_version: String,
    pub parsed: ParsedHeadroom,
}

impl HeadroomRead {
    pub fn state(&self) -> &HeadroomState {
        &self.parsed.state
    }
}

/// What happened to a plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ApplyOutcome {
    /// The patch was accepted; the object's size went from `before` to `after`.
    Written { before: u32, after: u32 },
    /// Nothing to write (same size, same state).
    Unchanged,
    /// DRY_RUN: this is what would have been written.
    DryRun { before: u32, after: u32 },
    /// Someone else wrote the object since it was read (409): this tick leaves it alone.
    Conflict,
}

impl ApplyOutcome {
    pub fn as_str(&self) -> &'static str {
        match self {
            ApplyOutcome::Written { .. } => "written",
            ApplyOutcome::Unchanged => "unchanged",
            ApplyOutcome::DryRun { .. } => "dry_run",
            ApplyOutcome::Conflict => "conflict_skipped",
        }
    }
}

/// Reads `spec.replicas` of the object. A static NodePool must have it; a CapacityBuffer without
/// it (sized by limits alone) counts as 0 until prewarm sets it.
pub fn object_size(object: &HeadroomRef, data: &Value) -> Result<u32> {
    match data.pointer("/spec/replicas") {
        Some(v) => v
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .ok_or_else(|| {
                Error::kube(
                    "read",
                    object.display.clone(),
                    format!("spec.replicas is not a count: {v}"),
                    false,
                )
            }),
        None if object.kind == "NodePool" => Err(Error::kube(
            "read",
            object.display.clone(),
            "spec.replicas is not set: the nodePoolReplicas headroom needs a static NodePool",
            false,
        )),
        None => Ok(0),
    }
}

/// Reads the headroom object of `target`. A missing object is `Error::NotFound` naming it.
pub async fn read_headroom(client: &kube::Client, target: &TargetSpec) -> Result<HeadroomRead> {
    read_ref(client, HeadroomRef::of(target)).await
}

async fn read_ref(client: &kube::Client, object: HeadroomRef) -> Result<HeadroomRead> {
    let found = object
        .api(client)
        .get(&object.name)
        .await
        .map_err(|e| from_kube("get", object.kind, &object.display, e))?;
    let size = object_size(&object, &found.data)?;
    let annotations = found.metadata.annotations.clone().unwrap_or_default();
    let parsed = annotations::parse_headroom(size, &annotations)
        .map_err(|message| Error::kube("read", object.display.clone(), message, false))?;
    let resource_version = found.metadata.resource_version.clone().ok_or_else(|| {
        Error::kube(
            "read",
            object.display.clone(),
            "the apiserver returned no resourceVersion",
            true,
        )
    })?;
    Ok(HeadroomRead {
        object,
        resource_version,
        parsed,
    })
}

/// The object's size after `plan`. `desired_spare` is the whole size, drains' reservations
/// included (core::decide adds them on top of its own share); a scale action moves it, failing
/// static only ever raises it (to the floor core asks for while blind), and it never drops below
/// what drains reserved.
pub fn planned_size(read: &ParsedHeadroom, plan: &Plan) -> u32 {
    match plan.action {
        Action::ScaleUp | Action::ScaleDown => {
            plan.desired_spare.max(read.state.replacement_reserved)
        }
        Action::FailStatic => read.size.max(plan.desired_spare),
        Action::None => read.size,
    }
}

fn merge_patch(
    resource_version: &str,
    annotations: Map<String, Value>,
    size: Option<u32>,
) -> Value {
    let mut patch = json!({
        "metadata": {"resourceVersion": resource_version, "annotations": annotations}
    });
    if let Some(size) = size {
        patch["spec"] = json!({ "replicas": size });
    }
    patch
}

/// The merge patch that carries out `plan`, or None when it would change nothing but the
/// last-tick stamp (not worth a write every tick).
pub fn plan_patch(
    read: &ParsedHeadroom,
    resource_version: &str,
    plan: &Plan,
    now: f64,
) -> Option<Value> {
    let size = planned_size(read, plan);
    let annotations = annotations::tick_annotation_patch(&read.state, &plan.next_state, now);
    let state_changes = annotations.len() > 1;
    if size == read.size && !state_changes {
        return None;
    }
    Some(merge_patch(
        resource_version,
        annotations,
        (size != read.size).then_some(size),
    ))
}

/// Sends a merge patch; a 409 is `Error::Conflict`.
async fn send_patch(client: &kube::Client, object: &HeadroomRef, patch: &Value) -> Result<()> {
    object
        .api(client)
        .patch(&object.name, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .map_err(|e| from_kube("patch", object.kind, &object.display, e))?;
    Ok(())
}

/// Writes are retried this often when the object changed only outside prewarm's part of it.
const WRITE_ATTEMPTS: usize = 5;

/// Carries out `plan` on the object read in `read` (unless `dry_run`).
///
/// The resourceVersion moves with every write to the object, including the status updates of
/// the Deployment or Karpenter controllers, which are frequent while balloons come and go. So a
/// 409 leads to a re-read: if prewarm's part (size and `prewarm.io/*` annotations) is still what
/// the plan was made from, the plan is still right and is sent again with the new version;
/// if it changed, another invocation or a drain acted, and the outcome is `Conflict` (the next
/// tick decides afresh).
pub async fn apply_plan(
    client: &kube::Client,
    read: &HeadroomRead,
    plan: &Plan,
    now: f64,
    dry_run: bool,
) -> Result<ApplyOutcome> {
    let before = read.parsed.size;
    let after = planned_size(&read.parsed, plan);
    let outcome = retry_on_conflict(WRITE_ATTEMPTS, |attempt| async move {
        let version = if attempt == 0 {
            read.resource_version.clone()
        } else {
            let again = read_ref(client, read.object.clone()).await?;
            if again.parsed != read.parsed {
                return Ok(ApplyOutcome::Conflict);
            }
            again.resource_version
        };
        let Some(patch) = plan_patch(&read.parsed, &version, plan, now) else {
            return Ok(ApplyOutcome::Unchanged);
        };
        if dry_run {
            return Ok(ApplyOutcome::DryRun { before, after });
        }
        send_patch(client, &read.object, &patch).await?;
        Ok(ApplyOutcome::Written { before, after })
    })
    .await;
    match outcome {
        Err(e) if e.is_conflict() => Ok(ApplyOutcome::Conflict),
        other => other,
    }
}

/// The patch releasing `drain_id`'s reservation, or None if it holds none (already released).
pub fn release_patch(
    read: &ParsedHeadroom,
    resource_version: &str,
    drain_id: &str,
) -> Option<Value> {
    let mut drains = read.drains.clone();
    let replicas = drains.remove(drain_id)?;
    Some(merge_patch(
        resource_version,
        annotations::drains_patch(&drains),
        Some(read.size.saturating_sub(replicas)),
    ))
}

/// A drain's reservation after `release_replacement`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reservation {
    /// The headroom object's size now.
    pub size: u32,
    /// All replicas reserved by drains now.
    pub reserved: u32,
    /// False when the call found the work already done (idempotent repeat).
    pub changed: bool,
}

/// The size and total reservation a release patch writes.
fn reservation_after(patch: &Value, before: &ParsedHeadroom) -> Reservation {
    let size = patch
        .pointer("/spec/replicas")
        .and_then(Value::as_u64)
        .map_or(before.size, |n| n as u32);
    let reserved = patch["metadata"]["annotations"][annotations::REPLACEMENT_RESERVED]
        .as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    Reservation {
        size,
        reserved,
        changed: true,
    }
}

/// Conflicts are retried this often: unlike a tick, a drain cannot wait for the next minute.
const RESERVATION_ATTEMPTS: usize = 5;

async fn change_reservation(
    client: &kube::Client,
    target: &TargetSpec,
    build: impl Fn(&ParsedHeadroom, &str) -> Option<Value>,
) -> Result<Reservation> {
    let object = &HeadroomRef::of(target);
    let build = &build;
    retry_on_conflict(RESERVATION_ATTEMPTS, |_| async move {
        let read = read_ref(client, object.clone()).await?;
        let Some(patch) = build(&read.parsed, &read.resource_version) else {
            return Ok(Reservation {
                size: read.parsed.size,
                reserved: read.parsed.state.replacement_reserved,
                changed: false,
            });
        };
        send_patch(client, object, &patch).await?;
        Ok(reservation_after(&patch, &read.parsed))
    })
    .await
}

/// Gives back what `drain_id` reserved on the headroom under the earlier design (a drain's
/// replacement is now its own placeholder pod, `drain::replacement`); kept so an upgrade hands
/// back what a drain running across it reserved. A repeat does nothing.
pub async fn release_replacement(
    client: &kube::Client,
    target: &TargetSpec,
    drain_id: &str,
) -> Result<Reservation> {
    change_reservation(client, target, |read, rv| release_patch(read, rv, drain_id)).await
}

/// Drain ids and their reservations, for logs.
pub fn reservations(read: &HeadroomRead) -> &BTreeMap<String, u32> {
    &read.parsed.drains
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::policy::plan::ForecastSummary;
    use crate::core::spec::Hold;

    fn parsed(size: u32, drains: &[(&str, u32)]) -> ParsedHeadroom {
        let drains: BTreeMap<String, u32> =
            drains.iter().map(|(k, v)| (k.to_string(), *v)).collect();
        let reserved: u32 = drains.values().sum();
        ParsedHeadroom {
            size,
            state: HeadroomState {
                spare: size,
                replacement_reserved: reserved,
                ..HeadroomState::default()
            },
            drains,
        }
    }

    fn plan(action: Action, current: u32, desired: u32, next: HeadroomState) -> Plan {
        Plan {
            target: "llama".into(),
            action,
            current_spare: current,
            desired_spare: desired,
            freeze_consolidation: None,
            forecast: ForecastSummary::default(),
            reasons: vec![],
            hpa_floor: None,
            next_state: next,
        }
    }

    const NOW: f64 = 1_795_953_600.0;

    #[test]
    fn scaling_up_writes_the_desired_size_with_the_version_read() {
        let read = parsed(5, &[("evt-1", 2)]);
        let next = HeadroomState {
            spare: 8,
            cooldown_until: Some(NOW + 60.0),
            ..read.state.clone()
        };
        let p = plan_patch(&read, "42", &plan(Action::ScaleUp, 5, 8, next), NOW).unwrap();
        assert_eq!(
            p,
            json!({
                "metadata": {
                    "resourceVersion": "42",
                    "annotations": {
                        "prewarm.io/cooldown-until": "2026-11-29T12:01:00.000Z",
                        "prewarm.io/last-tick": "2026-11-29T12:00:00.000Z",
                    }
                },
                "spec": {"replicas": 8}
            })
        );
    }

    #[test]
    fn holding_still_writes_nothing_unless_the_state_changes() {
        let read = parsed(3, &[]);
        let same = plan(Action::None, 3, 3, read.state.clone());
        assert_eq!(plan_patch(&read, "1", &same, NOW), None);

        let held = HeadroomState {
            hold: Some(Hold {
                spare: 3,
                until: NOW + 300.0,
            }),
            ..read.state.clone()
        };
        let p = plan_patch(&read, "1", &plan(Action::None, 3, 3, held), NOW).unwrap();
        assert!(p.get("spec").is_none(), "size must not be sent: {p}");
        assert_eq!(
            p["metadata"]["annotations"]["prewarm.io/hold"],
            r#"{"spare":3,"until":"2026-11-29T12:05:00.000Z"}"#
        );
    }

    #[test]
    fn failing_static_never_lowers_the_size() {
        let read = parsed(4, &[]);
        // Even a malformed plan asking for less keeps the size when the metrics are missing.
        let p = plan(Action::FailStatic, 4, 1, read.state.clone());
        assert_eq!(planned_size(&read, &p), 4);
        assert_eq!(plan_patch(&read, "1", &p, NOW), None);
        // Blind, core may still raise to a floor (minSpare, a scheduled window): that is written.
        let p = plan(Action::FailStatic, 4, 6, read.state.clone());
        assert_eq!(planned_size(&read, &p), 6);
    }

    #[test]
    fn scaling_down_never_goes_below_the_drains_reservations() {
        let read = parsed(6, &[("evt-1", 3)]);
        let p = plan(Action::ScaleDown, 6, 4, read.state.clone());
        assert_eq!(planned_size(&read, &p), 4);
        // A plan that forgot the reservation still leaves it in place.
        let p = plan(Action::ScaleDown, 6, 1, read.state.clone());
        assert_eq!(planned_size(&read, &p), 3);
    }

    #[test]
    fn a_release_gives_back_exactly_that_drains_replicas_once() {
        let read = parsed(5, &[("evt-1", 2), ("evt-2", 1)]);
        let p = release_patch(&read, "9", "evt-1").unwrap();
        assert_eq!(p["spec"]["replicas"], 3);
        assert_eq!(
            p["metadata"]["annotations"]["prewarm.io/replacement-drains"],
            "{\"evt-2\":1}"
        );
        assert_eq!(release_patch(&read, "9", "evt-unknown"), None);
        let last = release_patch(&parsed(1, &[("evt-2", 1)]), "10", "evt-2").unwrap();
        assert_eq!(last["spec"]["replicas"], 0);
        assert_eq!(
            last["metadata"]["annotations"]["prewarm.io/replacement-drains"],
            Value::Null
        );
    }

    #[test]
    fn size_is_read_from_spec_replicas() {
        let t: TargetSpec = serde_json::from_value(json!({
            "name": "llama", "nodePool": "gpu", "maxSpare": 8,
            "headroom": {"kind": "capacityBuffer", "namespace": "prewarm", "name": "gpu"}
        }))
        .unwrap();
        let buffer = HeadroomRef::of(&t);
        assert_eq!(
            object_size(&buffer, &json!({"spec": {"replicas": 3}})).unwrap(),
            3
        );
        assert_eq!(object_size(&buffer, &json!({"spec": {}})).unwrap(), 0);
        assert!(object_size(&buffer, &json!({"spec": {"replicas": -1}})).is_err());
        let pool = HeadroomRef::of(&TargetSpec {
            headroom: crate::core::HeadroomKind::NodePoolReplicas,
            ..t
        });
        let err = object_size(&pool, &json!({"spec": {}})).unwrap_err();
        assert!(err.to_string().contains("static NodePool"), "{err}");
    }
}
