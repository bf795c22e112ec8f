/*
 * pgcluster.h - a private PostgreSQL cluster in a directory of your choice.
 *
 * The demo, the tests and the benchmarks never assume a running server: they
 * create one with pgcluster_create(), which runs initdb, starts postgres
 * listening on a Unix socket inside the directory (and optionally on a
 * loopback TCP port), creates the "traceprof" database and applies the schema.
 * Layout of DIR (0700): data/ (PGDATA), run/ (the socket, 0700), postgres.log,
 * auth/ROLE.pgpass (0600: each login role's generated password, in libpq's
 * passfile format; the conninfo points at it with passfile=).
 *
 * Private: only the server user and root can reach the socket, and every
 * connection (socket or TCP) authenticates with a SCRAM password. The login
 * roles are the roles of sql/010_roles.sql: owner (migrations; the default),
 * writer (agents), reader (CLI, psql, dashboards), controller; admin is the
 * bootstrap superuser, for maintenance only.
 *
 * Run as root, the server runs as the "postgres" system user (PostgreSQL
 * refuses to run as root); override with TRACEPROF_PG_USER. The binaries are
 * found through TRACEPROF_PG_BINDIR, pg_config, /usr/lib/postgresql/N/bin or
 * PATH, in that order.
 */
#ifndef TRACEPROF_PGCLUSTER_H
#define TRACEPROF_PGCLUSTER_H

#include <stdbool.h>
#include <stddef.h>

#define PGCLUSTER_DBNAME "traceprof"
#define PGCLUSTER_ROLES	 "owner, writer, reader, controller, admin"

struct pgcluster_opts {
	int port;		     /* also listen on 127.0.0.1:port; 0 = socket only */
	bool fast;		     /* fsync=off: for tests and throwaway data */
	const char *const *settings; /* extra "name=value" settings, NULL-terminated, or NULL */
};

/* Creates (if absent), starts (if stopped), creates the database and migrates. */
int pgcluster_create(const char *dir, const struct pgcluster_opts *opts);
int pgcluster_start(const char *dir);
/* Stops a running cluster (fast shutdown); stopping a stopped one is a no-op. */
int pgcluster_stop(const char *dir);
/* Stops and deletes the directory; refuses a directory it did not create. */
int pgcluster_remove(const char *dir);
/* 1 running, 0 stopped, -ENOENT no cluster there. */
int pgcluster_status(const char *dir);
/*
 * libpq conninfo for the Unix socket as one role (NULL: "owner"; see
 * PGCLUSTER_ROLES); dbname NULL means "traceprof". -EINVAL for an unknown
 * role, -ENOENT when DIR holds no cluster, -ENOKEY when it has no passfile
 * for the role (a cluster made before roles: run create once).
 */
int pgcluster_conninfo_role(const char *dir, const char *dbname, const char *role, char *buf,
			    size_t len);
/* pgcluster_conninfo_role() for the owner. */
int pgcluster_conninfo(const char *dir, const char *dbname, char *buf, size_t len);

#endif
