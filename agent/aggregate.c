/*
 * aggregate.c - see aggregate.h.
 *
 * Workload: one thread, every sample of the node (2 CPUs x 99 Hz is 200
 * samples/s, a large node a few thousand), a few thousand distinct keys per
 * window. The hot path is one hash and one probe sequence in an
 * open-addressing table with linear probing, 48-byte slots, load <= 1/2,
 * count 0 marking an empty slot. The table doubles while the first windows
 * find their working set and is never shrunk; a list of used slots clears
 * it at a window close in O(keys), so later windows reuse it without
 * allocating.
 *
 * At a close (once per window, not per sample) the used slots are copied
 * and sorted by (source, trace, span, hz, stack), which makes each row a
 * run; the dictionary closure is walked with a per-entry mark; the window
 * is built in one allocation sized first. The dictionary is four
 * open-addressing maps (id -> entry, one malloc per entry holding its
 * strings) that are rebuilt without idle entries when they grow past
 * dict_max.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "aggregate.h"

#define TABLE_MIN_SLOTS 1024
#define MAX_FRAMES	512
#define SOURCE_STRS	6

struct slot {
	uint64_t stack;	   /* stack id */
	uint64_t source;   /* source id */
	uint64_t span;	   /* span id, 0 untagged */
	uint64_t trace[2]; /* trace id bytes, as two words */
	uint16_t hz;	   /* sampling frequency */
	uint32_t count;	   /* samples; 0 = empty slot */
};

/* Common head of every dictionary entry. */
struct dent {
	uint64_t id;	    /* the entry's id */
	uint64_t last_used; /* seq of the last window that referenced it (or registration) */
	uint64_t mark;	    /* seq + 1 of the window whose closure holds it */
	size_t strbytes;    /* bytes of its strings, NULs included */
};

struct dsource {
	struct dent h;		    /* head */
	const char *s[SOURCE_STRS]; /* service, namespace, pod, container, node, build id */
	char buf[];		    /* the strings */
};

struct dfunction {
	struct dent h;	    /* head */
	int kind;	    /* function kind */
	const char *name;   /* points into buf */
	const char *module; /* points into buf */
	char buf[];	    /* the strings */
};

struct dframe {
	struct dent h;	      /* head */
	uint64_t function_id; /* its function */
	uint64_t address;     /* address or 0 */
	int line;	      /* line or <= 0 */
	const char *build_id; /* points into buf */
	const char *file;     /* points into buf, or NULL */
	char buf[];	      /* the strings */
};

struct dstack {
	struct dent h;	   /* head */
	uint32_t n;	   /* frames */
	uint64_t frames[]; /* frame ids, root first */
};

/* id -> entry, open addressing; id 0 marks an empty slot. */
struct dmap {
	uint64_t *keys; /* ids */
	void **vals;	/* entries, owned */
	size_t cap;	/* slots, a power of two */
	size_t n;	/* entries */
};

/* Growable array of entry pointers (closure lists), reused across windows. */
struct plist {
	void **p;   /* entries, borrowed from the maps */
	size_t n;   /* in use */
	size_t cap; /* allocated */
};

struct agg {
	struct agg_opts o;	       /* options with defaults filled in */
	struct slot *slots;	       /* the table */
	size_t cap;		       /* slots allocated, a power of two */
	size_t cap_max;		       /* the table never grows past this */
	uint32_t *used;		       /* indices of used slots, max_keys of them */
	uint32_t nkeys;		       /* used slots */
	struct slot *sorted;	       /* scratch for the close, grown to the largest window */
	uint32_t sorted_cap;	       /* slots in sorted */
	bool open;		       /* a window is open */
	int64_t start_us;	       /* its start */
	uint64_t seq;		       /* windows closed so far */
	uint64_t win_overflow;	       /* samples of the open window dropped at max_keys */
	struct dmap sources;	       /* dictionary: sources */
	struct dmap functions;	       /* dictionary: functions */
	struct dmap frames;	       /* dictionary: frames */
	struct dmap stacks;	       /* dictionary: stacks */
	struct plist cl[4];	       /* closure lists: sources, functions, frames, stacks */
	struct agg_window *ready;      /* closed windows not taken, oldest first */
	struct agg_window *ready_tail; /* last of them */
	struct agg_stats st;	       /* counters */
};

