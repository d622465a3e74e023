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

import pytest
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


def surge_targets(app: str) -> str:
    """TARGETS with the drain surge's scope: the surge acts on workloads of the targets'
    podNamespaces only (its RBAC is granted there), here the Deployment of `app`."""
    t = json.loads(TARGETS)
    t[0].update({"podNamespace": "inference", "podSelector": f"app.kubernetes.io/name={app}"})
    return json.dumps(t)


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


def placeholders_of(k8s, node_name: str, deleting: bool = False) -> list[dict]:
    """The replacement placeholders of the drain of `node_name` (those being deleted too if
    `deleting`), by their `prewarm.io/replacement-of-node` annotation: the `replacement-for` label
    holds the drain id cut to a label value's 63 characters, and a kwok node name (its instance id
    here) can be longer."""
    return [p for p in k8s.get("pods", namespace="prewarm", selector="prewarm.io/replacement-for") or []
            if p["metadata"].get("annotations", {}).get("prewarm.io/replacement-of-node") == node_name
            and (deleting or not p["metadata"].get("deletionTimestamp"))]


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


class DrainDebug:
    """What a drain test watches, printed when the test fails: the function's drain log lines,
    the watched nodes' annotations, cordon and taints, their Events, the pods, the headroom
    object's reservations and the queues' counts. A failure then says why, not just that."""

    def __init__(self, k8s, aws):
        self.k8s, self.aws = k8s, aws
        self.nodes: list[str] = []
        self.queues: list[str] = []
        self.watch: LambdaWatch | None = None
        self.log_offset = 0
        self.polls: list[str] = []

    def record_poll(self, r) -> None:
        """Keeps one line per poll that received something (what the function said of each)."""
        if r.received:
            self.polls.append(f"{time.strftime('%H:%M:%S')} received={r.received} deleted={r.deleted} "
                              f"failed={r.failed} error={(r.error or '')[:300]}")

    def start(self, lambda_watch, env: dict) -> LambdaWatch:
        """Starts the function and serves one empty batch before the test's clock starts.

        `cargo lambda watch` starts the function lazily, with `cargo run`, at the first
        invocation; on a shared CARGO_TARGET_DIR that run waits for the directory's lock and may
        rebuild (another checkout's build replaced the binary), which took 1 min 57 s in one
        observed run. A notice sent before that has spent its two minutes before the first step
        (the drain then starts past its deadline, and the poller's invocations time out and pile
        up): the make-before-break flake. So the function must be serving first."""
        self.watch = lambda_watch(env)
        self.log_offset = self.watch.log_path.stat().st_size if self.watch.log_path.exists() else 0
        started = time.monotonic()
        assert self.watch.invoke({"Records": []}, timeout=900) == {"batchItemFailures": []}
        print(f"\nfunction serving after {time.monotonic() - started:.1f} s (warm-up invocation)")
        return self.watch

    def restart(self, lambda_watch, env: dict) -> LambdaWatch:
        """Starts the function again (after it was killed), keeping the log from the first start
        in the failure report."""
        offset = self.log_offset
        watch = self.start(lambda_watch, env)
        self.log_offset = offset
        return watch

    def drain_log(self) -> list[str]:
        if not self.watch:
            return []
        with open(self.watch.log_path, "rb") as f:
            f.seek(self.log_offset)
            text = f.read().decode(errors="replace")
        keep = ("drain", "record", "interruption", "WARN", "ERROR", "replacement", "evict")
        return [line for line in text.splitlines() if any(k in line for k in keep)]

    def failure_report(self) -> str:
        out = ["", "===== drain diagnostics ====="]
        out.append(f"--- function log (drain lines, last 150 of {len(lines := self.drain_log())}) ---")
        out += lines[-150:]
        for name in self.nodes:
            node = self.k8s.get("node", name)
            if node is None:
                out.append(f"--- node {name}: gone ---")
                continue
            ann = {k: v for k, v in node["metadata"].get("annotations", {}).items() if k.startswith("prewarm.io/")}
            out.append(f"--- node {name}: unschedulable={node['spec'].get('unschedulable')} "
                       f"taints={node['spec'].get('taints')} ---")
            out += [f"  {k}={v}" for k, v in sorted(ann.items())]
            events = self.k8s.json("get", "events", "-A", "--field-selector",
                                   f"involvedObject.name={name}")["items"]
            out.append(f"--- Events of node {name} ({len(events)}) ---")
            out += [f"  {e.get('lastTimestamp') or e.get('eventTime')} {e.get('type')} {e.get('reason')} "
                    f"x{e.get('count') or (e.get('series') or {}).get('count', 1)}: {e.get('message')}"
                    for e in events]
        out.append("--- pods in inference ---")
        out += [f"  {p['metadata']['name']} node={p['spec'].get('nodeName')} phase={p['status'].get('phase')} "
                f"deleting={bool(p['metadata'].get('deletionTimestamp'))}"
                for p in self.k8s.get("pods", namespace="inference") or []]
        events = self.k8s.json("get", "events", "-n", "inference", "--sort-by=.lastTimestamp")["items"]
        out.append(f"--- Events in inference (last 30 of {len(events)}) ---")
        out += [f"  {e.get('lastTimestamp') or e.get('eventTime')} {e.get('involvedObject', {}).get('name')} "
                f"{e.get('reason')}: {(e.get('message') or '')[:200]}" for e in events[-30:]]
        out.append("--- replacement placeholders in prewarm ---")
        out += [f"  {p['metadata']['name']} for={p['metadata'].get('labels', {}).get('prewarm.io/replacement-for')} "
                f"node={p['spec'].get('nodeName')} phase={p['status'].get('phase')} "
                f"annotations={ {k: v for k, v in p['metadata'].get('annotations', {}).items() if 'prewarm' in k} }"
                for p in self.k8s.get("pods", namespace="prewarm", selector="prewarm.io/replacement-for") or []]
        balloon = self.k8s.get("deployment", BALLOON, "prewarm")
        if balloon:
            out.append(f"--- balloon: replicas={balloon['spec'].get('replicas')} annotations="
                       f"{ {k: v for k, v in balloon['metadata'].get('annotations', {}).items() if 'prewarm' in k} }")
        out.append("--- nodes ---")
        out += [f"  {n['metadata']['name']} pool={n['metadata'].get('labels', {}).get('karpenter.sh/nodepool')} "
                f"ready={self.k8s.node_ready(n)} unschedulable={n['spec'].get('unschedulable')}"
                for n in self.k8s.get("nodes") or []]
        out.append(f"--- polls (last 40 of {len(self.polls)}) ---")
        out += self.polls[-40:]
        for q in self.queues:
            out.append(f"--- queue {q.rsplit('/', 1)[-1]}: {self.aws.queue_counts(q)} ---")
        return "\n".join(out)


