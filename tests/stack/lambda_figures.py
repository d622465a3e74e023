"""Measures the tick function through the Lambda Runtime API emulator (tests/stack/lambda-figures
runs it; the stack must be up, `cargo lambda watch --only-lambda-apis` on WATCH_PORT):

- cold init: from starting the process to its first connection to the emulator (the runtime's
  first GET .../runtime/invocation/next: it connects only to ask for an event), seen by polling
  the process's sockets (/proc/<pid>/fd, /proc/<pid>/net/tcp) every millisecond;
- peak RSS: VmHWM of /proc/<pid>/status after the last invocation (init and every tick);
- tick CPU: user + system time of all the process's threads (/proc/<pid>/task/*/schedstat,
  nanoseconds) spent between the invocation's request and its response, for the first
  (cold: clients, TLS and connection set-up included) and the following (warm) invocations.

Each run is a new process (a cold start). Prints one line per run and the medians as JSON.
Env: PREWARM_BIN, WATCH_PORT, RUNS, WARM_INVOKES, EVENT, and the function's own settings.
"""

import json
import os
import statistics
import subprocess
import time
import urllib.request

WATCH_PORT = int(os.environ.get("WATCH_PORT", "19000"))
RUNS = int(os.environ.get("RUNS", "5"))
WARM_INVOKES = int(os.environ.get("WARM_INVOKES", "3"))
EVENT_FILE = json.load(open(os.environ.get("EVENT", "events/scheduled.json")))


def event_now() -> bytes:
    """The event stamped with the current time, as EventBridge sends it: the tick skips a
    scheduled event that arrives more than a minute after its time."""
    if EVENT_FILE.get("detail-type") != "Scheduled Event":
        return json.dumps(EVENT_FILE).encode()
    return json.dumps({**EVENT_FILE, "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}).encode()


def connected_to_runtime_api(pid: int) -> bool:
    """Whether the process holds a TCP connection to the emulator's port (its first
    `invocation/next` long poll: the runtime's client connects only to ask for an event)."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    if not inodes:
        return False
    with open(f"/proc/{pid}/net/tcp") as f:
        for line in f.readlines()[1:]:
            fields = line.split()
            remote_port = int(fields[2].split(":")[1], 16)
            if remote_port == WATCH_PORT and fields[3] == "01" and fields[9] in inodes:
                return True
    return False


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
        f"http://127.0.0.1:{WATCH_PORT}/2015-03-31/functions/_/invocations", data=event_now(), method="POST")
    with urllib.request.urlopen(req, timeout=120) as resp:
        return json.loads(resp.read())


def one_run(env: dict) -> dict:
    t0 = time.monotonic()
    proc = subprocess.Popen([os.environ["PREWARM_BIN"]], env=env, stdout=subprocess.DEVNULL,
                            stderr=open(os.environ.get("FUNCTION_LOG", "/dev/null"), "ab"))
    try:
        while True:
            try:
                if connected_to_runtime_api(proc.pid):
                    ready = time.monotonic()
                    break
            except FileNotFoundError:
                pass
            if proc.poll() is not None or time.monotonic() > t0 + 120:
                raise SystemExit(f"the function never asked for an event (exit code {proc.poll()})")
            time.sleep(0.001)
        init_ms = (ready - t0) * 1000
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
    env = dict(os.environ, AWS_LAMBDA_RUNTIME_API=f"http://127.0.0.1:{WATCH_PORT}/.rt",
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


if __name__ == "__main__":
    main()
