#!/usr/bin/env bash
# End to end: AgentControl authentication as a user meets it, a real agent
# with its default settings (only its ports moved) and the real controller.
#  1. With neither a token file nor mutual TLS the agent makes
#     /run/traceprof/control-token: mode 0600, directory 0700, at least 32
#     characters;
#  2. a call on loopback without a token is refused UNAUTHENTICATED; with
#     the generated token it is answered;
#  3. the controller, given no token at all, reads that file and programs
#     the agent (--once exits 0, the status file says reachable);
#  4. a method the agent does not have is answered UNIMPLEMENTED in well
#     under a second, on the control port and on the OTLP/gRPC port;
#  5. 1,000 calls without a token: all refused, a handful of log lines, and
#     the agent's counters say 1,000 (+1 for step 2);
#  5b. deleting the token file and restarting the agent makes a new
#     token; a running controller is refused once, then reads it again;
#  6. token files others could write (mode 0666, owned by nobody) or too
#     short (10 characters) stop the agent and the controller at start with
#     what to fix; so does a default token file made writable by others.
# The test runs in a mount namespace of its own with an empty /run, so the
# agent's default token file is the test's alone and goes with it.
# usage: run_control_auth_test.sh TRACEPROF_DB AGENT CONTROLLER RAW_CALL CLUSTER_DIR
set -euo pipefail
if [ "$(id -u)" -ne 0 ]; then echo "skip: the agent needs root (BPF, perf events)"; exit 77; fi
if [ -z "${TP_TEST_PRIVATE_RUN:-}" ]; then
	command -v unshare >/dev/null || { echo "skip: no unshare"; exit 77; }
	TP_TEST_PRIVATE_RUN=1 exec unshare --mount --propagation private "$0" "$@"
fi
mount -n -t tmpfs -o mode=0755,size=1m tmpfs /run # -n: no /run/mount/utab outside
tpdb=$1 agent=$2 controller=$3 raw=$4 cluster=$5
. "$(dirname "$0")/lib.sh"
needs_bpf

tok=/run/traceprof/control-token
conn=$(fresh_db "$tpdb" "$cluster" tp_e2e_control_auth)
ctl=$(free_port) otlp=$(free_port)
sleep 300 &
target=$!
pids+=("$target")
start_agent agent "$agent" --db "$conn" --target "pid:$target" --control-listen "127.0.0.1:$ctl" \
	--otlp-grpc "127.0.0.1:$otlp" --otlp-http '' --stats-file "$work/stats"

# 1. the generated token file
[ -f "$tok" ] || fail "no $tok"
[ "$(stat -c '%a %u' "$tok")" = "600 0" ] || fail "$tok: mode and owner $(stat -c '%a %u' "$tok")"
[ "$(stat -c '%a %u' /run/traceprof)" = "700 0" ] || fail "/run/traceprof: $(stat -c '%a %u' /run/traceprof)"
len=$(head -n1 "$tok" | tr -d '\n' | wc -c)
[ "$len" -ge 32 ] || fail "the generated token has $len characters"
echo "ok: $tok mode 600, directory 700, $len characters"

# 2. loopback without a token: refused; with it: answered
res=$("$raw" "127.0.0.1:$ctl" GetStatus "" -)
echo "$res" | grep -q '^code=16 name=UNAUTHENTICATED' || fail "loopback without a token: $res"
echo "ok: loopback without a token: $res"
res=$("$raw" "127.0.0.1:$ctl" GetStatus "" "$tok")
echo "$res" | grep -q '^code=0 ' || fail "with the generated token: $res"
echo "ok: with the generated token: $res"

# 3. the controller without any token flag reads the agent's file
mkdir "$work/triggers"
manifest busy busy-svc "targets: {pids: [$target]}" "match: {minDuration: 100ms}" \
	"maxRequests: 5" >"$work/triggers/busy.yaml"
"$controller" --triggers-dir "$work/triggers" --db "$conn" --agent "127.0.0.1:$ctl" \
	--status-file "$work/status.json" --once 2>"$work/controller.log" ||
	fail "the controller with the default token file: exit $?"
jq -e '.agents[0].reachable == true and (.triggers[0].agents[0].state | IN("Active", "Pending"))' \
	"$work/status.json" >/dev/null || fail "agent not programmed: $(jq -c . "$work/status.json")"
echo "ok: the controller read $tok and programmed the agent"

# 4. unknown methods, on both gRPC ports
for m in "127.0.0.1:$ctl /traceprof.control.v1.AgentControl/DropEverything" \
	"127.0.0.1:$otlp /opentelemetry.proto.collector.trace.v1.TraceService/Exporx"; do
	set -- $m
	res=$("$raw" "$1" "$2" "" -)
	echo "$res" | grep -q '^code=12 name=UNIMPLEMENTED' || fail "unknown method $2: $res"
	ms=$(echo "$res" | sed -n 's/.* ms=\([0-9.]*\)$/\1/p')
	awk -v ms="$ms" 'BEGIN { exit !(ms < 500) }' || fail "unknown method $2 took $ms ms"
	echo "ok: unknown method $2: UNIMPLEMENTED in $ms ms"
