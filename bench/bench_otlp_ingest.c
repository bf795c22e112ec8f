/* bench_otlp_ingest.c - load generator for the agent's OTLP receivers.
 *
 * Builds one ExportTraceServiceRequest with the protobuf-c generated code
 * (--spans SERVER spans of one service, each with http.route,
 * http.request.method, http.response.status_code and a few attributes the
 * receiver does not map), then sends it from --connections client
 * connections for --seconds seconds to a running traceprof-agent:
 *
 *   --transport http  POST /v1/traces over raw TCP sockets with HTTP/1.1
 *                     keep-alive, one request in flight per connection;
 *   --transport grpc  TraceService/Export with the gRPC C core client, one
 *                     channel (its own subchannel, so its own TCP
 *                     connection) per connection, one call in flight each.
 *
 * Every send patches the trace ids in a per-connection copy of the encoded
 * message with a global sequence number, so every span of the run has its
 * own trace id (span ids are distinct within an export). Without --rate
 * every connection sends as fast as it is answered (the receiver's
 * capacity; beyond what PostgreSQL takes, the agent's queue drops the
 * oldest rows); with --rate the connections share that many spans/s.
 *
 * After the sending stops it polls count(*) of traceprof.requests in --db
 * until it reaches the rows accepted (plus what was there before), or stops
 * growing for --settle seconds. Prints one line of key=value:
 *   sent_spans, accepted_spans (answered 200 / OK), refused_exports,
 *   send_s, accepted_per_s, committed_rows, commit_s (first send to the
 *   last row seen committed), committed_per_s.
 * It never fails on timing; exit 1 only on a setup error.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <libpq-fe.h>

#include "opentelemetry/proto/collector/trace/v1/trace_service.pb-c.h"
#include "otlp_grpc.h"

#define MAX_ATTRS 8

typedef Opentelemetry__Proto__Common__V1__KeyValue kv_t;
typedef Opentelemetry__Proto__Common__V1__AnyValue av_t;
typedef Opentelemetry__Proto__Trace__V1__Span span_t;

static struct {
	const char *transport, *db;
	int port, connections, spans;
	double seconds, settle, rate;
} opt = {"http", "", 0, 4, 1000, 10, 10, 0};

static uint8_t *msg;	  /* the encoded export */
static size_t msg_len;	  /* its length */
static size_t *trace_off; /* offset of each span's trace id in msg */
static atomic_uint_fast64_t seq;
static atomic_bool stop;
static double t_start; /* when the sending started (now_s()) */
static atomic_uint_fast64_t sent_spans, accepted_spans, refused_exports;

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void *xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size);

	if (!p) {
		fprintf(stderr, "bench_otlp_ingest: out of memory\n");
		exit(1);
	}
	return p;
}

static void set_str(kv_t *kv, av_t *av, const char *key, const char *v)
{
	opentelemetry__proto__common__v1__key_value__init(kv);
	opentelemetry__proto__common__v1__any_value__init(av);
	kv->key = (char *)key;
	kv->value = av;
	av->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
	av->string_value = (char *)v;
}

static void set_int(kv_t *kv, av_t *av, const char *key, int64_t v)
{
	opentelemetry__proto__common__v1__key_value__init(kv);
	opentelemetry__proto__common__v1__any_value__init(av);
	kv->key = (char *)key;
	kv->value = av;
	av->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE;
	av->int_value = v;
}

