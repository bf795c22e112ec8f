#!/usr/bin/env bash
# End to end: traceprof-gen writes a known workload through the store
# library (the path an agent takes), then workload.sql checks that the SQL
# API finds what the workload model planted: the slow checkouts' CPU in
# validateSignature, the error path in 5xx requests, nothing significant
# between two cohorts that differ only by route.
# usage: run_workload_test.sh TRACEPROF_DB TRACEPROF_GEN CLUSTER_DIR
set -euo pipefail
tpdb=$1 gen=$2 cluster=$3
here=$(cd "$(dirname "$0")" && pwd)
name=tp_e2e_workload
base=$("$tpdb" conninfo "$cluster" --dbname postgres)
psql "$base" -qX -v ON_ERROR_STOP=1 -c "DROP DATABASE IF EXISTS $name" -c "CREATE DATABASE $name" >/dev/null
conn=$("$tpdb" conninfo "$cluster" --dbname "$name")
"$tpdb" migrate --db "$conn" >/dev/null
# 40 minutes at 20 user requests/s ending a minute ago: ~48k traces.
"$gen" --db "$conn" --duration 40m --end $(( $(date +%s) - 60 )) --rps 20 --seed 11 --slow-fraction 0.03
psql "$conn" -qX -v ON_ERROR_STOP=1 -f "$here/../sql/lib.sql" >/dev/null
psql "$conn" -qX -v ON_ERROR_STOP=1 --set=VERBOSITY=verbose -f "$here/workload.sql"
echo "ok: end-to-end workload"
