/*
 * pgcluster_auth.c - who may use the private cluster, and how.
 *
 * Every connection, socket or loopback TCP, authenticates with a SCRAM
 * password (pg_hba.conf: no trust, no peer). Each login role has its own
 * password, 32 hex digits from /dev/urandom, in DIR/auth/ROLE.pgpass (0600,
 * libpq passfile format), which the conninfo names with passfile=, so no
 * password is ever on a command line. The roles are those of
 * sql/010_roles.sql, made LOGIN here by the bootstrap superuser (admin),
 * which the server only ever gets as a SCRAM verifier computed here.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <libpq-fe.h>

#include "pgcluster_internal.h"
#include "traceprof/log.h"
#include "traceprof/pgcluster.h"

/* The login roles of the cluster; the first is the bootstrap superuser. */
static const struct pgrole {
	const char *key;   /* --role name, and the passfile DIR/auth/KEY.pgpass */
	const char *name;  /* PostgreSQL role; NULL: the bootstrap superuser's */
	const char *attrs; /* role attributes besides LOGIN NOSUPERUSER */
} pgroles[] = {
    {"admin", NULL, ""},
    /* CREATEDB: tests and scripts make throwaway databases with it. */
    {"owner", "traceprof_owner", "CREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS"},
    {"writer", "traceprof_writer", "NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS"},
    {"reader", "traceprof_reader", "NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS"},
    {"controller", "traceprof_controller", "NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS"},
};
#define NROLES (sizeof(pgroles) / sizeof(pgroles[0]))

/* 2 * PASSWORD_BYTES hex digits into out (2 * PASSWORD_BYTES + 1 bytes). */
static int random_password(char *out)
{
	unsigned char rnd[PASSWORD_BYTES];
	FILE *f = fopen("/dev/urandom", "r");

	if (!f || fread(rnd, 1, sizeof(rnd), f) != sizeof(rnd)) {
		if (f)
			fclose(f);
		log_error("cannot read /dev/urandom for a password");
		return -EIO;
	}
	fclose(f);
	for (int i = 0; i < PASSWORD_BYTES; i++)
		snprintf(out + 2 * i, 3, "%02x", rnd[i]);
	return 0;
}

static int passfile_path(const char *dir, const char *key, char *out, size_t len)
{
	int n = snprintf(out, len, "%s/" AUTH_DIR "/%s.pgpass", dir, key);

	return (n < 0 || (size_t)n >= len) ? -ENAMETOOLONG : 0;
}

/*
 * Reads the user and password of DIR/auth/KEY.pgpass (one line
 * "*:*:*:USER:PASSWORD"). Returns 0, -ENOENT when there is no such file,
 * -EINVAL when it is not of that form.
 */
int pgc_passfile_read(const char *dir, const char *key, char *user, size_t ulen, char *pw,
		      size_t pwlen)
{
	char path[PATH_MAX];
	char line[256];
	char *u, *p;
	FILE *f;
	int rc;

	rc = passfile_path(dir, key, path, sizeof(path));
	if (rc)
		return rc;
	f = fopen(path, "r");
	if (!f)
		return errno == ENOENT ? -ENOENT : -errno;
	rc = fgets(line, sizeof(line), f) ? 0 : -EINVAL;
	fclose(f);
	if (rc)
		return rc;
	line[strcspn(line, "\n")] = '\0';
	if (strncmp(line, "*:*:*:", 6))
		return -EINVAL;
	u = line + 6;
	p = strchr(u, ':');
	if (!p || p == u || !p[1] || strlen(p + 1) >= pwlen || (size_t)(p - u) >= ulen)
		return -EINVAL;
	snprintf(user, ulen, "%.*s", (int)(p - u), u);
	snprintf(pw, pwlen, "%s", p + 1);
	return 0;
}

/* Writes DIR/auth/KEY.pgpass for user with a new password unless it exists. */
int pgc_passfile_ensure(const char *dir, const char *key, const char *user, const struct runas *ra)
{
	char path[PATH_MAX];
	char u[64], pw[2 * PASSWORD_BYTES + 1];
	char line[128];
	int rc = pgc_passfile_read(dir, key, u, sizeof(u), pw, sizeof(pw));

	if (rc != -ENOENT) {
		if (rc == -EINVAL)
			log_error("%s/" AUTH_DIR "/%s.pgpass is not a line *:*:*:USER:PASSWORD; "
				  "remove it to have a new password made",
				  dir, key);
		return rc;
	}
	rc = passfile_path(dir, key, path, sizeof(path));
	if (!rc)
		rc = random_password(pw);
	if (rc)
		return rc;
	snprintf(line, sizeof(line), "*:*:*:%s:%s\n", user, pw);
	return pgc_write_text(path, line, 0600, ra);
}

