/*
 * test_otlp_grpc.c - the OTLP receiver's transports with real clients: a
 * gRPC C core client against otlp_grpc.c (OK with partial success,
 * INVALID_ARGUMENT, RESOURCE_EXHAUSTED) and raw HTTP/1.1 against
 * otlp_http.c (200, 400, 404, 405, 411, 413, 415, keep-alive, gzip bodies
 * and a gzip bomb); the rows go through the real shipper into PostgreSQL
 * and are read back; the refusals of both transports are counted.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <grpc/byte_buffer.h>
#include <grpc/grpc.h>

#include "check.h"
#include "opentelemetry/proto/collector/trace/v1/trace_service.pb-c.h"
#include "otlp.h"
#include "otlp_build.h"
#include "otlp_forward.h"
#include "otlp_grpc.h"
#include "otlp_http.h"
#include "shipper.h"
#include "testdb.h"
#include "traceprof/log.h"

#define MAX_BYTES 8192

static int64_t now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_REALTIME, &t);
	return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static int submit_to_shipper(void *ctx, struct agg_window *w)
{
	return shipper_submit(ctx, w);
}

/* The upstream collector of the forwarding test: counts what arrives. */
static int submit_count(void *ctx, struct agg_window *w)
{
	*(uint64_t *)ctx += w->nrequests;
	agg_window_free(w);
	return 0;
}

/* An agent whose queue cannot take the rows. */
static int submit_refuse(void *ctx, struct agg_window *w)
{
	(void)ctx;
	agg_window_free(w);
	return -ENOBUFS;
}

static int forward_export(void *ctx, const void *buf, size_t len)
{
	return otlp_forward_submit(ctx, buf, len);
}

/* ---- gRPC client ---- */

struct grpc_reply {
	grpc_status_code code; /* status */
	char details[256];     /* status message */
	int64_t rejected;      /* partial_success.rejected_spans, -1 without a response */
	char error[256];       /* partial_success.error_message */
};

/*
 * One Export call of len bytes at buf; gzip: buf holds gzip data already,
 * sent as it is with the message's compressed flag and "grpc-encoding: gzip".
 */
static void grpc_export(int port, const void *buf, size_t len, bool gzip, struct grpc_reply *out)
{
	char target[64];
	grpc_channel *ch;
	grpc_completion_queue *cq = grpc_completion_queue_create_for_pluck(NULL);
	struct grpc_unary_answer ans;

	memset(out, 0, sizeof(*out));
	out->rejected = -1;
	snprintf(target, sizeof(target), "127.0.0.1:%d", port);
	ch = grpc_unary_insecure_channel(target, gzip);
	if (gzip)
		grpc_unary_call_gzipped(ch, cq, OTLP_GRPC_METHOD, NULL, buf, len, 10000, &ans);
	else
		otlp_grpc_call(ch, cq, buf, len, 10, &ans);
	out->code = ans.code;
	snprintf(out->details, sizeof(out->details), "%s", ans.details);
	if (ans.resp) {
		grpc_slice all = grpc_unary_answer_take(&ans);
		Opentelemetry__Proto__Collector__Trace__V1__ExportTraceServiceResponse *r;

		r = opentelemetry__proto__collector__trace__v1__export_trace_service_response__unpack(
		    NULL, GRPC_SLICE_LENGTH(all), GRPC_SLICE_START_PTR(all));
		if (r) {
			out->rejected = r->partial_success ? r->partial_success->rejected_spans : 0;
			if (r->partial_success && r->partial_success->error_message)
				snprintf(out->error, sizeof(out->error), "%s",
					 r->partial_success->error_message);
			opentelemetry__proto__collector__trace__v1__export_trace_service_response__free_unpacked(
			    r, NULL);
		}
		grpc_slice_unref(all);
	}
	grpc_channel_destroy(ch);
	grpc_completion_queue_shutdown(cq);
	grpc_completion_queue_destroy(cq);
}

/* ---- HTTP client ---- */

