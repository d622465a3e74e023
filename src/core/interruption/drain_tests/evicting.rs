//! Rows of an evicting drain: it evicts on, is drained, or gives up.

use super::*;

/// evicting → evicting: tier by tier, terminating pods waited for, refused pods asked again at
/// every check, deleted past a budget only when opted in and from the deadline, grace cut to
/// what is left, the placeholder kept asked for while only pods due by their grace go.
#[test]
fn evicting_to_evicting() {
    let spot = notice(SpotInterruption);
    let [ds, mirror, critical, _] = node_pods();
    // Evicting since +0 with its placeholder running (its check planned at +15).
    let pods = [critical.clone(), pod("llama-0", 4)];
    let tiers = after(&node(Running), &pods, &spot, 0.0, Running);
    // A pod due before the notice went at +1 (300 s grace, terminating until +120); the quick
    // pod still waits for the placeholder asked for then.
    let slow = with_grace(pod("llama-slow", 4), 300.0);
    let due_early = |seen| {
        let pods = [slow.clone(), pod("llama-quick", 4)];
        after(&node(Absent), &pods, &spot, 1.0, seen)
    };
    let due_early_pods = vec![terminating(slow.clone(), 120.0), pod("llama-quick", 4)];
    let evicting = |since| claimed(Running, SpotInterruption, Some(since));
    let refused = |at, commands| Row {
        what: "a pod a budget refused is asked again, past the deadline too",
        node: evicting(40.0),
        at,
        commands,
        ..Row::default()
    };
    let opted_in = DrainSettings {
        delete_past_pdb: true,
        ..DrainSettings::default()
    };
    check(vec![
        Row {
            what: "tier 1 terminating: waited for, tier 2 not yet",
            node: tiers.clone(),
            pods: vec![
                ds.clone(),
                critical.clone(),
                terminating(pod("llama-0", 4), 4.0),
            ],
            at: 15.0,
            commands: "record evicting; hand-over; wait +30",
            ..Row::default()
        },
        Row {
            what: "tier 1 gone: the critical pod",
            node: tiers,
            pods: vec![ds, mirror, critical],
            at: 16.0,
            commands: "record evicting; hand-over; evict gpu-operator tier 2; wait +31",
            ..Row::default()
        },
        Row {
            what: "only the do-not-disrupt pod before the deadline: wake at the deadline",
            node: evicting(20.0),
            pods: vec![do_not_disrupt("training-0")],
            at: 80.0,
            commands: "record evicting; hand-over; wait +90",
            ..Row::default()
        },
        Row {
            what: "at the deadline the do-not-disrupt pod goes",
            node: evicting(20.0),
            pods: vec![do_not_disrupt("training-0")],
            at: 90.0,
            commands: "record evicting; hand-over; evict training-0; wait +105",
            ..Row::default()
        },
        refused(40.0, "record evicting; hand-over; evict llama-0; wait +55"),
        refused(55.0, "record evicting; hand-over; evict llama-0; wait +70"),
        refused(90.0, "record evicting; hand-over; evict llama-0; wait +105"),
        refused(
            200.0,
            "record evicting; hand-over; evict llama-0; wait +215",
        ),
        Row {
            what: "a pod terminating since +50, not a minute yet: waited for, not evicted again",
            node: evicting(40.0),
            pods: vec![terminating(pod("llama-0", 4), 50.0)],
            at: 100.0,
            commands: "record evicting; hand-over; wait +115",
            ..Row::default()
        },
        Row {
            what: "handed over, the pods terminating: no new placeholder",
            node: claimed(Absent, SpotInterruption, Some(20.0)),
            pods: vec![
                terminating(pod("llama-0", 4), 21.0),
                terminating(pod("llama-1", 4), 21.0),
            ],
            at: 22.0,
            commands: "record evicting; wait +37",
            ..Row::default()
        },
        Row {
            what: "the step after the deadline's: said once already",
            node: claimed_with(Pending, SpotInterruption, Some(90.0), |s| {
                s.last_step_at = Some(T0 + 90.0)
            }),
            at: 105.0,
            commands: "record evicting; hand-over; evict llama-0; wait +120",
            ..Row::default()
        },
        Row {
            what: "a 100 s grace pod refused until +95: its grace cut to the 25 s left",
            node: claimed(Pending, SpotInterruption, Some(20.0)),
            pods: vec![PodView {
                uid: Some("uid-slow".into()),
                ..with_grace(pod("llama-slow", 4), 100.0)
            }],
            at: 95.0,
            commands: "record evicting; DrainWithoutReplacement; hand-over; \
                       evict llama-slow uid uid-slow grace 25; wait +110",
            ..Row::default()
        },
        Row {
            what: "deleting past a budget is off by default",
            node: evicting(40.0),
            at: 95.0,
            commands: "record evicting; hand-over; evict llama-0; wait +110",
            ..Row::default()
        },
        Row {
            what: "opted in, before the deadline: budgets hold",
            node: evicting(40.0),
            settings: opted_in.clone(),
            at: 60.0,
            commands: "record evicting; hand-over; evict llama-0; wait +75",
            ..Row::default()
        },
        Row {
            what: "opted in, from the deadline: deleted if refused",
            node: evicting(40.0),
            settings: opted_in,
            at: 95.0,
            commands: "record evicting; hand-over; evict llama-0 or delete; wait +110",
            ..Row::default()
        },
        Row {
            what: "due early, a real pod preempted the placeholder: made again for the rest",
            node: due_early(Absent),
            pods: due_early_pods.clone(),
            at: 16.0,
            commands: "record evicting; request 4 for llama-quick; wait +31",
            ..Row::default()
        },
        Row {
            what: "due early, the placeholder pending: nothing to do",
            node: due_early(Pending),
            pods: due_early_pods.clone(),
            at: 31.0,
            commands: "record evicting; wait +46",
            ..Row::default()
        },
        Row {
            what: "due early, the placeholder runs: hand-over, the other pod goes",
            node: due_early(Running),
            pods: due_early_pods.clone(),
            at: 46.0,
            commands: "record evicting; hand-over; evict llama-quick; wait +61",
            ..Row::default()
        },
        Row {
            what: "due early, the placeholder never ran: the other pod goes at the deadline",
            node: due_early(Absent),
            pods: due_early_pods,
            at: 90.0,
            commands: "record evicting; DrainWithoutReplacement; evict llama-quick; wait +105",
            ..Row::default()
        },
    ]);
}

