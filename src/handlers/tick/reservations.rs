//! The tick's collection of drain reservations. The tick never writes a node or evicts (it holds no
//! such rights): reservations nobody holds are released here (a headroom write, the tick's own
//! object), while drains nobody drives and nodes to un-drain (survivors, expired cordon-prewarm)
//! are handed to the interruption function as a resume-drain message on its queue, which steps
//! them through the same step as a notice (`handlers::interruption::step`). What to do with each is
//! `core::interruption::plan_collection`; this module observes and acts. One failure never stops
//! the others (each item is reported).

use std::collections::BTreeSet;
use std::sync::Arc;

use super::TickDeps;
use crate::adapters::events::ResumeDrain;
use crate::adapters::kube::drain::{instance_of_node, is_ready, list_nodes, replacement, surge};
use crate::adapters::kube::headroom::{read_headroom, reservations};
use crate::adapters::kube::shape::placeholder::drain_label;
use crate::adapters::queue::send_resume;
use crate::core::interruption::collection::orphan_surge_verdict;
use crate::core::interruption::{
    plan_collection, CollectAction, CollectCommand, CollectedNode, CollectionSeen, DrainSettings,
    DrainState, ReservationVerdict,
};
use crate::core::TargetSpec;
use crate::error::Result;

/// Releases replacement leases nobody holds and hands drains whose owner went silent, survivors
/// and expired cordon-prewarm drains to the interruption function as resume-drain messages
/// (`collect`), before the targets read their headroom. Only logged: a failure here never stops
/// the tick.
pub(super) async fn collect_reservations(
    deps: &Arc<TickDeps>,
    client: &kube::Client,
    targets: &[TargetSpec],
    now: f64,
) {
    let Some(queue_url) = deps.config.interruption.queue_url.as_deref() else {
        // require_tick_ready refuses to start without it; kept total for tests that build deps.
        tracing::warn!(
            event = "drain_reservation",
            "INTERRUPTION_QUEUE_URL unset: drain reservations not collected"
        );
        return;
    };
    let handover = Handover {
        sqs: &deps.sqs,
        queue_url,
    };
    let settings = crate::handlers::interruption::drain_settings(&deps.config.interruption);
    match collect(client, &handover, targets, &settings, now).await {
        Ok(items) => {
            for c in items {
                match &c.outcome {
                    Ok(done) => tracing::info!(event = "drain_reservation", instance = %c.instance,
                        node = c.node.as_deref().unwrap_or(""), verdict = ?c.verdict, outcome = %done,
                        "drain reservation collected"),
                    Err(e) => tracing::warn!(event = "drain_reservation", instance = %c.instance,
                        node = c.node.as_deref().unwrap_or(""), verdict = ?c.verdict, error = %e,
                        "drain reservation collection failed; next tick"),
                }
            }
        }
        Err(e) => {
            tracing::warn!(event = "drain_reservation", error = %e, "could not collect drain reservations")
        }
    }
}

/// What the collection did for one item (a command carried out, or a read that failed).
#[derive(Clone, Debug, PartialEq)]
pub struct Collected {
    pub instance: String,
    pub node: Option<String>,
    pub verdict: ReservationVerdict,
    /// What was done, or why it failed.
    pub outcome: std::result::Result<String, String>,
}

/// Where the tick hands drains over: the interruption queue.
pub struct Handover<'a> {
    pub sqs: &'a aws_sdk_sqs::Client,
    pub queue_url: &'a str,
}

/// Collects every reservation of `targets` and every drain state on the cluster's nodes:
/// observes everything (`observe`), lets the core plan every command
/// (`core::interruption::plan_collection`), then carries them out (`execute`). A listing that
/// fails is one reported item, the rest collected without it; only the nodes' listing fails the
/// whole collection.
pub async fn collect(
    client: &kube::Client,
    handover: &Handover<'_>,
    targets: &[TargetSpec],
    settings: &DrainSettings,
    now: f64,
) -> Result<Vec<Collected>> {
    let (seen, mut out) = observe(client, targets).await?;
    for command in plan_collection(&seen, now, settings) {
        out.push(execute(client, handover, targets, command, now).await);
    }
    Ok(out)
}

/// Everything the collection reads, and an item for each read that failed. The nodes are listed
/// last: every placeholder and surge seen has its drain's claim on them (a drain claims its
/// node before it makes either).
async fn observe(
    client: &kube::Client,
    targets: &[TargetSpec],
) -> Result<(CollectionSeen, Vec<Collected>)> {
    let failed = |verdict: ReservationVerdict, error: String| Collected {
        instance: String::new(),
        node: None,
        verdict,
        outcome: Err(error),
    };
    let mut out = Vec::new();
    let mut reserved = BTreeSet::new();
    for t in targets {
        match read_headroom(client, t).await {
            Ok(read) => reserved.extend(reservations(&read).keys().cloned()),
            Err(e) => out.push(failed(
                ReservationVerdict::Keep,
                format!("headroom of target {}: {e}", t.name),
            )),
        }
    }
    let (surged, surge_failures) = surge::surged_in(client, targets).await;
    out.extend(
        surge_failures
            .into_iter()
            .map(|e| failed(orphan_surge_verdict(), e.to_string())),
    );
    let (placeholders, placeholder_failures) = replacement::placeholders_in(client, targets).await;
    out.extend(
        placeholder_failures
            .into_iter()
            .map(|e| failed(ReservationVerdict::Keep, e.to_string())),
    );
    let nodes = list_nodes(client)
        .await?
        .iter()
        .filter_map(|n| {
            let instance = instance_of_node(n)?;
            Some(CollectedNode {
                name: n.metadata.name.clone().unwrap_or_default(),
                placeholder_label: drain_label(&instance),
                instance,
                state: DrainState::from_annotations(
                    &n.metadata.annotations.clone().unwrap_or_default(),
                )
                .ok()
                .flatten(),
                ready: is_ready(n),
            })
        })
        .collect();
    let seen = CollectionSeen {
        nodes,
        reserved,
        surged,
        placeholders,
    };
    Ok((seen, out))
}

/// Carries out one command; its outcome (done, or why not) is the reported item.
async fn execute(
    client: &kube::Client,
    handover: &Handover<'_>,
    targets: &[TargetSpec],
    command: CollectCommand,
    now: f64,
) -> Collected {
    let CollectCommand {
        instance,
        node,
        verdict,
        action,
    } = command;
    let outcome = match &action {
        CollectAction::ReleaseReservation => release(client, targets, &instance).await,
        CollectAction::HandOver { event_id } => {
            let node = node.as_deref().unwrap_or_default();
            hand_over(handover, node, &instance, event_id.as_deref()).await
        }
        CollectAction::ReleaseSurge {
            namespace,
            deployment,
            drain,
        } => surge::release_surge(client, namespace, deployment, drain, now)
            .await
            .map(|released| released.line)
            .map_err(|e| e.to_string()),
        CollectAction::DeletePlaceholder { namespace, name } => {
            replacement::delete_placeholder_named(client, namespace, name)
                .await
                .map_err(|e| e.to_string())
        }
    };
    Collected {
        instance,
        node,
        verdict,
        outcome,
    }
}

async fn hand_over(
    handover: &Handover<'_>,
    node: &str,
    instance: &str,
    event_id: Option<&str>,
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
                event_id.unwrap_or("(none)")
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
