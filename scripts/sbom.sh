#!/usr/bin/env bash
# sbom.sh writes the CycloneDX SBOM (JSON, spec 1.6) of each binary the
# image holds, beside it: bin/image/linux-ARCH/sbom.cdx.json.
#
# `cyclonedx-gomod bin` reads the module graph from the binary's build
# info (what was linked, with go.sum hashes, the build tags, GOOS/GOARCH,
# the Go version); scripts/image/sbom then names the MCP Go SDK as the
# released version go.mod requires with the patches of patches/go-sdk as
# its pedigree (the build info records only the patched copy's path).
# No serial number and no timestamp: the same binary gives the same SBOM.
#
# Usage: scripts/sbom.sh [IMAGE_DIR]   (default: bin/image, after make image)
# Environment: VERSION (the main component's version; default git describe).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
image_dir="$(cd "${1:-bin/image}" && pwd)"
tool="$root/.cache/bin/cyclonedx-gomod"
go="${GO:-go}"

die() { echo "sbom: $*" >&2; exit 1; }

[[ -x "$tool" ]] || die "$tool missing: run make release-tools (scripts/install-release-tools.sh)"
version="${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}"

sdk_mod="github.com/modelcontextprotocol/go-sdk"
sdk_version="$("$go" list -m -f '{{.Version}}' "$sdk_mod")"
sdk_hash="$(awk -v m="$sdk_mod" -v v="$sdk_version" '$1 == m && $2 == v { print $3 }' go.sum)"
[[ -n "$sdk_hash" ]] || die "go.sum has no hash for $sdk_mod $sdk_version"
# The path the generated go.mod replaces the SDK with, as the build info
# records it (scripts/sdk-patch.sh).
modfile="$(GO="$go" bash scripts/sdk-patch.sh)"
replaced="$("$go" mod edit -modfile "$modfile" -json | sed -n 's/.*"Path": "\(\.[^"]*\)".*/\1/p' | head -n1)"
[[ -n "$replaced" ]] || die "$modfile replaces $sdk_mod with no local copy"
shopt -s nullglob
patches=("$root"/patches/go-sdk/"$sdk_version"-*.patch)

found=0
for binary in "$image_dir"/*/portcullis; do
	out="$(dirname "$binary")/sbom.cdx.json"
	raw="$(mktemp)"
	"$tool" bin -json -noserial -notimestamp -version "$version" -output "$raw" "$binary"
	(cd scripts/image && "$go" run ./sbom -in "$raw" -out "$out" -replaced "$replaced" \
		-module "$sdk_mod" -version "$sdk_version" -hash "$sdk_hash" "${patches[@]}")
	rm -f "$raw"
	echo "$out"
	found=$((found + 1))
done
((found > 0)) || die "no binary under $image_dir/*/portcullis: run make image first"
