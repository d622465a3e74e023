//! Table tests of the surge decisions; expected values worked out by hand.

use std::collections::{BTreeMap, BTreeSet};

use super::*;
use crate::floor::tests::set;
use crate::interruption::{NoticeKind, Phase};
use crate::test_util::string_map;

const NOW: f64 = 1_795_953_600.0; // 2026-11-29T12:00:00Z

fn rec(base: u32, drains: &[(&str, u32)]) -> SurgeRecord {
    SurgeRecord {
        base,
        drains: drains.iter().map(|(d, k)| (d.to_string(), *k)).collect(),
    }
}

fn hold(drain: &str, k: u32) -> SurgeIntent {
    SurgeIntent::Hold {
        drain: drain.into(),
        k,
    }
}

fn release(drain: &str) -> SurgeIntent {
    SurgeIntent::Release {
        drain: drain.into(),
    }
}

#[test]
fn surge_decisions() {
    // (situation, record, replicas now, HPA max, intent, expected)
    type Row = (
        &'static str,
        Option<SurgeRecord>,
        u32,
        Option<u32>,
        SurgeIntent,
        SurgeDecision,
    );
    let rows: Vec<Row> = vec![
        (
            "first drain moving 2 of 3 replicas: 3 + 2 = 5",
            None,
            3,
            None,
            hold("i-a", 2),
            SurgeDecision::Set {
                want: 5,
                record: rec(3, &[("i-a", 2)]),
            },
        ),
        (
            "an HPA with maxReplicas 4: 3 + 2 capped at 4",
            None,
            3,
            Some(4),
            hold("i-a", 2),
            SurgeDecision::Set {
                want: 4,
                record: rec(3, &[("i-a", 2)]),
            },
        ),
        (
            "already at maxReplicas: the floor stays at the current replicas",
            None,
            4,
            Some(4),
            hold("i-a", 1),
            SurgeDecision::Set {
                want: 4,
                record: rec(4, &[("i-a", 1)]),
            },
        ),
        (
            "no pods of the workload on the node: nothing",
            None,
            3,
            None,
            hold("i-a", 0),
            SurgeDecision::Unchanged,
        ),
        (
            "the same drain again: keeps its recorded k (its pods are leaving)",
            Some(rec(3, &[("i-a", 2)])),
            5,
            None,
            hold("i-a", 1),
            SurgeDecision::Unchanged,
        ),
        (
            "a second drain adds its k on the first's base: 3 + 2 + 1",
            Some(rec(3, &[("i-a", 2)])),
            5,
            None,
            hold("i-b", 1),
            SurgeDecision::Set {
                want: 6,
                record: rec(3, &[("i-a", 2), ("i-b", 1)]),
            },
        ),
        (
            "one of two drains ends: only its share goes",
            Some(rec(3, &[("i-a", 2), ("i-b", 1)])),
            6,
            None,
            release("i-a"),
            SurgeDecision::Set {
                want: 4,
                record: rec(3, &[("i-b", 1)]),
            },
        ),
        (
            "the last drain ends: restore",
            Some(rec(3, &[("i-b", 1)])),
            4,
            None,
            release("i-b"),
            SurgeDecision::Restore,
        ),
        (
            "a drain that holds nothing releases nothing",
            Some(rec(3, &[("i-b", 1)])),
            4,
            None,
            release("i-a"),
            SurgeDecision::Unchanged,
        ),
        (
            "an empty record (all shares gone) is restored",
            Some(rec(3, &[])),
            3,
            None,
            release("i-a"),
            SurgeDecision::Restore,
        ),
        (
            "no surge, release: nothing",
            None,
            3,
            None,
            release("i-a"),
            SurgeDecision::Unchanged,
        ),
    ];
    for (name, record, replicas, max, intent, expected) in rows {
        assert_eq!(
            plan_surge(record.as_ref(), replicas, max, &intent),
            expected,
            "{name}"
        );
    }
}

