/*
 * procctx.c - finding, reading and decoding an OTEP 4719 process context.
 *
 * Layout (host endianness, 64-bit): signature "OTEL_CTX" (8 bytes), version
 * (u32, 2), payload size (u32), monotonic_published_at_ns (u64 at offset
 * 16, 0 while the writer updates; the drafts called it published_at_ns and
 * used the real-time clock: the reader only compares it), payload pointer
 * (u64 at 24). Reading protocol: read the header; a
 * zero timestamp means an update is running, so retry; read the payload;
 * read the timestamp again and retry when it changed. Retries are
 * immediate (with a yield): an update is a few stores, and a process that
 * updates without end is answered with -EAGAIN rather than waited for.
 *
 * The decoder walks the protobuf with explicit bounds at every level and
 * copies only what it keeps; unknown fields are skipped by wire type. The
 * payload is tried as a merged ProcessContext first, strictly, then as a
 * draft Resource: a draft KeyValue's key read as a KeyValue message fails
 * (an attribute name is no protobuf), so the forms do not mix up.
 */
#include <errno.h>
#include <inttypes.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "procctx.h"
#include "procmem.h"

#define HEADER_SIZE    32
#define HEADER_TS_OFF  16
#define CTX_VERSION    2
#define READ_TRIES     8
#define KEY_MAP_ATTR   "threadlocal.attribute_key_map"
#define SCHEMA_ATTR    "threadlocal.schema_version"
#define SERVICE_ATTR   "service.name"
#define WIRE_VARINT    0
#define WIRE_FIXED64   1
#define WIRE_LEN       2
#define WIRE_FIXED32   5
#define RESOURCE_ATTRS 1 /* Resource.attributes */
#define PCTX_RESOURCE  1 /* ProcessContext.resource */
#define PCTX_ATTRS     2 /* ProcessContext.attributes */
#define TL_PREFIX      "threadlocal."
#define KV_KEY	       1 /* KeyValue.key */
#define KV_VALUE       2 /* KeyValue.value */
#define ANY_STRING     1 /* AnyValue.string_value */
#define ANY_BOOL       2 /* AnyValue.bool_value */
#define ANY_INT	       3 /* AnyValue.int_value */
#define ANY_DOUBLE     4 /* AnyValue.double_value */
#define ANY_ARRAY      5 /* AnyValue.array_value */
#define ARRAY_VALUES   1 /* ArrayValue.values */

static struct procctx_stats stats; /* updated with relaxed atomic adds */

#define COUNT(field) __atomic_add_fetch(&stats.field, 1, __ATOMIC_RELAXED)

/* Where a KeyValue sits: Resource.attributes or ProcessContext.attributes. */
enum kv_place { IN_RESOURCE, IN_ATTRIBUTES };

/* A bounded view of protobuf bytes. */
struct pb {
	const uint8_t *p;   /* next byte */
	const uint8_t *end; /* one past the last byte */
};

/* One decoded field: number, wire type and its scalar or bytes. */
struct pb_field {
	uint32_t num;	 /* field number */
	uint32_t wire;	 /* wire type */
	uint64_t v;	 /* varint or fixed value */
	struct pb bytes; /* WIRE_LEN: the field's bytes */
};

static bool pb_varint(struct pb *b, uint64_t *out)
{
	uint64_t v = 0;

	for (unsigned shift = 0; shift < 64; shift += 7) {
		uint8_t c;

		if (b->p >= b->end)
			return false;
		c = *b->p++;
		v |= (uint64_t)(c & 0x7f) << shift;
		if (!(c & 0x80)) {
			*out = v;
			return true;
		}
	}
	return false; /* more than 10 bytes */
}

