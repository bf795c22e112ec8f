/*
 * store_copy.h - COPY payload encoding for the store writer (private to lib/).
 *
 * Data flow: store.c validates a row, then one of the copy_put_*() functions
 * appends it, already in the COPY wire format, to a growable buffer; a flush
 * sends the buffer as it is (binary: framed by copy_binary_header and
 * copy_binary_trailer). Encoding at add time keeps the flush a plain memory
 * copy into the socket and lets a failed flush keep the exact bytes.
 *
 * Workload: hundreds of thousands of sample rows per second per writer; the
 * encoders reserve the row's worst-case size once and then write with a
 * cursor, so the hot path does no allocation beyond buffer growth.
 *
 * Column orders are fixed here and must match the column lists of the COPY
 * statements in store_flush.c (COPY_*_COLUMNS below).
 */
#ifndef TRACEPROF_STORE_COPY_H
#define TRACEPROF_STORE_COPY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "traceprof/store.h"

#define COPY_SAMPLES_COLUMNS	     "bucket, source_id, span_id, trace_id, hz, stacks, counts"
#define COPY_TRIGGER_SAMPLES_COLUMNS COPY_SAMPLES_COLUMNS ", trigger_id"
#define COPY_OFFCPU_COLUMNS	     "bucket, source_id, span_id, trace_id, kind, stacks, us"
#define COPY_GPU_COLUMNS	     "bucket, source_id, span_id, trace_id, stacks, launches, gpu_ns"
#define COPY_REQUESTS_COLUMNS                                                                      \
	"start_time, source_id, trace_id, span_id, parent_span_id, route_id, duration_us, "        \
	"status_code, context_source"
#define COPY_FUNCTIONS_COLUMNS "function_id, name, module, kind"
#define COPY_FRAMES_COLUMNS    "frame_id, function_id, build_id, file, line, address"
#define COPY_STACKS_COLUMNS    "stack_id, frame_ids"
#define COPY_SOURCES_COLUMNS   "source_id, service, namespace, pod, container, node, build_id, labels"
#define COPY_ROUTES_COLUMNS    "route_id, method, route"

enum copy_format {
	COPY_BINARY = 0, /* PostgreSQL binary COPY: big-endian fields, no parsing on the server */
	COPY_TEXT,	 /* tab-separated text COPY, \N for NULL */
};

struct copybuf {
	char *data; /* the bytes; owned, NULL until the first append */
	size_t len; /* bytes in use */
	size_t cap; /* bytes allocated */
};

/* The 19-byte signature + flags + extension length that opens a binary COPY. */
extern const char copy_binary_header[19];
/* The field count -1 that ends a binary COPY. */
extern const char copy_binary_trailer[2];

/* Makes room for extra more bytes. Returns 0 or -ENOMEM (buffer unchanged). */
int copybuf_reserve(struct copybuf *b, size_t extra);
/* Removes the first n bytes (rows already written), keeping the rest in order. */
void copybuf_drop_prefix(struct copybuf *b, size_t n);
/* Frees the memory of an empty buffer that grew past keep bytes. */
void copybuf_trim(struct copybuf *b, size_t keep);
/* Frees the bytes; the buffer is empty and reusable afterwards. */
void copybuf_release(struct copybuf *b);

/*
 * Whether a row of n stacks with counts summing to total is smaller stored
 * as each stack repeated count times (counts NULL) than as stacks + counts.
 * The two forms mean the same to every reader (a stack may repeat).
 */
bool copy_expand_counts(uint32_t n, uint64_t total);

/*
 * Row encoders. Each appends exactly one row and returns 0 or -ENOMEM (then
 * nothing was appended). Inputs must have been validated by the caller:
 * strings are valid UTF-8 and not NULL unless stated.
 */
/* total = sum of counts (n when counts is NULL); picks the stored form. */
int copy_put_sample(struct copybuf *b, enum copy_format f, const struct store_sample_row *r,
		    uint64_t total);
/* The same row for traceprof.trigger_samples, with trigger_id (valid, non-empty) last. */
int copy_put_trigger_sample(struct copybuf *b, enum copy_format f, const char *trigger_id,
			    const struct store_sample_row *r, uint64_t total);
/* A traceprof.offcpu row (every us[i] in 1..INT32_MAX). */
int copy_put_offcpu(struct copybuf *b, enum copy_format f, const struct store_offcpu_row *r);
/* A traceprof.gpu row (validated by store_add_gpu). */
int copy_put_gpu(struct copybuf *b, enum copy_format f, const struct store_gpu_row *r);
int copy_put_request(struct copybuf *b, enum copy_format f, const struct store_request *r);
int copy_put_function(struct copybuf *b, enum copy_format f, uint64_t id, const char *name,
		      const char *module, int kind);
/* file NULL, line <= 0 and address 0 are stored as NULL. */
int copy_put_frame(struct copybuf *b, enum copy_format f, uint64_t id, uint64_t function_id,
		   const char *build_id, const char *file, int line, uint64_t address);
int copy_put_stack(struct copybuf *b, enum copy_format f, uint64_t id, const uint64_t *frame_ids,
		   size_t n);
/* NULL members other than service are stored as "". */
int copy_put_source(struct copybuf *b, enum copy_format f, uint64_t id,
		    const struct store_source *src);
int copy_put_route(struct copybuf *b, enum copy_format f, uint64_t id, const char *method,
		   const char *route);

#endif
