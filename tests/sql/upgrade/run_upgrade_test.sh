#!/usr/bin/env bash
# The upgrade test: a database made with the schema of a release (the frozen
# migrations of tests/sql/upgrade/vX.Y.Z/, applied with psql and recorded as
# that release's traceprof-db did), holding data, then migrated with this
# traceprof-db, must equal a fresh install: the same tables, columns,
# indexes, constraints, function definitions, views, triggers and
# privileges (schema_snapshot.sql), and keep its data. It must migrate
# without a warning about changed migration texts.
# usage: run_upgrade_test.sh TRACEPROF_DB_BINARY CLUSTER_DIR [RELEASE_DIR]
set -euo pipefail
tpdb=$1 cluster=$2
here=$(cd "$(dirname "$0")" && pwd)
release=${3:-$here/v0.1.0}
old=tp_upgrade_old fresh=tp_upgrade_fresh
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
base=$("$tpdb" conninfo "$cluster" --dbname postgres)
psql "$base" -qX -v ON_ERROR_STOP=1 -c "DROP DATABASE IF EXISTS $old" -c "CREATE DATABASE $old" \
	-c "DROP DATABASE IF EXISTS $fresh" -c "CREATE DATABASE $fresh" >/dev/null
oconn=$("$tpdb" conninfo "$cluster" --dbname $old)
fconn=$("$tpdb" conninfo "$cluster" --dbname $fresh)

# The release's schema, as its traceprof-db applied it: one transaction per
# migration with the row that records it (version, name, md5 of the text).
psql "$oconn" -qX -v ON_ERROR_STOP=1 -c "SET client_min_messages = warning;
	CREATE SCHEMA IF NOT EXISTS traceprof;
	CREATE TABLE traceprof.schema_migrations (version int PRIMARY KEY, name text NOT NULL,
	  checksum text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())" >/dev/null
for f in "$release"/[0-9][0-9][0-9]_*.sql; do
	v=$(basename "$f" | cut -c1-3) nm=$(basename "$f" .sql)
	{ echo "SET client_min_messages = warning;"; cat "$f"; echo
	  echo "INSERT INTO traceprof.schema_migrations (version, name, checksum)"
	  echo "VALUES ($((10#$v)), '$nm', '$(md5sum <"$f" | cut -c1-32)');"; } >"$work/m.sql"
	psql "$oconn" -qX1 -v ON_ERROR_STOP=1 -f "$work/m.sql" >/dev/null ||
		fail "release migration $nm"
done
psql "$oconn" -qX -v ON_ERROR_STOP=1 -c "
	INSERT INTO traceprof.sources (source_id, service) VALUES (7, 'old-svc');
	INSERT INTO traceprof.samples (bucket, source_id, hz, stacks) VALUES (now(), 7, 19, '{0}')" >/dev/null

"$tpdb" migrate --db "$oconn" >"$work/out" 2>"$work/err" || fail "migrate: $(cat "$work/err")"
# the migrations added since the release, then the API
grep -q "([0-9]* migrations\? applied, [1-9][0-9]* sql/api files applied)" "$work/out" ||
	fail "upgrade output: $(cat "$work/out")"
! grep -q "different text" "$work/err" || fail "released migrations reported as changed: $(cat "$work/err")"
"$tpdb" migrate --db "$fconn" >/dev/null || fail "fresh migrate"

psql "$oconn" -qXAt -v ON_ERROR_STOP=1 -f "$here/schema_snapshot.sql" >"$work/old.snap"
psql "$fconn" -qXAt -v ON_ERROR_STOP=1 -f "$here/schema_snapshot.sql" >"$work/fresh.snap"
[ "$(wc -l <"$work/fresh.snap")" -gt 100 ] || fail "snapshot too small"
diff -u "$work/fresh.snap" "$work/old.snap" >&2 || fail "upgraded database differs from a fresh install"
# Migrating again applies the API again and changes nothing.
"$tpdb" migrate --db "$oconn" >"$work/out" 2>"$work/err" || fail "second migrate: $(cat "$work/err")"
grep -q "(0 migrations applied, [1-9][0-9]* sql/api files applied)" "$work/out" ||
	fail "second migrate output: $(cat "$work/out")"
psql "$oconn" -qXAt -v ON_ERROR_STOP=1 -f "$here/schema_snapshot.sql" >"$work/again.snap"
diff -u "$work/old.snap" "$work/again.snap" >&2 || fail "migrating again changed the schema"
[ "$(psql "$oconn" -qXAt -c "SELECT count(*) FROM traceprof.samples JOIN traceprof.sources USING (source_id)
	WHERE service = 'old-svc'")" = 1 ] || fail "data lost in the upgrade"
[ "$(psql "$oconn" -qXAt -c "SELECT count(*) FROM traceprof.trace_profile('00000000000000000000000000000001')")" = 0 ] ||
	fail "trace_profile after the upgrade"
echo "ok: upgrade from $(basename "$release")"
