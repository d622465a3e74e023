//! What `prewarm restore` does with one node: give back what prewarm did to it (the drain state,
//! the `prewarm.io/draining` taint, its cordon) unless a live drain still holds it. Changes when
//! the rule of which drain counts as live, or which cordon is prewarm's, changes.
//!
//! Live: an active drain (waiting for its replacement, or evicting) whose owner still steps
//! (`owner_alive`): un-draining it would let the pods it is moving land back on the node. A
//! cordon-prewarm drain within its wait for a notice with a deadline. A drained node whose
//! announced end has not passed (plus `SURVIVOR_GRACE_S`): the instance is going away, and
//! uncordoning it would schedule pods onto it. Everything else is given back: an orphaned drain
//! (its owner silent), a survivor, a drain without an end.
//!
//! The cordon is lifted only when prewarm set it: the drain state says the node was not already
//! cordoned by someone else (`user_cordoned`). Without a readable drain state the taint (only
//! prewarm writes it) goes, the cordon stays: it is not known to be prewarm's.

use serde::Serialize;

use super::drain::owner_alive;
use super::model::{DrainSettings, NO_DEADLINE_MAX_WAIT_S};
use super::reservation::SURVIVOR_GRACE_S;
use super::state::{DrainState, Phase};

/// What prewarm left on a node, as read.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeMarks<'a> {
    /// The drain state: none, parsed, or unreadable (the parse error).
    pub state: Result<Option<&'a DrainState>, &'a str>,
    /// The node carries the `prewarm.io/draining` taint.
    pub tainted: bool,
    /// Any other `prewarm.io/` annotation (the closed-event mark).
    pub other_annotations: bool,
    pub ready: bool,
}

/// What restore does with the node.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "verdict", rename_all = "kebab-case")]
pub enum NodeRestore {
    /// Nothing of prewarm's on it.
    Unchanged,
    /// A live drain holds it: left as it is (restore again once the drain is over).
    Held { reason: String },
    /// Drain state, taint and `prewarm.io/` annotations removed; with `uncordon`, the cordon too.
    GiveBack { uncordon: bool, reason: String },
}

/// Why a drain still holds its node at `now`, or None when nothing does.
fn held_by(s: &DrainState, ready: bool, now: f64, settings: &DrainSettings) -> Option<String> {
    match s.phase {
        Phase::WaitingForReplacement | Phase::Evicting if owner_alive(s, now, settings) => {
            let last = s.last_step_at.unwrap_or(s.started_at);
            Some(format!(
                "drain {} is {} and its owner stepped {:.0} s ago",
                s.event_id,
                s.phase.as_str(),
                now - last
            ))
        }
        Phase::Prewarmed if now < s.notice_time + NO_DEADLINE_MAX_WAIT_S => Some(format!(
            "drain {} (cordon-prewarm) waits up to {NO_DEADLINE_MAX_WAIT_S} s for a notice with a deadline",
            s.event_id
        )),
        Phase::Drained => match s.instance_end {
            Some(end) if !(ready && now > end + SURVIVOR_GRACE_S) => Some(format!(
                "drain {} is over and the instance is announced to end at {end:.0}: uncordoning would schedule pods onto it",
                s.event_id
            )),
            _ => None,
        },
        _ => None,
    }
}

/// What restore does with a node showing `marks` at `now`.
pub fn node_restore(marks: &NodeMarks<'_>, now: f64, settings: &DrainSettings) -> NodeRestore {
    match marks.state {
        Ok(Some(s)) => match held_by(s, marks.ready, now, settings) {
            Some(reason) => NodeRestore::Held { reason },
            None => NodeRestore::GiveBack {
                uncordon: !s.user_cordoned,
                reason: if s.user_cordoned {
                    format!("drain {} given back; the cordon was there before it: kept", s.event_id)
                } else {
                    format!("drain {} given back, its cordon lifted", s.event_id)
                },
            },
        },
        Err(e) => NodeRestore::GiveBack {
            uncordon: false,
            reason: format!(
                "drain state unreadable ({e}): taint and annotations removed, the cordon kept (not known to be prewarm's)"
            ),
        },
        Ok(None) if marks.tainted => NodeRestore::GiveBack {
            uncordon: false,
            reason: "prewarm's taint without a drain state: removed, the cordon kept (not known to be prewarm's)".into(),
        },
        Ok(None) if marks.other_annotations => NodeRestore::GiveBack {
            uncordon: false,
            reason: "no drain; prewarm.io/ annotations removed".into(),
        },
        Ok(None) => NodeRestore::Unchanged,
    }
}

