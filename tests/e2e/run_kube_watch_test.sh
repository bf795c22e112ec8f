#!/usr/bin/env bash
# traceprof-controller in Kubernetes mode against an API server whose
# watches misbehave (the test API server's faults.json), no agent needed:
# - watches reset every 0.5-2 s for 30 s: each of 6 triggers applied at a
#   random moment is Active within 1.5 s of kubectl apply (kubectl's own
#   start included); before, each reset counted as an error and the waits
#   grew to 30 s;
# - every trigger list and watch answered 500: /readyz turns 503 naming the
#   TraceProfileTrigger watch after --stuck-after (2 s), and 200 again once
#   the server answers;
# - every status write answered after 8 s for 30 s: each of 6 triggers is
#   Active in the table (what the agents are sent) within 1 s of its
#   creation (kubectl apply returned), and once the writes land each has
#   an Active status, one row and exactly one Activated event; before, the
#   writes ran on the thread of the pass and each slow write held up every
#   trigger (4-24 s);
# - a 409 on a trigger's first status write while the watch lags 3 s behind
#   (so the next reconciles see the object from before the write): exactly
#   one Activated event; before, a reconcile from the stale cache wrote the
#   same status again and emitted Activated twice;
# - two replicas whose clocks are 90 s apart: the one behind leads and keeps
#   the Lease for 18 s (more than the 15 s lease; TRACEPROF_SKEW_HOLD_S for
#   a longer run), the one ahead never takes it; when the leader stops it
#   takes over; before, the one ahead judged the Lease expired by its own
#   wall clock within a round (2 s).
# usage: run_kube_watch_test.sh TRACEPROF_DB CONTROLLER CLUSTER_DIR
set -euo pipefail
tpdb=$1 controller=$2 cluster=$3
. "$(dirname "$0")/lib.sh"
command -v kubectl >/dev/null || { echo "skip: kubectl not found"; exit 77; }
command -v curl >/dev/null || { echo "skip: curl not found"; exit 77; }
. "$(dirname "$0")/kube_lib.sh"

conn=$(fresh_db "$tpdb" "$cluster" tp_e2e_kube_watch)
start_apiserver --log "$work/requests.txt"
install_crd
health=$(free_port)
"$controller" --kubeconfig "$kube_state/kubeconfig" --leader-elect=false --agent-selector "" \
	--db "$conn" --interval 500ms --health-addr "127.0.0.1:$health" --stuck-after 2s \
	2>"$work/controller.log" &
ctl=$!
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

# milliseconds since $1 ($EPOCHREALTIME)
since() { python3 -c "print(round(($EPOCHREALTIME - $1) * 1000))"; }
# activated NAME: the count of the trigger's Activated events (0: none)
activated() {
	kc get events --field-selector "involvedObject.name=$1,reason=Activated" \
		-o jsonpath='{range .items[*]}{.count}{"\n"}{end}' | awk '{ n += $1 } END { print n + 0 }'
}
# one_activated NAME: exactly one Activated event, once the emitter has sent it
one_activated() {
	for _ in $(seq 50); do [ "$(activated "$1")" -ge 1 ] && break; sleep 0.1; done
	sleep 1 # a second one would be sent by now
	[ "$(activated "$1")" = 1 ] || fail "$1: $(activated "$1") Activated events, not 1"
}

# 3. Every status write answered after 8 s, for 30 s: the table (and so the
# agents) must not wait on them.
faults '{"delay": {"seconds": 8, "methods": ["PUT"], "path": "/status"}}'
t_fault=$EPOCHREALTIME
worst=0
for i in $(seq 6); do
	trigger "slow-$i"
	t0=$EPOCHREALTIME # created: kubectl apply has returned
	until [ "$(q "SELECT phase FROM traceprof.trace_profile_triggers WHERE name = 'slow-$i'")" = Active ]; do
		[ "$(since "$t0")" -le 10000 ] || fail "slow-$i not Active in the table within 10 s"
		sleep 0.05
	done
	ms=$(since "$t0")
	echo "slow-$i: Active in the table $ms ms after its creation"
	[ "$ms" -gt "$worst" ] && worst=$ms
	sleep 3
