//! How the interruption queue carries a drain: SQS is intake, not the clock.
//!
//! A notice's first delivery claims the drain on the node. From then on, work left over is not
//! kept by holding the message (each re-receive would count towards `maxReceiveCount`, and a
//! drain longer than `maxReceiveCount` x recheck would land in the DLQ as if it were poison):
//! the handler sends a *continuation* — the same body, with its own attempt count in the
//! `prewarm-attempt` attribute, delayed to the next check (`DelaySeconds` <= 900) — and deletes
//! the message it got. A step that failed in a way trying again can mend is carried on the same
//! way, after a backoff (`super::failure`: bounded in time for work not claimed yet).
//! `maxReceiveCount` then counts only poison, failures trying again cannot mend, unclaimed work
//! failing past its window, and continuations SQS refused to take.
//!
//! A Health event naming many instances fans out: one continuation per instance
//! (`prewarm-instance`), at most `FANOUT_CHUNK` per invocation, plus one continuation carrying
//! the last instance sent (`prewarm-fanout-after`), so the work of one invocation stays bounded
//! and nothing restarts from the first instance.
//!
//! What to do with a record is pure (`settle` gives its `Settlement`); `Interruption::settle`
//! carries it out through the queue adapter (`adapters::queue`: sends the continuations, changes
//! the visibility) and logs the record.

use aws_lambda_events::event::sqs::SqsMessage;

pub use super::continuation::{
    delay_seconds, visibility_seconds, Continuation, Settlement, FANOUT_CHUNK, MAX_ATTEMPTS,
};
use super::Interruption;
use crate::adapters::events::{Parsed, ParsedRecord};
use crate::adapters::queue::{change_visibility, queue_url_from_arn, send_with_body, Outgoing};
use crate::clock::unix_now;
use crate::core::interruption::deadline::{eviction_deadline, instance_end};
use crate::core::interruption::retry::Due;
use crate::error::{Error, Result};

/// What became of one record.
#[derive(Clone, Debug, PartialEq)]
pub enum RecordOutcome {
    /// Finished: the message is deleted.
    Delete { reason: String },
    /// The drain is claimed on the node and work remains: continue at `at` (seconds since the
    /// epoch) with a continuation message; this one is deleted.
    Continue { at: f64, reason: String },
    /// The step failed (the cluster unreachable, a call that failed or took longer than the
    /// record's time). `retryable`: whether trying again can help; how it is tried again is
    /// `failure::after_failure`'s.
    Failed { retryable: bool, reason: String },
    /// A notice about several instances: one continuation per instance of `instances`, and one
    /// to resume the fan-out after `resume_after` if more remain; this message is deleted.
    FanOut {
        instances: Vec<String>,
        resume_after: Option<String>,
    },
    /// Can never be processed: to the DLQ after maxReceiveCount.
    Poison { cause: String },
}

/// The fan-out step of a record that came with `came_with`: the next `FANOUT_CHUNK` instances
/// of `instance_ids` in id order after the last one sent, and the one to resume after when more
/// remain. By id, not position: instances that left the list meanwhile shift nothing.
pub fn fan_out_step(instance_ids: &[String], came_with: &Continuation) -> RecordOutcome {
    let after = came_with.fanout_after.as_ref();
    let mut left: Vec<&String> = instance_ids
        .iter()
        .filter(|i| after.is_none_or(|a| *i > a))
        .collect();
    left.sort();
    left.dedup();
    let more = left.len() > FANOUT_CHUNK;
    let instances: Vec<String> = left.into_iter().take(FANOUT_CHUNK).cloned().collect();
    RecordOutcome::FanOut {
        resume_after: if more {
            instances.last().cloned()
        } else {
            None
        },
        instances,
    }
}

