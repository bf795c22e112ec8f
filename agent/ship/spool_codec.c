/*
 * spool_codec.c - a window as a spool file and back (spool_encode,
 * spool_decode; the file's place in the spool: spool.c, spool.h).
 *
 * A file is the window in the machine's byte order (the spool never leaves
 * the machine): a header (magic, the body's length, its checksum), the
 * window's fields, the counts of its arrays, then the arrays: sample rows
 * (with their stack ids and counts), sources, functions, frames, stacks,
 * routes, request rows (a row's status code in the low 24 bits of a 32-bit
 * field, its context source in the top byte, 0 in files written before
 * the store had it), off-CPU rows (files of the first format,
 * "TPSPOOL1", have none and are still read), GPU rows (files of the
 * second format, "TPSPOOL2", have none and are still read). A string is a 32-bit length
 * and its bytes; the
 * length 0xffffffff stands for NULL. Reading one back checks the checksum,
 * then every count against the bytes left before allocating: one
 * allocation of at most the window's fixed part plus twice the file's
 * size, so a damaged file costs at most its own size.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "spool.h"

#define WIN_MAGIC    "TPSPOOL3"
#define WIN_MAGIC_V2 "TPSPOOL2"	       /* before GPU rows: read, never written */
#define WIN_MAGIC_V1 "TPSPOOL1"	       /* before off-CPU rows: read, never written */
#define HEADER	     SPOOL_FILE_HEADER /* magic, body length, checksum */
#define STR_NULL     0xffffffffu       /* string length that stands for NULL */

/* ---- encoding ---- */

struct wbuf {
	char *p;    /* data */
	size_t len; /* bytes used */
	size_t cap; /* bytes allocated */
	bool oom;   /* an allocation failed */
};

static void put(struct wbuf *b, const void *v, size_t n)
{
	if (b->oom)
		return;
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		char *p;

		while (cap < b->len + n)
			cap *= 2;
		p = realloc(b->p, cap);
		if (!p) {
			b->oom = true;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->len, v, n);
	b->len += n;
}

static void put_u64(struct wbuf *b, uint64_t v)
{
	put(b, &v, 8);
}

static void put_u32(struct wbuf *b, uint32_t v)
{
	put(b, &v, 4);
}

static void put_str(struct wbuf *b, const char *s)
{
	size_t n = s ? strlen(s) : 0;

	put_u32(b, s ? (uint32_t)n : STR_NULL);
	put(b, s, n);
}

/*
 * FNV-1a over 8-byte words with a shift to mix the high bits down (a byte
 * at a time took 0.26 ms of a 258 KB window), then over the bytes left.
 */
uint64_t spool_hash(const char *p, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull, v;
	size_t i = 0;

	for (; i + 8 <= n; i += 8) {
		memcpy(&v, p + i, 8);
		h = (h ^ v) * 0x100000001b3ull;
		h ^= h >> 29;
	}
	for (; i < n; i++)
		h = (h ^ (unsigned char)p[i]) * 0x100000001b3ull;
	return h;
}

static void put_rows(struct wbuf *b, const struct agg_window *w)
{
	for (size_t i = 0; i < w->nrows; i++) {
		const struct store_sample_row *r = &w->rows[i];
		uint8_t has_counts = r->counts != NULL;

		put_u64(b, (uint64_t)r->bucket_us);
		put_u64(b, r->source_id);
		put(b, r->trace_id, 16);
		put_u64(b, r->span_id);
		put(b, &r->hz, 2);
		put(b, &has_counts, 1);
		put_u32(b, r->n);
		put(b, r->stacks, (size_t)r->n * 8);
		if (has_counts)
			put(b, r->counts, (size_t)r->n * 4);
	}
}

static void put_offcpu(struct wbuf *b, const struct agg_window *w)
{
	for (size_t i = 0; i < w->noffcpu; i++) {
		const struct store_offcpu_row *r = &w->offcpu[i];

		put_u64(b, (uint64_t)r->bucket_us);
		put_u64(b, r->source_id);
		put(b, r->trace_id, 16);
		put_u64(b, r->span_id);
		put(b, &r->kind, 1);
		put_u32(b, r->n);
		put(b, r->stacks, (size_t)r->n * 8);
		put(b, r->us, (size_t)r->n * 4);
	}
}

