"""Burst end to end: the same demand ramp and the same burst of inference pods, run twice — once
with prewarm in dry-run (Karpenter alone), once with prewarm acting — on the real apiserver,
scheduler, Karpenter's kwok provider and kwok nodes that turn Ready after NODE_READY_DELAY.

Each run: a cluster reset (no GPU node, no NodeClaim, balloons at 0); a load-generator ramp for a
model of its own; the scheduled tick (PREWARM_HANDLER=tick) invoked through `cargo lambda watch`
in the background while the ramp rises; then, at the burst, the inference Deployment scaled from 0
to BURST replicas (what an HPA does when demand arrives). For every inference pod the test
records how long it stayed pending (from the scale-up request until it was seen bound to a node,
and until Running), and which node took it.

Asserted (behaviour only, no times): with prewarm acting, the tick wrote balloons, Karpenter ran
them on GPU nodes before the burst, and every inference pod landed on a node that existed before
it was created (it preempted a balloon; no NodeClaim had to be created for it). In dry-run the
tick decided to scale up but wrote nothing, and Karpenter had to create NodeClaims for the
inference pods after they appeared. Both pending-time distributions are printed.

Uses the `reset_cluster` fixture: it empties the `prewarm` and `inference` namespaces and deletes
every NodeClaim, so it is not for a stack shared with someone else's run (`make e2e` runs the
suite alone on its own stack).
"""

from __future__ import annotations

import json
import statistics
import threading
import time
import uuid
from datetime import datetime

from test_tick import scheduled, Model, decisions, log_offset, wait_for_series

BALLOON = "burst-balloon"
BALLOON_NS = "prewarm"
INFERENCE = "burst-inference"
INFERENCE_NS = "inference"
BURST = 3  # inference pods the "HPA" adds at once
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def gpu_deployment(name: str, namespace: str, priority_class: str | None) -> dict:
    """0 replicas of a pod that takes one whole GPU of the NodePool gpu."""
    spec = {
        "terminationGracePeriodSeconds": 0,
        "nodeSelector": {"karpenter.sh/nodepool": "gpu"},
        "tolerations": [GPU_TOLERATION],
        "containers": [{
            "name": "main", "image": "registry.k8s.io/pause:3.10",
            "resources": {"requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"},
                          "limits": {"nvidia.com/gpu": "1"}},
        }],
    }
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"replicas": 0, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}}, "spec": spec}},
    }


def tick_env(model: Model, prometheus_url: str, dry_run: bool) -> dict[str, str]:
    target = {
        "name": model.name, "nodePool": "gpu", "selector": f'model_name="{model.name}"',
        "maxSpare": BURST, "maxStepUp": BURST,
        "podNamespace": INFERENCE_NS, "podSelector": f"app={INFERENCE}",
        "headroom": {"kind": "balloon", "namespace": BALLOON_NS, "name": BALLOON},
    }
    return {
        "PREWARM_HANDLER": "tick", "METRIC_SOURCE": "prometheus", "PROMETHEUS_URL": prometheus_url,
        "PREWARM_TARGETS": json.dumps([target]), "DRY_RUN": "true" if dry_run else "false",
        # Short tick, lead time and window: the whole ramp lasts about a minute.
        "TICK_SECONDS": "5", "LEAD_TIME_SECONDS": "60", "METRICS_WINDOW_SECONDS": "120",
        "METRICS_STEP_SECONDS": "2", "STALE_AFTER_SECONDS": "30", "RUST_LOG": "info",
        # The stack's Prometheus scrapes the servers itself: no ingestion lag.
        "INGESTION_LAG_SECONDS": "0",
    }


class BackgroundInvocation:
    """One scheduled-event invocation (several ticks, about a minute) running while the test
    goes on, as EventBridge's would. Its outcome is only kept for the failure message."""

    def __init__(self, watch):
        self.outcome: dict = {}
        self.thread = threading.Thread(target=self._run, args=(watch,), daemon=True)
        self.thread.start()

    def _run(self, watch) -> None:
        try:
            self.outcome["result"] = watch.invoke(scheduled(), timeout=300)
        except Exception as e:  # noqa: BLE001 - reported by the test when it matters
            self.outcome["error"] = e


