/*
 * test_sdk_spans.c - the SDK's server spans and their OTLP/HTTP exporter,
 * against a small HTTP server in this process whose received bodies are
 * decoded with the protobuf-c code generated from proto/.
 *
 * Checks every field a receiver relies on (ids, parent, times, kind, name,
 * attributes, status, flags, resource, scope), the HTTP request itself
 * (method, path, Content-Type, one kept-alive connection), exact drop counts
 * for a full queue, threads ending spans at once (each arrives exactly
 * once), a refusing and a silent endpoint (errors counted, no
 * wait beyond the timeouts), a 500 answer, stop flushing, the endpoint
 * environment variables, a forked child exporting its own spans, and that
 * tp_sdk_span_begin/end never call malloc (counted by the wrappers below).
 */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "opentelemetry/proto/collector/trace/v1/trace_service.pb-c.h"
#include "traceprof/sdk.h"

typedef Opentelemetry__Proto__Collector__Trace__V1__ExportTraceServiceRequest ExportReq;
typedef Opentelemetry__Proto__Trace__V1__Span Span;
typedef Opentelemetry__Proto__Common__V1__KeyValue KeyValue;

/* ---- malloc counting: the request path must not allocate ---- */

extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t n, size_t size);
extern void *__libc_realloc(void *p, size_t n);

static _Atomic long allocs;		/* malloc/calloc/realloc calls while counting */
static __thread volatile bool counting; /* this thread counts (the exporter's own are not) */

void *malloc(size_t n)
{
	if (counting)
		atomic_fetch_add(&allocs, 1);
	return __libc_malloc(n);
}

void *calloc(size_t n, size_t size)
{
	if (counting)
		atomic_fetch_add(&allocs, 1);
	return __libc_calloc(n, size);
}

void *realloc(void *p, size_t n)
{
	if (counting)
		atomic_fetch_add(&allocs, 1);
	return __libc_realloc(p, n);
}

/* ---- the thread context, read directly ---- */

struct record {
	uint8_t trace_id[16];
	uint8_t span_id[8];
	uint8_t valid;
	uint8_t flags;
} __attribute__((packed));
extern __thread struct record *otel_thread_ctx_v1;

/* ---- the test's OTLP/HTTP endpoint ---- */

enum mode { ANSWER_200, ANSWER_500, SILENT };

#define MAX_BODIES 1024

struct server {
	int lfd;		      /* listening socket */
	int port;		      /* its port */
	_Atomic int mode;	      /* how to answer */
	atomic_bool stop;	      /* ends the thread */
	pthread_mutex_t lock;	      /* guards what follows */
	int connections;	      /* accepted */
	int nbodies;		      /* requests received */
	uint8_t *bodies[MAX_BODIES];  /* their bodies, malloc'd */
	size_t lens[MAX_BODIES];      /* their lengths */
	char paths[MAX_BODIES][64];   /* their request targets */
	bool protobuf_ct[MAX_BODIES]; /* Content-Type was application/x-protobuf */
	pthread_t thread;	      /* serves one connection at a time */
};

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Reads one request from fd into the server; false at end or error. */
static bool serve_one(struct server *s, int fd)
{
	static char buf[1 << 20];
	size_t have = 0, head;
	char *end, *cl, *ct;
	size_t body;

	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		ssize_t n;

		buf[have] = '\0';
		end = strstr(buf, "\r\n\r\n");
		if (end && (cl = strcasestr(buf, "\r\ncontent-length:")) && cl < end) {
			head = (size_t)(end - buf) + 4;
			body = strtoul(cl + 17, NULL, 10);
			if (have >= head + body)
				break;
		}
		if (atomic_load(&s->stop))
			return false;
		if (poll(&p, 1, 50) <= 0)
			continue;
		n = read(fd, buf + have, sizeof(buf) - 1 - have);
		if (n <= 0)
			return false;
		have += (size_t)n;
	}
	pthread_mutex_lock(&s->lock);
	if (s->nbodies < MAX_BODIES) {
		int i = s->nbodies++;
		char *sp = strchr(buf, ' ');

		s->bodies[i] = malloc(body);
		memcpy(s->bodies[i], buf + head, body);
		s->lens[i] = body;
		snprintf(s->paths[i], sizeof(s->paths[i]), "%.*s", (int)strcspn(sp + 1, " "),
			 sp + 1);
		ct = strcasestr(buf, "\r\ncontent-type: application/x-protobuf\r\n");
		s->protobuf_ct[i] = !strncmp(buf, "POST ", 5) && ct && ct < end;
	}
	pthread_mutex_unlock(&s->lock);
	switch (atomic_load(&s->mode)) {
	case ANSWER_200:
		return write(fd,
			     "HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\n"
			     "Content-Length: 0\r\n\r\n",
			     76) == 76;
	case ANSWER_500:
		return write(fd,
			     "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 5\r\n\r\noops!",
			     62) == 62;
	default:
		return true; /* never answers */
	}
}

