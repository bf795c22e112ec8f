#!/usr/bin/env bash
# The ASGI middleware end to end (sdk/python/traceprof/asgi.py): Debian's
# uvicorn serves asgi_app.py (Starlette) on one event loop thread; eight
# clients send requests of two kinds at once, kind a with trace ids that
# begin with aa, kind b with bb, so requests of both kinds interleave at
# every await. Each request burns CPU in burn_<kind> in steps, in a task it
# creates (child_<kind>) and in a background task after its response
# (after_<kind>). The agent samples the service at 997 Hz. Checked:
#  - no sample in a function of one kind carries a trace of the other kind
#    (a wrong tag: 0 allowed);
#  - >= 95 % of the samples in those functions are tagged, in the
#    request's own code, in the task it created and in its background task
#    each;
#  - every request has its request row (server span over OTLP).
# usage: run_asgi_test.sh TRACEPROF_DB AGENT SDK_SO CLUSTER_DIR
set -euo pipefail
tpdb=$1 agent=$2 sdk=$3 cluster=$4
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
. "$here/lib.sh"
needs_bpf
py=/usr/bin/python3
"$py" -c 'import uvicorn, starlette' 2>/dev/null ||
	{ echo "skip: no uvicorn and Starlette for $py (python3-uvicorn, python3-starlette)"; exit 77; }
conn=$(fresh_db "$tpdb" "$cluster" tp_e2e_asgi)
otlp_port=$(free_port)
app_port=$(free_port)

TRACEPROF_SDK_LIBRARY=$sdk PYTHONPATH=$src/sdk/python PYTHONDONTWRITEBYTECODE=1 \
	OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=http://127.0.0.1:$otlp_port/v1/traces \
	"$py" -m uvicorn --app-dir "$here" --host 127.0.0.1 --port "$app_port" --log-level warning \
	--no-access-log asgi_app:app >"$work/uvicorn.log" 2>&1 &
uv=$!
pids+=("$uv")
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$app_port/work?kind=a" >/dev/null && break; sleep 0.1; done
curl -sf "http://127.0.0.1:$app_port/work?kind=a" >/dev/null || fail "uvicorn does not answer: $(cat "$work/uvicorn.log")"
start_agent agent "$agent" --db "$(as_role writer)" --target "pid:$uv" --frequency 997 --window 1s \
	--otlp-grpc "" --otlp-http "127.0.0.1:$otlp_port" --control-listen "" --stats-file "$work/stats"
sleep 1
"$py" - "$app_port" 6 >"$work/sent.txt" <<'PY'
import os, sys, threading, time, urllib.request
port, secs = sys.argv[1], float(sys.argv[2])
end = time.time() + secs
lock, sent = threading.Lock(), []
def client(kind):
    while time.time() < end:
        trace = kind * 2 + os.urandom(15).hex()
        req = urllib.request.Request("http://127.0.0.1:%s/work?kind=%s" % (port, kind[0]),
                                     headers={"traceparent": "00-%s-%s-01" % (trace, os.urandom(8).hex())})
        urllib.request.urlopen(req, timeout=30).read()
        with lock:
            sent.append(trace)
ts = [threading.Thread(target=client, args=(k,)) for k in ("a", "b") for _ in range(4)]
for t in ts: t.start()
for t in ts: t.join()
for t in sent: print(t)
PY
sleep 2.5
kill -TERM "$agent_pid"
wait "$agent_pid" || fail "the agent exited with status $?"
n_sent=$(wc -l <"$work/sent.txt")
echo "requests sent: $n_sent"

psql "$conn" -qXAt -v ON_ERROR_STOP=1 -F ' ' >"$work/kinds.txt" <<'SQL'
WITH u AS (
    SELECT s.trace_id, x.stack_id, sum(coalesce(x.c, 1)) AS n
      FROM traceprof.samples s
      JOIN traceprof.sources so USING (source_id)
     CROSS JOIN LATERAL unnest(s.stacks, s.counts) AS x(stack_id, c)
     WHERE so.service = 'asgi-svc'
     GROUP BY 1, 2),
k AS (
    SELECT u.trace_id, u.n,
           (SELECT max(substring(fn.name FROM '^asgi_app\.(burn|child|after)_[ab]$'))
              FROM unnest(st.frame_ids) AS fi(frame_id)
              JOIN traceprof.frames fr ON fr.frame_id = fi.frame_id
              JOIN traceprof.functions fn ON fn.function_id = fr.function_id) AS part,
           (SELECT max(substring(fn.name FROM '^asgi_app\.(?:burn|child|after)_([ab])$'))
              FROM unnest(st.frame_ids) AS fi(frame_id)
              JOIN traceprof.frames fr ON fr.frame_id = fi.frame_id
              JOIN traceprof.functions fn ON fn.function_id = fr.function_id) AS kind
      FROM u JOIN traceprof.stacks st ON st.stack_id = u.stack_id)
SELECT part || '_' || kind,
       coalesce(sum(n), 0),
       coalesce(sum(n) FILTER (WHERE trace_id::text LIKE kind || kind || '%'), 0),
       coalesce(sum(n) FILTER (WHERE trace_id IS NOT NULL AND trace_id::text NOT LIKE kind || kind || '%'), 0)
  FROM k WHERE kind IS NOT NULL
 GROUP BY 1 ORDER BY 1;
SQL
cat "$work/kinds.txt"
wrong=0 short=""
for part in burn child after; do
	for kind in a b; do
		read -r _ all right bad < <(grep "^${part}_$kind " "$work/kinds.txt" || echo "x 0 0 0")
		echo "${part}_$kind: $right of $all samples tagged with a trace of its kind, $bad with the other kind's"
		wrong=$((wrong + bad))
		[ "$all" -ge 30 ] && [ $((right * 100)) -ge $((all * 95)) ] || short="$short ${part}_$kind"
	done
done
[ "$wrong" -eq 0 ] || fail "$wrong samples carry the other kind's trace"
[ -z "$short" ] || fail "under 95 % of the samples tagged (or under 30 samples) in:$short"
rows=$(q "SELECT count(*) FROM traceprof.requests r JOIN traceprof.sources so USING (source_id)
          WHERE so.service = 'asgi-svc' AND r.trace_id::text ~ '^(aa|bb)'")
[ "$rows" -eq "$n_sent" ] || fail "$rows request rows for $n_sent requests"
echo "ok: ASGI requests interleaved on one event loop: 0 wrong tags, every request its row"
