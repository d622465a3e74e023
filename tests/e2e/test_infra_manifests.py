"""Every manifest in infra/k8s and everything the Helm chart renders is accepted by the real test
cluster's apiserver (server-side dry-run, so the real Karpenter CRD schemas and CEL rules apply),
and the chart's RBAC (infra/k8s/rbac.yaml) gives each function's own user (prewarm-tick,
prewarm-interruption) exactly its rows of permissions.yaml and none of the other's.

Uses the fixtures of tests/e2e/conftest.py (the local stack must be up: tests/stack/up).
"""

from __future__ import annotations

import copy
import os
import subprocess
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
K8S = REPO / "infra" / "k8s"
SUFFIX = "-dryrun-check"

MANIFESTS = sorted(p.name for p in K8S.glob("*.yaml"))

if not (Path(__file__).parent / "conftest.py").exists():
    pytest.skip("tests/e2e/conftest.py (the stack's fixtures) is not in this checkout", allow_module_level=True)

from conftest import Kube  # noqa: E402  (the stack's kubectl wrapper)


def docs(name: str) -> list[dict]:
    return [d for d in yaml.safe_load_all((K8S / name).read_text()) if d]


def kind_ref(obj: dict) -> str:
    """kubectl's fully qualified resource for `get` (kind.group), e.g. nodepool.karpenter.sh."""
    group = obj["apiVersion"].rpartition("/")[0]
    return f"{obj['kind'].lower()}.{group}" if group else obj["kind"].lower()


def dry_run_apply(k8s, obj: dict) -> str:
    """Server-side dry-run as a create: an object of that name that already exists in the test
    cluster (the stack's own NodePool gpu, namespaces, PriorityClass) is checked under another
    name, so the check is the same validation a fresh cluster would do and never collides with
    immutable fields of the stack's objects."""
    obj = copy.deepcopy(obj)
    md = obj["metadata"]
    if k8s.get(kind_ref(obj), md["name"], md.get("namespace")) is not None:
        md["name"] = md["name"][: 63 - len(SUFFIX)] + SUFFIX
    return k8s.apply(obj, dry_run="server", cleanup=False)


def test_every_manifest_file_is_checked():
    assert {"rbac.yaml", "nodepool-gpu.yaml", "ec2nodeclass-gpu.yaml", "balloon.yaml", "capacitybuffer.yaml",
            "pdb-inference.yaml", "prepull-daemonset.yaml", "namespace.yaml"} <= set(MANIFESTS)


@pytest.mark.parametrize("name", MANIFESTS)
def test_manifest_is_accepted_by_the_apiserver(k8s, name):
    objs = docs(name)
    assert objs, f"{name} holds no objects"
    for obj in objs:
        out = dry_run_apply(k8s, obj)
        assert "(server dry run)" in out, out


@pytest.mark.parametrize("breakage", [
    # The retired v1beta1 policy name: the CRD enum refuses it.
    ("nodepool-gpu.yaml", lambda o: o["spec"]["disruption"].update(consolidationPolicy="WhenUnderutilized")),
    # Karpenter 1.x requires consolidateAfter.
    ("nodepool-gpu.yaml", lambda o: o["spec"]["disruption"].pop("consolidateAfter")),
    # CEL: an alias must be family@version.
    ("ec2nodeclass-gpu.yaml", lambda o: o["spec"]["amiSelectorTerms"][0].update(alias="al2023")),
    # CEL: podTemplateRef needs replicas or limits.
    ("capacitybuffer.yaml", lambda o: (o["spec"].pop("replicas", None), o["spec"].pop("limits", None))),
], ids=["v1beta1-policy", "no-consolidateAfter", "unpinned-alias", "buffer-without-size"])
def test_the_apiserver_check_can_fail(k8s, breakage):
    """Proof that the dry-run above validates against the real CRDs (and is not vacuous)."""
    name, mutate = breakage
    kinds = {"nodepool-gpu.yaml": "NodePool", "ec2nodeclass-gpu.yaml": "EC2NodeClass",
             "capacitybuffer.yaml": "CapacityBuffer"}
    obj = copy.deepcopy(next(o for o in docs(name) if o["kind"] == kinds[name]))
    mutate(obj)
    # conftest's KubectlError is a RuntimeError carrying kubectl's stderr.
    with pytest.raises(RuntimeError) as err:
        dry_run_apply(k8s, obj)
    assert "invalid" in err.value.stderr.lower() or "unsupported" in err.value.stderr.lower(), err.value.stderr


