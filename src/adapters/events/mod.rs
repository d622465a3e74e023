//! Event parsing: SQS records and EventBridge envelopes (`aws_lambda_events` types) into core
//! notices. Every record is exactly one of these outcomes, by one rule:
//!
//! - [`Parsed::Notice`]: a well-formed notice of a kind prewarm acts on.
//! - [`Parsed::Resume`]: prewarm's own versioned "resume drain" message, which the tick sends
//!   for a drain nobody drives ([`resume`]).
//! - [`Parsed::Ignored`] (with the reason; acknowledged): a well-formed EventBridge event that is
//!   not such a notice (another source or detail-type, an instance starting, a Health event of
//!   another service or category), or Auto Scaling's documented test notification.
//! - [`Parsed::Poison`] (with the cause; reported as a batch item failure, so SQS moves it to the
//!   dead-letter queue after maxReceiveCount): anything else. A body that is not JSON, JSON that is
//!   not an object, an object that is not an EventBridge envelope, an envelope of a known kind
//!   lacking a field it needs or holding a bad one (an instance id that is not one, a date that is
//!   not one), an SQS `SentTimestamp` that is not a number.
//!
//! An SNS notification (`Type: Notification` with a `Message` string: EventBridge → SNS → SQS
//! without raw message delivery) is unwrapped once and its message classified by the same rule;
//! other SNS messages (subscription confirmations) are poison, so a human sees them in the DLQ.

mod detail;
pub mod instance_id;
pub mod resume;

use aws_lambda_events::event::eventbridge::EventBridgeEvent;
use aws_lambda_events::event::sqs::{SqsEvent, SqsMessage};
use serde::Serialize;
use serde_json::Value;

use crate::core::interruption::{Notice, NoticeKind};
use crate::error::{Error, Result};
use detail::{clip, shorten, Outcome};
pub use instance_id::InstanceIdRule;
pub use resume::ResumeDrain;

/// The longest event id (an EventBridge id, or a Health eventArn) prewarm keeps: it goes into
/// node and placeholder annotations and into Event notes (1 KiB at most). Real ones are a UUID
/// (36) or an ARN of about 120 characters.
pub const MAX_EVENT_ID: usize = 256;

/// An event id as prewarm keeps it: unchanged when it is at most [`MAX_EVENT_ID`] printable
/// ASCII characters (no space); otherwise every other character becomes `_`, the start is kept
/// and a hash of the whole id ends it (`~` and 8 hex digits), so the same id always gives the
/// same result and two ids that share a long start still differ.
pub fn bounded_event_id(id: &str) -> String {
    if id.len() <= MAX_EVENT_ID && id.chars().all(|c| c.is_ascii_graphic()) {
        return id.to_string();
    }
    // FNV-1a (32 bit): stable across builds and platforms, unlike std's hasher.
    let hash = id.bytes().fold(0x811c_9dc5u32, |h, b| {
        (h ^ b as u32).wrapping_mul(0x0100_0193)
    });
    let start: String = id
        .chars()
        .take(MAX_EVENT_ID - 9)
        .map(|c| if c.is_ascii_graphic() { c } else { '_' })
        .collect();
    format!("{start}~{hash:08x}")
}

