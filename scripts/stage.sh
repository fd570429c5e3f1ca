#!/usr/bin/env bash
# stage.sh runs one stage of `make test`, which runs its stages in
# parallel (make -j; the Makefile's "make test" section draws the graph).
# A stage's output goes to its own log, results/stages/NAME.log, and is
# printed in one block when the stage ends, under a line with its result,
# its wall time and the CPU time it used, so that stages running side by
# side never mix their output. Its result is kept in
# results/stages/NAME.result for the summary.
#
# Usage:
#   scripts/stage.sh -begin                  forget the last run's stages, start the clock
#   scripts/stage.sh NAME COMMAND [ARG...]   run COMMAND as the stage NAME
#   scripts/stage.sh -summary NAME...        print every stage's result and time in
#                                            the order given, and the total; fails
#                                            when one failed or did not run
set -uo pipefail

dir="${PORTCULLIS_STAGES:-results/stages}"

# duration SECONDS prints 1h02m03s, 2m03s or 3s.
duration() {
	local s=$1
	if ((s >= 3600)); then
		printf '%dh%02dm%02ds' $((s / 3600)) $((s % 3600 / 60)) $((s % 60))
	elif ((s >= 60)); then
		printf '%dm%02ds' $((s / 60)) $((s % 60))
	else
		printf '%ds' "$s"
	fi
}

case "${1:-}" in
"" | -h | --help)
	sed -n '2,16p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
	exit 2
	;;
-begin)
	rm -rf "$dir"
	mkdir -p "$dir"
	date +%s >"$dir/.begin"
	exit 0
	;;
-summary)
	shift
	now=$(date +%s)
	begin=$(cat "$dir/.begin" 2>/dev/null || echo "$now")
	failed=() missing=()
	echo
	echo "==> make test: the stages"
	printf '    %-18s %-8s %9s %9s\n' stage result wall cpu
	for name in "$@"; do
		if [[ -f "$dir/$name.result" ]]; then
			read -r status secs cpu <"$dir/$name.result"
			result=ok
			if [[ "$status" != 0 ]]; then
				result="FAILED"
				failed+=("$name")
			fi
			printf '    %-18s %-8s %9s %9s\n' "$name" "$result" "$(duration "$secs")" "$(duration "$cpu")"
		else
			printf '    %-18s %-8s\n' "$name" "not run"
			missing+=("$name")
		fi
	done
	printf '    %-18s %-8s %9s\n' total "" "$(duration $((now - begin)))"
	if ((${#failed[@]})); then
		echo "make test: FAILED: ${failed[*]} (each log is printed above, and kept in $dir)"
		exit 1
	fi
	if ((${#missing[@]})); then
		echo "make test: FAILED: ${missing[*]} did not run"
		exit 1
	fi
	echo "make test: every stage passed in $(duration $((now - begin)))"
	exit 0
	;;
esac

name=$1
shift
mkdir -p "$dir"
log="$dir/$name.log"
rm -f "$dir/$name.result"
begin=$(cat "$dir/.begin" 2>/dev/null || date +%s)
start=$(date +%s)
{
	flock 9
	echo "--> $name: started at +$(duration $((start - begin)))"
} 9>"$dir/.print-lock"
# A stage's sub-make runs its targets one after another: it leaves make
# test's job slots to the other stages, and its log reads in order.
if [[ -n "${MAKEFLAGS:-}" ]]; then
	MAKEFLAGS="$(sed -E -e 's/(^| )-j[0-9]*( |$)/\1/' -e 's/ ?--jobserver-(auth|fds)=[^ ]*//g' <<<"$MAKEFLAGS")"
	export MAKEFLAGS
fi
"$@" >"$log" 2>&1 </dev/null
status=$?
secs=$(($(date +%s) - start))
# The CPU time of the stage's processes: the second line of `times` is
# what this shell's children used, user then system, as 1m2.345s. (times
# runs in this shell, not in a command substitution's subshell, whose
# children used nothing.)
times >"$dir/$name.times"
cpu=$(sed -n 2p "$dir/$name.times" | awk '{
	t = 0
	for (i = 1; i <= 2; i++) { split($i, p, "m"); t += p[1] * 60 + p[2] }
	printf "%d", t
}')
rm -f "$dir/$name.times"
echo "$status $secs $cpu" >"$dir/$name.result"

# One block at a time on stdout, whole.
{
	flock 9
	if ((status == 0)); then
		echo "==> $name: ok in $(duration "$secs") (cpu $(duration "$cpu"))"
		cat "$log"
	else
		echo "==> $name: FAILED (exit $status) after $(duration "$secs"); its output:"
		cat "$log"
		echo "<== $name: FAILED (exit $status); the output above is its whole log ($log)"
	fi
} 9>"$dir/.print-lock"
exit "$status"
