//! Parsing of every sample in `events/` and of malformed bodies, and `prewarm explain` over every
//! sample file. The expected kinds, instances and times are read off the sample files by hand.

use std::path::{Path, PathBuf};

use prewarm::adapters::events::{
    parse_body, parse_body_with, parse_event_document, parse_record, InstanceIdRule, Parsed,
};
use prewarm::core::interruption::{eviction_deadline, ActionTable, NoticeKind, NoticeStatus};

const NOON: f64 = 1_795_953_600.0; // 2026-11-29T12:00:00Z

fn events_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("events")
}

/// A short form of a parse: "notice <kind> <instances>", "ignored", "poison".
fn short(p: &Parsed) -> String {
    match p {
        Parsed::Notice(n) => match &n.reservation_id {
            Some(r) => format!("notice {} reservation {r}", n.kind),
            None => format!("notice {} {}", n.kind, n.instance_ids.join(",")),
        },
        Parsed::Resume(r) => format!("resume {} {}", r.node, r.instance),
        Parsed::Ignored { .. } => "ignored".into(),
        Parsed::Poison { .. } => "poison".into(),
    }
}

fn parse_file(rel: &str) -> Vec<Parsed> {
    let text = std::fs::read_to_string(events_dir().join(rel)).unwrap();
    parse_event_document(&text, InstanceIdRule::Ec2)
        .unwrap()
        .into_iter()
        .map(|(_, p)| p)
        .collect()
}

#[test]
fn every_sample_file_parses_as_expected() {
    let spot = "notice spot-interruption i-0abc1111111111111";
    let rebalance = "notice rebalance i-0abc2222222222222";
    let health = "notice scheduled-change i-0abc6666666666666,i-0abc6666666666667";
    let capres = "notice capacity-reservation i-0abc8888888888888";
    let block = "notice capacity-block reservation cr-0abc9999999999999";
    let cases: &[(&str, &[&str])] = &[
        ("sqs-spot-interruption.json", &[spot]),
        ("sqs-rebalance.json", &[rebalance]),
        (
            "sqs-state-change.json",
            &["notice state-change i-0abc3333333333333"],
        ),
        ("sqs-state-change-pending.json", &["ignored"]),
        ("sqs-health-scheduled.json", &[health]),
        ("sqs-capacity-reservation.json", &[capres]),
        // Both detail-types AWS documents for the warning.
        ("sqs-capacity-block.json", &[block, block]),
        ("sqs-ignored-asg.json", &["ignored", "ignored", "ignored"]),
        ("sqs-poison.json", &["poison", "poison"]),
        (
            "sqs-mixed-batch.json",
            &[
                spot,
                rebalance,
                "notice state-change i-0abc4444444444444",
                "ignored",
                health,
                capres,
                "ignored",
                "poison",
            ],
        ),
        (
            "sqs-wrong-input.json",
            &[
                spot, spot, health, health, spot, "poison", "poison", "poison", "poison",
            ],
        ),
        ("scheduled.json", &["ignored"]),
        ("eventbridge/spot-interruption.json", &[spot]),
        ("eventbridge/rebalance-recommendation.json", &[rebalance]),
        (
            "eventbridge/state-change-stopping.json",
            &["notice state-change i-0abc3333333333333"],
        ),
        (
            "eventbridge/state-change-terminated.json",
            &["notice state-change i-0abc4444444444444"],
        ),
        ("eventbridge/state-change-pending.json", &["ignored"]),
        ("eventbridge/health-scheduled-change.json", &[health]),
        ("eventbridge/health-issue.json", &["ignored"]),
        (
            "eventbridge/capacity-reservation-interruption.json",
            &[capres],
        ),
        (
            "eventbridge/capacity-block-expiration-warning.json",
            &[block],
        ),
        ("eventbridge/asg-terminate-lifecycle.json", &["ignored"]),
        (
            "eventbridge/spot-interruption-missing-instance-id.json",
            &["poison"],
        ),
    ];
    for (file, expected) in cases {
        let got: Vec<String> = parse_file(file).iter().map(short).collect();
        assert_eq!(&got, expected, "{file}");
    }
    // Every JSON file in events/ is covered by the table (new samples must be added to it).
    let mut covered: Vec<&str> = cases.iter().map(|(f, _)| *f).collect();
    covered.sort();
    let mut on_disk = json_files();
    on_disk.sort();
    assert_eq!(on_disk, covered);
}

