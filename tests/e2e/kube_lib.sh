# Shared by the Kubernetes end-to-end scripts (sourced after lib.sh): the
# test API server (tests/kube/kube_test_apiserver.py) in $work/kube with the
# real kubectl, Pod objects standing for local processes (a kubelet-shaped
# cgroup v2 directory per pod, status Running with the container id), and
# waiting on a trigger's status.
kube_src=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
kube_state=$work/kube
kube_pid=''
cgroups=()
kc() { kubectl --kubeconfig "$kube_state/kubeconfig" "$@"; }
# start_apiserver ARGS...: (re)starts the server on $kube_state, waits for its kubeconfig
start_apiserver() {
	local before=$work/kube-start.$RANDOM
	touch "$before"
	sleep 0.01
	/usr/bin/python3 "$kube_src/tests/kube/kube_test_apiserver.py" --state-dir "$kube_state" \
		--bookmark-interval 1 "$@" >>"$work/apiserver.log" 2>&1 &
	kube_pid=$!
	pids+=("$kube_pid")
	for _ in $(seq 150); do [ "$kube_state/kubeconfig" -nt "$before" ] && return 0; sleep 0.1; done
	fail "the test API server did not start"
}
stop_apiserver() { kill -TERM "$kube_pid"; wait "$kube_pid" 2>/dev/null || true; }
install_crd() {
	kc apply -f "$kube_src/crds/" >/dev/null || fail "kubectl apply -f crds/"
	kc wait --for=condition=Established crd/traceprofiletriggers.traceprof.dev --timeout=30s >/dev/null ||
		fail "CRD not established"
}
cgroot=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/mounts)
# kube_pod NAME NAMESPACE NODE LABELS: a Pod object (NODE "" = not scheduled
# yet; LABELS a YAML flow map's content, "app: x, tier: web"); prints its uid
kube_pod() {
	local node=''
	[ -n "$3" ] && node="nodeName: $3, "
	kc apply -f - >/dev/null <<YAML || fail "pod $1"
apiVersion: v1
kind: Pod
metadata: {name: $1, namespace: $2, labels: {$4}}
spec: {${node}containers: [{name: main, image: demo}]}
YAML
	kc get pod -n "$2" "$1" -o jsonpath='{.metadata.uid}'
}
# kube_pod_cgroup UID CID: makes the kubelet-shaped cgroup of that pod's
# container (removed at exit) and sets $pod_cg to it
kube_pod_cgroup() {
	[ -n "$cgroot" ] || fail "no cgroup v2 hierarchy"
	pod_cg="$cgroot/kubepods.slice/kubepods-pod${1//-/_}.slice/cri-containerd-$2.scope"
	mkdir -p "$pod_cg" || fail "cannot create $pod_cg"
	cgroups+=("$pod_cg")
}
# kube_pod_running NAME NAMESPACE CID: status Running with that container id
kube_pod_running() {
	kc patch pod -n "$2" "$1" --subresource=status --type=merge -p \
		"{\"status\": {\"phase\": \"Running\", \"containerStatuses\": [{\"name\": \"main\", \"ready\": true, \"restartCount\": 0, \"image\": \"demo\", \"imageID\": \"\", \"containerID\": \"containerd://$3\"}]}}" \
		>/dev/null || fail "pod $1 status"
}
# pod_for PID NAME LABEL=VALUE NODE: a Running Pod object in namespace
# default for process PID (none: no process), which moves into its cgroup
pod_for() {
	local pid=$1 name=$2 label=$3 node=$4 uid cid
	uid=$(kube_pod "$name" default "$node" "${label%%=*}: \"${label#*=}\"")
	cid=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
	if [ "$pid" != none ]; then
		kube_pod_cgroup "$uid" "$cid"
		echo "$pid" >"$pod_cg/cgroup.procs" || fail "cannot move $pid into $pod_cg"
	fi
	kube_pod_running "$name" default "$cid"
}
# the cgroups go once their processes are gone (cleanup of lib.sh kills them first)
kube_cleanup() {
	cleanup_kube_cgroups() {
		for cg in "${cgroups[@]}"; do
			for _ in $(seq 50); do rmdir "$cg" 2>/dev/null && break; sleep 0.1; done
			rmdir "$(dirname "$cg")" 2>/dev/null || true
		done
		rmdir "$cgroot/kubepods.slice" 2>/dev/null || true
	}
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	cleanup_kube_cgroups
	cleanup
}
trap kube_cleanup EXIT
# wait_phase NAME PHASE SECONDS: kubectl wait on .status.phase
wait_phase() {
	kc wait --for=jsonpath='{.status.phase}'="$2" "tpt/$1" --timeout="$3s" >/dev/null ||
		fail "trigger $1 not $2 within $3 s: $(kc get tpt "$1" -o jsonpath='{.status}')"
	echo "ok: trigger $1 is $2"
}
# tpt NAME JSONPATH: one field of a trigger
tpt() { kc get tpt "$1" -o jsonpath="$2"; }
