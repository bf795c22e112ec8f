#!/usr/bin/env bash
# GPU work per request, end to end (docs/gpu.md), on the stand-in CUDA
# runtime: gpu_workload (tests/cuda) in a cgroup the agent targets, with
# CUDA_INJECTION64_PATH naming the test build of libtraceprof-cuda, serves
# requests on three threads, each with its own thread context, launching
# kernels of known GPU time (runtime, Ex, driver and graph launches) and
# prints the truth per request and kernel. Per request and kernel the
# launches and GPU ns stored in traceprof.gpu must equal the truth exactly;
# the stack's leaf frame must be "[gpu] KERNEL" (module [gpu]) and the
# frame below it the workload's function that made the launch call (the
# CUDA layers' frames removed). Then a run whose stand-in drops 5 kernel
# records: exactly 5 launches counted unmatched, the others stored. Then
# an agent with --gpu off: nothing stored, nothing attached.
# usage: run_agent_gpu_test.sh TRACEPROF_DB AGENT GPU_WORKLOAD CUDA_LIB CLUSTER_DIR
set -euo pipefail
tpdb=$1 agent=$2 workload=$3 lib=$4 cluster=$5
. "$(dirname "$0")/lib.sh"
needs_bpf
needs_cgroup traceprof-gpu-test
conn=$(fresh_db "$tpdb" "$cluster" tp_e2e_agent_gpu)

# wl NAME ARGS...: the workload in the cgroup, its output in $work/NAME.out
wl() {
	local name=$1
	shift
	(
		echo "$BASHPID" >"$cg/cgroup.procs"
		CUDA_INJECTION64_PATH=$lib exec "$workload" --linger-ms 200 "$@" \
			>"$work/$name.out"
	) || fail "the workload $name failed"
}
# stat NAME: the counter from the stats file of the agent that ran last
stat() { sed -n "s/^$1=//p" "$work/$run.stats"; }
# agent_run NAME ARGS...: an agent with its own log and stats file
agent_run() {
	run=$1
	shift
	start_agent "$run" "$agent" --db "$(as_role writer)" --target "cgroup:$cg" --frequency 19 \
		--otlp-grpc "" --otlp-http "" --control-listen "" --stats-file "$work/$run.stats" "$@"
}
agent_stop() {
	kill -TERM "$agent_pid"
	wait "$agent_pid" || fail "the agent exited with status $?"
	grep -E '^(bpf_gpu|gpu_|agg_gpu)[a-z_]*=[1-9]' "$work/$run.stats" | tr '\n' ' ' || true
	echo
}

agent_run gpu
# the first launch 1.2 s after the runtime starts: the library found (at
# most 250 ms), the process's unwind tables built (its launch stacks)
wl truth --settle-ms 1200 --requests 9 --threads 3 --kernels 5 --graph
wl lose --settle-ms 1200 --requests 4 --threads 1 --kernels 3 --lose-records 5
agent_stop

# the truth: per request and kernel name, launches and GPU ns, and the launcher
psql "$conn" -qX -v ON_ERROR_STOP=1 \
	-c "CREATE TABLE truth (trace_id uuid, n int, ns bigint, fn text, name text)" >/dev/null
sed -n 's/^kernel trace=\([0-9a-f]*\) count=\([0-9]*\) gpu_ns=\([0-9]*\) fn=\([a-z_]*\) name=\(.*\)$/\1\t\2\t\3\t\4\t[gpu] \5/p' \
	"$work/truth.out" | psql "$conn" -qX -v ON_ERROR_STOP=1 -c "\\copy truth FROM STDIN" >/dev/null
