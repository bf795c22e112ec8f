/*
 * hold.c - raised samples held per trace until a decision (hold.h).
 *
 * Traces live in a chained hash by trace id and on a list ordered by last
 * sample (newest at the tail): eviction beyond max_bytes and expiry both
 * take from the head. A trace's counts are an array of (source, span,
 * stack, Hz, count) searched from the end; it doubles when full. Bytes
 * held = per trace its header and its array's capacity, so the bound holds
 * for what malloc was asked for.
 */
#include "hold.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "traceprof/ids.h"

#define FIRST_CAP 8 /* counts per trace at its first sample */

/* One count of a trace. */
struct held {
	uint64_t source_id; /* ids_source() */
	uint64_t span_id;   /* span the thread was in */
	uint64_t stack_id;  /* ids_stack() */
	uint32_t count;	    /* samples */
	uint16_t hz;	    /* raised frequency they were taken at */
};

/* One trace in flight. */
struct trace {
	uint8_t id[16];	     /* W3C trace id */
	uint64_t hash;	     /* ids_hash_bytes() of id */
	struct trace *chain; /* next in its hash bucket */
	struct trace *older; /* towards the head of the age list */
	struct trace *newer; /* towards the tail */
	int64_t first_us;    /* time of its first sample */
	int64_t last_us;     /* time of its latest sample */
	uint64_t samples;    /* samples held */
	struct held *e;	     /* counts; owned */
	uint32_t n;	     /* entries used in e */
	uint32_t cap;	     /* entries allocated in e */
};

struct hold {
	struct hold_opts opts;	 /* with defaults filled in */
	hold_rows_fn on_rows;	 /* kept traces' rows */
	void *ctx;		 /* its context */
	struct trace **buckets;	 /* chained hash by trace id */
	size_t nbuckets;	 /* power of two */
	struct trace *oldest;	 /* head of the age list */
	struct trace *newest;	 /* tail of the age list */
	struct hold_stats stats; /* counters; held_* kept current */
};

static size_t trace_bytes(uint32_t cap)
{
	return sizeof(struct trace) + (size_t)cap * sizeof(struct held);
}

struct hold *hold_new(const struct hold_opts *opts, hold_rows_fn on_rows, void *ctx)
{
	struct hold *h = calloc(1, sizeof(*h));

	if (!h)
		return NULL;
	if (opts)
		h->opts = *opts;
	if (!h->opts.max_bytes)
		h->opts.max_bytes = HOLD_DEFAULT_BYTES;
	if (h->opts.timeout_us <= 0)
		h->opts.timeout_us = HOLD_DEFAULT_TIMEOUT_US;
	h->on_rows = on_rows;
	h->ctx = ctx;
	h->nbuckets = 256;
	h->buckets = calloc(h->nbuckets, sizeof(*h->buckets));
	if (!h->buckets) {
		free(h);
		errno = ENOMEM;
		return NULL;
	}
	return h;
}

static struct trace **bucket_of(struct hold *h, uint64_t hash)
{
	return &h->buckets[hash & (h->nbuckets - 1)];
}

static struct trace *find(struct hold *h, const uint8_t id[16], uint64_t hash)
{
	for (struct trace *t = *bucket_of(h, hash); t; t = t->chain)
		if (t->hash == hash && !memcmp(t->id, id, 16))
			return t;
	return NULL;
}

static void age_unlink(struct hold *h, struct trace *t)
{
	if (t->older)
		t->older->newer = t->newer;
	else
		h->oldest = t->newer;
	if (t->newer)
		t->newer->older = t->older;
	else
		h->newest = t->older;
	t->older = t->newer = NULL;
}

static void age_append(struct hold *h, struct trace *t)
{
	t->older = h->newest;
	t->newer = NULL;
	if (h->newest)
		h->newest->newer = t;
	else
		h->oldest = t;
	h->newest = t;
}

