#!/usr/bin/env bash
# JIT frames named from perf maps: a CPU-bound function of a JIT-compiled
# runtime, run in a cgroup the agent samples at 99 Hz, must appear by name
# in the stored stacks with a real share of the process's samples.
#   node: `node --perf-basic-prof` (Node writes /tmp/perf-<pid>.map as it
#         compiles) running hotLoopJs (jit_workload.js) for 3 s.
#   java: `java -XX:+PreserveFramePointer` running hotLoopJava
#         (JitWorkload.java); `jcmd <pid> Compiler.perfmap` writes the map
#         after about 1 s of warm-up, and the method runs 3.5 s more: stacks
#         sampled before the map was there are named once it is (their
#         cached ids are renewed).
# Also printed, not checked: how many samples in the hot function reach
# the program's main (a walk through JIT code that stops early is cut).
# usage: run_jit_test.sh node|java TRACEPROF_DB AGENT SOURCE_DIR CLUSTER_DIR
set -euo pipefail
mode=$1 tpdb=$2 agent=$3 src=$4 cluster=$5
. "$(dirname "$0")/lib.sh"
needs_bpf
case $mode in
node)
	command -v node >/dev/null || { echo "skip: no node"; exit 77; }
	fn=hotLoopJs min_pct=50
	;;
java)
	command -v javac >/dev/null && command -v jcmd >/dev/null ||
		{ echo "skip: no JDK (javac, jcmd)"; exit 77; }
	fn=hotLoopJava min_pct=30
	cp "$src/JitWorkload.java" "$work/" && javac -d "$work" "$work/JitWorkload.java"
	;;
*) echo "usage: $0 node|java ..." >&2; exit 2 ;;
esac
needs_cgroup traceprof-jit-test
conn=$(fresh_db "$tpdb" "$cluster" "tp_e2e_jit_$mode")

start_agent agent "$agent" --db "$(as_role writer)" --target "cgroup:$cg" --frequency 99 --window 1s \
	--control-listen '' --otlp-grpc '' --otlp-http '' --stats-file "$work/stats"
export OTEL_SERVICE_NAME=jit-$mode
if [ "$mode" = node ]; then
	(echo "$BASHPID" >"$cg/cgroup.procs" && exec node --perf-basic-prof "$src/jit_workload.js" 3000) >"$work/app.out" &
	app=$!
	pids+=("$app")
else
	(echo "$BASHPID" >"$cg/cgroup.procs" && exec java -XX:+PreserveFramePointer -cp "$work" JitWorkload 3500) >"$work/app.out" &
	app=$!
	pids+=("$app")
	# warm-up, then the map; the JVM may not take attach requests yet: again
	sleep 1
	for _ in $(seq 20); do
		jcmd "$app" Compiler.perfmap >"$work/jcmd.log" 2>&1 && break
		sleep 0.5
	done
	grep -q 'Command executed successfully' "$work/jcmd.log" || fail "jcmd Compiler.perfmap failed: $(cat "$work/jcmd.log")"
	map_at=$EPOCHREALTIME
fi
wait "$app" || fail "the $mode workload failed"
rm -f "/tmp/perf-$app.map"
kill -TERM "$agent_pid"
wait "$agent_pid" || fail "the agent exited with status $?"
grep '^perfmap_' "$work/stats"

# the service's samples, those with the hot function in their stack, and of
# those the ones whose root frame is the program's entry (not cut)
read -r total hot whole <<<"$(q "
	SELECT coalesce(sum(samples), 0) || ' ' ||
	       coalesce(sum(samples) FILTER (WHERE stack LIKE '%$fn%'), 0) || ' ' ||
	       coalesce(sum(samples) FILTER (WHERE stack LIKE '%$fn%'
	                AND split_part(stack, ';', 1) IN ('_start', '__libc_start_main', '__libc_start_call_main', 'start_thread', 'clone3', 'clone')), 0)
	  FROM traceprof.service_folded('jit-$mode', now() - interval '1 hour', now())")"
echo "$mode: $total samples, $hot in $fn, $whole of those reach the thread's entry"
# the leaf ends of the most sampled stacks, with and without the function
q "SELECT samples || ' ...' || right(stack, 160) FROM traceprof.service_folded('jit-$mode', now() - interval '1 hour', now())
    ORDER BY stack LIKE '%$fn%' DESC, samples DESC LIMIT 6"
q "SELECT 'named: ' || name FROM traceprof.functions WHERE module = '[perf-map]' AND name LIKE '%$fn%'"
[ "$total" -gt 0 ] || fail "no samples of the $mode process"
if [ "$mode" = java ]; then
	# windows that start 1.5 s after the map was written (the agent looks
	# at a map at most once a second): stacks cached before it are named
	read -r after hot_after <<<"$(q "
		SELECT coalesce(sum(samples), 0) || ' ' || coalesce(sum(samples) FILTER (WHERE stack LIKE '%$fn%'), 0)
		  FROM traceprof.service_folded('jit-$mode', to_timestamp($map_at + 1.5), now())")"
	echo "java: after the map: $after samples, $hot_after in $fn"
	[ "$after" -gt 0 ] || fail "no samples after the map was written"
	[ $((hot_after * 100)) -ge $((after * 80)) ] ||
		fail "after the map: $fn in $hot_after of $after samples (less than 80 %)"
fi
[ $((hot * 100)) -ge $((total * min_pct)) ] || fail "$fn in $hot of $total samples (less than $min_pct %)"
[ "$(q "SELECT count(*) FROM traceprof.functions WHERE module = '[perf-map]' AND name LIKE '%$fn%' AND kind = 0")" -ge 1 ] ||
	fail "no [perf-map] function named $fn"
[ "$(sed -n 's/^perfmap_frames=//p' "$work/stats")" -ge 1 ] || fail "perfmap_frames is 0"
echo "ok: $fn named from the perf map in $((hot * 100 / total)) % of the samples"
