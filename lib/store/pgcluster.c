/*
 * pgcluster.c - create, start, stop and remove a private PostgreSQL cluster.
 *
 * Everything runs through the stock initdb and pg_ctl of the installed
 * PostgreSQL, in a child process that drops root privileges when needed.
 * Their output goes to DIR/postgres.log, whose tail is quoted when a step
 * fails, so the user sees PostgreSQL's own reason.
 *
 * The cluster is private: DIR and its socket directory are 0700 (only the
 * server user, and root, can reach the socket), pg_hba.conf asks every
 * connection, socket or TCP, for a SCRAM password (no trust, no peer), and
 * each role has its own generated password in DIR/auth/ROLE.pgpass (0600,
 * libpq passfile format), which the conninfo names with passfile=. The roles
 * are those of sql/010_roles.sql, made LOGIN here; the bootstrap superuser
 * (admin) only creates them and the database and runs the migrations.
 * Passwords, roles and pg_hba.conf are in pgcluster_auth.c.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <libpq-fe.h>

#include "pgcluster_internal.h"
#include "traceprof/log.h"
#include "traceprof/migrate.h"
#include "traceprof/pgcluster.h"

#define MARKER_FILE	".traceprof-db"
#define SOCKET_PORT_DEF 5432
#define SOCKET_PATH_MAX 107 /* sizeof(sun_path) - 1 on Linux */

int pgc_path_join(char *out, size_t len, const char *a, const char *b)
{
	int n = snprintf(out, len, "%s/%s", a, b);

	return (n < 0 || (size_t)n >= len) ? -ENAMETOOLONG : 0;
}

static bool file_exists(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0;
}

static bool is_executable(const char *dir, const char *prog)
{
	char p[PATH_MAX];

	return pgc_path_join(p, sizeof(p), dir, prog) == 0 && access(p, X_OK) == 0;
}

/* Finds the directory holding initdb and pg_ctl; out has PATH_MAX bytes. */
static int find_bindir(char *out)
{
	const char *env = getenv("TRACEPROF_PG_BINDIR");
	FILE *p;
	DIR *d;
	int best = -1;

	if (env && *env) {
		if (!is_executable(env, "initdb")) {
			log_error("TRACEPROF_PG_BINDIR=%s has no initdb", env);
			return -ENOENT;
		}
		snprintf(out, PATH_MAX, "%s", env);
		return 0;
	}
	p = popen("pg_config --bindir 2>/dev/null", "r");
	if (p) {
		if (fgets(out, PATH_MAX, p)) {
			out[strcspn(out, "\n")] = '\0';
			if (is_executable(out, "initdb") && is_executable(out, "pg_ctl")) {
				pclose(p);
				return 0;
			}
		}
		pclose(p);
	}
	d = opendir("/usr/lib/postgresql");
	if (d) {
		struct dirent *e;

		while ((e = readdir(d))) {
			char cand[PATH_MAX];
			int v = atoi(e->d_name);

			snprintf(cand, sizeof(cand), "/usr/lib/postgresql/%s/bin", e->d_name);
			if (v > best && is_executable(cand, "initdb")) {
				best = v;
				snprintf(out, PATH_MAX, "%s", cand);
			}
		}
		closedir(d);
		if (best >= 0)
			return 0;
	}
	log_error("cannot find PostgreSQL's initdb; install postgresql (Debian: apt-get install "
		  "postgresql) or set TRACEPROF_PG_BINDIR");
	return -ENOENT;
}

static int resolve_runas(struct runas *ra)
{
	const char *name = getenv("TRACEPROF_PG_USER");
	struct passwd *pw;

	memset(ra, 0, sizeof(*ra));
	if (geteuid() != 0)
		return 0;
	if (!name || !*name)
		name = "postgres";
	pw = getpwnam(name);
	if (!pw) {
		log_error("running as root, but there is no user %s to run PostgreSQL as; install "
			  "postgresql or set TRACEPROF_PG_USER to an unprivileged user",
			  name);
		return -ENOENT;
	}
	ra->drop = true;
	ra->uid = pw->pw_uid;
	ra->gid = pw->pw_gid;
	snprintf(ra->name, sizeof(ra->name), "%s", name);
	return 0;
}