/* Builds msg: one resource (service, pod, host), one scope, opt.spans SERVER spans. */
static void build_message(void)
{
	static const char *routes[] = {"/api/cart",	    "/api/cart/{id}", "/api/checkout",
				       "/api/orders/{id}",  "/api/products",  "/api/products/{id}",
				       "/api/users/{id}",   "/api/search",    "/healthz",
				       "/api/payments/{id}"};
	static const char *methods[] = {"GET", "GET", "GET", "POST", "PUT", "DELETE"};
	static const int statuses[] = {200, 200, 200, 200, 200, 200, 201, 404, 500, 503};
	Opentelemetry__Proto__Collector__Trace__V1__ExportTraceServiceRequest req =
	    OPENTELEMETRY__PROTO__COLLECTOR__TRACE__V1__EXPORT_TRACE_SERVICE_REQUEST__INIT;
	Opentelemetry__Proto__Trace__V1__ResourceSpans rs, *rsp = &rs;
	Opentelemetry__Proto__Resource__V1__Resource res;
	Opentelemetry__Proto__Trace__V1__ScopeSpans ss, *ssp = &ss;
	Opentelemetry__Proto__Common__V1__InstrumentationScope scope;
	size_t n = (size_t)opt.spans;
	span_t *spans = xcalloc(n, sizeof(*spans)), **spp = xcalloc(n, sizeof(*spp));
	kv_t *kvs = xcalloc((n + 1) * MAX_ATTRS, sizeof(*kvs));
	kv_t **kvp = xcalloc((n + 1) * MAX_ATTRS, sizeof(*kvp));
	av_t *avs = xcalloc((n + 1) * MAX_ATTRS, sizeof(*avs));
	uint8_t(*ids)[24] = xcalloc(n, sizeof(*ids));
	char(*names)[64] = xcalloc(n, sizeof(*names));
	struct timespec rt;
	uint64_t t0;

	clock_gettime(CLOCK_REALTIME, &rt);
	t0 = (uint64_t)rt.tv_sec * 1000000000u + (uint64_t)rt.tv_nsec - 60000000000u;
	opentelemetry__proto__trace__v1__resource_spans__init(&rs);
	opentelemetry__proto__resource__v1__resource__init(&res);
	opentelemetry__proto__trace__v1__scope_spans__init(&ss);
	opentelemetry__proto__common__v1__instrumentation_scope__init(&scope);
	scope.name = "io.opentelemetry.http-server";
	scope.version = "1.0.0";
	set_str(&kvs[0], &avs[0], "service.name", "checkout");
	set_str(&kvs[1], &avs[1], "k8s.namespace.name", "shop");
	set_str(&kvs[2], &avs[2], "k8s.pod.name", "checkout-7c9f8d6b5-x2k4q");
	set_str(&kvs[3], &avs[3], "host.name", "node-1");
	set_str(&kvs[4], &avs[4], "telemetry.sdk.language", "java");
	for (int i = 0; i < 5; i++)
		kvp[i] = &kvs[i];
	res.attributes = kvp;
	res.n_attributes = 5;
	rs.resource = &res;
	rs.scope_spans = &ssp;
	rs.n_scope_spans = 1;
	ss.scope = &scope;
	ss.spans = spp;
	ss.n_spans = n;
	srand(42);
	for (size_t i = 0; i < n; i++) {
		span_t *s = &spans[i];
		size_t k = (i + 1) * MAX_ATTRS;
		const char *route = routes[(size_t)rand() % 10],
			   *method = methods[(size_t)rand() % 6];
		uint64_t start = t0 + i * 50000u;

		opentelemetry__proto__trace__v1__span__init(s);
		/* random trace id bytes: unique in the message, found again after packing */
		for (int b = 0; b < 16; b++)
			ids[i][b] = (uint8_t)rand();
		ids[i][0] |= 1;
		for (int b = 0; b < 8; b++)
			ids[i][16 + b] = (uint8_t)((i + 1) >> (8 * (7 - b)));
		s->trace_id.data = ids[i];
		s->trace_id.len = 16;
		s->span_id.data = ids[i] + 16;
		s->span_id.len = 8;
		snprintf(names[i], sizeof(names[i]), "%s %s", method, route);
		s->name = names[i];
		s->kind = OPENTELEMETRY__PROTO__TRACE__V1__SPAN__SPAN_KIND__SPAN_KIND_SERVER;
		s->start_time_unix_nano = start;
		s->end_time_unix_nano = start + 1000u * (uint64_t)(200 + rand() % 50000);
		set_str(&kvs[k + 0], &avs[k + 0], "http.request.method", method);
		set_str(&kvs[k + 1], &avs[k + 1], "http.route", route);
		set_int(&kvs[k + 2], &avs[k + 2], "http.response.status_code",
			statuses[(size_t)rand() % 10]);
		set_str(&kvs[k + 3], &avs[k + 3], "url.scheme", "http");
		set_str(&kvs[k + 4], &avs[k + 4], "server.address", "checkout.shop.svc");
		set_int(&kvs[k + 5], &avs[k + 5], "server.port", 8080);
		set_str(&kvs[k + 6], &avs[k + 6], "network.protocol.version", "1.1");
		for (int a = 0; a < 7; a++)
			kvp[k + (size_t)a] = &kvs[k + (size_t)a];
		s->attributes = &kvp[k];
		s->n_attributes = 7;
		spp[i] = s;
	}
	req.resource_spans = &rsp;
	req.n_resource_spans = 1;
	msg_len =
	    opentelemetry__proto__collector__trace__v1__export_trace_service_request__get_packed_size(
		&req);
	msg = xcalloc(msg_len, 1);
	opentelemetry__proto__collector__trace__v1__export_trace_service_request__pack(&req, msg);
	trace_off = xcalloc(n, sizeof(*trace_off));
	for (size_t i = 0; i < n; i++) {
		const uint8_t *p = memmem(msg, msg_len, ids[i], 16);

		if (!p) {
			fprintf(stderr,
				"bench_otlp_ingest: trace id %zu not found in the message\n", i);
			exit(1);
		}
		trace_off[i] = (size_t)(p - msg);
	}
	free(spans);
	free(spp);
	free(kvs);
	free(kvp);
	free(avs);
	free(ids);
	free(names);
}

