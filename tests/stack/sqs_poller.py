#!/usr/bin/env python3
"""Moves messages from the SQS emulator into Lambda invocations, like the Lambda SQS integration.

One poll: ReceiveMessage (up to 10, with all attributes), build the SQS event the Lambda service
sends (Records with messageId, receiptHandle, body, attributes, messageAttributes, md5OfBody,
eventSource, eventSourceARN, awsRegion), POST it to the Runtime API emulator of
`cargo lambda watch` (http://127.0.0.1:19000/2015-03-31/functions/<fn>/invocations), then delete
the records the function did not list in `batchItemFailures` (ReportBatchItemFailures). Failures
stay in the queue and come back after the visibility timeout; after maxReceiveCount receives the
queue's redrive policy moves them to the DLQ. If the invocation itself fails (HTTP error, function
error, unparseable response), nothing is deleted, as in AWS.

Use `poll_once()` from tests, or run as a loop: sqs_poller.py [--function prewarm] [--interval 1]
(env: MOTO_URL, INTERRUPTION_QUEUE_URL, INTERRUPTION_QUEUE_ARN, LAMBDA_INVOKE_URL, AWS_REGION).
"""

from __future__ import annotations

import argparse
import json
import os
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field

import boto3

DEFAULT_INVOKE_BASE = "http://127.0.0.1:19000"


@dataclass
class PollResult:
    received: int = 0
    deleted: list[str] = field(default_factory=list)  # messageIds
    failed: list[str] = field(default_factory=list)  # messageIds left in the queue
    response: object = None  # the function's decoded response (None when invocation failed)
    error: str | None = None  # why the whole batch was left in the queue


def sqs_client():
    return boto3.client(
        "sqs",
        endpoint_url=os.environ.get("MOTO_URL", "http://127.0.0.1:15000"),
        region_name=os.environ.get("AWS_REGION", "us-east-1"),
        aws_access_key_id=os.environ.get("AWS_ACCESS_KEY_ID", "testing"),
        aws_secret_access_key=os.environ.get("AWS_SECRET_ACCESS_KEY", "testing"),
    )


def to_event(messages: list[dict], queue_arn: str, region: str) -> dict:
    records = []
    for m in messages:
        records.append({
            "messageId": m["MessageId"],
            "receiptHandle": m["ReceiptHandle"],
            "body": m["Body"],
            "attributes": m.get("Attributes", {}),
            "messageAttributes": {
                k: {
                    "stringValue": v.get("StringValue"),
                    "binaryValue": v.get("BinaryValue"),
                    "stringListValues": [],
                    "binaryListValues": [],
                    "dataType": v["DataType"],
                }
                for k, v in m.get("MessageAttributes", {}).items()
            },
            "md5OfBody": m["MD5OfBody"],
            "eventSource": "aws:sqs",
            "eventSourceARN": queue_arn,
            "awsRegion": region,
        })
    return {"Records": records}


def invoke(function: str, payload: object, base_url: str | None = None, timeout: float = 120.0) -> object:
    """Invokes `function` through the Runtime API emulator; returns the decoded JSON response.

    Raises RuntimeError when the emulator answers with an error or the function reports one.
    """
    base = base_url or os.environ.get("LAMBDA_INVOKE_URL", DEFAULT_INVOKE_BASE)
    req = urllib.request.Request(
        f"{base}/2015-03-31/functions/{function}/invocations",
        data=json.dumps(payload).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            raw = resp.read()
            function_error = resp.headers.get("X-Amz-Function-Error")
    except urllib.error.HTTPError as e:
        raise RuntimeError(f"invocation of {function} failed: HTTP {e.code}: {e.read()[:2000]!r}") from e
    except (urllib.error.URLError, OSError) as e:  # nothing listening, reset, timeout
        raise RuntimeError(f"invocation of {function} at {base} failed: {e}") from e
    text = raw.decode() if raw else "null"
    if function_error:
        raise RuntimeError(f"function {function} returned an error ({function_error}): {text[:2000]}")
    try:
        decoded = json.loads(text)
    except json.JSONDecodeError as e:
        raise RuntimeError(f"function {function} returned non-JSON: {text[:2000]}") from e
    if isinstance(decoded, dict) and "errorType" in decoded and "errorMessage" in decoded:
        raise RuntimeError(f"function {function} returned an error: {text[:2000]}")
    return decoded


def poll_once(function: str = "prewarm", queue_url: str | None = None, queue_arn: str | None = None,
              wait_seconds: int = 1, base_url: str | None = None, sqs=None) -> PollResult:
    sqs = sqs or sqs_client()
    queue_url = queue_url or os.environ["INTERRUPTION_QUEUE_URL"]
    if queue_arn is None:
        queue_arn = os.environ.get("INTERRUPTION_QUEUE_ARN") or sqs.get_queue_attributes(
            QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    region = os.environ.get("AWS_REGION", "us-east-1")
    got = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=wait_seconds,
                              AttributeNames=["All"], MessageAttributeNames=["All"])
    messages = got.get("Messages", [])
    result = PollResult(received=len(messages))
    if not messages:
        return result
    try:
        response = invoke(function, to_event(messages, queue_arn, region), base_url)
    except RuntimeError as e:
        result.error = str(e)
        result.failed = [m["MessageId"] for m in messages]
        return result
    result.response = response
    failures = set()
    if isinstance(response, dict):
        for item in response.get("batchItemFailures") or []:
            failures.add(item.get("itemIdentifier"))
    for m in messages:
        if m["MessageId"] in failures:
            result.failed.append(m["MessageId"])
        else:
            sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=m["ReceiptHandle"])
            result.deleted.append(m["MessageId"])
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--function", default="prewarm")
    ap.add_argument("--interval", type=float, default=1.0)
    args = ap.parse_args()
    sqs = sqs_client()
    while True:
        r = poll_once(args.function, sqs=sqs)
        if r.received:
            print(json.dumps({"received": r.received, "deleted": r.deleted, "failed": r.failed,
                              "error": r.error}), flush=True)
        else:
            time.sleep(args.interval)


if __name__ == "__main__":
    main()
