/*
 * spans.c - server spans: begin and end on the request path, a bounded
 * queue, and the exporter thread that ships them as OTLP/HTTP.
 *
 * Request path: tp_sdk_span_begin parses the incoming traceparent, makes a
 * span id, attaches the thread context and reads CLOCK_MONOTONIC (vDSO;
 * the wall-clock start comes from an offset the exporter keeps fresh);
 * tp_sdk_span_end detaches and copies the finished span into a slot of a
 * bounded multi-producer single-consumer queue (a ring of sequence-numbered
 * slots: one compare-and-swap claims a slot, a release store publishes it).
 * A slot is one cache line: method and route are not copied but interned
 * (see "names" below), so a span writes one line. No allocation, lock or
 * system call; a full queue drops the span and counts it.
 *
 * Exporter thread: polls the queue every EXPORT_TICK_MS (at most; the
 * request path never wakes it, as that would be a system call), sends a
 * batch when batch_spans wait or when spans have waited interval_ms, and
 * on stop sends everything left before its deadline. Its signals are all
 * blocked. The queue is allocated at start and never freed: a thread may be
 * ending a span while another stops the exporter.
 *
 * Workload: many request threads, one exporter; at 25 ms per poll and the
 * default 2048 slots, bursts of up to ~80 000 spans/s fit without drops.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sdk_internal.h"
#include "span_queue.h"
#include "traceprof/sdk.h"

#define DEFAULT_ENDPOINT    "http://127.0.0.1:4318/v1/traces"
#define DEFAULT_QUEUE	    2048
#define DEFAULT_BATCH	    512
#define DEFAULT_INTERVAL_MS 1000
#define DEFAULT_TIMEOUT_MS  5000
#define EXPORT_TICK_MS	    25
#define MAX_QUEUE	    (1u << 20)
#define MIN_QUEUE	    8

/* The span names table (span_queue.h); name_id below fills it. */
struct name_entry tp_span_names[NAMES_CAP];

static __thread struct {
	const char *method, *route; /* the caller's pointers */
	uint32_t id;		    /* tp_span_names[] index + 1; 0: empty */
} name_cache[NAME_CACHE];

/* The exporter thread's state; written under ctl_lock by start and stop. */
struct exporter {
	struct tp_sdk_export_opts opts; /* resolved settings (endpoint unused) */
	struct tp_http http;		/* the connection */
	struct tp_span_rec *batch;	/* batch_spans records, owned */
	uint8_t *body;			/* tp_otlp_max_size(batch_spans) bytes, owned */
	char exe_name[64];		/* fallback service.name */
	pthread_t thread;		/* the exporter */
	bool stop;			/* stop asked (under ctl_lock) */
	int64_t stop_deadline_ms;	/* CLOCK_MONOTONIC ms by which it must end */
};

static pthread_mutex_t ctl_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ctl_cond; /* wakes the exporter on stop; CLOCK_MONOTONIC */
static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static struct exporter exp_state;	     /* valid while running */
static bool running;			     /* an exporter thread exists (ctl_lock) */
static bool have_opts;			     /* saved_opts/endpoint hold a start's settings */
static struct tp_sdk_export_opts saved_opts; /* the last start's settings */
static struct tp_endpoint saved_ep;	     /* the last start's endpoint */

/*
 * What every span reads and the request path never writes, on its own cache
 * line: the exporter's counters and the producers' counters are elsewhere,
 * so neither side's writes take this line from the other.
 */
static struct {
	_Alignas(64) _Atomic(struct queue *) queue; /* NULL until the first start */
	atomic_bool autostart;			    /* span_end should start the exporter */
	_Atomic int64_t rt_offset_ns;		    /* CLOCK_REALTIME - CLOCK_MONOTONIC, ns */
	_Atomic int64_t rt_offset_at_ns; /* CLOCK_MONOTONIC of its last refresh; 0: never */
} rp = {.autostart = true};

