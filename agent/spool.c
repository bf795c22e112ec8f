/*
 * spool.c - closed windows on disk until their COMMIT (design in spool.h
 * and docs/agent.md, "What a crash loses").
 *
 * Workload: one window file every window (15 s by default) from the
 * aggregator, one per OTLP export, each removed a few milliseconds later
 * when the database is up; during an outage they pile up to max_bytes. A
 * file is the window serialized in the machine's byte order (the spool
 * never leaves the machine): a header with a magic, the body's length and
 * an FNV-1a checksum, then the fields, arrays and strings of the window.
 * Reading one back checks every count against the bytes left before
 * allocating, so a damaged file costs at most its own size.
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

#define WIN_MAGIC   "TPSPOOL1"
#define STATE_MAGIC "TPSTATE1"
#define HEADER	    24		/* magic, body length, checksum */
#define STR_NULL    0xffffffffu /* string length that stands for NULL */

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

/* ---- encoding ---- */

struct wbuf {
	char *p;    /* data */
	size_t len; /* bytes used */
	size_t cap; /* bytes allocated */
	bool oom;   /* an allocation failed */
};

static void put(struct wbuf *b, const void *v, size_t n)
{
	if (b->oom)
		return;
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		char *p;

		while (cap < b->len + n)
			cap *= 2;
		p = realloc(b->p, cap);
		if (!p) {
			b->oom = true;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->len, v, n);
	b->len += n;
}

static void put_u64(struct wbuf *b, uint64_t v)
{
	put(b, &v, 8);
}

static void put_u32(struct wbuf *b, uint32_t v)
{
	put(b, &v, 4);
}

static void put_str(struct wbuf *b, const char *s)
{
	size_t n = s ? strlen(s) : 0;

	put_u32(b, s ? (uint32_t)n : STR_NULL);
	put(b, s, n);
}

/*
 * The body's checksum: FNV-1a over 8-byte words with a shift to mix the
 * high bits down (a byte at a time took 0.26 ms of a 258 KB window), then
 * over the bytes left.
 */
static uint64_t body_sum(const char *p, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull, v;
	size_t i = 0;

	for (; i + 8 <= n; i += 8) {
		memcpy(&v, p + i, 8);
		h = (h ^ v) * 0x100000001b3ull;
		h ^= h >> 29;
	}
	for (; i < n; i++)
		h = (h ^ (unsigned char)p[i]) * 0x100000001b3ull;
	return h;
}

