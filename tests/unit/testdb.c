/*
 * testdb.c - fresh databases in the shared test cluster, and the harness
 * counters of check.h.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "testdb.h"
#include "traceprof/migrate.h"
#include "traceprof/pgcluster.h"
#include "traceprof/store.h"

int check_passed;
int check_failed;

int check_done(void)
{
	printf("%d passed, %d failed\n", check_passed, check_failed);
	return check_failed ? 1 : 0;
}

static const char *cluster_dir(void)
{
	const char *dir = getenv("TRACEPROF_TEST_PG");

	if (!dir || !*dir) {
		fprintf(stderr, "TRACEPROF_TEST_PG is not set; run this test through ctest\n");
		exit(2);
	}
	return dir;
}

PGconn *testdb_connect(const char *conninfo)
{
	PGconn *conn = PQconnectdb(conninfo);

	if (PQstatus(conn) != CONNECTION_OK) {
		fprintf(stderr, "cannot connect (%s): %s", conninfo, PQerrorMessage(conn));
		exit(2);
	}
	return conn;
}

PGresult *testdb_exec(PGconn *conn, const char *sql)
{
	PGresult *res = PQexec(conn, sql);

	if (PQresultStatus(res) != PGRES_COMMAND_OK && PQresultStatus(res) != PGRES_TUPLES_OK) {
		fprintf(stderr, "query failed: %s\n%s", sql, PQresultErrorMessage(res));
		exit(2);
	}
	return res;
}

long long testdb_scalar(PGconn *conn, const char *sql)
{
	PGresult *res = testdb_exec(conn, sql);
	long long v;

	if (PQntuples(res) != 1 || PQnfields(res) < 1) {
		fprintf(stderr, "expected one value from: %s\n", sql);
		exit(2);
	}
	v = atoll(PQgetvalue(res, 0, 0));
	PQclear(res);
	return v;
}

int testdb_create(const char *name, char *conninfo, size_t len)
{
	char admin[4200];
	char sql[256];
	PGconn *conn;
	int rc;

	if (pgcluster_conninfo(cluster_dir(), "postgres", admin, sizeof(admin)))
		return -1;
	conn = testdb_connect(admin);
	snprintf(sql, sizeof(sql), "DROP DATABASE IF EXISTS %s", name);
	PQclear(testdb_exec(conn, sql));
	snprintf(sql, sizeof(sql), "CREATE DATABASE %s", name);
	PQclear(testdb_exec(conn, sql));
	PQfinish(conn);
	if (pgcluster_conninfo(cluster_dir(), name, conninfo, len))
		return -1;
	conn = testdb_connect(conninfo);
	rc = migrate_apply(conn, NULL);
	PQfinish(conn);
	return rc;
}

char *testdb_text(PGconn *conn, const char *sql)
{
	PGresult *res = testdb_exec(conn, sql);
	char *v = strdup(PQntuples(res) ? PQgetvalue(res, 0, 0) : "(no rows)");

	PQclear(res);
	return v;
}

struct store *testdb_store(const char *conninfo, bool text, size_t max_rows, const char *app)
{
	struct store_opts o = {.max_rows = max_rows, .text_copy = text, .app_name = app};
	struct store *st = store_open(conninfo, &o);

	if (!st) {
		fprintf(stderr, "store_open failed: %s\n", strerror(errno));
		exit(2);
	}
	return st;
}

int check_skip_without_bpf(void)
{
	if (geteuid() != 0) {
		printf("skipped: the BPF sampler needs root\n");
		return 77;
	}
	if (access("/sys/kernel/btf/vmlinux", R_OK) != 0) {
		printf("skipped: no kernel BTF (/sys/kernel/btf/vmlinux)\n");
		return 77;
	}
	return 0;
}