/* Gives every span of buf a trace id of its own: bytes 8..15 = a global sequence number. */
static void patch(uint8_t *buf)
{
	uint64_t base = atomic_fetch_add(&seq, (uint64_t)opt.spans);

	for (size_t i = 0; i < (size_t)opt.spans; i++) {
		uint64_t v = base + i;

		for (int b = 0; b < 8; b++)
			buf[trace_off[i] + 8 + (size_t)b] = (uint8_t)(v >> (8 * b));
	}
}

/* With --rate: sleeps until this connection's next export is due (n sent so far). */
static void pace(uint64_t n)
{
	double due, per_conn = opt.rate / opt.connections;

	if (opt.rate <= 0)
		return;
	due = t_start + (double)n * opt.spans / per_conn;
	while (!atomic_load(&stop) && now_s() < due)
		usleep(1000);
}

/* Reads one HTTP response; returns its status, -1 on a broken connection. */
static int read_response(int fd, char *buf, size_t cap)
{
	size_t have = 0;
	char *end = NULL;
	long clen = 0;
	int status;

	for (;;) {
		ssize_t r;

		buf[have] = 0;
		end = strstr(buf, "\r\n\r\n");
		if (end)
			break;
		if (have + 1 >= cap)
			return -1;
		r = read(fd, buf + have, cap - 1 - have);
		if (r <= 0)
			return -1;
		have += (size_t)r;
	}
	if (sscanf(buf, "HTTP/1.1 %d", &status) != 1)
		return -1;
	for (char *h = buf; h < end; h++)
		if (strncasecmp(h, "\r\ncontent-length:", 17) == 0)
			clen = strtol(h + 17, NULL, 10);
	for (size_t got = have - (size_t)(end + 4 - buf); got < (size_t)clen;) {
		ssize_t r = read(fd, buf, cap - 1);

		if (r <= 0)
			return -1;
		got += (size_t)r;
	}
	return status;
}

