use super::*;
use crate::interruption::surge::SurgeRecord;
use crate::interruption::NoticeKind;

const T0: f64 = 1_795_953_600.0;

/// A drain of `phase` claimed at T0 whose owner last stepped at `last_step`.
fn drain(kind: NoticeKind, phase: Phase, last_step: f64) -> Option<DrainState> {
    Some(DrainState {
        last_step_at: Some(last_step),
        ..DrainState::test(kind, phase, T0)
    })
}

fn node(instance: &str, state: Option<DrainState>, ready: bool) -> CollectedNode {
    CollectedNode {
        name: format!("node-{instance}"),
        instance: instance.into(),
        placeholder_label: instance.into(),
        state,
        ready,
    }
}

/// Only `nodes` seen.
fn on(nodes: Vec<CollectedNode>) -> CollectionSeen {
    CollectionSeen {
        nodes,
        ..Default::default()
    }
}

fn placeholder(drain_id: &str, expires_at: Option<f64>) -> PlaceholderSeen {
    PlaceholderSeen {
        namespace: "prewarm".into(),
        name: format!("prewarm-replacement-{drain_id}"),
        drain_id: drain_id.into(),
        expires_at,
    }
}

/// Deployment `inference/web`'s surge record (base 2) held by `drains`.
fn surged(drains: &[(&str, u32)]) -> SurgedSeen {
    SurgedSeen {
        namespace: "inference".into(),
        deployment: "web".into(),
        record: SurgeRecord {
            base: 2,
            drains: drains.iter().map(|(d, k)| (d.to_string(), *k)).collect(),
        },
    }
}

fn render(c: &CollectCommand) -> String {
    let node = c.node.as_deref().unwrap_or("-");
    match &c.action {
        CollectAction::ReleaseReservation => format!("release {} on {node}", c.instance),
        CollectAction::HandOver { event_id } => format!(
            "hand over {} on {node} (event {})",
            c.instance,
            event_id.as_deref().unwrap_or("-")
        ),
        CollectAction::ReleaseSurge {
            namespace,
            deployment,
            drain,
        } => format!("release surge {namespace}/{deployment} of {drain}"),
        CollectAction::DeletePlaceholder { namespace, name } => {
            format!("delete {namespace}/{name} of {} on {node}", c.instance)
        }
    }
}