fn json_files() -> Vec<&'static str> {
    let mut out = Vec::new();
    for dir in ["", "eventbridge/"] {
        for entry in std::fs::read_dir(events_dir().join(dir)).unwrap() {
            let name = entry.unwrap().file_name().into_string().unwrap();
            if name.ends_with(".json") {
                out.push(&*Box::leak(format!("{dir}{name}").into_boxed_str()));
            }
        }
    }
    out
}

#[test]
fn notice_times_come_from_the_envelope_and_the_detail() {
    let Parsed::Notice(spot) = &parse_file("eventbridge/spot-interruption.json")[0] else {
        panic!()
    };
    assert_eq!(spot.time, NOON);
    assert_eq!(spot.event_id, "1e5527d7-bb36-4607-3370-4164db56a40e");
    let Parsed::Notice(health) = &parse_file("eventbridge/health-scheduled-change.json")[0] else {
        panic!()
    };
    // startTime "Tue, 1 Dec 2026 09:00:00 GMT" = noon on Nov 29 + 45 h.
    assert_eq!(health.window_start, Some(NOON + 45.0 * 3600.0));
    // Every update of one Health event has a new EventBridge id and the same eventArn: the
    // eventArn is what owns, supersedes and closes the drain.
    assert_eq!(
        health.event_id,
        "arn:aws:health:us-east-1::event/EC2/AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED/AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED_7ebb8d3d"
    );
    let Parsed::Notice(capres) =
        &parse_file("eventbridge/capacity-reservation-interruption.json")[0]
    else {
        panic!()
    };
    assert_eq!(capres.termination_time, Some(NOON + 120.0));
    let Parsed::Notice(stop) = &parse_file("eventbridge/state-change-stopping.json")[0] else {
        panic!()
    };
    assert_eq!(stop.time, NOON + 5.0);
    assert_eq!(stop.instance_state.as_deref(), Some("stopping"));
}

const SPOT_OK: &str = r#"{"version":"0","id":"e1","detail-type":"EC2 Spot Instance Interruption Warning","source":"aws.ec2","account":"1","time":"2026-11-29T12:00:00Z","region":"us-east-1","resources":[],"detail":{"instance-id":"i-0123456789abcdef0","instance-action":"terminate"}}"#;

