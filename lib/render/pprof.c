/*
 * pprof.c - a stack set as a gzip-compressed pprof profile (see pprof.h).
 *
 * Workload: one call per `traceprof ... --format pprof`, on a set of up to
 * some 10^5 frames and rows. Design, in three passes over the set:
 *
 *   1. validate every frame and row (nothing is written for a malformed
 *      set), mark the frames some stack uses and count what to allocate;
 *   2. give each used frame a Location (frame index -> location id in one
 *      array: the set's frames are already distinct), its Function and
 *      Mapping deduplicated through small open-addressing tables, every
 *      text through one string table (index 0 = "");
 *   3. one Sample per row, leaf first, and the Profile message packed by
 *      protobuf-c straight into zlib's gzip stream (no packed copy).
 *
 * Every table is sized from the set before it is filled, so nothing grows
 * and memory is linear in the set. Ids and string indices follow the
 * set's order, so the same set always gives the same bytes.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#include "perftools/profiles/profile.pb-c.h"
#include "traceprof/pprof.h"

#define KERNEL_MAPPING "[kernel.kallsyms]"

typedef Perftools__Profiles__Profile pb_profile;
typedef Perftools__Profiles__ValueType pb_value_type;
typedef Perftools__Profiles__Sample pb_sample;
typedef Perftools__Profiles__Label pb_label;
typedef Perftools__Profiles__Mapping pb_mapping;
typedef Perftools__Profiles__Location pb_location;
typedef Perftools__Profiles__Line pb_line;
typedef Perftools__Profiles__Function pb_function;

__attribute__((format(printf, 4, 5))) static int fail(char *err, size_t errlen, int rc,
						      const char *fmt, ...);

static int fail(char *err, size_t errlen, int rc, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return rc;
}

static size_t pow2_at_least(size_t n)
{
	size_t p = 16;

	while (p < n)
		p <<= 1;
	return p;
}

/* ---- the string table: texts borrowed from the set, one hash table ---- */

struct strtab {
	char **strs;	 /* the table, index 0 = ""; borrowed texts */
	size_t n;	 /* entries used */
	size_t cap;	 /* entries allocated (never exceeded: sized up front) */
	uint32_t *slots; /* open addressing: string index + 1, 0 = empty */
	size_t mask;	 /* slots - 1 */
};

static uint64_t hash_bytes(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a */

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
	return h;
}

static int strtab_init(struct strtab *t, size_t cap)
{
	t->cap = cap;
	t->n = 0;
	t->mask = pow2_at_least(2 * cap) - 1;
	t->strs = calloc(cap, sizeof(*t->strs));
	t->slots = calloc(t->mask + 1, sizeof(*t->slots));
	return t->strs && t->slots ? 0 : -ENOMEM;
}

static void strtab_free(struct strtab *t)
{
	free(t->strs);
	free(t->slots);
}

/* The index of s (added if new). The table is sized for every text the
 * set can bring, so it never fills. */
static int64_t strtab_add(struct strtab *t, const char *s)
{
	size_t i = hash_bytes(s) & t->mask;

	for (; t->slots[i]; i = (i + 1) & t->mask)
		if (strcmp(t->strs[t->slots[i] - 1], s) == 0)
			return t->slots[i] - 1;
	t->strs[t->n] = (char *)(uintptr_t)s; /* protobuf-c's type; never written */
	t->slots[i] = (uint32_t)++t->n;
	return (int64_t)t->n - 1;
}

/* ---- functions and mappings: a key of three string indices -> id ---- */

struct idtab {
	int64_t (*keys)[3]; /* keys[id - 1] */
	size_t n;	    /* ids given */
	uint32_t *slots;    /* id, 0 = empty */
	size_t mask;
};

static int idtab_init(struct idtab *t, size_t cap)
{
	t->n = 0;
	t->mask = pow2_at_least(2 * cap) - 1;
	t->keys = calloc(cap ? cap : 1, sizeof(*t->keys));
	t->slots = calloc(t->mask + 1, sizeof(*t->slots));
	return t->keys && t->slots ? 0 : -ENOMEM;
}

static void idtab_free(struct idtab *t)
{
	free(t->keys);
	free(t->slots);
}