/* ---- hashing ---- */

static inline uint64_t mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	x ^= x >> 33;
	return x;
}

static inline uint64_t rotl(uint64_t x, int r)
{
	return (x << r) | (x >> (64 - r));
}

static inline uint64_t slot_hash(const struct slot *k)
{
	return mix64(k->stack ^ rotl(k->source, 21) ^ rotl(k->span, 42) ^ k->trace[0] ^
		     rotl(k->trace[1], 11) ^ (uint64_t)k->hz * 0x9e3779b97f4a7c15ULL);
}

static inline bool slot_eq(const struct slot *a, const struct slot *b)
{
	return a->stack == b->stack && a->source == b->source && a->span == b->span &&
	       a->trace[0] == b->trace[0] && a->trace[1] == b->trace[1] && a->hz == b->hz;
}

/* ---- dictionary maps ---- */

static void *dmap_get(const struct dmap *m, uint64_t id)
{
	if (!m->cap)
		return NULL;
	for (size_t i = mix64(id) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
		if (m->keys[i] == id)
			return m->vals[i];
		if (!m->keys[i])
			return NULL;
	}
}

static void dmap_insert(struct dmap *m, uint64_t id, void *val)
{
	size_t i = mix64(id) & (m->cap - 1);

	while (m->keys[i])
		i = (i + 1) & (m->cap - 1);
	m->keys[i] = id;
	m->vals[i] = val;
	m->n++;
}

/* Rebuilds into cap slots, keeping entries for which keep() holds (the rest are freed). */
static int dmap_rebuild(struct dmap *m, size_t cap, bool (*keep)(const struct dent *, uint64_t),
			uint64_t arg, uint64_t *evicted)
{
	struct dmap nm = {.cap = cap};

	nm.keys = calloc(cap, sizeof(*nm.keys));
	nm.vals = calloc(cap, sizeof(*nm.vals));
	if (!nm.keys || !nm.vals) {
		free(nm.keys);
		free(nm.vals);
		return -ENOMEM;
	}
	for (size_t i = 0; i < m->cap; i++) {
		if (!m->keys[i])
			continue;
		if (keep && !keep(m->vals[i], arg)) {
			free(m->vals[i]);
			(*evicted)++;
			continue;
		}
		dmap_insert(&nm, m->keys[i], m->vals[i]);
	}
	free(m->keys);
	free(m->vals);
	*m = nm;
	return 0;
}

/* Takes ownership of val (freed on failure). */
static int dmap_put(struct dmap *m, uint64_t id, void *val)
{
	if ((m->n + 1) * 2 > m->cap && dmap_rebuild(m, m->cap ? m->cap * 2 : 64, NULL, 0, NULL)) {
		free(val);
		return -ENOMEM;
	}
	dmap_insert(m, id, val);
	return 0;
}

static void dmap_free(struct dmap *m)
{
	for (size_t i = 0; i < m->cap; i++)
		if (m->keys[i])
			free(m->vals[i]);
	free(m->keys);
	free(m->vals);
}

static bool still_used(const struct dent *e, uint64_t oldest)
{
	return e->last_used >= oldest;
}

/* Forgets entries no window referenced since `oldest` (seq). */
static void dict_sweep(struct agg *a, uint64_t oldest)
{
	struct dmap *maps[4] = {&a->sources, &a->functions, &a->frames, &a->stacks};

	for (int k = 0; k < 4; k++) {
		size_t cap = maps[k]->cap;

		/* Shrink when mostly idle; a failed rebuild keeps the old map. */
		while (cap > 64 && maps[k]->n * 8 < cap)
			cap /= 2;
		dmap_rebuild(maps[k], cap, still_used, oldest, &a->st.dict_evicted);
	}
}

static size_t dict_entries(const struct agg *a)
{
	return a->sources.n + a->functions.n + a->frames.n + a->stacks.n;
}

/* ---- creation ---- */

static bool window_ok(int64_t w)
{
	return w > 0 && w <= 60000000LL && 60000000LL % w == 0;
}

struct agg *agg_new(const struct agg_opts *opts)
{
	struct agg *a;

