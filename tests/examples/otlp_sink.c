/*
 * otlp_sink.c - a minimal OTLP/HTTP traces receiver for the tests: accepts
 * POSTs of ExportTraceServiceRequest (protobuf), decodes them with the
 * protobuf-c code generated from proto/, answers 200, and writes one CSV
 * line per span:
 *
 *   service,trace_id,span_id,parent_span_id,name,kind,http_status,error,start_ns,end_ns
 *
 * usage: otlp_sink OUT.csv  (prints "listening on 127.0.0.1:PORT" when
 * ready; SIGTERM or SIGINT ends it). One thread, poll over the listening
 * socket and up to MAX_CONNS keep-alive connections. A malformed body is
 * answered 400 and counted on stderr.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "opentelemetry/proto/collector/trace/v1/trace_service.pb-c.h"

#define MAX_CONNS 32
#define BUF_SIZE  (4 << 20)

struct conn {
	int fd;	    /* -1: free */
	char *buf;  /* received bytes */
	size_t len; /* bytes in buf */
};

static volatile sig_atomic_t stop;
static FILE *out;
static unsigned long bad_bodies;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static void hex(const ProtobufCBinaryData *b, char *s)
{
	for (size_t i = 0; i < b->len && i < 16; i++)
		sprintf(s + 2 * i, "%02x", b->data[i]);
	s[2 * (b->len < 16 ? b->len : 16)] = '\0';
}

static const char *service_of(const Opentelemetry__Proto__Trace__V1__ResourceSpans *rs)
{
	for (size_t i = 0; rs->resource && i < rs->resource->n_attributes; i++) {
		Opentelemetry__Proto__Common__V1__KeyValue *kv = rs->resource->attributes[i];

		if (!strcmp(kv->key, "service.name") && kv->value &&
		    kv->value->value_case ==
			OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE)
			return kv->value->string_value;
	}
	return "";
}

static int64_t status_of(const Opentelemetry__Proto__Trace__V1__Span *sp)
{
	for (size_t i = 0; i < sp->n_attributes; i++)
		if (!strcmp(sp->attributes[i]->key, "http.response.status_code") &&
		    sp->attributes[i]->value &&
		    sp->attributes[i]->value->value_case ==
			OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE)
			return sp->attributes[i]->value->int_value;
	return 0;
}

/* Writes the spans of one body; false when it does not decode. */
static bool write_spans(const uint8_t *body, size_t len)
{
	Opentelemetry__Proto__Collector__Trace__V1__ExportTraceServiceRequest *req =
	    opentelemetry__proto__collector__trace__v1__export_trace_service_request__unpack(
		NULL, len, body);

	if (!req)
		return false;
	for (size_t r = 0; r < req->n_resource_spans; r++) {
		Opentelemetry__Proto__Trace__V1__ResourceSpans *rs = req->resource_spans[r];

		for (size_t k = 0; k < rs->n_scope_spans; k++)
			for (size_t j = 0; j < rs->scope_spans[k]->n_spans; j++) {
				Opentelemetry__Proto__Trace__V1__Span *sp =
				    rs->scope_spans[k]->spans[j];
				char tid[33], sid[17], pid[17];

				hex(&sp->trace_id, tid);
				hex(&sp->span_id, sid);
				hex(&sp->parent_span_id, pid);
				fprintf(
				    out,
				    "%s,%s,%s,%s,%s,%d,%" PRId64 ",%d,%" PRIu64 ",%" PRIu64 "\n",
				    service_of(rs), tid, sid, pid, sp->name, (int)sp->kind,
				    status_of(sp),
				    sp->status &&
					sp->status->code ==
					    OPENTELEMETRY__PROTO__TRACE__V1__STATUS__STATUS_CODE__STATUS_CODE_ERROR,
				    sp->start_time_unix_nano, sp->end_time_unix_nano);
			}
	}
	fflush(out);
	opentelemetry__proto__collector__trace__v1__export_trace_service_request__free_unpacked(
	    req, NULL);
	return true;
}

/* Serves the complete requests in c; false when the connection must close. */
static bool serve(struct conn *c)
{
	for (;;) {
		char *end, *cl;
		size_t head, body;
		const char *answer;

		c->buf[c->len] = '\0';
		end = strstr(c->buf, "\r\n\r\n");
		if (!end)
			return c->len < BUF_SIZE - 1;
		cl = strcasestr(c->buf, "\r\ncontent-length:");
		if (!cl || cl > end)
			return false;
		head = (size_t)(end - c->buf) + 4;
		body = strtoul(cl + 17, NULL, 10);
		if (head + body >= BUF_SIZE)
			return false;
		if (c->len < head + body)
			return true;
		if (write_spans((uint8_t *)c->buf + head, body)) {
			answer = "HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\n"
				 "Content-Length: 0\r\n\r\n";
		} else {
			bad_bodies++;
			answer = "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n";
		}
		if (write(c->fd, answer, strlen(answer)) < 0)
			return false;
		memmove(c->buf, c->buf + head + body, c->len - head - body);
		c->len -= head + body;
	}
}

int main(int argc, char **argv)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof(a);
	struct conn conns[MAX_CONNS];
	struct sigaction sa = {.sa_handler = on_signal};
	int lfd;

	if (argc != 2) {
		fprintf(stderr, "usage: otlp_sink OUT.csv\n");
		return 2;
	}
	out = fopen(argv[1], "w");
	if (!out) {
		fprintf(stderr, "otlp_sink: cannot open %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof(a)) || listen(lfd, 64) ||
	    getsockname(lfd, (struct sockaddr *)&a, &al)) {
		fprintf(stderr, "otlp_sink: cannot listen: %s\n", strerror(errno));
		return 1;
	}
	for (int i = 0; i < MAX_CONNS; i++)
		conns[i] = (struct conn){.fd = -1};
	printf("listening on 127.0.0.1:%d\n", ntohs(a.sin_port));
	fflush(stdout);
	while (!stop) {
		struct pollfd p[MAX_CONNS + 1];
		int n = 0, map[MAX_CONNS + 1];

		p[n] = (struct pollfd){.fd = lfd, .events = POLLIN};
		map[n++] = -1;
		for (int i = 0; i < MAX_CONNS; i++)
			if (conns[i].fd >= 0) {
				p[n] = (struct pollfd){.fd = conns[i].fd, .events = POLLIN};
				map[n++] = i;
			}
		if (poll(p, (nfds_t)n, 200) <= 0)
			continue;
		for (int k = 0; k < n; k++) {
			if (!p[k].revents)
				continue;
			if (map[k] < 0) {
				int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);

				for (int i = 0; fd >= 0 && i < MAX_CONNS; i++)
					if (conns[i].fd < 0) {
						conns[i] = (struct conn){.fd = fd,
									 .buf = malloc(BUF_SIZE)};
						fd = -1;
					}
				if (fd >= 0)
					close(fd); /* full */
				continue;
			}
			struct conn *c = &conns[map[k]];
			ssize_t r = read(c->fd, c->buf + c->len, BUF_SIZE - 1 - c->len);

			if (r > 0)
				c->len += (size_t)r;
			if (r <= 0 || !serve(c)) {
				close(c->fd);
				free(c->buf);
				*c = (struct conn){.fd = -1};
			}
		}
	}
	if (bad_bodies)
		fprintf(stderr, "otlp_sink: %lu bodies did not decode\n", bad_bodies);
	fclose(out);
	return bad_bodies ? 1 : 0;
}
