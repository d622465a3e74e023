//! The tick's collection of drain leases. The tick never writes a node or evicts (it holds no
//! such rights): reservations nobody holds are released here (a headroom write, the tick's own
//! object), while drains nobody drives and nodes to un-drain (survivors, expired cordon-prewarm)
//! are handed to the interruption function as a resume-drain message on its queue, which steps
//! them through the same step as a notice (`super::step`). What to do with each is
//! `core::interruption::lease_verdict`; this module observes and acts. One failure never stops
//! the others (each item is reported).

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams};

use super::{instance_of_provider_id, is_ready, kube_error};
use crate::adapters::events::ResumeDrain;
use crate::adapters::kube::drain::replacement;
use crate::adapters::kube::headroom::{read_headroom, reservations};
use crate::adapters::queue::send_resume;
use crate::core::interruption::{lease_verdict, DrainSettings, DrainState, LeaseVerdict, NodeSeen};
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

/// Where the tick hands drains over: the interruption queue.
pub struct Handover<'a> {
    pub sqs: &'a aws_sdk_sqs::Client,
    pub queue_url: &'a str,
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
    handover: &Handover<'_>,
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
    out.extend(super::surge::collect_orphans(client, targets, &nodes, now).await);
    for (node, instance, state) in drained_nodes {
        let seen = NodeSeen::Present {
            state: state.as_ref(),
            ready: is_ready(node),
        };
        let verdict = lease_verdict(seen, now, settings);
        let has_lease = leased.contains(&instance);
        let name = node.metadata.name.clone().unwrap_or_default();
        let outcome = match &verdict {
            LeaseVerdict::Keep => continue,
            LeaseVerdict::Release { .. } if !has_lease => continue,
            LeaseVerdict::Release { .. } => release(client, targets, &instance).await,
            // Node writes and evictions are the interruption function's: hand the drain over.
            LeaseVerdict::Undrain { .. } | LeaseVerdict::Resume => {
                hand_over(handover, &name, &instance, state.as_ref()).await
            }
        };
        out.push(Collected {
            instance,
            node: Some(name),
            verdict,
            outcome,
        });
    }
    out.extend(replacement::collect_placeholders(client, targets, now).await);
    Ok(out)
}

async fn hand_over(
    handover: &Handover<'_>,
    node: &str,
    instance: &str,
    state: Option<&DrainState>,
) -> std::result::Result<String, String> {
    let resume = ResumeDrain {
        node: node.to_string(),
        instance: instance.to_string(),
    };
    send_resume(handover.sqs, handover.queue_url, &resume)
        .await
        .map(|id| {
            format!(
                "resume-drain message {id} enqueued for the drain of event {}",
                state.map_or("(none)", |s| s.event_id.as_str())
            )
        })
        .map_err(|e| e.to_string())
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
