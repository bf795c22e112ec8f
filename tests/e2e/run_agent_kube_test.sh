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
# usage: run_agent_kube_test.sh TRACEPROF_DB AGENT CPU_BURN CLUSTER_DIR SOURCE_DIR PYTHON
set -euo pipefail
tpdb=$1 agent=$2 burn=$3 cluster=$4 src=$5 py=${6:-/usr/bin/python3}
if [ "$(id -u)" -ne 0 ]; then echo "skip: the agent needs root (BPF, perf events)"; exit 77; fi
if [ ! -r /sys/kernel/btf/vmlinux ]; then echo "skip: the kernel has no BTF"; exit 77; fi
for tool in "$py" kubectl openssl; do
	command -v "$tool" >/dev/null || { echo "skip: $tool not found"; exit 77; }
done
cgroot=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/mounts)
[ -n "$cgroot" ] || { echo "skip: no cgroup v2 hierarchy mounted"; exit 77; }
# kubelet's hierarchy under a directory of this run's own (as with a nested
# runtime), so a real kubelet or a parallel run is never touched
top=$cgroot/traceprof-kube-test-$$
mkdir "$top" 2>/dev/null || { echo "skip: cannot create a cgroup under $cgroot"; exit 77; }

work=$(mktemp -d)
state=$work/kube
server_pid='' agent_pid='' burn_a='' burn_late=''
cgdirs=("$top")
cleanup() {
	for p in "$agent_pid" "$burn_a" "$burn_late" "$server_pid"; do
		[ -n "$p" ] && kill "$p" 2>/dev/null || true
	done
	wait 2>/dev/null || true
	for ((i = ${#cgdirs[@]} - 1; i >= 0; i--)); do rmdir "${cgdirs[$i]}" 2>/dev/null || true; done
	rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; tail -20 "$work/agent.log" >&2 || true; exit 1; }

# ---- the API server and the pods ----
touch "$work/before"
sleep 0.01
"$py" "$src/tests/kube/kube_test_apiserver.py" --state-dir "$state" >"$work/server.log" 2>&1 &
server_pid=$!
for _ in $(seq 100); do [ "$state/kubeconfig" -nt "$work/before" ] && break; sleep 0.1; done
[ "$state/kubeconfig" -nt "$work/before" ] || { cat "$work/server.log"; fail "the API server did not start"; }
k() { kubectl --kubeconfig "$state/kubeconfig" "$@"; }
pod() { # name node labels
	local node=''
	[ -n "$2" ] && node="  nodeName: $2"
	k apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: $1
  namespace: shop
  labels: {$3}
spec:
$node
  containers:
  - name: app
    image: registry.example/checkout:1
EOF
	k get pod -n shop "$1" -o 'jsonpath={.metadata.uid}'
}
# (kubectl create sends built-in kinds as protobuf, which the test server does not speak: apply)
printf 'apiVersion: v1\nkind: Namespace\nmetadata:\n  name: shop\n' | k apply -f - >/dev/null
uid_a=$(pod pod-a node-a 'app: checkout, tier: web')
uid_b=$(pod pod-b node-b 'app: other')
uid_late=$(pod pod-late '' 'app: late')
echo "pods: pod-a=$uid_a pod-b=$uid_b pod-late=$uid_late"

# ---- kubelet-shaped cgroups ----
pod_cgroup() { # uid container-hex-digit -> cgroup directory
	local slice=$top/kubepods.slice/kubepods-pod${1//-/_}.slice
	local scope=$slice/cri-containerd-$(printf "$2%.0s" $(seq 64)).scope
	for d in "$top/kubepods.slice" "$slice" "$scope"; do
		if [ ! -d "$d" ]; then mkdir "$d" && cgdirs+=("$d"); fi
	done
	echo "$scope"
}
pod_cgroup "$uid_a" a >/dev/null # in the parent shell, so cleanup knows the directories
pod_cgroup "$uid_late" b >/dev/null
cg_a=$(pod_cgroup "$uid_a" a)
cg_late=$(pod_cgroup "$uid_late" b)
in_cgroup() { # cgroup seconds
	(echo "$BASHPID" >"$1/cgroup.procs" && exec "$burn" --threads 1 --seconds "$2" >/dev/null) &
}

# ---- the database and the agent ----
name=tp_e2e_agent_kube
base=$("$tpdb" conninfo "$cluster" --dbname postgres)
psql "$base" -qX -v ON_ERROR_STOP=1 -c "DROP DATABASE IF EXISTS $name" -c "CREATE DATABASE $name" >/dev/null 2>&1
conn=$("$tpdb" conninfo "$cluster" --dbname "$name")
"$tpdb" migrate --db "$conn" >/dev/null

in_cgroup "$cg_a" 12
burn_a=$!
in_cgroup "$cg_late" 12
burn_late=$!
"$agent" --db "$conn" --target "pid:$burn_a,$burn_late" --frequency 99 --window 1s \
	--kubeconfig "$state/kubeconfig" --node node-a --otlp-grpc '' --otlp-http '' \
	--control-listen '' --stats-file "$work/stats" --log-level debug 2>"$work/agent.log" &
agent_pid=$!
for _ in $(seq 100); do grep -qs 'sampling at' "$work/agent.log" && break; sleep 0.1; done
grep -qs 'sampling at' "$work/agent.log" || fail "the agent did not start"
sleep 3
# pod-late's process has been sampled under its pod UID; now the pod is bound to node-a.
k patch pod -n shop pod-late --type merge -p '{"spec":{"nodeName":"node-a"}}' >/dev/null
wait "$burn_a" "$burn_late" || true
burn_a='' burn_late=''
kill -TERM "$agent_pid"
wait "$agent_pid" || fail "the agent exited with status $?"
agent_pid=''
grep -E '^kube_' "$work/stats"

# ---- checks ----
q() { psql "$conn" -XAt -v ON_ERROR_STOP=1 -c "$1"; }
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
stat() { sed -n "s/^$1=//p" "$work/stats"; }
[ "$(stat kube_pods_known)" = 2 ] || fail "kube_pods_known=$(stat kube_pods_known), want 2 (pod-a, pod-late; not pod-b)"
[ "$(stat kube_synced)" = 1 ] || fail "kube_synced=$(stat kube_synced)"
[ "$(stat kube_errors)" = 0 ] || fail "kube_errors=$(stat kube_errors)"
[ "$(stat kube_renamed)" -ge 1 ] || fail "no process renamed when pod-late arrived"
echo "ok: samples carry their pod's namespace, name and labels"