/// evicting → drained: nothing evictable left (do-not-disrupt pods count only with a deadline).
#[test]
fn evicting_to_drained() {
    let [ds, mirror, _, done] = node_pods();
    check(vec![
        Row {
            what: "only DaemonSet, mirror and finished pods left",
            node: claimed(Running, SpotInterruption, Some(0.0)),
            pods: vec![ds, mirror, done],
            at: 24.0,
            commands: "record drained; release; Drained",
            record: "finished +24, next check -",
            ..Row::default()
        },
        Row {
            what: "a rebalance (no deadline): the do-not-disrupt pod stays",
            node: claimed(Running, Rebalance, Some(20.0)),
            pods: vec![do_not_disrupt("training-0")],
            notice: notice(Rebalance),
            at: 30.0,
            commands: "record drained; release; Drained",
            ..Row::default()
        },
        Row {
            what: "a pod terminating since +50, over a minute: stuck, it holds nothing",
            node: claimed(Running, SpotInterruption, Some(40.0)),
            pods: vec![terminating(pod("llama-0", 4), 50.0)],
            at: 111.0,
            commands: "record drained; release; Drained",
            ..Row::default()
        },
    ]);
}

/// evicting → un-drained: pods still there 600 s after the later of the end and the start of
/// eviction (spot: end +120; a rebalance: the end of its wait, +1801) end the drain, saying why.
#[test]
fn evicting_to_undrained() {
    let row = |kind, since, at, commands| Row {
        what: "a pod a budget never lets go",
        node: claimed(Pending, kind, Some(since)),
        notice: notice(kind),
        at,
        commands,
        ..Row::default()
    };
    let ends = "DrainAbandoned; undrain uncordon closed by ev-1 at +0; release; Undrained";
    check(vec![
        row(
            SpotInterruption,
            90.0,
            719.0,
            "record evicting; DrainWithoutReplacement; hand-over; evict llama-0; wait +720",
        ),
        Row {
            record: "none",
            ..row(SpotInterruption, 90.0, 720.0, ends)
        },
        // A notice that came late and started evicting at +700: until +1300.
        row(
            SpotInterruption,
            700.0,
            720.0,
            "record evicting; DrainWithoutReplacement; hand-over; evict llama-0; wait +735",
        ),
        row(
            SpotInterruption,
            700.0,
            1_299.0,
            "record evicting; DrainWithoutReplacement; hand-over; evict llama-0; wait +1300",
        ),
        row(SpotInterruption, 700.0, 1_300.0, ends),
        Row {
            what: "a record whose phase says waiting but that started evicting at +90 (written \
                   by hand, or by an older prewarm): its times rule",
            node: claimed_with(Pending, SpotInterruption, Some(90.0), |s| {
                s.phase = Phase::WaitingForReplacement
            }),
            at: 720.0,
            commands: ends,
            ..Row::default()
        },
        row(
            Rebalance,
            1_801.0,
            2_400.0,
            "record evicting; DrainWithoutReplacement; hand-over; evict llama-0; wait +2401",
        ),
        row(
            Rebalance,
            1_801.0,
            2_401.0,
            "DrainAbandoned; undrain uncordon closed by ev-1 at +0 false alarm at +2401; \
             release; Undrained",
        ),
    ]);
}

/// Where no placeholder can be made, the Event says so (the rows show only its reason).
#[test]
fn the_event_of_a_drain_without_replacement_says_why() {
    let node = claimed_with(NoTarget, SpotInterruption, None, |s| {
        s.last_step_at = Some(T0 + 85.0)
    });
    let n = notice(SpotInterruption);
    let step = plan_drain(
        &node,
        &[pod("llama-0", 4)],
        &n,
        T0 + 90.0,
        &DrainSettings::default(),
    );
    let note = step.commands.iter().find_map(|c| match c {
        Command::Announce { note, .. } => Some(note.clone()),
        _ => None,
    });
    assert!(
        note.as_ref()
            .is_some_and(|n| n.contains("no prewarm target manages")),
        "{note:?}"
    );
}
