//! The SQS interruption handler: each record is parsed (`adapters::events`), each instance it
//! names is looked up, observed, planned (`core::interruption::plan_drain`) and one step executed
//! (`adapters::kube::drain::execute`). The Lambda never sleeps: when work remains, the record is
//! reported as a batch item failure and its message's visibility is set to the next check time
//! (ChangeMessageVisibility), so SQS hands it back then. A message is deleted (not reported) only
//! when its nodes are drained, gone, or the work is moot; poison is reported without touching its
//! visibility, so the queue's redrive policy moves it to the DLQ after maxReceiveCount.
//!
//! Records of a batch run concurrently, each under its own time limit, so one slow record never
//! holds the others up.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_lambda_events::event::sqs::{BatchItemFailure, SqsBatchResponse, SqsEvent, SqsMessage};
use lambda_runtime::{service_fn, LambdaEvent};

use crate::adapters::events::{parse_record_with, InstanceIdRule, Parsed, ParsedRecord};
use crate::adapters::kube::drain::execute::{execute, StepReport};
use crate::adapters::kube::drain::replacement;
use crate::adapters::kube::drain::{find_node, observe};
use crate::adapters::kube::ClientCache;
use crate::config::Config;
use crate::core::interruption::{
    instance_end, plan_drain, Command, DrainSettings, DrainStep, Finish, Notice,
};
use crate::core::TargetSpec;
use crate::error::{Error, Result};
use crate::telemetry::{EmfRecord, Unit};

/// SQS refuses visibility timeouts above 12 hours.
const MAX_VISIBILITY_S: f64 = 43_200.0;
/// A record's work stops this long before the invocation's deadline, to answer in time.
const ANSWER_MARGIN: Duration = Duration::from_secs(3);
/// At most this long per record, whatever the function timeout: a stuck apiserver call must
/// not eat the whole invocation.
const MAX_RECORD_TIME: Duration = Duration::from_secs(60);
/// Node writes that conflict are re-observed and re-planned this often within one check.
const PLAN_ATTEMPTS: usize = 3;

/// What the handler needs, built once per execution environment.
pub struct Interruption {
    pub kube: ClientCache,
    pub sqs: aws_sdk_sqs::Client,
    pub queue_url: Option<String>,
    pub settings: DrainSettings,
    pub targets: Vec<TargetSpec>,
    pub emf_namespace: String,
    /// Which strings records may name as instances (ACCEPT_KWOK_INSTANCE_IDS).
    pub instance_ids: InstanceIdRule,
}

/// What became of one record.
#[derive(Clone, Debug, PartialEq)]
pub enum RecordOutcome {
    /// Finished: the message is deleted.
    Delete { reason: String },
    /// Work remains: look again at `at` (seconds since the epoch).
    Later { at: f64, reason: String },
    /// Can never be processed: to the DLQ after maxReceiveCount.
    Poison { cause: String },
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

/// Seconds until `at`, as SQS takes them (whole seconds, 0..=12 h).
pub fn visibility_seconds(at: f64, now: f64) -> i32 {
    (at - now).ceil().clamp(0.0, MAX_VISIBILITY_S) as i32
}

impl Interruption {
    pub async fn from_config(config: &Config) -> Result<Self> {
        let access = config.require_cluster()?.clone();
        let sdk = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
        Ok(Interruption {
            kube: ClientCache::new(access),
            sqs: aws_sdk_sqs::Client::new(&sdk),
            queue_url: config.interruption.queue_url.clone(),
            settings: DrainSettings {
                actions: config.interruption.actions.clone(),
                eviction_budget_s: config.interruption.eviction_budget_s,
                recheck_s: config.interruption.recheck_s,
            },
            targets: config.targets.clone(),
            emf_namespace: config.emf_namespace.clone(),
            instance_ids: config.interruption.instance_ids,
        })
    }

