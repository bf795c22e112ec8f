/*
 * ids.c - content hashes for dictionary ids, trace/span id text forms.
 *
 * The hash consumes input as little-endian 64-bit words and mixes each with
 * the SplitMix64 finalizer; it is fast (a few ns for a short string), has no
 * state beyond one word, and gives the same value on every node. Changing it
 * would split one frame into two ids across agent versions, so it is frozen.
 */
#include <errno.h>
#include <string.h>

#include "traceprof/hex.h"
#include "traceprof/ids.h"

#define IDS_GOLDEN 0x9e3779b97f4a7c15ULL

enum ids_domain {
	IDS_DOMAIN_FUNCTION = 1,
	IDS_DOMAIN_FRAME = 2,
	IDS_DOMAIN_STACK = 3,
	IDS_DOMAIN_SOURCE = 4,
	IDS_DOMAIN_ROUTE = 5,
};

static inline uint64_t mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebULL;
	x ^= x >> 31;
	return x;
}

static inline uint64_t load_le64(const unsigned char *p, size_t n)
{
	uint64_t w = 0;

	for (size_t i = 0; i < n; i++)
		w |= (uint64_t)p[i] << (8 * i);
	return w;
}

uint64_t ids_hash_bytes(uint64_t seed, const void *data, size_t len)
{
	const unsigned char *p = data;
	uint64_t h = seed + (uint64_t)len * IDS_GOLDEN;

	while (len >= 8) {
		h = mix64(h ^ load_le64(p, 8)) + IDS_GOLDEN;
		p += 8;
		len -= 8;
	}
	if (len)
		h = mix64(h ^ load_le64(p, len) ^ ((uint64_t)len << 56)) + IDS_GOLDEN;
	return mix64(h);
}

void ids_begin(struct ids_hasher *hs, uint64_t domain)
{
	hs->h = mix64(domain * IDS_GOLDEN);
}

void ids_add_str(struct ids_hasher *hs, const char *s)
{
	size_t n = s ? strlen(s) : 0;

	hs->h = ids_hash_bytes(hs->h, s ? s : "", n);
}

void ids_add_u64(struct ids_hasher *hs, uint64_t v)
{
	hs->h = mix64(hs->h ^ v) + IDS_GOLDEN;
}

uint64_t ids_end(const struct ids_hasher *hs)
{
	uint64_t v = mix64(hs->h);

	return v ? v : 1; /* 0 means "none" in the schema */
}

uint64_t ids_function(const char *module, const char *name)
{
	struct ids_hasher hs;

	ids_begin(&hs, IDS_DOMAIN_FUNCTION);
	ids_add_str(&hs, module);
	ids_add_str(&hs, name);
	return ids_end(&hs);
}

uint64_t ids_frame(uint64_t function_id, const char *build_id, const char *file, int line,
		   uint64_t address)
{
	struct ids_hasher hs;

	ids_begin(&hs, IDS_DOMAIN_FRAME);
	ids_add_u64(&hs, function_id);
	ids_add_str(&hs, build_id);
	ids_add_str(&hs, file);
	ids_add_u64(&hs, (uint64_t)(int64_t)line);
	ids_add_u64(&hs, address);
	return ids_end(&hs);
}

uint64_t ids_stack(const uint64_t *frame_ids, size_t n)
{
	struct ids_hasher hs;

	ids_begin(&hs, IDS_DOMAIN_STACK);
	ids_add_u64(&hs, n);
	for (size_t i = 0; i < n; i++)
		ids_add_u64(&hs, frame_ids[i]);
	return ids_end(&hs);
}

uint64_t ids_source(const char *service, const char *namespace_, const char *pod,
		    const char *container, const char *node, const char *build_id)
{
	struct ids_hasher hs;

	ids_begin(&hs, IDS_DOMAIN_SOURCE);
	ids_add_str(&hs, service);
	ids_add_str(&hs, namespace_);
	ids_add_str(&hs, pod);
	ids_add_str(&hs, container);
	ids_add_str(&hs, node);
	ids_add_str(&hs, build_id);
	return ids_end(&hs);
}

uint64_t ids_route(const char *method, const char *route)
{
	struct ids_hasher hs;

	ids_begin(&hs, IDS_DOMAIN_ROUTE);
	ids_add_str(&hs, method);
	ids_add_str(&hs, route);
	return ids_end(&hs);
}

static int parse_hex(const char *text, uint8_t *out, size_t nbytes)
{
	if (!text || strlen(text) != nbytes * 2 || tp_hex_decode(text, out, nbytes, false))
		return -EINVAL;
	/* all-zero ids are invalid in W3C trace context */
	return tp_hex_all_zero(out, nbytes) ? -EINVAL : 0;
}

int ids_parse_trace_id(const char *text, uint8_t out[16])
{
	return parse_hex(text, out, 16);
}

int ids_parse_span_id(const char *text, uint64_t *out)
{
	uint8_t b[8];
	int err = parse_hex(text, b, 8);

	if (err)
		return err;
	*out = 0;
	for (int i = 0; i < 8; i++)
		*out = *out << 8 | b[i];
	return 0;
}

static void format_hex(const uint8_t *in, size_t nbytes, char *out)
{
	tp_hex_encode(in, nbytes, out);
	out[2 * nbytes] = '\0';
}

void ids_format_trace_id(const uint8_t id[16], char out[33])
{
	format_hex(id, 16, out);
}

void ids_format_span_id(uint64_t id, char out[17])
{
	uint8_t b[8];

	for (int i = 0; i < 8; i++)
		b[i] = (uint8_t)(id >> (56 - 8 * i));
	format_hex(b, 8, out);
}
