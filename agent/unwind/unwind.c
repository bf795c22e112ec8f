/*
 * unwind.c - places unwind tables where the BPF sampler walks stacks with
 * them: see unwind.h and agent/unwind/README.md.
 *
 * The rows area is the kernel's array "unwind_rows": a table's rows are
 * written in batches, then its slot in "unwind_tables", then the
 * processes' mapping lists that name it. A slot is
 * evicted by writing it empty first, so a list still naming it (a process
 * forked while the agent was not looking) finds another id there and
 * falls back to frame pointers instead of reading reused rows.
 */
#include <elf.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "procmem.h"
#include "traceprof/log.h"

#include "unwind.h"

#define MAX_SEGS     4	   /* executable PT_LOADs remembered per file */
#define NO_SLOT	     0u	   /* slot 0 is never used: 0 means none */
#define VDSO_MAX     65536 /* largest vdso image read */
#define DEF_RETRY_MS 50u
#define DEF_TRIES    50u
#define NBUCKETS     4096u
#define STAGE_MAX    (16u << 20) /* the cache's budget: tables built, not placed yet */

/* An executable segment: file offset range and vaddr - offset. */
struct seg {
	uint64_t off, len, delta;
};

/* One placed table. */
struct slot {
	struct cfi_cache_key key;
	uint32_t row0, nrows, id;
	uint32_t nbuckets, shift; /* the bucket index after the rows */
	uint32_t refs;		  /* mapping lists naming it (the vdso's: one more, forever) */
	uint64_t used;		  /* last time a list named it (a counter) */
	uint64_t base;		  /* the table's base vaddr */
	struct seg seg[MAX_SEGS];
	int nseg;
	int live;
	uint32_t hnext; /* next slot of its hash chain, NO_SLOT: end */
	pid_t owner;	/* the process whose mappings placed it (its share), 0: none */
};

/* What the module knows of one process. */
struct uproc {
	pid_t pid; /* 0: free */
	uint32_t nslots;
	uint32_t slots[TP_UNWIND_MAX_MAPS]; /* slots its list names (one ref each) */
	int pending;			    /* some mapping's table was not built yet */
	uint32_t tries;
	int64_t retry_us;
	uint64_t rows; /* rows of the live tables it placed (its share of the area) */
};

/*
 * A process may place tables of at most this fraction of the area: one
 * process mapping many large files without frame pointers cannot take the
 * room of all others (tables it did not place, shared with others, are
 * free to name).
 */
#define UNWIND_SHARE 2

struct unwind {
	struct unwind_maps m;
	struct unwind_opts opts;
	struct cfi_cache *cache;
	struct slot *slots;	    /* TP_UNWIND_MAX_TABLES, index = kernel slot */
	uint32_t buckets[NBUCKETS]; /* live slots by key hash, chained by hnext */
	uint32_t next_id;
	uint64_t clock;
	uint32_t vdso_slot;
	struct uproc *procs; /* open addressing by pid */
	size_t pcap, pn;
	struct tp_unwind_proc *buf; /* the list being written */
	uint32_t next_gen;	    /* the next list's generation (never 0) */
	atomic_uint built;	    /* builds finished (the cache's thread counts) */
	unsigned built_seen;	    /* ... as of the last tick */
	struct unwind_stats st;
};

static int64_t mono_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static uint64_t thread_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* struct pt_regs's index (r15 = 0 .. di = 14) of DWARF register n (0-15); -1: rsp */
static const int8_t pt_index[16] = {10, 12, 11, 5, 13, 14, 4, -1, 9, 8, 7, 6, 3, 2, 1, 0};

