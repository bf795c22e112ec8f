/*
 * spans.c - server spans on the request path: begin and end, the clock
 * they read, and the interning of span names.
 *
 * tp_sdk_span_begin parses the incoming traceparent, makes a span id,
 * attaches the thread context and reads CLOCK_MONOTONIC (vDSO; the
 * wall-clock start comes from an offset the exporter keeps fresh);
 * tp_sdk_span_end detaches and copies the finished span into a slot of the
 * bounded span queue (span_queue.h: one compare-and-swap claims a slot, a
 * release store publishes it). A slot is one cache line: method and route
 * are not copied but interned (see "Names" in span_queue.h), so a span
 * writes one line. No allocation, lock or system call; a full queue drops
 * the span and counts it. The exporter thread that empties the queue, and
 * its start and stop, are in span_export.c.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sdk_internal.h"
#include "span_internal.h"
#include "span_queue.h"
#include "traceprof/sdk.h"

/* The span names table (span_queue.h); name_id below fills it. */
struct name_entry tp_span_names[NAMES_CAP];

static __thread struct {
	const char *method, *route; /* the caller's pointers */
	uint32_t id;		    /* tp_span_names[] index + 1; 0: empty */
} name_cache[NAME_CACHE];

/* The request path's line and counters (span_internal.h). */
struct tp_span_rp tp_span_rp = {.autostart = true};
struct tp_span_prod_stats tp_span_st_prod;

/*
 * The request path's clock: CLOCK_MONOTONIC nanoseconds, read from the CPU's
 * time-stamp counter when that is safe, else through the vDSO.
 *
 * A vDSO clock_gettime costs about 21 ns on a KVM guest, RDTSC about 10.
 * The TSC is used only when the CPU says it is invariant (constant rate,
 * runs in deep C-states: CPUID 0x80000007 EDX bit 8) and the kernel itself
 * keeps time with it (clocksource "tsc": the kernel checked that the CPUs'
 * counters agree and would have switched away otherwise). Set
 * TRACEPROF_SDK_CLOCK=monotonic to never use it.
 *
 * Conversion: mono = anchor_mono + ((tsc - anchor_tsc) * mult >> 32), with
 * mult in nanoseconds per tick as 32.32 fixed point. tp_span_clock_refresh (the
 * exporter at every poll; a request thread when the anchor is older than
 * OFFSET_MAX_AGE_NS) re-anchors to a fresh CLOCK_MONOTONIC reading, so NTP
 * slewing is followed and the conversion never drifts more than
 * mult's error over one refresh interval (well under a microsecond), and
 * refines mult over the whole time since the first anchor. The TSC path
 * starts once that baseline is 100 ms long; until then (and on every other
 * machine) the request path reads CLOCK_MONOTONIC. The parameters are read
 * under a sequence lock: a reader that overlaps a refresh reads again.
 *
 * Wall-clock time: begin adds tp_span_rp.rt_offset_ns (CLOCK_REALTIME -
 * CLOCK_MONOTONIC), refreshed at the same moments. A step of the wall clock
 * thus shows in span start times within OFFSET_MAX_AGE_NS at most
 * (EXPORT_TICK_MS, span_export.c, while exporting); durations never see it.
 */
#define OFFSET_MAX_AGE_NS   1000000000LL
#define TSC_MIN_BASELINE_NS 10000000LL

static struct {
	_Alignas(64) _Atomic uint32_t seq; /* odd while a refresh writes */
	_Atomic int use_tsc;		   /* 1: the conversion below is valid */
	_Atomic uint64_t anchor_tsc;	   /* TSC at anchor_mono */
	_Atomic int64_t anchor_mono;	   /* CLOCK_MONOTONIC ns */
	_Atomic uint64_t mult;		   /* ns per tick, 32.32 fixed point */
} tc;

/* Written by tp_span_clock_refresh only (under refresh_busy). */
static atomic_flag refresh_busy = ATOMIC_FLAG_INIT;
static int tsc_ok = -1; /* -1: not checked yet; 0: never; 1: allowed */
static uint64_t first_tsc;
static int64_t first_mono;

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <x86intrin.h>
#define HAVE_TSC 1
static inline uint64_t read_tsc(void)
{
	return __rdtsc();
}

