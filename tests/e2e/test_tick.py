"""The scheduled tick end to end: a scheduled event (events/scheduled.json) sent through the
Runtime API emulator (`cargo lambda watch`, PREWARM_HANDLER=tick) with the prewarm-lambda user's
RBAC, against the stack's Prometheus scraping the load generator, the real apiserver with
Karpenter's CRDs, and Karpenter's kwok provider.

Each test drives its own load-generator model and its own balloon Deployment in a namespace of
this module (not `prewarm`, which the stack's reset_cluster fixture empties under other people's
runs), so it shares nothing with other tests but the NodePool `gpu`, whose limits, budgets and
prewarm annotation are put back afterwards. Timings are printed, never asserted.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request
import uuid
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCHEDULED_FILE = json.loads((REPO / "events" / "scheduled.json").read_text())


def scheduled(late_s: float = 0.0) -> dict:
    """events/scheduled.json as EventBridge would send it now (or `late_s` seconds ago): the
    handler skips a scheduled event that arrives more than a minute after its time."""
    at = time.gmtime(time.time() - late_s)
    return {**SCHEDULED_FILE, "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", at)}
FREEZE_BUDGET = {"nodes": "0", "reasons": ["Underutilized", "Empty"]}
SAVED_BUDGETS = "prewarm.io/saved-budgets"
NAMESPACE = "prewarm-e2e-tick"


def post(url: str, body: dict) -> dict:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.loads(resp.read() or b"null")


class Model:
    """One load-generator model of this test only (the shared fixture resets every model)."""

    def __init__(self, loadgen_url: str, name: str):
        self.url, self.name = loadgen_url, name

    def scenario(self, **spec) -> None:
        post(f"{self.url}/scenario", {"model": self.name, **spec})

    def capacity(self, **spec) -> None:
        post(f"{self.url}/capacity", {"model": self.name, **spec})

    def idle(self) -> None:
        self.scenario(name="idle")


@pytest.fixture
def model(stack_env):
    m = Model(stack_env["LOADGEN_URL"], f"e2e-tick-{uuid.uuid4().hex[:6]}")
    m.capacity(replicas=1, concurrency=8, service_s=2.0)
    yield m
    m.idle()


@pytest.fixture
def namespace(k8s):
    k8s.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}, cleanup=False)
    return NAMESPACE


@pytest.fixture
def gpu_pool(k8s):
    """The shared NodePool `gpu`, put back as it was (limits, budgets, saved-budgets)."""
    before = k8s.get("nodepool", "gpu")
    assert before, "the stack's NodePool gpu is missing"
    yield before
    spec = before["spec"]
    k8s.patch("nodepool", "gpu", {
        "metadata": {"annotations": {SAVED_BUDGETS: before["metadata"].get("annotations", {}).get(SAVED_BUDGETS)}},
        "spec": {"limits": spec.get("limits"),
                 "disruption": {"consolidateAfter": spec["disruption"]["consolidateAfter"],
                                "budgets": spec["disruption"].get("budgets")}},
    })


def balloon(name: str) -> dict:
    """One balloon pod = one 1-GPU inference replica, pinned to the NodePool gpu."""
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"prewarm.io/target": name}},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "priorityClassName": "prewarm-balloon",
                    "terminationGracePeriodSeconds": 0,
                    "nodeSelector": {"karpenter.sh/nodepool": "gpu"},
                    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                    "containers": [{
                        "name": "pause", "image": "registry.k8s.io/pause:3.10",
                        "resources": {"requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"},
                                      "limits": {"nvidia.com/gpu": "1"}},
                    }],
                },
            },
        },
    }


def tick_env(model: Model, balloon_name: str, prometheus_url: str, **extra: str) -> dict[str, str]:
    target = {
        "name": model.name, "nodePool": "gpu", "maxSpare": 4, "maxStepUp": 4,
        "selector": f'model_name="{model.name}"',
        "freezeConsolidation": True,
        "limits": {"nvidia.com/gpu": "48"},
        "headroom": {"kind": "balloon", "namespace": NAMESPACE, "name": balloon_name},
    }
    env = {
        "PREWARM_HANDLER": "tick",
        "METRIC_SOURCE": "prometheus",
        "PROMETHEUS_URL": prometheus_url,
        "PREWARM_TARGETS": json.dumps([target]),
        # A short lead time and window keep the test to a few minutes of load.
        "LEAD_TIME_SECONDS": "60",
        "METRICS_WINDOW_SECONDS": "300",
        "METRICS_STEP_SECONDS": "5",
        "STALE_AFTER_SECONDS": "30",
        # The stack's Prometheus scrapes the servers itself: no ingestion lag.
        "INGESTION_LAG_SECONDS": "0",
        "TICK_SECONDS": "15",
        "RUST_LOG": "info",
    }
    env.update(extra)
    return env


def decisions(watch, offset: int, target: str) -> list[dict]:
    """The decision log lines of `target` written to the emulator's log since `offset`."""
    with open(watch.log_path, "rb") as f:
        f.seek(offset)
        text = f.read().decode(errors="replace")
    found = []
    for line in text.splitlines():
        start = line.find("{")
        if start < 0:
            continue
        try:
            record = json.loads(line[start:])
        except ValueError:
            continue
        if record.get("event") == "decision" and record.get("target") == target:
            found.append(record)
    return found


