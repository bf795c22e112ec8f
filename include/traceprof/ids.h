/*
 * ids.h - 64-bit dictionary ids computed by writers, and the text forms of
 * W3C trace and span ids.
 *
 * Agents on many nodes insert frames, stacks, sources and routes with
 * ON CONFLICT DO NOTHING; to make that idempotent without a round trip, every
 * writer derives an id from the entry's content with the same hash (the
 * algorithm is fixed and documented in docs/storage.md). Id 0 is never
 * produced: it means "none" in the schema.
 */
#ifndef TRACEPROF_IDS_H
#define TRACEPROF_IDS_H

#include <stddef.h>
#include <stdint.h>

struct ids_hasher {
	uint64_t h; /* running state */
};

void ids_begin(struct ids_hasher *hs, uint64_t domain);
/* Adds a string, length-prefixed so ("ab","c") != ("a","bc"); NULL == "". */
void ids_add_str(struct ids_hasher *hs, const char *s);
void ids_add_u64(struct ids_hasher *hs, uint64_t v);
uint64_t ids_end(const struct ids_hasher *hs);

uint64_t ids_hash_bytes(uint64_t seed, const void *data, size_t len);

uint64_t ids_function(const char *module, const char *name);
uint64_t ids_frame(uint64_t function_id, const char *build_id, const char *file, int line,
		   uint64_t address);
/* frames are ordered root first, as stored in traceprof.stacks. */
uint64_t ids_stack(const uint64_t *frame_ids, size_t n);
uint64_t ids_source(const char *service, const char *namespace_, const char *pod,
		    const char *container, const char *node, const char *build_id);
uint64_t ids_route(const char *method, const char *route);

/* 32 hex digits, not all zero. Returns 0 or -EINVAL. */
int ids_parse_trace_id(const char *text, uint8_t out[16]);
void ids_format_trace_id(const uint8_t id[16], char out[33]);
/* 16 hex digits, not all zero. Returns 0 or -EINVAL. */
int ids_parse_span_id(const char *text, uint64_t *out);
void ids_format_span_id(uint64_t id, char out[17]);

#endif
