"""`prewarm restore` on the real apiserver: a NodePool whose consolidation prewarm froze and a
balloon prewarm sized and annotated are put back as the user had them (budgets, size 0, the
user's own annotations kept, prewarm's removed); an HPA whose minReplicas prewarm raised gets the
user's minReplicas back exactly, and a user's edit made while it was raised is kept. Expected
objects are written by hand. The raised HPA carries exactly what the tick writes when it raises
(minReplicas and the three prewarm.io/ floor annotations; tests/kube_actuators_stack.rs checks the tick's
writer produces them).

Shares the stack's NodePool `gpu` with other tests: the fixture puts it back as it was.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from conftest import sized_balloon_manifest

REPO = Path(__file__).resolve().parents[2]
NAMESPACE = "prewarm"
BALLOON = "restore-balloon"
SAVED = "prewarm.io/saved-budgets"
USER_BUDGETS = [{"nodes": "20%"}]
FREEZE = {"nodes": "0", "reasons": ["Underutilized", "Empty"]}


@pytest.fixture
def frozen_pool(k8s):
    before = k8s.get("nodepool", "gpu")
    assert before, "the stack's NodePool gpu is missing"
    k8s.patch("nodepool", "gpu", {
        "metadata": {"annotations": {SAVED: json.dumps(USER_BUDGETS), "prewarm.io/last-tick": "2026-11-30T12:00:00.000Z"}},
        "spec": {"disruption": {"budgets": USER_BUDGETS + [FREEZE]}},
    })
    yield
    spec = before["spec"]
    ann = before["metadata"].get("annotations", {})
    k8s.patch("nodepool", "gpu", {
        "metadata": {"annotations": {SAVED: ann.get(SAVED), "prewarm.io/last-tick": ann.get("prewarm.io/last-tick")}},
        "spec": {"disruption": {"consolidateAfter": spec["disruption"]["consolidateAfter"],
                                "budgets": spec["disruption"].get("budgets")}},
    })


@pytest.fixture
def sized_balloon(k8s):
    k8s.apply(sized_balloon_manifest(BALLOON, {"karpenter.sh/nodepool": "no-such-pool"}))
    return BALLOON


@pytest.fixture(scope="module")
def prewarm_bin() -> str:
    """The prewarm binary, built once for the module."""
    target_dir = os.environ.get("CARGO_TARGET_DIR", str(Path.home() / ".cache/prewarm/target"))
    build = subprocess.run(["cargo", "build", "--bin", "prewarm"], cwd=REPO, capture_output=True, text=True,
                           env=dict(os.environ, CARGO_TARGET_DIR=target_dir))
    assert build.returncode == 0, build.stderr[-3000:]
    return f"{target_dir}/debug/prewarm"


HPA = "restore-hpa"
USER_MIN, RAISED_MIN, LEASE = ("prewarm.io/user-min-replicas", "prewarm.io/raised-min-replicas",
                               "prewarm.io/floor-lease-until")


@pytest.fixture
def raised_hpa(k8s):
    """An HPA prewarm raised from the user's minReplicas 2 to 6 (maxReplicas 9), lease running."""
    k8s.apply({
        "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": HPA, "namespace": NAMESPACE, "annotations": {
            "team": "ml", USER_MIN: "2", RAISED_MIN: "6", LEASE: "2099-01-01T00:00:00.000Z"}},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "nothing"},
            "minReplicas": 6, "maxReplicas": 9,
            "metrics": [{"type": "Pods", "pods": {"metric": {"name": "vllm:num_requests_running"},
                                                 "target": {"type": "AverageValue", "averageValue": "4"}}}],
        },
    })
    return HPA


def restore(stack_env, prewarm_bin: str, *args: str, hpa: str | None = None) -> subprocess.CompletedProcess:
    target = {"name": "restore", "nodePool": "gpu", "maxSpare": 4,
              "headroom": {"kind": "balloon", "namespace": NAMESPACE, "name": BALLOON}}
    if hpa:
        target["hpa"] = {"namespace": NAMESPACE, "name": hpa, "raiseMinReplicas": True}
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREWARM_", "METRIC_"))}
    env.update(KUBECONFIG=stack_env["KUBECONFIG"], PREWARM_TARGETS=json.dumps([target]))
    return subprocess.run([prewarm_bin, "restore", *args], env=env, capture_output=True, text=True, timeout=120)


