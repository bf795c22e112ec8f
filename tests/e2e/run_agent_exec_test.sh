#!/usr/bin/env bash
# Short-lived programs: ten runs of cpu_burn of 0.1 s each in a cgroup the
# agent targets, most of them gone before the agent's next poll. The agent
# is woken when a process starts a program (an exec record in the sample
# ring) and looks at it then, so every sample must have its service and
# named frames (nearly always: a program that ends while the agent is busy
# with earlier records is still missed).
# usage: run_agent_exec_test.sh TRACEPROF_DB AGENT CPU_BURN CLUSTER_DIR
set -euo pipefail
tpdb=$1 agent=$2 burn=$3 cluster=$4
. "$(dirname "$0")/lib.sh"
needs_bpf
needs_cgroup traceprof-exec-test
conn=$(fresh_db "$tpdb" "$cluster" tp_e2e_agent_exec)

start_agent agent "$agent" --db "$(as_role writer)" --target "cgroup:$cg" --frequency 99 --window 1s --stats-file "$work/stats"
(
	echo "$BASHPID" >"$cg/cgroup.procs"
	for _ in 1 2 3 4 5 6 7 8 9 10; do "$burn" --threads 1 --seconds 0.1 >/dev/null; done
)
kill -TERM "$agent_pid"
wait "$agent_pid" || fail "the agent exited with status $?"
grep -E '^(samples|execs|sym_unknown_frames)=' "$work/stats"

burn_base=$(basename "$burn")
count="coalesce(sum(coalesce((SELECT sum(c) FROM unnest(sm.counts) c), cardinality(sm.stacks))), 0)"
# A process the agent never saw alive has no name: its samples go to "[unknown]".
lost=$(q "SELECT $count FROM traceprof.samples sm JOIN traceprof.sources so USING (source_id)
           WHERE so.service = '[unknown]'")
burned=$(q "SELECT $count FROM traceprof.samples sm JOIN traceprof.sources so USING (source_id)
             WHERE so.service = '$burn_base'")
named=$(q "SELECT count(*) FROM traceprof.functions WHERE module = '$burn_base' AND kind = 0
             AND name IN ('mix_block', 'work_unit')")
unnamed=$(q "SELECT count(*) FROM traceprof.functions WHERE kind = 2 AND name LIKE '$burn_base+0x%'")
echo "burn samples=$burned lost=$lost named=$named unnamed=$unnamed"
[ "$(sed -n 's/^execs=//p' "$work/stats")" -ge 10 ] || fail "fewer than 10 exec records"
# against the CPU time the programs received (the cgroup's usage; on a busy
# machine 10 x 0.1 s of work may get much less than a second): at 99 Hz
# at least 40 % of it, as on an idle machine (40 of ~99)
expect=$(awk '$1 == "usage_usec" { printf "%d", $2 * 99 / 1e6 }' "$cg/cpu.stat")
echo "the programs received $(awk '$1 == "usage_usec" { print $2 / 1000 }' "$cg/cpu.stat") ms of CPU: $expect samples at 99 Hz"
[ "$expect" -ge 10 ] || fail "the programs received too little CPU to judge ($expect samples expected)"
[ $((burned * 10)) -ge $((expect * 4)) ] || fail "only $burned samples of the short-lived programs ($expect expected)"
# Without the exec record about 75 % are lost here; with it, only a program
# that ends while the agent is still busy with earlier records.
[ $((lost * 4)) -le $((lost + burned)) ] || fail "$lost samples of processes the agent never saw alive"

[ "$named" -ge 1 ] || fail "the short-lived programs' functions were not named"
[ "$unnamed" -eq 0 ] || fail "$unnamed frames of the short-lived programs left as module+offset"
echo "ok: short-lived programs symbolized"
