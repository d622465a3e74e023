#!/usr/bin/env bash
# Generates the PKI of the local control plane into .run/pki (skips when the CA exists):
# a CA, the apiserver serving certificate (127.0.0.1/localhost), the service-account key pair and
# client certificates (CN = user, O = group) for each component and for the Lambda user.
set -euo pipefail
source "$(dirname "$0")/common.sh"
pki=$RUN_DIR/pki
mkdir -p "$pki"
cd "$pki"
[[ -f ca.crt && -f sa.key && -f prewarm-lambda.crt && -f prewarm-interruption.crt && -f prewarm-restore.crt ]] && exit 0
log "generating certificates in $pki"

# EC P-256 keys in PKCS#8: accepted by Go, OpenSSL and rustls alike.
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1.key" 2>/dev/null; }

key ca
openssl req -x509 -new -key ca.key -days 3650 -subj "/CN=prewarm-test-ca" -out ca.crt \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null

# sign NAME SUBJECT EXTENSIONS
sign() {
  local name=$1 subj=$2 ext=$3
  key "$name"
  openssl req -new -key "$name.key" -subj "$subj" -out "$name.csr" 2>/dev/null
  printf '%b' "$ext" >"$name.ext"
  openssl x509 -req -in "$name.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 \
    -extfile "$name.ext" -out "$name.crt" 2>/dev/null
  rm -f "$name.csr" "$name.ext"
}
client_ext='basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n'
sign apiserver "/CN=kube-apiserver" \
  'basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1,IP:10.96.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local\n'
sign admin "/O=system:masters/CN=prewarm-admin" "$client_ext"
sign controller-manager "/CN=system:kube-controller-manager" "$client_ext"
sign scheduler "/CN=system:kube-scheduler" "$client_ext"
# Karpenter and kwok are test infrastructure, not under test: full rights keep them simple.
sign karpenter "/O=system:masters/CN=karpenter" "$client_ext"
sign kwok "/O=system:masters/CN=kwok" "$client_ext"
# Each function's own user: only what infra/k8s/rbac.yaml (the Helm chart's RBAC, rendered from
# infra/helm/prewarm/permissions.yaml) grants to that function's group.
sign prewarm-tick "/O=prewarm-tick/CN=prewarm-tick" "$client_ext"
sign prewarm-interruption "/O=prewarm-interruption/CN=prewarm-interruption" "$client_ext"
# `prewarm restore` (and the chart's pre-delete hook): the restore rows of permissions.yaml.
sign prewarm-restore "/O=prewarm-restore/CN=prewarm-restore" "$client_ext"
# The user the stack tests run both paths as: both functions' groups plus prewarm-stack-tests,
# which tests/stack/manifests/stack-tests-rbac.yaml lets write headroom objects of any name
# (tests create their own balloons; the chart grants the functions only the configured names).
sign prewarm-lambda "/O=prewarm-tick/O=prewarm-interruption/O=prewarm-stack-tests/CN=prewarm-lambda" "$client_ext"

# Service-account token signing key (RSA: the most widely verified JWT algorithm).
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out sa.key 2>/dev/null
openssl pkey -in sa.key -pubout -out sa.pub
chmod 600 ./*.key