static int http_connect(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)opt.port)};
	int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
		fprintf(stderr, "bench_otlp_ingest: connect to port %d: %s\n", opt.port,
			strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

static void *http_client(void *arg)
{
	uint8_t *buf = xcalloc(msg_len, 1);
	char head[256], resp[4096];
	int hl = snprintf(head, sizeof(head),
			  "POST /v1/traces HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
			  "Content-Type: application/x-protobuf\r\nContent-Length: %zu\r\n\r\n",
			  opt.port, msg_len);
	int fd = http_connect();
	uint64_t n = 0;

	(void)arg;
	memcpy(buf, msg, msg_len);
	while (fd >= 0 && !atomic_load(&stop)) {
		struct iovec iov[2] = {{head, (size_t)hl}, {buf, msg_len}};
		size_t total = (size_t)hl + msg_len, done = 0;
		int status;

		pace(n++);
		if (atomic_load(&stop))
			break;
		patch(buf);
		while (done < total) {
			ssize_t w = writev(fd, iov, 2);

			if (w <= 0)
				goto broken;
			done += (size_t)w;
			for (int i = 0; i < 2; i++) {
				size_t d = (size_t)w < iov[i].iov_len ? (size_t)w : iov[i].iov_len;

				iov[i].iov_base = (char *)iov[i].iov_base + d;
				iov[i].iov_len -= d;
				w -= (ssize_t)d;
			}
		}
		atomic_fetch_add(&sent_spans, (uint64_t)opt.spans);
		status = read_response(fd, resp, sizeof(resp));
		if (status == 200) {
			atomic_fetch_add(&accepted_spans, (uint64_t)opt.spans);
			continue;
		}
		atomic_fetch_add(&refused_exports, 1);
		if (status > 0)
			continue;
	broken:
		close(fd);
		fd = atomic_load(&stop) ? -1 : http_connect();
	}
	if (fd >= 0)
		close(fd);
	free(buf);
	return NULL;
}

static void *grpc_client(void *arg)
{
	char target[64];
	grpc_arg a = {.type = GRPC_ARG_INTEGER,
		      .key = (char *)GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL,
		      .value.integer = 1};
	grpc_channel_args args = {1, &a};
	grpc_channel_credentials *creds = grpc_insecure_credentials_create();
	grpc_channel *ch;
	grpc_completion_queue *cq = grpc_completion_queue_create_for_pluck(NULL);
	uint8_t *buf = xcalloc(msg_len, 1);
	uint64_t n = 0;

	(void)arg;
	snprintf(target, sizeof(target), "127.0.0.1:%d", opt.port);
	ch = grpc_channel_create(target, creds, &args);
	grpc_channel_credentials_release(creds);
	memcpy(buf, msg, msg_len);
	while (!atomic_load(&stop)) {
		struct grpc_unary_answer ans;

		pace(n++);
		if (atomic_load(&stop))
			break;
		patch(buf);
		atomic_fetch_add(&sent_spans, (uint64_t)opt.spans);
		otlp_grpc_call(ch, cq, buf, msg_len, 30, &ans);
		if (ans.code == GRPC_STATUS_OK)
			atomic_fetch_add(&accepted_spans, (uint64_t)opt.spans);
		else
			atomic_fetch_add(&refused_exports, 1);
		if (ans.resp)
			grpc_byte_buffer_destroy(ans.resp);
	}
	grpc_completion_queue_shutdown(cq);
	while (
	    grpc_completion_queue_pluck(cq, NULL, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
	    GRPC_QUEUE_SHUTDOWN)
		;
	grpc_completion_queue_destroy(cq);
	grpc_channel_destroy(ch);
	free(buf);
	return NULL;
}

static long long count_rows(PGconn *c)
{
	PGresult *r = PQexec(c, "SELECT count(*) FROM traceprof.requests");
	long long n = -1;

	if (PQresultStatus(r) == PGRES_TUPLES_OK)
		n = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
	else
		fprintf(stderr, "bench_otlp_ingest: count: %s", PQerrorMessage(c));
	PQclear(r);
	return n;
}

static void usage(void)
{
	fprintf(stderr, "usage: bench_otlp_ingest --port N --db CONNINFO [--transport http|grpc]\n"
			"       [--connections 4] [--spans 1000] [--seconds 10] [--settle 10]\n"
			"       [--rate SPANS_PER_S (all connections; 0: as fast as answered)]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	pthread_t th[256];
	long long before, rows, last;
	double t0, t_sent, t_last;
	PGconn *c;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!v)
			usage();
		if (!strcmp(a, "--port"))
			opt.port = atoi(v);
		else if (!strcmp(a, "--db"))
			opt.db = v;
		else if (!strcmp(a, "--transport"))
			opt.transport = v;
		else if (!strcmp(a, "--connections"))
			opt.connections = atoi(v);
		else if (!strcmp(a, "--spans"))
			opt.spans = atoi(v);
		else if (!strcmp(a, "--seconds"))
			opt.seconds = atof(v);
		else if (!strcmp(a, "--rate"))
			opt.rate = atof(v);
		else if (!strcmp(a, "--settle"))
			opt.settle = atof(v);
		else
			usage();
		i++;
	}
	if (opt.port <= 0 || opt.connections < 1 || opt.connections > 256 || opt.spans < 1 ||
	    (strcmp(opt.transport, "http") && strcmp(opt.transport, "grpc")))
		usage();
	c = PQconnectdb(opt.db);
	if (PQstatus(c) != CONNECTION_OK) {
		fprintf(stderr, "bench_otlp_ingest: database: %s", PQerrorMessage(c));
		return 1;
	}
	before = count_rows(c);
	if (before < 0)
		return 1;
	build_message();
	if (!strcmp(opt.transport, "grpc"))
		grpc_init();
	t0 = t_start = now_s();
	for (int i = 0; i < opt.connections; i++)
		pthread_create(&th[i], NULL,
			       strcmp(opt.transport, "grpc") ? http_client : grpc_client, NULL);
	while (now_s() - t0 < opt.seconds)
		usleep(10000);
	atomic_store(&stop, true);
	for (int i = 0; i < opt.connections; i++)
		pthread_join(th[i], NULL);
	t_sent = now_s();
	if (!strcmp(opt.transport, "grpc"))
		grpc_shutdown();

	/* wait for the accepted rows to be committed, or for the count to stop growing */
	last = -1;
	t_last = t_sent;
	for (;;) {
		rows = count_rows(c) - before;
		if (rows != last) {
			last = rows;
			t_last = now_s();
		}
		if (rows >= (long long)atomic_load(&accepted_spans) ||
		    now_s() - t_last > opt.settle)
			break;
		usleep(100000);
	}
	PQfinish(c);
	printf("bench_otlp_ingest transport=%s connections=%d rate=%.0f spans_per_export=%d "
	       "export_bytes=%zu sent_spans=%" PRIuFAST64 " accepted_spans=%" PRIuFAST64
	       " refused_exports=%" PRIuFAST64 " send_s=%.2f accepted_per_s=%.0f "
	       "committed_rows=%lld commit_s=%.2f committed_per_s=%.0f\n",
	       opt.transport, opt.connections, opt.rate, opt.spans, msg_len,
	       atomic_load(&sent_spans), atomic_load(&accepted_spans),
	       atomic_load(&refused_exports), t_sent - t0,
	       (double)atomic_load(&accepted_spans) / (t_sent - t0), rows, t_last - t0,
	       (double)rows / (t_last - t0));
	free(msg);
	free(trace_off);
	return 0;
}
