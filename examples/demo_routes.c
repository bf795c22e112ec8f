/*
 * demo_routes.c - the routes of the demo service and the server span of a
 * request (see demo_routes.h).
 *
 * Handlers are never inlined (NOINLINE), so each route shows up in a
 * profile as handle_<route> under route_request, above the business
 * functions of demo_work.c that carry its CPU.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "demo_routes.h"
#include "demo_work.h"
#include "traceprof/hex.h"
#include "traceprof/sdk.h"

#if defined(__clang__)
#define NOINLINE __attribute__((noinline))
#else
#define NOINLINE __attribute__((noipa)) /* no inlining and no renamed clones */
#endif

struct route {
	const char *method;	 /* the one method it serves */
	const char *path;	 /* exact path, query excluded */
	demo_handler_fn handler; /* what serves it; NULL: not served */
};

void demo_span_start(struct demo_span *sp, const struct http_request *req)
{
	size_t n;
	const struct http_header *h =
	    http_find_header(req->headers, req->n_headers, "traceparent", &n);

	/* two traceparent headers: invalid (W3C), a new trace like a bad one */
	if (h && n == 1)
		tp_sdk_span_begin(&sp->sdk, h->value, h->value_len);
	else
		tp_sdk_span_begin(&sp->sdk, NULL, 0);
	tp_hex_encode(sp->sdk.trace_id, 16, sp->trace_hex);
	sp->trace_hex[32] = '\0';
	tp_sdk_traceparent_format(sp->sdk.trace_id, sp->sdk.span_id, sp->sdk.trace_flags,
				  sp->traceresponse, sizeof(sp->traceresponse));
	sp->cpu_start_ns = demo_thread_cpu_ns();
}

void demo_reply_text(struct demo_reply *r, int status, const char *text)
{
	r->status = status;
	r->content_type = "text/plain";
	r->body = text;
	r->body_len = strlen(text);
}

void demo_reply_error(struct demo_reply *r, int status, const char *text)
{
	int n = snprintf(r->buf, sizeof(r->buf), "{\"error\":\"%s\"}\n", text);

	r->status = status;
	r->content_type = "application/json";
	r->body = r->buf;
	r->body_len = n < 0 ? 0 : (size_t)n;
}

/* ---- handlers: the functions a profile shows ---- */

enum checkout_path { PATH_FAST, PATH_SLOW, PATH_FAIL };

static int checkout_path_of(const struct http_request *req, enum checkout_path *path)
{
	size_t n;
	const struct http_header *h =
	    http_find_header(req->headers, req->n_headers, "x-demo-path", &n);

	*path = PATH_FAST;
	if (!h)
		return 0;
	if (n != 1)
		return -EINVAL;
	if (h->value_len == 4 && !memcmp(h->value, "fast", 4))
		*path = PATH_FAST;
	else if (h->value_len == 4 && !memcmp(h->value, "slow", 4))
		*path = PATH_SLOW;
	else if (h->value_len == 4 && !memcmp(h->value, "fail", 4))
		*path = PATH_FAIL;
	else
		return -EINVAL;
	return 0;
}

/*
 * An order through the checkout steps. Inlined into each handler, so a
 * profile shows handle_checkout (or handle_pay) right above parseOrder.
 */
static inline __attribute__((always_inline)) void serve_order(const struct http_request *req,
							      const char *body,
							      const struct demo_span *sp,
							      struct demo_reply *r)
{
	enum checkout_path path;
	struct demo_order order;
	struct demo_total total;
	size_t len;

	if (checkout_path_of(req, &path))
		return demo_reply_error(r, 400, "X-Demo-Path must be fast, slow or fail");
	if (parseOrder(body, req->content_length, &order))
		return demo_reply_error(r, 400, "invalid order");
	if (path == PATH_SLOW && validateSignature(&order))
		return demo_reply_error(r, 500, "signature verification failed");
	computeTotal(&order, &total);
	if (path == PATH_SLOW && ledger_append(&order, &total))
		return demo_reply_error(r, 500, "ledger unavailable");
	if (path == PATH_FAIL && chargeCard(&order, &total))
		return demo_reply_error(r, 500, "payment gateway timeout");
	if (serializeResponse(&order, &total, sp->trace_hex, r->buf, sizeof(r->buf), &len))
		return demo_reply_error(r, 500, "response too large");
	r->status = 200;
	r->content_type = "application/json";
	r->body = r->buf;
	r->body_len = len;
}