/* Reads the next field; false at the end or on malformed input (*bad set). */
static bool pb_next(struct pb *b, struct pb_field *f, bool *bad)
{
	uint64_t tag, len;

	if (b->p >= b->end)
		return false;
	if (!pb_varint(b, &tag) || (tag >> 3) == 0 || (tag >> 3) > UINT32_MAX)
		goto out_bad;
	f->num = (uint32_t)(tag >> 3);
	f->wire = (uint32_t)(tag & 7);
	switch (f->wire) {
	case WIRE_VARINT:
		if (!pb_varint(b, &f->v))
			goto out_bad;
		return true;
	case WIRE_FIXED64:
	case WIRE_FIXED32: {
		size_t n = f->wire == WIRE_FIXED64 ? 8 : 4;

		if ((size_t)(b->end - b->p) < n)
			goto out_bad;
		f->v = 0;
		memcpy(&f->v, b->p, n); /* little endian on the hosts traceprof supports */
		b->p += n;
		return true;
	}
	case WIRE_LEN:
		if (!pb_varint(b, &len) || len > (uint64_t)(b->end - b->p))
			goto out_bad;
		f->bytes.p = b->p;
		f->bytes.end = b->p + len;
		b->p += len;
		return true;
	}
out_bad:
	*bad = true; /* groups (3, 4) and unknown wire types too */
	return false;
}

/* A NUL-terminated copy of a string field; NULL (errno EBADMSG) if it holds a NUL. */
static char *pb_strdup(const struct pb *s)
{
	size_t n = (size_t)(s->end - s->p);
	char *out;

	if (memchr(s->p, '\0', n)) {
		errno = EBADMSG;
		return NULL;
	}
	out = malloc(n + 1);
	if (!out)
		return NULL;
	memcpy(out, s->p, n);
	out[n] = '\0';
	return out;
}

/* Appends every string of an ArrayValue to ctx->keys. */
static int decode_key_map(struct pb arr, struct procctx *ctx)
{
	struct pb_field f, g;
	bool bad = false;

	while (pb_next(&arr, &f, &bad)) {
		struct pb any;
		char *s = NULL;

		if (f.num != ARRAY_VALUES || f.wire != WIRE_LEN)
			continue;
		any = f.bytes;
		while (pb_next(&any, &g, &bad))
			if (g.num == ANY_STRING && g.wire == WIRE_LEN) {
				free(s);
				s = pb_strdup(&g.bytes);
				if (!s)
					return errno == EBADMSG ? -EBADMSG : -ENOMEM;
			}
		if (bad || !s) {
			free(s);
			return -EBADMSG; /* a key map entry that is no string */
		}
		if (ctx->nkeys == PROCCTX_MAX_KEYS) {
			free(s);
			return -E2BIG;
		}
		ctx->keys[ctx->nkeys++] = s;
	}
	return bad ? -EBADMSG : 0;
}

/* The value of an AnyValue as text into *out (malloc'd), or NULL when not scalar. */
static int decode_scalar(struct pb any, char **out)
{
	struct pb_field f;
	bool bad = false;
	char buf[40];

	*out = NULL;
	while (pb_next(&any, &f, &bad)) {
		free(*out);
		*out = NULL;
		if (f.num == ANY_STRING && f.wire == WIRE_LEN) {
			*out = pb_strdup(&f.bytes);
			if (!*out)
				return errno == EBADMSG ? -EBADMSG : -ENOMEM;
			continue;
		}
		if (f.num == ANY_BOOL && f.wire == WIRE_VARINT)
			snprintf(buf, sizeof(buf), "%s", f.v ? "true" : "false");
		else if (f.num == ANY_INT && f.wire == WIRE_VARINT)
			snprintf(buf, sizeof(buf), "%" PRId64, (int64_t)f.v);
		else if (f.num == ANY_DOUBLE && f.wire == WIRE_FIXED64) {
			double d;

			memcpy(&d, &f.v, sizeof(d));
			snprintf(buf, sizeof(buf), "%.17g", d);
		} else
			continue; /* bytes, kvlist, arrays: not kept */
		*out = strdup(buf);
		if (!*out)
			return -ENOMEM;
	}
	if (bad) {
		free(*out);
		*out = NULL;
		return -EBADMSG;
	}
	return 0;
}

