/*
 * migrate.c - apply the embedded sql/NNN_*.sql migrations in order.
 *
 * Each migration runs in one transaction together with the row that records
 * it, so a crash leaves either all of it or none. A checksum of the text is
 * recorded; if an applied migration's text differs from the one built into
 * this binary, the binary and the database disagree about the schema and we
 * say so (the database is not touched).
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

/* Returns 1 if applied now, 0 if it was already applied, -errno on error. */
static int apply_one(PGconn *conn, const struct migration *m)
{
	char version[16];
	const char *params[3];
	PGresult *res;
	int applied_before;
	int err;

	snprintf(version, sizeof(version), "%d", m->version);
	params[0] = version;
	params[1] = m->sql;
	params[2] = m->name;
	res = PQexecParams(conn,
			   "SELECT checksum = md5($2) FROM traceprof.schema_migrations "
			   "WHERE version = $1::int",
			   2, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		log_error("migrate: cannot read schema_migrations: %s", PQresultErrorMessage(res));
		PQclear(res);
		return -EIO;
	}
	applied_before = PQntuples(res) == 1;
	if (applied_before && strcmp(PQgetvalue(res, 0, 0), "t") != 0)
		log_warn("migrate: migration %s was applied from a different text than this "
			 "binary carries; the database keeps the applied version",
			 m->name);
	PQclear(res);
	if (applied_before)
		return 0;

	err = exec_ok(conn, "BEGIN", "begin");
	if (err)
		return err;
	if (m->version > MIGRATE_ROLES_VERSION) {
		err = exec_ok(conn, set_owner_role, "set role traceprof_owner");
		if (err) {
			exec_ok(conn, "ROLLBACK", "rollback");
			return err;
		}
	}
	res = PQexec(conn, m->sql);
	if (PQresultStatus(res) != PGRES_COMMAND_OK && PQresultStatus(res) != PGRES_TUPLES_OK) {
		log_error("migrate: migration %s failed: %s", m->name, PQresultErrorMessage(res));
		hint_privileges(res);
		PQclear(res);
		exec_ok(conn, "ROLLBACK", "rollback");
		return -EIO;
	}
	PQclear(res);
	res = PQexecParams(conn,
			   "INSERT INTO traceprof.schema_migrations (version, name, checksum) "
			   "VALUES ($1::int, $3, md5($2))",
			   3, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_COMMAND_OK) {
		log_error("migrate: cannot record migration %s: %s", m->name,
			  PQresultErrorMessage(res));
		PQclear(res);
		exec_ok(conn, "ROLLBACK", "rollback");
		return -EIO;
	}
	PQclear(res);
	err = exec_ok(conn, "COMMIT", "commit");
	if (err)
		return err;
	log_debug("migrate: applied migration=%s", m->name);
	return 1;
}

int migrate_apply(PGconn *conn, int *applied)
{
	return migrate_apply_upto(conn, INT_MAX, applied);
}

int migrate_apply_upto(PGconn *conn, int max_version, int *applied)
{
	PGresult *res;
	bool fresh;
	int count = 0;
	int err;

	if (applied)
		*applied = 0;
	err = exec_ok(conn, "SELECT pg_advisory_lock(" MIGRATE_LOCK_KEY ")", "lock");
	if (err)
		return err;
	/*
	 * Only when missing: CREATE ... IF NOT EXISTS still needs the privilege
	 * to create, which the writer, reader and controller roles lack; they
	 * call this at every connect to see that nothing is pending.
	 */
	res = PQexec(conn, "SELECT to_regclass('traceprof.schema_migrations') IS NULL");
	fresh = PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1 ||
		strcmp(PQgetvalue(res, 0, 0), "f") != 0;
	PQclear(res);
	if (fresh)
		err = exec_ok(conn,
			      "SET client_min_messages = warning;"
			      "CREATE SCHEMA IF NOT EXISTS traceprof;"
			      "CREATE TABLE IF NOT EXISTS traceprof.schema_migrations ("
			      " version int PRIMARY KEY,"
			      " name text NOT NULL,"
			      " checksum text NOT NULL,"
			      " applied_at timestamptz NOT NULL DEFAULT now())",
			      "create schema_migrations");
	for (int i = 0; !err && i < migrations_count && migrations[i].version <= max_version; i++) {
		int r = apply_one(conn, &migrations[i]);

		if (r < 0)
			err = r;
		else
			count += r;
	}
	exec_ok(conn, "SELECT pg_advisory_unlock(" MIGRATE_LOCK_KEY ")", "unlock");
	if (applied)
		*applied = count;
	return err;
}
