#!/usr/bin/env bash
# Runs one SQL test file with psql against a fresh database in the test
# cluster: creates database tp_<name>, applies the schema with traceprof-db,
# loads tests/sql/lib.sql (assertion helpers), then the test. A failed
# assertion raises an error, psql stops (ON_ERROR_STOP) and the test fails.
# usage: run_sql_test.sh TRACEPROF_DB_BINARY CLUSTER_DIR TEST.sql
set -euo pipefail
tpdb=$1 cluster=$2 test=$3
name=tp_$(basename "$test" .sql)
base=$("$tpdb" conninfo "$cluster" --dbname postgres)
here=$(cd "$(dirname "$0")" && pwd)
psql "$base" -qX -v ON_ERROR_STOP=1 -c "DROP DATABASE IF EXISTS $name" -c "CREATE DATABASE $name" >/dev/null
conn=$("$tpdb" conninfo "$cluster" --dbname "$name")
"$tpdb" migrate --db "$conn" >/dev/null
psql "$conn" -qX -v ON_ERROR_STOP=1 -f "$here/sql/lib.sql" >/dev/null
psql "$conn" -qX -v ON_ERROR_STOP=1 --set=VERBOSITY=verbose -f "$test"
echo "ok: $(basename "$test")"
