"""Shared paths for the infra tests (template.yaml, infra/k8s, events/). A plain module with a
name of its own (not conftest.py): several test folders each have a conftest."""

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def crds_dir() -> Path | None:
    """The pinned Karpenter CRDs: $PREWARM_CRDS_DIR, else ../shared/crds/karpenter-v1.14.1 beside
    the repository (where the workplace and CI lay them)."""
    candidates = []
    if os.environ.get("PREWARM_CRDS_DIR"):
        candidates.append(Path(os.environ["PREWARM_CRDS_DIR"]))
    candidates.append(REPO.parent / "shared" / "crds" / "karpenter-v1.14.1")
    candidates.append(Path("/work/shared/crds/karpenter-v1.14.1"))
    for c in candidates:
        if c.is_dir():
            return c
    return None
