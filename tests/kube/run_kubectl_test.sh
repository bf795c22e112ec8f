#!/usr/bin/env bash
# kube_apiserver_kubectl: the TraceProfileTrigger CRD through the real kubectl
# against the test API server (kube_test_apiserver.py): install, discovery,
# explain, apply, printer columns, defaults, a status change seen by a
# running `kubectl get -w`, generation on re-apply, delete, every invalid
# trigger refused with the field named, a restart keeping objects, a
# client-certificate kubeconfig, and 401 without credentials.
# Usage: run_kubectl_test.sh SOURCE_DIR [PYTHON]
set -uo pipefail

src=$(cd "$1" && pwd)
py=${2:-/usr/bin/python3}
for tool in "$py" openssl kubectl curl; do
	command -v "$tool" >/dev/null || { echo "SKIP: $tool not found"; exit 77; }
done
echo "kubectl: $(kubectl version --client 2>/dev/null | head -1)"
# `kubectl patch --subresource` (used below) exists since kubectl 1.24.
minor=$(kubectl version --client -o json 2>/dev/null | sed -n 's/.*"minor": *"\([0-9]*\).*/\1/p' | head -1)
if [ -n "$minor" ] && [ "$minor" -lt 24 ]; then
	echo "SKIP: kubectl 1.$minor is older than 1.24 (no patch --subresource)"
	exit 77
fi