/* A CFA in another register (the interrupted frame only): TP_UW_CFA_REG. */
static int reg_row(const struct cfi_row *in, struct tp_unwind_row *out)
{
	int idx = pt_index[in->cfa - CFI_CFA_REG0];

	if (idx < 0 || in->cfa_off < INT8_MIN || in->cfa_off > INT8_MAX)
		return -1;
	if (cfi_row_rbp(in) == CFI_RBP_AT_CFA) {
		if (in->rbp_off % 8 || in->rbp_off / 8 < INT8_MIN || in->rbp_off / 8 > INT8_MAX)
			return -1;
		out->rbp_off8 = (int8_t)(in->rbp_off / 8);
		out->rule = TP_UW_RBP_AT_CFA;
	} else if (cfi_row_rbp(in) == CFI_RBP_UNDEFINED) {
		out->rule = TP_UW_RBP_UNDEF;
	}
	out->rule |= TP_UW_CFA_REG;
	out->cfa_off = (int16_t)(idx << 8 | (uint8_t)(int8_t)in->cfa_off);
	return 0;
}

int unwind_row_convert(const struct cfi_row *in, struct tp_unwind_row *out)
{
	enum cfi_rbp rbp = cfi_row_rbp(in);
	enum cfi_ra ra = cfi_row_ra(in);
	uint8_t rule = 0;

	memset(out, 0, sizeof(*out));
	out->addr = in->addr;
	if (in->flags & CFI_F_SIGNAL) {
		out->rule = TP_UW_SIGNAL;
		return 0;
	}
	if (in->cfa == CFI_CFA_GAP)
		return 0; /* no rule: frame pointers */
	if (ra == CFI_RA_UNDEFINED) {
		out->rule = TP_UW_CFA_RSP | TP_UW_RA_UNDEF; /* the walk ends here */
		return 0;
	}
	if (!cfi_row_supported(in))
		return 0;
	if (in->cfa_off < INT16_MIN || in->cfa_off > INT16_MAX)
		return -1;
	if (in->cfa >= CFI_CFA_REG0 && in->cfa < CFI_CFA_REG0 + 16 &&
	    cfi_row_ra(in) == CFI_RA_CFA_MINUS_8 && rbp != CFI_RBP_UNSUPPORTED)
		return reg_row(in, out);
	if (in->cfa == CFI_CFA_PLT) {
		out->cfa_off = (int16_t)in->cfa_off;
		out->rbp_off8 = (int8_t)in->rbp_off; /* the byte from which the push ran */
		out->rule = TP_UW_CFA_PLT;
		return 0;
	}
	rule = in->cfa == CFI_CFA_RSP	? TP_UW_CFA_RSP
	       : in->cfa == CFI_CFA_RBP ? TP_UW_CFA_RBP
					: TP_UW_CFA_DEREF;
	if (rbp == CFI_RBP_AT_CFA) {
		if (in->rbp_off % 8 || in->rbp_off / 8 < INT8_MIN || in->rbp_off / 8 > INT8_MAX)
			return -1;
		rule |= TP_UW_RBP_AT_CFA;
		out->rbp_off8 = (int8_t)(in->rbp_off / 8);
	} else if (rbp == CFI_RBP_UNDEFINED) {
		rule |= TP_UW_RBP_UNDEF;
	}
	out->cfa_off = (int16_t)in->cfa_off;
	out->rule = rule;
	return 0;
}

/* The executable PT_LOADs of the ELF file fd (offset ranges and deltas). */
static int read_segs(int fd, struct slot *s)
{
	Elf64_Ehdr eh;
	Elf64_Phdr ph[64];
	size_t n;

	s->nseg = 0;
	if (pread(fd, &eh, sizeof(eh), 0) != (ssize_t)sizeof(eh) ||
	    memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh.e_phentsize != sizeof(Elf64_Phdr))
		return -ENOEXEC;
	n = eh.e_phnum < 64 ? eh.e_phnum : 64;
	if (pread(fd, ph, n * sizeof(ph[0]), (off_t)eh.e_phoff) != (ssize_t)(n * sizeof(ph[0])))
		return -ENOEXEC;
	for (size_t i = 0; i < n && s->nseg < MAX_SEGS; i++) {
		if (ph[i].p_type != PT_LOAD || !(ph[i].p_flags & PF_X))
			continue;
		s->seg[s->nseg].off = ph[i].p_offset;
		s->seg[s->nseg].len = ph[i].p_filesz;
		s->seg[s->nseg].delta = ph[i].p_vaddr - ph[i].p_offset;
		s->nseg++;
	}
	return s->nseg ? 0 : -ENOEXEC;
}

