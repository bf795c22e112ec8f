#!/usr/bin/env bash
# Per-request query latency on a store of >= 50 million samples.
#
# Creates a private cluster (normal durability settings), fills it with
# traceprof-gen (1,000 user requests/s for 2.8 hours at 19 Hz, with CPU
# scaled so a trace averages about five samples), then measures the latency
# of trace_profile and friends over 2,000 random traces.
# usage: bench/run_queries.sh [--keep]   (about 10 minutes; ~8 GB of disk)
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
	"$build/tools/traceprof-gen" --db "$conn" --rps 1000 --duration 10000s --cpu-scale 12 --seed 42
	echo "generated in $(echo "$(date +%s.%N) - $start" | bc) s"
	psql "$conn" -Xqc "VACUUM ANALYZE"
fi
psql "$conn" -XAtc "SELECT 'samples: ' || sum(coalesce((SELECT sum(c) FROM unnest(counts) c), cardinality(stacks))) || ' in ' || count(*) || ' rows' FROM traceprof.samples"
psql "$conn" -XAtc "SELECT 'requests: ' || count(*) FROM traceprof.requests"
"$build/bench/bench_queries" "$conn" 2000
[ "${1:-}" = "--keep" ] || "$build/cli/traceprof-db" remove "$dir"