# ------------------------------------------------------------------ the Helm chart

CHART_SH = REPO / "infra" / "chart.sh"


def chart_docs() -> list[dict]:
    out = subprocess.run([str(CHART_SH), "template", "-f", str(REPO / "infra/helm/prewarm/values-examples.yaml"),
                          "--set", "prepull.enabled=true",
                          "--set", "pdbExample.enabled=true"], capture_output=True, text=True, check=True).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def test_the_chart_is_accepted_by_the_apiserver(k8s):
    """Server-side dry run of everything the chart renders (every optional part on)."""
    docs = chart_docs()
    kinds = {d["kind"] for d in docs}
    assert {"ClusterRole", "Role", "ConfigMap", "Deployment", "PriorityClass", "DaemonSet",
            "PodDisruptionBudget"} <= kinds, kinds
    for obj in docs:
        out = dry_run_apply(k8s, obj)
        assert "(server dry run)" in out, out


# ------------------------------------------------------------------ RBAC as each function's user
# Allowed: every row of permissions.yaml (the one table), as the chart scopes it for the examples
# file's targets (the stack applies that render, infra/k8s/rbac.yaml). Denied: written by hand.

TABLE = yaml.safe_load((REPO / "infra/helm/prewarm/permissions.yaml").read_text())["functions"]
# The stack applies the chart's RBAC for the examples file (infra/chart.sh rbac).
VALUES = yaml.safe_load((REPO / "infra/helm/prewarm/values.yaml").read_text()) | yaml.safe_load(
    (REPO / "infra/helm/prewarm/values-examples.yaml").read_text())


def allowed_checks(fn: str) -> list[tuple]:
    """(verb, resource[/name], subresource, namespace) for each row and verb."""
    targets = VALUES["targets"]
    out = []
    for row in TABLE[fn]["rules"]:
        if row.get("when") and not VALUES[row["when"]]:
            continue  # opt-in row, off in the default values (denied below)
        res, _, sub = row["resource"].partition("/")
        res = f"{res}.{row['apiGroup']}" if row["apiGroup"] else res
        kind = row.get("headroomKind")
        for verb in row["verbs"]:
            if row["scope"] == "cluster":
                out.append((verb, res, sub or None, "default" if res.startswith("events") else None))
            elif row["scope"] == "nodePools":
                out += [(verb, f"{res}/{t['nodePool']}", None, None) for t in targets
                        if kind is None or t["headroom"]["kind"] == kind]
            elif row["scope"] == "headroom":
                out += [(verb, f"{res}/{t['headroom']['name']}", None, t["headroom"]["namespace"]) for t in targets
                        if t["headroom"]["kind"] == kind]
            elif row["scope"] == "podNamespaces":
                out += [(verb, res, None, t["podNamespace"]) for t in targets if t.get("podNamespace")]
            elif row["scope"] == "targetsConfigMap":
                out.append((verb, f"{res}/{VALUES['targetsConfigMap']['name']}", None, "prewarm"))
            elif row["scope"] == "leadTimesConfigMap":
                out.append((verb, f"{res}/prewarm-lead-times", None, "prewarm"))
            elif row["scope"] == "headroomNamespaces":
                out += [(verb, res, None, ns) for ns in
                        sorted({t["headroom"]["namespace"] for t in targets if t["headroom"].get("namespace")})]
            else:
                raise AssertionError(row["scope"])
    assert out, fn
    return out


