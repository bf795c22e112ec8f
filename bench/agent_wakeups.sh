#!/usr/bin/env bash
# What a wakeup of the agent costs: the agent at HZ next to cpu_burn on
# every CPU, once per ring size in RINGS (the kernel wakes the agent when
# half the ring is pending, so a smaller ring means more wakeups for the
# same samples). For each ring it prints, over MEASURE seconds after
# WARMUP, the main loop's passes and where its CPU went (the agent's stats
# file, read with SIGUSR1 at both ends): reading the ring apart from
# symbolizing grows with the passes, symbolizing and looking at processes
# do not. The slope between two rings is the cost of one wakeup.
#
# usage: bench/agent_wakeups.sh
# environment: RINGS ("64K 1M 2M"), HZ (99), WARMUP (40), MEASURE (60),
#              TRACEPROF_BUILD_DIR
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${TRACEPROF_BUILD_DIR:-$root/build}
rings=${RINGS:-64K 1M 2M} hz=${HZ:-99} warmup=${WARMUP:-40} measure=${MEASURE:-60}
. "$root/bench/lib.sh"
bench_setup wakeups
# A pipe nobody writes to: "read -t" on it is a sleep without a new process.
exec {sleeper}<> <(:)
snap() { # the agent's stats now, into file $2
	kill -USR1 "$1"
	read -r -t 0.5 -u "$sleeper" _ || true
	cp "$work/stats" "$2"
}
echo "| ring | passes | samples | reading the ring, µs | of which symbolizing | apart from symbolizing | per pass, µs | looking at processes, µs | new stacks |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
for ring in $rings; do
	total=$((warmup + measure + 5))
	"$build/bench/cpu_burn" --seconds "$total" >/dev/null &
	"$build/agent/traceprof-agent" --db "$conn" --frequency "$hz" --duration $((total - 3)) \
		--ring-bytes "$ring" --stats-file "$work/stats" 2>"$work/agent.log" &
	agent=$!
	read -r -t "$warmup" -u "$sleeper" _ || true
	snap "$agent" "$work/s0"
	read -r -t "$measure" -u "$sleeper" _ || true
	snap "$agent" "$work/s1"
	wait
	paste -d' ' <(sort "$work/s0") <(sort "$work/s1") | awk -F'[ =]' -v ring="$ring" '
		{ d[$1] = $4 - $2 }
		END {
			poll = d["main_cpu_poll_ns"] / 1000; sym = d["main_cpu_symbolize_ns"] / 1000
			printf "| %s | %d | %d | %.0f | %.0f | %.0f | %.1f | %.0f | %d |\n", ring, d["loop_passes"],
				d["samples"], poll, sym, poll - sym, d["loop_passes"] ? (poll - sym) / d["loop_passes"] : 0,
				d["main_cpu_inspect_ns"] / 1000, d["stack_misses"]
		}'
done
