/*
 * store_copy.c - encode store rows in PostgreSQL's binary and text COPY
 * formats.
 *
 * Data flow: store.c -> copy_put_*() -> struct copybuf -> PQputCopyData().
 *
 * Binary format (PostgreSQL docs, "COPY ... Binary Format"): per row an int16
 * field count, then per field an int32 length (-1 = NULL) and the type's
 * send representation: int8/int4/int2 big-endian, uuid its 16 bytes,
 * timestamptz int64 microseconds since 2000-01-01 UTC, arrays as ndim,
 * has-null flag, element type oid, (length, lower bound) per dimension and
 * then each element as length + value.
 *
 * Text format: tab-separated, \N for NULL, backslash escapes for backslash,
 * tab, newline and carriage return; arrays as {a,b}; timestamps in ISO form
 * with an explicit +00 so the server's DateStyle and TimeZone do not matter.
 *
 * Each encoder reserves the row's worst case once and then writes through a
 * cursor: no allocation per row once the buffer has grown to its working size.
 */
#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "store_copy.h"

#define PG_EPOCH_OFFSET_US 946684800000000LL /* 2000-01-01 minus 1970-01-01, in us */
#define INT8OID		   20		     /* pg_type oid of int8 */
#define INT4OID		   23		     /* pg_type oid of int4 */
#define ARRAY_HEADER_BYTES 20		     /* ndim, has-null, element oid, length, lower bound */
#define TEXT_INT64_MAX	   20		     /* "-9223372036854775808" */
#define TEXT_TS_MAX	   40 /* "YYYY-MM-DD HH:MM:SS.uuuuuu+00" with room for 6-digit years */
#define BUF_MIN_CAP	   (64 << 10)

const char copy_binary_header[19] = {
    'P', 'G', 'C', 'O', 'P', 'Y', '\n', '\377', '\r', '\n', '\0', /* signature */
    0,	 0,   0,   0,						  /* flags: no OIDs */
    0,	 0,   0,   0,						  /* header extension length */
};
const char copy_binary_trailer[2] = {'\377', '\377'};

int copybuf_reserve(struct copybuf *b, size_t extra)
{
	size_t need = b->len + extra;
	size_t cap = b->cap ? b->cap : BUF_MIN_CAP;
	char *p;

	if (need <= b->cap)
		return 0;
	if (need < b->len)
		return -ENOMEM; /* overflow */
	while (cap < need)
		cap *= 2;
	p = realloc(b->data, cap);
	if (!p)
		return -ENOMEM;
	b->data = p;
	b->cap = cap;
	return 0;
}

void copybuf_drop_prefix(struct copybuf *b, size_t n)
{
	if (n >= b->len) {
		b->len = 0;
		return;
	}
	memmove(b->data, b->data + n, b->len - n);
	b->len -= n;
}

void copybuf_trim(struct copybuf *b, size_t keep)
{
	if (b->len == 0 && b->cap > keep)
		copybuf_release(b);
}

void copybuf_release(struct copybuf *b)
{
	free(b->data);
	b->data = NULL;
	b->len = 0;
	b->cap = 0;
}

bool copy_expand_counts(uint32_t n, uint64_t total)
{
	/*
	 * Repeating costs 8 bytes per extra sample; a counts array costs 4 bytes
	 * per stack plus its header (1-byte varlena header + 20 bytes while it is
	 * short). The few samples of one request are nearly always smaller
	 * repeated; long untagged rows with hot stacks keep their counts.
	 */
	return 8 * total <= 12 * (uint64_t)n + 21;
}

/* ---- binary primitives: write at p, return the new cursor ---- */

static inline char *put_be16(char *p, uint16_t v)
{
	v = htobe16(v);
	memcpy(p, &v, 2);
	return p + 2;
}

static inline char *put_be32(char *p, uint32_t v)
{
	v = htobe32(v);
	memcpy(p, &v, 4);
	return p + 4;
}

static inline char *put_be64(char *p, uint64_t v)
{
	v = htobe64(v);
	memcpy(p, &v, 8);
	return p + 8;
}

static inline char *bin_null(char *p)
{
	return put_be32(p, UINT32_MAX);
}

static inline char *bin_i64(char *p, uint64_t v)
{
	return put_be64(put_be32(p, 8), v);
}

