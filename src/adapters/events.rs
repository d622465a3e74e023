//! Event parsing: SQS records and EventBridge envelopes (`aws_lambda_events` types) into core
//! notices. Three outcomes per message: a [`Notice`] to act on; `Ignored` (a well-formed message
//! that is not an interruption notice prewarm acts on — acknowledged, logged with the reason);
//! `Poison` (a body that can never be processed — reported as a batch item failure so SQS moves it
//! to the dead-letter queue after maxReceiveCount).

use aws_lambda_events::event::eventbridge::EventBridgeEvent;
use aws_lambda_events::event::sqs::{SqsEvent, SqsMessage};
use chrono::DateTime;
use serde::Serialize;
use serde_json::Value;

use crate::core::interruption::{Notice, NoticeKind, NoticeStatus};
use crate::error::{Error, Result};

/// What a message body is.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "verdict", rename_all = "kebab-case")]
pub enum Parsed {
    Notice(Notice),
    Ignored {
        event_id: Option<String>,
        reason: String,
    },
    Poison {
        cause: String,
    },
}

/// One SQS record, parsed.
#[derive(Clone, Debug, PartialEq)]
pub struct ParsedRecord {
    pub message_id: String,
    pub receipt_handle: Option<String>,
    pub event_source_arn: Option<String>,
    /// ApproximateReceiveCount (1 on first delivery).
    pub receive_count: u32,
    pub parsed: Parsed,
}

const EC2: &str = "aws.ec2";
const HEALTH: &str = "aws.health";
const SPOT: &str = "EC2 Spot Instance Interruption Warning";
const REBALANCE: &str = "EC2 Instance Rebalance Recommendation";
const STATE_CHANGE: &str = "EC2 Instance State-change Notification";
const CAPACITY_RESERVATION: &str = "EC2 Capacity Reservation Instance Interruption Warning";
const HEALTH_EVENT: &str = "AWS Health Event";
/// The states in which the instance is going away; the others (pending, running) are ignored.
const GOING_STATES: [&str; 4] = ["stopping", "stopped", "shutting-down", "terminated"];

/// Parses one SQS record. A record without a body is poison too.
pub fn parse_record(message: &SqsMessage) -> ParsedRecord {
    let message_id = message
        .message_id
        .clone()
        .unwrap_or_else(|| "(no message id)".into());
    let parsed = match message.body.as_deref() {
        Some(body) => parse_body(body),
        None => Parsed::Poison {
            cause: "the SQS record has no body".into(),
        },
    };
    ParsedRecord {
        receive_count: message
            .attributes
            .get("ApproximateReceiveCount")
            .and_then(|c| c.parse().ok())
            .unwrap_or(1),
        receipt_handle: message.receipt_handle.clone(),
        event_source_arn: message.event_source_arn.clone(),
        message_id,
        parsed,
    }
}

/// Parses one message body (an EventBridge event as JSON text).
pub fn parse_body(body: &str) -> Parsed {
    let value: Value = match serde_json::from_str(body) {
        Ok(v) => v,
        Err(e) => {
            return Parsed::Poison {
                cause: format!("body is not JSON: {e}"),
            }
        }
    };
    parse_value(value)
}

/// Classifies a JSON value that should be an EventBridge event.
pub fn parse_value(value: Value) -> Parsed {
    let Some(object) = value.as_object() else {
        return Parsed::Ignored {
            event_id: None,
            reason: "not an EventBridge event: the body is not a JSON object".into(),
        };
    };
    if !object.contains_key("detail-type") || !object.contains_key("source") {
        let reason = match object.get("Event").and_then(Value::as_str) {
            Some(e) if e.ends_with("TEST_NOTIFICATION") => {
                format!("not an EventBridge event: an Auto Scaling test notification ({e})")
            }
            _ => "not an EventBridge event: no detail-type and source".into(),
        };
        return Parsed::Ignored {
            event_id: None,
            reason,
        };
    }
    let event: EventBridgeEvent<Value> = match serde_json::from_value(value) {
        Ok(e) => e,
        Err(e) => {
            return Parsed::Poison {
                cause: format!("EventBridge envelope does not parse: {e}"),
            }
        }
    };
    classify(&event)
}

fn classify(event: &EventBridgeEvent<Value>) -> Parsed {
    let source = event.source.as_str();
    let detail_type = event.detail_type.as_str();
    let kind = match (source, detail_type) {
        (EC2, SPOT) => NoticeKind::SpotInterruption,
        (EC2, REBALANCE) => NoticeKind::Rebalance,
        (EC2, STATE_CHANGE) => NoticeKind::StateChange,
        (EC2, CAPACITY_RESERVATION) => NoticeKind::CapacityReservation,
        (HEALTH, HEALTH_EVENT) => NoticeKind::ScheduledChange,
        _ => {
            return Parsed::Ignored {
                event_id: event.id.clone(),
                reason: format!("{source} / {detail_type} is not an interruption notice"),
            }
        }
    };
    match notice(event, kind) {
        Ok(Ok(n)) => Parsed::Notice(n),
        Ok(Err(reason)) => Parsed::Ignored {
            event_id: event.id.clone(),
            reason,
        },
        Err(cause) => Parsed::Poison {
            cause: format!("{detail_type}: {cause}"),
        },
    }
}