/* The id of key (a new one, 1-based, if unseen); *added tells which. */
static uint64_t idtab_get(struct idtab *t, int64_t a, int64_t b, int64_t c, bool *added)
{
	uint64_t h = ((uint64_t)a * 0x9e3779b97f4a7c15ULL) ^ ((uint64_t)b * 0xc2b2ae3d27d4eb4fULL) ^
		     ((uint64_t)c * 0x165667b19e3779f9ULL);
	size_t i = (h ^ h >> 29) & t->mask;

	for (; t->slots[i]; i = (i + 1) & t->mask) {
		int64_t *k = t->keys[t->slots[i] - 1];

		if (k[0] == a && k[1] == b && k[2] == c) {
			*added = false;
			return t->slots[i];
		}
	}
	t->keys[t->n][0] = a;
	t->keys[t->n][1] = b;
	t->keys[t->n][2] = c;
	t->slots[i] = (uint32_t)++t->n;
	*added = true;
	return t->n;
}

/* ---- validation ---- */

static int check_frame(const struct tp_frame_info *f, size_t i, char *err, size_t errlen)
{
	if (!f->function || !f->name || !f->module || !f->build_id)
		return fail(err, errlen, -EINVAL, "frame %zu: %s is NULL", i,
			    !f->function ? "function"
			    : !f->name	 ? "name"
			    : !f->module ? "module"
					 : "build_id");
	if (f->kind > TP_FRAME_UNSYMBOLIZED)
		return fail(err, errlen, -EINVAL, "frame %zu (%s): unknown kind %u", i, f->function,
			    f->kind);
	return 0;
}

/* A row's values in the cohort written; off-CPU and GPU time are cohort
 * A's only. */
static void row_values(const struct tp_stack_row *r, bool b, int64_t *samples, int64_t *cpu_us,
		       int64_t *off_us, int64_t *gpu_ns)
{
	*samples = b ? r->b_samples : r->samples;
	*cpu_us = b ? r->b_cpu_us : r->cpu_us;
	*off_us = b ? 0 : r->offcpu_us;
	*gpu_ns = b ? 0 : r->gpu_ns;
}

/* Checks row i; marks its frames in used[] when the row is kept. */
static int check_row(const struct tp_stackset *set, size_t i, bool b, bool *used, char *err,
		     size_t errlen)
{
	const struct tp_stack_row *r = &set->rows[i];
	int64_t samples, cpu_us, off_us, gpu_ns;

	if (r->depth == 0)
		return fail(err, errlen, -EINVAL, "row %zu: empty stack (depth 0)", i);
	if (r->depth > TP_PPROF_MAX_DEPTH)
		return fail(err, errlen, -EINVAL, "row %zu: stack depth %u exceeds the limit of %d",
			    i, r->depth, TP_PPROF_MAX_DEPTH);
	if (!r->frames)
		return fail(err, errlen, -EINVAL, "row %zu: frames is NULL with depth %u", i,
			    r->depth);
	if (!r->service)
		return fail(err, errlen, -EINVAL, "row %zu: service is NULL", i);
	row_values(r, b, &samples, &cpu_us, &off_us, &gpu_ns);
	if (samples < 0 || cpu_us < 0 || off_us < 0 || gpu_ns < 0)
		return fail(err, errlen, -EINVAL,
			    "row %zu: negative value (%lld samples, %lld us, %lld us off CPU, "
			    "%lld ns on the GPU)",
			    i, (long long)samples, (long long)cpu_us, (long long)off_us,
			    (long long)gpu_ns);
	if (cpu_us > INT64_MAX / 1000 || off_us > INT64_MAX / 1000)
		return fail(err, errlen, -EINVAL, "row %zu: %lld us overflows nanoseconds", i,
			    (long long)(cpu_us > off_us ? cpu_us : off_us));
	for (uint32_t d = 0; d < r->depth; d++)
		if (r->frames[d] >= set->nframes)
			return fail(err, errlen, -EINVAL,
				    "row %zu: frame index %u out of range (the set has %zu frames)",
				    i, r->frames[d], set->nframes);
	if (samples != 0 || cpu_us != 0 || off_us != 0 ||
	    gpu_ns != 0) /* left-out rows: no locations */
		for (uint32_t d = 0; d < r->depth; d++)
			used[r->frames[d]] = true;
	return 0;
}

static bool row_kept(const struct tp_stack_row *r, bool b)
{
	int64_t samples, cpu_us, off_us, gpu_ns;

	row_values(r, b, &samples, &cpu_us, &off_us, &gpu_ns);
	return samples != 0 || cpu_us != 0 || off_us != 0 || gpu_ns != 0;
}