static inline char *bin_i32(char *p, uint32_t v)
{
	return put_be32(put_be32(p, 4), v);
}

static inline char *bin_i16(char *p, uint16_t v)
{
	return put_be16(put_be32(p, 2), v);
}

static inline char *bin_ts(char *p, int64_t unix_us)
{
	return bin_i64(p, (uint64_t)(unix_us - PG_EPOCH_OFFSET_US));
}

static inline char *bin_bytes(char *p, const void *s, size_t n)
{
	p = put_be32(p, (uint32_t)n);
	memcpy(p, s, n);
	return p + n;
}

static inline char *bin_str(char *p, const char *s)
{
	return bin_bytes(p, s, strlen(s));
}

static char *bin_array_header(char *p, size_t elems, uint32_t elem_size, uint32_t oid)
{
	p = put_be32(p, (uint32_t)(ARRAY_HEADER_BYTES + elems * (4 + elem_size)));
	p = put_be32(p, 1);   /* ndim */
	p = put_be32(p, 0);   /* no NULL elements */
	p = put_be32(p, oid); /* element type */
	p = put_be32(p, (uint32_t)elems);
	return put_be32(p, 1); /* lower bound */
}

static char *bin_i64_array(char *p, const uint64_t *v, size_t n)
{
	p = bin_array_header(p, n, 8, INT8OID);
	for (size_t i = 0; i < n; i++)
		p = bin_i64(p, v[i]);
	return p;
}

static char *bin_i32_array(char *p, const uint32_t *v, size_t n)
{
	p = bin_array_header(p, n, 4, INT4OID);
	for (size_t i = 0; i < n; i++)
		p = bin_i32(p, v[i]);
	return p;
}

static size_t bin_array_size(size_t elems, size_t elem_size)
{
	return 4 + ARRAY_HEADER_BYTES + elems * (4 + elem_size);
}

/* ---- text primitives ---- */

static char *txt_u64(char *p, uint64_t v)
{
	char tmp[TEXT_INT64_MAX];
	int n = 0;

	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	while (n)
		*p++ = tmp[--n];
	return p;
}

/* uint64 ids are stored in bigint columns as their two's complement value. */
static char *txt_i64(char *p, int64_t v)
{
	if (v < 0) {
		*p++ = '-';
		return txt_u64(p, (uint64_t)0 - (uint64_t)v);
	}
	return txt_u64(p, (uint64_t)v);
}

static char *txt_digits(char *p, unsigned v, int width)
{
	for (int i = width - 1; i >= 0; i--) {
		p[i] = (char)('0' + v % 10);
		v /= 10;
	}
	return p + width;
}

/* Days since 1970-01-01 to a proleptic Gregorian date (H. Hinnant's algorithm). */
static void civil_from_days(int64_t z, int64_t *y, unsigned *m, unsigned *d)
{
	int64_t era;
	unsigned doe, yoe, doy, mp;

	z += 719468;
	era = (z >= 0 ? z : z - 146096) / 146097;
	doe = (unsigned)(z - era * 146097);
	yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	mp = (5 * doy + 2) / 153;
	*d = doy - (153 * mp + 2) / 5 + 1;
	*m = mp < 10 ? mp + 3 : mp - 9;
	*y = (int64_t)yoe + era * 400 + (*m <= 2);
}

/* Validated timestamps lie within a few years of now: years 1000..9999. */
static char *txt_ts(char *p, int64_t unix_us)
{
	const int64_t day_us = 86400LL * 1000000;
	int64_t days = unix_us / day_us;
	int64_t rem = unix_us % day_us;
	int64_t y;
	unsigned m, d, secs;

	if (rem < 0) {
		rem += day_us;
		days--;
	}
	civil_from_days(days, &y, &m, &d);
	secs = (unsigned)(rem / 1000000);
	p = txt_digits(p, (unsigned)y, 4);
	*p++ = '-';
	p = txt_digits(p, m, 2);
	*p++ = '-';
	p = txt_digits(p, d, 2);
	*p++ = ' ';
	p = txt_digits(p, secs / 3600, 2);
	*p++ = ':';
	p = txt_digits(p, secs / 60 % 60, 2);
	*p++ = ':';
	p = txt_digits(p, secs % 60, 2);
	*p++ = '.';
	p = txt_digits(p, (unsigned)(rem % 1000000), 6);
	memcpy(p, "+00", 3);
	return p + 3;
}

