#!/usr/bin/env bash
# traceprof trigger create|list|get|delete, against both places triggers
# live:
#  - the cluster: the Kubernetes API test server with the CRD, checked with
#    the real kubectl both ways (what traceprof creates kubectl shows with
#    its printer columns, what kubectl applies traceprof lists), status
#    written through the status subresource shown by get, invalid triggers
#    refused with the field before anything is sent, exit codes;
#  - a local triggers directory, read by the real controller in local mode
#    against PostgreSQL: what traceprof writes the controller accepts, and
#    the phase traceprof shows comes from the controller's status file.
# usage: test_cli_trigger.sh TRACEPROF TRACEPROF_DB TRACEPROF_CONTROLLER PGDIR PYTHON3
set -euo pipefail
tp=$1 tpdb=$2 ctl=$3 pgdir=$4 py=${5:-python3}
. "$(dirname "$0")/../e2e/lib.sh"
command -v kubectl >/dev/null || { echo "skip: no kubectl"; exit 77; }
PATH=$(dirname "$py"):$PATH
. "$(dirname "$0")/../e2e/kube_lib.sh"

# expect EXIT PATTERN -- command...: exit status and a line of the output
expect() {
	local want=$1 pattern=$2 out rc
	shift 3
	set +e
	out=$("$@" 2>&1 </dev/null)
	rc=$?
	set -e
	[ "$rc" -eq "$want" ] || fail "$* -> exit $rc (want $want): $out"
	printf '%s' "$out" | grep -q -- "$pattern" || fail "$* -> output lacks /$pattern/: $out"
	echo "ok: exit $rc /$pattern/ <- ${*:2}"
}

# ---- the cluster ----
start_apiserver
install_crd
export KUBECONFIG=$kube_state/kubeconfig

expect 0 "traceprofiletrigger default/slow-pay created" -- \
	"$tp" trigger create slow-pay --service payment-svc --min-duration 1s --route '/api/pay*' \
	--max-requests 5
# kubectl sees it, with the CRD's defaults filled in by the server
[ "$(kc get tpt slow-pay -o jsonpath='{.spec.service} {.spec.maxRequests} {.spec.sampling.frequencyHz} {.spec.timeout}')" = \
	"payment-svc 5 99 5m" ] || fail "kubectl does not see the trigger as created: $(kc get tpt slow-pay -o yaml)"
kc get tpt | grep -q '^slow-pay *payment-svc' || fail "kubectl get tpt: $(kc get tpt)"
expect 2 "already exists" -- "$tp" trigger create slow-pay --service payment-svc

# refused before anything is sent, the field named
expect 2 "spec.sampling.frequencyHz: must be between 1 and 100" -- \
	"$tp" trigger create bad --service s --frequency 500
expect 2 "minDuration" -- "$tp" trigger create bad --service s --min-duration 2s --max-duration 1s
expect 2 "spec.timeout" -- "$tp" trigger create bad --service s --timeout 11m
expect 2 "spec.match.status" -- "$tp" trigger create bad --service s --status 6xx
expect 2 "set spec.selector or spec.service" -- "$tp" trigger create bad
expect 2 "is not KEY=VALUE" -- "$tp" trigger create bad --selector app
expect 2 "is not a number" -- "$tp" trigger create bad --service s --max-requests lots
head -c 1100000 /dev/zero | tr '\0' a >"$work/huge.yaml"
expect 2 "larger than 1048576 bytes" -- "$tp" trigger create -f "$work/huge.yaml"
expect 2 "cannot read" -- "$tp" trigger create -f "$work/none.yaml"
if kc get tpt bad >/dev/null 2>&1; then fail "an invalid trigger reached the cluster"; fi

# what kubectl applies, traceprof lists; -f sends every document of a file
kc apply -f "$kube_src/examples/triggers/slow-payments.yaml" >/dev/null
cat >"$work/two.yaml" <<'YAML'
apiVersion: traceprof.dev/v1alpha1
kind: TraceProfileTrigger
metadata: {name: by-label}
spec:
  selector: {matchLabels: {app: checkout}}
  match: {status: "500"}
---
apiVersion: traceprof.dev/v1alpha1
kind: TraceProfileTrigger
metadata: {name: errors, namespace: default}
spec: {service: checkout-svc, match: {status: 5xx}, maxRequests: 3}
YAML
expect 0 "default/errors created" -- "$tp" trigger create -f "$work/two.yaml"
[ "$(kc get tpt by-label -o jsonpath='{.spec.selector.matchLabels.app} {.spec.match.status}')" = \
	"checkout 500" ] || fail "by-label: $(kc get tpt by-label -o yaml)"
list=$("$tp" trigger list)
echo "$list"
[ "$(echo "$list" | head -1 | tr -s ' ')" = "NAME SERVICE PHASE COLLECTED AGE" ] || fail "list header"
echo "$list" | grep -q '^slow-payments *payment-svc *Pending *0/10 ' || fail "list lacks slow-payments"
echo "$list" | grep -q '^by-label *app=checkout *Pending *0/10 ' || fail "list lacks by-label"
echo "$list" | grep -q '^errors *checkout-svc *Pending *0/3 ' || fail "list lacks errors"
[ "$("$tp" trigger list -o name | sort | tr '\n' ' ')" = \
	"default/by-label default/errors default/slow-pay default/slow-payments " ] || fail "list -o name"