/* ---- the gzip sink protobuf-c packs into ---- */

struct gz_sink {
	ProtobufCBuffer base; /* first: protobuf-c calls base.append */
	z_stream zs;
	FILE *out;
	int rc;	      /* first failure, 0 while all is well */
	int os_errno; /* errno of a failed write, 0 if none */
	unsigned char buf[16384];
};

static int gz_pump(struct gz_sink *s, int flush)
{
	int zrc;

	do {
		s->zs.next_out = s->buf;
		s->zs.avail_out = sizeof(s->buf);
		zrc = deflate(&s->zs, flush);
		if (zrc == Z_STREAM_ERROR)
			return -EIO;
		size_t have = sizeof(s->buf) - s->zs.avail_out;
		if (have && fwrite(s->buf, 1, have, s->out) != have) {
			s->os_errno = errno;
			return -EIO;
		}
	} while (s->zs.avail_out == 0);
	return flush == Z_FINISH && zrc != Z_STREAM_END ? -EIO : 0;
}

static void gz_append(ProtobufCBuffer *buffer, size_t len, const uint8_t *data)
{
	struct gz_sink *s = (struct gz_sink *)buffer;

	while (!s->rc && len) {
		uInt chunk = len > (1u << 30) ? (1u << 30) : (uInt)len;

		s->zs.next_in = (Bytef *)(uintptr_t)data;
		s->zs.avail_in = chunk;
		s->rc = gz_pump(s, Z_NO_FLUSH);
		data += chunk;
		len -= chunk;
	}
}

/* Packs msg into out as gzip (header mtime 0: zlib's default). */
static int write_gzip(const pb_profile *msg, FILE *out, char *err, size_t errlen)
{
	struct gz_sink *s = calloc(1, sizeof(*s));
	int rc;

	if (!s)
		return fail(err, errlen, -ENOMEM, "out of memory");
	s->base.append = gz_append;
	s->out = out;
	/* 15 + 16: a gzip wrapper rather than zlib's */
	if (deflateInit2(&s->zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8,
			 Z_DEFAULT_STRATEGY) != Z_OK) {
		free(s);
		return fail(err, errlen, -ENOMEM, "cannot start gzip compression");
	}
	protobuf_c_message_pack_to_buffer(&msg->base, &s->base);
	rc = s->rc;
	if (!rc) {
		s->zs.next_in = NULL;
		s->zs.avail_in = 0;
		rc = gz_pump(s, Z_FINISH);
	}
	if (!rc && fflush(out) != 0) {
		s->os_errno = errno;
		rc = -EIO;
	}
	if (!rc && ferror(out))
		rc = -EIO;
	if (rc)
		fail(err, errlen, rc, "cannot write the profile: %s",
		     s->os_errno ? strerror(s->os_errno) : "output error");
	deflateEnd(&s->zs);
	free(s);
	return rc;
}

/* ---- building the message ---- */

struct build {
	const struct tp_stackset *set;
	bool b; /* cohort B */
	struct strtab st;
	struct idtab funcs, maps;
	bool *used;		/* [nframes]: some stack has this frame */
	uint64_t *loc_of_frame; /* [nframes]: location id, 0 = unused */
	size_t nused, nkept, total_depth, nlabels;
	bool offcpu;		/* some kept row has off-CPU time: a sample type off_cpu */
	bool gpu;		/* some kept row has GPU time: a sample type gpu */
	pb_location *locs;	/* [nused] */
	pb_location **loc_ptrs; /* [nused] */
	pb_line *lines;		/* [nused]: one line per location */
	pb_line **line_ptrs;	/* [nused] */
	pb_function *fns;	/* [nused] at most */
	pb_function **fn_ptrs;
	pb_mapping *mps; /* [nused] at most */
	pb_mapping **mp_ptrs;
	pb_sample *samples;	 /* [nkept] */
	pb_sample **sample_ptrs; /* [nkept] */
	uint64_t *locids;	 /* [total_depth] */
	int64_t *values;	 /* [4 * nkept] */
	pb_label *labels;	 /* [nlabels] */
	pb_label **label_ptrs;	 /* [nlabels] */
};

