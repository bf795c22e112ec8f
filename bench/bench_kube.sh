#!/usr/bin/env bash
# The Kubernetes mode of traceprof-controller: how fast `kubectl apply` of a
# TraceProfileTrigger raises sampling on the agent, and what the controller
# costs idle and with 1,000 triggers.
#
# Real parts: the real kubectl against the Kubernetes API test server
# (tests/kube/kube_test_apiserver.py: HTTPS, watches with bookmarks),
# traceprof-controller --kubeconfig (no leader election), traceprof-agent
# (eBPF, 19 Hz base, AgentControl with a bearer token), a private
# PostgreSQL, and cpu_burn --service burn-svc as the target.
#
# 1. Latency, create -> raised sampling active on the agent, twice: with
#    `kubectl apply -f` (a) and with one HTTPS POST by curl (b, the path
#    without kubectl's own cost). t0 is taken just before the client
#    starts; the agent's "triggers: sampling raised" line (written once
#    the raised perf events are enabled) is timestamped by a reader of its
#    stderr, as is the controller's (-v) "desired set changed". Columns:
#      total    t0 -> sampling raised
#      client   t0 -> the client exits (kubectl: process start, discovery,
#               OpenAPI, GET + POST; it may exit after the raise)
#      toctl    t0 -> the controller has built the new set (the API
#               server's watch event, the informer, the :sync pass with
#               its trigger-table transaction)
#      toagent  the set built -> raised (ApplyTriggers over gRPC, the
#               agent's engine, the BPF target map, the perf events)
#      off      delete -> the agent back at the base rate
#    ITERATIONS (50) cycles of each after one warm-up.
# 2. Controller memory (VmRSS) and CPU ((utime + stime) / wall time, from
#    /proc/PID/stat) over STEADY (60) seconds: idle (no trigger), then
#    with 1,000 triggers applied with one `kubectl apply -f` of a
#    1,000-document file, once all 1,000 report a phase (time to reconcile
#    all is reported too). Each trigger selects its own label (app: tN)
#    that no pod has, so none goes to the agent (which holds at most 64)
#    and none counts against the 3-per-service limit: the controller keeps
#    1,000 objects in its cache, 1,000 rows in its table pass and 1,000
#    statuses.
#
# FAULTS: the test API server's faults.json for the whole run (e.g.
# '{"watch_close_after": [5, 5]}': every watch, the controller's and
# kubectl's, ended by the server after 5 s; tests/kube/README.md).
#
# Never fails on timing. usage: bench/bench_kube.sh
# environment: ITERATIONS (50), STEADY (60), TRIGGERS (1000), FAULTS, TRACEPROF_BUILD_DIR
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${TRACEPROF_BUILD_DIR:-$root/build}
iterations=${ITERATIONS:-50} steady=${STEADY:-60} ntriggers=${TRIGGERS:-1000}
command -v kubectl >/dev/null || { echo "needs kubectl" >&2; exit 1; }
. "$root/bench/lib.sh"
bench_setup kube
otlp_port=$(free_port) ctl_port=$(free_port)
export OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:$otlp_port
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$work/token"
kc() { kubectl --kubeconfig "$work/kube/kubeconfig" "$@"; }

python3 "$root/tests/kube/kube_test_apiserver.py" --state-dir "$work/kube" --bookmark-interval 1 \
	>"$work/apiserver.log" 2>&1 &
for _ in $(seq 150); do [ -s "$work/kube/kubeconfig" ] && break; sleep 0.1; done
kc apply -f "$root/crds/" >/dev/null
kc wait --for=condition=Established crd/traceprofiletriggers.traceprof.dev --timeout=30s >/dev/null
if [ -n "${FAULTS:-}" ]; then
	echo "$FAULTS" >"$work/kube/faults.json"
	echo "faults: $FAULTS"
fi

"$build/agent/traceprof-agent" --db "$conn" --frequency 19 --window 2s --node node-a \
	--otlp-http "127.0.0.1:$otlp_port" --otlp-grpc "" \
	--control-listen "127.0.0.1:$ctl_port" --control-token-file "$work/token" \
	2> >(stamp >"$work/agent.log") &
for _ in $(seq 200); do grep -qs 'sampling at' "$work/agent.log" && break; sleep 0.05; done
"$build/controller/traceprof-controller" --kubeconfig "$work/kube/kubeconfig" --leader-elect=false \
	--agent "127.0.0.1:$ctl_port@node-a" --agent-selector "" --agent-token-file "$work/token" \
	--db "$conn" -v 2> >(stamp >"$work/controller.log") &
for _ in $(seq 200); do ctl_pid=$(pgrep -P $$ -x traceprof-contr || true); [ -n "$ctl_pid" ] && break; sleep 0.05; done
"$build/bench/cpu_burn" --threads 1 --seconds 100000 --service burn-svc >/dev/null &
sleep 3 # the agent has found the target and its service

