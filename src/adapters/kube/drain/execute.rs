//! Carries out one planned drain step (`core::interruption::plan_drain`) against the cluster and
//! reports what happened, for the step's log line and metrics.
//!
//! Order: the replacement request first (idempotent per drain id), then one node write with the
//! drain state, cordon and taint (guarded by the resourceVersion read: on a conflict the caller
//! observes again and re-plans), then evictions, then the release of the replacement.

use k8s_openapi::api::core::v1::Pod;

use super::replacement::{self, Requested};
use super::{
    evict, node_patch, node_pool_of, patch_node, pdbs_covering, record_event, EvictionOutcome,
    Observation,
};
use crate::core::interruption::{Command, DrainStep, PodRef};
use crate::core::TargetSpec;
use crate::error::Result;

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
    pub released: Vec<String>,
}

pub async fn execute(
    client: &kube::Client,
    targets: &[TargetSpec],
    observed: &Observation,
    step: &DrainStep,
    drain_id: &str,
    event_id: &str,
) -> Result<StepReport> {
    let mut report = StepReport::default();
    let node = &observed.node;
    let pool = node_pool_of(node);
    let mut state = step.state.clone();

    for command in &step.commands {
        if let Command::RequestReplacement { gpus } = command {
            match replacement::request(client, targets, pool, *gpus, drain_id).await {
                Ok(r) => report.requested = Some(r),
                Err(e) => {
                    // Not recorded as requested, so the next check asks again.
                    report.request_error = Some(e.to_string());
                    if let Some(s) = state.as_mut() {
                        s.replacement_requested_at = None;
                    }
                }
            }
        }
    }

    let cordon = step.commands.contains(&Command::Cordon);
    let taint = step.commands.iter().find_map(|c| match c {
        Command::Taint { kind } => Some(*kind),
        _ => None,
    });
    let records_state = step
        .commands
        .iter()
        .any(|c| matches!(c, Command::RecordState { .. }));
    if let (true, Some(s)) = (records_state, state.as_ref()) {
        let patch = node_patch(node, s, cordon, taint);
        if !patch_node(client, node, &patch).await? {
            report.conflict = true;
            return Ok(report);
        }
        report.cordoned = cordon;
        report.tainted = taint.is_some();
    }

    for command in &step.commands {
        match command {
            Command::Evict { pod, .. } => match evict(client, pod).await {
                Ok(EvictionOutcome::Evicted) => report.evicted.push(pod.clone()),
                Ok(EvictionOutcome::Gone) => report.already_gone.push(pod.clone()),
                Ok(EvictionOutcome::Blocked { message, .. }) => {
                    let object = find_pod(observed, pod);
                    let pdbs = match object {
                        Some(p) => pdbs_covering(client, p).await.unwrap_or_default(),
                        None => Vec::new(),
                    };
                    let note = blocked_note(pod, &pdbs, &message, event_id);
                    if let Err(e) =
                        record_event(client, node, true, "DrainBlockedByPDB", note, object).await
                    {
                        tracing::warn!(error = %e, pod = %pod, "could not record the blocked-drain Event");
                    }
                    report.blocked.push(Blocked {
                        pod: pod.clone(),
                        pdbs,
                        message,
                    });
                }
                Err(e) => report.eviction_errors.push(format!("{pod}: {e}")),
            },
            Command::ReleaseReplacement => {
                for r in replacement::release(client, targets, pool, drain_id).await {
                    match r {
                        Ok(t) => report.released.push(t),
                        Err(e) => {
                            tracing::warn!(error = %e, drain_id, "could not release the replacement")
                        }
                    }
                }
            }
            _ => {}
        }
    }
    Ok(report)
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
