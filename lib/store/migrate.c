/*
 * migrate.c - apply the embedded sql/NNN_*.sql migrations in order, then the
 * SQL API (sql/api/, in the order of api.list).
 *
 * The pending migrations, the rows that record them and the API run in one
 * transaction, so a crash leaves either all of it or none. A checksum of
 * each migration's text is recorded; if an applied migration's text differs
 * from the one built into this binary (and from the text it was released
 * with), the binary and the database disagree about the schema and we say
 * so (the database is not touched).
 */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "traceprof/log.h"
#include "traceprof/migrate.h"

#define MIGRATE_LOCK_KEY      "7353042127001" /* pg_advisory_lock key: "traceprof migrate" */
#define MIGRATE_ROLES_VERSION 10	      /* 010_roles.sql: traceprof_owner owns the schema */

/*
 * md5 of migrations 1..12 as released in 0.1.0 (tests/sql/upgrade/v0.1.0),
 * before their functions and views moved to sql/api/: a database that
 * applied those texts has the same tables, and its functions are replaced
 * by the API, so those checksums are as valid as the current ones.
 */
static const char *const released_checksums[] = {
    NULL,
    "41b95f6e0c2f50df6cb2f00d81d27e93",
    "2e57db47fa048d999e362018abd7c530",
    "4812b9899964f09b49c3b13f50fa1dc8",
    "163f90a2900ddfcde37c2f34c1093b48",
    "33b000abf96975d8cfbe677de17f49c4",
    "fccf85194ca57c6b51cd9822dc4f4ed6",
    "c96dcbc0235bb45d4dc5e6a025b422fe",
    "551ff9f44c5e24d90acf9099d35df00f",
    "b6cdb2391207884a05e353ba6d947f0a",
    "c893f1a0eb404a27bf0a261d59982426",
    "af376d65f12f5e435fe785622c3f0dce",
    "58e7b926d97635df3aa7a0450304c4e6",
};
#define RELEASED_COUNT ((int)(sizeof(released_checksums) / sizeof(released_checksums[0])))

/*
 * Migrations after 010 run as traceprof_owner, so what they create belongs to
 * it and gets its default privileges, whoever migrates (a superuser, or a
 * managed PostgreSQL's administrator that is a member of it).
 */
static const char set_owner_role[] =
    "DO $$ BEGIN "
    "IF current_user <> 'traceprof_owner' "
    "AND pg_has_role(current_user, 'traceprof_owner', 'USAGE') THEN "
    "SET LOCAL ROLE traceprof_owner; "
    "END IF; END $$";

/* After a failed statement: says which role migrates when privileges lacked. */
static void hint_privileges(const PGresult *res)
{
	const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);

	if (state && strcmp(state, "42501") == 0)
		log_error("migrate: migrations need the owner role (traceprof_owner, or a role "
			  "that may act as it); 'traceprof-db conninfo DIR --role owner' prints it "
			  "for an embedded cluster");
}

static int exec_ok(PGconn *conn, const char *sql, const char *what)
{
	PGresult *res = PQexec(conn, sql);
	ExecStatusType st = PQresultStatus(res);
	int err = 0;

	if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
		log_error("migrate: %s failed: %s", what, PQresultErrorMessage(res));
		hint_privileges(res);
		err = -EIO;
	}
	PQclear(res);
	return err;
}

int migrate_latest_version(void)
{
	int v = 0;

	for (int i = 0; i < migrations_count; i++)
		if (migrations[i].version > v)
			v = migrations[i].version;
	return v;
}

int migrate_current_version(PGconn *conn)
{
	PGresult *res;
	int v = -EIO;

	/* Two queries: a reference to a missing table fails at parse time. */
	res = PQexec(conn, "SELECT to_regclass('traceprof.schema_migrations') IS NOT NULL");
	if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1 &&
	    strcmp(PQgetvalue(res, 0, 0), "t") != 0)
		v = 0;
	else if (PQresultStatus(res) == PGRES_TUPLES_OK) {
		PQclear(res);
		res = PQexec(conn,
			     "SELECT coalesce(max(version), 0) FROM traceprof.schema_migrations");
		if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1)
			v = atoi(PQgetvalue(res, 0, 0));
	}
	if (v < 0)
		log_error("migrate: cannot read schema version: %s", PQresultErrorMessage(res));
	PQclear(res);
	return v;
}

