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
if [ "$(id -u)" -ne 0 ]; then echo "skip: the agent needs root (BPF, perf events)"; exit 77; fi
if [ ! -r /sys/kernel/btf/vmlinux ]; then echo "skip: the kernel has no BTF"; exit 77; fi

work=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; for f in "$work"/*.log; do echo "--- $f" >&2; tail -20 "$f" >&2; done; exit 1; }
# start NAME COMMAND...: runs it in the background, waits for "listening on HOST:PORT", sets $port
start() {
	local name=$1
	shift
	"$@" >"$work/$name.out" 2>"$work/$name.log" &
	pids+=($!)
	for _ in $(seq 100); do grep -q '^listening on' "$work/$name.out" && break; sleep 0.1; done
	port=$(sed -n 's/^listening on .*:\([0-9]*\)$/\1/p' "$work/$name.out")
	[ -n "$port" ] || fail "$name did not start"
}
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

name=tp_e2e_xservice
base=$("$tpdb" conninfo "$cluster" --dbname postgres)
psql "$base" -qX -v ON_ERROR_STOP=1 -c "DROP DATABASE IF EXISTS $name" -c "CREATE DATABASE $name" >/dev/null
conn=$("$tpdb" conninfo "$cluster" --dbname "$name")
"$tpdb" migrate --db "$conn" >/dev/null

# The services export spans to the agent's OTLP/HTTP receiver on a free port.
otlp_port=$(free_port)
otlp=http://127.0.0.1:$otlp_port/v1/traces
start payment "$service" --port 0 --threads 2 --work-scale 0.5 --otlp-endpoint "$otlp"
pay_port=$port pay_pid=${pids[-1]}
start frontend "$frontend" --port 0 --threads 2 --work-scale 0.5 --payment "127.0.0.1:$pay_port" \
	--otlp-endpoint "$otlp"
front_pid=${pids[-1]} front_port=$port

"$agent" --db "$conn" --target "pid:$pay_pid,$front_pid" --frequency 99 --window 2s \
	--otlp-http "127.0.0.1:$otlp_port" --otlp-grpc "" \
	--stats-file "$work/stats" >"$work/agent.out" 2>"$work/agent.log" &
agent_pid=$!
pids+=("$agent_pid")
for _ in $(seq 100); do grep -qs 'sampling at' "$work/agent.log" && break; sleep 0.1; done
grep -q 'sampling at' "$work/agent.log" || fail "the agent did not start"

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
