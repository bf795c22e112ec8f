/*
 * traceprof-db - manage a private PostgreSQL cluster for traceprof and apply
 * the schema to any database.
 *
 * A thin command over lib/store/pgcluster.c and lib/store/migrate.c; the demo, the tests
 * and the benchmarks all start their database with "traceprof-db create".
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libpq-fe.h>

#include "traceprof/log.h"
#include "traceprof/migrate.h"
#include "traceprof/pgcluster.h"

#define MAX_SETTINGS 64

static void usage(FILE *out)
{
	fprintf(
	    out,
	    "usage: traceprof-db COMMAND [OPTIONS]\n"
	    "\n"
	    "Manage a private PostgreSQL cluster for traceprof, or apply the schema to any\n"
	    "database.\n"
	    "\n"
	    "commands:\n"
	    "  create DIR      create the cluster in DIR (initdb) unless it exists, start it,\n"
	    "                  create the database \"traceprof\" and apply the schema\n"
	    "  start DIR       start an existing cluster\n"
	    "  stop DIR        stop it (fast shutdown)\n"
	    "  status DIR      print running, stopped or absent (exit 0, 3, 4)\n"
	    "  remove DIR      stop the cluster and delete DIR (only a DIR made by create)\n"
	    "  conninfo DIR    print the libpq connection string for the cluster's socket,\n"
	    "                  as the role of --role (password from DIR/auth/ROLE.pgpass)\n"
	    "  migrate         apply pending migrations to the database given by --db\n"
	    "  version         print the schema version of --db and of this binary\n"
	    "\n"
	    "options:\n"
	    "  --port N        (create) also listen on 127.0.0.1:N (same roles and passwords)\n"
	    "  --fast          (create) fsync off: for tests and throwaway data\n"
	    "  -c NAME=VALUE   (create) extra PostgreSQL setting; repeatable\n"
	    "  --db CONNINFO   (migrate, version) libpq conninfo or URI; default: PG* environment\n"
	    "  --dbname NAME   (create, conninfo) database name, default traceprof\n"
	    "  --role ROLE     (create, conninfo) owner (default: migrations), writer (agent),\n"
	    "                  reader (traceprof, psql), controller, or admin (superuser)\n"
	    "  -v, --verbose   debug output\n"
	    "  -h, --help      this help\n");
}

static int with_conn(const char *conninfo, int (*fn)(PGconn *))
{
	PGconn *conn = PQconnectdb(conninfo ? conninfo : "");
	int rc;

	if (PQstatus(conn) != CONNECTION_OK) {
		const char *host = PQhost(conn);

		log_error("cannot connect to database on %s: %s",
			  host && *host ? host : "(default)", PQerrorMessage(conn));
		PQfinish(conn);
		return 2;
	}
	rc = fn(conn);
	PQfinish(conn);
	return rc;
}

static int do_migrate(PGconn *conn)
{
	int applied = 0;

	if (migrate_apply(conn, &applied))
		return 1;
	printf("schema version %d (%d migration%s applied)\n", migrate_current_version(conn),
	       applied, applied == 1 ? "" : "s");
	return 0;
}

static int do_version(PGconn *conn)
{
	int v = migrate_current_version(conn);

	if (v < 0)
		return 1;
	printf("database schema version %d, this traceprof knows %d\n", v,
	       migrate_latest_version());
	return v < migrate_latest_version() ? 3 : 0;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"port", required_argument, NULL, 'p'}, {"fast", no_argument, NULL, 'f'},
	    {"db", required_argument, NULL, 'd'},   {"dbname", required_argument, NULL, 'n'},
	    {"role", required_argument, NULL, 'r'}, {"verbose", no_argument, NULL, 'v'},
	    {"help", no_argument, NULL, 'h'},	    {NULL, 0, NULL, 0},
	};
	const char *settings[MAX_SETTINGS + 1] = {0};
	struct pgcluster_opts opts = {0};
	const char *conninfo = NULL;
	const char *dbname = NULL;
	const char *role = NULL;
	const char *cmd;
	const char *dir = NULL;
	int nsettings = 0;
	int c;
	int rc;

	log_set_prefix("traceprof-db");
	while ((c = getopt_long(argc, argv, "c:vh", longopts, NULL)) != -1) {
		switch (c) {
		case 'p': {
			char *end;
			long v = strtol(optarg, &end, 10);

			if (*end || v < 1 || v > 65535) {
				log_error("--port: '%s' is not a port number (1-65535)", optarg);
				return 2;
			}
			opts.port = (int)v;
			break;
		}
		case 'f':
			opts.fast = true;
			break;
		case 'c':
			if (nsettings == MAX_SETTINGS) {
				log_error("at most %d -c settings", MAX_SETTINGS);
				return 2;
			}
			settings[nsettings++] = optarg;
			break;
		case 'd':
			conninfo = optarg;
			break;
		case 'n':
			dbname = optarg;
			break;
		case 'r':
			role = optarg;
			break;
		case 'v':
			log_set_level(LOG_DEBUG);
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	opts.settings = settings;
	if (role && strcmp(role, "owner") && strcmp(role, "writer") && strcmp(role, "reader") &&
	    strcmp(role, "controller") && strcmp(role, "admin")) {
		log_error("--role: '%s' is not one of " PGCLUSTER_ROLES, role);
		return 2;
	}
	if (optind >= argc) {
		usage(stderr);
		return 2;
	}
	cmd = argv[optind++];
	if (strcmp(cmd, "migrate") == 0 || strcmp(cmd, "version") == 0) {
		if (optind != argc) {
			log_error("%s takes no arguments; use --db CONNINFO", cmd);
			return 2;
		}
		return with_conn(conninfo, strcmp(cmd, "migrate") == 0 ? do_migrate : do_version);
	}
	if (strcmp(cmd, "create") && strcmp(cmd, "start") && strcmp(cmd, "stop") &&
	    strcmp(cmd, "remove") && strcmp(cmd, "status") && strcmp(cmd, "conninfo")) {
		log_error("unknown command '%s'", cmd);
		usage(stderr);
		return 2;
	}
	if (optind != argc - 1) {
		log_error("%s needs exactly one argument: the cluster directory", cmd);
		usage(stderr);
		return 2;
	}
	dir = argv[optind];
	if (strcmp(cmd, "create") == 0) {
		char ci[4200];

		rc = pgcluster_create(dir, &opts);
		if (rc)
			return 1;
		if (pgcluster_conninfo_role(dir, dbname, role, ci, sizeof(ci)) == 0)
			printf("%s\n", ci);
		return 0;
	}
	if (strcmp(cmd, "start") == 0)
		return pgcluster_start(dir) ? 1 : 0;
	if (strcmp(cmd, "stop") == 0) {
		rc = pgcluster_stop(dir);
		if (rc == -ENOENT)
			log_error("no cluster in %s", dir);
		return rc ? 1 : 0;
	}
	if (strcmp(cmd, "remove") == 0)
		return pgcluster_remove(dir) ? 1 : 0;
	if (strcmp(cmd, "status") == 0) {
		rc = pgcluster_status(dir);
		printf("%s\n", rc == 1 ? "running" : rc == 0 ? "stopped" : "absent");
		return rc == 1 ? 0 : rc == 0 ? 3 : 4;
	}
	if (strcmp(cmd, "conninfo") == 0) {
		char ci[4200];

		rc = pgcluster_conninfo_role(dir, dbname, role, ci, sizeof(ci));
		if (rc == -ENOENT)
			log_error("no cluster in %s", dir);
		if (rc)
			return rc == -EINVAL ? 2 : 4;
		printf("%s\n", ci);
		return 0;
	}
	return 2; /* not reached: commands were checked above */
}