/*
 * Counted by the request path (st_error by both sides: rare there). Spans
 * queued are not counted there: every position claimed in a queue is one,
 * but for the WIDE_EXTRA positions of a span whose names did not fit the
 * table (counted in wide_positions), so spans_ended = ended_before + the
 * current queue's head - wide_positions, and a span costs no atomic add of
 * its own. ended_before holds the heads of queues that a restart with
 * another size replaced.
 */
static struct {
	_Alignas(64) _Atomic uint64_t ended_before; /* positions claimed in replaced queues */
	_Atomic uint64_t full;			    /* spans dropped: queue full */
	_Atomic uint64_t wide_positions;	    /* extra positions of wide spans */
} st_prod;

/* Counted by the exporter thread. */
static _Alignas(64) _Atomic uint64_t st_exported, st_error, st_requests, st_req_errors;

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
 * mult in nanoseconds per tick as 32.32 fixed point. clock_refresh (the
 * exporter at every poll; a request thread when the anchor is older than
 * OFFSET_MAX_AGE_NS) re-anchors to a fresh CLOCK_MONOTONIC reading, so NTP
 * slewing is followed and the conversion never drifts more than
 * mult's error over one refresh interval (well under a microsecond), and
 * refines mult over the whole time since the first anchor. The TSC path
 * starts once that baseline is 100 ms long; until then (and on every other
 * machine) the request path reads CLOCK_MONOTONIC. The parameters are read
 * under a sequence lock: a reader that overlaps a refresh reads again.
 *
 * Wall-clock time: begin adds rp.rt_offset_ns (CLOCK_REALTIME -
 * CLOCK_MONOTONIC), refreshed at the same moments. A step of the wall clock
 * thus shows in span start times within OFFSET_MAX_AGE_NS at most
 * (EXPORT_TICK_MS while exporting); durations never see it.
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

/* Written by clock_refresh only (under refresh_busy). */
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

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

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
static void clock_refresh(void)
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
	atomic_store_explicit(&rp.rt_offset_ns, r - mid, memory_order_relaxed);
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
	atomic_store_explicit(&rp.rt_offset_at_ns, m1, memory_order_release);
	atomic_flag_clear_explicit(&refresh_busy, memory_order_release);
}