static void put_gpu(struct wbuf *b, const struct agg_window *w)
{
	for (size_t i = 0; i < w->ngpu; i++) {
		const struct store_gpu_row *r = &w->gpu[i];

		put_u64(b, (uint64_t)r->bucket_us);
		put_u64(b, r->source_id);
		put(b, r->trace_id, 16);
		put_u64(b, r->span_id);
		put_u32(b, r->n);
		put(b, r->stacks, (size_t)r->n * 8);
		put(b, r->launches, (size_t)r->n * 4);
		put(b, r->gpu_ns, (size_t)r->n * 8);
	}
}

static void put_dicts(struct wbuf *b, const struct agg_window *w)
{
	for (size_t i = 0; i < w->nsources; i++) {
		const struct store_source *s = &w->sources[i].src;

		put_u64(b, w->sources[i].id);
		put_str(b, s->service);
		put_str(b, s->namespace_);
		put_str(b, s->pod);
		put_str(b, s->container);
		put_str(b, s->node);
		put_str(b, s->build_id);
		put_str(b, s->labels_json);
	}
	for (size_t i = 0; i < w->nfunctions; i++) {
		put_u64(b, w->functions[i].id);
		put_str(b, w->functions[i].name);
		put_str(b, w->functions[i].module);
		put_u32(b, (uint32_t)w->functions[i].kind);
	}
	for (size_t i = 0; i < w->nframes; i++) {
		const struct agg_frame *f = &w->frames[i];

		put_u64(b, f->id);
		put_u64(b, f->function_id);
		put_str(b, f->build_id);
		put_str(b, f->file);
		put_u32(b, (uint32_t)f->line);
		put_u64(b, f->address);
	}
	for (size_t i = 0; i < w->nstacks; i++) {
		put_u64(b, w->stacks[i].id);
		put_u32(b, w->stacks[i].n);
		put(b, w->stacks[i].frame_ids, (size_t)w->stacks[i].n * 8);
	}
	for (size_t i = 0; i < w->nroutes; i++) {
		put_u64(b, w->routes[i].id);
		put_str(b, w->routes[i].method);
		put_str(b, w->routes[i].route);
	}
}

static void put_requests(struct wbuf *b, const struct agg_window *w)
{
	for (size_t i = 0; i < w->nrequests; i++) {
		const struct store_request *q = &w->requests[i];

		put_u64(b, (uint64_t)q->start_us);
		put_u64(b, (uint64_t)q->duration_us);
		put_u64(b, q->source_id);
		put(b, q->trace_id, 16);
		put_u64(b, q->span_id);
		put_u64(b, q->parent_span_id);
		put_u64(b, q->route_id);
		/* the context source in the top byte: files written before it have 0 there */
		put_u32(b, (uint32_t)q->status_code | (uint32_t)q->context_source << 24);
	}
}

int spool_encode(const struct agg_window *w, char **out, size_t *len)
{
	struct wbuf b = {0};
	uint64_t body, sum;

	if (!w || !out || !len)
		return -EINVAL;
	/* the file is about the size of the window in memory: one allocation, usually */
	b.cap = w->bytes + 4096;
	b.p = malloc(b.cap);
	if (!b.p)
		return -ENOMEM;
	put(&b, WIN_MAGIC, 8);
	put_u64(&b, 0); /* body length, below */
	put_u64(&b, 0); /* checksum, below */
	put_u64(&b, (uint64_t)w->start_us);
	put_u64(&b, (uint64_t)w->window_us);
	put_u64(&b, w->seq);
	put_u64(&b, w->nsamples);
	put_u64(&b, w->missing_entries);
	put_u64(&b, w->samples_overflow);
	put_str(&b, w->trigger_id);
	put_u64(&b, w->nrows);
	put_u64(&b, w->nsources);
	put_u64(&b, w->nfunctions);
	put_u64(&b, w->nframes);
	put_u64(&b, w->nstacks);
	put_u64(&b, w->nroutes);
	put_u64(&b, w->nrequests);
	put_u64(&b, w->noffcpu);
	put_u64(&b, w->ngpu);
	put_rows(&b, w);
	put_dicts(&b, w);
	put_requests(&b, w);
	put_offcpu(&b, w);
	put_gpu(&b, w);
	if (b.oom) {
		free(b.p);
		return -ENOMEM;
	}
	body = b.len - HEADER;
	sum = spool_hash(b.p + HEADER, body);
	memcpy(b.p + 8, &body, 8);
	memcpy(b.p + 16, &sum, 8);
	*out = b.p;
	*len = b.len;
	return 0;
}

