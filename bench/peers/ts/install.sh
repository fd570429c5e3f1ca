#!/usr/bin/env bash
# install.sh installs the TypeScript peer of the load harness: the pinned
# @modelcontextprotocol/sdk (package.json and package-lock.json beside this
# script, installed with npm ci) and server.mjs, into one cache folder, so
# that Node resolves the SDK from server.mjs's own folder. Nothing goes into
# the repository or the global npm folder. It prints the path of the
# installed server.mjs.
#
# Usage: bench/peers/ts/install.sh [DIR]   (default: <repo>/.cache/bench-ts)
#
# It is idempotent: a stamp holds a hash of the three files, and a second
# run with the same files does nothing.
set -euo pipefail

src="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo_root="$(cd "$src/../../.." && pwd)"
dir="${1:-$repo_root/.cache/bench-ts}"
npm_bin="${NPM:-npm}"

want="$(cat "$src/package.json" "$src/package-lock.json" "$src/server.mjs" | sha256sum | cut -d' ' -f1)"
if [ -f "$dir/.installed" ] && [ "$(cat "$dir/.installed")" = "$want" ] && [ -d "$dir/node_modules/@modelcontextprotocol/sdk" ]; then
	echo "$dir/server.mjs"
	exit 0
fi
command -v "$npm_bin" >/dev/null 2>&1 || { echo "install.sh: $npm_bin not found" >&2; exit 1; }
mkdir -p "$dir"
cp "$src/package.json" "$src/package-lock.json" "$src/server.mjs" "$dir/"
(cd "$dir" && "$npm_bin" ci --ignore-scripts --no-audit --no-fund >&2) ||
	(cd "$dir" && "$npm_bin" ci --ignore-scripts --no-audit --no-fund >&2)
echo "$want" >"$dir/.installed"
echo "$dir/server.mjs"
