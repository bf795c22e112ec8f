/*
 * otlp.h - turns OTLP trace exports into request rows for the store.
 *
 * Data flow: a transport (otlp_grpc.c, otlp_http.c) reads one serialized
 * ExportTraceServiceRequest and calls otlp_receiver_export(). The message
 * is decoded with protobuf-c into an arena bounded by a fixed multiple of
 * its size (OTLP_ARENA_FACTOR), so a hostile message cannot make the agent
 * allocate without limit. Every span of an accepted kind becomes one
 * struct store_request; the batch travels as a struct agg_window (its
 * requests, plus the sources and routes they reference) to the submit
 * function, in the agent the shipper's queue.
 *
 * Before protobuf-c unpacks (recursively, one C stack frame per nested
 * message), otlp_check_depth() walks the wire format iteratively and
 * refuses messages nested deeper than OTLP_MAX_DEPTH, so no input can run
 * the receiving thread out of stack. Compressed exports (gzip or zlib) are
 * inflated by otlp_inflate() with a running limit: the output never grows
 * past max_bytes, whatever the ratio.
 *
 * Mapping (docs/agent.md, "Receiving spans (OTLP)"): service.name and the
 * Kubernetes / container / host attributes of the resource name the
 * source; the route is http.route, else url.path, else http.target; the
 * method http.request.method, else http.method; the status
 * http.response.status_code, else http.status_code (int or string).
 *
 * A span that cannot become a valid row is rejected and counted by reason
 * (enum otlp_reject), the rest of the batch is kept; the export's result
 * carries the number rejected and a short message for the OTLP partial
 * success. Spans of kinds not configured are ignored (counted, not
 * rejected: filtering is the receiver's choice, not the sender's error).
 *
 * Threads: one struct otlp_receiver is shared by the transports' threads;
 * otlp_receiver_export() and otlp_receiver_get_stats() are thread-safe.
 */
#ifndef TRACEPROF_AGENT_OTLP_H
#define TRACEPROF_AGENT_OTLP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "aggregate.h"
#include "kubepods.h"

#define OTLP_DEFAULT_MAX_BYTES (4u << 20) /* largest export accepted */
#define OTLP_ARENA_FACTOR      32	  /* decode memory <= factor * size + slack */
#define OTLP_ARENA_SLACK       (64u << 10)
/*
 * Message nesting levels accepted, the export itself being level 1. OTLP
 * needs 6 for a scalar span attribute (export, ResourceSpans, ScopeSpans,
 * Span, KeyValue, AnyValue) and 7 for one in a span event or link; each
 * array in an attribute adds 2 (ArrayValue, AnyValue), each kvlist 3. 32
 * leaves room for 12 nested arrays in a span attribute.
 */
#define OTLP_MAX_DEPTH 32

/* Span kinds as bits of a mask (OTLP's SpanKind numbers). */
#define OTLP_KIND_INTERNAL (1u << 1)
#define OTLP_KIND_SERVER   (1u << 2)
#define OTLP_KIND_CLIENT   (1u << 3)
#define OTLP_KIND_PRODUCER (1u << 4)
#define OTLP_KIND_CONSUMER (1u << 5)

/* Why a span did not become a row. */
enum otlp_reject {
	OTLP_REJ_TRACE_ID,   /* trace id not 16 bytes or all zero */
	OTLP_REJ_SPAN_ID,    /* span id not 8 bytes or zero */
	OTLP_REJ_PARENT_ID,  /* parent span id neither empty nor 8 bytes */
	OTLP_REJ_NO_SERVICE, /* resource without a non-empty service.name */
	OTLP_REJ_TIME,	     /* no start time, or end before start */
	OTLP_REJ_TEXT,	     /* a mapped attribute not UTF-8 or over 65535 bytes */
	OTLP_REJ__COUNT,
};

/* The outcome of one export, as the transports report it. */
enum otlp_status {
	OTLP_OK,	  /* accepted (maybe with rejected spans) */
	OTLP_MALFORMED,	  /* not a valid ExportTraceServiceRequest */
	OTLP_TOO_LARGE,	  /* over max_bytes, or decodes past the arena bound */
	OTLP_UNAVAILABLE, /* the rows could not be queued (try again later) */
	OTLP_NOMEM,	  /* out of memory */
	OTLP_TOO_DEEP,	  /* messages nested deeper than OTLP_MAX_DEPTH */
	OTLP_STATUS__COUNT,
};

