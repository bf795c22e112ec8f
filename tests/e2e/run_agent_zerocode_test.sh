#!/usr/bin/env bash
# HTTP/1.x requests found from system calls (docs/zero-code-http.md): an
# unmodified Python ThreadingHTTPServer (zc_server.py: no SDK, nothing
# OpenTelemetry) in a cgroup the agent targets with --zero-code-http on,
# under a client with ground truth (zc_client.py): requests with a
# traceparent and without, one with an invalid traceparent, kept-alive
# connections and new ones, each spending 150 ms of CPU in the handler;
# then hostile input: binary garbage, a traceparent after 60 KiB of
# headers, a request target that is not ASCII. Every request must become
# one request row (method, path, status, the traceparent's trace and
# parent span ids when it had a valid one within the head's first 2 KiB,
# a duration within the client's view), garbage none, a target that is
# not ASCII a route with '?' for those bytes (counted); each request's
# samples must carry its trace id, and no sample may carry a trace id
# that is not a request's. HOOK (--zero-code-http's value): on, the
# default, follows the server through uprobes on its libc; syscalls
# through the raw syscall tracepoints (the fallback for processes without
# a libc). Either way the hook must go when the server exits: no probe
# left attached.
# The requests also go to otlp-forward as server spans: an OTLP/gRPC
# receiver upstream (otlp_grpc_sink, traceprof's receiver) gets one span
# a request with its trace and parent ids, method, path and status.
# usage: run_agent_zerocode_test.sh TRACEPROF_DB AGENT CLUSTER_DIR OTLP_GRPC_SINK [HOOK]
set -euo pipefail
tpdb=$1 agent=$2 cluster=$3 sink=$4 hook=${5:-on}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
needs_bpf
needs_cgroup traceprof-zerocode-test
conn=$(fresh_db "$tpdb" "$cluster" "tp_e2e_agent_zerocode_$hook")
n=6 ms=150
py=$(python3 -c 'import sys; print(sys.executable)') # the interpreter itself, not a wrapper

(
	echo "$BASHPID" >"$cg/cgroup.procs"
	exec python3 "$here/zc_server.py" >"$work/server.out"
) &
server=$!
pids+=("$server")
for _ in $(seq 50); do [ -s "$work/server.out" ] && break; sleep 0.1; done
port=$(head -1 "$work/server.out")
[ -n "$port" ] || fail "the server did not start"
"$sink" >"$work/sink.csv" 2>"$work/sink.log" &
pids+=($!)
for _ in $(seq 50); do grep -qs '^listening on' "$work/sink.csv" && break; sleep 0.1; done
sink_addr=$(sed -n 's/^listening on //p' "$work/sink.csv")
[ -n "$sink_addr" ] || fail "the OTLP sink did not start"
start_agent zc "$agent" --db "$(as_role writer)" --target "cgroup:$cg" --frequency 99 \
	--zero-code-http "$hook" --otlp-grpc "" --otlp-http "" --control-listen "" \
	--otlp-forward "$sink_addr" \
	--stats-file "$work/zc.stats"
python3 "$here/zc_client.py" "$port" "$n" "$ms" >"$work/truth.csv" || fail "the client failed"
sleep 0.5
# the hook in use: uprobes on the server's libc (the syscall tracepoints,
# which slow every system call of the machine, not attached), or the
# tracepoints when asked
snapshot "$work/zc.stats"
if [ "$hook" = on ]; then
	want='zc_hook_libc=1 zc_hook_syscalls=0 zc_attached=0'
	links=$(sed -n 's/^zc_uprobe_links=//p' "$work/zc.stats")
	[ "${links:-0}" -gt 0 ] || fail "no uprobe on the server's libc"
else
	want='zc_hook_libc=0 zc_hook_syscalls=1 zc_attached=1 zc_uprobe_links=0'
fi
for w in $want; do
	grep -qx "$w" "$work/zc.stats" || fail "hook $hook: not $w ($(grep -E '^zc_(hook|attached|uprobe)' "$work/zc.stats" | tr '\n' ' '))"
done
echo "ok: the server followed by the hook asked for ($want)"
kill "$server"
wait "$server" 2>/dev/null || true
# the agent forgets an exited process 1 s after it reads its exit record
# (batched in the ring with the samples: within its loop's longest sleep);
# its probes or the tracepoints go with it
gone='zc_hook_libc=0 zc_hook_syscalls=0 zc_attached=0 zc_uprobe_links=0'
for _ in $(seq 20); do
	sleep 1
	snapshot "$work/zc.stats"
	left=0
	for w in $gone; do grep -qx "$w" "$work/zc.stats" || left=1; done
	[ "$left" = 0 ] && break
done
for w in $gone; do
	grep -qx "$w" "$work/zc.stats" || fail "a hook stays attached without a target: not $w"
