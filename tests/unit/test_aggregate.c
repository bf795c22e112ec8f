/*
 * test_aggregate: the window aggregator against a plain reference.
 *
 * The reference keeps every sample in an array and counts keys with linear
 * search, window by window, with the same rules (epoch-aligned windows that
 * only move forward, late samples kept in the open window, at most max_keys
 * distinct keys per window). Random inputs (tagged and untagged, two Hz,
 * late samples, several sources) must give the same (bucket, source, trace,
 * span, hz, stack, count) multiset, rows grouped and sorted, the same late
 * and overflow counters. Directed cases: Hz kept apart, invalid samples,
 * each window carrying the dictionary closure of its rows (also after an
 * earlier window was dropped), unregistered ids counted, idle entries swept,
 * and agg_add() not allocating once warm.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "aggregate.h"
#include "check.h"
#include "traceprof/ids.h"

/* Allocation counter: every malloc/calloc/realloc of the process goes through here. */
extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t n, size_t m);
extern void *__libc_realloc(void *p, size_t n);
static unsigned long allocations;

void *malloc(size_t n)
{
	allocations++;
	return __libc_malloc(n);
}

void *calloc(size_t n, size_t m)
{
	allocations++;
	return __libc_calloc(n, m);
}

void *realloc(void *p, size_t n)
{
	allocations++;
	return __libc_realloc(p, n);
}

#define SEC  1000000LL
#define BASE (1767225600LL * SEC) /* 2026-01-01 00:00:00 UTC */

static uint64_t rng = 88172645463325252ULL;

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* One (window, key, count) tuple, for comparing outputs. */
struct tup {
	int64_t bucket;	   /* row bucket */
	uint64_t source;   /* source id */
	uint8_t trace[16]; /* trace id */
	uint64_t span;	   /* span id */
	uint16_t hz;	   /* Hz */
	uint64_t stack;	   /* stack id */
	uint64_t count;	   /* samples */
};

struct tups {
	struct tup *t; /* tuples */
	size_t n;      /* in use */
	size_t cap;    /* allocated */
};

static void tups_push(struct tups *v, const struct tup *t)
{
	if (v->n == v->cap) {
		v->cap = v->cap ? v->cap * 2 : 1024;
		v->t = realloc(v->t, v->cap * sizeof(*v->t));
		if (!v->t)
			exit(2);
	}
	v->t[v->n++] = *t;
}

static int cmp_tup(const void *pa, const void *pb)
{
	const struct tup *a = pa, *b = pb;
	int c;

	if (a->bucket != b->bucket)
		return a->bucket < b->bucket ? -1 : 1;
	if (a->source != b->source)
		return a->source < b->source ? -1 : 1;
	c = memcmp(a->trace, b->trace, 16);
	if (c)
		return c;
	if (a->span != b->span)
		return a->span < b->span ? -1 : 1;
	if (a->hz != b->hz)
		return a->hz < b->hz ? -1 : 1;
	if (a->stack != b->stack)
		return a->stack < b->stack ? -1 : 1;
	return (a->count > b->count) - (a->count < b->count);
}

static bool same_key(const struct tup *a, const struct agg_sample *s)
{
	return a->source == s->source_id && !memcmp(a->trace, s->trace_id, 16) &&
	       a->span == s->span_id && a->hz == s->hz && a->stack == s->stack_id;
}

/* The reference: plain arrays and linear search. */
struct ref {
	struct tups out;   /* closed windows' tuples */
	struct tups win;   /* open window's keys, first appearance order */
	int64_t window_us; /* window length */
	uint32_t max_keys; /* bound */
	bool open;	   /* a window is open */
	int64_t start;	   /* its start */
	uint64_t late;	   /* late samples */
	uint64_t overflow; /* overflow samples */
};

static void ref_close(struct ref *r)
{
	for (size_t i = 0; i < r->win.n; i++)
		tups_push(&r->out, &r->win.t[i]);
	r->win.n = 0;
	r->open = false;
}

