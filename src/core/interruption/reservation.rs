//! Replacement reservations. A drain's reservation on the headroom object (keyed by instance
//! id) is held by the drain; its owner and expiry are the drain state on the node (the notice
//! that owns the drain and its heartbeat `last-step-at`). The tick collects reservations nobody holds
//! any more and drains nobody drives: what to do with each is decided here, purely.

use serde::Serialize;

use super::drain::{owner_alive, plan_drain};
use super::false_alarm::survived;
use super::model::{
    no_deadline_wait_end, Command, DrainSettings, DrainStep, Finish, NodeView, PodView,
    NO_DEADLINE_MAX_WAIT_S,
};
use super::notice::{Notice, NoticeStatus};
use super::state::{DrainState, Phase};

/// (Defined with the planner's vocabulary: the drain planner ends a drain by it too.)
pub use super::model::SURVIVOR_GRACE_S;

/// What the tick does with one drain reservation or drain state.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "verdict", rename_all = "kebab-case")]
pub enum ReservationVerdict {
    /// Held by a live drain (or a finished one that still needs its node cordoned).
    Keep,
    /// Give the reservation back: nobody holds it.
    Release { reason: String },
    /// Remove cordon, taint and drain state and give the reservation back.
    Undrain { reason: String },
    /// The drain's owner went silent with work left: drive one step from the node's record.
    Resume,
}

/// What the tick knows about the node a reservation or drain state belongs to.
#[derive(Clone, Debug, PartialEq)]
pub enum NodeSeen<'a> {
    /// No node has this instance any more.
    Gone,
    /// The node is there; its drain state (None: none, or unreadable) and readiness.
    Present {
        state: Option<&'a DrainState>,
        ready: bool,
    },
}

pub fn reservation_verdict(
    node: NodeSeen<'_>,
    now: f64,
    settings: &DrainSettings,
) -> ReservationVerdict {
    let release = |reason: &str| ReservationVerdict::Release {
        reason: reason.into(),
    };
    let undrain = |reason: String| ReservationVerdict::Undrain { reason };
    let (state, ready) = match node {
        NodeSeen::Gone => return release("the node is gone"),
        NodeSeen::Present { state: None, .. } => {
            return release("orphaned: the node carries no drain")
        }
        NodeSeen::Present {
            state: Some(s),
            ready,
        } => (s, ready),
    };
    // Without an announced end (a rebalance) the end of the drain's wait counts as the end.
    let survived = survived(state, ready, now);
    match state.phase {
        Phase::Drained if survived => undrain(format!(
            "the node outlived the end its {} notice announced (or, without one, its wait)",
            state.kind
        )),
        Phase::Drained => release("the drain is over"),
        Phase::Prewarmed if now >= no_deadline_wait_end(state) => undrain(format!(
            "no notice with a deadline followed the {} within {NO_DEADLINE_MAX_WAIT_S} s",
            state.kind
        )),
        Phase::Prewarmed => ReservationVerdict::Keep,
        Phase::WaitingForReplacement | Phase::Evicting if owner_alive(state, now, settings) => {
            ReservationVerdict::Keep
        }
        Phase::WaitingForReplacement | Phase::Evicting => ReservationVerdict::Resume,
    }
}

/// The notice a drain's own record stands for: enough for `plan_drain` to carry the drain on
/// (it keeps the recorded deadline and instance end for its own event id). `Closed` un-drains.
pub fn notice_of_record(state: &DrainState, instance: &str, status: NoticeStatus) -> Notice {
    Notice {
        event_id: state.event_id.clone(),
        kind: state.kind,
        instance_ids: vec![instance.to_string()],
        // The claimed time, as the notice said it: `plan_drain` tells the same update by it.
        time: state.event_time.unwrap_or(state.notice_time),
        instance_state: None,
        window_start: state.instance_end,
        termination_time: state.instance_end,
        reservation_id: None,
        // Back to the end-date the recorded end was computed from (`deadline::instance_end`).
        reservation_end: state
            .instance_end
            .map(|end| end + super::deadline::CAPACITY_BLOCK_TERMINATION_LEAD_S),
        status,
        sent_time: None,
        scheduled: false,
    }
}

