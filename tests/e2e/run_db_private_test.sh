#!/usr/bin/env bash
# db_private: the embedded cluster is closed to other local users, and each
# traceprof role does what its part needs and nothing more.
#  1. the cluster directory, socket directory and passfiles are the server
#     user's alone; pg_hba.conf asks every connection for a password;
#  2. as nobody: the socket cannot be reached, the passfiles cannot be read,
#     nothing runs (the COPY ... TO PROGRAM of an open cluster included);
#  3. no role but the bootstrap superuser is superuser; COPY TO/FROM PROGRAM
#     and server files fail for every traceprof role;
#  4. the writer writes (COPY, dictionaries, claims, partitions) but reads
#     back nothing of samples, requests or dictionaries and creates, alters,
#     drops or truncates nothing; the reader reads everything and writes
#     nothing; the controller writes only the trigger table;
#  5. a partition made later gets the same grants;
#  6. 010 applies to a database with data that a non-superuser administrator
#     migrated (a managed PostgreSQL, roles already there), and again.
# usage: run_db_private_test.sh TRACEPROF_DB CLUSTER_DIR SQL_DIR
set -euo pipefail
tpdb=$1 cluster=$2 sqldir=$3
[ "$(id -u)" -eq 0 ] || { echo "skip: acting as another user needs root"; exit 77; }
command -v setpriv >/dev/null || { echo "skip: no setpriv"; exit 77; }
work=$(mktemp -d)
db=tp_db_private mdb=tp_db_managed madmin=tp_db_managed_admin
admin=$("$tpdb" conninfo "$cluster" --role admin --dbname postgres)
cleanup() {
	psql "$admin" -qX -c "DROP DATABASE IF EXISTS $db" -c "DROP DATABASE IF EXISTS ${db}_empty" \
		-c "DROP DATABASE IF EXISTS $mdb" \
		-c "DROP ROLE IF EXISTS $madmin" >/dev/null 2>&1 || true
	rm -rf "$work" /tmp/tp-db-private-$$
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
pass() { echo "ok: $*"; }
# run CONN SQL: runs it, output in $out, error text in $err; returns psql's status
run() { psql "$1" -qXAt -v ON_ERROR_STOP=1 -c "$2" >"$work/out" 2>"$work/err" </dev/null; }
ok() { run "$1" "$2" || fail "$3: $(cat "$work/err")"; }
# refused CONN SQL WHAT: must fail for lack of privilege (not for any other reason)
refused() {
	if run "$1" "$2"; then fail "$3: allowed: $2"; fi
	grep -qE 'permission denied|must be superuser|must be owner|must have privileges' "$work/err" ||
		fail "$3: failed for another reason: $(cat "$work/err")"
}
value() { run "$1" "$2" || fail "$3: $(cat "$work/err")"; cat "$work/out"; }

psql "$admin" -qX -v ON_ERROR_STOP=1 -c "DROP DATABASE IF EXISTS $db" >/dev/null
base=$("$tpdb" conninfo "$cluster" --dbname postgres)
ok "$base" "CREATE DATABASE $db" "the owner creates a database"
owner=$("$tpdb" conninfo "$cluster" --dbname $db)
writer=$("$tpdb" conninfo "$cluster" --dbname $db --role writer)
reader=$("$tpdb" conninfo "$cluster" --dbname $db --role reader)
controller=$("$tpdb" conninfo "$cluster" --dbname $db --role controller)
"$tpdb" migrate --db "$owner" >/dev/null || fail "migrate as the owner"
for c in "$owner" "$writer" "$reader" "$controller"; do
	case $c in *password=*) fail "a conninfo carries a password: $c" ;; esac
done

