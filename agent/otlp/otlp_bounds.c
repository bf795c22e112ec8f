/*
 * otlp_bounds.c - the limits an export meets before it is decoded
 * (otlp.h): its nesting depth (otlp_check_depth) and, when compressed, its
 * inflated size (otlp_inflate). Taken out of otlp.c, which decodes.
 *
 * Depth: protobuf-c's unpacker recurses once per nested message, so
 * before it runs otlp_check_depth() walks the wire format with an explicit
 * stack of OTLP_MAX_DEPTH entries, guided by the same protobuf-c
 * descriptors: a field of message type is entered, anything else is
 * skipped by its length, and so is a message too short to hold enough
 * levels to pass the limit (2 bytes a level), which is most attributes.
 * One pass at most over the bytes, no allocation; on a 1000-span export it
 * costs a few percent of the unpack (bench/results.md).
 */
#include "otlp.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "opentelemetry/proto/collector/trace/v1/trace_service.pb-c.h"

/* ---- bounded depth, before protobuf-c recurses ---- */

/* A varint at *p (below end); false when cut short or over 10 bytes. */
static bool get_varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
	uint64_t x = 0;

	for (unsigned shift = 0; shift < 70 && *p < end; shift += 7) {
		uint8_t b = *(*p)++;

		x |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			*v = x;
			return true;
		}
	}
	return false;
}

/*
 * The walk's view of the message types: for each type reachable from
 * ExportTraceServiceRequest, the type of each field number below
 * WALK_FIELDS that holds a message (NULL for any other field), so that a
 * field costs one array index instead of a search in the descriptor.
 * Built once, by a breadth-first pass over the protobuf-c descriptors.
 */
#define WALK_FIELDS 32
#define WALK_TYPES  64 /* the OTLP trace messages are 14 types */

struct walk_type {
	const ProtobufCMessageDescriptor *desc;	  /* the type */
	const struct walk_type *sub[WALK_FIELDS]; /* message-typed fields by number */
};

static struct walk_type walk_types[WALK_TYPES];
static size_t n_walk_types;
static pthread_once_t walk_once = PTHREAD_ONCE_INIT;

static const struct walk_type *walk_type_of(const ProtobufCMessageDescriptor *d)
{
	for (size_t i = 0; i < n_walk_types; i++)
		if (walk_types[i].desc == d)
			return &walk_types[i];
	if (n_walk_types == WALK_TYPES)
		abort(); /* cannot happen: the proto is fixed at build time */
	walk_types[n_walk_types].desc = d;
	return &walk_types[n_walk_types++];
}

static void walk_types_build(void)
{
	walk_type_of(
	    &opentelemetry__proto__collector__trace__v1__export_trace_service_request__descriptor);
	for (size_t i = 0; i < n_walk_types; i++) { /* grows while it runs */
		const ProtobufCMessageDescriptor *d = walk_types[i].desc;

		for (unsigned f = 0; f < d->n_fields; f++) {
			const ProtobufCFieldDescriptor *fd = &d->fields[f];
			const struct walk_type *sub;

			if (fd->type != PROTOBUF_C_TYPE_MESSAGE)
				continue;
			sub = walk_type_of(fd->descriptor);
			if (fd->id < WALK_FIELDS)
				walk_types[i].sub[fd->id] = sub;
		}
	}
}

