#!/usr/bin/env bash
# zerocode_cost.sh - what finding HTTP/1.x requests from system calls
# costs (docs/zero-code-http.md), side by side in one run, ROUNDS rounds
# interleaved, medians:
#
#  - a process that is not a target: `dd bs=1` copying BYTES from
#    /dev/zero to /dev/null (two system calls a byte), with no agent, and
#    with an agent whose zero-code programs are attached (for a Python
#    server in a cgroup it targets): the syscall tracepoints run for every
#    system call of the machine;
#  - the target itself: the Python ThreadingHTTPServer of the tests
#    (tests/e2e/zc_server.py) answering GET /burn/0 over one kept-alive
#    connection for SECONDS, requests/s with the agent targeting it with
#    --zero-code-http off and on.
#
# Never fails on the figures. usage: sudo bench/zerocode_cost.sh
# environment: ROUNDS (5), BYTES (2000000), SECONDS_PER_RUN (5), TRACEPROF_BUILD_DIR
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${TRACEPROF_BUILD_DIR:-$root/build}
rounds=${ROUNDS:-5} bytes=${BYTES:-2000000} secs=${SECONDS_PER_RUN:-5}
cgroot=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/mounts)
cg=$cgroot/traceprof-zc-bench-$$
work=$(mktemp -d)
mkdir "$cg"
agent_pid=
cleanup() {
	[ -n "$agent_pid" ] && kill "$agent_pid" 2>/dev/null
	[ -n "${srv:-}" ] && kill "$srv" 2>/dev/null
	wait 2>/dev/null || true
	rmdir "$cg" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
(
	echo "$BASHPID" >"$cg/cgroup.procs"
	exec python3 "$root/tests/e2e/zc_server.py" >"$work/port"
) &
srv=$!
for _ in $(seq 50); do [ -s "$work/port" ] && break; sleep 0.1; done
port=$(head -1 "$work/port")

agent() { # agent on|off: an agent on the cgroup, zero-code as asked, no database
	"$build/agent/traceprof-agent" --db "host=/nonexistent" --spool-dir "" --target "cgroup:$cg" \
		--zero-code-http "$1" --otlp-grpc "" --otlp-http "" --control-listen "" \
		--log-level error 2>/dev/null &
	agent_pid=$!
	sleep 2
}
stop_agent() {
	kill -TERM "$agent_pid"
	wait "$agent_pid" 2>/dev/null || true
	agent_pid=
}
dd_s() { # seconds dd takes
	local t0 t1
	t0=$(date +%s.%N)
	dd if=/dev/zero of=/dev/null bs=1 count="$bytes" 2>/dev/null
	t1=$(date +%s.%N)
	echo "$t1 - $t0" | bc -l
}
rps() { # requests/s of the server over one kept-alive connection
	python3 - "$port" "$secs" <<'PY'
import http.client, sys, time
c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]))
end = time.monotonic() + float(sys.argv[2]); n = 0
while time.monotonic() < end:
    c.request("GET", "/burn/0"); c.getresponse().read(); n += 1
print(n / float(sys.argv[2]))
PY
}
: >"$work/dd_none" >"$work/dd_on" >"$work/rps_off" >"$work/rps_on"
for r in $(seq "$rounds"); do
	dd_s >>"$work/dd_none"
	agent on
	dd_s >>"$work/dd_on"
	rps >>"$work/rps_on"
	stop_agent
	agent off
	rps >>"$work/rps_off"
	stop_agent
	echo "round $r done" >&2
done
med() { sort -g "$1" | awk '{ a[NR] = $1 } END { print (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2) }'; }
dn=$(med "$work/dd_none") don=$(med "$work/dd_on") ro=$(med "$work/rps_off") rn=$(med "$work/rps_on")
echo "zero-code HTTP cost, $rounds rounds interleaved, medians"
echo
echo "| what | without | with zero-code capture | ratio |"
echo "|---|---:|---:|---:|"
printf '| dd bs=1 of %s bytes, not a target (s) | %.3f (no agent) | %.3f | %.3f |\n' "$bytes" "$dn" "$don" "$(echo "$don / $dn" | bc -l)"
printf '| Python server, GET /burn/0 (requests/s) | %.0f (agent, zero-code off) | %.0f | %.3f |\n' "$ro" "$rn" "$(echo "$rn / $ro" | bc -l)"
