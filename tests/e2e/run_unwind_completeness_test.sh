#!/usr/bin/env bash
# Whole stacks from programs built without frame pointers: the agent at
# 99 Hz on four of them at once for 10 s (a program working in its signal
# handler, C++ exceptions in a hot loop, a C chain into libc's qsort and
# snprintf, Debian's xz -9), then, for each, the share of user stacks
# whose root-most frame is a thread root (bench/unwind/unwind_stats.py
# decides: _start, __libc_start_main, clone3, ... or where the CFI marks
# the return address undefined) must be at least 99 %, and the C
# program's flame graph (traceprof.service_folded) must hold its whole
# chain, main -> chain_f -> chain_g -> qsort_r or snprintf, for at least
# 90 % of its samples. With frame pointers alone these stacks are cut at
# the first frame of code built without them.
# usage: run_unwind_completeness_test.sh TRACEPROF_DB AGENT SIGWORK THROW LIBC_CHAIN CLUSTER_DIR
set -euo pipefail
tpdb=$1 agent=$2 sigwork=$3 throw=$4 chain=$5 cluster=$6
here=$(cd "$(dirname "$0")" && pwd)
bench=$here/../../bench/unwind
. "$here/lib.sh"
. "$bench/lib.sh"
needs_bpf
command -v xz >/dev/null || { echo "skip: no xz"; exit 77; }
conn=$(fresh_db "$tpdb" "$cluster" tp_e2e_unwind)
secs=10

unwind_xz_data "$work/xz.data" 24
"$sigwork" $((secs + 30)) >/dev/null &
pids+=($!)
"$throw" $((secs + 30)) >/dev/null &
pids+=($!)
"$chain" $((secs + 30)) >/dev/null &
pids+=($!)
xz -9 -T1 -c "$work/xz.data" >/dev/null &
pids+=($!)
targets=$(IFS=,; echo "${pids[*]}")
sleep 0.5
t0=$(q "SELECT now()")
start_agent agent "$agent" --db "$(as_role writer)" --target "pid:$targets" --frequency 99 \
	--window 1s --stats-file "$work/stats"
sleep "$secs"
for p in "${pids[@]}"; do cat "/proc/$p/maps"; done >"$work/maps"
kill -TERM "$agent_pid"
wait "$agent_pid" || fail "the agent exited with status $?"
grep -E '^(samples|sym_unknown_frames)=' "$work/stats"

for svc in "$(basename "$sigwork")" "$(basename "$throw")" "$(basename "$chain")" xz; do
	unwind_dump "$conn" "$svc" "$work/$svc.tsv"
	"$bench/unwind_stats.py" run --name "$svc" --maps "$work/maps" --agent "$work/$svc.tsv" \
		--json "$work/$svc.json" | grep -E '^(\| samples|\| completeness|traceprof.s cut)'
	read -r n pct < <(python3 -c 'import json, sys; r = json.load(open(sys.argv[1]))["agent"]
print(r["user_stacks"], "%.1f" % r["completeness"])' "$work/$svc.json")
	if [ "$n" -lt 50 ]; then
		bad "$svc: only $n user stacks stored"
	elif awk -v p="$pct" 'BEGIN { exit !(p >= 99) }'; then
		ok
		echo "ok: $svc: $pct % of $n user stacks end at a thread root"
	else
		bad "$svc: stacks cut: $pct % of $n user stacks end at a thread root (99 % needed)"
	fi
done

# The C program's flame graph, as the traceprof command reads it.
svc=$(basename "$chain")
read -r total chained whole < <(q "SELECT sum(samples),
        coalesce(sum(samples) FILTER (WHERE stack ~ '(^|;)main;chain_f;chain_g;'), 0),
        coalesce(sum(samples) FILTER (WHERE stack ~ '(^|;)main;chain_f;chain_g;[^;]*(qsort_r|snprintf)(;|$)'), 0)
   FROM traceprof.service_folded('$svc', '$t0', now())" | tr '|' ' ')
echo "$svc: $total samples, $chained under main;chain_f;chain_g, $whole through qsort_r or snprintf"
if [ "$whole" -gt 0 ] && [ $((chained * 10)) -ge $((total * 9)) ]; then
	ok
	echo "ok: the flame graph holds main -> chain_f -> chain_g -> libc"
else
	bad "$svc's flame graph: main;chain_f;chain_g in $chained of $total samples, into qsort_r/snprintf in $whole"
	q "SELECT samples, stack FROM traceprof.service_folded('$svc', '$t0', now())
	    ORDER BY samples DESC LIMIT 5"
fi
echo "$pass checks passed, $fail failed"
[ "$fail" -eq 0 ]
