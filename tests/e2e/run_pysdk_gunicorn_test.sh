#!/usr/bin/env bash
# The Python package (sdk/python) end to end: gunicorn (sync workers, 2
# workers) serves a Flask app whose one line enables traceprof's WSGI
# middleware; the agent samples the workers at 49 Hz and receives their
# server spans over OTLP/HTTP; traceprof-controller (local mode) holds a
# trigger for 3 slow requests. A load generator sends fast requests and
# slow ones (300 ms of CPU in slow_checkout_work, hashing in libcrypto,
# which nothing else in the service runs), each with a known trace id, and
# records the server span id and CPU time each answer reports. Checked
# against that ground truth:
#  - every request has its request row (trace, server span, route template);
#  - >= 99 % of the workers' samples in libcrypto (inside slow requests)
#    carry the trace and span of a slow request; none carries a trace id
#    that no request had;
#  - each slow trace's profile shows the view (slow) and slow_checkout_work
#    (Python frames, from the agent's CPython walk) over its hashing;
#  - the trigger collects exactly 3 requests, each a slow one.
# With PYSDK_WORKER_CLASS=gthread in the environment: gthread workers of 4
# threads each under 4 concurrent clients instead (the same checks).
# usage: run_pysdk_gunicorn_test.sh TRACEPROF_DB AGENT CONTROLLER SDK_SO CLUSTER_DIR
set -euo pipefail
tpdb=$1 agent=$2 controller=$3 sdk=$4 cluster=$5
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
needs_bpf
gunicorn=$(command -v /usr/bin/gunicorn gunicorn | head -1) || true
[ -n "$gunicorn" ] || { echo "skip: no gunicorn (scripts/deps.sh)"; exit 77; }
head -1 "$gunicorn" | grep -q python || { echo "skip: $gunicorn is not a Python script"; exit 77; }
py=$(head -1 "$gunicorn" | sed 's/^#! *//; s/ .*//')
"$py" -c 'import flask' 2>/dev/null || { echo "skip: no Flask for $py (scripts/deps.sh)"; exit 77; }

n_fast=60 n_slow=10 slow_ms=300 n_trigger=3
worker=(--worker-class sync) clients=2
if [ "${PYSDK_WORKER_CLASS:-sync}" = gthread ]; then worker=(--worker-class gthread --threads 4) clients=4; fi
conn=$(fresh_db "$tpdb" "$cluster" tp_e2e_pysdk)
otlp_port=$(free_port)
ctl_port=$(free_port)
app_port=$(free_port)
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$work/token"
chmod 600 "$work/token"

TRACEPROF_SDK_LIBRARY=$sdk PYTHONPATH="$here/../../sdk/python" PYTHONDONTWRITEBYTECODE=1 \
	OTEL_EXPORTER_OTLP_TRACES_ENDPOINT="http://127.0.0.1:$otlp_port/v1/traces" \
	"$gunicorn" --workers 2 "${worker[@]}" --bind "127.0.0.1:$app_port" --chdir "$here" \
	pysdk_flask_app:app >"$work/gunicorn.out" 2>"$work/gunicorn.log" &
gpid=$!
pids+=("$gpid")
for _ in $(seq 150); do [ "$(grep -c 'traceprof on' "$work/gunicorn.log")" -ge 2 ] && break; sleep 0.1; done
[ "$(grep -c 'traceprof on' "$work/gunicorn.log")" -ge 2 ] || fail "gunicorn's two workers did not load the app with traceprof on"
workers=$(sed -n 's/^app loaded in \([0-9]*\), traceprof on$/\1/p' "$work/gunicorn.log" | paste -sd,)

start_agent agent "$agent" --db "$(as_role writer)" --target "pid:$gpid,$workers" --frequency 49 --window 1s \
	--otlp-http "127.0.0.1:$otlp_port" --otlp-grpc "" \
	--control-listen "127.0.0.1:$ctl_port" --control-token-file "$work/token" --stats-file "$work/stats"

mkdir "$work/triggers"
manifest slow-flask py-flask 'match:' '  minDuration: 200ms' 'sampling:' '  frequencyHz: 99' \
	"maxRequests: $n_trigger" 'timeout: 2m' >"$work/triggers/slow.yaml"
"$controller" --triggers-dir "$work/triggers" --agent "127.0.0.1:$ctl_port" \
	--agent-token-file "$work/token" --db "$(as_role controller)" --status-file "$work/status.json" \
	2>"$work/controller.log" &
pids+=($!)
phase=""
for _ in $(seq 100); do
	phase=$(q "SELECT phase FROM traceprof.trace_profile_triggers WHERE name = 'slow-flask'")
	[ "$phase" = Active ] && break
	sleep 0.1
done
[ "$phase" = Active ] || fail "the trigger is not active (phase '$phase')"

python3 "$here/pysdk_load.py" "$app_port" "$work/truth.csv" $n_fast $n_slow $slow_ms $clients 11 >"$work/load.log" 2>&1 ||
	fail "load generator"
for _ in $(seq 100); do
	phase=$(q "SELECT phase FROM traceprof.trace_profile_triggers WHERE name = 'slow-flask'")
	[ "$phase" = Completed ] && break
	sleep 0.1
