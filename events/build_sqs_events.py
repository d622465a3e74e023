#!/usr/bin/env python3
"""Builds the SQS sample events (events/sqs-*.json) from the bare EventBridge bodies in
events/eventbridge/ (written from the AWS documentation samples), so the two never disagree.

Run from anywhere: python3 events/build_sqs_events.py. tests/infra/test_events.py checks that the
committed files are what this script produces.
"""

import hashlib
import json
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
BARE = HERE / "eventbridge"
ACCOUNT = "123456789012"
REGION = "us-east-1"
QUEUE_ARN = f"arn:aws:sqs:{REGION}:{ACCOUNT}:prewarm-InterruptionQueue-1A2B3C4D5E6F"
SENT_MS = 1795953600000  # 2026-11-29T12:00:00Z, the time of the sample notices

# Not EventBridge envelopes at all: what else lands on interruption queues in practice.
NOT_JSON = "spot interruption for i-0abc7777777777777 {not json"
ASG_TEST_NOTIFICATION = json.dumps(
    {
        "AccountId": ACCOUNT,
        "RequestId": "b7f5c2d0-8a51-11ea-bc55-0242ac130003",
        "AutoScalingGroupARN": f"arn:aws:autoscaling:{REGION}:{ACCOUNT}:autoScalingGroup:4e8d3c1a-0000-4000-8000-000000000000:autoScalingGroupName/gpu-nodes",
        "AutoScalingGroupName": "gpu-nodes",
        "Service": "AWS Auto Scaling",
        "Event": "autoscaling:TEST_NOTIFICATION",
        "Time": "2026-11-29T12:00:00.000Z",
    },
    separators=(",", ":"),
)


def bare(name: str) -> str:
    """The EventBridge event as SQS delivers it: compact JSON text."""
    return json.dumps(json.loads((BARE / f"{name}.json").read_text()), separators=(",", ":"))


def edited(name: str, edit) -> str:
    """A bare sample changed by `edit` (a function that mutates the parsed event)."""
    event = json.loads((BARE / f"{name}.json").read_text())
    edit(event)
    return json.dumps(event, separators=(",", ":"))


def sns_wrapped(body: str, kind: str = "Notification") -> str:
    """What SQS holds when EventBridge targets an SNS topic that SQS subscribes to without raw
    message delivery: an SNS envelope whose Message is the event as a string."""
    envelope = {
        "Type": kind,
        "MessageId": str(uuid.uuid5(uuid.NAMESPACE_URL, f"prewarm-sns/{kind}/{body}")),
        "TopicArn": f"arn:aws:sns:{REGION}:{ACCOUNT}:interruptions",
        "Message": body,
        "Timestamp": "2026-11-29T12:00:00.100Z",
        "SignatureVersion": "1",
    }
    if kind == "SubscriptionConfirmation":
        envelope["SubscribeURL"] = f"https://sns.{REGION}.amazonaws.com/?Action=ConfirmSubscription"
    return json.dumps(envelope, separators=(",", ":"))


def _spot_at(time: str):
    def edit(e):
        e["id"] = str(uuid.uuid5(uuid.NAMESPACE_URL, f"prewarm-spot-at/{time}"))
        e["time"] = time
    return edit


def _spot_naming(instance: str):
    def edit(e):
        e["id"] = str(uuid.uuid5(uuid.NAMESPACE_URL, f"prewarm-spot-naming/{instance}"))
        e["detail"]["instance-id"] = instance
    return edit


def _health_update(status: str, start: str | None, n: int):
    """A later update of the Health sample: AWS Health sends a new EventBridge event (new id) with
    the same eventArn each time it updates the event."""
    def edit(e):
        e["id"] = str(uuid.uuid5(uuid.NAMESPACE_URL, f"prewarm-health-update/{n}"))
        e["time"] = "2026-11-29T12:00:00Z"
        e["detail"]["statusCode"] = status
        e["detail"]["lastUpdatedTime"] = "Sun, 29 Nov 2026 12:00:00 GMT"
        if start is None:
            e["detail"].pop("startTime")
        else:
            e["detail"]["startTime"] = start
    return edit


