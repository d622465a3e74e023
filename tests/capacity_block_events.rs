//! Parsing of Capacity Block expiration warnings (`aws.ec2`, both detail-types AWS documents:
//! EC2 User Guide, "Monitor Capacity Blocks using EventBridge") into notices naming their
//! reservation, and their deadline through an SQS record. Expected values worked out by hand
//! from the bodies below.

use prewarm::adapters::events::{parse_body, parse_record, Parsed};
use prewarm::core::interruption::{eviction_deadline, NoticeKind};

const NOON: f64 = 1_795_953_600.0; // 2026-11-29T12:00:00Z

/// A warning with `detail-type` and `detail` as given; sent at NOON.
fn warning(detail_type: &str, detail: &str) -> String {
    format!(
        r#"{{"version":"0","id":"cb1","detail-type":"{detail_type}","source":"aws.ec2","account":"1","time":"2026-11-29T12:00:00Z","region":"us-east-1","resources":["arn:aws:ec2:us-east-1:1:capacity-reservation/cr-0123456789abcdef0"],"detail":{detail}}}"#
    )
}

const SHORT: &str = "Capacity Block Expiration Warning";
const LONG: &str = "Capacity Block Reservation Expiration Warning";
const OK_DETAIL: &str =
    r#"{"capacity-reservation-id":"cr-0123456789abcdef0","end-date":"2026-11-29T12:40:00Z"}"#;

#[test]
fn both_detail_types_are_capacity_block_notices_naming_the_reservation() {
    for detail_type in [SHORT, LONG] {
        let Parsed::Notice(n) = parse_body(&warning(detail_type, OK_DETAIL)) else {
            panic!("{detail_type}: not a notice")
        };
        assert_eq!(n.kind, NoticeKind::CapacityBlock, "{detail_type}");
        assert_eq!(
            n.reservation_id.as_deref(),
            Some("cr-0123456789abcdef0"),
            "{detail_type}"
        );
        // 12:40:00Z = NOON + 2400 s.
        assert_eq!(n.reservation_end, Some(NOON + 2400.0), "{detail_type}");
        assert!(
            n.instance_ids.is_empty(),
            "{detail_type}: names no instance"
        );
        assert_eq!(n.event_id, "cb1");
    }
    // An 8-digit id (older reservations) is one too.
    let old = OK_DETAIL.replace("cr-0123456789abcdef0", "cr-0123abcd");
    let Parsed::Notice(n) = parse_body(&warning(SHORT, &old)) else {
        panic!("8-digit id: not a notice")
    };
    assert_eq!(n.reservation_id.as_deref(), Some("cr-0123abcd"));
    // The Capacity Block's other events (delivered) are not interruption notices.
    let delivered = warning("Capacity Block Delivered", OK_DETAIL);
    assert!(
        matches!(parse_body(&delivered), Parsed::Ignored { .. }),
        "delivered"
    );
}