def log_offset(watch) -> int:
    return watch.log_path.stat().st_size if watch.log_path.exists() else 0


def wait_for_series(prometheus_url: str, model: Model, wait_until, samples: int = 6) -> None:
    """Until Prometheus has a few scrapes of the model's counters (the rate needs two)."""
    q = urllib.parse.urlencode({"query": f'count_over_time(vllm:request_success_total{{model_name="{model.name}"}}[5m])'})

    def enough():
        with urllib.request.urlopen(f"{prometheus_url}/api/v1/query?{q}", timeout=5) as r:
            result = json.loads(r.read())["data"]["result"]
        return result and float(result[0]["value"][1]) >= samples

    wait_until(enough, timeout=120, what=f"{samples} scrapes of {model.name}")


def test_a_ramp_scales_the_balloons_patches_the_nodepool_and_karpenter_provisions(
        stack_env, k8s, namespace, model, gpu_pool, lambda_watch, wait_until):
    name = f"{model.name}-balloon"
    k8s.apply(balloon(name))
    model.scenario(name="ramp", start_rps=2, end_rps=40, duration_s=240)
    wait_for_series(stack_env["PROMETHEUS_URL"], model, wait_until)

    watch = lambda_watch(tick_env(model, name, stack_env["PROMETHEUS_URL"]))
    offset = log_offset(watch)
    t0 = time.monotonic()
    result = watch.invoke(scheduled(), timeout=600)
    invoke_s = time.monotonic() - t0
    print(f"\ninvocation: {invoke_s:.1f}s, {len(result['ticks'])} ticks, result {json.dumps(result)}")
    assert result["dryRun"] is False
    assert len(result["ticks"]) >= 1

    lines = decisions(watch, offset, model.name)
    assert lines, f"no decision log line for {model.name}:\n{watch.log_tail()}"
    for line in lines:
        print("decision:", json.dumps(line))
        for field in ("observed", "forecast", "quantile", "desired", "current", "action", "reason", "dry_run"):
            assert field in line, f"{field} missing in {line}"
        assert line["dry_run"] is False
    assert any(line["action"] == "scale_up" for line in lines), lines

    deployment = k8s.get("deployment", name, NAMESPACE)
    replicas = deployment["spec"]["replicas"]
    desired = max(line["desired"] for line in lines)
    annotations = deployment["metadata"].get("annotations", {})
    print(f"balloon replicas {replicas}, highest desired {desired}, annotations "
          f"{ {k: v for k, v in annotations.items() if k.startswith('prewarm.io/')} }")
    assert replicas > 0
    assert replicas == lines[-1]["size_after"], "the object holds what the last decision wrote"
    assert "prewarm.io/last-tick" in annotations

    pool = k8s.get("nodepool", "gpu")
    assert pool["spec"]["limits"]["nvidia.com/gpu"] == "48"
    assert pool["spec"]["template"] == gpu_pool["spec"]["template"], "spec.template must never change"
    pool_annotations = pool["metadata"].get("annotations", {})
    if SAVED_BUDGETS in pool_annotations:
        # Frozen while the ramp rises: the user's budgets saved, the freeze budget added.
        saved = json.loads(pool_annotations[SAVED_BUDGETS])
        assert saved == gpu_pool["spec"]["disruption"]["budgets"]
        assert pool["spec"]["disruption"]["budgets"] == saved + [FREEZE_BUDGET]
        print("consolidation frozen:", json.dumps(pool["spec"]["disruption"]))
    else:
        print("consolidation not frozen at the end of the invocation:", json.dumps(pool["spec"]["disruption"]))
    assert pool["spec"]["disruption"]["consolidateAfter"] == gpu_pool["spec"]["disruption"]["consolidateAfter"]

    # A scheduled event Lambda delivers five minutes late (throttled) runs no tick, and says so.
    offset = log_offset(watch)
    late = watch.invoke(scheduled(late_s=300), timeout=60)
    print("late invocation:", json.dumps(late))
    assert late["ticks"] == [], late
    assert re.search(r"arrived 30\d s late", late["skipped"]), late
    assert not decisions(watch, offset, model.name), "a late scheduled event made a decision"

    # Karpenter launches kwok GPU nodes for the pending balloons, and they run there.
    def balloons_running():
        pods = k8s.get("pods", namespace=NAMESPACE, selector=f"app={name}")
        return [p for p in pods if p.get("status", {}).get("phase") == "Running"]

    running = wait_until(balloons_running, timeout=300, what="balloon pods running on GPU nodes")
    nodes = {p["spec"]["nodeName"] for p in running}
    print(f"{len(running)} balloon pods running on {sorted(nodes)} "
          f"{time.monotonic() - t0:.1f}s after the invocation started")
    for node_name in nodes:
        node = k8s.get("node", node_name)
        assert node["metadata"]["labels"].get("karpenter.sh/nodepool") == "gpu"
        assert int(node["status"]["capacity"].get("nvidia.com/gpu", "0")) >= 1


