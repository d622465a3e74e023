"""Faults of the interruption path that need the whole local stack (real Karpenter, the function
under `cargo lambda watch`, the SQS -> Lambda poller), beside the fault matrix of
tests/interruption_faults_stack.rs (which drives `handle_batch` in-process):

- Karpenter's own interruption handling left on alongside prewarm. The kwok provider has no
  interruption controller (no queue of its own), so, as the serving-gap baseline does, the test
  does what that controller does on a spot warning: it deletes the node's NodeClaim at the
  notice; Karpenter's termination controller then taints and drains the node and deletes it.
- The function's process killed (SIGKILL) mid-drain and started again.

Each test prints the drain's log lines, the node's annotations and Events, the pods and the
queues when it fails (`drain_debug`).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid

from test_interruption import (BALLOON, VISIBILITY_S, balloon_deployment, deploy_on_one_node,  # noqa: F401
                               drain_debug, handler_env, instance_of, parse_iso, pdb, queue_total,
                               placeholders_of, running_pods, spot_warning, surge_targets)


def first_delivery(poll_sqs, drain_debug, queue: str):
    """Polls until a delivery receives something; returns its result."""
    for _ in range(30):
        r = poll_sqs(queue_url=queue)
        drain_debug.record_poll(r)
        if r.received:
            return r
    raise AssertionError("no message arrived on the queue within 30 polls")


def kill_function(watch) -> None:
    """SIGKILL to every process of the function's session (`cargo lambda watch`, the Runtime API
    emulator, the function it runs; LambdaWatch starts it as its own session, and the function
    may sit in a process group of its own inside it): a crash, nothing cleans up."""
    sid = watch.proc.pid
    ps = subprocess.run(["ps", "-e", "-o", "pid=,sid="], capture_output=True, text=True, check=True)
    pids = [int(pid) for pid, s in (line.split() for line in ps.stdout.splitlines()) if int(s) == sid]
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    watch.proc.wait(timeout=15)


def test_karpenter_interruption_handling_alongside_strands_nothing(
        k8s, aws, wait_until, lambda_watch, poll_sqs, reset_cluster, stack_env, drain_debug):
    app = "llm-along"
    targets = surge_targets(app)
    k8s.apply(balloon_deployment())
    k8s.apply(pdb(app, app, 1))
    node = deploy_on_one_node(k8s, wait_until, app, 2, app)
    node_name, instance = node["metadata"]["name"], instance_of(node)
    claims = [c["metadata"]["name"] for c in k8s.get("nodeclaims.karpenter.sh")
              if c.get("status", {}).get("nodeName") == node_name]
    assert len(claims) == 1, claims
    queue, dlq = aws.new_queue_pair(f"h6-along-{uuid.uuid4().hex[:6]}", visibility_timeout=VISIBILITY_S,
                                    max_receive_count=3)
    drain_debug.nodes.append(node_name)
    drain_debug.queues += [queue, dlq]
    drain_debug.start(lambda_watch, handler_env(stack_env, INTERRUPTION_QUEUE_URL=queue,
                                                PREWARM_TARGETS=targets, DRAIN_SURGE="true"))

    # The notice reaches both handlers. prewarm's step comes first here (it claims the node and
    # makes its placeholder), so that there is something of prewarm's for the fight to strand;
    # then Karpenter's interruption controller deletes the NodeClaim.
    notice_at = time.time()
    aws.sqs.send_message(QueueUrl=queue, MessageBody=spot_warning(instance, notice_at))
    first = first_delivery(poll_sqs, drain_debug, queue)
    assert first.error is None, first.error
    claimed = (k8s.get("node", node_name) or {}).get("metadata", {}).get("annotations", {})
    assert "prewarm.io/drain-phase" in claimed, f"prewarm did not claim the node: {claimed}"
    k8s.run("delete", "nodeclaims.karpenter.sh", claims[0], "--wait=false")

    seen = {"placeholder": bool(placeholders_of(k8s, node_name)), "replicas": 0, "deliveries": first.received,
            "errors": []}

    def over() -> bool:
        r = poll_sqs(queue_url=queue)
        drain_debug.record_poll(r)
        seen["deliveries"] += r.received
        if r.error:
            seen["errors"].append(r.error)
        seen["placeholder"] = seen["placeholder"] or bool(placeholders_of(k8s, node_name))
        d = k8s.get("deployment", app, "inference")
        seen["replicas"] = max(seen["replicas"], d["spec"]["replicas"])
        return k8s.get("node", node_name) is None and queue_total(aws, queue) == 0

    # Node gone => prewarm's drain is over: its next step finds no node, gives back what it
    # holds and deletes its message; nothing keeps going.
    wait_until(over, timeout=240, interval=1, what="the node gone and prewarm's drain over (its queue empty)")
    over_at = time.time()
    assert not seen["errors"], seen["errors"]
    assert queue_total(aws, dlq) == 0, "a drain message went to the DLQ"
    # Nothing stranded: no placeholder, the balloon untouched, the surge (if one was raised)
    # given back exactly.
    assert not placeholders_of(k8s, node_name), placeholders_of(k8s, node_name)
    balloon = k8s.get("deployment", BALLOON, "prewarm")
    assert balloon["spec"]["replicas"] == 0
    assert balloon["metadata"].get("annotations", {}).get("prewarm.io/replacement-drains", "{}") == "{}"
    d = k8s.get("deployment", app, "inference")
    assert d["spec"]["replicas"] == 2, d["spec"]
    assert not [k for k in d["metadata"].get("annotations", {}) if k.startswith("prewarm.io/surge")], d["metadata"]
    assert "prewarm.io/surging" not in d["metadata"].get("labels", {})
    # The pods run again elsewhere.
    pods = wait_until(lambda: (ps := running_pods(k8s, app)) and len(ps) == 2 and ps,
                      timeout=240, what="both replicas Running again")
    assert all(p["spec"]["nodeName"] != node_name for p in pods)
    # What each side did, from the node's Events (they outlive the node).
    reasons = sorted({e.get("reason") for e in k8s.json("get", "events", "-A", "--field-selector",
                                                         f"involvedObject.name={node_name}")["items"]})
    print(f"\nKarpenter alongside: node gone and prewarm's queue empty {over_at - notice_at:.1f} s after the "
          f"notice, {seen['deliveries']} deliveries, placeholder made={seen['placeholder']}, workload "
          f"raised to {seen['replicas']} at most; node Events: {reasons}")


def test_the_function_killed_mid_drain_comes_back_and_finishes_make_before_break(
        k8s, aws, wait_until, lambda_watch, poll_sqs, reset_cluster, stack_env, drain_debug):
    k8s.apply(balloon_deployment())
    k8s.apply(pdb("llm-killed", "llm-killed", 1))
    node = deploy_on_one_node(k8s, wait_until, "llm-killed", 2, "llm-killed")
    node_name, instance = node["metadata"]["name"], instance_of(node)
    queue, dlq = aws.new_queue_pair(f"h6-killed-{uuid.uuid4().hex[:6]}", visibility_timeout=VISIBILITY_S,
                                    max_receive_count=3)
    drain_debug.nodes.append(node_name)
    drain_debug.queues += [queue, dlq]
    # Eviction 10 s before the instance's end (deadline 110 s after the notice, not 90 s): the
    # restart runs `cargo build` and `cargo run`, which on a machine where other checkouts share
    # the target directory can wait tens of seconds for cargo's lock (27-36 s seen); the drain
    # must still have its replacement before the deadline for make-before-break to be checked.
    env = handler_env(stack_env, INTERRUPTION_QUEUE_URL=queue, EVICTION_BUDGET_SECONDS="10")
    watch = drain_debug.start(lambda_watch, env)

    notice_at = time.time()
    aws.sqs.send_message(QueueUrl=queue, MessageBody=spot_warning(instance, notice_at))
    first = first_delivery(poll_sqs, drain_debug, queue)
    assert first.error is None, first.error
    a = k8s.get("node", node_name)["metadata"]["annotations"]
    assert a.get("prewarm.io/drain-phase") not in (None, "drained"), a

    # Mid-drain (claimed, its continuation queued): the function's processes are killed.
    kill_function(watch)
    # The next delivery meets the dead function: the invocation fails, nothing is deleted, and
    # the message stays in flight until its visibility timeout.
    dead = first_delivery(poll_sqs, drain_debug, queue)
    failed_at = time.time()
    assert dead.error and dead.failed and not dead.deleted, dead
    drain_debug.restart(lambda_watch, env)
    restarted_at = time.time()

    deleted_at: dict[str, float] = {}
    errors: list[str] = []

    def finished() -> bool:
        r = poll_sqs(queue_url=queue)
        drain_debug.record_poll(r)
        if r.error:
            errors.append(r.error)
        for m in r.deleted:
            deleted_at.setdefault(m, time.time())
        phase = (k8s.get("node", node_name) or {}).get("metadata", {}).get("annotations", {}).get(
            "prewarm.io/drain-phase")
        return phase == "drained" and queue_total(aws, queue) == 0

    wait_until(finished, timeout=300, interval=1, what="the drain to finish and its queue to empty")
    assert not errors, errors
    assert queue_total(aws, dlq) == 0, "a drain message went to the DLQ"
    # The failed delivery came back (after its visibility timeout) and was handled.
    back = [deleted_at[m] for m in dead.failed if m in deleted_at]
    assert len(back) == len(dead.failed), (dead.failed, deleted_at)
    assert min(back) - failed_at >= VISIBILITY_S - 1, (min(back) - failed_at, VISIBILITY_S)

    # Make before break, as if nothing had happened: the replacement ready before the first
    # eviction, which came before the deadline; the pods run elsewhere; the placeholder handed
    # over; the node stays cordoned (drained) until the instance goes.
    n = k8s.get("node", node_name)
    a = n["metadata"]["annotations"]
    assert n["spec"].get("unschedulable") is True
    assert "prewarm.io/drain-replacement-ready-at" in a, "evicted without a ready replacement"
    ready = parse_iso(a["prewarm.io/drain-replacement-ready-at"])
    evict = parse_iso(a["prewarm.io/drain-evicting-since"])
    deadline = parse_iso(a["prewarm.io/drain-deadline"])
    assert ready <= evict < deadline, (ready, evict, deadline, f"function down {restarted_at - failed_at:.0f} s")
    pods = wait_until(lambda: (ps := running_pods(k8s, "llm-killed")) and len(ps) == 2 and ps,
                      timeout=240, what="both replicas Running again")
    assert all(p["spec"]["nodeName"] != node_name for p in pods)
    assert not placeholders_of(k8s, node_name), placeholders_of(k8s, node_name)
    balloon = k8s.get("deployment", BALLOON, "prewarm")
    assert balloon["spec"]["replicas"] == 0
    print(f"\nfunction killed mid-drain: killed {failed_at - notice_at:.1f} s after the notice, serving again "
          f"{restarted_at - failed_at:.1f} s later, the failed delivery handled again "
          f"{min(back) - failed_at:.1f} s after it failed (visibility {VISIBILITY_S} s), evictions at "
          f"+{evict - notice_at:.0f} s (replacement ready +{ready - notice_at:.0f} s, deadline "
          f"+{deadline - notice_at:.0f} s)")
