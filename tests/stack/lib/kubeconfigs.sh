#!/usr/bin/env bash
# Writes one kubeconfig per client certificate into .run/kubeconfig/<name>.yaml (data embedded,
# so the files work from any directory and with any client library).
set -euo pipefail
source "$(dirname "$0")/common.sh"
pki=$RUN_DIR/pki
out=$RUN_DIR/kubeconfig
mkdir -p "$out"
b64() { base64 -w0 <"$1"; }
for name in admin controller-manager scheduler karpenter kwok prewarm-lambda prewarm-tick prewarm-interruption prewarm-restore; do
  cat >"$out/$name.yaml" <<YAML
apiVersion: v1
kind: Config
clusters:
- name: prewarm-test
  cluster:
    server: https://127.0.0.1:16443
    certificate-authority-data: $(b64 "$pki/ca.crt")
users:
- name: $name
  user:
    client-certificate-data: $(b64 "$pki/$name.crt")
    client-key-data: $(b64 "$pki/$name.key")
contexts:
- name: $name@prewarm-test
  context:
    cluster: prewarm-test
    user: $name
current-context: $name@prewarm-test
YAML
done
