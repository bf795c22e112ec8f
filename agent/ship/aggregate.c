/*
 * aggregate.c - see aggregate.h.
 *
 * Workload: one thread, every sample of the node (2 CPUs x 99 Hz is 200
 * samples/s, a large node a few thousand), a few thousand distinct keys per
 * window. The hot path is one hash and one probe sequence in an
 * open-addressing table with linear probing, 56-byte slots, load <= 1/2,
 * count 0 marking an empty slot. The table doubles while the first windows
 * find their working set and is never shrunk; a list of used slots clears
 * it at a window close in O(keys), so later windows reuse it without
 * allocating.
 *
 * At a close (once per window, not per sample) the used slots are copied
 * and sorted by (kind, source, trace, span, hz, stack), which makes each
 * row a run (CPU sample rows first, then off-CPU rows, whose keys carry
 * a kind and count microseconds, then GPU rows: launches and their ns); the dictionary closure is
 * walked with a per-entry mark; the window is built in one allocation sized first. The dictionary
 * lives in agg_dict.c.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agg_dict.h"
#include "aggregate.h"

#define TABLE_MIN_SLOTS 1024

struct slot {
	uint64_t stack;	   /* stack id */
	uint64_t source;   /* source id */
	uint64_t span;	   /* span id, 0 untagged */
	uint64_t trace[2]; /* trace id bytes, as two words */
	uint16_t hz;	   /* sampling frequency (0 for off-CPU keys) */
	uint8_t kind;	   /* 0: CPU samples; STORE_OFFCPU_*: off-CPU time; KIND_GPU */
	uint32_t count;	   /* samples, off-CPU µs, or GPU launches; 0 = empty slot */
	uint64_t ns;	   /* KIND_GPU: the launches' GPU time, ns */
};

/* The kind of GPU keys: after the off-CPU kinds, so their rows sort last. */
#define KIND_GPU 3
_Static_assert(STORE_OFFCPU_BLOCKED < KIND_GPU && STORE_OFFCPU_RUNQ < KIND_GPU, "kinds");

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
	struct agg_dict dict;	       /* registered entries and the closing window's closure */
	struct agg_window *ready;      /* closed windows not taken, oldest first */
	struct agg_window *ready_tail; /* last of them */
	struct agg_stats st;	       /* counters */
};

/* ---- hashing ---- */

static inline uint64_t rotl(uint64_t x, int r)
{
	return (x << r) | (x >> (64 - r));
}

static inline uint64_t slot_hash(const struct slot *k)
{
	return agg_mix64(k->stack ^ rotl(k->source, 21) ^ rotl(k->span, 42) ^ k->trace[0] ^
			 rotl(k->trace[1], 11) ^
			 ((uint64_t)k->hz | (uint64_t)k->kind << 16) * 0x9e3779b97f4a7c15ULL);
}

static inline bool slot_eq(const struct slot *a, const struct slot *b)
{
	return a->stack == b->stack && a->source == b->source && a->span == b->span &&
	       a->trace[0] == b->trace[0] && a->trace[1] == b->trace[1] && a->hz == b->hz &&
	       a->kind == b->kind;
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
	agg_dict_free(&a->dict);
	free(a->slots);
	free(a->used);
	free(a->sorted);
	free(a);
}

/* ---- dictionary registration ---- */

/* ---- dictionary (agg_dict.c) ---- */

int agg_add_source(struct agg *a, uint64_t id, const struct store_source *src)
{
	return a ? agg_dict_add_source(&a->dict, a->seq, id, src) : -EINVAL;
}

int agg_add_function(struct agg *a, uint64_t id, const char *name, const char *module, int kind)
{
	return a ? agg_dict_add_function(&a->dict, a->seq, id, name, module, kind) : -EINVAL;
}

int agg_add_frame(struct agg *a, uint64_t id, uint64_t function_id, const char *build_id,
		  const char *file, int line, uint64_t address)
{
	return a ? agg_dict_add_frame(&a->dict, a->seq, id, function_id, build_id, file, line,
				      address)
		 : -EINVAL;
}

