"""The soak: the real tick left running for 20+ minutes of demand that rises, holds and falls, at
the shipped settings, against the stack (run by `make soak`, skipped unless PREWARM_SOAK=1).

- The tick runs through `cargo lambda watch` as the prewarm-lambda user, invoked back to back as
  EventBridge would (one invocation a minute, each running the minute's ticks), with the shipped
  defaults: 15 s ticks, a 180 s lead, a 900 s window at 15 s steps, a 60 s rate window, a 30 s
  ingestion lag (AMP's default), a 10 s timeout per target.
- Demand is remote-written into the stack's Prometheus like a remote-write pipeline with lag: a
  sample stamped t becomes visible at t + 30 s. Two models share the NodePool `gpu` (targets A and
  B, with the same spend cap); A's inference Deployment has an HPA whose floor prewarm may raise
  (`hpa.raiseMinReplicas`), the user's value being 1.
- Partway through the hold, every metric query of B hangs for 2 minutes (a proxy in front of
  Prometheus holds them): B's reads fail, A's go on.

Checked, from the decision log lines and a poll of the NodePool every 3 s:
1. A's HPA floor is raised while demand is still rising (before the hold begins);
2. after the fall it is given back: the HPA ends at the user's 1 with no prewarm annotation;
3. the NodePool's `spec.limits` and `spec.disruption.budgets` change at most once per phase;
4. during the hang, B's ticks hold what B has (its reads fail: the source's request timeout or
   the target's) while A is decided at every tick (no gap over two ticks), and no invocation
   runs past its minute;
5. at the end `prewarm restore` gives back only what the two live targets hold (no `kept`, no
   failure), and a second run finds nothing left to restore.

Timings and counts are printed; PREWARM_SOAK_SECONDS sets the length (default 1500).
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
import urllib.error
import urllib.request
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

import remote_write
from test_policy_v2 import Feeder, hpa, inference, parse_time
from test_restore import prewarm_bin  # noqa: F401 (fixture)
from test_tick import balloon, decisions, gpu_pool, log_offset, scheduled  # noqa: F401 (gpu_pool: fixture)

pytestmark = pytest.mark.skipif(os.environ.get("PREWARM_SOAK") != "1",
                                reason="the 20-minute soak runs in `make soak` (PREWARM_SOAK=1)")

NAMESPACE = "prewarm-e2e-tick"  # test_tick's balloon() and the fixtures' namespace
LAG_S = 30.0
SCRAPE_S = 15.0
TICK_S = 15.0
HANG_S = 120.0
CAP = {"nvidia.com/gpu": "40"}
USER_MIN, RAISED_MIN = "prewarm.io/user-min-replicas", "prewarm.io/raised-min-replicas"


class Profile:
    """Requests/s of one model against seconds since the soak began: flat, a linear rise to the
    peak, a hold, a linear fall back, and a flat tail long enough for the floor to come back."""

    def __init__(self, length_s: float, base: float, peak: float):
        self.base, self.peak = base, peak
        self.phases = {"flat": (0.0, 0.2 * length_s), "rise": (0.2 * length_s, 0.4 * length_s),
                       "hold": (0.4 * length_s, 0.6 * length_s), "fall": (0.6 * length_s, 0.7 * length_s),
                       "tail": (0.7 * length_s, length_s)}

    def rate(self, s: float) -> float:
        (r0, r1), (f0, f1) = self.phases["rise"], self.phases["fall"]
        if s < r0:
            return self.base
        if s < r1:
            return self.base + (self.peak - self.base) * (s - r0) / (r1 - r0)
        if s < f0:
            return self.peak
        if s < f1:
            return self.peak - (self.peak - self.base) * (s - f0) / (f1 - f0)
        return self.base

    def phase_of(self, s: float) -> str:
        for name, (a, b) in self.phases.items():
            if a <= s < b:
                return name
        return "after"


class LaggedFeeder(Feeder):
    """Writes, every scrape interval, the sample stamped LAG_S ago: what a remote-write pipeline
    with ingestion lag shows. The rate follows the profile at the sample's own time."""

    def __init__(self, prometheus_url: str, model: str, profile: Profile, t0: float):
        super().__init__(prometheus_url, model)
        self.profile, self.t0 = profile, t0

    def _run(self) -> None:
        while not self._stop.wait(max(0.0, self.last_t + LAG_S + SCRAPE_S - time.time())):
            t = time.time() - LAG_S
            remote_write.write(self.url, self._samples([t], lambda u: self.profile.rate(u - self.t0)),
                               {"model_name": self.model})