/*
 * Finds the pod of a resource by its k8s.pod.uid or container.id (either
 * may be ""); fills *out (the receiver frees out->labels_json) and returns
 * true when known. Called on the receiving threads.
 */
typedef bool (*otlp_pod_lookup_fn)(void *ctx, const char *pod_uid, const char *container_id,
				   struct kubepods_pod *out);

struct otlp_decode_opts {
	uint32_t kinds;		       /* OTLP_KIND_* mask of spans kept; 0 = OTLP_KIND_SERVER */
	const char *node;	       /* node recorded when the resource names none; NULL = "" */
	otlp_pod_lookup_fn pod_lookup; /* optional (see below) */
	void *pod_ctx;		       /* its first argument */
};

/* What one decoded export holds. */
struct otlp_decoded {
	struct agg_window *batch;	     /* the rows (NULL when none); the caller frees */
	uint64_t spans;			     /* spans in the message */
	uint64_t ignored_kind;		     /* spans of a kind not configured */
	uint64_t rejected;		     /* spans rejected (sum of by_reason) */
	uint64_t by_reason[OTLP_REJ__COUNT]; /* rejected spans per reason */
	char message[256];		     /* why spans were rejected, or why decoding failed */
};

/*
 * Decodes one serialized ExportTraceServiceRequest. Returns 0 (out->batch
 * may be NULL when no span was kept), -EBADMSG (malformed; out->message
 * says so), -ELOOP (nested deeper than OTLP_MAX_DEPTH), -E2BIG (the
 * message decodes past the arena bound) or -ENOMEM.
 */
int otlp_decode(const void *buf, size_t len, const struct otlp_decode_opts *opts,
		struct otlp_decoded *out);

/*
 * Walks the protobuf wire format of an ExportTraceServiceRequest without
 * recursion and without allocating: 0 when no message is nested deeper
 * than max_depth levels, -ELOOP when one is, -EBADMSG when the wire format
 * is broken (a length past the end, a bad varint, a group). Fields of
 * message type are entered, every other field is skipped, so the time is
 * linear in len. msg (may be NULL) gets the reason.
 */
int otlp_check_depth(const void *buf, size_t len, unsigned max_depth, char *msg, size_t msglen);

/*
 * Inflates a gzip or zlib stream (several gzip members are read one after
 * the other) into *out (malloc'ed, the caller frees), stopping as soon as
 * the output would pass max bytes. Returns 0, -E2BIG (over max; *out is
 * NULL), -EBADMSG (not gzip or zlib data, or cut short) or -ENOMEM.
 */
int otlp_inflate(const void *in, size_t len, size_t max, uint8_t **out, size_t *outlen);

/* Short name of a reason ("trace_id", ...), for counters and messages. */
const char *otlp_reject_name(enum otlp_reject r);
/* Short name of a status ("ok", "malformed", ...). */
const char *otlp_status_name(enum otlp_status s);

/* ---- the receiver shared by the transports ---- */

/* Takes ownership of w in every case; 0 queued, -errno not queued. */
typedef int (*otlp_submit_fn)(void *ctx, struct agg_window *w);

struct otlp_receiver_opts {
	uint32_t kinds;	       /* as in struct otlp_decode_opts */
	const char *node;      /* as in struct otlp_decode_opts; copied */
	size_t max_bytes;      /* largest export; 0 = OTLP_DEFAULT_MAX_BYTES */
	otlp_submit_fn submit; /* where batches go (required) */
	void *submit_ctx;      /* its first argument */
	/* optional: gets the bytes of every export that decoded (otlp_forward_submit) */
	int (*forward)(void *ctx, const void *buf, size_t len);
	void *forward_ctx;	       /* its first argument */
	otlp_pod_lookup_fn pod_lookup; /* optional: namespace, pod name and labels of a pod */
	void *pod_ctx;		       /* its first argument */
};