#[cfg(test)]
mod tests {
    use super::super::notice::NoticeKind;
    use super::*;

    const NOW: f64 = 1_795_953_600.0; // 2026-11-29T12:00:00Z

    fn state(
        phase: Phase,
        last_step_ago: f64,
        end_in: Option<f64>,
        user_cordoned: bool,
    ) -> DrainState {
        DrainState {
            deadline: Some(NOW + 60.0),
            replacement_requested_at: Some(NOW - 299.0),
            instance_end: end_in.map(|d| NOW + d),
            last_step_at: Some(NOW - last_step_ago),
            user_cordoned,
            ..DrainState::test(NoticeKind::SpotInterruption, phase, NOW - 300.0)
        }
    }

    fn marks(s: Option<&DrainState>) -> NodeMarks<'_> {
        NodeMarks {
            state: Ok(s),
            tainted: s.is_some(),
            other_annotations: false,
            ready: true,
        }
    }

    fn verdict(r: &NodeRestore) -> (&'static str, Option<bool>) {
        match r {
            NodeRestore::Unchanged => ("unchanged", None),
            NodeRestore::Held { .. } => ("held", None),
            NodeRestore::GiveBack { uncordon, .. } => ("give-back", Some(*uncordon)),
        }
    }

    #[test]
    fn a_node_is_given_back_unless_a_live_drain_holds_it() {
        let settings = DrainSettings::default();
        // recheck 15 s: an owner is stale after 4 * 15 + 60 = 120 s of silence. Survivor grace
        // 600 s after the announced end; cordon-prewarm waits 1,800 s from its notice (300 s ago).
        let evicting_live = state(Phase::Evicting, 100.0, Some(60.0), false);
        let evicting_orphan = state(Phase::Evicting, 121.0, Some(60.0), false);
        let waiting_orphan_user_cordon = state(Phase::WaitingForReplacement, 500.0, None, true);
        let drained_ending = state(Phase::Drained, 400.0, Some(60.0), false);
        // Ended 601 s ago and still Ready: a survivor.
        let drained_survivor = state(Phase::Drained, 700.0, Some(-601.0), false);
        let drained_no_end = state(Phase::Drained, 400.0, None, false);
        let prewarmed = state(Phase::Prewarmed, 300.0, None, false);
        let mut prewarmed_expired = state(Phase::Prewarmed, 300.0, None, false);
        prewarmed_expired.notice_time = NOW - 1_800.0;
        // (node marks, expected verdict, expected uncordon) - by hand from the rules above.
        let cases = [
            (marks(Some(&evicting_live)), ("held", None)),
            (marks(Some(&evicting_orphan)), ("give-back", Some(true))),
            (
                marks(Some(&waiting_orphan_user_cordon)),
                ("give-back", Some(false)),
            ),
            (marks(Some(&drained_ending)), ("held", None)),
            (marks(Some(&drained_survivor)), ("give-back", Some(true))),
            (
                NodeMarks {
                    ready: false,
                    ..marks(Some(&drained_survivor))
                },
                ("held", None),
            ),
            (marks(Some(&drained_no_end)), ("give-back", Some(true))),
            (marks(Some(&prewarmed)), ("held", None)),
            (marks(Some(&prewarmed_expired)), ("give-back", Some(true))),
            (
                NodeMarks {
                    state: Err("bad time"),
                    ..marks(None)
                },
                ("give-back", Some(false)),
            ),
            (
                NodeMarks {
                    tainted: true,
                    ..marks(None)
                },
                ("give-back", Some(false)),
            ),
            (
                NodeMarks {
                    other_annotations: true,
                    ..marks(None)
                },
                ("give-back", Some(false)),
            ),
            (marks(None), ("unchanged", None)),
        ];
        for (m, want) in cases {
            let got = node_restore(&m, NOW, &settings);
            assert_eq!(verdict(&got), want, "{m:?}: {got:?}");
        }
    }
}
