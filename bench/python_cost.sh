#!/usr/bin/env bash
# The cost of Python frames (docs/python.md), side by side in one run: two
# agents sample the same busy CPython process (tests/e2e/py_workload.py:
# two threads, a loop, a recursion, json calling back into Python, hashing)
# at the same time, one with --python on, one with --python off, each into
# the same PostgreSQL. Per round, over MEASURE seconds after WARMUP:
#  - process CPU of each agent (/proc/PID/task/*/schedstat), as % of a core;
#  - in-kernel cost per sample of each agent's BPF program
#    (bpf_run_time_ns / bpf_run_cnt from its stats file, kernel BPF stats),
#    at HZ (19, the always-on rate) and again at 997 Hz, where the walk's
#    cost per sample is measured over many more samples.
# Prints one line per round and rate, then medians. Never fails on timing.
#
# usage: bench/python_cost.sh
# environment: ROUNDS (3), WARMUP (10), MEASURE (60), TRACEPROF_BUILD_DIR
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${TRACEPROF_BUILD_DIR:-$root/build}
rounds=${ROUNDS:-3} warmup=${WARMUP:-10} measure=${MEASURE:-60}
py=/usr/bin/python3.11
[ -x "$py" ] || { echo "needs Debian's python3.11" >&2; exit 1; }
. "$root/bench/lib.sh"
bench_setup python
sysctl -qw kernel.bpf_stats_enabled=1

cpu_ns() { # on-CPU ns of all threads of process $1
	local t sum=0 a
	for t in /proc/"$1"/task/*; do
		read -r a _ <"$t/schedstat" 2>/dev/null || continue
		sum=$((sum + a))
	done
	echo "$sum"
}
stat_of() { # stat_of FILE KEY
	sed -n "s/^$2=//p" "$1"
}
snap() { # snap PID STATS COPY: the agent writes its stats file STATS, kept as COPY
	rm -f "$2"
	kill -USR1 "$1"
	for _ in $(seq 100); do [ -s "$2" ] && break; sleep 0.05; done
	cp "$2" "$3"
}

one_round() { # one_round HZ
	local hz=$1 wl on off c_on0 c_off0 c_on1 c_off1
	"$py" "$root/tests/e2e/py_workload.py" 100000 >/dev/null &
	wl=$!
	sleep 0.5
	"$build/agent/traceprof-agent" --db "$conn" --target "pid:$wl" --frequency "$hz" --python on \
		--otlp-grpc "" --otlp-http "" --control-listen "" --stats-file "$work/on.stats" \
		2>"$work/on.log" &
	on=$!
	"$build/agent/traceprof-agent" --db "$conn" --target "pid:$wl" --frequency "$hz" --python off \
		--otlp-grpc "" --otlp-http "" --control-listen "" --stats-file "$work/off.stats" \
		2>"$work/off.log" &
	off=$!
	sleep "$warmup"
	snap "$on" "$work/on.stats" "$work/on0"
	snap "$off" "$work/off.stats" "$work/off0"
	c_on0=$(cpu_ns "$on") c_off0=$(cpu_ns "$off")
	sleep "$measure"
	c_on1=$(cpu_ns "$on") c_off1=$(cpu_ns "$off")
	snap "$on" "$work/on.stats" "$work/on1"
	snap "$off" "$work/off.stats" "$work/off1"
	kill -TERM "$on" "$off" "$wl"
	wait "$on" "$off" 2>/dev/null || true
	wait "$wl" 2>/dev/null || true
	python3 - "$hz" "$measure" "$c_on0" "$c_on1" "$c_off0" "$c_off1" "$work" <<'PY'
import sys
hz, secs = int(sys.argv[1]), float(sys.argv[2])
c_on0, c_on1, c_off0, c_off1 = map(int, sys.argv[3:7])
work = sys.argv[7]
def st(name):
    return dict(l.strip().split("=", 1) for l in open("%s/%s" % (work, name)) if "=" in l)
def per_sample(a, b):
    dt = int(b["bpf_run_time_ns"]) - int(a["bpf_run_time_ns"])
    dn = int(b["bpf_run_cnt"]) - int(a["bpf_run_cnt"])
    return dt / max(dn, 1), dn
on_ns, on_n = per_sample(st("on0"), st("on1"))
off_ns, off_n = per_sample(st("off0"), st("off1"))
cpu_on = 100.0 * (c_on1 - c_on0) / (secs * 1e9)
cpu_off = 100.0 * (c_off1 - c_off0) / (secs * 1e9)
print("RESULT %d %.4f %.4f %.0f %.0f %d %d %s" % (hz, cpu_on, cpu_off, on_ns, off_ns, on_n, off_n,
      st("on1").get("bpf_py_frames", "0")))
PY
}

for r in $(seq "$rounds"); do
	for hz in 19 997; do
		one_round "$hz" | tee -a "$work/results"
	done
done
python3 - "$work/results" <<'PY'
import statistics, sys
rows = {}
for l in open(sys.argv[1]):
    w = l.split()
    if w and w[0] == "RESULT":
        rows.setdefault(int(w[1]), []).append([float(x) for x in w[2:7]])
print("| rate | agent CPU, --python on | --python off | difference | BPF ns/sample on | off | ratio |")
print("|---|---|---|---|---|---|---|")
for hz, rs in sorted(rows.items()):
    m = [statistics.median(r[i] for r in rs) for i in range(5)]
    print("| %d Hz | %.4f %% | %.4f %% | %+.4f pts | %.0f | %.0f | %.2f |"
          % (hz, m[0], m[1], m[0] - m[1], m[2], m[3], m[2] / m[3] if m[3] else 0))
PY
