"""The sample events in events/: well-formed SQS batches in the shape the Lambda receives, built
from the bare EventBridge bodies, and matched against the template's EventBridge rules (so a
sample the handler acts on would really be delivered, and an ignored one really is foreign).
"""

import hashlib
import importlib.util
import json

import pytest
from cfnlint.decode import decode

from infra_paths import REPO

EVENTS = REPO / "events"


def load(name: str):
    return json.loads((EVENTS / name).read_text())


def generator():
    spec = importlib.util.spec_from_file_location("build_sqs_events", EVENTS / "build_sqs_events.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_sqs_files_are_what_the_generator_builds():
    rendered = generator().render()
    assert rendered, "generator produced nothing"
    for name, text in rendered.items():
        assert (EVENTS / name).read_text() == text, f"events/{name} is stale: run python3 events/build_sqs_events.py"


SQS_FILES = sorted(p.name for p in EVENTS.glob("sqs-*.json"))


def test_the_issue_asks_for_these_samples():
    want = {"sqs-spot-interruption.json", "sqs-rebalance.json", "sqs-state-change.json",
            "sqs-state-change-pending.json", "sqs-health-scheduled.json", "sqs-capacity-reservation.json",
            "sqs-capacity-block.json",
            "sqs-ignored-asg.json", "sqs-poison.json", "sqs-mixed-batch.json"}
    assert want <= set(SQS_FILES)
    assert (EVENTS / "scheduled.json").exists()


@pytest.mark.parametrize("name", SQS_FILES)
def test_sqs_event_shape(name):
    event = load(name)
    records = event["Records"]
    assert 1 <= len(records) <= 10  # the function's BatchSize
    ids = set()
    for r in records:
        for key in ("messageId", "receiptHandle", "body", "attributes", "md5OfBody", "eventSource", "eventSourceARN", "awsRegion"):
            assert key in r, f"{name}: record lacks {key}"
        assert r["eventSource"] == "aws:sqs" and r["awsRegion"] == "us-east-1"
        assert r["eventSourceARN"].startswith("arn:aws:sqs:us-east-1:")
        assert int(r["attributes"]["ApproximateReceiveCount"]) >= 1
        assert r["md5OfBody"] == hashlib.md5(r["body"].encode()).hexdigest()
        assert isinstance(r["body"], str)
        ids.add(r["messageId"])
    assert len(ids) == len(records), f"{name}: duplicate messageId"


def test_scheduled_event_is_what_an_eventbridge_schedule_sends():
    e = load("scheduled.json")
    assert (e["source"], e["detail-type"], e["detail"]) == ("aws.events", "Scheduled Event", {})
    assert e["resources"][0].startswith("arn:aws:events:us-east-1:")


# ------------------------------------------------------------------ EventBridge matching

def matches(pattern: dict, event: dict) -> bool:
    """EventBridge matching for the subset the template uses: each key's list of exact values,
    nested objects for detail. Values in the event that are lists match if any element does."""
    for key, want in pattern.items():
        if key not in event:
            return False
        got = event[key]
        if isinstance(want, dict):
            if not isinstance(got, dict) or not matches(want, got):
                return False
        else:
            values = got if isinstance(got, list) else [got]
            if not any(v in want for v in values):
                return False
    return True


@pytest.fixture(scope="module")
def rules():
    tpl, problems = decode(str(REPO / "template.yaml"))
    assert not problems
    return {k: v["Properties"]["EventPattern"] for k, v in tpl["Resources"].items() if v["Type"] == "AWS::Events::Rule"}


def test_matcher_can_say_no():
    assert not matches({"source": ["aws.ec2"]}, {"source": "aws.health"})
    assert not matches({"detail": {"state": ["stopping"]}}, {"detail": {"state": "pending"}})
    assert matches({"detail": {"state": ["stopping"]}}, {"detail": {"state": "stopping", "x": 1}})


ACTED_ON = {
    "spot-interruption.json": "SpotInterruptionRule",
    "spot-interruption-missing-instance-id.json": "SpotInterruptionRule",
    "rebalance-recommendation.json": "RebalanceRule",
    "state-change-stopping.json": "StateChangeRule",
    "state-change-terminated.json": "StateChangeRule",
    "health-scheduled-change.json": "HealthScheduledChangeRule",
    "capacity-reservation-interruption.json": "CapacityReservationInterruptionRule",
    "capacity-block-expiration-warning.json": "CapacityBlockExpirationRule",
}
NOT_DELIVERED = ["state-change-pending.json", "health-issue.json", "asg-terminate-lifecycle.json"]


def test_every_bare_sample_is_classified():
    assert {p.name for p in (EVENTS / "eventbridge").glob("*.json")} == set(ACTED_ON) | set(NOT_DELIVERED)


@pytest.mark.parametrize("name,rule", sorted(ACTED_ON.items()))
def test_sample_is_delivered_by_exactly_its_rule(rules, name, rule):
    event = load(f"eventbridge/{name}")
    hits = [r for r, p in rules.items() if matches(p, event)]
    assert hits == [rule]


@pytest.mark.parametrize("name", NOT_DELIVERED)
def test_ignored_sample_matches_no_rule(rules, name):
    event = load(f"eventbridge/{name}")
    assert [r for r, p in rules.items() if matches(p, event)] == []


def test_poison_batch_has_a_non_json_body_and_a_record_without_instance_id():
    bodies = [r["body"] for r in load("sqs-poison.json")["Records"]]
    parsed = []
    for b in bodies:
        try:
            parsed.append(json.loads(b))
        except json.JSONDecodeError:
            parsed.append(None)
    assert None in parsed
    assert any(p and "detail" in p and "instance-id" not in p["detail"] for p in parsed)


def test_mixed_batch_holds_several_kinds():
    kinds = set()
    for r in load("sqs-mixed-batch.json")["Records"]:
        try:
            b = json.loads(r["body"])
            kinds.add(b.get("detail-type"))
        except json.JSONDecodeError:
            kinds.add("not json")
    assert len(kinds) >= 6


def test_health_sample_names_instances_and_a_window():
    d = load("eventbridge/health-scheduled-change.json")["detail"]
    assert d["service"] == "EC2" and d["eventTypeCategory"] == "scheduledChange"
    assert [e["entityValue"] for e in d["affectedEntities"]] and d["startTime"]


def test_both_capacity_block_spellings_are_delivered_by_its_rule(rules):
    bodies = [json.loads(r["body"]) for r in load("sqs-capacity-block.json")["Records"]]
    assert {b["detail-type"] for b in bodies} == {
        "Capacity Block Expiration Warning",
        "Capacity Block Reservation Expiration Warning",
    }
    for b in bodies:
        assert [r for r, p in rules.items() if matches(p, b)] == ["CapacityBlockExpirationRule"], b["detail-type"]