static void ref_add(struct ref *r, const struct agg_sample *s)
{
	int64_t w = s->time_us / r->window_us * r->window_us;
	struct tup t = {0};

	if (r->open && w >= r->start + r->window_us)
		ref_close(r);
	if (!r->open) {
		r->open = true;
		r->start = w;
	} else if (w < r->start) {
		r->late++;
	}
	for (size_t i = 0; i < r->win.n; i++)
		if (same_key(&r->win.t[i], s)) {
			r->win.t[i].count++;
			return;
		}
	if (r->win.n == r->max_keys) {
		r->overflow++;
		return;
	}
	t.bucket = r->start;
	t.source = s->source_id;
	memcpy(t.trace, s->trace_id, 16);
	t.span = s->span_id;
	t.hz = s->hz;
	t.stack = s->stack_id;
	t.count = 1;
	tups_push(&r->win, &t);
}

/* Checks a window's shape and appends its tuples. */
static void flatten(const struct agg_window *w, struct tups *out)
{
	uint64_t samples = 0;

	CHECK(w->start_us % w->window_us == 0, "window start aligned");
	for (size_t i = 0; i < w->nrows; i++) {
		const struct store_sample_row *r = &w->rows[i];
		struct tup t = {0};

		CHECK(r->bucket_us == w->start_us, "row bucket is the window start");
		CHECK(r->n >= 1 && r->counts, "row has stacks and counts");
		if (i > 0) {
			const struct store_sample_row *p = &w->rows[i - 1];
			struct tup a = {.source = p->source_id, .span = p->span_id, .hz = p->hz};
			struct tup b = {.source = r->source_id, .span = r->span_id, .hz = r->hz};

			memcpy(a.trace, p->trace_id, 16);
			memcpy(b.trace, r->trace_id, 16);
			CHECK(cmp_tup(&a, &b) < 0,
			      "rows sorted, one per (source, trace, span, hz)");
		}
		t.bucket = r->bucket_us;
		t.source = r->source_id;
		memcpy(t.trace, r->trace_id, 16);
		t.span = r->span_id;
		t.hz = r->hz;
		for (uint32_t k = 0; k < r->n; k++) {
			CHECK(k == 0 || r->stacks[k - 1] < r->stacks[k], "stacks sorted, distinct");
			t.stack = r->stacks[k];
			t.count = r->counts[k];
			samples += t.count;
			tups_push(out, &t);
		}
	}
	CHECK(samples == w->nsamples, "nsamples %" PRIu64 " = sum of counts %" PRIu64, w->nsamples,
	      samples);
}

static void random_sample(struct agg_sample *s, int64_t *t, int nsources, int ntraces, int nstacks)
{
	int tr = (int)(rnd() % (uint64_t)(ntraces + ntraces / 2)); /* a third untagged */

	memset(s, 0, sizeof(*s));
	*t += (int64_t)(rnd() % 20000);
	s->time_us = *t;
	if (rnd() % 100 == 0)
		s->time_us -= (int64_t)(rnd() % (3 * SEC)); /* late */
	s->source_id = 1000 + rnd() % (uint64_t)nsources;
	if (tr < ntraces) {
		s->trace_id[0] = (uint8_t)tr;
		s->trace_id[15] = (uint8_t)(tr >> 8) | 0x80;
		s->span_id = (uint64_t)tr * 2 + 1 + rnd() % 2; /* two spans per trace */
	}
	s->stack_id = 1 + rnd() % (uint64_t)nstacks;
	s->hz = rnd() % 3 ? 19 : 99;
}