done
[ "$phase" = Completed ] || fail "the trigger did not complete (phase '$phase')"
# the workers' last spans (exported every second) and the last window
want=$((n_fast + n_slow))
for _ in $(seq 50); do
	[ "$(q "SELECT count(*) FROM traceprof.requests")" -ge "$want" ] && break
	sleep 0.1
done
kill -TERM "$agent_pid"
wait "$agent_pid" || fail "the agent exited with status $?"

load_truth truth "$work/truth.csv"
check "the load generator's requests" "$want" "SELECT count(*) FROM truth"
check "each request's row: its trace, server span and route template" "$want" \
	"SELECT count(*) FROM truth t JOIN traceprof.requests r
	   ON r.trace_id = traceprof.parse_trace_id(t.trace_id)
	  AND r.span_id = traceprof.parse_span_id(t.server_span_id)
	  AND r.parent_span_id = traceprof.parse_span_id(t.parent_span_id)
	 JOIN traceprof.routes ro ON ro.route_id = r.route_id AND ro.route = t.route AND ro.method = 'GET'"
check "no request row of another trace" 0 \
	"SELECT count(*) FROM traceprof.requests r WHERE NOT EXISTS
	   (SELECT FROM truth t WHERE traceprof.parse_trace_id(t.trace_id) = r.trace_id)"
check "the workers' service name from their process context" 1 \
	"SELECT (count(*) >= 1)::int FROM traceprof.sources WHERE service = 'py-flask'"

# samples of the workers (service py-flask): per stack, whether libcrypto (slow requests only) runs in it
psql "$conn" -qX -v ON_ERROR_STOP=1 -c "CREATE TABLE s AS
	SELECT sm.trace_id, sm.span_id, coalesce(sm.counts[u.i], 1) AS n,
	       EXISTS (SELECT FROM unnest(st.function_ids) x(fid) JOIN traceprof.functions f
	                ON f.function_id = x.fid WHERE f.module LIKE 'libcrypto.so%') AS crypto,
	       (SELECT array_agg(f.name) FROM unnest(st.function_ids) x(fid)
	          JOIN traceprof.functions f ON f.function_id = x.fid) AS fns
	  FROM traceprof.samples sm JOIN traceprof.sources so USING (source_id)
	 CROSS JOIN LATERAL unnest(sm.stacks) WITH ORDINALITY u(stack_id, i)
	  JOIN traceprof.stacks st ON st.stack_id = u.stack_id
	 WHERE so.service = 'py-flask'" >/dev/null
crypto=$(q "SELECT coalesce(sum(n), 0) FROM s WHERE crypto")
right=$(q "SELECT coalesce(sum(n), 0) FROM s JOIN truth t
	    ON s.trace_id = traceprof.parse_trace_id(t.trace_id)
	   AND s.span_id = traceprof.parse_span_id(t.server_span_id)
	 WHERE s.crypto AND t.path LIKE '/slow/%'")
echo "samples in slow requests' hashing: $crypto, tagged with their request: $right"
[ "$crypto" -ge 40 ] || fail "only $crypto samples in libcrypto (10 x 300 ms of CPU at 49 Hz: ~147 expected)"
awk -v r="$right" -v c="$crypto" 'BEGIN { exit !(r >= 0.99 * c) }' ||
	fail "$right of $crypto in-request samples carry their request's trace and span (< 99 %)"
check "samples tagged with a trace id no request had" 0 \
	"SELECT coalesce(sum(n), 0) FROM s WHERE trace_id IS NOT NULL AND NOT EXISTS
	   (SELECT FROM truth t WHERE traceprof.parse_trace_id(t.trace_id) = s.trace_id)"
check "tagged samples" 1 "SELECT (sum(n) FILTER (WHERE trace_id IS NOT NULL) >= $crypto)::int FROM s"

# Python frames (the agent's CPython walk): each slow trace's profile shows
# the Flask view and the function it called for each of its hashing samples
traces=$(q "SELECT count(DISTINCT trace_id) FROM s WHERE crypto AND trace_id IS NOT NULL")
check "slow traces whose profile shows slow and slow_checkout_work over their hashing" "$traces" \
	"SELECT count(*) FROM (SELECT trace_id, sum(n) AS c FROM s WHERE crypto AND trace_id IS NOT NULL
	                        GROUP BY 1) x
	 WHERE (SELECT sum(p.total_samples) FROM traceprof.trace_profile(traceprof.trace_id_text(x.trace_id)) p
	         WHERE p.function = 'pysdk_flask_app.slow_checkout_work') >= x.c
	   AND (SELECT sum(p.total_samples) FROM traceprof.trace_profile(traceprof.trace_id_text(x.trace_id)) p
	         WHERE p.function = 'pysdk_flask_app.slow') >= x.c"
check "the trigger collected exactly $n_trigger requests" $n_trigger \
	"SELECT collected_requests FROM traceprof.trace_profile_triggers WHERE name = 'slow-flask'"
check "each claimed trace a request of 200 ms or more by the load generator's clock" $n_trigger \
	"SELECT count(DISTINCT t.trace_id) FROM traceprof.trace_profile_triggers g,
	 unnest(g.trace_ids) c JOIN truth t ON t.trace_id = traceprof.trace_id_text(c)
	 WHERE g.name = 'slow-flask' AND t.duration_us >= 200000"
echo "ok: Flask under gunicorn, tagged through the Python package"
