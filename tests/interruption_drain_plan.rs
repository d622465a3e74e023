//! Pure drain planning, with a fixed clock: tiers, deadlines, do-not-disrupt, PDB-blocked pods,
//! duplicates and take-overs. Expected values are worked out by hand from the rules in
//! `core::interruption::drain`, not computed by the code under test.

#[path = "common/drain_plan.rs"]
mod drain_plan;
use drain_plan::{node, T0};

use prewarm::core::interruption::{
    plan_drain, ActionTable, Command, DrainSettings, DrainState, Finish, NodeView, Notice,
    NoticeKind, NoticeStatus, Phase, PodOwner, PodRef, PodView, ReplacementSeen,
};
use ReplacementSeen::{Absent, NoTarget, Pending, Running};

fn notice(kind: NoticeKind) -> Notice {
    Notice {
        event_id: "ev-1".into(),
        kind,
        instance_ids: vec!["i-0abc".into()],
        time: T0,
        instance_state: (kind == NoticeKind::StateChange).then(|| "stopping".into()),
        window_start: (kind == NoticeKind::ScheduledChange).then_some(T0 + 86_400.0),
        termination_time: None,
        reservation_id: None,
        reservation_end: None,
        status: NoticeStatus::Active,
        sent_time: None,
        scheduled: false,
    }
}

fn pod(name: &str, gpus: u32) -> PodView {
    PodView {
        pod: PodRef {
            namespace: "inference".into(),
            name: name.into(),
        },
        uid: None,
        owner: PodOwner::Other,
        critical: false,
        do_not_disrupt: false,
        deletion_at: None,
        finished: false,
        gpus,
        // Only GPU pods request anything here; CPU pods: `cpu_pod`.
        requests_room: gpus > 0,
        grace_s: 0.0,
    }
}

/// A pod that requests CPU and memory but no GPU.
fn cpu_pod(name: &str) -> PodView {
    PodView {
        requests_room: true,
        ..pod(name, 0)
    }
}

fn settings() -> DrainSettings {
    DrainSettings::default() // budget 30 s, recheck 15 s
}

fn evicted(step: &prewarm::core::interruption::DrainStep) -> Vec<String> {
    step.evictions().map(|p| p.name.clone()).collect()
}

/// A node already cordoned, tainted and claimed by `ev-1`, replacement requested at T0+1.
fn claimed(
    replacement: ReplacementSeen,
    kind: NoticeKind,
    evicting_since: Option<f64>,
) -> NodeView {
    let n = notice(kind);
    NodeView {
        unschedulable: true,
        tainted: true,
        state: Some(DrainState {
            event_id: "ev-1".into(),
            kind,
            phase: Phase::WaitingForReplacement,
            notice_time: T0,
            deadline: prewarm::core::interruption::eviction_deadline(&n, 30.0),
            started_at: T0 + 1.0,
            replacement_requested_at: Some(T0 + 1.0),
            replacement_ready_at: None,
            evicting_since,
            finished_at: None,
            replacement_gpus: 8,
            instance_end: prewarm::core::interruption::instance_end(&n),
            last_step_at: Some(T0 + 1.0),
            next_check_at: None,
            event_time: None,
            user_cordoned: false,
            pods_moved: 0,
        }),
        ..node(replacement)
    }
}

