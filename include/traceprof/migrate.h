/*
 * migrate.h - the numbered schema migrations of sql/ and the SQL API of
 * sql/api/ (every function and view), embedded at build time.
 *
 * Pending migrations are applied in version order and recorded in
 * traceprof.schema_migrations, then the API files are applied (CREATE OR
 * REPLACE), all in one transaction; applying again is a no-op, so every
 * binary may call migrate_apply() at start-up. A session-level advisory
 * lock serialises concurrent callers (several agents starting at once).
 */
#ifndef TRACEPROF_MIGRATE_H
#define TRACEPROF_MIGRATE_H

#include <libpq-fe.h>

struct migration {
	int version;	  /* the NNN of sql/NNN_name.sql */
	const char *name; /* file name without .sql */
	const char *sql;  /* the file's text */
};

/* One file of sql/api/, in the order of sql/api/api.list. */
struct migration_api_file {
	const char *name; /* file name without .sql */
	const char *sql;  /* the file's text */
};

extern const struct migration migrations[];
extern const int migrations_count;
extern const struct migration_api_file migration_api_files[];
extern const int migration_api_files_count;

/* The highest version this binary knows. */
int migrate_latest_version(void);
/* The highest applied version, 0 for an empty database, or -errno. */
int migrate_current_version(PGconn *conn);
/*
 * Applies every pending migration and, when one was applied, the SQL API
 * after them, in one transaction. *applied (may be NULL) receives how many
 * migrations were applied now. Returns 0 or -errno; on error nothing of the
 * run remains and the message was logged.
 */
int migrate_apply(PGconn *conn, int *applied);
/*
 * The same, stopping after max_version (tests of in-place upgrades); the
 * API is applied only when max_version reaches the latest version.
 */
int migrate_apply_upto(PGconn *conn, int max_version, int *applied);
/*
 * As migrate_apply(), and applies the SQL API even when no migration was
 * pending (traceprof-db migrate: a binary whose functions changed without a
 * schema change). *api_files (may be NULL) receives how many API files were
 * applied: 0 when the database is newer than this binary (left alone).
 */
int migrate_apply_all(PGconn *conn, int *applied, int *api_files);

#endif