    /// Handles a batch; the response lists the records to keep (batch item failures).
    pub async fn handle_batch(&self, event: SqsEvent, deadline: SystemTime) -> SqsBatchResponse {
        let budget = record_budget(deadline, SystemTime::now());
        let outcomes = futures::future::join_all(event.records.iter().map(|m| async move {
            let record = parse_record_with(m, self.instance_ids);
            let outcome = match tokio::time::timeout(budget, self.handle_record(&record)).await {
                Ok(o) => o,
                Err(_) => RecordOutcome::Later {
                    at: now_s() + self.settings.recheck_s,
                    reason: format!("record took longer than {budget:?}"),
                },
            };
            self.settle(m, &record, &outcome).await;
            (record.message_id, outcome)
        }))
        .await;
        let mut response = SqsBatchResponse::default();
        for (message_id, outcome) in outcomes {
            if !matches!(outcome, RecordOutcome::Delete { .. }) {
                let mut failure = BatchItemFailure::default();
                failure.item_identifier = message_id;
                response.batch_item_failures.push(failure);
            }
        }
        response
    }

    /// Logs the outcome and, for records to look at again, moves their next delivery.
    async fn settle(&self, message: &SqsMessage, record: &ParsedRecord, outcome: &RecordOutcome) {
        match outcome {
            RecordOutcome::Delete { reason } => tracing::info!(
                message_id = %record.message_id, outcome = "delete", reason = %reason,
                "record finished"
            ),
            RecordOutcome::Poison { cause } => tracing::error!(
                message_id = %record.message_id, outcome = "poison", cause = %cause,
                receive_count = record.receive_count,
                "malformed message: reported as failed so SQS moves it to the dead-letter queue"
            ),
            RecordOutcome::Later { at, reason } => {
                let seconds = visibility_seconds(*at, now_s());
                let visibility = self.change_visibility(message, seconds).await;
                tracing::info!(
                    message_id = %record.message_id, outcome = "later", reason = %reason,
                    next_check_in_s = seconds,
                    visibility = %visibility.as_ref().map_or_else(|e| e.to_string(), |_| "set".into()),
                    "record not finished: it comes back at its next check"
                );
            }
        }
    }

    async fn change_visibility(&self, message: &SqsMessage, seconds: i32) -> Result<()> {
        let queue_url = self
            .queue_url
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
            })?;
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

