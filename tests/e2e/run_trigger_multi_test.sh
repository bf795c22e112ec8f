#!/usr/bin/env bash
# Trace-triggered profiling with two agents on one host, on real BPF, real
# OTLP, real gRPC and real PostgreSQL. Two traceprof-demo-service processes
# (both payment-svc), each sending its spans to its own traceprof-agent
# (own OTLP and control ports, one token, one database); one
# traceprof-controller programs both. Under slow load on both services:
#  1. a shared trigger (maxRequests 5, minDuration 200ms) collects exactly
#     5 distinct requests of 200 ms or more by the load generator's clock, each claimed by the
#     agent whose service served it; the agents' claims add up to 5; with
#     the controller stopped, both agents end the trigger themselves, the
#     claim refused by the database counted; every queued claim is
#     accounted for (claimed, NULL, skipped because the trigger had ended,
#     abandoned);
#  2. a trigger removed mid-way (manifest deleted) lowers sampling on both
#     agents within 2 s, its row is Failed 'manifest removed' and no claim
#     follows; raw calls to a control port meanwhile (garbage bytes, no
#     token) get INVALID_ARGUMENT and UNAUTHENTICATED and change nothing;
#  3. a 3 s timeout expires on the agents themselves (their log says so)
#     with sampling lowered within a second of the deadline, and the table
#     and the status file say Expired;
#  4. a trigger for a service no process has stays Active with 0 target
#     processes and says so in the status file, while the others work;
#     one asking for off-CPU capture says that none happens either;
#  5. 50 triggers for one service at once: 3 Active, 47 Rejected with the
#     reason in the table and the status file, never more than 3 on an
#     agent, a trigger for another service still Active within 2 s, and
#     removing the files ends them.
# usage: run_trigger_multi_test.sh TRACEPROF_DB AGENT CONTROLLER SERVICE LOAD RAW_CALL CLUSTER_DIR
set -euo pipefail
tpdb=$1 agent=$2 controller=$3 service=$4 load=$5 raw=$6 cluster=$7
. "$(dirname "$0")/lib.sh"
needs_bpf

conn=$(fresh_db "$tpdb" "$cluster" tp_e2e_trigger_multi)
status="$work/status.json"
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$work/token"
chmod 600 "$work/token"
mkdir "$work/triggers" "$work/flood"

# two services, two agents
declare -A pay_port pay_pid ctl_port agent_of
for x in a b; do
	otlp=$(free_port)
	ctl_port[$x]=$(free_port)
	start "pay-$x" "$service" --port 0 --threads 4 --otlp-endpoint "http://127.0.0.1:$otlp/v1/traces"
	pay_port[$x]=$port pay_pid[$x]=${pids[-1]}
	start_agent "agent-$x" "$agent" --db "$(as_role writer)" --target "pid:${pay_pid[$x]}" --frequency 19 \
		--window 2s --otlp-http "127.0.0.1:$otlp" --otlp-grpc "" \
		--control-listen "127.0.0.1:${ctl_port[$x]}" --control-token-file "$work/token" \
		--stats-file "$work/stats-$x"
	agent_of[$x]=$agent_pid
done
start_controller() {
	"$controller" --triggers-dir "$work/triggers" --agent "127.0.0.1:${ctl_port[a]}" \
		--agent "127.0.0.1:${ctl_port[b]}" --agent-token-file "$work/token" --db "$(as_role controller)" \
		--status-file "$status" 2>>"$work/controller.log" &
	ctl_pid=$!
	pids+=("$ctl_pid")
}
start_controller
load_pids=()
for x in a b; do
	"$load" --port "${pay_port[$x]}" --rate 20 --duration 50 --concurrency 4 --slow-fraction 0.05 \
		--error-fraction 0 --seed "$([ $x = a ] && echo 11 || echo 12)" --out "$work/truth-$x.csv" \
		>"$work/load-$x.log" 2>&1 &
	load_pids+=($!)
done
sleep 3 # some requests at the base rate first

