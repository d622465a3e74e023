"""The cluster side as a Helm chart (infra/helm/prewarm): helm lint, helm template, the committed
infra/k8s/rbac.yaml equal to the chart's render, and the RBAC rendered from permissions.yaml (the
one table) giving each function only its own rows, by name where a name is known. Expected rules
for the sample values below are written by hand. The server-side dry run and the allowed/denied
checks as each function's own user run on the local apiserver (tests/e2e/test_infra_manifests.py).
"""

import json
import re
import subprocess

import pytest
import yaml

from infra_paths import REPO

CHART = REPO / "infra/helm/prewarm"
CHART_SH = REPO / "infra/chart.sh"


def render(*args: str) -> list[dict]:
    out = subprocess.run([str(CHART_SH), "template", *args], capture_output=True, text=True, check=True).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def test_helm_lint():
    subprocess.run([str(CHART_SH), "lint"], check=True, capture_output=True)


def test_committed_rbac_is_the_charts_render():
    """The local stack applies infra/k8s/rbac.yaml: it must be what the chart renders today for
    the examples file's targets."""
    out = subprocess.run([str(CHART_SH), "rbac-stdout"], capture_output=True, text=True, check=True).stdout
    assert (REPO / "infra/k8s/rbac.yaml").read_text() == out, "run infra/chart.sh rbac"


# Three targets, one per headroom kind, across namespaces.
SAMPLE_TARGETS = [
    {"name": "llama", "nodePool": "gpu", "podNamespace": "inference", "podSelector": "app=llama",
     "headroom": {"kind": "balloon", "namespace": "prewarm", "name": "balloon-llama"}, "maxSpare": 4,
     "chart": {"createHeadroom": True, "resources": {"requests": {"nvidia.com/gpu": "1"}}}},
    {"name": "mistral", "nodePool": "gpu-big", "podNamespace": "models",
     "headroom": {"kind": "capacityBuffer", "namespace": "buffers", "name": "mistral"}, "maxSpare": 2,
     "chart": {"createHeadroom": True, "resources": {"requests": {"nvidia.com/gpu": "4"}}}},
    {"name": "static", "nodePool": "gpu-static", "headroom": {"kind": "nodePoolReplicas"}, "maxSpare": 1},
]


@pytest.fixture(scope="module")
def sample():
    return render("--set-json", "targets=" + json.dumps(SAMPLE_TARGETS))


def rbac_of(docs, fn):
    return {(d["kind"], d["metadata"].get("namespace")): d for d in docs
            if d["kind"] in ("ClusterRole", "Role", "ClusterRoleBinding", "RoleBinding")
            and d["metadata"]["labels"].get("prewarm.io/function") == fn}


def rules(role) -> set[tuple]:
    return {(r["apiGroups"][0], r["resources"][0], tuple(r.get("resourceNames", [])), tuple(r["verbs"]))
            for r in role["rules"]}


def test_the_tick_gets_its_rows_by_name(sample):
    tick = rbac_of(sample, "tick")
    assert rules(tick[("ClusterRole", None)]) == {
        ("karpenter.sh", "nodepools", ("gpu", "gpu-big", "gpu-static"), ("get", "patch")),
        # reservation collection reads drain state on any node; it writes none (the interruption
        # function steps and un-drains, from the tick's resume-drain message)
        ("", "nodes", (), ("get", "list")),
        # node boots learned from each NodePool's NodeClaims (listed by label)
        ("karpenter.sh", "nodeclaims", (), ("list",))}
    # Replacement placeholders (reservation collection): list and delete pods of any name, in each
    # balloon / buffer namespace only. Never create: only the interruption function's drain
    # step makes placeholders (the tick hands orphaned drains over as resume-drain messages).
    placeholders = ("", "pods", (), ("delete", "list"))
    assert rules(tick[("Role", "prewarm")]) == {
        ("", "configmaps", ("prewarm-targets",), ("get",)),
        # the learned lead times, kept by name in the ConfigMap the chart creates
        ("", "configmaps", ("prewarm-lead-times",), ("get", "update")),
        ("apps", "deployments", ("balloon-llama",), ("get", "patch")), placeholders}
    assert rules(tick[("Role", "buffers")]) == {
        ("autoscaling.x-k8s.io", "capacitybuffers", ("mistral",), ("get", "patch")), placeholders}
    # pods to count; the workload's HPA to read (and raise minReplicas for raiseMinReplicas
    # targets); surges of drains that no longer run given back (Deployments and HPAs, by label)
    for ns in ("inference", "models"):
        assert rules(tick[("Role", ns)]) == {
            ("", "pods", (), ("list",)),
            # image pulls from the kubelet's Pulled events
            ("", "events", (), ("list",)),
            ("autoscaling", "horizontalpodautoscalers", (), ("get", "list", "patch")),
            ("apps", "deployments", (), ("get", "list", "patch")),
            ("keda.sh", "scaledobjects", (), ("get", "list", "patch"))}
    assert set(tick) == {("ClusterRole", None), ("ClusterRoleBinding", None)} | {
        (k, ns) for ns in ("prewarm", "buffers", "inference", "models") for k in ("Role", "RoleBinding")}


