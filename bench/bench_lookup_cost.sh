#!/usr/bin/env bash
# What finding a thread's context costs a CPU-clock sample, by how the
# sampler keeps where to look: hash maps keyed by tgid and tid (the agent
# until 2026-11) or task local storage (now). bench/lookup_cost runs two
# copies of a probe program side by side, half a sampling period apart,
# next to cpu_burn on every CPU, and prints per pair the median of the
# per-run differences of their mean run time (kernel.bpf_stats_enabled).
#
# Pairs:
#   none:hash-hit         one tgid hash lookup that finds its entry
#   none:storage-miss     the thread's and its leader's storage, both empty
#   hash-miss:storage-miss a process without a location, before and now
#   hash-two:storage-hit  a thread the SDK registered, before (tgid hash,
#                         then tid hash) and now (the thread's storage)
#
# usage: bench/bench_lookup_cost.sh
# environment: ROUNDS (3; each pair runs 2 x ROUNDS times), SECONDS_PER_RUN (5),
#              TRACEPROF_BUILD_DIR
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${TRACEPROF_BUILD_DIR:-$root/build}
rounds=${ROUNDS:-3} secs=${SECONDS_PER_RUN:-5}
[ "$(id -u)" -eq 0 ] || { echo "needs root (eBPF, perf events)" >&2; exit 1; }
pairs=(none:hash-hit none:storage-miss hash-miss:storage-miss hash-two:storage-hit)
# each run: 1 s settling + the measured seconds, plus loading; a margin on top
total=$(( ${#pairs[@]} * rounds * 2 * (secs + 3) + 10 ))
"$build/bench/cpu_burn" --seconds "$total" >/dev/null &
burn=$!
trap 'kill $burn 2>/dev/null || true; wait 2>/dev/null || true' EXIT
sleep 1
"$build/bench/lookup_cost" --rounds "$rounds" --seconds "$secs" "${pairs[@]}" | tee /dev/stderr |
	awk '/^lookup_cost pair=/ { n++; line[n] = $0 }
	END {
		print ""
		print "| a | b | runs | a ns (median) | b ns (median) | b − a ns (median of per-run differences) |"
		print "|---|---|---:|---:|---:|---:|"
		for (i = 1; i <= n; i++) {
			split(line[i], f, /[ =:]+/)
			# f: lookup_cost pair A B runs N a_ns X b_ns Y b_minus_a_ns D
			printf "| %s | %s | %s | %s | %s | %s |\n", f[3], f[4], f[6], f[8], f[10], f[12]
		}
	}'