/* The type of field id of t when it holds a message, else NULL. */
static const struct walk_type *walk_sub(const struct walk_type *t, uint64_t id)
{
	const ProtobufCMessageDescriptor *d = t->desc;
	size_t lo = 0, hi = d->n_fields;

	if (id < WALK_FIELDS)
		return t->sub[id];
	while (lo < hi) { /* fields are sorted by number */
		size_t mid = lo + (hi - lo) / 2;
		const ProtobufCFieldDescriptor *f = &d->fields[mid];

		if (f->id == id) {
			if (f->type != PROTOBUF_C_TYPE_MESSAGE)
				return NULL;
			for (size_t i = 0; i < n_walk_types; i++)
				if (walk_types[i].desc == f->descriptor)
					return &walk_types[i];
			return NULL; /* not reached: walk_types_build() saw every type */
		}
		if (f->id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

int otlp_check_depth(const void *buf, size_t len, unsigned max_depth, char *msg, size_t msglen)
{
	struct level {
		const struct walk_type *type; /* the message's type */
		const uint8_t *end;	      /* where its bytes end */
	} stack[OTLP_MAX_DEPTH];
	const uint8_t *p = buf, *base = buf;
	unsigned depth = 1;
	char scratch[8];

	if (!msg || !msglen) {
		msg = scratch;
		msglen = sizeof(scratch);
	}
	if (max_depth > OTLP_MAX_DEPTH)
		max_depth = OTLP_MAX_DEPTH;
	if (max_depth < 1) {
		snprintf(msg, msglen, "no message accepted (depth limit 0)");
		return -ELOOP;
	}
	pthread_once(&walk_once, walk_types_build);
	stack[0].type = &walk_types[0];
	stack[0].end = base + len;
	for (;;) {
		struct level *top = &stack[depth - 1];
		const struct walk_type *sub;
		uint64_t key, n;

		if (p == top->end) {
			if (--depth == 0)
				return 0;
			continue;
		}
		/* any field number, 0 too: protobuf-c keeps unknown ones without recursing */
		if (*p < 0x80) /* one-byte keys: fields 1..15, nearly every one in OTLP */
			key = *p++;
		else if (!get_varint(&p, top->end, &key))
			goto bad;
		switch (key & 7) {
		case 0: /* varint */
			if (!get_varint(&p, top->end, &n))
				goto bad;
			break;
		case 1: /* 64-bit */
			if (top->end - p < 8)
				goto bad;
			p += 8;
			break;
		case 5: /* 32-bit */
			if (top->end - p < 4)
				goto bad;
			p += 4;
			break;
		case 2: /* length-delimited: a message is entered, anything else skipped */
			if (p < top->end && *p < 0x80)
				n = *p++;
			else if (!get_varint(&p, top->end, &n))
				goto bad;
			if (n > (uint64_t)(top->end - p))
				goto bad;
			sub = walk_sub(top->type, key >> 3);
			/*
			 * Not a message, or one too short to reach the limit: every level
			 * needs at least 2 bytes (key, length), so n bytes entered at
			 * depth + 1 reach at most depth + 1 + n / 2. Skips most
			 * attributes unread; protobuf-c checks their bytes itself.
			 */
			if (!sub || depth + 1 + n / 2 <= max_depth) {
				p += n;
				break;
			}
			if (depth == max_depth) {
				snprintf(msg, msglen,
					 "messages nested deeper than %u levels (at byte %zu)",
					 max_depth, (size_t)(p - base));
				return -ELOOP;
			}
			stack[depth].type = sub;
			stack[depth].end = p + n;
			depth++;
			break;
		default: /* groups (3, 4) are not in OTLP; protobuf-c refuses them too */
			goto bad;
		}
	}
bad:
	snprintf(msg, msglen,
		 "malformed ExportTraceServiceRequest (%zu bytes): bad field at byte %zu", len,
		 (size_t)(p - base));
	return -EBADMSG;
}

/* ---- compressed exports ---- */

int otlp_inflate(const void *in, size_t len, size_t max, uint8_t **out, size_t *outlen)
{
	z_stream z;
	uint8_t *buf = NULL;
	size_t cap, total = 0;
	int rc = 0, zrc;

	*out = NULL;
	*outlen = 0;
	if (len > UINT_MAX || max >= SIZE_MAX / 2)
		return -E2BIG;
	memset(&z, 0, sizeof(z));
	if (inflateInit2(&z, 15 + 32) != Z_OK) /* 15 + 32: gzip or zlib header */
		return -ENOMEM;
	z.next_in = (Bytef *)in;
	z.avail_in = (uInt)len;
	/* grows by doubling up to max + 1: the byte past max is how "too large" shows */
	cap = len < (16u << 10) ? (64u << 10) : len * 4;
	if (cap > max + 1)
		cap = max + 1;
	for (;;) {
		if (total == cap) {
			uint8_t *nb;

			if (cap == max + 1) {
				rc = -E2BIG;
				break;
			}
			cap = cap > (max + 1) / 2 ? max + 1 : cap * 2;
			nb = realloc(buf, cap);
			if (!nb) {
				rc = -ENOMEM;
				break;
			}
			buf = nb;
		} else if (!buf) {
			buf = malloc(cap);
			if (!buf) {
				rc = -ENOMEM;
				break;
			}
		}
		z.next_out = buf + total;
		z.avail_out = (uInt)(cap - total > UINT_MAX ? UINT_MAX : cap - total);
		zrc = inflate(&z, Z_NO_FLUSH);
		total = (size_t)(z.next_out - buf);
		if (zrc == Z_STREAM_END) {
			if (!z.avail_in)
				break;
			/* another gzip member follows */
			if (inflateReset(&z) != Z_OK) {
				rc = -EBADMSG;
				break;
			}
			continue;
		}
		if (zrc == Z_MEM_ERROR) {
			rc = -ENOMEM;
			break;
		}
		if (zrc == Z_BUF_ERROR && total < cap) { /* input ended inside the stream */
			rc = -EBADMSG;
			break;
		}
		if (zrc != Z_OK && zrc != Z_BUF_ERROR) {
			rc = -EBADMSG;
			break;
		}
	}
	inflateEnd(&z);
	if (!rc && total > max)
		rc = -E2BIG;
	if (rc) {
		free(buf);
		return rc;
	}
	*out = buf;
	*outlen = total;
	return 0;
}
