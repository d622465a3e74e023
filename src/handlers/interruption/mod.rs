//! The SQS interruption handler: each record is parsed (`adapters::events`), each instance it
//! names is looked up, observed, planned (`core::interruption::plan_drain`) and one step executed
//! (`adapters::kube::drain::execute`). The Lambda never sleeps. When a claimed drain has work
//! left, the handler sends a continuation message delayed to the next check and acknowledges
//! the one it got (see [`queue`]: SQS is intake, not the clock). Work left before any claim (the
//! cluster unreachable) keeps its message, as a batch item failure whose visibility is set to the
//! next check. Poison is reported without touching its visibility, so the queue's redrive policy
//! moves it to the DLQ after maxReceiveCount.
//!
//! Records of a batch run concurrently, each under its own time limit, so one slow record never
//! holds the others up.

pub mod queue;

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_lambda_events::event::sqs::{BatchItemFailure, SqsBatchResponse, SqsEvent, SqsMessage};
use kube::runtime::events::Recorder;
use lambda_runtime::{service_fn, LambdaEvent};
use tokio::sync::OnceCell;

use crate::adapters::events::{
    parse_record_with, InstanceIdRule, Parsed, ParsedRecord, ResumeDrain,
};
use crate::adapters::kube::drain::execute::StepReport;
use crate::adapters::kube::drain::placeholder::PlaceholderSettings;
use crate::adapters::kube::drain::step::{step, Planned, Stepped};
use crate::adapters::kube::drain::{event_recorder, is_ready, surge};
use crate::adapters::kube::ClientCache;
use crate::config::Config;
use crate::core::interruption::{
    instance_end, notice_of_record, plan_drain, plan_resume, Command, DrainSettings, DrainStep,
    Finish, Notice, NoticeStatus,
};
use crate::core::TargetSpec;
use crate::error::{Error, Result};
use crate::telemetry::{EmfRecord, Unit};

pub use queue::{visibility_seconds, Continuation, RecordOutcome, Settlement};

/// A record's work stops this long before the invocation's deadline, to answer in time.
const ANSWER_MARGIN: Duration = Duration::from_secs(3);
/// At most this long per record, whatever the function timeout: one step of one drain is a
/// handful of apiserver calls, and a stuck call must not hold the batch (a crashed or timed-out
/// invocation's batch only comes back after the queue's visibility timeout).
const MAX_RECORD_TIME: Duration = Duration::from_secs(15);

/// What the handler needs, built once per execution environment.
pub struct Interruption {
    pub kube: ClientCache,
    pub sqs: aws_sdk_sqs::Client,
    pub queue_url: Option<String>,
    pub settings: DrainSettings,
    /// DRAIN_SURGE: raise a Deployment (or its HPA floor) before evicting its pods.
    pub surge: bool,
    /// BALLOON_PRIORITY_CLASS, PAUSE_IMAGE: what replacement placeholders are made of.
    pub placeholder: PlaceholderSettings,
    pub targets: Vec<TargetSpec>,
    /// PREWARM_TARGETS_CONFIGMAP: the targets are re-read from it for every record.
    pub targets_configmap: Option<crate::config::TargetsConfigMap>,
    pub emf_namespace: String,
    /// Which strings records may name as instances (ACCEPT_KWOK_INSTANCE_IDS).
    pub instance_ids: InstanceIdRule,
    /// The one Event recorder (built with the first client), so repeats aggregate into series.
    pub recorder: OnceCell<Recorder>,
}

pub async fn serve(config: Config) -> Result<()> {
    let handler = Arc::new(Interruption::from_config(&config).await?);
    lambda_runtime::run(service_fn(move |event: LambdaEvent<SqsEvent>| {
        let handler = handler.clone();
        async move {
            let deadline = event.context.deadline();
            Ok::<SqsBatchResponse, lambda_runtime::Error>(
                handler.handle_batch(event.payload, deadline).await,
            )
        }
    }))
    .await
    .map_err(|e| Error::Aws {
        service: "lambda".into(),
        operation: "runtime".into(),
        message: e.to_string(),
        retryable: false,
    })
}

