#!/usr/bin/env bash
# OTLP receiver ingest: spans/s that traceprof-agent takes over OTLP/HTTP and
# OTLP/gRPC and commits to PostgreSQL as traceprof.requests rows.
#
# Needs root (the agent loads its BPF sampler; it samples only this script's
# shell, which sleeps) and the build (TRACEPROF_BUILD_DIR, default build):
# traceprof-agent, traceprof-db, bench_otlp_ingest. Creates a private
# PostgreSQL cluster with `traceprof-db create --fast` in a temporary
# directory and removes it at the end. For each transport and run: a fresh
# agent on free ports, bench_otlp_ingest sends for RUN_SECONDS from CONNECTIONS
# connections and waits until the rows are committed, then the agent's VmHWM
# and CPU over the run are read and it is stopped; its stats file gives the
# rows dropped. Prints one line per run on stderr and a markdown table of
# medians (min-max) on stdout. Never fails on timing.
#
# RUNS (5) RUN_SECONDS (10) CONNECTIONS (4) SPANS (1000 per export)
# TRANSPORTS ("http grpc") RATES ("0 50000 100000": spans/s offered by all
# connections together; 0: each sends as fast as it is answered) QUEUE_BYTES (agent's queue-bytes, default 64M)
# AGENT_ARGS (more agent options, e.g. "--spool-dir=" to compare without the spool)
set -euo pipefail
build=${TRACEPROF_BUILD_DIR:-build}
RUNS=${RUNS:-5} RUN_SECONDS=${RUN_SECONDS:-10} CONNECTIONS=${CONNECTIONS:-4} SPANS=${SPANS:-1000}
TRANSPORTS=${TRANSPORTS:-http grpc} RATES=${RATES:-0 50000 100000} QUEUE_BYTES=${QUEUE_BYTES:-64M}
agent=$build/agent/traceprof-agent tpdb=$build/cli/traceprof-db bench=$build/bench/bench_otlp_ingest
for f in "$agent" "$tpdb" "$bench"; do [ -x "$f" ] || { echo "missing $f: build first" >&2; exit 1; }; done
[ "$(id -u)" -eq 0 ] || { echo "needs root: the agent loads its BPF sampler" >&2; exit 1; }

work=$(mktemp -d /var/tmp/tp-otlp-bench.XXXXXX)
chmod 755 "$work" # PostgreSQL runs as its own user
agent_pid=''
cleanup() {
	[ -n "$agent_pid" ] && kill "$agent_pid" 2>/dev/null && wait "$agent_pid" 2>/dev/null || true
	"$tpdb" remove "$work/pg" >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT

"$tpdb" create "$work/pg" --fast >"$work/create.log" 2>&1 || { cat "$work/create.log" >&2; exit 1; }
conn=$("$tpdb" conninfo "$work/pg")
hz=$(getconf CLK_TCK)

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
median() { sort -g | awk '{v[NR]=$1} END {if (NR) printf "%s (%s–%s)", v[int((NR+1)/2)], v[1], v[NR]}'; }

: >"$work/runs"
for run in $(seq "$RUNS"); do
	for rate in $RATES; do for tr in $TRANSPORTS; do
		psql "$conn" -qX -c "TRUNCATE traceprof.requests" >/dev/null
		rm -f "$work/stats"
		"$agent" --db "$conn" --target "pid:$$" --window 5s --queue-bytes "$QUEUE_BYTES" \
			--otlp-http 127.0.0.1:0 --otlp-grpc 127.0.0.1:0 --stats-file "$work/stats" \
			${AGENT_ARGS:-} >"$work/agent.out" 2>"$work/agent.log" &
		agent_pid=$!
		for _ in $(seq 200); do grep -qs "otlp $tr: listening" "$work/agent.log" && break; sleep 0.1; done
		port=$(sed -n "s/.*otlp $tr: listening on .* port=\([0-9]*\).*/\1/p" "$work/agent.log")
		[ -n "$port" ] || { tail -20 "$work/agent.log" >&2; exit 1; }
		c0=$(cpu_ticks "$agent_pid")
		line=$("$bench" --transport "$tr" --port "$port" --db "$conn" --connections "$CONNECTIONS" \
			--spans "$SPANS" --seconds "$RUN_SECONDS" --rate "$rate")
		c1=$(cpu_ticks "$agent_pid")
		hwm=$(awk '/^VmHWM/ {print $2}' "/proc/$agent_pid/status")
		kill -TERM "$agent_pid"
		wait "$agent_pid" || echo "agent exited with status $?" >&2
		agent_pid=''
		commit_s=$(sed 's/.*commit_s=\([0-9.]*\).*/\1/' <<<"$line")
		cpu=$(awk -v a="$c0" -v b="$c1" -v hz="$hz" -v s="$commit_s" \
			'BEGIN {printf "%.0f", (s > 0 ? 100 * (b - a) / hz / s : 0)}')
		st() { sed -n "s/^$1=//p" "$work/stats"; }
		full="run=$run $line agent_cpu_pct=$cpu agent_vmhwm_kb=$hwm \
requests_dropped=$(st requests_dropped) requests_delivered=$(st requests_delivered) \
otlp_rows_unqueued=$(st otlp_rows_unqueued) otlp_exports_unavailable=$(st otlp_exports_unavailable)"
		echo "$full" >&2
		echo "$full" >>"$work/runs"
	done; done
done

field() { grep "transport=$1 .* rate=$rate " "$work/runs" | sed -n "s/.* $2=\([0-9.]*\).*/\1/p" | median; }
echo "| transport | offered spans/s | accepted spans/s | committed spans/s | rows dropped | exports refused | agent CPU % of a core | agent VmHWM MiB |"
echo "|---|---|---|---|---|---|---|---|"
for rate in $RATES; do for tr in $TRANSPORTS; do
	hwm=$(grep "transport=$tr .* rate=$rate " "$work/runs" | sed -n 's/.* agent_vmhwm_kb=\([0-9]*\).*/\1/p' |
		awk '{printf "%.0f\n", $1 / 1024}' | median)
	echo "| $tr | $([ "$rate" = 0 ] && echo 'as answered' || echo "$rate") | $(field "$tr" accepted_per_s) | $(field "$tr" committed_per_s) |" \
		"$(field "$tr" requests_dropped) | $(field "$tr" refused_exports) |" \
		"$(field "$tr" agent_cpu_pct) | $hwm |"
done; done
