#!/usr/bin/env bash
# Installs the cluster-side tools the infra checks use into $HOME/.cache/prewarm/bin (idempotent),
# built from the Go module proxy so a fresh machine or CI needs only the Go toolchain:
#   helm   helm lint / helm template / the chart's server-side dry run (infra/helm/prewarm)
# Prints the path of the tool asked for:  infra/tools.sh helm
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

case "${1:-}" in
  helm) helm_bin ;;
  *) echo "usage: $0 helm" >&2; exit 2 ;;
esac