static void build_free(struct build *bd)
{
	strtab_free(&bd->st);
	idtab_free(&bd->funcs);
	idtab_free(&bd->maps);
	free(bd->used);
	free(bd->loc_of_frame);
	free(bd->locs);
	free(bd->loc_ptrs);
	free(bd->lines);
	free(bd->line_ptrs);
	free(bd->fns);
	free(bd->fn_ptrs);
	free(bd->mps);
	free(bd->mp_ptrs);
	free(bd->samples);
	free(bd->sample_ptrs);
	free(bd->locids);
	free(bd->values);
	free(bd->labels);
	free(bd->label_ptrs);
}

static int build_alloc(struct build *bd)
{
	size_t u = bd->nused ? bd->nused : 1, k = bd->nkept ? bd->nkept : 1;
	size_t nl = bd->nlabels ? bd->nlabels : 1;
	/* every text a frame or a row can bring, and the profile's own */
	size_t nstr = 5 * bd->nused + 3 * bd->nkept + 16;

	if (strtab_init(&bd->st, nstr) || idtab_init(&bd->funcs, u) || idtab_init(&bd->maps, u))
		return -ENOMEM;
	bd->loc_of_frame = calloc(bd->set->nframes ? bd->set->nframes : 1, sizeof(uint64_t));
	bd->locs = calloc(u, sizeof(*bd->locs));
	bd->loc_ptrs = calloc(u, sizeof(*bd->loc_ptrs));
	bd->lines = calloc(u, sizeof(*bd->lines));
	bd->line_ptrs = calloc(u, sizeof(*bd->line_ptrs));
	bd->fns = calloc(u, sizeof(*bd->fns));
	bd->fn_ptrs = calloc(u, sizeof(*bd->fn_ptrs));
	bd->mps = calloc(u, sizeof(*bd->mps));
	bd->mp_ptrs = calloc(u, sizeof(*bd->mp_ptrs));
	bd->samples = calloc(k, sizeof(*bd->samples));
	bd->sample_ptrs = calloc(k, sizeof(*bd->sample_ptrs));
	bd->locids = calloc(bd->total_depth ? bd->total_depth : 1, sizeof(*bd->locids));
	bd->values = calloc(4 * k, sizeof(*bd->values));
	bd->labels = calloc(nl, sizeof(*bd->labels));
	bd->label_ptrs = calloc(nl, sizeof(*bd->label_ptrs));
	if (!bd->loc_of_frame || !bd->locs || !bd->loc_ptrs || !bd->lines || !bd->line_ptrs ||
	    !bd->fns || !bd->fn_ptrs || !bd->mps || !bd->mp_ptrs || !bd->samples ||
	    !bd->sample_ptrs || !bd->locids || !bd->values || !bd->labels || !bd->label_ptrs)
		return -ENOMEM;
	return 0;
}

/* The mapping name of a frame: kernel frames all read "[kernel.kallsyms]"
 * unless they name a kernel module; NULL: no mapping (module unknown). */
static const char *mapping_name(const struct tp_frame_info *f)
{
	if (f->kind == TP_FRAME_KERNEL &&
	    (!f->module[0] || !strcmp(f->module, "[kernel]") || !strcmp(f->module, "vmlinux")))
		return KERNEL_MAPPING;
	if (!f->module[0] && !f->build_id[0])
		return NULL;
	return f->module;
}

static uint64_t add_mapping(struct build *bd, const struct tp_frame_info *f)
{
	const char *name = mapping_name(f);
	int64_t fname, bid;
	pb_mapping *m;
	uint64_t id;
	bool added;

	if (!name)
		return 0;
	fname = strtab_add(&bd->st, name);
	bid = strtab_add(&bd->st, f->build_id);
	id = idtab_get(&bd->maps, fname, bid, 0, &added);
	m = &bd->mps[id - 1];
	if (added) {
		perftools__profiles__mapping__init(m);
		m->id = id;
		m->filename = fname;
		m->build_id = bid;
		m->has_functions = true;
		bd->mp_ptrs[id - 1] = m;
	}
	if (f->file && f->file[0])
		m->has_filenames = true;
	if (f->line > 0)
		m->has_line_numbers = true;
	return id;
}

