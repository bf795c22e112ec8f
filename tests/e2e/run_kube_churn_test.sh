#!/usr/bin/env bash
# traceprof-controller in Kubernetes mode while things change under an
# Active trigger (real BPF, agent, PostgreSQL in a private cluster, the test
# API server with a 5-event watch history, the real kubectl and curl):
#   1. the health endpoint: /healthz and /readyz 200, other paths 404,
#      a malformed request 400;
#   2. a spec edit while Active: the agent is re-programmed, status follows
#      the new generation and the trigger completes per the new spec;
#   3. pods coming and going: a matching pod that starts becomes a target
#      and its requests are claimed; once it is deleted it is no target and
#      nothing more is claimed from it; before it runs the trigger says it
#      has no pod (an off-CPU trigger also that nothing is captured);
#   4. a watch expired while the controller was not watching: stopped, its
#      connection cut, the spec changed and the history moved on; resumed,
#      it gets 410, lists again and completes per the current spec;
#   5. PostgreSQL restarted (pg_ctl stop -m fast, start) mid-collection:
#      /readyz 503 naming the database while it is down, 200 after; the
#      trigger completes with exactly maxRequests distinct claims, the same
#      in status and in the database.
# usage: run_kube_churn_test.sh TRACEPROF_DB AGENT CONTROLLER SERVICE LOAD
set -euo pipefail
tpdb=$1 agent=$2 controller=$3 service=$4 load=$5
. "$(dirname "$0")/lib.sh"
needs_bpf
command -v kubectl >/dev/null || { echo "skip: kubectl not found"; exit 77; }
command -v curl >/dev/null || { echo "skip: curl not found"; exit 77; }
. "$(dirname "$0")/kube_lib.sh"
churn_cleanup() {
	for p in "${pids[@]}"; do kill -CONT "$p" 2>/dev/null || true; done
	"$tpdb" remove "$work/db" >/dev/null 2>&1 || true
	kube_cleanup
}
trap churn_cleanup EXIT

chmod 755 "$work" # initdb runs as the postgres user
"$tpdb" create "$work/db" --fast >/dev/null || fail "cannot create a PostgreSQL cluster"
conn="$(fresh_db "$tpdb" "$work/db" tp_e2e_kube_churn) connect_timeout=2"
start_apiserver --history 5
install_crd

# The controller reaches the API server through a TCP relay the test can cut.
api_port=$(sed -n 's|^ *server: https://127.0.0.1:\([0-9]*\).*|\1|p' "$kube_state/kubeconfig")
[ -n "$api_port" ] || fail "no server port in the kubeconfig"
relay_port=$(free_port)
sed "s|https://127.0.0.1:$api_port|https://127.0.0.1:$relay_port|" "$kube_state/kubeconfig" >"$work/ctl.kubeconfig"
cat >"$work/relay.py" <<'PY'
import socket, sys, threading
lport, dport = int(sys.argv[1]), int(sys.argv[2])
ls = socket.socket()
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(("127.0.0.1", lport))
ls.listen(64)
def pipe(a, b):
    try:
        while (d := a.recv(65536)):
            b.sendall(d)
    except OSError:
        pass
    for s in (a, b):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
while True:
    c = ls.accept()[0]
    u = socket.create_connection(("127.0.0.1", dport))
    threading.Thread(target=pipe, args=(c, u), daemon=True).start()
    threading.Thread(target=pipe, args=(u, c), daemon=True).start()
PY
relay_pid=''
start_relay() {
	python3 "$work/relay.py" "$relay_port" "$api_port" 2>>"$work/relay.log" &
	relay_pid=$!
	pids+=("$relay_pid")
	for _ in $(seq 50); do (: >"/dev/tcp/127.0.0.1/$relay_port") 2>/dev/null && return 0; sleep 0.1; done
	fail "the relay did not start"
}
start_relay

