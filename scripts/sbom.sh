#!/usr/bin/env bash
# sbom.sh writes the CycloneDX SBOM (JSON, spec 1.6) of each binary the
# image holds, beside it: bin/image/linux-ARCH/sbom.cdx.json.
#
# `cyclonedx-gomod bin` reads the module graph from the binary's build
# info (what was linked, with go.sum hashes, the build tags, GOOS/GOARCH,
# the Go version); scripts/image/sbom then names the MCP Go SDK and fosite
# as the released versions go.mod requires with the patches of
# patches/go-sdk and patches/fosite as their pedigree (the build info
# records only the patched copies' paths).
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

# The patched modules (scripts/sdk-patch.sh): the folder of patches/ and
# the module path.
modules=(
	"go-sdk github.com/modelcontextprotocol/go-sdk"
	"fosite github.com/ory/fosite"
)
modfile="$(GO="$go" bash scripts/sdk-patch.sh)"
shopt -s nullglob
# One run of scripts/image/sbom per patched module, each with the path the
# generated go.mod replaces the module with, as the build info records it.
runs=()
for m in "${modules[@]}"; do
	read -r name mod <<<"$m"
	v="$("$go" list -m -f '{{.Version}}' "$mod")"
	patches=(patches/"$name"/"$v"-*.patch)
	((${#patches[@]} > 0)) || continue
	hash="$(awk -v m="$mod" -v v="$v" '$1 == m && $2 == v { print $3 }' go.sum)"
	[[ -n "$hash" ]] || die "go.sum has no hash for $mod $v"
	replaced="$("$go" list -modfile "$modfile" -m -f '{{with .Replace}}{{.Path}}{{end}}' "$mod")"
	[[ -n "$replaced" ]] || die "$modfile replaces $mod with no local copy"
	runs+=("-replaced $replaced -dir $name -module $mod -version $v -hash $hash ${patches[*]/#/$root/}")
done

found=0
for binary in "$image_dir"/*/portcullis; do
	out="$(dirname "$binary")/sbom.cdx.json"
	raw="$(mktemp)"
	"$tool" bin -json -noserial -notimestamp -version "$version" -output "$raw" "$binary"
	for r in "${runs[@]}"; do
		read -r -a args <<<"$r"
		(cd scripts/image && "$go" run ./sbom -in "$raw" -out "$raw.next" "${args[@]}")
		mv "$raw.next" "$raw"
	done
	mv "$raw" "$out"
	echo "$out"
	found=$((found + 1))
done
((found > 0)) || die "no binary under $image_dir/*/portcullis: run make image first"
