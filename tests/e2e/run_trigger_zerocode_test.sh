#!/usr/bin/env bash
# A trigger on a service that publishes no context (docs/zero-code-http.md,
# "Turning it on"): SERVER (python, the default: an unmodified Python
# ThreadingHTTPServer, zc_server.py; apache-prefork: Debian's Apache httpd,
# prefork MPM, the mod_lua handler zc_burn.lua, in a cgroup of its own)
# sampled by the agent without --zero-code-http; traceprof-controller in
# local mode applies a TraceProfileTrigger with spec.sampling.zeroCodeHTTP:
# true, minDuration 100ms, route /burn/*, maxRequests 3, targeting the
# server's pid (python) or its cgroup (apache-prefork: every worker).
# Checked: the zero-code programs are attached only while the trigger is
# active; the trigger collects exactly 3 requests, each a slow one by the
# client's ground truth (the trace id of its traceparent), each with its
# request row (the slow path, status 200, at least 100 ms) and raised
# samples; no fast request is claimed; it completes.
# usage: run_trigger_zerocode_test.sh TRACEPROF_DB AGENT CONTROLLER CLUSTER_DIR [SERVER]
set -euo pipefail
tpdb=$1 agent=$2 controller=$3 cluster=$4 server_kind=${5:-python}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
. "$here/zc_servers.sh"
needs_bpf
conn=$(fresh_db "$tpdb" "$cluster" "tp_e2e_trigger_zerocode_${server_kind//-/_}")
slow=150 n=3

case $server_kind in
python)
	python3 "$here/zc_server.py" >"$work/server.out" &
	server=$!
	pids+=("$server")
	for _ in $(seq 50); do [ -s "$work/server.out" ] && break; sleep 0.1; done
	port=$(head -1 "$work/server.out")
	[ -n "$port" ] || fail "the server did not start"
	target="pid:$server" trigger_targets="{pids: [$server]}"
	;;
apache-prefork)
	command -v apache2 >/dev/null || { echo "skip: apache2 is not installed"; exit 77; }
	needs_cgroup traceprof-zc-trigger
	zc_start_apache prefork || fail "Apache did not start"
	cg_root=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/mounts)
	target="cgroup:$cg" trigger_targets="{cgroupPaths: [${cg#"$cg_root"}]}"
	;;
*) fail "unknown server $server_kind" ;;
esac
ctl_port=$(free_port)
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$work/token"
chmod 600 "$work/token"
start_agent agent "$agent" --db "$(as_role writer)" --target "$target" --frequency 19 \
	--otlp-grpc "" --otlp-http "" --control-listen "127.0.0.1:$ctl_port" \
	--control-token-file "$work/token" --stats-file "$work/stats"
snapshot "$work/stats"
grep -qx 'zc_attached=0' "$work/stats" || fail "zero-code programs attached before any trigger asks"

mkdir "$work/triggers"
manifest zc-slow zc-svc "targets: $trigger_targets" "match: {minDuration: 100ms, route: /burn/*}" \
	"sampling: {zeroCodeHTTP: true}" "maxRequests: $n" "timeout: 1m" >"$work/triggers/zc.yaml"
"$controller" --triggers-dir "$work/triggers" --agent "127.0.0.1:$ctl_port" \
	--agent-token-file "$work/token" --db "$(as_role controller)" --status-file "$work/status.json" \
	2>"$work/controller.log" &
pids+=($!)
for _ in $(seq 100); do grep -qs 'zero-code HTTP on for trigger targets' "$work/agent.log" && break; sleep 0.1; done
grep -q 'zero-code HTTP on for trigger targets' "$work/agent.log" || fail "the trigger did not turn zero-code capture on"
snapshot "$work/stats"
[ "$(sed -n 's/^zc_hook_libc=//p' "$work/stats")" -ge 1 ] || fail "zero-code probes not attached while the trigger is active"
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
check "no fast request claimed" 0 \
	"SELECT count(*) FROM traceprof.trace_profile_triggers g, unnest(g.trace_ids) c
	 JOIN truth t ON t.trace = replace(c::text, '-', '') WHERE g.name = 'zc-slow' AND t.path <> '/burn/$slow'"
check "each claimed trace has its request row (the slow path, 200, >= 100 ms)" "$n" \
	"SELECT count(DISTINCT r.trace_id) FROM traceprof.trace_profile_triggers g, unnest(g.trace_ids) c
	 JOIN traceprof.requests r ON r.trace_id = c JOIN traceprof.routes rt ON rt.route_id = r.route_id
	 WHERE g.name = 'zc-slow' AND rt.route = '/burn/$slow' AND r.status_code = 200
	   AND r.duration_us >= 100000"
check "each claimed trace has raised samples" "$n" \
	"SELECT count(DISTINCT s.trace_id) FROM traceprof.trace_profile_triggers g,
	 unnest(g.trace_ids) c JOIN traceprof.trigger_samples s ON s.trace_id = c WHERE g.name = 'zc-slow'"
echo "ok: a trigger with zeroCodeHTTP collected $n slow requests of a server without an SDK ($server_kind)"
