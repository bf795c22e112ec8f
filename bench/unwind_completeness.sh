#!/usr/bin/env bash
# unwind_completeness.sh - how whole the agent's stacks are on programs
# built without frame pointers, next to perf's DWARF unwinding.
#
# For each workload (bench/unwind/README.md) and each of RUNS runs: the
# workload starts, traceprof-agent samples only its process (--target
# pid:N, 99 Hz) while `perf record -F 99 --call-graph dwarf,65528 -p N`
# records the same process over the same SECONDS_PER_RUN seconds; then the
# agent's stacks are read back from PostgreSQL (traceprof.samples, stacks,
# frames, functions) and perf's from `perf script`, and
# bench/unwind/unwind_stats.py computes for both: completeness (the share
# of user stacks whose root-most frame is a thread root) and each
# function's inclusive share (samples whose stack holds it).
#
# Prints, per workload, completeness and the table of every function over
# 2 % in either (differences over 2 points flagged) of the last run, then
# a markdown table of medians over the runs for bench/results.md. Never
# fails on the figures.
#
# usage: sudo bench/unwind_completeness.sh
# settings (environment): RUNS (3), SECONDS_PER_RUN (10), WORKLOADS
# ("sigwork throw libc xz python postgres demo"), PERF (1; 0 = agent only),
# TRACEPROF_BUILD_DIR (build). Needs root, perf (linux-perf), xz, Debian's
# /usr/bin/python3.11 and PostgreSQL 15 (pgbench); the build's
# traceprof-agent, traceprof-db, the unwind_* workloads and the demo.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${TRACEPROF_BUILD_DIR:-$here/../build}
runs=${RUNS:-3} secs=${SECONDS_PER_RUN:-10} use_perf=${PERF:-1}
workloads=${WORKLOADS:-sigwork throw libc xz python postgres demo}
pgbin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
. "$here/lib.sh"
. "$here/unwind/lib.sh"
bench_setup unwind
writer=$("$build/cli/traceprof-db" conninfo "$work/db" --role writer)
results=$work/results
mkdir -p "$results"

wl_pid='' wl_kill=() wl_service=''
# start_workload NAME: starts it; sets wl_pid (the process sampled),
# wl_service (its service name in the store) and wl_kill (what to stop)
start_workload() {
	local n=$((secs + 60)) port
	case $1 in
	sigwork | throw | libc)
		local exe=$build/bench/unwind_$1
		[ "$1" = libc ] && exe=$build/bench/unwind_libc_chain
		"$exe" "$n" >/dev/null &
		wl_pid=$! wl_service=$(basename "$exe") wl_kill=($!)
		;;
	xz)
		[ -s "$work/xz.data" ] || unwind_xz_data "$work/xz.data" $((secs * 3 + 8))
		xz -9 -T1 -c "$work/xz.data" >/dev/null &
		wl_pid=$! wl_service=xz wl_kill=($!)
		;;
	python)
		/usr/bin/python3.11 "$here/unwind/py_loop.py" "$n" >/dev/null &
		wl_pid=$! wl_service=python3.11 wl_kill=($!)
		;;
	postgres)
		local pg
		pg=$("$build/cli/traceprof-db" conninfo "$work/db" --dbname unwind_pg)
		if [ ! -s "$work/pgbench.sql" ]; then
			psql "$conn" -qX -c "CREATE DATABASE unwind_pg" >/dev/null
			"$pgbin/pgbench" -i -q -s 5 "$pg" >/dev/null 2>&1
			printf '%s\n' '\set aid random(1, 490000)' \
				'SELECT abalance FROM pgbench_accounts WHERE aid = :aid;' \
				'SELECT count(*), sum(abalance) FROM pgbench_accounts WHERE aid BETWEEN :aid AND :aid + 2000;' \
				'SELECT bid, count(*) FROM pgbench_accounts WHERE aid BETWEEN :aid AND :aid + 500 GROUP BY bid ORDER BY 2 DESC;' \
				>"$work/pgbench.sql"
		fi
		"$pgbin/pgbench" -n -c 1 -T "$n" -f "$work/pgbench.sql" "$pg" >/dev/null 2>&1 &
		wl_kill=($!) wl_service=postgres wl_pid=''
		for _ in $(seq 50); do
			wl_pid=$(psql "$conn" -qXAt -c "SELECT pid FROM pg_stat_activity
			                                 WHERE application_name = 'pgbench' LIMIT 1")
			[ -n "$wl_pid" ] && break
			sleep 0.1
		done
		;;
	demo)
		"$build/examples/traceprof-demo-service" --port 0 --threads 2 >"$work/demo.out" 2>/dev/null &
		wl_pid=$! wl_service=payment-svc wl_kill=($!)
		for _ in $(seq 100); do grep -q '^listening on' "$work/demo.out" && break; sleep 0.1; done
		port=$(sed -n 's/^listening on .*:\([0-9]*\)$/\1/p' "$work/demo.out")
		"$build/examples/traceprof-demo-load" --port "$port" --duration "$n" --concurrency 2 \
			--slow-fraction 0.05 -q >/dev/null 2>&1 &
		wl_kill+=($!)
		;;
	*) echo "unknown workload $1" >&2; exit 2 ;;
	esac
	[ -n "$wl_pid" ] || { echo "$1: no process to sample" >&2; exit 1; }
}