def test_the_interruption_function_gets_its_rows_and_patches_only_named_headroom(sample):
    intr = rbac_of(sample, "interruption")
    cluster = rules(intr[("ClusterRole", None)])
    # Every target's NodePool (room in spec.limits for a drain's replacement), no other.
    assert [r for r in cluster if r[1] == "nodepools"] == [
        ("karpenter.sh", "nodepools", ("gpu", "gpu-big", "gpu-static"), ("get", "patch"))]
    # Exactly what its code calls: no node watch and no NodeClaim read (nothing watches, nothing
    # reads a NodeClaim), no core-group Events (kube-runtime's Recorder writes events.k8s.io/v1).
    assert cluster == {
        ("karpenter.sh", "nodepools", ("gpu", "gpu-big", "gpu-static"), ("get", "patch")),
        ("", "nodes", (), ("get", "list", "patch")),
        ("", "pods", (), ("get", "list")),
        ("", "pods/eviction", (), ("create",)),
        ("events.k8s.io", "events", (), ("create", "patch")),
        ("policy", "poddisruptionbudgets", (), ("get", "list"))}
    placeholders = ("", "pods", (), ("create", "delete"))
    assert rules(intr[("Role", "prewarm")]) == {
        ("", "configmaps", ("prewarm-targets",), ("get",)),
        ("apps", "deployments", ("balloon-llama",), ("get", "patch")), placeholders}
    assert rules(intr[("Role", "buffers")]) == {
        ("autoscaling.x-k8s.io", "capacitybuffers", ("mistral",), ("get", "patch")), placeholders}
    # The drain surge: the inference workloads' Deployments (via their ReplicaSets) and HPAs,
    # only in the targets' podNamespaces.
    for ns in ("inference", "models"):
        assert rules(intr[("Role", ns)]) == {
            ("apps", "replicasets", (), ("get",)),
            ("apps", "deployments", (), ("get", "list", "patch")),
            ("autoscaling", "horizontalpodautoscalers", (), ("get", "list", "patch")),
            ("keda.sh", "scaledobjects", (), ("get", "list", "patch"))}