done
[ "$worst" -le 1000 ] || fail "a trigger took $worst ms to be Active while status writes took 8 s"
echo "ok: 6 triggers each Active in the table within $worst ms of creation while status writes took 8 s"
sleep "$(python3 -c "print(max(0, 30 - ($EPOCHREALTIME - $t_fault)))")"
faults '{}'
for i in $(seq 6); do
	for _ in $(seq 200); do [ "$(tpt "slow-$i" '{.status.phase}')" = Active ] && break; sleep 0.1; done
	[ "$(tpt "slow-$i" '{.status.phase}')" = Active ] || fail "slow-$i: status not Active"
	check "slow-$i: one row" 1 "SELECT count(*) FROM traceprof.trace_profile_triggers WHERE name = 'slow-$i'"
	one_activated "slow-$i"
done
echo "ok: each status Active once the writes landed, one Activated event each"

# 4. A 409 on the first status write, the watch 3 s behind.
faults '{"refuse": {"status": 409, "count": 1, "methods": ["PUT"], "path": "/traceprofiletriggers/conflict-1/status"},
	"watch_delay": {"seconds": 3, "path": "/traceprofiletriggers"}}'
trigger conflict-1
for _ in $(seq 150); do [ "$(tpt conflict-1 '{.status.phase}')" = Active ] && break; sleep 0.1; done
[ "$(tpt conflict-1 '{.status.phase}')" = Active ] || fail "conflict-1: status not Active"
grep -q 'PUT .*/conflict-1/status .* 409 ' "$work/requests.txt" || fail "conflict-1: no 409 was answered"
sleep 4 # the reconciles of the stale cache (every 500 ms pass) meanwhile
faults '{}'
one_activated conflict-1
echo "ok: a 409 during activation: one Activated event"

# 5. Two replicas with clocks 90 s apart. The one behind (no offset) leads.
kill -TERM "$ctl"
wait "$ctl" 2>/dev/null || true
replica() { # ID OFFSET
	"$controller" --kubeconfig "$kube_state/kubeconfig" --agent-selector "" --db "$conn" \
		--interval 500ms --identity "$1" --test-clock-offset "$2" 2>"$work/$1.log" &
	replica_pid=$!
	pids+=($!)
}
lease() { kc get lease traceprof-controller -o jsonpath="$1" 2>/dev/null || true; }
replica skew-behind 0
behind=$replica_pid
for _ in $(seq 100); do [ "$(lease '{.spec.holderIdentity}')" = skew-behind ] && break; sleep 0.1; done
[ "$(lease '{.spec.holderIdentity}')" = skew-behind ] || fail "skew-behind did not take the Lease"
transitions=$(lease '{.spec.leaseTransitions}')
replica skew-ahead 90
ahead=$replica_pid
hold=${TRACEPROF_SKEW_HOLD_S:-18}
sleep "$hold"
kill -0 "$ahead" || fail "skew-ahead exited"
[ "$(lease '{.spec.holderIdentity}')" = skew-behind ] ||
	fail "the replica 90 s ahead took the Lease: $(lease '{.spec}')"
[ "$(lease '{.spec.leaseTransitions}')" = "$transitions" ] || fail "the Lease changed hands: $(lease '{.spec}')"
! grep -qE 'leading(:| lease=)' "$work/skew-ahead.log" || fail "skew-ahead led: $(grep leading "$work/skew-ahead.log")"
echo "ok: the leader kept the Lease for $hold s beside a replica 90 s ahead"
kill -TERM "$behind"
for _ in $(seq 50); do [ "$(lease '{.spec.holderIdentity}')" = skew-ahead ] && break; sleep 0.1; done
[ "$(lease '{.spec.holderIdentity}')" = skew-ahead ] || fail "skew-ahead did not take the released Lease"
echo "ok: the replica ahead took the Lease once the leader released it"
echo "PASS"
