//! Carries out one planned drain step (`core::interruption::plan_drain`) against the cluster and
//! reports what happened, for the step's log line and metrics.
//!
//! Order: one node write with the drain state, cordon and taint (or, to un-drain, their removal;
//! guarded by the resourceVersion read: on a conflict the caller observes again and re-plans),
//! then the replacement placeholder (idempotent per drain id), then the remaining commands in the
//! planner's order: the placeholder's deletion right before the evictions it stands in for
//! (hand-over; the drain's surges stay raised), the surges (each before the evictions it may
//! hold), the evictions, and at the drain's end the surges given back (the core's `ReleaseSurge`
//! commands) and the placeholder's deletion. Each milestone is an Event on the node: claimed, replacement ready, each eviction,
//! blocked, drained, un-drained.

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::runtime::events::Recorder;

use super::replacement::{self, DrainContext, Requested};
use super::surge::{release_surge, surge_workload};
use super::{
    api_failure, node_patch, patch_node, pdbs_covering, pods_moved_patch, record_event,
    undrain_patch, Observation,
};
use crate::adapters::kube::api_error::is_pdb_refusal;
use crate::adapters::kube::nodepool::limits_room::sync_room;
use crate::adapters::kube::shape::node_pool_of;
use crate::core::interruption::state::format_time;
use crate::core::interruption::surge::SurgeIntent;
use crate::core::interruption::{
    ends_drain, reservation_expiry, Command, DrainStep, Finish, PodRef, ReplacementSeen,
};
use crate::core::TargetSpec;
use crate::error::Result;
use kube::api::{Api, DeleteParams, EvictParams, Preconditions};

/// An eviction a PodDisruptionBudget refused.
#[derive(Clone, Debug, PartialEq)]
pub struct Blocked {
    pub pod: PodRef,
    pub pdbs: Vec<String>,
    pub message: String,
}

/// What one executed step did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StepReport {
    /// The node changed under us (409): nothing after the node write was done; plan again.
    pub conflict: bool,
    pub cordoned: bool,
    pub tainted: bool,
    pub requested: Option<Requested>,
    /// Why a replacement request failed (the drain goes on; the deadline still holds).
    pub request_error: Option<String>,
    pub evicted: Vec<PodRef>,
    pub already_gone: Vec<PodRef>,
    pub blocked: Vec<Blocked>,
    /// Evictions that failed for another reason (retried next check).
    pub eviction_errors: Vec<String>,
    /// Pods deleted past a PodDisruptionBudget at the deadline (DELETE_PAST_PDB_AT_DEADLINE).
    pub deleted_past_pdb: Vec<PodRef>,
    /// The surges written (`namespace/deployment: outcome`).
    pub surged: Vec<String>,
    /// Surges that could not be written: their held evictions were carried out instead.
    pub surge_errors: Vec<String>,
    pub released: Vec<String>,
    /// Releases that failed: the drain is not finished until the reservation is given back.
    pub release_errors: Vec<String>,
    pub undrained: bool,
    /// The room made in the NodePool's limits at a replacement request or while the placeholder
    /// is pending (`written`, `unchanged`, `conflict_skipped`, or the error; the next step and
    /// the tick try again). None: neither this step.
    pub room: Option<String>,
}

/// What a step is carried out with, besides the observation and the plan.
#[derive(Clone, Copy)]
pub struct StepContext<'a> {
    pub client: &'a kube::Client,
    /// Where the milestones' Events go.
    pub recorder: &'a Recorder,
    pub drain: DrainContext<'a>,
}

/// The node write of a step that records the drain state: the patch, and whether it cordons
/// and taints.
pub struct StateWrite {
    pub patch: serde_json::Value,
    pub cordons: bool,
    pub taints: bool,
}

/// The one node write that records `step`'s drain state with its cordon and taint, if the step
/// records state (pure: the executor and `prewarm explain --cluster-state` both write with it).
pub fn state_write(node: &Node, step: &DrainStep) -> Option<StateWrite> {
    let cordon = step.commands.contains(&Command::Cordon);
    let taint = step.commands.iter().find_map(|c| match c {
        Command::Taint { kind } => Some(*kind),
        _ => None,
    });
    let records_state = step
        .commands
        .iter()
        .any(|c| matches!(c, Command::RecordState { .. }));
    let state = step.state.as_ref().filter(|_| records_state)?;
    Some(StateWrite {
        patch: node_patch(node, state, cordon, taint),
        cordons: cordon,
        taints: taint.is_some(),
    })
}

