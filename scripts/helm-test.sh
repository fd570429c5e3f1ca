#!/usr/bin/env bash
# `make helm-test`: the chart's helm-unittest suites, then every scenario in
# helm/portcullis/ci rendered and validated by kubeconform in strict mode
# against the local schemas (scripts/install-helm-tools.sh), then a check
# that kubeconform really fails on broken manifests.
#
# kubeconform reports success when it validated nothing (a file it does not
# read, a schema it cannot find with -ignore-missing-schemas), so each run's
# summary is checked: every rendered resource must be counted as valid.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="$root/.cache/bin"
chart="$root/helm/portcullis"
schemas="$root/.cache/kube-schemas"
KUBERNETES_VERSION=1.32.13 # keep in step with scripts/install-helm-tools.sh

for tool in helm helm-unittest kubeconform; do
	[[ -x "$bin/$tool" ]] || { echo "helm-test: $bin/$tool is missing: run make helm-tools" >&2; exit 1; }
done
[[ -d "$schemas/v$KUBERNETES_VERSION-standalone-strict" ]] || { echo "helm-test: no schemas in $schemas: run make helm-tools" >&2; exit 1; }

echo "== helm-unittest"
"$bin/helm-unittest" --color=false "$chart"

kubeconform() {
	"$bin/kubeconform" -strict -summary \
		-kubernetes-version "$KUBERNETES_VERSION" \
		-schema-location "$schemas/{{ .NormalizedKubernetesVersion }}-standalone{{ .StrictSuffix }}/{{ .ResourceKind }}{{ .KindSuffix }}.json" \
		"$@"
}

# summary TEXT N succeeds when kubeconform's summary line says N resources,
# all valid.
all_valid() {
	grep -qE "^Summary: $2 resources? found .* Valid: $2, Invalid: 0, Errors: 0, Skipped: 0$" <<<"$1"
}

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
failed=0
for values in "$chart"/ci/*-values.yaml; do
	scenario="$(basename "$values" -values.yaml)"
	out="$tmp/$scenario.yaml"
	"$bin/helm" template portcullis "$chart" --namespace portcullis -f "$values" >"$out"
	want="$(grep -c '^kind: ' "$out")"
	if report="$(kubeconform "$out" 2>&1)" && [[ "$want" -gt 0 ]] && all_valid "$report" "$want"; then
		echo "== kubeconform $scenario: $want resources valid"
	else
		echo "== kubeconform $scenario: FAILED (want $want valid resources)"
		echo "$report"
		failed=1
	fi
done

# The plain manifests `make manifests` generates.
manifests=()
for f in "$root"/deploy/k8s/*.yaml; do
	case "$(basename "$f")" in values.yaml | kustomization.yaml) ;; *) manifests+=("$f") ;; esac
done
want="$(cat "${manifests[@]}" | grep -c '^kind: ')"
if report="$(kubeconform "${manifests[@]}" 2>&1)" && [[ "$want" -gt 0 ]] && all_valid "$report" "$want"; then
	echo "== kubeconform deploy/k8s: $want resources valid"
else
	echo "== kubeconform deploy/k8s: FAILED (want $want valid resources)"
	echo "$report"
	failed=1
fi

for broken in "$chart"/tests/kubeconform/*.yaml; do
	if report="$(kubeconform "$broken" 2>&1)"; then
		echo "== kubeconform $(basename "$broken"): passed, but it is broken and must fail:"
		echo "$report"
		failed=1
	elif grep -qE "Invalid: [1-9]|Errors: [1-9]" <<<"$report"; then
		echo "== kubeconform $(basename "$broken"): rejected, as it must be"
	else
		echo "== kubeconform $(basename "$broken"): failed without reporting the resource invalid:"
		echo "$report"
		failed=1
	fi
done
exit "$failed"
