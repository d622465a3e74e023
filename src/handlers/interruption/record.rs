//! One SQS record of the interruption queue: route it (poison, ignored, a notice, the tick's
//! resume-drain message; a notice naming several instances, or a capacity reservation, fans
//! out), step the drain of its instance (`super::step`), and turn what the step did into the
//! record's outcome, with its log lines and metrics.

use kube::runtime::events::Recorder;

use super::queue::{self, Continuation, RecordOutcome};
use super::step::{step, Planned, Stepped};
use super::targets::DrainTargets;
use super::Interruption;
use crate::adapters::events::{instance_id, Parsed, ParsedRecord, ResumeDrain};
use crate::adapters::kube::drain::execute::StepReport;
use crate::adapters::kube::drain::{event_recorder, is_ready};
use crate::clock::unix_now;
use crate::core::interruption::surge_step::SurgePlan;
use crate::core::interruption::{
    notice_of_record, plan_drain, plan_resume, Command, DrainFigures, DrainStep, Finish, Notice,
    NoticeStatus,
};
use crate::error::Result;
use crate::telemetry::{EmfRecord, Unit};

impl Interruption {
    pub async fn handle_record(
        &self,
        record: &ParsedRecord,
        came_with: &Continuation,
    ) -> RecordOutcome {
        let notice = match &record.parsed {
            Parsed::Poison { cause } => {
                return RecordOutcome::Poison {
                    cause: cause.clone(),
                }
            }
            Parsed::Ignored { event_id, reason } => {
                tracing::info!(message_id = %record.message_id, event_id = ?event_id, reason = %reason, "ignored");
                return RecordOutcome::Delete {
                    reason: format!("ignored: {reason}"),
                };
            }
            Parsed::Resume(r) => return self.handle_resume(record, r, came_with).await,
            Parsed::Notice(n) => &Notice {
                scheduled: came_with.scheduled(),
                ..n.clone()
            },
        };
        // A Capacity Block warning names its reservation: its instances are found and fanned out
        // first (`super::reservation`); each continuation then names one of them.
        if let (Some(reservation), None) = (&notice.reservation_id, &came_with.instance) {
            return self
                .fan_out_reservation(record, notice, reservation, came_with)
                .await;
        }
        // Which instance this delivery is about: the one a continuation names, or the notice's
        // only one; a notice naming several fans out first (bounded work per invocation).
        let instance = match (&came_with.instance, notice.instance_ids.as_slice()) {
            (Some(i), ids) if ids.contains(i) => i.clone(),
            // The reservation's fan-out named it: still an instance id, like any the notice names.
            (Some(i), _)
                if notice.reservation_id.is_some()
                    && instance_id::check(i, self.instance_ids).is_ok() =>
            {
                i.clone()
            }
            (Some(i), _) => {
                return RecordOutcome::Poison {
                    cause: format!(
                        "the continuation names instance {i}, which its notice does not"
                    ),
                }
            }
            (None, [only]) => only.clone(),
            (None, []) => {
                return RecordOutcome::Delete {
                    reason: "the notice names no instance".into(),
                }
            }
            (None, ids) => return queue::fan_out_step(ids, came_with),
        };
        if *came_with == Continuation::default() && record.receive_count <= 1 {
            EmfRecord::new()
                .dimension("Kind", notice.kind.as_str())
                .metric("NoticesReceived", 1.0, Unit::Count)
                .emit(&self.emf_namespace);
        }
        let (client, recorder) = match self.cluster().await {
            Ok(c) => c,
            Err(later) => return later,
        };
        // Boxed: a drain step's future is large (see step.rs).
        let stepped = Box::pin(step(
            &client,
            recorder,
            &DrainTargets::new(self, &client),
            &self.nodes,
            &instance,
            notice.sent_time.unwrap_or_else(unix_now),
            came_with.scheduled(),
            self.surge,
            &self.placeholder,
            |o, now| {
                if let Some(e) = &o.state_error {
                    tracing::warn!(event_id = %notice.event_id, node = %o.view.name, error = %e,
                        "drain annotations unreadable: starting over");
                }
                Planned {
                    step: plan_drain(&o.view, &o.pod_views, notice, now, &self.settings),
                    event_id: notice.event_id.clone(),
                }
            },
            unix_now,
        ))
        .await;
        self.outcome_of(stepped, &instance, Some(notice))
    }

