/*
 * stackset_read.c - the store -> struct tp_stackset reader (stackset_read.h).
 *
 * Four queries per set: the weighted stacks (trace_stacks, service_stacks
 * or cohort_stacks of 009), the frame ids of the distinct stacks
 * (stack_frame_ids), the distinct frames' details (frame_details), then
 * their display names (_frame_labels: SQL holds the labelling rule, the
 * reader keeps none of its own). Frames are deduplicated by
 * frame id (by function id where the dictionary lacks the frame) through a small open-addressing
 * map; each row's frame index array points into one array shared by equal stacks. Everything the
 * set points to lives in one arena, freed at once.
 *
 * Workload: a trace has tens of stacks; an hour of a busy service some
 * 10^4 distinct stacks of depth ~30, i.e. a few 10^5 frame positions read
 * from 10^4 rows of id arrays and ~10^3 distinct frames: linear.
 */

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "stackset_read.h"

/* Arena ------------------------------------------------------------------ */

struct chunk {
	struct chunk *next; /* older chunk */
	size_t used;	    /* bytes handed out */
	size_t cap;	    /* bytes in data */
	char data[];
};

/* The set and the memory it points to; stackset_free() takes &owned->set. */
struct owned_set {
	struct tp_stackset set; /* first: what callers see */
	struct chunk *arena;	/* every string and array of the set */
};

static void *arena_alloc(struct owned_set *o, size_t n)
{
	struct chunk *c = o->arena;

	n = (n + 7) & ~(size_t)7;
	if (!c || c->cap - c->used < n) {
		size_t cap = n > 65536 ? n : 65536;

		c = malloc(sizeof(*c) + cap);
		if (!c)
			return NULL;
		c->next = o->arena;
		c->used = 0;
		c->cap = cap;
		o->arena = c;
	}
	c->used += n;
	return c->data + c->used - n;
}

static char *arena_strdup(struct owned_set *o, const char *s)
{
	size_t n = strlen(s) + 1;
	char *p = arena_alloc(o, n);

	if (p)
		memcpy(p, s, n);
	return p;
}

void stackset_free(struct tp_stackset *set)
{
	struct owned_set *o = (struct owned_set *)set;
	struct chunk *c, *next;

	if (!set)
		return;
	for (c = o->arena; c; c = next) {
		next = c->next;
		free(c);
	}
	free(o->set.frames);
	free(o->set.rows);
	free(o);
}

/* uint64 -> uint32 map ---------------------------------------------------- */

struct map {
	uint64_t *keys; /* 0 = empty slot (key 0 is stored as ~0) */
	uint32_t *vals;
	size_t mask;
};

static int map_init(struct map *m, size_t n)
{
	size_t cap = 16;

	while (cap < 2 * n)
		cap <<= 1;
	m->keys = calloc(cap, sizeof(*m->keys));
	m->vals = calloc(cap, sizeof(*m->vals));
	m->mask = cap - 1;
	return m->keys && m->vals ? 0 : -ENOMEM;
}

static void map_free(struct map *m)
{
	free(m->keys);
	free(m->vals);
}

/* The slot of key: *found tells whether it holds the key already. */
static size_t map_slot(const struct map *m, uint64_t key, bool *found)
{
	uint64_t k = key ? key : ~(uint64_t)0;
	size_t i = (size_t)((k * 0x9E3779B97F4A7C15ull) >> 17) & m->mask;

	while (m->keys[i] && m->keys[i] != k)
		i = (i + 1) & m->mask;
	*found = m->keys[i] == k;
	return i;
}

static void map_put(struct map *m, size_t slot, uint64_t key, uint32_t val)
{
	m->keys[slot] = key ? key : ~(uint64_t)0;
	m->vals[slot] = val;
}

/* Reading --------------------------------------------------------------- */

/* One weighted stack before frames are resolved. */
struct raw_row {
	uint64_t stack_id;
	const char *service; /* arena */
	const char *span_id; /* arena, or NULL */
	int64_t samples, cpu_us, b_samples, b_cpu_us;
};

struct reader {
	PGconn *conn;
	struct owned_set *o;
	struct raw_row *rows;
	size_t nrows, cap;
	char *err;
	size_t errlen;
};

