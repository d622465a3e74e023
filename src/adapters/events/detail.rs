//! The `detail` of each kind of notice: what it must hold (missing or bad: poison) and what makes
//! a well-formed event not a notice prewarm acts on (ignored, with the reason).

use std::collections::HashSet;

use chrono::DateTime;
use serde_json::{Map, Value};

use super::instance_id::{self, InstanceIdRule};
use crate::core::interruption::{Notice, NoticeKind, NoticeStatus};

/// What a detail yields: a notice, a reason to ignore the event, or why it is poison.
pub(super) enum Outcome {
    Notice(Notice),
    Ignored(String),
    Poison(String),
}

/// The states in which the instance is going away; the others (pending, running) are ignored.
const GOING_STATES: [&str; 4] = ["stopping", "stopped", "shutting-down", "terminated"];

/// Fills `base` (envelope fields already set) from `detail` for an EC2 notice of `base.kind`.
pub(super) fn ec2(mut base: Notice, detail: &Map<String, Value>, rule: InstanceIdRule) -> Outcome {
    let instance = match string(detail, "instance-id") {
        Ok(Some(i)) => i,
        Ok(None) => return Outcome::Poison("detail.instance-id is missing".into()),
        Err(e) => return Outcome::Poison(e),
    };
    if let Err(e) = instance_id::check(instance, rule) {
        return Outcome::Poison(format!("detail.instance-id {e}"));
    }
    base.instance_ids = vec![instance.to_string()];
    match base.kind {
        NoticeKind::StateChange => match string(detail, "state") {
            Ok(Some(state)) if GOING_STATES.contains(&state) => {
                base.instance_state = Some(state.to_string());
            }
            Ok(Some(state)) => {
                return Outcome::Ignored(format!(
                    "instance state {:?} is not one of {}",
                    shorten(state),
                    GOING_STATES.join(", ")
                ))
            }
            Ok(None) => return Outcome::Poison("detail.state is missing".into()),
            Err(e) => return Outcome::Poison(e),
        },
        NoticeKind::CapacityReservation => match string(detail, "instance-termination-time") {
            Ok(Some(t)) => match DateTime::parse_from_rfc3339(t) {
                Ok(d) => base.termination_time = Some(seconds(d)),
                Err(_) => {
                    return Outcome::Poison(format!(
                        "detail.instance-termination-time {:?} is not a date",
                        shorten(t)
                    ))
                }
            },
            Ok(None) => {}
            Err(e) => return Outcome::Poison(e),
        },
        _ => {}
    }
    Outcome::Notice(base)
}