#[test]
fn deployment_replicas_saved_restored_and_user_edits_kept() {
    let surged = string_map(&[
        (SURGE_DRAINS, r#"{"i-a":2}"#),
        (SURGE_BASE, "3"),
        (SURGE_USER_REPLICAS, "3"),
        (SURGE_WRITTEN_REPLICAS, "5"),
    ]);
    let gone = set(&[
        (SURGE_DRAINS, None),
        (SURGE_BASE, None),
        (SURGE_USER_REPLICAS, None),
        (SURGE_WRITTEN_REPLICAS, None),
    ]);
    // (situation, spec.replicas, annotations, intent, replicas written, annotations, outcome)
    type Row = (
        &'static str,
        u32,
        BTreeMap<String, String>,
        SurgeIntent,
        Option<u32>,
        BTreeMap<String, Option<String>>,
        &'static str,
    );
    let rows: Vec<Row> = vec![
        (
            "raise 3 -> 5, the user's 3 saved",
            3,
            string_map(&[]),
            hold("i-a", 2),
            Some(5),
            set(&[
                (SURGE_DRAINS, Some(r#"{"i-a":2}"#)),
                (SURGE_BASE, Some("3")),
                (SURGE_USER_REPLICAS, Some("3")),
                (SURGE_WRITTEN_REPLICAS, Some("5")),
            ]),
            "raised",
        ),
        ("held again: nothing", 5, surged.clone(), hold("i-a", 2), None, set(&[]), "unchanged"),
        (
            "a second drain: 6, the user's value still 3",
            5,
            surged.clone(),
            hold("i-b", 1),
            Some(6),
            set(&[
                (SURGE_DRAINS, Some(r#"{"i-a":2,"i-b":1}"#)),
                (SURGE_BASE, Some("3")),
                (SURGE_USER_REPLICAS, Some("3")),
                (SURGE_WRITTEN_REPLICAS, Some("6")),
            ]),
            "raised",
        ),
        ("the drain ends: exactly 3 again", 5, surged.clone(), release("i-a"), Some(3), gone.clone(), "restored"),
        (
            "the user scaled to 8 meanwhile: 8 kept, record dropped",
            8,
            surged.clone(),
            release("i-a"),
            None,
            gone.clone(),
            "user_edit_kept",
        ),
        (
            "the user scaled to 8 meanwhile, the drain still steps: 8 kept, record dropped (a later step surges on the 8)",
            8,
            surged.clone(),
            hold("i-a", 2),
            None,
            gone.clone(),
            "user_edit_kept",
        ),
        (
            "a stray annotation without the rest is cleaned up",
            4,
            string_map(&[(SURGE_WRITTEN_REPLICAS, "5")]),
            release("i-a"),
            None,
            gone.clone(),
            "unchanged",
        ),
        ("nothing there, nothing asked", 4, string_map(&[]), release("i-a"), None, set(&[]), "unchanged"),
        (
            "a record cut short by hand (no user's value), the 5 edited to 8: the 8 kept",
            8,
            string_map(&[(SURGE_DRAINS, r#"{"i-a":2}"#), (SURGE_BASE, "3"), (SURGE_WRITTEN_REPLICAS, "5")]),
            hold("i-a", 2),
            None,
            gone.clone(),
            "user_edit_kept",
        ),
        (
            "a record cut short by hand, the count still prewarm's 5: no record, strays removed",
            5,
            string_map(&[(SURGE_DRAINS, r#"{"i-a":2}"#), (SURGE_BASE, "3"), (SURGE_WRITTEN_REPLICAS, "5")]),
            release("i-a"),
            None,
            gone.clone(),
            "unchanged",
        ),
    ];
    for (name, replicas, a, intent, want, annotations, outcome) in rows {
        let got = plan_deployment_surge(replicas, &a, &intent).unwrap();
        assert_eq!(got.replicas, want, "{name}: replicas");
        assert_eq!(got.annotations, annotations, "{name}: annotations");
        assert_eq!(got.outcome.to_string(), outcome, "{name}: outcome");
    }
}

#[test]
fn unreadable_records_name_the_annotation() {
    let cases = [
        (
            string_map(&[(SURGE_DRAINS, "two"), (SURGE_BASE, "3")]),
            SURGE_DRAINS,
        ),
        (string_map(&[(SURGE_DRAINS, "{}")]), SURGE_BASE),
        (
            string_map(&[(SURGE_DRAINS, "{}"), (SURGE_BASE, "x")]),
            SURGE_BASE,
        ),
        (
            string_map(&[
                (SURGE_DRAINS, "{}"),
                (SURGE_BASE, "3"),
                (SURGE_USER_REPLICAS, "three"),
            ]),
            SURGE_USER_REPLICAS,
        ),
    ];
    for (a, key) in cases {
        let e = plan_deployment_surge(3, &a, &release("i-a")).unwrap_err();
        assert!(e.contains(key), "{key}: {e}");
    }
}

fn state(ready_at: Option<f64>, deadline: Option<f64>) -> DrainState {
    DrainState {
        deadline,
        replacement_ready_at: ready_at,
        evicting_since: ready_at,
        replacement_gpus: 1,
        instance_end: deadline.map(|d| d + 30.0),
        ..DrainState::test(NoticeKind::SpotInterruption, Phase::Evicting, NOW)
    }
}

#[test]
fn a_surge_starts_once_the_replacement_is_ready_and_before_the_deadline() {
    // (replacement ready at, deadline, now, surge?)
    let rows = [
        (None, Some(NOW + 90.0), NOW + 10.0, false),
        (Some(NOW + 30.0), Some(NOW + 90.0), NOW + 30.0, true),
        (Some(NOW + 30.0), Some(NOW + 90.0), NOW + 89.9, true),
        (Some(NOW + 30.0), Some(NOW + 90.0), NOW + 90.0, false),
        // No deadline (rebalance): until 30 min after the notice, like the drain's own wait.
        (Some(NOW + 30.0), None, NOW + 1799.0, true),
        (Some(NOW + 30.0), None, NOW + 1800.0, false),
    ];
    for (ready, deadline, now, expected) in rows {
        assert_eq!(
            wants_surge(&state(ready, deadline), now),
            expected,
            "{ready:?} {deadline:?} {now}"
        );
    }
    // Ready replicas against what the surge asked for (old pods counted in both).
    assert!(!surge_ready(5, 3));
    assert!(!surge_ready(5, 4));
    assert!(surge_ready(5, 5));
    assert!(surge_ready(4, 6));
}

fn pod(name: &str, grace_s: f64) -> PodView {
    PodView::test("inference", name, grace_s)
}

fn evict(p: &PodView) -> Command {
    Command::Evict {
        pod: p.pod.clone(),
        tier: 1,
        uid: p.uid.clone(),
        grace_s: None,
        delete_if_blocked: false,
    }
}

#[test]
fn evictions_wait_for_the_surge_until_due() {
    // Deadline NOW+90 (instance end NOW+120); the replacement was ready at NOW+30.
    let llama = pod("llama-0", 30.0); // due at min(90, 120-30) = NOW+90
    let slow = pod("slow-0", 60.0); // due at min(90, 120-60) = NOW+60
    let other = pod("batch-0", 30.0); // not surged (no Deployment, or its surge is Ready)
    let pods = vec![llama.clone(), slow.clone(), other.clone()];
    let held: BTreeSet<PodRef> = [llama.pod.clone(), slow.pod.clone()].into();
    // (now, evictions left in the step, held back)
    let rows: Vec<(f64, Vec<&PodView>, Vec<&PodView>)> = vec![
        (NOW + 30.0, vec![&other], vec![&llama, &slow]),
        (NOW + 59.0, vec![&other], vec![&llama, &slow]),
        (NOW + 60.0, vec![&slow, &other], vec![&llama]),
        (NOW + 90.0, vec![&llama, &slow, &other], vec![]),
    ];
    for (now, left, back) in rows {
        let mut step = DrainStep {
            commands: vec![
                Command::RecordState {
                    state: state(Some(NOW + 30.0), Some(NOW + 90.0)),
                },
                evict(&llama),
                evict(&slow),
                evict(&other),
                Command::WaitUntil { at: now + 3.0 },
            ],
            state: Some(state(Some(NOW + 30.0), Some(NOW + 90.0))),
        };
        let got = hold_evictions(&mut step, &pods, &held, now);
        let mut expected_back: Vec<PodRef> = back.iter().map(|p| p.pod.clone()).collect();
        expected_back.sort();
        let mut got_sorted = got.clone();
        got_sorted.sort();
        assert_eq!(got_sorted, expected_back, "held back at +{}", now - NOW);
        let evicted: Vec<&PodRef> = step.evictions().collect();
        let expected: Vec<&PodRef> = left.iter().map(|p| &p.pod).collect();
        assert_eq!(evicted, expected, "evicted at +{}", now - NOW);
        assert_eq!(
            step.last(),
            &Command::WaitUntil { at: now + 3.0 },
            "the step still waits"
        );
    }
}
