/*
 * manifest_dir.c - see manifest_dir.h. Tuned for a directory of many
 * small, rarely changing files that is looked at every second and after
 * every change: the cost of a pass is the readdir, one fstatat per name and
 * the copy of the cached results; only new or changed files are opened.
 *
 * What messages may quote: a file's own text is quoted (a short escaped
 * excerpt, manifest_escape) only when the file is one a user placed there
 * for the controller and that everyone may read anyway, since the log and
 * the status file are readable by others: a regular file with one link,
 * owned by the controller's user or the directory's owner, readable by
 * others. Any other file is still parsed, but its messages say where and
 * why, never what (opts.no_excerpts).
 */
#include "manifest_dir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct manifest_dir_entry {
	char *name;		     /* the file name as the directory has it */
	char *display;		     /* the name escaped for messages and the status file */
	struct stat st;		     /* the file when it was last looked at */
	struct manifest_list result; /* what the file gave then */
	bool current;		     /* result belongs to st */
};

bool manifest_dir_is_manifest_name(const char *name)
{
	size_t n = strlen(name);

	if (name[0] == '.')
		return false;
	return (n > 5 && strcmp(name + n - 5, ".yaml") == 0) ||
	       (n > 4 && strcmp(name + n - 4, ".yml") == 0);
}

static bool same_file(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_mode == b->st_mode &&
	       a->st_size == b->st_size && a->st_mtim.tv_sec == b->st_mtim.tv_sec &&
	       a->st_mtim.tv_nsec == b->st_mtim.tv_nsec && a->st_ctim.tv_sec == b->st_ctim.tv_sec &&
	       a->st_ctim.tv_nsec == b->st_ctim.tv_nsec && a->st_uid == b->st_uid &&
	       a->st_nlink == b->st_nlink;
}

static void entry_clear(struct manifest_dir_entry *e)
{
	free(e->name);
	free(e->display);
	manifest_list_free(&e->result);
	memset(e, 0, sizeof(*e));
}

static int cmp_entry(const void *a, const void *b)
{
	return strcmp(((const struct manifest_dir_entry *)a)->name,
		      ((const struct manifest_dir_entry *)b)->name);
}

/* The refusal of a name that is not a regular file; never opened. */
static void refuse(struct manifest_dir *d, struct manifest_dir_entry *e, const struct stat *st)
{
	char msg[MANIFEST_ESCAPED_SIZE(256) + 128];

	manifest_list_free(&e->result);
	snprintf(msg, sizeof(msg), "%s: refused: %s, not a regular file (never read)", e->display,
		 manifest_file_kind(st->st_mode));
	manifest_list_add_error(&e->result, e->display, 0, NULL, NULL, msg);
	e->st = *st;
	e->current = true;
	d->stats.refused++;
}

static bool may_quote(const struct stat *st, uid_t dir_uid)
{
	return S_ISREG(st->st_mode) && st->st_nlink == 1 &&
	       (st->st_uid == geteuid() || st->st_uid == dir_uid) && (st->st_mode & S_IROTH);
}

