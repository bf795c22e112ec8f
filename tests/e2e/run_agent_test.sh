#!/usr/bin/env bash
# End to end on real BPF and real PostgreSQL: the demo service under load
# from the demo load generator, profiled by traceprof-agent at a test
# frequency; agent.sql then checks the stored samples against the load
# generator's ground truth (which trace each request was, which path it
# took, which span the service opened for it).
# usage: run_agent_test.sh TRACEPROF_DB AGENT SERVICE LOAD CLUSTER_DIR
set -euo pipefail
tpdb=$1 agent=$2 service=$3 load=$4 cluster=$5
here=$(cd "$(dirname "$0")" && pwd)
if [ "$(id -u)" -ne 0 ]; then echo "skip: the agent needs root (BPF, perf events)"; exit 77; fi
if [ ! -r /sys/kernel/btf/vmlinux ]; then echo "skip: the kernel has no BTF"; exit 77; fi

work=$(mktemp -d)
svc_pid='' agent_pid=''
cleanup() {
	[ -n "$agent_pid" ] && kill "$agent_pid" 2>/dev/null || true
	[ -n "$svc_pid" ] && kill "$svc_pid" 2>/dev/null || true
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; for f in "$work"/*.log; do echo "--- $f" >&2; tail -20 "$f" >&2; done; exit 1; }

name=tp_e2e_agent
base=$("$tpdb" conninfo "$cluster" --dbname postgres)
psql "$base" -qX -v ON_ERROR_STOP=1 -c "DROP DATABASE IF EXISTS $name" -c "CREATE DATABASE $name" >/dev/null
conn=$("$tpdb" conninfo "$cluster" --dbname "$name")
"$tpdb" migrate --db "$conn" >/dev/null
# the agent writes as the writer role; checks read as the owner
agent_conn=$("$tpdb" conninfo "$cluster" --dbname "$name" --role writer)

# The service, on a free port.
# its own OTLP port: another test's agent may hold the default one
otlp_port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$service" --port 0 --threads 2 --work-scale 0.5 --otlp-endpoint "http://127.0.0.1:$otlp_port/v1/traces" \
	>"$work/service.out" 2>"$work/service.log" &
svc_pid=$!
for _ in $(seq 100); do grep -q '^listening on' "$work/service.out" && break; sleep 0.1; done
port=$(sed -n 's/^listening on .*:\([0-9]*\)$/\1/p' "$work/service.out")
[ -n "$port" ] || fail "the demo service did not start"

# The agent, on the service only, 99 Hz, short windows.
"$agent" --db "$agent_conn" --target "pid:$svc_pid" --frequency 99 --window 2s \
	--otlp-http "127.0.0.1:$otlp_port" --otlp-grpc "" --control-listen "" \
	--stats-file "$work/stats" >"$work/agent.out" 2>"$work/agent.log" &
agent_pid=$!
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

"$load" --port "$port" --requests 400 --concurrency 2 --slow-fraction 0.06 \
	--error-fraction 0.04 --seed 7 --out "$work/truth.csv" >"$work/load.log" 2>&1 ||
	fail "load generator"
sleep 2 # background work outside any request

[ -n "${KEEP_DB:-}" ] && echo "conninfo: $conn"
kill -TERM "$agent_pid"
wait "$agent_pid" || fail "the agent exited with status $?"
agent_pid=''
cat "$work/stats"
# the SDK publishes the merged OTEP 4719 form; the agent says it found it
[ "$(sed -n 's/^procctx_merged=//p' "$work/stats")" -ge 1 ] 2>/dev/null ||
	fail "no process context read in the merged form (procctx_merged)"

psql "$conn" -qX -v ON_ERROR_STOP=1 -f "$here/../sql/lib.sql" >/dev/null
psql "$conn" -qX -v ON_ERROR_STOP=1 --set=VERBOSITY=verbose \
	-c "CREATE TABLE truth (trace_id text, parent_span_id text, server_span_id text,
	    method text, route text, path text, status int, start_unix_us bigint,
	    duration_us bigint, server_cpu_us bigint)" \
	-c "\\copy truth FROM '$work/truth.csv' WITH (FORMAT csv, HEADER true)" \
	-f "$here/agent.sql" || fail "checks on the stored samples"
echo "ok: end-to-end agent"