/// Fills `base` from the detail of an `aws.health` / `AWS Health Event`.
///
/// AWS Health sends a new EventBridge event (new `id`, same `detail.eventArn`) each time it
/// updates one: `statusCode` goes `upcoming` → `open` → `closed` (the API's three values), and a
/// rescheduled window comes as an update with a new `startTime`. Each update is parsed on its own:
/// `upcoming` and `open` are [`NoticeStatus::Active`] with the window they state (earlier, later or
/// already begun: the parser never drops one as moot), `closed` is [`NoticeStatus::Closed`] (the
/// maintenance is over or cancelled). Samples in aws-node-termination-handler and Karpenter omit
/// `statusCode` and neither reads it: a missing one counts as active; a value outside the three is
/// poison.
pub(super) fn health(
    mut base: Notice,
    detail: &Map<String, Value>,
    rule: InstanceIdRule,
) -> Outcome {
    let service = match string(detail, "service") {
        Ok(s) => s.unwrap_or("(none)"),
        Err(e) => return Outcome::Poison(e),
    };
    if service != "EC2" {
        return Outcome::Ignored(format!(
            "AWS Health event for service {:?}, not EC2",
            shorten(service)
        ));
    }
    let category = match string(detail, "eventTypeCategory") {
        Ok(c) => c.unwrap_or("(none)"),
        Err(e) => return Outcome::Poison(e),
    };
    if category != "scheduledChange" {
        return Outcome::Ignored(format!(
            "AWS Health event of category {:?}, not scheduledChange",
            shorten(category)
        ));
    }
    // The drain's owner is the Health event, not this delivery of it: every update (a moved
    // window, `closed`) comes with a new EventBridge id and the same eventArn, so the eventArn is
    // the notice's id. A sample without one keeps the envelope id.
    match string(detail, "eventArn") {
        Ok(Some(arn)) if !arn.is_empty() => base.event_id = super::bounded_event_id(arn),
        Ok(_) => {}
        Err(e) => return Outcome::Poison(e),
    }
    base.status = match string(detail, "statusCode") {
        Ok(None | Some("upcoming" | "open")) => NoticeStatus::Active,
        Ok(Some("closed")) => NoticeStatus::Closed,
        Ok(Some(other)) => {
            return Outcome::Poison(format!(
                "detail.statusCode {:?} is not upcoming, open or closed",
                shorten(other)
            ))
        }
        Err(e) => return Outcome::Poison(e),
    };
    let Some(entities) = detail.get("affectedEntities") else {
        return Outcome::Poison("detail.affectedEntities is missing".into());
    };
    let Some(entities) = entities.as_array() else {
        return Outcome::Poison("detail.affectedEntities is not a list".into());
    };
    match instances(entities, rule) {
        Ok(ids) => base.instance_ids = ids,
        Err(e) => return Outcome::Poison(e),
    }
    match string(detail, "startTime") {
        Ok(Some(start)) => match parse_health_time(start) {
            Some(t) => base.window_start = Some(t),
            None => {
                return Outcome::Poison(format!(
                    "detail.startTime {:?} is not a date (RFC 2822 or RFC 3339)",
                    shorten(start)
                ))
            }
        },
        // A closed notice needs no window: nothing is to be drained by it.
        Ok(None) if base.status == NoticeStatus::Closed => {}
        Ok(None) => return Outcome::Poison("detail.startTime is missing".into()),
        Err(e) => return Outcome::Poison(e),
    }
    if base.instance_ids.is_empty() {
        return Outcome::Ignored("AWS Health scheduled change names no EC2 instance".into());
    }
    Outcome::Notice(base)
}

/// Fills `base` from the detail of a Capacity Block expiration warning: the reservation
/// (`capacity-reservation-id`, required and checked like an instance id) and its `end-date`
/// (optional: without it the deadline counts 10 minutes from the warning). The notice names no
/// instance: the handler finds them by their nodes' reservation label.
pub(super) fn capacity_block(mut base: Notice, detail: &Map<String, Value>) -> Outcome {
    let id = match string(detail, "capacity-reservation-id") {
        Ok(Some(id)) => id,
        Ok(None) => return Outcome::Poison("detail.capacity-reservation-id is missing".into()),
        Err(e) => return Outcome::Poison(e),
    };
    if let Err(e) = check_reservation_id(id) {
        return Outcome::Poison(format!("detail.capacity-reservation-id {e}"));
    }
    base.reservation_id = Some(id.to_string());
    match string(detail, "end-date") {
        Ok(Some(end)) => match parse_health_time(end) {
            Some(t) => base.reservation_end = Some(t),
            None => {
                return Outcome::Poison(format!(
                    "detail.end-date {:?} is not a date (RFC 3339 or RFC 2822)",
                    shorten(end)
                ))
            }
        },
        Ok(None) => {}
        Err(e) => return Outcome::Poison(e),
    }
    Outcome::Notice(base)
}

/// `Ok` when `id` is an EC2 capacity reservation id: `cr-` and 17 lowercase hex digits (8 for
/// older ones), as instance ids. It becomes a label selector's value, so nothing else may pass.
fn check_reservation_id(id: &str) -> Result<(), String> {
    if instance_id::is_ec2_resource_id(id, "cr-") {
        return Ok(());
    }
    Err(format!(
        "{:?} is not a capacity reservation id (the form is cr- and 8 or 17 lowercase hex digits)",
        shorten(id)
    ))
}

