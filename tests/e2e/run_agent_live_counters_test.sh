#!/usr/bin/env bash
# Refusal counters are live: a control call without the token is refused,
# and the stats file the agent writes at SIGUSR1 (it keeps running) already
# counts it, as it counts the OTLP/HTTP refusals; before the call it
# counted none. No database is needed: the agent keeps its windows queued.
# usage: run_agent_live_counters_test.sh AGENT CPU_BURN CONTROL_RAW_CALL
set -euo pipefail
agent=$1 burn=$2 raw=$3
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
needs_bpf

fail() { echo "FAIL: $*" >&2; tail -30 "$work/agent.log" >&2; exit 1; }
stat_of() { sed -n "s/^$1=//p" "$work/stats"; }

head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$work/token"
chmod 600 "$work/token"
"$burn" --threads 1 --seconds 60 >/dev/null &
pids+=($!)
burn_pid=$!
ctl=$(free_port)
"$agent" --db "host=127.0.0.1 port=1 connect_timeout=1" --target "pid:$burn_pid" \
	--control-listen "127.0.0.1:$ctl" --control-token-file "$work/token" \
	--otlp-grpc "" --otlp-http "127.0.0.1:$(free_port)" --spool-dir "$work/spool" \
	--stats-file "$work/stats" >"$work/agent.out" 2>"$work/agent.log" &
agent_pid=$!
pids+=($agent_pid)
for _ in $(seq 100); do
	res=$("$raw" "127.0.0.1:$ctl" GetStatus "" "$work/token" 2>/dev/null || true)
	case $res in code=0\ *) break ;; esac
	sleep 0.1
done
echo "$res" | grep -q '^code=0 ' || fail "the control port did not answer: $res"

snapshot "$work/stats"
[ "$(stat_of control_unauthenticated)" = 0 ] || fail "refusals counted before any: $(stat_of control_unauthenticated)"
[ -n "$(stat_of otlp_http_refused)" ] || fail "no otlp_http_refused in the snapshot"
ok_before=$(stat_of control_ok)
[ "$ok_before" -ge 1 ] || fail "the call with the token is not counted: control_ok=$ok_before"

res=$("$raw" "127.0.0.1:$ctl" ApplyTriggers "")
echo "$res" | grep -q '^code=16 name=UNAUTHENTICATED' || fail "no token: $res"
res=$("$raw" "127.0.0.1:$ctl" GetStatus "")
echo "$res" | grep -q '^code=16 name=UNAUTHENTICATED' || fail "no token: $res"

snapshot "$work/stats"
kill -0 "$agent_pid" || fail "the agent stopped"
unauth=$(stat_of control_unauthenticated)
calls=$(stat_of control_calls)
echo "snapshot while running: control_calls=$calls control_unauthenticated=$unauth"
[ "$unauth" = 2 ] || fail "control_unauthenticated=$unauth in the running agent's snapshot, want 2"
[ "$calls" -ge 3 ] || fail "control_calls=$calls, want at least 3"
echo "ok: refusal counters are live in the SIGUSR1 snapshot"