static int http_connect(int port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct timeval tv = {.tv_sec = 10};

	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

struct http_reply {
	int status;	    /* HTTP status, 0 when none came */
	bool closes;	    /* Connection: close */
	uint8_t body[4096]; /* body */
	size_t body_len;    /* its length */
};

/* Sends head (and body) on fd and reads one response. */
static void http_call(int fd, const char *head, const void *body, size_t len,
		      struct http_reply *out)
{
	char buf[8192];
	size_t got = 0, need = 0;
	char *end = NULL, *cl;

	memset(out, 0, sizeof(*out));
	if (send(fd, head, strlen(head), MSG_NOSIGNAL) < 0 ||
	    (len && send(fd, body, len, MSG_NOSIGNAL) < 0))
		return;
	while (got < sizeof(buf) - 1) {
		ssize_t n = recv(fd, buf + got, sizeof(buf) - 1 - got, 0);

		if (n <= 0)
			break;
		got += (size_t)n;
		buf[got] = '\0';
		if (!end && (end = strstr(buf, "\r\n\r\n"))) {
			cl = strcasestr(buf, "Content-Length:");
			need = (size_t)(end - buf) + 4 + (cl ? strtoul(cl + 15, NULL, 10) : 0);
		}
		if (end && got >= need)
			break;
	}
	if (!end || sscanf(buf, "HTTP/1.1 %d", &out->status) != 1)
		return;
	out->closes = strcasestr(buf, "Connection: close") != NULL;
	out->body_len = got - (size_t)(end + 4 - buf);
	if (out->body_len > sizeof(out->body))
		out->body_len = sizeof(out->body);
	memcpy(out->body, end + 4, out->body_len);
}

/* One request on a fresh connection. */
static int http_once(int port, const char *head, const void *body, size_t len,
		     struct http_reply *out)
{
	int fd = http_connect(port);

	if (fd < 0)
		return -1;
	http_call(fd, head, body, len, out);
	close(fd);
	return out->status;
}

static uint8_t *spans_for(const char *service, uint32_t first, size_t n, uint64_t t0, size_t *len)
{
	struct tb_span sp[64];
	struct tb_resource res = {
	    .attrs = {{"service.name", service, 0}}, .spans = sp, .nspans = n};

	for (size_t i = 0; i < n; i++) {
		sp[i] = tb_server_span(first + (uint32_t)i, t0 + i * 1000000);
		sp[i].attrs[0] = (struct tb_attr){"http.route", "/items/{id}", 0};
		sp[i].attrs[1] = (struct tb_attr){"http.request.method", "GET", 0};
		sp[i].attrs[2] = (struct tb_attr){"http.response.status_code", NULL, 200 + (int)i};
	}
	return tb_pack(&res, 1, len);
}

int main(void)
{
	char ci[1024], head[512];
	struct shipper *sh;
	struct otlp_receiver *r;
	struct otlp_grpc *g;
	struct otlp_http *h;
	struct otlp_stats st;
	struct otlp_receiver *up_r;
	struct otlp_grpc *up_g;
	struct otlp_forward *fwd;
	struct otlp_forward_stats fs;
	uint64_t up_rows = 0;
	char up_addr[64];
	struct shipper_stats ss;
	struct grpc_reply gr;
	struct http_reply hr;
	uint64_t t0 = (uint64_t)now_ns() - 60ull * 1000000000;
	uint8_t *buf;
	size_t len;
	PGconn *conn;
	int fd;

	log_set_level(TP_LOG_WARN);
	if (testdb_create("tp_otlp_grpc", ci, sizeof(ci)) != 0) {
		fprintf(stderr, "cannot create the test database\n");
		return 1;
	}
	/* an upstream collector (another receiver) that every export is forwarded to */
	up_r = otlp_receiver_new(
	    &(struct otlp_receiver_opts){.submit = submit_count, .submit_ctx = &up_rows});
	up_g = up_r ? otlp_grpc_start("127.0.0.1:0", up_r, NULL) : NULL;
	if (!up_g) {
		fprintf(stderr, "cannot start the upstream receiver\n");
		return 1;
	}
	snprintf(up_addr, sizeof(up_addr), "127.0.0.1:%d", otlp_grpc_port(up_g));
	fwd = otlp_forward_start(up_addr, 0);

	sh = shipper_start(&(struct shipper_opts){.conninfo = ci});
	r = otlp_receiver_new(&(struct otlp_receiver_opts){.max_bytes = MAX_BYTES,
							   .submit = submit_to_shipper,
							   .submit_ctx = sh,
							   .node = "n1",
							   .forward = forward_export,
							   .forward_ctx = fwd});
	g = otlp_grpc_start("127.0.0.1:0", r, NULL);
	h = otlp_http_start("127.0.0.1:0", r,
			    &(struct tp_conn_limits){.max_conns = 64,
						     .idle_timeout_ms = 2000,
						     .header_timeout_ms = 2000});
	if (!fwd || !sh || !r || !g || !h) {
		fprintf(stderr, "cannot start the receiver\n");
		return 1;
	}
	/* an address in use: refused with a reason, nothing started */
	{
		char busy[64];

		snprintf(busy, sizeof(busy), "127.0.0.1:%d", otlp_grpc_port(g));
		errno = 0;
		CHECK(otlp_grpc_start(busy, r, NULL) == NULL && errno == EADDRINUSE,
		      "gRPC on a busy port: errno %d", errno);
		snprintf(busy, sizeof(busy), "127.0.0.1:%d", otlp_http_port(h));
		errno = 0;
		CHECK(otlp_http_start(busy, r, NULL) == NULL && errno == EADDRINUSE,
		      "HTTP on a busy port: errno %d", errno);
		CHECK(otlp_http_start("nonsense", r, NULL) == NULL && errno == EINVAL,
		      "HTTP on a bad address: errno %d", errno);
	}

	/* gRPC: 3 good server spans, one with a zero trace id, one client span */
	{
		struct tb_span sp[5];
		struct tb_resource res = {
		    .attrs = {{"service.name", "grpc-svc", 0}}, .spans = sp, .nspans = 5};

		for (int i = 0; i < 5; i++) {
			sp[i] = tb_server_span(100 + (uint32_t)i, t0);
			sp[i].attrs[0] = (struct tb_attr){"http.route", "/g", 0};
		}
		memset(sp[3].trace, 0, 16);
		sp[4].kind = 3;
		buf = tb_pack(&res, 1, &len);
		grpc_export(otlp_grpc_port(g), buf, len, false, &gr);
		CHECK(gr.code == GRPC_STATUS_OK, "grpc ok: %d %s", gr.code, gr.details);
		CHECK(gr.rejected == 1 && strstr(gr.error, "trace_id=1"),
		      "partial success rejected=%lld \"%s\"", (long long)gr.rejected, gr.error);
		free(buf);
	}
	/* all good: no partial_success */
	buf = spans_for("grpc-svc", 110, 2, t0, &len);
	grpc_export(otlp_grpc_port(g), buf, len, false, &gr);
	CHECK(gr.code == GRPC_STATUS_OK && gr.rejected == 0, "grpc ok, nothing rejected: %d %lld",
	      gr.code, (long long)gr.rejected);
	free(buf);
	/* malformed */
	grpc_export(otlp_grpc_port(g), "\x0a\x05\x01", 3, false, &gr);
	CHECK(gr.code == GRPC_STATUS_INVALID_ARGUMENT && strstr(gr.details, "malformed"),
	      "grpc malformed: %d \"%s\"", gr.code, gr.details);
	/* over the limit */
	buf = spans_for("grpc-svc", 200, 64, t0, &len);
	CHECK(len > MAX_BYTES, "big message is %zu bytes", len);
	grpc_export(otlp_grpc_port(g), buf, len, false, &gr);
	CHECK(gr.code == GRPC_STATUS_RESOURCE_EXHAUSTED, "grpc too large: %d \"%s\"", gr.code,
	      gr.details);
	free(buf);

	/* HTTP: two exports on one kept-alive connection */
	fd = http_connect(otlp_http_port(h));
	buf = spans_for("http-svc", 300, 2, t0, &len);
	snprintf(head, sizeof(head),
		 "POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
		 "Content-Length: %zu\r\n\r\n",
		 len);
	http_call(fd, head, buf, len, &hr);
	CHECK(hr.status == 200 && !hr.closes, "http 200 keep-alive: %d", hr.status);
	free(buf);
	buf = spans_for("http-svc", 310, 1, t0, &len);
	snprintf(head, sizeof(head),
		 "POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
		 "Content-Length: %zu\r\n\r\n",
		 len);
	http_call(fd, head, buf, len, &hr);
	CHECK(hr.status == 200, "http 200 on the same connection: %d", hr.status);
	close(fd);
	free(buf);
	/* malformed body: 400 with a google.rpc.Status naming the problem */
	http_once(otlp_http_port(h),
		  "POST /v1/traces HTTP/1.1\r\nContent-Type: application/x-protobuf\r\n"
		  "Content-Length: 3\r\n\r\n",
		  "\x0a\x05\x01", 3, &hr);
	CHECK(hr.status == 400 && hr.body_len > 4 && hr.body[0] == 0x08 && hr.body[1] == 3 &&
		  memmem(hr.body, hr.body_len, "malformed", 9),
	      "http 400 with a Status body: %d", hr.status);
	CHECK(http_once(otlp_http_port(h),
			"POST /v1/logs HTTP/1.1\r\nContent-Type: application/x-protobuf\r\n"
			"Content-Length: 0\r\n\r\n",
			NULL, 0, &hr) == 404,
	      "http 404: %d", hr.status);
	CHECK(http_once(otlp_http_port(h), "GET /v1/traces HTTP/1.1\r\n\r\n", NULL, 0, &hr) == 405,
	      "http 405: %d", hr.status);
	CHECK(http_once(otlp_http_port(h),
			"POST /v1/traces HTTP/1.1\r\nContent-Type: application/x-protobuf\r\n"
			"Transfer-Encoding: chunked\r\n\r\n",
			NULL, 0, &hr) == 411,
	      "http 411: %d", hr.status);
	CHECK(http_once(otlp_http_port(h),
			"POST /v1/traces HTTP/1.1\r\nContent-Type: application/x-protobuf\r\n"
			"Content-Length: 100000\r\n\r\n",
			NULL, 0, &hr) == 413 &&
		  hr.closes,
	      "http 413 and close: %d", hr.status);
	CHECK(http_once(otlp_http_port(h),
			"POST /v1/traces HTTP/1.1\r\nContent-Type: application/json\r\n"
			"Content-Length: 2\r\n\r\n",
			"{}", 2, &hr) == 415 &&
		  memmem(hr.body, hr.body_len, "JSON", 4),
	      "http 415 for JSON: %d", hr.status);
	/* a client that sends half a request and stalls is closed after the timeout */
	fd = http_connect(otlp_http_port(h));
	CHECK(send(fd, "POST /v1/tr", 11, 0) == 11, "half request");
	{
		char c;
		ssize_t n = recv(fd, &c, 1, 0); /* 2 s server timeout, 10 s receive timeout */

		CHECK(n == 0, "stalled client closed: %zd %s", n, n < 0 ? strerror(errno) : "");
	}
	close(fd);

	/* more than 64 connections from one address: the extra ones replace idle ones */
	{
		int fds[64 + 2], evicted = 0;
		uint64_t timeouts, nrefused;
		struct tp_conn_stats cs;

		for (int i = 0; i < 64 + 2; i++)
			fds[i] = http_connect(otlp_http_port(h));
		usleep(300000);
		for (int i = 0; i < 64 + 2; i++) { /* which ones: the idle, oldest first */
			struct pollfd p = {.fd = fds[i], .events = POLLIN};
			char b[256];

			evicted += fds[i] >= 0 && poll(&p, 1, 0) == 1 &&
				   recv(fds[i], b, sizeof(b), MSG_DONTWAIT) == 0;
		}
		CHECK(evicted == 2, "two idle connections evicted: %d", evicted);
		for (int i = 0; i < 64 + 2; i++)
			if (fds[i] >= 0)
				close(fds[i]);
		otlp_http_get_counts(h, &timeouts, &nrefused);
		otlp_http_conn_stats(h, &cs);
		CHECK(nrefused == 0 && timeouts == 1 && cs.evicted_idle == 2,
		      "refused %llu timeouts %llu evicted_idle %llu", (unsigned long long)nrefused,
		      (unsigned long long)timeouts, (unsigned long long)cs.evicted_idle);
	}
	/* garbage on many connections, then a good export still works */
	srand(7);
	for (int i = 0; i < 50; i++) {
		char junk[2048];
		size_t n = (size_t)(rand() % (int)sizeof(junk)) + 1;

		for (size_t k = 0; k < n; k++)
			junk[k] = (char)rand();
		if (i % 2)
			memcpy(junk, "POST /v1/traces HTTP/1.1\r\n", n < 26 ? n : 26);
		fd = http_connect(otlp_http_port(h));
		if (fd >= 0) {
			if (send(fd, junk, n, MSG_NOSIGNAL) < 0)
				perror("send");
			close(fd);
		}
	}
	buf = spans_for("http-svc", 320, 1, t0, &len);
	snprintf(head, sizeof(head),
		 "POST /v1/traces HTTP/1.0\r\nContent-Type: application/x-protobuf\r\n"
		 "Content-Length: %zu\r\n\r\n",
		 len);
	CHECK(http_once(otlp_http_port(h), head, buf, len, &hr) == 200 && hr.closes,
	      "after garbage: 200 (HTTP/1.0 closes): %d", hr.status);
	free(buf);

	/* rows that cannot be queued: UNAVAILABLE / 503 with Retry-After, so senders retry */
	{
		struct otlp_receiver *r3 =
		    otlp_receiver_new(&(struct otlp_receiver_opts){.submit = submit_refuse});
		struct otlp_grpc *g3 = otlp_grpc_start("127.0.0.1:0", r3, NULL);
		struct otlp_http *h3 = otlp_http_start("127.0.0.1:0", r3, NULL);

		buf = spans_for("svc", 400, 1, t0, &len);
		grpc_export(otlp_grpc_port(g3), buf, len, false, &gr);
		CHECK(gr.code == GRPC_STATUS_UNAVAILABLE && strstr(gr.details, "cannot queue"),
		      "grpc unavailable: %d \"%s\"", gr.code, gr.details);
		snprintf(head, sizeof(head),
			 "POST /v1/traces HTTP/1.1\r\nContent-Type: application/x-protobuf\r\n"
			 "Content-Length: %zu\r\n\r\n",
			 len);
		http_once(otlp_http_port(h3), head, buf, len, &hr);
		CHECK(hr.status == 503 && hr.body[0] == 0x08 && hr.body[1] == 14,
		      "http 503 with UNAVAILABLE: %d", hr.status);
		free(buf);
		otlp_receiver_get_stats(r3, &st);
		CHECK(st.exports[OTLP_UNAVAILABLE] == 2 && st.rows_unqueued == 2 && st.rows == 0,
		      "unqueued rows counted: %llu", (unsigned long long)st.rows_unqueued);
		otlp_http_stop(h3);
		otlp_grpc_stop(g3);
		otlp_receiver_free(r3);
	}

	/* gzip bodies: inflated with a running limit of max_bytes, counted */
	{
		uint64_t rows4 = 0;
		struct otlp_receiver *r4 = otlp_receiver_new(&(struct otlp_receiver_opts){
		    .max_bytes = MAX_BYTES, .submit = submit_count, .submit_ctx = &rows4});
		struct otlp_http *h4 = otlp_http_start("127.0.0.1:0", r4, NULL);
		struct otlp_grpc *g4 = otlp_grpc_start("127.0.0.1:0", r4, NULL);
		size_t zlen;
		uint8_t *z, *zeros;

		buf = spans_for("gz-svc", 500, 3, t0, &len);
		z = tb_deflate(buf, len, 31, &zlen);
		snprintf(head, sizeof(head),
			 "POST /v1/traces HTTP/1.1\r\nContent-Type: application/x-protobuf\r\n"
			 "Content-Encoding: gzip\r\nContent-Length: %zu\r\n\r\n",
			 zlen);
		CHECK(http_once(otlp_http_port(h4), head, z, zlen, &hr) == 200 && rows4 == 3,
		      "http gzip body: %d, %llu rows", hr.status, (unsigned long long)rows4);
		/* the same over gRPC: the core hands the compressed bytes over, we inflate */
		grpc_export(otlp_grpc_port(g4), z, zlen, true, &gr);
		CHECK(gr.code == GRPC_STATUS_OK && rows4 == 6,
		      "grpc gzip message: \"%s\", %llu rows", gr.details,
		      (unsigned long long)rows4);
		free(z);
		free(buf);
		/* 1 MiB of zeros, about 1 KB of gzip: refused once it passes MAX_BYTES */
		zeros = calloc(1, 1 << 20);
		z = tb_deflate(zeros, 1 << 20, 31, &zlen);
		free(zeros);
		snprintf(head, sizeof(head),
			 "POST /v1/traces HTTP/1.1\r\nContent-Type: application/x-protobuf\r\n"
			 "Content-Encoding: gzip\r\nContent-Length: %zu\r\n\r\n",
			 zlen);
		CHECK(http_once(otlp_http_port(h4), head, z, zlen, &hr) == 413 &&
			  memmem(hr.body, hr.body_len, "inflates past the limit", 23),
		      "http gzip bomb of %zu bytes: %d", zlen, hr.status);
		grpc_export(otlp_grpc_port(g4), z, zlen, true, &gr);
		CHECK(gr.code == GRPC_STATUS_RESOURCE_EXHAUSTED &&
			  strstr(gr.details, "inflates past the limit"),
		      "grpc gzip bomb: \"%s\"", gr.details);
		/* not gzip: 400; another encoding: 415 */
		snprintf(head, sizeof(head),
			 "POST /v1/traces HTTP/1.1\r\nContent-Type: application/x-protobuf\r\n"
			 "Content-Encoding: gzip\r\nContent-Length: 7\r\n\r\n");
		CHECK(http_once(otlp_http_port(h4), head, "garbage", 7, &hr) == 400,
		      "http gzip body that is not gzip: %d", hr.status);
		CHECK(
		    http_once(otlp_http_port(h4),
			      "POST /v1/traces HTTP/1.1\r\nContent-Type: application/x-protobuf\r\n"
			      "Content-Encoding: br\r\nContent-Length: 2\r\n\r\n",
			      "xx", 2, &hr) == 415,
		    "http brotli: %d", hr.status);
		free(z);
		otlp_http_stop(h4);
		otlp_grpc_stop(g4);
		otlp_receiver_get_stats(r4, &st);
		CHECK(st.compressed == 5 && st.exports[OTLP_OK] == 2 &&
			  st.exports[OTLP_TOO_LARGE] == 2 && st.exports[OTLP_MALFORMED] == 1 &&
			  st.refused[OTLP_REFUSE_HTTP_415] == 1,
		      "gzip counted: compressed %llu ok %llu too_large %llu malformed %llu",
		      (unsigned long long)st.compressed, (unsigned long long)st.exports[OTLP_OK],
		      (unsigned long long)st.exports[OTLP_TOO_LARGE],
		      (unsigned long long)st.exports[OTLP_MALFORMED]);
		otlp_receiver_free(r4);
	}

	otlp_http_stop(h);
	otlp_grpc_stop(g);
	otlp_receiver_get_stats(r, &st);
	CHECK(st.exports[OTLP_OK] == 5 && st.exports_partial == 1, "ok exports %llu partial %llu",
	      (unsigned long long)st.exports[OTLP_OK], (unsigned long long)st.exports_partial);
	/* spans_for() gives statuses 200, 201, ...; the first export's spans have none */
	CHECK(st.rows_by_status[2] == 6 && st.rows_by_status[0] == 3,
	      "rows by status: 2xx %llu none %llu", (unsigned long long)st.rows_by_status[2],
	      (unsigned long long)st.rows_by_status[0]);
	CHECK(st.exports[OTLP_MALFORMED] == 2, "malformed exports %llu",
	      (unsigned long long)st.exports[OTLP_MALFORMED]);
	CHECK(st.rows == 9 && st.rejected[OTLP_REJ_TRACE_ID] == 1 && st.ignored_kind == 1,
	      "rows %llu", (unsigned long long)st.rows);
	/* refused by the transports before decoding, one of each answer sent above */
	CHECK(st.refused[OTLP_REFUSE_GRPC_TOO_LARGE] == 1 &&
		  st.refused[OTLP_REFUSE_HTTP_404] == 1 && st.refused[OTLP_REFUSE_HTTP_405] == 1 &&
		  st.refused[OTLP_REFUSE_HTTP_411] == 1 && st.refused[OTLP_REFUSE_HTTP_413] == 1 &&
		  st.refused[OTLP_REFUSE_HTTP_415] == 1,
	      "refusals: grpc_too_large %llu 404 %llu 405 %llu 411 %llu 413 %llu 415 %llu",
	      (unsigned long long)st.refused[OTLP_REFUSE_GRPC_TOO_LARGE],
	      (unsigned long long)st.refused[OTLP_REFUSE_HTTP_404],
	      (unsigned long long)st.refused[OTLP_REFUSE_HTTP_405],
	      (unsigned long long)st.refused[OTLP_REFUSE_HTTP_411],
	      (unsigned long long)st.refused[OTLP_REFUSE_HTTP_413],
	      (unsigned long long)st.refused[OTLP_REFUSE_HTTP_415]);

	/* the 5 exports that decoded, forwarded unchanged: the upstream decodes the same rows */
	otlp_forward_stop(fwd, 10000, &fs);
	CHECK(fs.submitted == 5 && fs.sent == 5 && fs.failed == 0 && fs.dropped == 0,
	      "forwarded: submitted %llu sent %llu failed %llu dropped %llu",
	      (unsigned long long)fs.submitted, (unsigned long long)fs.sent,
	      (unsigned long long)fs.failed, (unsigned long long)fs.dropped);
	/* an upstream that is down: counted as failed, nothing else happens */
	fwd = otlp_forward_start("127.0.0.1:1", 0);
	CHECK(fwd && otlp_forward_submit(fwd, "", 0) == 0, "forward to a closed port");
	otlp_forward_stop(fwd, 10000, &fs);
	CHECK(fs.submitted == 1 && fs.failed == 1 && fs.sent == 0, "failed %llu",
	      (unsigned long long)fs.failed);
	otlp_grpc_stop(up_g);
	CHECK(up_rows == 9, "the upstream got the 9 rows: %llu", (unsigned long long)up_rows);
	otlp_receiver_free(up_r);

	CHECK(shipper_stop(sh, 20000) == 0, "shipper delivered everything");
	shipper_get_stats(sh, &ss);
	CHECK(ss.requests_submitted == 9 && ss.requests_delivered == 9 && ss.requests_invalid == 0,
	      "shipper requests submitted %llu delivered %llu",
	      (unsigned long long)ss.requests_submitted, (unsigned long long)ss.requests_delivered);
	conn = testdb_connect(ci);
	CHECK(testdb_scalar(conn, "SELECT count(*) FROM traceprof.requests") == 9,
	      "9 request rows stored");
	CHECK(testdb_scalar(conn,
			    "SELECT count(*) FROM traceprof.requests q JOIN traceprof.sources "
			    "s USING (source_id) WHERE s.service = 'http-svc' AND s.node = "
			    "'n1'") == 4,
	      "4 rows of http-svc");
	CHECK(testdb_scalar(conn, "SELECT count(*) FROM traceprof.requests q JOIN traceprof.routes "
				  "r USING (route_id) WHERE r.method = 'GET' AND r.route = "
				  "'/items/{id}' AND q.status_code IN (200, 201) AND "
				  "q.duration_us = 1000") == 6,
	      "route, method, status and duration stored");
	{
		char sql[256];

		snprintf(sql, sizeof(sql),
			 "SELECT count(*) FROM traceprof.requests WHERE start_time = "
			 "'epoch'::timestamptz + %llu * interval '1 microsecond'",
			 (unsigned long long)(t0 / 1000));
		/* at t0: 3 of the first gRPC export, the first span of each later one */
		CHECK(testdb_scalar(conn, sql) == 7, "start times stored");
	}
	PQfinish(conn);
	shipper_free(sh);
	otlp_receiver_free(r);
	return check_done();
}
