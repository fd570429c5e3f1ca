# tool-cache.sh is sourced by the install-*.sh scripts that build a tool
# from source. It keeps what they build in a cache outside the checkout,
# under a key naming everything the build depends on (the tool, its
# version, its build settings, the Go toolchain), so that another clone
# on the same machine, or the next run after `make clean`, copies the
# tool instead of building it again. CI's fresh machines start with an
# empty cache and build.
#
# The cache is PORTCULLIS_TOOLS_CACHE, by default
# ${XDG_CACHE_HOME:-~/.cache}/portcullis-tools; PORTCULLIS_TOOLS_CACHE=off
# turns it off. Each key is a folder, written whole or not at all.
#
# tool_cache_key PART... prints a key: the parts and the Go toolchain
# (version, GOOS, GOARCH), hashed.
# tool_cache_get KEY DEST copies the key's files into the folder DEST and
# succeeds, or fails when the cache has no such key.
# tool_cache_put KEY FILE... stores the files under the key.

tool_cache_dir() {
	local dir="${PORTCULLIS_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/portcullis-tools}"
	[[ "$dir" != off ]] || return 1
	echo "$dir"
}

tool_cache_key() {
	local go_cmd="${GO:-go}"
	printf '%s\n' "$@" "$("$go_cmd" env GOVERSION GOOS GOARCH)" | sha256sum | cut -c1-32
}

tool_cache_get() {
	local key=$1 dest=$2 dir
	dir="$(tool_cache_dir)" || return 1
	[[ -d "$dir/$key" ]] || return 1
	mkdir -p "$dest"
	cp -pR "$dir/$key/." "$dest/"
}

tool_cache_put() {
	local key=$1 dir tmp
	shift
	dir="$(tool_cache_dir)" || return 0
	mkdir -p "$dir" || return 0
	[[ -d "$dir/$key" ]] && return 0
	tmp="$(mktemp -d "$dir/.put.XXXXXX")" || return 0
	if cp -pR "$@" "$tmp/" && mv -T "$tmp" "$dir/$key" 2>/dev/null; then
		return 0
	fi
	rm -rf "$tmp"
	return 0
}