otlp_port=$(free_port)
ctl_port=$(free_port)
health_port=$(free_port)
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$work/token"
chmod 600 "$work/token"
endpoint="http://127.0.0.1:$otlp_port/v1/traces"
start payment "$service" --port 0 --threads 4 --otlp-endpoint "$endpoint"
pay_port=$port pay_pid=${pids[-1]}
pod_for "$pay_pid" payment-1 app=payment node-a
# canary-1: its process runs in its pod's cgroup, the Pod is not Running yet
start canary "$service" --port 0 --threads 4 --service canary-svc --otlp-endpoint "$endpoint"
can_port=$port can_pid=${pids[-1]}
can_uid=$(kube_pod canary-1 default node-a 'app: canary, role: canary')
can_cid=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
kube_pod_cgroup "$can_uid" "$can_cid"
echo "$can_pid" >"$pod_cg/cgroup.procs" || fail "cannot move $can_pid into $pod_cg"

start_agent agent "$agent" --db "$(as_role writer)" --target "pid:$pay_pid,$can_pid" --frequency 19 --window 2s \
	--otlp-http "127.0.0.1:$otlp_port" --otlp-grpc "" --node node-a \
	--control-listen "127.0.0.1:$ctl_port" --control-token-file "$work/token"
"$controller" --kubeconfig "$work/ctl.kubeconfig" --agent "127.0.0.1:$ctl_port@node-a" \
	--agent-selector "" --agent-token-file "$work/token" --db "$(as_role controller)" --leader-elect=false \
	--interval 500ms --health-addr "127.0.0.1:$health_port" 2>"$work/controller.log" &
ctl_pid=$!
pids+=("$ctl_pid")
"$load" --port "$pay_port" --rate 50 --duration 300 --concurrency 4 --slow-fraction 0.04 \
	--error-fraction 0 --seed 5 >"$work/load.log" 2>&1 &
pids+=($!)
"$load" --port "$can_port" --rate 40 --duration 300 --concurrency 4 --slow-fraction 0.05 \
	--error-fraction 0 --seed 6 >"$work/load-canary.log" 2>&1 &
pids+=($!)

