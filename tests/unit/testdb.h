/*
 * testdb.h - a fresh, migrated database in the test cluster for one test.
 * The cluster directory comes from TRACEPROF_TEST_PG (set by ctest).
 */
#ifndef TRACEPROF_TESTDB_H
#define TRACEPROF_TESTDB_H

#include <stdbool.h>
#include <stddef.h>

#include <libpq-fe.h>

/* Drops and creates database "name", applies the schema, writes its conninfo. */
int testdb_create(const char *name, char *conninfo, size_t len);
/* Connects; exits the test with a message on failure. The caller PQfinish()es. */
PGconn *testdb_connect(const char *conninfo);
/* Runs sql, which must succeed; returns the result (caller PQclear()s) or exits. */
PGresult *testdb_exec(PGconn *conn, const char *sql);
/* Runs a query returning one value as a long long; exits on error. */
long long testdb_scalar(PGconn *conn, const char *sql);
/* Runs a query returning one value as text, "(no rows)" when none; the caller frees it. */
char *testdb_text(PGconn *conn, const char *sql);

struct store;
/* A store on conninfo (text or binary COPY, its row bound, application name); exits on failure. */
struct store *testdb_store(const char *conninfo, bool text, size_t max_rows, const char *app);

#endif