int agg_add_stack(struct agg *a, uint64_t id, const uint64_t *frame_ids, size_t n)
{
	return a ? agg_dict_add_stack(&a->dict, a->seq, id, frame_ids, n) : -EINVAL;
}

bool agg_has_stack(const struct agg *a, uint64_t id)
{
	return a && agg_dict_has(&a->dict, AGG_DICT_STACKS, id);
}

uint64_t agg_dict_evictions(const struct agg *a)
{
	return a ? a->dict.evicted : 0;
}

const uint64_t *agg_stack_frames(const struct agg *a, uint64_t id, uint32_t *n)
{
	*n = 0;
	return a ? agg_dict_stack_frames(&a->dict, id, n) : NULL;
}

bool agg_has_source(const struct agg *a, uint64_t id)
{
	return a && agg_dict_has(&a->dict, AGG_DICT_SOURCES, id);
}

const char *agg_source_service(const struct agg *a, uint64_t id)
{
	return a ? agg_dict_source_service(&a->dict, id) : NULL;
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

/*
 * Adds weight to key k at time t_us: opens or closes the window as the time
 * says. Returns 0 or 1 (a window closed) or -ENOMEM as agg_add; *dropped is
 * set when the key did not fit.
 */
static int add_key(struct agg *a, int64_t t_us, struct slot *k, uint32_t weight, bool *dropped)
{
	int64_t w = floor_to(t_us, a->o.window_us);
	size_t i;
	int ret = 0;

	*dropped = false;
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
	for (i = slot_hash(k) & (a->cap - 1); a->slots[i].count; i = (i + 1) & (a->cap - 1)) {
		if (slot_eq(&a->slots[i], k)) {
			uint32_t c = a->slots[i].count;

			/* INT32_MAX: the store's integer arrays */
			a->slots[i].count = c > INT32_MAX - weight ? INT32_MAX : c + weight;
			a->slots[i].ns =
			    a->slots[i].ns > INT64_MAX - k->ns ? INT64_MAX : a->slots[i].ns + k->ns;
			return ret;
		}
	}
	if (a->nkeys >= a->o.max_keys) {
		*dropped = true;
		a->win_overflow++;
		return ret;
	}
	if ((size_t)(a->nkeys + 1) * 2 > a->cap && a->cap < a->cap_max) {
		if (table_grow(a)) {
			*dropped = true;
			a->win_overflow++;
			return ret ? ret : -ENOMEM;
		}
		for (i = slot_hash(k) & (a->cap - 1); a->slots[i].count; i = (i + 1) & (a->cap - 1))
			;
	}
	k->count = weight > INT32_MAX ? INT32_MAX : weight;
	a->slots[i] = *k;
	a->used[a->nkeys++] = (uint32_t)i;
	return ret;
}

int agg_add(struct agg *a, const struct agg_sample *s)
{
	struct slot k = {0};
	bool dropped;
	int ret;

	if (!a || !s || !sample_ok(s)) {
		if (a)
			a->st.samples_invalid++;
		return -EINVAL;
	}
	k.stack = s->stack_id;
	k.source = s->source_id;
	k.span = s->span_id;
	memcpy(k.trace, s->trace_id, 16);
	k.hz = s->hz;
	ret = add_key(a, s->time_us, &k, 1, &dropped);
	if (dropped)
		a->st.samples_overflow++;
	else
		a->st.samples++;
	return ret;
}

int agg_add_offcpu(struct agg *a, const struct agg_offcpu *o)
{
	struct slot k = {0};
	bool untagged = true, dropped;
	int ret;

	if (o)
		for (int i = 0; i < 16; i++)
			untagged = untagged && !o->trace_id[i];
	if (!a || !o || !o->source_id || !o->us ||
	    (o->kind != STORE_OFFCPU_BLOCKED && o->kind != STORE_OFFCPU_RUNQ) ||
	    untagged != (o->span_id == 0)) {
		if (a)
			a->st.offcpu_invalid++;
		return -EINVAL;
	}
	k.stack = o->stack_id;
	k.source = o->source_id;
	k.span = o->span_id;
	memcpy(k.trace, o->trace_id, 16);
	k.kind = o->kind;
	ret = add_key(a, o->time_us, &k, o->us, &dropped);
	if (dropped)
		a->st.offcpu_overflow++;
	else
		a->st.offcpu++;
	return ret;
}

int agg_add_gpu(struct agg *a, const struct agg_gpu *g)
{
	struct slot k = {0};
	bool untagged = true, dropped;
	int ret;

	if (g)
		for (int i = 0; i < 16; i++)
			untagged = untagged && !g->trace_id[i];
	if (!a || !g || !g->source_id || !g->stack_id || !g->launches || g->launches > INT32_MAX ||
	    g->gpu_ns > INT64_MAX || untagged != (g->span_id == 0)) {
		if (a)
			a->st.gpu_invalid++;
		return -EINVAL;
	}
	k.stack = g->stack_id;
	k.source = g->source_id;
	k.span = g->span_id;
	memcpy(k.trace, g->trace_id, 16);
	k.kind = KIND_GPU;
	k.ns = g->gpu_ns;
	ret = add_key(a, g->time_us, &k, g->launches, &dropped);
	if (dropped) {
		a->st.gpu_overflow++;
	} else {
		a->st.gpu_launches += g->launches;
		a->st.gpu_ns += g->gpu_ns;
	}
	return ret;
}

int agg_tick(struct agg *a, int64_t now_us)
{
	if (!a || !a->open || now_us < a->start_us + a->o.window_us + a->o.close_grace_us)
		return 0;
	return close_window(a);
}

int64_t agg_next_close_us(const struct agg *a)
{
	if (!a || !a->open)
		return INT64_MAX;
	return a->start_us + a->o.window_us + a->o.close_grace_us;
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
	out->dict_entries = agg_dict_entries(&a->dict);
	out->dict_evicted = a->dict.evicted;
	out->missing_entries = a->dict.missing;
	out->names_sanitized = a->dict.sanitized;
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
	CMP_FIELD(kind)
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
	return x->kind == y->kind && x->source == y->source && x->trace[0] == y->trace[0] &&
	       x->trace[1] == y->trace[1] && x->span == y->span && x->hz == y->hz;
}

/* Collects the dictionary closure of the sorted keys. Returns missing ids or -ENOMEM. */
static int64_t closure(struct agg *a, const struct slot *keys, uint32_t n)
{
	int64_t missing = 0, m;

	agg_dict_closure_reset(&a->dict);
	for (uint32_t i = 0; i < n; i++) {
		if (i == 0 || keys[i].source != keys[i - 1].source) {
			m = agg_dict_mark_source(&a->dict, a->seq, keys[i].source);
			if (m < 0)
				return m;
			missing += m;
		}
		if (!keys[i].stack)
			continue; /* off-CPU time without a stack */
		m = agg_dict_mark_stack(&a->dict, a->seq, keys[i].stack);
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

/*
 * The rows of the sorted keys, CPU sample rows (off false: w->rows,
 * counts) or off-CPU rows (w->offcpu, microseconds), their stack ids into
 * stk and their counts into cnt.
 */
static void fill_rows(struct agg_window *w, const struct slot *keys, uint32_t n, uint64_t *stk,
		      uint32_t *cnt, bool off)
{
	struct store_sample_row *r = w->rows - 1;
	struct store_offcpu_row *o = w->offcpu - 1;
	uint32_t *rn = NULL;

	for (uint32_t i = 0; i < n; i++) {
		if (i == 0 || !same_row(&keys[i], &keys[i - 1]) || *rn == AGG_ROW_MAX_STACKS) {
			if (off) {
				o++;
				*o = (struct store_offcpu_row){.bucket_us = w->start_us,
							       .source_id = keys[i].source,
							       .span_id = keys[i].span,
							       .kind = keys[i].kind,
							       .stacks = stk,
							       .us = cnt};
				memcpy(o->trace_id, keys[i].trace, 16);
				rn = &o->n;
			} else {
				r++;
				*r = (struct store_sample_row){.bucket_us = w->start_us,
							       .source_id = keys[i].source,
							       .span_id = keys[i].span,
							       .hz = keys[i].hz,
							       .stacks = stk,
							       .counts = cnt};
				memcpy(r->trace_id, keys[i].trace, 16);
				rn = &r->n;
			}
		}
		*stk++ = keys[i].stack;
		*cnt++ = keys[i].count;
		(*rn)++;
		if (off)
			w->offcpu_us += keys[i].count;
		else
			w->nsamples += keys[i].count;
	}
}

/* The GPU rows of the sorted keys (all KIND_GPU): stack ids, launches and ns. */
static void fill_gpu_rows(struct agg_window *w, const struct slot *keys, uint32_t n, uint64_t *stk,
			  uint32_t *cnt, uint64_t *ns)
{
	struct store_gpu_row *r = w->gpu - 1;

	for (uint32_t i = 0; i < n; i++) {
		if (i == 0 || !same_row(&keys[i], &keys[i - 1]) || r->n == AGG_ROW_MAX_STACKS) {
			r++;
			*r = (struct store_gpu_row){.bucket_us = w->start_us,
						    .source_id = keys[i].source,
						    .span_id = keys[i].span,
						    .stacks = stk,
						    .launches = cnt,
						    .gpu_ns = ns};
			memcpy(r->trace_id, keys[i].trace, 16);
		}
		*stk++ = keys[i].stack;
		*cnt++ = keys[i].count;
		*ns++ = keys[i].ns;
		r->n++;
		w->gpu_launches += keys[i].count;
	}
}

/*
 * Sizes and allocates the window for n sorted keys and the dictionary
 * closure. The keys of CPU samples sort first (kind 0), then off-CPU ones.
 */
static struct agg_window *build(struct agg *a, const struct slot *keys, uint32_t n, size_t extra)
{
	uint32_t ncpu = 0, nnotgpu;
	size_t nrows, noff, ngpu, bytes;
	struct agg_dict_size ds;
	struct agg_window *w;
	uint64_t *u64, *gns;
	uint32_t *cnt;
	char *p;

	while (ncpu < n && !keys[ncpu].kind)
		ncpu++;
	nnotgpu = ncpu;
	while (nnotgpu < n && keys[nnotgpu].kind != KIND_GPU)
		nnotgpu++;
	nrows = count_rows(keys, ncpu);
	noff = count_rows(keys + ncpu, nnotgpu - ncpu);
	ngpu = count_rows(keys + nnotgpu, n - nnotgpu);
	agg_dict_closure_size(&a->dict, &ds);
	bytes = round8(sizeof(*w)) + nrows * sizeof(*w->rows) + noff * sizeof(*w->offcpu) +
		ngpu * sizeof(*w->gpu) + (size_t)(n - nnotgpu) * sizeof(uint64_t) +
		ds.entries[AGG_DICT_SOURCES] * sizeof(*w->sources) +
		ds.entries[AGG_DICT_FUNCTIONS] * sizeof(*w->functions) +
		ds.entries[AGG_DICT_FRAMES] * sizeof(*w->frames) +
		ds.entries[AGG_DICT_STACKS] * sizeof(*w->stacks) +
		((size_t)n + ds.frame_ids) * sizeof(uint64_t) + (size_t)n * sizeof(uint32_t) +
		ds.chars + extra;
	w = calloc(1, bytes);
	if (!w)
		return NULL;
	w->nrows = nrows;
	w->noffcpu = noff;
	w->ngpu = ngpu;
	w->nsources = ds.entries[AGG_DICT_SOURCES];
	w->nfunctions = ds.entries[AGG_DICT_FUNCTIONS];
	w->nframes = ds.entries[AGG_DICT_FRAMES];
	w->nstacks = ds.entries[AGG_DICT_STACKS];
	/* 8-byte aligned arrays first, then the counts, then the strings. */
	p = (char *)w + round8(sizeof(*w));
	w->rows = (struct store_sample_row *)p;
	p += nrows * sizeof(*w->rows);
	w->offcpu = (struct store_offcpu_row *)p;
	p += noff * sizeof(*w->offcpu);
	w->gpu = (struct store_gpu_row *)p;
	p += ngpu * sizeof(*w->gpu);
	gns = (uint64_t *)p;
	p += (size_t)(n - nnotgpu) * sizeof(uint64_t);
	w->sources = (struct agg_source *)p;
	p += w->nsources * sizeof(*w->sources);
	w->functions = (struct agg_function *)p;
	p += w->nfunctions * sizeof(*w->functions);
	w->frames = (struct agg_frame *)p;
	p += w->nframes * sizeof(*w->frames);
	w->stacks = (struct agg_stack *)p;
	p += w->nstacks * sizeof(*w->stacks);
	u64 = (uint64_t *)p;
	p += ((size_t)n + ds.frame_ids) * sizeof(uint64_t);
	cnt = (uint32_t *)p;
	p += (size_t)n * sizeof(uint32_t);
	w->start_us = a->start_us;
	w->window_us = a->o.window_us;
	w->seq = a->seq;
	w->bytes = bytes;
	fill_rows(w, keys, ncpu, u64, cnt, false);
	fill_rows(w, keys + ncpu, nnotgpu - ncpu, u64 + ncpu, cnt + ncpu, true);
	fill_gpu_rows(w, keys + nnotgpu, n - nnotgpu, u64 + nnotgpu, cnt + nnotgpu, gns);
	agg_dict_fill(&a->dict, w, u64 + n, p);
	return w;
}

struct agg_window *agg_trigger_window(struct agg *a, const char *trigger_id,
				      const struct store_sample_row *rows, size_t n)
{
	size_t nkeys = 0, idlen = trigger_id ? strlen(trigger_id) : 0, k = 0;
	struct agg_window *w = NULL;
	struct slot *keys;

	if (!n || !idlen || idlen > 200) {
		errno = EINVAL;
		return NULL;
	}
	for (size_t i = 0; i < n; i++)
		nkeys += rows[i].n;
	if (!nkeys || nkeys > UINT32_MAX) {
		errno = EINVAL;
		return NULL;
	}
	keys = malloc(nkeys * sizeof(*keys));
	if (!keys) {
		errno = ENOMEM;
		return NULL;
	}
	for (size_t i = 0; i < n; i++)
		for (uint32_t j = 0; j < rows[i].n; j++, k++) {
			keys[k].stack = rows[i].stacks[j];
			keys[k].source = rows[i].source_id;
			keys[k].span = rows[i].span_id;
			memcpy(keys[k].trace, rows[i].trace_id, 16);
			keys[k].hz = rows[i].hz;
			keys[k].kind = 0;
			keys[k].count = rows[i].counts ? rows[i].counts[j] : 1;
		}
	qsort(keys, nkeys, sizeof(*keys), cmp_slot);
	if (closure(a, keys, (uint32_t)nkeys) >= 0)
		w = build(a, keys, (uint32_t)nkeys, idlen + 1);
	free(keys);
	if (!w) {
		errno = ENOMEM;
		return NULL;
	}
	/* the id after everything else, in the same allocation */
	memcpy((char *)w + w->bytes - (idlen + 1), trigger_id, idlen + 1);
	w->trigger_id = (char *)w + w->bytes - (idlen + 1);
	/* the rows' bucket (one trace: one bucket), not the open window's */
	w->start_us = rows[0].bucket_us;
	for (size_t i = 0; i < w->nrows; i++)
		w->rows[i].bucket_us = rows[0].bucket_us;
	a->st.trigger_windows++;
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
		w = build(a, a->sorted, n, 0);
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
	if (agg_dict_entries(&a->dict) > a->o.dict_max && a->seq >= a->o.dict_idle)
		agg_dict_sweep(&a->dict, a->seq - a->o.dict_idle + 1);
	a->seq++;
	return ret;
}
