#!/usr/bin/env bash
# A trigger on a service that publishes no context (docs/zero-code-http.md,
# "Turning it on"): an unmodified Python ThreadingHTTPServer (zc_server.py)
# sampled by the agent without --zero-code-http; traceprof-controller in
# local mode applies a TraceProfileTrigger with spec.sampling.zeroCodeHTTP:
# true, minDuration 100ms, route /burn/*, maxRequests 3. Checked: the
# zero-code programs are attached only while the trigger is active; the
# trigger collects exactly 3 requests, each a slow one by the client's
# ground truth (the trace id of its traceparent), each with raised samples;
# it completes.
# usage: run_trigger_zerocode_test.sh TRACEPROF_DB AGENT CONTROLLER CLUSTER_DIR
set -euo pipefail
tpdb=$1 agent=$2 controller=$3 cluster=$4
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
needs_bpf
conn=$(fresh_db "$tpdb" "$cluster" tp_e2e_trigger_zerocode)
slow=150 n=3

python3 "$here/zc_server.py" >"$work/server.out" &
server=$!
pids+=("$server")
for _ in $(seq 50); do [ -s "$work/server.out" ] && break; sleep 0.1; done
port=$(head -1 "$work/server.out")
[ -n "$port" ] || fail "the server did not start"
ctl_port=$(free_port)
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$work/token"
start_agent agent "$agent" --db "$(as_role writer)" --target "pid:$server" --frequency 19 \
	--otlp-grpc "" --otlp-http "" --control-listen "127.0.0.1:$ctl_port" \
	--control-token-file "$work/token" --stats-file "$work/stats"
snapshot "$work/stats"
grep -qx 'zc_attached=0' "$work/stats" || fail "zero-code programs attached before any trigger asks"

mkdir "$work/triggers"
manifest zc-slow zc-svc "targets: {pids: [$server]}" "match: {minDuration: 100ms, route: /burn/*}" \
	"sampling: {zeroCodeHTTP: true}" "maxRequests: $n" "timeout: 1m" >"$work/triggers/zc.yaml"
"$controller" --triggers-dir "$work/triggers" --agent "127.0.0.1:$ctl_port" \
	--agent-token-file "$work/token" --db "$(as_role controller)" --status-file "$work/status.json" \
	2>"$work/controller.log" &
pids+=($!)
for _ in $(seq 100); do grep -qs 'zero-code HTTP on for trigger targets' "$work/agent.log" && break; sleep 0.1; done
grep -q 'zero-code HTTP on for trigger targets' "$work/agent.log" || fail "the trigger did not turn zero-code capture on"
snapshot "$work/stats"
grep -qx 'zc_hook_libc=1' "$work/stats" || fail "zero-code probes not attached while the trigger is active"
echo "ok: zero-code capture on with the trigger"

python3 "$here/zc_trigger_client.py" "$port" "$slow" 60 "$work/stop" >"$work/truth.csv" &
client=$!
phase=""
for _ in $(seq 300); do
	phase=$(q "SELECT phase FROM traceprof.trace_profile_triggers WHERE name = 'zc-slow'")
	[ "$phase" = Completed ] && break
	sleep 0.1
done
touch "$work/stop"
wait "$client" || fail "the client failed"
[ "$phase" = Completed ] || fail "the trigger did not complete (phase '$phase', $(wc -l <"$work/truth.csv") requests)"
echo "ok: the trigger completed after $(wc -l <"$work/truth.csv") requests"
for _ in $(seq 50); do grep -qs 'zero-code HTTP off' "$work/agent.log" && break; sleep 0.1; done
snapshot "$work/stats"
for w in zc_attached=0 zc_hook_libc=0 zc_hook_syscalls=0; do
	grep -qx "$w" "$work/stats" || fail "zero-code hooks stay attached after the trigger completed: not $w"
done
echo "ok: zero-code capture off with the trigger"
kill -TERM "$agent_pid"
wait "$agent_pid" || fail "the agent exited with status $?"

psql "$conn" -qX -v ON_ERROR_STOP=1 \
	-c "CREATE TABLE truth (trace text, path text, status int, client_ms float8)" \
	-c "\\copy truth FROM '$work/truth.csv' WITH (FORMAT csv)" >/dev/null
check "$n requests collected" "$n" \
	"SELECT collected_requests FROM traceprof.trace_profile_triggers WHERE name = 'zc-slow'"
check "$n distinct claimed trace ids, each a slow request of the client's" "$n" \
	"SELECT count(DISTINCT t.trace) FROM traceprof.trace_profile_triggers g, unnest(g.trace_ids) c
	 JOIN truth t ON t.trace = replace(c::text, '-', '')
	 WHERE g.name = 'zc-slow' AND t.path = '/burn/$slow' AND t.status = 200"
check "each claimed trace has raised samples" "$n" \
	"SELECT count(DISTINCT s.trace_id) FROM traceprof.trace_profile_triggers g,
	 unnest(g.trace_ids) c JOIN traceprof.trigger_samples s ON s.trace_id = c WHERE g.name = 'zc-slow'"
echo "ok: a trigger with zeroCodeHTTP collected $n slow requests of a server without an SDK"