# 1. Files.
mode() { stat -c %a "$1"; }
[ "$(mode "$cluster")" = 700 ] || fail "cluster directory is $(mode "$cluster"), not 700"
[ "$(mode "$cluster/run")" = 700 ] || fail "socket directory is $(mode "$cluster/run")"
sock=$(ls "$cluster"/run/.s.PGSQL.*[0-9])
[ "$(mode "$sock")" = 700 ] || fail "socket is $(mode "$sock")"
for f in "$cluster"/auth/*.pgpass; do
	[ "$(mode "$f")" = 600 ] || fail "$f is $(mode "$f")"
done
[ "$(ls "$cluster"/auth/*.pgpass | wc -l)" = 5 ] || fail "not 5 passfiles"
hba=$(value "$admin" "SELECT string_agg(DISTINCT auth_method, ',') FROM pg_hba_file_rules" "hba")
[ "$hba" = scram-sha-256 ] || fail "pg_hba.conf methods: $hba"
[ "$(value "$admin" "SHOW unix_socket_permissions" perms)" = 0700 ] || fail "socket permissions"
pass "cluster files private, SCRAM only"

# 2. As nobody.
marker=/tmp/tp-db-private-$$
nobody() { setpriv --reuid=nobody --regid=nogroup --clear-groups "$@"; }
for c in "$admin" "$owner" "$reader"; do
	if nobody psql "$c" -qXAt -c "COPY (SELECT 1) TO PROGRAM 'touch $marker'" \
		>"$work/out" 2>"$work/err" </dev/null; then
		fail "nobody ran a statement on $c"
	fi
	grep -q 'Permission denied' "$work/err" || fail "nobody: $(cat "$work/err")"
done
[ ! -e "$marker" ] || fail "nobody ran a program through the cluster"
if nobody cat "$cluster/auth/admin.pgpass" >/dev/null 2>&1; then fail "nobody read a passfile"; fi
if nobody ls "$cluster/run" >/dev/null 2>&1; then fail "nobody listed the socket directory"; fi
pass "nobody cannot reach the socket, read a password or run anything"

# 3. Superusers and server programs.
su_user=$(sed -n 's/.* user=\([^ ]*\) .*/\1/p' <<<"$admin")
supers=$(value "$admin" "SELECT string_agg(rolname, ',') FROM pg_roles WHERE rolsuper" supers)
[ "$supers" = "$su_user" ] || fail "superusers: $supers (only $su_user expected)"
n=$(value "$admin" "SELECT count(*) FROM pg_roles WHERE rolname LIKE 'traceprof%'
	AND (rolsuper OR rolcreaterole OR rolreplication OR rolbypassrls
	     OR pg_has_role(oid, 'pg_execute_server_program', 'USAGE')
	     OR pg_has_role(oid, 'pg_read_server_files', 'USAGE')
	     OR pg_has_role(oid, 'pg_write_server_files', 'USAGE'))" powers)
[ "$n" = 0 ] || fail "$n traceprof roles with superuser powers"
for c in "$owner" "$writer" "$reader" "$controller"; do
	refused "$c" "COPY (SELECT 1) TO PROGRAM 'touch $marker'" "COPY TO PROGRAM"
	refused "$c" "COPY traceprof.config FROM PROGRAM 'id'" "COPY FROM PROGRAM"
	refused "$c" "COPY (SELECT 1) TO '$marker'" "COPY TO a server file"
	refused "$c" "SELECT pg_read_file('/etc/passwd')" "pg_read_file"
	refused "$c" "CREATE ROLE tp_db_private_x SUPERUSER" "CREATE ROLE"
done
[ ! -e "$marker" ] || fail "a traceprof role ran a program"
pass "only $su_user is superuser; no traceprof role runs programs or reads server files"

# 4a. Writer: what the agent does.
day=$(date -u +%F)
ok "$writer" "SELECT traceprof.create_partitions()" "writer creates partitions"
ok "$writer" "INSERT INTO traceprof.functions (function_id, name) VALUES (11, 'main')
	ON CONFLICT DO NOTHING" "writer inserts a function"
ok "$writer" "INSERT INTO traceprof.functions (function_id, name) VALUES (11, 'main')
	ON CONFLICT DO NOTHING" "writer inserts it again"
ok "$writer" "INSERT INTO traceprof.frames (frame_id, function_id) VALUES (21, 11)
	ON CONFLICT DO NOTHING" "writer inserts a frame"
ok "$writer" "INSERT INTO traceprof.stacks (stack_id, frame_ids) VALUES (31, '{21}')
	ON CONFLICT DO NOTHING" "writer inserts a stack (the trigger reads frames)"
ok "$writer" "INSERT INTO traceprof.sources (source_id, service) VALUES (41, 'svc')
	ON CONFLICT DO NOTHING" "writer inserts a source"
printf '%s\t41\t\\N\t0af7651916cd43dd8448eb211c80319c\t19\t{31}\t{3}\n' "$day 12:00:00+00" |
	psql "$writer" -qX -v ON_ERROR_STOP=1 \
		-c "COPY traceprof.samples (bucket, source_id, span_id, trace_id, hz, stacks, counts) FROM STDIN" \
		>/dev/null 2>"$work/err" || fail "writer COPY samples: $(cat "$work/err")"
printf '%s\t41\t5\t0af7651916cd43dd8448eb211c80319c\t1\t{31,0}\t{4000,300}\n' "$day 12:00:00+00" |
	psql "$writer" -qX -v ON_ERROR_STOP=1 \
		-c "COPY traceprof.offcpu (bucket, source_id, span_id, trace_id, kind, stacks, us) FROM STDIN" \
		>/dev/null 2>"$work/err" || fail "writer COPY offcpu: $(cat "$work/err")"
printf '%s\t41\t5\t0af7651916cd43dd8448eb211c80319c\t{31}\t{2}\t{1500000}\n' "$day 12:00:00+00" |
	psql "$writer" -qX -v ON_ERROR_STOP=1 \
		-c "COPY traceprof.gpu (bucket, source_id, span_id, trace_id, stacks, launches, gpu_ns) FROM STDIN" \
		>/dev/null 2>"$work/err" || fail "writer COPY gpu: $(cat "$work/err")"
ok "$writer" "INSERT INTO traceprof.requests (start_time, source_id, trace_id, span_id, duration_us)
	VALUES ('$day 12:00:00+00', 41, '0af7651916cd43dd8448eb211c80319c', 5, 1000)" "writer request"
[ "$(value "$reader" "SELECT function_ids FROM traceprof.stacks WHERE stack_id = 31" fids)" = "{11}" ] ||
	fail "the stack trigger did not fill function_ids for the writer"
ok "$controller" "INSERT INTO traceprof.trace_profile_triggers (trigger_id, name, phase, deadline)
	VALUES ('t1', 't1', 'Active', now() + interval '1 hour')" "controller inserts a trigger"
[ "$(value "$writer" "SELECT traceprof.claim_request('t1', '0af7651916cd43dd8448eb211c80319c')" claim)" = 1 ] ||
	fail "writer claim"
[ "$(value "$writer" "SELECT phase FROM traceprof.trace_profile_triggers WHERE trigger_id = 't1'" phase)" = Active ] ||
	fail "writer reads a trigger's phase"
pass "writer: partitions, dictionaries, COPY samples, offcpu and gpu, requests, claims"

# 4b. Writer: nothing else.
for t in samples requests trigger_samples offcpu gpu sources functions frames stacks routes cohort_rollup; do
	refused "$writer" "SELECT * FROM traceprof.$t LIMIT 1" "writer reads $t"
done
refused "$writer" "SELECT spec, trace_ids FROM traceprof.trace_profile_triggers" "writer reads trigger specs"
refused "$writer" "SELECT * FROM traceprof.samples_p${day//-/}" "writer reads a partition"
refused "$writer" "SELECT traceprof.trace_summary('0af7651916cd43dd8448eb211c80319c')" "writer calls the API"
refused "$writer" "UPDATE traceprof.trace_profile_triggers SET max_requests = 1000" "writer rewrites a trigger"
refused "$writer" "SELECT traceprof.drop_partitions('1 hour')" "writer drops partitions"
refused "$writer" "DROP TABLE traceprof.samples_p${day//-/}" "writer drops a partition"
refused "$writer" "ALTER TABLE traceprof.samples ADD COLUMN x int" "writer alters a table"
refused "$writer" "CREATE TABLE traceprof.x (a int)" "writer creates a table"
refused "$writer" "CREATE TABLE public.x (a int)" "writer creates a table in public"
refused "$writer" "CREATE FUNCTION traceprof.x() RETURNS int LANGUAGE sql AS 'SELECT 1'" "writer creates a function"
# Every table: no UPDATE, DELETE or TRUNCATE; INSERT only where granted.
all_writes() { # CONN ALLOWED_INSERTS: a DO block that tries every write, counts refusals
	value "$1" "DO \$\$
	DECLARE t record; stmt text; n int := 0;
	BEGIN
	  FOR t IN SELECT c.oid::regclass AS rel, c.relname,
	                  (SELECT quote_ident(attname) FROM pg_attribute WHERE attrelid = c.oid AND attnum = 1) AS col
	           FROM pg_class c JOIN pg_namespace s ON s.oid = c.relnamespace
	           WHERE s.nspname = 'traceprof' AND c.relkind IN ('r', 'p') LOOP
	    FOREACH stmt IN ARRAY ARRAY[format('UPDATE %s SET %s = %s', t.rel, t.col, t.col),
	                                format('DELETE FROM %s', t.rel), format('TRUNCATE %s', t.rel),
	                                format('INSERT INTO %s DEFAULT VALUES', t.rel)] LOOP
	      CONTINUE WHEN stmt LIKE 'INSERT%' AND t.relname = ANY (string_to_array('$2', ','));
	      BEGIN
	        EXECUTE stmt;
	        RAISE EXCEPTION 'allowed: %', stmt USING ERRCODE = 'P0099';
	      EXCEPTION WHEN insufficient_privilege THEN n := n + 1;
	      END;
	    END LOOP;
	  END LOOP;
	  RAISE NOTICE 'refused=%', n;
	END \$\$" "$3" >/dev/null
	sed -n 's/.*refused=\([0-9]*\).*/\1/p' "$work/err"
}
n=$(all_writes "$writer" "samples,requests,trigger_samples,offcpu,gpu,sources,functions,frames,stacks,routes" "writer writes")
[ "${n:-0}" -ge 60 ] || fail "writer: only ${n:-0} writes refused"
pass "writer reads back nothing, changes no schema, writes nothing else ($n writes refused)"

# 4c. Reader: reads everything, writes nothing.
ok "$reader" "SELECT count(*) FROM traceprof.samples, traceprof.requests_v, traceprof.triggers_v" "reader reads"
ok "$reader" "SELECT traceprof.trace_summary('0af7651916cd43dd8448eb211c80319c')" "reader calls the API"
[ "$(value "$reader" "SELECT stack FROM traceprof.trace_folded('0af7651916cd43dd8448eb211c80319c')" folded)" != "" ] ||
	fail "reader: no folded stacks for the trace the writer wrote"
[ "$(value "$reader" "SELECT round(blocked_ms::numeric, 1) FROM traceprof.trace_time_breakdown('0af7651916cd43dd8448eb211c80319c') WHERE span_id = '0000000000000005'" breakdown)" = 4.3 ] ||
	fail "reader: the off-CPU time the writer wrote is not in the breakdown: $(cat "$work/out") $(cat "$work/err")"
n=$(all_writes "$reader" "" "reader writes")
tables=$(value "$reader" "SELECT count(*) FROM pg_class c JOIN pg_namespace s ON s.oid = c.relnamespace
	WHERE s.nspname = 'traceprof' AND c.relkind IN ('r', 'p')" tables)
[ "$n" = $((tables * 4)) ] || fail "reader: $n of $((tables * 4)) writes refused"
for f in "create_partitions()" "drop_partitions('1 hour')" "expire_triggers()" "refresh_rollups()" \
	"claim_request('t1', '0af7651916cd43dd8448eb211c80319c')"; do
	refused "$reader" "SELECT traceprof.$f" "reader calls $f"
done
refused "$reader" "CREATE TABLE traceprof.x (a int)" "reader creates a table"
pass "reader reads and calls the API; all $n writes on $tables tables refused"

# 4d. Migrations: nothing pending is fine for every role (the programs check
# at connect); with something pending only the owner may, and says so.
for c in "$writer" "$reader" "$controller"; do
	"$tpdb" migrate --db "$c" >/dev/null 2>"$work/err" || fail "migrate with nothing pending: $(cat "$work/err")"
done
ok "$base" "DROP DATABASE IF EXISTS ${db}_empty" "drop"
ok "$base" "CREATE DATABASE ${db}_empty" "an empty database"
if "$tpdb" migrate --db "$("$tpdb" conninfo "$cluster" --dbname ${db}_empty --role writer)" \
	>/dev/null 2>"$work/err"; then
	fail "the writer migrated an empty database"
fi
grep -q "need the owner role" "$work/err" || fail "no hint to migrate as the owner: $(cat "$work/err")"
ok "$base" "DROP DATABASE ${db}_empty" "drop"
pass "migrate: a no-op for every role when nothing is pending; else the owner's, with a hint"

# 4e. Controller: the trigger table only.
ok "$controller" "UPDATE traceprof.trace_profile_triggers SET reason = 'x' WHERE trigger_id = 't1'" "controller updates"
ok "$controller" "SELECT traceprof.expire_triggers()" "controller expires triggers"
ok "$controller" "SELECT traceprof.controller_take_term('replica')" "controller takes a term"
ok "$controller" "SELECT traceprof.controller_term()" "controller reads its term"
refused "$writer" "SELECT traceprof.controller_take_term('writer')" "writer takes a term"
refused "$reader" "SELECT traceprof.controller_take_term('reader')" "reader takes a term"
refused "$reader" "SELECT traceprof.controller_term()" "reader locks the term"
refused "$controller" "UPDATE traceprof.controller_leader SET term = 1" "controller sets the term by hand"
refused "$controller" "SELECT * FROM traceprof.samples LIMIT 1" "controller reads samples"
refused "$controller" "INSERT INTO traceprof.samples (bucket, source_id, hz, stacks) VALUES (now(), 1, 19, '{1}')" "controller writes samples"
refused "$controller" "DELETE FROM traceprof.trace_profile_triggers" "controller deletes triggers"
pass "controller: the trigger table and expire_triggers only"

# 5. A partition made later by the writer: the owner's, readable by the reader only.
ok "$writer" "SELECT traceprof.create_partitions('2030-01-01', '2030-01-01')" "writer makes a 2030 partition"
[ "$(value "$owner" "SELECT relowner::regrole FROM pg_class WHERE relname = 'samples_p20300101'" own)" = traceprof_owner ] ||
	fail "new partition not owned by traceprof_owner"
ok "$reader" "SELECT count(*) FROM traceprof.samples_p20300101" "reader reads the new partition"
refused "$writer" "SELECT count(*) FROM traceprof.samples_p20300101" "writer reads the new partition"
refused "$writer" "TRUNCATE traceprof.samples_p20300101" "writer truncates the new partition"
pass "later partitions: owned by traceprof_owner, same grants"

# 6. A managed PostgreSQL: a non-superuser administrator (CREATEROLE,
# CREATEDB) made the schema up to 009 and wrote data; then migrates.
pw=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
printf '*:*:*:%s:%s\n' "$madmin" "$pw" >"$work/madmin.pgpass"
chmod 600 "$work/madmin.pgpass"
ok "$admin" "DROP DATABASE IF EXISTS $mdb" "drop"
ok "$admin" "DROP ROLE IF EXISTS $madmin" "drop role"
ok "$admin" "CREATE ROLE $madmin LOGIN CREATEROLE CREATEDB PASSWORD '$pw'" "managed admin role"
ok "$admin" "CREATE DATABASE $mdb OWNER $madmin" "managed database"
mconn="$(sed "s/ user=[^ ]*/ user=$madmin/; s| passfile=[^ ]*| passfile=$work/madmin.pgpass|; s/dbname=postgres/dbname=$mdb/" <<<"$admin")"
ok "$mconn" "CREATE SCHEMA traceprof; CREATE TABLE traceprof.schema_migrations (version int PRIMARY KEY,
	name text NOT NULL, checksum text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())" "schema"
for f in "$sqldir"/00[1-9]_*.sql; do
	psql "$mconn" -qX1 -v ON_ERROR_STOP=1 -f "$f" >/dev/null 2>"$work/err" || fail "$f: $(cat "$work/err")"
	v=$(basename "$f" | cut -c1-3) nm=$(basename "$f" .sql)
	ok "$mconn" "INSERT INTO traceprof.schema_migrations VALUES ($((10#$v)), '$nm', '$(md5sum <"$f" | cut -c1-32)')" "record $nm"
done
ok "$mconn" "INSERT INTO traceprof.sources (source_id, service) VALUES (7, 'old');
	INSERT INTO traceprof.samples (bucket, source_id, hz, stacks) VALUES (now(), 7, 19, '{0}')" "old data"
"$tpdb" migrate --db "$mconn" >/dev/null 2>"$work/err" || fail "managed migrate: $(cat "$work/err")"
mreader=$("$tpdb" conninfo "$cluster" --dbname $mdb --role reader)
mwriter=$("$tpdb" conninfo "$cluster" --dbname $mdb --role writer)
[ "$(value "$mreader" "SELECT count(*) FROM traceprof.samples s JOIN traceprof.sources USING (source_id) WHERE service = 'old'" old)" = 1 ] ||
	fail "the old data is not readable by the reader"
others=$(value "$mconn" "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
	WHERE n.nspname = 'traceprof' AND c.relkind IN ('r', 'p', 'v') AND c.relowner <> 'traceprof_owner'::regrole" others)
[ "$others" = 0 ] || fail "$others relations not handed to traceprof_owner"
refused "$mwriter" "SELECT * FROM traceprof.samples" "managed: writer reads samples"
ok "$mwriter" "INSERT INTO traceprof.samples (bucket, source_id, hz, stacks) VALUES (now(), 7, 19, '{0}')" "managed: writer writes"
psql "$mconn" -qX1 -v ON_ERROR_STOP=1 -f "$sqldir/010_roles.sql" >/dev/null 2>"$work/err" ||
	fail "010 a second time: $(cat "$work/err")"
refused "$mwriter" "SELECT * FROM traceprof.samples" "managed, 010 twice: writer reads samples"
pass "010 on a managed-style database with data, twice"
echo "ok: db_private"
