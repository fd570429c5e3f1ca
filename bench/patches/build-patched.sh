#!/usr/bin/env bash
# build-patched.sh builds bin/portcullis-patched: Portcullis exactly as
# `make build` builds it, but against a copy of the MCP Go SDK with the
# patches in this folder applied. The SDK is copied from the module cache
# into a temporary folder and patched there; the build uses a temporary
# go.mod (-modfile) with a replace to that copy, so the repository's go.mod,
# go.sum and module cache are left as they are.
#
# Usage: bench/patches/build-patched.sh OUTPUT [LDFLAGS]
set -euo pipefail

out="${1:?usage: build-patched.sh OUTPUT [LDFLAGS]}"
ldflags="${2:-}"
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
go="${GO:-go}"
cd "$repo_root"

sdk_mod="github.com/modelcontextprotocol/go-sdk"
sdk_version="$("$go" list -m -f '{{.Version}}' "$sdk_mod")"
sdk_dir="$("$go" mod download -json "$sdk_mod@$sdk_version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
[ -d "$sdk_dir" ] || { echo "build-patched: no module cache copy of $sdk_mod@$sdk_version" >&2; exit 1; }

tmp="$(mktemp -d)"
trap 'chmod -R u+w "$tmp"; rm -rf "$tmp"' EXIT
cp -r "$sdk_dir" "$tmp/go-sdk"
chmod -R u+w "$tmp/go-sdk"
shopt -s nullglob
patches=(bench/patches/go-sdk-"$sdk_version"-*.patch)
[ ${#patches[@]} -gt 0 ] || { echo "build-patched: no patch for $sdk_mod $sdk_version in bench/patches" >&2; exit 1; }
for p in "${patches[@]}"; do
	patch -s -p1 -d "$tmp/go-sdk" < "$p"
done
cp go.mod "$tmp/go.mod"
cp go.sum "$tmp/go.sum"
"$go" mod edit -modfile "$tmp/go.mod" -replace "$sdk_mod=$tmp/go-sdk"
CGO_ENABLED=0 "$go" build -modfile "$tmp/go.mod" -trimpath -ldflags "$ldflags" -o "$out" ./cmd/server
echo "build-patched: $out with ${patches[*]}"
