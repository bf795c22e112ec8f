/*
 * otlp_build.h - builds serialized ExportTraceServiceRequests for the OTLP
 * tests from plain descriptions, with the protobuf-c generated structs.
 */
#ifndef TRACEPROF_TEST_OTLP_BUILD_H
#define TRACEPROF_TEST_OTLP_BUILD_H

#include <stddef.h>
#include <stdint.h>

#define TB_MAX_ATTRS 6

/* One attribute: a string value, or an int value when str is NULL. */
struct tb_attr {
	const char *key; /* attribute key */
	const char *str; /* string value, or NULL */
	int64_t i;	 /* int value when str is NULL */
};

struct tb_span {
	uint8_t trace[16];		    /* trace id bytes */
	size_t trace_len;		    /* 16 normally */
	uint8_t span[8];		    /* span id bytes */
	size_t span_len;		    /* 8 normally */
	uint8_t parent[8];		    /* parent span id bytes */
	size_t parent_len;		    /* 0 or 8 normally */
	int kind;			    /* SpanKind number (2 = server) */
	uint64_t start_ns, end_ns;	    /* times */
	struct tb_attr attrs[TB_MAX_ATTRS]; /* span attributes, key NULL ends */
};

struct tb_resource {
	struct tb_attr attrs[TB_MAX_ATTRS]; /* resource attributes, key NULL ends */
	const struct tb_span *spans;	    /* its spans (one scope) */
	size_t nspans;			    /* how many */
};

/* Packs the request; the caller frees the result. Exits on out of memory. */
uint8_t *tb_pack(const struct tb_resource *res, size_t nres, size_t *len);
/* A span with ids derived from n (trace id n..., span id n), server kind, 1 ms at start_ns. */
struct tb_span tb_server_span(uint32_t n, uint64_t start_ns);
/*
 * The len bytes at in deflated as gzip (window_bits 31) or zlib (15), at
 * level 9; the caller frees the result. Exits on error.
 */
uint8_t *tb_deflate(const void *in, size_t len, int window_bits, size_t *outlen);

#endif
