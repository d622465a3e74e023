//! The surge's part of a drain step: after `plan_drain`, each workload with a pod this step
//! evicts gets a `Command::Surge` (raise it by its pods on the node, or renew the raise), and
//! the evictions of a workload whose surge pods are not Ready yet move into that command, held
//! back until they are (or until the pod is due: the deadline always wins). The executor writes
//! the surge and carries the held evictions out only if the write fails: a surge that could not
//! be raised is no reason to wait. Everything is decided here from what the adapters observed of
//! each workload (`WorkloadSeen`); the rules of one workload's surge are `surge` and
//! `surge_floor`.

use std::collections::BTreeSet;

use super::model::{Command, DrainStep, PodRef, PodView};
use super::surge::{hold_evictions, surge_ready, wants_surge, SurgeIntent, SurgeRecord};
use super::surge_floor::{plan_workload_surge, SurgeOn};

/// A workload (a Deployment) with serving pods on the draining node, as observed.
#[derive(Clone, Debug, PartialEq)]
pub struct WorkloadSeen {
    pub namespace: String,
    pub deployment: String,
    /// Its pods on the node that still serve (not terminating, not finished): `k`.
    pub pods: Vec<PodRef>,
    /// The Deployment's `spec.replicas` and ready replicas.
    pub replicas: u32,
    pub ready: u32,
    pub on: SurgeOn,
}

/// What the surge planned in one step, for the step's log line.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SurgePlan {
    /// `namespace/deployment: k, want, ready` per workload surged.
    pub workloads: Vec<String>,
    /// Evictions held back until the surge pods are Ready.
    pub held: Vec<PodRef>,
    /// Workloads whose annotations cannot be read: no surge, their evictions go ahead.
    pub errors: Vec<String>,
}

/// Whether `step` has anything for a surge to do: it evicts, and the drain wants surges now
/// (`wants_surge`). The adapters observe the workloads only then.
pub fn surge_wanted(step: &DrainStep, now: f64) -> bool {
    step.evictions().next().is_some() && step.state.as_ref().is_some_and(|s| wants_surge(s, now))
}

/// Adds the step's surges for drain `drain_id` to `step` (module docs).
pub fn plan_surges(
    step: &mut DrainStep,
    pods: &[PodView],
    workloads: &[WorkloadSeen],
    drain_id: &str,
    now: f64,
) -> SurgePlan {
    let mut plan = SurgePlan::default();
    if !surge_wanted(step, now) {
        return plan;
    }
    let evicting: BTreeSet<PodRef> = step.evictions().cloned().collect();
    let mut surges = Vec::new();
    for w in workloads {
        if !w.pods.iter().any(|p| evicting.contains(p)) {
            continue;
        }
        let name = format!("{}/{}", w.namespace, w.deployment);
        let k = u32::try_from(w.pods.len()).unwrap_or(u32::MAX);
        let intent = SurgeIntent::Hold {
            drain: drain_id.to_string(),
            k,
        };
        match plan_workload_surge(w.replicas, &w.on, &intent, now) {
            Ok(surge) => {
                let waiting = surge.want.is_some_and(|want| !surge_ready(want, w.ready));
                plan.workloads.push(format!(
                    "{name}: k {k}, want {:?}, ready {}",
                    surge.want, w.ready
                ));
                let held: BTreeSet<PodRef> = if waiting {
                    w.pods.iter().cloned().collect()
                } else {
                    BTreeSet::new()
                };
                let of = |c: &Command, these: &dyn Fn(&PodRef) -> bool| matches!(c, Command::Evict { pod, .. } if these(pod));
                let asked: Vec<Command> = (step.commands.iter())
                    .filter(|c| of(c, &|p| held.contains(p)))
                    .cloned()
                    .collect();
                let kept = hold_evictions(step, pods, &held, now);
                let held = (asked.into_iter())
                    .filter(|c| of(c, &|p| kept.contains(p)))
                    .collect();
                plan.held.extend(kept);
                surges.push(Command::Surge {
                    namespace: w.namespace.clone(),
                    deployment: w.deployment.clone(),
                    k,
                    held,
                });
            }
            Err(e) => plan.errors.push(format!("{name}: {e}")),
        }
    }
    let at = step
        .commands
        .iter()
        .position(|c| matches!(c, Command::Evict { .. }))
        .unwrap_or(step.commands.len().saturating_sub(1));
    step.commands.splice(at..at, surges);
    plan
}

/// A workload's surge record, as observed on the object that was raised (its Deployment, the
/// HPA that targets it, or that HPA's ScaledObject).
#[derive(Clone, Debug, PartialEq)]
pub struct SurgedSeen {
    pub namespace: String,
    pub deployment: String,
    pub record: SurgeRecord,
}

/// Whether `step` ends its drain (`ReleaseReplacement`: drained or un-drained): only then are
/// the surge records observed, and the drain's shares given back.
pub fn releases_wanted(step: &DrainStep) -> bool {
    step.commands.contains(&Command::ReleaseReplacement)
}

/// Adds to a step that ends drain `drain_id` a `ReleaseSurge` for each of its surges in
/// `surged`, right before the placeholder's release. A step that does not end the drain
/// (its surges still needed) is left as it is.
pub fn plan_releases(step: &mut DrainStep, surged: &[SurgedSeen], drain_id: &str) {
    let Some(at) = (step.commands.iter()).position(|c| c == &Command::ReleaseReplacement) else {
        return;
    };
    let releases = release_surges(surged, |d| d == drain_id);
    step.commands.splice(at..at, releases);
}

/// A `ReleaseSurge` for each share in `surged` held by a drain `which` names (records of other
/// drains untouched): the drain's own when it ends or its node is gone, orphans for the tick,
/// every one for `prewarm restore`.
pub fn release_surges(surged: &[SurgedSeen], which: impl Fn(&str) -> bool) -> Vec<Command> {
    let shares = surged
        .iter()
        .flat_map(|s| s.record.drains.keys().map(move |d| (s, d)));
    shares
        .filter(|(_, drain)| which(drain))
        .map(|(s, drain)| Command::ReleaseSurge {
            namespace: s.namespace.clone(),
            deployment: s.deployment.clone(),
            drain: drain.clone(),
        })
        .collect()
}

/// The tick's collection: a `ReleaseSurge` for each share held by a drain not among those
/// `active` now (a node with a drain waiting for its replacement or evicting): its message
/// lost, its node gone, or its end's release not gone through.
pub fn orphan_releases(surged: &[SurgedSeen], active: &BTreeSet<String>) -> Vec<Command> {
    release_surges(surged, |d| !active.contains(d))
}

#[cfg(test)]
#[path = "surge_step_tests.rs"]
mod tests;