/// `Err`: a field the kind needs is missing or bad (poison). `Ok(Err)`: well-formed but not to
/// be acted on (ignored, with the reason).
fn notice(
    event: &EventBridgeEvent<Value>,
    kind: NoticeKind,
) -> std::result::Result<std::result::Result<Notice, String>, String> {
    let event_id = event
        .id
        .clone()
        .filter(|id| !id.is_empty())
        .ok_or("the envelope has no id")?;
    let time = event
        .time
        .map(|t| t.timestamp_millis() as f64 / 1000.0)
        .ok_or("the envelope has no time")?;
    let detail = event.detail.as_object().ok_or("detail is not an object")?;
    let field = |name: &str| detail.get(name).and_then(Value::as_str);
    let mut n = Notice {
        event_id,
        kind,
        instance_ids: Vec::new(),
        time,
        instance_state: None,
        window_start: None,
        termination_time: None,
        status: NoticeStatus::Active,
        sent_time: None,
    };
    if kind == NoticeKind::ScheduledChange {
        if field("service") != Some("EC2") {
            return Ok(Err(format!(
                "AWS Health event for service {:?}, not EC2",
                field("service").unwrap_or("(none)")
            )));
        }
        let category = field("eventTypeCategory").unwrap_or("(none)");
        if category != "scheduledChange" {
            return Ok(Err(format!(
                "AWS Health event of category {category}, not scheduledChange"
            )));
        }
        let entities = detail
            .get("affectedEntities")
            .and_then(Value::as_array)
            .ok_or("detail.affectedEntities is missing")?;
        n.instance_ids = entities
            .iter()
            .filter_map(|e| e.get("entityValue").and_then(Value::as_str))
            .filter(|v| v.starts_with("i-"))
            .map(str::to_string)
            .collect();
        let start = field("startTime").ok_or("detail.startTime is missing")?;
        n.window_start = Some(parse_health_time(start).ok_or_else(|| {
            format!("detail.startTime {start:?} is not a date (RFC 2822 or RFC 3339)")
        })?);
        if n.instance_ids.is_empty() {
            return Ok(Err(
                "AWS Health scheduled change names no EC2 instance".into()
            ));
        }
        return Ok(Ok(n));
    }
    let instance = field("instance-id").ok_or("detail.instance-id is missing")?;
    // Lenient on purpose: AWS ids are `i-<hex>`, but the lookup only needs the last segment of
    // a node's providerID (kwok test nodes carry `kwok://<name>`).
    if instance.is_empty() || instance.contains(['/', ' ', '\t']) {
        return Err(format!(
            "detail.instance-id {instance:?} is not an instance id"
        ));
    }
    n.instance_ids = vec![instance.to_string()];
    match kind {
        NoticeKind::StateChange => {
            let state = field("state").ok_or("detail.state is missing")?;
            if !GOING_STATES.contains(&state) {
                return Ok(Err(format!(
                    "instance state {state} is not one of {}",
                    GOING_STATES.join(", ")
                )));
            }
            n.instance_state = Some(state.to_string());
        }
        NoticeKind::CapacityReservation => {
            if let Some(t) = field("instance-termination-time") {
                n.termination_time = Some(
                    DateTime::parse_from_rfc3339(t)
                        .map_err(|_| {
                            format!("detail.instance-termination-time {t:?} is not a date")
                        })?
                        .timestamp_millis() as f64
                        / 1000.0,
                );
            }
        }
        _ => {}
    }
    Ok(Ok(n))
}

/// AWS Health writes times like `Tue, 1 Dec 2026 09:00:00 GMT`; accept RFC 3339 as well.
fn parse_health_time(s: &str) -> Option<f64> {
    DateTime::parse_from_rfc2822(s)
        .or_else(|_| DateTime::parse_from_rfc3339(s))
        .ok()
        .map(|d| d.timestamp_millis() as f64 / 1000.0)
}

/// A file given to `prewarm explain`: an SQS event (`{"Records": [...]}`) or one bare
/// EventBridge event. Returns (message id or event id, parsed) per record.
pub fn parse_event_document(text: &str) -> Result<Vec<(String, Parsed)>> {
    let value: Value = serde_json::from_str(text)
        .map_err(|e| Error::malformed("(file)", format!("not JSON: {e}")))?;
    if value.get("Records").is_some() {
        let event: SqsEvent = serde_json::from_value(value)
            .map_err(|e| Error::malformed("(file)", format!("not an SQS event: {e}")))?;
        return Ok(event
            .records
            .iter()
            .map(parse_record)
            .map(|r| (r.message_id, r.parsed))
            .collect());
    }
    let id = value
        .get("id")
        .and_then(Value::as_str)
        .unwrap_or("(no id)")
        .to_string();
    Ok(vec![(id, parse_value(value))])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn health_times_in_both_formats() {
        assert_eq!(
            parse_health_time("Tue, 1 Dec 2026 09:00:00 GMT"),
            Some(1_796_115_600.0)
        );
        assert_eq!(
            parse_health_time("2026-12-01T09:00:00Z"),
            Some(1_796_115_600.0)
        );
        assert_eq!(parse_health_time("next Tuesday"), None);
    }
}
