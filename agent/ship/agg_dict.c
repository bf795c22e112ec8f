/*
 * agg_dict.c - see agg_dict.h.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "agg_dict.h"
#include "traceprof/utf8.h"

#define MAX_FRAMES  512
#define SOURCE_STRS 7

/* Common head of every dictionary entry. */
struct dent {
	uint64_t id;	    /* the entry's id */
	uint64_t last_used; /* seq of the last window that referenced it (or registration) */
	uint64_t mark;	    /* the closure (agg_dict.epoch) that holds it */
	size_t strbytes;    /* bytes of its strings, NULs included */
};

struct dsource {
	struct dent h;		    /* head */
	const char *s[SOURCE_STRS]; /* service, namespace, pod, container, node, build id, labels */
	char buf[];		    /* the strings */
};

struct dfunction {
	struct dent h;	    /* head */
	int kind;	    /* function kind */
	const char *name;   /* points into buf */
	const char *module; /* points into buf */
	char buf[];	    /* the strings */
};

struct dframe {
	struct dent h;	      /* head */
	uint64_t function_id; /* its function */
	uint64_t address;     /* address or 0 */
	int line;	      /* line or <= 0 */
	const char *build_id; /* points into buf */
	const char *file;     /* points into buf, or NULL */
	char buf[];	      /* the strings */
};

struct dstack {
	struct dent h;	   /* head */
	uint32_t n;	   /* frames */
	uint64_t frames[]; /* frame ids, root first */
};

/* ---- dictionary maps ---- */

static void *dmap_get(const struct agg_dict_map *m, uint64_t id)
{
	if (!m->cap)
		return NULL;
	for (size_t i = agg_mix64(id) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
		if (m->keys[i] == id)
			return m->vals[i];
		if (!m->keys[i])
			return NULL;
	}
}

static void dmap_insert(struct agg_dict_map *m, uint64_t id, void *val)
{
	size_t i = agg_mix64(id) & (m->cap - 1);

	while (m->keys[i])
		i = (i + 1) & (m->cap - 1);
	m->keys[i] = id;
	m->vals[i] = val;
	m->n++;
}

/* Rebuilds into cap slots, keeping entries for which keep() holds (the rest are freed). */
static int dmap_rebuild(struct agg_dict_map *m, size_t cap,
			bool (*keep)(const struct dent *, uint64_t), uint64_t arg,
			uint64_t *evicted)
{
	struct agg_dict_map nm = {.cap = cap};

	nm.keys = calloc(cap, sizeof(*nm.keys));
	nm.vals = calloc(cap, sizeof(*nm.vals));
	if (!nm.keys || !nm.vals) {
		free(nm.keys);
		free(nm.vals);
		return -ENOMEM;
	}
	for (size_t i = 0; i < m->cap; i++) {
		if (!m->keys[i])
			continue;
		if (keep && !keep(m->vals[i], arg)) {
			free(m->vals[i]);
			(*evicted)++;
			continue;
		}
		dmap_insert(&nm, m->keys[i], m->vals[i]);
	}
	free(m->keys);
	free(m->vals);
	*m = nm;
	return 0;
}

/* Takes ownership of val (freed on failure). */
static int dmap_put(struct agg_dict_map *m, uint64_t id, void *val)
{
	if ((m->n + 1) * 2 > m->cap && dmap_rebuild(m, m->cap ? m->cap * 2 : 64, NULL, 0, NULL)) {
		free(val);
		return -ENOMEM;
	}
	dmap_insert(m, id, val);
	return 0;
}

static void dmap_free(struct agg_dict_map *m)
{
	for (size_t i = 0; i < m->cap; i++)
		if (m->keys[i])
			free(m->vals[i]);
	free(m->keys);
	free(m->vals);
}

static bool still_used(const struct dent *e, uint64_t oldest)
{
	return e->last_used >= oldest;
}

static size_t str_size(const char *s)
{
	return (s ? strlen(s) : 0) + 1;
}

/* Copies s (NULL as "") to *pos and advances it; returns the copy. */
static const char *put_str(char **pos, const char *s)
{
	size_t n = str_size(s);
	char *d = *pos;

	memcpy(d, s ? s : "", n);
	*pos += n;
	return d;
}

/*
 * put_str() for what is added to the dictionary: the copy is made
 * safe to store and show (tp_utf8_sanitize: names come from other
 * processes), replacements counted in *sanitized.
 */
static const char *put_name(char **pos, const char *s, uint64_t *sanitized)
{
	size_t n = str_size(s);
	char *d = *pos;

	*sanitized += tp_utf8_sanitize(d, s ? s : "", n - 1) != 0;
	*pos += n;
	return d;
}

static void dent_init(struct dent *h, uint64_t seq, uint64_t id, size_t strbytes)
{
	h->id = id;
	h->last_used = seq;
	h->mark = 0;
	h->strbytes = strbytes;
}

