/*
 * otlp_http.h - a minimal OTLP/HTTP trace receiver: POST /v1/traces with a
 * binary protobuf body, into a struct otlp_receiver.
 *
 * HTTP/1.1 with keep-alive on one thread with poll(): at most
 * OTLP_HTTP_MAX_CONNS connections (more are answered 503 and closed), a
 * request's headers at most OTLP_HTTP_MAX_HEADER bytes and its body at most
 * the receiver's max_bytes, so memory per connection is bounded. A
 * connection must deliver each request (and take its response) within
 * timeout_ms of the previous one, or it is closed: slow and half-open
 * clients cannot hold a slot.
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

#define OTLP_HTTP_PATH		     "/v1/traces"
#define OTLP_HTTP_MAX_CONNS	     64
#define OTLP_HTTP_MAX_HEADER	     16384
#define OTLP_HTTP_DEFAULT_TIMEOUT_MS 30000

struct otlp_http;

/*
 * Listens on addr ("host:port", "[v6]:port"; port 0 picks one) and serves
 * from a new thread. r is borrowed. timeout_ms 0 = the default. Returns
 * NULL with errno set and the reason logged.
 */
struct otlp_http *otlp_http_start(const char *addr, struct otlp_receiver *r, int timeout_ms);
/* The port bound. */
int otlp_http_port(const struct otlp_http *h);
/* Connections closed for taking longer than timeout_ms, and refused when full. */
void otlp_http_get_counts(struct otlp_http *h, uint64_t *timeouts, uint64_t *refused);
/* Closes every connection, stops the thread, frees everything. NULL is a no-op. */
void otlp_http_stop(struct otlp_http *h);

#endif