static int tsc_allowed(void)
{
	unsigned a, b, c, d;
	char cs[32] = "";
	const char *env = getenv("TRACEPROF_SDK_CLOCK");
	FILE *f;

	if (env && strcmp(env, "monotonic") == 0)
		return 0;
	if (!__get_cpuid(0x80000007, &a, &b, &c, &d) || !(d & (1u << 8)))
		return 0;
	f = fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "re");
	if (!f)
		return 0;
	if (!fgets(cs, sizeof(cs), f))
		cs[0] = '\0';
	fclose(f);
	return strcmp(cs, "tsc\n") == 0;
}
#else
#define HAVE_TSC 0
static inline uint64_t read_tsc(void)
{
	return 0;
}

static int tsc_allowed(void)
{
	return 0;
}
#endif

static inline int64_t clock_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* CLOCK_MONOTONIC nanoseconds, from the TSC when allowed and calibrated. */
static inline int64_t now_mono_ns(void)
{
	if (HAVE_TSC && likely(atomic_load_explicit(&tc.use_tsc, memory_order_relaxed))) {
		for (;;) {
			uint32_t s0 = atomic_load_explicit(&tc.seq, memory_order_acquire);
			uint64_t at = atomic_load_explicit(&tc.anchor_tsc, memory_order_relaxed);
			int64_t am = atomic_load_explicit(&tc.anchor_mono, memory_order_relaxed);
			uint64_t m = atomic_load_explicit(&tc.mult, memory_order_relaxed);
			uint64_t t = read_tsc();

			atomic_thread_fence(memory_order_acquire);
			if (likely(!(s0 & 1) &&
				   atomic_load_explicit(&tc.seq, memory_order_relaxed) == s0)) {
				/* a counter read just before the anchor gives a small negative
				 * delta */
				int64_t d = (int64_t)(t - at);

				return am +
				       (d >= 0
					    ? (int64_t)(((unsigned __int128)(uint64_t)d * m) >> 32)
					    : -(int64_t)(((unsigned __int128)(uint64_t)-d * m) >>
							 32));
			}
		}
	}
	return clock_ns(CLOCK_MONOTONIC);
}

/*
 * Re-anchors the clock and refreshes the wall-clock offset. Called by the
 * exporter at every poll and by a request thread that finds the anchor
 * stale; concurrent callers skip (one refresh is enough).
 */
void tp_span_clock_refresh(void)
{
	int64_t m0, r, m1, mid;
	uint64_t t;

	if (atomic_flag_test_and_set_explicit(&refresh_busy, memory_order_acquire))
		return;
	if (tsc_ok < 0)
		tsc_ok = HAVE_TSC ? tsc_allowed() : 0;
	m0 = clock_ns(CLOCK_MONOTONIC);
	t = read_tsc();
	r = clock_ns(CLOCK_REALTIME);
	m1 = clock_ns(CLOCK_MONOTONIC);
	/* the other reads sit between the two monotonic ones: use their middle */
	mid = m0 + (m1 - m0) / 2;
	atomic_store_explicit(&tp_span_rp.rt_offset_ns, r - mid, memory_order_relaxed);
	if (tsc_ok && m1 - m0 < 2000) { /* a preempted sandwich would misplace the anchor */
		if (!first_mono) {
			first_tsc = t;
			first_mono = mid;
		} else if (mid - first_mono >= TSC_MIN_BASELINE_NS && t > first_tsc) {
			uint64_t mult =
			    (uint64_t)((((unsigned __int128)(uint64_t)(mid - first_mono)) << 32) /
				       (t - first_tsc));
			uint32_t s0 = atomic_load_explicit(&tc.seq, memory_order_relaxed);

			atomic_store_explicit(&tc.seq, s0 + 1, memory_order_relaxed);
			atomic_thread_fence(memory_order_release);
			atomic_store_explicit(&tc.anchor_tsc, t, memory_order_relaxed);
			atomic_store_explicit(&tc.anchor_mono, mid, memory_order_relaxed);
			atomic_store_explicit(&tc.mult, mult, memory_order_relaxed);
			atomic_store_explicit(&tc.seq, s0 + 2, memory_order_release);
			atomic_store_explicit(&tc.use_tsc, 1, memory_order_relaxed);
		}
	}
	atomic_store_explicit(&tp_span_rp.rt_offset_at_ns, m1, memory_order_release);
	atomic_flag_clear_explicit(&refresh_busy, memory_order_release);
}