done
echo "ok: the zero-code hook detached when the server exited ($gone)"
# a target that runs a new program: the old program's probes go, the new
# one's come (the agent holds exactly one process's perf events more),
# and none is left when it is killed
perf_fds() { ls -l "/proc/$agent_pid/fd" 2>/dev/null | grep -c 'perf_event' || true; }
if [ "$hook" = on ]; then
	base=$(perf_fds)
	att=$(sed -n 's/^zc_attaches=//p' "$work/zc.stats")
	(
		echo "$BASHPID" >"$cg/cgroup.procs"
		exec "$py" -c 'import os, sys, time
t = time.monotonic() + 1
while time.monotonic() < t: pass
os.execv(sys.executable, [sys.executable, "-c",
    "import time\nt = time.monotonic() + 1\nwhile time.monotonic() < t: pass\ntime.sleep(30)"])'
	) &
	execer=$!
	pids+=("$execer")
	# attached at its first look, again after the exec; the old program's
	# probes destroyed (a kernel grace period each: they may take a while)
	for _ in $(seq 20); do
		sleep 0.5
		snapshot "$work/zc.stats"
		[ "$(sed -n 's/^zc_attaches=//p' "$work/zc.stats")" -ge $((att + 2)) ] &&
			grep -qx "zc_uprobe_links=$links" "$work/zc.stats" && break
	done
	for w in zc_hook_libc=1 "zc_uprobe_links=$links"; do
		grep -qx "$w" "$work/zc.stats" ||
			fail "after an exec: not $w ($(grep -E '^zc_(hook|uprobe|att)' "$work/zc.stats" | tr '\n' ' '))"
	done
	[ "$(sed -n 's/^zc_attaches=//p' "$work/zc.stats")" -ge $((att + 2)) ] ||
		fail "the exec'd program was not probed again"
	[ "$(perf_fds)" = $((base + links)) ] ||
		fail "after an exec the agent holds $(perf_fds) perf events, not $base + $links"
	kill "$execer"
	wait "$execer" 2>/dev/null || true
	for _ in $(seq 20); do
		sleep 1
		snapshot "$work/zc.stats"
		grep -qx 'zc_uprobe_links=0' "$work/zc.stats" && break
	done
	grep -qx 'zc_uprobe_links=0' "$work/zc.stats" || fail "probes left after the exec'd program exited"
	[ "$(perf_fds)" = "$base" ] || fail "the agent holds $(perf_fds) perf events, not $base"
	echo "ok: an exec'd target probed again ($links probes), nothing left after it exited"
fi
kill -TERM "$agent_pid"
wait "$agent_pid" || fail "the agent exited with status $?"
grep -E '^(bpf_ctx_http|bpf_http_[a-z_]*|zc_[a-z_]*|bpf_tagged|bpf_samples)=' "$work/zc.stats" || true

psql "$conn" -qX -v ON_ERROR_STOP=1 \
	-c "CREATE TABLE truth (kind text, trace text, parent text, path text, status int, client_ms float8)" \
	-c "\\copy truth FROM '$work/truth.csv' WITH (FORMAT csv)" >/dev/null
total=$(q "SELECT count(*) FROM truth WHERE kind <> 'garbage'")
[ "$total" = $((2 * n + 7)) ] || fail "the client made $total requests"
rows="SELECT replace(r.trace_id::text, '-', '') AS trace, lpad(to_hex(r.parent_span_id), 16, '0') AS parent,
             rt.method, rt.route, r.status_code, r.duration_us, r.span_id
        FROM traceprof.requests r LEFT JOIN traceprof.routes rt ON rt.route_id = r.route_id"
got=$(q "SELECT count(*) FROM ($rows) x")
echo "   request rows: $got for $total requests (and none for the garbage)"
[ "$got" = "$total" ] || fail "$got request rows for $total requests"
[ "$(q "SELECT count(*) FROM traceprof.requests WHERE context_source IS DISTINCT FROM 2")" = 0 ] ||
	fail "request rows found from system calls do not say so (context_source 2)"
[ "$(q "SELECT count(*) FROM traceprof.requests_v WHERE context_source = 'zero-code-http'")" = "$total" ] ||
	fail "requests_v does not name the zero-code source"
