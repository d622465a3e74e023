//! What one finished drain came to, for the metrics published when it ends: the pods it moved,
//! how long they went without warm capacity, and whether it finished before the instance went.
//! Pure: computed from the drain state the node recorded (`state`), which outlives any one
//! invocation, so the figures are the same whichever invocation ends the drain.

use super::model::{Command, DrainStep, Finish};
use super::state::DrainState;

/// The figures of one finished drain.
#[derive(Clone, Debug, PartialEq)]
pub struct DrainFigures {
    /// Pods the drain evicted or deleted over its life (`DrainState::pods_moved`).
    pub pods_moved: u32,
    /// The serving gap in replica-seconds: `pods_moved` × the seconds from the start of eviction
    /// (`evicting_since`) to the replacement's readiness (`replacement_ready_at`), or to the
    /// drain's end (`finished_at`) when the replacement never became ready during the drain; 0
    /// when it was ready before eviction began (the make-before-break case, and every surge).
    ///
    /// An approximation from what the state records, said plainly: every moved pod counts from
    /// the first eviction (a pod that went later, in a second tier or past a budget, is counted
    /// from the first: an upper bound there); "ready" means warm capacity ran (the drain's
    /// placeholder on a Ready node), not that the successor had loaded its model (a lower bound
    /// there); and a replacement that became ready only after the drain ended is cut at the end.
    pub serving_gap_replica_s: f64,
    /// The drain finished no later than the instance's announced end (`instance_end`); a drain
    /// without one (a rebalance) always meets it.
    pub deadline_met: bool,
}

/// Whether `step`, planned from the node's record `before`, is the one that ends the drain (its
/// `DrainFinished` Event and figures are published once). A record that had evicted and ended
/// had ended already: the planner makes a copy of the notice that finds it so a duplicate, and a
/// straggler evicted afterwards keeps that first end (`finished_at`).
pub fn ends_drain(before: Option<&DrainState>, step: &DrainStep) -> bool {
    let ended = |b: &DrainState| b.evicting_since.is_some() && b.finished_at.is_some();
    step.last() == &Command::Done(Finish::Drained) && !before.is_some_and(ended)
}

/// The figures of the drain `state` records, once it has finished (`finished_at`); None before.
pub fn drain_figures(state: &DrainState) -> Option<DrainFigures> {
    let finished = state.finished_at?;
    let gap_per_pod = state.evicting_since.map_or(0.0, |evicting| {
        let served_again = state.replacement_ready_at.unwrap_or(finished);
        (served_again - evicting).max(0.0)
    });
    Some(DrainFigures {
        pods_moved: state.pods_moved,
        serving_gap_replica_s: f64::from(state.pods_moved) * gap_per_pod,
        deadline_met: state.instance_end.is_none_or(|end| finished <= end),
    })
}

#[cfg(test)]
mod tests {
    use super::super::notice::NoticeKind;
    use super::super::state::Phase;
    use super::*;

    const T: f64 = 1_795_953_600.0; // the notice, 2026-11-29T12:00:00Z

    /// A spot warning's drain: instance end at T + 120 unless a row says otherwise.
    fn finished(
        pods_moved: u32,
        ready: Option<f64>,
        evicting: Option<f64>,
        finished: Option<f64>,
        end: Option<f64>,
    ) -> DrainState {
        DrainState {
            notice_time: T,
            event_time: Some(T),
            deadline: end.map(|e| e - 30.0),
            replacement_ready_at: ready.map(|r| T + r),
            evicting_since: evicting.map(|e| T + e),
            finished_at: finished.map(|f| T + f),
            instance_end: end.map(|e| T + e),
            last_step_at: finished.map(|f| T + f),
            pods_moved,
            ..DrainState::test(NoticeKind::SpotInterruption, Phase::Drained, T + 1.0)
        }
    }

    /// Pods moved, serving gap in replica-seconds, deadline met.
    type Expected = (u32, f64, bool);

    #[test]
    fn figures_of_finished_drains() {
        // (row, state, expected (pods moved, gap in replica-s, deadline met)), worked by hand.
        let rows: Vec<(&str, DrainState, Option<Expected>)> = vec![
            (
                // Ready at +40 before the first eviction at +55: no gap; done at +70 <= +120.
                "make-before-break",
                finished(2, Some(40.0), Some(55.0), Some(70.0), Some(120.0)),
                Some((2, 0.0, true)),
            ),
            (
                // Ready exactly when eviction starts (+60): 0 s each.
                "ready at the first eviction",
                finished(2, Some(60.0), Some(60.0), Some(75.0), Some(120.0)),
                Some((2, 0.0, true)),
            ),
            (
                // Evicted at the deadline +90, ready at +94: 3 pods × 4 s = 12; done +100.
                "ready after the eviction",
                finished(3, Some(94.0), Some(90.0), Some(100.0), Some(120.0)),
                Some((3, 12.0, true)),
            ),
            (
                // Never ready: evicted at +90, done at +105: 2 × 15 s = 30; +105 <= +120.
                "never ready: counted to the drain's end",
                finished(2, None, Some(90.0), Some(105.0), Some(120.0)),
                Some((2, 30.0, true)),
            ),
            (
                // Never ready, evicted at +90, done at +130, past the end +120: 1 × 40 s.
                "finished after the instance's end",
                finished(1, None, Some(90.0), Some(130.0), Some(120.0)),
                Some((1, 40.0, false)),
            ),
            (
                // Done at exactly +120 = the end: met (no later than the end).
                "finished at the end itself",
                finished(1, Some(30.0), Some(100.0), Some(120.0), Some(120.0)),
                Some((1, 0.0, true)),
            ),
            (
                // A rebalance (no end) with nothing to move: no eviction, no gap, met.
                "no pods, no end",
                finished(0, Some(5.0), None, Some(5.0), None),
                Some((0, 0.0, true)),
            ),
            (
                // Still evicting: no figures yet.
                "not finished",
                finished(2, None, Some(90.0), None, Some(120.0)),
                None,
            ),
        ];
        for (row, state, expected) in rows {
            let got = drain_figures(&state)
                .map(|f| (f.pods_moved, f.serving_gap_replica_s, f.deadline_met));
            assert_eq!(got, expected, "{row}");
        }
    }
}
