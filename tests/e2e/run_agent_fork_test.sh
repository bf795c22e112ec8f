#!/usr/bin/env bash
# Forked workers: a process of the SDK in a cgroup the agent targets forks
# ten workers of 0.15 s each, one after the other; each inherits its
# parent's thread context (inside a request) and is gone long before the
# agent's next read of the ring. The BPF side gives a forked process its
# parent's thread-context location and puts a fork record in the ring, and
# the agent gives the child its parent's service and symbols: every sample
# of the workers must be tagged with the parent's trace and span, stored
# under its service, with named frames.
# usage: run_agent_fork_test.sh TRACEPROF_DB AGENT FORK_WORKLOAD CLUSTER_DIR
set -euo pipefail
tpdb=$1 agent=$2 workload=$3 cluster=$4
. "$(dirname "$0")/lib.sh"
needs_bpf
needs_cgroup traceprof-fork-test
conn=$(fresh_db "$tpdb" "$cluster" tp_e2e_agent_fork)

trace=4bf92f3577b34da6a3ce929d0e0e4736 span=00f067aa0ba902b7
start_agent agent "$agent" --db "$(as_role writer)" --target "cgroup:$cg" --frequency 99 --window 60s --stats-file "$work/stats"
(
	echo "$BASHPID" >"$cg/cgroup.procs"
	exec "$workload" "00-$trace-$span-01" 10 150 >"$work/workload.out"
) || fail "the workload failed"
kill -TERM "$agent_pid"
wait "$agent_pid" || fail "the agent exited with status $?"
grep -E '^(samples|forks|procs_inherited|sym_inherited|loop_passes|sym_unknown_frames)=' "$work/stats"

# samples whose stack runs forked_worker_burn, by service and tag
rows="SELECT so.service, sm.trace_id, sm.span_id, coalesce(sm.counts[u.i], 1) AS n
        FROM traceprof.samples sm
        JOIN traceprof.sources so USING (source_id)
       CROSS JOIN LATERAL unnest(sm.stacks) WITH ORDINALITY AS u(stack_id, i)
        JOIN traceprof.stacks st ON st.stack_id = u.stack_id
       WHERE EXISTS (SELECT 1 FROM unnest(st.function_ids) x(fid)
                      JOIN traceprof.functions f ON f.function_id = x.fid
                     WHERE f.name = 'forked_worker_burn')"
workers=$(q "SELECT coalesce(sum(n), 0) FROM ($rows) r")
right=$(q "SELECT coalesce(sum(n), 0) FROM ($rows) r
            WHERE service = 'fork-workload' AND trace_id = traceprof.parse_trace_id('$trace')
              AND span_id = traceprof.parse_span_id('$span')")
lost=$(q "SELECT coalesce(sum(coalesce((SELECT sum(c) FROM unnest(sm.counts) c), cardinality(sm.stacks))), 0)
            FROM traceprof.samples sm JOIN traceprof.sources so USING (source_id)
           WHERE so.service = '[unknown]'")
unnamed=$(q "SELECT count(*) FROM traceprof.functions WHERE kind = 2 AND name LIKE 'fork_workload+0x%'")
echo "worker samples=$workers right=$right unknown-service=$lost unnamed=$unnamed"
[ "$(sed -n 's/^forks=//p' "$work/stats")" -ge 10 ] || fail "fewer than 10 fork records"
[ "$(sed -n 's/^procs_inherited=//p' "$work/stats")" -ge 10 ] || fail "fewer than 10 workers given their parent's look"
# 10 x 0.15 s at 99 Hz is ~150 samples on an idle machine; judged against
# the CPU time the workers received (on a busy machine much less): half of it
cpu_us=$(sed -n 's/^workers_cpu_us=//p' "$work/workload.out")
[ -n "$cpu_us" ] || fail "the workload did not say its workers' CPU time"
expect=$((cpu_us * 99 / 1000000))
echo "the workers received $((cpu_us / 1000)) ms of CPU: $expect samples at 99 Hz"
[ "$expect" -ge 20 ] || fail "the workload received too little CPU to judge ($expect samples expected)"
[ $((workers * 2)) -ge "$expect" ] || fail "only $workers samples in forked_worker_burn ($expect expected)"
[ "$right" -eq "$workers" ] || fail "$((workers - right)) of $workers worker samples without the parent's service, trace or span"
if [ "$lost" -ne 0 ]; then
	q "SELECT (SELECT string_agg(f.name, ';' ORDER BY x.o) FROM unnest(st.function_ids) WITH ORDINALITY x(fid, o)
	             JOIN traceprof.functions f ON f.function_id = x.fid)
	     FROM traceprof.samples sm JOIN traceprof.sources so USING (source_id)
	    CROSS JOIN LATERAL unnest(sm.stacks) u(stack_id) JOIN traceprof.stacks st USING (stack_id)
	    WHERE so.service = '[unknown]'" >&2
	fail "$lost samples of processes without a name"
fi
[ "$unnamed" -eq 0 ] || fail "$unnamed frames of the workers left as module+offset"
echo "ok: forked workers tagged, named and symbolized"
