//! The interruption parsing on bodies as large as an SQS message from EventBridge can be (256 KiB,
//! EventBridge's largest event), on stable Rust: random bytes, and well-formed envelopes with huge
//! fields — a 200 KB Health description, thousands of affected entities, nesting on both sides of
//! serde_json's depth limit, long id lists, SNS-wrapped copies. The cargo-fuzz targets (`make
//! fuzz`) stop at 16 KiB; these properties cover the sizes above. Every body holds the
//! invariants of fuzz/invariants.rs (no panic; exactly one verdict with its reason or cause;
//! bounded ids; a notice's instance ids valid and unique), and where the body is built to be a
//! notice, ignored or poison, it is that.
//!
//! `PROPTEST_CASES` sets the cases per property (default 16, a few seconds in all); docs/testing.md
//! gives a long run's figures.

use prewarm::adapters::events::{parse_body, Parsed, MAX_EVENT_ID};
use prewarm::core::interruption::NoticeKind;
use proptest::prelude::*;
use proptest::test_runner::Config;
use serde_json::json;

// Only the body's checks are used here.
#[allow(dead_code)]
#[path = "../fuzz/invariants.rs"]
mod invariants;

/// The largest body: an SQS message fed by EventBridge (whose events are at most 256 KiB).
const MAX_BODY: usize = 256 * 1024;
/// serde_json refuses input nested deeper than this many arrays or objects (its recursion limit
/// of 128, the outermost level included).
const DEPTH_LIMIT: usize = 127;
const INSTANCE: &str = "i-0123456789abcdef0";

fn config() -> Config {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(16);
    Config {
        cases,
        // A failing 256 KiB input shrinks slowly; a few hundred steps find the field that matters.
        max_shrink_iters: 256,
        ..Config::default()
    }
}

/// `i-` and 17 hex digits from `n`: a valid, distinct instance id per `n`.
fn instance(n: usize) -> String {
    format!("i-{n:017x}")
}