DENIED = {
    "tick": [
        ("patch", "deployments.apps", None, "kube-system"),
        ("patch", "deployments.apps/coredns", None, "kube-system"),
        ("patch", "deployments.apps/someone-else", None, "prewarm"),
        ("patch", "deployments.apps", None, "default"),
        ("delete", "deployments.apps", None, "inference"),
        ("patch", "nodepools.karpenter.sh/default", None, None),
        ("update", "nodepools.karpenter.sh/gpu", None, None),
        # The tick only reads drain state: it never writes a node, evicts, records Events or
        # reads PDBs (the interruption function does, from the tick's resume-drain message),
        # and never writes NodeClaims.
        ("patch", "nodes", None, None), ("delete", "nodes", None, None), ("update", "nodes", None, None),
        ("create", "pods", "eviction", "inference"), ("create", "events", None, "default"),
        ("create", "events.events.k8s.io", None, "default"), ("list", "poddisruptionbudgets.policy", None, "inference"),
        ("get", "pods", None, "kube-system"),
        ("delete", "pods", None, "inference"), ("patch", "pods", None, "inference"),
        # Replacement placeholders: listed and deleted in the balloon namespace only, never
        # made (the interruption function's drain step makes them).
        ("create", "pods", None, "prewarm"),
        ("create", "pods", None, "inference"), ("delete", "pods", None, "kube-system"),
        ("patch", "pods", None, "prewarm"), ("update", "pods", None, "prewarm"),
        ("delete", "nodeclaims.karpenter.sh", None, None),
        ("get", "configmaps/aws-auth", None, "kube-system"),
        ("get", "configmaps/other", None, "prewarm"),
        ("get", "secrets", None, "prewarm"),
        ("create", "clusterrolebindings.rbac.authorization.k8s.io", None, None),
        # The floor of a KEDA-managed workload: its ScaledObject, in the workloads' namespaces
        # only, and never created or deleted.
        ("patch", "scaledobjects.keda.sh", None, "kube-system"),
        ("create", "scaledobjects.keda.sh", None, "inference"),
        ("delete", "scaledobjects.keda.sh", None, "inference"),
    ],
    "interruption": [
        # NodePools: only the targets' (room in spec.limits for a drain's replacement).
        ("patch", "nodepools.karpenter.sh/default", None, None),
        ("update", "nodepools.karpenter.sh/gpu", None, None),
        ("patch", "deployments.apps", None, "kube-system"),
        ("patch", "deployments.apps/someone-else", None, "prewarm"),
        ("delete", "nodes", None, None), ("update", "nodes", None, None),
        # Replacement placeholders are made and deleted in the balloon namespace (prewarm) only;
        # a drain never deletes the workload's pods (it evicts them), nor rewrites a placeholder.
        ("delete", "pods", None, "inference"), ("create", "pods", None, "inference"),
        ("delete", "pods", None, "kube-system"), ("patch", "pods", None, "prewarm"),
        ("update", "pods", None, "prewarm"),
        ("patch", "nodeclaims.karpenter.sh", None, None), ("delete", "nodeclaims.karpenter.sh", None, None),
        # Grants no code path used, dropped: a node watch, NodeClaim reads, core-group Events
        # (the Recorder writes events.k8s.io).
        ("watch", "nodes", None, None), ("get", "nodeclaims.karpenter.sh", None, None),
        ("list", "nodeclaims.karpenter.sh", None, None), ("watch", "nodeclaims.karpenter.sh", None, None),
        ("create", "events", None, "default"),
        ("patch", "poddisruptionbudgets.policy", None, "inference"),
        # The surge patches Deployments and HPAs of the targets' podNamespaces only, and never
        # deletes, replaces or scales them through another path.
        ("patch", "deployments.apps", None, "default"),
        ("patch", "horizontalpodautoscalers.autoscaling", None, "kube-system"),
        ("delete", "deployments.apps", None, "inference"), ("update", "deployments.apps", None, "inference"),
        ("patch", "replicasets.apps", None, "inference"),
        ("patch", "deployments.apps", "scale", "inference"),
        ("get", "secrets", None, "prewarm"), ("list", "secrets", None, None),
        ("get", "configmaps/other", None, "prewarm"),
        ("create", "clusterrolebindings.rbac.authorization.k8s.io", None, None),
        # (It may patch HPAs and KEDA ScaledObjects in the podNamespaces, inference included: a
        # drain's surge raises the floor of a Deployment an HPA targets, on the ScaledObject when
        # KEDA owns the HPA; permissions.yaml, interruption rows.) Elsewhere, or other verbs: no.
        ("patch", "scaledobjects.keda.sh", None, "kube-system"),
        ("delete", "scaledobjects.keda.sh", None, "inference"),
        ("create", "scaledobjects.keda.sh", None, "inference"),
    ],
    "restore": [
        # Puts back what the tick and the drains wrote: no eviction rights, nothing of other
        # owners. (It patches nodes anywhere, a drain's mark; never deletes or replaces them.
        # It lists NodePools anywhere and writes only the targets'.)
        ("delete", "nodes", None, None), ("update", "nodes", None, None),
        ("list", "pods", None, None),
        ("create", "pods/eviction", None, "inference"),
        ("patch", "nodepools.karpenter.sh/default", None, None),
        ("update", "nodepools.karpenter.sh/gpu", None, None),
        ("delete", "nodepools.karpenter.sh/gpu", None, None),
        ("patch", "deployments.apps/someone-else", None, "prewarm"),
        ("patch", "deployments.apps", None, "kube-system"),
        ("get", "configmaps/other", None, "prewarm"),
        ("get", "secrets", None, "prewarm"),
        # Drain leftovers: it deletes placeholders in the balloon namespace and gives surges back
        # in the podNamespaces; it never makes a placeholder, deletes a workload's pods or
        # Deployments, or evicts.
        ("create", "pods", None, "prewarm"), ("patch", "pods", None, "prewarm"),
        ("delete", "pods", None, "inference"), ("delete", "deployments.apps", None, "inference"),
        ("delete", "scaledobjects.keda.sh", None, "inference"),
    ],
}


