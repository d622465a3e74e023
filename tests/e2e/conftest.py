"""Fixtures of the end-to-end suite: the local stack of tests/stack (must be up; see its README).

Everything talks to the real servers of the stack on 127.0.0.1:
- `stack_env`   the variables of tests/stack/.run/env (also copied into os.environ)
- `k8s`         kubectl as the admin (JSON in, JSON out) + waiting helpers; `lambda_k8s` as the
                prewarm-lambda user (only the RBAC of infra/k8s/rbac.yaml)
- `aws`         boto3 clients: sqs/events/eks/sts on moto, cloudwatch on LocalStack
- `loadgen`     the vLLM-style load generator's control API (reset after each test)
- `prometheus`  instant queries against the stack's Prometheus
- `lambda_watch` start `cargo lambda watch` for the repository with given env; `invoke` helper
- `poll_sqs`    one poll of the SQS -> Lambda bridge (tests/stack/sqs_poller.py)
- `wait_until`  poll a condition with a generous cap; the cap only bounds a hung test, it is not
                an assertion about speed
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any, Callable

import boto3
import pytest

REPO = Path(__file__).resolve().parents[2]
STACK = REPO / "tests" / "stack"
RUN = STACK / ".run"
sys.path.insert(0, str(STACK))

import sqs_poller  # noqa: E402  (tests/stack, put on sys.path just above)


def read_env_file(path: Path) -> dict[str, str]:
    """Parses the `export NAME=value` lines `up` writes (values are not quoted; PATH expands)."""
    env: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line.startswith("export "):
            continue
        name, _, value = line[len("export "):].partition("=")
        value = value.replace("$PATH", os.environ.get("PATH", ""))
        env[name] = value
    return env


@pytest.fixture(scope="session")
def stack_env() -> dict[str, str]:
    env_file = RUN / "env"
    if not env_file.exists():
        pytest.fail(f"{env_file} is missing: bring the stack up first (tests/stack/up or make e2e)")
    env = read_env_file(env_file)
    os.environ.update(env)
    return env


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Keeps each phase's report on the test item (`item.rep_call`)."""
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)
    # A fixture that knows how to explain a failure (a `failure_report()` method, e.g. the drain
    # tests' diagnostics) adds its text to the failed test's report.
    if report.failed and report.when in ("call", "setup"):
        for value in getattr(item, "funcargs", {}).values():
            explain = getattr(value, "failure_report", None)
            if callable(explain):
                try:
                    report.sections.append((f"{type(value).__name__} diagnostics", explain()))
                except Exception as e:  # noqa: BLE001 - diagnostics must never hide the failure
                    report.sections.append(("diagnostics failed", repr(e)))


def sized_balloon_manifest(name: str, node_selector: dict[str, str]) -> dict:
    """A balloon Deployment as a tick leaves it: sized to 2, with the user's own annotation and
    prewarm's bookkeeping annotations, its pods pinned where nothing can run them. The restore
    scenarios (custom resource Delete, `prewarm restore`) check that it goes back to 0 with only
    the user's annotation left."""
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": "prewarm", "annotations": {
            "team": "ml",
            "prewarm.io/last-tick": "2026-11-30T12:00:00.000Z",
            "prewarm.io/cooldown-until": "2026-11-30T12:01:00.000Z",
        }},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": {
                "priorityClassName": "prewarm-balloon", "terminationGracePeriodSeconds": 0,
                "nodeSelector": node_selector,
                "containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10"}]}},
        },
    }


