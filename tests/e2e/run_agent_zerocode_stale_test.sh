#!/usr/bin/env bash
# Stale zero-code thread state (docs/zero-code-http.md, "Stale state"): a
# thread's request found from its system calls must stop tagging its
# samples when capture of its process stops, or when it runs a new
# program, while it is inside the request (its calls are no longer
# followed, so nothing else would ever end the request).
#
# Two processes of zc_stale.py in a cgroup the agent samples at 999 Hz
# without --zero-code-http; traceprof-controller in local mode applies one
# trigger a process with spec.sampling.zeroCodeHTTP (never completing), so
# capture of one can stop while the other keeps the zero-code programs on.
# - burn: reads a request head, then spends CPU without a system call; its
#   samples are tagged (the request was found); its trigger's manifest is
#   removed (capture of it stops): over the next second no sample may be
#   tagged from zero-code HTTP (bpf_ctx_http stays), the request dropped
#   is counted (bpf_http_stale).
# - exec: reads a request head, then execs a program that spends CPU; once
#   it runs no sample may be tagged from zero-code HTTP.
# usage: run_agent_zerocode_stale_test.sh TRACEPROF_DB AGENT CONTROLLER CLUSTER_DIR
set -euo pipefail
tpdb=$1 agent=$2 controller=$3 cluster=$4
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
needs_bpf
needs_cgroup traceprof-zc-stale
conn=$(fresh_db "$tpdb" "$cluster" tp_e2e_zc_stale)

for mode in burn exec; do
	(
		echo "$BASHPID" >"$cg/cgroup.procs"
		exec python3 "$here/zc_stale.py" $mode "$work/$mode.mark" >"$work/$mode.port"
	) &
	pids+=($!)
	eval "${mode}_pid=$!"
done
for _ in $(seq 50); do [ -s "$work/burn.port" ] && [ -s "$work/exec.port" ] && break; sleep 0.1; done
[ -s "$work/burn.port" ] && [ -s "$work/exec.port" ] || fail "zc_stale.py did not start"
ctl_port=$(free_port)
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$work/token"
chmod 600 "$work/token"
start_agent agent "$agent" --db "$(as_role writer)" --target "cgroup:$cg" --frequency 999 \
	--otlp-grpc "" --otlp-http "" --control-listen "127.0.0.1:$ctl_port" \
	--control-token-file "$work/token" --stats-file "$work/stats"
mkdir "$work/triggers"
for mode in burn exec; do
	eval "p=\$${mode}_pid"
	manifest "zc-$mode" zc-svc "targets: {pids: [$p]}" "match: {minDuration: 10m}" \
		"sampling: {zeroCodeHTTP: true}" "maxRequests: 1" "timeout: 5m" >"$work/triggers/$mode.yaml"
done
"$controller" --triggers-dir "$work/triggers" --agent "127.0.0.1:$ctl_port" \
	--agent-token-file "$work/token" --db "$(as_role controller)" --status-file "$work/status.json" \
	2>"$work/controller.log" &
pids+=($!)
stat() { sed -n "s/^$1=//p" "$work/stats"; }
# wait_libc N: until N processes are on the libc hook
wait_libc() {
	for _ in $(seq 100); do
		snapshot "$work/stats"
		[ "$(stat zc_hook_libc)" = "$1" ] && return 0
		sleep 0.1
	done
	fail "zero-code capture of $1 processes expected, $(stat zc_hook_libc) on"
}
# request MODE: a request head to zc_stale.py MODE (left open), once it read it
request() {
	python3 -c 'import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"GET /stale HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
time.sleep(60)' "$(cat "$work/$1.port")" &
	pids+=($!)
	for _ in $(seq 50); do [ -e "$work/$1.mark" ] && return 0; sleep 0.1; done
	fail "zc_stale.py $1 did not read the request"
}
wait_libc 2
echo "ok: zero-code capture of both processes on"

request burn
sleep 0.5
snapshot "$work/stats"
t1=$(stat bpf_ctx_http)
[ "$t1" -gt 50 ] || fail "the burning thread's request was not found: $t1 samples tagged"
echo "ok: the request found, the thread inside it tagged ($t1 samples)"
rm "$work/triggers/burn.yaml"
wait_libc 1
sleep 0.2
snapshot "$work/stats"
t2=$(stat bpf_ctx_http)
sleep 1
snapshot "$work/stats"
t3=$(stat bpf_ctx_http)
echo "   after capture stopped: $((t3 - t2)) samples tagged in 1 s (bpf_http_stale=$(stat bpf_http_stale))"
[ "$t3" = "$t2" ] || fail "$((t3 - t2)) samples tagged with a request after capture of its process stopped"
[ "$(stat bpf_http_stale)" -ge 1 ] || fail "the stale request is not counted"
echo "ok: capture stopped mid-request: no sample tagged since, the request dropped and counted"
kill "$burn_pid"

request exec
for _ in $(seq 50); do [ -e "$work/exec.mark.exec" ] && break; sleep 0.1; done
[ -e "$work/exec.mark.exec" ] || fail "the exec'd program did not start"
snapshot "$work/stats"
t4=$(stat bpf_ctx_http)
sleep 1
snapshot "$work/stats"
t5=$(stat bpf_ctx_http)
echo "   after the exec: $((t5 - t4)) samples tagged in 1 s, $((t4 - t3)) before"
[ "$t5" = "$t4" ] || fail "$((t5 - t4)) samples of the exec'd program tagged with the old program's request"
echo "ok: a thread that execs mid-request: the new program's samples untagged"
kill -TERM "$agent_pid"
wait "$agent_pid" || fail "the agent exited with status $?"
