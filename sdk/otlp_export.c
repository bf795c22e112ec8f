/*
 * otlp_export.c - OTLP/HTTP for the SDK's server spans: the endpoint URL,
 * the protobuf body of an ExportTraceServiceRequest, and a minimal HTTP/1.1
 * client that POSTs it.
 *
 * Everything here runs on the exporter thread only (spans.c), off the
 * request path. The encoder is hand-written (the SDK stays libc-only): the
 * spans are encoded first at a fixed offset, then the resource and scope
 * prefix, whose lengths depend on the spans' total, is written right before
 * them. The client keeps one connection open between exports, reads the
 * whole answer (Content-Length or none; a chunked or unframed answer closes
 * the connection after its status line) and bounds every step by a
 * deadline with poll(2).
 */
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include "sdk_internal.h"

/* ---- endpoint ---- */

int tp_endpoint_parse(const char *url, struct tp_endpoint *ep)
{
	const char *p, *host_end, *port = NULL, *path;
	size_t host_len, port_len;

	if (!url || strncasecmp(url, "http://", 7))
		return -EINVAL;
	p = url + 7;
	path = p + strcspn(p, "/?#");
	if (*p == '[') {
		host_end = memchr(p, ']', (size_t)(path - p));
		if (!host_end)
			return -EINVAL;
		p++;
		if (host_end + 1 < path) {
			if (host_end[1] != ':')
				return -EINVAL;
			port = host_end + 2;
		}
	} else {
		host_end = memchr(p, ':', (size_t)(path - p));
		if (host_end)
			port = host_end + 1;
		else
			host_end = path;
	}
	host_len = (size_t)(host_end - p);
	if (!host_len || host_len >= sizeof(ep->host) || memchr(p, '@', host_len))
		return -EINVAL;
	memcpy(ep->host, p, host_len);
	ep->host[host_len] = '\0';
	if (port) {
		unsigned long v = 0;

		port_len = (size_t)(path - port);
		if (!port_len || port_len > 5)
			return -EINVAL;
		for (size_t i = 0; i < port_len; i++) {
			if (port[i] < '0' || port[i] > '9')
				return -EINVAL;
			v = v * 10 + (unsigned long)(port[i] - '0');
		}
		if (!v || v > 65535)
			return -EINVAL;
		snprintf(ep->port, sizeof(ep->port), "%lu", v);
	} else {
		snprintf(ep->port, sizeof(ep->port), "80");
	}
	if (*path != '/' && *path != '\0')
		return -EINVAL; /* a query or fragment without a path */
	if (strlen(path) >= sizeof(ep->path))
		return -EINVAL;
	snprintf(ep->path, sizeof(ep->path), "%s", *path ? path : "/");
	for (const char *c = ep->path; *c; c++)
		if ((unsigned char)*c <= ' ' || *c == 0x7f)
			return -EINVAL;
	return 0;
}

/* ---- protobuf ---- */

#define SPAN_KIND_SERVER    2
#define STATUS_CODE_ERROR   2
#define FLAGS_HAS_IS_REMOTE 0x100u /* SpanFlags: the parent's remoteness is known */
#define FLAGS_IS_REMOTE	    0x200u /* SpanFlags: the parent is in another process */

/* Worst case bytes of one encoded span, its field header included. */
#define SPAN_MAX_SIZE 512
/* Bytes reserved before the spans for the resource and scope prefix. */
#define PREFIX_MAX_SIZE 512

static uint8_t *put_tag(uint8_t *p, unsigned field, unsigned wire)
{
	return pb_put_varint(p, (uint64_t)field << 3 | wire);
}

static uint8_t *put_bytes(uint8_t *p, unsigned field, const void *data, size_t len)
{
	p = put_tag(p, field, PB_WT_LEN);
	p = pb_put_varint(p, len);
	memcpy(p, data, len);
	return p + len;
}

static uint8_t *put_fixed(uint8_t *p, unsigned field, uint64_t v, size_t bytes)
{
	p = put_tag(p, field, bytes == 8 ? PB_WT_FIXED64 : PB_WT_FIXED32);
	for (size_t i = 0; i < bytes; i++)
		*p++ = (uint8_t)(v >> (8 * i)); /* little endian */
	return p;
}

