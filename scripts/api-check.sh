#!/usr/bin/env bash
# api-check.sh compares the public API of this checkout with the API at the
# commit recorded in api/base, prints every change, and fails on an
# incompatible one (a removed name, a changed signature…).
#
# Usage: scripts/api-check.sh
#
# Environment:
#   PORTCULLIS_BIN  where install-apidiff.sh put apidiff (default: <repo>/.cache/bin)
#
# The packages compared are those the root package's doc calls stable: the
# root package itself, auth and tools. The base is taken with git archive
# (no worktree, no checkout): the clone needs the base commit in its
# history. To accept an incompatible change on purpose, or at a release,
# move the base (see api/base).
set -euo pipefail

PACKAGES=(
	github.com/portcullis-mcp/portcullis
	github.com/portcullis-mcp/portcullis/auth
	github.com/portcullis-mcp/portcullis/tools
)

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin_dir="${PORTCULLIS_BIN:-$repo_root/.cache/bin}"
apidiff="$bin_dir/apidiff"

die() { echo "api-check: $*" >&2; exit 1; }

[[ -x "$apidiff" ]] || die "$apidiff is missing: run make api-tools (scripts/install-apidiff.sh)"
base="$(grep -v '^[[:space:]]*\(#\|$\)' "$repo_root/api/base" | head -n1 | tr -d '[:space:]')"
[[ "$base" =~ ^[0-9a-f]{40}$ ]] || die "api/base holds no commit hash (want 40 hex digits, got \"$base\")"
git -C "$repo_root" cat-file -e "$base^{commit}" 2>/dev/null ||
	die "api/base names $base, which this clone does not have: fetch more history (git fetch --unshallow)"

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/base"
git -C "$repo_root" archive "$base" | tar -x -C "$tmp/base"

failed=0
for pkg in "${PACKAGES[@]}"; do
	name="${pkg//\//_}"
	# apidiff -w reads the module of the folder it runs in.
	(cd "$tmp/base" && "$apidiff" -w "$tmp/$name.old" "$pkg") ||
		die "$pkg at $base: apidiff -w failed"
	(cd "$repo_root" && "$apidiff" -w "$tmp/$name.new" "$pkg") || die "$pkg: apidiff -w failed"
	changes="$("$apidiff" "$tmp/$name.old" "$tmp/$name.new")"
	incompatible="$("$apidiff" -incompatible "$tmp/$name.old" "$tmp/$name.new")"
	if [[ -z "$changes" ]]; then
		echo "$pkg: no API change since ${base:0:12}"
		continue
	fi
	echo "$pkg: API changes since ${base:0:12}:"
	sed 's/^/  /' <<<"$changes"
	if [[ -n "$incompatible" ]]; then
		failed=1
	fi
done
if ((failed)); then
	die "incompatible API changes (above) since api/base ${base:0:12}: keep the old names working, or, if the break is deliberate, move api/base (see its comment)"
fi