static char *txt_uuid(char *p, const uint8_t id[16])
{
	static const char hex[] = "0123456789abcdef";

	for (int i = 0; i < 16; i++) {
		*p++ = hex[id[i] >> 4];
		*p++ = hex[id[i] & 15];
	}
	return p;
}

static inline char *txt_null(char *p)
{
	*p++ = '\\';
	*p++ = 'N';
	return p;
}

/* Escapes what text COPY gives a meaning to; at most 2 * strlen(s) bytes. */
static char *txt_str(char *p, const char *s)
{
	for (; *s; s++) {
		switch (*s) {
		case '\\':
			*p++ = '\\';
			*p++ = '\\';
			break;
		case '\t':
			*p++ = '\\';
			*p++ = 't';
			break;
		case '\n':
			*p++ = '\\';
			*p++ = 'n';
			break;
		case '\r':
			*p++ = '\\';
			*p++ = 'r';
			break;
		default:
			*p++ = *s;
		}
	}
	return p;
}

static char *txt_i64_array(char *p, const uint64_t *v, size_t n)
{
	*p++ = '{';
	for (size_t i = 0; i < n; i++) {
		if (i)
			*p++ = ',';
		p = txt_i64(p, (int64_t)v[i]);
	}
	*p++ = '}';
	return p;
}

static char *txt_u32_array(char *p, const uint32_t *v, size_t n)
{
	*p++ = '{';
	for (size_t i = 0; i < n; i++) {
		if (i)
			*p++ = ',';
		p = txt_u64(p, v[i]);
	}
	*p++ = '}';
	return p;
}

static inline char *txt_tab(char *p)
{
	*p++ = '\t';
	return p;
}

static inline char *txt_end(char *p)
{
	*p++ = '\n';
	return p;
}

static size_t str_bound(const char *s)
{
	return 4 + 2 * strlen(s); /* binary length word, or text escaping */
}

static bool trace_is_zero(const uint8_t id[16])
{
	uint64_t a, b;

	memcpy(&a, id, 8);
	memcpy(&b, id + 8, 8);
	return (a | b) == 0;
}

static bool counts_all_one(const uint32_t *counts, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		if (counts[i] != 1)
			return false;
	return true;
}

/* ---- rows ---- */

/* A sample or off-CPU row's first columns, binary: bucket, source, span and trace (NULL: none). */
static char *bin_row_head(char *p, int64_t bucket_us, uint64_t source_id, uint64_t span_id,
			  const uint8_t *trace_id)
{
	p = bin_ts(p, bucket_us);
	p = bin_i64(p, source_id);
	if (!trace_id)
		return bin_null(bin_null(p));
	p = bin_i64(p, span_id);
	return bin_bytes(p, trace_id, 16);
}

/* The same as text, each column followed by a tab. */
static char *txt_row_head(char *p, int64_t bucket_us, uint64_t source_id, uint64_t span_id,
			  const uint8_t *trace_id)
{
	p = txt_tab(txt_ts(p, bucket_us));
	p = txt_tab(txt_i64(p, (int64_t)source_id));
	if (!trace_id)
		return txt_tab(txt_null(txt_tab(txt_null(p))));
	p = txt_tab(txt_i64(p, (int64_t)span_id));
	return txt_tab(txt_uuid(p, trace_id));
}

/* A samples row, or with trigger_id a trigger_samples row (the same columns and trigger_id last).
 */