now() { echo "$EPOCHREALTIME"; }
put() { # put FILE < content: written aside and renamed in
	cat >"$work/tmp.yaml"
	mv "$work/tmp.yaml" "$work/triggers/$1"
}
row() { q "SELECT $2 FROM traceprof.trace_profile_triggers WHERE name = '$1' ORDER BY created_at DESC LIMIT 1"; }
# wait_for SECONDS WHAT EXPECTED SQL
wait_for() {
	local until got
	until=$(awk -v n="$(now)" -v s="$1" 'BEGIN { printf "%.3f", n + s }')
	while :; do
		got=$(q "$4")
		[ "$got" = "$3" ] && { echo "ok: $2 ($got)"; return 0; }
		awk -v n="$(now)" -v u="$until" 'BEGIN { exit !(n > u) }' && fail "$2: expected $3, got $got"
		sleep 0.1
	done
}
# wait_json SECONDS WHAT FILTER [jq args]: polls until FILTER holds on the status file
wait_json() {
	local until
	until=$(awk -v n="$(now)" -v s="$1" 'BEGIN { printf "%.3f", n + s }')
	while ! jq -e "${@:4}" "$3" "$status" >/dev/null 2>&1; do
		awk -v n="$(now)" -v u="$until" 'BEGIN { exit !(n > u) }' &&
			fail "$2: status file: $(jq -c '.triggers | map({name, phase, reason, message, agents})' "$status" 2>/dev/null | head -c 3000)"
		sleep 0.1
	done
	echo "ok: $2"
}
# first_after LOG PATTERN T: the time stamp of the first line matching PATTERN after T
first_after() { awk -v t="$3" -v p="$2" '$1 > t && index($0, p) { print $1; exit }' "$work/$1.log"; }
# wait_log SECONDS LOG PATTERN T: waits for such a line, prints its time stamp
wait_log() {
	local at
	for _ in $(seq $(($1 * 10))); do
		at=$(first_after "$2" "$3" "$4")
		[ -n "$at" ] && { echo "$at"; return 0; }
		sleep 0.1
	done
	fail "$2: no '$3' within $1 s"
}
within() { # within WHAT T0 T1 SECONDS: T1 - T0 below SECONDS
	awk -v a="$2" -v b="$3" -v s="$4" -v w="$1" 'BEGIN { printf "ok: %s after %.0f ms\n", w, (b - a) * 1000; exit !(b - a < s) }' ||
		fail "$1 took more than $4 s ($2 -> $3)"
}

# ---- 1. two agents, one trigger, exactly maxRequests ----
# The controller stops once both agents run the trigger, so neither learns
# from it that the trigger completed: the agent that did not make the last
# claim must be refused by the database, count it, and stop by itself.
t=$(now)
manifest shared payment-svc "match: {minDuration: 200ms}" "maxRequests: 5" "timeout: 2m" | put shared.yaml
for x in a b; do wait_log 5 "agent-$x" "sampling raised" "$t" >/dev/null; done
kill -TERM "$ctl_pid"
wait "$ctl_pid" || fail "the controller exited with status $?"
wait_for 40 "shared trigger completed" Completed "SELECT phase FROM traceprof.trace_profile_triggers WHERE name = 'shared'"
shared=$(row shared trigger_id)
for x in a b; do wait_log 20 "agent-$x" "triggers: $shared max_requests claimed (cluster-wide)" "$t" >/dev/null; done
echo "ok: both agents stopped the shared trigger on their own"
start_controller

# ---- 4. a trigger no process is targeted by ----
manifest nosvc no-such-svc "match: {minDuration: 200ms}" "timeout: 2m" | put nosvc.yaml
wait_json 5 "a trigger without targets stays Active and says so" \
	'.triggers[] | select(.name == "nosvc") | .phase == "Active" and .targetProcesses == 0 and
	 (.message | test("no target process on any agent")) and (.message | test("off-CPU") | not) and
	 (.agents | length == 2) and
	 all(.agents[]; .state == "Pending" and .targetProcesses == 0 and (.reason | test("no target process")))'
manifest nooff no-such-svc-2 "sampling: {offCPU: true, offCPUThreshold: 500us}" "timeout: 2m" | put nooff.yaml
wait_json 5 "an off-CPU trigger without targets says nothing is captured" \
	'.triggers[] | select(.name == "nooff") | .phase == "Active" and .targetProcesses == 0 and
	 (.message == "no target process on any agent (service no-such-svc-2): no CPU or off-CPU profile until one appears") and
	 all(.agents[]; .state == "Pending" and (.reason | test("no off-CPU capture until one appears")))'