def wait_until(condition: Callable[[], Any], timeout: float = 120, interval: float = 0.5,
               what: str = "condition") -> Any:
    """Returns the first truthy value of condition(); fails the test after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while True:
        try:
            value = condition()
            if value:
                return value
        except Exception as e:  # noqa: BLE001 - kept to report why the wait failed
            last_error = e
        if time.monotonic() >= deadline:
            detail = f" (last error: {last_error})" if last_error else ""
            pytest.fail(f"gave up waiting for {what} after {timeout:.0f}s{detail}")
        time.sleep(interval)


@pytest.fixture(name="wait_until", scope="session")
def wait_until_fixture():
    return wait_until


class Kube:
    """kubectl with one kubeconfig. JSON in and out; failures raise with kubectl's message."""

    def __init__(self, kubectl: str, kubeconfig: str):
        self.kubectl_bin = kubectl
        self.kubeconfig = kubeconfig
        self._cleanup: list[tuple[str, str, str | None]] = []

    def run(self, *args: str, input: str | None = None, check: bool = True,
            timeout: float = 120) -> subprocess.CompletedProcess:
        cmd = [self.kubectl_bin, "--kubeconfig", self.kubeconfig, *args]
        proc = subprocess.run(cmd, input=input, capture_output=True, text=True, timeout=timeout)
        if check and proc.returncode != 0:
            raise KubectlError(cmd, proc)
        return proc

    def json(self, *args: str) -> Any:
        return json.loads(self.run(*args, "-o", "json").stdout)

    def get(self, kind: str, name: str | None = None, namespace: str | None = None,
            selector: str | None = None) -> Any:
        """One object (dict), or the list's items when name is None. None when not found."""
        args = ["get", kind]
        if name:
            args.append(name)
        if namespace:
            args += ["-n", namespace]
        if selector:
            args += ["-l", selector]
        proc = self.run(*args, "-o", "json", check=False)
        if proc.returncode != 0:
            if "NotFound" in proc.stderr or "not found" in proc.stderr:
                return None
            raise KubectlError([self.kubectl_bin, *args], proc)
        data = json.loads(proc.stdout)
        return data if name else data.get("items", [])

    def apply(self, obj: dict | list | str, *, server_side: bool = True, cleanup: bool = True,
              dry_run: str | None = None, field_manager: str = "prewarm-e2e") -> str:
        """Applies a manifest (dict, list of dicts or YAML/JSON text); returns kubectl's output.

        With cleanup=True the objects are deleted when the test ends.
        """
        docs = obj if isinstance(obj, list) else [obj]
        text = "\n---\n".join(d if isinstance(d, str) else json.dumps(d) for d in docs)
        args = ["apply", "-f", "-", f"--field-manager={field_manager}"]
        if server_side:
            args += ["--server-side", "--force-conflicts"]
        if dry_run:
            args.append(f"--dry-run={dry_run}")
        out = self.run(*args, input=text).stdout
        if cleanup and not dry_run:
            for d in docs:
                if isinstance(d, dict):
                    md = d.get("metadata", {})
                    self._cleanup.append((d["kind"], md["name"], md.get("namespace")))
        return out

    def patch(self, kind: str, name: str, patch: dict | list, *, namespace: str | None = None,
              type: str = "merge", subresource: str | None = None) -> dict:
        args = ["patch", kind, name, f"--type={type}", "-p", json.dumps(patch), "-o", "json"]
        if namespace:
            args += ["-n", namespace]
        if subresource:
            args.append(f"--subresource={subresource}")
        return json.loads(self.run(*args).stdout)

    def delete(self, kind: str, name: str, namespace: str | None = None, wait: bool = False) -> None:
        args = ["delete", kind, name, "--ignore-not-found", f"--wait={'true' if wait else 'false'}"]
        if namespace:
            args += ["-n", namespace]
        self.run(*args)

    def can_i(self, verb: str, resource: str, namespace: str | None = None) -> bool:
        args = ["auth", "can-i", verb, resource]
        if namespace:
            args += ["-n", namespace]
        return self.run(*args, check=False).stdout.strip() == "yes"

    def cleanup(self) -> None:
        for kind, name, ns in reversed(self._cleanup):
            self.delete(kind, name, ns)
        self._cleanup.clear()

    # Conveniences for the usual waits.
    def node_ready(self, node: dict) -> bool:
        return any(c["type"] == "Ready" and c["status"] == "True"
                   for c in node.get("status", {}).get("conditions", []))

    def pod_phase(self, name: str, namespace: str) -> str | None:
        pod = self.get("pod", name, namespace)
        return pod and pod.get("status", {}).get("phase")


class KubectlError(RuntimeError):
    def __init__(self, cmd: list[str], proc: subprocess.CompletedProcess):
        self.stderr = proc.stderr
        self.returncode = proc.returncode
        super().__init__(f"{shlex.join(cmd)} failed ({proc.returncode}): {proc.stderr.strip()}")


