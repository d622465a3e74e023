"""Shared paths for the infra tests (template.yaml, infra/k8s, events/). A plain module with a
name of its own (not conftest.py): several test folders each have a conftest."""

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def crds_dir() -> Path | None:
    """The pinned Karpenter CRDs: $PREWARM_CRDS_DIR, else the copy the test stack vendors
    (tests/stack/crds), else ../shared/crds/karpenter-v1.14.1 beside the repository."""
    candidates = []
    if os.environ.get("PREWARM_CRDS_DIR"):
        candidates.append(Path(os.environ["PREWARM_CRDS_DIR"]))
    candidates.append(REPO / "tests" / "stack" / "crds")
    candidates.append(REPO.parent / "shared" / "crds" / "karpenter-v1.14.1")
    candidates.append(Path("/work/shared/crds/karpenter-v1.14.1"))
    for c in candidates:
        if c.is_dir() and any(c.glob("karpenter.sh_nodepools.yaml")):
            return c
    return None