/* Random samples through both; equal tuples and counters. */
static void compare_random(int64_t window_us, uint32_t max_keys, size_t nsamples, int ntraces)
{
	struct agg_opts o = {.window_us = window_us, .max_keys = max_keys};
	struct ref ref = {.window_us = window_us,
			  .max_keys = max_keys ? max_keys : AGG_DEFAULT_MAX_KEYS};
	struct agg *a = agg_new(&o);
	struct tups got = {0};
	struct agg_window *w;
	struct agg_stats st;
	uint64_t win_overflow = 0, windows = 0;
	int64_t t = BASE + 7 * SEC + 123;

	CHECK(a != NULL, "agg_new");
	if (!a)
		return;
	for (size_t i = 0; i < nsamples; i++) {
		struct agg_sample s;
		int rc;

		random_sample(&s, &t, 3, ntraces, 60);
		ref_add(&ref, &s);
		rc = agg_add(a, &s);
		CHECK(rc == 0 || rc == 1, "agg_add %d", rc);
		while ((w = agg_take(a))) {
			flatten(w, &got);
			win_overflow += w->samples_overflow;
			windows++;
			agg_window_free(w);
		}
	}
	ref_close(&ref);
	CHECK(agg_close(a) == 1, "last window closed");
	CHECK(agg_close(a) == 0, "nothing open");
	while ((w = agg_take(a))) {
		flatten(w, &got);
		win_overflow += w->samples_overflow;
		windows++;
		agg_window_free(w);
	}
	qsort(got.t, got.n, sizeof(*got.t), cmp_tup);
	qsort(ref.out.t, ref.out.n, sizeof(*ref.out.t), cmp_tup);
	CHECK(got.n == ref.out.n, "window %" PRId64 " us, max_keys %u: %zu tuples, reference %zu",
	      window_us, max_keys, got.n, ref.out.n);
	if (got.n == ref.out.n)
		CHECK(memcmp(got.t, ref.out.t, got.n * sizeof(*got.t)) == 0,
		      "same tuples as the reference");
	agg_get_stats(a, &st);
	CHECK(st.samples_late == ref.late && ref.late > 0, "late %" PRIu64 " = reference %" PRIu64,
	      st.samples_late, ref.late);
	CHECK(st.samples_overflow == ref.overflow && win_overflow == ref.overflow,
	      "overflow %" PRIu64 " (per window %" PRIu64 ") = reference %" PRIu64,
	      st.samples_overflow, win_overflow, ref.overflow);
	CHECK(st.samples + st.samples_overflow == nsamples, "every sample counted once");
	CHECK(st.windows == windows && windows > 1, "%" PRIu64 " windows", windows);
	if (max_keys && max_keys < 100)
		CHECK(ref.overflow > 0, "the small bound overflowed");
	free(got.t);
	free(ref.out.t);
	free(ref.win.t);
	agg_free(a);
}

static void test_hz_and_invalid(void)
{
	struct agg *a = agg_new(NULL);
	struct agg_sample s = {.time_us = BASE + 3, .source_id = 5, .span_id = 9, .stack_id = 4};
	struct agg_window *w;
	struct agg_stats st;

	s.trace_id[3] = 1;
	s.hz = 19;
	CHECK(agg_add(a, &s) == 0, "19 Hz");
	s.hz = 99;
	CHECK(agg_add(a, &s) == 0, "99 Hz");
	CHECK(agg_add(a, &s) == 0, "99 Hz again");
	s.hz = 0;
	CHECK(agg_add(a, &s) == -EINVAL, "hz 0 refused");
	s.hz = 1001;
	CHECK(agg_add(a, &s) == -EINVAL, "hz 1001 refused");
	s.hz = 19;
	s.span_id = 0;
	CHECK(agg_add(a, &s) == -EINVAL, "trace without span refused");
	memset(s.trace_id, 0, 16);
	s.span_id = 9;
	CHECK(agg_add(a, &s) == -EINVAL, "span without trace refused");
	s.span_id = 0;
	CHECK(agg_add(a, &s) == 0, "untagged");
	s.source_id = 0;
	CHECK(agg_add(a, &s) == -EINVAL, "source 0 refused");
	CHECK(agg_tick(a, BASE + 14 * SEC) == 0, "window open until its end");
	CHECK(agg_tick(a, BASE + 15 * SEC) == 1, "tick closes at the end");
	w = agg_take(a);
	CHECK(w && w->nrows == 3 && w->nsamples == 4 && w->start_us == BASE,
	      "3 rows: untagged, 19 Hz, 99 Hz");
	if (w && w->nrows == 3) {
		CHECK(w->rows[0].span_id == 0 && w->rows[0].trace_id[3] == 0, "untagged row first");
		CHECK(w->rows[1].hz == 19 && w->rows[1].counts[0] == 1, "19 Hz row");
		CHECK(w->rows[2].hz == 99 && w->rows[2].counts[0] == 2, "99 Hz row apart");
	}
	agg_window_free(w);
	CHECK(agg_take(a) == NULL && errno == 0, "no more windows");
	agg_get_stats(a, &st);
	CHECK(st.samples_invalid == 5 && st.samples == 4, "invalid counted");
	agg_free(a);
	errno = 0;
	CHECK(agg_new(&(struct agg_opts){.window_us = 7 * SEC}) == NULL && errno == EINVAL,
	      "a window that does not divide a minute is refused");
}

