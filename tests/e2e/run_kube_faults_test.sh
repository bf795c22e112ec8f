#!/usr/bin/env bash
# traceprof-controller in Kubernetes mode under faults: two replicas with
# leader election (only the Lease holder acts; after kill -9 of the leader
# the other takes the Lease and the trigger still completes, no request
# claimed twice); the API server restarted mid-watch with a short watch
# history (--history 5: the informers relist after 410) and a trigger
# applied afterwards completes; the agent restarted while a trigger is
# Active is re-programmed and collection resumes.
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

"$load" --port "$pay_port" --rate 50 --duration 100 --concurrency 4 --slow-fraction 0.03 \
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

# 2. The API server restarted mid-watch (its watch history starts empty: 410, relist).
stop_apiserver
sleep 1
start_apiserver --history 5
for i in $(seq 12); do kc label pod payment-1 "churn=c$i" --overwrite >/dev/null; done
apply_trigger after-restart 3
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
echo "PASS"
