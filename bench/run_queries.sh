#!/usr/bin/env bash
# Per-request query latency on a store of >= 50 million samples.
#
# Creates a private cluster (normal durability settings), fills it with
# traceprof-gen (1,500 user requests/s for 2.8 hours; services six times
# heavier than the demo's, so a trace averages about four samples; 5 % of
# requests at 99 Hz) and off-CPU rows, then measures the latency of every
# per-trace SQL function over 2,000 random traces and over 1,000 traces
# slower than 1 s.
# usage: bench/run_queries.sh [--keep]   (about 15 minutes; ~10 GB of disk)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${TRACEPROF_BUILD_DIR:-$root/build}
dir=${TRACEPROF_BENCH_DB:-/var/tmp/traceprof-bench-queries}
"$root/scripts/build.sh" >/dev/null
"$build/cli/traceprof-db" create "$dir" -c shared_buffers=2GB >/dev/null
conn=$("$build/cli/traceprof-db" conninfo "$dir")
have=$(psql "$conn" -XAtc "SELECT coalesce(sum(coalesce((SELECT sum(c) FROM unnest(counts) c), cardinality(stacks))), 0) FROM traceprof.samples")
if [ "$have" -lt 50000000 ]; then
	psql "$conn" -Xqc "TRUNCATE traceprof.samples, traceprof.requests, traceprof.offcpu"
	start=$(date +%s.%N)
	"$build/tools/traceprof-gen" --db "$conn" --rps 1500 --duration 10000s --work-scale 6 --seed 42
	echo "generated in $(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.0f", b - a }') s"
	psql "$conn" -Xqc "VACUUM ANALYZE"
fi
# Off-CPU rows (traceprof-gen writes none): for the requests of one trace
# in ten and of every trace with a span slower than 1 s, a blocked row of
# three stacks (two of the store's stacks and time without a stack) and a
# runqueue row, as the agent writes them; 5.4 million rows.
if [ "$(psql "$conn" -XAtc "SELECT count(*) FROM (SELECT FROM traceprof.offcpu LIMIT 1) x")" = 0 ]; then
	psql "$conn" -Xq -v ON_ERROR_STOP=1 <<'SQL'
CREATE TEMP TABLE st AS
    SELECT array_agg(stack_id) AS ids
      FROM (SELECT stack_id FROM traceprof.stacks ORDER BY stack_id LIMIT 1000) s;
INSERT INTO traceprof.offcpu (bucket, source_id, span_id, trace_id, kind, stacks, us)
SELECT date_trunc('second', r.start_time), r.source_id, r.span_id, r.trace_id, k.kind,
       CASE WHEN k.kind = 1
            THEN ARRAY[st.ids[1 + abs(hashint8(r.span_id)) % 1000],
                       st.ids[1 + abs(hashint8(r.span_id + 1)) % 1000], 0]
            ELSE ARRAY[0::bigint] END,
       CASE WHEN k.kind = 1
            THEN ARRAY[greatest(r.duration_us / 4, 1)::int, greatest(r.duration_us / 8, 1)::int, 500]
            ELSE ARRAY[greatest(r.duration_us / 50, 1)::int] END
  FROM traceprof.requests r, st, (VALUES (1::smallint), (2::smallint)) k(kind)
 WHERE abs(hashtext(r.trace_id::text)) % 10 = 0 OR r.duration_us > 1000000;
VACUUM ANALYZE traceprof.offcpu;
SQL
fi
psql "$conn" -XAtc "SELECT 'samples: ' || sum(coalesce((SELECT sum(c) FROM unnest(counts) c), cardinality(stacks))) || ' in ' || count(*) || ' rows' FROM traceprof.samples"
psql "$conn" -XAtc "SELECT 'requests: ' || count(*) FROM traceprof.requests"
psql "$conn" -XAtc "SELECT 'offcpu rows: ' || count(*) FROM traceprof.offcpu"
"$build/bench/bench_queries" "$conn" 2000 any
"$build/bench/bench_queries" "$conn" 1000 slow
[ "${1:-}" = "--keep" ] || "$build/cli/traceprof-db" remove "$dir"