    /// The client and the one recorder; `Err` is the outcome when the cluster cannot be reached
    /// (tried again: `failure`).
    pub(super) async fn cluster(
        &self,
    ) -> std::result::Result<(kube::Client, &Recorder), RecordOutcome> {
        let client = self
            .kube
            .get(crate::clock::system_now())
            .await
            .map_err(|e| RecordOutcome::Failed {
                retryable: e.retryable(),
                reason: format!("no Kubernetes client: {e}"),
            })?;
        let recorder = self
            .recorder
            .get_or_init(|| async { event_recorder(&client) })
            .await;
        Ok((client, recorder))
    }

    /// A resume-drain message (the tick's): the node's own record is the notice. Its first
    /// delivery acts only if the tick's verdict still holds; its continuations own the drain.
    async fn handle_resume(
        &self,
        record: &ParsedRecord,
        resume: &ResumeDrain,
        came_with: &Continuation,
    ) -> RecordOutcome {
        let (client, recorder) = match self.cluster().await {
            Ok(c) => c,
            Err(later) => return later,
        };
        let adopted = came_with.attempt > 0;
        // Boxed: a drain step's future is large (see step.rs).
        let stepped = Box::pin(step(
            &client,
            recorder,
            &DrainTargets::new(self, &client),
            &self.nodes,
            &resume.instance,
            // The tick named a node it had just seen; its own list is not this container's.
            unix_now(),
            // The tick named a drain: whatever it holds goes with a node gone.
            true,
            self.surge,
            &self.placeholder,
            |o, now| {
                if o.view.name != resume.node {
                    tracing::warn!(message_id = %record.message_id, instance = %resume.instance,
                        node = %o.view.name, named = %resume.node,
                        "the instance's node is not the one the tick named; stepping the instance's");
                }
                let step = plan_resume(
                    &o.view,
                    &o.pod_views,
                    is_ready(&o.node),
                    &resume.instance,
                    adopted,
                    now,
                    &self.settings,
                );
                let event_id = o
                    .view
                    .state
                    .as_ref()
                    .map_or_else(|| "(resume-drain)".to_string(), |s| s.event_id.clone());
                Planned { step, event_id }
            },
            unix_now,
        ))
        .await;
        self.outcome_of(stepped, &resume.instance, None)
    }

    /// The record's outcome from a step (logged, with metrics). `notice`: the notice the step
    /// was for; None for a resume-drain message (the node's record stands for it).
    fn outcome_of(
        &self,
        stepped: Result<Stepped>,
        instance: &str,
        notice: Option<&Notice>,
    ) -> RecordOutcome {
        let stepped = match stepped {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(event_id = notice.map_or("(resume-drain)", |n| n.event_id.as_str()),
                    instance, error = %e, error_kind = e.kind(), retryable = e.retryable(),
                    "drain step failed");
                return RecordOutcome::Failed {
                    retryable: e.retryable(),
                    reason: format!("{instance}: {e}"),
                };
            }
        };
        let (observed, planned, report, now) = match stepped {
            Stepped::NodeGone { released } => {
                if let Some(n) = notice {
                    for t in &released {
                        tracing::info!(event_id = %n.event_id, instance, released = %t,
                            "node gone: replacement released");
                    }
                    log_step(
                        n,
                        instance,
                        None,
                        "not-in-cluster",
                        &StepReport::default(),
                        None,
                        None,
                    );
                } else {
                    tracing::info!(instance, released = ?released,
                        "resume-drain: the node is gone; nothing to drain");
                }
                return RecordOutcome::Delete {
                    reason: format!("{instance}: not in this cluster"),
                };
            }
            Stepped::Done {
                observed,
                planned,
                report,
                surge,
                now,
            } => {
                if let Some(surge) = &surge {
                    log_surge(&planned.event_id, instance, surge);
                }
                (observed, planned, report, now)
            }
        };
        let step = &planned.step;
        // The notice the step stood for: the record's own for a resume-drain message.
        let of_record = observed
            .view
            .state
            .as_ref()
            .map(|s| notice_of_record(s, instance, NoticeStatus::Active));
        if let Some(n) = notice.or(of_record.as_ref()) {
            let before = observed.view.state.as_ref();
            super::metrics::step_metrics(n, before, step, &report, now).emit(&self.emf_namespace);
            let finished = super::metrics::finished_drain(before, step);
            let phase = step.state.as_ref().map_or("none", |s| s.phase.as_str());
            log_step(
                n,
                instance,
                Some(&observed.view.name),
                phase,
                &report,
                Some(step),
                finished.as_ref(),
            );
        }
        if !report.eviction_errors.is_empty() {
            tracing::warn!(event_id = %planned.event_id, errors = ?report.eviction_errors, "evictions failed");
        }
        if !report.release_errors.is_empty() {
            // Finished on the node, but the reservation is still held: not done until it is
            // given back (the next step plans the release again). A step that still waits keeps
            // its own check when that is sooner (a hand-over right before the deadline).
            let retry = now + self.settings.recheck_s;
            return RecordOutcome::Continue {
                at: match step.last() {
                    Command::WaitUntil { at } => at.min(retry),
                    _ => retry,
                },
                reason: format!("{instance}: replacement not released yet"),
            };
        }
        match step.last() {
            Command::Done(finish) => RecordOutcome::Delete {
                reason: format!("{instance}: {}", finish_reason(finish)),
            },
            Command::WaitUntil { at } => RecordOutcome::Continue {
                at: *at,
                reason: format!("{instance}: in progress"),
            },
            other => unreachable!("a step ends in Done or WaitUntil, not {other:?}"),
        }
    }
}