class HangingProxy:
    """Forwards the tick's Prometheus calls; between `hang_from` and `hang_until` (Unix seconds)
    every call whose query names `model` is held until `hang_until` and then refused."""

    def __init__(self, upstream: str, model: str):
        self.upstream, self.model = upstream.rstrip("/"), model
        self.hang_from = self.hang_until = float("inf")
        self.held = 0
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def _forward(self, body: bytes | None) -> None:
                now = time.time()
                asked = self.path + (body or b"").decode(errors="replace")
                if proxy.hang_from <= now < proxy.hang_until and proxy.model in urllib.request.unquote(asked):
                    proxy.held += 1
                    time.sleep(max(0.0, proxy.hang_until - now))
                    try:
                        self.send_error(503, "held by the soak's hang")
                    except OSError:  # the caller gave up long ago: that is the point
                        pass
                    return
                req = urllib.request.Request(proxy.upstream + self.path, data=body, method=self.command,
                                             headers={k: v for k, v in self.headers.items()
                                                      if k.lower() in ("content-type", "accept")})
                try:
                    with urllib.request.urlopen(req, timeout=30) as r:
                        status, payload, ctype = r.status, r.read(), r.headers.get("Content-Type", "")
                except urllib.error.HTTPError as e:
                    status, payload, ctype = e.code, e.read(), e.headers.get("Content-Type", "")
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def do_GET(self):
                self._forward(None)

            def do_POST(self):
                self._forward(self.rfile.read(int(self.headers.get("Content-Length", "0"))))

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()


class PoolWatch:
    """The NodePool's limits and budgets every 3 s, keeping each change with its time."""

    def __init__(self, k8s):
        self.k8s, self.changes, self._stop = k8s, [], threading.Event()
        self._last: tuple[str, str] | None = self._read()  # before the first tick can write
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _read(self) -> tuple[str, str]:
        spec = (self.k8s.get("nodepool", "gpu") or {}).get("spec", {})
        return (json.dumps(spec.get("limits"), sort_keys=True),
                json.dumps(spec.get("disruption", {}).get("budgets"), sort_keys=True))

    def _run(self) -> None:
        while not self._stop.wait(3.0):
            now = self._read()
            for field, before, after in zip(("limits", "budgets"), self._last, now):
                if before != after:
                    self.changes.append((time.time(), field, before, after))
            self._last = now

    def stop(self) -> None:
        self._stop.set()
        self.thread.join(timeout=10)


def restore(stack_env, prewarm_bin: str, targets: list[dict]) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREWARM_", "METRIC_"))}
    env.update(KUBECONFIG=stack_env["KUBECONFIG"], PREWARM_TARGETS=json.dumps(targets))
    return subprocess.run([prewarm_bin, "restore"], env=env, capture_output=True, text=True, timeout=120)


@pytest.fixture
def namespace(k8s):
    k8s.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}, cleanup=False)
    return NAMESPACE


