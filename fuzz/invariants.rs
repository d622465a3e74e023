//! What must hold for every input to the interruption parsing, whatever the input. Shared (by
//! `#[path]`) by the cargo-fuzz targets in fuzz/fuzz_targets and by tests/events_corpus.rs, which
//! replays the committed corpus on stable Rust. Each check panics naming the broken invariant.

use aws_lambda_events::event::sqs::SqsMessage;
use prewarm::adapters::events::{
    instance_id, parse_body_with, parse_event_document, parse_record_with, InstanceIdRule, Parsed,
    MAX_EVENT_ID,
};
use prewarm::core::interruption::deadline::{
    CAPACITY_BLOCK_WARNING_SECONDS, MAX_DELIVERY_DELAY_S, MAX_SCHEDULED_LEAD_S, WARNING_SECONDS,
};
use prewarm::core::interruption::{
    eviction_deadline, issued_at, ActionTable, Notice, NoticeKind, NoticeStatus,
};
use serde_json::Value;

/// The SentTimestamp of the records built around fuzzed bodies: 2026-11-29T12:00:00Z.
pub const SENT_MS: u64 = 1_795_953_600_000;
const RULES: [InstanceIdRule; 2] = [InstanceIdRule::Ec2, InstanceIdRule::Ec2OrKwok];
/// The longest reason or cause, in bytes, whatever the body (up to 256 KiB) holds: it is logged.
pub const MAX_WHY: usize = 2048;

/// `body` as the body of one SQS record, under both instance-id rules.
pub fn check_body(body: &str) {
    let mut message = SqsMessage::default();
    message.message_id = Some("m-1".into());
    message.body = Some(body.to_string());
    message
        .attributes
        .insert("SentTimestamp".into(), SENT_MS.to_string());
    let sent = SENT_MS as f64 / 1000.0;
    // The kwok rule differs only where a kwok- name appears: checking it elsewhere would halve
    // the fuzzer's speed for nothing.
    let rules = if body.contains("kwok-") {
        &RULES[..]
    } else {
        &RULES[..1]
    };
    for &rule in rules {
        let parsed = parse_record_with(&message, rule).parsed;
        // The record adds only the SentTimestamp to what the body alone gives.
        let body_only = match parse_body_with(body, rule) {
            Parsed::Notice(n) => Parsed::Notice(Notice {
                sent_time: Some(sent),
                ..n
            }),
            other => other,
        };
        assert_eq!(parsed, body_only, "record and body disagree under {rule:?}");
        // One rule for what is not a JSON object, whatever else the body holds: it is poison.
        // (Checked the other way round, so the extra parse runs only for the rarer non-poison.)
        if !matches!(parsed, Parsed::Poison { .. }) {
            let value = serde_json::from_str::<Value>(body);
            assert!(
                value.is_ok_and(|v| v.is_object()),
                "a body that is not a JSON object is not poison"
            );
        }
        check_parsed(&parsed, rule);
        if let Parsed::Notice(n) = &parsed {
            assert_eq!(n.sent_time, Some(sent), "sent_time not carried");
        }
    }
}

/// A whole file as `prewarm explain` takes it (an SQS event or one bare EventBridge event).
pub fn check_document(text: &str) {
    let rules = if text.contains("kwok-") {
        &RULES[..]
    } else {
        &RULES[..1]
    };
    for &rule in rules {
        let parsed = parse_event_document(text, rule);
        let explained = prewarm::cli::explain::explain(text, &ActionTable::default(), 30.0, rule);
        match (parsed, explained) {
            (Ok(records), Ok(lines)) => {
                assert_eq!(records.len(), lines.len(), "one explain line per record");
                for ((_, p), line) in records.iter().zip(&lines) {
                    check_parsed(p, rule);
                    let verdict = line["verdict"].as_str().expect("verdict");
                    let want = match p {
                        Parsed::Notice(_) | Parsed::Resume(_) => "act",
                        Parsed::Ignored { .. } => "ignored",
                        Parsed::Poison { .. } => "poison",
                    };
                    assert_eq!(verdict, want, "explain verdict");
                    let why = line["why"].as_str().expect("why");
                    assert!(!why.is_empty(), "explain says why");
                }
            }
            (Err(_), Err(_)) => {}
            (p, e) => panic!(
                "parse and explain disagree: {:?} / {:?}",
                p.is_ok(),
                e.is_ok()
            ),
        }
    }
}