/* Writes slot i's descriptor (empty when !live). */
static int write_slot(struct unwind *u, uint32_t i)
{
	struct tp_unwind_table t = {0};
	struct slot *s = &u->slots[i];

	if (s->live) {
		t.row0 = s->row0;
		t.nrows = s->nrows;
		t.id = s->id;
		t.nbuckets = s->nbuckets;
		t.shift = s->shift;
	}
	if (bpf_map_update_elem(u->m.tables_fd, &i, &t, BPF_ANY)) {
		u->st.map_errors++;
		return -errno;
	}
	return 0;
}

/*
 * The bucket index of a table of n rows whose last row starts at span:
 * the smallest bucket size (at least 256 bytes) whose index has at most
 * n / 4 + 1 entries, so it adds at most a quarter to the table.
 */
static void index_shape(uint32_t n, uint32_t span, uint32_t *shift, uint32_t *nbuckets)
{
	uint32_t s = 8;

	while (s < 31 && ((uint64_t)span >> s) + 1 > (uint64_t)n / 4 + 1)
		s++;
	*shift = s;
	*nbuckets = (uint32_t)(((uint64_t)span >> s) + 1);
}

static int cmp_u32_row0(const void *a, const void *b, void *arg)
{
	const struct slot *s = arg;
	uint32_t x = s[*(const uint32_t *)a].row0, y = s[*(const uint32_t *)b].row0;

	return x < y ? -1 : x > y;
}

/* First free run of n rows in the area; UINT32_MAX when none. */
static uint32_t find_room(struct unwind *u, uint32_t n, uint32_t *order)
{
	uint32_t k = 0, at = 0;

	for (uint32_t i = 1; i < TP_UNWIND_MAX_TABLES; i++)
		if (u->slots[i].live)
			order[k++] = i;
	qsort_r(order, k, sizeof(*order), cmp_u32_row0, u->slots);
	for (uint32_t j = 0; j < k; j++) {
		const struct slot *s = &u->slots[order[j]];

		if (s->row0 >= at && s->row0 - at >= n)
			return at;
		at = s->row0 + s->nrows + s->nbuckets;
	}
	return u->m.nrows - at >= n ? at : UINT32_MAX;
}

static uint32_t key_bucket(const struct cfi_cache_key *k)
{
	const unsigned char *p = (const unsigned char *)k;
	uint32_t h = 2166136261u;

	for (size_t i = 0; i < sizeof(*k); i++)
		h = (h ^ p[i]) * 16777619u;
	return h % NBUCKETS;
}

static void hash_add(struct unwind *u, uint32_t i)
{
	uint32_t b = key_bucket(&u->slots[i].key);

	u->slots[i].hnext = u->buckets[b];
	u->buckets[b] = i;
}

static void hash_del(struct unwind *u, uint32_t i)
{
	uint32_t *pp = &u->buckets[key_bucket(&u->slots[i].key)];

	while (*pp != NO_SLOT && *pp != i)
		pp = &u->slots[*pp].hnext;
	if (*pp == i)
		*pp = u->slots[i].hnext;
}

static struct uproc *proc_get(struct unwind *u, pid_t pid, int create);

static void evict(struct unwind *u, uint32_t i)
{
	struct slot *s = &u->slots[i];
	struct uproc *p = s->owner ? proc_get(u, s->owner, 0) : NULL;

	if (p)
		p->rows -= p->rows < s->nrows + s->nbuckets ? p->rows : s->nrows + s->nbuckets;
	s->owner = 0;
	hash_del(u, i);
	s->live = 0;
	write_slot(u, i); /* empty first: lists still naming it fall back */
	u->st.tables--;
	u->st.rows -= s->nrows + s->nbuckets;
	u->st.evictions++;
}

