#!/usr/bin/env bash
# Libraries loaded late are seen at once: two processes in a cgroup the
# agent targets load a thread-context writer library without the SDK
# (dlopen_writer.c) 10 s and 30 s after the agent first looked at them,
# long after its quick second looks (1 s, 5 s) and before its 2-minute one.
# The uprobe on the loader's rendezvous (_dl_debug_state) brings a look at
# once: the first tagged sample of each must come within 1 s of its dlopen
# (the writer's trace ids say when each sample was taken, in 50 ms slots).
# The agent's log must not warn about the SDK's probe function, which such
# writers do not have.
# usage: run_agent_dlopen_test.sh TRACEPROF_DB AGENT DLOPEN_WORKLOAD WRITER_LIB CLUSTER_DIR
set -euo pipefail
tpdb=$1 agent=$2 workload=$3 writer=$4 cluster=$5
. "$(dirname "$0")/lib.sh"
needs_bpf
needs_cgroup traceprof-dlopen-test
conn=$(fresh_db "$tpdb" "$cluster" tp_e2e_agent_dlopen)
slot_ms=50 burn_s=3

start_agent agent "$agent" --db "$(as_role writer)" --target "cgroup:$cg" --frequency 99 \
	--otlp-grpc "" --otlp-http "" --control-listen "" --log-level debug --stats-file "$work/stats"
# run NAME DELAY_S TAG: the workload in the cgroup, in the background; its pid in $run_pid
run() {
	(
		echo "$BASHPID" >"$cg/cgroup.procs"
		exec "$workload" "$writer" "$2" "$3" "$burn_s" >"$work/$1.out"
	) &
	run_pid=$!
	eval "pid_$1=$run_pid"
}
run early 10 ea01
run late 30 1a7e
wait "$pid_early" || fail "the early workload failed"
wait "$pid_late" || fail "the late workload failed"
kill -TERM "$agent_pid"
wait "$agent_pid" || fail "the agent exited with status $?"
grep -E '^(bpf_maps|bpf_maps_limited|loaders_probed|loaders_no_symbol|loaders_failed|maps_events|maps_coalesced|maps_looks|tls_found|tls_not_ready)=' "$work/stats"

# check NAME PID TAG DELAY_S: the first tagged sample within 1 s of the dlopen
check_late() {
	local name=$1 pid=$2 tag=$3 delay=$4 seen_s dl_us first slots
	dl_us=$(sed -n 's/^dlopen_unix_us=//p' "$work/$name.out")
	[ -n "$dl_us" ] || fail "$name: the workload did not say when it called dlopen"
	seen_s=$(awk -v p="pid=$pid " 'index($0, "looked at " p "(first look)") { print $1; exit }' "$work/agent.log")
	[ -n "$seen_s" ] || fail "$name: the agent's log has no first look at pid $pid"
	awk -v d="$dl_us" -v s="$seen_s" -v w="$delay" 'BEGIN { x = d / 1e6 - s; printf "%s: dlopen %.2f s after the first look\n", ENVIRON["name"], x; exit !(x >= w - 0.5) }' ||
		fail "$name: dlopen less than $delay s after the agent first looked at the process"
	# tagged samples of this writer, by slot (bytes 8-15 of the trace id)
	slots="SELECT ('x' || substr(h, 17, 16))::bit(64)::bigint AS slot,
	              coalesce((SELECT sum(c) FROM unnest(counts) c), cardinality(stacks)) AS n
	         FROM (SELECT replace(trace_id::text, '-', '') AS h, counts, stacks
	                 FROM traceprof.samples WHERE trace_id IS NOT NULL) s
	        WHERE substr(h, 1, 16) = lpad('$tag', 16, '0')"
	first=$(q "SELECT coalesce(min(slot), -1) || ' ' || coalesce(sum(n), 0) FROM ($slots) x")
	read -r first n <<<"$first"
	echo "$name: $n tagged samples, the first in slot $first (${slot_ms} ms slots after the dlopen)"
	[ "$first" -ge 0 ] || fail "$name: no sample tagged with the late library's trace ids"
	[ $(((first + 1) * slot_ms)) -le 1000 ] || fail "$name: first tagged sample $((first * slot_ms))-$(((first + 1) * slot_ms)) ms after the dlopen (more than 1 s)"
	echo "ok: $name tagged $((first * slot_ms))-$(((first + 1) * slot_ms)) ms after its dlopen"
}
name=early check_late early "$pid_early" ea01 10
name=late check_late late "$pid_late" 1a7e 30
# a writer without the SDK, a loader without the rendezvous: normal, never a warning
if grep -E 'failed to find symbol|: warn: .*(tp_sdk_probe|_dl_debug_state|loader uprobe)' "$work/agent.log" >&2; then
	fail "the agent warned about a probe function"
fi
[ "$(sed -n 's/^loaders_probed=//p' "$work/stats")" -ge 1 ] || fail "no loader uprobe attached"
[ "$(sed -n 's/^maps_looks=//p' "$work/stats")" -ge 2 ] || fail "fewer than 2 looks brought by maps records"
echo "ok: libraries loaded 10 s and 30 s late tagged within 1 s"
