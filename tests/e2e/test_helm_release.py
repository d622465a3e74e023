"""The chart as a user runs it: real `helm install`, the tick's count raised (as the tick would),
`helm upgrade` with a changed value, `helm uninstall`, against the stack's apiserver.

The upgrade must keep the balloon's live replica count (the chart looks the object up) and
uninstall must leave nothing of the release behind. The release has a namespace, a NodePool name
and a release name of its own (so its PriorityClass, <fullname>-balloon, is its own); the NodePool
does not exist, so the balloon pods stay Pending and Karpenter launches nothing for them.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from conftest import REPO

RELEASE = "helmcheck"
NAMESPACE = "prewarm-helm-check"
CHART = REPO / "infra/helm/prewarm"


def target(max_spare: int) -> list[dict]:
    return [{"name": "check", "nodePool": "helm-check-absent", "podNamespace": NAMESPACE,
             "headroom": {"kind": "balloon", "namespace": NAMESPACE, "name": "balloon-check"},
             "maxSpare": max_spare,
             "chart": {"createHeadroom": True, "resources": {"requests": {"cpu": "10m", "memory": "8Mi"}}}}]


@pytest.fixture(scope="module")
def helm(stack_env):
    exe = subprocess.run([str(REPO / "infra/tools.sh"), "helm"], capture_output=True, text=True,
                         check=True).stdout.strip()
    env = dict(os.environ, KUBECONFIG=stack_env["KUBECONFIG"])

    def run(*args: str) -> str:
        proc = subprocess.run([exe, *args], capture_output=True, text=True, env=env, timeout=300)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return proc.stdout

    yield run
    subprocess.run([exe, "uninstall", RELEASE, "-n", NAMESPACE, "--no-hooks", "--ignore-not-found"],
                   capture_output=True, env=env)


def test_install_upgrade_keeps_the_live_count_and_uninstall_leaves_nothing(k8s, helm):
    helm("install", RELEASE, str(CHART), "-n", NAMESPACE, "--create-namespace", "--wait=false",
         "--set-json", "targets=" + json.dumps(target(4)))
    balloon = k8s.get("deployment", "balloon-check", NAMESPACE)
    assert balloon["spec"]["replicas"] == 0
    assert k8s.get("priorityclass", f"{RELEASE}-prewarm-balloon") is not None
    # What the tick does: size the balloon (here as the admin; the RBAC checks are elsewhere).
    k8s.run("scale", "deployment/balloon-check", "-n", NAMESPACE, "--replicas=2")

    helm("upgrade", RELEASE, str(CHART), "-n", NAMESPACE, "--set-json", "targets=" + json.dumps(target(5)))
    assert k8s.get("deployment", "balloon-check", NAMESPACE)["spec"]["replicas"] == 2, "upgrade reset the warm count"
    cm = k8s.get("configmap", "prewarm-targets", NAMESPACE)
    assert json.loads(cm["data"]["targets.json"])[0]["maxSpare"] == 5, "the changed value was applied"

    helm("uninstall", RELEASE, "-n", NAMESPACE)
    selector = f"app.kubernetes.io/instance={RELEASE}"
    for kind in ("deployment", "configmap", "role", "rolebinding"):
        assert not k8s.get(kind, namespace=NAMESPACE, selector=selector), kind
    for kind in ("clusterrole", "clusterrolebinding", "priorityclass"):
        assert not k8s.get(kind, selector=selector), kind
    assert k8s.get("priorityclass", f"{RELEASE}-prewarm-balloon") is None
    assert k8s.get("deployment", "balloon-check", NAMESPACE) is None