def parse_time(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def karpenter_nodes(k8s) -> dict[str, dict]:
    return {n["metadata"]["name"]: n for n in k8s.get("nodes", selector="karpenter.sh/nodepool")}


def nodeclaims(k8s) -> dict[str, dict]:
    return {c["metadata"]["name"]: c for c in k8s.get("nodeclaims.karpenter.sh")}


def running(k8s, namespace: str, app: str) -> list[dict]:
    return [p for p in k8s.get("pods", namespace=namespace, selector=f"app={app}")
            if p.get("status", {}).get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")]


def burst_and_watch(k8s, wait_until) -> tuple[float, dict[str, dict]]:
    """Scales the inference Deployment to BURST and polls its pods until all run. Returns the
    wall time of the scale-up request and, per pod, seconds until bound and until Running, and
    its node. Polling (every 0.2 s) is finer than the API's one-second timestamps."""
    seen: dict[str, dict] = {}
    burst_at = time.time()
    k8s.run("scale", "deployment", INFERENCE, "-n", INFERENCE_NS, f"--replicas={BURST}")

    def all_running() -> bool:
        now = time.time()
        for p in k8s.get("pods", namespace=INFERENCE_NS, selector=f"app={INFERENCE}"):
            rec = seen.setdefault(p["metadata"]["name"], {"created": p["metadata"]["creationTimestamp"]})
            if p["spec"].get("nodeName") and "bound_s" not in rec:
                rec["bound_s"], rec["node"] = now - burst_at, p["spec"]["nodeName"]
            if p.get("status", {}).get("phase") == "Running" and "running_s" not in rec:
                rec["running_s"] = now - burst_at
        return len(seen) == BURST and all("running_s" in r for r in seen.values())

    wait_until(all_running, timeout=300, interval=0.2, what=f"{BURST} inference pods Running")
    return burst_at, seen


def summary(label: str, pods: dict[str, dict]) -> str:
    bound = sorted(r["bound_s"] for r in pods.values())
    run = sorted(r["running_s"] for r in pods.values())
    return (f"{label}: {len(pods)} inference pods pending (scale-up -> bound) median "
            f"{statistics.median(bound):.1f}s max {bound[-1]:.1f}s; -> Running median "
            f"{statistics.median(run):.1f}s max {run[-1]:.1f}s")


def one_run(*, dry_run: bool, burst_after: float | None, stack_env, k8s, lambda_watch,
            reset_cluster, wait_until) -> dict:
    """One burst. Returns what the assertions and the printout need."""
    phases = {"start": time.monotonic()}
    reset_cluster()
    phases["reset"] = time.monotonic()
    assert not karpenter_nodes(k8s) and not nodeclaims(k8s)
    k8s.apply(gpu_deployment(BALLOON, BALLOON_NS, "prewarm-balloon"), cleanup=False)
    k8s.apply(gpu_deployment(INFERENCE, INFERENCE_NS, None), cleanup=False)

    model = Model(stack_env["LOADGEN_URL"], f"e2e-burst-{uuid.uuid4().hex[:6]}")
    model.capacity(replicas=1, concurrency=8, service_s=2.0)
    watch = lambda_watch(tick_env(model, stack_env["PROMETHEUS_URL"], dry_run))
    phases["watch"] = time.monotonic()
    try:
        model.scenario(name="ramp", start_rps=4, end_rps=60, duration_s=60)
        ramp_at = time.time()
        wait_for_series(stack_env["PROMETHEUS_URL"], model, wait_until, samples=4)
        phases["series"] = time.monotonic()
        offset = log_offset(watch)
        invocation = BackgroundInvocation(watch)

        def scale_up_decided():
            lines = decisions(watch, offset, model.name)
            if invocation.outcome.get("error") and not lines:
                raise AssertionError(f"invocation failed: {invocation.outcome['error']}")
            return [line for line in lines if (line.get("desired") or 0) >= BURST] or None

        lines = wait_until(scale_up_decided, timeout=120, interval=0.5,
                           what=f"a tick deciding {BURST} spare replicas")
        print(f"\n[{'dry-run' if dry_run else 'prewarm'}] decision:", json.dumps(lines[0]))
        assert lines[0]["dry_run"] is dry_run
        phases["decided"] = time.monotonic()

        if dry_run:
            # The same burst moment of the same ramp as the acting run.
            time.sleep(max(0.0, ramp_at + burst_after - time.time()))
        else:
            def balloons_running():
                return len(running(k8s, BALLOON_NS, BALLOON)) >= BURST
            wait_until(balloons_running, timeout=300, interval=0.5,
                       what=f"{BURST} balloon pods Running on GPU nodes")

        balloon = k8s.get("deployment", BALLOON, BALLOON_NS)
        nodes_before = karpenter_nodes(k8s)
        claims_before = nodeclaims(k8s)
        balloon_pods = {p["metadata"]["name"] for p in running(k8s, BALLOON_NS, BALLOON)}
        phases["burst"] = time.monotonic()
        burst_at, pods = burst_and_watch(k8s, wait_until)
        phases["running"] = time.monotonic()
        marks = list(phases.items())
        print("phases:", ", ".join(f"{name} +{t - marks[i][1]:.0f}s" for i, (name, t) in enumerate(marks[1:])))
        return {"model": model, "balloon": balloon, "nodes_before": nodes_before,
                "claims_before": claims_before, "balloon_pods": balloon_pods, "burst_at": burst_at,
                "burst_after": burst_at - ramp_at, "pods": pods, "claims_after": nodeclaims(k8s),
                "nodes_after": karpenter_nodes(k8s), "lines": decisions(watch, offset, model.name),
                "invocation": invocation}
    finally:
        watch.stop()
        model.idle()


def preemptions(k8s, since: float) -> list[dict]:
    events = k8s.get("events", namespace=BALLOON_NS) or []
    return [e for e in events if e.get("reason") == "Preempted"
            and parse_time(e.get("lastTimestamp") or e["metadata"]["creationTimestamp"]) >= since - 1]


def test_a_burst_lands_on_warm_nodes_with_prewarm_and_waits_for_new_nodes_without(
        stack_env, k8s, lambda_watch, reset_cluster, wait_until):
    delay_ms = stack_env.get("NODE_READY_DELAY_MS", "?")
    started = time.monotonic()

    # --- prewarm acting ---------------------------------------------------------------------
    acting = one_run(dry_run=False, burst_after=None, stack_env=stack_env, k8s=k8s,
                     lambda_watch=lambda_watch, reset_cluster=reset_cluster, wait_until=wait_until)
    preempted = preemptions(k8s, acting["burst_at"])
    written = [line for line in acting["lines"] if line["action"] == "scale_up"]
    assert written and all(line["headroom"] == "written" for line in written), acting["lines"]
    assert acting["balloon"]["spec"]["replicas"] >= BURST
    assert "prewarm.io/last-tick" in acting["balloon"]["metadata"].get("annotations", {})
    assert acting["nodes_before"], "Karpenter launched no node for the balloons before the burst"
    for name, rec in acting["pods"].items():
        assert rec["node"] in acting["nodes_before"], (
            f"{name} landed on {rec['node']}, a node that did not exist before the burst")
        created = parse_time(acting["nodes_before"][rec["node"]]["metadata"]["creationTimestamp"])
        assert created < parse_time(rec["created"]), f"{rec['node']} is not older than {name}"
    new_claims = set(acting["claims_after"]) - set(acting["claims_before"])
    claim_nodes = {c.get("status", {}).get("nodeName") for n, c in acting["claims_after"].items()
                   if n in new_claims}
    assert not claim_nodes & {r["node"] for r in acting["pods"].values()}, \
        "a NodeClaim created after the burst hosts an inference pod"
    acting_summary = summary("prewarm acting", acting["pods"])
    teardown_acting = time.monotonic()

    # --- prewarm in dry-run: Karpenter alone ---------------------------------------------------
    alone = one_run(dry_run=True, burst_after=acting["burst_after"], stack_env=stack_env, k8s=k8s,
                    lambda_watch=lambda_watch, reset_cluster=reset_cluster, wait_until=wait_until)
    assert all(line["dry_run"] is True for line in alone["lines"]), alone["lines"]
    assert any(line["desired"] > line["current"] for line in alone["lines"]), \
        "the ramp should make the plan ask for more, or the comparison proves nothing"
    assert alone["balloon"]["spec"]["replicas"] == 0
    assert not [k for k in alone["balloon"]["metadata"].get("annotations", {}) if k.startswith("prewarm.io/")]
    assert not alone["nodes_before"] and not alone["claims_before"], "no capacity before the burst"
    new_claims = set(alone["claims_after"]) - set(alone["claims_before"])
    assert new_claims, "Karpenter created no NodeClaim for the inference pods"
    for name, rec in alone["pods"].items():
        assert rec["node"] not in alone["nodes_before"]
        created = parse_time(alone["nodes_after"][rec["node"]]["metadata"]["creationTimestamp"])
        assert created >= parse_time(rec["created"]) - 1, f"{rec['node']} predates {name}"
    alone_summary = summary("Karpenter alone (DRY_RUN=true)", alone["pods"])

    print(f"\nburst of {BURST} inference pods {acting['burst_after']:.0f}s into the ramp, "
          f"NODE_READY_DELAY {delay_ms} ms")
    print(f"{acting_summary}; on nodes {sorted({r['node'] for r in acting['pods'].values()})}, "
          f"{len(preempted)} balloon preemption event(s), {len(acting['balloon_pods'])} balloons "
          f"running at the burst on {len(acting['nodes_before'])} node(s)")
    print(f"{alone_summary}; {len(new_claims)} NodeClaim(s) created for them")
    print(f"runs took {teardown_acting - started:.0f}s (prewarm) and "
          f"{time.monotonic() - teardown_acting:.0f}s (dry-run)")
