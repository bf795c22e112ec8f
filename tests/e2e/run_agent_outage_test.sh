#!/usr/bin/env bash
# The agent while its database goes away and comes back: a private cluster
# is stopped mid-run for several windows, then started again. The agent must
# keep sampling (no crash, no block), queue within its bound, drop the oldest
# windows when the bound is hit, resume delivery, and its counters must match
# what the database holds: delivered + dropped + undelivered = submitted.
# usage: run_agent_outage_test.sh TRACEPROF_DB AGENT CPU_BURN
set -euo pipefail
tpdb=$1 agent=$2 burn=$3
if [ "$(id -u)" -ne 0 ]; then echo "skip: the agent needs root (BPF, perf events)"; exit 77; fi
if [ ! -r /sys/kernel/btf/vmlinux ]; then echo "skip: the kernel has no BTF"; exit 77; fi

work=$(mktemp -d /tmp/traceprof-outage-XXXXXX)
chmod 755 "$work"
agent_pid='' burn_pid=''
cleanup() {
	[ -n "$agent_pid" ] && kill "$agent_pid" 2>/dev/null || true
	[ -n "$burn_pid" ] && kill "$burn_pid" 2>/dev/null || true
	wait 2>/dev/null || true
	"$tpdb" remove "$work/db" >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; tail -30 "$work/agent.log" >&2; exit 1; }
stat_of() { sed -n "s/^$1=//p" "$work/stats"; }

"$tpdb" create "$work/db" --fast >/dev/null
conn=$("$tpdb" conninfo "$work/db")
agent_conn=$("$tpdb" conninfo "$work/db" --role writer)
"$burn" --threads 1 --seconds 60 >/dev/null &
burn_pid=$!

# 1 s windows and a queue bound of 6 KiB (two or three windows): the outage below
# outlasts it, so the oldest windows are dropped.
"$agent" --db "$agent_conn connect_timeout=2" --target "pid:$burn_pid" --frequency 99 --window 1s \
	--queue-bytes 6K --stats-file "$work/stats" -v >"$work/agent.out" 2>"$work/agent.log" &
agent_pid=$!
# sampling (BPF verification takes seconds on a busy machine), then a few windows delivered
for _ in $(seq 300); do grep -qs 'sampling at' "$work/agent.log" && break; sleep 0.1; done
grep -q 'sampling at' "$work/agent.log" || fail "the agent did not start"
sleep 3
"$tpdb" stop "$work/db" >/dev/null
echo "database stopped"
sleep 8
kill -0 "$agent_pid" || fail "the agent died while the database was down"
"$tpdb" start "$work/db" >/dev/null
echo "database started"
sleep 5
kill -TERM "$agent_pid"
wait "$agent_pid" || fail "the agent exited with status $?"
agent_pid=''
cat "$work/stats"

submitted=$(stat_of samples_submitted) delivered=$(stat_of samples_delivered)
dropped=$(stat_of samples_dropped) undelivered=$(stat_of samples_undelivered)
errors=$(stat_of flush_errors)
stored=$(psql "$conn" -XAt -c "SELECT coalesce(sum(coalesce((SELECT sum(c) FROM unnest(counts) c),
                                      cardinality(stacks))), 0) FROM traceprof.samples")
echo "submitted=$submitted delivered=$delivered dropped=$dropped undelivered=$undelivered stored=$stored"
[ "$errors" -gt 0 ] || fail "no flush failed: the outage was not seen"
[ "$delivered" -gt 0 ] || fail "nothing delivered"
[ "$dropped" -gt 0 ] || fail "nothing dropped: the queue bound was not reached"
[ $((delivered + dropped + undelivered)) -eq "$submitted" ] || fail "counts do not add up"
[ "$stored" -eq "$delivered" ] || fail "the database holds $stored samples, the agent delivered $delivered"
[ "$undelivered" -eq 0 ] || fail "samples left undelivered after the database returned"
# windows from after the restart reached the database
late=$(psql "$conn" -XAt -c "SELECT count(*) FROM traceprof.samples WHERE bucket > now() - interval '5 seconds'")
[ "$late" -gt 0 ] || fail "no window from after the restart was stored"
echo "ok: agent through a database outage"