/* Dictionary of the closure test: 2 sources, 3 functions, 4 frames, 3 stacks. */
static void register_dict(struct agg *a, uint64_t fr[4], uint64_t stk[3])
{
	struct store_source src = {"checkout", "shop", "pod-1", "c1", "node-1", "b1", ""};
	uint64_t fn[3];

	src.service = "checkout";
	CHECK(agg_add_source(a, 1, &src) == 0, "source 1");
	src.service = "inventory";
	CHECK(agg_add_source(a, 2, &src) == 0, "source 2");
	CHECK(agg_add_source(a, 2, &src) == 0, "again: no-op");
	src.service = "";
	CHECK(agg_add_source(a, 3, &src) == -EINVAL, "empty service refused");
	for (int i = 0; i < 3; i++) {
		char name[32];

		snprintf(name, sizeof(name), "fn%d", i);
		fn[i] = ids_function("libx.so", name);
		CHECK(agg_add_function(a, fn[i], name, "libx.so", 0) == 0, "function");
	}
	CHECK(agg_add_function(a, 77, "", "m", 0) == -EINVAL, "empty function name refused");
	for (int i = 0; i < 4; i++) {
		fr[i] = ids_frame(fn[i % 3], "b1", i ? "x.c" : NULL, i, 0x1000 + (uint64_t)i);
		CHECK(agg_add_frame(a, fr[i], fn[i % 3], "b1", i ? "x.c" : NULL, i,
				    0x1000 + (uint64_t)i) == 0,
		      "frame");
	}
	{
		uint64_t s0[2] = {fr[0], fr[1]}, s1[2] = {fr[0], fr[2]}, s2[1] = {fr[3]};

		stk[0] = ids_stack(s0, 2);
		stk[1] = ids_stack(s1, 2);
		stk[2] = ids_stack(s2, 1);
		CHECK(agg_add_stack(a, stk[0], s0, 2) == 0, "stack 0");
		CHECK(agg_add_stack(a, stk[1], s1, 2) == 0, "stack 1");
		CHECK(agg_add_stack(a, stk[2], s2, 1) == 0, "stack 2");
		CHECK(agg_add_stack(a, 99, s0, 0) == -EINVAL, "empty stack refused");
	}
}

static bool has_id(const void *arr, size_t n, size_t size, uint64_t id)
{
	for (size_t i = 0; i < n; i++)
		if (*(const uint64_t *)((const char *)arr + i * size) == id)
			return true;
	return false;
}