/// The step's log line (and one per pod a PodDisruptionBudget keeps).
fn log_step(
    notice: &Notice,
    instance: &str,
    node: Option<&str>,
    phase: &str,
    report: &StepReport,
    step: Option<&DrainStep>,
    finished: Option<&DrainFigures>,
) {
    let next = step.and_then(|s| match s.last() {
        Command::WaitUntil { at } => Some(crate::core::interruption::state::format_time(*at)),
        _ => None,
    });
    let done = step.and_then(|s| match s.last() {
        Command::Done(f) => Some(finish_reason(f)),
        _ => None,
    });
    let blocked: Vec<String> = report
        .blocked
        .iter()
        .map(|b| format!("{} ({})", b.pod, b.pdbs.join(",")))
        .collect();
    let latency_ms = ((unix_now() - notice.time) * 1000.0).round() as i64;
    // One line per pod a PodDisruptionBudget keeps, so "drains blocked" can be queried by pod.
    for b in &report.blocked {
        tracing::warn!(
            event = "drain_blocked",
            event_id = %notice.event_id,
            kind = notice.kind.as_str(),
            instance,
            node = node.unwrap_or(""),
            pod = %b.pod,
            pdb = %b.pdbs.join(","),
            latency_ms,
            "eviction refused by a PodDisruptionBudget"
        );
    }
    tracing::info!(
        event = "interruption",
        event_id = %notice.event_id,
        kind = notice.kind.as_str(),
        instance,
        node = node.unwrap_or(""),
        phase,
        cordoned = report.cordoned,
        replacement = ?report.requested,
        replacement_error = report.request_error.as_deref().unwrap_or(""),
        limits_room = report.room.as_deref().unwrap_or(""),
        pods_evicted = report.evicted.len(),
        pods_blocked = report.blocked.len(),
        pods_deleted_past_pdb = report.deleted_past_pdb.len(),
        blocked = ?blocked,
        released = ?report.released,
        next_check = next.as_deref().unwrap_or(""),
        done = done.as_deref().unwrap_or(""),
        // The drain's figures, on the line of the step that finishes it (its EMF metrics).
        drain_pods_moved = finished.map(|f| f.pods_moved),
        serving_gap_replica_s = finished.map(|f| f.serving_gap_replica_s),
        deadline_met = finished.map(|f| f.deadline_met),
        latency_ms,
        "drain step"
    );
}

fn finish_reason(f: &Finish) -> String {
    match f {
        Finish::Drained => "drained".into(),
        Finish::Prewarmed => "replacement ready, pods left serving (cordon-prewarm)".into(),
        Finish::Ignored => "ACTIONS says ignore".into(),
        Finish::Superseded { by_event } => {
            format!("moot: node already draining for event {by_event}")
        }
        Finish::Duplicate => "duplicate delivery: another delivery carries this drain".into(),
        Finish::Undrained => "notice closed: node un-drained, replacement released".into(),
        Finish::NothingToUndo => "notice closed: this notice never drained the node".into(),
        Finish::Moot { reason } => format!("resume-drain: {reason}"),
        Finish::CoolingDown { until } => format!(
            "rebalance within the cool-down after a false alarm on this node (until {})",
            crate::core::interruption::state::format_time(*until)
        ),
    }
}

/// One line per step that surged, held evictions back, or failed to surge.
fn log_surge(event_id: &str, instance: &str, report: &SurgePlan) {
    if report.workloads.is_empty() && report.errors.is_empty() {
        return;
    }
    let held: Vec<String> = report.held.iter().map(ToString::to_string).collect();
    if report.errors.is_empty() {
        tracing::info!(event = "drain_surge", event_id, instance,
            workloads = ?report.workloads, held = ?held, "surge before eviction");
    } else {
        tracing::warn!(event = "drain_surge", event_id, instance,
            workloads = ?report.workloads, held = ?held, errors = ?report.errors,
            "surge failed for some workloads: their evictions go ahead as planned");
    }
}