/* Unlinks and frees t; its samples count as lost unless kept. */
static void forget(struct hold *h, struct trace *t, bool kept)
{
	struct trace **pp = bucket_of(h, t->hash);

	while (*pp != t)
		pp = &(*pp)->chain;
	*pp = t->chain;
	age_unlink(h, t);
	if (!kept)
		h->stats.samples_lost += t->samples;
	h->stats.held_traces--;
	h->stats.held_bytes -= trace_bytes(t->cap);
	free(t->e);
	free(t);
}

/* Evicts the oldest traces but keep until need more bytes fit; false when they cannot. */
static bool make_room(struct hold *h, size_t need, const struct trace *keep)
{
	if (need > h->opts.max_bytes - (keep ? trace_bytes(keep->cap) : 0))
		return false;
	while (h->stats.held_bytes + need > h->opts.max_bytes) {
		struct trace *victim = h->oldest == keep ? keep->newer : h->oldest;

		if (!victim)
			return false;
		h->stats.traces_evicted++;
		forget(h, victim, false);
	}
	return true;
}

/* Doubles the buckets when traces outnumber them (chains stay short). */
static void maybe_rehash(struct hold *h)
{
	size_t n = h->nbuckets * 2;
	struct trace **b;

	if (h->stats.held_traces <= h->nbuckets)
		return;
	b = calloc(n, sizeof(*b));
	if (!b)
		return; /* longer chains, still correct */
	for (size_t i = 0; i < h->nbuckets; i++)
		for (struct trace *t = h->buckets[i], *next; t; t = next) {
			next = t->chain;
			t->chain = b[t->hash & (n - 1)];
			b[t->hash & (n - 1)] = t;
		}
	free(h->buckets);
	h->buckets = b;
	h->nbuckets = n;
}

static struct trace *trace_new(struct hold *h, const uint8_t id[16], uint64_t hash, int64_t t_us)
{
	struct trace *t;

	if (!make_room(h, trace_bytes(FIRST_CAP), NULL))
		return NULL;
	t = calloc(1, sizeof(*t));
	if (t)
		t->e = malloc(FIRST_CAP * sizeof(*t->e));
	if (!t || !t->e) {
		free(t);
		return NULL;
	}
	memcpy(t->id, id, 16);
	t->hash = hash;
	t->cap = FIRST_CAP;
	t->first_us = t->last_us = t_us;
	t->chain = *bucket_of(h, hash);
	*bucket_of(h, hash) = t;
	age_append(h, t);
	h->stats.traces++;
	h->stats.held_traces++;
	h->stats.held_bytes += trace_bytes(t->cap);
	maybe_rehash(h);
	return t;
}

static int refuse(struct hold *h, int err)
{
	h->stats.samples_refused++;
	return err;
}

int hold_add(struct hold *h, const struct agg_sample *s)
{
	static const uint8_t zero[16];
	uint64_t hash;
	struct trace *t;
	struct held *e;

	if (!memcmp(s->trace_id, zero, 16) || s->hz < 1 || s->hz > 1000)
		return refuse(h, -EINVAL);
	hash = ids_hash_bytes(0x686f6c64, s->trace_id, 16);
	t = find(h, s->trace_id, hash);
	if (!t) {
		t = trace_new(h, s->trace_id, hash, s->time_us);
		if (!t)
			return refuse(h, trace_bytes(FIRST_CAP) > h->opts.max_bytes ? -ENOSPC
										    : -ENOMEM);
	}
	for (uint32_t i = t->n; i-- > 0;) {
		e = &t->e[i];
		if (e->stack_id == s->stack_id && e->span_id == s->span_id &&
		    e->source_id == s->source_id && e->hz == s->hz && e->count < UINT32_MAX) {
			e->count++;
			goto out_counted;
		}
	}
	if (t->n == t->cap) {
		size_t extra = (size_t)t->cap * sizeof(*t->e);
		struct held *ne;

		if (!make_room(h, extra, t))
			return refuse(h, -ENOSPC);
		ne = realloc(t->e, 2 * extra);
		if (!ne)
			return refuse(h, -ENOMEM);
		t->e = ne;
		t->cap *= 2;
		h->stats.held_bytes += extra;
	}
	t->e[t->n++] = (struct held){.source_id = s->source_id,
				     .span_id = s->span_id,
				     .stack_id = s->stack_id,
				     .count = 1,
				     .hz = s->hz};
out_counted:
	t->samples++;
	h->stats.samples++;
	if (s->time_us > t->last_us)
		t->last_us = s->time_us;
	if (s->time_us < t->first_us)
		t->first_us = s->time_us;
	if (h->newest != t) {
		age_unlink(h, t);
		age_append(h, t);
	}
	return 0;
}