int agg_dict_add_source(struct agg_dict *d, uint64_t seq, uint64_t id,
			const struct store_source *src)
{
	const char *in[SOURCE_STRS];
	struct dsource *e;
	size_t bytes = 0;
	char *pos;

	if (!id || !src || !src->service || !*src->service)
		return -EINVAL;
	if (dmap_get(&d->map[AGG_DICT_SOURCES], id))
		return 0;
	in[0] = src->service;
	in[1] = src->namespace_;
	in[2] = src->pod;
	in[3] = src->container;
	in[4] = src->node;
	in[5] = src->build_id;
	in[6] = src->labels_json;
	for (int i = 0; i < SOURCE_STRS; i++)
		bytes += str_size(in[i]);
	e = malloc(sizeof(*e) + bytes);
	if (!e)
		return -ENOMEM;
	dent_init(&e->h, seq, id, bytes);
	pos = e->buf;
	for (int i = 0; i < SOURCE_STRS; i++)
		e->s[i] = put_name(&pos, in[i], &d->sanitized);
	return dmap_put(&d->map[AGG_DICT_SOURCES], id, e);
}

int agg_dict_add_function(struct agg_dict *d, uint64_t seq, uint64_t id, const char *name,
			  const char *module, int kind)
{
	struct dfunction *e;
	size_t bytes;
	char *pos;

	if (!id || !name || !*name)
		return -EINVAL;
	if (dmap_get(&d->map[AGG_DICT_FUNCTIONS], id))
		return 0;
	bytes = str_size(name) + str_size(module);
	e = malloc(sizeof(*e) + bytes);
	if (!e)
		return -ENOMEM;
	dent_init(&e->h, seq, id, bytes);
	e->kind = kind;
	pos = e->buf;
	e->name = put_name(&pos, name, &d->sanitized);
	e->module = put_name(&pos, module, &d->sanitized);
	return dmap_put(&d->map[AGG_DICT_FUNCTIONS], id, e);
}

int agg_dict_add_frame(struct agg_dict *d, uint64_t seq, uint64_t id, uint64_t function_id,
		       const char *build_id, const char *file, int line, uint64_t address)
{
	struct dframe *e;
	size_t bytes;
	char *pos;

	if (!id)
		return -EINVAL;
	if (dmap_get(&d->map[AGG_DICT_FRAMES], id))
		return 0;
	bytes = str_size(build_id) + (file ? str_size(file) : 0);
	e = malloc(sizeof(*e) + bytes);
	if (!e)
		return -ENOMEM;
	dent_init(&e->h, seq, id, bytes);
	e->function_id = function_id;
	e->address = address;
	e->line = line;
	pos = e->buf;
	e->build_id = put_name(&pos, build_id, &d->sanitized);
	e->file = file ? put_name(&pos, file, &d->sanitized) : NULL;
	return dmap_put(&d->map[AGG_DICT_FRAMES], id, e);
}

int agg_dict_add_stack(struct agg_dict *d, uint64_t seq, uint64_t id, const uint64_t *frame_ids,
		       size_t n)
{
	struct dstack *e;

	if (!id || !frame_ids || n == 0 || n > MAX_FRAMES)
		return -EINVAL;
	if (dmap_get(&d->map[AGG_DICT_STACKS], id))
		return 0;
	e = malloc(sizeof(*e) + n * sizeof(uint64_t));
	if (!e)
		return -ENOMEM;
	dent_init(&e->h, seq, id, 0);
	e->n = (uint32_t)n;
	memcpy(e->frames, frame_ids, n * sizeof(uint64_t));
	return dmap_put(&d->map[AGG_DICT_STACKS], id, e);
}

bool agg_dict_has(const struct agg_dict *d, int kind, uint64_t id)
{
	return dmap_get(&d->map[kind], id) != NULL;
}

const uint64_t *agg_dict_stack_frames(const struct agg_dict *d, uint64_t id, uint32_t *n)
{
	const struct dstack *e = dmap_get(&d->map[AGG_DICT_STACKS], id);

	*n = e ? e->n : 0;
	return e ? e->frames : NULL;
}

const char *agg_dict_source_service(const struct agg_dict *d, uint64_t id)
{
	const struct dsource *e = dmap_get(&d->map[AGG_DICT_SOURCES], id);

	return e ? e->s[0] : NULL;
}

size_t agg_dict_entries(const struct agg_dict *d)
{
	size_t n = 0;

	for (int k = 0; k < AGG_DICT_KINDS; k++)
		n += d->map[k].n;
	return n;
}

void agg_dict_free(struct agg_dict *d)
{
	for (int k = 0; k < AGG_DICT_KINDS; k++) {
		dmap_free(&d->map[k]);
		free(d->cl[k].p);
	}
}

void agg_dict_sweep(struct agg_dict *d, uint64_t oldest)
{
	for (int k = 0; k < AGG_DICT_KINDS; k++) {
		size_t cap = d->map[k].cap;

		/* Shrink when mostly idle; a failed rebuild keeps the old map. */
		while (cap > 64 && d->map[k].n * 8 < cap)
			cap /= 2;
		dmap_rebuild(&d->map[k], cap, still_used, oldest, &d->evicted);
	}
}