static void *server_main(void *arg)
{
	struct server *s = arg;

	while (!atomic_load(&s->stop)) {
		struct pollfd p = {.fd = s->lfd, .events = POLLIN};
		int fd;

		if (poll(&p, 1, 50) <= 0)
			continue;
		fd = accept(s->lfd, NULL, NULL);
		if (fd < 0)
			continue;
		pthread_mutex_lock(&s->lock);
		s->connections++;
		pthread_mutex_unlock(&s->lock);
		while (serve_one(s, fd))
			;
		close(fd);
	}
	return NULL;
}

/* A listening socket on 127.0.0.1 and a free port. */
static int listen_any(int *port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) || listen(fd, 16) ||
	    getsockname(fd, (struct sockaddr *)&a, &al))
		return -1;
	*port = ntohs(a.sin_port);
	return fd;
}

static void server_start(struct server *s, enum mode mode)
{
	memset(s, 0, sizeof(*s));
	pthread_mutex_init(&s->lock, NULL);
	s->lfd = listen_any(&s->port);
	atomic_store(&s->mode, mode);
	pthread_create(&s->thread, NULL, server_main, s);
}

static void server_stop(struct server *s)
{
	atomic_store(&s->stop, true);
	pthread_join(s->thread, NULL);
	close(s->lfd);
}

static void server_free(struct server *s)
{
	for (int i = 0; i < s->nbodies; i++)
		free(s->bodies[i]);
}

static void endpoint_of(const struct server *s, char *out, size_t size)
{
	snprintf(out, size, "http://127.0.0.1:%d/v1/traces", s->port);
}

/* All spans of all received bodies, decoded (caller frees with free_reqs). */
static size_t decode_all(struct server *s, ExportReq **reqs)
{
	size_t spans = 0;

	for (int i = 0; i < s->nbodies; i++) {
		reqs[i] =
		    opentelemetry__proto__collector__trace__v1__export_trace_service_request__unpack(
			NULL, s->lens[i], s->bodies[i]);
		CHECK(reqs[i], "body %d decodes (%zu bytes, %02x %02x)", i, s->lens[i],
		      s->lens[i] ? s->bodies[i][0] : 0, s->lens[i] > 1 ? s->bodies[i][1] : 0);
		if (!reqs[i])
			continue;
		for (size_t r = 0; r < reqs[i]->n_resource_spans; r++)
			for (size_t k = 0; k < reqs[i]->resource_spans[r]->n_scope_spans; k++)
				spans += reqs[i]->resource_spans[r]->scope_spans[k]->n_spans;
	}
	return spans;
}

static void free_reqs(struct server *s, ExportReq **reqs, int n)
{
	server_free(s);
	for (int i = 0; i < n; i++)
		if (reqs[i])
			opentelemetry__proto__collector__trace__v1__export_trace_service_request__free_unpacked(
			    reqs[i], NULL);
}

static const KeyValue *attr(KeyValue **kv, size_t n, const char *key)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(kv[i]->key, key))
			return kv[i];
	return NULL;
}

static bool attr_str(KeyValue **kv, size_t n, const char *key, const char *want)
{
	const KeyValue *a = attr(kv, n, key);

	return a && a->value &&
	       a->value->value_case ==
		   OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE &&
	       !strcmp(a->value->string_value, want);
}

static bool attr_int(KeyValue **kv, size_t n, const char *key, int64_t want)
{
	const KeyValue *a = attr(kv, n, key);

	return a && a->value &&
	       a->value->value_case ==
		   OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE &&
	       a->value->int_value == want;
}

static const Span *find_span(ExportReq **reqs, int n, const uint8_t *span_id)
{
	for (int i = 0; i < n; i++)
		for (size_t r = 0; reqs[i] && r < reqs[i]->n_resource_spans; r++) {
			Opentelemetry__Proto__Trace__V1__ResourceSpans *rs =
			    reqs[i]->resource_spans[r];

			for (size_t k = 0; k < rs->n_scope_spans; k++)
				for (size_t j = 0; j < rs->scope_spans[k]->n_spans; j++) {
					const Span *sp = rs->scope_spans[k]->spans[j];

					if (sp->span_id.len == 8 &&
					    !memcmp(sp->span_id.data, span_id, 8))
						return sp;
				}
		}
	return NULL;
}

static struct tp_sdk_export_stats stats_now(void)
{
	struct tp_sdk_export_stats st;

	tp_sdk_export_get_stats(&st);
	return st;
}

static const uint8_t TID[16] = {0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6,
				0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36};
static const uint8_t PARENT[8] = {0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7};
static const char TP[] = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

