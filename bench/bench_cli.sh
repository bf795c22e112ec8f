#!/usr/bin/env bash
# The traceprof command end to end: process start, connection, the store
# read through the SQL API, rendering, writing. On bench/cli_data.sql (a
# one-hour profile of 10,000 distinct stacks and one request of 2,000
# distinct stacks at 99 Hz) in a private PostgreSQL cluster; every run is
# the whole command (`traceprof ... -o FILE`), RUNS times after one warm-up;
# prints the median and the best in ms, and the output's size.
# Goal of the flame graph cases: < 200 ms each. Never fails on timing.
# usage: bench/bench_cli.sh   environment: RUNS (15), STACKS (10000), TRACEPROF_BUILD_DIR
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${TRACEPROF_BUILD_DIR:-$root/build}
runs=${RUNS:-15} stacks=${STACKS:-10000}
. "$root/bench/lib.sh"
bench_setup cli
tp=$build/cli/traceprof
psql "$conn" -qX -v ON_ERROR_STOP=1 -v stacks="$stacks" -f "$root/bench/cli_data.sql" >/dev/null
T=0000000000000000000000000000be5c
R=(--from 2030-01-02T10:00:00Z --until 2030-01-02T11:00:00Z)

# case NAME ARGS...: median and best wall time of the command, output size
case_() {
	local name=$1 t0 t1 ms=() out=$work/out
	shift
	"$tp" "$@" --db "$conn" -o "$out" >/dev/null
	for _ in $(seq "$runs"); do
		t0=$EPOCHREALTIME
		"$tp" "$@" --db "$conn" -o "$out" >/dev/null
		t1=$EPOCHREALTIME
		ms+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", (b - a) * 1000 }')")
	done
	printf '%s\n' "${ms[@]}" | sort -n | awk -v n="$name" -v sz="$(stat -c %s "$out")" '
		{ v[NR] = $1 } END { printf "| %s | %.1f | %.1f | %d KiB |\n", n, v[int((NR + 1) / 2)], v[1], sz / 1024 }'
}
echo "| command | median ms | best ms | output |"
echo "|---|---:|---:|---:|"
case_ "trace-profile, svg (2,000 stacks)" trace-profile "$T" --format svg
case_ "trace-profile, pprof" trace-profile "$T" --format pprof
case_ "trace-profile, text" trace-profile "$T"
case_ "profile 1 h, svg ($stacks stacks)" profile --service bench-svc "${R[@]}" --format svg
case_ "profile 1 h, pprof" profile --service bench-svc "${R[@]}" --format pprof
case_ "profile 1 h, folded" profile --service bench-svc "${R[@]}" --format folded
case_ "profile 1 h, text" profile --service bench-svc "${R[@]}"