def test_each_binding_names_only_its_functions_group(sample):
    for fn, group in (("tick", "prewarm-tick"), ("interruption", "prewarm-interruption")):
        for (kind, ns), d in rbac_of(sample, fn).items():
            if kind.endswith("Binding"):
                assert d["subjects"] == [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": group}]
                assert d["roleRef"]["name"] == f"prewarm-{fn}"


def test_no_rule_is_a_wildcard_or_touches_secrets(sample):
    for d in sample:
        for r in d.get("rules", []) if d["kind"] in ("ClusterRole", "Role") else []:
            assert "*" not in r["verbs"] + r["resources"] + r["apiGroups"], r
            assert "secrets" not in r["resources"]
            # Names cannot restrict list/watch/create: never given together.
            if r.get("resourceNames"):
                assert not {"list", "watch", "create"} & set(r["verbs"]), r


def test_every_row_of_the_table_is_rendered(sample):
    table = yaml.safe_load((CHART / "permissions.yaml").read_text())["functions"]
    for fn, spec in table.items():
        rendered = set()
        for (kind, _), d in rbac_of(sample, fn).items():
            if kind in ("ClusterRole", "Role"):
                rendered |= {(g, res, verbs) for g, res, _, verbs in rules(d)}
        for row in spec["rules"]:
            if row.get("when"):
                continue  # opt-in rows: test_deleting_past_a_pdb_is_an_opt_in_permission
            assert (row["apiGroup"], row["resource"], tuple(row["verbs"])) in rendered, (fn, row)
            assert row["why"].strip(), (fn, row)


def test_headroom_objects_and_configmap_are_rendered(sample):
    by_kind = {(d["kind"], d["metadata"]["name"]): d for d in sample}
    balloon = by_kind[("Deployment", "balloon-llama")]
    assert balloon["metadata"]["namespace"] == "prewarm" and balloon["spec"]["replicas"] == 0
    pod = balloon["spec"]["template"]["spec"]
    assert pod["priorityClassName"] == "prewarm-balloon"
    assert pod["nodeSelector"] == {"karpenter.sh/nodepool": "gpu"}
    buffer = by_kind[("CapacityBuffer", "mistral")]
    assert buffer["metadata"]["namespace"] == "buffers"
    assert buffer["spec"]["podTemplateRef"]["name"] == "mistral-replica"
    assert ("PodTemplate", "mistral-replica") in by_kind
    targets = json.loads(by_kind[("ConfigMap", "prewarm-targets")]["data"]["targets.json"])
    assert [t["name"] for t in targets] == ["llama", "mistral", "static"]
    assert not any("chart" in t for t in targets), "chart-only settings never reach the binary"




def test_deleting_past_a_pdb_is_an_opt_in_permission():
    """pods/delete only with deletePastPdb=true (DELETE_PAST_PDB_AT_DEADLINE): by default the
    interruption function can only evict, so PodDisruptionBudgets always hold."""
    def deletes(docs) -> bool:
        # Cluster-wide (any pod on the draining node); the placeholders' own namespaces aside.
        return any(r[1] == "pods" and "delete" in r[3]
                   for r in rules(rbac_of(docs, "interruption")[("ClusterRole", None)]))
    assert not deletes(render())
    assert deletes(render("--set", "deletePastPdb=true"))


# ------------------------------------------------------------------ restore and its pre-delete hook

HOOK_IMAGE = "registry.example.com/prewarm:0.1.0"


@pytest.fixture(scope="module")
def with_hook():
    return render("--set-json", "targets=" + json.dumps(SAMPLE_TARGETS), "--set", f"restoreHook.image={HOOK_IMAGE}")


def test_restore_gets_only_what_it_puts_back_by_name(sample):
    restore = rbac_of(sample, "restore")
    # NodePools written by name, listed anywhere (a removed target's is found and reported);
    # nodes anywhere (a node a drain left cordoned).
    assert rules(restore[("ClusterRole", None)]) == {
        ("karpenter.sh", "nodepools", ("gpu", "gpu-big", "gpu-static"), ("get", "patch")),
        ("karpenter.sh", "nodepools", (), ("list",)),
        ("", "nodes", (), ("get", "list", "patch"))}
    # Drains' placeholders deleted where they live (the balloon / buffer namespaces).
    placeholders = ("", "pods", (), ("list", "delete"))
    assert rules(restore[("Role", "prewarm")]) == {
        ("", "configmaps", ("prewarm-targets",), ("get",)),
        ("apps", "deployments", ("balloon-llama",), ("get", "patch")), placeholders}
    assert rules(restore[("Role", "buffers")]) == {
        ("autoscaling.x-k8s.io", "capacitybuffers", ("mistral",), ("get", "patch")), placeholders}
    # The HPA floors (and a KEDA ScaledObject's) and drain surges in the workload namespaces: no
    # pods there.
    for ns in ("inference", "models"):
        assert rules(restore[("Role", ns)]) == {
            ("autoscaling", "horizontalpodautoscalers", (), ("get", "list", "patch")),
            ("keda.sh", "scaledobjects", (), ("get", "list", "patch")),
            ("apps", "deployments", (), ("get", "list", "patch"))}
    assert set(restore) == {(k, ns) for k, ns in [("ClusterRole", None), ("ClusterRoleBinding", None)]} | {
        (k, ns) for ns in ("prewarm", "buffers", "inference", "models") for k in ("Role", "RoleBinding")}, \
        "no eviction rights, no pods outside the placeholders' namespaces"


def test_the_restore_hook_is_off_without_an_image(sample):
    assert not [d for d in sample if d["kind"] in ("Job", "ServiceAccount")]
    assert not [d for d in sample if "helm.sh/hook" in d["metadata"].get("annotations", {})]
    for (kind, _), d in rbac_of(sample, "restore").items():
        if kind.endswith("Binding"):
            assert d["subjects"] == [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "prewarm-restore"}]


