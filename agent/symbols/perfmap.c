/*
 * perfmap.c - a process's perf map, read as it grows (perfmap.h).
 *
 * Workload: Node.js appends a line for every piece of code V8 makes (tens
 * of thousands in a large service, more over days as code is collected
 * and made again); Java writes the whole code cache at each
 * `jcmd Compiler.perfmap`. Lookups come only on symbolizer misses. So an
 * update parses only the appended bytes, in one pass bounded in bytes, and
 * merges the new entries into the sorted array in one linear sweep (after
 * sorting the new ones): no per-line insertion into the array.
 *
 * Overlaps: a line wins over every earlier line it overlaps, which is
 * dropped whole (the code it named was freed and its space reused; what
 * remains of its range may hold other code by now). In the sweep over all
 * entries by start address every entry still active at a point overlaps
 * every other active one, so at most one of them can survive: the one
 * with the highest sequence number, if it stays the highest until its end.
 * A max-heap by sequence of the active entries finds it.
 *
 * Names live in one arena per process, addressed by offset; names of
 * dropped entries are reclaimed by compacting the arena once they make up
 * half of it.
 */
#include "perfmap.h"
#include "traceprof/hex.h"
#include "traceprof/utf8.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define HEAD_BYTES  64		     /* first bytes of the file, kept to notice a rewrite */
#define CHUNK_BYTES (64 * 1024)	     /* read buffer (> PERFMAP_LINE_MAX) */
#define COMPACT_MIN (64 * 1024)	     /* arenas smaller than this are not compacted */
#define NAMES_LIMIT (UINT32_MAX / 2) /* names are addressed by uint32_t offsets */

struct pm_entry {
	uint64_t start; /* first address */
	uint64_t end;	/* one past the last */
	uint32_t name;	/* offset in names */
	uint32_t seq;	/* 0 for entries of earlier updates, then line order within one */
};

struct perfmap {
	struct pm_entry *e; /* sorted by start, non-overlapping */
	size_t n;	    /* entries in e */
	char *names;	    /* NUL-terminated names */
	size_t names_len;   /* bytes used in names */
	size_t names_cap;   /* bytes allocated */
	size_t names_dead;  /* bytes of names no entry uses */
	bool known;	    /* a file was read: dev, ino, offset describe it */
	uint64_t dev;	    /* the file read */
	uint64_t ino;
	uint64_t offset;		/* bytes consumed */
	bool skipping;			/* consumed part of an overlong line */
	unsigned char head[HEAD_BYTES]; /* its first bytes */
	size_t head_len;		/* bytes in head */
	unsigned char tail[HEAD_BYTES]; /* the bytes before offset */
	size_t tail_len;		/* bytes in tail */
	size_t bytes;			/* accounted in stats.bytes */
};

/* The lines of one update. */
struct batch {
	struct pm_entry *e; /* in line order */
	size_t n;
	size_t cap;
};

struct perfmap *perfmap_new(void)
{
	return calloc(1, sizeof(struct perfmap));
}

static size_t bytes_of(const struct perfmap *pm)
{
	return pm->n * sizeof(struct pm_entry) + pm->names_len;
}

static void account(struct perfmap *pm, struct perfmap_stats *st, size_t old_n)
{
	st->entries = st->entries - old_n + pm->n;
	st->bytes = st->bytes - pm->bytes + bytes_of(pm);
	pm->bytes = bytes_of(pm);
}

static void reset(struct perfmap *pm, struct perfmap_stats *st)
{
	size_t old_n = pm->n;

	free(pm->e);
	free(pm->names);
	pm->e = NULL;
	pm->names = NULL;
	pm->n = pm->names_len = pm->names_cap = pm->names_dead = 0;
	pm->known = pm->skipping = false;
	pm->offset = 0;
	pm->head_len = pm->tail_len = 0;
	account(pm, st, old_n);
}

void perfmap_free(struct perfmap *pm, struct perfmap_stats *st)
{
	if (!pm)
		return;
	reset(pm, st);
	free(pm);
}

