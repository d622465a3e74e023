//! Rebalance recommendations that no interruption follows (false alarms): when a drain without an
//! announced end is over with its node still there, and how that node is not drained again at
//! once. Changes when the rule of a drain's assumed end, or the cool-down, changes.
//!
//! A rebalance recommendation announces no end. Its drain counts the end of its wait for a
//! replacement (`no_deadline_wait_end`: 30 minutes from the notice) as the instance's end, and the
//! survivor rule applies as it does to an announced end: a node still Ready `SURVIVOR_GRACE_S`
//! after it is un-drained by the tick (cordon, taint and drain state go; the replacement is
//! released). Without it a `drain` of a false alarm would stay cordoned and tainted for good. A
//! spot warning that comes meanwhile takes the drain over (it has a deadline) and its own end
//! counts instead.
//!
//! Hysteresis: the un-drain remembers the notice as closed (`prewarm.io/closed-event`: deliveries
//! of that same notice end at once, `NothingToUndo`) and the time of the false alarm
//! (`prewarm.io/rebalance-false-alarm-at`). A new rebalance recommendation for that node within
//! `REBALANCE_COOL_DOWN_S` is acknowledged and not acted on (`CoolingDown`). A notice with a
//! deadline (a spot warning, a Health window, ...) always drains.

use super::model::{no_deadline_wait_end, NodeView, SURVIVOR_GRACE_S};
use super::notice::{Notice, NoticeKind};
use super::state::DrainState;

/// After a rebalance's drain ended with the node still there, a new rebalance recommendation for
/// it is not acted on for an hour: longer than a rebalance's whole drain (its 30-minute wait and
/// the 10-minute survivor grace), so one node is moved by rebalance recommendations at most once
/// in 1 h 40 min, however often EC2 re-sends them. Spot warnings are not held back.
pub const REBALANCE_COOL_DOWN_S: f64 = 3600.0;

/// The end a drain counts on: the instance's announced end, or, for a drain without one (a
/// rebalance recommendation), the end of its wait for a replacement.
pub fn assumed_end(s: &DrainState) -> f64 {
    s.instance_end.unwrap_or_else(|| no_deadline_wait_end(s))
}

/// Whether the node of drain `s` (`ready`: its Ready condition) outlived the drain's end at `now`.
pub fn survived(s: &DrainState, ready: bool, now: f64) -> bool {
    ready && now > assumed_end(s) + SURVIVOR_GRACE_S
}

/// What an un-drain of `s` at `now` remembers as a false alarm: the drain was a rebalance's (no
/// deadline: a spot warning that took it over brought one) and it ends with the node still there.
pub fn false_alarm_at(s: &DrainState, now: f64) -> Option<f64> {
    (s.kind == NoticeKind::Rebalance && s.deadline.is_none()).then_some(now)
}

/// Until when `notice` is not acted on for `node` at `now`: a rebalance recommendation for a node
/// with no drain whose last rebalance drain was a false alarm less than the cool-down ago. None:
/// act on it.
pub fn cooling_down_until(node: &NodeView, notice: &Notice, now: f64) -> Option<f64> {
    if notice.kind != NoticeKind::Rebalance || node.state.is_some() {
        return None;
    }
    node.false_alarm_at
        .map(|t| t + REBALANCE_COOL_DOWN_S)
        .filter(|&until| now < until)
}

#[cfg(test)]
mod tests {
    use super::super::drain::plan_drain;
    use super::super::model::{
        Command, DrainSettings, DrainStep, Finish, PodView, ReplacementSeen,
    };
    use super::super::reservation::{
        plan_resume, reservation_verdict, NodeSeen, ReservationVerdict,
    };
    use super::super::state::Phase;
    use super::super::ActionTable;
    use super::*;

    const T0: f64 = 1_795_953_600.0; // 2026-11-29T12:00:00Z: the rebalance's time
    const MIN: f64 = 60.0;

    fn notice(id: &str, kind: NoticeKind, time: f64) -> Notice {
        Notice {
            instance_ids: vec!["i-1".into()],
            sent_time: Some(time),
            ..Notice::new(id, kind, time)
        }
    }

