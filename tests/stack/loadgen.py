#!/usr/bin/env python3
"""Load generator of the local stack: serves vLLM-style metrics for Prometheus to scrape.

It does not run a model. It simulates the request queue of one or more vLLM deployments with a
deliberately small fluid model, so that tests can drive demand and know what the metrics mean:

- Demand: requests arrive at a rate given by the current *scenario* (per model):
    idle                          no requests
    constant  {rps}               a steady rate
    ramp      {start_rps, end_rps, duration_s}       linear change, then hold end_rps
    burst     {base_rps, peak_rps, at_s, burst_s}    base rate with one rectangular burst
    trace     {file, speed, loop}  request arrival times replayed from a trace of
                                  /work/shared/traces (Azure CSV or Mooncake JSONL), `speed`
                                  times faster than real time
- Supply: capacity = replicas x concurrency requests in flight; each request takes
  service_s seconds. Set with POST /capacity (tests raise replicas as inference pods get Ready).
- Each step (0.25 s): arrivals join the waiting queue; running requests finish at
  running / service_s per second; free slots take requests from the queue.

Metrics (labels model_name=<model>), named like vLLM's:
  vllm:num_requests_waiting, vllm:num_requests_running, vllm:kv_cache_usage_perc (running /
  capacity, 0..1), vllm:request_success_total (counter), vllm:e2e_request_latency_seconds_sum and
  _count (latency = service_s + the queueing delay by Little's law at completion time).

Control endpoints (JSON bodies):
  POST /scenario {"name": "ramp", "model": "m", ...parameters}  (time starts at the POST)
  POST /capacity {"model": "m", "replicas": 2, "concurrency": 8, "service_s": 2.0}
  POST /metrics-enabled {"enabled": false}   /metrics answers 503 (a scrape failure), so the
                                              series go stale in Prometheus
  POST /reset                                all models back to idle, counters and queues zero
  GET  /state                                the whole state as JSON
Listens on 127.0.0.1 only (LOADGEN_ADDR, default 127.0.0.1:18000). Python standard library only.
"""

from __future__ import annotations

import csv
import datetime as dt
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

STEP_S = 0.25
DEFAULT_MODEL = os.environ.get("LOADGEN_DEFAULT_MODEL", "test-model")


def load_trace(path: str) -> list[float]:
    """Arrival offsets in seconds from the first request of a trace file, sorted."""
    times: list[float] = []
    if path.endswith(".jsonl"):
        with open(path) as f:
            for line in f:
                if line.strip():
                    times.append(json.loads(line)["timestamp"] / 1000.0)
    else:
        with open(path, newline="") as f:
            for row in csv.DictReader(f):
                stamp = row["TIMESTAMP"]
                # Azure stamps carry 7 fractional digits; datetime takes at most 6.
                if "." in stamp:
                    head, frac = stamp.split(".", 1)
                    stamp = f"{head}.{frac[:6]}"
                times.append(dt.datetime.fromisoformat(stamp).timestamp())
    if not times:
        raise ValueError(f"trace {path} holds no requests")
    times.sort()
    first = times[0]
    return [t - first for t in times]


class Scenario:
    """Arrivals of one model as a function of time since the scenario started."""

    def __init__(self, spec: dict):
        self.name = spec.get("name", "idle")
        self.spec = spec
        self.trace: list[float] = []
        self.trace_pos = 0
        if self.name == "trace":
            self.trace = load_trace(spec["file"])
            self.speed = float(spec.get("speed", 1.0))
            if self.speed <= 0:
                raise ValueError("speed must be > 0")
        elif self.name not in ("idle", "constant", "ramp", "burst"):
            raise ValueError(f"unknown scenario {self.name!r} (idle|constant|ramp|burst|trace)")
        self.rate(0.0)  # fail on missing parameters now, not in the stepping thread

    def rate(self, t: float) -> float:
        s = self.spec
        if self.name == "idle" or self.name == "trace":
            return 0.0
        if self.name == "constant":
            return float(s["rps"])
        if self.name == "ramp":
            start, end, dur = float(s["start_rps"]), float(s["end_rps"]), float(s["duration_s"])
            if t >= dur or dur <= 0:
                return end
            return start + (end - start) * t / dur
        # burst
        base, peak = float(s["base_rps"]), float(s["peak_rps"])
        at, length = float(s.get("at_s", 0)), float(s["burst_s"])
        return peak if at <= t < at + length else base

    def arrivals(self, t0: float, t1: float) -> float:
        if self.name != "trace":
            return self.rate((t0 + t1) / 2) * (t1 - t0)
        count = 0
        span = self.trace[-1] + 1.0
        loop = bool(self.spec.get("loop", True))
        while True:
            i = self.trace_pos
            cycle, idx = divmod(i, len(self.trace))
            if cycle > 0 and not loop:
                break
            when = (cycle * span + self.trace[idx]) / self.speed
            if when >= t1:
                break
            count += 1  # every not yet consumed request due before t1
            self.trace_pos += 1
        return float(count)