def test_the_restore_hook_runs_prewarm_restore_before_uninstall_as_its_own_account(with_hook):
    jobs = [d for d in with_hook if d["kind"] == "Job"]
    assert len(jobs) == 1
    job = jobs[0]
    notes = job["metadata"]["annotations"]
    assert notes["helm.sh/hook"] == "pre-delete"
    assert set(notes["helm.sh/hook-delete-policy"].split(",")) == {"before-hook-creation", "hook-succeeded"}
    pod = job["spec"]["template"]["spec"]
    assert pod["restartPolicy"] == "Never" and job["spec"]["backoffLimit"] == 2
    (container,) = pod["containers"]
    assert container["image"] == HOOK_IMAGE and container["args"] == ["restore"]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["PREWARM_TARGETS_CONFIGMAP"] == "prewarm/prewarm-targets"
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    # The kubeconfig the binary reads is the pod's own ServiceAccount token.
    by_kind = {(d["kind"], d["metadata"]["name"]): d for d in with_hook}
    mount = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}["kubeconfig"]
    assert env["KUBECONFIG"] == mount + "/kubeconfig"
    cm = {v["name"]: v["configMap"]["name"] for v in pod["volumes"]}["kubeconfig"]
    kubeconfig = yaml.safe_load(by_kind[("ConfigMap", cm)]["data"]["kubeconfig"])
    assert kubeconfig["users"][0]["user"] == {"tokenFile": "/var/run/secrets/kubernetes.io/serviceaccount/token"}
    # Its ServiceAccount is a plain release object (it exists when the hook runs), bound to the
    # restore rows and nothing else.
    sa = pod["serviceAccountName"]
    assert ("ServiceAccount", sa) in by_kind
    assert "annotations" not in by_kind[("ServiceAccount", sa)]["metadata"]
    subject = {"kind": "ServiceAccount", "name": sa, "namespace": "prewarm"}
    bound = {d["metadata"]["labels"]["prewarm.io/function"] for d in with_hook
             if d["kind"].endswith("Binding") and subject in d["subjects"]}
    assert bound == {"restore"}
    restore = rbac_of(with_hook, "restore")
    for (kind, _), d in restore.items():
        if kind.endswith("Binding"):
            assert subject in d["subjects"]


def test_the_hook_image_runs_as_the_user_the_chart_expects():
    """Docker is not on this machine, so the image is never built here: this only checks that
    the Dockerfile and the Job agree (non-root uid, the binary as entrypoint)."""
    dockerfile = (REPO / "Dockerfile").read_text()
    assert "USER 65532:65532" in dockerfile
    assert 'ENTRYPOINT ["/prewarm"]' in dockerfile


# ------------------------------------------------------------------ values: defaults, examples, schema

EXAMPLES = CHART / "values-examples.yaml"


def helm(*args: str) -> subprocess.CompletedProcess:
    exe = subprocess.run([str(REPO / "infra/tools.sh"), "helm"], capture_output=True, text=True, check=True).stdout.strip()
    return subprocess.run([exe, *args], capture_output=True, text=True)


def test_the_defaults_install_nothing_that_needs_a_namespace_of_yours():
    """Out of the box no target: no Role in a namespace that may not exist, no headroom object.
    The examples are a values file of their own (helm install -f values-examples.yaml)."""
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert values["targets"] == []
    docs = render()
    assert {d["metadata"].get("namespace") for d in docs} <= {None, "prewarm"}
    assert not [d for d in docs if d["kind"] in ("Deployment", "CapacityBuffer", "PodTemplate")]
    examples = yaml.safe_load(EXAMPLES.read_text())
    assert examples["targets"], "the examples file shows at least one target"


@pytest.mark.parametrize("values", [[], ["-f", str(EXAMPLES)]], ids=["defaults", "examples"])
def test_helm_lint_strict(values):
    r = helm("lint", "--strict", str(CHART), "--namespace", "prewarm", *values)
    assert r.returncode == 0, r.stdout + r.stderr


def bad_target(**change) -> dict:
    t = json.loads(json.dumps(SAMPLE_TARGETS[0]))
    for k, v in change.items():
        if v is None:
            t.pop(k)
        else:
            t[k] = v
    return t


