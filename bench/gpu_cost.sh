#!/usr/bin/env bash
# gpu_cost.sh - what following CUDA launches costs the application thread
# (docs/gpu.md, issue 29): gpu_workload --bench N on the stand-in runtime
# with the test build of libtraceprof-cuda (CUDA_INJECTION64_PATH) times
# its launch calls (each calls the marker once), in three modes per round,
# in rotating order:
#   none   no agent: the marker is an empty call
#   trap   bpftrace with an empty program on the marker: the uprobe's trap
#          alone (what any uprobe costs on this kernel)
#   agent  traceprof-agent --target cgroup: the launch uprobe (context,
#          stack walk, ring record) and the agent reading it
# Prints a markdown section for bench/results.md: medians of ns per
# launch, the added time per launch against none. Never fails on timing.
#
#   sudo bench/gpu_cost.sh                     # 5 rounds, 200000 launches a run
#   ROUNDS=3 LAUNCHES=100000 BUILD=build sudo bench/gpu_cost.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$root/build}
rounds=${ROUNDS:-5}
launches=${LAUNCHES:-200000}
wl="$build/tests/cuda/gpu_workload"
lib="$build/tests/cuda/libtraceprof-cuda-test.so"
. "$root/bench/lib.sh"
[ -x "$wl" ] && [ -f "$lib" ] || { echo "build gpu_workload and traceprof_cuda_test first" >&2; exit 2; }
bench_setup gpu-cost
"$build/cli/traceprof-db" migrate --db "$conn" >/dev/null
cgroot=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/mounts)
cg=$cgroot/tp-gpu-cost-$$
mkdir "$cg"
trap 'bench_cleanup; rmdir "$cg" 2>/dev/null || true' EXIT

# one run of the workload in the cgroup; prints its ns per launch
one() {
	(
		echo "$BASHPID" >"$cg/cgroup.procs"
		CUDA_INJECTION64_PATH=$lib exec "$wl" --settle-ms 800 --linger-ms 0 --bench "$launches"
	) | sed -n 's/^bench .*ns_per_launch=\([0-9.]*\)$/\1/p'
}
run_mode() {
	local mode=$1 pid=
	case $mode in
	trap)
		bpftrace -e "uprobe:$lib:traceprof_cuda_launch { }" >"$work/bt.out" 2>&1 &
		pid=$!
		for _ in $(seq 100); do grep -q Attaching "$work/bt.out" && break; sleep 0.1; done
		;;
	agent)
		"$build/agent/traceprof-agent" --db "$conn" --target "cgroup:$cg" --frequency 19 \
			--otlp-grpc "" --otlp-http "" --control-listen "" \
			--stats-file "$work/agent.stats" 2>"$work/agent.log" &
		pid=$!
		for _ in $(seq 100); do grep -qs 'sampling at' "$work/agent.log" && break; sleep 0.1; done
		;;
	esac
	one >>"$work/$mode.ns"
	if [ -n "$pid" ]; then
		kill -INT "$pid"
		wait "$pid" || true
	fi
}
modes=(none trap agent)
for r in $(seq "$rounds"); do
	for k in 0 1 2; do
		run_mode "${modes[$(((r + k) % 3))]}"
	done
done
median() { sort -n "$1" | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
n0=$(median "$work/none.ns") nt=$(median "$work/trap.ns") na=$(median "$work/agent.ns")
echo "### GPU launches: the application thread's time per launch call"
echo
echo "\`sudo bench/gpu_cost.sh\` ($rounds rounds, $launches launches a run, $(nproc) CPUs, $(uname -r)):"
echo
echo "| mode | ns per launch (median) | added per launch | runs |"
echo "|---|---|---|---|"
echo "| none (no agent) | $n0 | - | $(tr '\n' ' ' <"$work/none.ns")|"
echo "| trap (empty uprobe on the marker) | $nt | $(awk -v a="$nt" -v b="$n0" 'BEGIN { printf "%.0f ns", a - b }') | $(tr '\n' ' ' <"$work/trap.ns")|"
echo "| agent (--gpu on) | $na | $(awk -v a="$na" -v b="$n0" 'BEGIN { printf "%.0f ns", a - b }') | $(tr '\n' ' ' <"$work/agent.ns")|"
grep -E '^(bpf_gpu_launches|bpf_gpu_lost|gpu_records_stored)=' "$work/agent.stats" | sed 's/^/    last agent run: /'