    /// A rebalance's drain that moved its pods 5 minutes after the notice.
    fn drained_rebalance() -> DrainState {
        DrainState {
            event_id: "reb-1".into(),
            event_time: Some(T0),
            replacement_ready_at: Some(T0 + 2.0 * MIN),
            evicting_since: Some(T0 + 2.0 * MIN),
            finished_at: Some(T0 + 5.0 * MIN),
            last_step_at: Some(T0 + 5.0 * MIN),
            pods_moved: 1,
            ..DrainState::test(NoticeKind::Rebalance, Phase::Drained, T0)
        }
    }

    fn node(state: Option<DrainState>) -> NodeView {
        NodeView {
            name: "gpu-1".into(),
            unschedulable: state.is_some(),
            tainted: state.is_some(),
            gpus: 8,
            replacement: ReplacementSeen::Absent,
            state,
            closed_event: None,
            false_alarm_at: None,
        }
    }

    /// The node after the false alarm's un-drain at `at`: no drain, the notice closed.
    fn undrained(at: f64) -> NodeView {
        NodeView {
            closed_event: Some(("reb-1".into(), T0)),
            false_alarm_at: Some(at),
            ..node(None)
        }
    }

    fn gpu_pod() -> PodView {
        PodView {
            uid: Some("u-1".into()),
            gpus: 8,
            ..PodView::test("llm", "vllm-0", 30.0)
        }
    }