static int query_error(struct reader *r, PGresult *res, const char *what)
{
	const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
	const char *msg = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
	const char *hint = PQresultErrorField(res, PG_DIAG_MESSAGE_HINT);
	bool bad_arg = state && strncmp(state, "22", 2) == 0;

	if (bad_arg)
		snprintf(r->err, r->errlen, "%s%s%s", msg ? msg : "invalid argument",
			 hint ? "\nhint: " : "", hint ? hint : "");
	else
		snprintf(r->err, r->errlen, "%s failed: %s", what,
			 msg ? msg : PQerrorMessage(r->conn));
	PQclear(res);
	return bad_arg ? -EINVAL : -EIO;
}

static PGresult *run(struct reader *r, const char *sql, int n, const char *const *params,
		     const char *what, int *rc)
{
	PGresult *res = PQexecParams(r->conn, sql, n, NULL, params, NULL, NULL, 0);

	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		*rc = query_error(r, res, what);
		return NULL;
	}
	return res;
}

static int add_row(struct reader *r, struct raw_row row)
{
	if (r->nrows == r->cap) {
		size_t cap = r->cap ? 2 * r->cap : 256;
		struct raw_row *p = realloc(r->rows, cap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		r->rows = p;
		r->cap = cap;
	}
	r->rows[r->nrows++] = row;
	return 0;
}

static int64_t ms_to_us(const char *ms)
{
	return llround(strtod(ms, NULL) * 1000.0);
}

/* Rows are grouped by service for label_frames: sort keeps the SQL order
 * within a service. */
static int cmp_raw_service(const void *a, const void *b)
{
	const struct raw_row *x = a, *y = b;
	int c = strcmp(x->service, y->service);

	if (c)
		return c;
	return x < y ? -1 : x > y;
}

/* Entries of a bigint[] text ("{1,2,3}"): commas + 1, 0 for "{}". */
static size_t count_ids(const char *a)
{
	size_t n = 1;

	if (!strcmp(a, "{}"))
		return 0;
	for (; *a; a++)
		n += *a == ',';
	return n;
}

/* The next id of a bigint[] text, advancing *p; false at the end. */
static bool next_id(const char **p, uint64_t *id)
{
	const char *a = *p;
	char *end;

	while (*a == '{' || *a == ',')
		a++;
	if ((*a < '0' || *a > '9') && *a != '-')
		return false;
	*id = (uint64_t)strtoll(a, &end, 10); /* ids are signed 64-bit hashes */
	if (end == a)
		return false;
	*p = end;
	return true;
}

/* A bigint[] literal of ids (malloc'ed), NULL on ENOMEM. */
static char *id_array(const uint64_t *ids, size_t n)
{
	char *out = malloc(n * 21 + 3), *p = out;

	if (!out)
		return NULL;
	*p++ = '{';
	for (size_t i = 0; i < n; i++)
		p += sprintf(p, "%s%" PRId64, i ? "," : "", (int64_t)ids[i]);
	*p++ = '}';
	*p = '\0';
	return out;
}

/* Numbers the distinct stack ids of r->rows in stacks (*nstacks of them) and
 * returns them as a bigint[] literal (malloc'ed), NULL on ENOMEM. */
static char *distinct_stack_ids(struct reader *r, struct map *stacks, size_t *nstacks)
{
	char *ids = malloc(r->nrows * 21 + 3), *p = ids;

	if (!ids)
		return NULL;
	*p++ = '{';
	for (size_t i = 0; i < r->nrows; i++) {
		bool found;
		size_t slot = map_slot(stacks, r->rows[i].stack_id, &found);

		if (found)
			continue;
		map_put(stacks, slot, r->rows[i].stack_id, (uint32_t)(*nstacks)++);
		p +=
		    sprintf(p, "%s%" PRId64, *nstacks > 1 ? "," : "", (int64_t)r->rows[i].stack_id);
	}
	*p++ = '}';
	*p = '\0';
	return ids;
}

/* The frame_details answer res into o->set.frames (numbered in frames);
 * the frames it lacks are "[unknown]". Returns 0 or -ENOMEM. */
static int take_frame_details(struct owned_set *o, PGresult *res, const struct map *frames)
{
	struct tp_stackset *s = &o->set;

	for (int i = 0; i < PQntuples(res); i++) {
		uint64_t frame_id = strtoull(PQgetvalue(res, i, 0), NULL, 10);
		uint64_t function_id = strtoull(PQgetvalue(res, i, 1), NULL, 10);
		uint64_t key = frame_id ? frame_id : function_id * 0xD6E8FEB86659FD93ull + 1;
		bool found;
		size_t slot = map_slot(frames, key, &found);
		struct tp_frame_info *f;

		if (!found)
			continue;
		f = &s->frames[frames->vals[slot]];
		if (f->name)
			continue; /* a frame asked for twice */
		f->name = arena_strdup(o, PQgetvalue(res, i, 2));
		f->module = arena_strdup(o, PQgetvalue(res, i, 3));
		f->kind = (uint8_t)atoi(PQgetvalue(res, i, 4));
		f->build_id = arena_strdup(o, PQgetvalue(res, i, 5));
		f->file = PQgetisnull(res, i, 6) ? NULL : arena_strdup(o, PQgetvalue(res, i, 6));
		f->line = (int32_t)atoi(PQgetvalue(res, i, 7));
		f->address = strtoull(PQgetvalue(res, i, 8), NULL, 10);
		if (!f->name || !f->module || !f->build_id || (!PQgetisnull(res, i, 6) && !f->file))
			return -ENOMEM;
	}
	for (size_t i = 0; i < s->nframes; i++) /* never NULL, whatever the answer */
		if (!s->frames[i].name && (!(s->frames[i].name = arena_strdup(o, "[unknown]")) ||
					   !(s->frames[i].module = arena_strdup(o, "")) ||
					   !(s->frames[i].build_id = arena_strdup(o, ""))))
			return -ENOMEM;
	return 0;
}

/* The set's rows (allocated, empty): r->rows in order, each pointing at
 * its stack's frame indexes (fidx from stack_first, stack_depth long). */
static void fill_rows(struct reader *r, const struct map *stacks, const uint32_t *stack_first,
		      const uint32_t *stack_depth, uint32_t *fidx, const char *trace_id)
{
	struct tp_stackset *s = &r->o->set;

	for (size_t i = 0; i < r->nrows; i++) {
		bool found;
		size_t slot = map_slot(stacks, r->rows[i].stack_id, &found);
		uint32_t si = stacks->vals[slot];
		struct tp_stack_row *row = &s->rows[s->nrows];

		if (stack_depth[si] == 0)
			continue; /* stack_frame_ids always gives a frame; cannot happen */
		row->frames = fidx + stack_first[si];
		row->depth = stack_depth[si];
		row->samples = r->rows[i].samples;
		row->cpu_us = r->rows[i].cpu_us;
		row->b_samples = r->rows[i].b_samples;
		row->b_cpu_us = r->rows[i].b_cpu_us;
		row->service = r->rows[i].service;
		row->trace_id = trace_id;
		row->span_id = r->rows[i].span_id;
		s->nrows++;
	}
}

/* Display names from the SQL API's one rule for frame labels
 * (_frame_labels: the function name, "name [module]" where functions of
 * one name from two modules share a service's stacks), one query: the
 * functions each service's rows use are one group. fn[i]: frame i's
 * function id. */
static int label_frames(struct reader *r, const uint64_t *fn)
{
	struct owned_set *o = r->o;
	struct tp_stackset *s = &o->set;
	uint32_t *stamp = calloc(s->nframes + 1, sizeof(*stamp)), svc = 0;
	size_t n = 0, uses = 0;
	uint64_t *grp = NULL, *fid = NULL;
	char *grps = NULL, *fids = NULL, **label = NULL;
	struct map labels = {0};
	PGresult *res = NULL;
	int rc = -ENOMEM;

	for (size_t i = 0; i < s->nrows; i++)
		uses += s->rows[i].depth;
	grp = malloc((uses + 1) * sizeof(*grp));
	fid = malloc((uses + 1) * sizeof(*fid));
	if (!stamp || !grp || !fid)
		goto out;
	for (size_t i = 0; i < s->nrows; i++) { /* rows come grouped by service */
		if (i == 0 || strcmp(s->rows[i].service, s->rows[i - 1].service) != 0)
			svc++;
		for (uint32_t d = 0; d < s->rows[i].depth; d++) {
			uint32_t fi = s->rows[i].frames[d];

			if (stamp[fi] == svc)
				continue;
			stamp[fi] = svc;
			grp[n] = svc;
			fid[n++] = fn[fi];
		}
	}
	grps = id_array(grp, n);
	fids = id_array(fid, n);
	if (!grps || !fids)
		goto out;
	{
		const char *params[2] = {grps, fids};

		res = run(r,
			  "SELECT function_id, label "
			  "FROM traceprof._frame_labels($1::integer[], $2::bigint[])",
			  2, params, "reading frame labels", &rc);
		if (!res)
			goto out;
	}
	rc = -ENOMEM;
	label = calloc((size_t)PQntuples(res) + 1, sizeof(*label));
	if (!label || map_init(&labels, (size_t)PQntuples(res)))
		goto out;
	for (int i = 0; i < PQntuples(res); i++) {
		bool found;
		uint64_t id = (uint64_t)strtoll(PQgetvalue(res, i, 0), NULL, 10);

		map_put(&labels, map_slot(&labels, id, &found), id, (uint32_t)i);
	}
	for (size_t i = 0; i < s->nframes; i++) {
		bool found;
		size_t slot = map_slot(&labels, fn[i], &found);
		uint32_t k = found ? labels.vals[slot] : 0;

		if (!found)
			s->frames[i].function = arena_strdup(o, "[unknown]");
		else if (!label[k])
			s->frames[i].function = label[k] =
			    arena_strdup(o, PQgetvalue(res, (int)k, 1));
		else
			s->frames[i].function = label[k];
		if (!s->frames[i].function)
			goto out;
	}
	rc = 0;
out:
	PQclear(res);
	map_free(&labels);
	free(label);
	free(grps);
	free(fids);
	free(grp);
	free(fid);
	free(stamp);
	return rc;
}

/* Resolves the frames of r->rows into the set. */
static int resolve(struct reader *r, const char *trace_id)
{
	struct owned_set *o = r->o;
	struct tp_stackset *s = &o->set;
	struct map stacks = {0}, frames = {0};
	size_t nstacks = 0, nres;
	char *ids = NULL;
	PGresult *res = NULL;
	uint32_t *stack_first = NULL, *stack_depth = NULL, *fidx = NULL;
	uint64_t *pend_frame = NULL, *pend_func = NULL;
	size_t ntotal = 0, npend = 0;
	char *fids = NULL, *funcs = NULL;
	int rc = -ENOMEM;

	qsort(r->rows, r->nrows, sizeof(*r->rows), cmp_raw_service);
	if (map_init(&stacks, r->nrows))
		goto out;
	ids = distinct_stack_ids(r, &stacks, &nstacks);
	if (!ids)
		goto out;
	{
		const char *params[1] = {ids};

		res = run(r,
			  "SELECT stack_id, frame_ids, function_ids "
			  "FROM traceprof.stack_frame_ids($1::bigint[])",
			  1, params, "reading stacks", &rc);
		if (!res)
			goto out;
	}
	rc = -ENOMEM;
	nres = (size_t)PQntuples(res);
	/* every frame position of every stack, to size the index arrays */
	for (size_t i = 0; i < nres; i++)
		ntotal += count_ids(PQgetvalue(res, (int)i, 1));
	stack_first = calloc(nstacks + 1, sizeof(*stack_first));
	stack_depth = calloc(nstacks + 1, sizeof(*stack_depth));
	fidx = arena_alloc(o, (ntotal + 1) * sizeof(*fidx));
	pend_frame = malloc((ntotal + 1) * sizeof(*pend_frame));
	pend_func = malloc((ntotal + 1) * sizeof(*pend_func));
	if (!stack_first || !stack_depth || !fidx || !pend_frame || !pend_func ||
	    map_init(&frames, ntotal))
		goto out;
	for (size_t i = 0, at = 0; i < nres; i++) {
		uint64_t sid = strtoull(PQgetvalue(res, (int)i, 0), NULL, 10);
		const char *fr = PQgetvalue(res, (int)i, 1), *fn = PQgetvalue(res, (int)i, 2);
		bool found;
		size_t slot = map_slot(&stacks, sid, &found);
		uint32_t si;

		if (!found)
			continue; /* not asked for */
		si = stacks.vals[slot];
		stack_first[si] = (uint32_t)at;
		for (;;) {
			uint64_t frame_id, function_id, key;

			if (!next_id(&fr, &frame_id) || !next_id(&fn, &function_id))
				break;
			key = frame_id ? frame_id : function_id * 0xD6E8FEB86659FD93ull + 1;
			slot = map_slot(&frames, key, &found);
			if (!found) {
				pend_frame[npend] = frame_id;
				pend_func[npend++] = function_id;
				map_put(&frames, slot, key, (uint32_t)s->nframes++);
			}
			fidx[at++] = frames.vals[slot];
			stack_depth[si]++;
		}
	}
	PQclear(res);
	res = NULL;
	/* the distinct frames' details, in the order they were numbered */
	s->frames = calloc(s->nframes + 1, sizeof(*s->frames));
	fids = id_array(pend_frame, npend);
	funcs = id_array(pend_func, npend);
	if (!s->frames || !fids || !funcs)
		goto out;
	{
		const char *params[2] = {fids, funcs};

		res = run(r,
			  "SELECT frame_id, function_id, name, module, kind, build_id, file, line, "
			  "address FROM traceprof.frame_details($1::bigint[], $2::bigint[])",
			  2, params, "reading frames", &rc);
		if (!res)
			goto out;
	}
	rc = -ENOMEM;
	if (take_frame_details(o, res, &frames))
		goto out;
	s->rows = calloc(r->nrows + 1, sizeof(*s->rows));
	if (!s->rows)
		goto out;
	fill_rows(r, &stacks, stack_first, stack_depth, fidx, trace_id);
	rc = label_frames(r, pend_func);
out:
	if (rc == -ENOMEM)
		snprintf(r->err, r->errlen, "out of memory reading %zu stacks", r->nrows);
	PQclear(res);
	free(ids);
	free(fids);
	free(funcs);
	free(pend_frame);
	free(pend_func);
	free(stack_first);
	free(stack_depth);
	map_free(&stacks);
	map_free(&frames);
	return rc;
}

/* The nominal sampling period: CPU per sample over the set. */
static void set_period(struct tp_stackset *s)
{
	int64_t n = 0, us = 0;

	for (size_t i = 0; i < s->nrows; i++) {
		n += s->rows[i].samples + s->rows[i].b_samples;
		us += s->rows[i].cpu_us + s->rows[i].b_cpu_us;
	}
	s->period_ns = n ? (int64_t)llround((double)us * 1000.0 / (double)n) : 0;
}

static int begin(struct reader *r, PGconn *conn, char *err, size_t errlen)
{
	memset(r, 0, sizeof(*r));
	r->conn = conn;
	r->err = err;
	r->errlen = errlen;
	r->o = calloc(1, sizeof(*r->o));
	if (!r->o) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	return 0;
}

static int finish(struct reader *r, int rc, struct tp_stackset **out)
{
	free(r->rows);
	if (rc) {
		stackset_free(&r->o->set);
		return rc;
	}
	set_period(&r->o->set);
	*out = &r->o->set;
	return 0;
}

int stackset_read_trace(PGconn *conn, const char *trace_id, const char *service,
			struct tp_stackset **out, char *err, size_t errlen)
{
	struct reader r;
	const char *params[2] = {trace_id, service};
	PGresult *res;
	char *tid = NULL;
	int rc = begin(&r, conn, err, errlen);

	if (rc)
		return rc;
	res = run(&r,
		  "SELECT service, span_id, stack_id, samples, cpu_ms, "
		  "traceprof.trace_id_text(traceprof.parse_trace_id($1)) "
		  "FROM traceprof.trace_stacks($1, $2)",
		  2, params, "reading the trace's stacks", &rc);
	if (!res)
		return finish(&r, rc, out);
	for (int i = 0; i < PQntuples(res) && !rc; i++) {
		struct raw_row row = {0};

		row.service = arena_strdup(r.o, PQgetvalue(res, i, 0));
		row.span_id =
		    PQgetisnull(res, i, 1) ? NULL : arena_strdup(r.o, PQgetvalue(res, i, 1));
		row.stack_id = strtoull(PQgetvalue(res, i, 2), NULL, 10);
		row.samples = strtoll(PQgetvalue(res, i, 3), NULL, 10);
		row.cpu_us = ms_to_us(PQgetvalue(res, i, 4));
		if (!tid)
			tid = arena_strdup(r.o, PQgetvalue(res, i, 5));
		rc = !row.service || !tid ? -ENOMEM : add_row(&r, row);
	}
	PQclear(res);
	if (rc == -ENOMEM)
		snprintf(err, errlen, "out of memory");
	if (!rc && r.nrows)
		rc = resolve(&r, tid);
	return finish(&r, rc, out);
}

static int read_range_rows(struct reader *r, const char *sql, const char *const *params, int n,
			   const char *service, bool b)
{
	PGresult *res;
	int rc = 0;
	const char *svc;
	size_t i0 = r->nrows, cur = 0;

	res = run(r, sql, n, params, "reading the stacks", &rc);
	if (!res)
		return rc;
	svc = arena_strdup(r->o, service);
	if (!svc)
		rc = -ENOMEM;
	for (int i = 0; i < PQntuples(res) && !rc; i++) {
		struct raw_row row = {0};
		uint64_t sid = strtoull(PQgetvalue(res, i, 0), NULL, 10);
		int64_t ns = strtoll(PQgetvalue(res, i, 1), NULL, 10);
		int64_t us = ms_to_us(PQgetvalue(res, i, 2));

		/* both cohorts come ordered by stack id: merge B into A's row */
		if (b) {
			while (cur < i0 && (int64_t)r->rows[cur].stack_id < (int64_t)sid)
				cur++;
			if (cur < i0 && r->rows[cur].stack_id == sid) {
				r->rows[cur].b_samples = ns;
				r->rows[cur].b_cpu_us = us;
				continue;
			}
		}
		row.stack_id = sid;
		row.service = svc;
		if (b) {
			row.b_samples = ns;
			row.b_cpu_us = us;
		} else {
			row.samples = ns;
			row.cpu_us = us;
		}
		rc = add_row(r, row);
	}
	PQclear(res);
	if (rc == -ENOMEM)
		snprintf(r->err, r->errlen, "out of memory");
	return rc;
}

int stackset_read_service(PGconn *conn, const char *service, int64_t from_us, int64_t until_us,
			  struct tp_stackset **out, char *err, size_t errlen)
{
	struct reader r;
	char from[64], until[64];
	const char *params[3] = {service, cli_time_sql(from_us, from, sizeof(from)),
				 cli_time_sql(until_us, until, sizeof(until))};
	int rc = begin(&r, conn, err, errlen);

	if (rc)
		return rc;
	r.o->set.time_from_ns = from_us * 1000;
	r.o->set.time_until_ns = until_us * 1000;
	rc = read_range_rows(&r,
			     "SELECT stack_id, samples, cpu_ms FROM traceprof.service_stacks("
			     "$1, $2::timestamptz, $3::timestamptz)",
			     params, 3, service, false);
	if (!rc && r.nrows)
		rc = resolve(&r, NULL);
	return finish(&r, rc, out);
}

int stackset_read_cohorts(PGconn *conn, const char *service, int64_t from_us, int64_t until_us,
			  const char *spec_a, const char *spec_b, const char *a_name,
			  const char *b_name, struct tp_stackset **out, char *err, size_t errlen)
{
	static const char sql[] = "SELECT stack_id, samples, cpu_ms FROM traceprof.cohort_stacks("
				  "$1, $2::timestamptz, $3::timestamptz, $4::jsonb, $5)";
	struct reader r;
	char from[64], until[64];
	const char *pa[5] = {service, cli_time_sql(from_us, from, sizeof(from)),
			     cli_time_sql(until_us, until, sizeof(until)), spec_a, "cohort_a"};
	const char *pb[5] = {pa[0], pa[1], pa[2], spec_b, "cohort_b"};
	int rc = begin(&r, conn, err, errlen);

	if (rc)
		return rc;
	r.o->set.differential = 1;
	r.o->set.time_from_ns = from_us * 1000;
	r.o->set.time_until_ns = until_us * 1000;
	r.o->set.a_name = arena_strdup(r.o, a_name ? a_name : "a");
	r.o->set.b_name = arena_strdup(r.o, b_name ? b_name : "b");
	if (!r.o->set.a_name || !r.o->set.b_name) {
		snprintf(err, errlen, "out of memory");
		return finish(&r, -ENOMEM, out);
	}
	rc = read_range_rows(&r, sql, pa, 5, service, false);
	if (!rc)
		rc = read_range_rows(&r, sql, pb, 5, service, true);
	if (!rc && r.nrows)
		rc = resolve(&r, NULL);
	return finish(&r, rc, out);
}