/* Every registered entry the rows need is in the window, and nothing else. */
static void check_closure(const struct agg_window *w, const char *what)
{
	size_t nfr = 0, nfn = 0;
	uint64_t fr[64], fn[64], absent = 0;

	for (size_t i = 0; i < w->nrows; i++) {
		absent +=
		    !has_id(w->sources, w->nsources, sizeof(*w->sources), w->rows[i].source_id);
		for (uint32_t k = 0; k < w->rows[i].n; k++)
			absent += !has_id(w->stacks, w->nstacks, sizeof(*w->stacks),
					  w->rows[i].stacks[k]);
	}
	for (size_t i = 0; i < w->nstacks; i++)
		for (uint32_t f = 0; f < w->stacks[i].n; f++) {
			uint64_t id = w->stacks[i].frame_ids[f];

			if (!has_id(fr, nfr, sizeof(*fr), id) && nfr < 64)
				fr[nfr++] = id;
			absent += !has_id(w->frames, w->nframes, sizeof(*w->frames), id);
		}
	for (size_t i = 0; i < w->nframes; i++) {
		if (!has_id(fn, nfn, sizeof(*fn), w->frames[i].function_id) && nfn < 64)
			fn[nfn++] = w->frames[i].function_id;
		absent += !has_id(w->functions, w->nfunctions, sizeof(*w->functions),
				  w->frames[i].function_id);
	}
	CHECK(absent == w->missing_entries,
	      "%s: every referenced entry is carried but the %" PRIu64 " unregistered (%" PRIu64
	      " absent)",
	      what, w->missing_entries, absent);
	CHECK(nfr == w->nframes && nfn == w->nfunctions, "%s: no extra frames or functions", what);
}

static void test_dictionary(void)
{
	struct agg *a =
	    agg_new(&(struct agg_opts){.window_us = SEC, .dict_max = 8, .dict_idle = 2});
	struct agg_sample s = {.time_us = BASE, .source_id = 1, .hz = 19};
	struct agg_window *w1, *w2, *w3;
	uint64_t fr[4], stk[3];
	struct agg_stats st;

	register_dict(a, fr, stk);
	/* Window 1: stacks 0 and 2 from source 1. */
	s.stack_id = stk[0];
	agg_add(a, &s);
	s.stack_id = stk[2];
	agg_add(a, &s);
	/* Window 2: stack 0 again (from source 2), and an unregistered stack. */
	s.time_us += SEC;
	s.source_id = 2;
	s.stack_id = stk[0];
	CHECK(agg_add(a, &s) == 1, "window 1 closed");
	s.stack_id = 4242;
	agg_add(a, &s);
	CHECK(agg_close(a) == 1, "window 2 closed");
	w1 = agg_take(a);
	w2 = agg_take(a);
	CHECK(w1 && w2, "two windows");
	if (!w1 || !w2)
		return;
	check_closure(w1, "window 1");
	CHECK(w1->nsources == 1 && w1->nstacks == 2 && w1->nframes == 3 && w1->nfunctions == 2,
	      "window 1: 1 source, 2 stacks, 3 frames, 2 functions (%zu %zu %zu %zu)", w1->nsources,
	      w1->nstacks, w1->nframes, w1->nfunctions);
	CHECK(w1->missing_entries == 0, "nothing missing in window 1");
	/* Window 1 is lost on the way: window 2 must stand on its own. */
	agg_window_free(w1);
	check_closure(w2, "window 2");
	CHECK(w2->nstacks == 1 && w2->stacks[0].id == stk[0] && w2->nframes == 2 &&
		  w2->nfunctions == 2,
	      "window 2 carries stack 0 again with its frames and functions");
	CHECK(w2->nsources == 1 && !strcmp(w2->sources[0].src.service, "inventory") &&
		  !strcmp(w2->sources[0].src.node, "node-1"),
	      "source strings copied");
	CHECK(w2->nrows == 1 && w2->rows[0].n == 2, "the unregistered stack's samples are kept");
	CHECK(w2->missing_entries == 1, "the unregistered stack is counted");
	for (size_t i = 0; i < w2->nframes; i++)
		if (w2->frames[i].id == fr[0])
			CHECK(w2->frames[i].file == NULL && w2->frames[i].line == 0,
			      "NULL file kept NULL");
	agg_window_free(w2);

	/* Windows 3..5 use only stack 1: the dictionary (12 > 8) sweeps what idled. */
	CHECK(agg_dict_evictions(a) == 0, "nothing forgotten yet");
	s.stack_id = stk[1];
	for (int i = 0; i < 3; i++) {
		s.time_us += SEC;
		agg_add(a, &s);
		agg_close(a);
		agg_window_free(agg_take(a));
	}
	CHECK(!agg_has_stack(a, stk[0]) && !agg_has_stack(a, stk[2]), "idle stacks swept");
	CHECK(agg_has_stack(a, stk[1]) && agg_has_source(a, 2) && !agg_has_source(a, 1),
	      "stack and source in use kept, idle source swept");
	agg_get_stats(a, &st);
	CHECK(st.dict_evicted > 0 && st.dict_entries < 12, "evicted %" PRIu64 ", %" PRIu64 " left",
	      st.dict_evicted, st.dict_entries);
	CHECK(agg_dict_evictions(a) == st.dict_evicted, "evictions reported to the caller");
	s.time_us += SEC;
	agg_add(a, &s);
	agg_close(a);
	w3 = agg_take(a);
	if (w3)
		check_closure(w3, "after the sweep");
	CHECK(w3 && w3->missing_entries == 0, "stack 1 still complete after the sweep");
	agg_window_free(w3);
	agg_free(a);
}

