"""Every manifest in infra/k8s is accepted by the real test cluster's apiserver (server-side
dry-run, so the real Karpenter CRD schemas and CEL rules apply), and the RBAC of rbac.yaml gives
the prewarm-lambda user (group prewarm-controller only) exactly the access both paths use.

Uses the fixtures of tests/e2e/conftest.py (the local stack must be up: tests/stack/up).
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
K8S = REPO / "infra" / "k8s"
SUFFIX = "-dryrun-check"

MANIFESTS = sorted(p.name for p in K8S.glob("*.yaml"))

if not (Path(__file__).parent / "conftest.py").exists():
    pytest.skip("tests/e2e/conftest.py (the stack's fixtures) is not in this checkout", allow_module_level=True)


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


# (verb, resource, subresource, namespace) the prewarm-lambda user must be allowed ...
ALLOWED = [
    ("get", "nodes", None, None), ("list", "nodes", None, None), ("watch", "nodes", None, None),
    ("patch", "nodes", None, None),
    ("get", "pods", None, "inference"), ("list", "pods", None, None), ("watch", "pods", None, None),
    ("create", "pods", "eviction", "inference"),
    ("create", "events", None, "default"), ("patch", "events", None, "default"),
    ("create", "events.events.k8s.io", None, "default"),
    ("get", "poddisruptionbudgets.policy", None, "inference"), ("list", "poddisruptionbudgets.policy", None, None),
    ("get", "nodepools.karpenter.sh", None, None), ("list", "nodepools.karpenter.sh", None, None),
    ("watch", "nodepools.karpenter.sh", None, None), ("patch", "nodepools.karpenter.sh", None, None),
    ("get", "nodeclaims.karpenter.sh", None, None), ("list", "nodeclaims.karpenter.sh", None, None),
    ("get", "capacitybuffers.autoscaling.x-k8s.io", None, "prewarm"),
    ("patch", "capacitybuffers.autoscaling.x-k8s.io", None, "prewarm"),
    ("update", "capacitybuffers.autoscaling.x-k8s.io", None, "prewarm"),
    ("get", "deployments.apps", None, "prewarm"), ("list", "deployments.apps", None, None),
    ("patch", "deployments.apps", None, "prewarm"),
    ("get", "deployments.apps", "scale", "prewarm"), ("patch", "deployments.apps", "scale", "prewarm"),
    ("update", "deployments.apps", "scale", "prewarm"),
]
# ... and a sample of what it must not do: nothing destructive, no template rewrite, no secrets.
DENIED = [
    ("delete", "nodes", None, None), ("update", "nodes", None, None),
    ("delete", "pods", None, "inference"), ("create", "pods", None, "prewarm"),
    ("update", "nodepools.karpenter.sh", None, None), ("delete", "nodepools.karpenter.sh", None, None),
    ("create", "nodeclaims.karpenter.sh", None, None), ("delete", "nodeclaims.karpenter.sh", None, None),
    ("patch", "nodeclaims.karpenter.sh", None, None),
    ("delete", "deployments.apps", None, "prewarm"), ("create", "deployments.apps", None, "prewarm"),
    ("get", "secrets", None, "prewarm"), ("list", "secrets", None, None),
    ("patch", "poddisruptionbudgets.policy", None, "inference"),
    ("create", "clusterrolebindings.rbac.authorization.k8s.io", None, None),
]


def can_i(kube, verb, resource, sub, ns) -> bool:
    args = ["auth", "can-i", verb, resource]
    if sub:
        args.append(f"--subresource={sub}")
    args += ["-n", ns] if ns else ["--all-namespaces"]
    return kube.run(*args, check=False).stdout.strip() == "yes"


@pytest.mark.parametrize("verb,resource,sub,ns", ALLOWED)
def test_lambda_user_may(lambda_k8s, verb, resource, sub, ns):
    assert can_i(lambda_k8s, verb, resource, sub, ns), f"prewarm-lambda cannot {verb} {resource}{'/' + sub if sub else ''}"


@pytest.mark.parametrize("verb,resource,sub,ns", DENIED)
def test_lambda_user_may_not(lambda_k8s, verb, resource, sub, ns):
    assert not can_i(lambda_k8s, verb, resource, sub, ns), f"prewarm-lambda may {verb} {resource}: too much"
