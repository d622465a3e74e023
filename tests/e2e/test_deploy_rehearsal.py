"""A deploy rehearsal: template.yaml created as a CloudFormation stack by the stack's LocalStack.

LocalStack's CloudFormation runs the SAM transform itself and creates the IAM roles, both Lambda
functions (control plane only: tests/stack/localstack_main.py says why they cannot be invoked
without Docker), the EventBridge rules and targets, the SQS queue and its DLQ, the alarms and the
log groups. The community edition has no provider for AWS::EKS::AccessEntry,
AWS::Logs::QueryDefinition and AWS::CloudWatch::Dashboard: with
CFN_IGNORE_UNSUPPORTED_RESOURCE_TYPES (default on) it marks them CREATE_COMPLETE without creating
anything, so these three types are only checked by cfn-lint (infra/lint.sh template).

The code is a placeholder zip uploaded to LocalStack's S3 in place of `CodeUri: .` (the arm64
`sam build` output is checked elsewhere; packaging it here would add minutes for nothing
CloudFormation looks at). Expected values are written out from template.yaml by hand.
"""

from __future__ import annotations

import io
import json
import time
import zipfile

import boto3
import pytest

from conftest import REPO

STACK = "prewarm-rehearsal"
BUCKET = "prewarm-rehearsal-code"
PARAMS = {
    "ClusterName": "gpu-prod",
    "Architecture": "arm64",
    "MetricSource": "prometheus",
    "PrometheusUrl": "http://prometheus.monitoring:9090",
    "TickSeconds": "20",
    "LeadTimeSeconds": "240",
    "Actions": "cordon,drain",
    "MaxReceiveCount": "24",
    "InterruptionMaxConcurrency": "4",
    "AlarmTopicArn": "arn:aws:sns:us-east-1:000000000000:prewarm-ops",
    "DryRun": "true",
    "TickReservedConcurrency": "1",
}
UNSUPPORTED = {"AWS::EKS::AccessEntry", "AWS::Logs::QueryDefinition", "AWS::CloudWatch::Dashboard"}


@pytest.fixture(scope="module")
def deployed(stack_env):
    common = dict(endpoint_url=stack_env["LOCALSTACK_URL"], region_name="us-east-1",
                  aws_access_key_id="test", aws_secret_access_key="test")
    c = {n: boto3.client(n, **common) for n in ("cloudformation", "lambda", "events", "sqs",
                                                "cloudwatch", "s3", "iam")}
    code = io.BytesIO()
    with zipfile.ZipFile(code, "w") as z:
        z.writestr("bootstrap", "#!/bin/sh\nexit 1\n")
    c["s3"].create_bucket(Bucket=BUCKET)
    c["s3"].put_object(Bucket=BUCKET, Key="code.zip", Body=code.getvalue())
    template = (REPO / "template.yaml").read_text()
    assert "    CodeUri: .\n" in template, "Globals.Function.CodeUri moved: update this test"
    template = template.replace("    CodeUri: .\n", f"    CodeUri: s3://{BUCKET}/code.zip\n")
    # template.yaml is larger than CloudFormation's 51,200-byte limit for TemplateBody, so it goes
    # through S3 as `sam deploy` sends it (samconfig.toml: resolve_s3).
    c["s3"].put_object(Bucket=BUCKET, Key="template.yaml", Body=template.encode())
    template_url = f"{stack_env['LOCALSTACK_URL']}/{BUCKET}/template.yaml"
    cfn = c["cloudformation"]
    stack_id = cfn.create_stack(StackName=STACK, TemplateURL=template_url,
                     Capabilities=["CAPABILITY_IAM", "CAPABILITY_AUTO_EXPAND"],
                     Parameters=[{"ParameterKey": k, "ParameterValue": v} for k, v in PARAMS.items()])["StackId"]
    status = wait_stack(cfn, "CREATE_IN_PROGRESS", stack_id)
    resources = cfn.describe_stack_resources(StackName=STACK)["StackResources"]
    failures = [(e["LogicalResourceId"], e.get("ResourceStatusReason"))
                for e in cfn.describe_stack_events(StackName=STACK)["StackEvents"]
                if e["ResourceStatus"].endswith("FAILED")]
    assert status == "CREATE_COMPLETE", f"{status}: {failures}"
    physical = {r["LogicalResourceId"]: r["PhysicalResourceId"] for r in resources}
    yield c, physical, resources
    cfn.delete_stack(StackName=STACK)
    assert wait_stack(cfn, "DELETE_IN_PROGRESS", stack_id) in ("DELETE_COMPLETE", "gone")


def wait_stack(cfn, in_progress: str, stack_id: str) -> str:
    """The status of this run's stack once it leaves `in_progress`. By id, not name: an earlier
    run's deleted stack of the same name stays listed as DELETE_COMPLETE."""
    deadline = time.monotonic() + 180  # bounds a hung run only
    while time.monotonic() < deadline:
        stacks = cfn.describe_stacks()["Stacks"]
        mine = [s for s in stacks if s["StackId"] == stack_id]
        if not mine:
            return "gone"
        if mine[0]["StackStatus"] != in_progress:
            return mine[0]["StackStatus"]
        time.sleep(1)
    return "timed out"


