#!/usr/bin/env bash
# Runs every fuzz target in the module for a fixed number of executions.
#
# Targets are found by looking for `func FuzzX(f *testing.F)` in test files, so a new Fuzz function is fuzzed
# without being registered anywhere. (Its seed corpus, f.Add and
# testdata/fuzz, already runs in every plain `go test`.)
#
# The budget is a count (-fuzztime=Nx), never a duration: with a duration,
# Go's fuzz coordinator can report "context deadline exceeded" as a failure
# when the deadline fires while a worker is busy (golang/go#75804, fixed in
# Go 1.27). A count has no deadline to race, so on a loaded machine the run
# only takes longer.
#
# Usage: scripts/fuzz.sh [EXECS]   (default $FUZZ_EXECS, else 10000x)
# GO_TEST_TIMEOUT (default 45m) is go test's -timeout, there to catch a hang.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

execs=${1:-${FUZZ_EXECS:-10000x}}
[[ $execs =~ ^[0-9]+x$ ]] || { echo "fuzz.sh: the budget must be an execution count such as 10000x, got $execs" >&2; exit 2; }
go=${GO:-go}

n=0
# Each line: path/to/file_test.go:func FuzzName(f *testing.F) {
while IFS= read -r line; do
	file=${line%%:*}
	target=$(sed -E 's/^[^:]*:func (Fuzz[A-Za-z0-9_]*).*/\1/' <<<"$line")
	pkg=./$(dirname "$file")
	echo "fuzz $target ($pkg, $execs)"
	$go test -run='^$' -fuzz="^${target}\$" -fuzztime="$execs" -timeout="${GO_TEST_TIMEOUT:-45m}" "$pkg" </dev/null
	n=$((n + 1))
done < <(git grep -E '^func Fuzz[A-Za-z0-9_]*\(f \*testing\.F\)' -- '*_test.go' | sort)
((n > 0)) || { echo "fuzz.sh: found no fuzz targets" >&2; exit 1; }
echo "fuzz: $n targets, $execs each"
