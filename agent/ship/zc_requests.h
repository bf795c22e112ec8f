/*
 * zc_requests.h - request rows of HTTP/1.x requests found from system
 * calls (docs/zero-code-http.md): the sampler's TP_REC_HTTP records become
 * struct store_request rows, batched into windows of requests (with their
 * routes) for the shipper, as OTLP batches are.
 *
 * Not thread-safe: the agent's main loop owns it. No allocation per
 * request: rows go into a fixed batch, one allocation per window taken.
 */
#ifndef TRACEPROF_AGENT_ZC_REQUESTS_H
#define TRACEPROF_AGENT_ZC_REQUESTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "aggregate.h"
#include "sampler.h"
#include "traceprof/store.h"

#define ZC_BATCH 512 /* requests per window at most */

struct zc_requests_stats {
	uint64_t requests;     /* TP_REC_HTTP records turned into rows */
	uint64_t invalid;      /* records refused: no trace or span id, end before start */
	uint64_t dropped;      /* rows lost: the batch was full and no window could be made */
	uint64_t traceparent;  /* of the rows, with the trace id of the request's traceparent */
	uint64_t unanswered;   /* ended without a status line */
	uint64_t multiplexed;  /* ended because the thread read another connection's request */
	uint64_t truncated;    /* targets cut at TP_HTTP_TARGET bytes */
	uint64_t bad_target;   /* targets with bytes other than printable ASCII (made '?') */
	uint64_t windows;      /* windows handed on */
	uint64_t forwarded;    /* spans handed to otlp-forward */
	uint64_t forward_lost; /* spans not handed on: no memory, or the forwarder's queue full */
};

#define ZC_SERVICE_MAX 256 /* bytes of a service name kept for otlp-forward, NUL included */

struct zc_request_info {
	char method[9];
	char route[TP_HTTP_TARGET + 1];
	char service[ZC_SERVICE_MAX]; /* the process's service name, "" when unknown */
};

struct zc_requests {
	struct store_request rows[ZC_BATCH];
	struct zc_request_info info[ZC_BATCH];
	size_t n;
	uint64_t first_ns; /* the first row's record time (CLOCK_MONOTONIC), while n > 0 */
	struct zc_requests_stats st;
};

/*
 * A TP_REC_HTTP record s (len bytes) of a process whose source is
 * source_id (service: its name, or NULL), times converted with
 * mono_to_real_us: a row of the batch.
 * Returns the row, or NULL (invalid, or the batch is full: take a window
 * first).
 */
const struct store_request *zc_requests_add(struct zc_requests *z, const struct tp_sample *s,
					    size_t len, uint64_t source_id, const char *service,
					    int64_t mono_to_real_us);
/* The method and route of row r (from zc_requests_add), for the trigger engine. */
const struct zc_request_info *zc_requests_info(const struct zc_requests *z,
					       const struct store_request *r);
/* Whether the batch is full. */
static inline bool zc_requests_full(const struct zc_requests *z)
{
	return z->n == ZC_BATCH;
}
/* The batch as a window of requests and routes (NULL: empty, or no memory: counted). */
struct agg_window *zc_requests_take(struct zc_requests *z);

#endif