BAD_VALUES = [
    # a typo of nodePool: refused by name (it used to render resourceNames: [null])
    ("typo", [bad_target(nodePool=None, nodepool="gpu")], ["nodepool", "nodePool"]),
    # no headroom: refused by name (it used to fail with a nil pointer)
    ("no headroom", [bad_target(headroom=None)], ["headroom"]),
    # a balloon without its namespace
    ("no namespace", [bad_target(headroom={"kind": "balloon", "name": "b"})], ["namespace"]),
    ("capacityBuffer without namespace", [bad_target(headroom={"kind": "capacityBuffer", "name": "b"})], ["namespace"]),
    ("unknown kind", [bad_target(headroom={"kind": "ballon", "namespace": "p", "name": "b"})], ["kind"]),
    ("no maxSpare", [bad_target(maxSpare=None)], ["maxSpare"]),
    ("unknown server", [bad_target(server="ollama")], ["server"]),
]


@pytest.mark.parametrize("case,targets,names", BAD_VALUES, ids=[c[0] for c in BAD_VALUES])
def test_the_schema_refuses_bad_targets_naming_the_field(case, targets, names):
    r = helm("template", "prewarm", str(CHART), "--namespace", "prewarm", "--set-json", "targets=" + json.dumps(targets))
    assert r.returncode != 0, f"{case} rendered"
    assert "schema" in r.stderr.lower(), r.stderr
    for n in names:
        assert n in r.stderr, (n, r.stderr)


def test_the_schema_refuses_a_top_level_typo():
    r = helm("template", "prewarm", str(CHART), "--set", "restorehook.image=x")
    assert r.returncode != 0 and "restorehook" in r.stderr, r.stderr


def test_the_schema_knows_every_target_field_of_the_binary():
    """The binary refuses unknown target fields at start-up (deny_unknown_fields): the schema
    refuses them at `helm install`, and lets every real one through."""
    text = (REPO / "src/core/spec/target.rs").read_text()
    body = text[text.index("pub struct TargetSpec {"):]
    body = body[:body.index("\n}")]
    fields = set()
    for name in re.findall(r"pub (\w+):", body):
        first, *rest = name.split("_")
        fields.add(first + "".join(p.title() for p in rest))
    schema = json.loads((CHART / "values.schema.json").read_text())
    ref = schema["properties"]["targets"]["items"]["$ref"]
    target = schema["definitions"][ref.rsplit("/", 1)[1]]
    assert target["additionalProperties"] is False
    assert set(target["properties"]) == fields | {"chart"}


# ------------------------------------------------------------------ the placeholders' PriorityClass

def render_release(release: str, *args: str) -> list[dict]:
    exe = subprocess.run([str(REPO / "infra/tools.sh"), "helm"], capture_output=True, text=True, check=True).stdout.strip()
    out = subprocess.run([exe, "template", release, str(CHART), "--namespace", "prewarm", *args],
                         capture_output=True, text=True, check=True).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def priority_classes(docs) -> list[str]:
    return [d["metadata"]["name"] for d in docs if d["kind"] == "PriorityClass"]


def test_a_capacity_buffer_only_install_still_gets_the_placeholders_priority_class():
    """Every drain's replacement placeholder uses the class, whatever the target's headroom."""
    buffer_only = [t for t in SAMPLE_TARGETS if t["headroom"]["kind"] != "balloon"]
    docs = render_release("prewarm", "--set-json", "targets=" + json.dumps(buffer_only))
    assert priority_classes(docs) == ["prewarm-balloon"]
    (pc,) = [d for d in docs if d["kind"] == "PriorityClass"]
    assert pc["value"] < 0 and pc["preemptionPolicy"] == "Never" and pc["globalDefault"] is False
    assert priority_classes(render_release("prewarm")) == [], "no target, nothing to drain into"


def test_two_releases_get_two_priority_classes_and_their_balloons_use_their_own():
    a = render_release("prewarm", "--set-json", "targets=" + json.dumps(SAMPLE_TARGETS))
    b = render_release("team-b", "--set-json", "targets=" + json.dumps(SAMPLE_TARGETS))
    assert priority_classes(a) == ["prewarm-balloon"] and priority_classes(b) == ["team-b-prewarm-balloon"]
    for docs, name in ((a, "prewarm-balloon"), (b, "team-b-prewarm-balloon")):
        (balloon,) = [d for d in docs if d["kind"] == "Deployment"]
        assert balloon["spec"]["template"]["spec"]["priorityClassName"] == name
    # An explicit name still wins (an existing cluster's class).
    c = render_release("x", "--set-json", "targets=" + json.dumps(SAMPLE_TARGETS), "--set", "balloon.priorityClassName=spare")
    assert priority_classes(c) == ["spare"]