/* Opens and parses the new or changed file of e. Returns 0 or -ENOMEM. */
static int parse_entry(struct manifest_dir *d, int dfd, uid_t dir_uid, struct manifest_dir_entry *e)
{
	struct manifest_opts opts = {.local = true};
	struct manifest_list l = {0};
	struct stat st;
	char msg[MANIFEST_ESCAPED_SIZE(256) + 128];
	int fd, rc;

	fd = openat(dfd, e->name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
	if (fd >= 0 && fstat(fd, &st)) {
		close(fd);
		fd = -1;
	}
	if (fd < 0) {
		if (errno == ELOOP) { /* became a link since fstatat */
			st = e->st;
			st.st_mode = S_IFLNK | 0777;
			refuse(d, e, &st);
			return 0;
		}
		snprintf(msg, sizeof(msg), "%s: cannot read: %s", e->display, strerror(errno));
		l.broken_files++;
		rc = manifest_list_add_error(&l, e->display, 0, NULL, NULL, msg);
		memset(&e->st, 0, sizeof(e->st)); /* read it again next pass */
		e->current = false;
		manifest_list_free(&e->result);
		e->result = l;
		return rc;
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		refuse(d, e, &st);
		return 0;
	}
	opts.no_excerpts = !may_quote(&st, dir_uid);
	if (opts.no_excerpts)
		d->stats.not_excerpted++;
	rc = manifest_parse_fd(&l, fd, &st, e->display, &opts);
	close(fd);
	manifest_list_free(&e->result);
	e->result = l;
	e->st = st;
	e->current = rc == 0;
	d->stats.parsed++;
	d->stats.parsed_last++;
	return rc;
}

static int cmp_newest_first(const void *a, const void *b)
{
	const struct manifest_dir_entry *x = *(struct manifest_dir_entry *const *)a;
	const struct manifest_dir_entry *y = *(struct manifest_dir_entry *const *)b;

	if (x->st.st_ctim.tv_sec != y->st.st_ctim.tv_sec)
		return x->st.st_ctim.tv_sec < y->st.st_ctim.tv_sec ? 1 : -1;
	if (x->st.st_ctim.tv_nsec != y->st.st_ctim.tv_nsec)
		return x->st.st_ctim.tv_nsec < y->st.st_ctim.tv_nsec ? 1 : -1;
	return strcmp(x->name, y->name);
}

/*
 * The names of the directory as entries (name only), sorted. Returns the
 * count, or -errno. Names past MANIFEST_DIR_MAX_FILES are only counted.
 */
static ssize_t read_names(struct manifest_dir *d, int dfd, struct manifest_dir_entry **out)
{
	struct manifest_dir_entry *v = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;
	int fd = dup(dfd);
	DIR *dh = fd >= 0 ? fdopendir(fd) : NULL;

	if (!dh) {
		int err = errno;

		if (fd >= 0)
			close(fd);
		return -err;
	}
	while ((errno = 0, de = readdir(dh))) {
		if (!manifest_dir_is_manifest_name(de->d_name))
			continue;
		if (n == MANIFEST_DIR_MAX_FILES) {
			d->stats.over_limit++;
			continue;
		}
		if (n == cap) {
			size_t nc = cap ? 2 * cap : 64;
			struct manifest_dir_entry *p = realloc(v, nc * sizeof(*p));

			if (!p)
				goto out_nomem;
			v = p;
			cap = nc;
		}
		memset(&v[n], 0, sizeof(v[n]));
		if (!(v[n].name = strdup(de->d_name)))
			goto out_nomem;
		n++;
	}
	closedir(dh);
	if (n)
		qsort(v, n, sizeof(*v), cmp_entry);
	*out = v;
	return (ssize_t)n;
out_nomem:
	closedir(dh);
	for (size_t i = 0; i < n; i++)
		free(v[i].name);
	free(v);
	return -ENOMEM;
}

static int append_result(struct manifest_list *m, const struct manifest_list *r)
{
	for (size_t i = 0; i < r->n; i++) {
		struct manifest_trigger t;

		if (manifest_trigger_copy(&t, &r->items[i]))
			return -ENOMEM;
		if (m->n == m->cap) {
			size_t cap = m->cap ? 2 * m->cap : 64;
			struct manifest_trigger *p = realloc(m->items, cap * sizeof(*p));

			if (!p) {
				manifest_trigger_clear(&t);
				return -ENOMEM;
			}
			m->items = p;
			m->cap = cap;
		}
		m->items[m->n++] = t;
	}
	for (size_t i = 0; i < r->n_errors; i++) {
		const struct manifest_error *e = &r->errors[i];

		if (manifest_list_add_error(m, e->file, e->doc, e->namespace_, e->name, e->message))
			return -ENOMEM;
	}
	m->broken_files += r->broken_files;
	return 0;
}

/* Parses the pending entries, newest first, within the pass's byte budget. */
static int parse_pending(struct manifest_dir *d, int dfd, uid_t dir_uid,
			 struct manifest_dir_entry **pending, size_t n_pending)
{
	uint64_t budget = MANIFEST_DIR_PASS_BYTES, want = 0;
	int rc = 0;

	for (size_t i = 0; i < n_pending; i++)
		want += (uint64_t)pending[i]->st.st_size + 1024;
	if (want > budget)
		qsort(pending, n_pending, sizeof(*pending), cmp_newest_first);
	for (size_t i = 0; i < n_pending && !rc; i++) {
		/* one file over the budget is still read when it comes first */
		uint64_t cost = (uint64_t)pending[i]->st.st_size + 1024;

		if (i && cost > budget) {
			d->stats.deferred = n_pending - i;
			break;
		}
		budget -= cost < budget ? cost : budget;
		rc = parse_entry(d, dfd, dir_uid, pending[i]);
	}
	return rc;
}

int manifest_dir_scan(struct manifest_dir *d, const char *dir, struct manifest_list *m)
{
	struct manifest_dir_entry *v = NULL, **pending = NULL;
	size_t n_pending = 0, refused_now = 0;
	char msg[MANIFEST_ESCAPED_SIZE(256) + 128];
	struct stat dst;
	ssize_t n;
	int dfd, rc = 0;

	d->stats.passes++;
	d->stats.parsed_last = d->stats.deferred = d->stats.over_limit = 0;
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0 || fstat(dfd, &dst))
		n = -errno;
	else
		n = read_names(d, dfd, &v);
	if (n < 0) {
		rc = (int)n;
		snprintf(msg, sizeof(msg), "%s: cannot read the triggers directory: %s", dir,
			 strerror(-rc));
		if (dfd >= 0)
			close(dfd);
		manifest_list_add_error(m, dir, 0, NULL, NULL, msg);
		m->broken_files++;
		return rc;
	}
	pending = calloc(n ? (size_t)n : 1, sizeof(*pending));
	if (!pending) {
		rc = -ENOMEM;
		goto out;
	}
	/* carry the cache over: both lists are sorted by name */
	for (size_t i = 0, j = 0; i < (size_t)n; i++) {
		struct manifest_dir_entry *e = &v[i];
		struct stat st;
		int c = 1;

		while (j < d->n && (c = strcmp(d->v[j].name, e->name)) < 0)
			j++;
		if (j < d->n && c == 0) {
			free(e->name);
			*e = d->v[j];
			memset(&d->v[j], 0, sizeof(d->v[j]));
			j++;
		} else {
			char esc[MANIFEST_ESCAPED_SIZE(256)];

			manifest_escape(esc, sizeof(esc), e->name, 256);
			if (!(e->display = strdup(esc))) {
				rc = -ENOMEM;
				goto out;
			}
		}
		if (fstatat(dfd, e->name, &st, AT_SYMLINK_NOFOLLOW)) {
			/* gone since readdir: as if it was not there; read again if it is back */
			manifest_list_free(&e->result);
			memset(&e->st, 0, sizeof(e->st));
			e->current = true;
			continue;
		}
		if (!S_ISREG(st.st_mode)) {
			if (!e->current || !same_file(&st, &e->st))
				refuse(d, e, &st);
			refused_now++;
		} else if (!e->current || !same_file(&st, &e->st)) {
			e->st = st;
			e->current = false;
			pending[n_pending++] = e;
		}
	}
	rc = parse_pending(d, dfd, dst.st_uid, pending, n_pending);
	for (size_t i = 0; !rc && i < (size_t)n; i++) {
		if (!v[i].current && !v[i].result.n_errors && !v[i].result.n)
			m->broken_files++; /* not read yet: its triggers are unknown */
		rc = append_result(m, &v[i].result);
	}
	if (d->stats.over_limit) {
		snprintf(msg, sizeof(msg),
			 "%s: more than %d manifest files: %llu not read (nothing is removed "
			 "meanwhile)",
			 dir, MANIFEST_DIR_MAX_FILES, (unsigned long long)d->stats.over_limit);
		manifest_list_add_error(m, dir, 0, NULL, NULL, msg);
		m->broken_files++;
	}
	d->stats.files = (uint64_t)n;
	d->stats.refused_now = refused_now;
out:
	close(dfd);
	free(pending);
	/* the old cache goes; entries moved over were zeroed */
	for (size_t j = 0; j < d->n; j++)
		entry_clear(&d->v[j]);
	free(d->v);
	d->v = v;
	d->n = (size_t)n;
	if (rc) {
		m->broken_files++;
		manifest_list_add_error(m, dir, 0, NULL, NULL, "out of memory reading manifests");
	}
	return rc;
}

