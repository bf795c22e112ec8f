/*
 * demo_frontend.c - POST /api/checkout of traceprof-demo-frontend (see
 * demo_frontend.h).
 *
 * Per request, on the worker thread that serves it (inside its span):
 * parseOrder (0.8 ms CPU at work scale 1) checks the order, then
 * callPayment sends the same order and X-Demo-Path to the payment service
 * with traceparent = this span, and blocks until the answer. A slow payment
 * (400 ms of CPU over there) makes the frontend's span long while its own
 * CPU stays small: the profile of the trace shows where the time went.
 *
 * Each worker thread keeps one keep-alive connection to the payment service
 * (thread-local), reconnecting once when a kept connection was closed.
 */
#include <errno.h>
#include <stdbool.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "demo_frontend.h"
#include "demo_http.h"
#include "demo_routes.h"
#include "demo_work.h"
#include "traceprof/log.h"

#if defined(__clang__)
#define NOINLINE __attribute__((noinline))
#else
#define NOINLINE __attribute__((noipa)) /* no inlining and no renamed clones */
#endif

#define PAYMENT_TIMEOUT_S 30 /* a payment answer later than this fails the checkout */

static char pay_host[256];				      /* the payment service's host */
static char pay_port[8];				      /* and port */
static __thread int pay_fd = -1;			      /* this worker's connection to it */
static __thread char pay_buf[HTTP_MAX_HEAD + DEMO_BODY_SIZE]; /* its answer */

static int pay_connect(void)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
	struct timeval tv = {.tv_sec = PAYMENT_TIMEOUT_S};
	struct addrinfo *ai;
	int one = 1, rc = -ECONNREFUSED;

	if (getaddrinfo(pay_host, pay_port, &hints, &ai))
		return -EHOSTUNREACH;
	for (struct addrinfo *a = ai; a; a = a->ai_next) {
		int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);

		if (fd < 0)
			continue;
		if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
			setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
			setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
			setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
			pay_fd = fd;
			rc = 0;
			break;
		}
		rc = -errno;
		close(fd);
	}
	freeaddrinfo(ai);
	return rc;
}

static void pay_close(void)
{
	if (pay_fd >= 0)
		close(pay_fd);
	pay_fd = -1;
}

/* One exchange on pay_fd: the answer's head in *resp, body after it in pay_buf. */
static int pay_exchange(const char *head, size_t head_len, const char *body, size_t body_len,
			struct http_response *resp, bool *got_bytes)
{
	size_t have = 0;
	int err;

	*got_bytes = false;
	if ((err = demo_send_all(pay_fd, head, head_len)) != 0 ||
	    (err = demo_send_all(pay_fd, body, body_len)) != 0)
		return err;
	for (;;) {
		ssize_t n = recv(pay_fd, pay_buf + have, sizeof(pay_buf) - have, 0);
		int rc;

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -ECONNRESET;
		have += (size_t)n;
		*got_bytes = true;
		rc = http_parse_response(pay_buf, have, resp);
		if (rc == -EAGAIN)
			continue;
		if (rc)
			return rc;
		if (resp->head_len + resp->content_length > sizeof(pay_buf))
			return -EMSGSIZE;
		if (have >= resp->head_len + resp->content_length)
			break;
	}
	if (!resp->keep_alive)
		pay_close();
	return 0;
}

/*
 * POSTs the order to the payment service inside span sp and waits for the
 * answer. Returns its status (its body is at pay_buf + resp->head_len), or
 * -errno when none came.
 */
static NOINLINE int callPayment(const struct demo_span *sp, const char *path, const char *body,
				size_t body_len, struct http_response *resp)
{
	char head[1024];
	int n = snprintf(head, sizeof(head),
			 "POST /api/pay HTTP/1.1\r\nHost: %s:%s\r\ntraceparent: %s\r\n"
			 "%s%s%sUser-Agent: traceprof-demo-frontend\r\n"
			 "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n",
			 pay_host, pay_port, sp->traceresponse, path ? "X-Demo-Path: " : "",
			 path ? path : "", path ? "\r\n" : "", body_len);

	if (n < 0 || (size_t)n >= sizeof(head))
		return -ENOSPC;
	for (int attempt = 0;; attempt++) {
		bool reused = pay_fd >= 0, got_bytes;
		int rc;

		if (pay_fd < 0 && (rc = pay_connect()))
			return rc;
		rc = pay_exchange(head, (size_t)n, body, body_len, resp, &got_bytes);
		if (!rc)
			return resp->status;
		pay_close();
		if (!reused || got_bytes || attempt > 0)
			return rc;
	}
}

static NOINLINE void handle_checkout_frontend(const struct http_request *req, const char *body,
					      const struct demo_span *sp, struct demo_reply *r)
{
	const struct http_header *h =
	    http_find_header(req->headers, req->n_headers, "x-demo-path", NULL);
	const char *path = NULL;
	struct http_response resp;
	struct demo_order order;
	int status;

	if (h) {
		if (h->value_len == 4 && !memcmp(h->value, "fast", 4))
			path = "fast";
		else if (h->value_len == 4 && !memcmp(h->value, "slow", 4))
			path = "slow";
		else if (h->value_len == 4 && !memcmp(h->value, "fail", 4))
			path = "fail";
		else
			return demo_reply_error(r, 400, "X-Demo-Path must be fast, slow or fail");
	}
	if (parseOrder(body, req->content_length, &order))
		return demo_reply_error(r, 400, "invalid order");
	status = callPayment(sp, path, body, req->content_length, &resp);
	if (status < 0) {
		log_warn("payment call failed: %s trace_id=%s", strerror(-status), sp->trace_hex);
		return demo_reply_error(r, 502, "payment service unavailable");
	}
	if (status != 200)
		return demo_reply_error(r, status == 500 ? 500 : 502, "payment failed");
	if (resp.content_length > sizeof(r->buf))
		return demo_reply_error(r, 502, "payment answer too large");
	memcpy(r->buf, pay_buf + resp.head_len, resp.content_length);
	r->status = 200;
	r->content_type = "application/json";
	r->body = r->buf;
	r->body_len = resp.content_length;
}

int demo_frontend_init(const char *payment)
{
	const char *colon = payment ? strrchr(payment, ':') : NULL;
	double port;

	if (!colon || colon == payment || (size_t)(colon - payment) >= sizeof(pay_host)) {
		log_error("--payment: '%s' is not HOST:PORT", payment ? payment : "");
		return -EINVAL;
	}
	if (demo_parse_number("--payment port", colon + 1, 1, 65535, &port) || port != (int)port)
		return -EINVAL;
	snprintf(pay_host, sizeof(pay_host), "%.*s", (int)(colon - payment), payment);
	snprintf(pay_port, sizeof(pay_port), "%d", (int)port);
	demo_route_set("POST", "/api/pay", NULL);
	demo_route_set("POST", "/api/checkout", handle_checkout_frontend);
	return 0;
}
