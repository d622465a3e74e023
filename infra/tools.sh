#!/usr/bin/env bash
# Installs the tools building, checking and deploying need (idempotent), nothing of the test stack:
#   helm    into $HOME/.cache/prewarm/bin, built from the Go module proxy (a fresh machine or CI
#           needs only the Go toolchain): helm lint / template, the chart's dry run
#   lambda  the venv $HOME/.cache/prewarm/venv/lambda: cargo-lambda and zig (the arm64 build of
#           `make build` / `make deploy`); pinned in tests/stack/versions.env
# Prints the path of the tool asked for:  infra/tools.sh helm | infra/tools.sh lambda
set -euo pipefail
HELM_VERSION=v3.19.2
BIN="${PREWARM_CACHE:-$HOME/.cache/prewarm}/bin"
mkdir -p "$BIN"
log() { echo "[tools $(date -u +%T)] $*" >&2; }

helm_bin() {
  local want="$BIN/helm-$HELM_VERSION"
  if [[ ! -x $want ]]; then
    log "building helm $HELM_VERSION from the Go module proxy (a few minutes, once)"
    local tmp; tmp=$(mktemp -d)
    GOBIN="$tmp" CGO_ENABLED=0 go install "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
    mv "$tmp/helm" "$want"
    rmdir "$tmp"
  fi
  echo "$want"
}

# The lambda venv, recreated when its pinned package set changed (the stamp is the one
# tests/stack/install used to write, so an existing venv is kept).
lambda_venv() {
  local root dir want
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
  # shellcheck source=../tests/stack/versions.env
  source "$root/tests/stack/versions.env"
  dir="${PREWARM_CACHE:-$HOME/.cache/prewarm}/venv/lambda"
  local pkgs=("cargo-lambda==$CARGO_LAMBDA_VERSION" "ziglang==$ZIGLANG_VERSION")
  want=$(printf '%s\n' "${pkgs[@]}" | sort | sha256sum | cut -c1-16)
  if [[ ! -f $dir/.prewarm-stamp || $(cat "$dir/.prewarm-stamp") != "$want" ]]; then
    log "creating venv lambda: ${pkgs[*]}"
    rm -rf "$dir"
    python3 -m venv "$dir"
    "$dir/bin/pip" install -q --disable-pip-version-check "${pkgs[@]}"
    echo "$want" >"$dir/.prewarm-stamp"
  fi
  echo "$dir/bin"
}

case "${1:-}" in
  helm) helm_bin ;;
  lambda) lambda_venv ;;
  *) echo "usage: $0 helm|lambda" >&2; exit 2 ;;
esac