	if (opts && opts->window_us && !window_ok(opts->window_us)) {
		errno = EINVAL;
		return NULL;
	}
	a = calloc(1, sizeof(*a));
	if (!a) {
		errno = ENOMEM;
		return NULL;
	}
	if (opts)
		a->o = *opts;
	if (!a->o.window_us)
		a->o.window_us = AGG_DEFAULT_WINDOW_US;
	if (!a->o.max_keys)
		a->o.max_keys = AGG_DEFAULT_MAX_KEYS;
	if (!a->o.dict_max)
		a->o.dict_max = AGG_DEFAULT_DICT_MAX;
	if (!a->o.dict_idle)
		a->o.dict_idle = AGG_DEFAULT_DICT_IDLE;
	if (a->o.close_grace_us < 0)
		a->o.close_grace_us = 0;
	a->cap_max = TABLE_MIN_SLOTS;
	while (a->cap_max < (size_t)a->o.max_keys * 2)
		a->cap_max *= 2;
	a->cap = TABLE_MIN_SLOTS;
	a->slots = calloc(a->cap, sizeof(*a->slots));
	a->used =
	    malloc(sizeof(*a->used) * (a->cap / 2 < a->o.max_keys ? a->cap / 2 : a->o.max_keys));
	if (!a->slots || !a->used) {
		agg_free(a);
		errno = ENOMEM;
		return NULL;
	}
	a->st.table_slots = a->cap;
	return a;
}

void agg_free(struct agg *a)
{
	if (!a)
		return;
	while (a->ready) {
		struct agg_window *w = a->ready;

		a->ready = w->next;
		agg_window_free(w);
	}
	dmap_free(&a->sources);
	dmap_free(&a->functions);
	dmap_free(&a->frames);
	dmap_free(&a->stacks);
	for (int k = 0; k < 4; k++)
		free(a->cl[k].p);
	free(a->slots);
	free(a->used);
	free(a->sorted);
	free(a);
}

/* ---- dictionary registration ---- */

static size_t str_size(const char *s)
{
	return (s ? strlen(s) : 0) + 1;
}

/* Copies s (NULL as "") to *pos and advances it; returns the copy. */
static const char *put_str(char **pos, const char *s)
{
	size_t n = str_size(s);
	char *d = *pos;

	memcpy(d, s ? s : "", n);
	*pos += n;
	return d;
}

static void dent_init(struct agg *a, struct dent *h, uint64_t id, size_t strbytes)
{
	h->id = id;
	h->last_used = a->seq;
	h->mark = 0;
	h->strbytes = strbytes;
}

int agg_add_source(struct agg *a, uint64_t id, const struct store_source *src)
{
	const char *in[SOURCE_STRS];
	struct dsource *e;
	size_t bytes = 0;
	char *pos;

	if (!a || !id || !src || !src->service || !*src->service)
		return -EINVAL;
	if (dmap_get(&a->sources, id))
		return 0;
	in[0] = src->service;
	in[1] = src->namespace_;
	in[2] = src->pod;
	in[3] = src->container;
	in[4] = src->node;
	in[5] = src->build_id;
	for (int i = 0; i < SOURCE_STRS; i++)
		bytes += str_size(in[i]);
	e = malloc(sizeof(*e) + bytes);
	if (!e)
		return -ENOMEM;
	dent_init(a, &e->h, id, bytes);
	pos = e->buf;
	for (int i = 0; i < SOURCE_STRS; i++)
		e->s[i] = put_str(&pos, in[i]);
	return dmap_put(&a->sources, id, e);
}

int agg_add_function(struct agg *a, uint64_t id, const char *name, const char *module, int kind)
{
	struct dfunction *e;
	size_t bytes;
	char *pos;

	if (!a || !id || !name || !*name)
		return -EINVAL;
	if (dmap_get(&a->functions, id))
		return 0;
	bytes = str_size(name) + str_size(module);
	e = malloc(sizeof(*e) + bytes);
	if (!e)
		return -ENOMEM;
	dent_init(a, &e->h, id, bytes);
	e->kind = kind;
	pos = e->buf;
	e->name = put_str(&pos, name);
	e->module = put_str(&pos, module);
	return dmap_put(&a->functions, id, e);
}