def test_dry_run_decides_and_logs_but_writes_nothing(
        stack_env, k8s, namespace, model, gpu_pool, lambda_watch, wait_until):
    name = f"{model.name}-balloon"
    k8s.apply(balloon(name))
    model.scenario(name="ramp", start_rps=10, end_rps=40, duration_s=120)
    wait_for_series(stack_env["PROMETHEUS_URL"], model, wait_until)
    before = k8s.get("deployment", name, NAMESPACE)

    watch = lambda_watch(tick_env(model, name, stack_env["PROMETHEUS_URL"], DRY_RUN="true"))
    offset = log_offset(watch)
    result = watch.invoke(scheduled(), timeout=600)
    print(f"\ninvocation result {json.dumps(result)}")
    assert result["dryRun"] is True

    lines = decisions(watch, offset, model.name)
    assert lines, f"no decision log line for {model.name}:\n{watch.log_tail()}"
    for line in lines:
        print("decision:", json.dumps(line))
        assert line["dry_run"] is True
    assert any(line["desired"] > line["current"] for line in lines), \
        "the ramp should make the plan ask for more, or the test proves nothing"

    after = k8s.get("deployment", name, NAMESPACE)
    assert after["spec"]["replicas"] == 0
    assert after["metadata"]["generation"] == before["metadata"]["generation"]
    prewarm_keys = [k for k in after["metadata"].get("annotations", {}) if k.startswith("prewarm.io/")]
    assert prewarm_keys == [], prewarm_keys
    # The NodePool is shared with other runs, so look for prewarm's own marks: the target's
    # spend cap (48, which nothing else sets) and the saved budgets of a freeze.
    pool = k8s.get("nodepool", "gpu")
    assert pool["spec"]["limits"].get("nvidia.com/gpu") != "48", pool["spec"]["limits"]
    assert SAVED_BUDGETS not in pool["metadata"].get("annotations", {})
    assert FREEZE_BUDGET not in pool["spec"]["disruption"].get("budgets", [])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def own_prometheus(stack_env, wait_until):
    """A Prometheus of this test only (Debian's, like the stack's), scraping the load generator,
    so it can be stopped mid-run without disturbing other tests."""
    binary = shutil.which("prometheus") or "/usr/bin/prometheus"
    work = Path(tempfile.mkdtemp(prefix="prewarm-e2e-prom-"))
    loadgen = urllib.parse.urlparse(stack_env["LOADGEN_URL"]).netloc
    (work / "prometheus.yml").write_text(
        "global: {scrape_interval: 2s, scrape_timeout: 1s}\n"
        f"scrape_configs:\n- job_name: vllm\n  static_configs:\n  - targets: ['{loadgen}']\n")
    port = free_port()
    proc = subprocess.Popen(
        [binary, f"--config.file={work / 'prometheus.yml'}", f"--web.listen-address=127.0.0.1:{port}",
         f"--storage.tsdb.path={work / 'data'}"],
        stdout=open(work / "log", "wb"), stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"

    def ready():
        with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as r:
            return r.status == 200

    wait_until(ready, timeout=60, what="the test's Prometheus to be ready")

    def stop():
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=30)

    yield url, stop
    stop()
    shutil.rmtree(work, ignore_errors=True)