static uint64_t add_function(struct build *bd, const struct tp_frame_info *f)
{
	int64_t name = strtab_add(&bd->st, f->function);
	int64_t sys = strtab_add(&bd->st, f->name);
	int64_t file = strtab_add(&bd->st, f->file ? f->file : "");
	bool added;
	uint64_t id = idtab_get(&bd->funcs, name, sys, file, &added);

	if (added) {
		pb_function *fn = &bd->fns[id - 1];

		perftools__profiles__function__init(fn);
		fn->id = id;
		fn->name = name;
		fn->system_name = sys;
		fn->filename = file;
		bd->fn_ptrs[id - 1] = fn;
	}
	return id;
}

/* One Location per used frame, in frame order. */
static void add_locations(struct build *bd)
{
	size_t n = 0;

	for (size_t i = 0; i < bd->set->nframes; i++) {
		const struct tp_frame_info *f = &bd->set->frames[i];
		pb_location *loc = &bd->locs[n];
		pb_line *line = &bd->lines[n];

		if (!bd->used[i])
			continue;
		perftools__profiles__location__init(loc);
		perftools__profiles__line__init(line);
		loc->id = n + 1;
		loc->mapping_id = add_mapping(bd, f);
		loc->address = f->address;
		line->function_id = add_function(bd, f);
		line->line = f->line > 0 ? f->line : 0;
		bd->line_ptrs[n] = line;
		loc->n_line = 1;
		loc->line = &bd->line_ptrs[n];
		bd->loc_ptrs[n] = loc;
		bd->loc_of_frame[i] = loc->id;
		n++;
	}
}

static void add_label(struct build *bd, pb_sample *s, size_t *nl, int64_t key, const char *val)
{
	pb_label *l;

	if (!val || !val[0])
		return;
	l = &bd->labels[*nl];
	perftools__profiles__label__init(l);
	l->key = key;
	l->str = strtab_add(&bd->st, val);
	bd->label_ptrs[*nl] = l;
	if (!s->n_label)
		s->label = &bd->label_ptrs[*nl];
	s->n_label++;
	(*nl)++;
}

/* One Sample per kept row: locations leaf first (the set is root first). */
static void add_samples(struct build *bd, int64_t k_trace, int64_t k_span, int64_t k_service)
{
	size_t n = 0, depth = 0, nl = 0;

	for (size_t i = 0; i < bd->set->nrows; i++) {
		const struct tp_stack_row *r = &bd->set->rows[i];
		pb_sample *s = &bd->samples[n];
		int64_t samples, cpu_us, off_us, gpu_ns;

		if (!row_kept(r, bd->b))
			continue;
		perftools__profiles__sample__init(s);
		s->location_id = &bd->locids[depth];
		s->n_location_id = r->depth;
		for (uint32_t d = 0; d < r->depth; d++)
			bd->locids[depth + d] = bd->loc_of_frame[r->frames[r->depth - 1 - d]];
		depth += r->depth;
		row_values(r, bd->b, &samples, &cpu_us, &off_us, &gpu_ns);
		s->value = &bd->values[4 * n];
		s->n_value = 2 + bd->offcpu + bd->gpu;
		s->value[0] = samples;
		s->value[1] = cpu_us * 1000;
		if (bd->offcpu)
			s->value[2] = off_us * 1000;
		if (bd->gpu)
			s->value[2 + bd->offcpu] = gpu_ns;
		add_label(bd, s, &nl, k_trace, r->trace_id);
		add_label(bd, s, &nl, k_span, r->span_id);
		add_label(bd, s, &nl, k_service, r->service);
		bd->sample_ptrs[n++] = s;
	}
}