done

# 5. a flood of unauthenticated calls
t0=$(date +%s%N)
res=$("$raw" "127.0.0.1:$ctl" GetStatus "" - 1000)
t1=$(date +%s%N)
echo "$res" | grep -q '^code=16 ' && echo "$res" | grep -q '^calls=1000 same=1000$' ||
	fail "1000 calls without a token: $res"
kill "$agent_pid"
wait "$agent_pid" || true
sleep 0.5 # the log's time-stamping pipe
lines=$(grep -c 'control: .*refused' "$work/agent.log" || true)
logged=$(grep -c 'control: .* refused: ' "$work/agent.log" || true)
echo "ok: 1000 calls without a token refused in $(((t1 - t0) / 1000000)) ms; $lines log lines about refusals"
[ "$lines" -le 12 ] || fail "$lines log lines for 1001 refused calls"
for want in control_unauthenticated=1001 control_unimplemented=1 control_ok=3; do
	grep -qx "$want" "$work/stats" || fail "stats: want $want, got $(grep '^control_' "$work/stats" | tr '\n' ' ')"
done
sup=$(sed -n 's/^control_log_suppressed=//p' "$work/stats")
[ "$((sup + logged))" -eq 1001 ] || fail "control_log_suppressed=$sup + $logged logged != 1001"
echo "ok: counters $(grep '^control_' "$work/stats" | tr '\n' ' ')"

# 5b. a new token: the agent restarted after its file was deleted; a
# running controller that read the old one is refused once, reads the file
# again and programs the agent
"$controller" --triggers-dir "$work/triggers" --db "$conn" --agent "127.0.0.1:$ctl" \
	--status-file "$work/status2.json" 2>"$work/controller2.log" &
ctl_pid=$!
pids+=("$ctl_pid")
wait_status() { # wait_status SECONDS FILTER
	local i
	for ((i = 0; i < $1 * 10; i++)); do
		jq -e "$2" "$work/status2.json" >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	return 1
}
wait_status 10 '.agents[0].reachable == false' || fail "the controller did not see the agent down"
old_tok=$(head -n1 "$tok")
rm "$tok"
start_agent agent2 "$agent" --db "$conn" --target "pid:$target" --control-listen "127.0.0.1:$ctl" \
	--otlp-grpc '' --otlp-http ''
[ "$(head -n1 "$tok")" != "$old_tok" ] || fail "the restarted agent kept the deleted token"
wait_status 15 '.agents[0].reachable == true' ||
	fail "the controller did not pick up the new token: $(jq -c .agents "$work/status2.json")"
grep -q 'refused: missing or wrong bearer token' "$work/agent2.log" ||
	fail "the controller's old token was not refused first"
kill "$ctl_pid" "$agent_pid"
wait "$ctl_pid" "$agent_pid" || true
echo "ok: a new token after a restart: the controller was refused once, then read it again"

# 6. bad token files stop the agent and the controller at start
printf '%s\n' "$(head -n1 "$tok")" >"$work/t-0666"
chmod 0666 "$work/t-0666"
printf '%s\n' "$(head -n1 "$tok")" >"$work/t-nobody"
chmod 0600 "$work/t-nobody"
chown 65534 "$work/t-nobody"
printf '0123456789\n' >"$work/t-10"
chmod 0600 "$work/t-10"
declare -A says=([t-0666]="chmod 600" [t-nobody]="owned by uid 65534" [t-10]="has 10 characters")
for f in t-0666 t-nobody t-10; do
	rc=0
	timeout 60 "$agent" --db "$conn" --target "pid:$target" --control-listen "127.0.0.1:$(free_port)" \
		--control-token-file "$work/$f" --otlp-grpc '' --otlp-http '' 2>"$work/agent-$f.log" || rc=$?
	[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "the agent with $f: exit $rc"
	grep -q "${says[$f]}" "$work/agent-$f.log" || fail "the agent with $f does not say '${says[$f]}'"
	rc=0
	"$controller" --triggers-dir "$work/triggers" --db "$conn" --agent "127.0.0.1:$ctl" \
		--agent-token-file "$work/$f" --once 2>"$work/ctl-$f.log" || rc=$?
	[ "$rc" -eq 2 ] && grep -q "${says[$f]}" "$work/ctl-$f.log" ||
		fail "the controller with $f: exit $rc, $(cat "$work/ctl-$f.log")"
	echo "ok: $f refused at start: $(grep -o 'token file.*' "$work/agent-$f.log" | head -n1)"
done
chmod 0666 "$tok"
rc=0
"$controller" --triggers-dir "$work/triggers" --db "$conn" --agent "127.0.0.1:$ctl" --once \
	2>"$work/ctl-default.log" || rc=$?
[ "$rc" -eq 2 ] && grep -q "$tok is writable by every user" "$work/ctl-default.log" ||
	fail "the controller with a world-writable default token file: exit $rc"
echo "ok: a world-writable default token file stops the controller"
echo "all passed"
