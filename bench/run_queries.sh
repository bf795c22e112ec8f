#!/usr/bin/env bash
# Per-request query latency on a store of >= 50 million samples.
#
# Creates a private cluster (normal durability settings), fills it with
# traceprof-gen (1,500 user requests/s for 2.8 hours; services six times
# heavier than the demo's, so a trace averages about four samples; 5 % of
# requests at 99 Hz), then measures the latency of trace_profile and friends
# over 2,000 random traces and over 1,000 traces slower than 1 s.
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
	psql "$conn" -Xqc "TRUNCATE traceprof.samples, traceprof.requests"
	start=$(date +%s.%N)
	"$build/tools/traceprof-gen" --db "$conn" --rps 1500 --duration 10000s --work-scale 6 --seed 42
	echo "generated in $(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.0f", b - a }') s"
	psql "$conn" -Xqc "VACUUM ANALYZE"
fi
psql "$conn" -XAtc "SELECT 'samples: ' || sum(coalesce((SELECT sum(c) FROM unnest(counts) c), cardinality(stacks))) || ' in ' || count(*) || ' rows' FROM traceprof.samples"
psql "$conn" -XAtc "SELECT 'requests: ' || count(*) FROM traceprof.requests"
"$build/bench/bench_queries" "$conn" 2000 any
"$build/bench/bench_queries" "$conn" 1000 slow
[ "${1:-}" = "--keep" ] || "$build/cli/traceprof-db" remove "$dir"
