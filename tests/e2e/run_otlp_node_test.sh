#!/usr/bin/env bash
# End to end: the OpenTelemetry JS SDK (pinned in otlp-node/package-lock.json)
# exports known spans over OTLP/gRPC to traceprof-agent, and exactly its
# SERVER spans must be in traceprof.requests with the right service, pod,
# route, method, status, start, duration and parent; its CLIENT span must not.
# usage: run_otlp_node_test.sh TRACEPROF_DB AGENT CLUSTER_DIR NODE_DIR
# NODE_DIR is where the npm packages are installed (npm ci, cache inside it).
set -euo pipefail
tpdb=$1 agent=$2 cluster=$3 nodedir=$4
here=$(cd "$(dirname "$0")" && pwd)
command -v npm >/dev/null && command -v node >/dev/null || { echo "skip: no node/npm"; exit 77; }
if [ "$(id -u)" -ne 0 ]; then echo "skip: the agent needs root (BPF, perf events)"; exit 77; fi
if [ ! -r /sys/kernel/btf/vmlinux ]; then echo "skip: the kernel has no BTF"; exit 77; fi

work=$(mktemp -d)
agent_pid=''
cleanup() {
	[ -n "$agent_pid" ] && kill "$agent_pid" 2>/dev/null || true
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; for f in "$work"/*.log; do echo "--- $f" >&2; tail -20 "$f" >&2; done; exit 1; }

# The SDK, exactly as locked (reinstalled only when the lock changes).
mkdir -p "$nodedir"
if ! cmp -s "$here/otlp-node/package-lock.json" "$nodedir/package-lock.json" ||
	[ ! -d "$nodedir/node_modules" ]; then
	cp "$here/otlp-node/package.json" "$here/otlp-node/package-lock.json" "$nodedir/"
	(cd "$nodedir" && npm ci --ignore-scripts --no-audit --no-fund --cache "$nodedir/.npm-cache" \
		>"$work/npm.log" 2>&1) || fail "npm ci"
fi
cp "$here/otlp-node/export_spans.js" "$nodedir/"

name=tp_e2e_otlp_node
base=$("$tpdb" conninfo "$cluster" --dbname postgres)
psql "$base" -qX -v ON_ERROR_STOP=1 -c "DROP DATABASE IF EXISTS $name" -c "CREATE DATABASE $name" >/dev/null
conn=$("$tpdb" conninfo "$cluster" --dbname "$name")
"$tpdb" migrate --db "$conn" >/dev/null
# the agent writes as the writer role; checks read as the owner
agent_conn=$("$tpdb" conninfo "$cluster" --dbname "$name" --role writer)

# The agent with its OTLP/gRPC receiver on a free port (HTTP off); it samples only this shell.
"$agent" --db "$agent_conn" --target "pid:$$" --window 2s --otlp-grpc 127.0.0.1:0 --otlp-http '' \
	--stats-file "$work/stats" >"$work/agent.out" 2>"$work/agent.log" &
agent_pid=$!
for _ in $(seq 100); do grep -qs 'otlp grpc: listening' "$work/agent.log" && break; sleep 0.1; done
port=$(sed -n 's/.*otlp grpc: listening on .* port=\([0-9]*\).*/\1/p' "$work/agent.log")
[ -n "$port" ] || fail "the agent's OTLP/gRPC receiver did not start"

node "$nodedir/export_spans.js" "http://127.0.0.1:$port" >"$work/truth.csv" 2>"$work/node.log" ||
	fail "the Node.js exporter"

kill -TERM "$agent_pid"
wait "$agent_pid" || fail "the agent exited with status $?"
agent_pid=''
grep -E '^(otlp_|requests_)' "$work/stats"
grep -qx 'otlp_rows=5' "$work/stats" || fail "the agent did not take 5 rows"
grep -qx 'otlp_ignored_kind=1' "$work/stats" || fail "the client span was not ignored"

psql "$conn" -qX -v ON_ERROR_STOP=1 -f "$here/../sql/lib.sql" >/dev/null
psql "$conn" -qX -v ON_ERROR_STOP=1 --set=VERBOSITY=verbose \
	-c "CREATE TABLE truth (trace_id text, span_id text, parent_span_id text, route text,
	    method text, status int, start_us bigint, duration_us bigint)" \
	-c "\\copy truth FROM '$work/truth.csv' WITH (FORMAT csv, HEADER true)" \
	-f "$here/otlp_node.sql" || fail "checks on the stored requests"
echo "ok: end-to-end OTLP from the OpenTelemetry JS SDK"
