//! Rows of the claim: a first step, deliveries of the owner's notice, another notice, a closed one.

use super::*;

/// — → waiting: the first step claims the node and asks for the placeholder, or ends at once.
#[test]
fn claim_of_a_node() {
    let first = |what, notice, at, commands| Row {
        what,
        node: node(Absent),
        notice,
        at,
        commands,
        ..Row::default()
    };
    // Rebalances sent at T0: the body's time is bounded by SQS's SentTimestamp before it is
    // recorded, the claimed time kept as it is.
    let sent = |time: f64| Notice {
        time,
        sent_time: Some(T0),
        ..notice(Rebalance)
    };
    let y2099 = 4_099_766_400.0; // 2099-12-01T00:00:00Z
    let waits = "record waiting-for-replacement; cordon; taint; request 4 for llama-0; wait +16";
    check(vec![
        Row {
            what: "a spot warning at +1: both pods' 8 GPUs asked for, checked again after 15 s",
            node: node(Absent),
            pods: vec![pod("llama-0", 4), pod("llama-1", 4)],
            at: 1.0,
            commands: "record waiting-for-replacement; cordon; taint; \
                       request 8 for llama-0,llama-1; wait +16",
            record: "deadline +90, started +1, requested +1, last step +1, next check +16",
            ..Row::default()
        },
        // Deadlines per kind, no warm capacity: the check before the deadline lands on it.
        first(
            "spot, 1 s before its deadline +90",
            notice(SpotInterruption),
            89.0,
            "record waiting-for-replacement; cordon; taint; request 4 for llama-0; wait +90",
        ),
        first(
            "capacity reservation without an end date: as spot",
            notice(CapacityReservation),
            89.0,
            "record waiting-for-replacement; cordon; taint; request 4 for llama-0; wait +90",
        ),
        first(
            "capacity block without an end date: ends at +600, deadline +570",
            notice(CapacityBlock),
            569.0,
            "record waiting-for-replacement; cordon; taint; request 4 for llama-0; wait +570",
        ),
        Row {
            record: "deadline +86370, end +86400",
            ..first(
                "scheduled change, window a day later",
                notice(ScheduledChange),
                3_600.0,
                "record waiting-for-replacement; cordon; taint; request 4 for llama-0; wait +3615",
            )
        },
        // First seen 30 min after its notice (a late delivery): its wait counts from the claim.
        first(
            "rebalance at +1799",
            notice(Rebalance),
            1_799.0,
            "record waiting-for-replacement; cordon; taint; request 4 for llama-0; wait +1814",
        ),
        first(
            "rebalance at +1801",
            notice(Rebalance),
            1_801.0,
            "record waiting-for-replacement; cordon; taint; request 4 for llama-0; wait +1816",
        ),
        Row {
            record: "notice -86400, event time -1795953600",
            ..first(
                "a rebalance dated 1970: a day before it was sent",
                sent(0.0),
                1.0,
                waits,
            )
        },
        Row {
            record: "notice +0, event time +2303812800",
            ..first(
                "a rebalance dated 2099: when it was sent",
                sent(y2099),
                1.0,
                waits,
            )
        },
        Row {
            record: "notice -2, event time -2",
            ..first("a rebalance on time: as it was", sent(T0 - 2.0), 1.0, waits)
        },
        // A cordon without prewarm's taint is someone else's: remembered, and not made again.
        Row {
            record: "user cordoned false",
            ..first(
                "schedulable: prewarm cordons (and uncordons)",
                notice(ScheduledChange),
                1.0,
                waits,
            )
        },
        Row {
            what: "an operator's cordon: kept",
            notice: notice(ScheduledChange),
            node: NodeView {
                unschedulable: true,
                ..node(Absent)
            },
            at: 1.0,
            commands: "record waiting-for-replacement; taint; request 4 for llama-0; wait +16",
            record: "user cordoned true",
            ..Row::default()
        },
        Row {
            what: "prewarm's own cordon and taint (its record lost): prewarm's to lift",
            notice: notice(ScheduledChange),
            node: NodeView {
                unschedulable: true,
                tainted: true,
                ..node(Absent)
            },
            at: 1.0,
            commands: "record waiting-for-replacement; request 4 for llama-0; wait +16",
            record: "user cordoned false",
            ..Row::default()
        },
        Row {
            what: "ACTIONS ignores the kind",
            node: node(Absent),
            settings: acting("spot-interruption=ignore"),
            commands: "Ignored",
            record: "none",
            ..Row::default()
        },
    ]);
}

