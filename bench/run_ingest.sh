#!/usr/bin/env bash
# Ingestion and storage benchmark of the store writer (bench/bench_ingest.c).
# Builds, creates a throwaway PostgreSQL cluster with normal durability
# settings (traceprof-db create without --fast: fsync, synchronous_commit and
# full_page_writes on), runs the benchmark, prints the report and removes the
# cluster. Extra arguments go to bench_ingest, e.g. --runs 3 --requests 200000.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${TRACEPROF_BUILD_DIR:-$root/build}
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j "$(nproc)" --target bench_ingest traceprof-db >/dev/null
tpdb=$build/cli/traceprof-db
dir=$(mktemp -d "${TMPDIR:-/tmp}/traceprof-bench-XXXXXX")
chmod 755 "$dir" # the server user must reach it when run as root
trap '"$tpdb" remove "$dir/pg" >/dev/null 2>&1 || true; rmdir "$dir" 2>/dev/null || true' EXIT
"$tpdb" create "$dir/pg" >/dev/null
echo "machine: $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')), $(free -g | awk '/^Mem:/ {print $2}') GiB RAM, $(uname -sr); date: $(date -u +%Y-%m-%d)"
echo "command: bench/run_ingest.sh $*"
"$build/bench/bench_ingest" --db "$("$tpdb" conninfo "$dir/pg")" "$@"