# measure NAME RUN: one run of one workload; its results in $results/NAME.RUN.*
measure() {
	local name=$1 run=$2 out=$results/$1.$2 agent_pid perf_pid=''
	start_workload "$name"
	sleep 1 # past start-up
	psql "$conn" -qX -c "TRUNCATE traceprof.samples" >/dev/null
	"$build/agent/traceprof-agent" --db "$writer" --target "pid:$wl_pid" --frequency 99 \
		--window 1s --stats-file "$out.stats" 2>"$out.agent.log" &
	agent_pid=$!
	for _ in $(seq 100); do grep -qs 'sampling at' "$out.agent.log" && break; sleep 0.1; done
	if [ "$use_perf" = 1 ]; then
		perf record -q -F 99 --call-graph dwarf,65528 -p "$wl_pid" -o "$out.perf.data" \
			-- sleep "$secs" >/dev/null 2>&1 &
		perf_pid=$!
	fi
	sleep "$secs"
	cat "/proc/$wl_pid/maps" >"$out.maps" 2>/dev/null || true
	[ -n "$perf_pid" ] && { wait "$perf_pid" || true; }
	kill -TERM "$agent_pid"
	wait "$agent_pid" || echo "$name: the agent exited with status $?" >&2
	kill "${wl_kill[@]}" 2>/dev/null || true
	wait "${wl_kill[@]}" 2>/dev/null || true
	unwind_dump "$conn" "$wl_service" "$out.agent.tsv"
	local perf_args=()
	if [ -n "$perf_pid" ]; then
		perf script -i "$out.perf.data" -F comm,tid,ip,sym,dso --no-inline --no-demangle \
			>"$out.perf.txt" 2>/dev/null || true
		rm -f "$out.perf.data"
		perf_args=(--perf "$out.perf.txt")
	fi
	"$here/unwind/unwind_stats.py" run --name "$name" --maps "$out.maps" --agent "$out.agent.tsv" \
		"${perf_args[@]}" --json "$out.json" >"$out.md"
	echo "$name run $run: $(grep -m1 '^| completeness' "$out.md")" >&2
}

echo "unwind completeness: $runs runs of ${secs} s per workload ($workloads), perf=$use_perf" >&2
for run in $(seq "$runs"); do
	for w in $workloads; do measure "$w" "$run"; done
done

echo "## Stack completeness and agreement with perf --call-graph dwarf"
echo
echo "$runs runs of $secs s per workload at 99 Hz, $(nproc) CPUs, $(uname -r); medians (min–max)."
echo
"$here/unwind/unwind_stats.py" summary "$results"/*.json
echo
echo "Per workload, the last run:"
for w in $workloads; do cat "$results/$w.$runs.md"; echo; done
