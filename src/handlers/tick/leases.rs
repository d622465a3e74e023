//! The tick's collection of drain leases. The tick never writes a node or evicts (it holds no
//! such rights): reservations nobody holds are released here (a headroom write, the tick's own
//! object), while drains nobody drives and nodes to un-drain (survivors, expired cordon-prewarm)
//! are handed to the interruption function as a resume-drain message on its queue, which steps
//! them through the same step as a notice (`handlers::interruption::step`). What to do with each is
//! `core::interruption::lease_verdict`; this module observes and acts. One failure never stops
//! the others (each item is reported).

use std::collections::BTreeSet;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;

use super::TickDeps;
use crate::adapters::events::ResumeDrain;
pub use crate::adapters::kube::drain::collected::Collected;
use crate::adapters::kube::drain::{instance_of_node, is_ready, list_nodes, replacement, surge};
use crate::adapters::kube::headroom::{read_headroom, reservations};
use crate::adapters::queue::send_resume;
use crate::core::interruption::{lease_verdict, DrainSettings, DrainState, LeaseVerdict, NodeSeen};
use crate::core::TargetSpec;
use crate::error::Result;

/// Releases replacement leases nobody holds and hands drains whose owner went silent, survivors
/// and expired cordon-prewarm drains to the interruption function as resume-drain messages
/// (`collect`), before the targets read their headroom. Only logged: a failure here never stops
/// the tick.
pub(super) async fn collect_drain_leases(
    deps: &Arc<TickDeps>,
    client: &kube::Client,
    targets: &[TargetSpec],
    now: f64,
) {
    let Some(queue_url) = deps.config.interruption.queue_url.as_deref() else {
        // require_tick_ready refuses to start without it; kept total for tests that build deps.
        tracing::warn!(
            event = "drain_lease",
            "INTERRUPTION_QUEUE_URL unset: drain leases not collected"
        );
        return;
    };
    let handover = Handover {
        sqs: &deps.sqs,
        queue_url,
    };
    let settings = crate::handlers::interruption::drain_settings(&deps.config);
    match collect(client, &handover, targets, &settings, now).await {
        Ok(items) => {
            for c in items {
                match &c.outcome {
                    Ok(done) => tracing::info!(event = "drain_lease", instance = %c.instance,
                        node = c.node.as_deref().unwrap_or(""), verdict = ?c.verdict, outcome = %done,
                        "drain lease collected"),
                    Err(e) => tracing::warn!(event = "drain_lease", instance = %c.instance,
                        node = c.node.as_deref().unwrap_or(""), verdict = ?c.verdict, error = %e,
                        "drain lease collection failed; next tick"),
                }
            }
        }
        Err(e) => {
            tracing::warn!(event = "drain_lease", error = %e, "could not collect drain leases")
        }
    }
}

/// Where the tick hands drains over: the interruption queue.
pub struct Handover<'a> {
    pub sqs: &'a aws_sdk_sqs::Client,
    pub queue_url: &'a str,
}

/// Collects every lease of `targets` and every drain state on the cluster's nodes.
pub async fn collect(
    client: &kube::Client,
    handover: &Handover<'_>,
    targets: &[TargetSpec],
    settings: &DrainSettings,
    now: f64,
) -> Result<Vec<Collected>> {
    let nodes = list_nodes(client).await?;
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
            let instance = instance_of_node(n)?;
            (state.is_some() || leased.contains(&instance)).then_some((n, instance, state))
        })
        .collect();
    for instance in &leased {
        if !drained_nodes.iter().any(|(_, i, _)| i == instance)
            && !nodes
                .iter()
                .any(|n| instance_of_node(n).as_deref() == Some(instance))
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
    out.extend(surge::collect_orphans(client, targets, &nodes, now).await);
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