[ "$(q "SELECT count(DISTINCT trace_id) FROM truth")" = 9 ] || fail "the workload did not report 9 requests"
stored="SELECT g.trace_id, lf.name AS leaf, lf.module, bf.name AS below,
               sum(u.l)::int AS n, sum(u.ns)::bigint AS ns
          FROM traceprof.gpu g
         CROSS JOIN LATERAL unnest(g.stacks, g.launches, g.gpu_ns) AS u(stack_id, l, ns)
          JOIN traceprof.stacks st ON st.stack_id = u.stack_id
          JOIN traceprof.frames lfr ON lfr.frame_id = st.frame_ids[cardinality(st.frame_ids)]
          JOIN traceprof.functions lf ON lf.function_id = lfr.function_id
          LEFT JOIN traceprof.frames bfr ON bfr.frame_id = st.frame_ids[cardinality(st.frame_ids) - 1]
          LEFT JOIN traceprof.functions bf ON bf.function_id = bfr.function_id
         GROUP BY 1, 2, 3, 4"
bad=$(q "SELECT string_agg(coalesce(t.trace_id, s.trace_id) || ' ' || coalesce(t.name, s.leaf) ||
                           ': truth ' || coalesce(t.n || ' in ' || t.fn, 'none') || ' ' ||
                           coalesce(t.ns, 0) || ' ns, stored ' ||
                           coalesce(s.n || ' under ' || coalesce(s.below, '(none)') || ' ' || s.module, 'none') ||
                           ' ' || coalesce(s.ns, 0) || ' ns', '; ')
           FROM truth t
           FULL JOIN ($stored) s ON s.trace_id = t.trace_id AND s.leaf = t.name
          WHERE (t.trace_id IS NOT NULL OR s.trace_id IN (SELECT trace_id FROM truth))
            AND (t.n IS DISTINCT FROM s.n OR t.ns IS DISTINCT FROM s.ns
                 OR t.fn IS DISTINCT FROM s.below OR s.module IS DISTINCT FROM '[gpu]')")
[ -z "$bad" ] || fail "per request and kernel, stored != truth: $bad"
echo "ok: $(q "SELECT count(*) || ' (request, kernel) pairs, ' || sum(n) || ' kernels, ' || sum(ns) || ' ns' FROM truth") stored exactly, under their launchers"
[ "$(q "SELECT count(*) FROM ($stored) s WHERE s.below LIKE 'cuda%' OR s.below LIKE 'cu%Launch%' OR s.below LIKE 'traceprof_cuda%'")" = 0 ] ||
	fail "frames of the CUDA layers left under a kernel"

# the run whose stand-in dropped 5 records: 5 unmatched launches, the other 7 stored
[ "$(stat gpu_launches_unmatched)" = 5 ] || fail "unmatched launches: expected 5, got $(stat gpu_launches_unmatched)"
lost_trace="SELECT trace_id FROM traceprof.gpu WHERE trace_id IS NOT NULL AND trace_id NOT IN (SELECT trace_id FROM truth)"
[ "$(q "SELECT sum(l) FROM traceprof.gpu, unnest(launches) l WHERE trace_id IN ($lost_trace)")" = 7 ] ||
	fail "the lossy run: expected 7 kernels stored, got $(q "SELECT sum(l) FROM traceprof.gpu, unnest(launches) l WHERE trace_id IN ($lost_trace)")"
[ "$(stat gpu_records_unmatched)" = 0 ] || fail "records stored without their launch: $(stat gpu_records_unmatched)"
echo "ok: 5 records never came: 5 launches expired unmatched, the 7 others stored"

# --gpu off: nothing attached, nothing stored
q "TRUNCATE traceprof.gpu" >/dev/null
agent_run gpuoff --gpu off
wl off --settle-ms 300 --requests 2 --threads 1 --kernels 2
agent_stop
[ "$(q "SELECT count(*) FROM traceprof.gpu")" = 0 ] || fail "rows stored with --gpu off"
[ "$(stat bpf_gpu_launches)" = 0 ] && [ "$(stat gpu_probed)" = 0 ] || fail "--gpu off attached the marker"
echo "ok: --gpu off stores and attaches nothing"