/* The array_value of an AnyValue, if that is what it holds. */
static bool any_array(struct pb any, struct pb *arr, bool *bad)
{
	struct pb_field f;
	bool found = false;

	while (pb_next(&any, &f, bad))
		if (f.num == ANY_ARRAY && f.wire == WIRE_LEN) {
			*arr = f.bytes;
			found = true;
		}
	return found && !*bad;
}

/*
 * One KeyValue into ctx. strict (the merged form): a KeyValue without a key
 * is malformed; otherwise it is skipped, as is one without a value. In ProcessContext
 * attributes, only threadlocal.* entries are kept.
 */
static int decode_kv(struct pb kv, struct procctx *ctx, enum kv_place place, bool strict)
{
	struct pb_field f;
	struct pb value = {0}, arr;
	bool bad = false, have_value = false;
	char *key = NULL, *text;
	int err;

	while (pb_next(&kv, &f, &bad)) {
		if (f.num == KV_KEY && f.wire == WIRE_LEN) {
			free(key);
			key = pb_strdup(&f.bytes);
			if (!key)
				return errno == EBADMSG ? -EBADMSG : -ENOMEM;
		} else if (f.num == KV_VALUE && f.wire == WIRE_LEN) {
			value = f.bytes;
			have_value = true;
		}
	}
	err = bad ? -EBADMSG : 0;
	if (!err && strict && (!key || !*key))
		err = -EBADMSG; /* a value alone is no attribute: not this form */
	if (err || !key || !*key || !have_value)
		goto out_free; /* a KeyValue without key or value carries nothing */
	if (place == IN_ATTRIBUTES && strncmp(key, TL_PREFIX, strlen(TL_PREFIX)))
		goto out_free; /* coordination data of other specs: not resource attributes */
	if (!strcmp(key, KEY_MAP_ATTR)) {
		if (any_array(value, &arr, &bad))
			err = decode_key_map(arr, ctx);
		else
			err = -EBADMSG;
		goto out_free;
	}
	err = decode_scalar(value, &text);
	if (err || !text)
		goto out_free;
	if (ctx->nattrs == PROCCTX_MAX_ATTRS) {
		free(text);
		err = -E2BIG;
		goto out_free;
	}
	ctx->attrs[ctx->nattrs].key = key;
	ctx->attrs[ctx->nattrs].value = text;
	ctx->nattrs++;
	return 0;

out_free:
	free(key);
	return err;
}

/* Resource.attributes into ctx; strict: only KeyValues in field 1. */
static int decode_resource(struct pb b, struct procctx *ctx, bool strict)
{
	struct pb_field f;
	bool bad = false;
	int err = 0;

	while (!err && pb_next(&b, &f, &bad)) {
		if (f.num == RESOURCE_ATTRS && f.wire == WIRE_LEN)
			err = decode_kv(f.bytes, ctx, IN_RESOURCE, strict);
		else if (f.num == RESOURCE_ATTRS && strict)
			err = -EBADMSG;
	}
	return !err && bad ? -EBADMSG : err;
}

/* ProcessContext { Resource resource = 1; repeated KeyValue attributes = 2 }. */
static int decode_merged(struct pb b, struct procctx *ctx)
{
	struct pb_field f;
	bool bad = false;
	int err = 0;

	while (!err && pb_next(&b, &f, &bad)) {
		if ((f.num == PCTX_RESOURCE || f.num == PCTX_ATTRS) && f.wire != WIRE_LEN)
			err = -EBADMSG;
		else if (f.num == PCTX_RESOURCE)
			err = decode_resource(f.bytes, ctx, true);
		else if (f.num == PCTX_ATTRS)
			err = decode_kv(f.bytes, ctx, IN_ATTRIBUTES, true);
	}
	return !err && bad ? -EBADMSG : err;
}