/// Deliveries of the owner's own notice: duplicates end, the planned check and the handler's own
/// messages carry on, updates of a Health event move the drain.
#[test]
fn deliveries_of_the_owners_notice() {
    let (llama, spot) = ([pod("llama-0", 4)], notice(SpotInterruption));
    let scheduled = Notice {
        scheduled: true,
        ..spot.clone()
    };
    let stepped = |at| {
        after(
            &claimed(Pending, SpotInterruption, None),
            &llama,
            &spot,
            at,
            Pending,
        )
    };
    let (at_1, at_20, at_85) = (
        after(&node(Absent), &llama, &spot, 1.0, Pending),
        stepped(20.0),
        stepped(85.0),
    );
    // A Health notice claimed at +1 (window +86,400), then moved a day later by an update
    // issued at +60, stepped at +3.
    let health = notice(ScheduledChange);
    let moved = Notice {
        time: T0 + 60.0,
        window_start: Some(T0 + 2.0 * 86_400.0),
        ..health.clone()
    };
    let health_at_1 = after(&node(Absent), &llama, &health, 1.0, Absent);
    let moved_at_3 = after(&health_at_1, &llama, &moved, 3.0, Absent);
    let drained = claimed_with(Running, SpotInterruption, Some(40.0), |s| {
        s.phase = Phase::Drained;
        s.finished_at = Some(T0 + 50.0);
    });
    // The same drain with its placeholder released (as its end left it), and as a re-delivery
    // at +60 left it when a straggler (a pod that tolerates the taint) had landed on the node.
    let released = NodeView {
        replacement: Absent,
        ..drained.clone()
    };
    let straggler_at_60 = after(&released, &llama, &spot, 60.0, Absent);
    check(vec![
        // Before the planned check less 1 s of leeway, AWS's deliveries are duplicates.
        Row {
            what: "AWS's copy 1 s after the claim (its check planned at +16)",
            node: at_1.clone(),
            at: 2.0,
            commands: "Duplicate",
            ..Row::default()
        },
        Row {
            what: "AWS's copy at +14.9, before +16 less 1 s",
            node: at_1.clone(),
            at: 14.9,
            commands: "Duplicate",
            ..Row::default()
        },
        Row {
            what: "the planned check at +16 carries on where the claim stopped",
            node: at_1,
            at: 16.0,
            commands: "record waiting-for-replacement; wait +31",
            record: "owner ev-1, started +1, last step +16",
            ..Row::default()
        },
        // A check planned 5 s after its step (at the deadline) is not taken for a duplicate.
        Row {
            what: "another delivery moments after the step at +85 (its check planned at +90)",
            node: at_85.clone(),
            at: 85.5,
            commands: "Duplicate",
            ..Row::default()
        },
        Row {
            what: "still before the planned check +90",
            node: at_85.clone(),
            at: 88.9,
            commands: "Duplicate",
            ..Row::default()
        },
        Row {
            what: "the planned check a little early: waits again",
            node: at_85.clone(),
            at: 89.0,
            commands: "record waiting-for-replacement; wait +90",
            ..Row::default()
        },
        Row {
            what: "the planned check at the deadline: evicts, saying why (last step before it)",
            node: at_85,
            at: 90.0,
            commands: "record evicting; DrainWithoutReplacement; hand-over; evict llama-0; \
                       wait +105",
            ..Row::default()
        },
        // Messages the handler scheduled (the retry of a step that failed after recording its
        // check, a continuation after a failed release) are the ones carrying the drain.
        Row {
            what: "AWS's delivery again, 1 s after the step at +20 (its check planned at +35)",
            node: at_20.clone(),
            at: 21.0,
            commands: "Duplicate",
            ..Row::default()
        },
        Row {
            what: "the retry of the step, 1 s after it",
            node: at_20.clone(),
            notice: scheduled.clone(),
            at: 21.0,
            commands: "record waiting-for-replacement; wait +36",
            record: "last step +21",
            ..Row::default()
        },
        Row {
            what: "a continuation 10 s early",
            node: at_20.clone(),
            notice: scheduled.clone(),
            at: 25.0,
            commands: "record waiting-for-replacement; wait +40",
            record: "last step +25",
            ..Row::default()
        },
        Row {
            what: "AWS's delivery at the planned check +35",
            node: at_20,
            at: 35.0,
            commands: "record waiting-for-replacement; wait +50",
            record: "last step +35",
            ..Row::default()
        },
        Row {
            what: "a scheduled message after the drain is drained (a second chain): ends",
            node: drained.clone(),
            notice: scheduled,
            at: 60.0,
            commands: "Duplicate",
            ..Row::default()
        },
        // SQS and EventBridge deliver at least once: a copy of the notice can come after the
        // drain ended (+50). Nothing is left to evict and the node is still cordoned and
        // tainted, so nothing is done: no record, no release, no second end (its time, +50,
        // is what the drain's figures count to).
        Row {
            what: "AWS's delivery after the drain is drained, nothing left: a duplicate",
            node: drained,
            pods: vec![],
            at: 60.0,
            commands: "Duplicate",
            record: "finished +50, last step +1",
            ..Row::default()
        },
        // A straggler on the drained node is still evicted before the instance goes: evicting
        // since +40, the placeholder released (Absent) and asked for again for its 4 GPUs (not
        // ready, before the deadline +90: it is not evicted yet); check in 15 s (last milestone
        // +40, 20 s ago): +75. The drain's end stays +50.
        Row {
            what: "AWS's delivery after the drain is drained, a straggler on the node",
            node: released,
            at: 60.0,
            commands: "record evicting; request 4 for llama-0; wait +75",
            record: "evicting +40, finished +50, next check +75",
            ..Row::default()
        },
        // Its check at +75 finds it gone: drained again, ended still at +50.
        Row {
            what: "the straggler gone: drained, its first end kept",
            node: straggler_at_60,
            pods: vec![],
            at: 75.0,
            commands: "record drained; release; Drained",
            record: "finished +50, last step +75",
            ..Row::default()
        },
        Row {
            what: "a Health update moving the window a day later, 2 s after the claim",
            node: health_at_1,
            notice: moved,
            at: 3.0,
            commands: "record waiting-for-replacement; request 4 for llama-0; wait +18",
            record: "deadline +172770, end +172800, notice +60",
            ..Row::default()
        },
        Row {
            what: "the first update's continuation afterwards: the newer one drives",
            node: moved_at_3.clone(),
            notice: health.clone(),
            at: 20.0,
            commands: "superseded by ev-1",
            ..Row::default()
        },
        Row {
            what: "closed by a third update: un-drained",
            node: moved_at_3,
            notice: Notice {
                time: T0 + 120.0,
                window_start: None,
                ..closed(ScheduledChange)
            },
            at: 121.0,
            commands: "undrain uncordon closed by ev-1 at +120; release; Undrained",
            ..Row::default()
        },
    ]);
}