class Model:
    def __init__(self, name: str):
        self.name = name
        self.replicas = 1
        self.concurrency = 8
        self.service_s = 2.0
        self.scenario = Scenario({"name": "idle"})
        self.started = time.monotonic()
        self.waiting = 0.0
        self.running = 0.0
        self.success = 0.0
        self.latency_sum = 0.0

    @property
    def capacity(self) -> float:
        return float(self.replicas * self.concurrency)

    def step(self, now: float, dt_s: float) -> None:
        t1 = now - self.started
        self.waiting += self.scenario.arrivals(max(0.0, t1 - dt_s), t1)
        done = min(self.running, self.running * dt_s / self.service_s)
        self.running -= done
        throughput = self.capacity / self.service_s
        queue_delay = self.waiting / throughput if throughput > 0 else 0.0
        self.success += done
        self.latency_sum += done * (self.service_s + queue_delay)
        admitted = min(self.waiting, max(0.0, self.capacity - self.running))
        self.waiting -= admitted
        self.running += admitted

    def state(self) -> dict:
        return {
            "model": self.name,
            "scenario": self.scenario.spec,
            "seconds_since_start": round(time.monotonic() - self.started, 3),
            "rate_rps": self.scenario.rate(time.monotonic() - self.started),
            "replicas": self.replicas,
            "concurrency": self.concurrency,
            "service_s": self.service_s,
            "waiting": self.waiting,
            "running": self.running,
            "success_total": self.success,
        }


class LoadGen:
    def __init__(self):
        self.lock = threading.Lock()
        self.models: dict[str, Model] = {DEFAULT_MODEL: Model(DEFAULT_MODEL)}
        self.metrics_enabled = True

    def model(self, name: str | None) -> Model:
        name = name or DEFAULT_MODEL
        if name not in self.models:
            self.models[name] = Model(name)
        return self.models[name]

    def run(self) -> None:
        last = time.monotonic()
        while True:
            time.sleep(STEP_S)
            now = time.monotonic()
            with self.lock:
                for m in self.models.values():
                    m.step(now, now - last)
            last = now

    def render(self) -> str:
        lines = []
        series = [
            ("vllm:num_requests_waiting", "gauge", "Requests waiting to be processed.",
             lambda m: round(m.waiting)),
            ("vllm:num_requests_running", "gauge", "Requests currently running.",
             lambda m: round(m.running)),
            ("vllm:kv_cache_usage_perc", "gauge", "KV-cache usage, 1 means 100 percent.",
             lambda m: min(1.0, m.running / m.capacity) if m.capacity else 0.0),
            ("vllm:request_success_total", "counter", "Requests finished.",
             lambda m: float(int(m.success))),
            ("vllm:e2e_request_latency_seconds_sum", "counter", "Sum of request latencies.",
             lambda m: m.latency_sum),
            ("vllm:e2e_request_latency_seconds_count", "counter", "Count of request latencies.",
             lambda m: float(int(m.success))),
        ]
        for name, kind, help_text, value in series:
            lines.append(f"# HELP {name} {help_text}")
            lines.append(f"# TYPE {name} {kind}")
            for m in self.models.values():
                lines.append(f'{name}{{model_name="{m.name}"}} {value(m)}')
        return "\n".join(lines) + "\n"


LOADGEN = LoadGen()


class Handler(BaseHTTPRequestHandler):
    server_version = "prewarm-loadgen/1"

    def log_message(self, fmt, *args):  # keep the log for errors only
        pass

    def reply(self, code: int, body: str, ctype: str = "application/json") -> None:
        data = body.encode()
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        with LOADGEN.lock:
            if self.path == "/metrics":
                if not LOADGEN.metrics_enabled:
                    return self.reply(503, "metrics disabled by POST /metrics-enabled\n", "text/plain")
                return self.reply(200, LOADGEN.render(), "text/plain; version=0.0.4")
            if self.path == "/state":
                return self.reply(200, json.dumps({
                    "metrics_enabled": LOADGEN.metrics_enabled,
                    "models": [m.state() for m in LOADGEN.models.values()],
                }))
            if self.path == "/healthz":
                return self.reply(200, "{}")
        self.reply(404, json.dumps({"error": f"no such path {self.path}"}))

    def do_POST(self):
        try:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            if not isinstance(body, dict):
                raise ValueError("body must be a JSON object")
            with LOADGEN.lock:
                if self.path == "/scenario":
                    scenario = Scenario(body)
                    m = LOADGEN.model(body.get("model"))
                    m.scenario, m.started = scenario, time.monotonic()
                    return self.reply(200, json.dumps(m.state()))
                if self.path == "/capacity":
                    m = LOADGEN.model(body.get("model"))
                    replicas = int(body.get("replicas", m.replicas))
                    concurrency = int(body.get("concurrency", m.concurrency))
                    service_s = float(body.get("service_s", m.service_s))
                    if replicas < 0 or concurrency < 1 or service_s <= 0:
                        raise ValueError("need replicas >= 0, concurrency >= 1, service_s > 0")
                    m.replicas, m.concurrency, m.service_s = replicas, concurrency, service_s
                    return self.reply(200, json.dumps(m.state()))
                if self.path == "/metrics-enabled":
                    LOADGEN.metrics_enabled = bool(body["enabled"])
                    return self.reply(200, json.dumps({"metrics_enabled": LOADGEN.metrics_enabled}))
                if self.path == "/reset":
                    LOADGEN.models = {DEFAULT_MODEL: Model(DEFAULT_MODEL)}
                    LOADGEN.metrics_enabled = True
                    return self.reply(200, "{}")
            self.reply(404, json.dumps({"error": f"no such path {self.path}"}))
        except (KeyError, ValueError, TypeError, OSError) as e:
            self.reply(400, json.dumps({"error": f"{type(e).__name__}: {e}"}))


def main() -> None:
    host, _, port = os.environ.get("LOADGEN_ADDR", "127.0.0.1:18000").rpartition(":")
    if host not in ("127.0.0.1", "localhost"):
        sys.exit(f"LOADGEN_ADDR must be a loopback address, got {host!r}")
    threading.Thread(target=LOADGEN.run, daemon=True).start()
    ThreadingHTTPServer((host, int(port)), Handler).serve_forever()


if __name__ == "__main__":
    main()