/// How to settle a record given its outcome, the continuation it came with, the clock, the
/// drain's recheck interval and what the record's notice says about time.
pub fn settle(
    outcome: &RecordOutcome,
    came_with: &Continuation,
    now: f64,
    recheck_s: f64,
    due: Due,
) -> Settlement {
    match outcome {
        RecordOutcome::Delete { .. } => Settlement::Delete,
        RecordOutcome::Poison { .. } => Settlement::Fail,
        RecordOutcome::Failed { retryable, .. } => {
            super::failure::after_failure(*retryable, came_with, now, recheck_s, due)
        }
        RecordOutcome::Continue { at, .. } => {
            let next = came_with.attempt.saturating_add(1);
            if next > MAX_ATTEMPTS {
                return Settlement::Fail;
            }
            Settlement::Send {
                continuations: vec![(
                    Continuation {
                        attempt: next,
                        instance: came_with.instance.clone(),
                        ..Continuation::default()
                    },
                    delay_seconds(*at, now),
                )],
                // Not sent: keep this message instead, as a receive-counted retry.
                on_failure: Box::new(Settlement::Retry {
                    visibility_s: visibility_seconds(*at, now),
                }),
            }
        }
        RecordOutcome::FanOut {
            instances,
            resume_after,
        } => {
            let mut continuations: Vec<(Continuation, i32)> = instances
                .iter()
                .map(|i| {
                    (
                        Continuation {
                            instance: Some(i.clone()),
                            ..Continuation::default()
                        },
                        0,
                    )
                })
                .collect();
            if let Some(after) = resume_after {
                continuations.push((
                    Continuation {
                        attempt: came_with.attempt,
                        fanout_after: Some(after.clone()),
                        ..Continuation::default()
                    },
                    0,
                ));
            }
            Settlement::Send {
                continuations,
                // The whole step is repeated; instances already sent are then duplicates, which
                // the drain collapses (same event id on the node).
                on_failure: Box::new(Settlement::Retry { visibility_s: 1 }),
            }
        }
    }
}