def can_i(kube, verb, resource, sub, ns) -> bool:
    args = ["auth", "can-i", verb, resource]
    if sub:
        args.append(f"--subresource={sub}")
    args += ["-n", ns] if ns else ["--all-namespaces"]
    return kube.run(*args, check=False).stdout.strip() == "yes"


def function_user(stack_env, fn: str) -> Kube:
    var = f"PREWARM_{fn.upper()}_KUBECONFIG"
    if var not in stack_env:
        pytest.fail(f"{var} missing: the stack predates per-function users (tests/stack/down, up)")
    return Kube(os.path.join(stack_env["STACK_BIN"], "kubectl"), stack_env[var])


@pytest.mark.parametrize("fn,check", [(fn, c) for fn in TABLE for c in allowed_checks(fn)])
def test_function_may(stack_env, fn, check):
    assert can_i(function_user(stack_env, fn), *check), f"{fn} cannot {check}"


@pytest.mark.parametrize("fn,check", [(fn, c) for fn, cs in DENIED.items() for c in cs])
def test_function_may_not(stack_env, fn, check):
    assert not can_i(function_user(stack_env, fn), *check), f"{fn} may {check}: too much"


def test_each_function_lacks_the_others_writes(stack_env):
    """The interruption function patches only the targets' NodePools (room in spec.limits); the
    tick cannot evict or patch nodes (it hands orphaned drains over as resume-drain messages)."""
    tick, intr = function_user(stack_env, "tick"), function_user(stack_env, "interruption")
    assert can_i(intr, "create", "pods", "eviction", "inference")
    # The interruption function makes and deletes replacement placeholders in the balloon
    # namespace; the tick only collects them (list, delete): an orphaned drain is handed over
    # as a resume-drain message, never re-made by the tick.
    assert can_i(intr, "create", "pods", None, "prewarm") and can_i(intr, "delete", "pods", None, "prewarm")
    assert can_i(tick, "delete", "pods", None, "prewarm") and can_i(tick, "list", "pods", None, "prewarm")
    assert not can_i(tick, "create", "pods", None, "prewarm")
    assert can_i(tick, "patch", "nodepools.karpenter.sh/gpu", None, None)
    assert can_i(intr, "patch", "nodepools.karpenter.sh/gpu", None, None)