@pytest.fixture
def k8s(stack_env):
    kube = Kube(os.path.join(stack_env["STACK_BIN"], "kubectl"), stack_env["KUBECONFIG"])
    yield kube
    kube.cleanup()


@pytest.fixture
def lambda_k8s(stack_env):
    """kubectl as the prewarm-lambda user: proves what the Lambda's RBAC allows."""
    kube = Kube(os.path.join(stack_env["STACK_BIN"], "kubectl"), stack_env["PREWARM_LAMBDA_KUBECONFIG"])
    yield kube
    kube.cleanup()


class Aws:
    def __init__(self, env: dict[str, str]):
        common = dict(region_name=env["AWS_REGION"], aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
                      aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"])
        self.sqs = boto3.client("sqs", endpoint_url=env["MOTO_URL"], **common)
        self.events = boto3.client("events", endpoint_url=env["MOTO_URL"], **common)
        self.eks = boto3.client("eks", endpoint_url=env["MOTO_URL"], **common)
        self.sts = boto3.client("sts", endpoint_url=env["MOTO_URL"], **common)
        self.cloudwatch = boto3.client("cloudwatch", endpoint_url=env["LOCALSTACK_URL"], **common)
        self.queue_url = env["INTERRUPTION_QUEUE_URL"]
        self.dlq_url = env["INTERRUPTION_DLQ_URL"]

    def purge_queues(self) -> None:
        """Empties the interruption queue and DLQ. SQS (and moto) allow one PurgeQueue a minute;
        within that minute the visible messages are received and deleted instead."""
        for url in (self.queue_url, self.dlq_url):
            try:
                self.sqs.purge_queue(QueueUrl=url)
            except self.sqs.exceptions.PurgeQueueInProgress:
                while True:
                    got = self.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10,
                                                   WaitTimeSeconds=0).get("Messages", [])
                    if not got:
                        break
                    for m in got:
                        self.sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])

    def new_queue_pair(self, name: str, visibility_timeout: int = 10,
                       max_receive_count: int = 3) -> tuple[str, str]:
        """A private queue + DLQ (same redrive as the stack's) for a test that must not share
        the interruption queue; returns (queue_url, dlq_url)."""
        dlq_url = self.sqs.create_queue(QueueName=f"{name}-dlq")["QueueUrl"]
        dlq_arn = self.sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])[
            "Attributes"]["QueueArn"]
        queue_url = self.sqs.create_queue(QueueName=name, Attributes={
            "VisibilityTimeout": str(visibility_timeout),
            "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn,
                                         "maxReceiveCount": str(max_receive_count)}),
        })["QueueUrl"]
        return queue_url, dlq_url

    def queue_counts(self, url: str | None = None) -> dict[str, int]:
        attrs = self.sqs.get_queue_attributes(
            QueueUrl=url or self.queue_url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        return {"visible": int(attrs["ApproximateNumberOfMessages"]),
                "in_flight": int(attrs["ApproximateNumberOfMessagesNotVisible"])}


@pytest.fixture
def aws(stack_env):
    """boto3 clients; the interruption queue and its DLQ are emptied before the test."""
    clients = Aws(stack_env)
    clients.purge_queues()
    return clients


def _http(method: str, url: str, body: Any = None, timeout: float = 10) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        raw = resp.read()
    return json.loads(raw) if raw else None


class LoadGen:
    def __init__(self, url: str):
        self.url = url

    def scenario(self, name: str, model: str | None = None, **params: Any) -> dict:
        body = {"name": name, **params}
        if model:
            body["model"] = model
        return _http("POST", f"{self.url}/scenario", body)

    def capacity(self, model: str | None = None, **params: Any) -> dict:
        body = dict(params)
        if model:
            body["model"] = model
        return _http("POST", f"{self.url}/capacity", body)

    def metrics_enabled(self, enabled: bool) -> dict:
        return _http("POST", f"{self.url}/metrics-enabled", {"enabled": enabled})

    def reset(self) -> None:
        _http("POST", f"{self.url}/reset", {})

    def state(self) -> dict:
        return _http("GET", f"{self.url}/state")


@pytest.fixture
def loadgen(stack_env):
    gen = LoadGen(stack_env["LOADGEN_URL"])
    gen.reset()
    yield gen
    gen.reset()


class Prometheus:
    def __init__(self, url: str):
        self.url = url

    def query(self, promql: str) -> list[dict]:
        """Instant query; returns the result vector ([] when no series)."""
        q = urllib.parse.urlencode({"query": promql})
        data = _http("GET", f"{self.url}/api/v1/query?{q}")
        if data.get("status") != "success":
            raise RuntimeError(f"prometheus query {promql!r} failed: {data}")
        return data["data"]["result"]

    def value(self, promql: str) -> float | None:
        result = self.query(promql)
        return float(result[0]["value"][1]) if result else None


@pytest.fixture
def prometheus(stack_env):
    return Prometheus(stack_env["PROMETHEUS_URL"])


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


class LambdaWatch:
    """`cargo lambda watch` for the repository, serving the Runtime API emulator (port 19000).

    The function name is the binary name (`prewarm`). The first invocation waits for the build.
    """

    # The conventions' port; E2E_LAMBDA_PORT moves it so that suites run by several people on one
    # shared stack do not collide (`make e2e` runs them one after another on 19000).
    PORT = int(os.environ.get("E2E_LAMBDA_PORT", "19000"))

    def __init__(self, stack_env: dict[str, str], env: dict[str, str]):
        self.stack_env = stack_env
        self.extra_env = env
        self.proc: subprocess.Popen | None = None
        suffix = "" if self.PORT == 19000 else f"-{self.PORT}"
        # tests/stack/down ends whatever a .run/*.pid names, so a crashed test leaves nothing.
        self.log_path = RUN / f"lambda-watch{suffix}.log"
        self.pid_path = RUN / f"lambda-watch{suffix}.pid"

    def start(self) -> "LambdaWatch":
        if _port_open(self.PORT):
            raise RuntimeError(f"port {self.PORT} is in use: is another `cargo lambda watch` running?")
        env = dict(os.environ)
        env.update(self.stack_env)
        env.setdefault("CARGO_TARGET_DIR", str(Path.home() / ".cache/prewarm/target"))
        env.update(self.extra_env)
        # Build first, outside the emulator: the first invocation then does not wait for a
        # compile (and a compile error shows here, with cargo's message).
        build = subprocess.run(["cargo", "build", "--bin", "prewarm"], cwd=REPO, env=env,
                               capture_output=True, text=True)
        if build.returncode != 0:
            raise RuntimeError(f"cargo build --bin prewarm failed:\n{build.stderr[-4000:]}")
        cargo_lambda = os.path.join(self.stack_env["CARGO_LAMBDA_BIN"], "cargo-lambda")
        # --ignore-changes: a file edited during a run must not restart the function mid-test.
        cmd = [cargo_lambda, "lambda", "watch", "--ignore-changes",
               "-A", "127.0.0.1", "-P", str(self.PORT)]
        log = open(self.log_path, "ab")
        # Own process group: `stop` (and tests/stack/down via the PID file) ends cargo and the
        # function processes it spawned together.
        self.proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        self.pid_path.write_text(str(self.proc.pid))
        wait_until(lambda: self.proc.poll() is not None or _port_open(self.PORT), timeout=300,
                   what=f"cargo lambda watch to listen on 127.0.0.1:{self.PORT}")
        if self.proc.poll() is not None:
            raise RuntimeError(f"cargo lambda watch exited ({self.proc.returncode}); "
                               f"see {self.log_path}:\n{self.log_tail()}")
        return self

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def invoke(self, payload: Any, function: str = "prewarm", timeout: float = 900) -> Any:
        """Invokes the function; returns its decoded JSON response.

        Raises RuntimeError (with the emulator's log tail) when the function reports an error or
        its process exits. The emulator itself would keep an invocation waiting for a function
        that died at start-up (e.g. a bad setting), so the log is watched for that meanwhile.
        """
        offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        outcome: dict[str, Any] = {}

        def call() -> None:
            try:
                outcome["value"] = sqs_poller.invoke(function, payload, f"http://127.0.0.1:{self.PORT}",
                                                     timeout)
            except Exception as e:  # noqa: BLE001 - handed to the waiting thread
                outcome["error"] = e

        worker = threading.Thread(target=call, daemon=True)
        worker.start()
        deadline = time.monotonic() + timeout
        while worker.is_alive():
            worker.join(0.5)
            if not worker.is_alive():
                break
            with open(self.log_path, "rb") as f:
                f.seek(offset)
                new = f.read().decode(errors="replace")
            if "command exited code=" in new and "ERROR" in new:
                raise RuntimeError(f"the {function} process exited during the invocation:\n{new[-4000:]}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"invocation of {function} timed out after {timeout:.0f}s:\n"
                                   f"{self.log_tail()}")
        if "error" in outcome:
            raise RuntimeError(f"{outcome['error']}\n--- cargo lambda watch log ---\n{self.log_tail()}")
        return outcome["value"]

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=15)
            except ProcessLookupError:
                pass
        self.pid_path.unlink(missing_ok=True)


