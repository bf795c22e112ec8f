/*
 * pgcluster_internal.h - shared by pgcluster.c (the cluster: initdb, pg_ctl,
 * files) and pgcluster_auth.c (its roles, passwords and pg_hba.conf). Not
 * installed; the API is include/traceprof/pgcluster.h.
 */
#ifndef TRACEPROF_PGCLUSTER_INTERNAL_H
#define TRACEPROF_PGCLUSTER_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include <libpq-fe.h>

#define AUTH_DIR       "auth"	   /* DIR/auth: one ROLE.pgpass per login role */
#define ADMIN_USER     "postgres"  /* bootstrap superuser of a new cluster */
#define LEGACY_ADMIN   "traceprof" /* ... of one made before roles (trust auth) */
#define PASSWORD_BYTES 16	   /* random bytes of a password, printed as hex */

struct runas {
	bool drop;     /* true when root must switch to uid/gid */
	uid_t uid;     /* server user */
	gid_t gid;     /* its primary group */
	char name[64]; /* its name, for messages */
};

/* pgcluster.c */
int pgc_path_join(char *out, size_t len, const char *a, const char *b);
/* Writes text to path (created with mode), then gives it to the server user. */
int pgc_write_text(const char *path, const char *text, mode_t mode, const struct runas *ra);
int pgc_mkdir_owned(const char *path, mode_t mode, const struct runas *ra);
/* Resolves dir into out (PATH_MAX bytes), creating it 0700 first if asked. */
int pgc_absolute_dir(const char *dir, char *out, bool create);
/* The socket's port from DIR's marker file; -ENOENT without one. */
int pgc_read_port(const char *dir);

/* pgcluster_auth.c */
/* User and password of DIR/auth/KEY.pgpass; -ENOENT without, -EINVAL if malformed. */
int pgc_passfile_read(const char *dir, const char *key, char *user, size_t ulen, char *pw,
		      size_t pwlen);
/* Makes DIR/auth/KEY.pgpass for user with a new password unless it exists. */
int pgc_passfile_ensure(const char *dir, const char *key, const char *user, const struct runas *ra);
/* DIR/auth and the passfile of every role (legacy: the old superuser's name). */
int pgc_ensure_passfiles(const char *dir, bool legacy, const struct runas *ra);
/* As the superuser: roles, passwords, the database, pg_hba.conf, reload. */
int pgc_setup_roles(const char *dir, const struct runas *ra);
/* A connection as the bootstrap superuser, or NULL (said why). The caller finishes it. */
PGconn *pgc_connect_admin(const char *dir, const char *dbname);

#endif