work=$(mktemp -d /tmp/traceprof-kubectl.XXXXXX)
state=$work/state
server_pid=
watch_pid=
cleanup() {
	[ -n "$watch_pid" ] && kill "$watch_pid" 2>/dev/null
	[ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT

failures=0
pass() { echo "ok: $*"; }
fail() {
	echo "FAIL: $*"
	failures=$((failures + 1))
}

start_server() { # extra args...
	local before=$work/start.$RANDOM
	touch "$before"
	sleep 0.01
	"$py" "$src/tests/kube/kube_test_apiserver.py" --state-dir "$state" \
		--log "$work/requests.log" "$@" >>"$work/server.out" 2>&1 &
	server_pid=$!
	for _ in $(seq 100); do
		[ "$state/kubeconfig" -nt "$before" ] && return 0
		sleep 0.1
	done
	echo "server did not start:"
	cat "$work/server.out"
	exit 1
}
stop_server() {
	kill -TERM "$server_pid"
	local t0=$SECONDS
	wait "$server_pid"
	local rc=$?
	server_pid=
	[ $rc -eq 0 ] && [ $((SECONDS - t0)) -le 1 ] && pass "SIGTERM: exit 0 within 1 s" ||
		fail "SIGTERM: rc=$rc after $((SECONDS - t0)) s"
}

k() { kubectl --kubeconfig "$state/kubeconfig" --cache-dir "$work/cache" --request-timeout=20s "$@"; }

start_server

# Install the CRD; it becomes Established and served.
out=$(k apply -f "$src/crds/" 2>&1) && pass "apply crds/: $out" || fail "apply crds/: $out"
out=$(k wait --for=condition=Established crd/traceprofiletriggers.traceprof.dev --timeout=20s 2>&1) &&
	pass "$out" || fail "wait Established: $out"
out=$(k api-resources 2>&1)
echo "$out" | grep -Eq '^traceprofiletriggers +tpt +traceprof.dev/v1alpha1 +true +TraceProfileTrigger' &&
	pass "api-resources lists tpt" || fail "api-resources: $out"
out=$(k explain tpt.spec.sampling 2>&1)
echo "$out" | grep -q 'frequencyHz.*<integer>' && pass "explain tpt.spec.sampling" ||
	fail "explain: $out"

# Apply the example; printer columns, defaults.
cp "$src/examples/triggers/slow-payments.yaml" "$work/trigger.yaml"
sed -i '/frequencyHz/d; /sampling:/d; /timeout:/d' "$work/trigger.yaml"
out=$(k apply -f "$work/trigger.yaml" 2>&1)
[ "$out" = "traceprofiletrigger.traceprof.dev/slow-payments created" ] && pass "$out" ||
	fail "apply example: $out"
out=$(k get tpt 2>&1)
echo "$out" | head -1 | grep -Eq '^NAME +SERVICE +PHASE +COLLECTED +AGE$' &&
	echo "$out" | grep -Eq '^slow-payments +payment-svc +[0-9]+s$' && pass "get tpt columns" ||
	fail "get tpt: $out"
out=$(k get tpt -o wide 2>&1)
echo "$out" | head -1 | grep -Eq 'COLLECTED +HZ +AGE$' && echo "$out" | grep -Eq ' 99 +[0-9]+s$' &&
	pass "get tpt -o wide shows HZ 99" || fail "get -o wide: $out"
out=$(k get tpt slow-payments -o yaml 2>&1)
echo "$out" | grep -q '^    frequencyHz: 99$' && echo "$out" | grep -q '^  timeout: 5m$' &&
	echo "$out" | grep -q '^  generation: 1$' && pass "defaults applied (frequencyHz 99, timeout 5m)" ||
	fail "defaults: $out"
echo "$out" | grep -q '^    offCPU: false$' && ! echo "$out" | grep -q 'offCPUThreshold' &&
	pass "offCPU defaults to false, offCPUThreshold is not defaulted" || fail "off-CPU defaults: $out"
out=$(k explain tpt.spec.sampling 2>&1)
echo "$out" | grep -q 'offCPU.*<boolean>' && echo "$out" | grep -q 'offCPUThreshold.*<string>' &&
	pass "explain shows offCPU and offCPUThreshold" || fail "explain off-CPU: $out"

# A status change through the status subresource reaches a running watch.
k get tpt -w >"$work/watch.out" 2>&1 &
watch_pid=$!
sleep 1.5
out=$(k patch tpt slow-payments --subresource=status --type=merge \
	-p '{"status":{"phase":"Active","progress":"3/10","collectedRequests":3}}' 2>&1) ||
	fail "status patch: $out"
for _ in $(seq 50); do
	grep -q 'Active' "$work/watch.out" && break
	sleep 0.1
done
kill "$watch_pid" 2>/dev/null
wait "$watch_pid" 2>/dev/null
watch_pid=
grep -Eq '^slow-payments +payment-svc +Active +3/10 +[0-9]+s$' "$work/watch.out" &&
	pass "get -w saw the status change" || fail "get -w: $(cat "$work/watch.out")"
out=$(k get tpt slow-payments -o jsonpath='{.metadata.generation}')
[ "$out" = 1 ] && pass "status change kept generation 1" || fail "generation after status: $out"

# Re-apply after an edit: a patch, generation 2, status kept.
sed -i 's/maxRequests: 10/maxRequests: 20/' "$work/trigger.yaml"
out=$(k apply -f "$work/trigger.yaml" 2>&1)
[ "$out" = "traceprofiletrigger.traceprof.dev/slow-payments configured" ] && pass "$out" ||
	fail "re-apply: $out"
out=$(k get tpt slow-payments -o jsonpath='{.metadata.generation} {.spec.maxRequests} {.status.phase}')
[ "$out" = "2 20 Active" ] && pass "re-apply bumped generation to 2, status kept" ||
	fail "after re-apply: $out"
grep -q 'PATCH /apis/traceprof.dev/v1alpha1/namespaces/default/traceprofiletriggers/slow-payments' \
	"$work/requests.log" && pass "re-apply went through PATCH" || fail "no PATCH in the log"

# Invalid triggers: each refused, the message names the field.
check_bad() { # file, expected text
	local out
	if out=$(k apply -f "$src/tests/kube/testdata/$1" 2>&1); then
		fail "$1 accepted: $out"
	elif echo "$out" | grep -qF -- "$2"; then
		pass "$1 refused: $out"
	else
		fail "$1: expected '$2' in: $out"
	fi
}
check_bad bad-frequency.yaml 'spec.sampling.frequencyHz: Invalid value: 500: spec.sampling.frequencyHz in body should be less than or equal to 100'
check_bad bad-maxrequests.yaml 'spec.maxRequests: Invalid value: 0'
check_bad bad-timeout.yaml 'spec.timeout: Invalid value: "string": timeout must be more than 0 and at most 10m'
check_bad bad-min-max.yaml 'spec.match: Invalid value: "object": minDuration must not be more than maxDuration'
check_bad bad-duration.yaml 'spec.match.minDuration: Invalid value: "5 minutes"'
check_bad bad-status.yaml 'spec.match.status: Invalid value: "6xx"'
check_bad bad-unknown-field.yaml 'unknown field "spec.smapling"'
check_bad bad-offcpu-threshold.yaml 'spec.sampling.offCPUThreshold: Invalid value: "string": offCPUThreshold must be at least 10us and at most 10s'
check_bad bad-offcpu-threshold-alone.yaml 'spec.sampling: Invalid value: "object": offCPUThreshold is set only with offCPU: true'
check_bad bad-offcpu-string.yaml 'spec.sampling.offCPU in body must be of type boolean'
check_bad bad-no-target.yaml 'spec: Invalid value: "object": one of spec.service or spec.selector is required'
# A valid off-CPU trigger is stored as written.
out=$(printf '%s\n' 'apiVersion: traceprof.dev/v1alpha1' 'kind: TraceProfileTrigger' \
	'metadata: {name: offcpu}' 'spec: {service: payment-svc, sampling: {offCPU: true, offCPUThreshold: 500us}}' |
	k apply -f - 2>&1) && pass "$out" || fail "apply an off-CPU trigger: $out"
out=$(k get tpt offcpu -o jsonpath='{.spec.sampling.offCPU} {.spec.sampling.offCPUThreshold} {.spec.sampling.frequencyHz}' 2>&1)
[ "$out" = "true 500us 99" ] && pass "off-CPU trigger stored: $out" || fail "off-CPU trigger: $out"
out=$(k delete tpt offcpu 2>&1) || fail "delete offcpu: $out"
out=$(k get tpt -o name 2>&1)
[ "$out" = "traceprofiletrigger.traceprof.dev/slow-payments" ] && pass "nothing invalid stored" ||
	fail "stored after invalid applies: $out"

# A restart keeps the objects (and the port).
port=$(cat "$state/port")
stop_server
start_server
[ "$(cat "$state/port")" = "$port" ] && pass "restart kept port $port" || fail "port changed"
out=$(k get tpt slow-payments -o jsonpath='{.metadata.generation} {.spec.maxRequests} {.status.progress}' 2>&1)
[ "$out" = "2 20 3/10" ] && pass "restart kept the trigger" || fail "after restart: $out"

# kubectl delete.
out=$(k delete tpt slow-payments 2>&1)
[ "$out" = 'traceprofiletrigger.traceprof.dev "slow-payments" deleted' ] && pass "$out" ||
	fail "delete: $out"
out=$(k get tpt slow-payments 2>&1) && fail "still there: $out" ||
	{ echo "$out" | grep -q 'NotFound' && pass "get after delete: $out" || fail "get after delete: $out"; }

# A client-certificate kubeconfig works.
stop_server
start_server --auth cert
grep -q 'client-certificate:' "$state/kubeconfig" && ! grep -q 'token:' "$state/kubeconfig" ||
	fail "cert kubeconfig: $(cat "$state/kubeconfig")"
out=$(k get ns default -o name 2>&1)
[ "$out" = "namespace/default" ] && pass "client certificate accepted" || fail "cert auth: $out"
grep -q 'GET /api/v1/namespaces/default .* 200 user=traceprof-test-admin' "$work/requests.log" ||
	fail "the request log has no cert user line"

# No credentials: 401 with a Status body.
out=$(curl -sS --cacert "$state/ca.crt" -w ' %{http_code}' "https://127.0.0.1:$port/api/v1/namespaces")
echo "$out" | grep -q '"reason": "Unauthorized"' && echo "$out" | grep -q ' 401$' &&
	pass "no credentials: 401" || fail "no credentials: $out"
out=$(curl -sS --cacert "$state/ca.crt" -H "Authorization: Bearer $(cat "$state/token")" \
	-o /dev/null -w '%{http_code}' "https://127.0.0.1:$port/api/v1/namespaces")
[ "$out" = 200 ] && pass "token still accepted" || fail "token: $out"
stop_server

echo "$failures failed"
[ $failures -eq 0 ]