/* Every field of two spans (a child of a remote caller and a root), over one connection. */
static void test_fields(void)
{
	struct server s;
	struct tp_sdk_export_opts o = {.batch_spans = 2, .interval_ms = 20};
	struct tp_sdk_span a, b, c[4];
	char ep[128];
	ExportReq *reqs[MAX_BODIES] = {0};
	struct tp_sdk_export_stats st;
	uint8_t zero[8] = {0};

	server_start(&s, ANSWER_200);
	endpoint_of(&s, ep, sizeof(ep));
	o.endpoint = ep;
	CHECK(tp_sdk_process_publish("spans-test", NULL, 0) == 0, "publish");
	CHECK(tp_sdk_export_start(&o) == 0, "start");
	CHECK(tp_sdk_export_start(&o) == -EALREADY, "second start while running");

	CHECK(tp_sdk_span_begin(&a, TP, sizeof(TP) - 1) == 0, "begin a");
	CHECK(!memcmp(a.trace_id, TID, 16) && !memcmp(a.parent_span_id, PARENT, 8) &&
		  a.trace_flags == 1,
	      "a continues the caller's trace");
	CHECK(otel_thread_ctx_v1 && otel_thread_ctx_v1->valid == 1 &&
		  !memcmp(otel_thread_ctx_v1->trace_id, TID, 16) &&
		  !memcmp(otel_thread_ctx_v1->span_id, a.span_id, 8),
	      "a is attached as the thread context");
	usleep(30000);
	CHECK(tp_sdk_span_end(&a, "POST", "/api/pay", 503) == 0, "end a");
	CHECK(otel_thread_ctx_v1->valid == 0, "end detaches");

	CHECK(tp_sdk_span_begin(&b, "00-bad", 6) == 0, "begin b (invalid traceparent)");
	CHECK(memcmp(b.trace_id, TID, 16) && !memcmp(b.parent_span_id, zero, 8) &&
		  b.trace_flags == 1,
	      "b starts a new sampled trace");
	CHECK(tp_sdk_span_end(&b, "GET", "/healthz", 200) == 0, "end b");
	for (int i = 0; i < 4; i++) {
		tp_sdk_span_begin(&c[i], NULL, 0);
		tp_sdk_span_end(&c[i], NULL, NULL, 0);
	}
	CHECK(tp_sdk_export_stop(5000) == 0, "stop flushes");
	st = stats_now();
	CHECK(st.spans_ended == 6 && st.spans_exported == 6 && st.request_errors == 0 &&
		  st.spans_dropped_full == 0 && st.spans_dropped_error == 0,
	      "stats ended %lu exported %lu errors %lu", (unsigned long)st.spans_ended,
	      (unsigned long)st.spans_exported, (unsigned long)st.request_errors);
	CHECK(st.requests >= 3, "batches of 2: %lu requests", (unsigned long)st.requests);
	server_stop(&s);
	CHECK(s.connections == 1, "one kept-alive connection (%d)", s.connections);
	CHECK(decode_all(&s, reqs) == 6, "6 spans received");
	for (int i = 0; i < s.nbodies; i++) {
		CHECK(!strcmp(s.paths[i], "/v1/traces") && s.protobuf_ct[i],
		      "POST /v1/traces, protobuf (%s)", s.paths[i]);
		if (!reqs[i])
			continue;
		CHECK(reqs[i]->n_resource_spans == 1, "one resource");
		Opentelemetry__Proto__Trace__V1__ResourceSpans *rs = reqs[i]->resource_spans[0];
		CHECK(rs->resource &&
			  attr_str(rs->resource->attributes, rs->resource->n_attributes,
				   "service.name", "spans-test") &&
			  attr_str(rs->resource->attributes, rs->resource->n_attributes,
				   "telemetry.sdk.name", "traceprof") &&
			  attr_str(rs->resource->attributes, rs->resource->n_attributes,
				   "telemetry.sdk.language", "c"),
		      "resource attributes");
		CHECK(rs->n_scope_spans == 1 && rs->scope_spans[0]->scope &&
			  !strcmp(rs->scope_spans[0]->scope->name, "traceprof-sdk"),
		      "scope traceprof-sdk");
	}

	const Span *sa = find_span(reqs, s.nbodies, a.span_id);
	const Span *sb = find_span(reqs, s.nbodies, b.span_id);
	const Span *sc = find_span(reqs, s.nbodies, c[0].span_id);
	CHECK(sa && sb && sc, "spans found by id");
	if (sa) {
		int64_t dur = (int64_t)(sa->end_time_unix_nano - sa->start_time_unix_nano);

		CHECK(sa->trace_id.len == 16 && !memcmp(sa->trace_id.data, TID, 16), "a trace id");
		CHECK(sa->parent_span_id.len == 8 && !memcmp(sa->parent_span_id.data, PARENT, 8),
		      "a parent");
		CHECK(sa->kind ==
			  OPENTELEMETRY__PROTO__TRACE__V1__SPAN__SPAN_KIND__SPAN_KIND_SERVER,
		      "a kind SERVER");
		CHECK(!strcmp(sa->name, "POST /api/pay"), "a name %s", sa->name);
		CHECK(sa->start_time_unix_nano == (uint64_t)a.start_unix_ns, "a start");
		CHECK(dur >= 30000000 && dur < 1000000000, "a duration %ld ns", (long)dur);
		CHECK(attr_str(sa->attributes, sa->n_attributes, "http.request.method", "POST") &&
			  attr_str(sa->attributes, sa->n_attributes, "http.route", "/api/pay") &&
			  attr_int(sa->attributes, sa->n_attributes, "http.response.status_code",
				   503),
		      "a attributes");
		CHECK(
		    sa->status &&
			sa->status->code ==
			    OPENTELEMETRY__PROTO__TRACE__V1__STATUS__STATUS_CODE__STATUS_CODE_ERROR,
		    "a 503 is an error");
		CHECK(sa->flags == 0x301, "a flags %#x (sampled, remote parent)", sa->flags);
	}
	if (sb) {
		CHECK(sb->trace_id.len == 16 && !memcmp(sb->trace_id.data, b.trace_id, 16),
		      "b trace id");
		CHECK(sb->parent_span_id.len == 0, "b is a root span");
		CHECK(!strcmp(sb->name, "GET /healthz"), "b name %s", sb->name);
		CHECK(attr_int(sb->attributes, sb->n_attributes, "http.response.status_code", 200),
		      "b status code");
		CHECK(!sb->status || sb->status->code == 0, "b 200 is not an error");
		CHECK(sb->flags == 0x101, "b flags %#x", sb->flags);
	}
	if (sc)
		CHECK(!strcmp(sc->name, "request") && sc->n_attributes == 0,
		      "no method, route or status: name 'request', no attributes");
	free_reqs(&s, reqs, s.nbodies);
}

