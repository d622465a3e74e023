//! Rows of a waiting drain: it waits on, starts evicting, or (cordon-prewarm) is prewarmed or
//! expires.

use super::*;

/// Which drains wait for a placeholder (first steps on a node without GPUs): CPU/memory-only
/// pods where one can be made (their requests may fit no other node), at once where none can;
/// GPU pods wait either way; pods without requests go at once.
#[test]
fn cpu_pods_wait_for_a_placeholder_only_where_one_can_be_made() {
    let first = |what, seen, pods, commands| Row {
        what,
        node: NodeView {
            gpus: 0,
            ..node(seen)
        },
        pods,
        commands,
        ..Row::default()
    };
    check(vec![
        first(
            "cpu pods, a target's pool, none yet: ask and wait",
            Absent,
            vec![cpu_pod("api-0")],
            "record waiting-for-replacement; cordon; taint; request 0 for api-0; wait +15",
        ),
        first(
            "cpu pods, the placeholder pending: wait",
            Pending,
            vec![cpu_pod("api-0")],
            "record waiting-for-replacement; cordon; taint; wait +15",
        ),
        first(
            "cpu pods, the placeholder running: hand it over and evict",
            Running,
            vec![cpu_pod("api-0")],
            "record evicting; cordon; taint; hand-over; evict api-0; wait +15",
        ),
        first(
            "cpu pods, no target for the pool: evict at once",
            NoTarget,
            vec![cpu_pod("api-0")],
            "record evicting; cordon; taint; evict api-0; wait +15",
        ),
        first(
            "a gpu pod, no target for the pool: ask (logged as no target) and wait",
            NoTarget,
            vec![pod("llama-0", 4), cpu_pod("api-0")],
            "record waiting-for-replacement; cordon; taint; request 4 for llama-0,api-0; wait +15",
        ),
        first(
            "pods without requests: no placeholder, evicted at once",
            Absent,
            vec![pod("web-0", 0)],
            "record evicting; cordon; taint; evict web-0; wait +15",
        ),
    ]);
}

/// waiting → waiting: not ready before the deadline; the placeholder made again when missing;
/// the check after `recheck_s`, backed off when stalled, never past a deadline or due time.
#[test]
fn waiting_to_waiting() {
    // A Health drain whose placeholder never schedules: stalled since its request at +1.
    let health = |at, commands| Row {
        what: "a Health drain backing off",
        node: claimed(Pending, ScheduledChange, None),
        notice: notice(ScheduledChange),
        at,
        commands,
        ..Row::default()
    };
    check(vec![
        Row {
            what: "the placeholder pending: partial warm capacity is not ready",
            pods: vec![pod("llama-0", 4), pod("llama-1", 4)],
            at: 40.0,
            commands: "record waiting-for-replacement; wait +55",
            record: "ready -",
            ..Row::default()
        },
        Row {
            what: "the check after +20 is +35, the deadline later",
            at: 20.0,
            commands: "record waiting-for-replacement; wait +35",
            record: "next check +35",
            ..Row::default()
        },
        Row {
            what: "the check after +85 would be +100: it lands on the deadline +90, 5 s later",
            at: 85.0,
            commands: "record waiting-for-replacement; wait +90",
            record: "next check +90",
            ..Row::default()
        },
        Row {
            what: "the check after +80 would be +95: it lands on the deadline +90",
            at: 80.0,
            commands: "record waiting-for-replacement; wait +90",
            ..Row::default()
        },
        Row {
            what: "a pod due at +120 - 100 = +20 by its grace: the check lands on it",
            pods: vec![
                with_grace(pod("llama-slow", 4), 100.0),
                pod("llama-quick", 4),
            ],
            at: 10.0,
            commands: "record waiting-for-replacement; wait +20",
            ..Row::default()
        },
        Row {
            what: "preempted by a real pod: asked for again, the first request time kept",
            node: claimed(Absent, SpotInterruption, None),
            at: 30.0,
            commands: "record waiting-for-replacement; request 4 for llama-0; wait +45",
            record: "requested +1",
            ..Row::default()
        },
        // Three nodes reclaimed at once, room for one placeholder: b and c wait on their own
        // pending ones (a evicts: `waiting_to_evicting`).
        Row {
            what: "node b, its placeholder pending",
            node: NodeView {
                name: "b".into(),
                ..claimed(Pending, SpotInterruption, None)
            },
            at: 40.0,
            commands: "record waiting-for-replacement; wait +55",
            record: "ready -",
            ..Row::default()
        },
        Row {
            what: "node c, its placeholder pending",
            node: NodeView {
                name: "c".into(),
                ..claimed(Pending, SpotInterruption, None)
            },
            at: 40.0,
            commands: "record waiting-for-replacement; wait +55",
            record: "ready -",
            ..Row::default()
        },
        // Stalled 299 s < 600: 15 s; 600 s: 600 / 4 = 150 s; 3,600 s: 900 s, the cap; then 900 s
        // would pass the deadline +86,370.
        health(300.0, "record waiting-for-replacement; wait +315"),
        health(601.0, "record waiting-for-replacement; wait +751"),
        health(3_601.0, "record waiting-for-replacement; wait +4501"),
        health(86_000.0, "record waiting-for-replacement; wait +86370"),
    ]);
}