/* The least recently used slot nobody names, or NO_SLOT. */
static uint32_t victim(struct unwind *u)
{
	uint32_t best = NO_SLOT;

	for (uint32_t i = 1; i < TP_UNWIND_MAX_TABLES; i++) {
		const struct slot *s = &u->slots[i];

		if (s->live && !s->refs && (best == NO_SLOT || s->used < u->slots[best].used))
			best = i;
	}
	return best;
}

/* A free slot index (evicting for it if needed), or NO_SLOT. */
static uint32_t free_slot(struct unwind *u)
{
	uint32_t v;

	for (uint32_t i = 1; i < TP_UNWIND_MAX_TABLES; i++)
		if (!u->slots[i].live)
			return i;
	v = victim(u);
	if (v != NO_SLOT)
		evict(u, v);
	return v;
}

/*
 * Kernel row i of t placed with its bucket index (i >= t->nrows: index
 * entry i - nrows, the last row at or before its bucket's start).
 */
static void kernel_row(struct unwind *u, const struct cfi_table *t, const struct slot *s, size_t i,
		       size_t *cursor, struct tp_unwind_row *out)
{
	uint64_t start;

	if (i < t->nrows) {
		if (unwind_row_convert(&t->rows[i], out) != 0)
			u->st.rows_narrowed++;
		return;
	}
	start = (uint64_t)(i - t->nrows) << s->shift;
	while (*cursor + 1 < t->nrows && t->rows[*cursor + 1].addr <= start)
		(*cursor)++;
	memset(out, 0, sizeof(*out));
	out->addr = (uint32_t)*cursor;
}

/*
 * Converts t's rows, adds the bucket index, and writes them at row index
 * at of the area, in batches (one system call for BATCH rows).
 */
#define BATCH 65536u
static int write_rows(struct unwind *u, const struct cfi_table *t, const struct slot *s,
		      uint32_t at)
{
	size_t total = t->nrows + s->nbuckets, n = total < BATCH ? total : BATCH, cursor = 0;
	struct tp_unwind_row *rows = malloc(n * sizeof(*rows));
	uint32_t *keys = malloc(n * sizeof(*keys));
	int rc = 0;

	for (size_t done = 0; rows && keys && done < total && !rc;) {
		__u32 k = (__u32)(total - done < BATCH ? total - done : BATCH);

		for (__u32 r = 0; r < k; r++) {
			keys[r] = at + (uint32_t)(done + r);
			kernel_row(u, t, s, done + r, &cursor, &rows[r]);
		}
		if (bpf_map_update_batch(u->m.rows_fd, keys, rows, &k, NULL)) {
			rc = -errno;
			u->st.map_errors++;
		}
		done += k;
	}
	if (!rows || !keys)
		rc = -ENOMEM;
	free(rows);
	free(keys);
	return rc;
}