fn now_s() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// `arn:aws:sqs:us-east-1:123456789012:name` -> `https://sqs.us-east-1.amazonaws.com/123456789012/name`.
pub fn queue_url_from_arn(arn: &str) -> Option<String> {
    let parts: Vec<&str> = arn.split(':').collect();
    match parts.as_slice() {
        ["arn", partition, "sqs", region, account, name] if !name.is_empty() => {
            let domain = if partition.starts_with("aws-cn") {
                "amazonaws.com.cn"
            } else {
                "amazonaws.com"
            };
            Some(format!("https://sqs.{region}.{domain}/{account}/{name}"))
        }
        _ => None,
    }
}

/// How long one record may take: until shortly before the invocation's deadline, at most
/// `MAX_RECORD_TIME`. A deadline already (nearly) past is not a real Lambda deadline — local
/// emulators send the invoke time — so it counts as unknown and `MAX_RECORD_TIME` applies.
pub fn record_budget(deadline: SystemTime, now: SystemTime) -> Duration {
    match deadline.duration_since(now) {
        Ok(left) if left > ANSWER_MARGIN + Duration::from_secs(1) => {
            (left - ANSWER_MARGIN).min(MAX_RECORD_TIME)
        }
        _ => MAX_RECORD_TIME,
    }
}

/// The drain planning settings of the configuration (shared with the tick's lease collection).
pub fn drain_settings(config: &Config) -> DrainSettings {
    DrainSettings {
        actions: config.interruption.actions.clone(),
        eviction_budget_s: config.interruption.eviction_budget_s,
        recheck_s: config.interruption.recheck_s,
        delete_past_pdb: config.interruption.delete_past_pdb,
    }
}

impl Interruption {
    pub async fn from_config(config: &Config) -> Result<Self> {
        let access = config.require_cluster()?.clone();
        let sdk = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
        Ok(Interruption {
            kube: ClientCache::new(access),
            sqs: aws_sdk_sqs::Client::new(&sdk),
            queue_url: config.interruption.queue_url.clone(),
            settings: drain_settings(config),
            surge: config.interruption.surge,
            placeholder: config.interruption.placeholder.clone(),
            targets: config.targets.clone(),
            targets_configmap: config.targets_configmap.clone(),
            emf_namespace: config.emf_namespace.clone(),
            instance_ids: config.interruption.instance_ids,
            recorder: OnceCell::new(),
        })
    }

    /// Handles a batch; the response lists the records to keep (batch item failures).
    pub async fn handle_batch(&self, event: SqsEvent, deadline: SystemTime) -> SqsBatchResponse {
        let budget = record_budget(deadline, SystemTime::now());
        let outcomes = futures::future::join_all(event.records.iter().map(|m| async move {
            let record = parse_record_with(m, self.instance_ids);
            let came_with = Continuation::of(&m.message_attributes);
            let outcome =
                match tokio::time::timeout(budget, self.handle_record(&record, &came_with)).await {
                    Ok(o) => o,
                    // Whether the step claimed the node is unknown: keep the message (if it did,
                    // the next delivery is a duplicate of a live drain and collapses).
                    Err(_) => RecordOutcome::Later {
                        at: now_s() + self.settings.recheck_s,
                        reason: format!("record took longer than {budget:?}"),
                    },
                };
            let kept = self.settle(m, &record, &came_with, &outcome).await;
            (record.message_id, kept)
        }))
        .await;
        let mut response = SqsBatchResponse::default();
        for (message_id, kept) in outcomes {
            if kept {
                let mut failure = BatchItemFailure::default();
                failure.item_identifier = message_id;
                response.batch_item_failures.push(failure);
            }
        }
        response
    }

