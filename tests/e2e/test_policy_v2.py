"""Policy v2 end to end on the stack: the scheduled tick through `cargo lambda watch` (the
prewarm-lambda user's RBAC), the stack's Prometheus, the real apiserver, HPA controller, scheduler
and Karpenter's kwok provider. Shortened by configuration only: a compressed "day"
(SEASONS_SECONDS=900), a short lead time, window and step.

1. A daily burst replayed with compressed history: known series are remote-written into Prometheus
   (tests/e2e/remote_write.py): a flat 1 request/s "today" and, one compressed day back, a burst of
   20/s for 120 s at the clock time 180 s from now. Today gives the trend nothing to see; the
   seasonal forecaster sees the burst within the next lead time (240 s). Expected, by hand: scale = today /
   that day over the window both cover = 1/1; seasonal = 1 x 20 = 20/s; blended with the flat
   trend at weight 0.5 (no calibration yet): about 10.5/s; the HPA (a Pods metric on running
   requests, 8 per replica) then wants ceil(10.5 x 2 s / 8) = 3 replicas against 1 in place. So the
   HPA's minReplicas is raised from the user's 1 to 3 and 2 balloons are ordered, and the HPA
   controller's 3 inference pods are Running before the burst's clock time.
2. A queue spike: a steady 1/s with 2 running and nothing waiting, then a sample with 120 waiting
   and 8 running. One inference pod is ready (8 slots), so the trigger (mean in-system over 30 s
   >= 2 x 8 with requests waiting) holds for the first tick that can see the sample. Asserted: the
   first tick whose time is at or after the moment the sample was visible in Prometheus (the
   remote write returned) logs `fast_path(...)`, no tick before the sample does, and the balloon
   Deployment holds what that tick wrote.

Both use their own namespace, models and objects; they share only the NodePool `gpu`, put back by
the `gpu_pool` fixture. Timings are printed; the only times compared are those of the scenario
itself (a tick's evaluation time against a sample's or a burst's clock time).
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from datetime import datetime

import pytest

import remote_write
from test_burst import BackgroundInvocation, gpu_deployment
from test_tick import scheduled, decisions, gpu_pool, log_offset  # noqa: F401 (gpu_pool: fixture)

NAMESPACE = "prewarm-e2e-policy"
SPACING = 5.0  # seconds between remote-written samples, like a scrape
SERVICE_S = 2.0
USER_MIN, RAISED_MIN = "prewarm.io/user-min-replicas", "prewarm.io/raised-min-replicas"


def parse_time(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


class Feeder:
    """The vLLM series of one model, remote-written sample by sample: the known history first,
    then (in a thread) the present every SPACING seconds. Counters integrate the rate."""

    def __init__(self, prometheus_url: str, model: str):
        self.url, self.model = prometheus_url, model
        self.completed = 0.0
        self.last_t: float | None = None
        self.rate, self.waiting, self.running = 1.0, 0.0, 2.0
        self.changed_visible_at: float | None = None  # when the first changed sample was written
        self.changed_sample_at: float | None = None  # that sample's own timestamp
        self._pending_change = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def _samples(self, times: list[float], rate_at) -> dict[str, list[tuple[float, float]]]:
        out: dict[str, list[tuple[float, float]]] = {k: [] for k in (
            "vllm:request_success_total", "vllm:e2e_request_latency_seconds_sum",
            "vllm:e2e_request_latency_seconds_count", "vllm:num_requests_waiting",
            "vllm:num_requests_running")}
        for t in times:
            if self.last_t is not None:
                self.completed += rate_at(t) * (t - self.last_t)
            self.last_t = t
            out["vllm:request_success_total"].append((t, self.completed))
            out["vllm:e2e_request_latency_seconds_count"].append((t, self.completed))
            out["vllm:e2e_request_latency_seconds_sum"].append((t, SERVICE_S * self.completed))
            out["vllm:num_requests_waiting"].append((t, self.waiting))
            out["vllm:num_requests_running"].append((t, self.running))
        return out

    def history(self, start: float, end: float, rate_at) -> None:
        times = [start + k * SPACING for k in range(int((end - start) / SPACING) + 1)]
        remote_write.write(self.url, self._samples(times, rate_at), {"model_name": self.model})

    def set(self, **values: float) -> None:
        with self._lock:
            for k, v in values.items():
                setattr(self, k, v)
            self._pending_change = True

    def _run(self) -> None:
        while not self._stop.wait(max(0.0, self.last_t + SPACING - time.time())):
            with self._lock:
                t = time.time()
                rate = self.rate
                change = self._pending_change
                remote_write.write(self.url, self._samples([t], lambda _: rate), {"model_name": self.model})
                if change and self.changed_visible_at is None:
                    self.changed_visible_at = time.time()
                    self.changed_sample_at = t
                self._pending_change = False

    def start(self) -> "Feeder":
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=10)


@pytest.fixture
def namespace(k8s):
    k8s.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}, cleanup=False)
    return NAMESPACE


@pytest.fixture
def feeder(stack_env):
    feeders: list[Feeder] = []

    def make(model: str) -> Feeder:
        f = Feeder(stack_env["PROMETHEUS_URL"], model)
        feeders.append(f)
        return f

    yield make
    for f in feeders:
        f.stop()


def unschedulable_balloon(name: str) -> dict:
    """A balloon whose pods never land (the fast-path test needs its size, not nodes)."""
    d = gpu_deployment(name, NAMESPACE, "prewarm-balloon")
    d["spec"]["template"]["spec"]["nodeSelector"] = {"karpenter.sh/nodepool": "no-such-pool"}
    return d


def inference(name: str, replicas: int) -> dict:
    d = gpu_deployment(name, NAMESPACE, None)
    d["spec"]["replicas"] = replicas
    return d


def hpa(name: str, deployment: str) -> dict:
    return {
        "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": deployment},
            "minReplicas": 1, "maxReplicas": 6,
            "metrics": [{"type": "Pods", "pods": {"metric": {"name": "vllm:num_requests_running"},
                                                 "target": {"type": "AverageValue", "averageValue": "8"}}}],
        },
    }


def tick_env(stack_env, target: dict, **extra: str) -> dict[str, str]:
    env = {
        "PREWARM_HANDLER": "tick", "METRIC_SOURCE": "prometheus",
        "PROMETHEUS_URL": stack_env["PROMETHEUS_URL"], "PREWARM_TARGETS": json.dumps([target]),
        "METRICS_WINDOW_SECONDS": "300", "METRICS_STEP_SECONDS": "5", "STALE_AFTER_SECONDS": "30",
        # The stack's Prometheus scrapes the servers itself: no ingestion lag.
        "INGESTION_LAG_SECONDS": "0", "RUST_LOG": "info",
    }
    env.update(extra)
    return env


def ready_pods(k8s, app: str) -> list[dict]:
    pods = k8s.get("pods", namespace=NAMESPACE, selector=f"app={app}")
    return [p for p in pods if not p["metadata"].get("deletionTimestamp") and any(
        c["type"] == "Ready" and c["status"] == "True" for c in p.get("status", {}).get("conditions", []))]


def ready_since(pod: dict) -> float:
    cond = next(c for c in pod["status"]["conditions"] if c["type"] == "Ready")
    return parse_time(cond["lastTransitionTime"])


def test_a_daily_burst_replayed_from_compressed_history_is_warm_before_it_comes(
        stack_env, k8s, namespace, gpu_pool, lambda_watch, feeder, wait_until):
    season, lead = 900.0, 240.0
    model = f"e2e-season-{uuid.uuid4().hex[:6]}"
    app, balloon_name = f"{model}-llm", f"{model}-balloon"
    k8s.apply(gpu_deployment(balloon_name, NAMESPACE, "prewarm-balloon"))
    k8s.apply(inference(app, 1))
    k8s.apply(hpa(app, app))
    wait_until(lambda: len(ready_pods(k8s, app)) == 1, timeout=300, what="the one inference pod Ready")
    target = {
        "name": model, "nodePool": "gpu", "maxSpare": 4, "maxStepUp": 4,
        "selector": f'model_name="{model}"', "replicaConcurrency": 8,
        "podNamespace": NAMESPACE, "podSelector": f"app={app}",
        "hpa": {"namespace": NAMESPACE, "name": app, "raiseMinReplicas": True},
        "headroom": {"kind": "balloon", "namespace": NAMESPACE, "name": balloon_name},
    }
    watch = lambda_watch(tick_env(stack_env, target, SEASONS_SECONDS=str(int(season)),
                                  LEAD_TIME_SECONDS=str(int(lead)), TICK_SECONDS="15"))

    # History: flat 1/s for 1300 s up to now (the window and lead time one season back, plus a
    # minute for rate()), except one compressed day before the burst's clock time, where 20/s ran
    # for 120 s. The burst's clock time today is 180 s from now.
    now0 = time.time()
    burst_at = now0 + 180
    yesterday = (burst_at - season, burst_at - season + 120)
    feed = feeder(model)
    feed.history(now0 - 1300, now0, lambda t: 20.0 if yesterday[0] <= t < yesterday[1] else 1.0)
    feed.start()  # today goes on at 1/s

    offset = log_offset(watch)
    result = watch.invoke(scheduled(), timeout=600)
    print(f"\ninvocation: {json.dumps(result)}")
    lines = decisions(watch, offset, model)
    for line in lines:
        print("decision:", json.dumps(line))
    assert lines, f"no decision for {model}:\n{watch.log_tail()}"
    before = [line for line in lines if parse_time(line["at"]) < burst_at]
    assert before, "no tick ran before the burst's clock time"
    first = before[0]
    # Today is flat: what the forecast asks for comes from the day before.
    assert first["observed"] < 2.0, first
    assert first["trend_only"] == "", first
    assert abs(first["seasonal"] - 20.0) < 0.5, first  # 20/s scaled by 1
    assert first["sizing"] == "hpa", first
    assert abs(first["forecast"] - 10.5) < 0.5, first  # 0.5 x 1 + 0.5 x 20
    assert first["hpa_floor"] == "raised", first
    assert first["headroom"] == "written" and first["size_after"] == 2, first

    h = k8s.get("hpa", app, NAMESPACE)
    assert h["spec"]["minReplicas"] == 3, h["spec"]
    ann = h["metadata"].get("annotations", {})
    assert ann.get(USER_MIN) == "1" and ann.get(RAISED_MIN) == "3", ann
    balloon = k8s.get("deployment", balloon_name, NAMESPACE)
    assert balloon["spec"]["replicas"] >= 1, balloon["spec"]

    # The HPA controller brings the workload to its raised floor; Karpenter gives the new pods
    # nodes. Warm means Ready before the burst's clock time.
    pods = wait_until(lambda: (lambda p: p if len(p) >= 3 else None)(ready_pods(k8s, app)),
                      timeout=max(30.0, burst_at + 120 - time.time()), what="3 inference pods Ready")
    ready_at = sorted(ready_since(p) for p in pods)
    print(f"inference pods Ready {[round(t - burst_at, 1) for t in ready_at]} s relative to the burst; "
          f"first tick {parse_time(first['at']) - now0:.1f} s after the history was written")
    assert ready_at[2] < burst_at, "the third replica was not Ready before the burst"
    feed.stop()


def test_a_queue_spike_takes_the_fast_path_at_the_first_tick_that_sees_it(
        stack_env, k8s, namespace, gpu_pool, lambda_watch, feeder, wait_until):
    model = f"e2e-fast-{uuid.uuid4().hex[:6]}"
    app, balloon_name = f"{model}-llm", f"{model}-balloon"
    k8s.apply(unschedulable_balloon(balloon_name))
    k8s.apply(inference(app, 1))
    wait_until(lambda: len(ready_pods(k8s, app)) == 1, timeout=300, what="the one inference pod Ready")
    target = {
        "name": model, "nodePool": "gpu", "maxSpare": 4, "maxStepUp": 1,
        "selector": f'model_name="{model}"', "replicaConcurrency": 8,
        "podNamespace": NAMESPACE, "podSelector": f"app={app}",
        "headroom": {"kind": "balloon", "namespace": NAMESPACE, "name": balloon_name},
    }
    watch = lambda_watch(tick_env(stack_env, target, SEASONS_SECONDS="none", LEAD_TIME_SECONDS="60",
                                  TICK_SECONDS="5"))
    now0 = time.time()
    feed = feeder(model)
    feed.history(now0 - 300, now0, lambda t: 1.0)
    feed.start()

    offset = log_offset(watch)
    invocation = BackgroundInvocation(watch)
    wait_until(lambda: len(decisions(watch, offset, model)) >= 2 or invocation.outcome.get("error"),
               timeout=120, what="two ticks before the spike")
    feed.set(waiting=120.0, running=8.0)
    wait_until(lambda: feed.changed_visible_at, timeout=30, what="the spike sample written")
    visible = feed.changed_visible_at
    invocation.thread.join(timeout=120)
    assert "error" not in invocation.outcome, invocation.outcome
    lines = decisions(watch, offset, model)
    for line in lines:
        print("decision:", json.dumps(line), f"(at {parse_time(line['at']) - visible:+.1f} s vs visible)")
    earlier = [line for line in lines if parse_time(line["at"]) < feed.changed_sample_at]
    later = [line for line in lines if parse_time(line["at"]) >= visible]
    assert earlier and later, "the invocation must have ticks before the sample and after it was visible"
    assert not any("fast_path(" in line["reason"] for line in earlier), earlier
    first = later[0]
    print(f"spike sample stamped {feed.changed_sample_at:.3f}, visible {visible:.3f}; first tick after: {first['at']}")
    assert "fast_path(" in first["reason"], first
    # maxStepUp is 1, yet the fast path's tick orders more at once. With the spike in at least
    # one of the six 5 s points of the 30 s window: in system >= 120/6 + (5 x 2 + 8)/6 = 23, so
    # the end of the ramp is >= ceil(23 / 8) = 3 replicas against 1 ready: 2 spare.
    # The write is that tick's, or (when a tick ran between the sample's stamp and the write's
    # return and already saw it) an earlier fast-path tick's: either way at most `first`.
    acted = [line for line in lines if feed.changed_sample_at <= parse_time(line["at"]) <= parse_time(first["at"])
             and "fast_path(" in line["reason"] and line["headroom"] == "written"]
    assert acted and acted[0]["size_after"] >= 2, (acted, first)
    balloon = k8s.get("deployment", balloon_name, NAMESPACE)
    assert balloon["spec"]["replicas"] == lines[-1]["size_after"], (balloon["spec"], lines[-1])


def test_a_raise_left_behind_when_the_option_is_turned_off_is_given_back_by_the_tick(
        stack_env, k8s, namespace, gpu_pool, lambda_watch):
    """The lease must not outlive the option: a target without raiseMinReplicas whose HPA still
    carries prewarm's raise (user's 2, raised to 6, lease running) gets the 2 back at its next
    tick, metrics or not (this model has none: the plan fails static, the floor still goes back)."""
    model = f"e2e-off-{uuid.uuid4().hex[:6]}"
    app, balloon_name = f"{model}-llm", f"{model}-balloon"
    k8s.apply(unschedulable_balloon(balloon_name))
    raised = hpa(app, app)
    raised["spec"]["minReplicas"] = 6
    raised["metadata"]["annotations"] = {USER_MIN: "2", RAISED_MIN: "6",
                                         "prewarm.io/floor-lease-until": "2099-01-01T00:00:00.000Z"}
    k8s.apply(raised)
    target = {
        "name": model, "nodePool": "gpu", "maxSpare": 4, "selector": f'model_name="{model}"',
        "hpa": {"namespace": NAMESPACE, "name": app, "raiseMinReplicas": False},
        "headroom": {"kind": "balloon", "namespace": NAMESPACE, "name": balloon_name},
    }
    watch = lambda_watch(tick_env(stack_env, target, SEASONS_SECONDS="none", TICK_SECONDS="60"))
    offset = log_offset(watch)
    watch.invoke(scheduled(), timeout=300)
    lines = decisions(watch, offset, model)
    for line in lines:
        print("decision:", json.dumps(line))
    assert lines and lines[0]["hpa_floor"] == "restored", lines
    h = k8s.get("hpa", app, NAMESPACE)
    assert h["spec"]["minReplicas"] == 2
    assert not [k for k in h["metadata"].get("annotations", {}) if k.startswith("prewarm.io/")]
