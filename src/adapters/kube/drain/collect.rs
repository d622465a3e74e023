//! The tick's collection of drain leases: reservations nobody holds are released, drains nobody
//! drives are stepped from the node's own record, and nodes that survived (or whose
//! cordon-prewarm lease expired) are un-drained. What to do is `core::interruption::lease_verdict`;
//! this module observes and acts. One failure never stops the others (each item is reported).

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams};
use kube::runtime::events::Recorder;

use super::execute::execute;
use super::{
    instance_of_provider_id, is_ready, kube_error, observe, patch_node, record_event, undrain_patch,
};
use crate::adapters::kube::drain::replacement;
use crate::adapters::kube::headroom::{read_headroom, reservations};
use crate::core::interruption::{
    lease_verdict, plan_drain, DrainSettings, DrainState, LeaseVerdict, NodeSeen, Notice,
    NoticeStatus,
};
use crate::core::TargetSpec;
use crate::error::Result;

/// What the collection did for one lease or drain.
#[derive(Clone, Debug, PartialEq)]
pub struct Collected {
    pub instance: String,
    pub node: Option<String>,
    pub verdict: LeaseVerdict,
    /// What was done, or why it failed.
    pub outcome: std::result::Result<String, String>,
}

/// The notice a drain's own record stands for: enough for `plan_drain` to carry the drain on
/// (it keeps the recorded deadline and instance end for its own event id).
pub fn notice_of_record(state: &DrainState, instance: &str) -> Notice {
    Notice {
        event_id: state.event_id.clone(),
        kind: state.kind,
        instance_ids: vec![instance.to_string()],
        time: state.notice_time,
        instance_state: None,
        window_start: state.instance_end,
        termination_time: state.instance_end,
        status: NoticeStatus::Active,
        sent_time: None,
    }
}

fn instance_of(node: &Node) -> Option<String> {
    node.spec
        .as_ref()
        .and_then(|s| s.provider_id.as_deref())
        .and_then(instance_of_provider_id)
        .map(str::to_string)
}

/// Collects every lease of `targets` and every drain state on the cluster's nodes.
pub async fn collect(
    client: &kube::Client,
    recorder: &Recorder,
    targets: &[TargetSpec],
    settings: &DrainSettings,
    now: f64,
) -> Result<Vec<Collected>> {
    let nodes = Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await
        .map_err(|e| kube_error("list", "nodes", e))?
        .items;
    let mut leased: BTreeSet<String> = BTreeSet::new();
    let mut out = Vec::new();
    for t in targets {
        match read_headroom(client, t).await {
            Ok(read) => leased.extend(reservations(&read).keys().cloned()),
            Err(e) => out.push(Collected {
                instance: String::new(),
                node: None,
                verdict: LeaseVerdict::Keep,
                outcome: Err(format!("headroom of target {}: {e}", t.name)),
            }),
        }
    }
    let drained_nodes: Vec<(&Node, String, Option<DrainState>)> = nodes
        .iter()
        .filter_map(|n| {
            let state =
                DrainState::from_annotations(&n.metadata.annotations.clone().unwrap_or_default())
                    .ok()
                    .flatten();
            let instance = instance_of(n)?;
            (state.is_some() || leased.contains(&instance)).then_some((n, instance, state))
        })
        .collect();
    for instance in &leased {
        if !drained_nodes.iter().any(|(_, i, _)| i == instance)
            && !nodes
                .iter()
                .any(|n| instance_of(n).as_deref() == Some(instance))
        {
            let verdict = lease_verdict(NodeSeen::Gone, now, settings);
            let outcome = release(client, targets, instance).await;
            out.push(Collected {
                instance: instance.clone(),
                node: None,
                verdict,
                outcome,
            });
        }
    }
    for (node, instance, state) in drained_nodes {
        let seen = NodeSeen::Present {
            state: state.as_ref(),
            ready: is_ready(node),
        };
        let verdict = lease_verdict(seen, now, settings);
        let has_lease = leased.contains(&instance);
        let outcome = match &verdict {
            LeaseVerdict::Keep => continue,
            LeaseVerdict::Release { .. } if !has_lease => continue,
            LeaseVerdict::Release { .. } => release(client, targets, &instance).await,
            LeaseVerdict::Undrain { reason } => {
                undrain(client, recorder, targets, node, &instance, reason).await
            }
            LeaseVerdict::Resume => match &state {
                Some(s) => {
                    resume(client, recorder, targets, settings, node, &instance, s, now).await
                }
                None => continue,
            },
        };
        out.push(Collected {
            instance,
            node: node.metadata.name.clone(),
            verdict,
            outcome,
        });
    }
    out.extend(replacement::collect_placeholders(client, now).await);
    Ok(out)
}