/* Once warm, agg_add() allocates only in the call that closes a window. */
static void test_no_alloc(void)
{
	struct agg *a = agg_new(&(struct agg_opts){.window_us = SEC});
	unsigned long in_adds = 0;
	int64_t t = BASE;
	uint64_t slots = 0;

	for (int win = 0; win < 6; win++) {
		for (int i = 0; i < 3000; i++) {
			struct agg_sample s;
			unsigned long before = allocations;
			int rc;

			random_sample(&s, &t, 2, 300, 200);
			s.time_us = t = BASE + win * SEC + i * (SEC / 3000);
			rc = agg_add(a, &s);
			if (win >= 3 && rc == 0)
				in_adds += allocations - before;
			agg_window_free(agg_take(a));
		}
		if (win == 3) {
			struct agg_stats st;

			agg_get_stats(a, &st);
			slots = st.table_slots;
		}
	}
	CHECK(in_adds == 0, "%lu allocations in agg_add() once warm", in_adds);
	{
		struct agg_stats st;

		agg_get_stats(a, &st);
		CHECK(st.table_slots == slots && slots >= 1024, "table stays at %" PRIu64 " slots",
		      slots);
	}
	agg_free(a);
}
/*
 * A trigger window (raised samples kept for a trigger) carries the entries
 * its rows use, and taking it does not rob the open window of them.
 */
static void test_trigger_window(void)
{
	struct agg *a = agg_new(&(struct agg_opts){.window_us = SEC});
	struct agg_sample s = {.time_us = BASE, .source_id = 1, .hz = 19};
	uint64_t fr[4], stk[3];
	uint32_t cnt[2] = {4, 1};
	struct store_sample_row row = {
	    .bucket_us = BASE, .source_id = 2, .span_id = 9, .hz = 99, .n = 2, .counts = cnt};
	struct agg_window *t, *w;

	register_dict(a, fr, stk);
	row.trace_id[0] = 0x42;
	row.stacks = (uint64_t[]){stk[0], stk[2]};
	s.stack_id = stk[0];
	agg_add(a, &s);
	t = agg_trigger_window(a, "default/slow/00000001", &row, 1);
	CHECK(t && !strcmp(t->trigger_id, "default/slow/00000001") && t->nrows == 1 &&
		  t->nsamples == 5 && t->rows[0].hz == 99 && t->rows[0].span_id == 9 &&
		  t->rows[0].bucket_us == BASE,
	      "trigger window: 5 samples at 99 Hz in one row");
	if (t) {
		check_closure(t, "trigger window");
		CHECK(t->nstacks == 2 && t->nsources == 1 && t->missing_entries == 0,
		      "trigger window carries its 2 stacks and its source");
	}
	agg_window_free(t);
	CHECK(agg_close(a) == 1 && (w = agg_take(a)) != NULL, "the open window closes");
	if (w) {
		check_closure(w, "window after a trigger window");
		CHECK(w->nstacks == 1 && w->stacks[0].id == stk[0] && w->nframes == 2,
		      "the open window still carries stack 0 and its frames");
		CHECK(w->trigger_id == NULL, "a base window has no trigger id");
	}
	agg_window_free(w);
	CHECK(agg_trigger_window(a, NULL, &row, 1) == NULL && errno == EINVAL, "no trigger id");
	agg_free(a);
}