/* Copies t into the area at a free run; the slot, or NO_SLOT (counted). */
static uint32_t place(struct unwind *u, const struct cfi_cache_key *key, const struct cfi_table *t,
		      int fd)
{
	uint32_t i, at, *order, n, shift, nbuckets;
	uint64_t t0 = thread_ns();
	struct slot *s;

	if (t->nrows == 0 || t->nrows > TP_UNWIND_MAX_ROWS) {
		u->st.too_large++;
		return NO_SLOT;
	}
	index_shape((uint32_t)t->nrows, t->rows[t->nrows - 1].addr, &shift, &nbuckets);
	n = (uint32_t)t->nrows + nbuckets;
	if (n > u->m.nrows) {
		u->st.too_large++;
		return NO_SLOT;
	}
	order = malloc(TP_UNWIND_MAX_TABLES * sizeof(*order));
	if (!order)
		return NO_SLOT;
	i = free_slot(u);
	while (i != NO_SLOT && (at = find_room(u, n, order)) == UINT32_MAX) {
		uint32_t v = victim(u);

		if (v == NO_SLOT) {
			i = NO_SLOT;
			break;
		}
		evict(u, v);
	}
	free(order);
	if (i == NO_SLOT) {
		u->st.no_room++;
		return NO_SLOT;
	}
	s = &u->slots[i];
	memset(s, 0, sizeof(*s));
	if (fd >= 0 && read_segs(fd, s) != 0)
		return NO_SLOT;
	s->key = *key;
	s->row0 = at;
	s->nrows = (uint32_t)t->nrows;
	s->nbuckets = nbuckets;
	s->shift = shift;
	s->base = t->base;
	s->id = ++u->next_id ? u->next_id : ++u->next_id;
	if (write_rows(u, t, s, at) != 0)
		return NO_SLOT;
	s->live = 1;
	if (write_slot(u, i) != 0) {
		s->live = 0;
		return NO_SLOT;
	}
	hash_add(u, i);
	u->st.tables_placed++;
	u->st.tables++;
	u->st.rows += n; /* the index included: what the area holds */
	u->st.place_ns += thread_ns() - t0;
	return i;
}

static uint32_t find_slot(struct unwind *u, const struct cfi_cache_key *key)
{
	for (uint32_t i = u->buckets[key_bucket(key)]; i != NO_SLOT; i = u->slots[i].hnext)
		if (!memcmp(&u->slots[i].key, key, sizeof(*key)))
			return i;
	return NO_SLOT;
}

/* The process entry of pid (created when create), or NULL. */
static struct uproc *proc_get(struct unwind *u, pid_t pid, int create)
{
	size_t mask, i;

	if (create && (u->pn + 1) * 2 > u->pcap) {
		size_t ncap = u->pcap ? u->pcap * 2 : 64;
		struct uproc *old = u->procs, *np = calloc(ncap, sizeof(*np));

		if (!np)
			return NULL;
		u->procs = np;
		for (size_t k = 0; k < u->pcap; k++) {
			if (!old[k].pid)
				continue;
			for (i = (size_t)old[k].pid & (ncap - 1); np[i].pid;
			     i = (i + 1) & (ncap - 1))
				;
			np[i] = old[k];
		}
		u->pcap = ncap;
		free(old);
	}
	if (!u->pcap)
		return NULL;
	mask = u->pcap - 1;
	for (i = (size_t)pid & mask; u->procs[i].pid; i = (i + 1) & mask)
		if (u->procs[i].pid == pid)
			return &u->procs[i];
	if (!create)
		return NULL;
	memset(&u->procs[i], 0, sizeof(u->procs[i]));
	u->procs[i].pid = pid;
	u->pn++;
	return &u->procs[i];
}

static void proc_del(struct unwind *u, struct uproc *p)
{
	size_t mask = u->pcap - 1, i = (size_t)(p - u->procs);

	for (uint32_t k = 1; k < TP_UNWIND_MAX_TABLES; k++) /* its tables are nobody's share now */
		if (u->slots[k].owner == p->pid)
			u->slots[k].owner = 0;
	p->pid = 0;
	u->pn--;
	for (i = (i + 1) & mask; u->procs[i].pid; i = (i + 1) & mask) {
		struct uproc tmp = u->procs[i];

		u->procs[i].pid = 0;
		u->pn--;
		*proc_get(u, tmp.pid, 1) = tmp;
	}
}

static void unref_all(struct unwind *u, struct uproc *p)
{
	for (uint32_t k = 0; k < p->nslots; k++)
		if (u->slots[p->slots[k]].refs)
			u->slots[p->slots[k]].refs--;
	p->nslots = 0;
}