def _capacity_block_reservation_spelling(e):
    """The same warning with the detail-type the other version of AWS's page spells."""
    e["id"] = str(uuid.uuid5(uuid.NAMESPACE_URL, "prewarm-capacity-block/reservation-spelling"))
    e["detail-type"] = "Capacity Block Reservation Expiration Warning"


# Input that must not be taken as truth (issue 11, items 11, 12 and 15), one record each.
WRONG_INPUT = [
    edited("spot-interruption", _spot_at("2099-12-01T00:00:00Z")),
    edited("spot-interruption", _spot_at("1970-01-01T00:00:00Z")),
    edited("health-scheduled-change", _health_update("upcoming", "Tue, 8 Dec 2026 09:00:00 GMT", 1)),
    edited("health-scheduled-change", _health_update("closed", None, 2)),
    sns_wrapped(bare("spot-interruption")),
    sns_wrapped("{}", "SubscriptionConfirmation"),
    "[]",
    edited("spot-interruption", _spot_naming("fargate-ip-192-168-1-1.ec2.internal")),
    edited("spot-interruption", _spot_naming("i-0abc1111111111111\u00e9")),
]


def record(n: int, body: str, receive_count: int = 1) -> dict:
    # Stable ids so the files do not change on every run.
    message_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"prewarm-sample/{n}/{body}"))
    return {
        "messageId": message_id,
        "receiptHandle": "AQEB" + hashlib.sha256(message_id.encode()).hexdigest() + "==",
        "body": body,
        "attributes": {
            "ApproximateReceiveCount": str(receive_count),
            "SentTimestamp": str(SENT_MS),
            "SenderId": "AIDAIENQZJOLO23YVJ4VO",
            "ApproximateFirstReceiveTimestamp": str(SENT_MS + 150),
        },
        "messageAttributes": {},
        "md5OfBody": hashlib.md5(body.encode()).hexdigest(),
        "eventSource": "aws:sqs",
        "eventSourceARN": QUEUE_ARN,
        "awsRegion": REGION,
    }


def batch(bodies: list) -> dict:
    recs = []
    for i, b in enumerate(bodies):
        body, count = b if isinstance(b, tuple) else (b, 1)
        recs.append(record(i, body, count))
    return {"Records": recs}


SQS_EVENTS = {
    "sqs-spot-interruption.json": [bare("spot-interruption")],
    "sqs-rebalance.json": [bare("rebalance-recommendation")],
    "sqs-state-change.json": [bare("state-change-stopping")],
    "sqs-state-change-pending.json": [bare("state-change-pending")],
    "sqs-health-scheduled.json": [bare("health-scheduled-change")],
    "sqs-capacity-reservation.json": [bare("capacity-reservation-interruption")],
    # Both detail-types AWS's documentation gives for the Capacity Block warning.
    "sqs-capacity-block.json": [
        bare("capacity-block-expiration-warning"),
        edited("capacity-block-expiration-warning", _capacity_block_reservation_spelling),
    ],
    "sqs-ignored-asg.json": [bare("asg-terminate-lifecycle"), ASG_TEST_NOTIFICATION, bare("health-issue")],
    # The second record was received 4 times already: poison that is about to reach the DLQ.
    "sqs-poison.json": [NOT_JSON, (bare("spot-interruption-missing-instance-id"), 4)],
    "sqs-mixed-batch.json": [
        bare("spot-interruption"),
        bare("rebalance-recommendation"),
        bare("state-change-terminated"),
        bare("state-change-pending"),
        bare("health-scheduled-change"),
        bare("capacity-reservation-interruption"),
        bare("asg-terminate-lifecycle"),
        NOT_JSON,
    ],
    "sqs-wrong-input.json": WRONG_INPUT,
}


def render() -> dict[str, str]:
    return {name: json.dumps(batch(bodies), indent=2) + "\n" for name, bodies in SQS_EVENTS.items()}


if __name__ == "__main__":
    for name, text in render().items():
        (HERE / name).write_text(text)
        print(f"wrote events/{name}")
