/*
 * traceprof-gen - writes a realistic synthetic workload into the store.
 *
 * Used by the demo (until the agent profiles real processes), the tests and
 * the benchmarks. The model: three services (frontend, payment-svc,
 * inventory-svc), two pods each on two nodes. Requests arrive at a steady
 * rate; durations are log-normal; a small slow tail in payment-svc spends
 * its CPU in validateSignature (and frontend waits for it); a fraction of
 * requests fail with 5xx and run an error path; every pod also burns
 * background CPU outside requests (GC, metrics). Each request's CPU turns
 * into samples at the sampling rate (19 Hz base, 99 Hz for the fraction of
 * requests a trigger raised), placed at random instants of the span, grouped
 * into rows per (10 s bucket, pod, span, Hz) and written through the store
 * library with the same ids an agent would compute.
 *
 * Everything is deterministic for a given --seed and --end.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "traceprof/ids.h"
#include "traceprof/log.h"
#include "traceprof/store.h"

#define BUCKET_US     10000000LL /* rows are grouped in 10 s buckets */
#define MAX_FRAMES    24
#define MAX_SAMPLES   4096 /* per span; longer spans are capped */
#define SERVICE_COUNT 3
#define PODS	      2

struct rng {
	uint64_t s; /* splitmix64 state */
};

