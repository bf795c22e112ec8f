#!/usr/bin/env bash
# Python frames from the kernel (docs/python.md): Debian's python3.11
# running py_workload.py (two threads, known shares of CPU time in known
# functions: a loop, a recursion, a C extension calling back into Python,
# hashing in C with the GIL released), sampled by the agent at 997 Hz for
# a few seconds. py_check.py compares the stored stacks with the
# workload's own measurement: inclusive shares within 2 points, the hot
# loop's lines, json_cb under the C encoder under via_json, no native
# evaluation-loop frame left, the recursion's depth, and >= 99 % of the
# samples with a Python frame. Next to it, two processes break their own
# frame chain while sampled (py_scribble.py: a cycle, an unmapped link):
# counted (bpf_py_trunc, bpf_py_fault), no hang, both finish, the agent
# goes on. A fourth (py_churn.py) makes and drops short-lived functions
# of two modules (lambdas, generator expressions, closures, functions and
# classes made per call, code compiled at run time): every frame of its
# files must carry its own module's name (py_churn_check.py). A fifth
# (py_blocker.py) sleeps in wait_here() under blocked_caller(), with
# off-CPU capture on: its blocked time must carry both Python frames, in
# that order, above the native frames of the sleep.
# usage: run_agent_python_test.sh TRACEPROF_DB AGENT CLUSTER_DIR
set -euo pipefail
tpdb=$1 agent=$2 cluster=$3
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
needs_bpf
py=/usr/bin/python3.11
[ -x "$py" ] || { echo "skip: no $py"; exit 77; }
conn=$(fresh_db "$tpdb" "$cluster" tp_e2e_agent_python)
secs=7

"$py" "$here/py_workload.py" "$secs" "$work/go-workload" </dev/null >"$work/truth.txt" &
wl=$!
pids+=("$wl")
"$py" "$here/py_scribble.py" cycle "$work/stop" 60 >"$work/cycle.out" &
cyc=$!
"$py" "$here/py_scribble.py" garbage "$work/stop" 60 >"$work/garbage.out" &
gar=$!
mkdir -p "$work/churn"
"$py" "$here/py_churn.py" "$work/churn" "$work/stop" 60 "$work/go" >"$work/churn.out" 2>&1 &
chn=$!
OTEL_SERVICE_NAME=py-blocker "$py" "$here/py_blocker.py" "$work/stop" 60 &
blk=$!
pids+=("$cyc" "$gar" "$chn" "$blk")
sleep 0.3
start_agent agent "$agent" --db "$(as_role writer)" --target "pid:$wl,$cyc,$gar,$chn,$blk" --frequency 997 --offcpu all \
	--window 1s --otlp-grpc "" --otlp-http "" --control-listen "" --stats-file "$work/stats"
touch "$work/go-workload" # measured from here, all of it sampled
wait "$wl" || fail "the workload failed" # it prints its truth after SECONDS of CPU per thread
touch "$work/go" # the churn runs once the workload's shares are measured (py_churn.py)
sleep 4
touch "$work/stop" # the two with a broken chain stop once the workload is done
wait "$cyc" && wait "$gar" || fail "a process with a broken frame chain failed"
wait "$chn" || fail "the churning process failed: $(cat "$work/churn.out")"
wait "$blk" || fail "the blocking process failed"
sleep 1.5
kill -TERM "$agent_pid"
wait "$agent_pid" || fail "the agent exited with status $?"
grep -E '^(bpf_py_[a-z_]*|py_[a-z_]*)=' "$work/stats"
grep -qx 'py_processes=5' "$work/stats" || fail "the agent did not find the five interpreters"
grep -q '^bpf_py_trunc=[1-9]' "$work/stats" || fail "the cycle in a frame chain was not counted"
grep -q '^bpf_py_fault=[1-9]' "$work/stats" || fail "the unmapped frame link was not counted"

py_stacks_tsv "$work/stacks.tsv"
python3 "$here/py_check.py" "$work/stacks.tsv" "$work/truth.txt" || fail "Python stacks do not match the workload's truth"
python3 "$here/py_churn_check.py" "$work/stacks.tsv" || fail "short-lived functions were named wrong"

# off-CPU: the blocker's blocked time with its Python frames, in order,
# above a native frame of the sleep
read -r all_us py_us < <(q "
WITH o AS (
    SELECT x.stack_id, sum(x.us) AS us
      FROM traceprof.offcpu o
      JOIN traceprof.sources so ON so.source_id = o.source_id
     CROSS JOIN LATERAL unnest(o.stacks, o.us) AS x(stack_id, us)
     WHERE so.service = 'py-blocker' AND o.kind = 1
     GROUP BY 1),
f AS (
    SELECT o.stack_id, o.us,
           min(f.ord) FILTER (WHERE fn.name = '__main__.blocked_caller') AS caller_at,
           min(f.ord) FILTER (WHERE fn.name = '__main__.wait_here') AS wait_at,
           max(f.ord) FILTER (WHERE fn.name LIKE '%nanosleep%') AS sleep_at
      FROM o
      LEFT JOIN traceprof.stacks st ON st.stack_id = o.stack_id
      LEFT JOIN LATERAL unnest(st.frame_ids) WITH ORDINALITY AS f(frame_id, ord) ON true
      LEFT JOIN traceprof.frames fr ON fr.frame_id = f.frame_id
      LEFT JOIN traceprof.functions fn ON fn.function_id = fr.function_id
     GROUP BY 1, 2)
SELECT coalesce(sum(us), 0) || ' ' || coalesce(sum(us) FILTER (WHERE caller_at < wait_at AND wait_at < sleep_at), 0)
  FROM f" | tr '|' ' ')
echo "blocked: ${all_us} us, with blocked_caller -> wait_here -> the sleep: ${py_us} us"
[ "${all_us:-0}" -ge 500000 ] || fail "the blocker's blocked time was not captured: ${all_us} us"
[ $((py_us * 100)) -ge $((all_us * 90)) ] || fail "blocked time with its Python frames: ${py_us} of ${all_us} us"
echo "ok: Python frames of a live CPython 3.11, interleaved with its native frames"
