//! The EMF metrics of one drain step (dimension `Kind`): what the step did, and, at the step that
//! finishes a drain, what the whole drain came to (`core::interruption::drain_figures`). The
//! names are template.yaml's contract; docs/operations.md lists them.

use crate::adapters::kube::drain::execute::StepReport;
use crate::core::interruption::{
    drain_figures, ends_drain, DrainFigures, DrainState, DrainStep, Notice,
};
use crate::telemetry::{EmfRecord, Unit};

/// The metrics of a step planned from the node's state `before`, executed as `report`, at `now`.
pub(super) fn step_metrics(
    notice: &Notice,
    before: Option<&DrainState>,
    step: &DrainStep,
    report: &StepReport,
    now: f64,
) -> EmfRecord {
    let mut emf = EmfRecord::new().dimension("Kind", notice.kind.as_str());
    if report.cordoned {
        emf = emf.metric(
            "NoticeToCordonMs",
            (now - notice.time) * 1000.0,
            Unit::Milliseconds,
        );
    }
    let was_ready = before.and_then(|s| s.replacement_ready_at);
    if let (None, Some(ready)) = (
        was_ready,
        step.state.as_ref().and_then(|s| s.replacement_ready_at),
    ) {
        emf = emf.metric(
            "NoticeToReplacementReadyMs",
            (ready - notice.time) * 1000.0,
            Unit::Milliseconds,
        );
    }
    if !report.blocked.is_empty() {
        emf = emf.metric("BlockedPods", report.blocked.len() as f64, Unit::Count);
    }
    if let Some(figures) = finished_drain(before, step) {
        emf = emf
            .metric(
                "DrainsBeforeDeadline",
                if figures.deadline_met { 1.0 } else { 0.0 },
                Unit::Count,
            )
            .metric("PodsMoved", f64::from(figures.pods_moved), Unit::Count)
            .metric(
                "ServingGapReplicaSeconds",
                figures.serving_gap_replica_s,
                Unit::None,
            );
    }
    emf
}

/// What the drain came to, when `step` (planned from the node's state `before`) is the one that
/// ends it (`ends_drain`): once per drain. None for every other step.
pub(super) fn finished_drain(
    before: Option<&DrainState>,
    step: &DrainStep,
) -> Option<DrainFigures> {
    step.state
        .as_ref()
        .and_then(drain_figures)
        .filter(|_| ends_drain(before, step))
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;
    use crate::core::interruption::{
        notice_of_record, Command, Finish, NoticeKind, NoticeStatus, Phase,
    };

    const T: f64 = 1_795_953_600.0; // the notice, 2026-11-29T12:00:00Z

    /// The spot warning the drain stands for (as a resume-drain message reads it from the node).
    fn notice() -> Notice {
        notice_of_record(&evicting(), "i-0123456789abcdef0", NoticeStatus::Active)
    }

    /// The drain before its last step: evicting since the deadline T + 90 (its replacement never
    /// became ready), 2 pods moved, instance end T + 120.
    fn evicting() -> DrainState {
        DrainState {
            event_id: "e-1".into(),
            kind: NoticeKind::SpotInterruption,
            phase: Phase::Evicting,
            notice_time: T,
            event_time: Some(T),
            deadline: Some(T + 90.0),
            started_at: T + 1.0,
            replacement_requested_at: Some(T + 1.0),
            replacement_ready_at: None,
            evicting_since: Some(T + 90.0),
            finished_at: None,
            replacement_gpus: 8,
            instance_end: Some(T + 120.0),
            last_step_at: Some(T + 90.0),
            next_check_at: Some(T + 105.0),
            user_cordoned: false,
            pods_moved: 2,
        }
    }

    /// The step that finds the node empty at T + 105.
    fn drained_at_105() -> DrainStep {
        let state = DrainState {
            phase: Phase::Drained,
            finished_at: Some(T + 105.0),
            last_step_at: Some(T + 105.0),
            next_check_at: None,
            ..evicting()
        };
        DrainStep {
            commands: vec![
                Command::RecordState {
                    state: state.clone(),
                },
                Command::ReleaseReplacement,
                Command::Done(Finish::Drained),
            ],
            state: Some(state),
        }
    }

    fn rendered(before: &DrainState) -> Value {
        let line = step_metrics(
            &notice(),
            Some(before),
            &drained_at_105(),
            &StepReport::default(),
            T + 105.0,
        )
        .render("Prewarm", 1_795_953_705_000);
        serde_json::from_str(&line).unwrap()
    }

    #[test]
    fn the_step_that_drains_publishes_the_drains_figures_once() {
        let v = rendered(&evicting());
        assert_eq!(v["Kind"], "spot-interruption");
        // 2 pods moved; never ready: from eviction T + 90 to the end T + 105, 2 × 15 = 30
        // replica-s; finished at T + 105 <= end T + 120: met.
        assert_eq!(v["PodsMoved"], 2.0);
        assert_eq!(v["ServingGapReplicaSeconds"], 30.0);
        assert_eq!(v["DrainsBeforeDeadline"], 1.0);
        let decl = &v["_aws"]["CloudWatchMetrics"][0];
        assert_eq!(decl["Dimensions"], json!([["Kind"]]));
        assert_eq!(
            decl["Metrics"],
            json!([
                {"Name": "DrainsBeforeDeadline", "Unit": "Count"},
                {"Name": "PodsMoved", "Unit": "Count"},
                {"Name": "ServingGapReplicaSeconds", "Unit": "None"},
            ])
        );
        // A later delivery that finds the node already drained publishes no second drain.
        let again = DrainState {
            phase: Phase::Drained,
            finished_at: Some(T + 105.0),
            ..evicting()
        };
        let v = rendered(&again);
        for name in [
            "PodsMoved",
            "ServingGapReplicaSeconds",
            "DrainsBeforeDeadline",
        ] {
            assert!(v.get(name).is_none(), "{name} published twice: {v}");
        }
        // Nor does the step that drains a straggler evicted after the end (T + 100, kept).
        let straggler = DrainState {
            finished_at: Some(T + 100.0),
            ..evicting()
        };
        let v = rendered(&straggler);
        assert!(v.get("PodsMoved").is_none(), "published twice: {v}");
    }
}