static uint64_t rng_next(struct rng *r)
{
	uint64_t z = (r->s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static double rng_unit(struct rng *r)
{
	return (rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
}

static double rng_normal(struct rng *r)
{
	double u = rng_unit(r), v = rng_unit(r);

	return sqrt(-2.0 * log(u + 1e-300)) * cos(2 * M_PI * v);
}

static unsigned rng_poisson(struct rng *r, double lambda)
{
	if (lambda > 30) {
		double x = lambda + sqrt(lambda) * rng_normal(r);

		return x < 0 ? 0 : (unsigned)(x + 0.5);
	}
	{
		double l = exp(-lambda), p = 1.0;
		unsigned k = 0;

		do {
			k++;
			p *= rng_unit(r);
		} while (p > l);
		return k - 1;
	}
}

/* A call path below the service's common prefix, with a relative weight. */
struct path {
	const char *frames[8]; /* root first; NULL-terminated */
	int weight;	       /* relative frequency */
};

enum req_kind { REQ_NORMAL, REQ_SLOW, REQ_ERROR, REQ_KINDS };

struct service_model {
	const char *name;		     /* service.name */
	const char *module;		     /* executable name */
	const char *method;		     /* HTTP method of its route(s) */
	const char *routes[3];		     /* route templates, uniform */
	double median_ms;		     /* median duration of a normal request */
	double sigma;			     /* log-normal spread */
	double cpu_fraction;		     /* share of a normal request's wall time on CPU */
	const struct path *paths[REQ_KINDS]; /* leaf paths per request kind, {0} terminated */
	const struct path *background;	     /* paths outside requests */
	double background_ms_per_s;	     /* CPU ms per second outside requests, per pod */
};

static const char *const common_prefix[] = {"_start",	       "__libc_start_main", "main",
					    "http_server_run", "handle_connection", NULL};

static const struct path frontend_normal[] = {
    {{"route_request", "render_json", "json_encode", NULL}, 30},
    {{"route_request", "parse_request", "parse_headers", NULL}, 20},
    {{"route_request", "session_lookup", "hash_lookup", NULL}, 15},
    {{"route_request", "call_upstream", "http_client_send", NULL}, 20},
    {{"route_request", "render_json", "strbuf_append", NULL}, 15},
    {{0}, 0},
};
static const struct path frontend_error[] = {
    {{"route_request", "handle_upstream_error", "log_error", "vfprintf", NULL}, 50},
    {{"route_request", "render_error_page", "json_encode", NULL}, 50},
    {{0}, 0},
};
static const struct path payment_normal[] = {
    {{"route_request", "charge_card", "serialize_request", NULL}, 30},
    {{"route_request", "charge_card", "db_query", "pq_send", NULL}, 35},
    {{"route_request", "charge_card", "validateSignature", "sha256_update", NULL}, 10},
    {{"route_request", "parse_request", "parse_json", NULL}, 25},
    {{0}, 0},
};
static const struct path payment_slow[] = {
    {{"route_request", "charge_card", "validateSignature", "rsa_verify", "bn_mod_exp", NULL}, 80},
    {{"route_request", "charge_card", "validateSignature", "rsa_verify", "bn_mul", NULL}, 13},
    {{"route_request", "charge_card", "db_query", "pq_send", NULL}, 7},
    {{0}, 0},
};
static const struct path payment_error[] = {
    {{"route_request", "charge_card", "retry_with_backoff", "nanosleep", NULL}, 40},
    {{"route_request", "charge_card", "handle_decline", "log_error", NULL}, 60},
    {{0}, 0},
};
static const struct path inventory_normal[] = {
    {{"route_request", "lookup_stock", "btree_search", NULL}, 50},
    {{"route_request", "lookup_stock", "cache_get", NULL}, 30},
    {{"route_request", "render_json", "json_encode", NULL}, 20},
    {{0}, 0},
};
static const struct path inventory_error[] = {
    {{"route_request", "lookup_stock", "handle_timeout", "log_error", NULL}, 100},
    {{0}, 0},
};
static const struct path background_paths[] = {
    {{"gc_collect", "mark_objects", NULL}, 50},
    {{"metrics_flush", "snprintf", NULL}, 30},
    {{"epoll_wait_loop", NULL}, 20},
    {{0}, 0},
};

static const struct service_model services[SERVICE_COUNT] = {
    {"frontend",
     "frontend",
     "GET",
     {"/api/products", "/api/cart", "/api/checkout"},
     25,
     0.5,
     0.5,
     {frontend_normal, frontend_normal, frontend_error},
     background_paths,
     20},
    {"payment-svc",
     "payment-svc",
     "POST",
     {"/pay", "/pay", "/refund"},
     40,
     0.4,
     0.6,
     {payment_normal, payment_slow, payment_error},
     background_paths,
     15},
    {"inventory-svc",
     "inventory-svc",
     "GET",
     {"/stock/{sku}", "/stock/{sku}", "/stock"},
     8,
     0.5,
     0.7,
     {inventory_normal, inventory_normal, inventory_error},
     background_paths,
     10},
};

struct gen_opts {
	const char *conninfo;	/* --db */
	double rps;		/* requests per second into frontend */
	double duration_s;	/* how much time to generate, ending at end_us */
	int64_t end_us;		/* end of generated time */
	uint64_t seed;		/* --seed */
	int hz;			/* base sampling rate */
	int raised_hz;		/* triggered sampling rate */
	double raised_fraction; /* share of requests sampled at raised_hz */
	double slow_fraction;	/* share of payment requests in the slow tail */
	double error_fraction;	/* share of requests failing with 5xx */
	double work_scale;	/* multiplies normal requests' duration and CPU */
	bool quiet;		/* no summary */
};

#define TAIL_POOL   24 /* helper functions a sample's stack may end in */
#define PATH_FRAMES (MAX_FRAMES - 4)

/* Frames of every modelled path: service x kind (or background) x path. */
struct stack_table {
	uint64_t frames[SERVICE_COUNT][REQ_KINDS + 1][8][PATH_FRAMES]; /* frame ids, root first */
	uint64_t functions[SERVICE_COUNT][REQ_KINDS + 1][8][PATH_FRAMES]; /* their function ids */
	int depth[SERVICE_COUNT][REQ_KINDS + 1][8];			  /* frames per path */
	int weights[SERVICE_COUNT][REQ_KINDS + 1][8];			  /* relative weights */
	int n[SERVICE_COUNT][REQ_KINDS + 1];				  /* paths per slot */
	int total[SERVICE_COUNT][REQ_KINDS + 1];			  /* sum of weights */
	uint64_t tail_frames[TAIL_POOL];				  /* helper frames (libc) */
	uint64_t tail_functions[TAIL_POOL];				  /* their function ids */
};

struct gen {
	struct gen_opts o;		       /* options */
	struct store *st;		       /* destination */
	struct rng rng;			       /* deterministic randomness */
	struct stack_table stacks;	       /* ids of every modelled stack */
	uint64_t sources[SERVICE_COUNT][PODS]; /* source ids */
	uint64_t routes[SERVICE_COUNT][3];     /* route ids */
	uint64_t requests;		       /* spans written */
	uint64_t samples;		       /* samples written */
	uint64_t sample_rows;		       /* rows written */
	uint64_t slow_traces;		       /* traces with a slow payment span */
	char slowest_trace[33];		       /* trace id of the slowest trace */
	int64_t slowest_us;		       /* its duration */
};

static int add_or_flush(struct gen *g, int rc)
{
	if (rc == -ENOBUFS) {
		rc = store_flush(g->st);
		if (rc)
			log_error("flush failed: %s", store_last_error(g->st));
		return rc ? rc : 1; /* 1: retry the add */
	}
	if (rc)
		log_error("store refused data: %s", store_last_error(g->st));
	return rc;
}

static const char *const tail_names[TAIL_POOL] = {
    "memcpy",
    "memset",
    "malloc",
    "free",
    "strlen",
    "strcmp",
    "memmove",
    "calloc",
    "realloc",
    "pthread_mutex_lock",
    "pthread_mutex_unlock",
    "__memcmp_avx2",
    "qsort",
    "bsearch",
    "strchr",
    "strtol",
    "snprintf",
    "vfprintf",
    "read",
    "write",
    "clock_gettime",
    "__tls_get_addr",
    "_int_malloc",
    "_int_free",
};

static const char *build_id_of(const char *module)
{
	return strcmp(module, "libc.so.6") == 0 ? "a3c0e5d2f1b94c7e" : "5f3e9a1c0b7d4e21";
}

/* Adds function and frame of `name` in `module`; returns the ids. */
static int define_frame(struct gen *g, const char *module, const char *name, uint64_t *frame,
			uint64_t *function)
{
	int rc;

	*function = ids_function(module, name);
	rc = store_add_function(g->st, *function, name, module, 0);
	if (rc)
		return rc;
	*frame = ids_frame(*function, build_id_of(module), NULL, 0, 0);
	return store_add_frame(g->st, *frame, *function, build_id_of(module), NULL, 0, 0);
}

static bool is_libc(const char *name)
{
	return strcmp(name, "vfprintf") == 0 || strcmp(name, "snprintf") == 0 ||
	       strcmp(name, "nanosleep") == 0;
}

static int define_path(struct gen *g, int svc, int kind, int i, const struct path *p)
{
	const struct service_model *m = &services[svc];
	uint64_t *frames = g->stacks.frames[svc][kind][i];
	uint64_t *functions = g->stacks.functions[svc][kind][i];
	int n = 0;
	int rc;

	for (int k = 0; common_prefix[k] && n < PATH_FRAMES; k++, n++) {
		rc = define_frame(g, m->module, common_prefix[k], &frames[n], &functions[n]);
		if (rc)
			return rc;
	}
	for (int k = 0; p->frames[k] && n < PATH_FRAMES; k++, n++) {
		rc = define_frame(g, is_libc(p->frames[k]) ? "libc.so.6" : m->module, p->frames[k],
				  &frames[n], &functions[n]);
		if (rc)
			return rc;
	}
	g->stacks.depth[svc][kind][i] = n;
	return 0;
}

static int define_dictionaries(struct gen *g)
{
	static const char *const nodes[PODS] = {"node-a", "node-b"};
	int rc;

	for (int s = 0; s < SERVICE_COUNT; s++) {
		const struct service_model *m = &services[s];

		for (int p = 0; p < PODS; p++) {
			char pod[64];
			struct store_source src = {
			    m->name, "shop", pod, "", nodes[p], "5f3e9a1c0b7d4e21", ""};

			snprintf(pod, sizeof(pod), "%s-7d9f8-%c", m->name, 'a' + p);
			g->sources[s][p] = ids_source(src.service, src.namespace_, src.pod,
						      src.container, src.node, src.build_id);
			rc = store_add_source(g->st, g->sources[s][p], &src);
			if (rc)
				return rc;
		}
		for (int r = 0; r < 3; r++) {
			const char *method = (s == 0 && r == 2) ? "POST" : m->method;

			g->routes[s][r] = ids_route(method, m->routes[r]);
			rc = store_add_route(g->st, g->routes[s][r], method, m->routes[r]);
			if (rc)
				return rc;
		}
		for (int k = 0; k <= REQ_KINDS; k++) {
			const struct path *paths = k < REQ_KINDS ? m->paths[k] : m->background;

			g->stacks.n[s][k] = 0;
			g->stacks.total[s][k] = 0;
			for (int i = 0; paths[i].weight && i < 8; i++) {
				rc = define_path(g, s, k, i, &paths[i]);
				if (rc)
					return rc;
				g->stacks.weights[s][k][i] = paths[i].weight;
				g->stacks.total[s][k] += paths[i].weight;
				g->stacks.n[s][k]++;
			}
		}
	}
	for (int i = 0; i < TAIL_POOL; i++) {
		rc = define_frame(g, "libc.so.6", tail_names[i], &g->stacks.tail_frames[i],
				  &g->stacks.tail_functions[i]);
		if (rc)
			return rc;
	}
	return store_flush(g->st);
}

/*
 * Draws a stack for a sample: a path of the request kind by weight, then a
 * tail of 0-3 helper calls (as real leaves vary: memcpy under json_encode,
 * malloc under parse_json...), so a long request has hundreds of distinct
 * stacks like a real one. Adds the stack to the store (which sends each id
 * once) and returns its id, or 0 on error.
 */
static uint64_t pick_stack(struct gen *g, int svc, int kind)
{
	uint64_t frames[MAX_FRAMES];
	uint64_t functions[MAX_FRAMES];
	int x = (int)(rng_next(&g->rng) % (uint64_t)g->stacks.total[svc][kind]);
	int path = 0;
	int n;
	int tail;
	double u = rng_unit(&g->rng);
	uint64_t id;
	int rc;

	for (int i = 0; i < g->stacks.n[svc][kind]; i++) {
		x -= g->stacks.weights[svc][kind][i];
		if (x < 0) {
			path = i;
			break;
		}
	}
	n = g->stacks.depth[svc][kind][path];
	memcpy(frames, g->stacks.frames[svc][kind][path], n * sizeof(frames[0]));
	memcpy(functions, g->stacks.functions[svc][kind][path], n * sizeof(functions[0]));
	tail = u < 0.4 ? 0 : u < 0.7 ? 1 : u < 0.9 ? 2 : 3;
	for (int i = 0; i < tail && n < MAX_FRAMES; i++, n++) {
		int h = (int)(rng_next(&g->rng) % TAIL_POOL);

		frames[n] = g->stacks.tail_frames[h];
		functions[n] = g->stacks.tail_functions[h];
	}
	id = ids_stack(frames, n);
	while ((rc = add_or_flush(g, store_add_stack(g->st, id, frames, n))) == 1)
		;
	return rc ? 0 : id;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

/*
 * Writes the samples of one span: cpu_ms of CPU spread over [start, start +
 * dur) at hz, stacks drawn for the request kind, one row per 10 s bucket.
 */
static int emit_span_samples(struct gen *g, int svc, int pod, int kind, const uint8_t trace[16],
			     uint64_t span, int64_t start_us, int64_t dur_us, double cpu_ms, int hz)
{
	static int64_t times[MAX_SAMPLES];
	static uint64_t stacks[MAX_SAMPLES];
	unsigned n;
	unsigned i = 0;

	/* One thread serves a request: it cannot burn more CPU than wall time. */
	if (cpu_ms > dur_us / 1000.0)
		cpu_ms = dur_us / 1000.0;
	n = rng_poisson(&g->rng, cpu_ms * hz / 1000.0);

	if (n > MAX_SAMPLES)
		n = MAX_SAMPLES;
	for (unsigned k = 0; k < n; k++)
		times[k] = start_us + (int64_t)(rng_unit(&g->rng) * (double)dur_us);
	qsort(times, n, sizeof(times[0]), cmp_i64);
	while (i < n) {
		int64_t bucket = times[i] / BUCKET_US * BUCKET_US;
		unsigned j = i;
		struct store_sample_row row;
		int rc;

		while (j < n && times[j] / BUCKET_US * BUCKET_US == bucket) {
			stacks[j - i] = pick_stack(g, svc, kind);
			if (!stacks[j - i])
				return -EIO;
			j++;
		}
		memset(&row, 0, sizeof(row));
		row.bucket_us = bucket;
		row.source_id = g->sources[svc][pod];
		memcpy(row.trace_id, trace, 16);
		row.span_id = span;
		row.hz = (uint16_t)hz;
		row.n = j - i;
		row.stacks = stacks;
		while ((rc = add_or_flush(g, store_add_samples(g->st, &row))) == 1)
			;
		if (rc)
			return rc;
		g->samples += j - i;
		g->sample_rows++;
		i = j;
	}
	return 0;
}

static int emit_request(struct gen *g, int svc, int pod, int route, const uint8_t trace[16],
			uint64_t span, uint64_t parent, int64_t start_us, int64_t dur_us,
			int status)
{
	struct store_request r = {0};
	int rc;

	r.start_us = start_us;
	r.duration_us = dur_us;
	r.source_id = g->sources[svc][pod];
	memcpy(r.trace_id, trace, 16);
	r.span_id = span;
	r.parent_span_id = parent;
	r.route_id = g->routes[svc][route];
	r.status_code = status;
	while ((rc = add_or_flush(g, store_add_request(g->st, &r))) == 1)
		;
	if (!rc)
		g->requests++;
	return rc;
}

static double lognormal_ms(struct gen *g, double median, double sigma)
{
	return median * exp(sigma * rng_normal(&g->rng));
}

/* One user request: a frontend span, and for checkouts a payment-svc child. */
static int emit_trace(struct gen *g, int64_t start_us)
{
	uint8_t trace[16];
	uint64_t hi = rng_next(&g->rng), lo = rng_next(&g->rng);
	uint64_t root = rng_next(&g->rng) | 1, child = rng_next(&g->rng) | 1;
	int route = (int)(rng_next(&g->rng) % 3);
	int fe_pod = (int)(rng_next(&g->rng) % PODS);
	int hz = rng_unit(&g->rng) < g->o.raised_fraction ? g->o.raised_hz : g->o.hz;
	bool error = rng_unit(&g->rng) < g->o.error_fraction;
	double fe_ms = lognormal_ms(g, services[0].median_ms * g->o.work_scale, services[0].sigma);
	double fe_cpu;
	int64_t total_us;
	int rc;

	for (int i = 0; i < 8; i++) {
		trace[i] = (uint8_t)(hi >> (56 - 8 * i));
		trace[8 + i] = (uint8_t)(lo >> (56 - 8 * i));
	}
	fe_cpu = fe_ms * services[0].cpu_fraction;
	if (route == 2) {
		/* Checkout: frontend waits for payment-svc. */
		int pay_pod = (int)(rng_next(&g->rng) % PODS);
		bool slow = rng_unit(&g->rng) < g->o.slow_fraction;
		int kind = error ? REQ_ERROR : slow ? REQ_SLOW : REQ_NORMAL;
		double pay_ms = slow ? 1000 + rng_unit(&g->rng) * 4000
				     : lognormal_ms(g, services[1].median_ms * g->o.work_scale,
						    services[1].sigma);
		double pay_cpu = pay_ms * (slow ? 0.9 : services[1].cpu_fraction);
		int64_t pay_start = start_us + (int64_t)(fe_ms * 300); /* 30 % into frontend */
		int64_t pay_us = (int64_t)(pay_ms * 1000);

		total_us = (int64_t)(fe_ms * 1000) + pay_us;
		rc = emit_request(g, 1, pay_pod, 0, trace, child, root, pay_start, pay_us,
				  error ? 502 : 200);
		if (!rc)
			rc = emit_span_samples(g, 1, pay_pod, kind, trace, child, pay_start, pay_us,
					       pay_cpu, hz);
		if (rc)
			return rc;
		if (slow)
			g->slow_traces++;
		if (total_us > g->slowest_us) {
			g->slowest_us = total_us;
			ids_format_trace_id(trace, g->slowest_trace);
		}
	} else {
		total_us = (int64_t)(fe_ms * 1000);
		if (route == 0 && !error) {
			/* Product pages consult inventory-svc. */
			double inv_ms = lognormal_ms(g, services[2].median_ms * g->o.work_scale,
						     services[2].sigma);
			int64_t inv_start = start_us + (int64_t)(fe_ms * 200);
			int inv_pod = (int)(rng_next(&g->rng) % PODS);

			rc = emit_request(g, 2, inv_pod, 0, trace, child, root, inv_start,
					  (int64_t)(inv_ms * 1000), 200);
			if (!rc)
				rc = emit_span_samples(g, 2, inv_pod, REQ_NORMAL, trace, child,
						       inv_start, (int64_t)(inv_ms * 1000),
						       inv_ms * services[2].cpu_fraction, hz);
			if (rc)
				return rc;
			total_us += (int64_t)(inv_ms * 1000);
		}
	}
	rc = emit_request(g, 0, fe_pod, route, trace, root, 0, start_us, total_us,
			  error ? (route == 2 ? 502 : 500) : 200);
	if (!rc)
		rc = emit_span_samples(g, 0, fe_pod, error ? REQ_ERROR : REQ_NORMAL, trace, root,
				       start_us, total_us, fe_cpu, hz);
	return rc;
}

/* Background CPU of every pod in one bucket: one untagged row per pod. */
static int emit_background(struct gen *g, int64_t bucket_us)
{
	enum { MAXN = 256 };
	uint64_t stacks[MAXN];
	uint32_t counts[MAXN];

	for (int s = 0; s < SERVICE_COUNT; s++) {
		for (int p = 0; p < PODS; p++) {
			double ms = services[s].background_ms_per_s * (BUCKET_US / 1e6);
			unsigned n = rng_poisson(&g->rng, ms * g->o.hz / 1000.0);
			struct store_sample_row row = {0};
			int rc;

			for (unsigned i = 0; i < n; i++) {
				uint64_t id = pick_stack(g, s, REQ_KINDS);
				uint32_t j = 0;

				if (!id)
					return -EIO;
				while (j < row.n && stacks[j] != id)
					j++;
				if (j == row.n) {
					if (row.n == MAXN)
						continue;
					stacks[row.n] = id;
					counts[row.n++] = 0;
				}
				counts[j]++;
			}
			if (!row.n)
				continue;
			row.bucket_us = bucket_us;
			row.source_id = g->sources[s][p];
			row.hz = (uint16_t)g->o.hz;
			row.stacks = stacks;
			row.counts = counts;
			while ((rc = add_or_flush(g, store_add_samples(g->st, &row))) == 1)
				;
			if (rc)
				return rc;
			for (uint32_t j = 0; j < row.n; j++)
				g->samples += counts[j];
			g->sample_rows++;
		}
	}
	return 0;
}

static int generate(struct gen *g)
{
	int64_t start = g->o.end_us - (int64_t)(g->o.duration_s * 1e6);
	int64_t step = (int64_t)(1e6 / g->o.rps);
	int64_t next_bucket = start / BUCKET_US * BUCKET_US + BUCKET_US;
	int rc;

	if (step < 1)
		step = 1;
	rc = define_dictionaries(g);
	if (rc)
		return rc;
	for (int64_t t = start; t < g->o.end_us - 6000000; t += step) {
		/* Leave the last seconds: their spans would still be running. */
		int64_t jitter = (int64_t)(rng_unit(&g->rng) * step);

		while (t >= next_bucket) {
			rc = emit_background(g, next_bucket - BUCKET_US);
			if (rc)
				return rc;
			next_bucket += BUCKET_US;
		}
		rc = emit_trace(g, t + jitter);
		if (rc)
			return rc;
	}
	rc = store_flush(g->st);
	if (rc)
		log_error("final flush failed: %s", store_last_error(g->st));
	return rc;
}

static int parse_duration_s(const char *s, double *out)
{
	char *end;
	double v = strtod(s, &end);

	if (end == s || v < 0)
		return -EINVAL;
	if (!*end || !strcmp(end, "s"))
		*out = v;
	else if (!strcmp(end, "m"))
		*out = v * 60;
	else if (!strcmp(end, "h"))
		*out = v * 3600;
	else if (!strcmp(end, "d"))
		*out = v * 86400;
	else
		return -EINVAL;
	return 0;
}

static void usage(FILE *out)
{
	fprintf(
	    out,
	    "usage: traceprof-gen [OPTIONS]\n"
	    "\n"
	    "Writes a synthetic but realistic workload (3 services, traces with a slow tail\n"
	    "and 5xx errors, background CPU) into a traceprof store.\n"
	    "\n"
	    "  --db CONNINFO        libpq conninfo or URI (default: PG* environment)\n"
	    "  --duration D         time span to generate, ending at --end (default 30m;\n"
	    "                       units s, m, h, d)\n"
	    "  --end EPOCH_SECONDS  end of the generated time (default: now)\n"
	    "  --rps N              user requests per second (default 20)\n"
	    "  --seed N             random seed (default 1)\n"
	    "  --hz N               base sampling frequency (default 19)\n"
	    "  --raised-hz N        frequency of triggered requests (default 99)\n"
	    "  --raised-fraction F  share of requests sampled at --raised-hz (default 0.05)\n"
	    "  --slow-fraction F    share of checkouts in payment-svc's slow tail (default 0.02)\n"
	    "  --error-fraction F   share of requests failing with 5xx (default 0.02)\n"
	    "  --work-scale F       multiply normal requests' duration and CPU (default 1):\n"
	    "                       heavier services, more samples per request\n"
	    "  -q, --quiet          no summary on stdout\n"
	    "  -v, --verbose        debug output\n"
	    "  -h, --help           this help\n");
}

static int parse_fraction(const char *name, const char *s, double *out)
{
	char *end;
	double v = strtod(s, &end);

	if (*end || end == s || v < 0 || v > 1) {
		log_error("%s: '%s' is not a fraction between 0 and 1", name, s);
		return -EINVAL;
	}
	*out = v;
	return 0;
}

static int parse_positive(const char *name, const char *s, double max, double *out)
{
	char *end;
	double v = strtod(s, &end);

	if (*end || end == s || !(v > 0) || v > max) {
		log_error("%s: '%s' is not a number in (0, %g]", name, s, max);
		return -EINVAL;
	}
	*out = v;
	return 0;
}

/*
 * The options into *o, defaults first. Returns 0 to generate, 1 after
 * --help, -EINVAL after a wrong one (said why).
 */
static int parse_args(int argc, char **argv, struct gen_opts *o)
{
	static const struct option longopts[] = {
	    {"db", required_argument, NULL, 'd'},
	    {"duration", required_argument, NULL, 'D'},
	    {"end", required_argument, NULL, 'e'},
	    {"rps", required_argument, NULL, 'r'},
	    {"seed", required_argument, NULL, 's'},
	    {"hz", required_argument, NULL, 'z'},
	    {"raised-hz", required_argument, NULL, 'Z'},
	    {"raised-fraction", required_argument, NULL, 'R'},
	    {"slow-fraction", required_argument, NULL, 'S'},
	    {"error-fraction", required_argument, NULL, 'E'},
	    {"work-scale", required_argument, NULL, 'c'},
	    {"quiet", no_argument, NULL, 'q'},
	    {"verbose", no_argument, NULL, 'v'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	double v;
	int c;
	int rc;

	o->rps = 20;
	o->duration_s = 1800;
	o->end_us = (int64_t)time(NULL) * 1000000;
	o->seed = 1;
	o->hz = 19;
	o->raised_hz = 99;
	o->raised_fraction = 0.05;
	o->slow_fraction = 0.02;
	o->error_fraction = 0.02;
	o->work_scale = 1;
	while ((c = getopt_long(argc, argv, "qvh", longopts, NULL)) != -1) {
		rc = 0;
		switch (c) {
		case 'd':
			o->conninfo = optarg;
			break;
		case 'D':
			rc = parse_duration_s(optarg, &o->duration_s);
			if (rc || o->duration_s <= 0 || o->duration_s > 7 * 86400) {
				log_error("--duration: '%s' is not a duration up to 7d (e.g. 30m)",
					  optarg);
				rc = -EINVAL;
			}
			break;
		case 'e':
			rc = parse_positive("--end", optarg, 4e9, &v);
			o->end_us = (int64_t)v * 1000000;
			break;
		case 'r':
			rc = parse_positive("--rps", optarg, 1e6, &o->rps);
			break;
		case 's':
			o->seed = strtoull(optarg, NULL, 10);
			break;
		case 'z':
			rc = parse_positive("--hz", optarg, 1000, &v);
			o->hz = (int)v;
			break;
		case 'Z':
			rc = parse_positive("--raised-hz", optarg, 1000, &v);
			o->raised_hz = (int)v;
			break;
		case 'R':
			rc = parse_fraction("--raised-fraction", optarg, &o->raised_fraction);
			break;
		case 'S':
			rc = parse_fraction("--slow-fraction", optarg, &o->slow_fraction);
			break;
		case 'E':
			rc = parse_fraction("--error-fraction", optarg, &o->error_fraction);
			break;
		case 'c':
			rc = parse_positive("--work-scale", optarg, 1000, &o->work_scale);
			break;
		case 'q':
			o->quiet = true;
			break;
		case 'v':
			log_set_level(TP_LOG_DEBUG);
			break;
		case 'h':
			usage(stdout);
			return 1;
		default:
			usage(stderr);
			return -EINVAL;
		}
		if (rc)
			return -EINVAL;
	}
	if (optind != argc) {
		log_error("unexpected argument '%s'", argv[optind]);
		usage(stderr);
		return -EINVAL;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct store_opts sopts = {.app_name = "traceprof-gen"};
	struct gen *g = calloc(1, sizeof(*g));
	struct store_stats stats;
	int rc;

	if (!g)
		return 1;
	log_set_prefix("traceprof-gen");
	rc = parse_args(argc, argv, &g->o);
	if (rc) {
		free(g);
		return rc > 0 ? 0 : 2;
	}
	g->rng.s = g->o.seed * 0x2545f4914f6cdd1dULL + 1;
	g->st = store_open(g->o.conninfo, &sopts);
	if (!g->st) {
		free(g);
		return 1;
	}
	rc = generate(g);
	store_get_stats(g->st, &stats);
	if (!rc && !g->o.quiet) {
		printf("generated %llu spans, %llu samples in %llu rows (%llu slow checkouts)\n",
		       (unsigned long long)g->requests, (unsigned long long)g->samples,
		       (unsigned long long)g->sample_rows, (unsigned long long)g->slow_traces);
		printf("slowest trace: %s (%.0f ms)\n", g->slowest_trace, g->slowest_us / 1000.0);
	}
	store_free(g->st);
	free(g);
	return rc ? 1 : 0;
}