# new_line FILE PATTERN FROM: the time of the first line after line FROM matching PATTERN (waits)
new_line() {
	local t
	for _ in $(seq 2000); do
		t=$(tail -n +"$(($3 + 1))" "$1" | grep -m1 "$2" | cut -d' ' -f1 || true)
		[ -n "$t" ] && { echo "$t"; return; }
		sleep 0.005
	done
	echo "no '$2' line after line $3 of $1" >&2
	tail -5 "$1" >&2
	exit 1
}
ms() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", (b - a) * 1000 }'; }
# stats LIST: "median p90 p99 max" of the numbers in LIST
stats() { tr ' ' '\n' <<<"$1" | sed '/^$/d' | sort -g | awk '{ v[NR] = $1 }
	function q(p) { i = int(p * NR + 0.999999); if (i < 1) i = 1; return v[i] }
	END { printf "%s %s %s %s", v[int((NR + 1) / 2)], q(0.90), q(0.99), v[NR] }'; }
cat >"$work/lat.yaml" <<'EOF'
apiVersion: traceprof.dev/v1alpha1
kind: TraceProfileTrigger
metadata: {name: lat, namespace: default}
spec:
  service: burn-svc
  match: {status: "5xx"}
  sampling: {frequencyHz: 99}
  timeout: 10m
EOF

# the API directly (curl over HTTPS with the bearer token): the path without kubectl's own cost
api=$(sed -n 's/^ *server: //p' "$work/kube/kubeconfig")
ca=$(sed -n 's/^ *certificate-authority: //p' "$work/kube/kubeconfig")
token=$(sed -n 's/^ *token: //p' "$work/kube/kubeconfig")
tpts=$api/apis/traceprof.dev/v1alpha1/namespaces/default/traceprofiletriggers
curl_api() { curl -sf -o /dev/null --cacert "$ca" -H "Authorization: Bearer $token" "$@"; }
create_kubectl() { kc apply -f "$work/lat.yaml" >/dev/null; }
delete_kubectl() { kc delete tpt lat >/dev/null; }
create_curl() {
	curl_api -X POST -H 'Content-Type: application/json' "$tpts" --data-binary \
		'{"apiVersion": "traceprof.dev/v1alpha1", "kind": "TraceProfileTrigger",
		  "metadata": {"name": "lat", "namespace": "default"},
		  "spec": {"service": "burn-svc", "match": {"status": "5xx"},
		           "sampling": {"frequencyHz": 99}, "timeout": "10m"}}'
}
delete_curl() { curl_api -X DELETE "$tpts/lat"; }
# cycles HOW: ITERATIONS create -> raised -> delete -> base rate cycles, one warm-up
cycles() {
	local total="" client="" toctl="" toagent="" off="" la lc t0 t1 t2 t4 t5 t6 i v p50 p90 p99 max
	for i in $(seq 0 "$iterations"); do
		la=$(wc -l <"$work/agent.log") lc=$(wc -l <"$work/controller.log")
		t0=$EPOCHREALTIME
		"create_$1"
		t1=$EPOCHREALTIME
		t4=$(new_line "$work/agent.log" 'sampling raised' "$la")
		t2=$(new_line "$work/controller.log" 'desired set changed' "$lc")
		sleep 0.2
		la=$(wc -l <"$work/agent.log")
		t5=$EPOCHREALTIME
		"delete_$1"
		t6=$(new_line "$work/agent.log" 'sampling back at the base rate' "$la")
		if [ "$i" != 0 ]; then
			total+=" $(ms "$t0" "$t4")" client+=" $(ms "$t0" "$t1")" toctl+=" $(ms "$t0" "$t2")"
			toagent+=" $(ms "$t2" "$t4")" off+=" $(ms "$t5" "$t6")"
		fi
		sleep "0.$((RANDOM % 3 + 2))"
	done
	for v in total client toctl toagent off; do
		read -r p50 p90 p99 max <<<"$(stats "${!v}")"
		printf '%-8s p50 %7s ms  p90 %7s ms  p99 %7s ms  max %7s ms\n' "$v" "$p50" "$p90" "$p99" "$max"
	done
}
echo "== 1a. kubectl apply -> 99 Hz sampling active ($iterations times)"
cycles kubectl
echo "== 1b. POST to the API server (curl) -> 99 Hz sampling active ($iterations times)"
cycles curl

# cpu_rss SECONDS: "cpu% rss_kib" of the controller over that many seconds
cpu_rss() {
	local hz t0 t1 c0 c1
	hz=$(getconf CLK_TCK)
	c0=$(awk '{ print $14 + $15 }' "/proc/$ctl_pid/stat") t0=$EPOCHREALTIME
	sleep "$1"
	c1=$(awk '{ print $14 + $15 }' "/proc/$ctl_pid/stat") t1=$EPOCHREALTIME
	awk -v c="$((c1 - c0))" -v hz="$hz" -v a="$t0" -v b="$t1" \
		-v rss="$(awk '/^VmRSS/ { print $2 }' "/proc/$ctl_pid/status")" \
		'BEGIN { printf "%.2f %d", 100 * c / hz / (b - a), rss }'
}
echo "== 2. controller CPU and memory ($steady s steady)"
kc delete tpt --all >/dev/null 2>&1 || true
sleep 3
read -r cpu rss <<<"$(cpu_rss "$steady")"
echo "idle:            cpu $cpu %  rss $rss KiB"
for i in $(seq "$ntriggers"); do
	printf -- '---\napiVersion: traceprof.dev/v1alpha1\nkind: TraceProfileTrigger\nmetadata: {name: t%d, namespace: default}\nspec: {selector: {matchLabels: {app: t%d}}, timeout: 10m}\n' "$i" "$i"
done >"$work/many.yaml"
t0=$EPOCHREALTIME
kc apply -f "$work/many.yaml" >/dev/null
t1=$EPOCHREALTIME
for _ in $(seq 1200); do
	n=$(kc get tpt -o jsonpath='{range .items[*]}{.status.phase}{"\n"}{end}' | grep -c . || true)
	[ "$n" -ge "$ntriggers" ] && break
	sleep 0.5
done
t2=$EPOCHREALTIME
phases=$(kc get tpt -o jsonpath='{range .items[*]}{.status.phase}{"\n"}{end}' | sort | uniq -c | tr '\n' ' ')
echo "$ntriggers triggers: kubectl apply $(ms "$t0" "$t1") ms; all with a status after $(ms "$t0" "$t2") ms ($phases)"
sleep 5
read -r cpu rss <<<"$(cpu_rss "$steady")"
echo "$ntriggers triggers:  cpu $cpu %  rss $rss KiB"