int agg_add_frame(struct agg *a, uint64_t id, uint64_t function_id, const char *build_id,
		  const char *file, int line, uint64_t address)
{
	struct dframe *e;
	size_t bytes;
	char *pos;

	if (!a || !id)
		return -EINVAL;
	if (dmap_get(&a->frames, id))
		return 0;
	bytes = str_size(build_id) + (file ? str_size(file) : 0);
	e = malloc(sizeof(*e) + bytes);
	if (!e)
		return -ENOMEM;
	dent_init(a, &e->h, id, bytes);
	e->function_id = function_id;
	e->address = address;
	e->line = line;
	pos = e->buf;
	e->build_id = put_str(&pos, build_id);
	e->file = file ? put_str(&pos, file) : NULL;
	return dmap_put(&a->frames, id, e);
}

int agg_add_stack(struct agg *a, uint64_t id, const uint64_t *frame_ids, size_t n)
{
	struct dstack *e;

	if (!a || !id || !frame_ids || n == 0 || n > MAX_FRAMES)
		return -EINVAL;
	if (dmap_get(&a->stacks, id))
		return 0;
	e = malloc(sizeof(*e) + n * sizeof(uint64_t));
	if (!e)
		return -ENOMEM;
	dent_init(a, &e->h, id, 0);
	e->n = (uint32_t)n;
	memcpy(e->frames, frame_ids, n * sizeof(uint64_t));
	return dmap_put(&a->stacks, id, e);
}

bool agg_has_stack(const struct agg *a, uint64_t id)
{
	return a && dmap_get(&a->stacks, id) != NULL;
}

bool agg_has_source(const struct agg *a, uint64_t id)
{
	return a && dmap_get(&a->sources, id) != NULL;
}

/* ---- the table ---- */

static int table_grow(struct agg *a)
{
	size_t cap = a->cap * 2;
	struct slot *slots = calloc(cap, sizeof(*slots));
	size_t nused = cap / 2 < a->o.max_keys ? cap / 2 : a->o.max_keys;
	uint32_t *used = malloc(sizeof(*used) * nused);

	if (!slots || !used) {
		free(slots);
		free(used);
		return -ENOMEM;
	}
	for (uint32_t k = 0; k < a->nkeys; k++) {
		const struct slot *s = &a->slots[a->used[k]];
		size_t i = slot_hash(s) & (cap - 1);

		while (slots[i].count)
			i = (i + 1) & (cap - 1);
		slots[i] = *s;
		used[k] = (uint32_t)i;
	}
	free(a->slots);
	free(a->used);
	a->slots = slots;
	a->used = used;
	a->cap = cap;
	a->st.table_slots = cap;
	return 0;
}

static bool sample_ok(const struct agg_sample *s)
{
	bool untagged = true;

	for (int i = 0; i < 16; i++)
		if (s->trace_id[i]) {
			untagged = false;
			break;
		}
	return s->hz >= 1 && s->hz <= 1000 && s->source_id && s->stack_id &&
	       untagged == (s->span_id == 0);
}

static int64_t floor_to(int64_t t, int64_t w)
{
	int64_t q = t / w;

	if (t % w < 0)
		q--;
	return q * w;
}

static int close_window(struct agg *a);

int agg_add(struct agg *a, const struct agg_sample *s)
{
	struct slot k;
	int64_t w;
	size_t i;
	int ret = 0;

	if (!a || !s || !sample_ok(s)) {
		if (a)
			a->st.samples_invalid++;
		return -EINVAL;
	}
	w = floor_to(s->time_us, a->o.window_us);
	if (!a->open) {
		a->open = true;
		a->start_us = w;
	} else if (w >= a->start_us + a->o.window_us) {
		ret = close_window(a);
		a->open = true;
		a->start_us = w;
	} else if (w < a->start_us) {
		a->st.samples_late++;
	}
	k.stack = s->stack_id;
	k.source = s->source_id;
	k.span = s->span_id;
	memcpy(k.trace, s->trace_id, 16);
	k.hz = s->hz;
	for (i = slot_hash(&k) & (a->cap - 1); a->slots[i].count; i = (i + 1) & (a->cap - 1)) {
		if (slot_eq(&a->slots[i], &k)) {
			a->slots[i].count++;
			a->st.samples++;
			return ret;
		}
	}
	if (a->nkeys >= a->o.max_keys) {
		a->st.samples_overflow++;
		a->win_overflow++;
		return ret;
	}
	if ((size_t)(a->nkeys + 1) * 2 > a->cap && a->cap < a->cap_max) {
		if (table_grow(a)) {
			a->st.samples_overflow++;
			a->win_overflow++;
			return ret ? ret : -ENOMEM;
		}
		for (i = slot_hash(&k) & (a->cap - 1); a->slots[i].count;
		     i = (i + 1) & (a->cap - 1))
			;
	}
	k.count = 1;
	a->slots[i] = k;
	a->used[a->nkeys++] = (uint32_t)i;
	a->st.samples++;
	return ret;
}

