//! The replacement of a draining node as a reservation: one placeholder pod per drain, shaped like the
//! pods the drain will evict, at the balloon priority (every real pod preempts it), labelled with
//! the drain id (the instance id) and annotated with its owner (the notice) and an expiry. It is
//! the drain's own claim on capacity, visible on the cluster, so concurrent drains never count
//! the same spare capacity: a drain's replacement is ready only when its own placeholder runs.
//!
//! The pure half: what the drain's placeholder is doing as planning sees it, when its reservation
//! expires, and what the tick's collection does with a placeholder it finds.

use serde::Serialize;

use super::model::no_deadline_wait_end;
use super::reservation::{NodeSeen, SURVIVOR_GRACE_S};
use super::state::{DrainState, Phase};

/// When a drain's reservation ends at the latest: the instance's announced end (or, without one, the
/// longest a deadline-less drain may wait) plus the survivor grace. By then the drain has handed
/// its placeholder over or the node is gone; a placeholder still there is left over.
pub fn reservation_expiry(state: &DrainState) -> f64 {
    let need_until = state
        .instance_end
        .or(state.deadline)
        .unwrap_or(no_deadline_wait_end(state));
    need_until + SURVIVOR_GRACE_S
}

/// What the tick's collection does with one placeholder.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "verdict", rename_all = "kebab-case")]
pub enum PlaceholderVerdict {
    Keep,
    Delete { reason: String },
}

/// A placeholder is kept while its drain still needs capacity: the node is there with a drain
/// that is not over and the reservation has not expired. (An evicting drain may still hold its
/// placeholder: pods due by their own grace period go before the replacement is ready; the
/// drain hands the placeholder over in the step that evicts everyone.) `expires_at`: the
/// placeholder's own expiry annotation (None: missing or unreadable, judged by the drain's).
pub fn placeholder_verdict(
    node: NodeSeen<'_>,
    expires_at: Option<f64>,
    now: f64,
) -> PlaceholderVerdict {
    let delete = |reason: &str| PlaceholderVerdict::Delete {
        reason: reason.into(),
    };
    let state = match node {
        NodeSeen::Gone => return delete("the draining node is gone"),
        NodeSeen::Present { state: None, .. } => return delete("the node carries no drain"),
        NodeSeen::Present { state: Some(s), .. } => s,
    };
    if now >= expires_at.unwrap_or_else(|| reservation_expiry(state)) {
        return delete("the reservation expired");
    }
    match state.phase {
        Phase::WaitingForReplacement | Phase::Prewarmed | Phase::Evicting => {
            PlaceholderVerdict::Keep
        }
        Phase::Drained => delete("the drain is over"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interruption::NoticeKind;

    const T0: f64 = 1_795_953_600.0;

    fn state(phase: Phase, end: Option<f64>) -> DrainState {
        DrainState {
            deadline: end.map(|e| e - 30.0),
            replacement_gpus: 4,
            instance_end: end,
            ..DrainState::test(NoticeKind::SpotInterruption, phase, T0)
        }
    }

    #[test]
    fn the_reservation_ends_ten_minutes_after_the_instance_or_the_longest_wait() {
        // Spot: end T0+120, plus 600 s of survivor grace.
        assert_eq!(
            reservation_expiry(&state(Phase::WaitingForReplacement, Some(T0 + 120.0))),
            T0 + 720.0
        );
        // Rebalance (no deadline): 30 min after the notice, plus 600 s.
        assert_eq!(
            reservation_expiry(&state(Phase::Prewarmed, None)),
            T0 + 1_800.0 + 600.0
        );
    }

    #[test]
    fn placeholder_verdicts_per_situation() {
        let waiting = state(Phase::WaitingForReplacement, Some(T0 + 120.0));
        let prewarmed = state(Phase::Prewarmed, None);
        let evicting = state(Phase::Evicting, Some(T0 + 120.0));
        let drained = state(Phase::Drained, Some(T0 + 120.0));
        let present = |s| NodeSeen::Present {
            state: s,
            ready: true,
        };
        // (what, node, own expiry annotation, now, expected)
        let cases: Vec<(&str, NodeSeen, Option<f64>, f64, &str)> = vec![
            (
                "node gone",
                NodeSeen::Gone,
                Some(T0 + 720.0),
                T0 + 10.0,
                "delete",
            ),
            (
                "no drain on the node",
                present(None),
                Some(T0 + 720.0),
                T0 + 10.0,
                "delete",
            ),
            (
                "waiting, reservation live",
                present(Some(&waiting)),
                Some(T0 + 720.0),
                T0 + 10.0,
                "keep",
            ),
            (
                "waiting, own expiry passed",
                present(Some(&waiting)),
                Some(T0 + 60.0),
                T0 + 61.0,
                "delete",
            ),
            (
                "waiting, no annotation, drain's expiry live",
                present(Some(&waiting)),
                None,
                T0 + 719.0,
                "keep",
            ),
            (
                "waiting, no annotation, drain's expiry passed",
                present(Some(&waiting)),
                None,
                T0 + 720.0,
                "delete",
            ),
            (
                "prewarmed 29 min",
                present(Some(&prewarmed)),
                None,
                T0 + 1_740.0,
                "keep",
            ),
            (
                "evicting, reservation live",
                present(Some(&evicting)),
                Some(T0 + 720.0),
                T0 + 95.0,
                "keep",
            ),
            (
                "drained",
                present(Some(&drained)),
                Some(T0 + 720.0),
                T0 + 130.0,
                "delete",
            ),
        ];
        for (what, node, expires, now, expected) in cases {
            let got = match placeholder_verdict(node, expires, now) {
                PlaceholderVerdict::Keep => "keep",
                PlaceholderVerdict::Delete { .. } => "delete",
            };
            assert_eq!(got, expected, "{what}");
        }
    }
}
