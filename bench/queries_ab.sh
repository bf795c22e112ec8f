#!/usr/bin/env bash
# Per-request query latency of two builds side by side in one run: the
# same data, the same traces, the same cluster, interleaved rounds.
#
# Fills database "old" with the OLD build's traceprof-db and traceprof-gen,
# copies it to database "new" (CREATE DATABASE ... TEMPLATE) and migrates
# the copy with this build's traceprof-db - the upgrade a user gets - then
# times trace_profile, trace_folded, trace_summary and trace_flamegraph on
# both with this build's bench_queries, alternating old and new, ROUNDS
# times, on the same repeatably picked traces. Prints each round's tables
# and, per query, the median p50 of each side and their ratio (new / old).
#
# usage: bench/queries_ab.sh OLD_BUILD_DIR
# environment: RPS (1500), DURATION (600s), ROUNDS (3), TRACES (1000),
#   TRACEPROF_BUILD_DIR (this build, default build)
# Example: build the previous commit in its own tree, then
#   bench/queries_ab.sh ../prev/build
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${TRACEPROF_BUILD_DIR:-$root/build}
[ $# -eq 1 ] || { echo "usage: $0 OLD_BUILD_DIR" >&2; exit 2; }
old=$(cd "$1" && pwd)
rps=${RPS:-1500} duration=${DURATION:-600s} rounds=${ROUNDS:-3} traces=${TRACES:-1000}
for b in "$old/cli/traceprof-db" "$old/tools/traceprof-gen" "$build/cli/traceprof-db" \
	"$build/bench/bench_queries"; do
	[ -x "$b" ] || { echo "$0: $b is missing: build it first" >&2; exit 2; }
done
work=$(mktemp -d /var/tmp/traceprof-queries-ab.XXXXXX)
chmod 755 "$work" # the database server runs as its own user
cleanup() {
	"$build/cli/traceprof-db" remove "$work/pg" >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT
"$build/cli/traceprof-db" create "$work/pg" -c shared_buffers=1GB >/dev/null
base=$("$build/cli/traceprof-db" conninfo "$work/pg" --dbname postgres)
psql "$base" -Xqc "CREATE DATABASE old"
c_old=$("$build/cli/traceprof-db" conninfo "$work/pg" --dbname old)
c_new=$("$build/cli/traceprof-db" conninfo "$work/pg" --dbname new)
"$old/cli/traceprof-db" migrate --db "$c_old" >/dev/null
"$old/tools/traceprof-gen" --db "$c_old" --rps "$rps" --duration "$duration" --work-scale 6 \
	--seed 42 >/dev/null
psql "$c_old" -Xqc "VACUUM ANALYZE"
psql "$base" -Xqc "CREATE DATABASE new TEMPLATE old"
"$build/cli/traceprof-db" migrate --db "$c_new" >/dev/null
psql "$c_old" -XAtc "SELECT 'samples: ' || count(*) || ' rows' FROM traceprof.samples"
for r in $(seq "$rounds"); do
	for side in old new; do
		conn=$c_old
		[ $side = new ] && conn=$c_new
		echo "round $r, $side:"
		"$build/bench/bench_queries" "$conn" "$traces" any 42 | tee "$work/$side.$r"
	done
done
echo
echo "| query | old p50 ms (median of $rounds) | new p50 ms | new / old |"
echo "|---|---|---|---|"
for q in trace_profile trace_folded trace_summary trace_flamegraph; do
	med() { grep -h "^| $q |" "$work/$1".* | awk -F'|' '{ print $4 + 0 }' | sort -g |
		awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
	o=$(med old) n=$(med new)
	awk -v q="$q" -v o="$o" -v n="$n" 'BEGIN { printf "| %s | %.2f | %.2f | %.2f |\n", q, o, n, n / o }'
done
