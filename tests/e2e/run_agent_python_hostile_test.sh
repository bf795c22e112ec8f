#!/usr/bin/env bash
# A process that attacks the agent's memory through its Python cache
# (docs/security.md, "Another process's memory"): py_codebomb.py runs as
# nobody and makes, all the time, new code objects whose location tables
# each claim 64 KiB. The agent, sampling it at 997 Hz for 8 s, must keep
# the cache within its budget (py_code_bytes <= python-cache-bytes, the
# process held to its share: py_code_share_evicts moves) and its own peak
# memory (VmHWM) under 160 MiB, well inside the Helm chart's 512 MiB limit
# (the agent before the byte budget went past 1 GiB in 30 s). Beside it a
# well-behaved Python process keeps its names.
# usage: run_agent_python_hostile_test.sh TRACEPROF_DB AGENT CLUSTER_DIR
set -euo pipefail
tpdb=$1 agent=$2 cluster=$3
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
needs_bpf
py=/usr/bin/python3.11
[ -x "$py" ] || { echo "skip: no $py"; exit 77; }
conn=$(fresh_db "$tpdb" "$cluster" tp_e2e_agent_python_hostile)
limit_kb=$((160 * 1024))

chmod 755 "$work"
cp "$here/py_codebomb.py" "$work/" # where nobody can read it
chmod 644 "$work/py_codebomb.py"
setpriv --reuid=nobody --regid=nogroup --clear-groups "$py" "$work/py_codebomb.py" "$work/stop" 60 \
	>"$work/bomb.out" 2>&1 &
bomb=$!
pids+=("$bomb")
mkdir -p "$work/churn"
chmod 755 "$work/churn"
"$py" "$here/py_churn.py" "$work/churn" "$work/stop" 60 >"$work/churn.out" 2>&1 &
chn=$!
pids+=("$chn")
start_agent agent "$agent" --db "$(as_role writer)" --target "pid:$bomb,$chn" --frequency 997 \
	--window 1s --otlp-grpc "" --otlp-http "" --control-listen "" --stats-file "$work/stats" \
	--python-cache-bytes 16M
sleep 8
hwm=$(awk '/^VmHWM:/ {print $2}' "/proc/$agent_pid/status")
touch "$work/stop"
wait "$bomb" || fail "the attacking process failed: $(cat "$work/bomb.out")"
wait "$chn" || fail "the churning process failed: $(cat "$work/churn.out")"
sleep 1.5
kill -TERM "$agent_pid"
wait "$agent_pid" || fail "the agent exited with status $?"
grep -E '^(py_code_[a-z_]*|bpf_py_stacks)=' "$work/stats"
echo "agent peak RSS: $((hwm / 1024)) MiB (bound $((limit_kb / 1024)) MiB); $(cat "$work/bomb.out")"
misses=$(sed -n 's/^py_code_misses=//p' "$work/stats")
bytes=$(sed -n 's/^py_code_bytes=//p' "$work/stats")
[ "${misses:-0}" -ge 20000 ] || fail "the attack reached the cache only $misses times: not an attack"
[ "${bytes:-0}" -le $((16 << 20)) ] || fail "the Python cache holds $bytes bytes, over its 16 MiB budget"
grep -q '^py_code_share_evicts=[1-9]' "$work/stats" || fail "the attacker was not held to its share"
[ "$hwm" -le "$limit_kb" ] || fail "the agent's peak RSS is $((hwm / 1024)) MiB, over $((limit_kb / 1024)) MiB"

py_stacks_tsv "$work/stacks.tsv"
python3 "$here/py_churn_check.py" "$work/stacks.tsv" || fail "the well-behaved process lost its names"
echo "ok: the agent kept its Python cache within budget under attack ($((hwm / 1024)) MiB peak)"