/* Prints the last lines of the server log after a failure. */
static void quote_log_tail(const char *dir)
{
	char path[PATH_MAX];
	char buf[4096];
	FILE *f;
	long size;
	size_t n;

	if (pgc_path_join(path, sizeof(path), dir, "postgres.log"))
		return;
	f = fopen(path, "r");
	if (!f)
		return;
	fseek(f, 0, SEEK_END);
	size = ftell(f);
	fseek(f, size > (long)sizeof(buf) - 1 ? size - (long)sizeof(buf) + 1 : 0, SEEK_SET);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	log_error("last lines of %s:\n%s", path, buf);
}

/*
 * Runs argv[0] from bindir as the server user, output appended to
 * DIR/postgres.log. Returns the exit status (>= 0) or -errno.
 */
static int run_tool(const char *dir, const struct runas *ra, char *const argv[])
{
	char bindir[PATH_MAX];
	char prog[PATH_MAX];
	char logpath[PATH_MAX];
	pid_t pid;
	int status;
	int err;

	err = find_bindir(bindir);
	if (err)
		return err;
	if (pgc_path_join(prog, sizeof(prog), bindir, argv[0]) ||
	    pgc_path_join(logpath, sizeof(logpath), dir, "postgres.log"))
		return -ENAMETOOLONG;
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		int fd;

		/* Drop privileges first, so the server user owns the log it appends to. */
		if (ra->drop && (setgroups(0, NULL) || setgid(ra->gid) || setuid(ra->uid)))
			_exit(126);
		fd = open(logpath, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
		if (fd >= 0) {
			dup2(fd, STDOUT_FILENO);
			dup2(fd, STDERR_FILENO);
		}
		if (chdir(dir))
			_exit(126);
		setenv("LC_ALL", "C", 1);
		unsetenv("PGDATA");
		execv(prog, argv);
		_exit(127);
	}
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -errno;
	if (WIFEXITED(status) && WEXITSTATUS(status) == 126) {
		log_error("cannot run %s as user %s in %s: the user must be able to reach the "
			  "directory (every parent searchable); choose another directory or set "
			  "TRACEPROF_PG_USER",
			  argv[0], ra->drop ? ra->name : "(current)", dir);
		return -EACCES;
	}
	if (WIFEXITED(status) && WEXITSTATUS(status) == 127) {
		log_error("cannot execute %s", prog);
		return -ENOENT;
	}
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	return -EINTR;
}

static int chown_to(const char *path, const struct runas *ra)
{
	if (ra->drop && chown(path, ra->uid, ra->gid)) {
		log_error("cannot give %s to user %s: %s", path, ra->name, strerror(errno));
		return -errno;
	}
	return 0;
}

int pgc_mkdir_owned(const char *path, mode_t mode, const struct runas *ra)
{
	if (mkdir(path, mode) && errno != EEXIST) {
		log_error("cannot create %s: %s", path, strerror(errno));
		return -errno;
	}
	return chown_to(path, ra);
}

int pgc_read_port(const char *dir)
{
	char path[PATH_MAX];
	FILE *f;
	int port = SOCKET_PORT_DEF;

	if (pgc_path_join(path, sizeof(path), dir, MARKER_FILE))
		return -ENAMETOOLONG;
	f = fopen(path, "r");
	if (!f)
		return -ENOENT;
	if (fscanf(f, "port=%d", &port) != 1)
		port = SOCKET_PORT_DEF;
	fclose(f);
	return port;
}

int pgc_write_text(const char *path, const char *text, mode_t mode, const struct runas *ra)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	size_t len = strlen(text);
	int err = 0;

	if (fd < 0) {
		log_error("cannot write %s: %s", path, strerror(errno));
		return -errno;
	}
	if (write(fd, text, len) != (ssize_t)len)
		err = -EIO;
	if (close(fd) && !err)
		err = -errno;
	if (err)
		log_error("cannot write %s", path);
	return err ? err : chown_to(path, ra);
}