#[test]
fn a_bad_or_missing_reservation_id_or_end_date_is_poison() {
    let cases: &[(String, &str)] = &[
        (
            OK_DETAIL.replace(r#""capacity-reservation-id":"cr-0123456789abcdef0","#, ""),
            "capacity-reservation-id is missing",
        ),
        (
            OK_DETAIL.replace("cr-0123456789abcdef0", "cr-0123456789ABCDEF0"),
            "not a capacity reservation id",
        ),
        (
            OK_DETAIL.replace("cr-0123456789abcdef0", "cr-0123456789abcdef"),
            "not a capacity reservation id",
        ),
        (
            // A label selector must not be smuggled in through the id.
            OK_DETAIL.replace("cr-0123456789abcdef0", "cr-0123abcd,x=y"),
            "not a capacity reservation id",
        ),
        (
            OK_DETAIL.replace("cr-0123456789abcdef0", "i-0123456789abcdef0"),
            "not a capacity reservation id",
        ),
        (
            OK_DETAIL.replace(r#""cr-0123456789abcdef0""#, "17"),
            "capacity-reservation-id is not a string",
        ),
        (
            OK_DETAIL.replace("2026-11-29T12:40:00Z", "in forty minutes"),
            "end-date \"in forty minutes\" is not a date",
        ),
    ];
    for detail_type in [SHORT, LONG] {
        for (detail, needle) in cases {
            let body = warning(detail_type, detail);
            match parse_body(&body) {
                Parsed::Poison { cause } => {
                    assert!(cause.contains(needle), "{body}: {cause}");
                    assert!(cause.starts_with(detail_type), "{body}: {cause}");
                }
                other => panic!("{body}: expected poison, got {other:?}"),
            }
        }
    }
}

/// Each row: the detail, then the eviction deadline (budget 30 s) of the record SQS received at
/// NOON, by the rule in `core::interruption::deadline`: end-date − 30 min, within
/// [issued, issued + 10 min], else issued + 10 min; minus the budget.
#[test]
fn the_deadline_is_thirty_minutes_before_the_end_date_bounded_by_the_warning() {
    let cases: &[(&str, String, f64)] = &[
        // 12:40 − 30 min = 12:10 = NOON + 600; − 30.
        ("on time", OK_DETAIL.to_string(), NOON + 570.0),
        (
            // No end-date: NOON + 600; − 30.
            "missing end-date",
            r#"{"capacity-reservation-id":"cr-0123456789abcdef0"}"#.into(),
            NOON + 570.0,
        ),
        (
            // 12:35 − 30 min = 12:05 = NOON + 300; − 30.
            "warned late",
            OK_DETAIL.replace("12:40:00Z", "12:35:00Z"),
            NOON + 270.0,
        ),
        (
            // 2099 − 30 min is past NOON + 600: NOON + 600; − 30.
            "end-date in 2099",
            OK_DETAIL.replace("2026-11-29T12:40:00Z", "2099-12-01T00:00:00Z"),
            NOON + 570.0,
        ),
        (
            // 11:00 − 30 min is before NOON: NOON; − 30.
            "end-date already past",
            OK_DETAIL.replace("12:40:00Z", "11:00:00Z"),
            NOON - 30.0,
        ),
    ];
    for (name, detail, deadline) in cases {
        let mut message = aws_lambda_events::event::sqs::SqsMessage::default();
        message.body = Some(warning(LONG, detail));
        message
            .attributes
            .insert("SentTimestamp".into(), "1795953600000".into());
        let Parsed::Notice(n) = parse_record(&message).parsed else {
            panic!("{name}: not a notice")
        };
        assert_eq!(n.sent_time, Some(NOON), "{name}");
        assert_eq!(eviction_deadline(&n, 30.0), Some(*deadline), "{name}");
    }
}

#[test]
fn explain_names_the_reservation_and_a_bounded_end_date() {
    let text = warning(
        SHORT,
        &OK_DETAIL.replace("2026-11-29T12:40:00Z", "2099-12-01T00:00:00Z"),
    );
    let lines = prewarm::cli::explain::explain(
        &text,
        &prewarm::core::interruption::ActionTable::default(),
        30.0,
        prewarm::adapters::events::InstanceIdRule::Ec2,
    )
    .unwrap();
    let line = &lines[0];
    assert_eq!(line["kind"], "capacity-block");
    assert_eq!(line["reservation_id"], "cr-0123456789abcdef0");
    let why = line["why"].as_str().unwrap();
    assert!(
        why.contains("capacity reservation cr-0123456789abcdef0")
            && why.contains("karpenter.k8s.aws/capacity-reservation-id=cr-0123456789abcdef0"),
        "{why}"
    );
    // Issued 12:00:00Z, no SentTimestamp: termination counted from 12:10:00Z, not 2099.
    let bound = line["time_bound"].as_str().unwrap();
    assert!(bound.contains("outside the ten-minute warning"), "{bound}");
    assert_eq!(line["instance_end"], "2026-11-29T12:10:00.000Z");
}
