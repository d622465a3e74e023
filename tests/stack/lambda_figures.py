"""Measures the tick function through the Lambda Runtime API emulator (tests/stack/lambda-figures
runs it; the stack must be up, `cargo lambda watch --only-lambda-apis` on WATCH_PORT):

- cold init: from starting the process to its first GET .../runtime/invocation/next (the runtime
  asking for its first event), seen by a pass-through proxy between the function and the
  emulator;
- peak RSS: VmHWM of /proc/<pid>/status after the last invocation (init and every tick);
- tick CPU: user + system time of all the process's threads (/proc/<pid>/task/*/schedstat,
  nanoseconds) spent between the invocation's request and its response, for the first
  (cold: clients, TLS and connection set-up included) and the following (warm) invocations.

Each run is a new process (a cold start). Prints one line per run and the medians as JSON.
Env: PREWARM_BIN, WATCH_PORT, RUNS, WARM_INVOKES, EVENT, and the function's own settings.
"""

import http.client
import http.server
import json
import os
import statistics
import subprocess
import threading
import time
import urllib.request

WATCH_PORT = int(os.environ.get("WATCH_PORT", "19000"))
PROXY_PORT = WATCH_PORT + 1
RUNS = int(os.environ.get("RUNS", "5"))
WARM_INVOKES = int(os.environ.get("WARM_INVOKES", "3"))
EVENT = open(os.environ.get("EVENT", "events/scheduled.json"), "rb").read()


class FirstNext:
    """The monotonic time of the first `invocation/next` request since `reset`."""

    def __init__(self):
        self.lock = threading.Lock()
        self.at = None
        self.seen = threading.Event()

    def reset(self):
        with self.lock:
            self.at = None
            self.seen.clear()

    def mark(self):
        with self.lock:
            if self.at is None:
                self.at = time.monotonic()
                self.seen.set()


FIRST = FirstNext()


class Proxy(http.server.BaseHTTPRequestHandler):
    """Forwards the runtime's requests to the emulator unchanged (long polls included)."""

    protocol_version = "HTTP/1.1"

    def forward(self):
        if self.path.endswith("/runtime/invocation/next"):
            FIRST.mark()
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        upstream = http.client.HTTPConnection("127.0.0.1", WATCH_PORT, timeout=900)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
        upstream.request(self.command, self.path, body=body, headers=headers)
        resp = upstream.getresponse()
        data = resp.read()
        self.send_response(resp.status)
        for k, v in resp.getheaders():
            if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        upstream.close()

    do_GET = do_POST = forward

    def log_message(self, *args):
        pass


def cpu_ns(pid: int) -> int:
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/schedstat") as f:
                total += int(f.read().split()[0])
        except FileNotFoundError:
            pass
    return total


def status_kb(pid: int, field: str) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


def invoke() -> dict:
    req = urllib.request.Request(
        f"http://127.0.0.1:{WATCH_PORT}/2015-03-31/functions/_/invocations", data=EVENT, method="POST")
    with urllib.request.urlopen(req, timeout=600) as resp:
        return json.loads(resp.read())


def one_run(env: dict) -> dict:
    FIRST.reset()
    t0 = time.monotonic()
    proc = subprocess.Popen([os.environ["PREWARM_BIN"]], env=env, stdout=subprocess.DEVNULL,
                            stderr=open(os.environ.get("FUNCTION_LOG", "/dev/null"), "ab"))
    try:
        if not FIRST.seen.wait(120):
            raise SystemExit(f"the function never asked for an event (exit code {proc.poll()})")
        init_ms = (FIRST.at - t0) * 1000
        ticks = []
        for _ in range(1 + WARM_INVOKES):
            before = cpu_ns(proc.pid)
            start = time.monotonic()
            result = invoke()
            wall_ms = (time.monotonic() - start) * 1000
            cpu_ms = (cpu_ns(proc.pid) - before) / 1e6
            reports = [t for tick in result.get("ticks", []) for t in tick["targets"]]
            errors = [t for t in reports if t.get("error")]
            if not reports or errors:
                raise SystemExit(f"the tick did not decide for every target: {errors or result}")
            ticks.append({"cpu_ms": cpu_ms, "wall_ms": wall_ms, "targets": len(reports)})
        return {"init_ms": init_ms, "peak_rss_mb": status_kb(proc.pid, "VmHWM") / 1024,
                "cold_tick": ticks[0], "warm_ticks": ticks[1:]}
    finally:
        proc.terminate()
        proc.wait(10)


def main():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", PROXY_PORT), Proxy)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    env = dict(os.environ, AWS_LAMBDA_RUNTIME_API=f"127.0.0.1:{PROXY_PORT}/.rt",
               AWS_LAMBDA_FUNCTION_NAME="_", AWS_LAMBDA_FUNCTION_VERSION="1",
               AWS_LAMBDA_FUNCTION_MEMORY_SIZE="256")
    runs = []
    for i in range(RUNS):
        r = one_run(env)
        runs.append(r)
        warm = statistics.median(t["cpu_ms"] for t in r["warm_ticks"]) if r["warm_ticks"] else None
        print(f"run {i + 1}: init {r['init_ms']:.1f} ms, peak RSS {r['peak_rss_mb']:.1f} MB, "
              f"cold tick {r['cold_tick']['cpu_ms']:.1f} ms CPU / {r['cold_tick']['wall_ms']:.0f} ms wall, "
              f"warm tick {warm if warm is None else round(warm, 1)} ms CPU "
              f"({r['cold_tick']['targets']} targets)", flush=True)
    warm = [t for r in runs for t in r["warm_ticks"]]
    print(json.dumps({
        "runs": RUNS,
        "targets": runs[0]["cold_tick"]["targets"],
        "cold_init_ms_median": round(statistics.median(r["init_ms"] for r in runs), 1),
        "cold_init_ms_max": round(max(r["init_ms"] for r in runs), 1),
        "peak_rss_mb_max": round(max(r["peak_rss_mb"] for r in runs), 1),
        "cold_tick_cpu_ms_median": round(statistics.median(r["cold_tick"]["cpu_ms"] for r in runs), 1),
        "cold_tick_wall_ms_median": round(statistics.median(r["cold_tick"]["wall_ms"] for r in runs), 1),
        "warm_tick_cpu_ms_median": round(statistics.median(t["cpu_ms"] for t in warm), 1) if warm else None,
        "warm_tick_wall_ms_median": round(statistics.median(t["wall_ms"] for t in warm), 1) if warm else None,
    }, indent=1))
    server.shutdown()


if __name__ == "__main__":
    main()
