//! Row tables of the surge's part of a step and of one workload's surge write; fixed clock,
//! expected commands and annotations worked out by hand in each row's comment.

use std::collections::{BTreeMap, BTreeSet};

use super::*;
use crate::floor::{FloorView, LEASE_UNTIL, RAISED_MIN, USER_MIN};
use crate::interruption::state::DrainState;
use crate::interruption::surge::{
    SURGE_BASE, SURGE_DRAINS, SURGE_USER_REPLICAS, SURGE_WRITTEN_REPLICAS,
};
use crate::interruption::surge_floor::WorkloadSurge;
use crate::interruption::{Finish, NoticeKind, Phase};
use crate::lease::LeaseOutcome;
use crate::test_util::string_map;

const NOW: f64 = 1_795_953_600.0; // 2026-11-29T12:00:00Z

/// Spot warning: deadline NOW+90, instance end NOW+120; replacement ready at `ready_at`.
fn state(ready_at: Option<f64>) -> DrainState {
    DrainState {
        deadline: Some(NOW + 90.0),
        replacement_ready_at: ready_at,
        evicting_since: ready_at,
        replacement_gpus: 1,
        instance_end: Some(NOW + 120.0),
        ..DrainState::test(NoticeKind::SpotInterruption, Phase::Evicting, NOW)
    }
}

/// A pod of `inference` with a 30 s grace period: due at min(NOW+90, NOW+120-30) = NOW+90.
fn pod(name: &str) -> PodView {
    PodView::test("inference", name, 30.0)
}

fn evict(name: &str) -> Command {
    let p = pod(name);
    Command::Evict {
        pod: p.pod,
        tier: 1,
        uid: p.uid,
        grace_s: None,
        delete_if_blocked: false,
    }
}

fn floor(min: u32, max: u32, pairs: &[(&str, &str)]) -> SurgeOn {
    SurgeOn::Floor(FloorView {
        min_replicas: min,
        max_replicas: max,
        annotations: string_map(pairs),
        keda_owner: None,
    })
}

/// Deployment `llama` (pods llama-0 and llama-1 on the node) with `replicas`, `ready`, `on`.
fn llama(replicas: u32, ready: u32, on: SurgeOn) -> WorkloadSeen {
    WorkloadSeen {
        namespace: "inference".into(),
        deployment: "llama".into(),
        pods: vec![pod("llama-0").pod, pod("llama-1").pod],
        replicas,
        ready,
        on,
    }
}

/// Deployment `idle` (pod idle-0 on the node, not evicted by the step): never surged.
fn idle() -> WorkloadSeen {
    WorkloadSeen {
        namespace: "inference".into(),
        deployment: "idle".into(),
        pods: vec![pod("idle-0").pod],
        replicas: 1,
        ready: 1,
        on: SurgeOn::Replicas(BTreeMap::new()),
    }
}

fn surge(k: u32, held: Vec<Command>) -> Command {
    Command::Surge {
        namespace: "inference".into(),
        deployment: "llama".into(),
        k,
        held,
    }
}