/*
 * Off-CPU time (docs/offcpu.md): microseconds summed per (source, trace,
 * span, kind, stack) in the same window as the samples, kinds in rows of
 * their own, stack 0 kept without a dictionary entry, the closure of the
 * off-CPU stacks carried, invalid intervals refused, sums saturating.
 */
static void test_offcpu(void)
{
	struct agg *a = agg_new(&(struct agg_opts){.window_us = SEC});
	struct agg_sample s = {.time_us = BASE, .source_id = 1, .hz = 19};
	struct agg_offcpu o = {.time_us = BASE + 5, .source_id = 1, .span_id = 7, .us = 1500};
	struct agg_window *w;
	struct agg_stats st;
	uint64_t fr[4], stk[3];

	register_dict(a, fr, stk);
	o.trace_id[15] = 0x11;
	s.stack_id = stk[0];
	CHECK(agg_add(a, &s) == 0, "a CPU sample");
	o.kind = STORE_OFFCPU_BLOCKED;
	o.stack_id = stk[1];
	CHECK(agg_add_offcpu(a, &o) == 0, "blocked 1500 us");
	o.us = 2500;
	CHECK(agg_add_offcpu(a, &o) == 0, "blocked 2500 us more, same stack");
	o.stack_id = 0;
	o.us = 300;
	CHECK(agg_add_offcpu(a, &o) == 0, "blocked 300 us without a stack");
	o.kind = STORE_OFFCPU_RUNQ;
	o.stack_id = stk[2];
	o.us = 40;
	CHECK(agg_add_offcpu(a, &o) == 0, "runqueue 40 us");
	o.us = INT32_MAX - 10;
	CHECK(agg_add_offcpu(a, &o) == 0 && agg_add_offcpu(a, &o) == 0, "runqueue: saturating");
	o.us = 0;
	CHECK(agg_add_offcpu(a, &o) == -EINVAL, "0 us refused");
	o.us = 5;
	o.kind = 3;
	CHECK(agg_add_offcpu(a, &o) == -EINVAL, "kind 3 refused");
	o.kind = STORE_OFFCPU_BLOCKED;
	o.span_id = 0;
	CHECK(agg_add_offcpu(a, &o) == -EINVAL, "trace without span refused");
	o.span_id = 7;
	o.source_id = 0;
	CHECK(agg_add_offcpu(a, &o) == -EINVAL, "source 0 refused");
	CHECK(agg_close(a) == 1 && (w = agg_take(a)) != NULL, "the window closes");
	if (w) {
		CHECK(w->nrows == 1 && w->nsamples == 1 && w->rows[0].stacks[0] == stk[0],
		      "the sample row as before");
		CHECK(w->noffcpu == 2, "two off-CPU rows (blocked, runqueue): %zu", w->noffcpu);
		if (w->noffcpu == 2) {
			const struct store_offcpu_row *b = &w->offcpu[0], *r = &w->offcpu[1];
			uint32_t with = 0, without = 0;

			CHECK(b->kind == STORE_OFFCPU_BLOCKED && b->span_id == 7 &&
				  b->trace_id[15] == 0x11 && b->bucket_us == BASE && b->n == 2,
			      "blocked row: the span, two stacks");
			for (uint32_t i = 0; i < b->n; i++) {
				with += b->stacks[i] == stk[1] ? b->us[i] : 0;
				without += b->stacks[i] == 0 ? b->us[i] : 0;
			}
			CHECK(with == 4000 && without == 300,
			      "blocked: 4000 us in stack 1, 300 "
			      "without (%u, %u)",
			      with, without);
			CHECK(r->kind == STORE_OFFCPU_RUNQ && r->n == 1 && r->stacks[0] == stk[2] &&
				  r->us[0] == INT32_MAX,
			      "runqueue row: saturated at INT32_MAX (%u)", r->n ? r->us[0] : 0);
			CHECK(w->offcpu_us == 4300 + (uint64_t)INT32_MAX, "window total %" PRIu64,
			      w->offcpu_us);
		}
		CHECK(w->nstacks == 3 &&
			  has_id(w->stacks, w->nstacks, sizeof(*w->stacks), stk[1]) &&
			  has_id(w->stacks, w->nstacks, sizeof(*w->stacks), stk[2]) &&
			  w->missing_entries == 0,
		      "the window carries the off-CPU stacks, none for stack 0");
	}
	agg_window_free(w);
	agg_get_stats(a, &st);
	CHECK(st.offcpu == 6 && st.offcpu_invalid == 4 && st.samples == 1,
	      "counted: %" PRIu64 " kept, %" PRIu64 " invalid", st.offcpu, st.offcpu_invalid);
	agg_free(a);
}