/* ---- decoding ---- */

struct rbuf {
	const char *p; /* next byte */
	size_t left;   /* bytes left */
	bool bad;      /* read past the end, or a bad value */
	char *heap;    /* next free byte of the window's block */
	char *end;     /* end of the block */
};

static void get(struct rbuf *r, void *v, size_t n)
{
	if (r->bad || n > r->left) {
		r->bad = true;
		memset(v, 0, n);
		return;
	}
	memcpy(v, r->p, n);
	r->p += n;
	r->left -= n;
}

static uint64_t get_u64(struct rbuf *r)
{
	uint64_t v;

	get(r, &v, 8);
	return v;
}

static uint32_t get_u32(struct rbuf *r)
{
	uint32_t v;

	get(r, &v, 4);
	return v;
}

/* n bytes of the block, 8-aligned; NULL (and bad) when it would overrun. */
static void *take(struct rbuf *r, size_t n)
{
	char *p = r->heap;
	size_t a = (n + 7) & ~(size_t)7;

	if (r->bad || a > (size_t)(r->end - r->heap)) {
		r->bad = true;
		return NULL;
	}
	r->heap += a;
	return p;
}

static const char *get_str(struct rbuf *r)
{
	uint32_t n = get_u32(r);
	char *s;

	if (r->bad || n == STR_NULL)
		return NULL;
	if (n > r->left) {
		r->bad = true;
		return NULL;
	}
	s = take(r, (size_t)n + 1);
	if (!s)
		return NULL;
	get(r, s, n);
	s[n] = '\0';
	return s;
}

/* An array of n u64 (or u32 when size 4) copied into the block. */
static void *get_array(struct rbuf *r, uint32_t n, size_t size)
{
	void *a;

	if ((size_t)n * size > r->left) {
		r->bad = true;
		return NULL;
	}
	a = take(r, (size_t)n * size);
	if (a)
		get(r, a, (size_t)n * size);
	return a;
}

static void get_rows(struct rbuf *r, struct agg_window *w)
{
	for (size_t i = 0; i < w->nrows && !r->bad; i++) {
		struct store_sample_row *row = &w->rows[i];
		uint8_t has_counts;

		row->bucket_us = (int64_t)get_u64(r);
		row->source_id = get_u64(r);
		get(r, row->trace_id, 16);
		row->span_id = get_u64(r);
		get(r, &row->hz, 2);
		get(r, &has_counts, 1);
		row->n = get_u32(r);
		row->stacks = get_array(r, row->n, 8);
		row->counts = has_counts ? get_array(r, row->n, 4) : NULL;
	}
}

static void get_offcpu(struct rbuf *r, struct agg_window *w)
{
	for (size_t i = 0; i < w->noffcpu && !r->bad; i++) {
		struct store_offcpu_row *row = &w->offcpu[i];

		row->bucket_us = (int64_t)get_u64(r);
		row->source_id = get_u64(r);
		get(r, row->trace_id, 16);
		row->span_id = get_u64(r);
		get(r, &row->kind, 1);
		row->n = get_u32(r);
		row->stacks = get_array(r, row->n, 8);
		row->us = get_array(r, row->n, 4);
		for (uint32_t j = 0; row->us && j < row->n; j++)
			w->offcpu_us += row->us[j];
	}
}

