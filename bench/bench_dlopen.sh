#!/usr/bin/env bash
# bench_dlopen.sh - how soon after a dlopen the agent tags the samples of a
# thread-context writer library it has not seen before, and what a dlopen
# storm costs it.
#
# Latency: RUNS agent runs, each with N processes in a cgroup the agent
# targets (tests/e2e/dlopen_workload) that load the writer library
# (tests/e2e/dlopen_writer.c, no SDK) DELAY, DELAY+1, ... seconds after
# they start (the agent looks at them at their exec), past the agent's
# quick second looks (1 s, 5 s). The writer's trace ids carry the 50 ms
# slot since the dlopen, so the first tagged sample stored says the
# latency to within 50 ms: the upper end of its slot is reported, median,
# min and max over all RUNS x N dlopens.
#
# Storm: one process dlopens and dlcloses the library CYCLES times as fast
# as it can, without the agent and then with it (the uprobe's cost shows in
# the cycles per second); reported are the loader rendezvous calls the BPF side saw,
# the records it emitted (at most one per process per 20 ms), the looks
# they caused and the agent's CPU for those looks.
#
# Needs root; a private PostgreSQL cluster in a temporary directory.
# Prints a markdown section for bench/results.md on stdout, one line per
# dlopen on stderr. Reports numbers only: never fails on timing.
#
# usage: sudo bench/bench_dlopen.sh
# environment: RUNS (3), N (5), DELAY (10), CYCLES (20000),
# TRACEPROF_BUILD_DIR (build).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${TRACEPROF_BUILD_DIR:-$root/build}
runs=${RUNS:-3} n=${N:-5} delay=${DELAY:-10} cycles=${CYCLES:-20000}
. "$root/bench/lib.sh"
cmake --build "$build" -j1 --target traceprof-agent traceprof-db dlopen_workload dlopen_writer >/dev/null
agent=$build/agent/traceprof-agent
workload=$build/tests/e2e/dlopen_workload
writer=$build/tests/e2e/libdlopen_writer.so
bench_setup dlopen
cg=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/mounts)/tp-bench-dlopen-$$
mkdir "$cg"
trap 'bench_cleanup; rmdir "$cg" 2>/dev/null || true' EXIT

# agent_run NAME: the agent on the cgroup at 99 Hz, in the background
agent_run() {
	"$agent" --db "$conn" --target "cgroup:$cg" --frequency 99 --otlp-grpc "" --otlp-http "" \
		--control-listen "" --stats-file "$work/$1.stats" 2> >(stamp >"$work/$1.log") &
	agent_pid=$!
	for _ in $(seq 100); do grep -qs 'sampling at' "$work/$1.log" && break; sleep 0.1; done
}
# in_cgroup ARGS...: the workload in the cgroup, in the background
in_cgroup() {
	(
		echo "$BASHPID" >"$cg/cgroup.procs"
		exec "$workload" "$writer" "$@"
	) &
}
q() { psql "$conn" -qXAt -v ON_ERROR_STOP=1 -c "$1"; }

lat=()
for r in $(seq "$runs"); do
	agent_run "run$r"
	wpids=()
	for i in $(seq "$n"); do
		in_cgroup "$((delay + i - 1))" "$(printf 'b%02x%02x' "$r" "$i")" 2 >"$work/w$r-$i.out"
		wpids+=($!)
	done
	for p in "${wpids[@]}"; do wait "$p"; done
	kill -TERM "$agent_pid"
	wait "$agent_pid"
	for i in $(seq "$n"); do
		tag=$(printf '%016x' "0x$(printf 'b%02x%02x' "$r" "$i")")
		slot=$(q "SELECT coalesce(min(('x' || substr(h, 17, 16))::bit(64)::bigint), -1)
		            FROM (SELECT replace(trace_id::text, '-', '') AS h FROM traceprof.samples
		                   WHERE trace_id IS NOT NULL) s WHERE substr(h, 1, 16) = '$tag'")
		ms=$(((slot + 1) * 50))
		[ "$slot" -ge 0 ] || ms=never
		echo "run $r dlopen $i (at $((delay + i - 1)) s): first tagged sample <= $ms ms" >&2
		lat+=("$ms")
	done
done

in_cgroup 0 5707 0.5 "$cycles" >"$work/storm0.out" # without the agent: no uprobe
wait $!
agent_run storm
in_cgroup 1 5707 0.5 "$cycles" >"$work/storm.out"
wait $!
sleep 1
kill -TERM "$agent_pid"
wait "$agent_pid"
st() { sed -n "s/^$1=//p" "$work/storm.stats"; }

sorted=$(printf '%s\n' "${lat[@]}" | sort -n)
count=${#lat[@]}
echo "## Libraries loaded late: dlopen to the first tagged sample ($(date -u +%F))"
echo
echo "\`sudo RUNS=$runs N=$n DELAY=$delay CYCLES=$cycles bench/bench_dlopen.sh\` on $(nproc) CPUs, $(uname -r)."
echo
echo "| measure | value |"
echo "|---|---|"
echo "| dlopens ($runs runs x $n, $delay-$((delay + n - 1)) s after the first look) | $count |"
echo "| dlopen to first tagged sample, median (upper end of its 50 ms slot) | $(sed -n "$(((count + 1) / 2))p" <<<"$sorted") ms |"
echo "| min / max | $(head -1 <<<"$sorted") / $(tail -1 <<<"$sorted") ms |"
echo "| storm: dlopen+dlclose cycles; cycles/s without the agent / with it | $cycles; $(sed -n 's/^cycles_per_s=//p' "$work/storm0.out") / $(sed -n 's/^cycles_per_s=//p' "$work/storm.out") |"
awk -v a="$(sed -n 's/^cycles_per_s=//p' "$work/storm0.out")" -v b="$(sed -n 's/^cycles_per_s=//p' "$work/storm.out")" \
	'BEGIN { printf "| storm: cost of one rendezvous call with the uprobe (4 a cycle) | %.1f us |\n", (1e6 / b - 1e6 / a) / 4 }'
echo "| storm: maps records emitted / rendezvous calls skipped (20 ms gap) | $(st bpf_maps) / $(st bpf_maps_limited) |"
echo "| storm: maps events read / folded / looks | $(st maps_events) / $(st maps_coalesced) / $(st maps_looks) |"
echo "| storm: agent main thread CPU in looks (all looks of the run) | $(($(st main_cpu_inspect_ns) / 1000)) us over $(st inspections) looks |"