/// Another notice for a claimed node: it takes the drain over only when it must act sooner or
/// the owner went silent (4 × 15 + 60 = 120 s without a step), keeping what was done and the
/// earlier of the two deadlines and ends.
#[test]
fn another_notice() {
    let rebalance_owned = |last_step: f64| {
        claimed_with(Pending, Rebalance, None, |s| {
            s.last_step_at = Some(T0 + last_step)
        })
    };
    // A Health drain backed off at +3601: its check at +4501 (planned then), so its silence
    // counts from 4,501 - 15 = 4,486 and it is gone from 4,486 + 120 = 4,606.
    let health = claimed(Pending, ScheduledChange, None);
    let backed_off = after(
        &health,
        &[pod("llama-0", 4)],
        &notice(ScheduledChange),
        3_601.0,
        Pending,
    );
    // Adopted past the kept deadline +90 at +200: evicts at once, saying why.
    let late = "record evicting; DrainWithoutReplacement; hand-over; evict llama-0; wait +215";
    check(vec![
        Row {
            what: "a rebalance (no deadline) for a spot warning's drain (+90)",
            notice: from("ev-2", Rebalance),
            at: 5.0,
            commands: "superseded by ev-1",
            record: "owner ev-1",
            ..Row::default()
        },
        Row {
            what: "a spot warning for a rebalance's drain: taken over, what was done kept",
            node: claimed(Pending, Rebalance, None),
            notice: from("ev-3", SpotInterruption),
            at: 5.0,
            commands: "record waiting-for-replacement; wait +20",
            record: "owner ev-3, deadline +90, started +1",
            ..Row::default()
        },
        Row {
            what: "a rebalance's owner silent 100 s: alive",
            node: rebalance_owned(100.0),
            notice: from("ev-2", Rebalance),
            at: 200.0,
            commands: "superseded by ev-1",
            ..Row::default()
        },
        Row {
            what: "silent 119 s: alive",
            node: rebalance_owned(100.0),
            notice: from("ev-2", Rebalance),
            at: 219.0,
            commands: "superseded by ev-1",
            ..Row::default()
        },
        Row {
            what: "silent 121 s: adopted",
            node: rebalance_owned(100.0),
            notice: from("ev-2", Rebalance),
            at: 221.0,
            commands: "record waiting-for-replacement; wait +236",
            record: "owner ev-2, started +1, requested +1",
            ..Row::default()
        },
        Row {
            what: "a spot owner silent since +1; a rebalance adopts: +90 stays",
            notice: from("ev-2", Rebalance),
            at: 200.0,
            commands: late,
            record: "owner ev-2, deadline +90, end +120",
            ..Row::default()
        },
        Row {
            what: "a spot owner; a spot warning issued 100 s later (+190, end +220) adopts: +90",
            notice: Notice {
                time: T0 + 100.0,
                ..from("ev-2", SpotInterruption)
            },
            at: 200.0,
            commands: late,
            record: "owner ev-2, deadline +90, end +120",
            ..Row::default()
        },
        Row {
            what: "a rebalance's owner; a spot warning adopts: its own +90",
            node: claimed(Pending, Rebalance, None),
            notice: from("ev-2", SpotInterruption),
            at: 200.0,
            commands: late,
            record: "owner ev-2, deadline +90, end +120",
            ..Row::default()
        },
        Row {
            what: "a spot warning for a rebalance's drained drain, its pod back: evicts it",
            node: claimed_with(Running, Rebalance, Some(20.0), |s| {
                s.phase = Phase::Drained;
                s.finished_at = Some(T0 + 30.0);
            }),
            notice: from("ev-2", SpotInterruption),
            at: 40.0,
            commands: "record evicting; hand-over; evict llama-0; wait +55",
            record: "owner ev-2, evicting +20, finished -, deadline +90",
            ..Row::default()
        },
        Row {
            what: "a backed-off owner at +4605: alive",
            node: backed_off.clone(),
            notice: from("ev-2", Rebalance),
            at: 4_605.0,
            commands: "superseded by ev-1",
            ..Row::default()
        },
        Row {
            what: "a backed-off owner at +4607: adopted, keeping the Health deadline",
            node: backed_off,
            notice: from("ev-2", Rebalance),
            at: 4_607.0,
            commands: "record waiting-for-replacement; wait +5507",
            record: "owner ev-2, deadline +86370",
            ..Row::default()
        },
    ]);
}