/* CLOCK_REALTIME - CLOCK_MONOTONIC at mono (a now_mono_ns reading). */
static inline int64_t clock_offset(int64_t mono)
{
	int64_t at = atomic_load_explicit(&tp_span_rp.rt_offset_at_ns, memory_order_acquire);

	if (unlikely(at == 0 || mono - at > OFFSET_MAX_AGE_NS))
		tp_span_clock_refresh();
	return atomic_load_explicit(&tp_span_rp.rt_offset_ns, memory_order_relaxed);
}

/* ---- request path ---- */

/*
 * Asks for a slot a span will soon take, for writing, so that its line is
 * owned by this core by the time tp_sdk_span_end fills it: the exporter
 * read it last, or it left the cache a lap ago. PREFETCH_AHEAD slots
 * ahead of head, not the next one: a request shorter than a cache miss
 * (back-to-back spans) would otherwise still wait for its line, as the
 * compare-and-swap on head drains the previous span's stores. A hint only:
 * any producer may take that slot.
 */
#define PREFETCH_AHEAD 8
static inline void prefetch_next_slot(void)
{
	struct queue *q = atomic_load_explicit(&tp_span_rp.queue, memory_order_relaxed);

	if (likely(q != NULL)) {
		const char *p =
		    (const char *)&q->slots[(atomic_load_explicit(&q->head, memory_order_relaxed) +
					     PREFETCH_AHEAD) &
					    q->mask];

		__builtin_prefetch(p, 1, 3);
	}
}

TP_SDK_EXPORT int tp_sdk_span_begin(struct tp_sdk_span *span, const char *traceparent, size_t len)
{
	if (unlikely(!span))
		return -EINVAL;
	if (traceparent && len &&
	    !tp_sdk_traceparent_parse_fast(traceparent, len, span->trace_id, span->parent_span_id,
					   &span->trace_flags)) {
		/* continues the caller's trace */
	} else {
		tp_sdk_new_trace_id_fast(span->trace_id);
		memset(span->parent_span_id, 0, sizeof(span->parent_span_id));
		span->trace_flags = 0x01;
	}
	tp_sdk_new_span_id_fast(span->span_id);
	tp_sdk_attach_ids(span->trace_id, span->span_id, span->trace_flags);
	prefetch_next_slot();
	span->start_mono_ns = now_mono_ns();
	span->start_unix_ns = span->start_mono_ns + clock_offset(span->start_mono_ns);
	return 0;
}

/* True when src (NULL: ""), cut to size - 1 bytes, is the string e. */
static inline bool same_cut(const char *e, const char *src, size_t size)
{
	if (!src)
		return e[0] == '\0';
	for (size_t i = 0; i < size - 1; i++) {
		if (e[i] != src[i])
			return false;
		if (!src[i])
			return true;
	}
	return true; /* e[size - 1] is its NUL */
}

static inline bool name_is(const struct name_entry *e, const char *method, const char *route)
{
	return same_cut(e->method, method, sizeof(e->method)) &&
	       same_cut(e->route, route, sizeof(e->route));
}

static uint32_t name_hash(const char *method, const char *route)
{
	uint32_t h = 2166136261u; /* FNV-1a */

	for (size_t i = 0; method && i < TP_SPAN_METHOD_SIZE - 1 && method[i]; i++)
		h = (h ^ (uint8_t)method[i]) * 16777619u;
	h = (h ^ 0xff) * 16777619u;
	for (size_t i = 0; route && i < TP_SPAN_ROUTE_SIZE - 1 && route[i]; i++)
		h = (h ^ (uint8_t)route[i]) * 16777619u;
	return h;
}