def test_the_template_default_is_the_class_of_a_release_named_prewarm(template):
    assert template["Parameters"]["BalloonPriorityClass"]["Default"] == "prewarm-balloon"
    assert priority_classes(render_release("prewarm", "--set-json", "targets=" + json.dumps(SAMPLE_TARGETS))) == [
        template["Parameters"]["BalloonPriorityClass"]["Default"]]


# ------------------------------------------------------------------ upgrades keep the tick's count

def test_headroom_objects_keep_their_live_count_and_start_at_zero():
    """`helm upgrade` (and every Argo CD sync) used to reset balloons and buffers to replicas: 0,
    dropping the warm capacity on each values change. The count is the live object's (a lookup of
    the object itself); without a cluster (helm template, first install) it is 0. The real
    install / scale / upgrade / uninstall runs on the stack (tests/e2e/test_helm_release.py)."""
    text = (CHART / "templates/balloons.yaml").read_text()
    assert 'lookup "apps/v1" "Deployment" .headroom.namespace .headroom.name' in text
    assert 'lookup "autoscaling.x-k8s.io/v1beta1" "CapacityBuffer" .headroom.namespace .headroom.name' in text
    assert not re.search(r"^\s*replicas: 0\s*$", text, re.M), "a hard-coded count resets the tick's"
    docs = render("--set-json", "targets=" + json.dumps(SAMPLE_TARGETS))
    assert [d["spec"]["replicas"] for d in docs if d["kind"] in ("Deployment", "CapacityBuffer")] == [0, 0]


# ------------------------------------------------------------------ chart conventions

ALL_ON = ["--set-json", "targets=" + json.dumps(SAMPLE_TARGETS), "--set", "prepull.enabled=true",
          "--set", "pdbExample.enabled=true", "--set", f"restoreHook.image={HOOK_IMAGE}"]


def test_every_object_carries_the_recommended_labels():
    for d in render_release("prewarm", *ALL_ON):
        labels = d["metadata"].get("labels", {})
        for key in ("app.kubernetes.io/name", "app.kubernetes.io/instance", "app.kubernetes.io/version",
                    "app.kubernetes.io/managed-by", "app.kubernetes.io/part-of", "helm.sh/chart"):
            assert key in labels, (d["kind"], d["metadata"]["name"], key)
        assert labels["app.kubernetes.io/instance"] == "prewarm"


def test_name_and_fullname_overrides():
    names = lambda docs: {(d["kind"], d["metadata"]["name"]) for d in docs}
    plain = names(render_release("prewarm", *ALL_ON))
    assert ("ClusterRole", "prewarm-tick") in plain and ("Job", "prewarm-restore-hook") in plain
    other = names(render_release("team-b", *ALL_ON))
    assert ("ClusterRole", "team-b-prewarm-tick") in other
    full = names(render_release("team-b", *ALL_ON, "--set", "fullnameOverride=pw"))
    assert ("ClusterRole", "pw-tick") in full and ("Job", "pw-restore-hook") in full
    assert ("PriorityClass", "pw-balloon") in full
    named = render_release("prewarm", *ALL_ON, "--set", "nameOverride=warm")
    assert {d["metadata"]["labels"]["app.kubernetes.io/name"] for d in named
            if d["kind"] == "ClusterRole"} == {"warm"}