size_t perfmap_count(const struct perfmap *pm)
{
	return pm ? pm->n : 0;
}

const char *perfmap_lookup(const struct perfmap *pm, uint64_t addr, uint64_t *start)
{
	size_t lo = 0, hi = pm ? pm->n : 0;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (addr < pm->e[mid].start) {
			hi = mid;
		} else if (addr >= pm->e[mid].end) {
			lo = mid + 1;
		} else {
			if (start)
				*start = pm->e[mid].start;
			return pm->names + pm->e[mid].name;
		}
	}
	return NULL;
}

/* ---- opening ---- */

/* The effective uid and the innermost pid (NSpid's last field) of pid. */
static int read_status(int pid, int *nspid, uid_t *uid)
{
	char path[64], line[256];
	bool have_uid = false;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	*nspid = pid; /* kernels without NSpid: no pid namespaces to mind */
	while (fgets(line, sizeof(line), f)) {
		unsigned long r, e;

		if (sscanf(line, "Uid: %lu %lu", &r, &e) == 2) {
			*uid = (uid_t)e;
			have_uid = true;
		} else if (strncmp(line, "NSpid:", 6) == 0) {
			char *last = strrchr(line, '\t');
			int v = last ? atoi(last + 1) : 0;

			if (v > 0)
				*nspid = v;
		}
	}
	fclose(f);
	return have_uid ? 0 : -EIO;
}

int perfmap_open_at(int dirfd, const char *rel, uid_t uid, struct perfmap_stats *st)
{
	/*
	 * As the process would open it, and stricter: inside its root, no
	 * symbolic link anywhere on the way (a link the process's user made
	 * could name a file only root may read), a regular file with one name
	 * (a hard link could be such a file too), owned by the process's user
	 * (a file a user bind-mounted over its own map in its own namespaces
	 * keeps its real owner).
	 */
	struct open_how how = {
	    .flags = O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW,
	    .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_SYMLINKS,
	};
	struct stat s;
	long fd = syscall(SYS_openat2, dirfd, rel, &how, sizeof(how));

	/* no fallback without openat2 (Linux < 5.6): links could lead out of the root */
	if (fd < 0 && errno == ELOOP) {
		st->refused++;
		return -EPERM;
	}
	if (fd < 0)
		return -errno;
	if (fstat((int)fd, &s) != 0 || !S_ISREG(s.st_mode) || s.st_uid != uid || s.st_nlink != 1) {
		close((int)fd);
		st->refused++;
		return -EPERM;
	}
	return (int)fd;
}

int perfmap_open(int pid, int *nspid, uid_t *uid, struct perfmap_stats *st)
{
	char path[64], rel[64];
	int dfd, fd, err;

	if (*nspid <= 0) {
		err = read_status(pid, nspid, uid);
		if (err) {
			*nspid = 0;
			return err == -ENOENT ? -ESRCH : err;
		}
	}
	snprintf(path, sizeof(path), "/proc/%d/root", pid);
	dfd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return -errno;
	snprintf(rel, sizeof(rel), "tmp/perf-%d.map", *nspid);
	fd = perfmap_open_at(dfd, rel, *uid, st);
	close(dfd);
	return fd;
}

/* ---- parsing ---- */