/* Begin and end never allocate, with the exporter running and exporting. */
static void test_no_malloc(void)
{
	struct server s;
	struct tp_sdk_export_opts o = {.interval_ms = 5, .batch_spans = 16, .queue_spans = 64};
	char ep[128];
	long n;

	server_start(&s, ANSWER_200);
	endpoint_of(&s, ep, sizeof(ep));
	o.endpoint = ep;
	CHECK(tp_sdk_export_start(&o) == 0, "start");
	for (int i = 0; i < 2000; i++) {
		struct tp_sdk_span sp;

		counting = true;
		tp_sdk_span_begin(&sp, i % 2 ? TP : NULL, i % 2 ? sizeof(TP) - 1 : 0);
		tp_sdk_span_end(&sp, "GET", "/x", 200);
		counting = false;
		if (i % 100 == 0)
			usleep(1000);
	}
	CHECK(tp_sdk_export_stop(5000) == 0, "stop");
	server_stop(&s);
	n = atomic_load(&allocs);
	CHECK(n == 0, "begin/end allocated %ld times", n);
	CHECK(s.nbodies >= 2, "exported meanwhile (%d requests)", s.nbodies);
	/* the wrapper works: a counted malloc is seen */
	counting = true;
	void *volatile p = malloc(16); /* volatile: the pair is not optimised away */
	counting = false;
	free(p);
	CHECK(atomic_load(&allocs) == 1, "the malloc wrapper counts (%ld)", atomic_load(&allocs));
}

/*
 * A full queue drops exactly what does not fit; stop exports the rest.
 * queue_spans is rounded up to a power of two: the queue holds held spans.
 */
static void test_queue_full(uint32_t queue_spans, int held)
{
	struct server s;
	struct tp_sdk_export_opts o = {
	    .queue_spans = queue_spans, .batch_spans = 512, .interval_ms = 60000};
	struct tp_sdk_export_stats before, after;
	char ep[128];
	int nobufs = 0;

	server_start(&s, ANSWER_200);
	endpoint_of(&s, ep, sizeof(ep));
	o.endpoint = ep;
	before = stats_now();
	CHECK(tp_sdk_export_start(&o) == 0, "start");
	for (int i = 0; i < 20; i++) {
		struct tp_sdk_span sp;

		tp_sdk_span_begin(&sp, NULL, 0);
		if (tp_sdk_span_end(&sp, "GET", "/q", 200) == -ENOBUFS)
			nobufs++;
	}
	after = stats_now();
	CHECK(nobufs == 20 - held, "queue_spans %u: %d of 20 refused (%d)", queue_spans, 20 - held,
	      nobufs);
	CHECK(after.spans_dropped_full - before.spans_dropped_full == (uint64_t)(20 - held),
	      "%d counted full", 20 - held);
	CHECK(after.spans_ended - before.spans_ended == (uint64_t)held, "%d queued", held);
	CHECK(tp_sdk_export_stop(5000) == 0, "stop");
	after = stats_now();
	CHECK(after.spans_exported - before.spans_exported == (uint64_t)held,
	      "the %d exported at stop", held);
	server_stop(&s);
	ExportReq *reqs[MAX_BODIES] = {0};
	CHECK(decode_all(&s, reqs) == (size_t)held, "%d received", held);
	free_reqs(&s, reqs, s.nbodies);
}