# status as the controller writes it (status subresource) is what get shows
ids='["0af7651916cd43dd8448eb211c80319c","4bf92f3577b34da6a3ce929d0e0e4736"]'
kc patch tpt slow-pay --subresource=status --type=merge -p \
	"{\"status\": {\"phase\": \"Completed\", \"reason\": \"Collected\", \"collectedRequests\": 2, \"traceIDs\": $ids}}" >/dev/null
expect 0 "Phase: *Completed (Collected)" -- "$tp" trigger get slow-pay
expect 0 "4bf92f3577b34da6a3ce929d0e0e4736" -- "$tp" trigger get slow-pay
json=$("$tp" trigger get slow-pay -o json)
[ "$(echo "$json" | "$py" -c 'import json,sys; v=json.load(sys.stdin); print(v["phase"], v["collectedRequests"], v["maxRequests"], ",".join(v["traceIDs"]), v["spec"]["match"]["route"])')" = \
	"Completed 2 5 0af7651916cd43dd8448eb211c80319c,4bf92f3577b34da6a3ce929d0e0e4736 /api/pay*" ] ||
	fail "get -o json: $json"
"$tp" trigger list | grep -q '^slow-pay *payment-svc *Completed *2/5 ' || fail "list after status"

# namespaces
printf "apiVersion: v1\nkind: Namespace\nmetadata: {name: team-b}\n" | kc apply -f - >/dev/null
expect 0 "team-b/nightly created" -- "$tp" trigger create nightly -n team-b --service batch --timeout 10m
expect 1 "No triggers found in namespace kube-system" -- "$tp" trigger list -n kube-system
"$tp" trigger list -A | grep -q '^team-b *nightly *batch ' || fail "list -A: $("$tp" trigger list -A)"
expect 0 "apiVersion: \"traceprof.dev/v1alpha1\"" -- "$tp" trigger create dry --service s --dry-run
if kc get tpt dry >/dev/null 2>&1; then fail "--dry-run created the trigger"; fi

# delete, not found, unreachable
expect 0 "default/errors deleted" -- "$tp" trigger delete errors
if kc get tpt errors >/dev/null 2>&1; then fail "errors still in the cluster"; fi
expect 1 "no trigger default/errors" -- "$tp" trigger delete errors
expect 1 "no trigger default/nope" -- "$tp" trigger get nope
sed "s#server: https://127.0.0.1:[0-9]*#server: https://127.0.0.1:$(free_port)#" \
	"$KUBECONFIG" >"$work/down.kubeconfig"
expect 3 "did not answer" -- "$tp" trigger list --kubeconfig "$work/down.kubeconfig"
expect 3 "no cluster" -- "$tp" trigger list --kubeconfig "$work/none"

# usage
expect 0 "usage: traceprof trigger" -- "$tp" trigger --help
expect 2 "unknown subcommand" -- "$tp" trigger frob
expect 2 "give the trigger's NAME" -- "$tp" trigger get
expect 2 "unknown flag --frequncy" -- "$tp" trigger create x --frequncy 9
expect 2 "not both" -- "$tp" trigger list --triggers-dir "$work" --kubeconfig "$KUBECONFIG"
expect 2 "belong to create" -- "$tp" trigger list --service s

# ---- a local triggers directory, read by the controller ----
dir=$work/triggers
mkdir "$dir"
expect 0 "default/slow created in" -- \
	"$tp" trigger create slow --service payment-svc --min-duration 200ms --status 5xx --triggers-dir "$dir"
expect 0 "next-slow-payments created in" -- \
	"$tp" trigger create -f "$kube_src/examples/triggers/next-slow-payments.yaml" --triggers-dir "$dir"
expect 2 "already exists in" -- "$tp" trigger create slow --service x --triggers-dir "$dir"
expect 2 "needs the Kubernetes API" -- "$tp" trigger create s --selector a=b --triggers-dir "$dir"
expect 0 "no status yet" -- "$tp" trigger get slow --triggers-dir "$dir"
conn=$(fresh_db "$tpdb" "$pgdir" tp_cli_trigger)
"$ctl" --triggers-dir "$dir" --db "$(as_role controller)" --once >"$work/controller.out" 2>"$work/controller.log" ||
	fail "the controller refused what traceprof trigger wrote"
[ "$(q "SELECT string_agg(name || ':' || phase || ':' || max_requests, ',' ORDER BY name) FROM traceprof.trace_profile_triggers")" = \
	"next-slow-payments:Active:5,slow:Active:10" ] || fail "the controller's table: $(q 'TABLE traceprof.trace_profile_triggers')"
expect 0 "Phase: *Active" -- "$tp" trigger get slow --triggers-dir "$dir"
"$tp" trigger list --triggers-dir "$dir" | grep -q '^slow *payment-svc *Active *0/10 ' ||
	fail "list --triggers-dir: $("$tp" trigger list --triggers-dir "$dir")"
expect 0 "deleted" -- "$tp" trigger delete slow --triggers-dir "$dir"
[ ! -e "$dir/slow.yaml" ] || fail "slow.yaml still there"
expect 1 "no trigger default/slow" -- "$tp" trigger get slow --triggers-dir "$dir"
expect 3 "cannot read the triggers directory" -- "$tp" trigger list --triggers-dir "$work/none"
psql "$("$tpdb" conninfo "$pgdir" --dbname postgres)" -qX -c "DROP DATABASE tp_cli_trigger" >/dev/null
echo "PASS"