# ---- 2. removing the file stops the trigger; raw calls meanwhile ----
t=$(now)
manifest removed payment-svc "match: {minDuration: 200ms}" "maxRequests: 1000" "timeout: 2m" | put removed.yaml
for x in a b; do wait_log 5 "agent-$x" "sampling raised" "$t" >/dev/null; done
echo "ok: both agents raised sampling for the new trigger"
wait_for 20 "the new trigger collects" t "SELECT collected_requests >= 2 FROM traceprof.trace_profile_triggers WHERE name = 'removed'"
gen=$(jq '.agents[0].generation' "$status")
res=$("$raw" "127.0.0.1:${ctl_port[a]}" ApplyTriggers 0affffffffffff "$work/token")
echo "$res" | grep -q '^code=3 name=INVALID_ARGUMENT details=.' || fail "garbage bytes: $res"
echo "ok: garbage bytes with the token: $res"
res=$("$raw" "127.0.0.1:${ctl_port[a]}" ApplyTriggers "")
echo "$res" | grep -q '^code=16 name=UNAUTHENTICATED' || fail "no token: $res"
echo "ok: an empty set without a token: $res"
res=$("$raw" "127.0.0.1:${ctl_port[a]}" GetStatus "" "$work/token")
echo "$res" | grep -q '^code=0 ' || fail "GetStatus with the token: $res"
n=$(row removed collected_requests)
wait_for 20 "the trigger keeps collecting after the raw calls" t \
	"SELECT collected_requests > $n FROM traceprof.trace_profile_triggers WHERE name = 'removed'"
wait_json 2 "the raw calls changed no agent's set" \
	'.agents | all(.generation == $g)' --argjson g "$gen"
t=$(now)
rm "$work/triggers/removed.yaml"
for x in a b; do
	within "agent $x back at the base rate after the removal" "$t" \
		"$(wait_log 3 "agent-$x" "sampling back at the base rate" "$t")" 2
done
wait_for 2 "the removed trigger's row" "Failed:manifest removed" "SELECT phase || ':' || reason FROM traceprof.trace_profile_triggers WHERE name = 'removed'"
n=$(row removed collected_requests)
sleep 3
check "no claim after the removal" "$n" "SELECT collected_requests FROM traceprof.trace_profile_triggers WHERE name = 'removed'"

# ---- 3. expiry on the agents ----
t=$(now)
manifest expiring payment-svc "match: {minDuration: 30s}" "timeout: 3s" | put expiring.yaml
for x in a b; do wait_log 5 "agent-$x" "sampling raised" "$t" >/dev/null; done
wait_for 8 "the 3 s trigger expires" Expired "SELECT phase FROM traceprof.trace_profile_triggers WHERE name = 'expiring'"
deadline=$(row expiring "extract(epoch FROM deadline)")
id=$(row expiring trigger_id)
for x in a b; do
	at=$(wait_log 2 "agent-$x" "triggers: $id expired" "$t")
	within "agent $x expires the trigger itself" "$deadline" "$at" 1
	within "agent $x back at the base rate after the deadline" "$deadline" \
		"$(wait_log 2 "agent-$x" "sampling back at the base rate" "$t")" 1
done
wait_json 3 "the status file says Expired" '.triggers[] | select(.name == "expiring") | .phase == "Expired"'

# ---- 5. a flood of triggers for one service ----
for i in $(seq -w 1 50); do
	manifest "flood-$i" payment-svc "match: {minDuration: 30s}" "timeout: 2m" >"$work/flood/flood-$i.yaml"