static int write_settings(const char *dir, const struct pgcluster_opts *opts,
			  const struct runas *ra, int socket_port)
{
	char path[PATH_MAX];
	char conf[8192];
	size_t n = 0;

#define APPEND(...) n += snprintf(conf + n, n < sizeof(conf) ? sizeof(conf) - n : 0, __VA_ARGS__)
	APPEND("# Written by traceprof's pgcluster at every create; edit with -c name=value.\n");
	APPEND("listen_addresses = '%s'\n", opts->port ? "127.0.0.1" : "");
	APPEND("port = %d\n", socket_port);
	APPEND("unix_socket_directories = '%s/run'\n", dir);
	APPEND("unix_socket_permissions = 0700\n");
	APPEND("password_encryption = 'scram-sha-256'\n");
	APPEND("max_connections = 60\n");
	APPEND("shared_buffers = 256MB\n");
	APPEND("work_mem = 32MB\n");
	APPEND("maintenance_work_mem = 256MB\n");
	APPEND("max_wal_size = 4GB\n");
	APPEND("checkpoint_timeout = 15min\n");
	APPEND("jit = off\n");
	APPEND("log_min_messages = warning\n");
	APPEND("log_min_error_statement = panic\n");
	if (opts->fast) {
		APPEND("fsync = off\n");
		APPEND("synchronous_commit = off\n");
		APPEND("full_page_writes = off\n");
	}
	for (const char *const *s = opts->settings; s && *s; s++) {
		const char *eq = strchr(*s, '=');

		if (!eq || eq == *s) {
			log_error("setting '%s' is not of the form name=value", *s);
			return -EINVAL;
		}
		APPEND("%.*s = '%s'\n", (int)(eq - *s), *s, eq + 1);
	}
#undef APPEND
	if (n >= sizeof(conf)) {
		log_error("too many settings");
		return -E2BIG;
	}
	if (pgc_path_join(path, sizeof(path), dir, "data/traceprof.conf"))
		return -ENAMETOOLONG;
	return pgc_write_text(path, conf, 0640, ra);
}

static int run_initdb(const char *dir, const struct runas *ra)
{
	char pwpath[PATH_MAX];
	char pwopt[PATH_MAX + 16];
	char datadir[PATH_MAX];
	char confpath[PATH_MAX];
	char user[64], password[2 * PASSWORD_BYTES + 1];
	FILE *f;
	int rc;

	if (pgc_path_join(pwpath, sizeof(pwpath), dir, AUTH_DIR "/initdb.pw") ||
	    pgc_path_join(datadir, sizeof(datadir), dir, "data") ||
	    pgc_path_join(confpath, sizeof(confpath), dir, "data/postgresql.conf"))
		return -ENAMETOOLONG;
	rc = pgc_passfile_ensure(dir, "admin", ADMIN_USER, ra);
	if (!rc)
		rc =
		    pgc_passfile_read(dir, "admin", user, sizeof(user), password, sizeof(password));
	if (!rc)
		rc = pgc_write_text(pwpath, password, 0600, ra);
	if (rc)
		return rc;
	snprintf(pwopt, sizeof(pwopt), "--pwfile=%s", pwpath);
	{
		char *argv[] = {
		    "initdb", "-D", datadir, "-U",	    user,	 "--auth=scram-sha-256",
		    pwopt,    "-E", "UTF8",  "--no-locale", "--no-sync", NULL};

		rc = run_tool(dir, ra, argv);
	}
	unlink(pwpath);
	if (rc != 0) {
		log_error("initdb failed (exit %d) in %s", rc, datadir);
		quote_log_tail(dir);
		return rc < 0 ? rc : -EIO;
	}
	f = fopen(confpath, "a");
	if (!f) {
		log_error("cannot open %s: %s", confpath, strerror(errno));
		return -errno;
	}
	fputs("\ninclude_if_exists = 'traceprof.conf'\n", f);
	fclose(f);
	return 0;
}

int pgc_absolute_dir(const char *dir, char *out, bool create)
{
	if (create && mkdir(dir, 0700) && errno != EEXIST) {
		log_error("cannot create %s: %s", dir, strerror(errno));
		return -errno;
	}
	if (!realpath(dir, out)) {
		if (errno == ENOENT)
			return -ENOENT;
		log_error("cannot resolve %s: %s", dir, strerror(errno));
		return -errno;
	}
	return 0;
}

/* A cluster directory resolved for running pg_ctl on it. */
struct cluster {
	char abs[PATH_MAX];	/* absolute cluster directory */
	char datadir[PATH_MAX]; /* its data/ (PGDATA) */
	struct runas ra;	/* the user the server runs as */
};

static int cluster_resolve(const char *dir, struct cluster *c)
{
	int rc = pgc_absolute_dir(dir, c->abs, false);

	if (rc)
		return rc;
	if (pgc_path_join(c->datadir, sizeof(c->datadir), c->abs, "data"))
		return -ENAMETOOLONG;
	return resolve_runas(&c->ra);
}

