/*
 * traceprof-db - manage a private PostgreSQL cluster for traceprof and apply
 * the schema to any database.
 *
 * A thin command over lib/store/pgcluster.c and lib/store/migrate.c; the demo, the tests
 * and the benchmarks all start their database with "traceprof-db create".
 * The flags are one table (traceprof/options.h): parse_args() fills
 * struct args, run() does the command.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libpq-fe.h>

#include "db_symbols.h"
#include "traceprof/log.h"
#include "traceprof/migrate.h"
#include "traceprof/options.h"
#include "traceprof/pgcluster.h"

#define MAX_SETTINGS 64

/* What the command line sets. */
struct args {
	struct pgcluster_opts opts;		/* create */
	const char *settings[MAX_SETTINGS + 1]; /* -c NAME=VALUE, NULL-terminated */
	int nsettings;
	const char *conninfo, *dbname, *role;
	bool verbose, help;
};

/* --port N: 1 to 65535. */
static int parse_port(void *obj, const struct tp_option *o, const char *v, char *err, size_t errlen)
{
	char *end;
	long n = strtol(v, &end, 10);

	(void)o;
	if (*end || n < 1 || n > 65535) {
		snprintf(err, errlen, "--port: '%s' is not a port number (1-65535)", v);
		return -EINVAL;
	}
	((struct args *)obj)->opts.port = (int)n;
	return 0;
}

/* -c NAME=VALUE, repeatable. */
static int parse_setting(void *obj, const struct tp_option *o, const char *v, char *err,
			 size_t errlen)
{
	struct args *a = obj;

	(void)o;
	if (a->nsettings == MAX_SETTINGS) {
		snprintf(err, errlen, "at most %d -c settings", MAX_SETTINGS);
		return -EINVAL;
	}
	a->settings[a->nsettings++] = v;
	return 0;
}

#define ARG(m) offsetof(struct args, m)
static const struct tp_option options[] = {
    {.name = "port",
     .type = TP_OPT_CUSTOM,
     .arg = "N",
     .help = "(create) also listen on 127.0.0.1:N (same roles and passwords)",
     .parse = parse_port},
    {.name = "fast",
     .type = TP_OPT_FLAG,
     .offset = ARG(opts.fast),
     .help = "(create) fsync off: for tests and throwaway data"},
    {.short_name = 'c',
     .type = TP_OPT_CUSTOM,
     .arg = "NAME=VALUE",
     .help = "(create) extra PostgreSQL setting; repeatable",
     .parse = parse_setting},
    {.name = "db",
     .type = TP_OPT_STR,
     .offset = ARG(conninfo),
     .arg = "CONNINFO",
     .help = "(migrate, version) libpq conninfo or URI; default: PG* environment"},
    {.name = "dbname",
     .type = TP_OPT_STR,
     .offset = ARG(dbname),
     .arg = "NAME",
     .help = "(create, conninfo) database name, default traceprof"},
    {.name = "role",
     .type = TP_OPT_STR,
     .offset = ARG(role),
     .arg = "ROLE",
     .help = "(create, conninfo) owner (default: migrations), writer (agent),\nreader "
	     "(traceprof, psql), controller, or admin (superuser)"},
    TP_OPT_VERBOSE_ROW(ARG(verbose)),
    TP_OPT_HELP_ROW(ARG(help)),
};

static void usage(FILE *out)
{
	fputs("usage: traceprof-db COMMAND [OPTIONS]\n"
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
	      "  migrate         apply pending migrations, then the SQL functions and views,\n"
	      "                  to the database given by --db\n"
	      "  version         print the schema version of --db and of this binary\n"
	      "  symbols add FILE...\n"
	      "                  name the stored frames of a stripped build from its debug\n"
	      "                  file or an unstripped copy (traceprof-db symbols --help)\n"
	      "\n"
	      "options:\n",
	      out);
	tp_opts_help(options, TP_OPTS_COUNT(options), out, 15, 0);
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
	int applied = 0, api_files = 0;

	if (migrate_apply_all(conn, &applied, &api_files))
		return 1;
	printf("schema version %d (%d migration%s applied, %d sql/api file%s applied)\n",
	       migrate_current_version(conn), applied, applied == 1 ? "" : "s", api_files,
	       api_files == 1 ? "" : "s");
	if (!api_files)
		printf(
		    "the database is newer than this traceprof: its functions were left alone\n");
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

/*
 * Reads the command line into a. Returns -1 to go on, with *next the
 * first operand, or the exit status (0 after --help, 2 for usage errors).
 */
static int parse_args(int argc, char **argv, struct args *a, int *next)
{
	struct tp_opts_result res;

	switch (tp_opts_getopt(options, TP_OPTS_COUNT(options), a, argc, argv, 0, &res)) {
	case TP_OPTS_DONE:
		break;
	case TP_OPTS_STOPPED: /* --help */
		usage(stdout);
		return 0;
	case TP_OPTS_BAD_VALUE:
		log_error("%s", res.err);
		return 2;
	default: /* getopt said what was wrong */
		usage(stderr);
		return 2;
	}
	if (a->verbose)
		log_set_level(TP_LOG_DEBUG);
	a->opts.settings = a->settings;
	if (a->role && strcmp(a->role, "owner") && strcmp(a->role, "writer") &&
	    strcmp(a->role, "reader") && strcmp(a->role, "controller") &&
	    strcmp(a->role, "admin")) {
		log_error("--role: '%s' is not one of " PGCLUSTER_ROLES, a->role);
		return 2;
	}
	*next = res.next;
	return -1;
}

/* Runs a cluster command (all but migrate and version) on dir. */
static int run_cluster(const char *cmd, const char *dir, const struct args *a)
{
	char ci[4200];
	int rc;

	if (strcmp(cmd, "create") == 0) {
		rc = pgcluster_create(dir, &a->opts);
		if (rc)
			return 1;
		if (pgcluster_conninfo_role(dir, a->dbname, a->role, ci, sizeof(ci)) == 0)
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
	/* conninfo */
	rc = pgcluster_conninfo_role(dir, a->dbname, a->role, ci, sizeof(ci));
	if (rc == -ENOENT)
		log_error("no cluster in %s", dir);
	if (rc)
		return rc == -EINVAL ? 2 : 4;
	printf("%s\n", ci);
	return 0;
}

int main(int argc, char **argv)
{
	static struct args a;
	const char *cmd;
	int next, rc;

	log_set_prefix("traceprof-db");
	/* its own flags and help */
	if (argc > 1 && strcmp(argv[1], "symbols") == 0)
		return db_symbols_main(argc - 1, argv + 1);
	rc = parse_args(argc, argv, &a, &next);
	if (rc >= 0)
		return rc;
	if (next >= argc) {
		usage(stderr);
		return 2;
	}
	cmd = argv[next++];
	if (strcmp(cmd, "migrate") == 0 || strcmp(cmd, "version") == 0) {
		if (next != argc) {
			log_error("%s takes no arguments; use --db CONNINFO", cmd);
			return 2;
		}
		return with_conn(a.conninfo, strcmp(cmd, "migrate") == 0 ? do_migrate : do_version);
	}
	if (strcmp(cmd, "create") && strcmp(cmd, "start") && strcmp(cmd, "stop") &&
	    strcmp(cmd, "remove") && strcmp(cmd, "status") && strcmp(cmd, "conninfo")) {
		log_error("unknown command '%s'", cmd);
		usage(stderr);
		return 2;
	}
	if (next != argc - 1) {
		log_error("%s needs exactly one argument: the cluster directory", cmd);
		usage(stderr);
		return 2;
	}
	return run_cluster(cmd, argv[next], &a);
}