static void get_gpu(struct rbuf *r, struct agg_window *w)
{
	for (size_t i = 0; i < w->ngpu && !r->bad; i++) {
		struct store_gpu_row *row = &w->gpu[i];

		row->bucket_us = (int64_t)get_u64(r);
		row->source_id = get_u64(r);
		get(r, row->trace_id, 16);
		row->span_id = get_u64(r);
		row->n = get_u32(r);
		row->stacks = get_array(r, row->n, 8);
		row->launches = get_array(r, row->n, 4);
		row->gpu_ns = get_array(r, row->n, 8);
		for (uint32_t j = 0; row->launches && j < row->n; j++)
			w->gpu_launches += row->launches[j];
	}
}

static const char *get_str_or_empty(struct rbuf *r)
{
	const char *s = get_str(r);

	return s ? s : "";
}

static void get_dicts(struct rbuf *r, struct agg_window *w)
{
	for (size_t i = 0; i < w->nsources && !r->bad; i++) {
		struct store_source *s = &w->sources[i].src;

		w->sources[i].id = get_u64(r);
		s->service = get_str_or_empty(r);
		s->namespace_ = get_str_or_empty(r);
		s->pod = get_str_or_empty(r);
		s->container = get_str_or_empty(r);
		s->node = get_str_or_empty(r);
		s->build_id = get_str_or_empty(r);
		s->labels_json = get_str(r);
	}
	for (size_t i = 0; i < w->nfunctions && !r->bad; i++) {
		w->functions[i].id = get_u64(r);
		w->functions[i].name = get_str_or_empty(r);
		w->functions[i].module = get_str_or_empty(r);
		w->functions[i].kind = (int)get_u32(r);
	}
	for (size_t i = 0; i < w->nframes && !r->bad; i++) {
		struct agg_frame *f = &w->frames[i];

		f->id = get_u64(r);
		f->function_id = get_u64(r);
		f->build_id = get_str_or_empty(r);
		f->file = get_str(r);
		f->line = (int)get_u32(r);
		f->address = get_u64(r);
	}
	for (size_t i = 0; i < w->nstacks && !r->bad; i++) {
		w->stacks[i].id = get_u64(r);
		w->stacks[i].n = get_u32(r);
		w->stacks[i].frame_ids = get_array(r, w->stacks[i].n, 8);
	}
	for (size_t i = 0; i < w->nroutes && !r->bad; i++) {
		w->routes[i].id = get_u64(r);
		w->routes[i].method = get_str_or_empty(r);
		w->routes[i].route = get_str_or_empty(r);
	}
}

static void get_requests(struct rbuf *r, struct agg_window *w)
{
	for (size_t i = 0; i < w->nrequests && !r->bad; i++) {
		struct store_request *q = &w->requests[i];
		uint32_t v;

		q->start_us = (int64_t)get_u64(r);
		q->duration_us = (int64_t)get_u64(r);
		q->source_id = get_u64(r);
		get(r, q->trace_id, 16);
		q->span_id = get_u64(r);
		q->parent_span_id = get_u64(r);
		q->route_id = get_u64(r);
		v = get_u32(r);
		q->status_code = (int)(v & 0xffffffu);
		q->context_source = (uint8_t)(v >> 24);
	}
}

/* Fewest bytes one element of each array takes in a file. */
enum {
	MIN_ROW = 8 + 8 + 16 + 8 + 2 + 1 + 4,
	MIN_SOURCE = 8 + 7 * 4,
	MIN_FUNCTION = 8 + 4 + 4 + 4,
	MIN_FRAME = 8 + 8 + 4 + 4 + 4 + 8,
	MIN_STACK = 8 + 4,
	MIN_ROUTE = 8 + 4 + 4,
	MIN_REQUEST = 6 * 8 + 16 + 4,
	MIN_OFFCPU = 8 + 8 + 16 + 8 + 1 + 4,
	MIN_GPU = 8 + 8 + 16 + 8 + 4,
};
#define NARRAYS 9

