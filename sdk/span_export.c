/*
 * span_export.c - the exporter thread that ships the queued server spans
 * as OTLP/HTTP, and its lifecycle: start (explicit, or automatic at the
 * first span_end), stop, fork handlers, statistics.
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
#include "span_internal.h"
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

/* Counted by the exporter thread (tp_span_st_error by span_end too). */
static _Alignas(64) _Atomic uint64_t st_exported, st_requests, st_req_errors;
_Alignas(64) _Atomic uint64_t tp_span_st_error;

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
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
		atomic_fetch_add(&tp_span_st_error, n);
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
	struct queue *q = atomic_load(&tp_span_rp.queue);
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

		tp_span_clock_refresh();
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
			atomic_fetch_add(&tp_span_st_error, 1);
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

/* ---- lifecycle: fork handlers, start, stop, statistics ---- */

static void after_fork_child(void)
{
	struct queue *q = atomic_load(&tp_span_rp.queue);

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
		atomic_store(&tp_span_rp.autostart, true); /* again, with the parent's settings */
	}
	if (q)
		tp_span_queue_reset(q); /* the parent's spans are the parent's to export */
	atomic_store(&tp_span_st_prod.ended_before, 0);
	atomic_store(&tp_span_st_prod.wide_positions, 0);
	atomic_store(&st_exported, 0);
	atomic_store(&tp_span_st_prod.full, 0);
	atomic_store(&tp_span_st_error, 0);
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
	struct queue *q = atomic_load(&tp_span_rp.queue);
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
			atomic_fetch_add(&tp_span_st_prod.ended_before, atomic_load(&old_q->head));
		atomic_store_explicit(&tp_span_rp.queue, q, memory_order_release);
	}
	tp_span_clock_refresh();
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
	atomic_store(&tp_span_rp.autostart, false);
	return 0;
out_free:
	free(e->batch);
	free(e->body);
	e->batch = NULL;
	e->body = NULL;
	return err;
}

int tp_span_try_autostart(void)
{
	struct tp_sdk_export_opts o = {0};
	struct tp_endpoint ep;
	int err = 0;

	pthread_once(&init_once, init_once_fn);
	pthread_mutex_lock(&ctl_lock);
	if (running || !atomic_load(&tp_span_rp.autostart))
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
		atomic_store(&tp_span_rp.autostart,
			     false); /* one try: the request path stays cheap */
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
		atomic_store(&tp_span_rp.autostart, false); /* stopped means stopped */
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
	atomic_store(&tp_span_rp.autostart, false);
	pthread_mutex_unlock(&ctl_lock);
	return (int)(intptr_t)ret;
}

TP_SDK_EXPORT int tp_sdk_export_get_stats(struct tp_sdk_export_stats *out)
{
	struct queue *q;

	if (!out)
		return -EINVAL;
	q = atomic_load(&tp_span_rp.queue);
	out->spans_ended = atomic_load(&tp_span_st_prod.ended_before) +
			   (q ? atomic_load(&q->head) : 0) -
			   atomic_load(&tp_span_st_prod.wide_positions);
	out->spans_exported = atomic_load(&st_exported);
	out->spans_dropped_full = atomic_load(&tp_span_st_prod.full);
	out->spans_dropped_error = atomic_load(&tp_span_st_error);
	out->requests = atomic_load(&st_requests);
	out->request_errors = atomic_load(&st_req_errors);
	return 0;
}
