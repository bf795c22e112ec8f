/*
 * migrate.h - the numbered schema migrations of sql/, embedded at build time.
 *
 * Migrations are applied in version order, each in its own transaction, and
 * recorded in traceprof.schema_migrations; applying them again is a no-op, so
 * every binary may call migrate_apply() at start-up. A session-level advisory
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

extern const struct migration migrations[];
extern const int migrations_count;

/* The highest version this binary knows. */
int migrate_latest_version(void);
/* The highest applied version, 0 for an empty database, or -errno. */
int migrate_current_version(PGconn *conn);
/*
 * Applies every pending migration. *applied (may be NULL) receives how many
 * were applied now. Returns 0 or -errno; on error nothing of the failing
 * migration remains and the message was logged.
 */
int migrate_apply(PGconn *conn, int *applied);
/* The same, stopping after max_version (tests of in-place upgrades). */
int migrate_apply_upto(PGconn *conn, int max_version, int *applied);

#endif