static int put_sample(struct copybuf *b, enum copy_format f, const struct store_sample_row *r,
		      uint64_t total, const char *trigger_id)
{
	bool tagged = !trace_is_zero(r->trace_id);
	const uint32_t *counts = r->counts;
	bool expand = false;
	size_t stored; /* elements of the stored stacks array */
	char *p;
	int err;

	if (counts && counts_all_one(counts, r->n))
		counts = NULL;
	else if (counts && copy_expand_counts(r->n, total))
		expand = true;
	stored = expand ? total : r->n;
	if (f == COPY_BINARY)
		err = copybuf_reserve(b, 2 + 12 + 12 + 12 + 20 + 6 + bin_array_size(stored, 8) +
					     bin_array_size(counts && !expand ? r->n : 0, 4) +
					     (trigger_id ? str_bound(trigger_id) : 0));
	else
		err = copybuf_reserve(b, 160 + (TEXT_INT64_MAX + 1) * stored + 11 * (size_t)r->n +
					     (trigger_id ? 1 + str_bound(trigger_id) : 0));
	if (err)
		return err;
	p = b->data + b->len;
	if (f == COPY_BINARY) {
		p = put_be16(p, trigger_id ? 8 : 7);
		p = bin_row_head(p, r->bucket_us, r->source_id, r->span_id,
				 tagged ? r->trace_id : NULL);
		p = bin_i16(p, r->hz);
		if (expand) {
			p = bin_array_header(p, stored, 8, INT8OID);
			for (uint32_t i = 0; i < r->n; i++)
				for (uint32_t c = 0; c < counts[i]; c++)
					p = bin_i64(p, r->stacks[i]);
			p = bin_null(p);
		} else {
			p = bin_i64_array(p, r->stacks, r->n);
			if (counts) {
				p = bin_array_header(p, r->n, 4, INT4OID);
				for (uint32_t i = 0; i < r->n; i++)
					p = bin_i32(p, counts[i]);
			} else {
				p = bin_null(p);
			}
		}
		if (trigger_id)
			p = bin_str(p, trigger_id);
	} else {
		p = txt_row_head(p, r->bucket_us, r->source_id, r->span_id,
				 tagged ? r->trace_id : NULL);
		p = txt_tab(txt_u64(p, r->hz));
		if (expand) {
			*p++ = '{';
			for (uint32_t i = 0; i < r->n; i++)
				for (uint32_t c = 0; c < counts[i]; c++) {
					p = txt_i64(p, (int64_t)r->stacks[i]);
					*p++ = ',';
				}
			p[-1] = '}';
			p = txt_tab(p);
			p = txt_null(p);
		} else {
			p = txt_tab(txt_i64_array(p, r->stacks, r->n));
			if (counts) {
				*p++ = '{';
				for (uint32_t i = 0; i < r->n; i++) {
					if (i)
						*p++ = ',';
					p = txt_u64(p, counts[i]);
				}
				*p++ = '}';
			} else {
				p = txt_null(p);
			}
		}
		if (trigger_id)
			p = txt_str(txt_tab(p), trigger_id);
		p = txt_end(p);
	}
	b->len = (size_t)(p - b->data);
	return 0;
}

int copy_put_sample(struct copybuf *b, enum copy_format f, const struct store_sample_row *r,
		    uint64_t total)
{
	return put_sample(b, f, r, total, NULL);
}

int copy_put_trigger_sample(struct copybuf *b, enum copy_format f, const char *trigger_id,
			    const struct store_sample_row *r, uint64_t total)
{
	return put_sample(b, f, r, total, trigger_id);
}

int copy_put_offcpu(struct copybuf *b, enum copy_format f, const struct store_offcpu_row *r)
{
	bool tagged = !trace_is_zero(r->trace_id);
	char *p;
	int err;

	if (f == COPY_BINARY)
		err = copybuf_reserve(b, 2 + 12 + 12 + 12 + 20 + 6 + bin_array_size(r->n, 8) +
					     bin_array_size(r->n, 4));
	else
		err = copybuf_reserve(b, 160 + (TEXT_INT64_MAX + 1) * (size_t)r->n +
					     11 * (size_t)r->n);
	if (err)
		return err;
	p = b->data + b->len;
	if (f == COPY_BINARY) {
		p = put_be16(p, 7);
		p = bin_row_head(p, r->bucket_us, r->source_id, r->span_id,
				 tagged ? r->trace_id : NULL);
		p = bin_i16(p, r->kind);
		p = bin_i64_array(p, r->stacks, r->n);
		p = bin_i32_array(p, r->us, r->n);
	} else {
		p = txt_row_head(p, r->bucket_us, r->source_id, r->span_id,
				 tagged ? r->trace_id : NULL);
		p = txt_tab(txt_u64(p, r->kind));
		p = txt_tab(txt_i64_array(p, r->stacks, r->n));
		p = txt_end(txt_u32_array(p, r->us, r->n));
	}
	b->len = (size_t)(p - b->data);
	return 0;
}