static int cmp_held(const void *a, const void *b)
{
	const struct held *x = a, *y = b;

	if (x->source_id != y->source_id)
		return x->source_id < y->source_id ? -1 : 1;
	if (x->span_id != y->span_id)
		return x->span_id < y->span_id ? -1 : 1;
	if (x->hz != y->hz)
		return x->hz < y->hz ? -1 : 1;
	return (x->stack_id > y->stack_id) - (x->stack_id < y->stack_id);
}

/* One row per (source, span, Hz) run of the sorted counts, split at the store's limit. */
static int emit(struct hold *h, struct trace *t, const char *trigger_id)
{
	uint64_t *stacks = malloc((size_t)t->n * sizeof(*stacks));
	uint32_t *counts = malloc((size_t)t->n * sizeof(*counts));
	struct store_sample_row row;

	if (!stacks || !counts) {
		free(stacks);
		free(counts);
		return -ENOMEM;
	}
	qsort(t->e, t->n, sizeof(*t->e), cmp_held);
	for (uint32_t i = 0; i < t->n;) {
		uint32_t j = i;

		memset(&row, 0, sizeof(row));
		row.bucket_us = t->first_us - t->first_us % HOLD_BUCKET_US;
		row.source_id = t->e[i].source_id;
		memcpy(row.trace_id, t->id, 16);
		row.span_id = t->e[i].span_id;
		row.hz = t->e[i].hz;
		while (j < t->n && j - i < AGG_ROW_MAX_STACKS &&
		       t->e[j].source_id == row.source_id && t->e[j].span_id == row.span_id &&
		       t->e[j].hz == row.hz) {
			stacks[j - i] = t->e[j].stack_id;
			counts[j - i] = t->e[j].count;
			h->stats.samples_kept += t->e[j].count;
			j++;
		}
		row.n = j - i;
		row.stacks = stacks;
		row.counts = counts;
		h->stats.rows++;
		if (h->on_rows)
			h->on_rows(h->ctx, trigger_id, &row);
		i = j;
	}
	free(stacks);
	free(counts);
	return 0;
}

int hold_decide(struct hold *h, const uint8_t trace_id[16], const char *trigger_id)
{
	struct trace *t = find(h, trace_id, ids_hash_bytes(0x686f6c64, trace_id, 16));
	int n;

	if (!t) {
		h->stats.decide_unknown++;
		return -ENOENT;
	}
	n = t->samples > INT32_MAX ? INT32_MAX : (int)t->samples;
	if (trigger_id && emit(h, t, trigger_id) == 0) {
		h->stats.traces_kept++;
		forget(h, t, true);
		return n;
	}
	/* dropped, or kept but its rows could not be built (no memory): lost either way */
	h->stats.traces_dropped++;
	forget(h, t, false);
	return trigger_id ? -ENOMEM : n;
}

void hold_tick(struct hold *h, int64_t now_us)
{
	while (h->oldest && now_us - h->oldest->last_us >= h->opts.timeout_us) {
		h->stats.traces_expired++;
		forget(h, h->oldest, false);
	}
}

void hold_get_stats(const struct hold *h, struct hold_stats *st)
{
	*st = h->stats;
}

void hold_free(struct hold *h)
{
	if (!h)
		return;
	while (h->oldest)
		forget(h, h->oldest, false);
	free(h->buckets);
	free(h);
}
