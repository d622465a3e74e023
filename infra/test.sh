#!/usr/bin/env bash
# Runs the infra tests (tests/infra: template least privilege and wiring, sample events, k8s
# manifests against the pinned Karpenter CRD schemas) and the scripts' tests (scripts/test_*.py:
# how goals.py scores) in the infra venv, installing it if needed.
# Extra arguments go to pytest.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${PREWARM_INFRA_VENV:-$HOME/.cache/prewarm/venv/infra}"
"$ROOT/infra/lint.sh" venv
# helm for the chart tests (built once from the Go module proxy into ~/.cache/prewarm/bin).
"$ROOT/infra/tools.sh" helm >/dev/null
cd "$ROOT"
exec "$VENV/bin/python" -m pytest -q tests/infra scripts/test_goals.py "$@"