/* A KeyValue with a string value, as field `field` of the enclosing message. */
static uint8_t *put_attr_str(uint8_t *p, unsigned field, const char *key, const char *value)
{
	size_t klen = strlen(key), vlen = strlen(value);
	size_t any = 1 + pb_varint_size(vlen) + vlen;
	size_t kv = 1 + pb_varint_size(klen) + klen + 1 + pb_varint_size(any) + any;

	p = put_tag(p, field, PB_WT_LEN);
	p = pb_put_varint(p, kv);
	p = put_bytes(p, 1, key, klen);
	p = put_tag(p, 2, PB_WT_LEN);
	p = pb_put_varint(p, any);
	return put_bytes(p, 1, value, vlen);
}

/* A KeyValue with an int value. */
static uint8_t *put_attr_int(uint8_t *p, unsigned field, const char *key, int64_t value)
{
	size_t klen = strlen(key);
	size_t any = 1 + pb_varint_size((uint64_t)value);
	size_t kv = 1 + pb_varint_size(klen) + klen + 1 + pb_varint_size(any) + any;

	p = put_tag(p, field, PB_WT_LEN);
	p = pb_put_varint(p, kv);
	p = put_bytes(p, 1, key, klen);
	p = put_tag(p, 2, PB_WT_LEN);
	p = pb_put_varint(p, any);
	p = put_tag(p, 3, PB_WT_VARINT);
	return pb_put_varint(p, (uint64_t)value);
}

static bool all_zero(const uint8_t *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (b[i])
			return false;
	return true;
}

/* The Span message body of s at p; returns the end. At most SPAN_MAX_SIZE - 3 bytes. */
static uint8_t *put_span_body(uint8_t *p, const struct tp_span_rec *s)
{
	char name[TP_SPAN_METHOD_SIZE + TP_SPAN_ROUTE_SIZE];
	bool root = all_zero(s->parent_span_id, sizeof(s->parent_span_id));
	uint32_t flags = s->trace_flags | FLAGS_HAS_IS_REMOTE | (root ? 0 : FLAGS_IS_REMOTE);

	if (s->method[0] && s->route[0])
		snprintf(name, sizeof(name), "%s %s", s->method, s->route);
	else if (s->method[0])
		snprintf(name, sizeof(name), "%s", s->method);
	else
		snprintf(name, sizeof(name), "%s", s->route[0] ? s->route : "request");
	p = put_bytes(p, 1, s->trace_id, 16);
	p = put_bytes(p, 2, s->span_id, 8);
	if (!root)
		p = put_bytes(p, 4, s->parent_span_id, 8);
	p = put_bytes(p, 5, name, strlen(name));
	p = put_tag(p, 6, PB_WT_VARINT);
	p = pb_put_varint(p, SPAN_KIND_SERVER);
	p = put_fixed(p, 7, (uint64_t)s->start_unix_ns, 8);
	p = put_fixed(p, 8, (uint64_t)s->end_unix_ns, 8);
	if (s->method[0])
		p = put_attr_str(p, 9, "http.request.method", s->method);
	if (s->route[0])
		p = put_attr_str(p, 9, "http.route", s->route);
	if (s->status_code)
		p = put_attr_int(p, 9, "http.response.status_code", s->status_code);
	if (s->status_code >= 500 && s->status_code <= 599) {
		/* Status { code = ERROR } */
		p = put_tag(p, 15, PB_WT_LEN);
		p = pb_put_varint(p, 2);
		p = put_tag(p, 3, PB_WT_VARINT);
		p = pb_put_varint(p, STATUS_CODE_ERROR);
	}
	return put_fixed(p, 16, flags, 4);
}

size_t tp_otlp_max_size(size_t n)
{
	return PREFIX_MAX_SIZE + n * SPAN_MAX_SIZE;
}