/* Every connection, on the socket or on loopback TCP, needs its password. */
static int write_hba(const char *dir, const struct runas *ra)
{
	char path[PATH_MAX];

	if (pgc_path_join(path, sizeof(path), dir, "data/pg_hba.conf"))
		return -ENAMETOOLONG;
	return pgc_write_text(
	    path,
	    "# Written by traceprof-db at every create: a SCRAM password for every\n"
	    "# connection (DIR/auth/ROLE.pgpass); no trust, no peer.\n"
	    "local all all scram-sha-256\n"
	    "host all all 127.0.0.1/32 scram-sha-256\n"
	    "host all all ::1/128 scram-sha-256\n",
	    0600, ra);
}

static const struct pgrole *role_find(const char *key)
{
	for (size_t i = 0; i < NROLES; i++)
		if (strcmp(pgroles[i].key, key) == 0)
			return &pgroles[i];
	return NULL;
}

int pgcluster_conninfo_role(const char *dir, const char *dbname, const char *role, char *buf,
			    size_t len)
{
	char abs[PATH_MAX];
	char passfile[PATH_MAX];
	char user[64], pw[2 * PASSWORD_BYTES + 1];
	int port;
	int rc;
	int n;

	if (!role)
		role = "owner";
	if (!role_find(role)) {
		log_error("unknown role '%s'; one of " PGCLUSTER_ROLES, role);
		return -EINVAL;
	}
	rc = pgc_absolute_dir(dir, abs, false);
	if (rc)
		return rc;
	port = pgc_read_port(abs);
	if (port < 0)
		return port;
	rc = pgc_passfile_read(abs, role, user, sizeof(user), pw, sizeof(pw));
	if (rc == -ENOENT)
		log_error("%s has no " AUTH_DIR "/%s.pgpass: made by an older traceprof-db; run "
			  "'traceprof-db create %s' once to give it roles and passwords",
			  abs, role, abs);
	else if (rc)
		log_error("cannot read %s/" AUTH_DIR "/%s.pgpass (%s)", abs, role,
			  rc == -EINVAL ? "not a line *:*:*:USER:PASSWORD" : strerror(-rc));
	if (rc)
		return rc == -ENOENT ? -ENOKEY : rc;
	rc = passfile_path(abs, role, passfile, sizeof(passfile));
	if (rc)
		return rc;
	n = snprintf(buf, len, "host=%s/run port=%d dbname=%s user=%s passfile=%s", abs, port,
		     dbname ? dbname : PGCLUSTER_DBNAME, user, passfile);
	return (n < 0 || (size_t)n >= len) ? -ENAMETOOLONG : 0;
}

int pgcluster_conninfo(const char *dir, const char *dbname, char *buf, size_t len)
{
	return pgcluster_conninfo_role(dir, dbname, NULL, buf, len);
}

PGconn *pgc_connect_admin(const char *dir, const char *dbname)
{
	char conninfo[PATH_MAX * 2 + 256];
	PGconn *conn;

	if (pgcluster_conninfo_role(dir, dbname, "admin", conninfo, sizeof(conninfo)))
		return NULL;
	conn = PQconnectdb(conninfo);
	if (PQstatus(conn) != CONNECTION_OK) {
		log_error("cannot connect to the cluster in %s as its superuser: %s", dir,
			  PQerrorMessage(conn));
		PQfinish(conn);
		return NULL;
	}
	return conn;
}

static int exec_admin(PGconn *conn, const char *sql, const char *what)
{
	PGresult *res = PQexec(conn, sql);
	int rc = (PQresultStatus(res) == PGRES_TUPLES_OK || PQresultStatus(res) == PGRES_COMMAND_OK)
		     ? 0
		     : -EIO;

	if (rc)
		log_error("cannot %s: %s", what, PQresultErrorMessage(res));
	PQclear(res);
	return rc;
}

