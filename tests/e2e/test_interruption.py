"""The interruption path end to end on the local stack: real SQS emulator (moto) with a DLQ, the
function under `cargo lambda watch` (PREWARM_HANDLER=interruption, as the prewarm-lambda user),
the SQS -> Lambda poller, Karpenter's kwok provider making real Node objects, the
controller-manager computing PodDisruptionBudgets.

Latencies are printed, never asserted (speed claims come from benchmarks).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import time
import uuid

from conftest import LambdaWatch

# `make e2e` runs the suites one after another on 127.0.0.1:19000. While several people share one
# stack and run suites at the same time, E2E_LAMBDA_PORT moves this module's `cargo lambda watch`
# (and the poller's invocations, which read the same attribute) elsewhere so they do not collide.
if os.environ.get("E2E_LAMBDA_PORT"):
    LambdaWatch.PORT = int(os.environ["E2E_LAMBDA_PORT"])

BALLOON = "balloon-gpu"
TARGETS = json.dumps([{
    "name": "gpu", "nodePool": "gpu", "maxSpare": 8, "gpusPerReplica": 1,
    "headroom": {"kind": "balloon", "namespace": "prewarm", "name": BALLOON},
    "selector": "model_name=\"llama\"",
}])


def iso(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_iso(s: str) -> float:
    return dt.datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()


def spot_warning(instance: str, at: float, event_id: str | None = None) -> str:
    return json.dumps({
        "version": "0", "id": event_id or str(uuid.uuid4()),
        "detail-type": "EC2 Spot Instance Interruption Warning", "source": "aws.ec2",
        "account": "123456789012", "time": iso(at), "region": "us-east-1",
        "resources": [f"arn:aws:ec2:us-east-1a:instance/{instance}"],
        "detail": {"instance-id": instance, "instance-action": "terminate"},
    })


def balloon_deployment() -> dict:
    gpu = {"cpu": "6", "memory": "24Gi", "nvidia.com/gpu": "1"}
    labels = {"app.kubernetes.io/name": "balloon", "prewarm.io/target": "gpu"}
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": BALLOON, "namespace": "prewarm", "labels": labels},
        "spec": {"replicas": 0, "selector": {"matchLabels": labels}, "template": {
            "metadata": {"labels": labels},
            "spec": {"priorityClassName": "prewarm-balloon", "terminationGracePeriodSeconds": 0,
                     "nodeSelector": {"karpenter.sh/nodepool": "gpu"},
                     "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                     "containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10",
                                     "resources": {"requests": gpu, "limits": {"memory": "24Gi", "nvidia.com/gpu": "1"}}}]}}},
    }


def inference(name: str, replicas: int, app: str) -> dict:
    gpu = {"cpu": "6", "memory": "24Gi", "nvidia.com/gpu": "1"}
    labels = {"app.kubernetes.io/name": app}
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": "inference", "labels": labels},
        "spec": {"replicas": replicas, "selector": {"matchLabels": labels}, "template": {
            "metadata": {"labels": labels},
            "spec": {"terminationGracePeriodSeconds": 0,
                     "nodeSelector": {"karpenter.sh/nodepool": "gpu"},
                     "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                     "containers": [{"name": "vllm", "image": "registry.k8s.io/pause:3.10",
                                     "resources": {"requests": gpu, "limits": {"memory": "24Gi", "nvidia.com/gpu": "1"}}}]}}},
    }


def pdb(name: str, app: str, max_unavailable: int) -> dict:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": name, "namespace": "inference"},
            "spec": {"maxUnavailable": max_unavailable,
                     "selector": {"matchLabels": {"app.kubernetes.io/name": app}}}}


def running_pods(k8s, app: str) -> list[dict]:
    return [p for p in k8s.get("pods", namespace="inference", selector=f"app.kubernetes.io/name={app}")
            if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")
            and any(c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions", []))]


def instance_of(node: dict) -> str:
    return node["spec"]["providerID"].rstrip("/").rsplit("/", 1)[-1]


def handler_env(stack_env: dict, **extra: str) -> dict:
    # The kwok provider's nodes have no EC2 ids: their providerIDs end in the node name.
    env = {"PREWARM_HANDLER": "interruption", "PREWARM_TARGETS": TARGETS, "RECHECK_SECONDS": "3",
           "ACCEPT_KWOK_INSTANCE_IDS": "true",
           "EVICTION_BUDGET_SECONDS": "30", "INTERRUPTION_QUEUE_URL": stack_env["INTERRUPTION_QUEUE_URL"],
           "RUST_LOG": "info"}
    env.update(extra)
    return env


def deploy_on_one_node(k8s, wait_until, name: str, replicas: int, app: str) -> dict:
    k8s.apply(inference(name, replicas, app))
    pods = wait_until(lambda: (ps := running_pods(k8s, app)) and len(ps) == replicas and ps,
                      timeout=300, what=f"{replicas} pods of {name} Running")
    node_name = pods[0]["spec"]["nodeName"]
    return k8s.get("node", node_name)


def test_spot_warning_drains_make_before_break(k8s, aws, wait_until, lambda_watch, poll_sqs,
                                               reset_cluster, stack_env):
    k8s.apply(balloon_deployment())
    k8s.apply(pdb("llm-inference", "llm-inference", 1))
    node = deploy_on_one_node(k8s, wait_until, "llm", 2, "llm-inference")
    node_name, instance = node["metadata"]["name"], instance_of(node)
    on_node = [p["metadata"]["name"] for p in running_pods(k8s, "llm-inference")
               if p["spec"]["nodeName"] == node_name]
    # Every check of a drain in progress is a receive: the queue's maxReceiveCount must leave room
    # for them (a drain of two minutes at a 3 s recheck is some 40 receives), so this test uses
    # a queue of its own with a redrive policy sized for that.
    queue, dlq = aws.new_queue_pair(f"h6-drain-{uuid.uuid4().hex[:6]}", visibility_timeout=10,
                                    max_receive_count=100)
    lambda_watch(handler_env(stack_env, INTERRUPTION_QUEUE_URL=queue))

    notice_at = time.time()
    event_id = str(uuid.uuid4())
    body = spot_warning(instance, notice_at, event_id)
    # The same notice delivered twice (EventBridge delivers at least once): harmless.
    ids = [aws.sqs.send_message(QueueUrl=queue, MessageBody=body)["MessageId"] for _ in range(2)]

    deleted: set[str] = set()

    def drained() -> bool:
        r = poll_sqs(queue_url=queue)
        assert r.error is None, r.error
        deleted.update(r.deleted)
        return set(ids) <= deleted

    wait_until(drained, timeout=600, interval=1, what="both copies of the notice to be deleted")
    finished = time.time()

    n = k8s.get("node", node_name)
    assert n is not None, "the drained node is still there (nothing deletes it but the instance's end)"
    a = n["metadata"]["annotations"]
    assert n["spec"].get("unschedulable") is True
    assert {"key": "prewarm.io/draining", "value": "spot-interruption", "effect": "NoSchedule"} in [
        {k: t.get(k) for k in ("key", "value", "effect")} for t in n["spec"]["taints"]]
    assert a["prewarm.io/drain-event-id"] == event_id
    assert a["prewarm.io/drain-phase"] == "drained"
    assert "prewarm.io/drain-replacement-requested-at" in a

    # The pods run again, on another node of the pool (the replacement), and none is left behind.
    pods = wait_until(lambda: (ps := running_pods(k8s, "llm-inference")) and len(ps) == 2 and ps,
                      timeout=300, what="both replicas Running again")
    assert all(p["spec"]["nodeName"] != node_name for p in pods)
    assert not [p for p in k8s.get("pods", namespace="inference") if p["metadata"]["name"] in on_node
                and not p["metadata"].get("deletionTimestamp")]
    # The replacement reservation was handed back when the drain finished.
    balloon = k8s.get("deployment", BALLOON, "prewarm")
    reserved = {k: v for k, v in balloon["metadata"].get("annotations", {}).items() if "replacement" in k}
    print(f"\nballoon annotations after the drain: {reserved}, replicas {balloon['spec']['replicas']}")

    notice = parse_iso(a["prewarm.io/drain-notice-time"])
    cordon = parse_iso(a["prewarm.io/drain-started-at"])
    ready = a.get("prewarm.io/drain-replacement-ready-at")
    evict = parse_iso(a["prewarm.io/drain-evicting-since"])
    deadline = parse_iso(a["prewarm.io/drain-deadline"])
    print(f"interruption e2e: notice->cordon {1000 * (cordon - notice):.0f} ms, "
          f"notice->replacement ready {('%.0f ms' % (1000 * (parse_iso(ready) - notice))) if ready else 'never (deadline)'}, "
          f"notice->evictions {1000 * (evict - notice):.0f} ms (deadline at +{deadline - notice:.0f} s), "
          f"notice->messages deleted {finished - notice_at:.1f} s")
    assert evict <= deadline + 5, "eviction started after the deadline"


def test_a_pdb_that_never_allows_eviction_keeps_the_message_and_records_the_blocker(
        k8s, aws, wait_until, lambda_watch, poll_sqs, reset_cluster, stack_env):
    k8s.apply(pdb("stubborn", "stubborn", 0))
    node = deploy_on_one_node(k8s, wait_until, "stubborn", 1, "stubborn")
    node_name, instance = node["metadata"]["name"], instance_of(node)
    pod = running_pods(k8s, "stubborn")[0]["metadata"]["name"]
    queue, dlq = aws.new_queue_pair(f"h6-pdb-{uuid.uuid4().hex[:6]}", visibility_timeout=10,
                                    max_receive_count=100)
    lambda_watch(handler_env(stack_env, INTERRUPTION_QUEUE_URL=queue))

    # Issued 100 s ago: past the eviction deadline, so eviction is attempted at once.
    msg_id = aws.sqs.send_message(QueueUrl=queue,
                                  MessageBody=spot_warning(instance, time.time() - 100))["MessageId"]
    rounds = 0

    def blocked_event():
        nonlocal rounds
        r = poll_sqs(queue_url=queue)
        assert r.error is None, r.error
        assert msg_id not in r.deleted, "the message was deleted although the pod could not go"
        rounds += len(r.failed)
        events = k8s.get("events", namespace="default")
        return [e for e in events if e.get("reason") == "DrainBlockedByPDB"
                and e.get("involvedObject", {}).get("name") == node_name] if rounds >= 2 else None

    events = wait_until(blocked_event, timeout=180, interval=1, what="two checks and a DrainBlockedByPDB Event")
    message = events[0].get("message") or events[0].get("note") or ""
    assert pod in message and "inference/stubborn" in message, message
    # Still in flight (or waiting for its next check), not in the DLQ, and the pod still runs.
    counts = aws.queue_counts(queue)
    assert counts["visible"] + counts["in_flight"] == 1, counts
    assert aws.queue_counts(dlq) == {"visible": 0, "in_flight": 0}
    assert [p["metadata"]["name"] for p in running_pods(k8s, "stubborn")] == [pod]
    print(f"\nblocked drain: {rounds} checks, Event: {message}")


def test_poison_goes_to_the_dlq_and_a_foreign_instance_is_acknowledged(
        k8s, aws, wait_until, lambda_watch, poll_sqs, stack_env):
    queue, dlq = aws.new_queue_pair(f"h6-poison-{uuid.uuid4().hex[:6]}", visibility_timeout=1,
                                    max_receive_count=2)
    lambda_watch(handler_env(stack_env, INTERRUPTION_QUEUE_URL=queue))
    poison = aws.sqs.send_message(QueueUrl=queue, MessageBody="spot interruption {not json")["MessageId"]
    foreign = aws.sqs.send_message(QueueUrl=queue,
                                   MessageBody=spot_warning("i-0fffffffffffffff0", time.time()))["MessageId"]
    seen: dict[str, list[str]] = {"deleted": [], "failed": []}

    def poison_in_dlq():
        r = poll_sqs(queue_url=queue)
        assert r.error is None, r.error
        seen["deleted"] += r.deleted
        seen["failed"] += r.failed
        return aws.queue_counts(dlq)["visible"] == 1

    wait_until(poison_in_dlq, timeout=120, interval=1.2, what="the poison message in the DLQ")
    assert foreign in seen["deleted"] and foreign not in seen["failed"]
    assert poison in seen["failed"] and poison not in seen["deleted"]
    got = aws.sqs.receive_message(QueueUrl=dlq, MaxNumberOfMessages=1)["Messages"][0]
    assert got["Body"] == "spot interruption {not json"
    aws.sqs.delete_queue(QueueUrl=queue)
    aws.sqs.delete_queue(QueueUrl=dlq)
