#!/usr/bin/env bash
# traceprof-controller in Kubernetes mode against an API server whose
# watches misbehave (the test API server's faults.json), no agent needed:
# - watches reset every 0.5-2 s for 30 s: each of 6 triggers applied at a
#   random moment is Active within 1.5 s of kubectl apply (kubectl's own
#   start included); before, each reset counted as an error and the waits
#   grew to 30 s;
# - every trigger list and watch answered 500: /readyz turns 503 naming the
#   TraceProfileTrigger watch after --stuck-after (2 s), and 200 again once
#   the server answers.
# usage: run_kube_watch_test.sh TRACEPROF_DB CONTROLLER CLUSTER_DIR
set -euo pipefail
tpdb=$1 controller=$2 cluster=$3
. "$(dirname "$0")/lib.sh"
command -v kubectl >/dev/null || { echo "skip: kubectl not found"; exit 77; }
command -v curl >/dev/null || { echo "skip: curl not found"; exit 77; }
. "$(dirname "$0")/kube_lib.sh"

conn=$(fresh_db "$tpdb" "$cluster" tp_e2e_kube_watch)
start_apiserver
install_crd
health=$(free_port)
"$controller" --kubeconfig "$kube_state/kubeconfig" --leader-elect=false --agent-selector "" \
	--db "$conn" --interval 500ms --health-addr "127.0.0.1:$health" --stuck-after 2s \
	2>"$work/controller.log" &
pids+=($!)
ready() { curl -s -o "$work/readyz" -w '%{http_code}' "http://127.0.0.1:$health/readyz" || true; }
for _ in $(seq 100); do [ "$(ready)" = 200 ] && break; sleep 0.1; done
[ "$(ready)" = 200 ] || fail "/readyz not 200 at start: $(cat "$work/readyz" 2>/dev/null)"
echo "ok: ready"

faults() { echo "$1" >"$kube_state/faults.json.new" && mv "$kube_state/faults.json.new" "$kube_state/faults.json"; }
trigger() { # NAME
	kc apply -f - >/dev/null <<YAML || fail "kubectl apply $1"
apiVersion: traceprof.dev/v1alpha1
kind: TraceProfileTrigger
metadata: {name: $1, namespace: default}
spec: {service: svc-$1, maxRequests: 3, timeout: 5m}
YAML
}

# 1. Watches reset every 0.5-2 s (more often than real servers, so that
# waits that grow with each reset would show within the test's 30 s).
faults '{"watch_reset_after": [0.5, 2]}'
worst=0
for i in $(seq 6); do
	sleep "$(python3 -c 'import random; print(round(random.uniform(1, 6), 2))')"
	t0=$EPOCHREALTIME
	trigger "reset-$i"
	# polled with plain GETs: kubectl wait's own watch is reset too
	until [ "$(tpt "reset-$i" '{.status.phase}')" = Active ]; do
		python3 -c "import sys; sys.exit($EPOCHREALTIME - $t0 > 30)" || fail "reset-$i not Active"
	done
	ms=$(python3 -c "print(round(($EPOCHREALTIME - $t0) * 1000))")
	echo "reset-$i: Active $ms ms after kubectl apply"
	[ "$ms" -gt "$worst" ] && worst=$ms
done
[ "$worst" -le 1500 ] || fail "a trigger took $worst ms to be Active while watches were reset"
echo "ok: 6 triggers each Active within $worst ms while watches were reset"

# 2. Every TraceProfileTrigger list and watch answered 500.
faults '{"refuse": {"status": 500, "path": "/traceprofiletriggers", "methods": ["GET"]},
	"watch_reset_after": [0.2, 0.4]}'
code=''
for _ in $(seq 150); do
	code=$(ready)
	[ "$code" = 503 ] && break
	sleep 0.1
done
[ "$code" = 503 ] || fail "/readyz stayed $code while the trigger watch failed"
grep -q 'TraceProfileTrigger watch has failed' "$work/readyz" ||
	fail "/readyz does not name the watch: $(cat "$work/readyz")"
echo "ok: /readyz 503: $(cat "$work/readyz")"
faults '{}'
for _ in $(seq 400); do [ "$(ready)" = 200 ] && break; sleep 0.1; done
[ "$(ready)" = 200 ] || fail "/readyz not 200 again: $(cat "$work/readyz")"
echo "ok: /readyz 200 again once the server answers"
echo "PASS"