    fn verdict(v: ReservationVerdict) -> &'static str {
        match v {
            ReservationVerdict::Keep => "keep",
            ReservationVerdict::Release { .. } => "release",
            ReservationVerdict::Undrain { .. } => "undrain",
            ReservationVerdict::Resume => "resume",
        }
    }

    /// The tick's verdict on a drained rebalance: the node is un-drained once it is still Ready
    /// 10 minutes after the end of the rebalance's 30-minute wait (T0 + 40 min); before, or on a
    /// node going away (NotReady), only the reservation is given back. Rows by hand from the rule.
    #[test]
    fn a_drained_rebalance_is_undrained_once_its_node_outlives_the_wait() {
        let s = DrainSettings::default();
        let reb = drained_rebalance();
        // A spot warning that took the drain over: its end (T0 + 20 min + 120 s) counts.
        let spot = DrainState {
            event_id: "spot-1".into(),
            kind: NoticeKind::SpotInterruption,
            deadline: Some(T0 + 20.0 * MIN + 90.0),
            instance_end: Some(T0 + 22.0 * MIN),
            ..drained_rebalance()
        };
        let cases: Vec<(&str, &DrainState, bool, f64, &str)> = vec![
            (
                "rebalance, 39 min after",
                &reb,
                true,
                T0 + 39.0 * MIN,
                "release",
            ),
            (
                "rebalance, 40 min after",
                &reb,
                true,
                T0 + 40.0 * MIN,
                "release",
            ),
            (
                "rebalance, 40 min 1 s after",
                &reb,
                true,
                T0 + 2401.0,
                "undrain",
            ),
            (
                "rebalance, a week after",
                &reb,
                true,
                T0 + 7.0 * 86_400.0,
                "undrain",
            ),
            (
                "rebalance, NotReady 2 h after",
                &reb,
                false,
                T0 + 120.0 * MIN,
                "release",
            ),
            (
                "taken over by a spot warning, 32 min 1 s",
                &spot,
                true,
                T0 + 1921.0,
                "undrain",
            ),
            (
                "taken over by a spot warning, 31 min",
                &spot,
                true,
                T0 + 31.0 * MIN,
                "release",
            ),
        ];
        for (what, state, ready, now, want) in cases {
            let seen = NodeSeen::Present {
                state: Some(state),
                ready,
            };
            assert_eq!(verdict(reservation_verdict(seen, now, &s)), want, "{what}");
        }
    }

    /// One row per situation around a false alarm, with the planner's answer: the tick's resume
    /// message un-drains and remembers the false alarm; the same notice again, and a new
    /// rebalance within the hour, leave the node serving; a spot warning always drains; after
    /// the cool-down a rebalance drains again.
    #[test]
    fn a_false_alarm_ends_and_does_not_flap() {
        let s = DrainSettings::default();
        let undrain_at = T0 + 2401.0;
        let pods = [gpu_pod()];
        let drain_step =
            |view: &NodeView, n: &Notice, now: f64| plan_drain(view, &pods, n, now, &s);
        let reb = |id: &str, at: f64| notice(id, NoticeKind::Rebalance, at);
        let first = |st: &DrainStep| st.commands.first().cloned();
        let records_waiting = |st: &DrainStep| matches!(first(st), Some(Command::RecordState { state }) if state.phase == Phase::WaitingForReplacement);

        // The tick's resume-drain message for the drained rebalance, 40 min 1 s after it.
        let resumed = plan_resume(
            &node(Some(drained_rebalance())),
            &[],
            true,
            "i-1",
            false,
            undrain_at,
            &s,
        );
        assert_eq!(
            resumed.commands,
            vec![
                Command::Undrain {
                    uncordon: true,
                    closed_by: Some(("reb-1".into(), T0)),
                    false_alarm_at: Some(undrain_at),
                },
                Command::ReleaseReplacement,
                Command::Done(Finish::Undrained),
            ]
        );

        let after = undrained(undrain_at);
        let until = undrain_at + 3600.0;
        // (what, notice, now, expected: the step's only command, or None for "drains")
        let cases: Vec<(&str, Notice, f64, Option<Command>)> = vec![
            (
                "the same rebalance delivered again",
                reb("reb-1", T0),
                undrain_at + 5.0,
                Some(Command::Done(Finish::NothingToUndo)),
            ),
            (
                "a new rebalance 10 min after the false alarm",
                reb("reb-2", undrain_at + 10.0 * MIN),
                undrain_at + 10.0 * MIN,
                Some(Command::Done(Finish::CoolingDown { until })),
            ),
            (
                "a new rebalance 59 min after",
                reb("reb-2", undrain_at + 59.0 * MIN),
                undrain_at + 59.0 * MIN,
                Some(Command::Done(Finish::CoolingDown { until })),
            ),
            (
                "a new rebalance an hour after",
                reb("reb-2", until),
                until,
                None,
            ),
            (
                "a spot warning 10 min after the false alarm",
                notice(
                    "spot-1",
                    NoticeKind::SpotInterruption,
                    undrain_at + 10.0 * MIN,
                ),
                undrain_at + 10.0 * MIN,
                None,
            ),
        ];
        for (what, n, now, want) in cases {
            let step = drain_step(&after, &n, now);
            match want {
                Some(only) => assert_eq!(step.commands, vec![only], "{what}"),
                None => assert!(records_waiting(&step), "{what}: {:?}", step.commands),
            }
        }
        // A node that never had a false alarm drains on a rebalance.
        assert!(records_waiting(&drain_step(
            &node(None),
            &reb("reb-2", T0),
            T0
        )));
    }

    /// cordon-prewarm's expired wait (the planner's own un-drain) remembers the false alarm too,
    /// and a spot warning's un-drain (a survivor) does not.
    #[test]
    fn only_a_rebalances_undrain_is_a_false_alarm() {
        let prewarm = DrainSettings {
            actions: ActionTable::parse("rebalance=cordon-prewarm").unwrap(),
            ..DrainSettings::default()
        };
        let waiting = DrainState {
            phase: Phase::WaitingForReplacement,
            evicting_since: None,
            replacement_ready_at: None,
            finished_at: None,
            last_step_at: Some(T0 + 29.0 * MIN),
            ..drained_rebalance()
        };
        let at = T0 + 30.0 * MIN;
        let expired = plan_drain(
            &node(Some(waiting)),
            &[gpu_pod()],
            &notice("reb-1", NoticeKind::Rebalance, T0),
            at,
            &prewarm,
        );
        assert!(
            expired.commands.contains(&Command::Undrain {
                uncordon: true,
                closed_by: Some(("reb-1".into(), T0)),
                false_alarm_at: Some(at),
            }),
            "{:?}",
            expired.commands
        );
        let spot = DrainState {
            event_id: "spot-1".into(),
            kind: NoticeKind::SpotInterruption,
            deadline: Some(T0 + 90.0),
            instance_end: Some(T0 + 120.0),
            ..drained_rebalance()
        };
        assert_eq!(false_alarm_at(&spot, T0 + 800.0), None);
        assert_eq!(
            false_alarm_at(&drained_rebalance(), T0 + 1.0),
            Some(T0 + 1.0)
        );
    }
}
