#!/usr/bin/env bash
# Python frames in uWSGI's workers (docs/python.md, "Servers that fork
# from C"): Debian's uWSGI with its python3 plugin serves uwsgi_app.py in
# four modes at once, each its own service: a master with two prefork
# workers; the same with --lazy-apps; one worker with four threads
# (threads made by C); two processes without a master. uWSGI forks its
# workers from C, so a worker's main thread state keeps the master's
# native thread id; the sampler finds it by pthread_self() instead. Under
# load, sampled at 997 Hz: in each mode, of the samples taken while the
# interpreter runs (the native stack holds the evaluation loop, or Python
# frames replaced it), at least 99 % carry the application's Python frames
# (uwsgi_app.py), and every frame of that file is named right.
# usage: run_agent_python_uwsgi_test.sh TRACEPROF_DB AGENT CLUSTER_DIR
set -euo pipefail
tpdb=$1 agent=$2 cluster=$3
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
needs_bpf
command -v uwsgi >/dev/null && [ -e /usr/lib/uwsgi/plugins/python3_plugin.so ] ||
	{ echo "skip: no uWSGI with its python3 plugin (uwsgi-core, uwsgi-plugin-python3)"; exit 77; }
conn=$(fresh_db "$tpdb" "$cluster" tp_e2e_agent_python_uwsgi)
cp "$here/uwsgi_app.py" "$work/"

declare -A port
targets=()
serve() { # serve MODE uWSGI-OPTIONS...
	local mode=$1
	shift
	port[$mode]=$(free_port)
	OTEL_SERVICE_NAME=uwsgi-$mode uwsgi --plugin python3 --http-socket "127.0.0.1:${port[$mode]}" \
		--pythonpath "$work" --module uwsgi_app:application --need-app --disable-logging --die-on-term \
		"$@" >"$work/uwsgi-$mode.log" 2>&1 &
	pids+=($!)
}
serve master --master --processes 2
serve lazy --master --lazy-apps --processes 2
serve threads --master --processes 1 --threads 4
serve nomaster --processes 2
for mode in "${!port[@]}"; do
	for _ in $(seq 100); do curl -sf "http://127.0.0.1:${port[$mode]}/" >/dev/null && break; sleep 0.1; done
	curl -sf "http://127.0.0.1:${port[$mode]}/" >/dev/null || fail "uWSGI ($mode) does not answer"
done
sleep 0.5 # every worker forked
all=$(for p in "${pids[@]}"; do echo "$p"; pgrep -P "$p" || true; done | paste -sd,)
start_agent agent "$agent" --db "$(as_role writer)" --target "pid:$all" --frequency 997 \
	--window 1s --otlp-grpc "" --otlp-http "" --control-listen "" --stats-file "$work/stats"
ports=$(for m in "${!port[@]}"; do echo -n "${port[$m]},"; done)
python3 - "${ports%,}" 6 <<'PY'
import sys, threading, time, urllib.request
ports, secs = sys.argv[1].split(","), float(sys.argv[2])
end = time.time() + secs
def client(p):
    while time.time() < end:
        urllib.request.urlopen("http://127.0.0.1:%s/" % p, timeout=10).read()
ts = [threading.Thread(target=client, args=(p,)) for p in ports for _ in range(2)]
for t in ts: t.start()
for t in ts: t.join()
PY
sleep 1.5
kill -TERM "$agent_pid"
wait "$agent_pid" || fail "the agent exited with status $?"
grep -E '^(bpf_py_stacks|bpf_py_no_tstate|py_processes|py_unknown)=' "$work/stats"

# per mode: samples while the interpreter runs (eval loop native frame, or
# Python frames in its place), and of those the ones with the app's frames
psql "$conn" -qXAt -v ON_ERROR_STOP=1 -F ' ' >"$work/modes.txt" <<'SQL'
WITH u AS (
    SELECT so.service, x.stack_id, sum(coalesce(x.c, 1)) AS n
      FROM traceprof.samples s
      JOIN traceprof.sources so ON so.source_id = s.source_id
     CROSS JOIN LATERAL unnest(s.stacks, s.counts) AS x(stack_id, c)
     WHERE so.service LIKE 'uwsgi-%'
     GROUP BY 1, 2),
f AS (
    SELECT u.service, u.stack_id, u.n,
           bool_or(fn.name = '_PyEval_EvalFrameDefault' OR fn.module LIKE '%.py') AS in_python,
           bool_or(fn.module = 'uwsgi_app.py') AS app,
           bool_or(fn.module = 'uwsgi_app.py' AND fn.name NOT IN
                   ('uwsgi_app.burn', 'uwsgi_app.handle', 'uwsgi_app.application', 'uwsgi_app.<module>'))
               AS misnamed
      FROM u
      JOIN traceprof.stacks st ON st.stack_id = u.stack_id
     CROSS JOIN LATERAL unnest(st.frame_ids) AS fi(frame_id)
      LEFT JOIN traceprof.frames fr ON fr.frame_id = fi.frame_id
      LEFT JOIN traceprof.functions fn ON fn.function_id = fr.function_id
     GROUP BY 1, 2, 3)
SELECT service, coalesce(sum(n) FILTER (WHERE in_python), 0), coalesce(sum(n) FILTER (WHERE app), 0),
       coalesce(sum(n) FILTER (WHERE misnamed), 0)
  FROM f GROUP BY service ORDER BY service;
SQL
cat "$work/modes.txt"
for mode in master lazy threads nomaster; do
	read -r _ inpy app bad < <(grep "^uwsgi-$mode " "$work/modes.txt" || echo "x 0 0 0")
	echo "uWSGI $mode: $app of $inpy samples in the interpreter carry the app's frames, $bad misnamed"
	[ "$inpy" -ge 200 ] || fail "uWSGI $mode: only $inpy samples in the interpreter"
	[ $((app * 100)) -ge $((inpy * 99)) ] || fail "uWSGI $mode: $app of $inpy samples with the app's frames (99 % needed)"
	[ "$bad" -eq 0 ] || fail "uWSGI $mode: $bad samples with a misnamed frame of the app"
done
echo "ok: Python frames in uWSGI's workers in four modes"
