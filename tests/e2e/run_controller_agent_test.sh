#!/usr/bin/env bash
# End to end: traceprof-controller in local mode programming a real
# traceprof-agent over AgentControl (gRPC, bearer token) with a real
# PostgreSQL. The agent gets the desired set and reports the trigger with
# its target process; the status file shows the agent and its view of the
# trigger; an agent that is down is logged once and retried while the
# database side keeps working; a wrong token is reported as refused.
# usage: run_controller_agent_test.sh TRACEPROF_DB TRACEPROF_CONTROLLER AGENT CLUSTER_DIR
set -euo pipefail
tpdb=$1 ctl=$2 agent=$3 cluster=$4
. "$(dirname "$0")/lib.sh"
needs_bpf

conn=$(fresh_db "$tpdb" "$cluster" tp_e2e_controller_agent)
# each part with its least role; checks read as the owner
agent_conn=$(as_role writer)
ctl_conn=$(as_role controller)
dir=$work
mkdir "$dir/triggers"
status="$dir/status.json"
ctl_pid='' agent_pid='' target_pid=''
cleanup() {
	for p in $ctl_pid $agent_pid $target_pid; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$dir"
}
trap cleanup EXIT
wait_json() { # wait_json SECONDS FILTER: polls until FILTER holds on the status file
	local until=$(($(now_ms) + $1 * 1000))
	while ! jq -e "$2" "$status" >/dev/null 2>&1; do
		[ "$(now_ms)" -gt "$until" ] && {
			echo "  status file: $(cat "$status" 2>/dev/null)"
			return 1
		}
		sleep 0.1
	done
}
port=$(free_port)
(umask 077 && head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$dir/token")
(umask 077 && head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$dir/wrong")
start_agent() {
	"$agent" --db "$agent_conn" --target "pid:$target_pid" --control-listen "127.0.0.1:$port" \
		--control-token-file "$dir/token" >>"$dir/agent.out" 2>>"$dir/agent.log" &
	agent_pid=$!
	for _ in $(seq 300); do grep -qs 'sampling at' "$dir/agent.log" && break; sleep 0.1; done
}

# A process for the trigger to target.
sleep 300 &
target_pid=$!
manifest busy busy-svc "targets: {pids: [$target_pid]}" "match: {minDuration: 100ms}" \
	"maxRequests: 5" >"$dir/triggers/busy.yaml"

# 1. The agent is down at first: the table still gets the trigger; one log line.
"$ctl" --triggers-dir "$dir/triggers" --db "$ctl_conn" --agent "127.0.0.1:$port" \
	--agent-token-file "$dir/token" --status-file "$status" 2>"$dir/ctl.log" &
ctl_pid=$!
if wait_json 5 '.triggers[0].phase == "Active" and (.agents[0].reachable == false) and (.agents[0].error | length > 0)'; then ok; else bad "agent down: trigger not Active or agent not reported down"; fi
sleep 2
[ "$(grep -c 'agent unreachable' "$dir/ctl.log")" = 1 ] && ok || bad "an outage is logged once, got $(grep -c 'agent unreachable' "$dir/ctl.log")"

# 2. The agent comes up: it gets the set within a tick and reports the trigger.
start_agent
grep -q 'sampling at' "$dir/agent.log" || { bad "the agent did not start"; tail -20 "$dir/agent.log"; }
if wait_json 10 '(.agents[0].reachable == true) and (.agents[0].generation == .generation) and
	(.triggers[0].agents[0].state | IN("Active", "Pending"))'; then ok; else bad "agent not programmed"; fi
if wait_json 5 '.triggers[0].agents[0].state == "Active" and .triggers[0].agents[0].targetProcesses == 1'; then ok; else bad "agent does not target the process"; fi
grep -q 'agent reachable again' "$dir/ctl.log" && ok || bad "recovery not logged"
grep -q 'agent applied triggers' "$dir/ctl.log" && ok || bad "apply not logged"

# 3. Removing the manifest takes the trigger out of the agent's set.
rm "$dir/triggers/busy.yaml"
if wait_json 5 '(.triggers | length == 0) and (.agents[0].generation == .generation)'; then ok; else bad "removed trigger still listed"; fi
st=$(psql "$conn" -qAtX -c "SELECT phase || ':' || reason FROM traceprof.trace_profile_triggers")
[ "$st" = "Failed:manifest removed" ] && ok || bad "removed trigger row: $st"

# 4. A wrong token is refused and reported; the rest keeps working.
kill "$ctl_pid"; wait "$ctl_pid" || true
ctl_pid=''
"$ctl" --triggers-dir "$dir/triggers" --db "$ctl_conn" --agent "127.0.0.1:$port" \
	--agent-token-file "$dir/wrong" --status-file "$status" --once 2>"$dir/once.log" && bad "--once with a refused token exited 0" || ok
jq -e '.agents[0].reachable == false and (.agents[0].error | test("(?i)unauthenticated|token|refused"))' "$status" >/dev/null &&
	ok || bad "wrong token not reported: $(jq -c .agents "$status")"

echo "$pass passed, $fail failed"
if [ "$fail" -ne 0 ]; then
	echo "--- controller log"; tail -30 "$dir/ctl.log"
	echo "--- agent log"; tail -30 "$dir/agent.log"
fi
[ "$fail" -eq 0 ]
