#!/usr/bin/env bash
# traceprof-controller in Kubernetes mode under faults: two replicas with
# leader election (only the Lease holder acts; after kill -9 of the leader
# the other takes the Lease and the trigger still completes, no request
# claimed twice); the API server restarted mid-watch with a short watch
# history (--history 5: the informers relist after 410) and a trigger
# applied afterwards completes; the agent restarted while a trigger is
# Active is re-programmed and collection resumes; a leader frozen past its
# Lease and woken after another replica took over and a trigger was created
# changes nothing (the trigger completes exactly, no set of its term
# reaches the agent).
# usage: run_kube_faults_test.sh TRACEPROF_DB AGENT CONTROLLER SERVICE LOAD CLUSTER_DIR
set -euo pipefail
tpdb=$1 agent=$2 controller=$3 service=$4 load=$5 cluster=$6
. "$(dirname "$0")/lib.sh"
needs_bpf
command -v kubectl >/dev/null || { echo "skip: kubectl not found"; exit 77; }
. "$(dirname "$0")/kube_lib.sh"

conn=$(fresh_db "$tpdb" "$cluster" tp_e2e_kube_faults)
start_apiserver --history 5
install_crd
otlp_port=$(free_port)
ctl_port=$(free_port)
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$work/token"
chmod 600 "$work/token"
start payment "$service" --port 0 --threads 4 --otlp-endpoint "http://127.0.0.1:$otlp_port/v1/traces"
pay_port=$port pay_pid=${pids[-1]}
pod_for "$pay_pid" payment-1 app=payment node-a
agent_args=(--db "$(as_role writer)" --target "pid:$pay_pid" --frequency 19 --window 2s
	--otlp-http "127.0.0.1:$otlp_port" --otlp-grpc "" --node node-a
	--control-listen "127.0.0.1:$ctl_port" --control-token-file "$work/token")
start_agent agent "$agent" "${agent_args[@]}"
declare -A ctl_pid
for id in ctl-a ctl-b; do
	"$controller" --kubeconfig "$kube_state/kubeconfig" --agent "127.0.0.1:$ctl_port@node-a" \
		--agent-selector "" --agent-token-file "$work/token" --db "$(as_role controller)" --identity "$id" \
		--interval 500ms 2>"$work/$id.log" &
	ctl_pid[$id]=$!
	pids+=($!)
done
holder=''
for _ in $(seq 200); do
	holder=$(kc get lease traceprof-controller -o jsonpath='{.spec.holderIdentity}' 2>/dev/null || true)
	[ -n "$holder" ] && break
	sleep 0.1
done
[ -n "$holder" ] || fail "no replica took the Lease"
other=ctl-a
[ "$holder" = ctl-a ] && other=ctl-b
echo "ok: $holder leads"

"$load" --port "$pay_port" --rate 50 --duration 170 --concurrency 4 --slow-fraction 0.03 \
	--error-fraction 0 --seed 11 --out "$work/truth.csv" >"$work/load.log" 2>&1 &
pids+=($!)
apply_trigger() { # NAME MAX
	kc apply -f - >/dev/null <<YAML || fail "kubectl apply $1"
apiVersion: traceprof.dev/v1alpha1
kind: TraceProfileTrigger
metadata: {name: $1, namespace: default}
spec:
  service: payment-svc
  selector: {matchLabels: {app: payment}}
  match: {minDuration: 200ms}
  maxRequests: $2
  timeout: 3m
YAML
}
# exactly MAX distinct claimed trace ids in the table and in the status
check_collected() { # NAME MAX
	check "$1: $2 distinct claimed requests" "$2 $2" \
		"SELECT collected_requests || ' ' || (SELECT count(DISTINCT x) FROM unnest(trace_ids) x)
		 FROM traceprof.trace_profile_triggers WHERE name = '$1'"
	[ "$(tpt "$1" '{.status.progress}')" = "$2/$2" ] || fail "$1 progress $(tpt "$1" '{.status.progress}')"
}

# 1. Leader election: the follower does nothing; kill -9 the leader mid-trigger
# (15 requests take longer than the Lease takes to move: the new leader
# writes the final status).
apply_trigger failover 15
for _ in $(seq 600); do [ "$(tpt failover '{.status.collectedRequests}')" -ge 1 ] 2>/dev/null && break; sleep 0.1; done
grep -q 'trigger created' "$work/$holder.log" || fail "the leader did not act"
grep -qE 'trigger created|agent applied|agent found' "$work/$other.log" && fail "the follower acted"
echo "ok: only the leader acts"
[ "$(tpt failover '{.status.phase}')" = Active ] || fail "failover finished before the leader was killed"
kill -9 "${ctl_pid[$holder]}"
wait_phase failover Completed 120
[ "$(kc get lease traceprof-controller -o jsonpath='{.spec.holderIdentity}')" = "$other" ] || fail "the Lease did not move"
grep -q 'leading: this replica reconciles' "$work/$other.log" || fail "$other never led"
check_collected failover 15