/// The node write that un-drains, if `step` un-drains (pure, as `state_write`).
pub fn undrain_write(node: &Node, step: &DrainStep) -> Option<serde_json::Value> {
    step.commands.iter().find_map(|c| match c {
        Command::Undrain {
            uncordon,
            closed_by,
            false_alarm_at,
        } => Some(undrain_patch(
            node,
            *uncordon,
            closed_by.as_ref(),
            *false_alarm_at,
        )),
        _ => None,
    })
}

/// Carries out `step`, planned from `observed`.
pub async fn execute(
    ctx: &StepContext<'_>,
    observed: &Observation,
    step: &DrainStep,
) -> Result<StepReport> {
    let StepContext {
        client,
        recorder,
        drain,
    } = *ctx;
    let DrainContext {
        targets,
        drain_id,
        event_id,
        now,
        ..
    } = drain;
    let mut report = StepReport::default();
    let node = &observed.node;
    let pool = node_pool_of(node);

    if let Some(write) = state_write(node, step) {
        if !patch_node(client, node, &write.patch).await? {
            report.conflict = true;
            return Ok(report);
        }
        report.cordoned = write.cordons;
        report.tainted = write.taints;
    }
    if let Some(patch) = undrain_write(node, step) {
        if !patch_node(client, node, &patch).await? {
            report.conflict = true;
            return Ok(report);
        }
        report.undrained = true;
    }
    // After the node write: the claim is on the node before its placeholder exists (see
    // `replacement::placeholders_in`).
    for command in &step.commands {
        if let (Command::RequestReplacement { gpus, pods }, Some(s)) =
            (command, step.state.as_ref())
        {
            let expires_at = reservation_expiry(s);
            match replacement::request(
                client,
                &drain,
                node,
                &observed.pods,
                pods,
                expires_at,
                *gpus,
            )
            .await
            {
                Ok(r) => report.requested = Some(r),
                // The next check sees no placeholder and asks again.
                Err(e) => report.request_error = Some(e.to_string()),
            }
        }
    }

    // Room in the NodePool's limits for the replacement, now: the draining node still counts
    // against them, and at the cap Karpenter would not launch the placeholder's node. The tick
    // keeps the same room (same function of the same cluster state) and gives it back. Made at
    // the request and again at every step that waits for the placeholder: a write refused or
    // given up after conflicts is retried until the placeholder runs (an unchanged room costs a
    // read of the NodePool and a list of its nodes).
    let requests = step
        .commands
        .iter()
        .any(|c| matches!(c, Command::RequestReplacement { .. }));
    let waits = observed.view.replacement == ReplacementSeen::Pending
        && !step.commands.contains(&Command::HandOver);
    if let (true, Some(pool)) = (requests || waits, pool) {
        if let Some(target) = replacement::target_for_pool(targets, pool) {
            report.room = Some(
                match sync_room(client, pool, target.limits.as_ref(), now).await {
                    Ok(outcome) => outcome.as_str().to_string(),
                    Err(e) => {
                        tracing::warn!(error = %e, drain_id, pool, "no room made in the NodePool's limits");
                        format!("error: {e}")
                    }
                },
            );
        }
    }

    milestone_events(recorder, observed, step, event_id).await;

    for command in &step.commands {
        match command {
            Command::Evict { .. } => evict_one(ctx, observed, command, &mut report).await,
            Command::Surge {
                namespace,
                deployment,
                k,
                held,
            } => {
                let intent = SurgeIntent::Hold {
                    drain: drain_id.to_string(),
                    k: *k,
                };
                let name = format!("{namespace}/{deployment}");
                match surge_workload(client, namespace, deployment, &intent, now).await {
                    Ok(w) => report.surged.push(format!("{name}: {}", w.outcome)),
                    // A surge that could not be raised is no reason to wait.
                    Err(e) => {
                        report.surge_errors.push(format!("{name}: {e}"));
                        for evict in held {
                            evict_one(ctx, observed, evict, &mut report).await;
                        }
                    }
                }
            }
            // The planner's reason, as a warning Event on the node.
            Command::Announce { reason, note } => {
                event(recorder, observed, true, reason, note.clone(), None).await
            }
            // Hand-over: the placeholder only; the drain's surges stay until it ends (the gate
            // may have raised them in this very step, for these evictions).
            Command::HandOver => {
                release_placeholder(client, targets, pool, drain_id, &mut report).await
            }
            // The drain's surges end with it (a failure keeps the drain open, as below).
            Command::ReleaseSurge {
                namespace,
                deployment,
                drain,
            } => match release_surge(client, namespace, deployment, drain, now).await {
                Ok(r) => report.released.push(format!("surge {}", r.line)),
                Err(e) => report.release_errors.push(format!("surge: {e}")),
            },
            Command::ReleaseReplacement => {
                release_placeholder(client, targets, pool, drain_id, &mut report).await
            }
            _ => {}
        }
    }
    // The drain's count of pods moved, kept on the node for its end (`PodsMoved`): a failed
    // write costs the metric, never the drain.
    let moved = report.evicted.len() + report.deleted_past_pdb.len();
    if let (true, Some(s)) = (moved > 0, step.state.as_ref()) {
        if let Err(e) = patch_node(client, node, &pods_moved_patch(s.pods_moved, moved)).await {
            tracing::warn!(error = %e, drain_id, moved, "could not count the pods moved on the node");
        }
    }
    Ok(report)
}

