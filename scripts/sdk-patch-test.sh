#!/usr/bin/env bash
# sdk-patch-test.sh runs the own test suites of the MCP Go SDK and of fosite
# on their patched copies (scripts/sdk-patch.sh), as `make sdk-patch-test`
# does, skipping by exact name the tests that patches/skipped-tests.txt
# lists for each module, with their reasons printed first. A listed test
# that a module no longer has fails the run: the list must not outlive its
# tests.
#
# Usage: scripts/sdk-patch-test.sh [go test flags]
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"
go="${GO:-go}"
list=patches/skipped-tests.txt

modfile="$(GO="$go" bash scripts/sdk-patch.sh)"
dir="$(dirname "$modfile")"
for m in go-sdk fosite; do
	if [[ ! -d "$dir/$m" ]]; then
		echo "sdk-patch-test: no $m patch for the version go.mod requires"
		continue
	fi
	skip=()
	while read -r module test reason; do
		[[ "$module" == "$m" ]] || continue
		if ! grep -rqE --include='*_test.go' "^func $test\(t \*testing\.T\)" "$dir/$m"; then
			echo "sdk-patch-test: $list skips $m's $test, which $m no longer has: remove the line" >&2
			exit 1
		fi
		echo "sdk-patch-test: skipping $m's $test: $reason"
		skip+=("$test")
	done < <(grep -vE '^[[:space:]]*(#|$)' "$list")
	args=(test -count=1 "$@")
	if ((${#skip[@]})); then
		args+=(-skip "^($(IFS='|'; echo "${skip[*]}"))\$")
	fi
	(cd "$dir/$m" && "$go" "${args[@]}" ./...)
done