/* ---- closure of a window ---- */

static int plist_push(struct agg_dict_list *l, void *p)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 256;
		void **np = realloc(l->p, cap * sizeof(*np));

		if (!np)
			return -ENOMEM;
		l->p = np;
		l->cap = cap;
	}
	l->p[l->n++] = p;
	return 0;
}

/*
 * Adds the entry for id to closure list k unless it is there already.
 * Returns 2 added, 0 already there, 1 missing (counted), -ENOMEM.
 */
static int mark(struct agg_dict *d, uint64_t seq, int k, uint64_t id, void **out)
{
	struct dent *e = dmap_get(&d->map[k], id);

	*out = e;
	if (!e) {
		d->missing++;
		return 1;
	}
	if (e->mark == d->epoch)
		return 0;
	e->mark = d->epoch;
	e->last_used = seq;
	return plist_push(&d->cl[k], e) ? -ENOMEM : 2;
}

/* Marks a stack's frames and their functions. Returns missing ids or -ENOMEM. */
static int64_t mark_frames(struct agg_dict *d, uint64_t seq, const struct dstack *st)
{
	int64_t missing = 0;

	for (uint32_t f = 0; f < st->n; f++) {
		void *fe, *fn;
		int rc = mark(d, seq, AGG_DICT_FRAMES, st->frames[f], &fe);

		if (rc == 2)
			rc = mark(d, seq, AGG_DICT_FUNCTIONS, ((struct dframe *)fe)->function_id,
				  &fn);
		if (rc < 0)
			return rc;
		missing += rc == 1;
	}
	return missing;
}

void agg_dict_closure_reset(struct agg_dict *d)
{
	/* a new closure: a window's, or a trigger window's at the same seq */
	d->epoch++;
	for (int k = 0; k < AGG_DICT_KINDS; k++)
		d->cl[k].n = 0;
}

int64_t agg_dict_mark_source(struct agg_dict *d, uint64_t seq, uint64_t id)
{
	void *e;
	int rc = mark(d, seq, AGG_DICT_SOURCES, id, &e);

	return rc < 0 ? rc : rc == 1;
}

int64_t agg_dict_mark_stack(struct agg_dict *d, uint64_t seq, uint64_t id)
{
	void *e;
	int rc = mark(d, seq, AGG_DICT_STACKS, id, &e);

	if (rc < 0 || rc == 1)
		return rc;
	return rc == 2 ? mark_frames(d, seq, e) : 0; /* already in: so are its frames */
}

void agg_dict_closure_size(const struct agg_dict *d, struct agg_dict_size *out)
{
	memset(out, 0, sizeof(*out));
	for (int k = 0; k < AGG_DICT_KINDS; k++) {
		out->entries[k] = d->cl[k].n;
		for (size_t i = 0; i < d->cl[k].n; i++)
			out->chars += ((const struct dent *)d->cl[k].p[i])->strbytes;
	}
	for (size_t i = 0; i < d->cl[AGG_DICT_STACKS].n; i++)
		out->frame_ids += ((const struct dstack *)d->cl[AGG_DICT_STACKS].p[i])->n;
}

/* Copies the closure lists into w; *u64 and *chars advance. */
void agg_dict_fill(const struct agg_dict *d, struct agg_window *w, uint64_t *u64, char *chars)
{
	for (size_t i = 0; i < w->nsources; i++) {
		const struct dsource *e = d->cl[AGG_DICT_SOURCES].p[i];
		struct agg_source *o = &w->sources[i];
		const char **dst[SOURCE_STRS] = {
		    &o->src.service, &o->src.namespace_, &o->src.pod,	     &o->src.container,
		    &o->src.node,    &o->src.build_id,	 &o->src.labels_json};

		o->id = e->h.id;
		for (int s = 0; s < SOURCE_STRS; s++)
			*dst[s] = put_str(&chars, e->s[s]);
	}
	for (size_t i = 0; i < w->nfunctions; i++) {
		const struct dfunction *e = d->cl[AGG_DICT_FUNCTIONS].p[i];
		struct agg_function *o = &w->functions[i];

		o->id = e->h.id;
		o->kind = e->kind;
		o->name = put_str(&chars, e->name);
		o->module = put_str(&chars, e->module);
	}
	for (size_t i = 0; i < w->nframes; i++) {
		const struct dframe *e = d->cl[AGG_DICT_FRAMES].p[i];
		struct agg_frame *o = &w->frames[i];

		o->id = e->h.id;
		o->function_id = e->function_id;
		o->line = e->line;
		o->address = e->address;
		o->build_id = put_str(&chars, e->build_id);
		o->file = e->file ? put_str(&chars, e->file) : NULL;
	}
	for (size_t i = 0; i < w->nstacks; i++) {
		const struct dstack *e = d->cl[AGG_DICT_STACKS].p[i];
		struct agg_stack *o = &w->stacks[i];

		o->id = e->h.id;
		o->n = e->n;
		memcpy(u64, e->frames, e->n * sizeof(*u64));
		o->frame_ids = u64;
		u64 += e->n;
	}
}