# http PATH: "CODE BODY" of GET PATH on the health endpoint
http() { curl -s -m 5 -o "$work/body" -w '%{http_code}' "http://127.0.0.1:$health_port$1" && echo " $(cat "$work/body")"; }
wait_http() { # PATH CODE SECONDS
	local got=''
	for _ in $(seq $(($3 * 10))); do
		got=$(http "$1" || true)
		[ "${got%% *}" = "$2" ] && return 0
		sleep 0.1
	done
	fail "$1: expected $2 within $3 s, got: $got"
}
applied() { grep -c 'generation [0-9]* applied' "$work/agent.log" || true; }
apply_trigger() { # NAME SPEC-LINES...
	local name=$1
	shift
	printf '%s\n' "apiVersion: traceprof.dev/v1alpha1" "kind: TraceProfileTrigger" \
		"metadata: {name: $name, namespace: default}" "spec:" "$@" |
		kc apply -f - >/dev/null || fail "kubectl apply $name"
}
# exactly MAX distinct claimed trace ids: table, status and trigger_requests_v agree
check_collected() { # NAME MAX
	local ids db_ids
	check "$1: $2 distinct claimed requests" "$2 $2" \
		"SELECT collected_requests || ' ' || (SELECT count(DISTINCT x) FROM unnest(trace_ids) x)
		 FROM traceprof.trace_profile_triggers WHERE name = '$1'"
	check "$1: trigger_requests_v rows" "$2 $2" \
		"SELECT count(*) || ' ' || count(DISTINCT trace_id) FROM traceprof.trigger_requests_v WHERE name = '$1'"
	[ "$(tpt "$1" '{.status.progress}')" = "$2/$2" ] || fail "$1 progress $(tpt "$1" '{.status.progress}')"
	ids=$(tpt "$1" '{range .status.traceIDs[*]}{@}{"\n"}{end}' | sort)
	db_ids=$(q "SELECT traceprof.trace_id_text(x) FROM traceprof.trace_profile_triggers, unnest(trace_ids) x
		WHERE name = '$1' ORDER BY 1")
	[ "$ids" = "$db_ids" ] || fail "$1: status.traceIDs differ from the claims: $ids vs $db_ids"
	echo "ok: $1: status.traceIDs are the $2 claims"
}
# the status describes the object's current generation
check_observed() { # NAME
	local gen
	gen=$(tpt "$1" '{.metadata.generation}')
	[ "$gen" -ge 2 ] || fail "$1: generation $gen, the spec was not changed"
	[ "$(tpt "$1" '{.status.observedGeneration}')" = "$gen" ] ||
		fail "$1: observedGeneration $(tpt "$1" '{.status.observedGeneration}'), generation $gen"
	echo "ok: $1: observedGeneration $gen"
}

# 1. The health endpoint.
wait_http /readyz 200 30
[ "$(http /healthz)" = "200 ok" ] || fail "/healthz: $(http /healthz)"
[ "$(http /readyz)" = "200 ok" ] || fail "/readyz: $(http /readyz)"
[ "$(http /metrics)" = "404 not found: /healthz or /readyz" ] || fail "/metrics: $(http /metrics)"
code=$(curl -s -m 5 -o /dev/null -w '%{http_code}' -X POST "http://127.0.0.1:$health_port/healthz")
[ "$code" = 405 ] || fail "POST /healthz: $code"
code=$(curl -s -m 5 -o /dev/null -w '%{http_code}' --request-target 'no-slash' "http://127.0.0.1:$health_port/")
[ "$code" = 400 ] || fail "a request target without a slash: $code"
echo "ok: /healthz, /readyz 200; 404, 405, 400"

# 2. A spec edit while Active: nothing matches 1h; then 200ms and 6 requests.
apply_trigger edit "  selector: {matchLabels: {app: payment}}" "  match: {minDuration: 1h}" \
	"  maxRequests: 3" "  timeout: 3m"
wait_phase edit Active 30
sleep 1
a0=$(applied)
apply_trigger edit "  selector: {matchLabels: {app: payment}}" "  match: {minDuration: 200ms}" \
	"  maxRequests: 6" "  timeout: 3m"
wait_phase edit Completed 60
[ "$(applied)" -gt "$a0" ] || fail "the agent was not re-programmed after the edit"
check_observed edit
check_collected edit 6
kc delete tpt edit >/dev/null

# 3. Pods coming and going: canary-1 starts, then is deleted.
apply_trigger canary "  selector: {matchLabels: {role: canary}}" "  match: {minDuration: 200ms}" \
	"  maxRequests: 1000" "  timeout: 3m"
wait_phase canary Active 30
[ -z "$(tpt canary '{.status.targets.pods[*].name}')" ] || fail "canary has targets before its pod runs"
[ "$(tpt canary '{.status.message}')" = "no running pod matches spec.selector" ] ||
	fail "canary message: $(tpt canary '{.status.message}')"
# the same for a trigger asking for off-CPU capture says none happens either
apply_trigger ghost "  selector: {matchLabels: {role: ghost}}" "  sampling: {offCPU: true}" \
	"  timeout: 3m"
wait_phase ghost Active 30
[ "$(tpt ghost '{.status.message}')" = \
	"no running pod matches spec.selector: no CPU or off-CPU profile until one appears" ] ||
	fail "ghost message: $(tpt ghost '{.status.message}')"
kc delete tpt ghost >/dev/null
echo "ok: an off-CPU trigger without a pod says nothing is captured"
a0=$(applied)
kube_pod_running canary-1 default "$can_cid"
for _ in $(seq 100); do [ "$(tpt canary '{.status.targets.pods[*].name}')" = canary-1 ] && break; sleep 0.1; done
[ "$(tpt canary '{.status.targets.pods[*].name}')" = canary-1 ] ||
	fail "canary-1 did not become a target: $(tpt canary '{.status.targets}')"
[ "$(applied)" -gt "$a0" ] || fail "the agent was not re-programmed with canary-1"
for _ in $(seq 300); do [ "$(tpt canary '{.status.collectedRequests}')" -ge 2 ] 2>/dev/null && break; sleep 0.1; done
[ "$(tpt canary '{.status.collectedRequests}')" -ge 2 ] || fail "nothing claimed from canary-1"
check "canary: the claims are canary-1's requests" "canary-svc" \
	"SELECT string_agg(DISTINCT service, ',') FROM traceprof.trigger_requests_v
	 WHERE name = 'canary' AND service IS NOT NULL"
echo "ok: canary-1 became a target and its requests were claimed"
a0=$(applied)
kc delete pod canary-1 >/dev/null
for _ in $(seq 100); do [ -z "$(tpt canary '{.status.targets.pods[*].name}')" ] && break; sleep 0.1; done
[ -z "$(tpt canary '{.status.targets.pods[*].name}')" ] ||
	fail "canary-1 is still a target after its deletion: $(tpt canary '{.status.targets}')"
[ "$(applied)" -gt "$a0" ] || fail "the agent was not re-programmed after canary-1 left"
sleep 1 # requests that ended before the agent's new set may still be claimed
n0=$(q "SELECT collected_requests FROM traceprof.trace_profile_triggers WHERE name = 'canary'")
sleep 2 # canary-1 keeps serving about 2 slow requests a second
n1=$(q "SELECT collected_requests FROM traceprof.trace_profile_triggers WHERE name = 'canary'")
[ "$n0" = "$n1" ] || fail "claims went on after canary-1 left: $n0 then $n1"
[ "$(tpt canary '{.status.phase}')" = Active ] || fail "canary: $(tpt canary '{.status.phase}')"
echo "ok: canary-1 left the targets, nothing more claimed ($n1)"
kc delete tpt canary >/dev/null

# 4. A watch expired while the controller was not watching.
apply_trigger relist "  selector: {matchLabels: {app: payment}}" "  match: {minDuration: 1h}" \
	"  maxRequests: 3" "  timeout: 3m"
wait_phase relist Active 30
expired0=$(grep -c 'watch expired, listing again path=/apis/traceprof.dev' "$work/controller.log" || true)
kill -STOP "$ctl_pid"
kill "$relay_pid"
wait "$relay_pid" 2>/dev/null || true
apply_trigger relist "  selector: {matchLabels: {app: payment}}" "  match: {minDuration: 200ms}" \
	"  maxRequests: 4" "  timeout: 3m"
for i in $(seq 8); do kc label pod payment-1 "churn=c$i" --overwrite >/dev/null; done
start_relay
kill -CONT "$ctl_pid"
wait_phase relist Completed 60
expired1=$(grep -c 'watch expired, listing again path=/apis/traceprof.dev' "$work/controller.log" || true)
[ "$expired1" -gt "$expired0" ] || fail "the triggers' watch did not expire (no relist logged)"
echo "ok: the controller got 410 and listed the triggers again"
check_observed relist
check_collected relist 4
kc delete tpt relist >/dev/null

# 5. PostgreSQL restarted while a trigger is Active and collecting.
apply_trigger pgrestart "  selector: {matchLabels: {app: payment}}" "  match: {minDuration: 200ms}" \
	"  maxRequests: 15" "  timeout: 3m"
for _ in $(seq 300); do [ "$(tpt pgrestart '{.status.collectedRequests}')" -ge 2 ] 2>/dev/null && break; sleep 0.1; done
[ "$(tpt pgrestart '{.status.phase}')" = Active ] || fail "pgrestart: $(tpt pgrestart '{.status.phase}') before the restart"
"$tpdb" stop "$work/db" >/dev/null || fail "pg_ctl stop"
before=$(q "SELECT 1" 2>/dev/null || echo down)
[ "$before" = down ] || fail "the database is still up"
wait_http /readyz 503 10
http /readyz | grep -q 'database unreachable' || fail "/readyz reason: $(http /readyz)"
[ "$(http /healthz)" = "200 ok" ] || fail "/healthz while the database is down: $(http /healthz)"
echo "ok: /readyz 503 names the database while it is down; /healthz 200"
sleep 3
kill -0 "$ctl_pid" || fail "the controller died with the database"
kill -0 "$agent_pid" || fail "the agent died with the database"
"$tpdb" start "$work/db" >/dev/null || fail "pg_ctl start"
wait_http /readyz 200 20
echo "ok: /readyz 200 again"
wait_phase pgrestart Completed 90
check_collected pgrestart 15
echo "PASS"
