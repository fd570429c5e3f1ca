#!/usr/bin/env bash
# sdk-patch.sh prepares the module files the shipped binary is built with:
# a copy of each patched dependency at the version go.mod requires, with
# its patches applied (the MCP Go SDK with patches/go-sdk, ory/fosite with
# patches/fosite), and a go.mod/go.sum pair that replaces each by its copy.
# It prints the path of that go.mod, for `go build -modfile`.
#
# The repository's go.mod, go.sum and the module cache are never changed:
# `go install …@version` and modules that import Portcullis as a library get
# the modules as released (a replace in go.mod would break the first and be
# ignored by the second). See patches/README.md.
#
# The copies are rebuilt only when a version, a patch, go.mod, go.sum or
# this script changes, so repeated builds reuse Go's build cache.
#
# Usage: scripts/sdk-patch.sh [DIR]   (default: .cache/sdk-patched)
# Writes DIR/go.mod, DIR/go.sum and, for each patched module, DIR/NAME/ (the
# patched copy) and DIR/NAME.patches (the applied patches' names,
# comma-separated, for the version stamp).
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"
dir="${1:-$repo_root/.cache/sdk-patched}"
go="${GO:-go}"

# make test runs stages side by side, several of which call this script:
# one at a time checks the stamp and, if need be, rebuilds the copies, so
# that none reads a copy another is rebuilding.
mkdir -p "$(dirname "$dir")"
exec 9>"$dir.lock"
flock 9

# The patched modules: the folder of patches/ and the module path.
modules=(
	"go-sdk github.com/modelcontextprotocol/go-sdk"
	"fosite github.com/ory/fosite"
)

shopt -s nullglob
declare -A version mine
stamp_input="$(cat "${BASH_SOURCE[0]}" go.mod go.sum)"
for m in "${modules[@]}"; do
	read -r name mod <<<"$m"
	v="$("$go" list -m -f '{{.Version}}' "$mod")"
	version[$name]="$v"
	all=(patches/"$name"/*.patch)
	these=(patches/"$name"/"$v"-*.patch)
	if [ ${#all[@]} -gt 0 ] && [ ${#these[@]} -eq 0 ]; then
		{
			echo "sdk-patch: go.mod requires $mod $v, but patches/$name has patches for other versions only:"
			printf '  %s\n' "${all[@]}"
			echo "Rebase them onto $v (name them $v-NAME.patch), or delete those that $v makes unnecessary (patches/README.md)."
		} >&2
		exit 1
	fi
	mine[$name]="${these[*]}"
	stamp_input+="$mod $v"
	for p in "${these[@]}"; do stamp_input+="$p$(cat "$p")"; done
done

stamp="$(printf '%s' "$stamp_input" | sha256sum | cut -d' ' -f1)"
if [ -f "$dir/stamp" ] && [ "$(cat "$dir/stamp")" = "$stamp" ]; then
	echo "$dir/go.mod"
	exit 0
fi

rm -rf "$dir"
mkdir -p "$dir"
cp go.mod "$dir/go.mod"
cp go.sum "$dir/go.sum"
for m in "${modules[@]}"; do
	read -r name mod <<<"$m"
	v="${version[$name]}"
	read -r -a these <<<"${mine[$name]}"
	names=()
	if [ ${#these[@]} -gt 0 ]; then
		command -v patch >/dev/null 2>&1 || { echo "sdk-patch: patch(1) is needed to apply patches/$name (Debian: apt-get install patch)" >&2; exit 1; }
		# go mod download verifies the module against go.sum before we copy it.
		src="$("$go" mod download -json "$mod@$v" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
		[ -d "$src" ] || { echo "sdk-patch: no module cache copy of $mod@$v" >&2; exit 1; }
		cp -r "$src" "$dir/$name"
		chmod -R u+w "$dir/$name"
		for p in "${these[@]}"; do
			if ! out="$(patch --batch --forward -p1 -d "$dir/$name" < "$p" 2>&1)"; then
				echo "sdk-patch: $p does not apply to $mod $v:" >&2
				echo "$out" >&2
				rm -rf "$dir"
				exit 1
			fi
			n="$(basename "$p" .patch)"
			names+=("${n#"$v"-}")
		done
		# A folder inside the repository is named relative to it (Go resolves
		# a relative replacement against the main module's root, -modfile or
		# not): the binary's build info records the path, and an absolute one
		# would make the build, and so the image's digest, depend on where the
		# repository is checked out.
		replacement="$dir/$name"
		case "$replacement" in
		"$repo_root"/*) replacement="./${replacement#"$repo_root"/}" ;;
		esac
		"$go" mod edit -modfile "$dir/go.mod" -replace "$mod=$replacement"
	fi
	(IFS=,; echo "${names[*]}") > "$dir/$name.patches"
done
echo "$stamp" > "$dir/stamp"
echo "$dir/go.mod"