/// One step of a resume-drain message (sent by the tick for the node of `instance`), from what the
/// node looks like now. The tick's verdict is taken again here, at the time of the step: the
/// owner may have come back meanwhile. `adopted`: this message already stepped the drain (it is a
/// continuation of the resume message), so it is the drain's owner and carries it on while it is
/// active. Two owners of one drain collapse by `plan_drain`'s duplicate rule.
pub fn plan_resume(
    node: &NodeView,
    pods: &[PodView],
    ready: bool,
    instance: &str,
    adopted: bool,
    now: f64,
    settings: &DrainSettings,
) -> DrainStep {
    let state = node.state.as_ref();
    let active =
        state.is_some_and(|s| matches!(s.phase, Phase::WaitingForReplacement | Phase::Evicting));
    let verdict = if adopted && active {
        ReservationVerdict::Resume
    } else {
        reservation_verdict(NodeSeen::Present { state, ready }, now, settings)
    };
    let moot = |commands: Vec<Command>, reason: String| DrainStep {
        commands: commands
            .into_iter()
            .chain([Command::Done(Finish::Moot { reason })])
            .collect(),
        state: state.cloned(),
    };
    match (verdict, state) {
        (ReservationVerdict::Resume, Some(s)) => plan_drain(
            node,
            pods,
            &notice_of_record(s, instance, NoticeStatus::Active),
            now,
            settings,
        ),
        (ReservationVerdict::Undrain { .. }, Some(s)) => plan_drain(
            node,
            pods,
            &notice_of_record(s, instance, NoticeStatus::Closed),
            now,
            settings,
        ),
        (ReservationVerdict::Release { reason }, _) => moot(
            vec![Command::ReleaseReplacement],
            format!("reservation released: {reason}"),
        ),
        (ReservationVerdict::Keep, _) => moot(
            vec![],
            "the drain is driven by its owner (or needs nothing now)".into(),
        ),
        (_, None) => moot(vec![], "the node carries no drain".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interruption::NoticeKind;

    const T0: f64 = 1_795_953_600.0;

    fn state(kind: NoticeKind, phase: Phase, last_step: f64) -> DrainState {
        DrainState {
            deadline: Some(T0 + 90.0),
            replacement_gpus: 4,
            instance_end: Some(T0 + 120.0),
            last_step_at: Some(last_step),
            ..DrainState::test(kind, phase, T0)
        }
    }

    #[test]
    fn verdicts_per_situation() {
        // recheck 15 s: owner stale after 120 s of silence; survivor grace 600 s after the end.
        let s = DrainSettings::default();
        let active = state(NoticeKind::SpotInterruption, Phase::Evicting, T0 + 60.0);
        let waiting = state(
            NoticeKind::ScheduledChange,
            Phase::WaitingForReplacement,
            T0,
        );
        let drained = state(NoticeKind::SpotInterruption, Phase::Drained, T0 + 100.0);
        let mut prewarmed = state(NoticeKind::Rebalance, Phase::Prewarmed, T0 + 30.0);
        prewarmed.deadline = None;
        prewarmed.instance_end = None;
        let present = |st, ready| NodeSeen::Present { state: st, ready };
        let cases: Vec<(&str, NodeSeen, f64, &str)> = vec![
            ("node gone", NodeSeen::Gone, T0, "release"),
            ("no drain on the node", present(None, true), T0, "release"),
            (
                "owner stepped 100 s ago",
                present(Some(&active), true),
                T0 + 160.0,
                "keep",
            ),
            (
                "owner silent 121 s",
                present(Some(&active), true),
                T0 + 181.0,
                "resume",
            ),
            (
                "waiting, silent since the claim",
                present(Some(&waiting), true),
                T0 + 121.0,
                "resume",
            ),
            (
                "drained, reservation still held",
                present(Some(&drained), false),
                T0 + 130.0,
                "release",
            ),
            (
                "drained, Ready 11 min after the end",
                present(Some(&drained), true),
                T0 + 781.0,
                "undrain",
            ),
            (
                "drained, NotReady long after",
                present(Some(&drained), false),
                T0 + 5_000.0,
                "release",
            ),
            (
                "prewarmed for 29 min",
                present(Some(&prewarmed), true),
                T0 + 1_740.0,
                "keep",
            ),
            (
                "prewarmed for 30 min, no warning came",
                present(Some(&prewarmed), true),
                T0 + 1_800.0,
                "undrain",
            ),
        ];
        for (what, node, now, expected) in cases {
            let got = match reservation_verdict(node, now, &s) {
                ReservationVerdict::Keep => "keep",
                ReservationVerdict::Release { .. } => "release",
                ReservationVerdict::Undrain { .. } => "undrain",
                ReservationVerdict::Resume => "resume",
            };
            assert_eq!(got, expected, "{what}");
        }
    }

    #[test]
    fn resume_messages_act_on_the_verdict_at_the_time_of_the_step() {
        let s = DrainSettings::default();
        let view = |state: Option<DrainState>| NodeView {
            name: "n".into(),
            unschedulable: true,
            tainted: true,
            gpus: 4,
            replacement: crate::interruption::ReplacementSeen::Pending,
            state,
            closed_event: None,
            false_alarm_at: None,
        };
        let active = state(NoticeKind::SpotInterruption, Phase::Evicting, T0 + 60.0);
        let mut prewarmed = state(NoticeKind::Rebalance, Phase::Prewarmed, T0);
        prewarmed.deadline = None;
        prewarmed.instance_end = None;
        let kind = |st: &DrainStep| match st.last() {
            Command::WaitUntil { .. } => "stepped".to_string(),
            Command::Done(Finish::Undrained) => "undrained".into(),
            Command::Done(Finish::Moot { reason })
                if reason.starts_with("reservation released") =>
            {
                "released".into()
            }
            Command::Done(Finish::Moot { .. }) => "moot".into(),
            Command::Done(Finish::Drained) => "drained".into(),
            other => format!("{other:?}"),
        };
        // (what, state, adopted, now, expected)
        let cases: Vec<(&str, Option<DrainState>, bool, f64, &str)> = vec![
            (
                "owner silent 121 s: stepped",
                Some(active.clone()),
                false,
                T0 + 181.0,
                "drained",
            ),
            (
                "owner came back meanwhile: moot",
                Some(active.clone()),
                false,
                T0 + 100.0,
                "moot",
            ),
            (
                "continuation of the message: owns the drain",
                Some(active.clone()),
                true,
                T0 + 100.0,
                "drained",
            ),
            (
                "expired prewarm: un-drained",
                Some(prewarmed.clone()),
                false,
                T0 + 1_800.0,
                "undrained",
            ),
            (
                "prewarm not expired: moot",
                Some(prewarmed),
                false,
                T0 + 60.0,
                "moot",
            ),
            (
                "no drain on the node: reservation released",
                None,
                false,
                T0,
                "released",
            ),
        ];
        for (what, st, adopted, now, expected) in cases {
            // No pods left on the node: an active step ends the drain.
            let step = plan_resume(&view(st), &[], true, "i-1", adopted, now, &s);
            assert_eq!(kind(&step), expected, "{what}");
        }
    }
}