def test_the_tick_left_running_rises_holds_falls_and_leaves_nothing_behind(
        stack_env, k8s, namespace, gpu_pool, lambda_watch, prewarm_bin, wait_until):
    length = float(os.environ.get("PREWARM_SOAK_SECONDS", "1500"))
    run = uuid.uuid4().hex[:6]
    a, b = f"soak-a-{run}", f"soak-b-{run}"
    app = f"{a}-llm"
    for name in (f"{a}-balloon", f"{b}-balloon"):
        k8s.apply(balloon(name))
    deployment = inference(app, 1)
    deployment["metadata"]["namespace"] = NAMESPACE
    k8s.apply(deployment)
    autoscaler = hpa(app, app)
    autoscaler["metadata"]["namespace"] = NAMESPACE
    k8s.apply(autoscaler)
    wait_until(lambda: len([p for p in k8s.get("pods", namespace=NAMESPACE, selector=f"app={app}")
                            if p.get("status", {}).get("phase") == "Running"]) >= 1,
               timeout=300, what="A's inference pod running")

    def target(name: str, **extra) -> dict:
        return {"name": name, "nodePool": "gpu", "maxSpare": 4, "maxStepUp": 4,
                "selector": f'model_name="{name}"', "replicaConcurrency": 8, "limits": CAP,
                "headroom": {"kind": "balloon", "namespace": NAMESPACE, "name": f"{name}-balloon"},
                **extra}

    targets = [target(a, podNamespace=NAMESPACE, podSelector=f"app={app}",
                      hpa={"namespace": NAMESPACE, "name": app, "raiseMinReplicas": True}),
               target(b)]
    proxy = HangingProxy(stack_env["PROMETHEUS_URL"], b)
    # The shipped settings, but for the seasons (no day of history here) and the lag the source
    # really has. Everything else is the default.
    watch = lambda_watch({"PREWARM_HANDLER": "tick", "METRIC_SOURCE": "prometheus",
                          "PROMETHEUS_URL": proxy.url, "PREWARM_TARGETS": json.dumps(targets),
                          "SEASONS_SECONDS": "none", "INGESTION_LAG_SECONDS": str(int(LAG_S)),
                          "RUST_LOG": "info"})

    t0 = time.time()
    profiles = {a: Profile(length, 1.0, 24.0), b: Profile(length, 1.0, 12.0)}
    feeders = []
    for model, profile in profiles.items():
        feed = LaggedFeeder(stack_env["PROMETHEUS_URL"], model, profile, t0)
        # A full window of the flat start, already past its lag.
        feed.history(t0 - 1000 - LAG_S, t0 - LAG_S, lambda u: profile.rate(u - t0))
        feeders.append(feed.start())
    phases = profiles[a].phases
    hang_from = t0 + phases["hold"][0] + 0.25 * (phases["hold"][1] - phases["hold"][0])
    proxy.hang_from, proxy.hang_until = hang_from, hang_from + HANG_S
    pool = PoolWatch(k8s)
    offset = log_offset(watch)
    durations = []
    try:
        # One invocation a minute, as the EventBridge schedule starts them.
        while time.time() < t0 + length:
            started = time.monotonic()
            result = watch.invoke(scheduled(), timeout=300)
            durations.append(time.monotonic() - started)
            assert "skipped" not in result, result
            time.sleep(max(0.0, started + 60 - time.monotonic()))
    finally:
        for feed in feeders:
            feed.stop()
        pool.stop()
        proxy.close()

    lines = {m: decisions(watch, offset, m) for m in (a, b)}
    since = lambda line: parse_time(line["at"]) - t0  # noqa: E731
    for m, ls in lines.items():
        print(f"\n{m}: {len(ls)} decisions")
        for line in ls:
            print(f"  {since(line):7.1f} s {profiles[m].phase_of(since(line)):5} {line['action']:11} "
                  f"obs {line.get('observed')} fc {line.get('forecast')} desired {line.get('desired')} "
                  f"floor {line.get('floor_replicas')} {line.get('hpa_floor')} | {line.get('reason')}")
    print(f"invocations: {len(durations)}, longest {max(durations):.1f} s; proxy held {proxy.held} calls")
    print("NodePool changes:", [(round(t - t0), f) for t, f, _, _ in pool.changes])

    # 1. A's floor rises while demand still rises.
    raised = [line for line in lines[a] if line.get("hpa_floor") == "raised"]
    assert raised, "A's HPA floor was never raised"
    first_raise = since(raised[0])
    print(f"A's floor first raised at {first_raise:.0f} s; the rise is {phases['rise']}")
    assert first_raise < phases["hold"][0], "the floor rose only after demand stopped rising"

    # 2. ... and comes back to the user's value after the fall.
    assert any(line.get("hpa_floor") == "restored" and since(line) >= phases["fall"][0] for line in lines[a])
    h = k8s.get("hpa", app, NAMESPACE)
    assert h["spec"]["minReplicas"] == 1, h["spec"]
    assert not [k for k in h["metadata"].get("annotations", {}) if k.startswith("prewarm.io/")], h["metadata"]

    # 3. No flapping: each of limits and budgets changes at most once per phase.
    for field in ("limits", "budgets"):
        per_phase: dict[str, int] = {}
        for t, f, _, _ in pool.changes:
            if f == field:
                phase = profiles[a].phase_of(t - t0)
                per_phase[phase] = per_phase.get(phase, 0) + 1
        assert all(n <= 1 for n in per_phase.values()), (field, per_phase, pool.changes)

    # 4. The hang: B's reads fail (the source's own request timeout, or the target's) and B holds
    # what it has; A is decided at every tick; no invocation overruns its minute.
    in_hang = lambda line: hang_from + TICK_S <= parse_time(line["at"]) < hang_from + HANG_S  # noqa: E731
    b_hung = [line for line in lines[b] if in_hang(line)]
    assert b_hung, "no tick of B during the hang"
    for line in b_hung:
        held = line["action"] == "fail_static" and "metrics_missing" in line["reason"]
        timed_out = line["action"] == "error" and "TARGET_TIMEOUT_SECONDS" in line["reason"]
        assert held or timed_out, line
    a_times = sorted(parse_time(line["at"]) for line in lines[a]
                     if hang_from - 60 <= parse_time(line["at"]) < hang_from + HANG_S + 60)
    gaps = [later - earlier for earlier, later in zip(a_times, a_times[1:])]
    assert a_times and max(gaps) <= 2 * TICK_S + 5, gaps
    assert max(durations) < 75, durations
    assert any(parse_time(line["at"]) >= hang_from + HANG_S + TICK_S and line["action"] != "error"
               for line in lines[b]), "B never recovered after the hang"

    # 5. What is left is what the live targets hold, and one restore gives it all back.
    first = restore(stack_env, prewarm_bin, targets)
    print(first.stdout)
    assert first.returncode == 0, first.stderr
    assert "\tkept\t" not in first.stdout and "\tfailed\t" not in first.stdout, first.stdout
    again = restore(stack_env, prewarm_bin, targets)
    assert again.returncode == 0 and "\trestored\t" not in again.stdout, again.stdout