/// waiting → evicting: the placeholder runs (hand-over, then everyone), the deadline or the end
/// of a deadline-less wait (everyone, saying why when nothing ran), a pod due by its grace
/// period (that pod only), or evict-now.
#[test]
fn waiting_to_evicting() {
    let two = vec![pod("llama-0", 4), pod("llama-1", 4)];
    let last_step_85 = |seen| {
        claimed_with(seen, SpotInterruption, None, |s| {
            s.last_step_at = Some(T0 + 85.0)
        })
    };
    // A first step at a kind's deadline: evicts at once, saying why.
    let first = |what, kind, at, commands| Row {
        what,
        node: node(Absent),
        notice: notice(kind),
        at,
        commands,
        ..Row::default()
    };
    // Rebalances (`claim_of_a_node`) claimed at +1, so their wait ends at max(recorded notice
    // time, claim) + 1,800 = +1801 whatever the body says, continued by a message with its own
    // SentTimestamp: nothing recorded moves.
    let rebalance = |what, time: f64, at: f64, record, commands| {
        let sent = |s: f64| Notice {
            time,
            sent_time: Some(T0 + s),
            ..notice(Rebalance)
        };
        Row {
            what,
            node: after(
                &node(Absent),
                &[pod("llama-0", 4)],
                &sent(0.0),
                1.0,
                Pending,
            ),
            notice: sent(at),
            at,
            commands,
            record,
            ..Row::default()
        }
    };
    let (not_yet, waited) = (
        "record waiting-for-replacement; wait +1801",
        "record evicting; DrainWithoutReplacement; hand-over; evict llama-0; wait +1816",
    );
    let y2099 = 4_099_766_400.0;
    let [ds, mirror, critical, done] = node_pods();
    check(vec![
        Row {
            what: "the placeholder runs at +40: hand-over, then both pods",
            node: claimed(Running, SpotInterruption, None),
            pods: two.clone(),
            at: 40.0,
            commands: "record evicting; hand-over; evict llama-0; evict llama-1; wait +55",
            record: "ready +40, evicting +40",
            ..Row::default()
        },
        Row {
            what: "the placeholder runs at +20: hand-over right before the evictions",
            node: claimed(Running, SpotInterruption, None),
            pods: two.clone(),
            at: 20.0,
            commands: "record evicting; hand-over; evict llama-0; evict llama-1; wait +35",
            ..Row::default()
        },
        Row {
            what: "node a of three reclaimed at once: its placeholder runs",
            node: NodeView {
                name: "a".into(),
                ..claimed(Running, SpotInterruption, None)
            },
            at: 40.0,
            commands: "record evicting; hand-over; evict llama-0; wait +55",
            record: "ready +40",
            ..Row::default()
        },
        Row {
            what: "running at the first step: tier 1 only; DaemonSet, mirror, finished pods stay",
            node: node(Running),
            pods: vec![ds, mirror, critical, done, pod("llama-0", 4)],
            commands: "record evicting; cordon; taint; hand-over; evict llama-0; wait +15",
            ..Row::default()
        },
        Row {
            what: "warm capacity for all: the do-not-disrupt pod stays until the deadline",
            node: claimed(Running, SpotInterruption, None),
            pods: vec![do_not_disrupt("training-0"), pod("llama-0", 4)],
            at: 20.0,
            commands: "record evicting; hand-over; evict llama-0; wait +35",
            ..Row::default()
        },
        Row {
            what: "pending at the deadline: the placeholder goes too, said once",
            pods: two,
            at: 90.0,
            commands: "record evicting; DrainWithoutReplacement; hand-over; evict llama-0; \
                       evict llama-1; wait +105",
            record: "ready -, evicting +90",
            ..Row::default()
        },
        Row {
            what: "the deadline after a step at +85: said at the first step past it",
            node: last_step_85(Pending),
            at: 90.0,
            commands: "record evicting; DrainWithoutReplacement; hand-over; evict llama-0; \
                       wait +105",
            ..Row::default()
        },
        Row {
            what: "the deadline where no placeholder can be made: nothing to hand over",
            node: last_step_85(NoTarget),
            at: 90.0,
            commands: "record evicting; DrainWithoutReplacement; evict llama-0; wait +105",
            ..Row::default()
        },
        Row {
            what: "the deadline with the placeholder running: nothing to say",
            node: last_step_85(Running),
            at: 90.0,
            commands: "record evicting; hand-over; evict llama-0; wait +105",
            ..Row::default()
        },
        first(
            "a spot warning at its deadline",
            SpotInterruption,
            90.0,
            "record evicting; cordon; taint; DrainWithoutReplacement; evict llama-0; wait +105",
        ),
        first(
            "a capacity reservation at its deadline",
            CapacityReservation,
            90.0,
            "record evicting; cordon; taint; DrainWithoutReplacement; evict llama-0; wait +105",
        ),
        first(
            "a capacity block at its deadline +570",
            CapacityBlock,
            570.0,
            "record evicting; cordon; taint; DrainWithoutReplacement; evict llama-0; wait +585",
        ),
        first(
            "a scheduled change at its deadline, the window less 30 s",
            ScheduledChange,
            86_370.0,
            "record evicting; cordon; taint; DrainWithoutReplacement; evict llama-0; wait +86385",
        ),
        first(
            "a state change: evict-now, its deadline the notice",
            StateChange,
            0.0,
            "record evicting; cordon; taint; DrainWithoutReplacement; evict llama-0; wait +15",
        ),
        Row {
            what: "a capacity reservation ending at +100: its deadline +70",
            node: node(Absent),
            pods: vec![pod("p", 1)],
            notice: Notice {
                termination_time: Some(T0 + 100.0),
                ..notice(CapacityReservation)
            },
            at: 70.0,
            commands: "record evicting; cordon; taint; DrainWithoutReplacement; evict p; wait +85",
            ..Row::default()
        },
        Row {
            what: "evict-now: at once, no placeholder",
            node: node(Absent),
            settings: acting("spot-interruption=evict-now"),
            at: 1.0,
            commands: "record evicting; cordon; taint; evict llama-0; wait +16",
            ..Row::default()
        },
        Row {
            what: "a pod due at +20 by its 100 s grace: it goes alone, with its own grace and UID",
            pods: vec![
                PodView {
                    uid: Some("uid-slow".into()),
                    ..with_grace(pod("llama-slow", 4), 100.0)
                },
                pod("llama-quick", 4),
            ],
            at: 20.0,
            commands: "record evicting; evict llama-slow uid uid-slow; wait +35",
            ..Row::default()
        },
        Row {
            what: "a pod due before the notice (300 s grace) goes with the 119 s left; the \
                   placeholder is asked for the other pod only",
            node: node(Absent),
            pods: vec![
                with_grace(pod("llama-slow", 4), 300.0),
                pod("llama-quick", 4),
            ],
            at: 1.0,
            commands: "record evicting; cordon; taint; request 4 for llama-quick; \
                       evict llama-slow grace 119; wait +16",
            ..Row::default()
        },
        rebalance(
            "dated 1970, at +1800.9",
            0.0,
            1_800.9,
            "notice -86400",
            not_yet,
        ),
        rebalance(
            "dated 1970, at +1801",
            0.0,
            1_801.0,
            "notice -86400",
            waited,
        ),
        rebalance(
            "dated 2099, at +1800.9",
            y2099,
            1_800.9,
            "notice +0",
            not_yet,
        ),
        rebalance("dated 2099, at +1801", y2099, 1_801.0, "notice +0", waited),
        rebalance("on time, at +1801", T0 - 2.0, 1_801.0, "notice -2", waited),
    ]);
}