/*
 * Names from other processes are stored safe to show: ESC, CSI (U+009B),
 * U+202E and a byte that is not UTF-8 each become '?' in the window, the
 * names counted; the ids stay the callers'.
 */
static void test_names_sanitized(void)
{
	struct agg *a = agg_new(&(struct agg_opts){.window_us = SEC});
	struct store_source src = {.service = "svc\xe2\x80\xae", .node = "n"};
	struct agg_sample s = {.time_us = BASE, .source_id = 1, .hz = 19, .stack_id = 3};
	uint64_t fr = 2;
	struct agg_window *w;
	struct agg_stats st;

	CHECK(agg_add_source(a, 1, &src) == 0 &&
		  agg_add_function(a, 1,
				   "f\x1b[2J\xc2\x9bx\xe2\x80\xae"
				   "y",
				   "m\xff.so", 0) == 0 &&
		  agg_add_frame(a, 2, 1, "b",
				"src/\xe2\x81\xa6"
				"a.c",
				1, 0) == 0 &&
		  agg_add_stack(a, 3, &fr, 1) == 0,
	      "dictionary");
	agg_add(a, &s);
	agg_close(a);
	w = agg_take(a);
	CHECK(w && w->nfunctions == 1 && w->nframes == 1 && w->nsources == 1, "one of each");
	if (w) {
		CHECK(!strcmp(w->functions[0].name, "f?[2J?x?y") && w->functions[0].id == 1,
		      "function name '%s'", w->functions[0].name);
		CHECK(!strcmp(w->functions[0].module, "m?.so"), "module '%s'",
		      w->functions[0].module);
		CHECK(!strcmp(w->frames[0].file, "src/?a.c"), "file '%s'", w->frames[0].file);
		CHECK(!strcmp(w->sources[0].src.service, "svc?"), "service '%s'",
		      w->sources[0].src.service);
	}
	agg_get_stats(a, &st);
	CHECK(st.names_sanitized == 4, "4 names sanitized, counted %llu",
	      (unsigned long long)st.names_sanitized);
	agg_window_free(w);
	agg_free(a);
}

int main(void)
{
	test_names_sanitized();
	test_hz_and_invalid();
	test_offcpu();
	test_dictionary();
	test_trigger_window();
	test_no_alloc();
	compare_random(SEC, 1000000, 200000, 40);
	compare_random(15 * SEC, 0, 200000, 300);
	compare_random(SEC, 40, 100000, 40);
	compare_random(5 * SEC, 200, 100000, 1000);
	return check_done();
}