int agg_tick(struct agg *a, int64_t now_us)
{
	if (!a || !a->open || now_us < a->start_us + a->o.window_us + a->o.close_grace_us)
		return 0;
	return close_window(a);
}

int agg_close(struct agg *a)
{
	if (!a || !a->open)
		return 0;
	return close_window(a);
}

struct agg_window *agg_take(struct agg *a)
{
	struct agg_window *w = a ? a->ready : NULL;

	errno = 0;
	if (w) {
		a->ready = w->next;
		if (!a->ready)
			a->ready_tail = NULL;
		w->next = NULL;
	}
	return w;
}

void agg_get_stats(const struct agg *a, struct agg_stats *out)
{
	*out = a->st;
	out->dict_entries = dict_entries(a);
}

void agg_window_free(struct agg_window *w)
{
	free(w);
}

/* ---- closing a window ---- */

static int cmp_slot(const void *pa, const void *pb)
{
	const struct slot *x = pa, *y = pb;

#define CMP_FIELD(f)                                                                               \
	if (x->f != y->f)                                                                          \
		return x->f < y->f ? -1 : 1;
	CMP_FIELD(source)
	CMP_FIELD(trace[0])
	CMP_FIELD(trace[1])
	CMP_FIELD(span)
	CMP_FIELD(hz)
	CMP_FIELD(stack)
#undef CMP_FIELD
	return 0;
}

static bool same_row(const struct slot *x, const struct slot *y)
{
	return x->source == y->source && x->trace[0] == y->trace[0] && x->trace[1] == y->trace[1] &&
	       x->span == y->span && x->hz == y->hz;
}

static int plist_push(struct plist *l, void *p)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 256;
		void **np = realloc(l->p, cap * sizeof(*np));

		if (!np)
			return -ENOMEM;
		l->p = np;
		l->cap = cap;
	}
	l->p[l->n++] = p;
	return 0;
}

enum { CL_SOURCES, CL_FUNCTIONS, CL_FRAMES, CL_STACKS };

/*
 * Adds the entry for id to closure list k unless it is there already.
 * Returns 2 added, 0 already there, 1 missing (counted), -ENOMEM.
 */
static int mark(struct agg *a, struct dmap *m, int k, uint64_t id, void **out)
{
	struct dent *e = dmap_get(m, id);

	*out = e;
	if (!e) {
		a->st.missing_entries++;
		return 1;
	}
	if (e->mark == a->seq + 1)
		return 0;
	e->mark = a->seq + 1;
	e->last_used = a->seq;
	return plist_push(&a->cl[k], e) ? -ENOMEM : 2;
}

/* Marks a stack's frames and their functions. Returns missing ids or -ENOMEM. */
static int64_t mark_frames(struct agg *a, const struct dstack *st)
{
	int64_t missing = 0;

	for (uint32_t f = 0; f < st->n; f++) {
		void *fe, *fn;
		int rc = mark(a, &a->frames, CL_FRAMES, st->frames[f], &fe);

		if (rc == 2)
			rc = mark(a, &a->functions, CL_FUNCTIONS,
				  ((struct dframe *)fe)->function_id, &fn);
		if (rc < 0)
			return rc;
		missing += rc == 1;
	}
	return missing;
}