@pytest.fixture
def lambda_watch(stack_env):
    """Factory: lambda_watch({"PREWARM_HANDLER": "tick", ...}) -> started LambdaWatch.

    The function gets the stack env plus the given variables; KUBECONFIG defaults to the
    prewarm-lambda user (the RBAC of infra/k8s) rather than the admin.
    """
    started: list[LambdaWatch] = []

    def start(env: dict[str, str] | None = None) -> LambdaWatch:
        merged = {"KUBECONFIG": stack_env["PREWARM_LAMBDA_KUBECONFIG"]}
        merged.update(env or {})
        watch = LambdaWatch(stack_env, merged).start()
        started.append(watch)
        return watch

    yield start
    for w in started:
        w.stop()


@pytest.fixture
def invoke():
    """invoke(function, payload) against the running `cargo lambda watch`."""
    def call(function: str, payload: Any, timeout: float = 900) -> Any:
        return sqs_poller.invoke(function, payload, f"http://127.0.0.1:{LambdaWatch.PORT}", timeout)
    return call


@pytest.fixture
def poll_sqs(stack_env, aws):
    """poll_sqs(function="prewarm") -> sqs_poller.PollResult: one SQS -> Lambda delivery round."""
    def poll(function: str = "prewarm", wait_seconds: int = 1,
             queue_url: str | None = None) -> sqs_poller.PollResult:
        return sqs_poller.poll_once(function, queue_url=queue_url or aws.queue_url,
                                    queue_arn=None if queue_url else stack_env.get("INTERRUPTION_QUEUE_ARN"),
                                    wait_seconds=wait_seconds,
                                    base_url=f"http://127.0.0.1:{LambdaWatch.PORT}", sqs=aws.sqs)
    return poll