@pytest.fixture
def drain_debug(k8s, aws):
    """DrainDebug for the test; conftest's report hook adds its failure_report() on failure."""
    return DrainDebug(k8s, aws)


def queue_total(aws, url: str) -> int:
    """Messages in a queue, counting those in flight and those delayed (continuations)."""
    attrs = aws.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=[
        "ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible",
        "ApproximateNumberOfMessagesDelayed"])["Attributes"]
    return sum(int(v) for v in attrs.values())


def condition_since(node: dict, kind: str = "Ready") -> float | None:
    """When the node's condition last turned True (None: not True)."""
    for c in node.get("status", {}).get("conditions", []):
        if c["type"] == kind and c["status"] == "True":
            return parse_iso(c["lastTransitionTime"])
    return None


# The production queue settings scaled down five times: recheck 15 s -> 3 s, visibility 30 s ->
# 6 s (visibility >= function timeout 20 s -> 4 s; cargo lambda watch does not enforce one).
RECHECK_S, VISIBILITY_S = 3, 6


def test_spot_warning_drains_make_before_break(k8s, aws, wait_until, lambda_watch, poll_sqs,
                                               reset_cluster, stack_env, drain_debug):
    k8s.apply(balloon_deployment())
    k8s.apply(pdb("llm-inference", "llm-inference", 1))
    node = deploy_on_one_node(k8s, wait_until, "llm", 2, "llm-inference")
    node_name, instance = node["metadata"]["name"], instance_of(node)
    on_node = [p["metadata"]["name"] for p in running_pods(k8s, "llm-inference")
               if p["spec"]["nodeName"] == node_name]
    # maxReceiveCount 3, as for poison: a claimed drain continues with messages of its own, so
    # the receive count never grows with the drain's length.
    queue, dlq = aws.new_queue_pair(f"h6-drain-{uuid.uuid4().hex[:6]}", visibility_timeout=VISIBILITY_S,
                                    max_receive_count=3)
    drain_debug.nodes.append(node_name)
    drain_debug.queues += [queue, dlq]
    drain_debug.start(lambda_watch, handler_env(stack_env, INTERRUPTION_QUEUE_URL=queue))
    nodes_before = {n["metadata"]["name"] for n in k8s.get("nodes")}

    notice_at = time.time()
    event_id = str(uuid.uuid4())
    body = spot_warning(instance, notice_at, event_id)
    # The same notice delivered twice (EventBridge delivers at least once): harmless.
    for _ in range(2):
        aws.sqs.send_message(QueueUrl=queue, MessageBody=body)

    # The drain's replacement placeholder, as seen while the drain runs: what it asked for. (Where
    # it ran comes from its Scheduled Events afterwards: it may run only for the seconds between
    # two checks, too short to be sure to see by polling.)
    seen: dict = {"placeholder": None}

    def watch_placeholder() -> None:
        for p in placeholders_of(k8s, node_name, deleting=True):
            seen["placeholder"] = seen["placeholder"] or p

    def finished() -> bool:
        r = poll_sqs(queue_url=queue)
        drain_debug.record_poll(r)
        assert r.error is None, r.error
        watch_placeholder()
        phase = (k8s.get("node", node_name) or {}).get("metadata", {}).get("annotations", {}).get(
            "prewarm.io/drain-phase")
        return phase == "drained" and queue_total(aws, queue) == 0

    wait_until(finished, timeout=300, interval=1, what="the drain to finish and its queue to empty")
    finished_at = time.time()
    assert queue_total(aws, dlq) == 0, "a drain message went to the DLQ"

    n = k8s.get("node", node_name)
    assert n is not None, "the drained node is still there (nothing deletes it but the instance's end)"
    a = n["metadata"]["annotations"]
    assert n["spec"].get("unschedulable") is True
    assert {"key": "prewarm.io/draining", "value": "spot-interruption", "effect": "NoSchedule"} in [
        {k: t.get(k) for k in ("key", "value", "effect")} for t in n["spec"]["taints"]]
    assert a["prewarm.io/drain-event-id"] == event_id
    assert "prewarm.io/drain-replacement-requested-at" in a

    # Make before break: the replacement was ready before the first eviction, which came before
    # the deadline; and a new node of the pool had turned Ready by then.
    notice = parse_iso(a["prewarm.io/drain-notice-time"])
    cordon = parse_iso(a["prewarm.io/drain-started-at"])
    assert "prewarm.io/drain-replacement-ready-at" in a, "evicted without a ready replacement"
    ready = parse_iso(a["prewarm.io/drain-replacement-ready-at"])
    evict = parse_iso(a["prewarm.io/drain-evicting-since"])
    deadline = parse_iso(a["prewarm.io/drain-deadline"])
    assert ready <= evict < deadline, (ready, evict, deadline)
    new_nodes = [m for m in k8s.get("nodes") if m["metadata"]["name"] not in nodes_before
                 and m["metadata"].get("labels", {}).get("karpenter.sh/nodepool") == "gpu"]
    ready_times = [t for t in (condition_since(m) for m in new_nodes) if t is not None]
    assert ready_times and min(ready_times) <= evict + 1, (
        f"no new node of the pool was Ready by the first eviction: {ready_times} vs {evict}")

    # The pods run again, on another node of the pool (the replacement), and none is left behind.
    pods = wait_until(lambda: (ps := running_pods(k8s, "llm-inference")) and len(ps) == 2 and ps,
                      timeout=300, what="both replicas Running again")
    assert all(p["spec"]["nodeName"] != node_name for p in pods)
    assert not [p for p in k8s.get("pods", namespace="inference") if p["metadata"]["name"] in on_node
                and not p["metadata"].get("deletionTimestamp")]
    # The replacement was this drain's own placeholder: shaped like the node's two 1-GPU pods,
    # at the balloon priority, in the pool, labelled with the drain id and owner, expiring; kept
    # off the reclaimed type and zone by preferred affinity only; Running on a new node of the
    # pool (never the draining one) before the first eviction.
    ph = seen["placeholder"]
    assert ph is not None, "no replacement placeholder was made"
    spec = ph["spec"]
    assert spec["priorityClassName"] == "prewarm-balloon" and spec["priority"] < 0, spec
    assert spec["nodeSelector"]["karpenter.sh/nodepool"] == "gpu"
    assert spec["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] == str(len(on_node))
    assert ph["metadata"]["annotations"]["prewarm.io/replacement-owner"] == event_id
    assert "prewarm.io/lease-expires-at" in ph["metadata"]["annotations"]
    affinity = spec.get("affinity", {}).get("nodeAffinity", {})
    assert "requiredDuringSchedulingIgnoredDuringExecution" not in affinity, affinity
    avoided = {e["key"]: e["values"] for t in affinity.get("preferredDuringSchedulingIgnoredDuringExecution", [])
               for e in t["preference"]["matchExpressions"]}
    node_labels = node["metadata"]["labels"]
    assert avoided.get("node.kubernetes.io/instance-type") == [node_labels["node.kubernetes.io/instance-type"]]
    scheduled = [e.get("message") or e.get("note") or "" for e in k8s.json(
        "get", "events", "-n", "prewarm", "--field-selector",
        f"involvedObject.name={ph['metadata']['name']},reason=Scheduled")["items"]]
    ran_on = {m.rsplit(" to ", 1)[-1] for m in scheduled}
    assert ran_on and node_name not in ran_on, scheduled
    assert ran_on <= {m["metadata"]["name"] for m in new_nodes}, (ran_on, [m["metadata"]["name"] for m in new_nodes])
    # Handed over: the placeholder is gone (deleted right before the evictions), and no
    # reservation is held on the balloon (the earlier design's), which stays at 0.
    assert not placeholders_of(k8s, node_name)
    balloon = k8s.get("deployment", BALLOON, "prewarm")
    reserved = {k: v for k, v in balloon["metadata"].get("annotations", {}).items() if "replacement" in k}
    assert reserved.get("prewarm.io/replacement-drains", "{}") == "{}", reserved
    assert balloon["spec"]["replicas"] == 0, balloon["spec"]
    # The milestones are Events on the node.
    reasons = {e.get("reason") for e in k8s.json("get", "events", "-A", "--field-selector",
                                                  f"involvedObject.name={node_name}")["items"]}
    assert {"DrainClaimed", "DrainReplacementReady", "DrainEvicted", "DrainFinished"} <= reasons, reasons

    print(f"\ninterruption e2e: notice->cordon {1000 * (cordon - notice):.0f} ms, "
          f"notice->replacement ready {1000 * (ready - notice):.0f} ms, "
          f"notice->evictions {1000 * (evict - notice):.0f} ms (deadline at +{deadline - notice:.0f} s), "
          f"notice->drain finished and queue empty {finished_at - notice_at:.1f} s")


def test_a_pdb_blocking_longer_than_the_receive_budget_keeps_the_drain_and_records_the_blocker(
        k8s, aws, wait_until, lambda_watch, poll_sqs, reset_cluster, stack_env, drain_debug):
    k8s.apply(pdb("stubborn", "stubborn", 0))
    node = deploy_on_one_node(k8s, wait_until, "stubborn", 1, "stubborn")
    node_name, instance = node["metadata"]["name"], instance_of(node)
    pod = running_pods(k8s, "stubborn")[0]["metadata"]["name"]
    # maxReceiveCount 2: the drain outlives the queue's whole receive budget several times over.
    queue, dlq = aws.new_queue_pair(f"h6-pdb-{uuid.uuid4().hex[:6]}", visibility_timeout=VISIBILITY_S,
                                    max_receive_count=2)
    drain_debug.nodes.append(node_name)
    drain_debug.queues += [queue, dlq]
    drain_debug.start(lambda_watch, handler_env(stack_env, INTERRUPTION_QUEUE_URL=queue))

    # Issued 100 s ago: past the eviction deadline, so eviction is attempted at once.
    aws.sqs.send_message(QueueUrl=queue, MessageBody=spot_warning(instance, time.time() - 100))
    checks = 0

    def blocked_event():
        nonlocal checks
        r = poll_sqs(queue_url=queue)
        drain_debug.record_poll(r)
        assert r.error is None, r.error
        checks += r.received
        assert queue_total(aws, dlq) == 0, "the blocked drain went to the DLQ"
        events = k8s.get("events", namespace="default")
        return [e for e in events if e.get("reason") == "DrainBlockedByPDB"
                and e.get("involvedObject", {}).get("name") == node_name] if checks >= 5 else None

    events = wait_until(blocked_event, timeout=180, interval=1,
                        what="five checks (over twice maxReceiveCount) and a DrainBlockedByPDB Event")
    message = events[0].get("message") or events[0].get("note") or ""
    assert pod in message and "inference/stubborn" in message, message
    # One message carries the drain on (a continuation), nothing is in the DLQ, the pod still runs.
    assert queue_total(aws, queue) == 1
    assert queue_total(aws, dlq) == 0
    assert [p["metadata"]["name"] for p in running_pods(k8s, "stubborn")] == [pod]
    print(f"\nblocked drain: {checks} checks with maxReceiveCount 2, Event: {message}")


def test_poison_goes_to_the_dlq_and_a_foreign_instance_is_acknowledged(
        k8s, aws, wait_until, lambda_watch, poll_sqs, stack_env, drain_debug):
    queue, dlq = aws.new_queue_pair(f"h6-poison-{uuid.uuid4().hex[:6]}", visibility_timeout=1,
                                    max_receive_count=2)
    drain_debug.queues += [queue, dlq]
    drain_debug.start(lambda_watch, handler_env(stack_env, INTERRUPTION_QUEUE_URL=queue))
    poison = aws.sqs.send_message(QueueUrl=queue, MessageBody="spot interruption {not json")["MessageId"]
    foreign = aws.sqs.send_message(QueueUrl=queue,
                                   MessageBody=spot_warning("i-0fffffffffffffff0", time.time()))["MessageId"]
    seen: dict[str, list[str]] = {"deleted": [], "failed": []}

    def poison_in_dlq():
        r = poll_sqs(queue_url=queue)
        drain_debug.record_poll(r)
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