# 2. The API server restarted mid-watch (its watch history starts empty: 410, relist),
# its store now holding a trigger whose spec.maxRequests is 1e20 as an
# integer (a value stored through an older or schema-less CRD version, which
# the server prints as 100000000000000000000 and jansson cannot hold in an
# int64): the LIST holding it is decoded, that trigger is Rejected
# (InvalidSpec), and the others go on.
stop_apiserver
sleep 1
/usr/bin/python3 - "$kube_state/store.json" <<'PY'
import copy, json, sys, uuid
p = sys.argv[1]
d = json.load(open(p))
objs = d["objects"]["traceprof.dev/traceprofiletriggers"]
o = copy.deepcopy(next(x for x in objs if x["metadata"]["name"] == "failover"))
d["resourceVersion"] += 1
o["metadata"].update(name="poison", uid=str(uuid.uuid4()), generation=1,
                     resourceVersion=str(d["resourceVersion"]))
o.pop("status", None)
o["spec"]["maxRequests"] = 10**20
objs.append(o)
json.dump(d, open(p, "w"))
PY
grep -q '"maxRequests": 100000000000000000000' "$kube_state/store.json" || fail "poison not stored"
start_apiserver --history 5
for i in $(seq 12); do kc label pod payment-1 "churn=c$i" --overwrite >/dev/null; done
apply_trigger after-restart 3
wait_phase poison Rejected 30
tpt poison '{.status.message}' | grep -q maxRequests || fail "poison: $(tpt poison '{.status.message}')"
echo "ok: poison Rejected: $(tpt poison '{.status.message}')"
wait_phase after-restart Completed 90
check_collected after-restart 3

# 3. The agent restarted while a trigger is Active: re-programmed, collection resumes.
apply_trigger agent-restart 4
wait_phase agent-restart Active 30
kill -TERM "$agent_pid"
wait "$agent_pid" || true
start_agent agent2 "$agent" "${agent_args[@]}"
wait_phase agent-restart Completed 90
check_collected agent-restart 4
grep -q 'applied, 1 triggers' "$work/agent2.log" || fail "the restarted agent was not re-programmed"
echo "ok: the restarted agent was re-programmed"

# 4. A leader frozen past its Lease (SIGSTOP) while the other replica takes
# over and a trigger is created, then woken (SIGCONT): it acts on nothing
# (its renew deadline passed by its own clock; its term is not the current
# one in the database; the agent refuses its older term), so the new
# trigger completes exactly and no set of the old term reaches the agent.
"$controller" --kubeconfig "$kube_state/kubeconfig" --agent "127.0.0.1:$ctl_port@node-a" \
	--agent-selector "" --agent-token-file "$work/token" --db "$conn" --identity ctl-c \
	--interval 500ms 2>"$work/ctl-c.log" &
ctl_pid[ctl-c]=$!
pids+=($!)
for _ in $(seq 100); do grep -q 'campaigning' "$work/ctl-c.log" && break; sleep 0.1; done
old_term=$(sed -n 's/.*leading with term \([0-9]*\).*/\1/p' "$work/$other.log" | tail -1)
[ -n "$old_term" ] || fail "$other logged no term"
kill -STOP "${ctl_pid[$other]}"
for _ in $(seq 300); do
	[ "$(kc get lease traceprof-controller -o jsonpath='{.spec.holderIdentity}')" = ctl-c ] && break
	sleep 0.1
done
[ "$(kc get lease traceprof-controller -o jsonpath='{.spec.holderIdentity}')" = ctl-c ] ||
	fail "ctl-c did not take the Lease from the frozen $other"
apply_trigger woken 4
wait_phase woken Active 30
agent_lines=$(wc -l <"$work/agent2.log")
old_lines=$(wc -l <"$work/$other.log")
kill -CONT "${ctl_pid[$other]}"
wait_phase woken Completed 90
check_collected woken 4
check "woken: never ended as removed" "Completed/false" \
	"SELECT phase || '/' || (coalesce(reason, '') LIKE '%manifest removed')
	 FROM traceprof.trace_profile_triggers WHERE name = 'woken'"
if tail -n +"$((agent_lines + 1))" "$work/agent2.log" | grep -q "term $old_term\$"; then
	fail "a set of the frozen leader's term $old_term reached the agent after it woke"
fi
tail -n +"$((old_lines + 1))" "$work/$other.log" | grep -q 'manifest removed\|status written' &&
	fail "the woken replica wrote after it woke"
echo "ok: $other after waking: $(tail -n +"$((old_lines + 1))" "$work/$other.log" | grep -c . || true) log lines, no write"
echo "ok: the woken ex-leader (term $old_term) changed nothing; woken completed 4/4"
echo "PASS"
