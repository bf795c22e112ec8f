#!/usr/bin/env bash
# The two-service demo end to end on real BPF, real OTLP and real
# PostgreSQL: traceprof-demo-load drives traceprof-demo-frontend, which calls
# traceprof-demo-service (payment-svc) for every checkout with a
# traceparent. traceprof-agent samples both services at 99 Hz and receives
# their server spans over OTLP/HTTP; xservice.sql then checks, against the
# load generator's ground truth, that every request's spans are stored and
# that each slow trace's cross-service view names payment-svc and a
# slow-path function as the cause, and the frontend as waiting.
# usage: run_xservice_test.sh TRACEPROF_DB AGENT SERVICE FRONTEND LOAD CLUSTER_DIR
set -euo pipefail
tpdb=$1 agent=$2 service=$3 frontend=$4 load=$5 cluster=$6
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
needs_bpf

conn=$(fresh_db "$tpdb" "$cluster" tp_e2e_xservice)

# The services export spans to the agent's OTLP/HTTP receiver on a free port.
otlp_port=$(free_port)
otlp=http://127.0.0.1:$otlp_port/v1/traces
start payment "$service" --port 0 --threads 2 --work-scale 0.5 --otlp-endpoint "$otlp"
pay_port=$port pay_pid=${pids[-1]}
start frontend "$frontend" --port 0 --threads 2 --work-scale 0.5 --payment "127.0.0.1:$pay_port" \
	--otlp-endpoint "$otlp"
front_pid=${pids[-1]} front_port=$port

"$agent" --db "$(as_role writer)" --target "pid:$pay_pid,$front_pid" --frequency 99 --window 2s \
	--otlp-http "127.0.0.1:$otlp_port" --otlp-grpc "" \
	--stats-file "$work/stats" >"$work/agent.out" 2>"$work/agent.log" &
agent_pid=$!
pids+=("$agent_pid")
for _ in $(seq 300); do grep -qs 'sampling at' "$work/agent.log" && break; sleep 0.1; done
grep -q 'sampling at' "$work/agent.log" || fail "the agent did not start"

# The demo has no frame pointers: its stacks are whole once the agent has
# placed the unwind tables of the files it maps (about a second on an idle
# machine, longer on a busy one; until then a sample keeps what frame
# pointers find). Wait for the first stack walked to the thread's root (the
# background refreshCache thread runs every second), at most 30 s.
for _ in $(seq 150); do
	kill -USR1 "$agent_pid"
	sleep 0.2
	[ "$(sed -n 's/^bpf_uw_root=//p' "$work/stats" 2>/dev/null)" -gt 0 ] 2>/dev/null && break
done

"$load" --port "$front_port" --requests 300 --concurrency 2 --slow-fraction 0.08 \
	--error-fraction 0.03 --seed 11 --out "$work/truth.csv" >"$work/load.log" 2>&1 ||
	fail "load generator"

# SIGTERM: each service exports its remaining spans, then the agent ships.
kill -TERM "$front_pid" "$pay_pid"
wait "$front_pid" || fail "the frontend exited with status $?"
wait "$pay_pid" || fail "the payment service exited with status $?"
grep -h 'spans ended' "$work/frontend.log" "$work/payment.log" || true
sleep 1
kill -TERM "$agent_pid"
wait "$agent_pid" || fail "the agent exited with status $?"
pids=()
grep -E '^(samples|tagged|otlp_|requests_)' "$work/stats" || true

psql "$conn" -qX -v ON_ERROR_STOP=1 -f "$here/../sql/lib.sql" >/dev/null
psql "$conn" -qX -v ON_ERROR_STOP=1 --set=VERBOSITY=verbose \
	-c "CREATE TABLE truth (trace_id text, parent_span_id text, server_span_id text,
	    method text, route text, path text, status int, start_unix_us bigint,
	    duration_us bigint, server_cpu_us bigint)" \
	-c "\\copy truth FROM '$work/truth.csv' WITH (FORMAT csv, HEADER true)" \
	-f "$here/xservice.sql" || fail "checks on the stored spans and samples"
echo "ok: end-to-end two services"