/* Frees the entries of ctx, keeping its arrays, for a second decoding. */
static void clear_entries(struct procctx *ctx)
{
	for (size_t i = 0; i < ctx->nattrs; i++) {
		free(ctx->attrs[i].key);
		free(ctx->attrs[i].value);
	}
	for (size_t i = 0; i < ctx->nkeys; i++)
		free(ctx->keys[i]);
	ctx->nattrs = 0;
	ctx->nkeys = 0;
}

int procctx_decode(const uint8_t *payload, size_t len, struct procctx *ctx)
{
	struct pb b = {.p = payload, .end = payload + len};
	int err;

	memset(ctx, 0, sizeof(*ctx));
	if (len > PROCCTX_MAX_PAYLOAD) {
		COUNT(bad_payload);
		return -E2BIG;
	}
	ctx->attrs = calloc(PROCCTX_MAX_ATTRS, sizeof(*ctx->attrs));
	ctx->keys = calloc(PROCCTX_MAX_KEYS, sizeof(*ctx->keys));
	if (!ctx->attrs || !ctx->keys) {
		err = -ENOMEM;
		goto out_clear;
	}
	ctx->form = PROCCTX_FORM_MERGED;
	err = decode_merged(b, ctx);
	if (err == -EBADMSG) {
		clear_entries(ctx);
		ctx->form = PROCCTX_FORM_DRAFT;
		err = decode_resource(b, ctx, false);
	}
	if (err)
		goto out_clear;
	ctx->service_name = procctx_get(ctx, SERVICE_ATTR);
	ctx->schema_version = procctx_get(ctx, SCHEMA_ATTR);
	if (ctx->form == PROCCTX_FORM_MERGED)
		COUNT(reads_merged);
	else
		COUNT(reads_draft);
	return 0;

out_clear:
	if (err == -EBADMSG || err == -E2BIG)
		COUNT(bad_payload);
	procctx_clear(ctx);
	return err;
}

void procctx_clear(struct procctx *ctx)
{
	if (!ctx)
		return;
	for (size_t i = 0; ctx->attrs && i < ctx->nattrs; i++) {
		free(ctx->attrs[i].key);
		free(ctx->attrs[i].value);
	}
	for (size_t i = 0; ctx->keys && i < ctx->nkeys; i++)
		free(ctx->keys[i]);
	free(ctx->attrs);
	free(ctx->keys);
	memset(ctx, 0, sizeof(*ctx));
}

const char *procctx_get(const struct procctx *ctx, const char *key)
{
	for (size_t i = 0; i < ctx->nattrs; i++)
		if (!strcmp(ctx->attrs[i].key, key))
			return ctx->attrs[i].value;
	return NULL;
}

bool procctx_is_ctx_mapping(const struct procmem_map *m)
{
	static const char *const names[] = {
	    "[anon_shmem:OTEL_CTX]", /* MAP_SHARED|MAP_ANONYMOUS named with prctl */
	    "[anon:OTEL_CTX]",	     /* a private anonymous mapping named with prctl */
	    "/memfd:OTEL_CTX",	     /* memfd_create("OTEL_CTX"); " (deleted)" cut by procmem */
	};

	if (m->perms[0] != 'r' || m->end - m->start < HEADER_SIZE)
		return false;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcmp(m->path, names[i]))
			return true;
	return false;
}

/*
 * One consistent read of the context at addr: 0, -EAGAIN (an update ran) or
 * -ENODATA (no signature yet) to retry, or an error.
 */