/// Carries out one `Command::Evict` (anything else is ignored).
async fn evict_one(
    ctx: &StepContext<'_>,
    observed: &Observation,
    command: &Command,
    report: &mut StepReport,
) {
    let (client, recorder, event_id) = (ctx.client, ctx.recorder, ctx.drain.event_id);
    let Command::Evict {
        pod,
        uid,
        grace_s,
        delete_if_blocked,
        ..
    } = command
    else {
        return;
    };
    match evict(client, pod, uid.as_deref(), *grace_s).await {
        Ok(EvictionOutcome::Blocked { message, .. }) if *delete_if_blocked => {
            // Opted in: the instance goes at its end regardless, and the user chose a
            // clean shutdown over the budget.
            match delete_pod(client, pod, uid.as_deref(), *grace_s).await {
                Ok(()) => {
                    let note = format!(
                    "deleted pod {pod} past its PodDisruptionBudget at the eviction deadline ({message}; DELETE_PAST_PDB_AT_DEADLINE, interruption event {event_id})"
                );
                    event(
                        recorder,
                        observed,
                        true,
                        "DrainDeletedPastPDB",
                        note,
                        find_pod(observed, pod),
                    )
                    .await;
                    report.deleted_past_pdb.push(pod.clone());
                }
                Err(e) => report
                    .eviction_errors
                    .push(format!("{pod}: delete past PDB: {e}")),
            }
        }
        Ok(EvictionOutcome::Evicted) => {
            let grace = grace_s.map_or(String::new(), |g| {
                format!(" with its grace period cut to {g} s (the instance's end)")
            });
            let note = format!("evicted pod {pod}{grace} (interruption event {event_id})");
            event(
                recorder,
                observed,
                false,
                "DrainEvicted",
                note,
                find_pod(observed, pod),
            )
            .await;
            report.evicted.push(pod.clone())
        }
        Ok(EvictionOutcome::Gone) => report.already_gone.push(pod.clone()),
        Ok(EvictionOutcome::Blocked { message, .. }) => {
            let object = find_pod(observed, pod);
            let pdbs = match object {
                Some(p) => pdbs_covering(client, p).await.unwrap_or_default(),
                None => Vec::new(),
            };
            let note = blocked_note(pod, &pdbs, &message, event_id);
            event(recorder, observed, true, "DrainBlockedByPDB", note, object).await;
            report.blocked.push(Blocked {
                pod: pod.clone(),
                pdbs,
                message,
            });
        }
        Err(e) => report.eviction_errors.push(format!("{pod}: {e}")),
    }
}

