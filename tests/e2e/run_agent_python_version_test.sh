#!/usr/bin/env bash
# Python frames of other CPython versions in a container-like root file
# system (docs/python.md, "Versions"): Debian SUITE's python$VERSION, in a
# root file system made with debootstrap from Debian's archive (the mirror
# this machine's apt uses) and kept between runs, runs py_workload.py and
# py_churn.py in its own mount namespace, chrooted, as a container does on
# a node: the agent reads the interpreter through /proc/PID/root and its
# offsets from the interpreter's _Py_DebugOffsets. Checked as in
# e2e_agent_python: inclusive shares within 2 points of the workload's
# own measurement, >= 99 % of samples with Python frames, the C extension
# interleaved right, and every name of the churning process exact.
# CHECK_OPTIONS go to py_check.py (--no-interleaving for 3.14's
# tail-calling interpreter, whose loop has no frame of its own).
# usage: run_agent_python_version_test.sh TRACEPROF_DB AGENT CLUSTER_DIR SUITE VERSION [CHECK_OPTIONS]
set -euo pipefail
tpdb=$1 agent=$2 cluster=$3 suite=$4 ver=$5
shift 5
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
needs_bpf
cache=${TRACEPROF_ROOTFS_CACHE:-/var/cache/traceprof-test/rootfs}
rootfs=$cache/$suite-python$ver
py=/usr/bin/python$ver

# the root file system, made once (flock: tests running side by side wait)
mkdir -p "$cache"
(
	flock 9
	if [ ! -x "$rootfs$py" ]; then
		command -v debootstrap >/dev/null || fail "debootstrap is not installed (scripts/deps.sh)"
		mirror=$(sed -n 's/^URIs: *\([^ ]*debian\)$/\1/p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -1)
		mirror=${mirror:-http://deb.debian.org/debian}
		rm -rf "$rootfs.tmp"
		echo "making a $suite root file system with python$ver from $mirror (once)"
		debootstrap --variant=minbase --include="python$ver" "$suite" "$rootfs.tmp" "$mirror" \
			>"$work/debootstrap.log" 2>&1 || { tail -20 "$work/debootstrap.log"; exit 1; }
		mv "$rootfs.tmp" "$rootfs"
	fi
) 9>"$cache/.lock" || fail "no $suite root file system with python$ver"

conn=$(fresh_db "$tpdb" "$cluster" "tp_e2e_agent_python_${ver//./}")
inside=/tmp/traceprof-e2e-$$
mkdir -p "$rootfs$inside/churn"
cp "$here/py_workload.py" "$here/py_churn.py" "$rootfs$inside/"
trap 'rm -rf "$rootfs$inside"; cleanup' EXIT
secs=6
# contained: own mount namespace, the root file system as its root
contained() { exec unshare --mount --fork chroot "$rootfs" "$@"; }
contained "$py" "$inside/py_workload.py" "$secs" "$inside/go-workload" </dev/null >"$work/truth.txt" &
wl=$!
contained "$py" "$inside/py_churn.py" "$inside/churn" "$inside/stop" 60 "$inside/go" >"$work/churn.out" 2>&1 &
chn=$!
pids+=("$wl" "$chn")
# each interpreter once it runs in the root file system (after unshare's fork and chroot's exec)
inroot() { [ -n "$1" ] && [ -e "/proc/$1/root$inside/py_workload.py" ] && [ ! -e "$inside/py_workload.py" ] &&
	[ "$(readlink "/proc/$1/exe")" = "$rootfs$py" ]; }
for _ in $(seq 100); do
	wpy=$(pgrep -P "$wl" || true) cpy=$(pgrep -P "$chn" || true)
	inroot "$wpy" && inroot "$cpy" && break
	sleep 0.05
done
inroot "$wpy" && inroot "$cpy" || fail "the interpreters do not run in the root file system"
start_agent agent "$agent" --db "$(as_role writer)" --target "pid:$wpy,$cpy" --frequency 997 \
	--window 1s --otlp-grpc "" --otlp-http "" --control-listen "" --stats-file "$work/stats"
touch "$rootfs$inside/go-workload" # measured from here, all of it sampled
wait "$wl" || fail "the workload failed"
touch "$rootfs$inside/go" # the churn runs once the workload's shares are measured
sleep 4
touch "$rootfs$inside/stop"
wait "$chn" || fail "the churning process failed: $(cat "$work/churn.out")"
sleep 1.5
kill -TERM "$agent_pid"
wait "$agent_pid" || fail "the agent exited with status $?"
grep -E '^(bpf_py_[a-z_]*|py_[a-z_]*)=' "$work/stats"
grep -qx 'py_processes=2' "$work/stats" || fail "the agent did not find both python$ver interpreters"
py_stacks_tsv "$work/stacks.tsv"
python3 "$here/py_check.py" "$work/stacks.tsv" "$work/truth.txt" "$@" ||
	fail "python$ver: Python stacks do not match the workload's truth"
python3 "$here/py_churn_check.py" "$work/stacks.tsv" || fail "python$ver: short-lived functions named wrong"
echo "ok: Python frames of python$ver ($suite) in a container-like root file system"