#[test]
fn malformed_bodies_are_poison_and_say_why() {
    let cases: &[(String, &str)] = &[
        ("".into(), "not JSON"),
        ("[]".into(), "JSON array, not an object"),
        ("\"spot\"".into(), "JSON string, not an object"),
        ("42".into(), "JSON number, not an object"),
        ("null".into(), "JSON null, not an object"),
        ("{\"hello\":1}".into(), "no detail-type and source"),
        ("{\"version\":".into(), "not JSON"),
        (SPOT_OK.replace(r#""detail-type":"EC2 Spot Instance Interruption Warning""#, r#""detail-type":5"#), "envelope"),
        (SPOT_OK.replace(r#""time":"2026-11-29T12:00:00Z","#, ""), "no time"),
        (SPOT_OK.replace("2026-11-29T12:00:00Z", "yesterday"), "envelope"),
        (SPOT_OK.replace(r#""id":"e1","#, ""), "no id"),
        (SPOT_OK.replace(r#""instance-id":"i-0123456789abcdef0","#, ""), "instance-id is missing"),
        (SPOT_OK.replace(r#""i-0123456789abcdef0""#, r#""i-0123456789abcdef0/x""#), "not an EC2 instance id"),
        (SPOT_OK.replace(r#""i-0123456789abcdef0""#, r#""""#), "not an EC2 instance id"),
        (SPOT_OK.replace(r#"{"instance-id":"i-0123456789abcdef0","instance-action":"terminate"}"#, "[]"), "not an object"),
        (
            SPOT_OK
                .replace("EC2 Spot Instance Interruption Warning", "EC2 Instance State-change Notification")
                .replace(r#","instance-action":"terminate""#, ""),
            "detail.state is missing",
        ),
        (
            SPOT_OK
                .replace("EC2 Spot Instance Interruption Warning", "EC2 Capacity Reservation Instance Interruption Warning")
                .replace(r#""instance-action":"terminate""#, r#""instance-termination-time":"soon""#),
            "instance-termination-time",
        ),
        (health(r#""startTime":"Tue, 1 Dec 2026 09:00:00 GMT","affectedEntities":[{"entityValue":"i-0123456789abcdef0"}]"#).replace("\"startTime\"", "\"start\""), "startTime is missing"),
        (health(r#""startTime":"someday","affectedEntities":[{"entityValue":"i-0123456789abcdef0"}]"#), "not a date"),
        (health(r#""startTime":"Tue, 1 Dec 2026 09:00:00 GMT""#), "affectedEntities is missing"),
    ];
    for (body, needle) in cases {
        match parse_body(body) {
            Parsed::Poison { cause } => assert!(cause.contains(needle), "{body}: {cause}"),
            other => panic!("{body}: expected poison, got {other:?}"),
        }
    }
}

fn health(detail_tail: &str) -> String {
    format!(
        r#"{{"version":"0","id":"h1","detail-type":"AWS Health Event","source":"aws.health","account":"1","time":"2026-11-29T12:00:00Z","region":"us-east-1","resources":[],"detail":{{"service":"EC2","eventTypeCategory":"scheduledChange",{detail_tail}}}}}"#
    )
}

#[test]
fn well_formed_messages_that_are_not_notices_are_ignored_with_a_reason() {
    let cases: &[(String, &str)] = &[
        (
            r#"{"Event":"autoscaling:TEST_NOTIFICATION"}"#.into(),
            "test notification",
        ),
        (
            SPOT_OK.replace("aws.ec2", "aws.s3"),
            "not an interruption notice",
        ),
        (
            SPOT_OK.replace(
                "EC2 Spot Instance Interruption Warning",
                "EC2 Spot Instance Request Fulfillment",
            ),
            "not an interruption notice",
        ),
        (
            SPOT_OK
                .replace(
                    "EC2 Spot Instance Interruption Warning",
                    "EC2 Instance State-change Notification",
                )
                .replace(r#""instance-action":"terminate""#, r#""state":"running""#),
            "running",
        ),
        (
            health(r#""startTime":"Tue, 1 Dec 2026 09:00:00 GMT","affectedEntities":[]"#),
            "names no EC2 instance",
        ),
        (
            health(r#""startTime":"Tue, 1 Dec 2026 09:00:00 GMT","affectedEntities":[]"#)
                .replace("scheduledChange", "accountNotification"),
            "accountNotification",
        ),
        (
            health(r#""startTime":"x","affectedEntities":[]"#)
                .replace(r#""service":"EC2""#, r#""service":"RDS""#),
            "RDS",
        ),
    ];
    for (body, needle) in cases {
        match parse_body(body) {
            Parsed::Ignored { reason, .. } => assert!(reason.contains(needle), "{body}: {reason}"),
            other => panic!("{body}: expected ignored, got {other:?}"),
        }
    }
    for state in ["stopping", "stopped", "shutting-down", "terminated"] {
        let body = SPOT_OK
            .replace(
                "EC2 Spot Instance Interruption Warning",
                "EC2 Instance State-change Notification",
            )
            .replace(
                r#""instance-action":"terminate""#,
                &format!(r#""state":"{state}""#),
            );
        match parse_body(&body) {
            Parsed::Notice(n) => assert_eq!(n.kind, NoticeKind::StateChange),
            other => panic!("{state}: {other:?}"),
        }
    }
}

#[test]
fn explain_library_answers_every_record_of_every_sample() {
    for file in json_files() {
        let text = std::fs::read_to_string(events_dir().join(file)).unwrap();
        let lines = prewarm::cli::explain::explain(
            &text,
            &ActionTable::default(),
            30.0,
            InstanceIdRule::Ec2,
        )
        .unwrap();
        let parsed = parse_event_document(&text, InstanceIdRule::Ec2).unwrap();
        assert_eq!(lines.len(), parsed.len(), "{file}");
        for line in lines {
            let verdict = line["verdict"].as_str().unwrap();
            assert!(
                ["act", "ignored", "poison"].contains(&verdict),
                "{file}: {line}"
            );
            assert!(
                !line["why"].as_str().unwrap_or("").is_empty(),
                "{file}: {line} does not say why"
            );
            if verdict == "act" {
                // A notice line always shows the time it counts from.
                assert!(line["issued_at"].is_string(), "{file}: {line}");
            }
        }
    }
}

#[test]
fn explain_command_line_prints_one_json_line_per_record() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_prewarm"))
        .args(["explain", "--event"])
        .arg(events_dir().join("sqs-mixed-batch.json"))
        .env("ACTIONS", "rebalance=cordon-prewarm")
        .env("EVICTION_BUDGET_SECONDS", "20")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let verdicts: Vec<&str> = lines
        .iter()
        .map(|l| l["verdict"].as_str().unwrap())
        .collect();
    assert_eq!(
        verdicts,
        ["act", "act", "act", "ignored", "act", "act", "ignored", "poison"]
    );
    assert_eq!(lines[0]["action"], "drain");
    assert_eq!(lines[0]["eviction_deadline"], "2026-11-29T12:01:40.000Z"); // 12:02 - 20 s
    assert_eq!(lines[1]["action"], "cordon-prewarm");
    assert_eq!(lines[1]["eviction_deadline"], serde_json::Value::Null);
    assert_eq!(lines[2]["action"], "evict-now");
    assert_eq!(lines[4]["eviction_deadline"], "2026-12-01T08:59:40.000Z");
    assert!(lines[7]["cause"].as_str().unwrap().contains("not JSON"));

    let bad = std::process::Command::new(env!("CARGO_BIN_EXE_prewarm"))
        .args(["explain", "--event"])
        .arg(events_dir().join("sqs-spot-interruption.json"))
        .env("ACTIONS", "spot=drain")
        .output()
        .unwrap();
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("ACTIONS"));
}

// ---------------------------------------------------------------- wrong input is not truth

/// 2026-11-29T12:00:00Z, the SentTimestamp of the records built here.
const SENT_MS: u64 = 1_795_953_600_000;
const DAY: f64 = 86_400.0;

/// One SQS record carrying `body`, received by SQS at NOON.
fn record(body: &str) -> aws_lambda_events::event::sqs::SqsMessage {
    serde_json::from_value(serde_json::json!({
        "messageId": "m-1", "receiptHandle": "rh", "body": body,
        "attributes": {"ApproximateReceiveCount": "1", "SentTimestamp": SENT_MS.to_string()},
        "messageAttributes": {}, "eventSource": "aws:sqs",
        "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:q", "awsRegion": "us-east-1"
    }))
    .unwrap()
}

fn notice_of(body: &str) -> prewarm::core::interruption::Notice {
    match parse_record(&record(body)).parsed {
        Parsed::Notice(n) => n,
        other => panic!("{body}: expected a notice, got {other:?}"),
    }
}

/// Each row: an event time and the eviction deadline (budget 30 s) worked out by hand from the
/// rule in `core::interruption::deadline`: the time is clamped into [sent − 24 h, sent].
#[test]
fn deadlines_are_bounded_by_the_sent_timestamp() {
    let spot = |time: &str| SPOT_OK.replace("2026-11-29T12:00:00Z", time);
    let state = |time: &str| {
        spot(time)
            .replace(
                "EC2 Spot Instance Interruption Warning",
                "EC2 Instance State-change Notification",
            )
            .replace(r#""instance-action":"terminate""#, r#""state":"stopping""#)
    };
    let cases: &[(&str, String, f64)] = &[
        ("spot at receipt", spot("2026-11-29T12:00:00Z"), NOON + 90.0),
        (
            "spot 10 s before",
            spot("2026-11-29T11:59:50Z"),
            NOON + 80.0,
        ),
        ("spot in 2099", spot("2099-12-01T00:00:00Z"), NOON + 90.0),
        ("spot 1 h ahead", spot("2026-11-29T13:00:00Z"), NOON + 90.0),
        (
            "spot in 1970",
            spot("1970-01-01T00:00:00Z"),
            NOON - DAY + 90.0,
        ),
        (
            "spot 2 days old",
            spot("2026-11-27T12:00:00Z"),
            NOON - DAY + 90.0,
        ),
        ("stopping in 2099", state("2099-12-01T00:00:00Z"), NOON),
    ];
    for (name, body, deadline) in cases {
        let n = notice_of(body);
        assert_eq!(n.sent_time, Some(NOON), "{name}");
        assert_eq!(eviction_deadline(&n, 30.0), Some(*deadline), "{name}");
    }
    // Without a SentTimestamp (a bare event, as `prewarm explain` may get) nothing bounds it.
    let Parsed::Notice(bare) = parse_body(&spot("2099-12-01T00:00:00Z")) else {
        panic!()
    };
    assert_eq!(bare.sent_time, None);
    assert_eq!(eviction_deadline(&bare, 30.0), Some(4_099_766_400.0 + 90.0));
}

#[test]
fn a_sent_timestamp_that_is_not_a_number_is_poison() {
    let mut m = record(SPOT_OK);
    m.attributes
        .insert("SentTimestamp".into(), "yesterday".into());
    match parse_record(&m).parsed {
        Parsed::Poison { cause } => assert!(cause.contains("SentTimestamp"), "{cause}"),
        other => panic!("{other:?}"),
    }
}

fn health_update(status: Option<&str>, start: Option<&str>) -> String {
    let mut tail = String::new();
    if let Some(s) = status {
        tail += &format!(r#""statusCode":"{s}","#);
    }
    if let Some(s) = start {
        tail += &format!(r#""startTime":"{s}","#);
    }
    health(&format!(
        r#"{tail}"affectedEntities":[{{"entityValue":"i-0123456789abcdef0"}},{{"entityValue":"vol-0123456789abcdef0"}}]"#
    ))
}

/// AWS Health sends every update of an event as a new EventBridge event; statusCode is
/// upcoming, open or closed. Expected windows read off the bodies by hand.
#[test]
fn health_status_and_moved_windows() {
    let dec1 = NOON + 45.0 * 3600.0; // Tue, 1 Dec 2026 09:00:00 GMT
    let dec8 = NOON + 45.0 * 3600.0 + 7.0 * DAY; // a week later
    let nov28 = NOON - 27.0 * 3600.0; // Sat, 28 Nov 2026 09:00:00 GMT: already begun
    /// name, body, status, window start, eviction deadline
    type Case = (&'static str, String, NoticeStatus, Option<f64>, Option<f64>);
    let cases: &[Case] = &[
        (
            "no statusCode (the tools' samples)",
            health_update(None, Some("Tue, 1 Dec 2026 09:00:00 GMT")),
            NoticeStatus::Active,
            Some(dec1),
            Some(dec1 - 30.0),
        ),
        (
            "upcoming",
            health_update(Some("upcoming"), Some("Tue, 1 Dec 2026 09:00:00 GMT")),
            NoticeStatus::Active,
            Some(dec1),
            Some(dec1 - 30.0),
        ),
        (
            "moved a week later: still a notice, with the later window",
            health_update(Some("upcoming"), Some("Tue, 8 Dec 2026 09:00:00 GMT")),
            NoticeStatus::Active,
            Some(dec8),
            Some(dec8 - 30.0),
        ),
        (
            "open, window begun: due at once",
            health_update(Some("open"), Some("Sat, 28 Nov 2026 09:00:00 GMT")),
            NoticeStatus::Active,
            Some(nov28),
            Some(nov28 - 30.0),
        ),
        (
            "closed after the window: no deadline",
            health_update(Some("closed"), Some("Sat, 28 Nov 2026 09:00:00 GMT")),
            NoticeStatus::Closed,
            Some(nov28),
            None,
        ),
        (
            "closed without a window (cancelled)",
            health_update(Some("closed"), None),
            NoticeStatus::Closed,
            None,
            None,
        ),
    ];
    for (name, body, status, window, deadline) in cases {
        let n = notice_of(body);
        assert_eq!(n.kind, NoticeKind::ScheduledChange, "{name}");
        assert_eq!(n.status, *status, "{name}");
        assert_eq!(n.instance_ids, ["i-0123456789abcdef0"], "{name}");
        assert_eq!(n.window_start, *window, "{name}");
        assert_eq!(eviction_deadline(&n, 30.0), *deadline, "{name}");
    }
    for (body, needle) in [
        (
            health_update(Some("investigating"), Some("Tue, 1 Dec 2026 09:00:00 GMT")),
            "statusCode \"investigating\" is not upcoming, open or closed",
        ),
        (health_update(Some("open"), None), "startTime is missing"),
        (
            health_update(None, Some("Tue, 1 Dec 2026 09:00:00 GMT")).replace(
                r#""eventTypeCategory":"scheduledChange","#,
                r#""eventTypeCategory":"scheduledChange","statusCode":7,"#,
            ),
            "statusCode is not a string",
        ),
    ] {
        match parse_body(&body) {
            Parsed::Poison { cause } => assert!(cause.contains(needle), "{body}: {cause}"),
            other => panic!("{body}: {other:?}"),
        }
    }
}

fn sns(kind: &str, message: &str) -> String {
    serde_json::json!({
        "Type": kind, "MessageId": "s-1", "TopicArn": "arn:aws:sns:us-east-1:123456789012:t",
        "Message": message, "Timestamp": "2026-11-29T12:00:00.100Z"
    })
    .to_string()
}

#[test]
fn sns_envelopes_are_unwrapped_once_or_refused() {
    // The notice inside a notification is the same as the bare event's.
    assert_eq!(
        parse_body(&sns("Notification", SPOT_OK)),
        parse_body(SPOT_OK)
    );
    let ignored = SPOT_OK.replace("aws.ec2", "aws.s3");
    match parse_body(&sns("Notification", &ignored)) {
        Parsed::Ignored { reason, .. } => {
            assert!(
                reason.starts_with("(in SNS notification) aws.s3"),
                "{reason}"
            )
        }
        other => panic!("{other:?}"),
    }
    let cases = [
        (sns("Notification", "not json"), "message is not JSON"),
        (sns("Notification", "[]"), "JSON array, not an object"),
        (
            sns("Notification", &sns("Notification", SPOT_OK)),
            "wraps another SNS message",
        ),
        (sns("SubscriptionConfirmation", "{}"), "not a notification"),
        (
            sns("Notification", "x").replace(r#""Message":"x""#, r#""Message":{}"#),
            "no Message string",
        ),
        (
            sns(
                "Notification",
                &SPOT_OK.replace(r#""i-0123456789abcdef0""#, r#""node-1""#),
            ),
            "not an EC2 instance id",
        ),
    ];
    for (body, needle) in cases {
        match parse_body(&body) {
            Parsed::Poison { cause } => {
                assert!(cause.contains("SNS") && cause.contains(needle), "{cause}")
            }
            other => panic!("{body}: {other:?}"),
        }
    }
}

#[test]
fn instance_ids_are_validated() {
    let spot = |id: &str| SPOT_OK.replace("i-0123456789abcdef0", id);
    for (id, ok) in [
        ("i-0123456789abcdef0", true),
        ("i-89abcdef", true),
        ("fargate-ip-192-168-1-1.ec2.internal", false),
        ("ip-192-168-1-1.ec2.internal", false),
        ("i-0123456789ABCDEF0", false),
        ("i-0123456789abcdef", false),
        ("i-0123456789abcdéf0", false),
        ("kwok-gpu-abc12-x7k2p-42", false),
    ] {
        match (parse_body(&spot(id)), ok) {
            (Parsed::Notice(n), true) => assert_eq!(n.instance_ids, [id]),
            (Parsed::Poison { cause }, false) => {
                assert!(cause.contains("not an EC2 instance id"), "{cause}")
            }
            (other, _) => panic!("{id}: {other:?}"),
        }
    }
    // The local stack's kwok node names pass only when asked for.
    let kwok = spot("kwok-gpu-abc12-x7k2p-42");
    assert!(matches!(
        parse_body_with(&kwok, InstanceIdRule::Ec2OrKwok),
        Parsed::Notice(_)
    ));
    // A Health event skips entities that are not instances but refuses a broken instance id.
    let entities = |list: &str| {
        health_update(Some("upcoming"), Some("Tue, 1 Dec 2026 09:00:00 GMT")).replace(
            r#"[{"entityValue":"i-0123456789abcdef0"},{"entityValue":"vol-0123456789abcdef0"}]"#,
            list,
        )
    };
    match parse_body(&entities(
        r#"[{"entityValue":"vol-1"},{"entityValue":"i-BAD"}]"#,
    )) {
        Parsed::Poison { cause } => assert!(cause.contains("affectedEntities[1]"), "{cause}"),
        other => panic!("{other:?}"),
    }
    match parse_body(&entities(r#"[{"entityValue":"vol-1"}]"#)) {
        Parsed::Ignored { reason, .. } => assert!(reason.contains("names no EC2 instance")),
        other => panic!("{other:?}"),
    }
}

/// A Health event naming 2,000 instances (and each a second time): one notice with the 2,000
/// ids once each, in the event's order. Its parse time is measured by `cargo bench --bench
/// events` (docs/results.md, benchmarks), not asserted here.
#[test]
fn a_health_event_naming_two_thousand_instances_keeps_them_all_once() {
    let ids: Vec<String> = (0..2000).map(|i| format!("i-{i:017x}")).collect();
    let entities: Vec<serde_json::Value> = ids
        .iter()
        .chain(ids.iter())
        .map(|id| serde_json::json!({"entityValue": id}))
        .collect();
    let body = health(&format!(
        r#""statusCode":"upcoming","startTime":"Tue, 1 Dec 2026 09:00:00 GMT","affectedEntities":{}"#,
        serde_json::Value::from(entities)
    ));
    let n = notice_of(&body);
    assert_eq!(n.instance_ids, ids);
    assert_eq!(n.instance_ids.chunks(100).count(), 20);
}

/// `prewarm explain` on the wrong-input sample: the bounded deadline and why, per record.
#[test]
fn explain_prints_the_bounded_deadline_and_why() {
    let text = std::fs::read_to_string(events_dir().join("sqs-wrong-input.json")).unwrap();
    let lines =
        prewarm::cli::explain::explain(&text, &ActionTable::default(), 30.0, InstanceIdRule::Ec2)
            .unwrap();
    let field = |i: usize, k: &str| lines[i][k].as_str().unwrap_or("").to_string();
    // 0: spot "from 2099", SQS received it at noon: 12:02 - 30 s.
    assert_eq!(field(0, "notice_time"), "2099-12-01T00:00:00.000Z");
    assert_eq!(field(0, "issued_at"), "2026-11-29T12:00:00.000Z");
    assert_eq!(field(0, "eviction_deadline"), "2026-11-29T12:01:30.000Z");
    assert!(field(0, "time_bound").contains("after SQS received"));
    assert!(field(0, "why").contains("ACTIONS maps spot-interruption to drain"));
    // 1: spot "from 1970": counted from a day before receipt.
    assert_eq!(field(1, "issued_at"), "2026-11-28T12:00:00.000Z");
    assert_eq!(field(1, "eviction_deadline"), "2026-11-28T12:01:30.000Z");
    assert!(field(1, "time_bound").contains("more than 24 h before"));
    // 2: the maintenance moved a week later: acted on with the later window.
    assert_eq!(field(2, "verdict"), "act");
    assert_eq!(field(2, "eviction_deadline"), "2026-12-08T08:59:30.000Z");
    // 3: closed: acted on by un-draining, no deadline, no action.
    assert_eq!(field(3, "status"), "closed");
    assert_eq!(lines[3]["eviction_deadline"], serde_json::Value::Null);
    assert!(field(3, "why").contains("statusCode closed"));
    assert!(field(3, "plan").contains("un-drain"));
    // 4: unwrapped from SNS; 5-8: poison, each saying why.
    assert_eq!(field(4, "event_id"), "1e5527d7-bb36-4607-3370-4164db56a40e");
    for (i, needle) in [
        (5, "SubscriptionConfirmation"),
        (6, "JSON array"),
        (
            7,
            "\"fargate-ip-192-168-1-1.ec2.internal\" is not an EC2 instance id",
        ),
        (8, "outside ASCII"),
    ] {
        assert_eq!(field(i, "verdict"), "poison", "{i}");
        assert!(field(i, "why").contains(needle), "{i}: {}", field(i, "why"));
    }
}

/// Event ids and Health eventArns go into node annotations, placeholder annotations and Event
/// notes: bounded to `MAX_EVENT_ID` printable ASCII characters. A longer one (or one with other
/// characters) keeps its start and ends in a hash of the whole id, so it stays stable across
/// deliveries and two ids sharing a long start still differ. Real ones pass unchanged.
#[test]
fn oversized_event_ids_and_arns_are_bounded() {
    use prewarm::adapters::events::{bounded_event_id, MAX_EVENT_ID};
    let notice_id = |body: &str| match parse_body(body) {
        Parsed::Notice(n) => n.event_id,
        other => panic!("{other:?}"),
    };
    let long = "e".repeat(100_000);
    let got = notice_id(&SPOT_OK.replace(r#""id":"e1""#, &format!(r#""id":"{long}""#)));
    assert!(got.len() <= MAX_EVENT_ID, "{}", got.len());
    assert!(got.starts_with("eeee"), "{got}");
    assert_eq!(got, bounded_event_id(&long), "deterministic");
    let other = notice_id(&SPOT_OK.replace(r#""id":"e1""#, &format!(r#""id":"{long}f""#)));
    assert_ne!(got, other, "two long ids with the same start differ");
    // Control and non-ASCII characters never reach an annotation or a note.
    let odd = notice_id(&SPOT_OK.replace(r#""id":"e1""#, r#""id":"e1\nforged: ünïcode""#));
    assert!(
        odd.len() <= MAX_EVENT_ID && odd.chars().all(|c| c.is_ascii_graphic()),
        "{odd:?}"
    );
    assert_ne!(odd, "e1");
    // A real id is unchanged.
    assert_eq!(notice_id(SPOT_OK), "e1");
    // A Health eventArn of 10 000 characters.
    let text =
        std::fs::read_to_string(events_dir().join("eventbridge/health-scheduled-change.json"))
            .unwrap();
    let arn = "arn:aws:health:us-east-1::event/EC2/AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED/AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED_7ebb8d3d";
    assert!(text.contains(arn));
    let huge = format!("{arn}{}", "x".repeat(10_000));
    let got = notice_id(&text.replace(arn, &huge));
    assert!(got.len() <= MAX_EVENT_ID, "{}", got.len());
    assert!(
        got.starts_with("arn:aws:health:us-east-1::event/EC2/"),
        "{got}"
    );
    assert_eq!(got, bounded_event_id(&huge));
    // Ignored events carry the bounded id too (logs).
    let ignored = SPOT_OK
        .replace("EC2 Spot Instance Interruption Warning", "Something Else")
        .replace(r#""id":"e1""#, &format!(r#""id":"{long}""#));
    match parse_body(&ignored) {
        Parsed::Ignored {
            event_id: Some(id), ..
        } => assert!(id.len() <= MAX_EVENT_ID),
        other => panic!("{other:?}"),
    }
}