int copy_put_gpu(struct copybuf *b, enum copy_format f, const struct store_gpu_row *r)
{
	bool tagged = !trace_is_zero(r->trace_id);
	char *p;
	int err;

	if (f == COPY_BINARY)
		err = copybuf_reserve(b, 2 + 12 + 12 + 12 + 20 + bin_array_size(r->n, 8) * 2 +
					     bin_array_size(r->n, 4));
	else
		err = copybuf_reserve(b, 160 + (TEXT_INT64_MAX + 1) * 2 * (size_t)r->n +
					     11 * (size_t)r->n);
	if (err)
		return err;
	p = b->data + b->len;
	if (f == COPY_BINARY) {
		p = put_be16(p, 7);
		p = bin_row_head(p, r->bucket_us, r->source_id, r->span_id,
				 tagged ? r->trace_id : NULL);
		p = bin_i64_array(p, r->stacks, r->n);
		p = bin_i32_array(p, r->launches, r->n);
		p = bin_i64_array(p, r->gpu_ns, r->n);
	} else {
		p = txt_row_head(p, r->bucket_us, r->source_id, r->span_id,
				 tagged ? r->trace_id : NULL);
		p = txt_tab(txt_i64_array(p, r->stacks, r->n));
		p = txt_tab(txt_u32_array(p, r->launches, r->n));
		p = txt_end(txt_i64_array(p, r->gpu_ns, r->n));
	}
	b->len = (size_t)(p - b->data);
	return 0;
}

int copy_put_request(struct copybuf *b, enum copy_format f, const struct store_request *r)
{
	char *p;
	int err;

	err = copybuf_reserve(b, 256);
	if (err)
		return err;
	p = b->data + b->len;
	if (f == COPY_BINARY) {
		p = put_be16(p, 9);
		p = bin_ts(p, r->start_us);
		p = bin_i64(p, r->source_id);
		p = bin_bytes(p, r->trace_id, 16);
		p = bin_i64(p, r->span_id);
		p = r->parent_span_id ? bin_i64(p, r->parent_span_id) : bin_null(p);
		p = bin_i64(p, r->route_id);
		p = bin_i64(p, (uint64_t)r->duration_us);
		p = bin_i16(p, (uint16_t)r->status_code);
		p = r->context_source ? bin_i16(p, r->context_source) : bin_null(p);
	} else {
		p = txt_tab(txt_ts(p, r->start_us));
		p = txt_tab(txt_i64(p, (int64_t)r->source_id));
		p = txt_tab(txt_uuid(p, r->trace_id));
		p = txt_tab(txt_i64(p, (int64_t)r->span_id));
		p = txt_tab(r->parent_span_id ? txt_i64(p, (int64_t)r->parent_span_id)
					      : txt_null(p));
		p = txt_tab(txt_i64(p, (int64_t)r->route_id));
		p = txt_tab(txt_i64(p, r->duration_us));
		p = txt_tab(txt_i64(p, r->status_code));
		p = txt_end(r->context_source ? txt_i64(p, r->context_source) : txt_null(p));
	}
	b->len = (size_t)(p - b->data);
	return 0;
}

int copy_put_function(struct copybuf *b, enum copy_format f, uint64_t id, const char *name,
		      const char *module, int kind)
{
	char *p;
	int err;

	err = copybuf_reserve(b, 64 + str_bound(name) + str_bound(module));
	if (err)
		return err;
	p = b->data + b->len;
	if (f == COPY_BINARY) {
		p = put_be16(p, 4);
		p = bin_i64(p, id);
		p = bin_str(p, name);
		p = bin_str(p, module);
		p = bin_i16(p, (uint16_t)kind);
	} else {
		p = txt_tab(txt_i64(p, (int64_t)id));
		p = txt_tab(txt_str(p, name));
		p = txt_tab(txt_str(p, module));
		p = txt_end(txt_i64(p, kind));
	}
	b->len = (size_t)(p - b->data);
	return 0;
}