/// Deletes the drain's placeholder, noting what was released or why not.
async fn release_placeholder(
    client: &kube::Client,
    targets: &[TargetSpec],
    pool: Option<&str>,
    drain_id: &str,
    report: &mut StepReport,
) {
    for r in replacement::release(client, targets, pool, drain_id).await {
        match r {
            Ok(t) => report.released.push(t),
            Err(e) => {
                tracing::warn!(error = %e, drain_id, "could not release the replacement");
                report.release_errors.push(e.to_string());
            }
        }
    }
}

async fn event(
    recorder: &Recorder,
    observed: &Observation,
    warning: bool,
    reason: &str,
    note: String,
    related: Option<&Pod>,
) {
    if let Err(e) = record_event(recorder, &observed.node, warning, reason, note, related).await {
        tracing::warn!(error = %e, reason, "could not record the Event on the node");
    }
}

/// Events for what changed in this step: the claim, the replacement becoming ready, the end.
async fn milestone_events(
    recorder: &Recorder,
    observed: &Observation,
    step: &DrainStep,
    event_id: &str,
) {
    let before = observed.view.state.as_ref();
    let after = step.state.as_ref();
    let mut events: Vec<(&str, String)> = Vec::new();
    if let Some(s) = after.filter(|s| before.is_none_or(|b| b.event_id != s.event_id)) {
        let deadline = s.deadline.map_or("none".into(), format_time);
        events.push((
            "DrainClaimed",
            format!(
                "{} notice {event_id}: cordoned and tainted, replacement requested; eviction deadline {deadline}",
                s.kind
            ),
        ));
    }
    if let Some(ready) = after
        .and_then(|s| s.replacement_ready_at)
        .filter(|_| before.and_then(|b| b.replacement_ready_at).is_none())
    {
        events.push((
            "DrainReplacementReady",
            format!(
                "this drain's replacement placeholder runs on a Ready node elsewhere at {} (event {event_id})",
                format_time(ready)
            ),
        ));
    }
    match step.last() {
        Command::Done(Finish::Drained) if ends_drain(before, step) => {
            events.push(("DrainFinished", format!("no evictable pods left; replacement placeholder deleted (event {event_id})")))
        }
        Command::Done(Finish::Undrained) => events.push((
            "Undrained",
            format!(
                "drain of notice {event_id} ended without eviction (notice closed, prewarm expired or node survived): {}taint and drain state removed, replacement released",
                if step
                    .commands
                    .iter()
                    .any(|c| matches!(c, Command::Undrain { uncordon: false, .. }))
                {
                    "the cordon set before the drain kept; "
                } else {
                    "cordon, "
                }
            ),
        )),
        _ => {}
    }
    for (reason, note) in events {
        event(recorder, observed, false, reason, note, None).await;
    }
}

fn find_pod<'a>(observed: &'a Observation, pod: &PodRef) -> Option<&'a Pod> {
    observed.pods.iter().find(|p| {
        p.metadata.name.as_deref() == Some(pod.name.as_str())
            && p.metadata.namespace.as_deref() == Some(pod.namespace.as_str())
    })
}