size_t tp_otlp_encode(const struct tp_span_rec *spans, size_t n, const char *service_name,
		      uint8_t *out)
{
	uint8_t res[400], scope[64], *p, *start;
	uint8_t *spans_start = out + PREFIX_MAX_SIZE;
	size_t res_len, scope_len, spans_len, ss_len, rs_len, prefix_len;
	char name[256];

	/* spans, each as ScopeSpans.spans (field 2) */
	p = spans_start;
	for (size_t i = 0; i < n; i++) {
		uint8_t body[SPAN_MAX_SIZE];
		size_t len = (size_t)(put_span_body(body, &spans[i]) - body);

		p = put_bytes(p, 2, body, len);
	}
	spans_len = (size_t)(p - spans_start);

	/* Resource { attributes }; the name is cut so the prefix stays bounded */
	snprintf(name, sizeof(name), "%s", service_name);
	p = put_attr_str(res, 1, "service.name", name);
	p = put_attr_str(p, 1, "telemetry.sdk.name", "traceprof");
	p = put_attr_str(p, 1, "telemetry.sdk.language", "c");
	res_len = (size_t)(p - res);
	/* InstrumentationScope { name } */
	scope_len = (size_t)(put_bytes(scope, 1, "traceprof-sdk", 13) - scope);

	ss_len = 1 + pb_varint_size(scope_len) + scope_len + spans_len;
	rs_len = 1 + pb_varint_size(res_len) + res_len + 1 + pb_varint_size(ss_len) + ss_len;
	prefix_len = 1 + pb_varint_size(rs_len) + (rs_len - spans_len);
	start = spans_start - prefix_len;
	p = put_tag(start, 1, PB_WT_LEN); /* ExportTraceServiceRequest.resource_spans */
	p = pb_put_varint(p, rs_len);
	p = put_bytes(p, 1, res, res_len); /* ResourceSpans.resource */
	p = put_tag(p, 2, PB_WT_LEN);	   /* ResourceSpans.scope_spans */
	p = pb_put_varint(p, ss_len);
	p = put_bytes(p, 1, scope, scope_len); /* ScopeSpans.scope */
	/* p == spans_start now */
	memmove(out, start, prefix_len + spans_len);
	return prefix_len + spans_len;
}

/* ---- HTTP/1.1 client ---- */

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits for events on fd until deadline: 0, -ETIMEDOUT or -errno. */
static int wait_fd(int fd, short events, int64_t deadline)
{
	struct pollfd pfd = {.fd = fd, .events = events};

	for (;;) {
		int64_t left = deadline - now_ms();
		int rc;

		if (left <= 0)
			return -ETIMEDOUT;
		rc = poll(&pfd, 1, left > 60000 ? 60000 : (int)left);
		if (rc > 0)
			return 0;
		if (rc < 0 && errno != EINTR)
			return -errno;
	}
}

static int connect_endpoint(const struct tp_endpoint *ep, int64_t deadline)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_family = AF_UNSPEC};
	struct addrinfo *ai, *a;
	int err = -ECONNREFUSED, rc;

	rc = getaddrinfo(ep->host, ep->port, &hints, &ai);
	if (rc)
		return rc == EAI_SYSTEM ? -errno : -EHOSTUNREACH;
	for (a = ai; a; a = a->ai_next) {
		int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
				a->ai_protocol);
		int one = 1, soerr = 0;
		socklen_t sl = sizeof(soerr);

		if (fd < 0) {
			err = -errno;
			continue;
		}
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
			freeaddrinfo(ai);
			return fd;
		}
		if (errno != EINPROGRESS) {
			err = -errno;
			close(fd);
			continue;
		}
		err = wait_fd(fd, POLLOUT, deadline);
		if (!err && getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) == 0 && !soerr) {
			freeaddrinfo(ai);
			return fd;
		}
		if (!err)
			err = soerr ? -soerr : -ECONNREFUSED;
		close(fd);
		if (err == -ETIMEDOUT)
			break;
	}
	freeaddrinfo(ai);
	return err;
}

static int send_all(int fd, const void *buf, size_t len, int64_t deadline)
{
	const char *p = buf;

	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);

		if (n > 0) {
			p += n;
			len -= (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			int err = wait_fd(fd, POLLOUT, deadline);

			if (err)
				return err;
			continue;
		}
		return n < 0 ? -errno : -EPIPE;
	}
	return 0;
}

/* Reads at most cap bytes; 0 at end of stream, -errno or -ETIMEDOUT. */
static ssize_t recv_some(int fd, char *buf, size_t cap, int64_t deadline)
{
	for (;;) {
		ssize_t n = recv(fd, buf, cap, 0);

		if (n >= 0)
			return n;
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return -errno;
		int err = wait_fd(fd, POLLIN, deadline);

		if (err)
			return err;
	}
}

/* Value of header name in the head (lines after the status line), or NULL. */
static const char *find_header(const char *head, const char *name, size_t *len)
{
	size_t nlen = strlen(name);

	for (const char *l = strstr(head, "\r\n"); l && l[2] != '\r'; l = strstr(l + 2, "\r\n")) {
		const char *h = l + 2, *v, *end = strstr(h, "\r\n");

		if (!end || strncasecmp(h, name, nlen) || h[nlen] != ':')
			continue;
		v = h + nlen + 1;
		while (*v == ' ' || *v == '\t')
			v++;
		*len = (size_t)(end - v);
		while (*len && (v[*len - 1] == ' ' || v[*len - 1] == '\t'))
			(*len)--;
		return v;
	}
	return NULL;
}