def test_prometheus_stopped_mid_run_holds_the_headroom_and_says_why(
        stack_env, k8s, namespace, model, gpu_pool, lambda_watch, own_prometheus, wait_until):
    url, stop_prometheus = own_prometheus
    name = f"{model.name}-balloon"
    k8s.apply(balloon(name))
    model.scenario(name="ramp", start_rps=10, end_rps=40, duration_s=120)
    wait_for_series(url, model, wait_until)

    watch = lambda_watch(tick_env(model, name, url))
    offset = log_offset(watch)
    watch.invoke(scheduled(), timeout=600)
    scaled = k8s.get("deployment", name, NAMESPACE)["spec"]["replicas"]
    print(f"after the first invocation (Prometheus up): {scaled} balloon replicas")
    assert scaled > 0, decisions(watch, offset, model.name)

    stop_prometheus()
    # Demand falls at the same moment: were the tick to believe anything, it would scale down.
    model.idle()
    offset = log_offset(watch)
    t0 = time.monotonic()
    result = watch.invoke(scheduled(), timeout=600)
    print(f"invocation with Prometheus stopped: {time.monotonic() - t0:.1f}s {json.dumps(result)}")

    lines = decisions(watch, offset, model.name)
    for line in lines:
        print("decision:", json.dumps(line))
    # A tick within half a tick of the first invocation's last one is skipped by the overlap
    # guard (the two invocations run back to back here); every other tick holds.
    skipped = [line for line in lines if line["action"] == "skipped"]
    assert all(line["reason"].startswith("another invocation acted") for line in skipped), skipped
    lines = [line for line in lines if line["action"] != "skipped"]
    assert lines, f"no decision log line for {model.name}:\n{watch.log_tail()}"
    for line in lines:
        assert line["action"] == "fail_static", line
        assert "metrics_missing" in line["reason"], line
        assert line["desired"] >= line["current"], line
    assert k8s.get("deployment", name, NAMESPACE)["spec"]["replicas"] == scaled, "nothing scaled down"
