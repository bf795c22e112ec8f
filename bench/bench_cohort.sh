#!/usr/bin/env bash
# bench_cohort.sh - times cohort comparison (traceprof.compare_cohorts) on
# one hour of one service at 1,000 requests/s, with the rollup and without.
#
# Creates a private PostgreSQL cluster with traceprof-db in a new temporary
# directory, generates the data in SQL (bench/cohort_data.sql), times
# refresh_rollups_range over the hour, then the median of several runs of
# each comparison, and removes the cluster. Prints a markdown section for
# bench/results.md. Reports numbers only: it never fails on timing.
#
# usage: bench/bench_cohort.sh
# environment: MINUTES (60), RATE (requests/s of the measured service,
# 1000), RUNS (runs per rollup timing, 5), RAW_RUNS (runs per raw-path
# timing, 3), TRACEPROF_BUILD_DIR (build).
set -euo pipefail
shopt -s inherit_errexit
root=$(cd "$(dirname "$0")/.." && pwd)
build=${TRACEPROF_BUILD_DIR:-$root/build}
tpdb=$build/cli/traceprof-db
minutes=${MINUTES:-60}
rate=${RATE:-1000}
runs=${RUNS:-5}
raw_runs=${RAW_RUNS:-3}

if [ ! -x "$tpdb" ]; then
	echo "bench_cohort: $tpdb not found; build first (cmake --build build)" >&2
	exit 1
fi
dir=$(mktemp -d "${TMPDIR:-/tmp}/tp-bench.XXXXXX")
cleanup() { "$tpdb" remove "$dir" >/dev/null 2>&1 || rm -rf "$dir"; }
trap cleanup EXIT

"$tpdb" create "$dir" --fast >/dev/null
conn=$("$tpdb" conninfo "$dir")
sql() { psql "$conn" -qXAt -v ON_ERROR_STOP=1 "$@"; }

start=$(date +%s)
sql -v minutes="$minutes" -v rate="$rate" -f "$root/bench/cohort_data.sql" >/dev/null
gen_s=$(($(date +%s) - start))
sql -c "VACUUM ANALYZE" >/dev/null