/* Collects the dictionary closure of the sorted keys. Returns missing ids or -ENOMEM. */
static int64_t closure(struct agg *a, const struct slot *keys, uint32_t n)
{
	int64_t missing = 0, m;
	void *e;
	int rc;

	for (int k = 0; k < 4; k++)
		a->cl[k].n = 0;
	for (uint32_t i = 0; i < n; i++) {
		if (i == 0 || keys[i].source != keys[i - 1].source) {
			rc = mark(a, &a->sources, CL_SOURCES, keys[i].source, &e);
			if (rc < 0)
				return rc;
			missing += rc == 1;
		}
		rc = mark(a, &a->stacks, CL_STACKS, keys[i].stack, &e);
		if (rc < 0)
			return rc;
		missing += rc == 1;
		if (rc != 2)
			continue; /* missing, or its frames are in already */
		m = mark_frames(a, e);
		if (m < 0)
			return m;
		missing += m;
	}
	return missing;
}

static size_t round8(size_t n)
{
	return (n + 7) & ~(size_t)7;
}

/* Counts the rows of the sorted keys (a run longer than AGG_ROW_MAX_STACKS splits). */
static size_t count_rows(const struct slot *keys, uint32_t n)
{
	size_t rows = 0, run = 0;

	for (uint32_t i = 0; i < n; i++) {
		if (i == 0 || !same_row(&keys[i], &keys[i - 1]) || run == AGG_ROW_MAX_STACKS) {
			rows++;
			run = 0;
		}
		run++;
	}
	return rows;
}

static void fill_rows(struct agg_window *w, const struct slot *keys, uint32_t n, uint64_t *stk,
		      uint32_t *cnt)
{
	struct store_sample_row *r = w->rows - 1;

	for (uint32_t i = 0; i < n; i++) {
		if (i == 0 || !same_row(&keys[i], &keys[i - 1]) || r->n == AGG_ROW_MAX_STACKS) {
			r++;
			r->bucket_us = w->start_us;
			r->source_id = keys[i].source;
			memcpy(r->trace_id, keys[i].trace, 16);
			r->span_id = keys[i].span;
			r->hz = keys[i].hz;
			r->n = 0;
			r->stacks = stk;
			r->counts = cnt;
		}
		stk[0] = keys[i].stack;
		cnt[0] = keys[i].count;
		stk++;
		cnt++;
		r->n++;
		w->nsamples += keys[i].count;
	}
}

/* Copies the closure lists into w; *u64 and *chars advance. */
static void fill_dict(struct agg *a, struct agg_window *w, uint64_t *u64, char *chars)
{
	for (size_t i = 0; i < w->nsources; i++) {
		const struct dsource *e = a->cl[CL_SOURCES].p[i];
		struct agg_source *d = &w->sources[i];
		const char **dst[SOURCE_STRS] = {&d->src.service, &d->src.namespace_,
						 &d->src.pod,	  &d->src.container,
						 &d->src.node,	  &d->src.build_id};

		d->id = e->h.id;
		for (int s = 0; s < SOURCE_STRS; s++)
			*dst[s] = put_str(&chars, e->s[s]);
	}
	for (size_t i = 0; i < w->nfunctions; i++) {
		const struct dfunction *e = a->cl[CL_FUNCTIONS].p[i];
		struct agg_function *d = &w->functions[i];

		d->id = e->h.id;
		d->kind = e->kind;
		d->name = put_str(&chars, e->name);
		d->module = put_str(&chars, e->module);
	}
	for (size_t i = 0; i < w->nframes; i++) {
		const struct dframe *e = a->cl[CL_FRAMES].p[i];
		struct agg_frame *d = &w->frames[i];

		d->id = e->h.id;
		d->function_id = e->function_id;
		d->line = e->line;
		d->address = e->address;
		d->build_id = put_str(&chars, e->build_id);
		d->file = e->file ? put_str(&chars, e->file) : NULL;
	}
	for (size_t i = 0; i < w->nstacks; i++) {
		const struct dstack *e = a->cl[CL_STACKS].p[i];
		struct agg_stack *d = &w->stacks[i];

		d->id = e->h.id;
		d->n = e->n;
		memcpy(u64, e->frames, e->n * sizeof(*u64));
		d->frame_ids = u64;
		u64 += e->n;
	}
}

/* Sizes and allocates the window for n sorted keys and the closure lists. */
static struct agg_window *build(struct agg *a, const struct slot *keys, uint32_t n)
{
	size_t nrows = count_rows(keys, n), nframe_ids = 0, nchars = 0, bytes;
	struct agg_window *w;
	uint64_t *u64;
	uint32_t *cnt;
	char *p;