int copy_put_frame(struct copybuf *b, enum copy_format f, uint64_t id, uint64_t function_id,
		   const char *build_id, const char *file, int line, uint64_t address)
{
	char *p;
	int err;

	err = copybuf_reserve(b, 128 + str_bound(build_id) + (file ? str_bound(file) : 0));
	if (err)
		return err;
	p = b->data + b->len;
	if (f == COPY_BINARY) {
		p = put_be16(p, 6);
		p = bin_i64(p, id);
		p = bin_i64(p, function_id);
		p = bin_str(p, build_id);
		p = file ? bin_str(p, file) : bin_null(p);
		p = line > 0 ? bin_i32(p, (uint32_t)line) : bin_null(p);
		p = address ? bin_i64(p, address) : bin_null(p);
	} else {
		p = txt_tab(txt_i64(p, (int64_t)id));
		p = txt_tab(txt_i64(p, (int64_t)function_id));
		p = txt_tab(txt_str(p, build_id));
		p = txt_tab(file ? txt_str(p, file) : txt_null(p));
		p = txt_tab(line > 0 ? txt_i64(p, line) : txt_null(p));
		p = txt_end(address ? txt_i64(p, (int64_t)address) : txt_null(p));
	}
	b->len = (size_t)(p - b->data);
	return 0;
}

int copy_put_stack(struct copybuf *b, enum copy_format f, uint64_t id, const uint64_t *frame_ids,
		   size_t n)
{
	char *p;
	int err;

	err = copybuf_reserve(b, 64 + bin_array_size(n, 8) + (TEXT_INT64_MAX + 1) * n);
	if (err)
		return err;
	p = b->data + b->len;
	if (f == COPY_BINARY) {
		p = put_be16(p, 2);
		p = bin_i64(p, id);
		p = bin_i64_array(p, frame_ids, n);
	} else {
		p = txt_tab(txt_i64(p, (int64_t)id));
		p = txt_end(txt_i64_array(p, frame_ids, n));
	}
	b->len = (size_t)(p - b->data);
	return 0;
}

static const char *or_empty(const char *s)
{
	return s ? s : "";
}

int copy_put_source(struct copybuf *b, enum copy_format f, uint64_t id,
		    const struct store_source *src)
{
	const char *v[6] = {src->service,	 or_empty(src->namespace_),
			    or_empty(src->pod),	 or_empty(src->container),
			    or_empty(src->node), or_empty(src->build_id)};
	const char *labels = src->labels_json && *src->labels_json ? src->labels_json : "{}";
	size_t need = 64 + str_bound(labels);
	char *p;
	int err;

	for (int i = 0; i < 6; i++)
		need += str_bound(v[i]);
	err = copybuf_reserve(b, need);
	if (err)
		return err;
	p = b->data + b->len;
	if (f == COPY_BINARY) {
		size_t n = strlen(labels);

		p = put_be16(p, 8);
		p = bin_i64(p, id);
		for (int i = 0; i < 6; i++)
			p = bin_str(p, v[i]);
		/* jsonb's binary form: a version byte (1), then the text */
		p = put_be32(p, (uint32_t)(n + 1));
		*p++ = 1;
		memcpy(p, labels, n);
		p += n;
	} else {
		p = txt_i64(p, (int64_t)id);
		for (int i = 0; i < 6; i++)
			p = txt_str(txt_tab(p), v[i]);
		p = txt_str(txt_tab(p), labels);
		p = txt_end(p);
	}
	b->len = (size_t)(p - b->data);
	return 0;
}

int copy_put_route(struct copybuf *b, enum copy_format f, uint64_t id, const char *method,
		   const char *route)
{
	char *p;
	int err;

	method = or_empty(method);
	route = or_empty(route);
	err = copybuf_reserve(b, 64 + str_bound(method) + str_bound(route));
	if (err)
		return err;
	p = b->data + b->len;
	if (f == COPY_BINARY) {
		p = put_be16(p, 3);
		p = bin_i64(p, id);
		p = bin_str(p, method);
		p = bin_str(p, route);
	} else {
		p = txt_tab(txt_i64(p, (int64_t)id));
		p = txt_tab(txt_str(p, method));
		p = txt_end(txt_str(p, route));
	}
	b->len = (size_t)(p - b->data);
	return 0;
}
