/*
 * otlp_http.h - a minimal OTLP/HTTP trace receiver: POST /v1/traces with a
 * binary protobuf body, into a struct otlp_receiver.
 *
 * HTTP/1.1 with keep-alive on one thread with poll(), under the port's
 * struct tp_conn_limits: at most max_conns connections and max_per_peer
 * from one address (past them a newcomer evicts a connection, below, or is
 * answered 503 and closed); a request's headers
 * at most OTLP_HTTP_MAX_HEADER bytes and its body at most the receiver's
 * max_bytes, so memory per connection is bounded. Deadlines: the first
 * byte of a request within idle_timeout_ms of the connection or of the
 * previous response; the request line and headers within
 * header_timeout_ms of their first byte; the body within
 * header_timeout_ms + Content-Length / min_body_rate; the response within
 * header_timeout_ms. A connection past its deadline is closed and counted.
 * Body buffers: a body up to OTLP_HTTP_SMALL_BODY is always read; larger
 * ones together at most OTLP_HTTP_BIG_BODIES x max_bytes, beyond which a
 * request is answered 503 with Retry-After (counted), so slow senders
 * declaring large bodies cannot hold memory nor keep small exports out.
 * At a cap a new connection evicts the worst connection of its own
 * address (at that address's cap, or when the address is among the
 * heaviest) or of the heaviest address (when its own holds less than half
 * as many): a body below min_body_rate (after 200 ms), a request head that
 * began, one that never completed a request, a kept-alive one, the oldest
 * of each class first; never one being answered or receiving its body at
 * min_body_rate. So slow senders, from however many addresses, the
 * exporter's own included, cannot keep a working exporter out. Each
 * eviction is counted by reason.
 *
 * Answers (the OTLP/HTTP rules): 200 with an ExportTraceServiceResponse
 * (partial_success when spans were rejected); errors carry a
 * google.rpc.Status body: 400 malformed (or nested deeper than
 * OTLP_MAX_DEPTH), 404 other paths, 405 other methods, 411 no
 * Content-Length (chunked bodies are not read), 413 over max_bytes (the
 * body as sent, or a gzip body as soon as it inflates past max_bytes), 415
 * JSON, another content type or an encoding other than gzip, 431 headers
 * too large, 503 when the rows cannot be queued.
 */
#ifndef TRACEPROF_AGENT_OTLP_HTTP_H
#define TRACEPROF_AGENT_OTLP_HTTP_H

#include "otlp.h"

#include "traceprof/listen.h"

#define OTLP_HTTP_PATH	     "/v1/traces"
#define OTLP_HTTP_MAX_HEADER 16384
#define OTLP_HTTP_SMALL_BODY 65536 /* bodies up to this are always read */
#define OTLP_HTTP_BIG_BODIES 4	   /* larger ones: at most this x max_bytes in flight */

struct otlp_http;

/*
 * Listens on addr ("host:port", "[v6]:port"; port 0 picks one) and serves
 * from a new thread. r is borrowed; lim (NULL: defaults) is copied and
 * resolved (tp_conn_limits_resolve). Returns NULL with errno set and the
 * reason logged.
 */
struct otlp_http *otlp_http_start(const char *addr, struct otlp_receiver *r,
				  const struct tp_conn_limits *lim);
/* The port bound. */
int otlp_http_port(const struct otlp_http *h);
/* Connections closed at a deadline, and refused (port or peer full). */
void otlp_http_get_counts(struct otlp_http *h, uint64_t *timeouts, uint64_t *refused);
/* All the connection counters (live). */
void otlp_http_conn_stats(struct otlp_http *h, struct tp_conn_stats *out);
/* Closes every connection, stops the thread, frees everything. NULL is a no-op. */
void otlp_http_stop(struct otlp_http *h);

#endif
