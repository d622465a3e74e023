"""Offline checks of infra/k8s against the real Karpenter CRDs' openAPIV3Schema.

The schema part of what the apiserver checks (types, enums, patterns, required fields, unknown
fields); the CEL rules and the core kinds are checked by the server-side dry-run in
tests/e2e/test_infra_manifests.py against the test cluster. A few CEL rules that matter for these
manifests are restated here by hand, each with the rule it mirrors.
"""

import copy
import re
from pathlib import Path

import jsonschema
import pytest
import yaml

from infra_paths import REPO, crds_dir

K8S = REPO / "infra" / "k8s"


def load_docs(path: Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def all_objects() -> list[tuple[str, dict]]:
    out = []
    for f in sorted(K8S.glob("*.yaml")):
        for d in load_docs(f):
            out.append((f.name, d))
    return out


def to_jsonschema(s: dict) -> dict:
    """Turn a structural openAPIV3Schema into JSON Schema: int-or-string, preserve-unknown-fields,
    and no additional properties where the CRD lists them (the apiserver prunes or, with
    strict field validation, rejects unknown fields; we want to know)."""
    s = copy.deepcopy(s)

    def walk(n: dict) -> dict:
        if n.get("x-kubernetes-int-or-string"):
            n.pop("type", None)
            any_of = n.pop("anyOf", None)
            pattern = n.pop("pattern", None)
            n["anyOf"] = [{"type": "integer"}, {"type": "string", **({"pattern": pattern} if pattern else {})}]
            del any_of
        for k in ("properties",):
            if k in n:
                for name, sub in n[k].items():
                    n[k][name] = walk(sub)
                if not n.get("x-kubernetes-preserve-unknown-fields") and "additionalProperties" not in n:
                    n["additionalProperties"] = False
        if isinstance(n.get("additionalProperties"), dict):
            n["additionalProperties"] = walk(n["additionalProperties"])
        if isinstance(n.get("items"), dict):
            n["items"] = walk(n["items"])
        for k in ("anyOf", "allOf", "oneOf"):
            if k in n:
                n[k] = [walk(x) for x in n[k]]
        return n

    return walk(s)


def crd_schemas() -> dict[tuple[str, str], dict]:
    d = crds_dir()
    if d is None:
        pytest.skip("Karpenter CRDs not found (set PREWARM_CRDS_DIR)")
    out = {}
    for f in d.glob("*.yaml"):
        for crd in load_docs(f):
            group = crd["spec"]["group"]
            kind = crd["spec"]["names"]["kind"]
            for v in crd["spec"]["versions"]:
                out[(f"{group}/{v['name']}", kind)] = v["schema"]["openAPIV3Schema"]
    return out


CUSTOM = [(f, o) for f, o in all_objects() if "." in o["apiVersion"].split("/")[0] and not o["apiVersion"].startswith(("apps/", "policy/", "rbac.authorization.k8s.io/", "scheduling.k8s.io/"))]


def test_every_custom_object_has_a_crd():
    schemas = crd_schemas()
    kinds = {(o["apiVersion"], o["kind"]) for _, o in CUSTOM}
    assert kinds, "no custom objects found in infra/k8s"
    missing = kinds - set(schemas)
    assert not missing, f"no CRD in the pinned set for {missing}"


@pytest.mark.parametrize("fname,obj", CUSTOM, ids=[f"{f}:{o['kind']}" for f, o in CUSTOM])
def test_custom_object_matches_crd_schema(fname, obj):
    schema = to_jsonschema(crd_schemas()[(obj["apiVersion"], obj["kind"])])
    errors = sorted(jsonschema.Draft7Validator(schema).iter_errors(obj), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{fname} {'/'.join(map(str, e.path))}: {e.message}" for e in errors)


def test_schema_check_catches_a_bad_field():
    """The check above must be able to fail: a retired v1beta1-style value and an unknown field."""
    schema = to_jsonschema(crd_schemas()[("karpenter.sh/v1", "NodePool")])
    nodepool = copy.deepcopy(next(o for _, o in CUSTOM if o["kind"] == "NodePool"))
    nodepool["spec"]["disruption"]["consolidationPolicy"] = "WhenUnderutilized"
    nodepool["spec"]["disruption"]["notAField"] = 1
    messages = [e.message for e in jsonschema.Draft7Validator(schema).iter_errors(nodepool)]
    assert any("WhenUnderutilized" in m for m in messages), messages
    assert any("notAField" in m for m in messages), messages


def by_kind(kind: str) -> dict:
    found = [o for _, o in all_objects() if o["kind"] == kind]
    assert len(found) == 1, f"expected one {kind}, found {len(found)}"
    return found[0]


def test_nodepool_is_the_gpu_pool_the_issue_asks_for():
    np = by_kind("NodePool")
    assert np["apiVersion"] == "karpenter.sh/v1"
    spec = np["spec"]
    reqs = {r["key"]: r for r in spec["template"]["spec"]["requirements"]}
    assert set(reqs["karpenter.k8s.aws/instance-category"]["values"]) == {"g", "p"}
    gen = reqs["karpenter.k8s.aws/instance-generation"]
    assert gen["operator"] == "Gt" and gen["values"] == ["4"]
    assert set(reqs["karpenter.sh/capacity-type"]["values"]) == {"spot", "on-demand"}
    assert {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"} in spec["template"]["spec"]["taints"]
    assert "nvidia.com/gpu" in spec["limits"]
    d = spec["disruption"]
    assert d["consolidationPolicy"] == "WhenEmptyOrUnderutilized"
    assert "consolidateAfter" in d  # required by Karpenter 1.x
    assert d["budgets"]
    # CEL: self.all(x, has(x.schedule) == has(x.duration))
    assert all(("schedule" in b) == ("duration" in b) for b in d["budgets"])
    # CEL: Gt/Lt need exactly one non-negative integer value
    for r in reqs.values():
        if r["operator"] in ("Gt", "Lt", "Gte", "Lte"):
            assert len(r["values"]) == 1 and int(r["values"][0]) >= 0


def test_ec2nodeclass_pins_al2023_and_sizes_the_root_volume():
    nc = by_kind("EC2NodeClass")
    assert nc["apiVersion"] == "karpenter.k8s.aws/v1"
    aliases = [t["alias"] for t in nc["spec"]["amiSelectorTerms"] if "alias" in t]
    assert len(aliases) == 1
    # CEL: family@version, family in the supported list; pinned means a vYYYYMMDD release.
    family, version = aliases[0].split("@")
    assert family == "al2023"
    assert re.fullmatch(r"v\d{8}", version), f"AMI alias must be pinned, got {aliases[0]}"
    roots = [b for b in nc["spec"]["blockDeviceMappings"] if b.get("rootVolume")]
    assert len(roots) == 1
    ebs = roots[0]["ebs"]
    assert (ebs["volumeType"], ebs["volumeSize"], ebs["iops"], ebs["throughput"]) == ("gp3", "200Gi", 10000, 500)


def test_capacitybuffer_refers_to_a_podtemplate_in_the_same_file():
    cb = by_kind("CapacityBuffer")
    pt = by_kind("PodTemplate")
    # CEL: podTemplateRef needs replicas or limits; not both podTemplateRef and scalableRef.
    assert "replicas" in cb["spec"] or "limits" in cb["spec"]
    assert not ("podTemplateRef" in cb["spec"] and "scalableRef" in cb["spec"])
    assert cb["spec"]["podTemplateRef"]["name"] == pt["metadata"]["name"]
    assert cb["metadata"]["namespace"] == pt["metadata"]["namespace"] == "prewarm"


def test_balloon_follows_the_conventions():
    pc = by_kind("PriorityClass")
    assert (pc["metadata"]["name"], pc["value"], pc["preemptionPolicy"], pc["globalDefault"]) == (
        "prewarm-balloon", -10, "Never", False)
    dep = next(o for _, o in all_objects() if o["kind"] == "Deployment" and o["metadata"]["name"].startswith("balloon"))
    spec = dep["spec"]["template"]["spec"]
    assert dep["metadata"]["namespace"] == "prewarm"
    assert dep["spec"]["replicas"] == 0
    assert spec["priorityClassName"] == "prewarm-balloon"
    assert spec["nodeSelector"]["karpenter.sh/nodepool"] == by_kind("NodePool")["metadata"]["name"]
    assert any(t["key"] == "nvidia.com/gpu" for t in spec["tolerations"])


# Exactly the access each function uses, for the chart's default values (infra/k8s/rbac.yaml is
# the chart's render; permissions.yaml is the table). Changing the RBAC means changing this on
# purpose. (function -> (apiGroup, resource) -> verbs)
EXPECTED_RULES = {
    "tick": {
        # The targets ConfigMap (get); the learned lead times' ConfigMap by name (get, update).
        ("", "configmaps"): {"get", "update"},
        # Lead times: the kubelet's Pulled events in the podNamespaces, NodeClaims of any pool.
        ("", "events"): {"list"},
        ("karpenter.sh", "nodeclaims"): {"list"},
        # list in podNamespaces; delete/list (replacement placeholders) in the balloon namespace.
        ("", "pods"): {"list", "delete"},
        ("karpenter.sh", "nodepools"): {"get", "patch"},
        # Balloon headroom by name; surges given back in the podNamespaces (list by label).
        ("apps", "deployments"): {"get", "list", "patch"},
        # Reservation collection only reads drain state: orphaned and expired drains go to the
        # interruption function as resume-drain messages (IAM sqs:SendMessage, not RBAC).
        ("", "nodes"): {"get", "list"},
        # Read the workload's HPA (sizing in its units); patch minReplicas under a lease for
        # targets with hpa.raiseMinReplicas (issue 10).
        # ... and list the surged ones to give a dead drain's surge back.
        ("autoscaling", "horizontalpodautoscalers"): {"get", "list", "patch"},
        # The same floor on the KEDA ScaledObject that owns a workload's HPA (minReplicaCount);
        # list the surged ones to give a dead drain's surge back.
        ("keda.sh", "scaledobjects"): {"get", "list", "patch"},
    },
    "interruption": {
        ("", "configmaps"): {"get"},
        ("", "nodes"): {"get", "list", "patch"},
        ("", "pods"): {"get", "list", "create", "delete"},
        ("", "pods/eviction"): {"create"},
        # kube-runtime's Recorder writes events.k8s.io/v1 only.
        ("events.k8s.io", "events"): {"create", "patch"},
        ("policy", "poddisruptionbudgets"): {"get", "list"},
        # The targets' NodePools by name: room in spec.limits for a drain's replacement.
        ("karpenter.sh", "nodepools"): {"get", "patch"},
        # Balloon headroom by name; the drain surge in the podNamespaces.
        ("apps", "deployments"): {"get", "list", "patch"},
        ("apps", "replicasets"): {"get"},
        ("autoscaling", "horizontalpodautoscalers"): {"get", "list", "patch"},
        # The surge of a Deployment whose HPA KEDA owns: on the ScaledObject.
        ("keda.sh", "scaledobjects"): {"get", "list", "patch"},
    },
}


def rbac_objects(kind: str) -> list[dict]:
    return [o for name, o in all_objects() if name == "rbac.yaml" and o["kind"] == kind]


def test_rbac_grants_each_function_exactly_the_verbs_it_uses():
    for fn, expected in EXPECTED_RULES.items():
        granted: dict[tuple[str, str], set[str]] = {}
        for role in rbac_objects("ClusterRole") + rbac_objects("Role"):
            if role["metadata"]["labels"]["prewarm.io/function"] != fn:
                continue
            for rule in role["rules"]:
                assert "*" not in rule["verbs"] and "*" not in rule["resources"] and "*" not in rule["apiGroups"]
                for g in rule["apiGroups"]:
                    for r in rule["resources"]:
                        granted.setdefault((g, r), set()).update(rule["verbs"])
        assert granted == expected, fn
    # Writes to headroom and NodePools only by name; never `update` (a full replace) on NodePools.
    # The one exception: the drain surge patches the inference Deployments of the targets'
    # podNamespaces (only known at run time: the workloads of the pods on a draining node), in
    # a Role of those namespaces, never cluster-wide.
    pod_namespaces = {"inference"}
    for role in rbac_objects("ClusterRole") + rbac_objects("Role"):
        for rule in role["rules"]:
            surge = (role["kind"] == "Role" and role["metadata"].get("namespace") in pod_namespaces
                     and rule["resources"] == ["deployments"])
            writes = set(rule["verbs"]) - {"get", "list", "watch"}
            if rule["resources"][0] in ("nodepools", "deployments", "capacitybuffers", "configmaps") and not surge \
                    and writes:
                assert rule.get("resourceNames"), rule
            if rule["resources"][0] == "nodepools":
                assert "update" not in rule["verbs"]


def test_rbac_binds_each_functions_own_group():
    bindings = rbac_objects("ClusterRoleBinding") + rbac_objects("RoleBinding")
    assert bindings
    for b in bindings:
        fn = b["metadata"]["labels"]["prewarm.io/function"]
        assert b["roleRef"]["name"] == f"prewarm-{fn}"
        assert b["subjects"] == [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": f"prewarm-{fn}"}]


def test_the_balloon_namespace_enforces_restricted_and_its_pods_comply():
    from pss import restricted_violations
    ns = next(o for _, o in all_objects() if o["kind"] == "Namespace" and o["metadata"]["name"] == "prewarm")
    labels = ns["metadata"]["labels"]
    assert {k: v for k, v in labels.items() if k.startswith("pod-security.kubernetes.io/")} == {
        "pod-security.kubernetes.io/enforce": "restricted",
        "pod-security.kubernetes.io/enforce-version": "latest",
        "pod-security.kubernetes.io/warn": "restricted",
        "pod-security.kubernetes.io/audit": "restricted"}
    in_prewarm = [(f, o) for f, o in all_objects() if o["metadata"].get("namespace") == "prewarm"]
    specs = [(f, o["spec"]["template"]["spec"]) for f, o in in_prewarm if o["kind"] in ("Deployment", "DaemonSet")]
    specs += [(f, o["template"]["spec"]) for f, o in in_prewarm if o["kind"] == "PodTemplate"]
    assert {f for f, _ in specs} >= {"balloon.yaml", "capacitybuffer.yaml"}
    for f, spec in specs:
        assert restricted_violations(spec) == [], f
