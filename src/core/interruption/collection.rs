//! The tick's collection of drain reservations, planned whole: from everything the tick observed
//! (the nodes with their drain states, the headroom reservations, the surge records and the
//! placeholders), every command it carries out. Each item's verdict is `reservation_verdict`,
//! `placeholder_verdict` or `orphan_releases`; this file only puts them together, so the
//! executor (`handlers::tick::reservations`) never decides.

use std::collections::BTreeSet;

use super::model::Command;
use super::replacement::{placeholder_verdict, PlaceholderVerdict};
use super::reservation::{reservation_verdict, NodeSeen, ReservationVerdict};
use super::state::{DrainState, Phase};
use super::surge_step::{orphan_releases, SurgedSeen};
use super::DrainSettings;

/// A node that has an instance id, as the collection sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct CollectedNode {
    pub name: String,
    pub instance: String,
    /// The drain label its placeholder carries (the instance id as a label value).
    pub placeholder_label: String,
    /// Its drain state (None: none, or unreadable).
    pub state: Option<DrainState>,
    pub ready: bool,
}

/// A drain's placeholder pod not being deleted already.
#[derive(Clone, Debug, PartialEq)]
pub struct PlaceholderSeen {
    pub namespace: String,
    pub name: String,
    /// Its drain label ("" when it has none).
    pub drain_id: String,
    /// Its own expiry annotation (None: missing or unreadable).
    pub expires_at: Option<f64>,
}

/// Everything one collection reads.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CollectionSeen {
    pub nodes: Vec<CollectedNode>,
    /// Instances holding a reservation on a target's headroom object.
    pub reserved: BTreeSet<String>,
    pub surged: Vec<SurgedSeen>,
    pub placeholders: Vec<PlaceholderSeen>,
}

/// One thing the collection does, with the item it reports it under.
#[derive(Clone, Debug, PartialEq)]
pub struct CollectCommand {
    pub instance: String,
    pub node: Option<String>,
    pub verdict: ReservationVerdict,
    pub action: CollectAction,
}

#[derive(Clone, Debug, PartialEq)]
pub enum CollectAction {
    /// Give back the instance's reservations on the targets' headroom.
    ReleaseReservation,
    /// Hand the node's drain to the interruption function (a resume-drain message): node writes
    /// and evictions are its, never the tick's.
    HandOver { event_id: Option<String> },
    /// Give back one share of a surge whose drain no longer runs.
    ReleaseSurge {
        namespace: String,
        deployment: String,
        drain: String,
    },
    /// Delete a placeholder whose drain is gone, over or expired.
    DeletePlaceholder { namespace: String, name: String },
}

/// Every command of one collection, in the order they are carried out: reservations of gone
/// nodes, orphaned surges, the drains on the nodes (list order), then placeholders.
pub fn plan_collection(
    seen: &CollectionSeen,
    now: f64,
    settings: &DrainSettings,
) -> Vec<CollectCommand> {
    let mut out = Vec::new();
    for instance in &seen.reserved {
        if !seen.nodes.iter().any(|n| &n.instance == instance) {
            out.push(CollectCommand {
                instance: instance.clone(),
                node: None,
                verdict: reservation_verdict(NodeSeen::Gone, now, settings),
                action: CollectAction::ReleaseReservation,
            });
        }
    }
    out.extend(orphan_surges(seen));
    for n in &seen.nodes {
        let has_reservation = seen.reserved.contains(&n.instance);
        if n.state.is_none() && !has_reservation {
            continue;
        }
        let present = NodeSeen::Present {
            state: n.state.as_ref(),
            ready: n.ready,
        };
        let verdict = reservation_verdict(present, now, settings);
        let action = match &verdict {
            ReservationVerdict::Keep => continue,
            ReservationVerdict::Release { .. } if !has_reservation => continue,
            ReservationVerdict::Release { .. } => CollectAction::ReleaseReservation,
            ReservationVerdict::Undrain { .. } | ReservationVerdict::Resume => {
                CollectAction::HandOver {
                    event_id: n.state.as_ref().map(|s| s.event_id.clone()),
                }
            }
        };
        out.push(CollectCommand {
            instance: n.instance.clone(),
            node: Some(n.name.clone()),
            verdict,
            action,
        });
    }
    for p in &seen.placeholders {
        let node = seen
            .nodes
            .iter()
            .find(|n| n.placeholder_label == p.drain_id);
        let node_seen = node.map_or(NodeSeen::Gone, |n| NodeSeen::Present {
            state: n.state.as_ref(),
            ready: n.ready,
        });
        if let PlaceholderVerdict::Delete { reason } =
            placeholder_verdict(node_seen, p.expires_at, now)
        {
            out.push(CollectCommand {
                instance: p.drain_id.clone(),
                node: node.map(|n| n.name.clone()),
                verdict: ReservationVerdict::Release { reason },
                action: CollectAction::DeletePlaceholder {
                    namespace: p.namespace.clone(),
                    name: p.name.clone(),
                },
            });
        }
    }
    out
}

/// What an orphaned surge's share is reported under (its listing's failure too).
pub fn orphan_surge_verdict() -> ReservationVerdict {
    ReservationVerdict::Release {
        reason: "surge of a drain that no longer runs".into(),
    }
}

/// The shares of drains not running now (no node whose drain waits for its replacement or
/// evicts): the message lost, the node gone, or the end's release not gone through.
fn orphan_surges(seen: &CollectionSeen) -> impl Iterator<Item = CollectCommand> {
    let active: BTreeSet<String> = seen
        .nodes
        .iter()
        .filter(|n| {
            n.state
                .as_ref()
                .is_some_and(|s| matches!(s.phase, Phase::WaitingForReplacement | Phase::Evicting))
        })
        .map(|n| n.instance.clone())
        .collect();
    orphan_releases(&seen.surged, &active)
        .into_iter()
        .filter_map(|c| match c {
            Command::ReleaseSurge {
                namespace,
                deployment,
                drain,
            } => Some(CollectCommand {
                instance: String::new(),
                node: None,
                verdict: orphan_surge_verdict(),
                action: CollectAction::ReleaseSurge {
                    namespace,
                    deployment,
                    drain,
                },
            }),
            _ => None,
        })
}

#[cfg(test)]
#[path = "collection_tests.rs"]
mod tests;
