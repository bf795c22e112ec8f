#!/usr/bin/env bash
# traceprof-controller in Kubernetes mode end to end: the test API server
# with the real kubectl, a real agent (BPF, AgentControl with a bearer
# token), real PostgreSQL, and traceprof-demo-service standing in for a pod
# (its process in a kubelet-shaped cgroup, a Running Pod object with its
# container id on node-a). A TraceProfileTrigger selecting that pod by
# label collects exactly the next 5 slow requests; its status (phase,
# traceIDs, conditions, observedGeneration, targets) and events are checked
# against PostgreSQL and the load generator's ground truth. Then: a spec the
# CRD accepts but the controller refuses (Rejected, InvalidSpec), a 4th
# active trigger for one service (Rejected), expiry after 3 s, and a
# deleted Active trigger ending the agent's raised sampling.
# usage: run_kube_controller_test.sh TRACEPROF_DB AGENT CONTROLLER SERVICE LOAD CLUSTER_DIR
set -euo pipefail
tpdb=$1 agent=$2 controller=$3 service=$4 load=$5 cluster=$6
. "$(dirname "$0")/lib.sh"
needs_bpf
command -v kubectl >/dev/null || { echo "skip: kubectl not found"; exit 77; }
. "$(dirname "$0")/kube_lib.sh"

conn=$(fresh_db "$tpdb" "$cluster" tp_e2e_kube_controller)
start_apiserver
install_crd

otlp_port=$(free_port)
ctl_port=$(free_port)
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$work/token"
chmod 600 "$work/token"
start payment "$service" --port 0 --threads 4 --otlp-endpoint "http://127.0.0.1:$otlp_port/v1/traces"
pay_port=$port pay_pid=${pids[-1]}
pod_for "$pay_pid" payment-1 app=payment node-a
pod_for none other-1 app=other node-a

start_agent agent "$agent" --db "$(as_role writer)" --target "pid:$pay_pid" --frequency 19 --window 2s \
	--otlp-http "127.0.0.1:$otlp_port" --otlp-grpc "" --node node-a \
	--control-listen "127.0.0.1:$ctl_port" --control-token-file "$work/token"
"$controller" --kubeconfig "$kube_state/kubeconfig" --agent "127.0.0.1:$ctl_port@node-a" \
	--agent-selector "" --agent-token-file "$work/token" --db "$(as_role controller)" --leader-elect=false \
	--interval 500ms 2>"$work/controller.log" &
pids+=($!)

"$load" --port "$pay_port" --rate 50 --duration 30 --concurrency 4 --slow-fraction 0.03 \
	--error-fraction 0 --seed 7 --out "$work/truth.csv" >"$work/load.log" 2>&1 &
load_pid=$!
sleep 2 # some requests at the base rate first

# 1. The next 5 slow requests of the selected pod.
kc apply -f - >/dev/null <<'YAML' || fail "kubectl apply slow-pay"
apiVersion: traceprof.dev/v1alpha1
kind: TraceProfileTrigger
metadata: {name: slow-pay, namespace: default}
spec:
  service: payment-svc
  selector: {matchLabels: {app: payment}}
  match: {minDuration: 200ms}
  maxRequests: 5
  timeout: 2m