done
mv "$work"/flood/*.yaml "$work/triggers/"
wait_for 10 "the flood: 3 Active, 47 Rejected" "Active=3 Rejected=47" \
	"SELECT string_agg(phase || '=' || n, ' ' ORDER BY phase) FROM (SELECT phase, count(*) n
	 FROM traceprof.trace_profile_triggers WHERE name LIKE 'flood-%' GROUP BY 1) x"
check "the rejection reason" "service payment-svc already has 3 active triggers" \
	"SELECT DISTINCT reason FROM traceprof.trace_profile_triggers WHERE name LIKE 'flood-%' AND phase = 'Rejected'"
wait_json 5 "the status file lists the flood with its reasons" \
	'[.triggers[] | select(.name | startswith("flood-"))] | length == 50 and
	 (map(select(.phase == "Rejected" and .reason == "service payment-svc already has 3 active triggers")) | length == 47) and
	 (map(select(.phase == "Active")) | length == 3)'
wait_json 5 "each agent holds exactly 3 live triggers of payment-svc" \
	'[.triggers[] | select(.service == "payment-svc") | .agents[] | select(.state == "Active" or .state == "Pending")] |
	 group_by(.address) | length == 2 and all(length == 3)'
t=$(now)
manifest other ledger-svc "timeout: 2m" | put other.yaml
wait_for 2 "a trigger for another service is Active within 2 s of the flood" Active \
	"SELECT phase FROM traceprof.trace_profile_triggers WHERE name = 'other'"
wait_json 2 "both agents have it" '.triggers[] | select(.name == "other") | .agents | length == 2'
within "the other service's trigger on both agents" "$t" "$(now)" 3
rm "$work"/triggers/flood-*.yaml
wait_for 5 "the flood removed" "Failed=3 Rejected=47" \
	"SELECT string_agg(phase || '=' || n, ' ' ORDER BY phase) FROM (SELECT phase, count(*) n
	 FROM traceprof.trace_profile_triggers WHERE name LIKE 'flood-%' GROUP BY 1) x"
wait_json 3 "the flood has left the status file and the agents" \
	'([.triggers[] | select(.name | startswith("flood-"))] | length == 0) and (.agents | all(.generation == $g))' \
	--argjson g "$(jq .generation "$status")"
check "the other triggers are untouched" "nosvc=Active other=Active" \
	"SELECT string_agg(name || '=' || phase, ' ' ORDER BY name) FROM traceprof.trace_profile_triggers WHERE name IN ('nosvc', 'other')"

# ---- the shared trigger against the ground truth and the agents' counters ----
for x in a b; do
	kill -TERM "${agent_of[$x]}"
	wait "${agent_of[$x]}" || fail "agent $x exited with status $?"
done
for p in "${load_pids[@]}"; do wait "$p" || true; done # the ground truth is complete at exit
for x in a b; do
	load_truth "truth_$x" "$work/truth-$x.csv"
	grep -E '^trigger_claims|^control_' "$work/stats-$x" | tr '\n' ' '
	echo
done
stat() { sed -n "s/^$2=//p" "$work/stats-$1"; }
check "5 requests collected" 5 "SELECT collected_requests FROM traceprof.trace_profile_triggers WHERE name = 'shared'"
# by the load generator's own clock: on a busy machine a request designed
# fast can take 200 ms, and is then rightly claimed
check "5 distinct trace ids, each 200 ms or more by the load generator's clock" 5 \
	"SELECT count(DISTINCT t.trace_id) FROM traceprof.trace_profile_triggers g,
	 unnest(g.trace_ids) c JOIN (SELECT * FROM truth_a UNION ALL SELECT * FROM truth_b) t
	 ON t.trace_id = traceprof.trace_id_text(c) WHERE g.name = 'shared' AND t.duration_us >= 200000"
ok_sum=0
for x in a b; do
	n=$(q "SELECT count(*) FROM traceprof.trace_profile_triggers g, unnest(g.trace_ids) c
	       JOIN truth_$x t ON t.trace_id = traceprof.trace_id_text(c) WHERE g.name = 'shared'")
	echo "agent $x claimed $n of the shared trigger's requests"
	# every claim this agent made after the shared trigger is of 'removed'
	claims_ok=$(stat $x trigger_claims_ok)
	removed_n=$(q "SELECT count(*) FROM traceprof.trace_profile_triggers g, unnest(g.trace_ids) c
	       JOIN truth_$x t ON t.trace_id = traceprof.trace_id_text(c) WHERE g.name = 'removed'")
	[ "$claims_ok" = $((n + removed_n)) ] ||
		fail "agent $x counted $claims_ok claims, the table has $n + $removed_n of its service's requests"
	ok_sum=$((ok_sum + n))
	# every queued claim is accounted for: claimed, NULL, skipped, abandoned
	accounted=$(($(stat $x trigger_claims_ok) + $(stat $x trigger_claims_null) +
		$(stat $x trigger_claims_skipped) + $(stat $x trigger_claims_abandoned)))
	[ "$accounted" = "$(stat $x trigger_claims_queued)" ] ||
		fail "agent $x: $(stat $x trigger_claims_queued) claims queued, $accounted answered"
	[ "$(stat $x control_unauthenticated)" = "$([ $x = a ] && echo 1 || echo 0)" ] ||
		fail "agent $x: control_unauthenticated=$(stat $x control_unauthenticated)"
	[ "$(stat $x control_invalid)" = "$([ $x = a ] && echo 1 || echo 0)" ] ||
		fail "agent $x: control_invalid=$(stat $x control_invalid)"
done
[ "$ok_sum" = 5 ] || fail "the agents' claims of the shared trigger add up to $ok_sum, not 5"
echo "ok: the agents' claims add up to 5, each of its own service's requests; every claim accounted for"
refused=$(($(stat a trigger_claims_null) + $(stat b trigger_claims_null)))
[ "$refused" -ge 1 ] || fail "no claim refused by the database was counted"
echo "ok: claims refused because the count was reached are counted ($refused)"
check "no trigger samples of unclaimed traces" 0 \
	"SELECT count(*) FROM traceprof.trigger_samples s JOIN traceprof.trace_profile_triggers g
	 USING (trigger_id) WHERE NOT s.trace_id = ANY (g.trace_ids)"
check "the continuous profile stays at the base rate" 0 "SELECT count(*) FROM traceprof.samples WHERE hz <> 19"
