# Real, unmodified servers from Debian for the zero-code HTTP checks and
# their benchmark (sourced after lib.sh): each starts in the background in
# cgroup $cg (so one `cgroup:` target covers every process it forks), on a
# free loopback port ($port), with its own configuration under $work, never
# a system service; the process started is appended to $pids (killed at exit).
zc_here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export PYTHONDONTWRITEBYTECODE=1 # nothing written into the source tree

# zc_wait_port: waits up to 10 s until something listens on $port
zc_wait_port() {
	for _ in $(seq 100); do
		python3 -c "import socket; socket.create_connection(('127.0.0.1', $port), 0.2).close()" 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}

# zc_start_apache MPM: Apache httpd (apache2, MPM prefork or worker) in the
# foreground, the CPU-heavy mod_lua handler zc_burn.lua on /burn/MS,
# keep-alive on, no access log
zc_start_apache() {
	local mpm=$1 d=$work/apache
	mkdir -p "$d/docs"
	chmod 711 "$work"
	chmod 755 "$d" "$d/docs"
	cp "$zc_here/zc_burn.lua" "$d/zc_burn.lua"
	chmod 644 "$d/zc_burn.lua"
	port=$(free_port)
	cat >"$d/httpd.conf" <<CONF
ServerRoot /usr/lib/apache2
ServerName 127.0.0.1
LoadModule mpm_${mpm}_module modules/mod_mpm_${mpm}.so
LoadModule authn_core_module modules/mod_authn_core.so
LoadModule authz_core_module modules/mod_authz_core.so
LoadModule lua_module modules/mod_lua.so
Listen 127.0.0.1:$port
PidFile $d/httpd.pid
DefaultRuntimeDir $d
ErrorLog $d/error.log
LogLevel warn
User nobody
Group nogroup
DocumentRoot $d/docs
<Directory />
	Require all granted
</Directory>
KeepAlive On
MaxKeepAliveRequests 0
StartServers 2
MinSpareServers 2
MaxSpareServers 4
ServerLimit 16
MaxRequestWorkers 16
LuaMapHandler "^/burn/[0-9]+$" $d/zc_burn.lua handle
CONF
	if [ "$mpm" = worker ]; then
		sed -i 's/^MaxRequestWorkers 16/MaxRequestWorkers 16\nThreadsPerChild 8/; s/^ServerLimit 16/ServerLimit 2/; /SpareServers/d' "$d/httpd.conf"
	fi
	(
		echo "$BASHPID" >"$cg/cgroup.procs"
		# its own session: Apache's parent ends by signalling its whole
		# process group, which would otherwise be the test's (and ctest's)
		exec setsid apache2 -f "$d/httpd.conf" -DFOREGROUND
	) >"$work/apache.log" 2>&1 &
	pids+=($!)
	zc_wait_port || { cat "$d/error.log" >&2 || true; return 1; }
}

# zc_start_gunicorn WORKERS: gunicorn sync workers serving zc_flask:app
zc_start_gunicorn() {
	port=$(free_port)
	(
		echo "$BASHPID" >"$cg/cgroup.procs"
		exec gunicorn --chdir "$zc_here" --workers "$1" --worker-class sync \
			--bind "127.0.0.1:$port" --log-level warning zc_flask:app
	) >"$work/gunicorn.log" 2>&1 &
	pids+=($!)
	zc_wait_port
}

# zc_start_threading: zc_flask.py on Werkzeug's threaded server (Python's
# ThreadingMixIn HTTPServer: a thread per connection)
zc_start_threading() {
	port=$(free_port)
	(
		echo "$BASHPID" >"$cg/cgroup.procs"
		exec python3 "$zc_here/zc_flask.py" "$port"
	) >"$work/threading.log" 2>&1 &
	pids+=($!)
	zc_wait_port
}