static uint64_t fnv1a(const char *p, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < n; i++) {
		h ^= (unsigned char)p[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

static void put_rows(struct wbuf *b, const struct agg_window *w)
{
	for (size_t i = 0; i < w->nrows; i++) {
		const struct store_sample_row *r = &w->rows[i];
		uint8_t has_counts = r->counts != NULL;

		put_u64(b, (uint64_t)r->bucket_us);
		put_u64(b, r->source_id);
		put(b, r->trace_id, 16);
		put_u64(b, r->span_id);
		put(b, &r->hz, 2);
		put(b, &has_counts, 1);
		put_u32(b, r->n);
		put(b, r->stacks, (size_t)r->n * 8);
		if (has_counts)
			put(b, r->counts, (size_t)r->n * 4);
	}
}

static void put_dicts(struct wbuf *b, const struct agg_window *w)
{
	for (size_t i = 0; i < w->nsources; i++) {
		const struct store_source *s = &w->sources[i].src;

		put_u64(b, w->sources[i].id);
		put_str(b, s->service);
		put_str(b, s->namespace_);
		put_str(b, s->pod);
		put_str(b, s->container);
		put_str(b, s->node);
		put_str(b, s->build_id);
		put_str(b, s->labels_json);
	}
	for (size_t i = 0; i < w->nfunctions; i++) {
		put_u64(b, w->functions[i].id);
		put_str(b, w->functions[i].name);
		put_str(b, w->functions[i].module);
		put_u32(b, (uint32_t)w->functions[i].kind);
	}
	for (size_t i = 0; i < w->nframes; i++) {
		const struct agg_frame *f = &w->frames[i];

		put_u64(b, f->id);
		put_u64(b, f->function_id);
		put_str(b, f->build_id);
		put_str(b, f->file);
		put_u32(b, (uint32_t)f->line);
		put_u64(b, f->address);
	}
	for (size_t i = 0; i < w->nstacks; i++) {
		put_u64(b, w->stacks[i].id);
		put_u32(b, w->stacks[i].n);
		put(b, w->stacks[i].frame_ids, (size_t)w->stacks[i].n * 8);
	}
	for (size_t i = 0; i < w->nroutes; i++) {
		put_u64(b, w->routes[i].id);
		put_str(b, w->routes[i].method);
		put_str(b, w->routes[i].route);
	}
}

static void put_requests(struct wbuf *b, const struct agg_window *w)
{
	for (size_t i = 0; i < w->nrequests; i++) {
		const struct store_request *q = &w->requests[i];

		put_u64(b, (uint64_t)q->start_us);
		put_u64(b, (uint64_t)q->duration_us);
		put_u64(b, q->source_id);
		put(b, q->trace_id, 16);
		put_u64(b, q->span_id);
		put_u64(b, q->parent_span_id);
		put_u64(b, q->route_id);
		put_u32(b, (uint32_t)q->status_code);
	}
}

int spool_encode(const struct agg_window *w, char **out, size_t *len)
{
	struct wbuf b = {0};
	uint64_t body, sum;

	if (!w || !out || !len)
		return -EINVAL;
	/* the file is about the size of the window in memory: one allocation, usually */
	b.cap = w->bytes + 4096;
	b.p = malloc(b.cap);
	if (!b.p)
		return -ENOMEM;
	put(&b, WIN_MAGIC, 8);
	put_u64(&b, 0); /* body length, below */
	put_u64(&b, 0); /* checksum, below */
	put_u64(&b, (uint64_t)w->start_us);
	put_u64(&b, (uint64_t)w->window_us);
	put_u64(&b, w->seq);
	put_u64(&b, w->nsamples);
	put_u64(&b, w->missing_entries);
	put_u64(&b, w->samples_overflow);
	put_str(&b, w->trigger_id);
	put_u64(&b, w->nrows);
	put_u64(&b, w->nsources);
	put_u64(&b, w->nfunctions);
	put_u64(&b, w->nframes);
	put_u64(&b, w->nstacks);
	put_u64(&b, w->nroutes);
	put_u64(&b, w->nrequests);
	put_rows(&b, w);
	put_dicts(&b, w);
	put_requests(&b, w);
	if (b.oom) {
		free(b.p);
		return -ENOMEM;
	}
	body = b.len - HEADER;
	sum = body_sum(b.p + HEADER, body);
	memcpy(b.p + 8, &body, 8);
	memcpy(b.p + 16, &sum, 8);
	*out = b.p;
	*len = b.len;
	return 0;
}

/* ---- decoding ---- */

struct rbuf {
	const char *p; /* next byte */
	size_t left;   /* bytes left */
	bool bad;      /* read past the end, or a bad value */
	char *heap;    /* next free byte of the window's block */
	char *end;     /* end of the block */
};

static void get(struct rbuf *r, void *v, size_t n)
{
	if (r->bad || n > r->left) {
		r->bad = true;
		memset(v, 0, n);
		return;
	}
	memcpy(v, r->p, n);
	r->p += n;
	r->left -= n;
}

static uint64_t get_u64(struct rbuf *r)
{
	uint64_t v;

	get(r, &v, 8);
	return v;
}

static uint32_t get_u32(struct rbuf *r)
{
	uint32_t v;

	get(r, &v, 4);
	return v;
}

/* n bytes of the block, 8-aligned; NULL (and bad) when it would overrun. */
static void *take(struct rbuf *r, size_t n)
{
	char *p = r->heap;
	size_t a = (n + 7) & ~(size_t)7;

	if (r->bad || a > (size_t)(r->end - r->heap)) {
		r->bad = true;
		return NULL;
	}
	r->heap += a;
	return p;
}

static const char *get_str(struct rbuf *r)
{
	uint32_t n = get_u32(r);
	char *s;

	if (r->bad || n == STR_NULL)
		return NULL;
	if (n > r->left) {
		r->bad = true;
		return NULL;
	}
	s = take(r, (size_t)n + 1);
	if (!s)
		return NULL;
	get(r, s, n);
	s[n] = '\0';
	return s;
}

/* An array of n u64 (or u32 when size 4) copied into the block. */
static void *get_array(struct rbuf *r, uint32_t n, size_t size)
{
	void *a;

	if ((size_t)n * size > r->left) {
		r->bad = true;
		return NULL;
	}
	a = take(r, (size_t)n * size);
	if (a)
		get(r, a, (size_t)n * size);
	return a;
}

static void get_rows(struct rbuf *r, struct agg_window *w)
{
	for (size_t i = 0; i < w->nrows && !r->bad; i++) {
		struct store_sample_row *row = &w->rows[i];
		uint8_t has_counts;

		row->bucket_us = (int64_t)get_u64(r);
		row->source_id = get_u64(r);
		get(r, row->trace_id, 16);
		row->span_id = get_u64(r);
		get(r, &row->hz, 2);
		get(r, &has_counts, 1);
		row->n = get_u32(r);
		row->stacks = get_array(r, row->n, 8);
		row->counts = has_counts ? get_array(r, row->n, 4) : NULL;
	}
}

static const char *get_str_or_empty(struct rbuf *r)
{
	const char *s = get_str(r);

	return s ? s : "";
}

static void get_dicts(struct rbuf *r, struct agg_window *w)
{
	for (size_t i = 0; i < w->nsources && !r->bad; i++) {
		struct store_source *s = &w->sources[i].src;

		w->sources[i].id = get_u64(r);
		s->service = get_str_or_empty(r);
		s->namespace_ = get_str_or_empty(r);
		s->pod = get_str_or_empty(r);
		s->container = get_str_or_empty(r);
		s->node = get_str_or_empty(r);
		s->build_id = get_str_or_empty(r);
		s->labels_json = get_str(r);
	}
	for (size_t i = 0; i < w->nfunctions && !r->bad; i++) {
		w->functions[i].id = get_u64(r);
		w->functions[i].name = get_str_or_empty(r);
		w->functions[i].module = get_str_or_empty(r);
		w->functions[i].kind = (int)get_u32(r);
	}
	for (size_t i = 0; i < w->nframes && !r->bad; i++) {
		struct agg_frame *f = &w->frames[i];

		f->id = get_u64(r);
		f->function_id = get_u64(r);
		f->build_id = get_str_or_empty(r);
		f->file = get_str(r);
		f->line = (int)get_u32(r);
		f->address = get_u64(r);
	}
	for (size_t i = 0; i < w->nstacks && !r->bad; i++) {
		w->stacks[i].id = get_u64(r);
		w->stacks[i].n = get_u32(r);
		w->stacks[i].frame_ids = get_array(r, w->stacks[i].n, 8);
	}
	for (size_t i = 0; i < w->nroutes && !r->bad; i++) {
		w->routes[i].id = get_u64(r);
		w->routes[i].method = get_str_or_empty(r);
		w->routes[i].route = get_str_or_empty(r);
	}
}

static void get_requests(struct rbuf *r, struct agg_window *w)
{
	for (size_t i = 0; i < w->nrequests && !r->bad; i++) {
		struct store_request *q = &w->requests[i];

		q->start_us = (int64_t)get_u64(r);
		q->duration_us = (int64_t)get_u64(r);
		q->source_id = get_u64(r);
		get(r, q->trace_id, 16);
		q->span_id = get_u64(r);
		q->parent_span_id = get_u64(r);
		q->route_id = get_u64(r);
		q->status_code = (int)get_u32(r);
	}
}

/* Fewest bytes one element of each array takes in a file. */
enum {
	MIN_ROW = 8 + 8 + 16 + 8 + 2 + 1 + 4,
	MIN_SOURCE = 8 + 7 * 4,
	MIN_FUNCTION = 8 + 4 + 4 + 4,
	MIN_FRAME = 8 + 8 + 4 + 4 + 4 + 8,
	MIN_STACK = 8 + 4,
	MIN_ROUTE = 8 + 4 + 4,
	MIN_REQUEST = 6 * 8 + 16 + 4,
};

struct agg_window *spool_decode(const char *buf, size_t len)
{
	struct rbuf r;
	struct agg_window h = {0}, *w;
	uint64_t body, sum, n[7];
	static const size_t min[7] = {MIN_ROW,	 MIN_SOURCE, MIN_FUNCTION, MIN_FRAME,
				      MIN_STACK, MIN_ROUTE,  MIN_REQUEST};
	static const size_t elem[7] = {sizeof(struct store_sample_row), sizeof(struct agg_source),
				       sizeof(struct agg_function),	sizeof(struct agg_frame),
				       sizeof(struct agg_stack),	sizeof(struct agg_route),
				       sizeof(struct store_request)};
	size_t fixed, bytes, need = 0;
	const char *trigger_at;
	char *block;

	if (!buf || len < HEADER || memcmp(buf, WIN_MAGIC, 8) != 0)
		goto bad;
	memcpy(&body, buf + 8, 8);
	memcpy(&sum, buf + 16, 8);
	if (body != len - HEADER || body_sum(buf + HEADER, body) != sum)
		goto bad;
	r = (struct rbuf){.p = buf + HEADER, .left = body};
	h.start_us = (int64_t)get_u64(&r);
	h.window_us = (int64_t)get_u64(&r);
	h.seq = get_u64(&r);
	h.nsamples = get_u64(&r);
	h.missing_entries = get_u64(&r);
	h.samples_overflow = get_u64(&r);
	trigger_at = r.p; /* the trigger id is read again into the block below */
	{
		uint32_t tl = get_u32(&r);

		if (tl != STR_NULL) {
			if (tl > r.left)
				goto bad;
			r.p += tl;
			r.left -= tl;
		}
	}
	for (int i = 0; i < 7; i++) {
		n[i] = get_u64(&r);
		if (r.bad || n[i] > r.left / min[i])
			goto bad;
		need += n[i] * min[i];
	}
	if (need > r.left)
		goto bad;
	fixed = (sizeof(*w) + 7) & ~(size_t)7;
	for (int i = 0; i < 7; i++)
		fixed += (n[i] * elem[i] + 7) & ~(size_t)7;
	/* strings and arrays: at most twice their bytes in the file, with NULs and alignment */
	bytes = fixed + 2 * body + 64;
	block = calloc(1, bytes);
	if (!block) {
		errno = ENOMEM;
		return NULL;
	}
	w = (struct agg_window *)block;
	*w = h;
	r.heap = block + ((sizeof(*w) + 7) & ~(size_t)7);
	r.end = block + bytes;
	w->rows = take(&r, n[0] * elem[0]);
	w->sources = take(&r, n[1] * elem[1]);
	w->functions = take(&r, n[2] * elem[2]);
	w->frames = take(&r, n[3] * elem[3]);
	w->stacks = take(&r, n[4] * elem[4]);
	w->routes = take(&r, n[5] * elem[5]);
	w->requests = take(&r, n[6] * elem[6]);
	w->nrows = n[0];
	w->nsources = n[1];
	w->nfunctions = n[2];
	w->nframes = n[3];
	w->nstacks = n[4];
	w->nroutes = n[5];
	w->nrequests = n[6];
	{
		struct rbuf t = r;

		t.p = trigger_at;
		t.left = body - (size_t)(trigger_at - (buf + HEADER));
		w->trigger_id = get_str(&t);
		r.heap = t.heap;
		r.bad = t.bad;
	}
	get_rows(&r, w);
	get_dicts(&r, w);
	get_requests(&r, w);
	if (r.bad || r.left) {
		free(block);
		goto bad;
	}
	w->bytes = bytes;
	w->next = NULL;
	return w;
bad:
	errno = EINVAL;
	return NULL;
}

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
			     fnv1a(opts->db_key ? opts->db_key : "",
				   opts->db_key ? strlen(opts->db_key) : 0)) >= sizeof(sp->path)) {
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
	else if ((size_t)st.st_size > sp->o.max_bytes || st.st_size < HEADER)
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