/* Runs pg_ctl; on failure says what failed and quotes the server log. */
static int run_pg_ctl(const struct cluster *c, const char *what, char *const argv[])
{
	int rc = run_tool(c->abs, &c->ra, argv);

	if (rc != 0) {
		log_error("PostgreSQL in %s did not %s (pg_ctl exit %d)", c->abs, what, rc);
		quote_log_tail(c->abs);
		return rc < 0 ? rc : -EIO;
	}
	return 0;
}

int pgcluster_status(const char *dir)
{
	char version[PATH_MAX];
	struct cluster c;
	int rc;

	rc = cluster_resolve(dir, &c);
	if (rc)
		return rc;
	if (pgc_path_join(version, sizeof(version), c.datadir, "PG_VERSION"))
		return -ENAMETOOLONG;
	if (!file_exists(version))
		return -ENOENT;
	{
		char *argv[] = {"pg_ctl", "status", "-D", c.datadir, NULL};

		rc = run_tool(c.abs, &c.ra, argv);
	}
	if (rc == 0)
		return 1;
	if (rc == 3)
		return 0;
	return rc < 0 ? rc : -EIO;
}

int pgcluster_start(const char *dir)
{
	char logpath[PATH_MAX];
	struct cluster c;
	int rc;

	rc = pgcluster_status(dir);
	if (rc == 1)
		return 0;
	if (rc == -ENOENT)
		log_error("no PostgreSQL cluster in %s; create one first", dir);
	if (rc < 0)
		return rc;
	rc = cluster_resolve(dir, &c);
	if (rc)
		return rc;
	if (pgc_path_join(logpath, sizeof(logpath), c.abs, "postgres.log"))
		return -ENAMETOOLONG;
	{
		char *argv[] = {"pg_ctl", "start",   "-w", "-t",    "120",
				"-D",	  c.datadir, "-l", logpath, NULL};

		return run_pg_ctl(&c, "start", argv);
	}
}

int pgcluster_stop(const char *dir)
{
	struct cluster c;
	int rc;

	rc = pgcluster_status(dir);
	if (rc <= 0)
		return rc == 0 ? 0 : rc;
	rc = cluster_resolve(dir, &c);
	if (rc)
		return rc;
	{
		char *argv[] = {"pg_ctl", "stop", "-w", "-t",	   "120",
				"-m",	  "fast", "-D", c.datadir, NULL};

		return run_pg_ctl(&c, "stop", argv);
	}
}

/*
 * Applies the migrations as the bootstrap superuser: 010 hands every object
 * to traceprof_owner (also those of a database made before roles, owned by
 * the old superuser), later ones run as traceprof_owner.
 */
static int prepare_database(const char *dir)
{
	PGconn *conn = pgc_connect_admin(dir, PGCLUSTER_DBNAME);
	int rc;

	if (!conn)
		return -ECONNREFUSED;
	rc = migrate_apply(conn, NULL);
	PQfinish(conn);
	return rc;
}