async fn release(
    client: &kube::Client,
    targets: &[TargetSpec],
    instance: &str,
) -> std::result::Result<String, String> {
    let results = replacement::release(client, targets, None, instance).await;
    let errors: Vec<String> = results
        .iter()
        .filter_map(|r| r.as_ref().err().map(|e| e.to_string()))
        .collect();
    if errors.is_empty() {
        Ok(format!(
            "released: {}",
            results.into_iter().flatten().collect::<Vec<_>>().join(", ")
        ))
    } else {
        Err(errors.join("; "))
    }
}

async fn undrain(
    client: &kube::Client,
    recorder: &Recorder,
    targets: &[TargetSpec],
    node: &Node,
    instance: &str,
    reason: &str,
) -> std::result::Result<String, String> {
    match patch_node(client, node, &undrain_patch(node)).await {
        Ok(true) => {}
        Ok(false) => return Err("the node changed meanwhile; next tick".into()),
        Err(e) => return Err(e.to_string()),
    }
    let released = release(client, targets, instance).await;
    let note = format!("un-drained: {reason}; cordon, taint and drain state removed");
    if let Err(e) = record_event(recorder, node, false, "Undrained", note, None).await {
        tracing::warn!(error = %e, "could not record the Undrained Event");
    }
    released.map(|r| format!("un-drained ({reason}); {r}"))
}

#[allow(clippy::too_many_arguments)]
async fn resume(
    client: &kube::Client,
    recorder: &Recorder,
    targets: &[TargetSpec],
    settings: &DrainSettings,
    node: &Node,
    instance: &str,
    state: &DrainState,
    now: f64,
) -> std::result::Result<String, String> {
    let notice = notice_of_record(state, instance);
    let name = node.metadata.name.clone().unwrap_or_default();
    let mut current = node.clone();
    // A node write that conflicts (kwok, the kubelet or the node controller wrote the node since
    // it was read) is re-observed and re-planned, as the interruption handler does, before the
    // step is left to the next tick.
    for attempt in 1..=RESUME_ATTEMPTS {
        if attempt > 1 {
            current = Api::<Node>::all(client.clone())
                .get(&name)
                .await
                .map_err(|e| e.to_string())?;
        }
        let observed = observe(client, current.clone())
            .await
            .map_err(|e| e.to_string())?;
        let step = plan_drain(&observed.view, &observed.pod_views, &notice, now, settings);
        let report = execute(
            client,
            recorder,
            targets,
            &observed,
            &step,
            instance,
            &notice.event_id,
        )
        .await
        .map_err(|e| e.to_string())?;
        if !report.conflict {
            return Ok(format!(
                "stepped the orphaned drain of event {}: {} evicted, {} blocked, now {:?}",
                state.event_id,
                report.evicted.len(),
                report.blocked.len(),
                step.last()
            ));
        }
    }
    Err("the node changed meanwhile; next tick".into())
}

/// Node writes that conflict are re-observed and re-planned this often within one tick.
const RESUME_ATTEMPTS: usize = 3;
