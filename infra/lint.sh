#!/usr/bin/env bash
# Lints everything the ecosystems' own linters check: Rust (fmt, clippy), the SAM template
# (cfn-lint with the serverless rules, sam validate --lint). Installs the Python tools into a
# venv of its own when they are missing. Run from anywhere; exits non-zero on the first failure.
#
#   infra/lint.sh            all checks
#   infra/lint.sh template   only the template checks (no Rust toolchain needed)
#   infra/lint.sh rust       only fmt + clippy
#   infra/lint.sh venv       only make sure the Python tools are installed
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${PREWARM_INFRA_VENV:-$HOME/.cache/prewarm/venv/infra}"
export SAM_CLI_TELEMETRY=0
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/prewarm/target}"
# sam validate needs a region; it never calls AWS for --lint.
export AWS_DEFAULT_REGION="${AWS_DEFAULT_REGION:-us-east-1}"

# Pinned so that a new linter release cannot turn a green build red overnight.
# pytest runs tests/infra (infra/test.sh); cfn-lint brings pyyaml and jsonschema, which they use.
PY_TOOLS=(aws-sam-cli==1.170.0 cfn-lint==1.58.0 cfn-lint-serverless==0.3.6 pytest==8.4.2)

step() { printf '\n==> %s\n' "$*"; }

ensure_venv() {
  if [[ -x "$VENV/bin/sam" && -x "$VENV/bin/cfn-lint" ]] && "$VENV/bin/python" -c 'import cfn_lint_serverless, pytest, jsonschema, yaml' 2>/dev/null; then
    return
  fi
  step "installing ${PY_TOOLS[*]} into $VENV"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --upgrade pip
  "$VENV/bin/pip" install --quiet "${PY_TOOLS[@]}"
}

lint_rust() {
  cd "$ROOT"
  step "cargo fmt --check"
  cargo fmt --all -- --check
  step "cargo clippy --all-targets -- -D warnings"
  cargo clippy --all-targets -- -D warnings
}

lint_template() {
  ensure_venv
  cd "$ROOT"
  step "cfn-lint template.yaml (serverless rules, informational checks too)"
  # Suppressions live in the template's Metadata, each with its reason.
  "$VENV/bin/cfn-lint" template.yaml -a cfn_lint_serverless.rules --include-checks I
  step "sam validate --lint"
  "$VENV/bin/sam" validate --lint --template template.yaml --region "$AWS_DEFAULT_REGION"
}

case "${1:-all}" in
  rust) lint_rust ;;
  template) lint_template ;;
  all) lint_rust; lint_template ;;
  venv) ensure_venv; exit 0 ;;
  *) echo "usage: $0 [all|rust|template|venv]" >&2; exit 2 ;;
esac
step "lint ok"