def test_every_resource_is_created_and_only_the_known_types_are_skipped(deployed):
    _, _, resources = deployed
    assert {r["ResourceStatus"] for r in resources} == {"CREATE_COMPLETE"}
    types = {r["ResourceType"] for r in resources}
    # The transform's output, not the AWS::Serverless types, is what got created.
    assert not any(t.startswith("AWS::Serverless::") for t in types)
    assert UNSUPPORTED <= types


def test_functions(deployed):
    c, physical, _ = deployed
    tick = c["lambda"].get_function_configuration(FunctionName=physical["TickFunction"])
    intr = c["lambda"].get_function_configuration(FunctionName=physical["InterruptionFunction"])
    for f in (tick, intr):
        assert (f["Runtime"], f["Handler"], f["Architectures"], f["MemorySize"]) == (
            "provided.al2023", "bootstrap", ["arm64"], 256)
        assert f["TracingConfig"]["Mode"] == "Active"
        assert f["LoggingConfig"]["LogFormat"] == "JSON"
    assert (tick["Timeout"], intr["Timeout"]) == (70, 20)  # the drain path answers well inside a spot warning
    assert tick["LoggingConfig"]["LogGroup"] == f"/aws/lambda/{STACK}/tick"
    assert intr["LoggingConfig"]["LogGroup"] == f"/aws/lambda/{STACK}/interruption"
    tenv = tick["Environment"]["Variables"]
    ienv = intr["Environment"]["Variables"]
    assert {k: tenv[k] for k in ("PREWARM_HANDLER", "CLUSTER_NAME", "METRIC_SOURCE", "PROMETHEUS_URL",
                                 "TICK_SECONDS", "LEAD_TIME_SECONDS", "DRY_RUN", "AMP_WORKSPACE_URL",
                                 "PREWARM_TARGETS_CONFIGMAP", "EMF_NAMESPACE")} == {
        "PREWARM_HANDLER": "tick", "CLUSTER_NAME": "gpu-prod", "METRIC_SOURCE": "prometheus",
        "PROMETHEUS_URL": "http://prometheus.monitoring:9090", "TICK_SECONDS": "20",
        "LEAD_TIME_SECONDS": "240", "DRY_RUN": "true", "AMP_WORKSPACE_URL": "",
        "PREWARM_TARGETS_CONFIGMAP": "prewarm/prewarm-targets", "EMF_NAMESPACE": "Prewarm"}
    assert ienv["PREWARM_HANDLER"] == "interruption"
    assert ienv["ACTIONS"] == "cordon,drain"
    assert ienv["INTERRUPTION_QUEUE_URL"].endswith("/" + physical["InterruptionQueue"].rsplit("/", 1)[-1])
    # The tick hands orphaned and expired drains to the interruption function on the same queue.
    assert tenv["INTERRUPTION_QUEUE_URL"] == ienv["INTERRUPTION_QUEUE_URL"]
    assert tenv["RECHECK_SECONDS"] == ienv["RECHECK_SECONDS"]
    # A metric setting never reaches the interruption function (issue 12, item 4).
    assert not {k for k in ienv if k.startswith(("METRIC", "PROMETHEUS", "AMP_", "CLOUDWATCH_"))}
    # Not checked here: ReservedConcurrentExecutions (TickReservedConcurrency=1). LocalStack's
    # AWS::Lambda::Function provider declares the property but never applies it.
    invoke = c["lambda"].get_function_event_invoke_config(FunctionName=physical["TickFunction"],
                                                          Qualifier="$LATEST")
    # As long as the restore custom resource's ServiceTimeout: late ticks are the handler's to skip.
    assert (invoke["MaximumRetryAttempts"], invoke["MaximumEventAgeInSeconds"]) == (0, 300)
    mappings = c["lambda"].list_event_source_mappings(FunctionName=physical["InterruptionFunction"])
    [esm] = mappings["EventSourceMappings"]
    assert esm["EventSourceArn"].endswith(":" + physical["InterruptionQueue"].rsplit("/", 1)[-1])
    assert (esm["BatchSize"], esm["MaximumBatchingWindowInSeconds"],
            esm["FunctionResponseTypes"]) == (10, 1, ["ReportBatchItemFailures"])
    # The account-wide rules bring every instance's churn: the trigger's concurrency is bounded.
    assert esm.get("ScalingConfig") == {"MaximumConcurrency": 4}, esm