from="2024-03-01 10:00:00+00"
until=$(sql -c "SELECT (timestamptz '$from' + $minutes * interval '1 minute')::text")
counts=$(sql -F ' ' -c "SELECT (SELECT count(*) FROM traceprof.requests r JOIN traceprof.sources s USING (source_id) WHERE s.service = 'checkout'),
                               (SELECT count(*) FROM traceprof.requests),
                               (SELECT coalesce(sum(coalesce((SELECT sum(c) FROM unnest(counts) c), cardinality(stacks))), 0)
                                FROM traceprof.samples WHERE trace_id IS NOT NULL),
                               (SELECT count(*) FROM traceprof.samples)")
read -r svc_requests all_requests tagged_samples sample_rows <<<"$counts"

# Times each statement in one session: median, min and max of n runs, ms.
timer="
CREATE FUNCTION pg_temp.timed(q text, n integer) RETURNS text LANGUAGE plpgsql AS \$\$
DECLARE
    t0 timestamptz;
    ms double precision[] := '{}';
BEGIN
    FOR i IN 1 .. n LOOP
        t0 := clock_timestamp();
        EXECUTE 'SELECT count(*) FROM (' || q || ') x';
        ms := ms || extract(epoch FROM clock_timestamp() - t0) * 1000;
    END LOOP;
    RETURN (SELECT format('%s | %s | %s', round(percentile_cont(0.5) WITHIN GROUP (ORDER BY m)::numeric),
                          round(min(m)::numeric), round(max(m)::numeric)) FROM unnest(ms) m);
END \$\$;"

refresh_ms=$(sql -c "$timer" -c "SELECT pg_temp.timed(\$q\$SELECT traceprof.refresh_rollups_range('$from', '$until')\$q\$, 1)" | cut -d' ' -f1)
rollup_size=$(sql -c "SELECT pg_size_pretty(sum(pg_total_relation_size(i.inhrelid)))
                      FROM pg_inherits i WHERE i.inhparent = 'traceprof.cohort_rollup'::regclass")
rollup_counts=$(sql -c "SELECT count(*) FILTER (WHERE minutes = 1) || ' minute rows, ' || count(*) FILTER (WHERE minutes = 10)
                               || ' 10-minute rows, ' || count(*) FILTER (WHERE minutes = 60) || ' hour rows'
                        FROM traceprof.cohort_rollup")
mid=$(sql -c "SELECT (timestamptz '$from' + $minutes / 2 * interval '1 minute')::text")
reroll_ms=$(sql -c "$timer" -c "SELECT pg_temp.timed(\$q\$SELECT traceprof.refresh_rollups_range('$mid', timestamptz '$mid' + interval '1 minute')\$q\$, 3)" | cut -d' ' -f1)
sql -c "VACUUM ANALYZE traceprof.cohort_rollup" >/dev/null

slow='{"min_duration": "1s"}'
fast='{"max_duration": "100ms"}'
err='{"status": "5xx"}'
ok='{"status": "2xx"}'
cmp() { # label, from, until, a, b, use_rollup, runs
	local r
	r=$(sql -c "$timer" -c "SELECT pg_temp.timed(format('SELECT * FROM traceprof.compare_cohorts(%L, %L, %L, %L, %L, %s)',
	                                                    'checkout', '$2', '$3', '$4', '$5', '$6'), $7)")
	echo "| $1 | $r | $7 |"
}
sizes() { # label, from, until, a, b, use_rollup, runs
	local r
	r=$(sql -c "$timer" -c "SELECT pg_temp.timed(format('SELECT * FROM traceprof.cohort_sizes(%L, %L, %L, %L, %L, %s)',
	                                                    'checkout', '$2', '$3', '$4', '$5', '$6'), $7)")
	echo "| $1 | $r | $7 |"
}
edge_from=$(sql -c "SELECT (timestamptz '$from' + interval '30 seconds')::text")
edge_until=$(sql -c "SELECT (timestamptz '$until' - interval '30 seconds')::text")

rows=$(
	cmp "slow (>= 1s) vs fast (< 100ms), rollup" "$from" "$until" "$slow" "$fast" true "$runs"
	cmp "5xx vs 2xx, rollup" "$from" "$until" "$err" "$ok" true "$runs"
	sizes "cohort_sizes slow vs fast, rollup" "$from" "$until" "$slow" "$fast" true "$runs"
	cmp "slow vs fast, range starting and ending mid-minute, rollup" "$edge_from" "$edge_until" "$slow" "$fast" true "$runs"
	cmp "thresholds off the 1-2-5 series (>= 1.5s vs < 75ms), rollup" "$from" "$until" \
		'{"min_duration": "1.5s"}' '{"max_duration": "75ms"}' true "$raw_runs"
	cmp "slow vs fast, raw tables only" "$from" "$until" "$slow" "$fast" false "$raw_runs"
	cmp "5xx vs 2xx, raw tables only" "$from" "$until" "$err" "$ok" false "$raw_runs"
)

top=$(sql -F ' | ' -c "SELECT function, round(a_share::numeric, 3), round(b_share::numeric, 3), round(delta::numeric, 3),
                              to_char(p_value, '9.9EEEE')
                       FROM traceprof.compare_cohorts('checkout', '$from', '$until', '$slow', '$fast') LIMIT 3")
sizes_out=$(sql -F ' | ' -c "SELECT cohort, requests, sampled_requests, samples, round(cpu_ms)
                             FROM traceprof.cohort_sizes('checkout', '$from', '$until', '$slow', '$fast')")
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
pgv=$(sql -c "SHOW server_version" | cut -d' ' -f1)
per_hour=$(awk -v ms="$refresh_ms" -v m="$minutes" 'BEGIN { printf "%.1f", ms / 1000 * 60 / m }')

cat <<EOF
## Cohort comparison

- date: $(date -u +%Y-%m-%d)
- machine: $cpu, $(nproc) cores, $(awk '/MemTotal/ { printf "%d GB", $2 / 1048576 }' /proc/meminfo) RAM; PostgreSQL $pgv (traceprof-db defaults, --fast)
- command: \`bench/bench_cohort.sh\` (MINUTES=$minutes RATE=$rate RUNS=$runs RAW_RUNS=$raw_runs)
- data: $minutes minutes of service checkout at $rate requests/s ($svc_requests requests) plus service inventory at a fifth of that
  as background ($all_requests requests in all); $tagged_samples samples tagged with a request, $sample_rows samples rows; generated in ${gen_s} s
- rollup: refresh_rollups_range over the $minutes minutes (both services) took $(awk -v ms="$refresh_ms" 'BEGIN { printf "%.1f", ms / 1000 }') s,
  that is $per_hour s per hour of data; $rollup_counts, $rollup_size; rolling one minute again
  (late data: it also rebuilds the minute's 10- and 60-minute blocks) took $reroll_ms ms (median of 3)

| query (one hour of checkout) | median ms | min ms | max ms | runs |
|---|---|---|---|---|
$rows

cohort_sizes of slow vs fast (cohort, requests, sampled_requests, samples, cpu_ms):

\`\`\`
$sizes_out
\`\`\`

Top of slow vs fast (function, a_share, b_share, delta, p):

\`\`\`
$top
\`\`\`
EOF