#[test]
fn a_step_surges_the_workloads_it_evicts_from_and_holds_their_evictions() {
    // The planner's step: llama-0, llama-1 and batch-0 (no Deployment) evicted, a check at +3.
    let planned = |ready_at: Option<f64>, now: f64| DrainStep {
        commands: vec![
            Command::RecordState {
                state: state(ready_at),
            },
            evict("llama-0"),
            evict("llama-1"),
            evict("batch-0"),
            Command::WaitUntil { at: now + 3.0 },
        ],
        state: Some(state(ready_at)),
    };
    let record = |written: &'static str| {
        vec![
            (SURGE_DRAINS, r#"{"i-a":2}"#),
            (SURGE_BASE, "2"),
            (SURGE_USER_REPLICAS, "2"),
            (SURGE_WRITTEN_REPLICAS, written),
        ]
    };
    let ready = Some(NOW + 30.0);
    // (situation, replacement ready at, now, llama as seen, commands between the record and
    // the wait, evictions held back, plan errors)
    type Row = (
        &'static str,
        Option<f64>,
        f64,
        WorkloadSeen,
        Vec<Command>,
        Vec<&'static str>,
        usize,
    );
    let rows: Vec<Row> = vec![
        (
            // Replicas 2 + k 2 = want 4; 2 ready < 4: both llama evictions move into the surge
            // (not due before NOW+90); batch-0 goes.
            "first surge of a Deployment: its evictions wait for 4 ready",
            ready,
            NOW + 30.0,
            llama(2, 2, SurgeOn::Replicas(BTreeMap::new())),
            vec![
                surge(2, vec![evict("llama-0"), evict("llama-1")]),
                evict("batch-0"),
            ],
            vec!["llama-0", "llama-1"],
            0,
        ),
        (
            // The record holds i-a already (written 4): want 4, 4 ready: nothing held, the surge
            // renewed before the evictions.
            "surge pods Ready: the evictions go, the surge renewed",
            ready,
            NOW + 40.0,
            llama(4, 4, SurgeOn::Replicas(string_map(&record("4")))),
            vec![
                surge(2, vec![]),
                evict("llama-0"),
                evict("llama-1"),
                evict("batch-0"),
            ],
            vec![],
            0,
        ),
        (
            // HPA floor 2, max 3: 2 + 2 capped at 3; 3 ready >= 3: nothing held.
            "an HPA capped at maxReplicas 3, 3 ready: the evictions go",
            ready,
            NOW + 30.0,
            llama(2, 3, floor(2, 3, &[])),
            vec![
                surge(2, vec![]),
                evict("llama-0"),
                evict("llama-1"),
                evict("batch-0"),
            ],
            vec![],
            0,
        ),
        (
            // HPA floor 2, max 10: want 4, 2 ready: held.
            "an HPA floor surge not Ready: its evictions wait",
            ready,
            NOW + 30.0,
            llama(2, 2, floor(2, 10, &[])),
            vec![
                surge(2, vec![evict("llama-0"), evict("llama-1")]),
                evict("batch-0"),
            ],
            vec!["llama-0", "llama-1"],
            0,
        ),
        (
            // wants_surge is false from the deadline on: the step stays as planned.
            "at the deadline: no surge, everyone evicted",
            ready,
            NOW + 90.0,
            llama(2, 2, SurgeOn::Replicas(BTreeMap::new())),
            vec![evict("llama-0"), evict("llama-1"), evict("batch-0")],
            vec![],
            0,
        ),
        (
            // Evicting before the replacement was ready (a pod's due time): no surge.
            "the replacement not ready: no surge",
            None,
            NOW + 30.0,
            llama(2, 2, SurgeOn::Replicas(BTreeMap::new())),
            vec![evict("llama-0"), evict("llama-1"), evict("batch-0")],
            vec![],
            0,
        ),
        (
            // An unreadable record: no Surge command, its evictions go, the error kept.
            "unreadable surge annotations: evictions go as planned",
            ready,
            NOW + 30.0,
            llama(2, 2, SurgeOn::Replicas(string_map(&[(SURGE_DRAINS, "x")]))),
            vec![evict("llama-0"), evict("llama-1"), evict("batch-0")],
            vec![],
            1,
        ),
    ];
    let pods = vec![
        pod("llama-0"),
        pod("llama-1"),
        pod("batch-0"),
        pod("idle-0"),
    ];
    for (name, ready_at, now, seen, middle, held, errors) in rows {
        let mut step = planned(ready_at, now);
        let plan = plan_surges(&mut step, &pods, &[seen, idle()], "i-a", now);
        let mut expected = vec![Command::RecordState {
            state: state(ready_at),
        }];
        expected.extend(middle);
        expected.push(Command::WaitUntil { at: now + 3.0 });
        assert_eq!(step.commands, expected, "{name}: commands");
        let held: Vec<PodRef> = held.into_iter().map(|p| pod(p).pod).collect();
        assert_eq!(plan.held, held, "{name}: held");
        assert_eq!(plan.errors.len(), errors, "{name}: {:?}", plan.errors);
    }
}

