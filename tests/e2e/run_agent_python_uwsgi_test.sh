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

py_server_modes uwsgi 'uwsgi_app.py' '^uwsgi_app\.(burn|handle|application|<module>)$' master lazy threads nomaster
echo "ok: Python frames in uWSGI's workers in four modes"