def test_queue_dlq_and_redrive(deployed):
    c, physical, _ = deployed
    q = c["sqs"].get_queue_attributes(QueueUrl=physical["InterruptionQueue"],
                                      AttributeNames=["All"])["Attributes"]
    dlq = c["sqs"].get_queue_attributes(QueueUrl=physical["InterruptionDeadLetterQueue"],
                                        AttributeNames=["All"])["Attributes"]
    redrive = json.loads(q["RedrivePolicy"])
    assert redrive["deadLetterTargetArn"] == dlq["QueueArn"]
    assert int(redrive["maxReceiveCount"]) == 24
    assert (q["VisibilityTimeout"], q["MessageRetentionPeriod"]) == ("30", "1209600")
    assert dlq["MessageRetentionPeriod"] == "1209600"
    policy = json.loads(q["Policy"])
    [stmt] = policy["Statement"]
    assert stmt["Principal"] == {"Service": "events.amazonaws.com"}
    # Every EventBridge rule of the template may send: spot, rebalance, state change, Health,
    # capacity reservation and Capacity Block expiration.
    assert len(stmt["Condition"]["ArnEquals"]["aws:SourceArn"]) == 6


def test_rules_and_targets(deployed):
    c, physical, _ = deployed
    queue_arn = c["sqs"].get_queue_attributes(QueueUrl=physical["InterruptionQueue"],
                                              AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    dlq_arn = c["sqs"].get_queue_attributes(QueueUrl=physical["InterruptionDeadLetterQueue"],
                                            AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    detail_types = {
        "SpotInterruptionRule": ["EC2 Spot Instance Interruption Warning"],
        "RebalanceRule": ["EC2 Instance Rebalance Recommendation"],
        "StateChangeRule": ["EC2 Instance State-change Notification"],
        "HealthScheduledChangeRule": ["AWS Health Event"],
        "CapacityBlockExpirationRule": ["Capacity Block Expiration Warning",
                                        "Capacity Block Reservation Expiration Warning"],
    }
    for logical in ("SpotInterruptionRule", "RebalanceRule", "StateChangeRule",
                    "HealthScheduledChangeRule", "CapacityReservationInterruptionRule",
                    "CapacityBlockExpirationRule"):
        name = physical[logical].split("/")[-1].split("|")[-1]
        rule = c["events"].describe_rule(Name=name)
        assert rule["State"] == "ENABLED"
        if logical in detail_types:
            assert json.loads(rule["EventPattern"])["detail-type"] == detail_types[logical]
        [target] = c["events"].list_targets_by_rule(Rule=name)["Targets"]
        assert (target["Arn"], target["DeadLetterConfig"]["Arn"]) == (queue_arn, dlq_arn)
    tick_rule = physical["TickFunctionEveryMinute"].split("/")[-1].split("|")[-1]
    rule = c["events"].describe_rule(Name=tick_rule)
    assert (rule["ScheduleExpression"], rule["State"]) == ("rate(1 minute)", "ENABLED")
    [target] = c["events"].list_targets_by_rule(Rule=tick_rule)["Targets"]
    tick_arn = c["lambda"].get_function(FunctionName=physical["TickFunction"])["Configuration"]["FunctionArn"]
    assert target["Arn"] == tick_arn


def test_alarms(deployed):
    c, physical, _ = deployed
    names = [physical[a] for a in ("DeadLetterQueueNotEmptyAlarm", "TickErrorsAlarm",
                                   "InterruptionErrorsAlarm", "HandledErrorsAlarm",
                                   "TickNotRunningAlarm")]
    alarms = {a["AlarmName"]: a for a in c["cloudwatch"].describe_alarms(AlarmNames=names)["MetricAlarms"]}
    got = {n: (alarms[n]["Namespace"], alarms[n]["MetricName"], alarms[n]["ComparisonOperator"],
               alarms[n]["TreatMissingData"]) for n in names}
    assert list(got.values()) == [
        ("AWS/SQS", "ApproximateNumberOfMessagesVisible", "GreaterThanThreshold", "notBreaching"),
        ("AWS/Lambda", "Errors", "GreaterThanThreshold", "notBreaching"),
        ("AWS/Lambda", "Errors", "GreaterThanThreshold", "notBreaching"),
        ("Prewarm", "Errors", "GreaterThanThreshold", "notBreaching"),
        ("AWS/Lambda", "Invocations", "LessThanThreshold", "breaching"),
    ]
    for n in names:
        assert alarms[n]["AlarmActions"] == [PARAMS["AlarmTopicArn"]]
        assert alarms[n]["OKActions"] == [PARAMS["AlarmTopicArn"]], "a page that never resolves"
    stalled = c["cloudwatch"].describe_alarms(AlarmNames=[physical["InterruptionQueueStalledAlarm"]])["MetricAlarms"]
    assert [(a["Namespace"], a["MetricName"]) for a in stalled] == [("AWS/SQS", "ApproximateAgeOfOldestMessage")]
    # The per-kind drain alarms are metric math: each watches one expression over six series
    # (one per notice kind).
    for logical in ("DrainMissedDeadlineAlarm", "DrainBlockedAlarm"):
        (a,) = c["cloudwatch"].describe_alarms(AlarmNames=[physical[logical]])["MetricAlarms"]
        assert len(a["Metrics"]) == 7 and a["OKActions"] == [PARAMS["AlarmTopicArn"]], logical
    # The handled-errors alarm watches the series without dimensions (issue 12, item 5).
    assert alarms[physical["HandledErrorsAlarm"]].get("Dimensions", []) == []
