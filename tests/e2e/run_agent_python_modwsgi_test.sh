#!/usr/bin/env bash
# Python frames in Apache's mod_wsgi (docs/python.md, "Servers that fork
# from C"): Debian's Apache httpd with libapache2-mod-wsgi-py3 serves
# uwsgi_app.py (WSGIScriptAlias) in two modes at once, each its own
# Apache and service: embedded in the worker MPM's threaded children, as
# two applications in mod_wsgi's default sub-interpreter each (a thread
# state is found in every interpreter, not only the newest); and in daemon mode
# (two daemon processes of four threads, WSGIDaemonProcess) in the main
# interpreter (%{GLOBAL}). Under load, sampled at 997 Hz: in each mode, of
# the samples taken while the interpreter runs (the native evaluation
# loop, or Python frames in its place), at least 99 % carry the
# application's frames, and every frame of its file is named after the
# module mod_wsgi made of it (_mod_wsgi_<hash>).
# usage: run_agent_python_modwsgi_test.sh TRACEPROF_DB AGENT CLUSTER_DIR
set -euo pipefail
tpdb=$1 agent=$2 cluster=$3
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
needs_bpf
[ -e /usr/lib/apache2/modules/mod_wsgi.so ] && command -v apache2 >/dev/null ||
	{ echo "skip: no Apache with mod_wsgi (apache2, libapache2-mod-wsgi-py3)"; exit 77; }
conn=$(fresh_db "$tpdb" "$cluster" tp_e2e_agent_python_modwsgi)
chmod 711 "$work"

declare -A port
serve() { # serve MODE WSGI-DIRECTIVES: an Apache of its own, in its own session
	local mode=$1 d=$work/apache-$1
	shift
	mkdir -p "$d"
	chmod 755 "$d"
	cp "$here/uwsgi_app.py" "$d/app.wsgi"
	cp "$here/uwsgi_app.py" "$d/app2.wsgi"
	chmod 644 "$d/app.wsgi" "$d/app2.wsgi"
	port[$mode]=$(free_port)
	cat >"$d/httpd.conf" <<CONF
ServerRoot /usr/lib/apache2
ServerName 127.0.0.1
LoadModule mpm_worker_module modules/mod_mpm_worker.so
LoadModule authn_core_module modules/mod_authn_core.so
LoadModule authz_core_module modules/mod_authz_core.so
LoadModule wsgi_module modules/mod_wsgi.so
Listen 127.0.0.1:${port[$mode]}
PidFile $d/httpd.pid
DefaultRuntimeDir $d
ErrorLog $d/error.log
LogLevel warn
User nobody
Group nogroup
StartServers 2
ServerLimit 2
ThreadsPerChild 4
MaxRequestWorkers 8
<Directory $d>
	Require all granted
</Directory>
WSGIScriptAlias /work $d/app.wsgi
WSGIScriptAlias /work2 $d/app2.wsgi
$*
CONF
	(OTEL_SERVICE_NAME=modwsgi-$mode exec setsid apache2 -f "$d/httpd.conf" -DFOREGROUND) \
		>"$work/apache-$mode.log" 2>&1 &
	pids+=($!)
}
serve embedded
serve daemon "WSGIDaemonProcess tp processes=2 threads=4
WSGIProcessGroup tp
WSGIApplicationGroup %{GLOBAL}"
for mode in "${!port[@]}"; do
	for _ in $(seq 100); do curl -sf "http://127.0.0.1:${port[$mode]}/work" >/dev/null && break; sleep 0.1; done
	curl -sf "http://127.0.0.1:${port[$mode]}/work" >/dev/null ||
		fail "Apache ($mode) does not answer: $(cat "$work/apache-$mode/error.log")"
done
# every Apache process: the parents' children (the workers, mod_wsgi's daemons)
all=$(for p in "${pids[@]}"; do echo "$p"; pgrep -P "$p" || true; done | paste -sd,)
start_agent agent "$agent" --db "$(as_role writer)" --target "pid:$all" --frequency 997 \
	--window 1s --otlp-grpc "" --otlp-http "" --control-listen "" --stats-file "$work/stats"
ports=$(for m in "${!port[@]}"; do echo -n "${port[$m]},"; done)
python3 - "${ports%,}" 6 <<'PY'
import sys, threading, time, urllib.request
ports, secs = sys.argv[1].split(","), float(sys.argv[2])
end = time.time() + secs
def client(p, path):
    while time.time() < end:
        urllib.request.urlopen("http://127.0.0.1:%s/%s" % (p, path), timeout=10).read()
ts = [threading.Thread(target=client, args=(p, path)) for p in ports for path in ("work", "work2", "work")]
for t in ts: t.start()
for t in ts: t.join()
PY
sleep 1.5
kill -TERM "$agent_pid"
wait "$agent_pid" || fail "the agent exited with status $?"
grep -E '^(bpf_py_stacks|bpf_py_no_tstate|py_processes|py_unknown)=' "$work/stats"

py_server_modes modwsgi 'app%.wsgi' '^_mod_wsgi_[0-9a-f]+\.(burn|handle|application|<module>)$' embedded daemon
echo "ok: Python frames in mod_wsgi, embedded (a sub-interpreter) and daemon"