	for (size_t i = 0; i < a->cl[CL_STACKS].n; i++)
		nframe_ids += ((struct dstack *)a->cl[CL_STACKS].p[i])->n;
	for (int k = 0; k < 4; k++)
		for (size_t i = 0; i < a->cl[k].n; i++)
			nchars += ((struct dent *)a->cl[k].p[i])->strbytes;
	bytes = round8(sizeof(*w)) + nrows * sizeof(*w->rows) +
		a->cl[CL_SOURCES].n * sizeof(*w->sources) +
		a->cl[CL_FUNCTIONS].n * sizeof(*w->functions) +
		a->cl[CL_FRAMES].n * sizeof(*w->frames) + a->cl[CL_STACKS].n * sizeof(*w->stacks) +
		((size_t)n + nframe_ids) * sizeof(uint64_t) + (size_t)n * sizeof(uint32_t) + nchars;
	w = calloc(1, bytes);
	if (!w)
		return NULL;
	p = (char *)w + round8(sizeof(*w));
	w->rows = (struct store_sample_row *)p;
	p += nrows * sizeof(*w->rows);
	w->sources = (struct agg_source *)p;
	p += a->cl[CL_SOURCES].n * sizeof(*w->sources);
	w->functions = (struct agg_function *)p;
	p += a->cl[CL_FUNCTIONS].n * sizeof(*w->functions);
	w->frames = (struct agg_frame *)p;
	p += a->cl[CL_FRAMES].n * sizeof(*w->frames);
	w->stacks = (struct agg_stack *)p;
	p += a->cl[CL_STACKS].n * sizeof(*w->stacks);
	u64 = (uint64_t *)p;
	p += ((size_t)n + nframe_ids) * sizeof(uint64_t);
	cnt = (uint32_t *)p;
	p += (size_t)n * sizeof(uint32_t);
	w->nrows = nrows;
	w->nsources = a->cl[CL_SOURCES].n;
	w->nfunctions = a->cl[CL_FUNCTIONS].n;
	w->nframes = a->cl[CL_FRAMES].n;
	w->nstacks = a->cl[CL_STACKS].n;
	w->start_us = a->start_us;
	w->window_us = a->o.window_us;
	w->seq = a->seq;
	w->bytes = bytes;
	fill_rows(w, keys, n, u64, cnt);
	fill_dict(a, w, u64 + n, p);
	return w;
}

static int close_window(struct agg *a)
{
	struct agg_window *w = NULL;
	int64_t missing = 0;
	uint32_t n = a->nkeys;
	int ret = 1;

	a->open = false;
	if (n > a->sorted_cap) {
		/* Scratch for the largest window so far: grows with the table, then reused. */
		struct slot *sorted = realloc(a->sorted, sizeof(*sorted) * a->cap / 2);

		if (sorted) {
			a->sorted = sorted;
			a->sorted_cap = (uint32_t)(a->cap / 2);
		} else {
			ret = -ENOMEM;
		}
	}
	if (ret > 0) {
		for (uint32_t k = 0; k < n; k++)
			a->sorted[k] = a->slots[a->used[k]];
		qsort(a->sorted, n, sizeof(*a->sorted), cmp_slot);
		missing = closure(a, a->sorted, n);
		if (missing < 0)
			ret = -ENOMEM;
	}
	if (ret > 0) {
		w = build(a, a->sorted, n);
		if (!w)
			ret = -ENOMEM;
	}
	for (uint32_t k = 0; k < n; k++)
		a->slots[a->used[k]].count = 0;
	a->nkeys = 0;
	if (w) {
		w->missing_entries = (uint64_t)missing;
		w->samples_overflow = a->win_overflow;
		if (a->ready_tail)
			a->ready_tail->next = w;
		else
			a->ready = w;
		a->ready_tail = w;
		a->st.windows++;
	} else {
		a->st.windows_nomem++;
	}
	a->win_overflow = 0;
	if (dict_entries(a) > a->o.dict_max && a->seq >= a->o.dict_idle)
		dict_sweep(a, a->seq - a->o.dict_idle + 1);
	a->seq++;
	return ret;
}
