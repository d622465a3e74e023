//! Parsing of every sample in `events/` and of malformed bodies, and `prewarm explain` over every
//! sample file. The expected kinds, instances and times are read off the sample files by hand.

use std::path::{Path, PathBuf};

use prewarm::adapters::events::{parse_body, parse_event_document, Parsed};
use prewarm::core::interruption::{ActionTable, NoticeKind};

const NOON: f64 = 1_795_953_600.0; // 2026-11-29T12:00:00Z

fn events_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("events")
}

/// A short form of a parse: "notice <kind> <instances>", "ignored", "poison".
fn short(p: &Parsed) -> String {
    match p {
        Parsed::Notice(n) => format!("notice {} {}", n.kind, n.instance_ids.join(",")),
        Parsed::Ignored { .. } => "ignored".into(),
        Parsed::Poison { .. } => "poison".into(),
    }
}

fn parse_file(rel: &str) -> Vec<Parsed> {
    let text = std::fs::read_to_string(events_dir().join(rel)).unwrap();
    parse_event_document(&text)
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

const SPOT_OK: &str = r#"{"version":"0","id":"e1","detail-type":"EC2 Spot Instance Interruption Warning","source":"aws.ec2","account":"1","time":"2026-11-29T12:00:00Z","region":"us-east-1","resources":[],"detail":{"instance-id":"i-1","instance-action":"terminate"}}"#;

#[test]
fn malformed_bodies_are_poison_and_say_why() {
    let cases: &[(String, &str)] = &[
        ("".into(), "not JSON"),
        ("{\"version\":".into(), "not JSON"),
        (SPOT_OK.replace(r#""detail-type":"EC2 Spot Instance Interruption Warning""#, r#""detail-type":5"#), "envelope"),
        (SPOT_OK.replace(r#""time":"2026-11-29T12:00:00Z","#, ""), "no time"),
        (SPOT_OK.replace("2026-11-29T12:00:00Z", "yesterday"), "envelope"),
        (SPOT_OK.replace(r#""id":"e1","#, ""), "no id"),
        (SPOT_OK.replace(r#""instance-id":"i-1","#, ""), "instance-id is missing"),
        (SPOT_OK.replace(r#""i-1""#, r#""i-1/x""#), "not an instance id"),
        (SPOT_OK.replace(r#""i-1""#, r#""""#), "not an instance id"),
        (SPOT_OK.replace(r#"{"instance-id":"i-1","instance-action":"terminate"}"#, "[]"), "not an object"),
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
        (health(r#""startTime":"Tue, 1 Dec 2026 09:00:00 GMT","affectedEntities":[{"entityValue":"i-1"}]"#).replace("\"startTime\"", "\"start\""), "startTime is missing"),
        (health(r#""startTime":"someday","affectedEntities":[{"entityValue":"i-1"}]"#), "not a date"),
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
        ("[]".into(), "not a JSON object"),
        ("{\"hello\":1}".into(), "no detail-type"),
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
        let lines = prewarm::cli::explain::explain(&text, &ActionTable::default(), 30.0).unwrap();
        let parsed = parse_event_document(&text).unwrap();
        assert_eq!(lines.len(), parsed.len(), "{file}");
        for line in lines {
            let verdict = line["verdict"].as_str().unwrap();
            assert!(
                ["act", "ignored", "poison"].contains(&verdict),
                "{file}: {line}"
            );
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
