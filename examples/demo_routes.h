/*
 * demo_routes.h - what the demo service answers: the server span of a
 * request and the routes that turn a parsed request into a reply.
 *
 * The connection side (demo_service.c) parses heads, attaches the span
 * around route_request and writes the reply; this side knows nothing about
 * sockets. route_request mirrors the frame of the same name in the
 * synthetic workload traceprof-gen models, so both profiles read alike.
 */
#ifndef TRACEPROF_DEMO_ROUTES_H
#define TRACEPROF_DEMO_ROUTES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "demo_http.h"
#include "traceprof/sdk.h"

/* Bytes of a response body built by a handler. */
#define DEMO_BODY_SIZE 8192

/* The context of one request: the server span. */
struct demo_span {
	struct tp_sdk_span sdk; /* the SDK's span: ids, parent, flags, start times */
	char trace_hex[33];	/* sdk.trace_id as text */
	char traceresponse[56]; /* 00-trace-span-flags, NUL-terminated */
	int64_t cpu_start_ns;	/* thread CPU time when it began */
};

/* What a request is answered with. */
struct demo_reply {
	int status;		  /* HTTP status */
	const char *content_type; /* of body */
	const char *body;	  /* response body: buf or a literal */
	size_t body_len;	  /* bytes at body */
	const char *allow;	  /* Allow header for 405, or NULL */
	bool close;		  /* close the connection after it */
	char buf[DEMO_BODY_SIZE]; /* storage for bodies built at run time */
};

/*
 * Starts the server span of req with tp_sdk_span_begin (which attaches it as
 * the thread's context): the trace of its one valid traceparent header,
 * otherwise a new sampled trace; always a new span id. Also notes the
 * thread's CPU time, for Server-Timing. The caller ends it with
 * tp_sdk_span_end(&sp->sdk, ...).
 */
void demo_span_start(struct demo_span *sp, const struct http_request *req);

/* A request handler: fills r from req, its body and its span. */
typedef void (*demo_handler_fn)(const struct http_request *req, const char *body,
				const struct demo_span *sp, struct demo_reply *r);

/*
 * Replaces the handler of the route method path (a program serving other
 * routes than the payment service's: traceprof-demo-frontend); NULL
 * removes the route (404). Call before serving. Returns 0 or -ENOENT.
 */
int demo_route_set(const char *method, const char *path, demo_handler_fn handler);

/* The route template req's path matches ("/api/checkout"), or NULL. */
const char *demo_route_path(const struct http_request *req);

/*
 * Serves req, whose body (req->content_length bytes, at most
 * HTTP_MAX_BODY) is at body: runs the route's handler, or answers 404 or
 * 405. Fills r (r->close is left as the caller set it).
 */
void route_request(const struct http_request *req, const char *body, const struct demo_span *sp,
		   struct demo_reply *r);

/* Answers status with a JSON body {"error":"text"}; text needs no escaping. */
void demo_reply_error(struct demo_reply *r, int status, const char *text);
/* Answers status with a plain text body; text is a literal or outlives r. */
void demo_reply_text(struct demo_reply *r, int status, const char *text);

#endif