/// The Event text: which pod, which budget, and the apiserver's own words.
pub fn blocked_note(pod: &PodRef, pdbs: &[String], message: &str, event_id: &str) -> String {
    let budget = match pdbs {
        [] => "no PodDisruptionBudget found (throttled?)".to_string(),
        names => format!(
            "PodDisruptionBudget {}",
            names
                .iter()
                .map(|n| format!("{}/{n}", pod.namespace))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    format!("eviction of pod {pod} blocked by {budget}: {message} (interruption event {event_id}); retrying")
}

/// What an eviction came to.
#[derive(Clone, Debug, PartialEq)]
pub enum EvictionOutcome {
    /// Accepted: the pod is shutting down.
    Evicted,
    /// 404 or 409: already gone (or being replaced under the same name): nothing to do.
    Gone,
    /// 429 with a disruption-budget cause: a PodDisruptionBudget allows no disruption now.
    Blocked {
        pdb: Option<String>,
        message: String,
    },
}

/// Evicts one pod through the Eviction API, so PodDisruptionBudgets hold. `uid` makes it a
/// precondition that the pod is still the one observed; `grace_s` cuts its grace period (to what
/// the instance has left).
pub async fn evict(
    client: &kube::Client,
    pod: &PodRef,
    uid: Option<&str>,
    grace_s: Option<i64>,
) -> Result<EvictionOutcome> {
    let api = Api::<Pod>::namespaced(client.clone(), &pod.namespace);
    let params = EvictParams {
        delete_options: Some(delete_params(uid, grace_s)),
        ..EvictParams::default()
    };
    match api.evict(&pod.name, &params).await {
        Ok(_) => Ok(EvictionOutcome::Evicted),
        // 404/409 (gone) and a budget's 429 are outcomes, not errors.
        Err(e) => eviction_refused(e).map_err(|e| api_failure("evict", &format!("pod/{pod}"), e)),
    }
}

/// The options of an eviction or a delete: the pod must still have `uid` (when known), and its
/// grace is cut to `grace_s` (at least 1 s: a grace of 0 deletes at once).
fn delete_params(uid: Option<&str>, grace_s: Option<i64>) -> DeleteParams {
    DeleteParams {
        grace_period_seconds: grace_s.map(|g| g.max(1) as u32),
        preconditions: uid.map(|u| Preconditions {
            uid: Some(u.to_string()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    }
}

/// What a refused eviction came to: gone, blocked by a budget, or an error. A 429 is a
/// PodDisruptionBudget's block only when its Status says so (`api_error::is_pdb_refusal`); any
/// other 429 is the apiserver throttling, a transient error the next check retries, which must
/// never count as a block (a block at the deadline may delete past the budget).
fn eviction_refused(e: kube::Error) -> std::result::Result<EvictionOutcome, kube::Error> {
    match e {
        kube::Error::Api(s) if s.code == 404 || s.code == 409 => Ok(EvictionOutcome::Gone),
        kube::Error::Api(s) if is_pdb_refusal(&s) => Ok(EvictionOutcome::Blocked {
            pdb: None,
            message: s.message.clone(),
        }),
        other => Err(other),
    }
}

/// Deletes one pod directly (no PodDisruptionBudget check), with the same UID precondition and
/// grace as an eviction. Only for DELETE_PAST_PDB_AT_DEADLINE, at the deadline. 404/409: gone.
pub async fn delete_pod(
    client: &kube::Client,
    pod: &PodRef,
    uid: Option<&str>,
    grace_s: Option<i64>,
) -> Result<()> {
    match Api::<Pod>::namespaced(client.clone(), &pod.namespace)
        .delete(&pod.name, &delete_params(uid, grace_s))
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => Ok(()),
        Err(e) => Err(api_failure("delete", &format!("pod/{pod}"), e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A throttling 429 is an error the next check retries, never a block (which, at the
    /// deadline with DELETE_PAST_PDB_AT_DEADLINE, deletes the pod past its budget).
    #[test]
    fn only_a_budgets_429_blocks_an_eviction() {
        let api = |s: kube::core::Status| kube::Error::Api(s.boxed());
        let budget: kube::core::Status = serde_json::from_value(json!({
            "status": "Failure", "reason": "TooManyRequests", "code": 429,
            "message": "Cannot evict pod as it would violate the pod's disruption budget.",
            "details": {"causes": [{"reason": "DisruptionBudget",
                "message": "The disruption budget llama needs 2 healthy pods and has 2 currently"}]}
        }))
        .unwrap();
        let flow_control = kube::core::Status::failure(
            "Too many requests, please try again later.",
            "Failed to parse error data",
        )
        .with_code(429);
        assert!(matches!(
            eviction_refused(api(budget)),
            Ok(EvictionOutcome::Blocked { .. })
        ));
        assert!(eviction_refused(api(flow_control)).is_err());
        let gone = kube::core::Status::failure("not found", "NotFound").with_code(404);
        assert_eq!(eviction_refused(api(gone)).unwrap(), EvictionOutcome::Gone);
    }
}