int tp_pprof_write(const struct tp_stackset *set, const struct tp_pprof_opts *opts, FILE *out,
		   char *err, size_t errlen)
{
	static const struct tp_pprof_opts defaults;
	struct build bd = {0};
	pb_profile prof = PERFTOOLS__PROFILES__PROFILE__INIT;
	pb_value_type types[4] = {
	    PERFTOOLS__PROFILES__VALUE_TYPE__INIT, PERFTOOLS__PROFILES__VALUE_TYPE__INIT,
	    PERFTOOLS__PROFILES__VALUE_TYPE__INIT, PERFTOOLS__PROFILES__VALUE_TYPE__INIT};
	pb_value_type *type_ptrs[4] = {&types[0], &types[1], &types[2], &types[3]};
	pb_value_type period = PERFTOOLS__PROFILES__VALUE_TYPE__INIT;
	int64_t comments[3], k_trace, k_span, k_service, cpu, ns;
	const char *cohort_name;
	size_t ncomments = 0;
	int rc;

	if (!opts)
		opts = &defaults;
	if (!set || !out)
		return fail(err, errlen, -EINVAL, "no %s to write", !set ? "stack set" : "output");
	if ((set->nframes && !set->frames) || (set->nrows && !set->rows))
		return fail(err, errlen, -EINVAL, "stack set has %s counted but NULL",
			    set->nrows && !set->rows ? "rows" : "frames");
	if (opts->cohort_b && !set->differential)
		return fail(err, errlen, -EINVAL, "cohort B asked of a set with one cohort");
	bd.set = set;
	bd.b = opts->cohort_b != 0;

	/* pass 1: validate, mark, count */
	for (size_t i = 0; i < set->nframes; i++)
		if ((rc = check_frame(&set->frames[i], i, err, errlen)) != 0)
			return rc;
	bd.used = calloc(set->nframes ? set->nframes : 1, sizeof(*bd.used));
	if (!bd.used)
		return fail(err, errlen, -ENOMEM, "out of memory");
	for (size_t i = 0; i < set->nrows; i++) {
		if ((rc = check_row(set, i, bd.b, bd.used, err, errlen)) != 0)
			goto out_free;
		if (!row_kept(&set->rows[i], bd.b))
			continue;
		bd.nkept++;
		if (!bd.b && set->rows[i].offcpu_us > 0)
			bd.offcpu = true;
		if (!bd.b && set->rows[i].gpu_ns > 0)
			bd.gpu = true;
		bd.total_depth += set->rows[i].depth;
		bd.nlabels += !!set->rows[i].trace_id + !!set->rows[i].span_id + 1;
	}
	for (size_t i = 0; i < set->nframes; i++)
		bd.nused += bd.used[i];

	/* pass 2: strings, mappings, functions, locations */
	if (build_alloc(&bd) != 0) {
		rc = fail(err, errlen, -ENOMEM, "out of memory");
		goto out_free;
	}
	strtab_add(&bd.st, "");
	types[0].type = strtab_add(&bd.st, "samples");
	types[0].unit = strtab_add(&bd.st, "count");
	types[1].type = cpu = strtab_add(&bd.st, "cpu");
	types[1].unit = ns = strtab_add(&bd.st, "nanoseconds");
	if (bd.offcpu) {
		types[2].type = strtab_add(&bd.st, "off_cpu");
		types[2].unit = ns;
	}
	if (bd.gpu) {
		types[2 + bd.offcpu].type = strtab_add(&bd.st, "gpu");
		types[2 + bd.offcpu].unit = ns;
	}
	period.type = cpu;
	period.unit = ns;
	k_trace = strtab_add(&bd.st, "trace_id");
	k_span = strtab_add(&bd.st, "span_id");
	k_service = strtab_add(&bd.st, "service");
	comments[ncomments++] = strtab_add(&bd.st, "traceprof profile");
	cohort_name = bd.b ? set->b_name : set->a_name;
	if (set->differential && cohort_name && cohort_name[0])
		comments[ncomments++] = strtab_add(&bd.st, cohort_name);
	if (opts->comment && opts->comment[0])
		comments[ncomments++] = strtab_add(&bd.st, opts->comment);
	add_locations(&bd);

	/* pass 3: samples, then the message */
	add_samples(&bd, k_trace, k_span, k_service);
	prof.n_sample_type = 2 + bd.offcpu + bd.gpu;
	prof.sample_type = type_ptrs;
	prof.n_sample = bd.nkept;
	prof.sample = bd.sample_ptrs;
	prof.n_mapping = bd.maps.n;
	prof.mapping = bd.mp_ptrs;
	prof.n_location = bd.nused;
	prof.location = bd.loc_ptrs;
	prof.n_function = bd.funcs.n;
	prof.function = bd.fn_ptrs;
	prof.n_string_table = bd.st.n;
	prof.string_table = bd.st.strs;
	if (set->time_from_ns > 0) {
		prof.time_nanos = set->time_from_ns;
		if (set->time_until_ns > set->time_from_ns)
			prof.duration_nanos = set->time_until_ns - set->time_from_ns;
	}
	prof.period_type = &period;
	prof.period = set->period_ns > 0 ? set->period_ns : 0;
	prof.n_comment = ncomments;
	prof.comment = comments;
	prof.default_sample_type = cpu;
	rc = write_gzip(&prof, out, err, errlen);
out_free:
	build_free(&bd);
	return rc;
}
