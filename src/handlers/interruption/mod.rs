//! The SQS interruption handler: each record is parsed (`adapters::events`), each instance it
//! names is looked up, observed, planned (`core::interruption::plan_drain`) and one step executed
//! (`adapters::kube::drain::execute`). The Lambda never sleeps. When a claimed drain has work
//! left, the handler sends a continuation message delayed to the next check and acknowledges
//! the one it got (see [`queue`]: SQS is intake, not the clock). A step that fails in a way trying
//! again can mend (the cluster unreachable, an outage, throttling) is carried on by a message
//! too, after a backoff, bounded in time for work not claimed yet ([`failure`]). Poison is
//! reported without touching its visibility, so the queue's redrive policy moves it to the DLQ
//! after maxReceiveCount.
//!
//! Records of a batch run concurrently, each under its own time limit, so one slow record never
//! holds the others up.

pub mod continuation;
pub mod failure;
mod metrics;
pub mod queue;
pub mod record;
mod reservation;
pub mod step;
pub mod targets;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use aws_lambda_events::event::sqs::{BatchItemFailure, SqsBatchResponse, SqsEvent};
use kube::runtime::events::Recorder;
use lambda_runtime::{service_fn, LambdaEvent};
use tokio::sync::OnceCell;

use crate::adapters::events::{parse_record_with, InstanceIdRule};
use crate::adapters::kube::drain::find::NodeFinder;
use crate::adapters::kube::shape::placeholder::PlaceholderSettings;
use crate::adapters::kube::ClientCache;
use crate::clock::system_now;
use crate::config::{Config, InterruptionSettings};
use crate::core::interruption::DrainSettings;
use crate::core::TargetSpec;
use crate::error::{Error, Result};

pub use queue::{Continuation, RecordOutcome, Settlement};

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
    /// Instance id → node, kept by the warm container: a notice about a foreign instance (the
    /// rules are account-wide) costs no node list of its own (`core::node_index`).
    pub nodes: NodeFinder,
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
    .map_err(|e| Error::aws("lambda", "runtime", e, false))
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

/// The drain planning settings of the interruption settings (shared with the tick's reservation
/// collection, restore and explain).
pub fn drain_settings(settings: &InterruptionSettings) -> DrainSettings {
    DrainSettings {
        actions: settings.actions.clone(),
        eviction_budget_s: settings.eviction_budget_s,
        recheck_s: settings.recheck_s,
        delete_past_pdb: settings.delete_past_pdb,
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
            settings: drain_settings(&config.interruption),
            surge: config.interruption.surge,
            placeholder: config.interruption.placeholder.clone(),
            targets: config.targets.clone(),
            targets_configmap: config.targets_configmap.clone(),
            emf_namespace: config.emf_namespace.clone(),
            instance_ids: config.interruption.instance_ids,
            recorder: OnceCell::new(),
            nodes: NodeFinder::default(),
        })
    }

    /// Handles a batch; the response lists the records to keep (batch item failures).
    pub async fn handle_batch(&self, event: SqsEvent, deadline: SystemTime) -> SqsBatchResponse {
        let budget = record_budget(deadline, system_now());
        let outcomes = futures::future::join_all(event.records.iter().map(|m| async move {
            let record = parse_record_with(m, self.instance_ids);
            let came_with = Continuation::of(&m.message_attributes);
            let outcome =
                match tokio::time::timeout(budget, self.handle_record(&record, &came_with)).await {
                    Ok(o) => o,
                    // A hung apiserver call (an outage, throttling): tried again like any
                    // failed step (`failure`). Whether the step claimed the node is unknown; if
                    // it did, the retry (a recheck or more later) is that drain's next check.
                    Err(_) => RecordOutcome::Failed {
                        retryable: true,
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::UNIX_EPOCH;

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
