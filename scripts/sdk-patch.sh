#!/usr/bin/env bash
# sdk-patch.sh prepares the module files the shipped binary is built with:
# a copy of the MCP Go SDK that go.mod requires, with the patches in
# patches/go-sdk applied, and a go.mod/go.sum pair that replaces the SDK by
# that copy. It prints the path of that go.mod, for `go build -modfile`.
#
# The repository's go.mod, go.sum and the module cache are never changed:
# `go install …@version` and modules that import Portcullis as a library get
# the SDK as released (a replace in go.mod would break the first and be
# ignored by the second). See patches/README.md.
#
# The copy is rebuilt only when the SDK version, a patch, go.mod, go.sum or
# this script changes, so repeated builds reuse Go's build cache.
#
# Usage: scripts/sdk-patch.sh [DIR]   (default: .cache/sdk-patched)
# Writes DIR/go.mod, DIR/go.sum, DIR/go-sdk/ and DIR/patches (the applied
# patches' names, comma-separated, for the version stamp).
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"
dir="${1:-$repo_root/.cache/sdk-patched}"
go="${GO:-go}"

sdk_mod="github.com/modelcontextprotocol/go-sdk"
sdk_version="$("$go" list -m -f '{{.Version}}' "$sdk_mod")"

shopt -s nullglob
all=(patches/go-sdk/*.patch)
mine=(patches/go-sdk/"$sdk_version"-*.patch)
if [ ${#all[@]} -gt 0 ] && [ ${#mine[@]} -eq 0 ]; then
	{
		echo "sdk-patch: go.mod requires $sdk_mod $sdk_version, but patches/go-sdk has patches for other versions only:"
		printf '  %s\n' "${all[@]}"
		echo "Rebase them onto $sdk_version (name them $sdk_version-NAME.patch), or delete those that $sdk_version makes unnecessary (patches/README.md)."
	} >&2
	exit 1
fi

stamp="$({ echo "$sdk_version"; cat "${BASH_SOURCE[0]}" go.mod go.sum; for p in "${mine[@]}"; do echo "$p"; cat "$p"; done; } | sha256sum | cut -d' ' -f1)"
if [ -f "$dir/stamp" ] && [ "$(cat "$dir/stamp")" = "$stamp" ]; then
	echo "$dir/go.mod"
	exit 0
fi

rm -rf "$dir"
mkdir -p "$dir"
cp go.mod "$dir/go.mod"
cp go.sum "$dir/go.sum"
names=()
if [ ${#mine[@]} -gt 0 ]; then
	command -v patch >/dev/null 2>&1 || { echo "sdk-patch: patch(1) is needed to apply patches/go-sdk (Debian: apt-get install patch)" >&2; exit 1; }
	# go mod download verifies the module against go.sum before we copy it.
	sdk_dir="$("$go" mod download -json "$sdk_mod@$sdk_version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
	[ -d "$sdk_dir" ] || { echo "sdk-patch: no module cache copy of $sdk_mod@$sdk_version" >&2; exit 1; }
	cp -r "$sdk_dir" "$dir/go-sdk"
	chmod -R u+w "$dir/go-sdk"
	for p in "${mine[@]}"; do
		if ! out="$(patch --batch --forward -p1 -d "$dir/go-sdk" < "$p" 2>&1)"; then
			echo "sdk-patch: $p does not apply to $sdk_mod $sdk_version:" >&2
			echo "$out" >&2
			rm -rf "$dir"
			exit 1
		fi
		name="$(basename "$p" .patch)"
		names+=("${name#"$sdk_version"-}")
	done
	# A folder inside the repository is named relative to it (Go resolves a
	# relative replacement against the main module's root, -modfile or not):
	# the binary's build info records the path, and an absolute one would
	# make the build, and so the image's digest, depend on where the
	# repository is checked out.
	replacement="$dir/go-sdk"
	case "$replacement" in
	"$repo_root"/*) replacement="./${replacement#"$repo_root"/}" ;;
	esac
	"$go" mod edit -modfile "$dir/go.mod" -replace "$sdk_mod=$replacement"
fi
(IFS=,; echo "${names[*]}") > "$dir/patches"
echo "$stamp" > "$dir/stamp"
echo "$dir/go.mod"