/// A spot warning for `INSTANCE` with `id`, `resources` and `extra` (raw JSON members, each
/// starting with a comma) in its detail.
fn spot(id: &str, resources: &[String], extra: &str) -> String {
    let head = json!({
        "version": "0", "id": id, "detail-type": "EC2 Spot Instance Interruption Warning",
        "source": "aws.ec2", "account": "123456789012", "time": "2026-11-29T12:00:00Z",
        "region": "us-east-1", "resources": resources,
    })
    .to_string();
    let detail = format!(r#"{{"instance-id":"{INSTANCE}","instance-action":"terminate"{extra}}}"#);
    format!(r#"{},"detail":{detail}}}"#, &head[..head.len() - 1])
}

/// An AWS Health scheduled change naming `entities` (as entityValue strings), with an English
/// description of `description` bytes.
fn health(id: &str, entities: &[String], description: usize) -> String {
    let entities: Vec<_> = entities.iter().map(|e| json!({"entityValue": e})).collect();
    json!({
        "version": "0", "id": id, "detail-type": "AWS Health Event", "source": "aws.health",
        "account": "123456789012", "time": "2026-11-29T12:00:00Z", "region": "us-east-1",
        "resources": [],
        "detail": {
            "eventArn": "arn:aws:health:us-east-1::event/EC2/AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED/x",
            "service": "EC2", "eventTypeCategory": "scheduledChange",
            "eventTypeCode": "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED",
            "startTime": "Tue, 1 Dec 2026 09:00:00 GMT",
            "eventDescription": [{"language": "en_US", "latestDescription": "x".repeat(description)}],
            "affectedEntities": entities,
        }
    })
    .to_string()
}

/// `body` inside an SNS notification (EventBridge → SNS → SQS without raw delivery).
fn sns(body: &str) -> String {
    json!({"Type": "Notification", "MessageId": "m", "Message": body,
           "TopicArn": "arn:aws:sns:us-east-1:123456789012:prewarm"})
    .to_string()
}

/// The invariants, and the verdict's name.
fn verdict(body: &str) -> &'static str {
    assert!(body.len() <= MAX_BODY, "a body of {} bytes", body.len());
    invariants::check_body(body);
    match parse_body(body) {
        Parsed::Notice(_) => "notice",
        Parsed::Resume(_) => "resume",
        Parsed::Ignored { .. } => "ignored",
        Parsed::Poison { .. } => "poison",
    }
}

/// Valid UTF-8 of at most `MAX_BODY` bytes from any bytes (what SQS carries is text).
fn text(bytes: &[u8]) -> String {
    let mut s = String::from_utf8_lossy(bytes).into_owned();
    let mut cut = s.len().min(MAX_BODY);
    while !s.is_char_boundary(cut) {
        cut -= 1;
    }
    s.truncate(cut);
    s
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn any_bytes_up_to_256_kib(bytes in prop::collection::vec(any::<u8>(), 0..=MAX_BODY)) {
        verdict(&text(&bytes));
    }

    /// JSON-looking soup: the parser's own words, brackets and quotes, up to 256 KiB.
    #[test]
    fn soup_of_the_parsers_words(words in prop::collection::vec(prop::sample::select(vec![
        "{", "}", "[", "]", ",", ":", "\"", "\"detail-type\"", "\"source\"", "\"aws.ec2\"",
        "\"aws.health\"", "\"detail\"", "\"id\"", "\"time\"", "\"2026-11-29T12:00:00Z\"",
        "\"instance-id\"", "\"i-0123456789abcdef0\"", "\"affectedEntities\"", "\"entityValue\"",
        "\"Type\"", "\"Notification\"", "\"Message\"", "\"TopicArn\"", "\"prewarm\"", "null", "1",
        "\"EC2 Spot Instance Interruption Warning\"", "\"AWS Health Event\"", "\\\"", " ",
    ]), 0..40_000)) {
        verdict(&text(words.concat().as_bytes()));
    }

    /// A Health event with a description of up to 200 KB and up to 5,000 entities (instances,
    /// repeated, and other resources) is one notice naming each instance once, in order.
    #[test]
    fn health_events_with_huge_descriptions_and_entity_lists(
        description in 0usize..=200_000,
        distinct in 1usize..=2_500,
        repeats in 1usize..=2,
        volumes in 0usize..=500,
        wrapped in any::<bool>(),
    ) {
        let ids: Vec<String> = (0..distinct).map(instance).collect();
        let mut entities: Vec<String> = (0..repeats).flat_map(|_| ids.clone()).collect();
        entities.extend((0..volumes).map(|v| format!("vol-{v:017x}")));
        // Room for the entities (about 44 bytes each): the description takes what is left.
        let room = MAX_BODY - 2_000 - entities.len() * 44;
        let mut body = health("e-1", &entities, description.min(room));
        if wrapped {
            body = sns(&body);
            prop_assume!(body.len() <= MAX_BODY);
        }
        prop_assert_eq!(verdict(&body), "notice");
        match parse_body(&body) {
            Parsed::Notice(n) => {
                prop_assert_eq!(n.kind, NoticeKind::ScheduledChange);
                prop_assert_eq!(n.instance_ids, ids);
            }
            other => prop_assert!(false, "{other:?}"),
        }
    }

    /// Nesting inside a spot warning's detail: up to serde_json's limit the warning is a notice;
    /// past it the body is poison (never a stack overflow), however deep — even 100,000 levels.
    #[test]
    fn nesting_on_both_sides_of_the_depth_limit(
        depth in prop_oneof![1usize..=DEPTH_LIMIT + 3, DEPTH_LIMIT..=100_000],
        wrapped in any::<bool>(),
    ) {
        // The envelope is level 1, its detail level 2: `depth` arrays go down to 2 + depth.
        let extra = format!(r#","nested":{}{}"#, "[".repeat(depth), "]".repeat(depth));
        let mut body = spot("e-1", &[], &extra);
        if wrapped {
            body = sns(&body);
        }
        let expected = if 2 + depth <= DEPTH_LIMIT { "notice" } else { "poison" };
        prop_assert_eq!(verdict(&body), expected, "depth {}", depth);
    }

    /// Long fields where an envelope has a single value: an id of up to 200 KB is bounded, a
    /// `resources` list of thousands of ARNs changes nothing, an instance id of any length that
    /// is not one is poison, and so is a long string where the envelope wants a list; an unknown
    /// detail-type of any length is ignored. Reasons and causes stay short whatever the input.
    #[test]
    fn long_ids_and_lists(
        // Half near the id's bound, half anywhere up to 200 KB.
        id_len in prop_oneof![1usize..=2 * MAX_EVENT_ID, 1usize..=200_000],
        arns in 0usize..=4_000,
        bad_instance in 0usize..=200_000,
        wrapped in any::<bool>(),
    ) {
        let resources: Vec<String> = (0..arns)
            .map(|n| format!("arn:aws:ec2:us-east-1:123456789012:instance/{}", instance(n)))
            .collect();
        let plain = spot("e-1", &[], "");
        let bodies = [
            (spot(&"e".repeat(id_len), &[], ""), "notice"),
            (spot("e-1", &resources, ""), "notice"),
            (plain.replace(INSTANCE, &format!("i-{}", "0".repeat(bad_instance))), "poison"),
            (
                plain.replace(r#""resources":[]"#, &format!(r#""resources":"{}""#, "r".repeat(id_len))),
                "poison",
            ),
            (
                plain.replace(
                    "EC2 Spot Instance Interruption Warning",
                    &"Something Else ".repeat(id_len / 15 + 1),
                ),
                "ignored",
            ),
        ];
        for (body, expected) in bodies {
            let body = if wrapped { sns(&body) } else { body };
            if body.len() > MAX_BODY {
                continue;
            }
            prop_assert_eq!(verdict(&body), expected);
            if let Parsed::Notice(n) = parse_body(&body) {
                prop_assert_eq!(n.instance_ids, vec![INSTANCE.to_string()]);
            }
        }
    }
}

/// The depth limit's two sides exactly (the properties' boundary, without chance).
#[test]
fn the_depth_limit_exactly() {
    for (depth, expected) in [(DEPTH_LIMIT - 2, "notice"), (DEPTH_LIMIT - 1, "poison")] {
        let extra = format!(r#","nested":{}{}"#, "[".repeat(depth), "]".repeat(depth));
        assert_eq!(
            verdict(&spot("e-1", &[], &extra)),
            expected,
            "depth {depth}"
        );
    }
}

/// A Health notice of exactly 256 KiB, the most SQS is fed, parses whole.
#[test]
fn a_health_notice_of_exactly_256_kib() {
    let ids: Vec<String> = (0..5_000).map(instance).collect();
    let short = health("e-1", &ids, 0);
    let body = health("e-1", &ids, MAX_BODY - short.len());
    assert_eq!(body.len(), MAX_BODY);
    assert_eq!(verdict(&body), "notice");
    match parse_body(&body) {
        Parsed::Notice(n) => assert_eq!(n.instance_ids, ids),
        other => panic!("{other:?}"),
    }
}
