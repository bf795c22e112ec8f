#!/usr/bin/env bash
# GPU launches under a flood and from processes whose ring lies
# (docs/gpu.md). gpu_workload --flood launches zero-time kernels at about
# 100,000 a second outside any request, in a cgroup the agent targets:
# every launch is a kernel stored in traceprof.gpu or counted by a drop
# counter, exactly (the producer's ring full, CUPTI's drops, the agent's
# refusals), and every marker call is a launch record read or counted
# lost. Then gpu_hostile (a valid header with bad records, a head 2^40
# ahead, a head behind the tail, a file shrunk under the agent) and one
# with a bad magic: the agent counts each and goes on; its one good
# record is stored.
# usage: run_agent_gpu_flood_test.sh TRACEPROF_DB AGENT GPU_WORKLOAD CUDA_LIB GPU_HOSTILE CLUSTER_DIR
set -euo pipefail
tpdb=$1 agent=$2 workload=$3 lib=$4 hostile=$5 cluster=$6
. "$(dirname "$0")/lib.sh"
needs_bpf
needs_cgroup traceprof-gpu-flood-test
conn=$(fresh_db "$tpdb" "$cluster" tp_e2e_agent_gpu_flood)
stat() { sed -n "s/^$1=//p" "$work/gpu.stats"; }
in_cg() {
	local out=$1
	shift
	(
		echo "$BASHPID" >"$cg/cgroup.procs"
		exec "$@" >"$work/$out"
	) || fail "$* failed"
}

start_agent gpu "$agent" --db "$(as_role writer)" --target "cgroup:$cg" --frequency 19 \
	--otlp-grpc "" --otlp-http "" --control-listen "" --stats-file "$work/gpu.stats"
CUDA_INJECTION64_PATH=$lib in_cg flood.out "$workload" --settle-ms 600 --linger-ms 300 --flood 2
in_cg hostile.out "$hostile" "$lib" &
hpid=$!
in_cg badmagic.out "$hostile" "$lib" badmagic
wait "$hpid" || fail "gpu_hostile failed"
kill -0 "$agent_pid" || fail "the agent died"
kill -TERM "$agent_pid"
wait "$agent_pid" || fail "the agent exited with status $?"
grep -E '^(bpf_gpu|gpu_|agg_gpu)[a-z_]*=[1-9]' "$work/gpu.stats" | tr '\n' ' '
echo

launched=$(sed -n 's/^flood launches=\([0-9]*\) .*/\1/p' "$work/flood.out")
[ -n "$launched" ] || fail "the flood did not report its launches"
cat "$work/flood.out"
stored=$(q "SELECT coalesce(sum(u.l), 0)
              FROM traceprof.gpu g CROSS JOIN LATERAL unnest(g.stacks, g.launches) u(s, l)
              JOIN traceprof.stacks st ON st.stack_id = u.s
              JOIN traceprof.frames fr ON fr.frame_id = st.frame_ids[cardinality(st.frame_ids)]
              JOIN traceprof.functions f ON f.function_id = fr.function_id
             WHERE f.name = '[gpu] flood_kernel'")
drops=0
for c in gpu_producer_dropped_full gpu_producer_cupti_dropped gpu_records_pending_full \
	gpu_records_bad_time gpu_records_refused gpu_ring_skipped agg_gpu_overflow; do
	drops=$((drops + $(stat $c)))
done
# the hostile ring's own: its bad records, and its one good one, stored
hostile_refused=$(($(stat gpu_ring_bad_records) + $(stat gpu_records_bad_time)))
echo "flood: launched $launched, stored $stored, dropped $drops (hostile records refused: $hostile_refused)"
[ $((stored + drops - $(stat gpu_records_bad_time))) = "$launched" ] ||
	fail "launched $launched != stored $stored + drops $drops (less the hostile ring's bad times)"
# each gpu_hostile calls the marker 6 times
[ $(($(stat bpf_gpu_launches) + $(stat bpf_gpu_lost))) = $((launched + 12)) ] ||
	fail "marker calls: $(stat bpf_gpu_launches) read + $(stat bpf_gpu_lost) lost != $launched + 12 (hostile)"
echo "ok: every launch of the flood stored or counted"

# the hostile rings: each lie counted, the agent alive, its good record stored
[ "$(stat gpu_ring_bad_records)" -ge 3 ] || fail "bad records not counted"
[ "$(stat gpu_ring_bad_names)" -ge 1 ] || fail "a name that is not UTF-8 not counted"
[ "$(stat gpu_records_bad_time)" -ge 1 ] || fail "an end before the start not counted"
[ "$(stat gpu_ring_bad_head)" -ge 2 ] || fail "heads ahead and behind not counted"
[ "$(stat gpu_ring_read_errors)" -ge 1 ] || fail "the shrunk file not counted"
[ "$(stat gpu_ring_bad_header)" -ge 1 ] || fail "the bad magic not counted"
[ "$(q "SELECT count(*) FROM traceprof.functions WHERE name IN ('[gpu] good_kernel', '[gpu] [bad name]')")" = 2 ] ||
	fail "the hostile ring's good record (and the one with a bad name) not stored"
echo "ok: the hostile rings' lies counted, the agent went on"