@pytest.fixture
def reset_cluster(k8s, wait_until):
    """Opt-in: a cluster as `up` left it, before and after the test. Deletes workloads in the
    `inference` and `prewarm` namespaces (Deployments, pods, PDBs, CapacityBuffers), every
    NodeClaim (Karpenter then removes its kwok node), and re-applies the stack's fixtures, which
    restores NodePool `gpu` fields such as budgets and limits. Not for a stack shared with
    someone else's run: it deletes their objects too."""
    fixtures = STACK / "manifests" / "fixtures.yaml"

    def reset() -> None:
        for ns in ("inference", "prewarm"):
            k8s.run("delete", "deployments,replicasets,pods,poddisruptionbudgets", "--all", "-n", ns,
                    "--wait=false", "--grace-period=0", "--force", check=False)
            k8s.run("delete", "capacitybuffers.autoscaling.x-k8s.io", "--all", "-n", ns, "--wait=false",
                    check=False)
        k8s.run("delete", "nodeclaims.karpenter.sh", "--all", "--wait=false")
        k8s.run("apply", "--server-side", "--force-conflicts", "--field-manager=prewarm-stack",
                "-f", str(fixtures))
        pool = k8s.get("nodepool", "gpu") or {}
        stale = [k for k in pool.get("metadata", {}).get("annotations", {}) if k.startswith("prewarm.io/")]
        if stale:
            k8s.run("annotate", "nodepool", "gpu", *[f"{k}-" for k in stale])
        wait_until(lambda: not k8s.get("nodeclaims.karpenter.sh")
                   and not k8s.get("nodes", selector="karpenter.sh/nodepool"),
                   timeout=180, what="NodeClaims and Karpenter's nodes to be gone")

    reset()
    yield reset
    reset()