/*
 * Reads one answer: its status, and whether the connection stays usable.
 * The body is read and ignored (OTLP's partial success is not acted on).
 */
static int read_response(int fd, int64_t deadline, bool *keep)
{
	char buf[4096];
	size_t have = 0, head_len, vlen;
	const char *end, *v;
	unsigned long long body = 0;
	int status, minor;

	for (;;) {
		ssize_t n;

		buf[have] = '\0';
		end = strstr(buf, "\r\n\r\n");
		if (end)
			break;
		if (have == sizeof(buf) - 1)
			return -EPROTO; /* a head larger than we care to read */
		n = recv_some(fd, buf + have, sizeof(buf) - 1 - have, deadline);
		if (n < 0)
			return (int)n;
		if (n == 0)
			return -ECONNRESET;
		have += (size_t)n;
	}
	head_len = (size_t)(end - buf) + 4;
	if (sscanf(buf, "HTTP/1.%d %3d", &minor, &status) != 2 || status < 100 || status > 999)
		return -EPROTO;
	*keep = minor >= 1;
	v = find_header(buf, "connection", &vlen);
	if (v && vlen == 5 && !strncasecmp(v, "close", 5))
		*keep = false;
	if (v && vlen == 10 && !strncasecmp(v, "keep-alive", 10))
		*keep = true;
	if (find_header(buf, "transfer-encoding", &vlen)) {
		*keep = false; /* chunked: not decoded, the connection is dropped */
		return status;
	}
	v = find_header(buf, "content-length", &vlen);
	if (v) {
		char *e;
		char num[24];

		if (!vlen || vlen >= sizeof(num))
			return -EPROTO;
		memcpy(num, v, vlen);
		num[vlen] = '\0';
		body = strtoull(num, &e, 10);
		if (*e)
			return -EPROTO;
	} else if (status >= 200 && status != 204 && status != 304) {
		*keep = false; /* body until close: not waited for */
		return status;
	}
	/* discard the body */
	have -= head_len;
	while (have < body) {
		ssize_t n = recv_some(fd, buf, sizeof(buf) - 1, deadline);

		if (n < 0)
			return (int)n;
		if (n == 0)
			return -ECONNRESET;
		have += (size_t)n;
	}
	if (have > body)
		*keep = false; /* more than the answer: out of step, start again */
	return status;
}

void tp_http_close(struct tp_http *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
}

static int post_once(struct tp_http *c, const uint8_t *body, size_t len, int64_t deadline)
{
	char head[1024];
	bool keep = false;
	int n, err;

	if (c->fd < 0) {
		int fd = connect_endpoint(&c->ep, deadline);

		if (fd < 0)
			return fd;
		c->fd = fd;
	}
	n = snprintf(head, sizeof(head),
		     "POST %s HTTP/1.1\r\nHost: %s%s%s:%s\r\nUser-Agent: traceprof-sdk\r\n"
		     "Content-Type: application/x-protobuf\r\nContent-Length: %zu\r\n\r\n",
		     c->ep.path, strchr(c->ep.host, ':') ? "[" : "", c->ep.host,
		     strchr(c->ep.host, ':') ? "]" : "", c->ep.port, len);
	if (n < 0 || (size_t)n >= sizeof(head))
		return -EINVAL;
	err = send_all(c->fd, head, (size_t)n, deadline);
	if (!err)
		err = send_all(c->fd, body, len, deadline);
	if (err)
		return err;
	err = read_response(c->fd, deadline, &keep);
	if (err < 0 || !keep)
		tp_http_close(c);
	return err;
}

int tp_http_post(struct tp_http *c, const uint8_t *body, size_t len, int timeout_ms)
{
	int64_t deadline = now_ms() + timeout_ms;
	bool reused = c->fd >= 0;
	int rc = post_once(c, body, len, deadline);

	/* a kept connection the server closed meanwhile: once more on a new one */
	if (rc < 0 && reused && rc != -ETIMEDOUT) {
		tp_http_close(c);
		rc = post_once(c, body, len, deadline);
	}
	if (rc < 0)
		tp_http_close(c);
	return rc;
}