/* 500: the batch is dropped and counted, the request counted as failed. */
static void test_500(void)
{
	struct server s;
	struct tp_sdk_export_opts o = {.interval_ms = 10};
	struct tp_sdk_export_stats before, after;
	char ep[128];

	server_start(&s, ANSWER_500);
	endpoint_of(&s, ep, sizeof(ep));
	o.endpoint = ep;
	before = stats_now();
	CHECK(tp_sdk_export_start(&o) == 0, "start");
	for (int i = 0; i < 3; i++) {
		struct tp_sdk_span sp;

		tp_sdk_span_begin(&sp, NULL, 0);
		tp_sdk_span_end(&sp, "GET", "/e", 200);
	}
	CHECK(tp_sdk_export_stop(5000) == 0, "stop");
	after = stats_now();
	CHECK(after.spans_dropped_error - before.spans_dropped_error == 3, "3 dropped on error");
	CHECK(after.spans_exported == before.spans_exported, "none exported");
	CHECK(after.request_errors - before.request_errors >= 1 &&
		  after.request_errors - before.request_errors == after.requests - before.requests,
	      "every request failed");
	server_stop(&s);
	CHECK(s.nbodies >= 1, "the endpoint got the request");
}

/* Nobody listening: errors counted quickly. A silent endpoint: bounded by the timeouts. */
static void test_down(void)
{
	struct tp_sdk_export_opts o = {.interval_ms = 10, .timeout_ms = 300, .batch_spans = 2};
	struct tp_sdk_export_stats before, after;
	struct server s;
	char ep[128];
	int port, fd = listen_any(&port);
	int64_t t0;
	int rc;

	close(fd); /* the port is now closed: connections are refused */
	snprintf(ep, sizeof(ep), "http://127.0.0.1:%d/v1/traces", port);
	o.endpoint = ep;
	before = stats_now();
	CHECK(tp_sdk_export_start(&o) == 0, "start");
	for (int i = 0; i < 5; i++) {
		struct tp_sdk_span sp;

		tp_sdk_span_begin(&sp, NULL, 0);
		tp_sdk_span_end(&sp, "GET", "/d", 200);
	}
	t0 = now_ms();
	rc = tp_sdk_export_stop(5000);
	CHECK(rc == 0 && now_ms() - t0 < 2000, "stop returns at once (%d, %ld ms)", rc,
	      (long)(now_ms() - t0));
	after = stats_now();
	CHECK(after.spans_dropped_error - before.spans_dropped_error == 5, "5 dropped");
	CHECK(after.request_errors - before.request_errors == after.requests - before.requests &&
		  after.requests - before.requests >= 3,
	      "every request failed");

	/* silent: each request ends at its timeout; stop's deadline cuts the rest */
	server_start(&s, SILENT);
	endpoint_of(&s, ep, sizeof(ep));
	o.timeout_ms = 10000;
	o.interval_ms = 60000;
	before = stats_now();
	CHECK(tp_sdk_export_start(&o) == 0, "start");
	for (int i = 0; i < 6; i++) {
		struct tp_sdk_span sp;

		tp_sdk_span_begin(&sp, NULL, 0);
		tp_sdk_span_end(&sp, "GET", "/d", 200);
	}
	t0 = now_ms();
	rc = tp_sdk_export_stop(400);
	CHECK(rc == -ETIMEDOUT, "stop timed out (%d)", rc);
	CHECK(now_ms() - t0 < 1500, "stop kept its deadline (%ld ms)", (long)(now_ms() - t0));
	after = stats_now();
	CHECK(after.spans_dropped_error - before.spans_dropped_error == 6, "all 6 dropped");
	server_stop(&s);
}