def test_the_restore_job_takes_node_selector_tolerations_and_pull_secrets():
    docs = render_release("prewarm", *ALL_ON, "--set-json", 'restoreHook.nodeSelector={"kubernetes.io/os":"linux"}',
                          "--set-json", 'restoreHook.tolerations=[{"key":"CriticalAddonsOnly","operator":"Exists"}]',
                          "--set-json", 'imagePullSecrets=[{"name":"registry"}]')
    (job,) = [d for d in docs if d["kind"] == "Job"]
    pod = job["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"kubernetes.io/os": "linux"}
    assert pod["tolerations"] == [{"key": "CriticalAddonsOnly", "operator": "Exists"}]
    assert pod["imagePullSecrets"] == [{"name": "registry"}]


def notes(tmp_path, *args: str) -> str:
    """NOTES.txt as `helm install` prints it, rendered offline: helm template leaves NOTES out and
    install needs a cluster, so a copy of the chart wraps the file in a template of its own."""
    import shutil
    chart = tmp_path / "prewarm"
    shutil.copytree(CHART, chart)
    text = (chart / "templates/NOTES.txt").read_text()
    (chart / "templates/NOTES.txt").unlink()
    (chart / "templates/_notes.tpl").write_text('{{- define "notes.check" -}}\n' + text + "\n{{- end }}\n")
    (chart / "templates/notes-check.yaml").write_text('notes: {{ include "notes.check" . | quote }}\n')
    exe = subprocess.run([str(REPO / "infra/tools.sh"), "helm"], capture_output=True, text=True, check=True).stdout.strip()
    out = subprocess.run([exe, "template", "prewarm", str(chart), "-n", "prewarm", "--show-only",
                          "templates/notes-check.yaml", *args], capture_output=True, text=True, check=True).stdout
    return yaml.safe_load(out)["notes"]


def test_notes_give_the_next_step(tmp_path):
    empty = notes(tmp_path)
    assert "values-examples.yaml" in empty, "no target yet: say how to add one"
    for out in (empty, notes(tmp_path / "b", "-f", str(EXAMPLES))):
        assert "TargetsConfigMap=prewarm/prewarm-targets" in out
        assert "TickKubernetesGroup=prewarm-tick" in out and "InterruptionKubernetesGroup=prewarm-interruption" in out
        assert "BalloonPriorityClass=prewarm-balloon" in out


def test_the_stacks_group_parameters_default_to_the_charts_groups(template):
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    params = template["Parameters"]
    assert params["TickKubernetesGroup"]["Default"] == values["groups"]["tick"]
    assert params["InterruptionKubernetesGroup"]["Default"] == values["groups"]["interruption"]
    entries = {n: r["Properties"] for n, r in template["Resources"].items() if r["Type"] == "AWS::EKS::AccessEntry"}
    assert entries["TickAccessEntry"]["KubernetesGroups"] == [{"Ref": "TickKubernetesGroup"}]
    assert entries["InterruptionAccessEntry"]["KubernetesGroups"] == [{"Ref": "InterruptionKubernetesGroup"}]


PSS_LABELS = ("pod-security.kubernetes.io/enforce=restricted",
              "pod-security.kubernetes.io/enforce-version=latest",
              "pod-security.kubernetes.io/warn=restricted",
              "pod-security.kubernetes.io/audit=restricted")


def test_notes_tell_to_enforce_restricted_on_every_headroom_namespace(tmp_path):
    """The chart does not create namespaces (`--create-namespace`, or the user's own): its notes
    give the label command for the namespaces that hold balloons and drain placeholders, so a
    stolen role cannot run a privileged pod there."""
    out = notes(tmp_path, "-f", str(EXAMPLES))
    line = next(l for l in out.splitlines() if l.strip().startswith("kubectl label namespace"))
    assert "prewarm" in line.split() and "--overwrite" in line
    for label in PSS_LABELS:
        assert label in line, label
    for doc in ("README.md", "docs/deploying.md", "infra/helm/prewarm/README.md"):
        text = (REPO / doc).read_text()
        for label in PSS_LABELS:
            assert label in text, (doc, label)


def test_every_pod_the_chart_shapes_for_headroom_is_restricted(sample):
    """Balloon pods and the CapacityBuffer's replica template comply with `restricted` (the
    namespaces that hold them enforce it); so does the restore hook's Job."""
    from pss import restricted_violations
    specs = {}
    for d in sample:
        if d["kind"] == "Deployment":
            specs[d["metadata"]["name"]] = d["spec"]["template"]["spec"]
        elif d["kind"] == "PodTemplate":
            specs[d["metadata"]["name"]] = d["template"]["spec"]
    assert {"balloon-llama", "mistral-replica"} <= set(specs), set(specs)
    for name, spec in specs.items():
        assert restricted_violations(spec) == [], name
        assert spec["securityContext"] == {"runAsNonRoot": True, "runAsUser": 65535,
                                           "runAsGroup": 65535,
                                           "seccompProfile": {"type": "RuntimeDefault"}}, name
