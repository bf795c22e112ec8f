/*
 * sdk_internal.h - what the SDK's source files share and do not export.
 */
#ifndef TRACEPROF_SDK_INTERNAL_H
#define TRACEPROF_SDK_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The library is built with hidden visibility; the API is marked with this. */
#define TP_SDK_EXPORT __attribute__((visibility("default")))
/*
 * What one source file defines and another uses: hidden like the rest, said
 * on the declaration too, so that code reaches shared data directly rather
 * than through the GOT.
 */
#define TP_SDK_HIDDEN __attribute__((visibility("hidden")))

/*
 * Number of registered attribute keys (process_ctx.c writes it under its
 * mutex, with release order, after the name is stored; attach reads it to
 * reject unregistered keys).
 */
extern _Atomic uint32_t tp_sdk_nkeys;

/*
 * Copies the service name last given to tp_sdk_process_publish into out
 * (cut to size - 1 bytes). Returns 0, or -ENOENT when none is published.
 */
int tp_sdk_published_service_name(char *out, size_t size);

/*
 * The request path's own attach and detach (direct calls inside the
 * library, no PLT): tp_sdk_attach without attributes for ids the caller
 * knows are non-zero, and tp_sdk_detach.
 */
void tp_sdk_attach_ids(const uint8_t *trace_id, const uint8_t *span_id, uint8_t trace_flags);
void tp_sdk_detach_fast(void);
/* tp_sdk_traceparent_parse, tp_sdk_new_trace_id, tp_sdk_new_span_id, called directly. */
int tp_sdk_traceparent_parse_fast(const char *text, size_t len, uint8_t *trace_id, uint8_t *span_id,
				  uint8_t *trace_flags);
int tp_sdk_new_trace_id_fast(uint8_t *trace_id);
int tp_sdk_new_span_id_fast(uint8_t *span_id);

/* Bytes of the method and route kept per span, NUL included. */
#define TP_SPAN_METHOD_SIZE 16
#define TP_SPAN_ROUTE_SIZE  128

/* A finished span as queued for export: fixed size, no pointers. */
struct tp_span_rec {
	uint8_t trace_id[16];		  /* the trace */
	uint8_t span_id[8];		  /* this span */
	uint8_t parent_span_id[8];	  /* zero for a root span */
	uint8_t trace_flags;		  /* W3C trace flags */
	int64_t start_unix_ns;		  /* wall-clock start (CLOCK_REALTIME scale) */
	int64_t end_unix_ns;		  /* start + the CLOCK_MONOTONIC duration */
	int32_t status_code;		  /* HTTP status; 0 unknown */
	char method[TP_SPAN_METHOD_SIZE]; /* NUL-terminated, may be empty */
	char route[TP_SPAN_ROUTE_SIZE];	  /* NUL-terminated, may be empty */
};

/* An OTLP/HTTP endpoint: http://host:port/path, split. */
struct tp_endpoint {
	char host[256]; /* name or address, brackets removed for IPv6 */
	char port[8];	/* decimal */
	char path[512]; /* starts with '/' */
};

/*
 * Parses an http:// URL into *ep. Returns 0, or -EINVAL for another scheme
 * (https included), a missing host, a bad port or parts too long.
 */
int tp_endpoint_parse(const char *url, struct tp_endpoint *ep);

/*
 * Encodes n spans as one ExportTraceServiceRequest with the resource
 * service.name (and the SDK's telemetry.sdk.* attributes) and the scope
 * traceprof-sdk. out must hold tp_otlp_max_size(n) bytes; returns the
 * bytes written.
 */
size_t tp_otlp_encode(const struct tp_span_rec *spans, size_t n, const char *service_name,
		      uint8_t *out);
/* Bytes tp_otlp_encode may need for n spans. */
size_t tp_otlp_max_size(size_t n);

/* One keep-alive HTTP/1.1 connection to an endpoint. */
struct tp_http {
	struct tp_endpoint ep; /* where to POST */
	int fd;		       /* connected socket, or -1 */
};

/*
 * POSTs body (application/x-protobuf) to c's endpoint within timeout_ms,
 * reusing the connection when it is open (and retrying once on a new one
 * when a reused connection fails before an answer). Returns the HTTP
 * status, or a negative errno (-ETIMEDOUT, -ECONNREFUSED, -EPROTO for a
 * malformed answer...). The connection is closed after an error.
 */
int tp_http_post(struct tp_http *c, const uint8_t *body, size_t len, int timeout_ms);
/* Closes c's connection, if open. */
void tp_http_close(struct tp_http *c);

/* ---- protobuf wire format, shared by the process context and the span exporter ---- */

#define PB_WT_VARINT  0 /* wire types */
#define PB_WT_FIXED64 1
#define PB_WT_LEN     2
#define PB_WT_FIXED32 5

/* Bytes of v as a varint. */
static inline size_t pb_varint_size(uint64_t v)
{
	size_t n = 1;

	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

/* Writes v as a varint at p (at most 10 bytes); returns the end. */
static inline uint8_t *pb_put_varint(uint8_t *p, uint64_t v)
{
	while (v >= 0x80) {
		*p++ = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	*p++ = (uint8_t)v;
	return p;
}

#endif
