/*
 * test_migrate: migrations apply from empty, re-applying is a no-op, and an
 * older schema (only migration 1) with data in it upgrades in place.
 */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "testdb.h"
#include "traceprof/log.h"
#include "traceprof/migrate.h"

int main(void)
{
	char ci[4200];
	PGconn *conn;
	int applied = -1;

	log_set_level(TP_LOG_QUIET);
	CHECK(testdb_create("tp_migrate", ci, sizeof(ci)) == 0, "fresh database migrated");
	conn = testdb_connect(ci);
	CHECK(migrate_current_version(conn) == migrate_latest_version(), "at latest version %d",
	      migrate_latest_version());
	CHECK(testdb_scalar(conn, "SELECT count(*) FROM traceprof.schema_migrations") ==
		  migrations_count,
	      "every migration recorded");
	CHECK(migrate_apply(conn, &applied) == 0 && applied == 0, "re-apply applies nothing (%d)",
	      applied);

	/* In-place upgrade from version 1 keeps data. */
	PQclear(testdb_exec(conn, "DROP SCHEMA traceprof CASCADE"));
	CHECK(migrate_current_version(conn) == 0, "empty database is version 0");
	CHECK(migrate_apply_upto(conn, 1, &applied) == 0 && applied == 1, "apply only 001");
	PQclear(testdb_exec(conn, "INSERT INTO traceprof.sources (source_id, service) "
				  "VALUES (42, 'old-svc')"));
	CHECK(migrate_apply(conn, &applied) == 0 && applied == migrations_count - 1,
	      "upgrade applies the rest (%d)", applied);
	CHECK(testdb_scalar(conn, "SELECT count(*) FROM traceprof.sources WHERE service = "
				  "'old-svc'") == 1,
	      "data kept across the upgrade");
	CHECK(migrate_current_version(conn) == migrate_latest_version(), "upgraded to latest");

	/* A changed migration text is reported, not re-run, and not fatal. */
	PQclear(testdb_exec(conn, "UPDATE traceprof.schema_migrations SET checksum = 'x' "
				  "WHERE version = 1"));
	CHECK(migrate_apply(conn, &applied) == 0 && applied == 0, "changed text: nothing re-run");

	/* A failing migration leaves nothing behind. */
	PQclear(testdb_exec(conn, "DELETE FROM traceprof.schema_migrations WHERE version = 2"));
	CHECK(migrate_apply(conn, &applied) != 0, "re-running 002 over itself fails");
	CHECK(testdb_scalar(conn, "SELECT count(*) FROM traceprof.schema_migrations WHERE "
				  "version = 2") == 0,
	      "failed migration not recorded");
	PQfinish(conn);
	return check_done();
}
