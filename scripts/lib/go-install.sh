# go-install.sh is sourced by the install-*.sh scripts that build a tool
# from the Go module proxy into the tools folder.
#
# go_install_pinned BIN NAME MODULE PACKAGE VERSION builds PACKAGE at
# VERSION (of MODULE) into BIN/NAME with go install, unless BIN/NAME was
# already built from that version: the build info Go stamps into every
# binary says so, so a second run takes well under a second and a changed
# pin rebuilds. GOFLAGS is cleared (the repository's own flags are not for
# a tool) and GO names the go command (default go). A failed install is a
# failure, never a skip. A build is kept in the tools cache outside the
# checkout (scripts/lib/tool-cache.sh) and copied from there next time.

# shellcheck source=tool-cache.sh
. "$(dirname "${BASH_SOURCE[0]}")/tool-cache.sh"

go_install_pinned() {
	local bin=$1 name=$2 module=$3 pkg=$4 version=$5
	local go_cmd="${GO:-go}"
	command -v "$go_cmd" >/dev/null 2>&1 || { echo "$name: $go_cmd not found: install Go (https://go.dev/dl/)" >&2; return 1; }
	if [[ -x "$bin/$name" ]] && "$go_cmd" version -m "$bin/$name" 2>/dev/null |
		grep -qE "^[[:space:]]+mod[[:space:]]+$module[[:space:]]+$version([[:space:]]|$)"; then
		echo "$name: $bin/$name ($version, up to date)"
		return 0
	fi
	mkdir -p "$bin"
	local key
	key="$(tool_cache_key go-install "$name" "$pkg@$version")"
	if tool_cache_get "$key" "$bin"; then
		echo "$name: $bin/$name ($version, from the tools cache)"
		return 0
	fi
	echo "$name: building $pkg@$version"
	GOBIN="$bin" GOFLAGS= "$go_cmd" install "$pkg@$version" || { echo "$name: go install $pkg@$version failed" >&2; return 1; }
	[[ -x "$bin/$name" ]] || { echo "$name: go install did not produce $bin/$name" >&2; return 1; }
	tool_cache_put "$key" "$bin/$name"
}