/// What a message body is.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "verdict", rename_all = "kebab-case")]
pub enum Parsed {
    Notice(Notice),
    /// prewarm's own "resume drain" message (the tick's, see [`resume`]).
    Resume(ResumeDrain),
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
/// The Capacity Block warning's detail-type, which AWS's documentation spells both ways
/// (EC2 User Guide, "Monitor Capacity Blocks using EventBridge"): both are accepted.
const CAPACITY_BLOCK: &str = "Capacity Block Expiration Warning";
const CAPACITY_BLOCK_RESERVATION: &str = "Capacity Block Reservation Expiration Warning";

/// Parses one SQS record with EC2 instance ids only (see [`parse_record_with`]).
pub fn parse_record(message: &SqsMessage) -> ParsedRecord {
    parse_record_with(message, InstanceIdRule::Ec2)
}

/// Parses one SQS record. A record without a body, or with a `SentTimestamp` that is not a
/// number of milliseconds, is poison too. A notice carries the `SentTimestamp` as `sent_time`,
/// which bounds its deadline (`core::interruption::deadline`).
pub fn parse_record_with(message: &SqsMessage, rule: InstanceIdRule) -> ParsedRecord {
    let message_id = message
        .message_id
        .clone()
        .unwrap_or_else(|| "(no message id)".into());
    let parsed = match (message.body.as_deref(), sent_time(message)) {
        (_, Err(cause)) => Parsed::Poison { cause },
        (None, _) => Parsed::Poison {
            cause: "the SQS record has no body".into(),
        },
        (Some(body), Ok(sent)) => match parse_body_with(body, rule) {
            Parsed::Notice(n) => Parsed::Notice(Notice {
                sent_time: sent,
                ..n
            }),
            other => other,
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

/// SQS's `SentTimestamp` (milliseconds since the epoch) in seconds, when the record has one.
fn sent_time(message: &SqsMessage) -> std::result::Result<Option<f64>, String> {
    match message.attributes.get("SentTimestamp") {
        None => Ok(None),
        Some(ms) => ms
            .parse::<u64>()
            .map(|ms| Some(ms as f64 / 1000.0))
            .map_err(|_| {
                format!(
                    "the SQS attribute SentTimestamp {:?} is not a number of milliseconds",
                    shorten(ms)
                )
            }),
    }
}

/// Parses one message body (an EventBridge event as JSON text), EC2 instance ids only.
pub fn parse_body(body: &str) -> Parsed {
    parse_body_with(body, InstanceIdRule::Ec2)
}

/// Parses one message body (an EventBridge event as JSON text).
pub fn parse_body_with(body: &str, rule: InstanceIdRule) -> Parsed {
    match serde_json::from_str::<Value>(body) {
        Ok(value) => parse_value_with(value, rule),
        Err(e) => Parsed::Poison {
            cause: format!("body is not JSON: {e}"),
        },
    }
}

/// Classifies a JSON value that should be an EventBridge event (or an SNS notification carrying
/// one).
pub fn parse_value_with(value: Value, rule: InstanceIdRule) -> Parsed {
    match sns_message(&value) {
        Some(Ok((topic, message))) => unwrap_sns(&topic, &message, rule),
        Some(Err(cause)) => Parsed::Poison { cause },
        None => envelope(value, rule),
    }
}

/// `Some` when `value` is an SNS message: `Ok((topic, message))` for a notification, `Err` for
/// anything else SNS sends.
fn sns_message(value: &Value) -> Option<std::result::Result<(String, String), String>> {
    let object = value.as_object()?;
    let kind = object.get("Type")?.as_str()?;
    let topic = object.get("TopicArn")?.as_str()?;
    Some(match (kind, object.get("Message")) {
        ("Notification", Some(Value::String(m))) => Ok((topic.to_string(), m.clone())),
        ("Notification", _) => Err(format!(
            "SNS notification from {:?} has no Message string",
            shorten(topic)
        )),
        _ => Err(format!(
            "SNS {:?} from {:?}, not a notification (a subscription to confirm by hand?)",
            shorten(kind),
            shorten(topic)
        )),
    })
}

/// Classifies the message inside an SNS notification; reasons and causes say where it came from.
fn unwrap_sns(topic: &str, message: &str, rule: InstanceIdRule) -> Parsed {
    let inner = match serde_json::from_str::<Value>(message) {
        Ok(v) => v,
        Err(e) => {
            return Parsed::Poison {
                cause: format!(
                    "SNS notification from {:?}: message is not JSON: {e}",
                    shorten(topic)
                ),
            }
        }
    };
    if sns_message(&inner).is_some() {
        return Parsed::Poison {
            cause: format!(
                "SNS notification from {:?} wraps another SNS message",
                shorten(topic)
            ),
        };
    }
    match envelope(inner, rule) {
        Parsed::Ignored { event_id, reason } => Parsed::Ignored {
            event_id,
            reason: format!("(in SNS notification) {reason}"),
        },
        Parsed::Poison { cause } => Parsed::Poison {
            cause: format!("SNS notification from {:?}: {cause}", shorten(topic)),
        },
        notice => notice,
    }
}

/// Classifies a value that should be an EventBridge envelope.
fn envelope(value: Value, rule: InstanceIdRule) -> Parsed {
    let Some(object) = value.as_object() else {
        return Parsed::Poison {
            cause: format!(
                "not an EventBridge event: the body is a JSON {}, not an object",
                json_type(&value)
            ),
        };
    };
    if resume::is_prewarm_message(object) {
        return match resume::parse(object, rule) {
            Ok(r) => Parsed::Resume(r),
            Err(cause) => Parsed::Poison { cause },
        };
    }
    if !object.contains_key("detail-type") || !object.contains_key("source") {
        return match object.get("Event").and_then(Value::as_str) {
            Some(e) if e == "autoscaling:TEST_NOTIFICATION" => Parsed::Ignored {
                event_id: None,
                reason: format!(
                    "not an EventBridge event: an Auto Scaling test notification ({e})"
                ),
            },
            _ => Parsed::Poison {
                cause: "not an EventBridge event: the object has no detail-type and source".into(),
            },
        };
    }
    match serde_json::from_value::<EventBridgeEvent<Value>>(value) {
        Ok(event) => classify(&event, rule),
        Err(e) => Parsed::Poison {
            cause: format!(
                "EventBridge envelope does not parse: {}",
                clip(&e.to_string())
            ),
        },
    }
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn classify(event: &EventBridgeEvent<Value>, rule: InstanceIdRule) -> Parsed {
    let source = event.source.as_str();
    let detail_type = event.detail_type.as_str();
    let kind = match (source, detail_type) {
        (EC2, SPOT) => NoticeKind::SpotInterruption,
        (EC2, REBALANCE) => NoticeKind::Rebalance,
        (EC2, STATE_CHANGE) => NoticeKind::StateChange,
        (EC2, CAPACITY_RESERVATION) => NoticeKind::CapacityReservation,
        (EC2, CAPACITY_BLOCK | CAPACITY_BLOCK_RESERVATION) => NoticeKind::CapacityBlock,
        (HEALTH, HEALTH_EVENT) => NoticeKind::ScheduledChange,
        _ => {
            return Parsed::Ignored {
                event_id: event.id.as_deref().map(bounded_event_id),
                reason: format!(
                    "{} / {} is not an interruption notice",
                    shorten(source),
                    shorten(detail_type)
                ),
            }
        }
    };
    let outcome = match base(event, kind) {
        Err(cause) => Outcome::Poison(cause),
        Ok((base, detail)) if kind == NoticeKind::ScheduledChange => {
            detail::health(base, detail, rule)
        }
        Ok((base, detail)) if kind == NoticeKind::CapacityBlock => {
            detail::capacity_block(base, detail)
        }
        Ok((base, detail)) => detail::ec2(base, detail, rule),
    };
    match outcome {
        Outcome::Notice(n) => Parsed::Notice(n),
        Outcome::Ignored(reason) => Parsed::Ignored {
            event_id: event.id.as_deref().map(bounded_event_id),
            reason,
        },
        Outcome::Poison(cause) => Parsed::Poison {
            cause: format!("{detail_type}: {cause}"),
        },
    }
}

/// The envelope fields every notice needs, and its detail object.
fn base(
    event: &EventBridgeEvent<Value>,
    kind: NoticeKind,
) -> std::result::Result<(Notice, &serde_json::Map<String, Value>), String> {
    let event_id = event
        .id
        .as_deref()
        .filter(|id| !id.is_empty())
        .map(bounded_event_id)
        .ok_or("the envelope has no id")?;
    let time = event
        .time
        .map(|t| t.timestamp_millis() as f64 / 1000.0)
        .ok_or("the envelope has no time")?;
    let detail = event.detail.as_object().ok_or("detail is not an object")?;
    Ok((Notice::new(event_id, kind, time), detail))
}

/// A file given to `prewarm explain`: an SQS event (`{"Records": [...]}`) or one bare
/// EventBridge event. Returns (message id or event id, parsed) per record.
pub fn parse_event_document(text: &str, rule: InstanceIdRule) -> Result<Vec<(String, Parsed)>> {
    let value: Value = serde_json::from_str(text)
        .map_err(|e| Error::malformed("(file)", format!("not JSON: {e}")))?;
    if value.get("Records").is_some() {
        let event: SqsEvent = serde_json::from_value(value)
            .map_err(|e| Error::malformed("(file)", format!("not an SQS event: {e}")))?;
        return Ok(event
            .records
            .iter()
            .map(|m| parse_record_with(m, rule))
            .map(|r| (r.message_id, r.parsed))
            .collect());
    }
    let id = value
        .get("id")
        .and_then(Value::as_str)
        .unwrap_or("(no id)")
        .to_string();
    Ok(vec![(id, parse_value_with(value, rule))])
}
