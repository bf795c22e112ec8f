#!/usr/bin/env bash
# analysis.sh - latency of the trace analysis functions on data made by
# bench/analysis_data.sql: pgbench calls each function with random trace ids
# (one client, simple protocol: every call parsed and planned afresh, as a
# psql or Grafana query is) and the script prints p50/p99/max in ms.
# Reports numbers only; it never fails on timing.
# usage: analysis.sh DBNAME_OR_CONNINFO [ROWS [SECONDS]]
#   ROWS: the rows value given to analysis_data.sql (default 5000000)
set -euo pipefail
db=$1 rows=${2:-5000000} secs=${3:-10}
traces=$((rows / 2))
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

run() { # name, SQL using :r (a random trace number)
	printf '\\set r random(1, %d)\n%s;\n' "$traces" "$2" >"$work/$1.sql"
	(cd "$work" && pgbench -n -c 1 -T "$secs" -f "$1.sql" -l --log-prefix="$1" "$db" >/dev/null)
	sort -n -k3 "$work"/"$1".* | awk -v name="$1" '{ lat[NR] = $3 } END {
		printf "%-22s n=%-6d p50=%.2f ms  p99=%.2f ms  max=%.2f ms\n", name, NR,
		       lat[int(NR * 0.5) + 1] / 1000, lat[int(NR * 0.99) + 1] / 1000, lat[NR] / 1000 }'
}

run trace_profile "SELECT count(*) FROM traceprof.trace_profile(md5(:r::text))"
run trace_folded_text "SELECT length(traceprof.trace_folded_text(md5(:r::text)))"
run trace_flamegraph "SELECT count(*) FROM traceprof.trace_flamegraph(md5(:r::text))"
run trace_summary "SELECT length(traceprof.trace_summary(md5(:r::text))::text)"
run unknown_trace "SELECT count(*) FROM traceprof.trace_profile(md5('x' || :r))"
traces=1000
run large_trace_profile "SELECT count(*) FROM traceprof.trace_profile(md5('big' || :r))"
run large_trace_flamegraph "SELECT count(*) FROM traceprof.trace_flamegraph(md5('big' || :r))"
run large_trace_summary "SELECT length(traceprof.trace_summary(md5('big' || :r))::text)"