/// The invariants of one classification.
pub fn check_parsed(parsed: &Parsed, rule: InstanceIdRule) {
    serde_json::to_string(parsed).expect("a classification serialises");
    match parsed {
        Parsed::Ignored { reason, event_id } => {
            assert!(!reason.is_empty(), "ignored without a reason");
            assert!(
                reason.len() <= MAX_WHY,
                "a reason of {} bytes",
                reason.len()
            );
            if let Some(id) = event_id {
                check_event_id(id);
            }
        }
        Parsed::Poison { cause } => {
            assert!(!cause.is_empty(), "poison without a cause");
            assert!(cause.len() <= MAX_WHY, "a cause of {} bytes", cause.len());
        }
        Parsed::Notice(n) => check_notice(n, rule),
        Parsed::Resume(r) => {
            assert!(!r.node.is_empty(), "resume-drain without a node");
            assert!(r.node.len() <= 253, "a node name of {} bytes", r.node.len());
            assert!(
                instance_id::check(&r.instance, rule).is_ok(),
                "invalid id {:?}",
                r.instance
            );
        }
    }
}

/// An event id as kept (`bounded_event_id`): printable ASCII, at most `MAX_EVENT_ID` long.
fn check_event_id(id: &str) {
    assert!(
        id.len() <= MAX_EVENT_ID,
        "an event id of {} bytes",
        id.len()
    );
    assert!(
        id.chars().all(|c| c.is_ascii_graphic()),
        "event id {id:?} not printable ASCII"
    );
}

fn check_notice(n: &Notice, rule: InstanceIdRule) {
    assert!(!n.event_id.is_empty(), "notice without an event id");
    check_event_id(&n.event_id);
    // A Capacity Block warning names its reservation instead; every other notice instances.
    assert_eq!(
        n.instance_ids.is_empty(),
        n.kind == NoticeKind::CapacityBlock,
        "a notice names instances unless it is a Capacity Block warning"
    );
    assert_eq!(
        n.reservation_id.is_some(),
        n.kind == NoticeKind::CapacityBlock,
        "reservation_id only and always on Capacity Block warnings"
    );
    if let Some(id) = &n.reservation_id {
        assert!(
            instance_id::is_ec2_resource_id(id, "cr-"),
            "invalid reservation id {id:?}"
        );
    }
    assert!(
        n.reservation_end.is_none() || n.kind == NoticeKind::CapacityBlock,
        "reservation_end only on Capacity Block warnings"
    );
    let mut seen = std::collections::HashSet::new();
    for id in &n.instance_ids {
        assert!(instance_id::check(id, rule).is_ok(), "invalid id {id:?}");
        assert!(seen.insert(id), "duplicate id {id:?}");
    }
    if n.kind != NoticeKind::ScheduledChange {
        assert!(
            n.instance_ids.len() <= 1,
            "an EC2 notice names one instance"
        );
        assert_eq!(n.status, NoticeStatus::Active, "only Health notices close");
    }
    assert_eq!(
        n.instance_state.is_some(),
        n.kind == NoticeKind::StateChange,
        "instance_state only and always on state changes"
    );
    assert!(
        n.termination_time.is_none() || n.kind == NoticeKind::CapacityReservation,
        "termination_time only on capacity reservations"
    );
    assert!(
        n.window_start.is_none() || n.kind == NoticeKind::ScheduledChange,
        "window_start only on Health notices"
    );
    if n.kind == NoticeKind::ScheduledChange && n.status == NoticeStatus::Active {
        assert!(
            n.window_start.is_some(),
            "an active Health notice has a window"
        );
    }
    for t in [
        Some(n.time),
        n.sent_time,
        n.window_start,
        n.termination_time,
        n.reservation_end,
    ]
    .into_iter()
    .flatten()
    {
        assert!(t.is_finite(), "time {t} not finite");
    }
    let issued = issued_at(n);
    if let Some(sent) = n.sent_time {
        assert!(
            (sent - MAX_DELIVERY_DELAY_S..=sent).contains(&issued),
            "issued {issued} outside [sent - 24 h, sent]"
        );
    }
    for budget in [0.0, 30.0] {
        let deadline = eviction_deadline(n, budget);
        let expected_range = match (n.kind, n.status) {
            (_, NoticeStatus::Closed) | (NoticeKind::Rebalance, _) => None,
            (NoticeKind::SpotInterruption, _) => {
                Some((issued + WARNING_SECONDS - budget)..=(issued + WARNING_SECONDS - budget))
            }
            (NoticeKind::StateChange, _) => Some(issued..=issued),
            (NoticeKind::CapacityReservation, _) => {
                Some((issued - budget)..=(issued + WARNING_SECONDS - budget))
            }
            (NoticeKind::ScheduledChange, _) => {
                Some(f64::MIN..=(issued + MAX_SCHEDULED_LEAD_S - budget))
            }
            (NoticeKind::CapacityBlock, _) => {
                Some((issued - budget)..=(issued + CAPACITY_BLOCK_WARNING_SECONDS - budget))
            }
        };
        match (deadline, expected_range) {
            (None, None) => {}
            (Some(d), Some(range)) => assert!(range.contains(&d), "deadline {d} not in {range:?}"),
            (d, r) => panic!("deadline {d:?} where {r:?} was expected"),
        }
    }
}