/* CLOCK_REALTIME - CLOCK_MONOTONIC at mono (a now_mono_ns reading). */
static inline int64_t clock_offset(int64_t mono)
{
	int64_t at = atomic_load_explicit(&rp.rt_offset_at_ns, memory_order_acquire);

	if (unlikely(at == 0 || mono - at > OFFSET_MAX_AGE_NS))
		clock_refresh();
	return atomic_load_explicit(&rp.rt_offset_ns, memory_order_relaxed);
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
	struct queue *q = atomic_load_explicit(&rp.queue, memory_order_relaxed);

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

/* Copies at most size - 1 bytes of src and a NUL; NULL gives "". */
static inline void copy_str(char *dst, const char *src, size_t size)
{
	size_t i = 0;

	if (src)
		for (; i < size - 1 && src[i]; i++)
			dst[i] = src[i];
	dst[i] = '\0';
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
	atomic_fetch_add_explicit(&st_prod.wide_positions, WIDE_EXTRA, memory_order_relaxed);
}

static int try_autostart(void);

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
	if (unlikely(atomic_load_explicit(&rp.autostart, memory_order_relaxed))) {
		int err = try_autostart();

		if (err) {
			atomic_fetch_add_explicit(&st_error, 1, memory_order_relaxed);
			return err;
		}
	}
	q = atomic_load_explicit(&rp.queue, memory_order_acquire);
	if (unlikely(!q))
		return -ENOBUFS;
	name = name_id(method, route);
	s = queue_claim(q, likely(name != NAME_WIDE) ? 1 : 1 + WIDE_EXTRA, &pos);
	if (unlikely(!s)) {
		atomic_fetch_add_explicit(&st_prod.full, 1, memory_order_relaxed);
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

/* ---- exporter thread ---- */

static void service_name(const struct exporter *e, char *out, size_t size)
{
	const char *env;

	if (!tp_sdk_published_service_name(out, size))
		return;
	env = getenv("OTEL_SERVICE_NAME");
	snprintf(out, size, "%s", env && *env ? env : e->exe_name);
}

/*
 * Sends up to batch_spans queued spans; timeout bounded by the stop
 * deadline. Returns how many it took from the queue.
 */
static size_t export_batch(struct exporter *e, struct queue *q, int64_t deadline)
{
	char name[256];
	size_t n = 0, len;
	int64_t left = deadline - mono_ms();
	int timeout = (int)e->opts.timeout_ms, rc;

	while (n < e->opts.batch_spans && tp_span_queue_pop(q, &e->batch[n]))
		n++;
	if (!n)
		return 0;
	if (left < timeout)
		timeout = left > 0 ? (int)left : 0;
	service_name(e, name, sizeof(name));
	len = tp_otlp_encode(e->batch, n, name, e->body);
	atomic_fetch_add(&st_requests, 1);
	rc = timeout > 0 ? tp_http_post(&e->http, e->body, len, timeout) : -ETIMEDOUT;
	if (rc >= 200 && rc <= 299) {
		atomic_fetch_add(&st_exported, n);
	} else {
		atomic_fetch_add(&st_req_errors, 1);
		atomic_fetch_add(&st_error, n);
	}
	return n;
}

/* A producer claimed a slot but has not filled it yet: let it run. */
static void pause_briefly(void)
{
	struct timespec ts = {0, 1000000};

	nanosleep(&ts, NULL);
}

static void *exporter_main(void *arg)
{
	struct exporter *e = arg;
	struct queue *q = atomic_load(&rp.queue);
	int64_t waiting_since = mono_ms();
	uint32_t tick = e->opts.interval_ms < EXPORT_TICK_MS ? e->opts.interval_ms : EXPORT_TICK_MS;
	bool stopping = false;
	int64_t deadline = INT64_MAX;

	while (!stopping) {
		struct timespec ts;
		int64_t now;

		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_nsec += (long)tick * 1000000;
		ts.tv_sec += ts.tv_nsec / 1000000000;
		ts.tv_nsec %= 1000000000;
		pthread_mutex_lock(&ctl_lock);
		if (!e->stop)
			pthread_cond_timedwait(&ctl_cond, &ctl_lock, &ts);
		stopping = e->stop;
		if (stopping)
			deadline = e->stop_deadline_ms;
		pthread_mutex_unlock(&ctl_lock);

		clock_refresh();
		now = mono_ms();
		if (!queue_len(q)) {
			waiting_since = now;
			continue;
		}
		if (stopping)
			break;
		if (queue_len(q) >= e->opts.batch_spans ||
		    now - waiting_since >= (int64_t)e->opts.interval_ms) {
			while (export_batch(e, q, deadline) == e->opts.batch_spans &&
			       queue_len(q) >= e->opts.batch_spans)
				;
			waiting_since = mono_ms();
		}
	}
	/* stop: everything left, within the deadline */
	while (queue_len(q) && mono_ms() < deadline)
		if (!export_batch(e, q, deadline))
			pause_briefly();
	if (queue_len(q)) {
		struct tp_span_rec r;

		while (tp_span_queue_pop(q, &r))
			atomic_fetch_add(&st_error, 1);
		return (void *)(intptr_t)-ETIMEDOUT;
	}
	return NULL;
}

static void exe_name(char *out, size_t size)
{
	char path[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
	const char *base;

	if (n <= 0) {
		snprintf(out, size, "unknown_service");
		return;
	}
	path[n] = '\0';
	base = strrchr(path, '/');
	copy_str(out, base ? base + 1 : path, size);
}

/* The endpoint from opts or the environment into *ep. */
static int resolve_endpoint(const struct tp_sdk_export_opts *opts, struct tp_endpoint *ep)
{
	const char *env;
	char url[1024];

	if (opts && opts->endpoint)
		return tp_endpoint_parse(opts->endpoint, ep);
	env = getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
	if (env && *env)
		return tp_endpoint_parse(env, ep);
	env = getenv("OTEL_EXPORTER_OTLP_ENDPOINT");
	if (env && *env) {
		size_t len = strlen(env);

		/* the signal path is appended to the base URL */
		if (snprintf(url, sizeof(url), "%.*s/v1/traces",
			     (int)(env[len - 1] == '/' ? len - 1 : len), env) >= (int)sizeof(url))
			return -EINVAL;
		return tp_endpoint_parse(url, ep);
	}
	return tp_endpoint_parse(DEFAULT_ENDPOINT, ep);
}

static void after_fork_child(void)
{
	struct queue *q = atomic_load(&rp.queue);

	pthread_condattr_t a;

	/* before_fork locked ctl_lock; the exporter thread does not exist here */
	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	pthread_cond_init(&ctl_cond, &a);
	pthread_condattr_destroy(&a);
	if (running) {
		free(exp_state.batch);
		free(exp_state.body);
		tp_http_close(&exp_state.http);
		running = false;
		atomic_store(&rp.autostart, true); /* again, with the parent's settings */
	}
	if (q)
		tp_span_queue_reset(q); /* the parent's spans are the parent's to export */
	atomic_store(&st_prod.ended_before, 0);
	atomic_store(&st_prod.wide_positions, 0);
	atomic_store(&st_exported, 0);
	atomic_store(&st_prod.full, 0);
	atomic_store(&st_error, 0);
	atomic_store(&st_requests, 0);
	atomic_store(&st_req_errors, 0);
	pthread_mutex_unlock(&ctl_lock);
}

static void before_fork(void)
{
	pthread_mutex_lock(&ctl_lock);
}

static void after_fork_parent(void)
{
	pthread_mutex_unlock(&ctl_lock);
}

static void init_once_fn(void)
{
	pthread_condattr_t a;

	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	pthread_cond_init(&ctl_cond, &a);
	pthread_condattr_destroy(&a);
	pthread_atfork(before_fork, after_fork_parent, after_fork_child);
}

/* Starts the exporter with opts and endpoint ep; under ctl_lock. */
static int start_locked(const struct tp_sdk_export_opts *o, const struct tp_endpoint *ep)
{
	struct exporter *e = &exp_state;
	struct queue *q = atomic_load(&rp.queue);
	sigset_t all, old;
	int err;

	if (running)
		return -EALREADY;
	memset(e, 0, sizeof(*e));
	e->opts = *o;
	e->opts.endpoint = NULL;
	e->http.ep = *ep;
	e->http.fd = -1;
	exe_name(e->exe_name, sizeof(e->exe_name));
	e->batch = calloc(o->batch_spans, sizeof(*e->batch));
	e->body = malloc(tp_otlp_max_size(o->batch_spans));
	if (!e->batch || !e->body) {
		err = -ENOMEM;
		goto out_free;
	}
	if (!q || q->cap != o->queue_spans) {
		/* a previous queue stays allocated: a thread may still be using it */
		struct queue *old_q = q;

		q = tp_span_queue_new(o->queue_spans);
		if (!q) {
			err = -ENOMEM;
			goto out_free;
		}
		if (old_q) /* its spans are counted; later claims in it are not */
			atomic_fetch_add(&st_prod.ended_before, atomic_load(&old_q->head));
		atomic_store_explicit(&rp.queue, q, memory_order_release);
	}
	clock_refresh();
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = -pthread_create(&e->thread, NULL, exporter_main, e);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err)
		goto out_free;
	running = true;
	saved_opts = e->opts;
	saved_ep = *ep;
	have_opts = true;
	atomic_store(&rp.autostart, false);
	return 0;
out_free:
	free(e->batch);
	free(e->body);
	e->batch = NULL;
	e->body = NULL;
	return err;
}

static int try_autostart(void)
{
	struct tp_sdk_export_opts o = {0};
	struct tp_endpoint ep;
	int err = 0;

	pthread_once(&init_once, init_once_fn);
	pthread_mutex_lock(&ctl_lock);
	if (running || !atomic_load(&rp.autostart))
		goto out_unlock;
	if (have_opts) {
		o = saved_opts;
		ep = saved_ep;
	} else {
		o.queue_spans = DEFAULT_QUEUE;
		o.batch_spans = DEFAULT_BATCH;
		o.interval_ms = DEFAULT_INTERVAL_MS;
		o.timeout_ms = DEFAULT_TIMEOUT_MS;
		err = resolve_endpoint(NULL, &ep);
	}
	if (!err)
		err = start_locked(&o, &ep);
	if (err)
		atomic_store(&rp.autostart, false); /* one try: the request path stays cheap */
out_unlock:
	pthread_mutex_unlock(&ctl_lock);
	return err;
}

TP_SDK_EXPORT int tp_sdk_export_start(const struct tp_sdk_export_opts *opts)
{
	struct tp_sdk_export_opts o = {0};
	struct tp_endpoint ep;
	int err;

	if (opts)
		o = *opts;
	if (!o.queue_spans)
		o.queue_spans = DEFAULT_QUEUE;
	if (!o.batch_spans)
		o.batch_spans = DEFAULT_BATCH;
	if (!o.interval_ms)
		o.interval_ms = DEFAULT_INTERVAL_MS;
	if (!o.timeout_ms)
		o.timeout_ms = DEFAULT_TIMEOUT_MS;
	if (o.queue_spans > MAX_QUEUE || o.batch_spans > MAX_QUEUE || o.timeout_ms > INT_MAX ||
	    o.interval_ms > INT_MAX)
		return -EINVAL;
	/* a power of two: the request path finds a slot with a mask; room for a wide span */
	while (o.queue_spans & (o.queue_spans - 1))
		o.queue_spans += o.queue_spans & -o.queue_spans;
	if (o.queue_spans < MIN_QUEUE)
		o.queue_spans = MIN_QUEUE;
	err = resolve_endpoint(opts, &ep);
	if (err)
		return err;
	pthread_once(&init_once, init_once_fn);
	pthread_mutex_lock(&ctl_lock);
	err = start_locked(&o, &ep);
	pthread_mutex_unlock(&ctl_lock);
	return err;
}

TP_SDK_EXPORT int tp_sdk_export_stop(int timeout_ms)
{
	void *ret = NULL;
	pthread_t t;

	pthread_once(&init_once, init_once_fn);
	pthread_mutex_lock(&ctl_lock);
	if (!running) {
		atomic_store(&rp.autostart, false); /* stopped means stopped */
		pthread_mutex_unlock(&ctl_lock);
		return 0;
	}
	if (exp_state.stop) { /* another thread is stopping it */
		pthread_mutex_unlock(&ctl_lock);
		return -EALREADY;
	}
	exp_state.stop = true;
	exp_state.stop_deadline_ms = mono_ms() + (timeout_ms > 0 ? timeout_ms : 0);
	t = exp_state.thread;
	pthread_cond_broadcast(&ctl_cond);
	pthread_mutex_unlock(&ctl_lock);
	pthread_join(t, &ret);

	pthread_mutex_lock(&ctl_lock);
	tp_http_close(&exp_state.http);
	free(exp_state.batch);
	free(exp_state.body);
	exp_state.batch = NULL;
	exp_state.body = NULL;
	running = false;
	atomic_store(&rp.autostart, false);
	pthread_mutex_unlock(&ctl_lock);
	return (int)(intptr_t)ret;
}

TP_SDK_EXPORT int tp_sdk_export_get_stats(struct tp_sdk_export_stats *out)
{
	struct queue *q;

	if (!out)
		return -EINVAL;
	q = atomic_load(&rp.queue);
	out->spans_ended = atomic_load(&st_prod.ended_before) + (q ? atomic_load(&q->head) : 0) -
			   atomic_load(&st_prod.wide_positions);
	out->spans_exported = atomic_load(&st_exported);
	out->spans_dropped_full = atomic_load(&st_prod.full);
	out->spans_dropped_error = atomic_load(&st_error);
	out->requests = atomic_load(&st_requests);
	out->request_errors = atomic_load(&st_req_errors);
	return 0;
}