    pub async fn handle_record(&self, record: &ParsedRecord) -> RecordOutcome {
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
            Parsed::Notice(n) => n,
        };
        if record.receive_count <= 1 {
            EmfRecord::new()
                .dimension("Kind", notice.kind.as_str())
                .metric("NoticesReceived", 1.0, Unit::Count)
                .emit(&self.emf_namespace);
        }
        let client = match self.kube.get().await {
            Ok(c) => c,
            Err(e) => {
                return RecordOutcome::Later {
                    at: now_s() + self.settings.recheck_s,
                    reason: format!("no Kubernetes client: {e}"),
                }
            }
        };
        let mut next: Option<f64> = None;
        let mut reasons = Vec::new();
        for instance in &notice.instance_ids {
            match self.drive_instance(&client, notice, instance).await {
                Ok(InstanceOutcome::Done(reason)) => reasons.push(format!("{instance}: {reason}")),
                Ok(InstanceOutcome::Later(at)) => {
                    next = Some(next.map_or(at, |n: f64| n.min(at)));
                    reasons.push(format!("{instance}: in progress"));
                }
                Err(e) => {
                    tracing::warn!(event_id = %notice.event_id, instance = %instance, error = %e,
                        error_kind = e.kind(), "drain step failed; retrying at the next check");
                    let at = now_s() + self.settings.recheck_s;
                    next = Some(next.map_or(at, |n: f64| n.min(at)));
                    reasons.push(format!("{instance}: {e}"));
                }
            }
        }
        match next {
            None => RecordOutcome::Delete {
                reason: reasons.join("; "),
            },
            Some(at) => RecordOutcome::Later {
                at,
                reason: reasons.join("; "),
            },
        }
    }

    async fn drive_instance(
        &self,
        client: &kube::Client,
        notice: &Notice,
        instance: &str,
    ) -> Result<InstanceOutcome> {
        for _ in 0..PLAN_ATTEMPTS {
            let Some(node) = find_node(client, instance).await? else {
                // Foreign, or ours and already gone: either way nothing to drain. Hand back any
                // replacement a drain of this instance reserved.
                let released = replacement::release(client, &self.targets, None, instance).await;
                for t in released.into_iter().flatten() {
                    if !t.ends_with("(nothing held)") {
                        tracing::info!(event_id = %notice.event_id, instance, released = %t,
                            "node gone: replacement released");
                    }
                }
                self.log_step(
                    notice,
                    instance,
                    None,
                    "not-in-cluster",
                    &StepReport::default(),
                    None,
                );
                return Ok(InstanceOutcome::Done("not in this cluster".into()));
            };
            let observed = observe(client, node).await?;
            if let Some(e) = &observed.state_error {
                tracing::warn!(event_id = %notice.event_id, node = %observed.view.name, error = %e,
                    "drain annotations unreadable: starting over");
            }
            let now = now_s();
            let step = plan_drain(
                &observed.view,
                &observed.pod_views,
                notice,
                now,
                &self.settings,
            );
            let report = execute(
                client,
                &self.targets,
                &observed,
                &step,
                instance,
                &notice.event_id,
            )
            .await?;
            if report.conflict {
                continue;
            }
            self.emit_metrics(notice, &observed.view.state, &step, &report, now);
            let phase = step.state.as_ref().map_or("none", |s| s.phase.as_str());
            self.log_step(
                notice,
                instance,
                Some(&observed.view.name),
                phase,
                &report,
                Some(&step),
            );
            if !report.eviction_errors.is_empty() {
                tracing::warn!(event_id = %notice.event_id, errors = ?report.eviction_errors, "evictions failed");
            }
            return Ok(match step.last() {
                Command::Done(finish) => InstanceOutcome::Done(finish_reason(finish)),
                Command::WaitUntil { at } => InstanceOutcome::Later(*at),
                other => unreachable!("a step ends in Done or WaitUntil, not {other:?}"),
            });
        }
        Err(Error::Kube {
            operation: "patch".into(),
            object: format!("node of {instance}"),
            message: format!("the node kept changing under {PLAN_ATTEMPTS} attempts"),
            retryable: true,
        })
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
            pods_evicted = report.evicted.len(),
            pods_blocked = report.blocked.len(),
            blocked = ?blocked,
            released = ?report.released,
            next_check = next.as_deref().unwrap_or(""),
            done = done.as_deref().unwrap_or(""),
            latency_ms,
            "drain step"
        );
    }
}

enum InstanceOutcome {
    Done(String),
    Later(f64),
}

fn finish_reason(f: &Finish) -> String {
    match f {
        Finish::Drained => "drained".into(),
        Finish::Prewarmed => "replacement ready, pods left serving (cordon-prewarm)".into(),
        Finish::Ignored => "ACTIONS says ignore".into(),
        Finish::Superseded { by_event } => {
            format!("moot: node already draining for event {by_event}")
        }
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
            (now + s(900), s(60)), // 15 min left: capped
            (now + s(30), s(27)),  // 30 s left: minus the 3 s margin
            (now + s(2), s(60)),   // not a real deadline
            (now - s(5), s(60)),   // in the past (emulators)
        ];
        for (deadline, expected) in cases {
            assert_eq!(record_budget(deadline, now), expected, "{deadline:?}");
        }
    }

    #[test]
    fn visibility_is_whole_seconds_within_sqs_limits() {
        let cases = [
            (100.0, 100.0, 0),
            (115.2, 100.0, 16),
            (90.0, 100.0, 0),
            (100.0 + 2.0 * 86_400.0, 100.0, 43_200),
        ];
        for (at, now, expected) in cases {
            assert_eq!(visibility_seconds(at, now), expected, "{at} {now}");
        }
    }
}