bad=$(q "SELECT count(*) FROM ($rows) x WHERE x.method <> 'GET'")
[ "$bad" = 0 ] || fail "$bad rows without the method GET"
# with a valid traceparent: its trace and parent span ids, the path, 200
tp=$(q "SELECT count(*) FROM truth t JOIN ($rows) x ON x.trace = t.trace AND x.parent = t.parent
         WHERE t.kind = 'tp' AND x.route = t.path AND x.status_code = 200")
[ "$tp" = "$n" ] || fail "$tp of the $n requests with a traceparent kept its trace and parent ids"
# invalid ones (version ff, 00 with a field after the flags, two headers) start a new trace
[ "$(q "SELECT count(*) FROM ($rows) x JOIN truth t ON x.trace = t.trace WHERE t.kind = 'bad'")" = 0 ] ||
	fail "an invalid traceparent (version ff, 00 with more fields, two headers) was taken"
grep -qx 'bpf_http_bad_traceparent=3' "$work/zc.stats" || fail "the invalid traceparents are not counted"
# a later version with more fields: adopted by its first four
[ "$(q "SELECT count(*) FROM ($rows) x JOIN truth t ON x.trace = t.trace AND x.parent = t.parent WHERE t.kind = 'future'")" = 1 ] ||
	fail "a later version's traceparent with more fields was not adopted"
[ "$(q "SELECT count(*) FROM ($rows) x WHERE x.route = '/missing' AND x.status_code = 404")" = 1 ] ||
	fail "the 404 is not stored with its status"
# a traceparent beyond the 2 KiB of the head looked at: a new trace, the request still stored
[ "$(q "SELECT count(*) FROM ($rows) x JOIN truth t ON x.trace = t.trace WHERE t.kind = 'big'")" = 0 ] ||
	fail "a traceparent 60 KiB into the head was taken"
# bytes that are not ASCII in the target: '?' in the route, counted
[ "$(q "SELECT count(*) FROM ($rows) x WHERE x.route = '/burn/$ms/??' AND x.status_code = 404")" = 1 ] ||
	fail "the request with a target that is not ASCII is not stored as /burn/$ms/??"
grep -qx 'zc_bad_target=1' "$work/zc.stats" || fail "the target that is not ASCII is not counted"
# durations: at least the handler's CPU, at most the client's view
slow=$(q "SELECT count(*) FROM ($rows) x WHERE x.route ~ '^/burn/[0-9]+$'
           AND (x.duration_us < $ms * 1000 OR x.duration_us > (SELECT max(client_ms) FROM truth) * 1000)")
[ "$slow" = 0 ] || fail "$slow request durations outside [$ms ms, the client's longest]"
q "SELECT 'duration vs client (ms, median): ' || round((percentile_cont(0.5) WITHIN GROUP (ORDER BY x.duration_us))::numeric / 1000, 1)
          || ' vs ' || (SELECT round((percentile_cont(0.5) WITHIN GROUP (ORDER BY client_ms))::numeric, 1) FROM truth WHERE path ~ '^/burn/[0-9]+$')
     FROM ($rows) x WHERE x.route ~ '^/burn/[0-9]+$'" | sed 's/^/   /'
# samples: each /burn request has its own, and every tag is a request's
per_trace="SELECT replace(trace_id::text, '-', '') AS trace,
                  sum(coalesce((SELECT sum(c) FROM unnest(counts) c), cardinality(stacks)))::int AS n
             FROM traceprof.samples WHERE trace_id IS NOT NULL GROUP BY 1"
none=$(q "SELECT count(*) FROM ($rows) x WHERE x.route ~ '^/burn/[0-9]+$'
           AND NOT EXISTS (SELECT FROM ($per_trace) s WHERE s.trace = x.trace)")
[ "$none" = 0 ] || fail "$none of the /burn requests have no sample tagged with their trace id"
stray=$(q "SELECT count(*) FROM ($per_trace) s WHERE NOT EXISTS (SELECT FROM ($rows) x WHERE x.trace = s.trace)")
[ "$stray" = 0 ] || fail "$stray trace ids on samples that no request has"
tagged=$(q "SELECT coalesce(sum(n), 0) FROM ($per_trace) s")
echo "   samples tagged with the requests' trace ids: $tagged ($((2 * n + 5)) requests of $ms ms of CPU at 99 Hz)"
[ "$tagged" -ge $(((2 * n + 5) * ms * 99 / 1000 / 2)) ] || fail "only $tagged samples tagged"
echo "ok: an unmodified Python server's requests found from its system calls, rows and samples; hostile input counted"

# otlp-forward: the same requests as server spans, upstream
grep -qx "zc_forwarded=$total" "$work/zc.stats" || fail "not $total spans forwarded: $(grep zc_forward "$work/zc.stats")"
psql "$conn" -qX -v ON_ERROR_STOP=1 \
	-c "CREATE TABLE up (trace text, parent text, method text, route text, status int, duration_us bigint, service text)" \
	-c "\\copy up FROM PROGRAM 'grep -v ^listening $work/sink.csv' WITH (FORMAT csv)" >/dev/null
[ "$(q "SELECT count(*) FROM up")" = "$total" ] || fail "the upstream got $(q "SELECT count(*) FROM up") spans for $total requests"
same=$(q "SELECT count(*) FROM up u JOIN ($rows) x ON x.trace = u.trace AND x.route = u.route
          AND x.method = u.method AND x.status_code = u.status AND x.duration_us = u.duration_us
          AND coalesce(u.parent, '') = coalesce(x.parent, '')")
[ "$same" = "$total" ] || fail "$same of the $total upstream spans match their request rows"
[ "$(q "SELECT count(*) FROM up u JOIN truth t ON t.trace = u.trace AND t.parent = u.parent WHERE t.kind = 'tp'")" = "$n" ] ||
	fail "upstream spans lost the traceparent's trace and parent ids"
[ "$(q "SELECT count(*) FROM up WHERE service LIKE 'python3%'")" = "$total" ] ||
	fail "upstream spans without the process's service name: $(q "SELECT string_agg(DISTINCT service, ',') FROM up")"
echo "ok: otlp-forward got every request as a server span ($total)"