void manifest_dir_free(struct manifest_dir *d)
{
	for (size_t i = 0; i < d->n; i++)
		entry_clear(&d->v[i]);
	free(d->v);
	memset(d, 0, sizeof(*d));
}

const char *manifest_dir_file_name(const struct manifest_dir *d, const char *display)
{
	for (size_t i = 0; i < d->n; i++)
		if (strcmp(d->v[i].display, display) == 0)
			return d->v[i].name;
	return NULL;
}

int manifest_dir_create(const char *dir, const char *base, const char *text, size_t len, char *err,
			size_t errlen)
{
	char path[4096], tmp[4096];
	FILE *f;
	int ok, rc;

	snprintf(path, sizeof(path), "%s/%s", dir, base);
	snprintf(tmp, sizeof(tmp), "%s/.%s.%ld.tmp", dir, base, (long)getpid());
	if (access(path, F_OK) == 0) {
		snprintf(err, errlen, "%s already exists; delete the trigger first", path);
		return -EEXIST;
	}
	f = fopen(tmp, "wx");
	if (!f) {
		rc = -errno;
		snprintf(err, errlen, "cannot write %s: %s", tmp, strerror(errno));
		return rc;
	}
	ok = fwrite(text, 1, len, f) == len;
	ok = (fflush(f) == 0) & ok & (fsync(fileno(f)) == 0);
	ok = (fclose(f) == 0) & ok;
	/* link() fails when path appeared meanwhile: never replaces a file */
	if (ok && link(tmp, path) != 0) {
		rc = -errno;
		snprintf(err, errlen, "cannot create %s: %s", path, strerror(errno));
		unlink(tmp);
		return rc;
	}
	unlink(tmp);
	if (!ok) {
		snprintf(err, errlen, "cannot write %s", path);
		return -EIO;
	}
	return 0;
}
