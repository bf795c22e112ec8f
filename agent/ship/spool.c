/*
 * spool.c - closed windows on disk until their COMMIT (design in spool.h
 * and docs/agent.md, "What a crash loses").
 *
 * Workload: one window file every window (15 s by default) from the
 * aggregator, one per OTLP export, each removed a few milliseconds later
 * when the database is up; during an outage they pile up to max_bytes.
 * This file keeps the directory: names, the lock, writing, removing and
 * reading back window files, commit records and the state record; what
 * is in a window file is spool_codec.c's.
 */
#include "spool.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "traceprof/log.h"

#define STATE_MAGIC "TPSTATE1"

struct state_rec;

struct spool {
	struct spool_opts o;	 /* options; dir and db_key point to path below */
	char path[4096];	 /* DIR/<hash> */
	char made[4][4096];	 /* directories spool_open created, outermost first */
	int nmade;		 /* entries in made */
	int lock_fd;		 /* flock'ed lock file */
	int state_fd;		 /* the state record */
	struct state_rec *rec;	 /* it, mapped (MAP_SHARED), or NULL: pwrite */
	struct spool_state last; /* what the record holds now */
	pthread_mutex_t mu;	 /* guards below */
	uint64_t next_id;	 /* id of the next window file */
	struct spool_stats st;	 /* counters, bytes and files */
};

/* The state record as it is on disk. */
struct state_rec {
	char magic[8];		 /* STATE_MAGIC */
	uint32_t clean;		 /* 1: the run stopped cleanly */
	uint32_t pad;		 /* zero */
	int64_t pid;		 /* the run's process id */
	int64_t updated_us;	 /* CLOCK_REALTIME of the last write */
	struct spool_state lost; /* what a crash then lost */
};

/* ---- files ---- */

static int64_t now_us(void)
{
	struct timespec t;

	clock_gettime(CLOCK_REALTIME, &t);
	return (int64_t)t.tv_sec * 1000000 + t.tv_nsec / 1000;
}

static void file_name(const struct spool *sp, char *out, size_t len, uint64_t id, const char *ext)
{
	snprintf(out, len, "%s/%016" PRIx64 ".%s", sp->path, id, ext);
}

/* Parses "<16 hex>.<ext>"; returns the id or 0. */
static uint64_t parse_name(const char *name, const char *ext)
{
	char *end;
	uint64_t id;

	if (strlen(name) != 17 + strlen(ext) || name[16] != '.' || strcmp(name + 17, ext))
		return 0;
	errno = 0;
	id = strtoull(name, &end, 16);
	return end == name + 16 && !errno ? id : 0;
}