static bool exec_sql_ok(const PGresult *res)
{
	ExecStatusType st = PQresultStatus(res);

	/* A migration of comments only is an empty query. */
	return st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK || st == PGRES_EMPTY_QUERY;
}

/* Was m applied before? 1 yes, 0 no, -EIO. Warns about a changed text. */
static int applied_before(PGconn *conn, const struct migration *m)
{
	char version[16];
	const char *params[3];
	const char *released;
	PGresult *res;
	int before;

	snprintf(version, sizeof(version), "%d", m->version);
	released = m->version < RELEASED_COUNT ? released_checksums[m->version] : NULL;
	params[0] = version;
	params[1] = m->sql;
	params[2] = released ? released : "";
	res = PQexecParams(conn,
			   "SELECT checksum IN (md5($2), $3) FROM traceprof.schema_migrations "
			   "WHERE version = $1::int",
			   3, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		log_error("migrate: cannot read schema_migrations: %s", PQresultErrorMessage(res));
		PQclear(res);
		return -EIO;
	}
	before = PQntuples(res) == 1;
	if (before && strcmp(PQgetvalue(res, 0, 0), "t") != 0)
		log_warn("migrate: migration %s was applied from a different text than this "
			 "binary carries; the database keeps the applied version",
			 m->name);
	PQclear(res);
	return before;
}

/*
 * Inside the run's transaction. Returns 1 if applied now, 0 if it was
 * already applied, -errno on error.
 */
static int apply_one(PGconn *conn, const struct migration *m, bool *as_owner)
{
	char version[16];
	const char *params[3];
	PGresult *res;
	int before = applied_before(conn, m);
	int err;

	if (before)
		return before < 0 ? before : 0;
	if (m->version > MIGRATE_ROLES_VERSION && !*as_owner) {
		err = exec_ok(conn, set_owner_role, "set role traceprof_owner");
		if (err)
			return err;
		*as_owner = true;
	}
	res = PQexec(conn, m->sql);
	if (!exec_sql_ok(res)) {
		log_error("migrate: migration %s failed: %s", m->name, PQresultErrorMessage(res));
		hint_privileges(res);
		PQclear(res);
		return -EIO;
	}
	PQclear(res);
	snprintf(version, sizeof(version), "%d", m->version);
	params[0] = version;
	params[1] = m->sql;
	params[2] = m->name;
	res = PQexecParams(conn,
			   "INSERT INTO traceprof.schema_migrations (version, name, checksum) "
			   "VALUES ($1::int, $3, md5($2))",
			   3, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_COMMAND_OK) {
		log_error("migrate: cannot record migration %s: %s", m->name,
			  PQresultErrorMessage(res));
		PQclear(res);
		return -EIO;
	}
	PQclear(res);
	log_debug("migrate: applied migration=%s", m->name);
	return 1;
}

/*
 * Inside the run's transaction, after the migrations: every API file in
 * order, as traceprof_owner. CREATE OR REPLACE makes it idempotent.
 */
static int apply_api(PGconn *conn)
{
	int err = exec_ok(conn, set_owner_role, "set role traceprof_owner");

	for (int i = 0; !err && i < migration_api_files_count; i++) {
		const struct migration_api_file *f = &migration_api_files[i];
		PGresult *res = PQexec(conn, f->sql);

		if (!exec_sql_ok(res)) {
			log_error("migrate: sql/api/%s.sql failed: %s", f->name,
				  PQresultErrorMessage(res));
			hint_privileges(res);
			err = -EIO;
		}
		PQclear(res);
	}
	if (!err)
		log_debug("migrate: applied %d api files", migration_api_files_count);
	return err;
}

static int ensure_migrations_table(PGconn *conn)
{
	PGresult *res;
	bool fresh;

	/*
	 * Only when missing: CREATE ... IF NOT EXISTS still needs the privilege
	 * to create, which the writer, reader and controller roles lack; they
	 * call this at every connect to see that nothing is pending.
	 */
	res = PQexec(conn, "SELECT to_regclass('traceprof.schema_migrations') IS NULL");
	fresh = PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1 ||
		strcmp(PQgetvalue(res, 0, 0), "f") != 0;
	PQclear(res);
	if (!fresh)
		return 0;
	return exec_ok(conn,
		       "SET client_min_messages = warning;"
		       "CREATE SCHEMA IF NOT EXISTS traceprof;"
		       "CREATE TABLE IF NOT EXISTS traceprof.schema_migrations ("
		       " version int PRIMARY KEY,"
		       " name text NOT NULL,"
		       " checksum text NOT NULL,"
		       " applied_at timestamptz NOT NULL DEFAULT now())",
		       "create schema_migrations");
}

