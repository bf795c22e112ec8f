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
# pod_for PID NAME LABEL=VALUE NODE: a Running Pod object for process PID,
# which moves into /kubepods.slice/kubepods-pod<uid>.slice/cri-containerd-<id>.scope
pod_for() {
	local pid=$1 name=$2 label=$3 node=$4 uid cid cg
	kc apply -f - >/dev/null <<YAML || fail "pod $name"
apiVersion: v1
kind: Pod
metadata: {name: $name, namespace: default, labels: {${label%%=*}: "${label#*=}"}}
spec: {nodeName: $node, containers: [{name: main, image: demo}]}
YAML
	uid=$(kc get pod "$name" -o jsonpath='{.metadata.uid}')
	cid=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
	if [ "$pid" != none ]; then
		[ -n "$cgroot" ] || fail "no cgroup v2 hierarchy"
		cg="$cgroot/kubepods.slice/kubepods-pod${uid//-/_}.slice/cri-containerd-$cid.scope"
		mkdir -p "$cg" || fail "cannot create $cg"
		cgroups+=("$cg")
		echo "$pid" >"$cg/cgroup.procs" || fail "cannot move $pid into $cg"
	fi
	kc patch pod "$name" --subresource=status --type=merge -p \
		"{\"status\": {\"phase\": \"Running\", \"containerStatuses\": [{\"name\": \"main\", \"ready\": true, \"restartCount\": 0, \"image\": \"demo\", \"imageID\": \"\", \"containerID\": \"containerd://$cid\"}]}}" \
		>/dev/null || fail "pod $name status"
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
