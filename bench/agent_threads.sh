#!/usr/bin/env bash
# Where a running agent's CPU goes, thread by thread: wakeups per second
# (voluntary context switches) and CPU time per second (schedstat) of each
# thread of the agent's process, over MEASURE seconds after WARMUP seconds,
# next to cpu_burn on every CPU. The agent's threads carry names (tp-shipper,
# tp-otlp-http, tp-otlp-grpc, tp-control, tp-claims; the gRPC core's own
# threads keep theirs), so the table says which part costs what.
#
# usage: bench/agent_threads.sh [AGENT OPTIONS...]   (default: --frequency 19)
# environment: WARMUP (15), MEASURE (30), TRACEPROF_BUILD_DIR
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${TRACEPROF_BUILD_DIR:-$root/build}
warmup=${WARMUP:-15} measure=${MEASURE:-30}
[ $# -gt 0 ] || set -- --frequency 19
. "$root/bench/lib.sh"
bench_setup threads
"$build/bench/cpu_burn" --seconds $((warmup + measure + 5)) >/dev/null &
"$build/agent/traceprof-agent" --db "$conn" --duration $((warmup + measure + 2)) "$@" 2>"$work/agent.log" &
agent=$!
sleep "$warmup"
# tid name wakeups cpu_ns, one line per thread
snap() {
	for t in /proc/"$agent"/task/*; do
		printf '%s %s %s %s\n' "${t##*/}" "$(tr ' ' _ <"$t/comm")" \
			"$(sed -n 's/^voluntary_ctxt_switches:[[:space:]]*//p' "$t/status")" \
			"$(cut -d' ' -f1 "$t/schedstat")"
	done 2>/dev/null | sort
}
snap >"$work/s0"
sleep "$measure"
snap >"$work/s1"
echo "agent $*, next to cpu_burn on every CPU, $measure s after $warmup s"
echo "| thread | wakeups/s | CPU µs/s | % of a core |"
echo "|---|---:|---:|---:|"
join "$work/s0" "$work/s1" | awk -v s="$measure" '{
	w = ($6 - $3) / s; c = ($7 - $4) / s / 1000
	name[$2] = $2; wk[$2] += w; cpu[$2] += c; tw += w; tc += c }
	END {
	for (n in name) printf "| %s | %.1f | %.0f | %.4f |\n", n, wk[n], cpu[n], cpu[n] / 1e4
	printf "| **all** | %.1f | %.0f | **%.4f** |\n", tw, tc, tc / 1e4 }'
wait "$agent" || true