static NOINLINE void handle_checkout(const struct http_request *req, const char *body,
				     const struct demo_span *sp, struct demo_reply *r)
{
	serve_order(req, body, sp, r);
}

/* What traceprof-demo-frontend calls for each of its checkouts: the same work. */
static NOINLINE void handle_pay(const struct http_request *req, const char *body,
				const struct demo_span *sp, struct demo_reply *r)
{
	serve_order(req, body, sp, r);
}

/* The value of query parameter key in target, or NULL. */
static const char *query_param(const struct http_request *req, const char *key, size_t *len)
{
	const char *q = memchr(req->target, '?', req->target_len);
	const char *end = req->target + req->target_len;
	size_t klen = strlen(key);

	while (q && q < end) {
		const char *p = q + 1;
		const char *amp = memchr(p, '&', end - p);
		const char *stop = amp ? amp : end;

		if ((size_t)(stop - p) > klen && !memcmp(p, key, klen) && p[klen] == '=') {
			*len = stop - p - klen - 1;
			return p + klen + 1;
		}
		q = amp;
	}
	return NULL;
}

static NOINLINE void handle_inventory(const struct http_request *req, const char *body,
				      const struct demo_span *sp, struct demo_reply *r)
{
	struct demo_stock st;
	size_t len = 8;
	const char *sku = query_param(req, "sku", &len);
	int n;

	if (!sku)
		sku = "SKU-0001";
	if (lookupInventory(sku, len, &st))
		return demo_reply_error(r, 404, "unknown sku");
	n = snprintf(r->buf, sizeof(r->buf),
		     "{\"sku\":\"%s\",\"on_hand\":%u,\"warehouse\":%u,\"trace_id\":\"%s\"}\n",
		     st.sku, st.on_hand, st.warehouse, sp->trace_hex);
	r->status = 200;
	r->content_type = "application/json";
	r->body = r->buf;
	r->body_len = n < 0 ? 0 : (size_t)n;
}

static NOINLINE void handle_healthz(const struct http_request *req, const char *body,
				    const struct demo_span *sp, struct demo_reply *r)
{
	demo_reply_text(r, 200, "ok\n");
}

static struct route routes[] = {
    {"POST", "/api/checkout", handle_checkout},
    {"POST", "/api/pay", handle_pay},
    {"GET", "/api/inventory", handle_inventory},
    {"GET", "/healthz", handle_healthz},
};

int demo_route_set(const char *method, const char *path, demo_handler_fn handler)
{
	for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++) {
		if (!strcmp(routes[i].method, method) && !strcmp(routes[i].path, path)) {
			routes[i].handler = handler;
			return 0;
		}
	}
	return -ENOENT;
}

/* The route for the request's path, or NULL; *method_ok tells whether the method fits. */
static const struct route *route_of(const struct http_request *req, bool *method_ok)
{
	const char *q = memchr(req->target, '?', req->target_len);
	size_t plen = q ? (size_t)(q - req->target) : req->target_len;

	for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++) {
		const struct route *rt = &routes[i];

		if (!rt->handler || strlen(rt->path) != plen || memcmp(rt->path, req->target, plen))
			continue;
		*method_ok = strlen(rt->method) == req->method_len &&
			     !memcmp(rt->method, req->method, req->method_len);
		return rt;
	}
	return NULL;
}

const char *demo_route_path(const struct http_request *req)
{
	bool method_ok;
	const struct route *rt = route_of(req, &method_ok);

	return rt ? rt->path : NULL;
}

NOINLINE void route_request(const struct http_request *req, const char *body,
			    const struct demo_span *sp, struct demo_reply *r)
{
	bool method_ok = false;
	const struct route *rt = route_of(req, &method_ok);

	if (!rt) {
		demo_reply_error(r, 404, "no such path");
	} else if (!method_ok) {
		demo_reply_error(r, 405, "method not allowed");
		r->allow = rt->method;
	} else {
		rt->handler(req, body, sp, r);
	}
}