    /// Carries out the record's settlement and logs it; true when the message is kept (a batch
    /// item failure).
    async fn settle(
        &self,
        message: &SqsMessage,
        record: &ParsedRecord,
        came_with: &Continuation,
        outcome: &RecordOutcome,
    ) -> bool {
        let now = now_s();
        let mut settlement = queue::settle(outcome, came_with, now);
        let mut sent = 0;
        if let Settlement::Send {
            continuations,
            on_failure,
        } = &settlement
        {
            match self.send_continuations(message, continuations).await {
                Ok(n) => {
                    sent = n;
                    settlement = Settlement::Delete;
                }
                Err(e) => {
                    tracing::warn!(message_id = %record.message_id, error = %e,
                        "could not send the continuation: the message itself is kept instead");
                    settlement = (**on_failure).clone();
                }
            }
        }
        let reason = match outcome {
            RecordOutcome::Delete { reason }
            | RecordOutcome::Continue { reason, .. }
            | RecordOutcome::Later { reason, .. } => reason.clone(),
            RecordOutcome::FanOut {
                instances,
                resume_from,
            } => format!(
                "fanned out {} instances{}",
                instances.len(),
                resume_from.map_or(String::new(), |f| format!(", resuming from #{f}"))
            ),
            RecordOutcome::Poison { cause } => cause.clone(),
        };
        match settlement {
            Settlement::Delete => {
                tracing::info!(
                    message_id = %record.message_id, outcome = "delete", reason = %reason,
                    continuations_sent = sent, attempt = came_with.attempt,
                    "record settled"
                );
                false
            }
            Settlement::Fail => {
                tracing::error!(
                    message_id = %record.message_id, outcome = "poison", cause = %reason,
                    receive_count = record.receive_count, attempt = came_with.attempt,
                    "reported as failed so SQS moves it to the dead-letter queue"
                );
                true
            }
            Settlement::Retry { visibility_s } => {
                let visibility = self.change_visibility(message, visibility_s).await;
                tracing::info!(
                    message_id = %record.message_id, outcome = "later", reason = %reason,
                    next_check_in_s = visibility_s, receive_count = record.receive_count,
                    visibility = %visibility.as_ref().map_or_else(|e| e.to_string(), |_| "set".into()),
                    "record not finished: it comes back at its next check"
                );
                true
            }
            Settlement::Send { .. } => unreachable!("sending was settled above"),
        }
    }

    fn queue_url(&self, message: &SqsMessage) -> Result<String> {
        self.queue_url
            .clone()
            .or_else(|| {
                message
                    .event_source_arn
                    .as_deref()
                    .and_then(queue_url_from_arn)
            })
            .ok_or_else(|| {
                Error::config(
                    "INTERRUPTION_QUEUE_URL",
                    "not set and the record has no queue ARN",
                )
            })
    }

    /// Sends the continuations (same body, their own attributes and delay), ten per call.
    async fn send_continuations(
        &self,
        message: &SqsMessage,
        continuations: &[(Continuation, i32)],
    ) -> Result<usize> {
        use aws_sdk_sqs::types::{MessageAttributeValue, SendMessageBatchRequestEntry};
        let queue_url = self.queue_url(message)?;
        let body = message.body.clone().unwrap_or_default();
        let aws_error = |message: String| Error::Aws {
            service: "sqs".into(),
            operation: "SendMessageBatch".into(),
            message,
            retryable: true,
        };
        for (chunk_no, chunk) in continuations.chunks(10).enumerate() {
            let mut batch = self.sqs.send_message_batch().queue_url(&queue_url);
            for (i, (c, delay)) in chunk.iter().enumerate() {
                let mut entry = SendMessageBatchRequestEntry::builder()
                    .id(format!("c{}", chunk_no * 10 + i))
                    .message_body(&body)
                    .delay_seconds(*delay);
                for (name, data_type, value) in c.attributes() {
                    let value = MessageAttributeValue::builder()
                        .data_type(data_type)
                        .string_value(value)
                        .build()
                        .map_err(|e| aws_error(e.to_string()))?;
                    entry = entry.message_attributes(name, value);
                }
                batch = batch.entries(entry.build().map_err(|e| aws_error(e.to_string()))?);
            }
            let out = batch
                .send()
                .await
                .map_err(|e| aws_error(aws_sdk_sqs::error::DisplayErrorContext(&e).to_string()))?;
            if !out.failed.is_empty() {
                return Err(aws_error(format!(
                    "{} of {} continuations refused: {:?}",
                    out.failed.len(),
                    chunk.len(),
                    out.failed
                        .iter()
                        .map(|f| f.message.clone())
                        .collect::<Vec<_>>()
                )));
            }
        }
        Ok(continuations.len())
    }