/*
 * Requests a transport refuses itself, before the bytes reach the
 * receiver (otlp_receiver_count_refusal()): the HTTP answers given from
 * the request line and headers, and gRPC calls the gRPC core ended with
 * RESOURCE_EXHAUSTED (a message over its receive limit).
 */
enum otlp_refusal {
	OTLP_REFUSE_HTTP_400,	    /* malformed request line or Content-Length */
	OTLP_REFUSE_HTTP_404,	    /* not POST /v1/traces's path */
	OTLP_REFUSE_HTTP_405,	    /* not POST */
	OTLP_REFUSE_HTTP_411,	    /* no Content-Length */
	OTLP_REFUSE_HTTP_413,	    /* Content-Length over max_bytes */
	OTLP_REFUSE_HTTP_415,	    /* content type or encoding not accepted */
	OTLP_REFUSE_HTTP_431,	    /* headers over OTLP_HTTP_MAX_HEADER */
	OTLP_REFUSE_GRPC_TOO_LARGE, /* RESOURCE_EXHAUSTED from gRPC's receive limit */
	OTLP_REFUSE__COUNT,
};

struct otlp_stats {
	uint64_t exports[OTLP_STATUS__COUNT]; /* export calls by outcome */
	uint64_t exports_partial;	      /* OK exports that rejected spans */
	uint64_t bytes;			      /* serialized bytes of all exports */
	uint64_t spans;			      /* spans in decoded exports */
	uint64_t rows;			      /* request rows handed to submit */
	uint64_t rows_unqueued;		      /* rows the submit function refused */
	uint64_t rows_by_status[6]; /* rows queued by HTTP status class: [0] none or 6xx+, [1..5]
				       1xx..5xx */
	uint64_t ignored_kind;	    /* spans of kinds not configured */
	uint64_t rejected[OTLP_REJ__COUNT];   /* rejected spans by reason */
	uint64_t compressed;		      /* exports that came compressed (gzip, zlib) */
	uint64_t refused[OTLP_REFUSE__COUNT]; /* refused by a transport before decoding */
};

/* The result of one export. */
struct otlp_result {
	enum otlp_status status; /* what the transport answers */
	int64_t rejected;	 /* spans rejected (partial success) */
	char message[256];	 /* partial success or error message, or "" */
};

/* Returns NULL with errno EINVAL or ENOMEM. Free with otlp_receiver_free(). */
struct otlp_receiver *otlp_receiver_new(const struct otlp_receiver_opts *opts);
void otlp_receiver_free(struct otlp_receiver *r);
size_t otlp_receiver_max_bytes(const struct otlp_receiver *r);
/* Decodes, submits and counts one export. Thread-safe. */
void otlp_receiver_export(struct otlp_receiver *r, const void *buf, size_t len,
			  struct otlp_result *out);
/*
 * As otlp_receiver_export() for a compressed (gzip or zlib) message:
 * inflated with a running limit of max_bytes (OTLP_TOO_LARGE as soon as
 * the output passes it, OTLP_MALFORMED when it does not inflate), then
 * exported. Thread-safe.
 */
void otlp_receiver_export_compressed(struct otlp_receiver *r, const void *buf, size_t len,
				     struct otlp_result *out);
/* Counts a request a transport refused itself. Thread-safe. */
void otlp_receiver_count_refusal(struct otlp_receiver *r, enum otlp_refusal why);
/* Short name of a refusal ("http_413", ...), for counters. */
const char *otlp_refusal_name(enum otlp_refusal why);
void otlp_receiver_get_stats(struct otlp_receiver *r, struct otlp_stats *out);

/*
 * Serializes the ExportTraceServiceResponse for an OK result (with
 * partial_success when spans were rejected). *out is malloc'ed (the caller
 * frees; may be NULL with *len 0 for an empty response). Returns 0 or -ENOMEM.
 */
int otlp_pack_response(const struct otlp_result *res, uint8_t **out, size_t *len);

/*
 * Serializes a google.rpc.Status {code, message} (OTLP/HTTP error bodies).
 * Returns the bytes written to out (truncating the message to fit).
 */
size_t otlp_pack_rpc_status(int code, const char *message, uint8_t *out, size_t outlen);

#endif
