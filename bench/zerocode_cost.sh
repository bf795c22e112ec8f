#!/usr/bin/env bash
# zerocode_cost.sh - what finding HTTP/1.x requests from system calls
# costs (docs/zero-code-http.md), side by side in one run, ROUNDS rounds
# interleaved, medians, for both hooks (--zero-code-http on: uprobes on
# the target's libc; syscalls: the raw syscall tracepoints):
#
#  - a process that is not a target: `dd bs=1` copying BYTES from
#    /dev/zero to /dev/null (two system calls a byte), with no agent, and
#    with an agent following a Python server in a cgroup it targets, with
#    each hook, and with zero-code off: the tracepoints run for every
#    system call of the machine, the uprobes only in the server;
#  - the target itself: the Python ThreadingHTTPServer of the tests
#    (tests/e2e/zc_server.py) answering GET /burn/0 over one kept-alive
#    connection for SECONDS, requests/s with the agent targeting it with
#    --zero-code-http off, on and syscalls;
#  - the time the agent took to attach the hook to the server (its debug
#    log), with the server's threads (THREADS idle ones started first).
#
# Never fails on the figures. usage: sudo bench/zerocode_cost.sh
# environment: ROUNDS (5), BYTES (2000000), SECONDS_PER_RUN (5), THREADS (0),
# TRACEPROF_BUILD_DIR
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${TRACEPROF_BUILD_DIR:-$root/build}
rounds=${ROUNDS:-5} bytes=${BYTES:-2000000} secs=${SECONDS_PER_RUN:-5} threads=${THREADS:-0}
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
	exec python3 -c 'import runpy, sys, threading, time
for _ in range(int(sys.argv[1])):
    threading.Thread(target=time.sleep, args=(1e6,), daemon=True).start()
sys.argv = sys.argv[2:]
runpy.run_path(sys.argv[0], run_name="__main__")' "$threads" "$root/tests/e2e/zc_server.py" >"$work/port"
) &
srv=$!
for _ in $(seq 50); do [ -s "$work/port" ] && break; sleep 0.1; done
port=$(head -1 "$work/port")

agent() { # agent off|on|syscalls: an agent on the cgroup, zero-code as asked, no database
	"$build/agent/traceprof-agent" --db "host=/nonexistent" --spool-dir "" --target "cgroup:$cg" \
		--zero-code-http "$1" --otlp-grpc "" --otlp-http "" --control-listen "" \
		--log-level debug 2>"$work/agent.log" &
	agent_pid=$!
	sleep 2
}
stop_agent() {
	kill -TERM "$agent_pid"
	wait "$agent_pid" 2>/dev/null || true
	agent_pid=
}
attach_ms() { # the hook's attach time from the agent's log (ms)
	awk '/zero-code HTTP pid=.* hook=/ { for (i = 1; i <= NF; i++) if ($i ~ /^attach_us=/) { sub("attach_us=", "", $i); print $i / 1000 } }' "$work/agent.log" | head -1
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
: >"$work/dd_none" >"$work/dd_off" >"$work/dd_libc" >"$work/dd_sys" >"$work/rps_off" >"$work/rps_libc" >"$work/rps_sys"
: >"$work/att_libc" >"$work/att_sys"
for r in $(seq "$rounds"); do
	dd_s >>"$work/dd_none"
	agent on
	dd_s >>"$work/dd_libc"
	rps >>"$work/rps_libc"
	stop_agent
	attach_ms >>"$work/att_libc"
	agent syscalls
	dd_s >>"$work/dd_sys"
	rps >>"$work/rps_sys"
	stop_agent
	attach_ms >>"$work/att_sys"
	agent off
	dd_s >>"$work/dd_off"
	rps >>"$work/rps_off"
	stop_agent
	echo "round $r done: dd none $(tail -1 "$work/dd_none") off $(tail -1 "$work/dd_off") libc $(tail -1 "$work/dd_libc") syscalls $(tail -1 "$work/dd_sys"); rps off $(tail -1 "$work/rps_off") libc $(tail -1 "$work/rps_libc") syscalls $(tail -1 "$work/rps_sys")" >&2
done
med() { sort -g "$1" | awk '{ a[NR] = $1 } END { print (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2) }'; }
dn=$(med "$work/dd_none") do=$(med "$work/dd_off") dl=$(med "$work/dd_libc") ds=$(med "$work/dd_sys")
ro=$(med "$work/rps_off") rl=$(med "$work/rps_libc") rs=$(med "$work/rps_sys")
al=$(med "$work/att_libc") as=$(med "$work/att_sys")
echo "zero-code HTTP cost, $rounds rounds interleaved, medians (server threads: $((threads + 1)) and one a connection)"
echo
echo "| what | without | libc hook (uprobes) | ratio | syscall hook (tracepoints) | ratio |"
echo "|---|---:|---:|---:|---:|---:|"
printf '| dd bs=1 of %s bytes, not a target (s) | %.3f (no agent) | %.3f | %.3f | %.3f | %.3f |\n' \
	"$bytes" "$dn" "$dl" "$(echo "$dl / $dn" | bc -l)" "$ds" "$(echo "$ds / $dn" | bc -l)"
printf '| the same, against an agent with zero-code off (s) | %.3f | %.3f | %.3f | %.3f | %.3f |\n' \
	"$do" "$dl" "$(echo "$dl / $do" | bc -l)" "$ds" "$(echo "$ds / $do" | bc -l)"
printf '| Python server, GET /burn/0 (requests/s) | %.0f (agent, zero-code off) | %.0f | %.3f | %.0f | %.3f |\n' \
	"$ro" "$rl" "$(echo "$rl / $ro" | bc -l)" "$rs" "$(echo "$rs / $ro" | bc -l)"
printf '| attaching the hook to the server (ms) | | %.1f | | %.1f | |\n' "${al:-0}" "${as:-0}"
