#!/usr/bin/env bash
# What a release page carries, from the artifact `sam build` made (.aws-sam/build, the same
# aarch64 bootstrap tests/build checks):
#   prewarm-VERSION-arm64.zip   the Lambda code: `bootstrap` alone (both functions run it)
#   prewarm-VERSION.yaml        the template, pointing at the zip (scripts/release_template.py)
#   prewarm-chart-VERSION.tgz   the Helm chart (RBAC, targets ConfigMap, balloons)
#   SHA256SUMS                  `sha256sum -c SHA256SUMS` in the folder checks all three
# usage: scripts/release.sh VERSION OUT_DIR   (make release VERSION=x.y.z [SOURCE_URL=https://...])
# SOURCE_URL (environment): the repository the release is published from, written into the
# template's Serverless Application Repository metadata (HomePageUrl, SourceCodeUrl).
set -euo pipefail
cd "$(dirname "$0")/.."
version=${1:?usage: scripts/release.sh VERSION OUT_DIR}
out=${2:?usage: scripts/release.sh VERSION OUT_DIR}
# sam build writes one folder per function, or one shared folder (`TickFunction-Shared`) when
# both build alike: every bootstrap it made must be the same binary, so one zip serves both.
shopt -s nullglob
built=(.aws-sam/build/*/bootstrap)
((${#built[@]})) || { echo "release: no .aws-sam/build/*/bootstrap: run sam build first" >&2; exit 1; }
bootstrap=${built[0]}
for other in "${built[@]}"; do
  cmp -s "$bootstrap" "$other" \
    || { echo "release: $bootstrap and $other differ; one zip cannot serve both functions" >&2; exit 1; }
done

rm -rf "$out" && mkdir -p "$out"
out=$(cd "$out" && pwd)
zip_name="prewarm-$version-arm64.zip"
python3 scripts/release_template.py template.yaml "$version" "$zip_name" ${SOURCE_URL:+"$SOURCE_URL"} \
  >"$out/prewarm-$version.yaml"

# A zip whose only entry is `bootstrap`, executable (Lambda's custom runtime runs it), with a
# fixed timestamp so that two releases of one tree differ only where the binary does.
python3 - "$bootstrap" "$out/$zip_name" <<'PY'
import sys, zipfile
src, dst = sys.argv[1:]
info = zipfile.ZipInfo("bootstrap", date_time=(1980, 1, 1, 0, 0, 0))
info.external_attr = (0o100755 << 16)
info.compress_type = zipfile.ZIP_DEFLATED
with open(src, "rb") as f, zipfile.ZipFile(dst, "w") as z:
    z.writestr(info, f.read(), compresslevel=9)
PY

helm=$(infra/tools.sh helm)
"$helm" package infra/helm/prewarm --version "$version" --app-version "$version" -d "$out" >/dev/null
mv "$out/prewarm-$version.tgz" "$out/prewarm-chart-$version.tgz"

(cd "$out" && sha256sum "$zip_name" "prewarm-$version.yaml" "prewarm-chart-$version.tgz" >SHA256SUMS)
echo "release $version in $out:"
(cd "$out" && ls -l | tail -n +2)