static bool recorded(const PGresult *res, int version)
{
	for (int r = 0; r < PQntuples(res); r++)
		if (atoi(PQgetvalue(res, r, 0)) == version)
			return true;
	return false;
}

/* Any migration of this binary up to max_version not recorded? 1, 0, -EIO. */
static int pending(PGconn *conn, int max_version)
{
	PGresult *res = PQexec(conn, "SELECT version FROM traceprof.schema_migrations");
	int found = 0;

	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		log_error("migrate: cannot read schema_migrations: %s", PQresultErrorMessage(res));
		PQclear(res);
		return -EIO;
	}
	for (int i = 0; !found && i < migrations_count && migrations[i].version <= max_version; i++)
		found = !recorded(res, migrations[i].version);
	PQclear(res);
	return found;
}

/* May this session act as traceprof_owner (and so replace the API)? */
static bool may_own(PGconn *conn)
{
	PGresult *res =
	    PQexec(conn, "SELECT CASE WHEN to_regrole('traceprof_owner') IS NOT NULL "
			 "THEN pg_has_role(current_user, 'traceprof_owner', 'USAGE') END");
	bool yes = PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1 &&
		   strcmp(PQgetvalue(res, 0, 0), "t") == 0;

	PQclear(res);
	return yes;
}

/*
 * The run, in one transaction: pending migrations up to max_version, then
 * the API when a migration was applied and max_version reaches the latest
 * version, or when force_api, the database is not newer than this binary and
 * this session may act as the owner (the writer, reader and controller
 * migrate with nothing pending to check the schema: the API is left alone).
 */
static int run(PGconn *conn, int max_version, bool force_api, int *applied, int *api_files)
{
	bool as_owner = false;
	bool api;
	int count = 0;
	int err = pending(conn, max_version);

	if (err < 0)
		return err;
	api =
	    force_api && migrate_current_version(conn) <= migrate_latest_version() && may_own(conn);
	if (!err && !api)
		return 0; /* nothing to do: no transaction, no privilege needed */
	err = exec_ok(conn, "BEGIN", "begin");
	for (int i = 0; !err && i < migrations_count && migrations[i].version <= max_version; i++) {
		int r = apply_one(conn, &migrations[i], &as_owner);

		if (r < 0)
			err = r;
		else
			count += r;
	}
	api = api || (count > 0 && max_version >= migrate_latest_version());
	if (!err && api)
		err = apply_api(conn);
	if (!err)
		err = exec_ok(conn, "COMMIT", "commit");
	else
		exec_ok(conn, "ROLLBACK", "rollback");
	if (!err) {
		*applied = count;
		*api_files = api ? migration_api_files_count : 0;
	}
	return err;
}

static int locked_run(PGconn *conn, int max_version, bool force_api, int *applied, int *api_files)
{
	int count = 0, files = 0;
	int err;

	if (applied)
		*applied = 0;
	if (api_files)
		*api_files = 0;
	err = exec_ok(conn, "SELECT pg_advisory_lock(" MIGRATE_LOCK_KEY ")", "lock");
	if (err)
		return err;
	err = ensure_migrations_table(conn);
	if (!err)
		err = run(conn, max_version, force_api, &count, &files);
	exec_ok(conn, "SELECT pg_advisory_unlock(" MIGRATE_LOCK_KEY ")", "unlock");
	if (applied)
		*applied = count;
	if (api_files)
		*api_files = files;
	return err;
}

int migrate_apply(PGconn *conn, int *applied)
{
	return migrate_apply_upto(conn, INT_MAX, applied);
}

int migrate_apply_upto(PGconn *conn, int max_version, int *applied)
{
	return locked_run(conn, max_version, false, applied, NULL);
}

int migrate_apply_all(PGconn *conn, int *applied, int *api_files)
{
	return locked_run(conn, INT_MAX, true, applied, api_files);
}
