/*
 * otlp_spans_out.h - server spans the agent found itself (zero-code HTTP,
 * docs/zero-code-http.md) as one OTLP ExportTraceServiceRequest, for the
 * forwarder (otlp_forward.h), so a tracing backend behind the agent sees
 * those requests as it sees an SDK's.
 *
 * Each span: kind SERVER, the request's trace id (from its traceparent or
 * fresh), span id and parent span id (the traceparent's, none for a fresh
 * trace), name "METHOD path", start and end in Unix nanoseconds, the
 * attributes http.request.method, url.path and http.response.status_code
 * (when known), status ERROR for 5xx; one ResourceSpans per service
 * (service.name), in the order the services first appear, with the scope
 * OTLP_SPANS_OUT_SCOPE.
 */
#ifndef TRACEPROF_AGENT_OTLP_SPANS_OUT_H
#define TRACEPROF_AGENT_OTLP_SPANS_OUT_H

#include <stddef.h>
#include <stdint.h>

#define OTLP_SPANS_OUT_SCOPE "traceprof.zero-code-http"

struct otlp_span_out {
	const char *service; /* service.name; NULL or "" = "unknown_service" */
	uint8_t trace_id[16];
	uint64_t span_id;	 /* not zero */
	uint64_t parent_span_id; /* 0: a root span */
	uint64_t start_unix_ns;
	uint64_t end_unix_ns;
	const char *method; /* "" = none */
	const char *path;   /* "" = none */
	int status_code;    /* 0 = unknown */
};

/*
 * Encodes n spans (1..OTLP_SPANS_OUT_MAX) into *out (malloc'd, *len
 * bytes). Returns 0, -EINVAL or -ENOMEM.
 */
#define OTLP_SPANS_OUT_MAX 4096
int otlp_spans_encode(const struct otlp_span_out *v, size_t n, uint8_t **out, size_t *len);

#endif
