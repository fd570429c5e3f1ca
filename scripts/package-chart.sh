#!/usr/bin/env bash
# package-chart.sh packages the Helm chart for a release into bin/chart,
# pinned to an image digest: image.digest in the packaged values.yaml, so
# `helm install` of the package pulls exactly the image that was built,
# signed and attested, whatever the tag later points at.
#
# Usage: scripts/package-chart.sh DIGEST [VERSION]
#   DIGEST   sha256:… of the image index (bin/image/digest after make image)
#   VERSION  vX.Y.Z sets the chart's version X.Y.Z and appVersion vX.Y.Z;
#            anything else (a git describe between releases) keeps
#            Chart.yaml's.
#
# The repository's chart is not changed: a copy is edited. The script
# then renders the package and fails unless the Deployment's image is
# repository@DIGEST.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
helm="$root/.cache/bin/helm"
digest="${1:-}"
version="${2:-}"

die() { echo "package-chart: $*" >&2; exit 1; }

[[ -x "$helm" ]] || die "$helm missing: run make helm-tools"
[[ "$digest" =~ ^sha256:[a-f0-9]{64}$ ]] || die "DIGEST must be sha256:<64 hex digits>, not \"$digest\""

out="$root/bin/chart"
rm -rf "$out"
mkdir -p "$out"
cp -r helm/portcullis "$out/portcullis"
values="$out/portcullis/values.yaml"
# The one `digest: ""` line, under image: (values.schema.json allows "" or
# sha256:…); fail rather than package an unpinned chart.
[[ "$(grep -c '^  digest: ""$' "$values")" == 1 ]] || die "$values has no single '  digest: \"\"' line under image"
sed -i "s|^  digest: \"\"\$|  digest: \"$digest\"|" "$values"

args=(package "$out/portcullis" --destination "$out")
if [[ "$version" =~ ^v([0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?)$ ]]; then
	args+=(--version "${BASH_REMATCH[1]}" --app-version "$version")
fi
"$helm" "${args[@]}" >/dev/null
pkg="$(ls "$out"/portcullis-*.tgz)"
rm -rf "$out/portcullis"

image="$("$helm" template portcullis "$pkg" -f helm/portcullis/ci/minimal-values.yaml | sed -n 's/^ *image: "\(.*\)"$/\1/p' | head -n1)"
[[ "$image" == *"@$digest" ]] || die "the packaged chart's Deployment runs image \"$image\", not …@$digest"
echo "$pkg ($image)"
