#!/usr/bin/env bash
# The agent's cost once it runs, next to perf record: bench_agent.sh starts
# a fresh profiler for every 10 s run, so its figures include start-up (BPF
# load, the /proc scan, kallsyms, the first DWARF loads). Here each profiler
# runs next to cpu_burn (2 threads) for WARMUP + MEASURE seconds and only
# the last MEASURE seconds of its user + system time count (ticks of
# /proc/<pid>/stat); the agent's BPF run time is averaged over its life
# (bpf_stats_hold keeps run-time statistics on). Prints one markdown table.
# usage: bench/bench_agent_steady.sh   environment: WARMUP (25), MEASURE (60)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${TRACEPROF_BUILD_DIR:-$root/build}
warmup=${WARMUP:-25} measure=${MEASURE:-60}
[ "$(id -u)" -eq 0 ] || { echo "needs root" >&2; exit 1; }
work=$(mktemp -d /tmp/tp-bench-steady.XXXXXX)
chmod 755 "$work"
cleanup() {
	pkill -P $$ 2>/dev/null || true
	wait 2>/dev/null || true
	"$build/cli/traceprof-db" remove "$work/db" >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT
"$build/cli/traceprof-db" create "$work/db" --fast >/dev/null
conn=$("$build/cli/traceprof-db" conninfo "$work/db")
ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
hz_ticks=$(getconf CLK_TCK)

echo "| profiler | samples/s | user+sys % of a core (steady) | BPF % (life) | total % | RSS MB |"
echo "|---|---:|---:|---:|---:|---:|"
for cfg in agent-19 agent-99 perf-99; do
	total=$((warmup + measure + 5))
	"$build/bench/cpu_burn" --threads 2 --seconds "$total" >/dev/null &
	burn=$!
	case $cfg in
	agent-*)
		"$build/bench/bpf_stats_hold" "$build/agent/traceprof-agent" --db "$conn" \
			--frequency "${cfg#agent-}" --duration $((warmup + measure)) \
			--stats-file "$work/stats" 2>"$work/agent.log" &
		;;
	perf-99)
		perf record -F 99 -a -g -o "$work/perf.data" -- sleep $((warmup + measure)) \
			>/dev/null 2>"$work/perf.log" &
		;;
	esac
	prof=$!
	sleep "$warmup"
	t0=$(ticks "$prof")
	sleep "$measure"
	t1=$(ticks "$prof")
	rss=$(awk '/VmHWM/ { printf "%.1f", $2 / 1024 }' "/proc/$prof/status")
	wait "$prof" || true
	wait "$burn" || true
	cpu=$(awk -v d=$((t1 - t0)) -v hz="$hz_ticks" -v s="$measure" 'BEGIN { printf "%.3f", 100 * d / hz / s }')
	if [ "${cfg%%-*}" = agent ]; then
		get() { sed -n "s/^$1=//p" "$work/stats"; }
		bpf=$(awk -v ns="$(get bpf_run_time_ns)" -v s="$(get elapsed_s)" 'BEGIN { printf "%.3f", ns / 1e7 / s }')
		sps=$(awk -v n="$(get samples)" -v s="$(get elapsed_s)" 'BEGIN { printf "%.0f", n / s }')
		tot=$(awk -v a="$cpu" -v b="$bpf" 'BEGIN { printf "%.3f", a + b }')
		echo "| traceprof-agent, ${cfg#agent-} Hz | $sps | $cpu | $bpf | **$tot** | $rss |"
	else
		echo "| perf record -F 99 -a -g | — | $cpu | (stack walks in the sampled tasks, not measurable) | **$cpu** + kernel | $rss |"
	fi
done
