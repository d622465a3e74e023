"""The stack's `Custom::PrewarmRestore` resource, served by the tick function under `cargo lambda
watch`, with CloudFormation's real response contract: the answer
is PUT to a pre-signed S3 URL (moto's S3) and read back from the bucket. Create and Update change
nothing and answer SUCCESS; Delete restores (a balloon prewarm sized and annotated goes back to 0
without prewarm's annotations, the user's kept) and answers SUCCESS with the counts in Data.

The function runs with the stack's admin kubeconfig, as `test_restore.py` does: the tick's own
user may write only the headroom objects the chart names (the stack's RBAC is rendered for the
examples file's targets), and this test's balloon is its own so that no other scenario's is
touched. What the tick's user may restore on a stack delete is the chart's RBAC, checked by
`test_infra_manifests.py`.
"""

from __future__ import annotations

import json
import os
import uuid

import boto3
import pytest
from conftest import sized_balloon_manifest

NAMESPACE = "prewarm"
BALLOON = "cr-restore-balloon"
LOGICAL_ID = "RestoreOnDelete"
STACK_ID = "arn:aws:cloudformation:us-east-1:123456789012:stack/prewarm-e2e/1"


@pytest.fixture
def s3(stack_env):
    client = boto3.client("s3", endpoint_url=stack_env["MOTO_URL"], region_name=stack_env["AWS_REGION"],
                          aws_access_key_id=stack_env["AWS_ACCESS_KEY_ID"],
                          aws_secret_access_key=stack_env["AWS_SECRET_ACCESS_KEY"])
    bucket = f"cfn-responses-{uuid.uuid4().hex[:8]}"
    client.create_bucket(Bucket=bucket)
    yield client, bucket
    for o in client.list_objects_v2(Bucket=bucket).get("Contents", []):
        client.delete_object(Bucket=bucket, Key=o["Key"])
    client.delete_bucket(Bucket=bucket)


@pytest.fixture
def sized_balloon(k8s):
    k8s.apply(sized_balloon_manifest(BALLOON, {"prewarm.io/no-such-node": "true"}))
    yield
    k8s.delete("deployment", BALLOON, namespace=NAMESPACE)


def request(kind: str, response_url: str) -> dict:
    r = {
        "RequestType": kind,
        "ServiceToken": "arn:aws:lambda:us-east-1:123456789012:function:prewarm-tick",
        "ResponseURL": response_url,
        "StackId": STACK_ID,
        "RequestId": f"req-{kind.lower()}-{uuid.uuid4().hex[:6]}",
        "ResourceType": "Custom::PrewarmRestore",
        "LogicalResourceId": LOGICAL_ID,
        "ResourceProperties": {"ServiceToken": "arn", "AccessEntry": "none"},
    }
    if kind != "Create":
        r["PhysicalResourceId"] = f"{LOGICAL_ID}-restore"
    if kind == "Update":
        r["OldResourceProperties"] = {"ServiceToken": "arn"}
    return r


def answer_of(s3, kind: str, watch) -> tuple[dict, dict]:
    client, bucket = s3
    key = f"answer-{kind.lower()}"
    url = client.generate_presigned_url("put_object", Params={"Bucket": bucket, "Key": key}, ExpiresIn=600)
    req = request(kind, url)
    watch.invoke(req)
    body = json.loads(client.get_object(Bucket=bucket, Key=key)["Body"].read())
    return req, body


def test_the_custom_resource_answers_and_restores_on_delete(stack_env, k8s, s3, sized_balloon, lambda_watch):
    target = {"name": "cr-restore", "nodePool": "gpu", "maxSpare": 4,
              "headroom": {"kind": "balloon", "namespace": NAMESPACE, "name": BALLOON}}
    watch = lambda_watch({
        "PREWARM_HANDLER": "tick",
        "KUBECONFIG": stack_env["KUBECONFIG"],
        "METRIC_SOURCE": "prometheus",
        "PROMETHEUS_URL": stack_env["PROMETHEUS_URL"],
        "PREWARM_TARGETS": json.dumps([target]),
        "RUST_LOG": "info",
    })

    for kind in ("Create", "Update"):
        req, body = answer_of(s3, kind, watch)
        assert body["Status"] == "SUCCESS", body
        assert (body["StackId"], body["RequestId"], body["LogicalResourceId"]) == (
            STACK_ID, req["RequestId"], LOGICAL_ID)
        assert body["PhysicalResourceId"] == f"{LOGICAL_ID}-restore"
        assert k8s.get("deployment", BALLOON, namespace=NAMESPACE)["spec"]["replicas"] == 2, kind

    req, body = answer_of(s3, "Delete", watch)
    assert body["Status"] == "SUCCESS", body
    assert body["PhysicalResourceId"] == f"{LOGICAL_ID}-restore"
    assert int(body["Data"]["Restored"]) >= 1, body
    balloon = k8s.get("deployment", BALLOON, namespace=NAMESPACE)
    assert balloon["spec"]["replicas"] == 0
    assert balloon["metadata"]["annotations"].get("team") == "ml"
    assert not [k for k in balloon["metadata"]["annotations"] if k.startswith("prewarm.io/")]