/*
 * Sets the password of one role from its passfile (a SCRAM verifier made
 * here: the password itself never reaches the server or its log), creating
 * the role when missing; every role but the bootstrap superuser is made
 * NOSUPERUSER, whatever it was.
 */
static int setup_role(PGconn *conn, const char *dir, const struct pgrole *r)
{
	char user[64], pw[2 * PASSWORD_BYTES + 1];
	char sql[1024];
	char *verifier = NULL, *lit = NULL, *ident = NULL;
	PGresult *res;
	int rc;

	rc = pgc_passfile_read(dir, r->key, user, sizeof(user), pw, sizeof(pw));
	if (rc)
		return rc;
	verifier = PQencryptPasswordConn(conn, pw, user, "scram-sha-256");
	ident = PQescapeIdentifier(conn, user, strlen(user));
	if (!verifier || !ident) {
		log_error("cannot hash the password of %s: %s", user, PQerrorMessage(conn));
		rc = -EIO;
		goto out;
	}
	lit = PQescapeLiteral(conn, verifier, strlen(verifier));
	if (!lit) {
		rc = -EIO;
		goto out;
	}
	if (r->name) {
		const char *params[1] = {user};

		res = PQexecParams(conn, "SELECT 1 FROM pg_roles WHERE rolname = $1", 1, NULL,
				   params, NULL, NULL, 0);
		rc = PQresultStatus(res) == PGRES_TUPLES_OK ? 0 : -EIO;
		if (!rc && PQntuples(res) == 0) {
			snprintf(sql, sizeof(sql), "CREATE ROLE %s", ident);
			rc = exec_admin(conn, sql, "create a role");
		}
		PQclear(res);
		if (rc)
			goto out;
		snprintf(sql, sizeof(sql), "ALTER ROLE %s LOGIN NOSUPERUSER %s PASSWORD %s", ident,
			 r->attrs, lit);
	} else {
		snprintf(sql, sizeof(sql), "ALTER ROLE %s PASSWORD %s", ident, lit);
	}
	rc = exec_admin(conn, sql, "set a role's password");
out:
	PQfreemem(lit);
	PQfreemem(ident);
	PQfreemem(verifier);
	return rc;
}

/*
 * As the bootstrap superuser: the roles and their passwords, the traceprof
 * database owned by traceprof_owner, then pg_hba.conf without trust (a
 * cluster made before roles had "local all all trust") and a reload.
 */
int pgc_setup_roles(const char *dir, const struct runas *ra)
{
	PGconn *conn = pgc_connect_admin(dir, "postgres");
	PGresult *res;
	int rc = 0;

	if (!conn)
		return -ECONNREFUSED;
	for (size_t i = 0; !rc && i < NROLES; i++)
		rc = setup_role(conn, dir, &pgroles[i]);
	if (!rc) {
		res = PQexec(conn,
			     "SELECT 1 FROM pg_database WHERE datname = '" PGCLUSTER_DBNAME "'");
		rc = PQresultStatus(res) == PGRES_TUPLES_OK ? 0 : -EIO;
		if (!rc)
			rc = exec_admin(conn,
					PQntuples(res) == 0 ? "CREATE DATABASE " PGCLUSTER_DBNAME
							      " OWNER traceprof_owner"
							    : "ALTER DATABASE " PGCLUSTER_DBNAME
							      " OWNER TO traceprof_owner",
					"create the database " PGCLUSTER_DBNAME);
		PQclear(res);
	}
	if (!rc)
		rc = write_hba(dir, ra);
	if (!rc)
		rc = exec_admin(conn, "SELECT pg_reload_conf()", "reload pg_hba.conf");
	PQfinish(conn);
	return rc;
}

/* The passfiles of every role; a cluster made before roles keeps its superuser. */
int pgc_ensure_passfiles(const char *dir, bool legacy, const struct runas *ra)
{
	char path[PATH_MAX];
	int rc;

	if (pgc_path_join(path, sizeof(path), dir, AUTH_DIR))
		return -ENAMETOOLONG;
	rc = pgc_mkdir_owned(path, 0700, ra);
	if (!rc && chmod(path, 0700))
		rc = -errno;
	for (size_t i = 0; !rc && i < NROLES; i++)
		rc = pgc_passfile_ensure(dir, pgroles[i].key,
					 pgroles[i].name ? pgroles[i].name
					 : legacy	 ? LEGACY_ADMIN
							 : ADMIN_USER,
					 ra);
	return rc;
}