def test_restore_puts_back_budgets_size_and_annotations(k8s, stack_env, prewarm_bin, frozen_pool, sized_balloon):
    dry = restore(stack_env, prewarm_bin, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert k8s.get("deployment", BALLOON, NAMESPACE)["spec"]["replicas"] == 2, "--dry-run wrote"

    done = restore(stack_env, prewarm_bin)
    assert done.returncode == 0, done.stderr
    assert "restored" in done.stdout, done.stdout

    pool = k8s.get("nodepool", "gpu")
    assert pool["spec"]["disruption"]["budgets"] == USER_BUDGETS
    assert not any(k.startswith("prewarm.io/") for k in pool["metadata"].get("annotations", {}))
    dep = k8s.get("deployment", BALLOON, NAMESPACE)
    assert dep["spec"]["replicas"] == 0
    assert {k: v for k, v in dep["metadata"]["annotations"].items() if not k.startswith("deployment.kubernetes.io/")} == {"team": "ml"}

    again = restore(stack_env, prewarm_bin)
    assert again.returncode == 0 and "unchanged" in again.stdout and "\trestored\t" not in again.stdout, again.stdout


def test_restore_fails_loudly_on_a_missing_object(k8s, stack_env, prewarm_bin):
    out = restore(stack_env, prewarm_bin)  # no restore-balloon in this test
    assert out.returncode != 0
    assert "restore-balloon" in out.stderr and "not found" in out.stderr.lower(), out.stderr


def floor_annotations(hpa: dict) -> dict:
    return {k: v for k, v in hpa["metadata"].get("annotations", {}).items() if k.startswith("prewarm.io/")}


def test_restore_gives_the_users_min_replicas_back_exactly(k8s, stack_env, prewarm_bin, sized_balloon, raised_hpa):
    dry = restore(stack_env, prewarm_bin, "--dry-run", hpa=HPA)
    assert dry.returncode == 0, dry.stderr
    assert f"hpa {NAMESPACE}/{HPA}\trestored\tthe floor back to the user's 2" in dry.stdout, dry.stdout
    assert k8s.get("hpa", HPA, NAMESPACE)["spec"]["minReplicas"] == 6, "--dry-run wrote"

    done = restore(stack_env, prewarm_bin, hpa=HPA)
    assert done.returncode == 0, done.stderr
    hpa = k8s.get("hpa", HPA, NAMESPACE)
    assert hpa["spec"]["minReplicas"] == 2
    assert hpa["spec"]["maxReplicas"] == 9
    assert floor_annotations(hpa) == {}
    assert hpa["metadata"]["annotations"]["team"] == "ml"

    again = restore(stack_env, prewarm_bin, hpa=HPA)
    assert again.returncode == 0, again.stderr
    assert f"hpa {NAMESPACE}/{HPA}\tunchanged" in again.stdout, again.stdout
    assert k8s.get("hpa", HPA, NAMESPACE)["spec"]["minReplicas"] == 2


def test_restore_keeps_a_users_edit_made_while_raised(k8s, stack_env, prewarm_bin, sized_balloon, raised_hpa):
    # prewarm wrote 6; the user sets 4 by hand while the raise lasts.
    k8s.patch("hpa", HPA, {"spec": {"minReplicas": 4}}, namespace=NAMESPACE)
    done = restore(stack_env, prewarm_bin, hpa=HPA)
    assert done.returncode == 0, done.stderr
    assert f"hpa {NAMESPACE}/{HPA}\tkept\t" in done.stdout, done.stdout
    hpa = k8s.get("hpa", HPA, NAMESPACE)
    assert hpa["spec"]["minReplicas"] == 4
    assert floor_annotations(hpa) == {}