#[test]
fn one_workloads_surge_write() {
    let set = |pairs: &[(&str, Option<&str>)]| -> BTreeMap<String, Option<String>> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.map(str::to_string)))
            .collect()
    };
    let lease_end = "2026-11-29T13:00:00.000Z"; // NOW + SURGE_FLOOR_LEASE_S (3600 s)
    let live = "2026-11-29T12:30:00.000Z";
    let held = [
        (USER_MIN, "2"),
        (RAISED_MIN, "4"),
        (LEASE_UNTIL, live),
        (SURGE_DRAINS, r#"{"i-a":2}"#),
        (SURGE_BASE, "2"),
    ];
    let hold = SurgeIntent::Hold {
        drain: "i-a".into(),
        k: 2,
    };
    let release = SurgeIntent::Release {
        drain: "i-a".into(),
    };
    // (situation, replicas, where, intent, expected write) - by hand.
    let rows: Vec<(&str, u32, SurgeOn, SurgeIntent, WorkloadSurge)> = vec![
        (
            // Floor 2 -> 2 + 2 = 4: the lease saves the user's 2, the record beside it.
            "first surge on an HPA floor",
            2,
            floor(2, 10, &[]),
            hold.clone(),
            WorkloadSurge {
                count: Some(4),
                annotations: set(&[
                    (USER_MIN, Some("2")),
                    (RAISED_MIN, Some("4")),
                    (LEASE_UNTIL, Some(lease_end)),
                    (SURGE_DRAINS, Some(r#"{"i-a":2}"#)),
                    (SURGE_BASE, Some("2")),
                ]),
                outcome: Some(LeaseOutcome::Raised),
                user_edit_kept: false,
                want: Some(4),
            },
        ),
        (
            // Held already at 4: the floor lease renewed to NOW + 3600, the record unchanged.
            "a held surge renews its floor lease",
            4,
            floor(4, 10, &held),
            hold.clone(),
            WorkloadSurge {
                count: None,
                annotations: set(&[(LEASE_UNTIL, Some(lease_end))]),
                outcome: Some(LeaseOutcome::Renewed),
                user_edit_kept: false,
                want: Some(4),
            },
        ),
        (
            // The user set the floor to 5 while it was raised to 4: 5 stays, the lease and the
            // record go, nothing is held.
            "a user's edit of the floor ends the surge",
            5,
            floor(5, 10, &held),
            hold,
            WorkloadSurge {
                count: None,
                annotations: set(&[
                    (USER_MIN, None),
                    (RAISED_MIN, None),
                    (LEASE_UNTIL, None),
                    (SURGE_DRAINS, None),
                    (SURGE_BASE, None),
                ]),
                outcome: Some(LeaseOutcome::UserEditKept),
                user_edit_kept: true,
                want: None,
            },
        ),
        (
            // The last drain's release: the user's 2 back, everything removed.
            "the last release restores the floor",
            4,
            floor(4, 10, &held),
            release.clone(),
            WorkloadSurge {
                count: Some(2),
                annotations: set(&[
                    (USER_MIN, None),
                    (RAISED_MIN, None),
                    (LEASE_UNTIL, None),
                    (SURGE_DRAINS, None),
                    (SURGE_BASE, None),
                ]),
                outcome: Some(LeaseOutcome::Restored),
                user_edit_kept: false,
                want: None,
            },
        ),
        (
            // No record and nothing to give back: no write at all.
            "a release with nothing held on the floor",
            2,
            floor(2, 10, &[]),
            release,
            WorkloadSurge {
                count: None,
                annotations: BTreeMap::new(),
                outcome: None,
                user_edit_kept: false,
                want: None,
            },
        ),
    ];
    for (name, replicas, on, intent, expected) in rows {
        let got = plan_workload_surge(replicas, &on, &intent, NOW).unwrap();
        assert_eq!(got, expected, "{name}");
    }
}

/// Deployment `inference/NAME`'s surge record: base 2, held by `drains`.
fn surged(name: &str, drains: &[(&str, u32)]) -> SurgedSeen {
    SurgedSeen {
        namespace: "inference".into(),
        deployment: name.into(),
        record: SurgeRecord {
            base: 2,
            drains: drains.iter().map(|(d, k)| (d.to_string(), *k)).collect(),
        },
    }
}

fn release_surge(name: &str, drain: &str) -> Command {
    Command::ReleaseSurge {
        namespace: "inference".into(),
        deployment: name.into(),
        drain: drain.into(),
    }
}

#[test]
fn a_drain_gives_back_its_own_surges_when_it_ends_or_its_node_is_gone() {
    // Drain i-a's steps at NOW + 60, as the planner makes them.
    let ended = |phase: Phase, end: Vec<Command>| {
        let s = DrainState {
            phase,
            ..state(Some(NOW + 30.0))
        };
        let mut commands = vec![Command::RecordState { state: s.clone() }];
        commands.extend(end);
        DrainStep {
            commands,
            state: Some(s),
        }
    };
    let drained = || {
        ended(
            Phase::Drained,
            vec![Command::ReleaseReplacement, Command::Done(Finish::Drained)],
        )
    };
    let undrained = || {
        ended(
            Phase::Evicting,
            vec![
                Command::Undrain {
                    uncordon: true,
                    closed_by: None,
                    false_alarm_at: None,
                },
                Command::ReleaseReplacement,
                Command::Done(Finish::Undrained),
            ],
        )
    };
    let evicting = || {
        ended(
            Phase::Evicting,
            vec![evict("llama-0"), Command::WaitUntil { at: NOW + 63.0 }],
        )
    };
    // (situation, the step planned (None: the node is gone, no step), the surge records seen,
    // the commands expected: the step's with the releases, or the releases alone)
    type Row = (
        &'static str,
        Option<DrainStep>,
        Vec<SurgedSeen>,
        Vec<Command>,
    );
    let rows: Vec<Row> = vec![
        (
            // Drained: llama's share (i-a: 2) given back right before the placeholder's release.
            "drain finished: its surge released before the placeholder",
            Some(drained()),
            vec![surged("llama", &[("i-a", 2)])],
            {
                let mut c = drained().commands;
                c.insert(1, release_surge("llama", "i-a"));
                c
            },
        ),
        (
            // Un-drained (closed, expired, abandoned): the same release, after the un-drain.
            "drain un-drained: its surge released before the placeholder",
            Some(undrained()),
            vec![surged("llama", &[("i-a", 2)])],
            {
                let mut c = undrained().commands;
                c.insert(2, release_surge("llama", "i-a"));
                c
            },
        ),
        (
            // No step: the node went first; i-a's shares of llama and mistral both go back.
            "node gone: every surge of the drain released",
            None,
            vec![
                surged("llama", &[("i-a", 2)]),
                surged("mistral", &[("i-a", 1)]),
            ],
            vec![
                release_surge("llama", "i-a"),
                release_surge("mistral", "i-a"),
            ],
        ),
        (
            // Still evicting (a check at NOW + 63): the surge holds on, the step is unchanged.
            "surge still needed: no release",
            Some(evicting()),
            vec![surged("llama", &[("i-a", 2)])],
            evicting().commands,
        ),
        (
            // i-b's record and i-b's share of a shared record stay; only i-a's share goes.
            "a surge record of another drain: untouched",
            Some(drained()),
            vec![
                surged("mistral", &[("i-b", 1)]),
                surged("llama", &[("i-a", 2), ("i-b", 1)]),
            ],
            {
                let mut c = drained().commands;
                c.insert(1, release_surge("llama", "i-a"));
                c
            },
        ),
        (
            // The node gone, only another drain's record: nothing to give back.
            "node gone with another drain's record: untouched",
            None,
            vec![surged("mistral", &[("i-b", 1)])],
            vec![],
        ),
    ];
    for (name, step, seen, expected) in rows {
        let got = match step {
            Some(mut step) => {
                plan_releases(&mut step, &seen, "i-a");
                step.commands
            }
            None => release_surges(&seen, |d| d == "i-a"),
        };
        assert_eq!(got, expected, "{name}");
    }
}

#[test]
fn orphaned_drains_are_those_not_draining_any_more() {
    let r = surged("llama", &[("i-a", 2), ("i-b", 1)]);
    let active: BTreeSet<String> = ["i-b".to_string(), "i-c".to_string()].into();
    let r = std::slice::from_ref(&r);
    assert_eq!(
        orphan_releases(r, &active),
        vec![release_surge("llama", "i-a")]
    );
    assert!(orphan_releases(r, &["i-a".into(), "i-b".into()].into()).is_empty());
}