static int write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t k = write(fd, p, n);

		if (k < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

static void sync_dir(const struct spool *sp)
{
	int fd;

	if (!sp->o.sync)
		return;
	fd = open(sp->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0) {
		fsync(fd);
		close(fd);
	}
}

/* Creates each missing directory of path with mode 0700; remembers the last few it made. */
static int mkdir_p(struct spool *sp, const char *path)
{
	char buf[4096];
	size_t n = strlen(path);

	if (n == 0 || n >= sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, path, n + 1);
	for (size_t i = 1; i <= n; i++) {
		if (buf[i] != '/' && buf[i] != '\0')
			continue;
		buf[i] = '\0';
		if (mkdir(buf, 0700) == 0) {
			if (sp->nmade == 4) {
				memmove(sp->made, sp->made + 1, sizeof(sp->made[0]) * 3);
				sp->nmade--;
			}
			snprintf(sp->made[sp->nmade++], sizeof(sp->made[0]), "%s", buf);
		} else if (errno != EEXIST) {
			return -errno;
		}
		buf[i] = path[i];
	}
	return 0;
}

static void write_state(struct spool *sp, bool clean)
{
	struct state_rec rec = {.clean = clean, .pid = getpid(), .updated_us = now_us()};

	memcpy(rec.magic, STATE_MAGIC, 8);
	rec.lost = sp->last;
	if (sp->state_fd >= 0 && pwrite(sp->state_fd, &rec, sizeof(rec), 0) != sizeof(rec))
		log_debug("spool: cannot write the state record: %s", strerror(errno));
}

static void read_previous(struct spool *sp, struct spool_previous *prev)
{
	struct state_rec rec;

	if (pread(sp->state_fd, &rec, sizeof(rec), 0) != sizeof(rec) ||
	    memcmp(rec.magic, STATE_MAGIC, 8) != 0)
		return;
	prev->found = true;
	prev->unclean = !rec.clean;
	prev->pid = (int)rec.pid;
	prev->updated_us = rec.updated_us;
	if (prev->unclean)
		prev->lost = rec.lost;
}

/* Counts the window files there, removes temporary ones, finds the next id. */
static int scan(struct spool *sp)
{
	DIR *d = opendir(sp->path);
	struct dirent *e;

	if (!d)
		return -errno;
	sp->next_id = 1;
	while ((e = readdir(d)) != NULL) {
		uint64_t id = parse_name(e->d_name, "win");
		struct stat st;

		if (parse_name(e->d_name, "tmp")) {
			unlinkat(dirfd(d), e->d_name, 0);
			continue;
		}
		if (!id || fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
		    !S_ISREG(st.st_mode))
			continue;
		sp->st.files++;
		sp->st.bytes += (size_t)st.st_size;
		if (id >= sp->next_id)
			sp->next_id = id + 1;
	}
	closedir(d);
	return 0;
}

const char *spool_path(const struct spool *sp)
{
	return sp ? sp->path : "";
}

struct spool *spool_open(const struct spool_opts *opts, struct spool_previous *prev, char *err,
			 size_t errlen)
{
	struct spool *sp;
	struct spool_previous unused;
	char name[4200];
	int rc;

	if (!prev)
		prev = &unused;
	memset(prev, 0, sizeof(*prev));
	if (!opts || !opts->dir || !opts->dir[0]) {
		snprintf(err, errlen, "no spool directory");
		errno = EINVAL;
		return NULL;
	}
	sp = calloc(1, sizeof(*sp));
	if (!sp) {
		snprintf(err, errlen, "out of memory");
		errno = ENOMEM;
		return NULL;
	}
	sp->o = *opts;
	if (!sp->o.max_bytes)
		sp->o.max_bytes = SPOOL_DEFAULT_BYTES;
	sp->lock_fd = sp->state_fd = -1;
	pthread_mutex_init(&sp->mu, NULL);
	if ((size_t)snprintf(sp->path, sizeof(sp->path), "%s/%016" PRIx64, opts->dir,
			     spool_hash(opts->db_key ? opts->db_key : "",
					opts->db_key ? strlen(opts->db_key) : 0)) >=
	    sizeof(sp->path)) {
		rc = -ENAMETOOLONG;
		snprintf(err, errlen, "spool directory name too long");
		goto out_free;
	}
	rc = mkdir_p(sp, sp->path);
	if (rc) {
		snprintf(err, errlen, "cannot create %s: %s", sp->path, strerror(-rc));
		goto out_free;
	}
	{
		/* windows from this directory go into the database: only we may write it */
		struct stat st;

		if (lstat(sp->path, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid() ||
		    (st.st_mode & 022)) {
			rc = -EPERM;
			snprintf(err, errlen,
				 "%s is not a directory of this user that only it may write "
				 "(fix its owner and mode, or set spool-dir)",
				 sp->path);
			goto out_free;
		}
	}
	snprintf(name, sizeof(name), "%s/lock", sp->path);
	sp->lock_fd = open(name, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (sp->lock_fd < 0 || flock(sp->lock_fd, LOCK_EX | LOCK_NB) != 0) {
		rc = errno == EWOULDBLOCK ? -EBUSY : -errno;
		snprintf(err, errlen, "%s %s: %s",
			 rc == -EBUSY ? "another agent uses" : "cannot lock", sp->path,
			 rc == -EBUSY ? "set spool-dir to a directory of its own" : strerror(-rc));
		goto out_free;
	}
	snprintf(name, sizeof(name), "%s/db", sp->path);
	{
		int fd = open(name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);

		if (fd >= 0) {
			/* for whoever looks: which database these windows are for */
			if (write_all(fd, opts->db_key ? opts->db_key : "",
				      opts->db_key ? strlen(opts->db_key) : 0) == 0)
				(void)write_all(fd, "\n", 1);
			close(fd);
		}
	}
	snprintf(name, sizeof(name), "%s/state", sp->path);
	sp->state_fd = open(name, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (sp->state_fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "cannot open %s: %s", name, strerror(-rc));
		goto out_free;
	}
	read_previous(sp, prev);
	write_state(sp, false);
	/* the main loop updates it every pass: stores into a shared mapping, no system call */
	sp->rec = mmap(NULL, sizeof(*sp->rec), PROT_READ | PROT_WRITE, MAP_SHARED, sp->state_fd, 0);
	if (sp->rec == MAP_FAILED)
		sp->rec = NULL;
	rc = scan(sp);
	if (rc) {
		snprintf(err, errlen, "cannot read %s: %s", sp->path, strerror(-rc));
		goto out_free;
	}
	return sp;

out_free:
	if (sp->lock_fd >= 0)
		close(sp->lock_fd);
	if (sp->state_fd >= 0)
		close(sp->state_fd);
	pthread_mutex_destroy(&sp->mu);
	free(sp);
	errno = -rc;
	return NULL;
}

void spool_close(struct spool *sp, bool clean)
{
	char name[4200];

	if (!sp)
		return;
	if (clean) {
		write_state(sp, true);
		if (sp->st.files == 0) {
			/* nothing left for a next run: leave no trace */
			static const char *const leave[] = {"state", "db", "lock"};

			for (size_t i = 0; i < sizeof(leave) / sizeof(leave[0]); i++) {
				snprintf(name, sizeof(name), "%s/%s", sp->path, leave[i]);
				unlink(name);
			}
			rmdir(sp->path);
			/* and the directories this run created, if nothing else is in them */
			for (int i = sp->nmade - 1; i >= 0; i--)
				rmdir(sp->made[i]);
		}
	}
	if (sp->rec)
		munmap(sp->rec, sizeof(*sp->rec));
	if (sp->state_fd >= 0)
		close(sp->state_fd);
	if (sp->lock_fd >= 0)
		close(sp->lock_fd);
	pthread_mutex_destroy(&sp->mu);
	free(sp);
}

int spool_write(struct spool *sp, struct agg_window *w)
{
	char tmp[4200], name[4200], *buf;
	size_t len;
	uint64_t id;
	int fd, rc;

	if (!sp || !w)
		return -EINVAL;
	w->spool_id = 0;
	rc = spool_encode(w, &buf, &len);
	if (rc) {
		pthread_mutex_lock(&sp->mu);
		sp->st.write_errors++;
		pthread_mutex_unlock(&sp->mu);
		return rc;
	}
	pthread_mutex_lock(&sp->mu);
	if (sp->st.bytes + len > sp->o.max_bytes) {
		sp->st.windows_full++;
		pthread_mutex_unlock(&sp->mu);
		free(buf);
		return -ENOSPC;
	}
	id = sp->next_id++;
	sp->st.bytes += len; /* reserved; given back if the write fails */
	sp->st.files++;
	pthread_mutex_unlock(&sp->mu);

	file_name(sp, tmp, sizeof(tmp), id, "tmp");
	file_name(sp, name, sizeof(name), id, "win");
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	rc = fd < 0 ? -errno : write_all(fd, buf, len);
	if (!rc && sp->o.sync && fsync(fd) != 0)
		rc = -errno;
	if (fd >= 0 && close(fd) != 0 && !rc)
		rc = -errno;
	if (!rc && rename(tmp, name) != 0)
		rc = -errno;
	free(buf);
	pthread_mutex_lock(&sp->mu);
	if (rc) {
		sp->st.bytes -= len;
		sp->st.files--;
		sp->st.write_errors++;
	} else {
		sp->st.windows_written++;
		sp->st.bytes_written += len;
	}
	pthread_mutex_unlock(&sp->mu);
	if (rc) {
		unlink(tmp);
		return rc;
	}
	sync_dir(sp);
	w->spool_id = id;
	return 0;
}

int spool_note_commit(struct spool *sp, uint64_t id, const struct spool_commit *c)
{
	char name[4200], line[160];
	int fd, n, rc;

	if (!sp || !id || !c)
		return -EINVAL;
	file_name(sp, name, sizeof(name), id, "xid");
	n = snprintf(line, sizeof(line), "%s %" PRIu64 " %" PRIu64 " %" PRIu64 "\n", c->xid,
		     c->dict_pos, c->row_pos, c->req_pos);
	fd = open(name, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
	rc = fd < 0 ? -errno : write_all(fd, line, (size_t)n);
	if (!rc && sp->o.sync && fsync(fd) != 0)
		rc = -errno;
	if (fd >= 0)
		close(fd);
	if (rc) {
		pthread_mutex_lock(&sp->mu);
		sp->st.commit_errors++;
		pthread_mutex_unlock(&sp->mu);
	}
	return rc;
}

int spool_commits(struct spool *sp, uint64_t id, struct spool_commit *out, size_t max)
{
	char name[4200], line[160];
	FILE *f;
	size_t n = 0;

	if (!sp || !out)
		return -EINVAL;
	file_name(sp, name, sizeof(name), id, "xid");
	f = fopen(name, "re");
	if (!f)
		return errno == ENOENT ? 0 : -errno;
	while (fgets(line, sizeof(line), f)) {
		struct spool_commit c = {0};

		if (sscanf(line, "%31s %" SCNu64 " %" SCNu64 " %" SCNu64, c.xid, &c.dict_pos,
			   &c.row_pos, &c.req_pos) != 4)
			continue; /* a line cut short by the crash */
		if (n == max) {	  /* keep the newest */
			memmove(out, out + 1, (max - 1) * sizeof(*out));
			n--;
		}
		out[n++] = c;
	}
	fclose(f);
	return (int)n;
}

void spool_remove(struct spool *sp, uint64_t id)
{
	char name[4200];
	struct stat st;

	if (!sp || !id)
		return;
	file_name(sp, name, sizeof(name), id, "xid");
	unlink(name);
	file_name(sp, name, sizeof(name), id, "win");
	if (stat(name, &st) != 0 || unlink(name) != 0)
		return;
	pthread_mutex_lock(&sp->mu);
	sp->st.bytes -= (size_t)st.st_size < sp->st.bytes ? (size_t)st.st_size : sp->st.bytes;
	if (sp->st.files)
		sp->st.files--;
	sp->st.windows_removed++;
	pthread_mutex_unlock(&sp->mu);
}

static int cmp_id(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Reads window file id; NULL (and the file removed, counted) when it cannot be used. */
static struct agg_window *load_one(struct spool *sp, uint64_t id)
{
	char name[4200], *buf = NULL;
	struct agg_window *w = NULL;
	struct stat st;
	const char *why = NULL;
	int fd;

	file_name(sp, name, sizeof(name), id, "win");
	fd = open(name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
		why = "not a readable regular file";
	else if ((size_t)st.st_size > sp->o.max_bytes || st.st_size < SPOOL_FILE_HEADER)
		why = "size out of bounds";
	else if (!(buf = malloc((size_t)st.st_size)))
		why = "out of memory";
	else if (pread(fd, buf, (size_t)st.st_size, 0) != st.st_size)
		why = "short read";
	else if (!(w = spool_decode(buf, (size_t)st.st_size)))
		why = errno == ENOMEM ? "out of memory" : "malformed";
	if (fd >= 0)
		close(fd);
	free(buf);
	if (!w) {
		log_warn("spool: removing %s: %s", name, why);
		spool_remove(sp, id);
		pthread_mutex_lock(&sp->mu);
		sp->st.files_bad++;
		pthread_mutex_unlock(&sp->mu);
		return NULL;
	}
	w->spool_id = id;
	w->spool_replayed = true;
	return w;
}

struct agg_window *spool_load(struct spool *sp)
{
	struct agg_window *head = NULL, **tail = &head;
	uint64_t *ids = NULL;
	size_t n = 0, cap = 0;
	struct dirent *e;
	DIR *d;

	if (!sp || !(d = opendir(sp->path)))
		return NULL;
	while ((e = readdir(d)) != NULL) {
		uint64_t id = parse_name(e->d_name, "win");

		if (!id)
			continue;
		if (n == cap) {
			uint64_t *p = realloc(ids, (cap ? cap * 2 : 64) * sizeof(*ids));

			if (!p)
				break;
			ids = p;
			cap = cap ? cap * 2 : 64;
		}
		ids[n++] = id;
	}
	closedir(d);
	qsort(ids, n, sizeof(*ids), cmp_id);
	for (size_t i = 0; i < n; i++) {
		struct agg_window *w = load_one(sp, ids[i]);

		if (!w)
			continue;
		*tail = w;
		tail = &w->next;
		pthread_mutex_lock(&sp->mu);
		sp->st.windows_recovered++;
		pthread_mutex_unlock(&sp->mu);
	}
	free(ids);
	return head;
}

void spool_note_state(struct spool *sp, const struct spool_state *st)
{
	if (!sp || !st || memcmp(st, &sp->last, sizeof(*st)) == 0)
		return;
	sp->last = *st;
	if (sp->rec) {
		sp->rec->lost = *st;
		sp->rec->updated_us = now_us();
	} else {
		write_state(sp, false);
	}
}

void spool_get_stats(struct spool *sp, struct spool_stats *out)
{
	pthread_mutex_lock(&sp->mu);
	*out = sp->st;
	pthread_mutex_unlock(&sp->mu);
}
