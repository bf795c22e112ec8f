#!/usr/bin/env bash
# e2e_agent_kube: the agent names processes after their Kubernetes pods.
# A test API server (tests/kube/kube_test_apiserver.py) holds three pods
# created with the real kubectl: pod-a on node-a (labels app=checkout,
# tier=web), pod-b on node-b (not the agent's node: never watched), and
# pod-late, created unscheduled and bound to node-a only after its process
# has been running for a while (as the scheduler binds a pod after it is
# created). cpu_burn processes run in kubelet-shaped cgroups
# (.../kubepods.slice/kubepods-pod<uid>.slice/cri-containerd-<id>.scope) of
# pod-a and pod-late; the agent runs with --kubeconfig and --node node-a.
# Checked in PostgreSQL: pod-a's samples carry namespace shop, pod name
# pod-a and its labels; pod-late's samples end up under its name too; the
# stats file counts 2 known pods (pod-b is not on the node), a completed
# LIST and no errors.
# usage: run_agent_kube_test.sh TRACEPROF_DB AGENT CPU_BURN CLUSTER_DIR
set -euo pipefail
tpdb=$1 agent=$2 burn=$3 cluster=$4
. "$(dirname "$0")/lib.sh"
needs_bpf
for tool in kubectl openssl; do
	command -v "$tool" >/dev/null || { echo "skip: $tool not found"; exit 77; }
done
. "$(dirname "$0")/kube_lib.sh"
[ -n "$cgroot" ] || { echo "skip: no cgroup v2 hierarchy mounted"; exit 77; }

# ---- the API server and the pods ----
start_apiserver
# (kubectl create sends built-in kinds as protobuf, which the test server does not speak: apply)
printf 'apiVersion: v1\nkind: Namespace\nmetadata:\n  name: shop\n' | kc apply -f - >/dev/null
uid_a=$(kube_pod pod-a shop node-a 'app: checkout, tier: web')
uid_b=$(kube_pod pod-b shop node-b 'app: other')
uid_late=$(kube_pod pod-late shop '' 'app: late')
echo "pods: pod-a=$uid_a pod-b=$uid_b pod-late=$uid_late"
# a cpu_burn process in a pod's kubelet-shaped cgroup
kube_pod_cgroup "$uid_a" "$(printf 'a%.0s' $(seq 64))"
cg_a=$pod_cg
kube_pod_cgroup "$uid_late" "$(printf 'b%.0s' $(seq 64))"
cg_late=$pod_cg
in_cgroup() { # cgroup seconds
	(echo "$BASHPID" >"$1/cgroup.procs" && exec "$burn" --threads 1 --seconds "$2" >/dev/null) &
	pids+=($!)
}

# ---- the database and the agent ----
conn=$(fresh_db "$tpdb" "$cluster" tp_e2e_agent_kube)
# the burners run until stopped (the agent's start, BPF verification, takes
# seconds on a busy machine); they are sampled for 9 s once it samples
in_cgroup "$cg_a" 120
burn_a=$!
in_cgroup "$cg_late" 120
burn_late=$!
start_agent agent "$agent" --db "$(as_role writer)" --target "pid:$burn_a,$burn_late" --frequency 99 \
	--window 1s --kubeconfig "$kube_state/kubeconfig" --node node-a --otlp-grpc '' \
	--otlp-http '' --control-listen '' --stats-file "$work/stats" --log-level debug
sleep 3
# pod-late's process has been sampled under its pod UID; now the pod is bound to node-a.
kc patch pod -n shop pod-late --type merge -p '{"spec":{"nodeName":"node-a"}}' >/dev/null
sleep 6
kill "$burn_a" "$burn_late" 2>/dev/null || true
wait "$burn_a" "$burn_late" || true
kill -TERM "$agent_pid"
wait "$agent_pid" || fail "the agent exited with status $?"
grep -E '^kube_' "$work/stats"

# ---- checks ----
count="coalesce(sum(coalesce((SELECT sum(c) FROM unnest(sm.counts) c), cardinality(sm.stacks))), 0)"
samples_of() { # WHERE clause on sources so
	q "SELECT $count FROM traceprof.samples sm JOIN traceprof.sources so USING (source_id) WHERE $1"
}
q "SELECT namespace, pod, labels, container FROM traceprof.sources WHERE pod <> '' ORDER BY pod"
a=$(samples_of "so.namespace = 'shop' AND so.pod = 'pod-a'
                AND so.labels = '{\"app\": \"checkout\", \"tier\": \"web\"}'::jsonb
                AND so.container = repeat('a', 64) AND so.node = 'node-a'")
a_uid=$(samples_of "so.pod = '$uid_a'")
late=$(samples_of "so.namespace = 'shop' AND so.pod = 'pod-late' AND so.labels = '{\"app\": \"late\"}'")
late_uid=$(samples_of "so.pod = '$uid_late' AND so.namespace = ''")
echo "samples: pod-a=$a (under its uid: $a_uid) pod-late=$late (under its uid first: $late_uid)"
[ "$a" -ge 100 ] || fail "pod-a's samples are not under its namespace, name and labels ($a)"
[ "$a_uid" -eq 0 ] || fail "$a_uid samples of pod-a (known from the start) under its UID"
[ "$late" -ge 50 ] || fail "pod-late's samples after its binding are not under its name ($late)"
[ "$late_uid" -ge 1 ] || fail "pod-late was named before it was bound to the node"
[ "$(q "SELECT count(*) FROM traceprof.sources WHERE pod = 'pod-b' OR pod = '$uid_b'")" -eq 0 ] ||
	fail "pod-b (another node) appears"
stat_of() { sed -n "s/^$1=//p" "$work/stats"; }
[ "$(stat_of kube_pods_known)" = 2 ] || fail "kube_pods_known=$(stat_of kube_pods_known), want 2 (pod-a, pod-late; not pod-b)"
[ "$(stat_of kube_synced)" = 1 ] || fail "kube_synced=$(stat_of kube_synced)"
[ "$(stat_of kube_errors)" = 0 ] || fail "kube_errors=$(stat_of kube_errors)"
[ "$(stat_of kube_renamed)" -ge 1 ] || fail "no process renamed when pod-late arrived"
echo "ok: samples carry their pod's namespace, name and labels"
