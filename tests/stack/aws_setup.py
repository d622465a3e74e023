#!/usr/bin/env python3
"""Creates the AWS side of the local stack in the moto server (idempotent) and prints env lines.

- SQS interruption queue with a dead-letter queue (redrive after 3 receives), and a queue policy
  letting EventBridge send to it (moto does not enforce it; kept so the shape matches the SAM
  template's).
- EventBridge rules, one per interruption kind, each targeting the queue: put_events with an EC2
  or Health event then lands in SQS in the EventBridge envelope, as in AWS.
- EKS cluster `prewarm-test` so DescribeCluster works.
"""

from __future__ import annotations

import json
import os

import boto3

ENDPOINT = os.environ.get("MOTO_URL", "http://127.0.0.1:15000")
REGION = os.environ.get("AWS_REGION", "us-east-1")
CLUSTER = os.environ.get("CLUSTER_NAME", "prewarm-test")
QUEUE = "prewarm-interruptions"
DLQ = "prewarm-interruptions-dlq"
# Short so that tests see redelivery (and the DLQ after 3 receives) within seconds, not minutes.
VISIBILITY_TIMEOUT = os.environ.get("INTERRUPTION_VISIBILITY_TIMEOUT", "10")

# The interruption kinds prewarm handles, with the EventBridge patterns AWS documents for them.
RULES = {
    "prewarm-spot-interruption": {"source": ["aws.ec2"], "detail-type": ["EC2 Spot Instance Interruption Warning"]},
    "prewarm-rebalance": {"source": ["aws.ec2"], "detail-type": ["EC2 Instance Rebalance Recommendation"]},
    "prewarm-state-change": {"source": ["aws.ec2"], "detail-type": ["EC2 Instance State-change Notification"]},
    "prewarm-health": {"source": ["aws.health"], "detail-type": ["AWS Health Event"]},
    "prewarm-capacity-reservation": {
        "source": ["aws.ec2"],
        "detail-type": ["EC2 Capacity Reservation Instance Interruption Warning"],
    },
    "prewarm-capacity-block": {
        "source": ["aws.ec2"],
        "detail-type": ["Capacity Block Expiration Warning", "Capacity Block Reservation Expiration Warning"],
    },
}


def client(service: str):
    return boto3.client(service, endpoint_url=ENDPOINT, region_name=REGION,
                        aws_access_key_id="testing", aws_secret_access_key="testing")


def main() -> None:
    sqs, events, eks = client("sqs"), client("events"), client("eks")

    dlq_url = sqs.create_queue(QueueName=DLQ, Attributes={"MessageRetentionPeriod": "1209600"})["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    queue_url = sqs.create_queue(QueueName=QUEUE)["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    policy = {
        "Version": "2012-10-17",
        "Statement": [{
            "Effect": "Allow",
            "Principal": {"Service": ["events.amazonaws.com", "sqs.amazonaws.com"]},
            "Action": "sqs:SendMessage",
            "Resource": queue_arn,
        }],
    }
    sqs.set_queue_attributes(QueueUrl=queue_url, Attributes={
        "VisibilityTimeout": VISIBILITY_TIMEOUT,
        "MessageRetentionPeriod": "300",
        "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": "3"}),
        "Policy": json.dumps(policy),
    })

    for name, pattern in RULES.items():
        events.put_rule(Name=name, EventPattern=json.dumps(pattern), State="ENABLED")
        events.put_targets(Rule=name, Targets=[{"Id": "prewarm-interruption-queue", "Arn": queue_arn}])

    if CLUSTER not in eks.list_clusters()["clusters"]:
        eks.create_cluster(
            name=CLUSTER,
            roleArn="arn:aws:iam::123456789012:role/prewarm-test-cluster",
            resourcesVpcConfig={"subnetIds": ["subnet-00000000000000001"]},
            version="1.34",
        )

    print(f"export INTERRUPTION_QUEUE_URL={queue_url}")
    print(f"export INTERRUPTION_QUEUE_ARN={queue_arn}")
    print(f"export INTERRUPTION_DLQ_URL={dlq_url}")


if __name__ == "__main__":
    main()