/// waiting → prewarmed, waiting → un-drained: cordon-prewarm prepares the node and keeps its
/// pods serving; without a notice with a deadline within 30 min, the cordon expires.
#[test]
fn cordon_prewarm() {
    let (s, n, llama) = (
        acting("rebalance=cordon-prewarm"),
        notice(Rebalance),
        [pod("llama-0", 4)],
    );
    // Claimed at +1 with no warm capacity anywhere.
    let claim = plan_drain(&node(Absent), &llama, &n, T0 + 1.0, &s);
    let waiting = NodeView {
        unschedulable: true,
        tainted: true,
        state: claim.state,
        ..node(Absent)
    };
    let row = |what, node, at, commands, record| Row {
        what,
        node,
        notice: n.clone(),
        settings: s.clone(),
        at,
        commands,
        record,
        ..Row::default()
    };
    check(vec![
        row(
            "not ready: cordon, ask, wait",
            node(Absent),
            0.0,
            "record waiting-for-replacement; cordon; taint; request 4 for llama-0; wait +15",
            "",
        ),
        row(
            "ready: done, pods left serving, the placeholder kept",
            claimed(Running, Rebalance, None),
            30.0,
            "record prewarmed; Prewarmed",
            "ready +30, finished +30, next check -",
        ),
        // A copy of the notice at +40 (at-least-once delivery), the placeholder still running:
        // nothing new to do, so a duplicate; prewarmed still at +30.
        row(
            "AWS's delivery after it is prewarmed: a duplicate",
            claimed_with(Running, Rebalance, None, |s| {
                s.phase = Phase::Prewarmed;
                s.replacement_ready_at = Some(T0 + 30.0);
                s.finished_at = Some(T0 + 30.0);
            }),
            40.0,
            "Duplicate",
            "finished +30",
        ),
        row(
            "29 min after the claim: waits (its check lands on the end of the wait)",
            waiting.clone(),
            1_740.0,
            "record waiting-for-replacement; request 4 for llama-0; wait +1801",
            "",
        ),
        row(
            "30 min after the claim: un-drained, remembered as closed and as a false alarm",
            waiting,
            1_801.0,
            "undrain uncordon closed by ev-1 at +0 false alarm at +1801; release; Undrained",
            "none",
        ),
    ]);
}