impl Interruption {
    /// Carries out the record's settlement and logs it; true when the message is kept (a batch
    /// item failure).
    pub(super) async fn settle(
        &self,
        message: &SqsMessage,
        record: &ParsedRecord,
        came_with: &Continuation,
        outcome: &RecordOutcome,
    ) -> bool {
        let now = unix_now();
        let due = match &record.parsed {
            Parsed::Notice(n) => Due {
                deadline: eviction_deadline(n, self.settings.eviction_budget_s),
                end: instance_end(n),
            },
            _ => Due::default(),
        };
        let mut settlement = settle(outcome, came_with, now, self.settings.recheck_s, due);
        let mut sent = 0;
        if let Settlement::Send {
            continuations,
            on_failure,
        } = &settlement
        {
            let outgoing: Vec<Outgoing> = continuations
                .iter()
                .map(|(c, delay_s)| Outgoing {
                    attributes: c.attributes(),
                    delay_s: *delay_s,
                })
                .collect();
            let sent_to = match self.queue_url(message) {
                Ok(url) => {
                    let body = message.body.clone().unwrap_or_default();
                    send_with_body(&self.sqs, &url, &body, &outgoing).await
                }
                Err(e) => Err(e),
            };
            match sent_to {
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
            | RecordOutcome::Failed { reason, .. } => reason.clone(),
            RecordOutcome::FanOut {
                instances,
                resume_after,
            } => format!(
                "fanned out {} instances{}",
                instances.len(),
                resume_after
                    .as_ref()
                    .map_or(String::new(), |a| format!(", resuming after {a}"))
            ),
            RecordOutcome::Poison { cause } => cause.clone(),
        };
        match settlement {
            Settlement::Delete if matches!(outcome, RecordOutcome::Failed { .. }) => {
                tracing::warn!(
                    message_id = %record.message_id, outcome = "retry-by-message",
                    reason = %reason, attempt = came_with.attempt,
                    failures = came_with.failures + 1, receive_count = record.receive_count,
                    "step failed: carried on by a new message after a backoff"
                );
                false
            }
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
                let visibility = match self.queue_url(message) {
                    Ok(url) => {
                        change_visibility(
                            &self.sqs,
                            &url,
                            message.receipt_handle.as_deref(),
                            visibility_s,
                        )
                        .await
                    }
                    Err(e) => Err(e),
                };
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
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use aws_lambda_events::event::sqs::SqsMessageAttribute;

    use super::super::continuation::{ATTEMPT_ATTR, FAILING_SINCE_ATTR, FAILURES_ATTR};
    use super::*;

    fn attr(v: &str) -> SqsMessageAttribute {
        serde_json::from_value(serde_json::json!({"stringValue": v, "dataType": "Number"})).unwrap()
    }

    #[test]
    fn continuation_attributes_round_trip_and_bad_values_read_as_a_first_delivery() {
        let c = Continuation {
            attempt: 7,
            instance: Some("i-0abc".into()),
            fanout_after: Some("i-0abb".into()),
            failures: 3,
            failing_since: Some(1_700_000_000.5),
        };
        let attrs: HashMap<String, SqsMessageAttribute> = c
            .attributes()
            .into_iter()
            .map(|(k, _, v)| (k.to_string(), attr(&v)))
            .collect();
        assert_eq!(Continuation::of(&attrs), c);
        let bad: HashMap<String, SqsMessageAttribute> = [
            (ATTEMPT_ATTR.to_string(), attr("many")),
            (FAILURES_ATTR.to_string(), attr("-1")),
            (FAILING_SINCE_ATTR.to_string(), attr("NaN")),
        ]
        .into();
        assert_eq!(Continuation::of(&bad), Continuation::default());
        assert_eq!(Continuation::of(&HashMap::new()), Continuation::default());
    }

    #[test]
    fn settlements_per_outcome() {
        let now = 1_000.0;
        let first = Continuation::default();
        let tenth = Continuation {
            attempt: 10,
            instance: Some("i-1".into()),
            ..Continuation::default()
        };
        let cont = |attempt: u32, instance: Option<&str>, delay: i32| {
            (
                Continuation {
                    attempt,
                    instance: instance.map(str::to_string),
                    ..Continuation::default()
                },
                delay,
            )
        };
        let cases: Vec<(RecordOutcome, &Continuation, Settlement)> = vec![
            (
                RecordOutcome::Delete { reason: "d".into() },
                &first,
                Settlement::Delete,
            ),
            (
                RecordOutcome::Poison { cause: "p".into() },
                &first,
                Settlement::Fail,
            ),
            // A rejected request: the message itself comes back in 15 s (receive-counted).
            (
                RecordOutcome::Failed {
                    retryable: false,
                    reason: "r".into(),
                },
                &first,
                Settlement::Retry { visibility_s: 15 },
            ),
            // An outage: carried on by a message (the cases are `failure`'s).
            (
                RecordOutcome::Failed {
                    retryable: true,
                    reason: "r".into(),
                },
                &tenth,
                Settlement::Send {
                    continuations: vec![(
                        Continuation {
                            failures: 1,
                            failing_since: Some(now),
                            ..cont(11, Some("i-1"), 0).0
                        },
                        15,
                    )],
                    on_failure: Box::new(Settlement::Retry { visibility_s: 15 }),
                },
            ),
            // Claimed: a continuation with attempt 1, delayed 15 s.
            (
                RecordOutcome::Continue {
                    at: 1_014.2,
                    reason: "c".into(),
                },
                &first,
                Settlement::Send {
                    continuations: vec![cont(1, None, 15)],
                    on_failure: Box::new(Settlement::Retry { visibility_s: 15 }),
                },
            ),
            // A continuation keeps its instance and counts on; a check an hour away waits 900 s.
            (
                RecordOutcome::Continue {
                    at: 4_600.0,
                    reason: "c".into(),
                },
                &tenth,
                Settlement::Send {
                    continuations: vec![cont(11, Some("i-1"), 900)],
                    on_failure: Box::new(Settlement::Retry {
                        visibility_s: 3_600,
                    }),
                },
            ),
        ];
        // A step that succeeds after failed ones: its continuation starts the count afresh.
        let recovered = Continuation {
            failures: 3,
            failing_since: Some(900.0),
            ..tenth.clone()
        };
        let cases: Vec<(RecordOutcome, &Continuation, Settlement)> = cases
            .into_iter()
            .chain([(
                RecordOutcome::Continue {
                    at: 1_015.0,
                    reason: "c".into(),
                },
                &recovered,
                Settlement::Send {
                    continuations: vec![cont(11, Some("i-1"), 15)],
                    on_failure: Box::new(Settlement::Retry { visibility_s: 15 }),
                },
            )])
            .collect();
        for (outcome, came_with, expected) in cases {
            assert_eq!(
                settle(&outcome, came_with, now, 15.0, Due::default()),
                expected,
                "{outcome:?}"
            );
        }
        let spent = Continuation {
            attempt: MAX_ATTEMPTS,
            ..Continuation::default()
        };
        let c = RecordOutcome::Continue {
            at: 1_015.0,
            reason: "c".into(),
        };
        assert_eq!(
            settle(&c, &spent, now, 15.0, Due::default()),
            Settlement::Fail
        );
    }

    #[test]
    fn a_fan_out_sends_one_continuation_per_instance_and_one_to_resume() {
        // Named out of order, one twice: sent in id order, each once.
        let mut ids: Vec<String> = (0..120).rev().map(|i| format!("i-{i:03}")).collect();
        ids.push("i-007".into());
        let step = |after: Option<&str>| {
            let came_with = Continuation {
                fanout_after: after.map(str::to_string),
                ..Continuation::default()
            };
            match fan_out_step(&ids, &came_with) {
                RecordOutcome::FanOut {
                    instances,
                    resume_after,
                } => (instances, resume_after),
                other => panic!("{other:?}"),
            }
        };
        let (first, resume) = step(None);
        assert_eq!(
            (first.len(), first[0].as_str(), resume.as_deref()),
            (50, "i-000", Some("i-049"))
        );
        let (second, resume) = step(Some("i-049"));
        assert_eq!(
            (second[0].as_str(), resume.as_deref()),
            ("i-050", Some("i-099"))
        );
        let (last, resume) = step(Some("i-099"));
        assert_eq!((last.len(), last[19].as_str(), resume), (20, "i-119", None));
        assert_eq!(step(Some("i-119")), (vec![], None));

        let outcome = RecordOutcome::FanOut {
            instances: vec!["i-a".into(), "i-b".into()],
            resume_after: Some("i-b".into()),
        };
        let Settlement::Send { continuations, .. } = settle(
            &outcome,
            &Continuation::default(),
            0.0,
            15.0,
            Due::default(),
        ) else {
            panic!("a fan-out sends")
        };
        let described: Vec<(Option<&str>, Option<&str>)> = continuations
            .iter()
            .map(|(c, _)| (c.instance.as_deref(), c.fanout_after.as_deref()))
            .collect();
        assert_eq!(
            described,
            [
                (Some("i-a"), None),
                (Some("i-b"), None),
                (None, Some("i-b"))
            ]
        );
    }

    /// A Capacity Block's instances are listed afresh at every resume: nodes of the reservation
    /// deleted meanwhile (gone early, consolidated) must not make the fan-out skip any.
    #[test]
    fn a_fan_out_resumes_after_the_last_instance_it_sent_whatever_left_the_list() {
        let ids = |range: std::ops::Range<usize>| -> Vec<String> {
            range.map(|i| format!("i-{i:03}")).collect()
        };
        let listed = ids(0..60);
        let first = fan_out_step(&listed, &Continuation::default());
        // By hand: FANOUT_CHUNK = 50, so i-000..i-049 now, ten left.
        let RecordOutcome::FanOut { instances, .. } = &first else {
            panic!("{first:?}")
        };
        assert_eq!(instances, &ids(0..50));
        let Settlement::Send { continuations, .. } =
            settle(&first, &Continuation::default(), 0.0, 15.0, Due::default())
        else {
            panic!("a fan-out sends")
        };
        let resume = &continuations.last().unwrap().0;
        // Before the resume, i-010..i-019 left the reservation's node list.
        let relisted: Vec<String> = ids(0..10).into_iter().chain(ids(20..60)).collect();
        // By hand: the ten not sent yet, i-050..i-059, and nothing more after them.
        assert_eq!(
            fan_out_step(&relisted, resume),
            RecordOutcome::FanOut {
                instances: ids(50..60),
                resume_after: None,
            }
        );
    }

    #[test]
    fn whole_seconds_within_sqs_limits() {
        let cases = [
            (100.0, 100.0, 0, 0),
            (115.2, 100.0, 16, 16),
            (90.0, 100.0, 0, 0),
            (100.0 + 2.0 * 86_400.0, 100.0, 43_200, 900),
        ];
        for (at, now, visibility, delay) in cases {
            assert_eq!(visibility_seconds(at, now), visibility, "{at} {now}");
            assert_eq!(delay_seconds(at, now), delay, "{at} {now}");
        }
    }
}