struct agg_window *spool_decode(const char *buf, size_t len)
{
	struct rbuf r;
	struct agg_window h = {0}, *w;
	uint64_t body, sum, n[NARRAYS] = {0};
	static const size_t min[NARRAYS] = {MIN_ROW,	 MIN_SOURCE, MIN_FUNCTION,
					    MIN_FRAME,	 MIN_STACK,  MIN_ROUTE,
					    MIN_REQUEST, MIN_OFFCPU, MIN_GPU};
	static const size_t elem[NARRAYS] = {
	    sizeof(struct store_sample_row), sizeof(struct agg_source),
	    sizeof(struct agg_function),     sizeof(struct agg_frame),
	    sizeof(struct agg_stack),	     sizeof(struct agg_route),
	    sizeof(struct store_request),    sizeof(struct store_offcpu_row),
	    sizeof(struct store_gpu_row)};
	int narrays;
	size_t fixed, bytes, need = 0;
	const char *trigger_at;
	char *block;

	if (!buf || len < HEADER)
		goto bad;
	if (!memcmp(buf, WIN_MAGIC, 8))
		narrays = 9;
	else if (!memcmp(buf, WIN_MAGIC_V2, 8))
		narrays = 8;
	else if (!memcmp(buf, WIN_MAGIC_V1, 8))
		narrays = 7;
	else
		goto bad;
	memcpy(&body, buf + 8, 8);
	memcpy(&sum, buf + 16, 8);
	if (body != len - HEADER || spool_hash(buf + HEADER, body) != sum)
		goto bad;
	r = (struct rbuf){.p = buf + HEADER, .left = body};
	h.start_us = (int64_t)get_u64(&r);
	h.window_us = (int64_t)get_u64(&r);
	h.seq = get_u64(&r);
	h.nsamples = get_u64(&r);
	h.missing_entries = get_u64(&r);
	h.samples_overflow = get_u64(&r);
	trigger_at = r.p; /* the trigger id is read again into the block below */
	{
		uint32_t tl = get_u32(&r);

		if (tl != STR_NULL) {
			if (tl > r.left)
				goto bad;
			r.p += tl;
			r.left -= tl;
		}
	}
	for (int i = 0; i < narrays; i++) {
		n[i] = get_u64(&r);
		if (r.bad || n[i] > r.left / min[i])
			goto bad;
		need += n[i] * min[i];
	}
	if (need > r.left)
		goto bad;
	fixed = (sizeof(*w) + 7) & ~(size_t)7;
	for (int i = 0; i < NARRAYS; i++)
		fixed += (n[i] * elem[i] + 7) & ~(size_t)7;
	/* strings and arrays: at most twice their bytes in the file, with NULs and alignment */
	bytes = fixed + 2 * body + 64;
	block = calloc(1, bytes);
	if (!block) {
		errno = ENOMEM;
		return NULL;
	}
	w = (struct agg_window *)block;
	*w = h;
	r.heap = block + ((sizeof(*w) + 7) & ~(size_t)7);
	r.end = block + bytes;
	w->rows = take(&r, n[0] * elem[0]);
	w->sources = take(&r, n[1] * elem[1]);
	w->functions = take(&r, n[2] * elem[2]);
	w->frames = take(&r, n[3] * elem[3]);
	w->stacks = take(&r, n[4] * elem[4]);
	w->routes = take(&r, n[5] * elem[5]);
	w->requests = take(&r, n[6] * elem[6]);
	w->offcpu = take(&r, n[7] * elem[7]);
	w->gpu = take(&r, n[8] * elem[8]);
	w->nrows = n[0];
	w->nsources = n[1];
	w->nfunctions = n[2];
	w->nframes = n[3];
	w->nstacks = n[4];
	w->nroutes = n[5];
	w->nrequests = n[6];
	w->noffcpu = n[7];
	w->ngpu = n[8];
	{
		struct rbuf t = r;

		t.p = trigger_at;
		t.left = body - (size_t)(trigger_at - (buf + HEADER));
		w->trigger_id = get_str(&t);
		r.heap = t.heap;
		r.bad = t.bad;
	}
	get_rows(&r, w);
	get_dicts(&r, w);
	get_requests(&r, w);
	get_offcpu(&r, w);
	get_gpu(&r, w);
	if (r.bad || r.left) {
		free(block);
		goto bad;
	}
	w->bytes = bytes;
	w->next = NULL;
	return w;
bad:
	errno = EINVAL;
	return NULL;
}
