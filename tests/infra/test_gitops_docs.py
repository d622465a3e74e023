"""The GitOps snippets in docs/deploying.md (Argo CD ignoreDifferences, Flux drift detection) are
valid YAML and name exactly the NodePool fields prewarm writes: the pointers listed in
src/adapters/kube/nodepool/paths.rs, which a Rust test checks against every NodePool patch the
code builds."""

import re

import yaml

from infra_paths import REPO

DOC = REPO / "docs/deploying.md"
WRITTEN = REPO / "src/adapters/kube/nodepool/paths.rs"


def snippet(marker: str) -> dict:
    text = DOC.read_text()
    m = re.search(rf"<!-- gitops: {re.escape(marker)} -->\n```yaml\n(.*?)```", text, re.S)
    assert m, f"no yaml block after <!-- gitops: {marker} --> in {DOC.name}"
    return yaml.safe_load(m.group(1))


def written_pointers() -> set[str]:
    m = re.search(r"NODE_POOL_WRITTEN_POINTERS: \[&str; \d+\] =\s*\[(.*?)\];", WRITTEN.read_text(), re.S)
    assert m, "NODE_POOL_WRITTEN_POINTERS not found"
    pointers = set(re.findall(r'"([^"]+)"', m.group(1)))
    assert pointers, "empty NODE_POOL_WRITTEN_POINTERS"
    return pointers


def test_argo_cd_ignores_exactly_the_node_pool_fields_prewarm_writes():
    spec = snippet("argo-cd")["spec"]
    pools = [e for e in spec["ignoreDifferences"]
             if (e["group"], e["kind"]) == ("karpenter.sh", "NodePool")]
    assert len(pools) == 1
    assert set(pools[0]["jsonPointers"]) == written_pointers()
    # Without it a sync still writes the ignored fields back.
    assert "RespectIgnoreDifferences=true" in spec["syncPolicy"]["syncOptions"]


def test_flux_ignores_exactly_the_node_pool_fields_prewarm_writes():
    drift = snippet("flux-helmrelease")["spec"]["driftDetection"]
    assert drift["mode"] == "enabled"
    pools = [r for r in drift["ignore"]
             if r["target"] == {"group": "karpenter.sh", "kind": "NodePool"}]
    assert len(pools) == 1
    assert set(pools[0]["paths"]) == written_pointers()