/* The table entry of (method, route), added if new; NAME_WIDE when the table is full. */
static __attribute__((noinline)) uint32_t name_intern(const char *method, const char *route)
{
	uint32_t h = name_hash(method, route);

	for (uint32_t k = 0; k < NAMES_PROBE; k++) {
		uint32_t i = (h + k) & (NAMES_CAP - 1), st = NAME_FREE;
		struct name_entry *e = &tp_span_names[i];

		if (atomic_compare_exchange_strong_explicit(
			&e->state, &st, NAME_BUSY, memory_order_acquire, memory_order_acquire)) {
			e->hash = h;
			copy_str(e->method, method, sizeof(e->method));
			copy_str(e->route, route, sizeof(e->route));
			atomic_store_explicit(&e->state, NAME_READY, memory_order_release);
			return i;
		}
		/* busy: being written, perhaps with this very pair; a second entry is harmless */
		if (st == NAME_READY && e->hash == h && name_is(e, method, route))
			return i;
	}
	return NAME_WIDE;
}

/* The tp_span_names[] index of (method, route), or NAME_WIDE. */
static inline uint32_t name_id(const char *method, const char *route)
{
	uint32_t c = (uint32_t)((uintptr_t)route >> 4) & (NAME_CACHE - 1), id;

	if (likely(name_cache[c].method == method && name_cache[c].route == route &&
		   name_cache[c].id) &&
	    likely(name_is(&tp_span_names[name_cache[c].id - 1], method, route)))
		return name_cache[c].id - 1;
	id = name_intern(method, route);
	if (id != NAME_WIDE) {
		name_cache[c].method = method;
		name_cache[c].route = route;
		name_cache[c].id = id + 1;
	}
	return id;
}

/* Writes the names of a NAME_WIDE span into the WIDE_EXTRA slots after pos. */
static __attribute__((noinline)) void put_wide(struct queue *q, uint64_t pos, const char *method,
					       const char *route)
{
	struct wide_names w;

	memset(&w, 0, sizeof(w));
	copy_str(w.method, method, sizeof(w.method));
	copy_str(w.route, route, sizeof(w.route));
	for (size_t k = 0; k < WIDE_EXTRA; k++) {
		struct slot *x = &q->slots[(pos + 1 + k) & q->mask];
		size_t off = k * WIDE_CHUNK, len = sizeof(w) - off;

		/* never a header: seq 0 is no position's turn */
		atomic_store_explicit(&x->seq, 0, memory_order_relaxed);
		if (off < sizeof(w))
			memcpy((char *)x + 8, (const char *)&w + off,
			       len < WIDE_CHUNK ? len : WIDE_CHUNK);
	}
	atomic_fetch_add_explicit(&tp_span_st_prod.wide_positions, WIDE_EXTRA,
				  memory_order_relaxed);
}

TP_SDK_EXPORT int tp_sdk_span_end(struct tp_sdk_span *span, const char *method, const char *route,
				  int status_code)
{
	int64_t end_mono = now_mono_ns();
	struct queue *q;
	struct slot *s;
	uint64_t pos;
	uint32_t name;

	tp_sdk_detach_fast();
	if (unlikely(!span))
		return -EINVAL;
	if (unlikely(atomic_load_explicit(&tp_span_rp.autostart, memory_order_relaxed))) {
		int err = tp_span_try_autostart();

		if (err) {
			atomic_fetch_add_explicit(&tp_span_st_error, 1, memory_order_relaxed);
			return err;
		}
	}
	q = atomic_load_explicit(&tp_span_rp.queue, memory_order_acquire);
	if (unlikely(!q))
		return -ENOBUFS;
	name = name_id(method, route);
	s = queue_claim(q, likely(name != NAME_WIDE) ? 1 : 1 + WIDE_EXTRA, &pos);
	if (unlikely(!s)) {
		atomic_fetch_add_explicit(&tp_span_st_prod.full, 1, memory_order_relaxed);
		return -ENOBUFS;
	}
	if (unlikely(name == NAME_WIDE))
		put_wide(q, pos, method, route);
	memcpy(s->trace_id, span->trace_id, 16);
	memcpy(s->span_id, span->span_id, 8);
	memcpy(s->parent_span_id, span->parent_span_id, 8);
	s->trace_flags = span->trace_flags;
	s->start_unix_ns = span->start_unix_ns;
	/* a re-anchor between begin and end can move the clock by a few ns */
	s->end_unix_ns = span->start_unix_ns +
			 (end_mono > span->start_mono_ns ? end_mono - span->start_mono_ns : 0);
	s->status_code = status_code;
	s->name = (uint16_t)name;
	atomic_store_explicit(&s->seq, pos + 1, memory_order_release);
	return 0;
}