int pgcluster_create(const char *dir, const struct pgcluster_opts *opts)
{
	static const struct pgcluster_opts defaults = {0};
	char abs[PATH_MAX];
	char path[PATH_MAX];
	char marker[64];
	struct runas ra;
	bool legacy = false;
	int socket_port;
	int rc;

	if (!opts)
		opts = &defaults;
	if (opts->port < 0 || opts->port > 65535) {
		log_error("port %d is out of range 1-65535", opts->port);
		return -EINVAL;
	}
	rc = resolve_runas(&ra);
	if (rc)
		return rc;
	rc = pgc_absolute_dir(dir, abs, true);
	if (rc)
		return rc;
	socket_port = opts->port ? opts->port : SOCKET_PORT_DEF;
	if (strlen(abs) + strlen("/run/.s.PGSQL.65535") > SOCKET_PATH_MAX) {
		log_error("directory path %s is too long for a Unix socket (at most %d "
			  "characters); choose a shorter one",
			  abs, SOCKET_PATH_MAX - (int)strlen("/run/.s.PGSQL.65535"));
		return -ENAMETOOLONG;
	}
	if (pgc_path_join(path, sizeof(path), abs, "data/PG_VERSION"))
		return -ENAMETOOLONG;
	if (!file_exists(path)) {
		DIR *d = opendir(abs);
		struct dirent *e;
		int entries = 0;

		while (d && (e = readdir(d)))
			if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") &&
			    strcmp(e->d_name, MARKER_FILE) && strcmp(e->d_name, "postgres.log") &&
			    strcmp(e->d_name, "run") && strcmp(e->d_name, AUTH_DIR))
				entries++;
		if (d)
			closedir(d);
		if (entries) {
			log_error("%s is not empty and holds no traceprof cluster; choose an empty "
				  "or new directory",
				  abs);
			return -EEXIST;
		}
		rc = chown_to(abs, &ra);
		if (!rc)
			rc = pgc_ensure_passfiles(abs, false, &ra);
		if (rc)
			return rc;
		snprintf(marker, sizeof(marker), "port=%d\n", socket_port);
		if (pgc_path_join(path, sizeof(path), abs, MARKER_FILE))
			return -ENAMETOOLONG;
		rc = pgc_write_text(path, marker, 0644, &ra);
		if (rc)
			return rc;
		rc = run_initdb(abs, &ra);
		if (rc)
			return rc;
	} else {
		/* Made before roles: no passfiles; its superuser keeps its old name. */
		if (pgc_path_join(path, sizeof(path), abs, AUTH_DIR "/admin.pgpass"))
			return -ENAMETOOLONG;
		legacy = !file_exists(path);
		rc = pgc_ensure_passfiles(abs, legacy, &ra);
		if (rc)
			return rc;
		if (legacy && pgc_path_join(path, sizeof(path), abs, "password") == 0)
			unlink(path); /* the old superuser's TCP password, replaced now */
	}
	if (pgc_read_port(abs) != socket_port) {
		/* An existing cluster keeps its socket name unless a port is asked for. */
		if (opts->port) {
			snprintf(marker, sizeof(marker), "port=%d\n", socket_port);
			if (pgc_path_join(path, sizeof(path), abs, MARKER_FILE))
				return -ENAMETOOLONG;
			rc = pgc_write_text(path, marker, 0644, &ra);
			if (rc)
				return rc;
			pgcluster_stop(abs);
		} else {
			socket_port = pgc_read_port(abs);
		}
	}
	/* Only the server user (and root) may enter DIR and reach the socket. */
	if (chmod(abs, 0700)) {
		log_error("cannot make %s private (chmod 0700): %s", abs, strerror(errno));
		return -errno;
	}
	if (pgc_path_join(path, sizeof(path), abs, "run"))
		return -ENAMETOOLONG;
	rc = pgc_mkdir_owned(path, 0700, &ra);
	if (!rc && chmod(path, 0700))
		rc = -errno;
	if (rc)
		return rc;
	rc = write_settings(abs, opts, &ra, socket_port);
	if (rc)
		return rc;
	if (pgcluster_status(abs) == 1) {
		/* Settings changed on a running cluster: restart to apply them. */
		rc = pgcluster_stop(abs);
		if (rc)
			return rc;
	}
	rc = pgcluster_start(abs);
	if (!rc)
		rc = pgc_setup_roles(abs, &ra);
	if (rc)
		return rc;
	if (legacy)
		log_info("%s: passwords and roles set, trust authentication removed", abs);
	return prepare_database(abs);
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	if (flag == FTW_DP ? rmdir(path) : unlink(path)) {
		log_error("cannot remove %s: %s", path, strerror(errno));
		return -1;
	}
	return 0;
}

int pgcluster_remove(const char *dir)
{
	char abs[PATH_MAX];
	char marker[PATH_MAX];
	int rc;

	rc = pgc_absolute_dir(dir, abs, false);
	if (rc == -ENOENT)
		return 0;
	if (rc)
		return rc;
	if (pgc_path_join(marker, sizeof(marker), abs, MARKER_FILE))
		return -ENAMETOOLONG;
	if (!file_exists(marker)) {
		log_error("%s was not created by traceprof (no %s file); not removing it", abs,
			  MARKER_FILE);
		return -EPERM;
	}
	rc = pgcluster_stop(abs);
	if (rc && rc != -ENOENT)
		return rc;
	if (nftw(abs, remove_entry, 32, FTW_DEPTH | FTW_PHYS))
		return -EIO;
	return 0;
}