/* A hex number (optional 0x, 1-16 digits) at *p, followed by a blank. */
static bool parse_hex(const char **p, const char *end, uint64_t *v)
{
	const char *s = *p;
	uint64_t x = 0;
	int digits = 0;

	if (end - s >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
		s += 2;
	for (; s < end && tp_hex_digit(*s) >= 0; s++) {
		if (++digits > 16)
			return false;
		x = (x << 4) | (uint64_t)tp_hex_digit(*s);
	}
	if (digits == 0 || s >= end || (*s != ' ' && *s != '\t'))
		return false;
	while (s < end && (*s == ' ' || *s == '\t'))
		s++;
	*p = s;
	*v = x;
	return true;
}

static bool batch_push(struct batch *b, const struct pm_entry *e)
{
	if (b->n == b->cap) {
		size_t cap = b->cap ? b->cap * 2 : 256;
		struct pm_entry *ne = realloc(b->e, cap * sizeof(*ne));

		if (!ne)
			return false;
		b->e = ne;
		b->cap = cap;
	}
	b->e[b->n++] = *e;
	return true;
}

/* Room for len more bytes of names. */
static bool names_reserve(struct perfmap *pm, size_t len)
{
	size_t cap = pm->names_cap ? pm->names_cap : 4096;
	char *nn;

	if (pm->names_len + len <= pm->names_cap)
		return true;
	while (cap < pm->names_len + len)
		cap *= 2;
	nn = realloc(pm->names, cap);
	if (!nn)
		return false;
	pm->names = nn;
	pm->names_cap = cap;
	return true;
}

/* One line (without its newline): a new entry in b, or counted as bad or dropped. */
static void parse_line(struct perfmap *pm, struct batch *b, const char *line, size_t len,
		       const struct perfmap_limits *lim, struct perfmap_stats *st)
{
	const char *p = line, *end = line + len;
	struct pm_entry e;
	uint64_t size;
	size_t nlen, need;

	if (len && end[-1] == '\r')
		end--;
	if (!parse_hex(&p, end, &e.start) || !parse_hex(&p, end, &size) || p >= end ||
	    (nlen = (size_t)(end - p)) > PERFMAP_NAME_MAX || size == 0 ||
	    e.start + size <= e.start) {
		st->bad_lines++;
		return;
	}
	e.end = e.start + size;
	need = (pm->n + b->n + 1) * sizeof(struct pm_entry) + pm->names_len + nlen + 1;
	if (pm->n + b->n + 1 > lim->max_entries || need > lim->max_bytes ||
	    st->bytes - pm->bytes + need > lim->total_bytes ||
	    pm->names_len + nlen + 1 > NAMES_LIMIT || !names_reserve(pm, nlen + 1)) {
		st->dropped++;
		return;
	}
	e.name = (uint32_t)pm->names_len;
	e.seq = (uint32_t)(b->n + 1);
	if (!batch_push(b, &e)) {
		st->dropped++;
		return;
	}
	tp_utf8_sanitize(pm->names + pm->names_len, p, nlen);
	pm->names_len += nlen + 1;
	st->lines++;
}

/* ---- merging ---- */

static int by_start(const void *a, const void *b)
{
	const struct pm_entry *x = a, *y = b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* A max-heap of active entries by seq. */
struct heap {
	const struct pm_entry **h;
	size_t n;
};

static void heap_push(struct heap *hp, const struct pm_entry *e)
{
	size_t i = hp->n++;

	while (i > 0 && hp->h[(i - 1) / 2]->seq < e->seq) {
		hp->h[i] = hp->h[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	hp->h[i] = e;
}

static void heap_pop(struct heap *hp)
{
	const struct pm_entry *last = hp->h[--hp->n];
	size_t i = 0;

	for (;;) {
		size_t c = 2 * i + 1;

		if (c >= hp->n)
			break;
		if (c + 1 < hp->n && hp->h[c + 1]->seq > hp->h[c]->seq)
			c++;
		if (hp->h[c]->seq <= last->seq)
			break;
		hp->h[i] = hp->h[c];
		i = c;
	}
	if (hp->n)
		hp->h[i] = last;
}

/*
 * Keeps, of all entries (sorted by start), those no entry of a higher seq
 * overlaps; writes them to out. Names of the others are counted dead.
 */
static size_t sweep(struct perfmap *pm, const struct pm_entry *all, size_t n, struct heap *hp,
		    struct pm_entry *out, int *changed)
{
	const struct pm_entry *cand = NULL;
	size_t k = 0;

	hp->n = 0;
	for (size_t i = 0; i < n; i++) {
		const struct pm_entry *e = &all[i];

		if (cand && cand->end <= e->start) {
			out[k++] = *cand; /* stayed the newest until its end */
			cand = NULL;
		}
		while (hp->n && hp->h[0]->end <= e->start)
			heap_pop(hp);
		if (!hp->n || hp->h[0]->seq < e->seq) {
			if (cand) {
				pm->names_dead += strlen(pm->names + cand->name) + 1;
				*changed |= cand->seq == 0 ? PERFMAP_REPLACED : 0;
			}
			cand = e;
		} else {
			pm->names_dead += strlen(pm->names + e->name) + 1;
			*changed |= e->seq == 0 ? PERFMAP_REPLACED : 0;
		}
		heap_push(hp, e);
	}
	if (cand)
		out[k++] = *cand;
	for (size_t i = 0; i < k; i++) {
		*changed |= out[i].seq ? PERFMAP_ADDED : 0;
		out[i].seq = 0;
	}
	return k;
}

/* Merges the batch into pm; returns 0 or -ENOMEM (the batch is dropped). */
static int merge(struct perfmap *pm, struct batch *b, int *changed)
{
	size_t n = pm->n + b->n, i = 0, j = 0, k = 0;
	struct pm_entry *all = malloc(n * sizeof(*all)), *out = malloc(n * sizeof(*out));
	struct heap hp = {.h = malloc(n * sizeof(*hp.h)), .n = 0};

	if (!all || !out || !hp.h) {
		free(all);
		free(out);
		free(hp.h);
		return -ENOMEM;
	}
	for (i = 1; i < b->n && by_start(&b->e[i - 1], &b->e[i]) < 0; i++)
		;
	if (i < b->n) /* maps are often written in address order: no sort then */
		qsort(b->e, b->n, sizeof(*b->e), by_start);
	i = 0;
	while (i < pm->n || j < b->n) {
		if (j >= b->n || (i < pm->n && pm->e[i].start <= b->e[j].start))
			all[k++] = pm->e[i++];
		else
			all[k++] = b->e[j++];
	}
	k = sweep(pm, all, n, &hp, out, changed);
	free(all);
	free(hp.h);
	free(pm->e);
	pm->e = out;
	pm->n = k;
	return 0;
}

/* Drops the names of dropped entries once they are half of the arena. */
static void compact(struct perfmap *pm)
{
	size_t len = 0, cap = pm->names_len - pm->names_dead + 1;
	char *nn;

	if (pm->names_len < COMPACT_MIN || pm->names_dead * 2 < pm->names_len)
		return;
	nn = malloc(cap);
	if (!nn)
		return;
	for (size_t i = 0; i < pm->n; i++) {
		size_t l = strlen(pm->names + pm->e[i].name) + 1;

		memcpy(nn + len, pm->names + pm->e[i].name, l);
		pm->e[i].name = (uint32_t)len;
		len += l;
	}
	free(pm->names);
	pm->names = nn;
	pm->names_len = len;
	pm->names_cap = cap;
	pm->names_dead = 0;
}

/* ---- updating ---- */

/* Whether fd still holds what was read: the same first bytes and bytes before offset. */
static bool same_file(const struct perfmap *pm, int fd, const struct stat *s)
{
	unsigned char buf[HEAD_BYTES];

	if (pm->dev != (uint64_t)s->st_dev || pm->ino != (uint64_t)s->st_ino ||
	    (uint64_t)s->st_size < pm->offset)
		return false;
	if (pm->head_len && (pread(fd, buf, pm->head_len, 0) != (ssize_t)pm->head_len ||
			     memcmp(buf, pm->head, pm->head_len) != 0))
		return false;
	if (pm->tail_len && (pread(fd, buf, pm->tail_len, (off_t)(pm->offset - pm->tail_len)) !=
				 (ssize_t)pm->tail_len ||
			     memcmp(buf, pm->tail, pm->tail_len) != 0))
		return false;
	return true;
}

/* Parses complete lines of buf[0..have) into b; returns the bytes consumed. */
static size_t parse_lines(struct perfmap *pm, struct batch *b, const char *buf, size_t have,
			  const struct perfmap_limits *lim, struct perfmap_stats *st)
{
	size_t i = 0;

	while (i < have) {
		const char *nl = memchr(buf + i, '\n', have - i);
		size_t len;

		if (!nl)
			break;
		len = (size_t)(nl - (buf + i));
		if (pm->skipping)
			pm->skipping = false; /* the end of an overlong line */
		else if (len > PERFMAP_LINE_MAX)
			st->bad_lines++;
		else
			parse_line(pm, b, buf + i, len, lim, st);
		i += len + 1;
	}
	if (have - i > PERFMAP_LINE_MAX) {
		/* no line end in sight: skip up to the next one */
		if (!pm->skipping)
			st->bad_lines++;
		pm->skipping = true;
		i = have;
	}
	return i;
}

/* Reads [offset, limit) of fd into b, a line at a time. */
static int read_pass(struct perfmap *pm, int fd, uint64_t limit, struct batch *b,
		     const struct perfmap_limits *lim, struct perfmap_stats *st)
{
	char *buf = malloc(CHUNK_BYTES);
	uint64_t pos = pm->offset; /* file offset of buf[0] */
	size_t have = 0, used;
	int err = 0;

	if (!buf)
		return -ENOMEM;
	while (pos + have < limit) {
		size_t want = CHUNK_BYTES - have;
		ssize_t r;

		if (want > limit - (pos + have))
			want = (size_t)(limit - (pos + have));
		r = pread(fd, buf + have, want, (off_t)(pos + have));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			err = -errno;
			break;
		}
		if (r == 0)
			break;
		if (pos == 0 && have == 0) {
			pm->head_len = (size_t)r < HEAD_BYTES ? (size_t)r : HEAD_BYTES;
			memcpy(pm->head, buf, pm->head_len);
		}
		have += (size_t)r;
		used = parse_lines(pm, b, buf, have, lim, st);
		memmove(buf, buf + used, have - used);
		have -= used;
		pos += used;
	}
	pm->offset = pos;
	free(buf);
	/* what ends the part read: a file rewritten in place differs there */
	pm->tail_len = pos < HEAD_BYTES ? (size_t)pos : HEAD_BYTES;
	if (pm->tail_len &&
	    pread(fd, pm->tail, pm->tail_len, (off_t)(pos - pm->tail_len)) != (ssize_t)pm->tail_len)
		pm->tail_len = 0;
	return err;
}

int perfmap_update(struct perfmap *pm, int fd, const struct perfmap_limits *lim,
		   struct perfmap_stats *st)
{
	struct batch b = {0};
	size_t old_n = pm->n,
	       pass = lim->pass_bytes > 2 * CHUNK_BYTES ? lim->pass_bytes : 2 * CHUNK_BYTES;
	uint64_t limit;
	struct stat s;
	int changed = 0, err;

	if (fstat(fd, &s) != 0)
		return -errno;
	if (pm->known && !same_file(pm, fd, &s)) {
		changed |= pm->n ? PERFMAP_REPLACED : 0;
		reset(pm, st);
		st->rereads++;
	}
	pm->known = true;
	pm->dev = (uint64_t)s.st_dev;
	pm->ino = (uint64_t)s.st_ino;
	old_n = pm->n;
	if ((uint64_t)s.st_size <= pm->offset)
		return changed;
	limit = (uint64_t)s.st_size - pm->offset > pass ? pm->offset + pass : (uint64_t)s.st_size;
	err = read_pass(pm, fd, limit, &b, lim, st);
	if (b.n && merge(pm, &b, &changed) != 0) {
		st->dropped += b.n;
		st->lines -= b.n;
		pm->names_len = b.e[0].name; /* the batch's names were appended last */
	}
	free(b.e);
	compact(pm);
	account(pm, st, old_n);
	return err ? err : changed;
}