/// A closed notice un-drains its own drain only.
#[test]
fn closed_notice() {
    let own = claimed(Pending, ScheduledChange, None);
    check(vec![
        Row {
            what: "its own drain: un-drained, remembered as closed",
            node: own.clone(),
            notice: closed(ScheduledChange),
            at: 60.0,
            commands: "undrain uncordon closed by ev-1 at +0; release; Undrained",
            record: "none",
            ..Row::default()
        },
        Row {
            what: "its own drain of a node an operator had cordoned: the cordon stays",
            node: claimed_with(Pending, ScheduledChange, None, |s| s.user_cordoned = true),
            notice: closed(ScheduledChange),
            at: 60.0,
            commands: "undrain closed by ev-1 at +0; release; Undrained",
            ..Row::default()
        },
        Row {
            what: "another notice's drain",
            node: own,
            notice: Notice {
                event_id: "ev-9".into(),
                ..closed(ScheduledChange)
            },
            at: 60.0,
            commands: "superseded by ev-1",
            ..Row::default()
        },
        Row {
            what: "a node it never drained",
            node: node(Absent),
            notice: closed(ScheduledChange),
            at: 60.0,
            commands: "NothingToUndo",
            ..Row::default()
        },
        Row {
            what: "a delivery of the notice issued before its close: nothing",
            node: NodeView {
                closed_event: Some(("ev-1".into(), T0 + 120.0)),
                ..node(Absent)
            },
            notice: notice(ScheduledChange),
            at: 130.0,
            commands: "NothingToUndo",
            record: "none",
            ..Row::default()
        },
    ]);
}
