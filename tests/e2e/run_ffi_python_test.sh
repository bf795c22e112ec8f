#!/usr/bin/env bash
# FFI end to end: a Python program drives libtraceprof-sdk through ctypes
# (the SDK loaded with dlopen, so its TLS lives in a dynamically loaded
# module); the agent must tag the samples taken inside its request with the
# request's trace and span, leave the others untagged, and name the service
# from the process context the program published.
# usage: run_ffi_python_test.sh TRACEPROF_DB AGENT SDK_SO CLUSTER_DIR
set -euo pipefail
tpdb=$1 agent=$2 sdk=$3 cluster=$4
here=$(cd "$(dirname "$0")" && pwd)
if [ "$(id -u)" -ne 0 ]; then echo "skip: the agent needs root (BPF, perf events)"; exit 77; fi
if [ ! -r /sys/kernel/btf/vmlinux ]; then echo "skip: the kernel has no BTF"; exit 77; fi
command -v python3 >/dev/null || { echo "skip: no python3"; exit 77; }

work=$(mktemp -d)
py_pid='' agent_pid=''
cleanup() {
	[ -n "$agent_pid" ] && kill "$agent_pid" 2>/dev/null || true
	[ -n "$py_pid" ] && kill "$py_pid" 2>/dev/null || true
	exec 3>&- 2>/dev/null || true
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; tail -20 "$work/agent.log" "$work/py.out" >&2 || true; exit 1; }

name=tp_e2e_ffi_python
base=$("$tpdb" conninfo "$cluster" --dbname postgres)
psql "$base" -qX -v ON_ERROR_STOP=1 -c "DROP DATABASE IF EXISTS $name" -c "CREATE DATABASE $name" >/dev/null
conn=$("$tpdb" conninfo "$cluster" --dbname "$name")
"$tpdb" migrate --db "$conn" >/dev/null
# the agent writes as the writer role; checks read as the owner
agent_conn=$("$tpdb" conninfo "$cluster" --dbname "$name" --role writer)

mkfifo "$work/go"
# its own OTLP port: another test's agent may hold the default one
otlp_port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
OTEL_EXPORTER_OTLP_TRACES_ENDPOINT="http://127.0.0.1:$otlp_port/v1/traces" \
	python3 "$here/ffi_request.py" "$sdk" <"$work/go" >"$work/py.out" 2>&1 &
py_pid=$!
exec 3>"$work/go"
for _ in $(seq 100); do grep -q ready "$work/py.out" && break; sleep 0.1; done
grep -q ready "$work/py.out" || fail "the Python program did not start"

"$agent" --db "$agent_conn" --target "pid:$py_pid" --frequency 99 --window 1s \
	--otlp-http "127.0.0.1:$otlp_port" --otlp-grpc "" --control-listen "" \
	--stats-file "$work/stats" 2>"$work/agent.log" &
agent_pid=$!
for _ in $(seq 300); do grep -qs 'sampling at' "$work/agent.log" && break; sleep 0.1; done
echo go >&3
for _ in $(seq 100); do grep -q done "$work/py.out" && break; sleep 0.1; done
grep -q done "$work/py.out" || fail "the Python program did not finish"
kill -TERM "$agent_pid"
wait "$agent_pid" || fail "the agent exited with status $?"
agent_pid=''

q() { psql "$conn" -XAt -v ON_ERROR_STOP=1 -c "$1"; }
count="coalesce(sum(coalesce((SELECT sum(c) FROM unnest(counts) c), cardinality(stacks))), 0)"
inside=$(q "SELECT $count FROM traceprof.samples
             WHERE trace_id = traceprof.parse_trace_id('4bf92f3577b34da6a3ce929d0e0e4736')
               AND span_id = traceprof.parse_span_id('00f067aa0ba902b7')")
other=$(q "SELECT $count FROM traceprof.samples WHERE trace_id IS NOT NULL
             AND trace_id <> traceprof.parse_trace_id('4bf92f3577b34da6a3ce929d0e0e4736')")
outside=$(q "SELECT $count FROM traceprof.samples WHERE trace_id IS NULL")
service=$(q "SELECT string_agg(DISTINCT service, ',') FROM traceprof.sources")
echo "inside=$inside outside=$outside other=$other service=$service"
# 1.5 s of CPU at 99 Hz is about 148 samples inside the request, 1 s about 99 outside.
[ "$inside" -ge 100 ] || fail "only $inside samples tagged with the request"
[ "$outside" -ge 50 ] || fail "only $outside untagged samples"
[ "$other" -eq 0 ] || fail "$other samples tagged with another trace"
[ "$service" = py-checkout ] || fail "service is \"$service\", not py-checkout"
echo "ok: Python through ctypes, tagged by the agent"