/// The instance ids among a Health event's entities, each once, in order. Entities that are not
/// instances (volumes, hosts, ARNs) are skipped; one that starts like an instance id but is not a
/// valid one makes the event poison. Linear in the number of entities (one hash set).
fn instances(entities: &[Value], rule: InstanceIdRule) -> Result<Vec<String>, String> {
    let mut seen = HashSet::with_capacity(entities.len());
    let mut ids = Vec::with_capacity(entities.len());
    for (i, entity) in entities.iter().enumerate() {
        let value = entity
            .get("entityValue")
            .and_then(Value::as_str)
            .ok_or_else(|| format!("detail.affectedEntities[{i}] has no entityValue string"))?;
        if !instance_id::looks_like_instance(value, rule) {
            continue;
        }
        instance_id::check(value, rule)
            .map_err(|e| format!("detail.affectedEntities[{i}].entityValue {e}"))?;
        if seen.insert(value) {
            ids.push(value.to_string());
        }
    }
    Ok(ids)
}

/// A string field of the detail: `Ok(None)` when absent or null, `Err` when of another type.
fn string<'a>(detail: &'a Map<String, Value>, name: &str) -> Result<Option<&'a str>, String> {
    match detail.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(format!("detail.{name} is not a string")),
    }
}

/// At most 80 characters of a value quoted in a reason, so one bad field cannot fill a log line.
pub(super) fn shorten(s: &str) -> String {
    s.chars().take(80).collect()
}

/// A parser's message at most `2 × CLIP_KEEP` characters (and an ellipsis): its start and its end,
/// where serde says what it expected (`invalid type: string "…", expected a sequence`), since the
/// middle may quote a whole field of the body, up to the message's 256 KiB.
pub(super) fn clip(s: &str) -> String {
    let n = s.chars().count();
    if n <= 2 * CLIP_KEEP {
        return s.to_string();
    }
    let head: String = s.chars().take(CLIP_KEEP).collect();
    let tail: String = s.chars().skip(n - CLIP_KEEP).collect();
    format!("{head}…{tail}")
}

const CLIP_KEEP: usize = 100;

fn seconds<Tz: chrono::TimeZone>(d: DateTime<Tz>) -> f64 {
    d.timestamp_millis() as f64 / 1000.0
}

/// AWS Health writes times like `Tue, 1 Dec 2026 09:00:00 GMT`; accept RFC 3339 as well.
pub(super) fn parse_health_time(s: &str) -> Option<f64> {
    DateTime::parse_from_rfc2822(s)
        .or_else(|_| DateTime::parse_from_rfc3339(s))
        .ok()
        .map(seconds)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clip_keeps_the_start_and_the_end_of_a_long_message() {
        assert_eq!(clip("short"), "short");
        let exact = "é".repeat(200);
        assert_eq!(clip(&exact), exact);
        // 210 characters: the first 100 (`a`s), an ellipsis, the last 100 (`b`s).
        let long = format!("{}{}", "a".repeat(110), "b".repeat(100));
        assert_eq!(
            clip(&long),
            format!("{}…{}", "a".repeat(100), "b".repeat(100))
        );
    }

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

    #[test]
    fn entities_keep_instances_once_in_order() {
        let entities: Vec<Value> = serde_json::from_str(
            r#"[{"entityValue":"i-0000000b"},{"entityValue":"vol-0123"},{"entityValue":"i-0000000a"},
                {"entityValue":"i-0000000b"},{"entityValue":"arn:aws:ec2:us-east-1:1:instance/i-0000000c"}]"#,
        )
        .unwrap();
        assert_eq!(
            instances(&entities, InstanceIdRule::Ec2).unwrap(),
            ["i-0000000b", "i-0000000a"]
        );
        let bad: Vec<Value> =
            serde_json::from_str(r#"[{"entityValue":"i-0000000a"},{"entityValue":"i-XYZ"}]"#)
                .unwrap();
        let e = instances(&bad, InstanceIdRule::Ec2).unwrap_err();
        assert!(
            e.contains("affectedEntities[1]") && e.contains("i-XYZ"),
            "{e}"
        );
        let missing: Vec<Value> = serde_json::from_str(r#"[{"entity":"i-0000000a"}]"#).unwrap();
        assert!(instances(&missing, InstanceIdRule::Ec2)
            .unwrap_err()
            .contains("no entityValue"));
    }
}