#[test]
fn first_step_of_a_spot_warning_cordons_taints_requests_and_waits() {
    let pods = [pod("llama-0", 4), pod("llama-1", 4)];
    let step = plan_drain(
        &node(Absent),
        &pods,
        &notice(NoticeKind::SpotInterruption),
        T0 + 1.0,
        &settings(),
    );
    let kinds: Vec<&str> = step
        .commands
        .iter()
        .map(|c| match c {
            Command::RecordState { .. } => "record",
            Command::Cordon => "cordon",
            Command::Taint { .. } => "taint",
            Command::RequestReplacement { gpus: 8, .. } => "request-8",
            Command::WaitUntil { .. } => "wait",
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    assert_eq!(kinds, ["record", "cordon", "taint", "request-8", "wait"]);
    assert_eq!(step.last(), &Command::WaitUntil { at: T0 + 16.0 });
    let s = step.state.unwrap();
    assert_eq!(s.phase, Phase::WaitingForReplacement);
    assert_eq!(s.deadline, Some(T0 + 90.0)); // 120 s warning - 30 s budget
    assert_eq!(s.started_at, T0 + 1.0);
}

#[test]
fn the_replacement_being_ready_starts_eviction_before_the_deadline() {
    let pods = [pod("llama-0", 4), pod("llama-1", 4)];
    // 8 GPUs free elsewhere covers the 4 + 4 the pods need.
    let step = plan_drain(
        &claimed(Running, NoticeKind::SpotInterruption, None),
        &pods,
        &notice(NoticeKind::SpotInterruption),
        T0 + 40.0,
        &settings(),
    );
    assert_eq!(evicted(&step), ["llama-0", "llama-1"]);
    let s = step.state.unwrap();
    assert_eq!(s.phase, Phase::Evicting);
    assert_eq!(s.replacement_ready_at, Some(T0 + 40.0));
    assert_eq!(s.evicting_since, Some(T0 + 40.0));
    // Already cordoned, tainted and requested: none of that again.
    assert!(!step.commands.iter().any(|c| matches!(
        c,
        Command::Cordon | Command::Taint { .. } | Command::RequestReplacement { .. }
    )));
}

#[test]
fn partial_warm_capacity_is_not_ready() {
    let pods = [pod("llama-0", 4), pod("llama-1", 4)];
    let step = plan_drain(
        &claimed(Pending, NoticeKind::SpotInterruption, None),
        &pods,
        &notice(NoticeKind::SpotInterruption),
        T0 + 40.0,
        &settings(),
    );
    assert!(evicted(&step).is_empty());
    assert_eq!(step.last(), &Command::WaitUntil { at: T0 + 55.0 });
}

#[test]
fn the_next_check_lands_on_the_deadline_and_the_deadline_forces_eviction() {
    let pods = [pod("llama-0", 4)];
    let n = notice(NoticeKind::SpotInterruption);
    // 80 s after the notice the next check would be 95 s, past the 90 s deadline: wake at 90.
    let waiting = plan_drain(
        &claimed(Pending, n.kind, None),
        &pods,
        &n,
        T0 + 80.0,
        &settings(),
    );
    assert_eq!(waiting.last(), &Command::WaitUntil { at: T0 + 90.0 });
    let at_deadline = plan_drain(
        &claimed(Pending, n.kind, None),
        &pods,
        &n,
        T0 + 90.0,
        &settings(),
    );
    assert_eq!(evicted(&at_deadline), ["llama-0"]);
    assert_eq!(at_deadline.state.unwrap().replacement_ready_at, None);
}

#[test]
fn deadlines_per_kind_with_no_warm_capacity() {
    // (kind, seconds after the notice, evicts?)
    let cases = [
        (NoticeKind::SpotInterruption, 89.0, false),
        (NoticeKind::SpotInterruption, 90.0, true),
        (NoticeKind::CapacityReservation, 89.0, false),
        (NoticeKind::CapacityReservation, 90.0, true),
        // No end-date: termination at notice + 600 s, eviction by 570 s (budget 30 s).
        (NoticeKind::CapacityBlock, 569.0, false),
        (NoticeKind::CapacityBlock, 570.0, true),
        (NoticeKind::ScheduledChange, 3600.0, false),
        (NoticeKind::ScheduledChange, 86_370.0, true), // window start - 30 s
        (NoticeKind::StateChange, 0.0, true),          // evict at once
        (NoticeKind::Rebalance, 1799.0, false),        // waits for the replacement...
        // ...30 min from the claim: first seen 30 min after its notice (a late delivery), it
        // still waits (this table's steps are each a first claim; "not forever" is the
        // rebalance row of `the_recorded_notice_time_is_bounded_by_the_sent_timestamp`).
        (NoticeKind::Rebalance, 1801.0, false),
    ];
    for (kind, after, evicts) in cases {
        let mut n = node(Absent);
        n.state = None;
        let step = plan_drain(
            &n,
            &[pod("llama-0", 4)],
            &notice(kind),
            T0 + after,
            &settings(),
        );
        assert_eq!(!evicted(&step).is_empty(), evicts, "{kind} at +{after}s");
    }
}

#[test]
fn capacity_reservation_uses_the_stated_termination_time() {
    let mut n = notice(NoticeKind::CapacityReservation);
    n.termination_time = Some(T0 + 100.0);
    let step = plan_drain(&node(Absent), &[pod("p", 1)], &n, T0 + 70.0, &settings());
    assert_eq!(evicted(&step), ["p"]);
}

#[test]
fn tiers_daemonsets_mirrors_and_critical_pods() {
    let mut ds = pod("node-exporter", 0);
    ds.owner = PodOwner::DaemonSet;
    let mut mirror = pod("static-proxy", 0);
    mirror.owner = PodOwner::Mirror;
    let mut critical = pod("gpu-operator", 0);
    critical.critical = true;
    let mut done = pod("job-1", 0);
    done.finished = true;
    let ordinary = pod("llama-0", 4);
    // A spot warning with warm capacity for everything (16 GPUs elsewhere): eviction starts at
    // once and follows the tiers, all before the deadline (T0+90).
    let n = notice(NoticeKind::SpotInterruption);

    let first = plan_drain(
        &node(Running),
        &[
            ds.clone(),
            mirror.clone(),
            critical.clone(),
            done.clone(),
            ordinary.clone(),
        ],
        &n,
        T0,
        &settings(),
    );
    assert_eq!(evicted(&first), ["llama-0"]);
    assert!(first
        .commands
        .iter()
        .any(|c| matches!(c, Command::Evict { tier: 1, .. })));

    // The ordinary pod is terminating: wait for it, do not start tier 2 yet.
    let mut leaving = ordinary.clone();
    leaving.deletion_at = Some(T0 + 4.0); // not stuck before T0+64
    let state = first.state.clone();
    let claimed_node = NodeView {
        unschedulable: true,
        tainted: true,
        state,
        ..node(Running)
    };
    // The check the first step planned: T0+15.
    let second = plan_drain(
        &claimed_node,
        &[ds.clone(), critical.clone(), leaving],
        &n,
        T0 + 15.0,
        &settings(),
    );
    assert!(evicted(&second).is_empty());
    assert!(matches!(second.last(), Command::WaitUntil { .. }));

    // Tier 1 gone: the critical pod is next.
    let third = plan_drain(
        &claimed_node,
        &[ds.clone(), mirror.clone(), critical],
        &n,
        T0 + 16.0,
        &settings(),
    );
    assert_eq!(evicted(&third), ["gpu-operator"]);
    assert!(third
        .commands
        .iter()
        .any(|c| matches!(c, Command::Evict { tier: 2, .. })));

    // Only DaemonSet, mirror and finished pods left: drained, replacement released.
    let fourth = plan_drain(
        &claimed_node,
        &[ds, mirror, done],
        &n,
        T0 + 24.0,
        &settings(),
    );
    assert_eq!(fourth.last(), &Command::Done(Finish::Drained));
    assert!(fourth.commands.contains(&Command::ReleaseReplacement));
    let s = fourth.state.unwrap();
    assert_eq!(s.phase, Phase::Drained);
    assert_eq!(s.finished_at, Some(T0 + 24.0));
}

#[test]
fn do_not_disrupt_pods_wait_for_the_deadline() {
    let mut precious = pod("training-0", 4);
    precious.do_not_disrupt = true;
    let pods = [precious.clone(), pod("llama-0", 4)];
    let n = notice(NoticeKind::SpotInterruption);

    // Warm capacity for everything: the ordinary pod goes, the protected one stays.
    let before = plan_drain(
        &claimed(Running, n.kind, None),
        &pods,
        &n,
        T0 + 20.0,
        &settings(),
    );
    assert_eq!(evicted(&before), ["llama-0"]);

    // Only the protected pod left before the deadline: not done, wake at the deadline.
    let only = plan_drain(
        &claimed(Running, n.kind, Some(T0 + 20.0)),
        &[precious.clone()],
        &n,
        T0 + 80.0,
        &settings(),
    );
    assert!(evicted(&only).is_empty());
    assert_eq!(only.last(), &Command::WaitUntil { at: T0 + 90.0 });

    // At the deadline it is evicted.
    let at = plan_drain(
        &claimed(Running, n.kind, Some(T0 + 20.0)),
        &[precious.clone()],
        &n,
        T0 + 90.0,
        &settings(),
    );
    assert_eq!(evicted(&at), ["training-0"]);

    // A rebalance has no deadline: the protected pod stays and the drain is over.
    let r = notice(NoticeKind::Rebalance);
    let reb = plan_drain(
        &claimed(Running, r.kind, Some(T0 + 20.0)),
        &[precious],
        &r,
        T0 + 30.0,
        &settings(),
    );
    assert_eq!(reb.last(), &Command::Done(Finish::Drained));
}

#[test]
fn a_pdb_blocked_pod_is_retried_every_check_until_it_goes() {
    // The executor got 429 for this pod last time; the plan simply asks again, and keeps the
    // message in flight (WaitUntil), past the deadline too.
    let pods = [pod("llama-0", 4)];
    let n = notice(NoticeKind::SpotInterruption);
    for after in [40.0, 55.0, 90.0, 200.0] {
        let step = plan_drain(
            &claimed(Running, n.kind, Some(T0 + 40.0)),
            &pods,
            &n,
            T0 + after,
            &settings(),
        );
        assert_eq!(evicted(&step), ["llama-0"], "+{after}s");
        assert_eq!(
            step.last(),
            &Command::WaitUntil {
                at: T0 + after + 15.0
            },
            "+{after}s"
        );
    }
}

#[test]
fn a_duplicate_delivery_collapses_into_the_live_one_and_a_later_delivery_continues() {
    let n = notice(NoticeKind::SpotInterruption);
    let pods = [pod("llama-0", 4)];
    let first = plan_drain(&node(Absent), &pods, &n, T0 + 1.0, &settings());
    assert_eq!(first.state.as_ref().unwrap().last_step_at, Some(T0 + 1.0));
    let after = NodeView {
        unschedulable: true,
        tainted: true,
        state: first.state.clone(),
        // The placeholder the first step made, not running yet.
        ..node(Pending)
    };
    // The first step planned its next check at T0+1+15 = T0+16 and recorded it.
    assert_eq!(first.state.as_ref().unwrap().next_check_at, Some(T0 + 16.0));
    // 1 s and 13.9 s after the last step (before 16 - 1 s of leeway): the planned check carries
    // it, this delivery ends.
    for now in [T0 + 2.0, T0 + 14.9] {
        let dup = plan_drain(&after, &pods, &n, now, &settings());
        assert_eq!(dup.commands, [Command::Done(Finish::Duplicate)], "{now}");
        assert!(!dup.claims("ev-1"));
    }
    // The planned check at T0+16: it carries on where the first stopped.
    let next = plan_drain(&after, &pods, &n, T0 + 16.0, &settings());
    let s = next.state.as_ref().unwrap();
    assert_eq!((s.started_at, s.last_step_at), (T0 + 1.0, Some(T0 + 16.0)));
    assert_eq!(
        next.commands.len(),
        2,
        "only record + wait: {:?}",
        next.commands
    );
    assert!(next.claims("ev-1"));
}

#[test]
fn a_later_notice_does_not_take_an_earlier_deadline_over_but_an_earlier_one_does() {
    let pods = [pod("llama-0", 4)];
    // The node drains for a spot warning (deadline T0+90); a rebalance (no deadline) arrives.
    let mut rebalance = notice(NoticeKind::Rebalance);
    rebalance.event_id = "ev-2".into();
    let step = plan_drain(
        &claimed(Pending, NoticeKind::SpotInterruption, None),
        &pods,
        &rebalance,
        T0 + 5.0,
        &settings(),
    );
    assert_eq!(
        step.last(),
        &Command::Done(Finish::Superseded {
            by_event: "ev-1".into()
        })
    );
    assert!(step.evictions().next().is_none());

    // The node drains for a rebalance; a spot warning arrives: it takes over.
    let mut spot = notice(NoticeKind::SpotInterruption);
    spot.event_id = "ev-3".into();
    let step = plan_drain(
        &claimed(Pending, NoticeKind::Rebalance, None),
        &pods,
        &spot,
        T0 + 5.0,
        &settings(),
    );
    let s = step.state.unwrap();
    assert_eq!(s.event_id, "ev-3");
    assert_eq!(s.deadline, Some(T0 + 90.0));
    assert_eq!(s.started_at, T0 + 1.0, "keeps what was done");
    assert!(!step
        .commands
        .iter()
        .any(|c| matches!(c, Command::RequestReplacement { .. })));
}

#[test]
fn configured_actions_change_the_plan() {
    let pods = [pod("llama-0", 4)];
    let r = notice(NoticeKind::Rebalance);
    let prewarm_only = DrainSettings {
        actions: ActionTable::parse("rebalance=cordon-prewarm").unwrap(),
        ..settings()
    };
    // Not ready: cordon + request, wait.
    let step = plan_drain(&node(Absent), &pods, &r, T0, &prewarm_only);
    assert!(step.commands.contains(&Command::Cordon));
    assert!(evicted(&step).is_empty());
    // Ready: done, pods left serving, replacement kept.
    let step = plan_drain(
        &claimed(Running, r.kind, None),
        &pods,
        &r,
        T0 + 30.0,
        &prewarm_only,
    );
    assert_eq!(step.last(), &Command::Done(Finish::Prewarmed));
    assert!(evicted(&step).is_empty());
    assert!(!step.commands.contains(&Command::ReleaseReplacement));

    let ignore = DrainSettings {
        actions: ActionTable::parse("spot-interruption=ignore").unwrap(),
        ..settings()
    };
    let step = plan_drain(
        &node(Absent),
        &pods,
        &notice(NoticeKind::SpotInterruption),
        T0,
        &ignore,
    );
    assert_eq!(step.commands, [Command::Done(Finish::Ignored)]);

    let now = DrainSettings {
        actions: ActionTable::parse("spot-interruption=evict-now").unwrap(),
        ..settings()
    };
    let step = plan_drain(
        &node(Absent),
        &pods,
        &notice(NoticeKind::SpotInterruption),
        T0 + 1.0,
        &now,
    );
    assert_eq!(evicted(&step), ["llama-0"]);
}

#[test]
fn a_node_without_gpus_asks_for_no_replacement_and_drains_at_once() {
    let mut n = node(Absent);
    n.gpus = 0;
    let step = plan_drain(
        &n,
        &[pod("web-0", 0)],
        &notice(NoticeKind::SpotInterruption),
        T0,
        &settings(),
    );
    assert!(!step
        .commands
        .iter()
        .any(|c| matches!(c, Command::RequestReplacement { .. })));
    assert_eq!(evicted(&step), ["web-0"]);
}

/// CPU/memory-only pods: a placeholder where one can be made (their requests may fit no other
/// node), at once where none can; GPU pods wait either way; pods without requests go at once.
#[test]
fn cpu_pods_wait_for_a_placeholder_only_where_one_can_be_made() {
    // (situation, node's placeholder, pods, expected: placeholder asked for, pods evicted now)
    type Case = (
        &'static str,
        ReplacementSeen,
        Vec<PodView>,
        bool,
        Vec<&'static str>,
    );
    let cases: Vec<Case> = vec![
        (
            "cpu pods, target pool, none yet: ask and wait",
            Absent,
            vec![cpu_pod("api-0")],
            true,
            vec![],
        ),
        (
            "cpu pods, placeholder pending: wait",
            Pending,
            vec![cpu_pod("api-0")],
            false,
            vec![],
        ),
        (
            "cpu pods, placeholder running: evict",
            Running,
            vec![cpu_pod("api-0")],
            false,
            vec!["api-0"],
        ),
        (
            "cpu pods, no target for the pool: evict at once",
            NoTarget,
            vec![cpu_pod("api-0")],
            false,
            vec!["api-0"],
        ),
        (
            "gpu pod, no target for the pool: ask (logged as no target) and wait",
            NoTarget,
            vec![pod("llama-0", 4), cpu_pod("api-0")],
            true,
            vec![],
        ),
        (
            "pods without requests, target pool: evict at once",
            Absent,
            vec![pod("web-0", 0)],
            false,
            vec!["web-0"],
        ),
    ];
    for (what, seen, pods, asked, evicts) in cases {
        let mut n = node(seen);
        n.gpus = 0;
        let step = plan_drain(
            &n,
            &pods,
            &notice(NoticeKind::SpotInterruption),
            T0,
            &settings(),
        );
        let requested = step
            .commands
            .iter()
            .any(|c| matches!(c, Command::RequestReplacement { .. }));
        assert_eq!(requested, asked, "{what}");
        assert_eq!(evicted(&step), evicts, "{what}");
    }
}

/// A rebalance drain (no deadline) owned by `ev-1`, last stepped at `last_step`.
fn rebalance_owned(last_step: f64) -> NodeView {
    let mut n = claimed(Pending, NoticeKind::Rebalance, None);
    n.state.as_mut().unwrap().last_step_at = Some(last_step);
    n
}

#[test]
fn a_notice_adopts_a_drain_whose_owner_went_silent() {
    // recheck 15 s: the owner counts as gone after 4 x 15 + 60 = 120 s without a step.
    let pods = [pod("llama-0", 4)];
    let mut other = notice(NoticeKind::Rebalance);
    other.event_id = "ev-2".into();
    // (last step of ev-1, now, expected owner afterwards)
    let cases = [
        (T0 + 100.0, T0 + 200.0, "ev-1"), // 100 s of silence: alive, moot
        (T0 + 100.0, T0 + 219.0, "ev-1"),
        (T0 + 100.0, T0 + 221.0, "ev-2"), // 121 s: adopted
    ];
    for (last, now, owner) in cases {
        let step = plan_drain(&rebalance_owned(last), &pods, &other, now, &settings());
        assert_eq!(
            step.state.as_ref().unwrap().event_id,
            owner,
            "last {last} now {now}"
        );
        if owner == "ev-2" {
            assert!(step.claims("ev-2"));
            let s = step.state.unwrap();
            assert_eq!(s.started_at, T0 + 1.0, "keeps what was done");
            assert_eq!(s.replacement_requested_at, Some(T0 + 1.0));
        } else {
            assert_eq!(
                step.last(),
                &Command::Done(Finish::Superseded {
                    by_event: "ev-1".into()
                })
            );
        }
    }
}

#[test]
fn a_pod_stuck_in_terminating_no_longer_holds_the_drain() {
    let n = notice(NoticeKind::SpotInterruption);
    let mut stuck = pod("llama-0", 4);
    // Its grace period ended at T0+50 (deletionTimestamp); a minute later it is stuck.
    stuck.deletion_at = Some(T0 + 50.0);
    let node = claimed(Running, n.kind, Some(T0 + 40.0));
    let waiting = plan_drain(
        &node,
        std::slice::from_ref(&stuck),
        &n,
        T0 + 100.0,
        &settings(),
    );
    assert!(matches!(waiting.last(), Command::WaitUntil { .. }));
    assert!(evicted(&waiting).is_empty(), "never evicted again");
    let done = plan_drain(&node, &[stuck], &n, T0 + 111.0, &settings());
    assert_eq!(done.last(), &Command::Done(Finish::Drained));
    assert!(done.commands.contains(&Command::ReleaseReplacement));
}

#[test]
fn a_long_grace_period_starts_its_eviction_early_and_is_cut_at_the_end() {
    // Spot: instance end T0+120, eviction deadline T0+90. No warm capacity (spare 0).
    let n = notice(NoticeKind::SpotInterruption);
    let mut slow = pod("llama-slow", 4);
    slow.grace_s = 100.0; // due at T0+120-100 = T0+20
    slow.uid = Some("uid-slow".into());
    let quick = pod("llama-quick", 4); // grace 0: due at the deadline
    let pods = [slow.clone(), quick.clone()];
    let node = claimed(Pending, n.kind, None);
    // Before T0+20: waiting, and the next check is exactly at T0+20.
    let before = plan_drain(&node, &pods, &n, T0 + 10.0, &settings());
    assert!(evicted(&before).is_empty());
    assert_eq!(before.last(), &Command::WaitUntil { at: T0 + 20.0 });
    // At T0+20 the slow pod goes with its own grace (100 s left = 100 s of grace) and its UID.
    let at = plan_drain(&node, &pods, &n, T0 + 20.0, &settings());
    assert_eq!(
        at.commands
            .iter()
            .filter(|c| matches!(c, Command::Evict { .. }))
            .collect::<Vec<_>>(),
        [&Command::Evict {
            pod: slow.pod.clone(),
            tier: 1,
            uid: Some("uid-slow".into()),
            grace_s: None,
            delete_if_blocked: false,
        }]
    );
    // Blocked until T0+95 (a PDB): evicted again with the grace cut to the 25 s left.
    let evicting = claimed(Pending, n.kind, Some(T0 + 20.0));
    let late = plan_drain(&evicting, &[slow], &n, T0 + 95.0, &settings());
    assert!(late.commands.contains(&Command::Evict {
        pod: PodRef {
            namespace: "inference".into(),
            name: "llama-slow".into()
        },
        tier: 1,
        uid: Some("uid-slow".into()),
        grace_s: Some(25),
        delete_if_blocked: false,
    }));
}

#[test]
fn a_closed_notice_undrains_its_own_node_only() {
    let mut closed = notice(NoticeKind::ScheduledChange);
    closed.status = NoticeStatus::Closed;
    let pods = [pod("llama-0", 4)];
    let own = claimed(Pending, NoticeKind::ScheduledChange, None);
    let step = plan_drain(&own, &pods, &closed, T0 + 60.0, &settings());
    assert_eq!(
        step.commands,
        [
            Command::Undrain {
                uncordon: true,
                closed_by: Some(("ev-1".into(), T0)),
                false_alarm_at: None,
            },
            Command::ReleaseReplacement,
            Command::Done(Finish::Undrained)
        ]
    );
    let mut other = closed.clone();
    other.event_id = "ev-9".into();
    let step = plan_drain(&own, &pods, &other, T0 + 60.0, &settings());
    assert_eq!(
        step.commands,
        [Command::Done(Finish::Superseded {
            by_event: "ev-1".into()
        })]
    );
    let step = plan_drain(&node(Absent), &pods, &closed, T0 + 60.0, &settings());
    assert_eq!(step.commands, [Command::Done(Finish::NothingToUndo)]);
}

fn kinds(step: &prewarm::core::interruption::DrainStep) -> Vec<String> {
    step.commands
        .iter()
        .map(|c| match c {
            Command::RecordState { .. } => "record".to_string(),
            Command::Cordon => "cordon".into(),
            Command::Taint { .. } => "taint".into(),
            Command::RequestReplacement { gpus, .. } => format!("request-{gpus}"),
            Command::HandOver => "hand-over".into(),
            Command::ReleaseReplacement => "release".into(),
            Command::Evict { pod, .. } => format!("evict-{}", pod.name),
            Command::WaitUntil { .. } => "wait".into(),
            Command::Undrain { .. } => "undrain".into(),
            Command::Announce { reason, .. } => format!("announce-{reason}"),
            Command::Done(_) => "done".into(),
        })
        .collect()
}

#[test]
fn the_placeholder_is_handed_over_in_the_step_that_evicts_right_before_the_evictions() {
    let pods = [pod("llama-0", 4), pod("llama-1", 4)];
    let n = notice(NoticeKind::SpotInterruption);
    // Its own placeholder Running elsewhere at T0+20: delete it, then evict both.
    let step = plan_drain(
        &claimed(Running, n.kind, None),
        &pods,
        &n,
        T0 + 20.0,
        &settings(),
    );
    assert_eq!(
        kinds(&step),
        [
            "record",
            "hand-over",
            "evict-llama-0",
            "evict-llama-1",
            "wait"
        ]
    );
    // Pending at the deadline: the placeholder goes too (the evicted pods ask for their own room).
    let late = plan_drain(
        &claimed(Pending, n.kind, None),
        &pods,
        &n,
        T0 + 90.0,
        &settings(),
    );
    assert_eq!(
        kinds(&late),
        [
            "record",
            // The deadline came and the placeholder never ran: said once (the last step was
            // before the deadline).
            "announce-DrainWithoutReplacement",
            "hand-over",
            "evict-llama-0",
            "evict-llama-1",
            "wait"
        ]
    );
    // Already handed over (evicting, placeholder gone), pods terminating: no new placeholder.
    let mut going = pods.clone();
    for p in going.iter_mut() {
        p.deletion_at = Some(T0 + 21.0);
    }
    let after = plan_drain(
        &claimed(Absent, n.kind, Some(T0 + 20.0)),
        &going,
        &n,
        T0 + 22.0,
        &settings(),
    );
    assert_eq!(kinds(&after), ["record", "wait"]);
}

#[test]
fn a_preempted_placeholder_is_made_again_while_the_drain_waits() {
    let pods = [pod("llama-0", 4)];
    let n = notice(NoticeKind::SpotInterruption);
    // Requested at T0+1, gone at T0+30 (a real pod preempted it): ask again, keep the first
    // request time (the drain's record of when it asked).
    let step = plan_drain(
        &claimed(Absent, n.kind, None),
        &pods,
        &n,
        T0 + 30.0,
        &settings(),
    );
    assert_eq!(kinds(&step), ["record", "request-4", "wait"]);
    assert_eq!(step.state.unwrap().replacement_requested_at, Some(T0 + 1.0));
    // evict-now never makes one: its pods go at once.
    let table = ActionTable::parse("spot-interruption=evict-now").unwrap();
    let s = DrainSettings {
        actions: table,
        ..settings()
    };
    let now = plan_drain(&node(Absent), &pods, &n, T0 + 1.0, &s);
    assert!(
        !kinds(&now).iter().any(|k| k.starts_with("request")),
        "{:?}",
        kinds(&now)
    );
}

#[test]
fn three_nodes_reclaimed_at_once_with_room_for_one_replacement() {
    // Three drains of the same deadline, each with its own placeholder; the pool had room for
    // one, so only node a's placeholder runs. Only a sees its replacement ready and evicts; b
    // and c wait (before their deadline) on their own pending placeholders.
    let pods = [pod("llama-0", 4)];
    let n = notice(NoticeKind::SpotInterruption);
    let cases = [
        (
            "a",
            Running,
            vec!["record", "hand-over", "evict-llama-0", "wait"],
        ),
        ("b", Pending, vec!["record", "wait"]),
        ("c", Pending, vec!["record", "wait"]),
    ];
    for (name, seen, expected) in cases {
        let mut view = claimed(seen, n.kind, None);
        view.name = name.into();
        let step = plan_drain(&view, &pods, &n, T0 + 40.0, &settings());
        assert_eq!(kinds(&step), expected, "node {name}");
        assert_eq!(
            step.state.unwrap().replacement_ready_at.is_some(),
            seen == Running,
            "node {name}"
        );
    }
}

#[test]
fn a_cordon_that_was_there_before_the_claim_survives_the_undrain() {
    let spot = notice(NoticeKind::ScheduledChange);
    let pods = [pod("llama-0", 4)];
    // (unschedulable, tainted by prewarm) at the claim -> recorded as someone else's cordon?
    let cases = [
        ((false, false), false), // schedulable: prewarm cordons, prewarm uncordons
        ((true, false), true),   // an operator's cordon: kept
        ((true, true), false),   // prewarm's own (state lost): prewarm's to lift
    ];
    for ((unschedulable, tainted), user) in cases {
        let n = NodeView {
            unschedulable,
            tainted,
            ..node(Absent)
        };
        let claim = plan_drain(&n, &pods, &spot, T0 + 1.0, &settings());
        let s = claim.state.clone().unwrap();
        assert_eq!(s.user_cordoned, user, "{unschedulable} {tainted}");
        assert_eq!(
            claim.commands.contains(&Command::Cordon),
            !unschedulable,
            "{unschedulable} {tainted}"
        );
        let mut closed = spot.clone();
        closed.status = NoticeStatus::Closed;
        let claimed = NodeView {
            unschedulable: true,
            tainted: true,
            state: Some(s),
            ..node(Absent)
        };
        let undrain = plan_drain(&claimed, &pods, &closed, T0 + 60.0, &settings());
        assert!(
            matches!(undrain.commands[0], Command::Undrain { uncordon, .. } if uncordon != user),
            "{unschedulable} {tainted}"
        );
    }
}

#[test]
fn updates_of_one_health_event_move_its_drain_and_close_it() {
    // Claimed by the first update (issued T0, window T0 + 1 day); updates share the event id
    // (the eventArn) and differ in their issue time.
    let pods = [pod("llama-0", 4)];
    let first = notice(NoticeKind::ScheduledChange);
    let claim = plan_drain(&node(Absent), &pods, &first, T0 + 1.0, &settings());
    let claimed_node = NodeView {
        unschedulable: true,
        tainted: true,
        state: claim.state.clone(),
        ..node(Absent)
    };
    assert_eq!(
        claim.state.as_ref().unwrap().deadline,
        Some(T0 + 86_400.0 - 30.0)
    );
    // Moved a day later by an update issued a minute later, 2 s after the last step (inside the
    // duplicate window: an update is never a duplicate).
    let mut moved = first.clone();
    moved.time = T0 + 60.0;
    moved.window_start = Some(T0 + 2.0 * 86_400.0);
    let step = plan_drain(&claimed_node, &pods, &moved, T0 + 3.0, &settings());
    let s = step.state.clone().unwrap();
    assert_eq!(
        (s.deadline, s.instance_end, s.notice_time),
        (
            Some(T0 + 2.0 * 86_400.0 - 30.0),
            Some(T0 + 2.0 * 86_400.0),
            T0 + 60.0
        )
    );
    assert!(matches!(step.last(), Command::WaitUntil { .. }));
    // The first update's continuation arriving afterwards leaves the drain to the newer one.
    let moved_node = NodeView {
        state: Some(s),
        ..claimed_node.clone()
    };
    let stale = plan_drain(&moved_node, &pods, &first, T0 + 20.0, &settings());
    assert_eq!(
        stale.commands,
        [Command::Done(Finish::Superseded {
            by_event: "ev-1".into()
        })]
    );
    // Closed by a third update: un-drained.
    let mut closed = first.clone();
    closed.time = T0 + 120.0;
    closed.status = NoticeStatus::Closed;
    closed.window_start = None;
    let end = plan_drain(&moved_node, &pods, &closed, T0 + 121.0, &settings());
    assert_eq!(end.last(), &Command::Done(Finish::Undrained));
}

#[test]
fn deleting_past_a_pdb_is_opt_in_and_only_from_the_deadline() {
    let n = notice(NoticeKind::SpotInterruption); // deadline T0+90, end T0+120
    let pods = [pod("llama-0", 4)];
    let evicting = claimed(Running, n.kind, Some(T0 + 40.0));
    let opted_in = DrainSettings {
        delete_past_pdb: true,
        ..settings()
    };
    // (settings, now, delete_if_blocked on the eviction)
    let cases = [
        (settings(), T0 + 95.0, false),       // default: PDBs always hold
        (opted_in.clone(), T0 + 60.0, false), // before the deadline: PDBs hold
        (opted_in, T0 + 95.0, true),
    ];
    for (s, now, expected) in cases {
        let step = plan_drain(&evicting, &pods, &n, now, &s);
        let flags: Vec<bool> = step
            .commands
            .iter()
            .filter_map(|c| match c {
                Command::Evict {
                    delete_if_blocked, ..
                } => Some(*delete_if_blocked),
                _ => None,
            })
            .collect();
        assert_eq!(flags, [expected], "{} {now}", s.delete_past_pdb);
    }
}

#[test]
fn a_cordon_prewarm_whose_warning_never_comes_expires_even_without_a_replacement() {
    let table = ActionTable::parse("rebalance=cordon-prewarm").unwrap();
    let s = DrainSettings {
        actions: table,
        ..settings()
    };
    let n = notice(NoticeKind::Rebalance);
    let pods = [pod("llama-0", 4)];
    // Claimed at T0+1 with no warm capacity anywhere: it waits (no eviction, no expiry yet).
    let claim = plan_drain(&node(Absent), &pods, &n, T0 + 1.0, &s);
    let waiting = NodeView {
        unschedulable: true,
        tainted: true,
        state: claim.state.clone(),
        ..node(Absent)
    };
    let at_29_min = plan_drain(&waiting, &pods, &n, T0 + 1_740.0, &s);
    assert!(matches!(at_29_min.last(), Command::WaitUntil { .. }));
    assert!(evicted(&at_29_min).is_empty());
    // 30 minutes after the claim (T0+1; the later of it and the notice): un-drained (prewarm's
    // cordon lifted), lease released, the notice remembered as closed so a queued copy of it
    // does not drain the node again.
    let at_30_min = plan_drain(&waiting, &pods, &n, T0 + 1_801.0, &s);
    assert_eq!(
        at_30_min.commands,
        [
            // A rebalance's drain ending with its node there: remembered as a false alarm.
            Command::Undrain {
                uncordon: true,
                closed_by: Some(("ev-1".into(), T0)),
                false_alarm_at: Some(T0 + 1_801.0),
            },
            Command::ReleaseReplacement,
            Command::Done(Finish::Undrained)
        ]
    );
}

/// A step at notice+85 s plans its check at the 90 s deadline (15 s recheck would be 100 s): that
/// check comes 5 s after the step, under half a recheck, and must not be taken for a duplicate,
/// or nothing evicts before the instance goes.
#[test]
fn the_drains_own_check_soon_after_its_last_step_is_not_a_duplicate() {
    let n = notice(NoticeKind::SpotInterruption);
    let pods = [pod("llama-0", 4)];
    let at_85 = plan_drain(
        &claimed(Pending, n.kind, None),
        &pods,
        &n,
        T0 + 85.0,
        &settings(),
    );
    assert_eq!(at_85.last(), &Command::WaitUntil { at: T0 + 90.0 });
    let after = NodeView {
        state: at_85.state.clone(),
        ..claimed(Pending, n.kind, None)
    };
    assert_eq!(after.state.as_ref().unwrap().next_check_at, Some(T0 + 90.0));
    // (now, duplicate?, evicted) — planned check T0+90, 1 s leeway: before T0+89 a duplicate.
    let cases: [(f64, bool, &[&str]); 4] = [
        (85.5, true, &[]),           // another delivery moments after the step
        (88.9, true, &[]),           // still before the planned check
        (89.0, false, &[]),          // the planned check, a little early: waits again
        (90.0, false, &["llama-0"]), // the planned check at the deadline: evicts
    ];
    for (after_notice, duplicate, evicts) in cases {
        let step = plan_drain(&after, &pods, &n, T0 + after_notice, &settings());
        assert_eq!(
            step.last() == &Command::Done(Finish::Duplicate),
            duplicate,
            "T0+{after_notice}: {:?}",
            step.commands
        );
        assert_eq!(evicted(&step), evicts, "T0+{after_notice}");
    }
}

/// Messages the handler scheduled itself come before the check the node records: the retry of
/// a step that failed after recording its next check (an eviction that timed out, a throttled
/// placeholder create), the continuation after a failed release. Each is the only message left
/// carrying the drain, so it steps; a delivery AWS (or SQS's redelivery) made at that moment is
/// the duplicate it always was.
#[test]
fn a_message_the_handler_scheduled_is_never_a_duplicate() {
    let n = notice(NoticeKind::SpotInterruption);
    let pods = [pod("llama-0", 4)];
    // Claimed at T0+1, asked for its replacement then; the step at T0+20 recorded its next
    // check at T0+35 (20 + the 15 s recheck; the deadline T0+90 is later).
    let at_20 = plan_drain(
        &claimed(Pending, n.kind, None),
        &pods,
        &n,
        T0 + 20.0,
        &settings(),
    );
    assert_eq!(at_20.last(), &Command::WaitUntil { at: T0 + 35.0 });
    let after = NodeView {
        state: at_20.state.clone(),
        ..claimed(Pending, n.kind, None)
    };
    let scheduled = Notice {
        scheduled: true,
        ..n.clone()
    };
    // (what, notice, now, duplicate?) — before T0+34 (35 less the 1 s leeway) only AWS's
    // deliveries are duplicates.
    let cases: [(&str, &Notice, f64, bool); 4] = [
        ("AWS's delivery again, 1 s after the step", &n, 21.0, true),
        (
            "the retry of the step, 1 s after it",
            &scheduled,
            21.0,
            false,
        ),
        ("a continuation 10 s early", &scheduled, 25.0, false),
        ("AWS's delivery at the planned check", &n, 35.0, false),
    ];
    for (what, notice, after_notice, duplicate) in cases {
        let step = plan_drain(&after, &pods, notice, T0 + after_notice, &settings());
        assert_eq!(
            step.last() == &Command::Done(Finish::Duplicate),
            duplicate,
            "{what}: {:?}",
            step.commands
        );
        // A step that is not a duplicate records itself and plans on from now.
        if !duplicate {
            let s = step.state.as_ref().unwrap();
            assert_eq!(s.last_step_at, Some(T0 + after_notice), "{what}");
            assert_eq!(
                step.last(),
                &Command::WaitUntil {
                    at: T0 + after_notice + 15.0
                },
                "{what}"
            );
        }
    }
}

/// A pod whose grace period (300 s) outlasts the 120 s warning is due at once and starts
/// eviction at the first step; the node's other pods still need their replacement, so the
/// placeholder is asked for (and made again) until it runs, when everyone goes.
#[test]
fn a_pod_due_early_by_its_grace_does_not_stop_the_others_replacement() {
    let n = notice(NoticeKind::SpotInterruption);
    let mut slow = pod("llama-slow", 4);
    slow.grace_s = 300.0; // due at T0+120-300: before the notice
    let quick = pod("llama-quick", 4); // due at the deadline, T0+90
    let requested = |step: &prewarm::core::interruption::DrainStep| -> Option<u32> {
        step.commands.iter().find_map(|c| match c {
            Command::RequestReplacement { gpus, .. } => Some(*gpus),
            _ => None,
        })
    };
    // First step, T0+1: the slow pod goes; the placeholder is asked for the quick pod's 4 GPUs
    // only (the slow pod's successor asks for its own room).
    let first = plan_drain(
        &node(Absent),
        &[slow.clone(), quick.clone()],
        &n,
        T0 + 1.0,
        &settings(),
    );
    assert_eq!(evicted(&first), ["llama-slow"]);
    assert_eq!(requested(&first), Some(4));
    let evicting = NodeView {
        unschedulable: true,
        tainted: true,
        state: first.state.clone(),
        ..node(Absent)
    };
    // T0+16: the slow pod is terminating (until T0+1+119 at most), a real pod preempted the
    // placeholder: made again for the 4 GPUs of the pod still to move; nothing else evicted.
    let mut terminating = slow.clone();
    terminating.deletion_at = Some(T0 + 120.0);
    let pods = [terminating, quick.clone()];
    let again = plan_drain(&evicting, &pods, &n, T0 + 16.0, &settings());
    assert_eq!(requested(&again), Some(4));
    assert!(evicted(&again).is_empty());
    // Still pending at T0+31: nothing to request (it exists), nothing evicted.
    let pending = NodeView {
        replacement: Pending,
        ..evicting.clone()
    };
    let waiting = plan_drain(&pending, &pods, &n, T0 + 31.0, &settings());
    assert_eq!((requested(&waiting), evicted(&waiting)), (None, vec![]));
    // Running at T0+46: hand-over and the quick pod goes; no request.
    let running = NodeView {
        replacement: Running,
        ..evicting.clone()
    };
    let ready = plan_drain(&running, &pods, &n, T0 + 46.0, &settings());
    assert_eq!(requested(&ready), None);
    assert_eq!(evicted(&ready), ["llama-quick"]);
    assert!(ready.commands.contains(&Command::HandOver));
    // Never ran, and the deadline (T0+90) came: the quick pod goes, no more placeholder.
    let late = plan_drain(&evicting, &pods, &n, T0 + 90.0, &settings());
    assert_eq!(requested(&late), None);
    assert_eq!(evicted(&late), ["llama-quick"]);
}

/// The body's time is bounded by SQS's SentTimestamp before it is recorded: a rebalance (no
/// deadline; waits at most 30 min for its replacement) dated 1970 does not evict at once, and
/// one dated 2099 still ends its wait. The wait counts from the later of the bounded notice time
/// and the claim.
#[test]
fn the_recorded_notice_time_is_bounded_by_the_sent_timestamp() {
    const SENT: f64 = T0;
    const DAY: f64 = 86_400.0;
    const Y2099: f64 = 4_099_766_400.0; // 2099-12-01T00:00:00Z
    let pods = [pod("llama-0", 4)];
    // (event time, recorded notice time, seconds after SENT of the second step, evicts then?)
    // Claim at SENT+1, so the wait ends at max(recorded, SENT+1) + 1800 = SENT+1801.
    let cases = [
        (0.0, SENT - DAY, 1_800.9, false),
        (0.0, SENT - DAY, 1_801.0, true),
        (Y2099, SENT, 1_800.9, false),
        (Y2099, SENT, 1_801.0, true),
        (SENT - 2.0, SENT - 2.0, 1_801.0, true), // on time: as it was
    ];
    for (time, recorded, second, evicts) in cases {
        let n = Notice {
            time,
            sent_time: Some(SENT),
            ..notice(NoticeKind::Rebalance)
        };
        let first = plan_drain(&node(Absent), &pods, &n, SENT + 1.0, &settings());
        assert!(evicted(&first).is_empty(), "{time}: never at once");
        let s = first.state.clone().unwrap();
        assert_eq!(s.notice_time, recorded, "{time}");
        assert_eq!(s.event_time, Some(time), "{time}");
        // The continuation has its own, later SentTimestamp: nothing recorded moves.
        let cont = Notice {
            sent_time: Some(SENT + second),
            ..n.clone()
        };
        let claimed = NodeView {
            unschedulable: true,
            tainted: true,
            state: first.state.clone(),
            ..node(Pending)
        };
        let step = plan_drain(&claimed, &pods, &cont, SENT + second, &settings());
        assert_eq!(step.state.as_ref().unwrap().notice_time, recorded);
        let expected: &[&str] = if evicts { &["llama-0"] } else { &[] };
        assert_eq!(evicted(&step), expected, "{time} at +{second}");
    }
}

/// A notice adopting a drain whose owner went silent keeps the earlier of the two deadlines
/// (and instance ends): adopting must never make eviction later than the owner would have.
#[test]
fn adopting_a_silent_owners_drain_keeps_the_earliest_deadline() {
    let pods = [pod("llama-0", 4)];
    // The owner ev-1 last stepped at T0+1; at T0+200 it has been silent 199 s > 120 s.
    // (owner's kind, new notice's kind and time, expected deadline, expected end)
    let cases = [
        // Spot owner (deadline T0+90, end T0+120); a rebalance (none) adopts: T0+90 stays.
        (
            NoticeKind::SpotInterruption,
            NoticeKind::Rebalance,
            T0,
            Some(T0 + 90.0),
            Some(T0 + 120.0),
        ),
        // Spot owner; a spot warning issued 100 s later (T0+190, end T0+220) adopts: T0+90.
        (
            NoticeKind::SpotInterruption,
            NoticeKind::SpotInterruption,
            T0 + 100.0,
            Some(T0 + 90.0),
            Some(T0 + 120.0),
        ),
        // Rebalance owner (none); a spot warning at T0 adopts: its own T0+90.
        (
            NoticeKind::Rebalance,
            NoticeKind::SpotInterruption,
            T0,
            Some(T0 + 90.0),
            Some(T0 + 120.0),
        ),
    ];
    for (owner, kind, time, deadline, end) in cases {
        let mut node = claimed(Pending, owner, None);
        node.state.as_mut().unwrap().last_step_at = Some(T0 + 1.0);
        let n = Notice {
            event_id: "ev-2".into(),
            time,
            ..notice(kind)
        };
        let step = plan_drain(&node, &pods, &n, T0 + 200.0, &settings());
        let s = step.state.as_ref().unwrap();
        assert_eq!(s.event_id, "ev-2", "{owner:?} <- {kind:?}");
        assert_eq!(
            (s.deadline, s.instance_end),
            (deadline, end),
            "{owner:?} <- {kind:?}"
        );
        // Past the kept deadline: evicts.
        assert_eq!(evicted(&step), ["llama-0"], "{owner:?} <- {kind:?}");
    }
}

fn announced(step: &prewarm::core::interruption::DrainStep) -> Vec<String> {
    step.commands
        .iter()
        .filter_map(|c| match c {
            Command::Announce { reason, .. } => Some(reason.clone()),
            _ => None,
        })
        .collect()
}

/// A Health drain (window T0+86,400, deadline T0+86,370) whose placeholder never schedules:
/// its last milestone is the request at T0+1. It checks every 15 s for 10 minutes, then every
/// quarter of the time stalled, at most every 15 minutes, and still wakes at the deadline.
#[test]
fn a_drain_that_cannot_progress_backs_off() {
    let n = notice(NoticeKind::ScheduledChange);
    let pods = [pod("llama-0", 4)];
    // (seconds after T0, next check after T0) — stalled = now - (T0+1).
    let cases = [
        (300.0, 315.0),       // stalled 299 s < 600: 15 s
        (601.0, 751.0),       // stalled 600 s: 600 / 4 = 150 s
        (3_601.0, 4_501.0),   // stalled 3,600 s: 900 s (the cap)
        (86_000.0, 86_370.0), // 900 s would pass the deadline: the deadline
    ];
    for (at, next) in cases {
        let step = plan_drain(
            &claimed(Pending, n.kind, None),
            &pods,
            &n,
            T0 + at,
            &settings(),
        );
        assert_eq!(
            step.last(),
            &Command::WaitUntil { at: T0 + next },
            "T0+{at}"
        );
    }
    // Backed off, the owner is not taken for silent: its check at T0+4,501 was planned at
    // T0+3,601; silence counts from 4,501 - 15 = 4,486, so it is gone from 4,486 + 120 = 4,606.
    let backed_off = plan_drain(
        &claimed(Pending, n.kind, None),
        &pods,
        &n,
        T0 + 3_601.0,
        &settings(),
    );
    let node = NodeView {
        state: backed_off.state.clone(),
        ..claimed(Pending, n.kind, None)
    };
    let rebalance = Notice {
        event_id: "ev-2".into(),
        ..notice(NoticeKind::Rebalance)
    };
    for (at, owner) in [(4_605.0, "ev-1"), (4_607.0, "ev-2")] {
        let step = plan_drain(&node, &pods, &rebalance, T0 + at, &settings());
        assert_eq!(step.state.unwrap().event_id, owner, "T0+{at}");
    }
}

/// Pods a budget never lets go, on a node still there 600 s after its announced end: the drain
/// ends with an Event saying why and the node is un-drained, instead of checking for ever.
#[test]
fn a_drain_that_cannot_finish_ends_with_a_reason_after_the_survivor_grace() {
    let blocked = [pod("llama-0", 4)];
    // (kind, evicting since, seconds after T0, ends?) — 600 s after the later of the end and
    // the start of eviction. Spot: end T0+120, so T0+720 (a notice that came late and started
    // evicting at T0+700: T0+1,300); rebalance: no end, the wait ends at max(T0, claim T0+1) +
    // 1,800 = T0+1,801, so T0+2,401.
    let cases = [
        (NoticeKind::SpotInterruption, 90.0, 719.0, false),
        (NoticeKind::SpotInterruption, 90.0, 720.0, true),
        (NoticeKind::SpotInterruption, 700.0, 720.0, false),
        (NoticeKind::SpotInterruption, 700.0, 1_299.0, false),
        (NoticeKind::SpotInterruption, 700.0, 1_300.0, true),
        (NoticeKind::Rebalance, 1_801.0, 2_400.0, false),
        (NoticeKind::Rebalance, 1_801.0, 2_401.0, true),
    ];
    for (kind, since, at, ends) in cases {
        let n = notice(kind);
        let node = claimed(Pending, kind, Some(T0 + since));
        let step = plan_drain(&node, &blocked, &n, T0 + at, &settings());
        if ends {
            assert_eq!(announced(&step), ["DrainAbandoned"], "{kind:?} T0+{at}");
            assert!(step.commands.contains(&Command::Undrain {
                uncordon: true,
                closed_by: Some(("ev-1".into(), T0)),
                false_alarm_at: (kind == NoticeKind::Rebalance).then_some(T0 + at),
            }));
            assert!(step.commands.contains(&Command::ReleaseReplacement));
            assert_eq!(step.last(), &Command::Done(Finish::Undrained));
            assert_eq!(step.state, None);
        } else {
            assert_eq!(evicted(&step), ["llama-0"], "{kind:?} T0+{at}: retried");
            assert!(matches!(step.last(), Command::WaitUntil { .. }));
        }
    }
}

/// Evicting at the deadline with no warm capacity says why, once: at the first step past it.
#[test]
fn evicting_without_a_replacement_says_why_once() {
    let n = notice(NoticeKind::SpotInterruption);
    let pods = [pod("llama-0", 4)];
    // The step at T0+85 was the last before the deadline T0+90.
    let mut before = claimed(Pending, n.kind, None);
    before.state.as_mut().unwrap().last_step_at = Some(T0 + 85.0);
    let at = plan_drain(&before, &pods, &n, T0 + 90.0, &settings());
    assert_eq!(announced(&at), ["DrainWithoutReplacement"]);
    assert_eq!(evicted(&at), ["llama-0"]);
    // The next step (previous one at T0+90, already past): no second Event.
    let after = NodeView {
        state: at.state.clone(),
        ..claimed(Pending, n.kind, None)
    };
    let again = plan_drain(&after, &pods, &n, T0 + 105.0, &settings());
    assert!(announced(&again).is_empty());
    // Where no placeholder can be made, the Event says so.
    let mut no_target = claimed(NoTarget, n.kind, None);
    no_target.state.as_mut().unwrap().last_step_at = Some(T0 + 85.0);
    let step = plan_drain(&no_target, &pods, &n, T0 + 90.0, &settings());
    let note = step
        .commands
        .iter()
        .find_map(|c| match c {
            Command::Announce { note, .. } => Some(note.clone()),
            _ => None,
        })
        .unwrap();
    assert!(note.contains("no prewarm target manages"), "{note}");
    // A replacement that ran: no such Event.
    let ran = NodeView {
        replacement: Running,
        ..before.clone()
    };
    assert!(announced(&plan_drain(&ran, &pods, &n, T0 + 90.0, &settings())).is_empty());
}