static int read_once(pid_t pid, uint64_t addr, uint8_t *payload, struct procctx *ctx)
{
	uint8_t h[HEADER_SIZE];
	uint32_t version, size;
	uint64_t ts, ts2, ptr;
	int err;

	err = procmem_read(pid, addr, h, sizeof(h));
	if (err)
		return err == -EFAULT || err == -ESRCH ? -ENOENT : err;
	if (memcmp(h, "OTEL_CTX", 8))
		return -ENODATA; /* not published yet: the signature is written last */
	memcpy(&version, h + 8, 4);
	memcpy(&size, h + 12, 4);
	memcpy(&ts, h + HEADER_TS_OFF, 8);
	memcpy(&ptr, h + 24, 8);
	if (ts == 0) {
		COUNT(updating);
		return -EAGAIN;
	}
	if (version != CTX_VERSION)
		return -EPROTONOSUPPORT;
	if (size > PROCCTX_MAX_PAYLOAD)
		err = -E2BIG;
	else
		err = procmem_read(pid, ptr, payload, size);
	/* whatever happened, it counts only if no update ran meanwhile */
	if (procmem_read(pid, addr + HEADER_TS_OFF, &ts2, sizeof(ts2)))
		return -ENOENT;
	if (ts2 != ts) {
		COUNT(changed);
		return -EAGAIN;
	}
	if (err)
		return err;
	err = procctx_decode(payload, size, ctx);
	if (err)
		return err;
	ctx->published_at_ns = ts;
	ctx->header_addr = addr;
	return 0;
}

int procctx_read(pid_t pid, struct procctx *ctx)
{
	struct procmem_maps maps;
	uint8_t *payload;
	int err;

	memset(ctx, 0, sizeof(*ctx));
	err = procmem_maps_read(pid, &maps);
	if (err)
		return err == -ESRCH ? -ENOENT : err;
	payload = NULL; /* most processes publish nothing: allocated at the first candidate */
	err = -ENOENT;
	for (size_t i = 0; i < maps.n && err; i++) {
		if (!procctx_is_ctx_mapping(&maps.maps[i]))
			continue;
		if (!payload && !(payload = malloc(PROCCTX_MAX_PAYLOAD))) {
			err = -ENOMEM;
			break;
		}
		for (int t = 0; t < READ_TRIES; t++) {
			err = read_once(pid, maps.maps[i].start, payload, ctx);
			if (err != -EAGAIN && err != -ENODATA)
				break;
			sched_yield();
		}
	}
	if (err == -ENODATA)
		err = -ENOENT; /* a mapping by that name that never got a signature */
	if (err == -EAGAIN)
		COUNT(gave_up);
	free(payload);
	procmem_maps_free(&maps);
	return err;
}

/* True when the n keys of old start the key map of fresh (an append). */
static bool keys_appended(const struct procctx *old, const struct procctx *fresh)
{
	if (fresh->nkeys < old->nkeys)
		return false;
	for (size_t i = 0; i < old->nkeys; i++)
		if (strcmp(old->keys[i], fresh->keys[i]))
			return false;
	return true;
}

int procctx_refresh_keys(pid_t pid, struct procctx *ctx, uint64_t *last_ns, uint64_t now_ns)
{
	struct procctx fresh;
	int err;

	if (*last_ns && now_ns - *last_ns < PROCCTX_REFRESH_MIN_NS) {
		COUNT(key_refresh_limited);
		return -EBUSY;
	}
	*last_ns = now_ns ? now_ns : 1;
	COUNT(key_refreshes);
	err = procctx_read(pid, &fresh);
	if (err)
		return err;
	if (!keys_appended(ctx, &fresh))
		COUNT(key_map_rewritten);
	procctx_clear(ctx);
	*ctx = fresh;
	return 0;
}

void procctx_stats_get(struct procctx_stats *out)
{
	uint64_t *dst = (uint64_t *)out, *src = (uint64_t *)&stats;

	for (size_t i = 0; i < sizeof(stats) / sizeof(uint64_t); i++)
		dst[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
}

const char *procctx_form_name(enum procctx_form form)
{
	switch (form) {
	case PROCCTX_FORM_MERGED:
		return "merged";
	case PROCCTX_FORM_DRAFT:
		return "draft";
	default:
		return "none";
	}
}