/* The bias of mapping m of slot s's file (row address = ip - bias); -1: no segment. */
static int map_bias(const struct slot *s, const struct procmem_map *m, uint64_t *bias)
{
	for (int k = 0; k < s->nseg; k++) {
		uint64_t lo = s->seg[k].off & ~4095ull;

		if (m->offset >= lo && m->offset < s->seg[k].off + s->seg[k].len) {
			*bias = m->start - m->offset - s->seg[k].delta + s->base;
			return 0;
		}
	}
	return -1;
}

/* The slot of file mapping m of pid: found, placed now, or NO_SLOT (*pending: not built yet). */
static uint32_t slot_of(struct unwind *u, struct uproc *p, const struct procmem_map *m,
			int *pending)
{
	pid_t pid = p->pid;
	struct cfi_cache_key key;
	const struct cfi_table *t;
	struct stat st;
	uint32_t i;
	int fd;

	*pending = 0;
	if (procmem_stat_mapped(pid, m, &st) != 0)
		return NO_SLOT;
	cfi_cache_key_file(&key, (uint64_t)st.st_dev, (uint64_t)st.st_ino, (uint64_t)st.st_size,
			   (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec);
	i = find_slot(u, &key);
	if (i != NO_SLOT)
		return i;
	if (cfi_cache_failed(u->cache, &key))
		return NO_SLOT;
	fd = procmem_open_mapped(pid, m, NULL);
	if (fd < 0)
		return NO_SLOT;
	t = cfi_cache_get_fd(u->cache, &key, fd);
	if (t && p->rows + t->nrows > u->m.nrows / UNWIND_SHARE) {
		u->st.share_refused++; /* frame pointers for it; another process may place it */
		cfi_cache_release(u->cache, t);
		i = NO_SLOT;
	} else if (t) {
		i = place(u, &key, t, fd);
		if (i != NO_SLOT) {
			u->slots[i].owner = pid;
			p->rows += u->slots[i].nrows + u->slots[i].nbuckets;
			cfi_cache_release(u->cache, t);
		} else { /* not placeable now (too large, no room): not built again for a while */
			cfi_cache_reject(u->cache, t);
		}
	} else {
		*pending = !cfi_cache_failed(u->cache, &key);
	}
	close(fd);
	return i;
}

/* Adds mapping m with slot i (NO_SLOT: pending, frame pointers until then) to the list. */
static void list_add(struct unwind *u, struct uproc *p, const struct procmem_map *m, uint32_t i)
{
	struct tp_unwind_map *e;
	uint64_t bias = 0;

	if (i != NO_SLOT && map_bias(&u->slots[i], m, &bias) != 0)
		return;
	if (u->buf->n >= TP_UNWIND_MAX_MAPS) {
		u->st.maps_dropped++;
		return;
	}
	e = &u->buf->maps[u->buf->n++];
	e->start = m->start;
	e->end = m->end;
	e->bias = bias;
	e->table = i;
	e->id = i != NO_SLOT ? u->slots[i].id : 0;
	if (i != NO_SLOT) {
		u->slots[i].refs++;
		u->slots[i].used = ++u->clock;
		p->slots[p->nslots++] = i;
		u->st.maps_placed++;
	} else {
		u->st.maps_pending++;
	}
}

static int note_now(struct unwind *u, struct uproc *p);

/* note_now, its CPU time counted */
static int note(struct unwind *u, struct uproc *p)
{
	uint64_t t0 = thread_ns();
	int rc = note_now(u, p);

	u->st.note_ns += thread_ns() - t0;
	return rc;
}

/* Writes p's mapping list from its maps now. */
static int note_now(struct unwind *u, struct uproc *p)
{
	uint32_t old[TP_UNWIND_MAX_MAPS], nold = p->nslots;
	struct procmem_maps maps = {0};
	int rc, pending = 0, any = 0;

	rc = procmem_maps_read(p->pid, &maps);
	if (rc)
		return rc;
	memcpy(old, p->slots, nold * sizeof(old[0]));
	p->nslots = 0;
	memset(u->buf, 0, sizeof(*u->buf));
	for (size_t k = 0; k < maps.n; k++) {
		const struct procmem_map *m = &maps.maps[k];
		uint32_t i;
		int pend = 0;

		if (m->perms[2] != 'x')
			continue;
		if (!strcmp(m->path, "[vdso]"))
			i = u->vdso_slot;
		else if (procmem_map_is_file(m) && !m->deleted)
			i = slot_of(u, p, m, &pend);
		else
			continue; /* anonymous code (JIT): frame pointers */
		if (i == NO_SLOT && !pend) {
			u->st.maps_no_table++;
			continue;
		}
		pending |= pend;
		any = 1;
		list_add(u, p, m, i);
	}
	procmem_maps_free(&maps);
	log_debug("unwind tables of pid=%d: %u mappings, %u with a table%s", (int)p->pid, u->buf->n,
		  p->nslots, pending ? ", some not built yet" : "");
	for (uint32_t k = 0; k < nold; k++) /* after the new references: nothing evicted between */
		if (u->slots[old[k]].refs)
			u->slots[old[k]].refs--;
	p->pending = pending;
	if (!any) {
		bpf_map_delete_elem(u->m.procs_fd, &p->pid);
		return 0;
	}
	u->buf->gen = ++u->next_gen ? u->next_gen : ++u->next_gen;
	if (bpf_map_update_elem(u->m.procs_fd, &p->pid, u->buf, BPF_ANY)) {
		u->st.map_errors++;
		return -errno;
	}
	return 0;
}

int unwind_note_process(struct unwind *u, pid_t pid)
{
	struct uproc *p = proc_get(u, pid, 1);
	int rc;

	if (!p)
		return -ENOMEM;
	u->st.notes++;
	p->tries = 0;
	p->retry_us = mono_us() + (int64_t)u->opts.retry_ms * 1000;
	rc = note(u, p);
	if (rc) {
		unref_all(u, p);
		proc_del(u, p);
	}
	return rc;
}

void unwind_inherit(struct unwind *u, pid_t pid, pid_t parent)
{
	struct uproc *from, *p;

	unwind_forget_process(u, pid); /* a reused pid */
	from = proc_get(u, parent, 0);
	if (!from || !from->nslots)
		return;
	p = proc_get(u, pid, 1);
	from = proc_get(u, parent, 0); /* the table may have moved */
	if (!p || !from)
		return;
	p->nslots = from->nslots;
	memcpy(p->slots, from->slots, from->nslots * sizeof(p->slots[0]));
	for (uint32_t k = 0; k < p->nslots; k++)
		u->slots[p->slots[k]].refs++;
	p->pending = from->pending;
	p->retry_us = from->retry_us;
}

void unwind_forget_process(struct unwind *u, pid_t pid)
{
	struct uproc *p = proc_get(u, pid, 0);

	if (!p)
		return;
	unref_all(u, p);
	bpf_map_delete_elem(u->m.procs_fd, &pid);
	proc_del(u, p);
}

int unwind_process_pending(struct unwind *u, pid_t pid)
{
	struct uproc *p = proc_get(u, pid, 0);

	return p && p->pending;
}

void unwind_tick(struct unwind *u, int64_t now_us)
{
	unsigned built = atomic_load(&u->built);
	bool fresh = built != u->built_seen;

	u->built_seen = built;
	for (size_t k = 0; k < u->pcap; k++) {
		struct uproc *p = &u->procs[k];

		if (!p->pid || !p->pending || (p->retry_us > now_us && !fresh))
			continue;
		p->retry_us = now_us + (int64_t)u->opts.retry_ms * 1000;
		if (++p->tries > u->opts.max_tries) {
			p->pending = 0;
			u->st.gave_up++;
			continue;
		}
		if (note(u, p) != 0) {
			unref_all(u, p);
			proc_del(u, p);
			k--; /* the slot now holds another entry, or none */
		}
	}
}

/* The vdso's table, built from this process's vdso (the same code in every process). */
static void place_vdso(struct unwind *u)
{
	uint64_t at = getauxval(AT_SYSINFO_EHDR), len = 0;
	struct procmem_maps maps = {0};
	struct cfi_cache_key key;
	struct cfi_table t;
	int fd;

	if (!at || procmem_maps_read(getpid(), &maps) != 0)
		return;
	for (size_t k = 0; k < maps.n; k++)
		if (maps.maps[k].start == at && !strcmp(maps.maps[k].path, "[vdso]"))
			len = maps.maps[k].end - maps.maps[k].start;
	procmem_maps_free(&maps);
	if (!len || len > VDSO_MAX)
		return;
	fd = memfd_create("vdso", MFD_CLOEXEC);
	if (fd < 0)
		return;
	if (write(fd, (const void *)(uintptr_t)at, len) == (ssize_t)len &&
	    cfi_build_fd(fd, NULL, &t) == 0) {
		cfi_cache_key_file(&key, UINT64_MAX, UINT64_MAX, len, 0);
		u->vdso_slot = place(u, &key, &t, fd);
		if (u->vdso_slot != NO_SLOT)
			u->slots[u->vdso_slot].refs = 1; /* kept for good */
		cfi_free(&t);
	}
	if (u->vdso_slot == NO_SLOT)
		log_debug("no unwind table for the vdso: its frames use frame pointers");
	close(fd);
}

/* The cache's thread built a table: count it, wake the user's loop. */
static void on_built(void *arg)
{
	struct unwind *u = arg;

	atomic_fetch_add(&u->built, 1);
	if (u->opts.wake)
		u->opts.wake(u->opts.wake_arg);
}

struct unwind *unwind_new(const struct unwind_maps *maps, const struct unwind_opts *opts)
{
	struct unwind *u;

	if (!maps || maps->rows_fd < 0 || !maps->nrows) {
		errno = ENOTSUP;
		return NULL;
	}
	u = calloc(1, sizeof(*u));
	if (!u)
		return NULL;
	u->m = *maps;
	if (opts)
		u->opts = *opts;
	if (!u->opts.retry_ms)
		u->opts.retry_ms = DEF_RETRY_MS;
	if (!u->opts.max_tries)
		u->opts.max_tries = DEF_TRIES;
	/*
	 * The cache only stages tables until they are placed (then released):
	 * a table fits it when it fits the area, up to STAGE_MAX bytes, so
	 * tables built for processes gone before they were placed do not
	 * pile up in the agent's memory.
	 */
	if (!u->opts.cache.budget_bytes)
		u->opts.cache.budget_bytes = maps->nrows * sizeof(struct cfi_row) < STAGE_MAX
						 ? maps->nrows * sizeof(struct cfi_row)
						 : STAGE_MAX;
	/* and a build never makes more rows than that: a larger file's table is cut (counted) */
	if (!u->opts.cache.build.max_rows)
		u->opts.cache.build.max_rows = u->opts.cache.budget_bytes / sizeof(struct cfi_row);
	u->st.rows_cap = maps->nrows;
	u->opts.cache.on_built = on_built;
	u->opts.cache.on_built_arg = u;
	u->slots = calloc(TP_UNWIND_MAX_TABLES, sizeof(*u->slots));
	u->buf = calloc(1, sizeof(*u->buf));
	u->cache = u->slots && u->buf ? cfi_cache_new(&u->opts.cache) : NULL;
	if (!u->cache) {
		unwind_free(u);
		errno = ENOMEM;
		return NULL;
	}
	place_vdso(u);
	return u;
}

void unwind_free(struct unwind *u)
{
	if (!u)
		return;
	if (u->cache)
		cfi_cache_destroy(u->cache);
	free(u->slots);
	free(u->buf);
	free(u->procs);
	free(u);
}

void unwind_get_stats(struct unwind *u, struct unwind_stats *out)
{
	*out = u->st;
	out->procs = u->pn;
	cfi_cache_stats(u->cache, &out->cache);
}