#[test]
fn each_situation_plans_its_commands() {
    use NoticeKind::{Rebalance, SpotInterruption};
    use Phase::{Drained, Evicting, Prewarmed, WaitingForReplacement};
    // Default settings: recheck 15 s, so an owner is stale after 4 × 15 + 60 = 120 s of silence.
    let s = DrainSettings::default();
    let reserved = |i: &[&str]| i.iter().map(|i| i.to_string()).collect::<BTreeSet<_>>();
    // (what, seen, now, expected commands in order)
    let cases: Vec<(&str, CollectionSeen, f64, Vec<&str>)> = vec![
        (
            // No node has i-gone: its reservation goes back.
            "reservation of a gone node",
            CollectionSeen {
                reserved: reserved(&["i-gone"]),
                ..Default::default()
            },
            T0,
            vec!["release i-gone on -"],
        ),
        (
            // The node is there without a drain: the reservation is orphaned.
            "reservation on a node carrying no drain",
            CollectionSeen {
                nodes: vec![node("i-1", None, true)],
                reserved: reserved(&["i-1"]),
                ..Default::default()
            },
            T0,
            vec!["release i-1 on node-i-1"],
        ),
        (
            // Neither a drain nor a reservation: not the collection's.
            "plain node",
            on(vec![node("i-1", None, true)]),
            T0,
            vec![],
        ),
        (
            // Drained, NotReady (so not a survivor): verdict release, but nothing is reserved.
            "drain over, nothing reserved",
            on(vec![node(
                "i-1",
                drain(SpotInterruption, Drained, T0),
                false,
            )]),
            T0 + 130.0,
            vec![],
        ),
        (
            // Last step T0 + 60, now T0 + 160: 100 s < 120 s, the owner is alive.
            "owner stepped 100 s ago",
            on(vec![node(
                "i-1",
                drain(SpotInterruption, Evicting, T0 + 60.0),
                true,
            )]),
            T0 + 160.0,
            vec![],
        ),
        (
            // Last step T0 + 60, now T0 + 181: 121 s >= 120 s, resumed by the interruption
            // function from the node's record (event "ev").
            "owner silent 121 s",
            on(vec![node(
                "i-1",
                drain(SpotInterruption, Evicting, T0 + 60.0),
                true,
            )]),
            T0 + 181.0,
            vec!["hand over i-1 on node-i-1 (event ev)"],
        ),
        (
            // Prewarmed at T0, no notice with a deadline by T0 + 1800: un-drained, which is the
            // interruption function's too.
            "prewarm expired",
            on(vec![node("i-1", drain(Rebalance, Prewarmed, T0), true)]),
            T0 + 1_800.0,
            vec!["hand over i-1 on node-i-1 (event ev)"],
        ),
        (
            // i-1 evicts (owner alive: 0 s silent), i-2 has no node: only i-2's share goes back.
            "surge share of a drain no longer running",
            CollectionSeen {
                nodes: vec![node(
                    "i-1",
                    drain(SpotInterruption, Evicting, T0 + 60.0),
                    true,
                )],
                surged: vec![surged(&[("i-1", 2), ("i-2", 1)])],
                ..Default::default()
            },
            T0 + 60.0,
            vec!["release surge inference/web of i-2"],
        ),
        (
            // No node has i-9: its placeholder is deleted.
            "placeholder of a gone node",
            CollectionSeen {
                placeholders: vec![placeholder("i-9", None)],
                ..Default::default()
            },
            T0,
            vec!["delete prewarm/prewarm-replacement-i-9 of i-9 on -"],
        ),
        (
            // Waiting, owner 60 s silent (alive), placeholder expires at T0 + 600 > T0 + 60.
            "placeholder of a waiting drain",
            CollectionSeen {
                nodes: vec![node(
                    "i-1",
                    drain(SpotInterruption, WaitingForReplacement, T0),
                    true,
                )],
                placeholders: vec![placeholder("i-1", Some(T0 + 600.0))],
                ..Default::default()
            },
            T0 + 60.0,
            vec![],
        ),
        (
            // Same drain, but its placeholder's own expiry T0 + 30 <= T0 + 60.
            "placeholder past its expiry",
            CollectionSeen {
                nodes: vec![node(
                    "i-1",
                    drain(SpotInterruption, WaitingForReplacement, T0),
                    true,
                )],
                placeholders: vec![placeholder("i-1", Some(T0 + 30.0))],
                ..Default::default()
            },
            T0 + 60.0,
            vec!["delete prewarm/prewarm-replacement-i-1 of i-1 on node-i-1"],
        ),
        (
            // All at once, in the executor's order: i-gone's reservation, i-gone's surge share,
            // i-1's reservation (drained, NotReady: over), then i-gone's placeholder. i-1's own
            // placeholder: its expiry (none on the pod) is the drain's, T0 + 1800 + 600 > now,
            // but the drain is over: deleted too.
            "everything, in order",
            CollectionSeen {
                nodes: vec![node("i-1", drain(SpotInterruption, Drained, T0), false)],
                reserved: reserved(&["i-1", "i-gone"]),
                surged: vec![surged(&[("i-gone", 1)])],
                placeholders: vec![placeholder("i-gone", None), placeholder("i-1", None)],
            },
            T0 + 130.0,
            vec![
                "release i-gone on -",
                "release surge inference/web of i-gone",
                "release i-1 on node-i-1",
                "delete prewarm/prewarm-replacement-i-gone of i-gone on -",
                "delete prewarm/prewarm-replacement-i-1 of i-1 on node-i-1",
            ],
        ),
    ];
    for (what, seen, now, expected) in cases {
        let got: Vec<String> = plan_collection(&seen, now, &s).iter().map(render).collect();
        assert_eq!(got, expected, "{what}");
    }
}