    async fn change_visibility(&self, message: &SqsMessage, seconds: i32) -> Result<()> {
        let queue_url = self.queue_url(message)?;
        let handle = message.receipt_handle.clone().ok_or_else(|| Error::Aws {
            service: "sqs".into(),
            operation: "ChangeMessageVisibility".into(),
            message: "the record has no receipt handle".into(),
            retryable: false,
        })?;
        self.sqs
            .change_message_visibility()
            .queue_url(queue_url)
            .receipt_handle(handle)
            .visibility_timeout(seconds)
            .send()
            .await
            .map(|_| ())
            .map_err(|e| Error::Aws {
                service: "sqs".into(),
                operation: "ChangeMessageVisibility".into(),
                message: aws_sdk_sqs::error::DisplayErrorContext(&e).to_string(),
                retryable: true,
            })
    }

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
            Parsed::Notice(n) => n,
        };
        // Which instance this delivery is about: the one a continuation names, or the notice's
        // only one; a notice naming several fans out first (bounded work per invocation).
        let instance = match (&came_with.instance, notice.instance_ids.as_slice()) {
            (Some(i), ids) if ids.contains(i) => i.clone(),
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
            (None, ids) => {
                let (instances, resume_from) =
                    queue::fan_out(ids, came_with.fanout_from.unwrap_or(0));
                return RecordOutcome::FanOut {
                    instances,
                    resume_from,
                };
            }
        };
        if *came_with == Continuation::default() && record.receive_count <= 1 {
            EmfRecord::new()
                .dimension("Kind", notice.kind.as_str())
                .metric("NoticesReceived", 1.0, Unit::Count)
                .emit(&self.emf_namespace);
        }
        let (client, recorder, targets) = match self.cluster().await {
            Ok(c) => c,
            Err(later) => return later,
        };
        let stepped = step(
            &client,
            recorder,
            &targets,
            &instance,
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
            now_s,
        )
        .await;
        self.outcome_of(stepped, &instance, Some(notice))
    }

    /// The client, the one recorder and the current targets; `Err` is the outcome when the
    /// cluster cannot be reached (the message is kept and looked at again).
    async fn cluster(
        &self,
    ) -> std::result::Result<(kube::Client, &Recorder, Vec<TargetSpec>), RecordOutcome> {
        let client = self.kube.get().await.map_err(|e| RecordOutcome::Later {
            at: now_s() + self.settings.recheck_s,
            reason: format!("no Kubernetes client: {e}"),
        })?;
        let recorder = self
            .recorder
            .get_or_init(|| async { event_recorder(&client) })
            .await;
        // A missing or bad targets ConfigMap costs the replacement capacity, never the drain.
        let targets = crate::adapters::kube::targets::current_or_report(
            self.targets_configmap.as_ref(),
            &self.targets,
            &client,
            &self.emf_namespace,
        )
        .await
        .unwrap_or_default();
        Ok((client, recorder, targets))
    }

    /// A resume-drain message (the tick's): the node's own record is the notice. Its first
    /// delivery acts only if the tick's verdict still holds; its continuations own the drain.
    async fn handle_resume(
        &self,
        record: &ParsedRecord,
        resume: &ResumeDrain,
        came_with: &Continuation,
    ) -> RecordOutcome {
        let (client, recorder, targets) = match self.cluster().await {
            Ok(c) => c,
            Err(later) => return later,
        };
        let adopted = came_with.attempt > 0;
        let stepped = step(
            &client,
            recorder,
            &targets,
            &resume.instance,
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
            now_s,
        )
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
        let later = |reason: String| RecordOutcome::Later {
            at: now_s() + self.settings.recheck_s,
            reason: format!("{instance}: {reason}"),
        };
        let stepped = match stepped {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(event_id = notice.map_or("(resume-drain)", |n| n.event_id.as_str()),
                    instance, error = %e, error_kind = e.kind(),
                    "drain step failed; retrying at the next check");
                return later(e.to_string());
            }
        };
        let (observed, planned, report, now) = match stepped {
            Stepped::NodeGone { released } => {
                if let Some(n) = notice {
                    for t in &released {
                        tracing::info!(event_id = %n.event_id, instance, released = %t,
                            "node gone: replacement released");
                    }
                    self.log_step(
                        n,
                        instance,
                        None,
                        "not-in-cluster",
                        &StepReport::default(),
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
            self.emit_metrics(n, &observed.view.state, step, &report, now);
            let phase = step.state.as_ref().map_or("none", |s| s.phase.as_str());
            self.log_step(
                n,
                instance,
                Some(&observed.view.name),
                phase,
                &report,
                Some(step),
            );
        }
        if !report.eviction_errors.is_empty() {
            tracing::warn!(event_id = %planned.event_id, errors = ?report.eviction_errors, "evictions failed");
        }
        if !report.release_errors.is_empty() {
            // Finished on the node, but the reservation is still held: not done until it is
            // given back (the next step plans the release again).
            return RecordOutcome::Continue {
                at: now + self.settings.recheck_s,
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

    fn emit_metrics(
        &self,
        notice: &Notice,
        before: &Option<crate::core::interruption::DrainState>,
        step: &DrainStep,
        report: &StepReport,
        now: f64,
    ) {
        let kind = notice.kind.as_str();
        let mut emf = EmfRecord::new().dimension("Kind", kind);
        if report.cordoned {
            emf = emf.metric(
                "NoticeToCordonMs",
                (now - notice.time) * 1000.0,
                Unit::Milliseconds,
            );
        }
        let was_ready = before.as_ref().and_then(|s| s.replacement_ready_at);
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
        if step.last() == &Command::Done(Finish::Drained) {
            let in_time = instance_end(notice).is_none_or(|end| now <= end);
            emf = emf.metric(
                "DrainsBeforeDeadline",
                if in_time { 1.0 } else { 0.0 },
                Unit::Count,
            );
        }
        emf.emit(&self.emf_namespace);
    }

    fn log_step(
        &self,
        notice: &Notice,
        instance: &str,
        node: Option<&str>,
        phase: &str,
        report: &StepReport,
        step: Option<&DrainStep>,
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
        let latency_ms = ((now_s() - notice.time) * 1000.0).round() as i64;
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
            latency_ms,
            "drain step"
        );
    }
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
    }
}

/// One line per step that surged, held evictions back, or failed to surge.
fn log_surge(event_id: &str, instance: &str, report: &surge::SurgeReport) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_urls_from_arns() {
        assert_eq!(
            queue_url_from_arn("arn:aws:sqs:us-east-1:123456789012:prewarm-InterruptionQueue-1A2B"),
            Some(
                "https://sqs.us-east-1.amazonaws.com/123456789012/prewarm-InterruptionQueue-1A2B"
                    .into()
            )
        );
        assert_eq!(
            queue_url_from_arn("arn:aws-cn:sqs:cn-north-1:1:q"),
            Some("https://sqs.cn-north-1.amazonaws.com.cn/1/q".into())
        );
        assert_eq!(queue_url_from_arn("arn:aws:sns:us-east-1:1:topic"), None);
        assert_eq!(queue_url_from_arn("not an arn"), None);
    }

    #[test]
    fn each_record_gets_the_time_left_minus_a_margin_within_bounds() {
        let now = UNIX_EPOCH + Duration::from_secs(1_000_000);
        let s = Duration::from_secs;
        let cases = [
            (now + s(900), s(15)), // 15 min left: capped
            (now + s(20), s(15)),  // the template's 20 s timeout: capped too
            (now + s(10), s(7)),   // 10 s left: minus the 3 s margin
            (now + s(2), s(15)),   // not a real deadline
            (now - s(5), s(15)),   // in the past (emulators)
        ];
        for (deadline, expected) in cases {
            assert_eq!(record_budget(deadline, now), expected, "{deadline:?}");
        }
    }
}
