//! The tick's collection of drain reservations. The tick never writes a node or evicts (it holds no
//! such rights): reservations nobody holds are released here (a headroom write, the tick's own
//! object), while drains nobody drives and nodes to un-drain (survivors, expired cordon-prewarm)
//! are handed to the interruption function as a resume-drain message on its queue, which steps
//! them through the same step as a notice (`handlers::interruption::step`). What to do with each is
//! `core::interruption::reservation_verdict`; this module observes and acts. One failure never stops
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
use crate::core::interruption::{
    reservation_verdict, DrainSettings, DrainState, NodeSeen, ReservationVerdict,
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
    let settings = crate::handlers::interruption::drain_settings(&deps.config);
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

/// Where the tick hands drains over: the interruption queue.
pub struct Handover<'a> {
    pub sqs: &'a aws_sdk_sqs::Client,
    pub queue_url: &'a str,
}

/// Collects every reservation of `targets` and every drain state on the cluster's nodes.
pub async fn collect(
    client: &kube::Client,
    handover: &Handover<'_>,
    targets: &[TargetSpec],
    settings: &DrainSettings,
    now: f64,
) -> Result<Vec<Collected>> {
    let nodes = list_nodes(client).await?;
    let mut reserved: BTreeSet<String> = BTreeSet::new();
    let mut out = Vec::new();
    for t in targets {
        match read_headroom(client, t).await {
            Ok(read) => reserved.extend(reservations(&read).keys().cloned()),
            Err(e) => out.push(Collected {
                instance: String::new(),
                node: None,
                verdict: ReservationVerdict::Keep,
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
            (state.is_some() || reserved.contains(&instance)).then_some((n, instance, state))
        })
        .collect();
    for instance in &reserved {
        if !drained_nodes.iter().any(|(_, i, _)| i == instance)
            && !nodes
                .iter()
                .any(|n| instance_of_node(n).as_deref() == Some(instance))
        {
            let verdict = reservation_verdict(NodeSeen::Gone, now, settings);
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
        let verdict = reservation_verdict(seen, now, settings);
        let has_reservation = reserved.contains(&instance);
        let name = node.metadata.name.clone().unwrap_or_default();
        let outcome = match &verdict {
            ReservationVerdict::Keep => continue,
            ReservationVerdict::Release { .. } if !has_reservation => continue,
            ReservationVerdict::Release { .. } => release(client, targets, &instance).await,
            // Node writes and evictions are the interruption function's: hand the drain over.
            ReservationVerdict::Undrain { .. } | ReservationVerdict::Resume => {
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
