#!/usr/bin/env bash
# install-otelcol.sh builds otelcol-portcullis, the OpenTelemetry Collector
# the observability end-to-end tests export spans to, from the builder
# manifest scripts/otelcol/builder-config.yaml (OTLP receiver over HTTP and
# gRPC, batch processor, OTLP/HTTP and debug exporters, file/env/yaml config
# providers).
#
# Usage: scripts/install-otelcol.sh
#
# Environment:
#   PORTCULLIS_BIN  install folder (default: <repo>/.cache/bin)
#   GO              go command to use (default: go on PATH)
#
# It installs the collector builder (ocb), pinned below, with `go install`
# into the same folder, generates the collector's sources in a temporary
# folder and compiles them there (about a minute on two cores). Only the
# Go module proxy is needed.
#
# It is idempotent: <folder>/otelcol-portcullis.stamp records the builder
# version and a hash of the manifest, and a second run with the same
# stamp only checks that the binary runs and reports the manifest's version.
# A collector built once is kept in the tools cache outside the checkout
# (scripts/lib/tool-cache.sh) under the same stamp and the Go toolchain,
# and copied from there by another clone.
set -euo pipefail

BUILDER_MODULE="go.opentelemetry.io/collector/cmd/builder"
BUILDER_VERSION="v0.150.0"

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin_dir="${PORTCULLIS_BIN:-$repo_root/.cache/bin}"
go_cmd="${GO:-go}"
manifest="$repo_root/scripts/otelcol/builder-config.yaml"
collector="$bin_dir/otelcol-portcullis"
builder="$bin_dir/builder"
stamp="$collector.stamp"

die() { echo "install-otelcol: $*" >&2; exit 1; }

[[ -f "$manifest" ]] || die "$manifest is missing"
want_version="$(sed -n 's/^  version: *//p' "$manifest")"
[[ -n "$want_version" ]] || die "$manifest has no dist.version"
want_stamp="$BUILDER_MODULE@$BUILDER_VERSION $(sha256sum "$manifest" | cut -d' ' -f1)"

# collector_version prints the version the built collector reports.
collector_version() { "$collector" --version 2>/dev/null | sed -n 's/.* version //p'; }

if [[ -f "$stamp" && "$(cat "$stamp")" == "$want_stamp" && -x "$collector" && "$(collector_version)" == "$want_version" ]]; then
	echo "otelcol-portcullis: $collector ($want_version, up to date)"
	exit 0
fi

command -v "$go_cmd" >/dev/null 2>&1 || die "$go_cmd not found: install Go (https://go.dev/dl/)"
mkdir -p "$bin_dir"
bin_dir="$(cd "$bin_dir" && pwd)"
collector="$bin_dir/otelcol-portcullis"
builder="$bin_dir/builder"
stamp="$collector.stamp"
rm -f "$stamp"

# shellcheck source=lib/tool-cache.sh
. "$repo_root/scripts/lib/tool-cache.sh"
key="$(tool_cache_key otelcol "$want_stamp")"
if tool_cache_get "$key" "$bin_dir" && [[ "$(collector_version)" == "$want_version" ]]; then
	echo "$want_stamp" >"$stamp"
	echo "otelcol-portcullis: $collector ($want_version, from the tools cache)"
	exit 0
fi

if [[ ! -x "$builder" ]] || ! "$builder" version 2>/dev/null | grep -qF "$BUILDER_VERSION"; then
	echo "install-otelcol: go install $BUILDER_MODULE@$BUILDER_VERSION into $bin_dir" >&2
	GOBIN="$bin_dir" "$go_cmd" install "$BUILDER_MODULE@$BUILDER_VERSION" >&2
fi

work="$(mktemp -d "${TMPDIR:-/tmp}/otelcol-portcullis-build.XXXXXX")"
trap 'rm -rf "$work"' EXIT
# The manifest's output_path is relative; build in the temporary folder.
sed "s|^  output_path: .*|  output_path: $work/src|" "$manifest" >"$work/builder-config.yaml"

echo "install-otelcol: building otelcol-portcullis $want_version (about a minute)" >&2
# CGO off: a static binary, like the server's; GOFLAGS from the caller's
# environment (e.g. -mod=vendor) must not leak into the generated module.
if ! (cd "$work" && CGO_ENABLED=0 GOFLAGS= GO="$go_cmd" "$builder" --config "$work/builder-config.yaml" --ldflags "-s -w" >"$work/build.log" 2>&1); then
	tail -40 "$work/build.log" >&2
	die "the collector build failed (log above)"
fi
install -m 0755 "$work/src/otelcol-portcullis" "$collector"

got="$(collector_version)"
[[ "$got" == "$want_version" ]] || die "$collector reports version '$got', want '$want_version'"
echo "$want_stamp" >"$stamp"
tool_cache_put "$key" "$collector"
echo "otelcol-portcullis: $collector ($got)"
