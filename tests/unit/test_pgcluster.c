/*
 * test_pgcluster: the embedded PostgreSQL helper creates, starts, stops and
 * removes a private cluster, refuses directories it must not touch, and the
 * cluster answers on its socket (and on a loopback port when asked).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <libpq-fe.h>

#include "check.h"
#include "traceprof/log.h"
#include "traceprof/pgcluster.h"

static int query_ok(const char *conninfo, const char *sql)
{
	PGconn *conn = PQconnectdb(conninfo);
	int ok = 0;

	if (PQstatus(conn) == CONNECTION_OK) {
		PGresult *res = PQexec(conn, sql);

		ok = PQresultStatus(res) == PGRES_TUPLES_OK;
		PQclear(res);
	}
	PQfinish(conn);
	return ok;
}

/* 1 when the one-value query sql answers true. */
static int query_true(const char *conninfo, const char *sql)
{
	PGconn *conn = PQconnectdb(conninfo);
	int ok = 0;

	if (PQstatus(conn) == CONNECTION_OK) {
		PGresult *res = PQexec(conn, sql);

		ok = PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1 &&
		     strcmp(PQgetvalue(res, 0, 0), "t") == 0;
		PQclear(res);
	}
	PQfinish(conn);
	return ok;
}

int main(void)
{
	char tmpl[] = "/tmp/tp-pgcluster-XXXXXX";
	char dir[256];
	char other[256];
	char ci[4200];
	char tcp[512];
	char pw[64] = "";
	struct pgcluster_opts opts = {.fast = true, .port = 0};
	const char *settings[] = {"work_mem=8MB", NULL};
	FILE *f;

	log_set_level(TP_LOG_QUIET);
	if (!mkdtemp(tmpl))
		return 2;
	/* The server user must reach it: a 0700 parent is refused with a message. */
	snprintf(dir, sizeof(dir), "%s/db", tmpl);
	if (geteuid() == 0)
		CHECK(pgcluster_create(dir, &opts) == -EACCES, "unreachable parent refused");
	chmod(tmpl, 0755);
	pgcluster_remove(dir);
	snprintf(dir, sizeof(dir), "%s/db", tmpl);

	CHECK(pgcluster_status(dir) == -ENOENT, "no cluster yet");
	CHECK(pgcluster_remove(dir) == 0, "removing nothing is fine");
	opts.settings = settings;
	CHECK(pgcluster_create(dir, &opts) == 0, "create");
	CHECK(pgcluster_status(dir) == 1, "running after create");
	CHECK(pgcluster_conninfo(dir, NULL, ci, sizeof(ci)) == 0, "conninfo");
	CHECK(strstr(ci, "dbname=traceprof") != NULL, "default database: %s", ci);
	CHECK(query_ok(ci, "SELECT count(*) FROM traceprof.samples"), "schema applied");
	CHECK(query_ok(ci, "SELECT 1 WHERE current_setting('work_mem') = '8MB'"),
	      "extra setting applied");
	/* One login per role; only the bootstrap superuser is superuser. */
	{
		static const char *const roles[] = {"owner", "writer", "reader", "controller"};
		char sql[128];

		for (size_t i = 0; i < sizeof(roles) / sizeof(roles[0]); i++) {
			CHECK(pgcluster_conninfo_role(dir, NULL, roles[i], ci, sizeof(ci)) == 0 &&
				  strstr(ci, "passfile=") != NULL,
			      "conninfo --role %s: %s", roles[i], ci);
			snprintf(sql, sizeof(sql),
				 "SELECT current_user = 'traceprof_%s' AND NOT "
				 "(SELECT rolsuper FROM pg_roles WHERE rolname = current_user)",
				 roles[i]);
			CHECK(query_true(ci, sql), "%s logs in as traceprof_%s, not superuser",
			      roles[i], roles[i]);
		}
		CHECK(pgcluster_conninfo_role(dir, "postgres", "admin", ci, sizeof(ci)) == 0 &&
			  query_true(ci, "SELECT current_setting('is_superuser') = 'on'"),
		      "admin is the bootstrap superuser");
		CHECK(pgcluster_conninfo_role(dir, NULL, "root", ci, sizeof(ci)) == -EINVAL,
		      "unknown role refused");
		CHECK(pgcluster_conninfo(dir, NULL, ci, sizeof(ci)) == 0, "conninfo");
	}
	CHECK(pgcluster_create(dir, &opts) == 0, "create again is idempotent");
	CHECK(query_ok(ci, "SELECT 1"), "the passwords survive create again");
	CHECK(pgcluster_stop(dir) == 0, "stop");
	CHECK(pgcluster_status(dir) == 0, "stopped");
	CHECK(pgcluster_stop(dir) == 0, "stop again is a no-op");
	CHECK(!query_ok(ci, "SELECT 1"), "no answer when stopped");
	CHECK(pgcluster_start(dir) == 0, "start");
	CHECK(query_ok(ci, "SELECT count(*) FROM traceprof.requests"), "data survives restart");

	/* Loopback TCP with the generated password. */
	opts.port = 20000 + getpid() % 20000;
	CHECK(pgcluster_create(dir, &opts) == 0, "re-create with a TCP port");
	snprintf(tcp, sizeof(tcp), "%s/auth/reader.pgpass", dir);
	f = fopen(tcp, "r");
	CHECK(f && fgets(pw, sizeof(pw), f), "the reader's passfile");
	if (f)
		fclose(f);
	pw[strcspn(pw, "\n")] = '\0';
	CHECK(strncmp(pw, "*:*:*:traceprof_reader:", 23) == 0 && strlen(pw) == 23 + 32,
	      "passfile line with a 32-digit password: %s", pw);
	snprintf(tcp, sizeof(tcp),
		 "host=127.0.0.1 port=%d dbname=traceprof user=traceprof_reader "
		 "passfile=%s/auth/reader.pgpass",
		 opts.port, dir);
	CHECK(query_ok(tcp, "SELECT count(*) FROM traceprof.samples"), "TCP with the passfile");
	snprintf(tcp, sizeof(tcp),
		 "host=127.0.0.1 port=%d dbname=traceprof user=traceprof_reader password=wrong",
		 opts.port);
	CHECK(!query_ok(tcp, "SELECT 1"), "TCP refuses a wrong password");
	snprintf(
	    tcp, sizeof(tcp),
	    "host=127.0.0.1 port=%d dbname=traceprof user=traceprof_owner password=", opts.port);
	CHECK(!query_ok(tcp, "SELECT 1"), "TCP refuses no password");
	CHECK(pgcluster_conninfo(dir, NULL, ci, sizeof(ci)) == 0 &&
		  strstr(ci, " password=") == NULL,
	      "the conninfo names the passfile, never the password: %s", ci);

	/* Refusals. */
	snprintf(other, sizeof(other), "%s/notours", tmpl);
	mkdir(other, 0755);
	snprintf(tcp, sizeof(tcp), "%s/keep.txt", other);
	f = fopen(tcp, "w");
	if (f)
		fclose(f);
	CHECK(pgcluster_create(other, &opts) == -EEXIST, "refuses a non-empty foreign directory");
	CHECK(pgcluster_remove(other) == -EPERM, "refuses to remove a foreign directory");
	CHECK(access(tcp, F_OK) == 0, "foreign file kept");
	CHECK(pgcluster_create(
		  "/tmp/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
		  "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
		  &opts) == -ENAMETOOLONG,
	      "socket path too long is refused");
	rmdir("/tmp/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	      "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");

	CHECK(pgcluster_remove(dir) == 0, "remove");
	CHECK(access(dir, F_OK) != 0, "directory gone");
	unlink(tcp);
	rmdir(other);
	rmdir(tmpl);
	return check_done();
}