/* Endpoint settings: https refused, the environment variables' precedence. */
static void test_endpoints(void)
{
	struct tp_sdk_export_opts o = {.interval_ms = 10};
	struct server s;
	char url[128];

	o.endpoint = "https://127.0.0.1:4318/v1/traces";
	CHECK(tp_sdk_export_start(&o) == -EINVAL, "https is refused");
	o.endpoint = "http://:4318/v1/traces";
	CHECK(tp_sdk_export_start(&o) == -EINVAL, "no host");
	o.endpoint = "http://127.0.0.1:99999/v1/traces";
	CHECK(tp_sdk_export_start(&o) == -EINVAL, "bad port");
	o.endpoint = NULL;

	server_start(&s, ANSWER_200);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/base/", s.port);
	setenv("OTEL_EXPORTER_OTLP_ENDPOINT", url, 1);
	CHECK(tp_sdk_export_start(&o) == 0, "start from OTEL_EXPORTER_OTLP_ENDPOINT");
	{
		struct tp_sdk_span sp;

		tp_sdk_span_begin(&sp, NULL, 0);
		tp_sdk_span_end(&sp, "GET", "/env", 200);
	}
	tp_sdk_export_stop(5000);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/custom/path", s.port);
	setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", url, 1);
	CHECK(tp_sdk_export_start(&o) == 0, "start from OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
	{
		struct tp_sdk_span sp;

		tp_sdk_span_begin(&sp, NULL, 0);
		tp_sdk_span_end(&sp, "GET", "/env", 200);
	}
	tp_sdk_export_stop(5000);
	unsetenv("OTEL_EXPORTER_OTLP_ENDPOINT");
	unsetenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
	server_stop(&s);
	CHECK(s.nbodies == 2 && !strcmp(s.paths[0], "/base/v1/traces") &&
		  !strcmp(s.paths[1], "/custom/path"),
	      "paths %s %s", s.nbodies > 0 ? s.paths[0] : "-", s.nbodies > 1 ? s.paths[1] : "-");
}

/* A forked child's spans: its first end starts its own exporter, parent's settings. */
static void test_fork(void)
{
	struct tp_sdk_export_opts o = {.interval_ms = 10};
	struct server s;
	char ep[128];
	pid_t pid;
	int status = -1;

	server_start(&s, ANSWER_200);
	endpoint_of(&s, ep, sizeof(ep));
	o.endpoint = ep;
	CHECK(tp_sdk_export_start(&o) == 0, "start");
	pid = fork();
	if (pid == 0) {
		struct tp_sdk_span sp;
		struct tp_sdk_export_stats st;

		tp_sdk_span_begin(&sp, TP, sizeof(TP) - 1);
		tp_sdk_span_end(&sp, "GET", "/child", 200);
		tp_sdk_export_stop(5000);
		tp_sdk_export_get_stats(&st);
		_exit(st.spans_exported == 1 && st.spans_ended == 1 ? 0 : 1);
	}
	waitpid(pid, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child exported its span");
	tp_sdk_export_stop(5000);
	server_stop(&s);
	ExportReq *reqs[MAX_BODIES] = {0};
	CHECK(decode_all(&s, reqs) == 1, "one span, from the child");
	free_reqs(&s, reqs, s.nbodies);
}

#define PRODUCERS	   4
#define SPANS_PER_PRODUCER 5000

/* The route a producer gives a span: from its span id, in a reused buffer. */
static void route_of(const uint8_t *span_id, char *out, size_t size)
{
	snprintf(out, size, "/mt/%u", span_id[0] % 8u);
}

static void *producer_main(void *arg)
{
	uint64_t *ids = arg;
	char route[32];

	for (int i = 0; i < SPANS_PER_PRODUCER; i++) {
		struct tp_sdk_span sp;

		tp_sdk_span_begin(&sp, NULL, 0);
		memcpy(&ids[i], sp.span_id, 8);
		route_of(sp.span_id, route, sizeof(route));
		tp_sdk_span_end(&sp, "GET", route, 200);
	}
	return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

/* Threads ending spans at once: every span arrives exactly once. */
static void test_threads(void)
{
	struct tp_sdk_export_opts o = {
	    .queue_spans = 1 << 15, .batch_spans = 1024, .interval_ms = 5};
	static uint64_t sent[PRODUCERS * SPANS_PER_PRODUCER], got[PRODUCERS * SPANS_PER_PRODUCER];
	ExportReq *reqs[MAX_BODIES] = {0};
	pthread_t t[PRODUCERS];
	struct server s;
	char ep[128];
	size_t n = 0, total;
	bool same = true, routes_ok = true;

	server_start(&s, ANSWER_200);
	endpoint_of(&s, ep, sizeof(ep));
	o.endpoint = ep;
	CHECK(tp_sdk_export_start(&o) == 0, "start");
	for (int i = 0; i < PRODUCERS; i++)
		pthread_create(&t[i], NULL, producer_main, &sent[i * SPANS_PER_PRODUCER]);
	for (int i = 0; i < PRODUCERS; i++)
		pthread_join(t[i], NULL);
	CHECK(tp_sdk_export_stop(10000) == 0, "stop");
	server_stop(&s);
	total = decode_all(&s, reqs);
	CHECK(total == PRODUCERS * SPANS_PER_PRODUCER, "%zu spans received", total);
	for (int i = 0; i < s.nbodies; i++)
		for (size_t k = 0;
		     reqs[i] && k < reqs[i]->resource_spans[0]->scope_spans[0]->n_spans; k++) {
			const Span *sp = reqs[i]->resource_spans[0]->scope_spans[0]->spans[k];
			char route[32];

			if (n < PRODUCERS * SPANS_PER_PRODUCER && sp->span_id.len == 8) {
				memcpy(&got[n++], sp->span_id.data, 8);
				route_of(sp->span_id.data, route, sizeof(route));
				routes_ok = routes_ok && attr_str(sp->attributes, sp->n_attributes,
								  "http.route", route);
			}
		}
	qsort(sent, n, sizeof(sent[0]), cmp_u64);
	qsort(got, n, sizeof(got[0]), cmp_u64);
	for (size_t i = 0; i < n; i++)
		same = same && sent[i] == got[i];
	CHECK(n == PRODUCERS * SPANS_PER_PRODUCER && same, "each span exactly once");
	CHECK(routes_ok, "each span with its own route (one buffer per thread, reused)");
	free_reqs(&s, reqs, s.nbodies);
}

static int64_t ts_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/*
 * The request path's clock (the TSC where the CPU and kernel allow it, see
 * spans.c) agrees with CLOCK_MONOTONIC and CLOCK_REALTIME: span starts lie
 * between readings taken around begin, durations between the inner and
 * outer intervals around the span, within 20 us.
 */
static void test_clock(void)
{
	struct server s;
	struct tp_sdk_export_opts o = {.interval_ms = 20, .batch_spans = 64};
	struct tp_sdk_span sp[6];
	int64_t m0[6], m1[6], m2[6], m3[6], r0[6], r1[6];
	const int64_t slack = 20000;
	ExportReq *reqs[MAX_BODIES] = {0};
	char ep[128];
	int ok_start = 0, ok_unix = 0, ok_dur = 0, found = 0;

	server_start(&s, ANSWER_200);
	endpoint_of(&s, ep, sizeof(ep));
	o.endpoint = ep;
	CHECK(tp_sdk_export_start(&o) == 0, "start");
	usleep(250000); /* the exporter calibrates the counter over its first 100 ms */
	for (int i = 0; i < 6; i++) {
		r0[i] = ts_ns(CLOCK_REALTIME);
		m0[i] = ts_ns(CLOCK_MONOTONIC);
		tp_sdk_span_begin(&sp[i], NULL, 0);
		m1[i] = ts_ns(CLOCK_MONOTONIC);
		r1[i] = ts_ns(CLOCK_REALTIME);
		usleep(i == 5 ? 300000 : 1000 * (useconds_t)(i * 7));
		m2[i] = ts_ns(CLOCK_MONOTONIC);
		tp_sdk_span_end(&sp[i], "GET", "/clock", 200);
		m3[i] = ts_ns(CLOCK_MONOTONIC);
		ok_start +=
		    sp[i].start_mono_ns >= m0[i] - slack && sp[i].start_mono_ns <= m1[i] + slack;
		ok_unix +=
		    sp[i].start_unix_ns >= r0[i] - slack && sp[i].start_unix_ns <= r1[i] + slack;
	}
	CHECK(tp_sdk_export_stop(5000) == 0, "stop");
	server_stop(&s);
	CHECK(ok_start == 6, "span starts between CLOCK_MONOTONIC readings: %d of 6", ok_start);
	CHECK(ok_unix == 6, "wall-clock starts between CLOCK_REALTIME readings: %d of 6", ok_unix);
	decode_all(&s, reqs);
	for (int i = 0; i < 6; i++) {
		const Span *x = find_span(reqs, s.nbodies, sp[i].span_id);
		int64_t dur;

		if (!x)
			continue;
		found++;
		dur = (int64_t)(x->end_time_unix_nano - x->start_time_unix_nano);
		if (dur >= m2[i] - m1[i] - slack && dur <= m3[i] - m0[i] + slack)
			ok_dur++;
		else
			fprintf(stderr, "span %d: duration %lld ns, expected %lld..%lld\n", i,
				(long long)dur, (long long)(m2[i] - m1[i]),
				(long long)(m3[i] - m0[i]));
	}
	CHECK(found == 6 && ok_dur == 6, "durations agree with CLOCK_MONOTONIC: %d of %d", ok_dur,
	      found);
	free_reqs(&s, reqs, s.nbodies);
}

#define WIDE_SPANS   1500 /* more distinct routes than the SDK's name table holds */
#define WIDE_THREADS 2
#define WIDE_PER_THR 300

struct wide_job {
	int first; /* route numbers first .. first + count - 1 */
	int count;
	uint8_t (*ids)[8]; /* span ids, one per route number */
};

static void *wide_main(void *arg)
{
	struct wide_job *j = arg;
	char route[64];

	for (int i = 0; i < j->count; i++) {
		struct tp_sdk_span sp;

		tp_sdk_span_begin(&sp, NULL, 0);
		memcpy(j->ids[j->first + i], sp.span_id, 8);
		snprintf(route, sizeof(route), "/wide/%d", j->first + i);
		tp_sdk_span_end(&sp, "PUT", route, 201);
		if (i % 64 == 0)
			usleep(1000);
	}
	return NULL;
}

/*
 * Method and route as the exporter sends them, whatever the caller's
 * strings: a reused buffer, cut lengths, NULL, and more distinct routes
 * than the SDK's name table holds (those are sent in full, in extra queue
 * slots), from several threads.
 */
static void test_names(void)
{
	struct tp_sdk_export_opts o = {.queue_spans = 4096, .batch_spans = 512, .interval_ms = 5};
	static uint8_t wide_ids[WIDE_SPANS + WIDE_THREADS * WIDE_PER_THR][8];
	struct wide_job jobs[WIDE_THREADS];
	pthread_t t[WIDE_THREADS];
	struct tp_sdk_span sp[6];
	ExportReq *reqs[MAX_BODIES] = {0};
	char buf[256], mbuf[32], ep[128], want[160], long_route[128];
	struct tp_sdk_export_stats st0 = stats_now(), st;
	struct server s;
	const Span *x;
	int bad = 0, missing = 0;

	server_start(&s, ANSWER_200);
	endpoint_of(&s, ep, sizeof(ep));
	o.endpoint = ep;
	CHECK(tp_sdk_export_start(&o) == 0, "start");
	strcpy(buf, "/a");
	tp_sdk_span_begin(&sp[0], NULL, 0);
	tp_sdk_span_end(&sp[0], "GET", buf, 200);
	strcpy(buf, "/b"); /* the same pointer, another route */
	tp_sdk_span_begin(&sp[1], NULL, 0);
	tp_sdk_span_end(&sp[1], "GET", buf, 200);
	memset(buf, 'x', 200);
	buf[200] = '\0';
	tp_sdk_span_begin(&sp[2], NULL, 0);
	tp_sdk_span_end(&sp[2], "GET", buf, 200);
	strcpy(buf + 127, "yyy"); /* differs after the cut: the same name */
	tp_sdk_span_begin(&sp[3], NULL, 0);
	tp_sdk_span_end(&sp[3], "GET", buf, 200);
	strcpy(mbuf, "PATCHPATCHPATCHPATCH");
	tp_sdk_span_begin(&sp[4], NULL, 0);
	tp_sdk_span_end(&sp[4], mbuf, "/m", 200);
	tp_sdk_span_begin(&sp[5], NULL, 0);
	tp_sdk_span_end(&sp[5], NULL, "/only", 200);
	for (int i = 0; i < WIDE_SPANS; i++) {
		struct tp_sdk_span w;

		tp_sdk_span_begin(&w, NULL, 0);
		memcpy(wide_ids[i], w.span_id, 8);
		snprintf(buf, sizeof(buf), "/wide/%d", i);
		tp_sdk_span_end(&w, "PUT", buf, 201);
		if (i % 64 == 0)
			usleep(1000); /* the exporter keeps up: nothing dropped */
	}
	for (int k = 0; k < WIDE_THREADS; k++) {
		jobs[k] = (struct wide_job){WIDE_SPANS + k * WIDE_PER_THR, WIDE_PER_THR, wide_ids};
		pthread_create(&t[k], NULL, wide_main, &jobs[k]);
	}
	for (int k = 0; k < WIDE_THREADS; k++)
		pthread_join(t[k], NULL);
	CHECK(tp_sdk_export_stop(10000) == 0, "stop");
	server_stop(&s);
	st = stats_now();
	CHECK(st.spans_ended - st0.spans_ended == 6 + WIDE_SPANS + WIDE_THREADS * WIDE_PER_THR,
	      "spans_ended counts spans, not queue slots (%lu)",
	      (unsigned long)(st.spans_ended - st0.spans_ended));
	CHECK(st.spans_dropped_full == st0.spans_dropped_full, "nothing dropped");
	CHECK(decode_all(&s, reqs) == 6 + WIDE_SPANS + WIDE_THREADS * WIDE_PER_THR,
	      "every span exported");
	memset(long_route, 'x', 127);
	long_route[127] = '\0';
	const char *routes[6] = {"/a", "/b", long_route, long_route, "/m", "/only"};
	const char *methods[6] = {"GET", "GET", "GET", "GET", "PATCHPATCHPATCH", NULL};
	for (int i = 0; i < 6; i++) {
		x = find_span(reqs, s.nbodies, sp[i].span_id);
		CHECK(x && attr_str(x->attributes, x->n_attributes, "http.route", routes[i]),
		      "span %d: route %.20s...", i, routes[i]);
		CHECK(x && (methods[i]
				? attr_str(x->attributes, x->n_attributes, "http.request.method",
					   methods[i])
				: !attr(x->attributes, x->n_attributes, "http.request.method")),
		      "span %d: method %s", i, methods[i] ? methods[i] : "(none)");
	}
	x = find_span(reqs, s.nbodies, sp[5].span_id);
	CHECK(x && !strcmp(x->name, "/only"), "no method: the name is the route");
	for (int i = 0; i < WIDE_SPANS + WIDE_THREADS * WIDE_PER_THR; i++) {
		x = find_span(reqs, s.nbodies, wide_ids[i]);
		snprintf(want, sizeof(want), "/wide/%d", i);
		if (!x)
			missing++;
		else if (!attr_str(x->attributes, x->n_attributes, "http.route", want) ||
			 !attr_str(x->attributes, x->n_attributes, "http.request.method", "PUT") ||
			 !attr_int(x->attributes, x->n_attributes, "http.response.status_code",
				   201))
			bad++;
	}
	CHECK(missing == 0 && bad == 0,
	      "%d distinct routes (more than the name table holds): %d missing, %d wrong",
	      WIDE_SPANS + WIDE_THREADS * WIDE_PER_THR, missing, bad);
	free_reqs(&s, reqs, s.nbodies);
}

int main(void)
{
	test_fields();
	test_no_malloc();
	test_queue_full(8, 8);
	test_queue_full(5, 8);
	test_threads();
	test_500();
	test_down();
	test_endpoints();
	test_fork();
	test_clock();
	test_names(); /* last: it fills the name table */
	return check_done();
}