YAML
wait_phase slow-pay Completed 90
wait "$load_pid" || fail "load generator"
load_truth truth "$work/truth.csv"
ids=$(tpt slow-pay '{range .status.traceIDs[*]}{@}{"\n"}{end}' | sort)
[ "$(echo "$ids" | grep -c .)" = 5 ] || fail "status.traceIDs: expected 5, got: $ids"
db_ids=$(q "SELECT traceprof.trace_id_text(x) FROM traceprof.trace_profile_triggers, unnest(trace_ids) x
	WHERE name = 'slow-pay' ORDER BY 1")
[ "$ids" = "$db_ids" ] || fail "status.traceIDs differ from the claimed ones: $ids vs $db_ids"
echo "ok: status.traceIDs are the 5 claimed trace ids"
slow=$(for id in $ids; do q "SELECT path FROM truth WHERE trace_id = '$id'"; done | grep -c '^slow$' || true)
[ "$slow" = 5 ] || fail "only $slow of the collected requests are slow ones in the ground truth"
echo "ok: the 5 collected requests are slow ones (ground truth)"
[ "$(tpt slow-pay '{.status.progress} {.status.collectedRequests}')" = "5/5 5" ] ||
	fail "progress: $(tpt slow-pay '{.status.progress} {.status.collectedRequests}')"
gen=$(tpt slow-pay '{.metadata.generation}')
[ "$(tpt slow-pay '{.status.observedGeneration}')" = "$gen" ] || fail "observedGeneration"
[ "$(tpt slow-pay '{.status.conditions[?(@.type=="Completed")].status}')" = True ] || fail "Completed condition"
[ "$(tpt slow-pay '{.status.conditions[?(@.type=="Completed")].observedGeneration}')" = "$gen" ] ||
	fail "condition observedGeneration"
[ "$(tpt slow-pay '{.status.conditions[?(@.type=="Active")].status}')" = False ] || fail "Active condition"
[ "$(tpt slow-pay '{.status.targets.pods[*].name}')" = payment-1 ] ||
	fail "targets.pods: $(tpt slow-pay '{.status.targets.pods}')"
[ -n "$(tpt slow-pay '{.status.startTime}')" ] && [ -n "$(tpt slow-pay '{.status.completionTime}')" ] ||
	fail "startTime / completionTime missing"
echo "ok: progress, observedGeneration, conditions, targets, times"
ev=$(kc get events --field-selector involvedObject.name=slow-pay -o jsonpath='{range .items[*]}{.reason}{"\n"}{end}' | sort | tr '\n' ' ')
[ "$ev" = "Activated Completed " ] || fail "events of slow-pay: $ev"
echo "ok: events $ev"
# the status is not rewritten in a loop: its resourceVersion stays put
rv=$(tpt slow-pay '{.metadata.resourceVersion}')
sleep 2
[ "$(tpt slow-pay '{.metadata.resourceVersion}')" = "$rv" ] || fail "status rewritten without a change"
echo "ok: no status write without a change"

# 2. A spec the CRD accepts that the controller refuses.
kc apply -f - >/dev/null <<'YAML' || fail "kubectl apply bad-targets"
apiVersion: traceprof.dev/v1alpha1
kind: TraceProfileTrigger
metadata: {name: bad-targets, namespace: default}
spec: {service: payment-svc, targets: {pids: [1]}}
YAML
wait_phase bad-targets Rejected 20
[ "$(tpt bad-targets '{.status.reason}')" = InvalidSpec ] || fail "reason: $(tpt bad-targets '{.status.reason}')"
tpt bad-targets '{.status.message}' | grep -q 'spec.targets: only outside Kubernetes' ||
	fail "message: $(tpt bad-targets '{.status.message}')"
kc get events --field-selector involvedObject.name=bad-targets,reason=InvalidSpec -o name | grep -q . ||
	fail "no InvalidSpec event"
echo "ok: InvalidSpec with the field named"

# 3. At most 3 active triggers per service: the 4th is Rejected.
for i in 1 2 3 4; do
	kc apply -f - >/dev/null <<YAML || fail "kubectl apply busy-$i"
apiVersion: traceprof.dev/v1alpha1
kind: TraceProfileTrigger
metadata: {name: busy-$i, namespace: default}
spec: {service: busy-svc, match: {minDuration: 1h}, timeout: 10m}
YAML
	[ "$i" = 4 ] || wait_phase "busy-$i" Active 20
done
wait_phase busy-4 Rejected 20
tpt busy-4 '{.status.message}' | grep -q 'already has 3 active triggers' || fail "busy-4: $(tpt busy-4 '{.status}')"
kc get events --field-selector involvedObject.name=busy-4,reason=Rejected -o name | grep -q . || fail "no Rejected event"
kc delete tpt busy-1 busy-2 busy-3 busy-4 >/dev/null

# 4. Nothing matches within 3 s: Expired.
kc apply -f - >/dev/null <<'YAML' || fail "kubectl apply short"
apiVersion: traceprof.dev/v1alpha1
kind: TraceProfileTrigger
metadata: {name: short, namespace: default}
spec: {selector: {matchLabels: {app: payment}}, match: {minDuration: 1h}, timeout: 3s}
YAML
wait_phase short Expired 30
kc get events --field-selector involvedObject.name=short,reason=Expired -o name | grep -q . || fail "no Expired event"

# 5. Deleting an Active trigger ends the agent's raised sampling.
raised0=$(grep -c 'sampling raised' "$work/agent.log" || true)
lowered0=$(grep -c 'sampling back at the base rate' "$work/agent.log" || true)
kc apply -f - >/dev/null <<'YAML' || fail "kubectl apply held"
apiVersion: traceprof.dev/v1alpha1
kind: TraceProfileTrigger
metadata: {name: held, namespace: default}
spec: {selector: {matchLabels: {app: payment}}, match: {minDuration: 1h}, timeout: 5m}
YAML
wait_phase held Active 20
# the stored spec keeps the selector (the trigger has no service)
[ "$(q "SELECT spec->'selector' = '{\"matchLabels\": {\"app\": \"payment\"}}'::jsonb FROM traceprof.trace_profile_triggers WHERE name = 'held' AND phase = 'Active'")" = t ] ||
	fail "the stored spec lacks the selector: $(q "SELECT spec FROM traceprof.trace_profile_triggers WHERE name = 'held'")"
for _ in $(seq 100); do [ "$(grep -c 'sampling raised' "$work/agent.log")" -gt "$raised0" ] && break; sleep 0.1; done
[ "$(grep -c 'sampling raised' "$work/agent.log")" -gt "$raised0" ] || fail "held did not raise sampling"
kc delete tpt held >/dev/null
for _ in $(seq 100); do [ "$(grep -c 'sampling back at the base rate' "$work/agent.log")" -gt "$lowered0" ] && break; sleep 0.1; done
[ "$(grep -c 'sampling back at the base rate' "$work/agent.log")" -gt "$lowered0" ] ||
	fail "the agent kept raised sampling after the trigger was deleted"
for _ in $(seq 50); do
	st=$(q "SELECT phase || ':' || reason FROM traceprof.trace_profile_triggers WHERE name = 'held'")
	[ "$st" = "Failed:manifest removed" ] && break
	sleep 0.1
done
[ "$st" = "Failed:manifest removed" ] || fail "deleted trigger's row: $st"
echo "ok: deleting an Active trigger lowers the agent's sampling and ends its row"
echo "PASS"
