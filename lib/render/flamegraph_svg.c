/*
 * flamegraph_svg.c - a tp_stackset as one self-contained SVG flame graph.
 *
 * Workload: the `traceprof` command renders a trace (hundreds of stacks)
 * or a one-hour service profile (10,000 distinct stacks of depth 10-40,
 * 250,000 frame steps) in a small part of its 200 ms budget.
 *
 * Data flow:
 *   frames ── intern display names (hash) ─> function ids
 *   rows ───── walk root first, child lookup in one open-addressing hash
 *              keyed by (parent, function) ─> merged tree (one node array,
 *              no allocation per frame), weights summed along the path
 *   tree ───── children sorted by name (deterministic layout), widths from
 *              shares of the total; min width raised until at most
 *              max_frames frames are drawn
 *   drawn ──── preorder: <rect>/<text> per frame, then a data table (parent,
 *              name, module, kind, weights) and a string table for the
 *              inline script (flamegraph.js) that does hover,
 *              zoom and search.
 *
 * Names are untrusted bytes: they are made valid UTF-8 (U+FFFD for bad
 * sequences and control characters), cut at NAME_MAX_BYTES, and escaped
 * for XML in text and for JavaScript (\uXXXX for quotes, backslash, < > &
 * ] and the line separators) in the script, so nothing ends the CDATA
 * section or a string early.
 */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "flamegraph_internal.h"
#include "traceprof/flamegraph.h"

uint32_t fg_hash_str(const char *s)
{
	uint32_t h = 2166136261u; /* FNV-1a */
	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 16777619u;
	return h;
}

static uint32_t hash_pair(uint32_t a, uint32_t b)
{
	uint64_t x = ((uint64_t)a << 32 | b) * 0x9e3779b97f4a7c15ull;
	return (uint32_t)(x >> 32) ^ (uint32_t)x;
}

static int strtab_grow(struct strtab *t)
{
	size_t cap = t->cap ? t->cap * 2 : 64;
	uint32_t *slots = calloc(cap, sizeof(*slots));
	const char **keys = realloc(t->keys, cap / 2 * sizeof(*keys));
	if (!slots || !keys) {
		free(slots);
		if (keys)
			t->keys = keys;
		return -ENOMEM;
	}
	t->keys = keys;
	for (size_t id = 0; id < t->n; id++) {
		size_t i = fg_hash_str(keys[id]) & (cap - 1);
		while (slots[i])
			i = (i + 1) & (cap - 1);
		slots[i] = (uint32_t)id + 1;
	}
	free(t->slots);
	t->slots = slots;
	t->cap = cap;
	return 0;
}

/* Sets *id to the id of s, inserting it (borrowed) when new. */
int fg_strtab_intern(struct strtab *t, const char *s, uint32_t *id)
{
	if ((t->n + 1) * 2 > t->cap && strtab_grow(t) < 0)
		return -ENOMEM;
	size_t i = fg_hash_str(s) & (t->cap - 1);
	for (; t->slots[i]; i = (i + 1) & (t->cap - 1)) {
		if (strcmp(t->keys[t->slots[i] - 1], s) == 0) {
			*id = t->slots[i] - 1;
			return 0;
		}
	}
	t->keys[t->n] = s;
	t->slots[i] = (uint32_t)t->n + 1;
	*id = (uint32_t)t->n++;
	return 0;
}

static void strtab_free(struct strtab *t)
{
	free(t->keys);
	free(t->slots);
}

const char *fg_node_name(const struct fg *g, const struct node *n)
{
	if (n->parent == NONE)
		return "all";
	if (n->fid >= g->funcs.n)
		return g->services.keys[n->fid - g->funcs.n];
	return g->funcs.keys[n->fid];
}

int fg_node_kind(const struct fg *g, const struct node *n)
{
	if (n->parent == NONE)
		return KIND_ROOT;
	if (n->fid >= g->funcs.n)
		return KIND_SERVICE;
	return g->set->frames[g->func_frame[n->fid]].kind;
}

const char *fg_node_module(const struct fg *g, const struct node *n)
{
	if (n->parent == NONE || n->fid >= g->funcs.n)
		return "";
	const char *m = g->set->frames[g->func_frame[n->fid]].module;
	return m ? m : "";
}

static int slots_grow(struct fg *g)
{
	size_t cap = g->capslots ? g->capslots * 2 : 4096;
	uint32_t *slots = calloc(cap, sizeof(*slots));
	if (!slots)
		return -ENOMEM;
	for (size_t n = 1; n < g->nnodes; n++) {
		size_t i = hash_pair(g->nodes[n].parent, g->nodes[n].fid) & (cap - 1);
		while (slots[i])
			i = (i + 1) & (cap - 1);
		slots[i] = (uint32_t)n + 1;
	}
	free(g->slots);
	g->slots = slots;
	g->capslots = cap;
	return 0;
}

/* Sets *child to the child of parent for function fid, creating it. */
static int tree_child(struct fg *g, uint32_t parent, uint32_t fid, uint32_t *child)
{
	if ((g->nnodes + 1) * 2 > g->capslots && slots_grow(g) < 0)
		return -ENOMEM;
	size_t i = hash_pair(parent, fid) & (g->capslots - 1);
	for (; g->slots[i]; i = (i + 1) & (g->capslots - 1)) {
		const struct node *n = &g->nodes[g->slots[i] - 1];
		if (n->parent == parent && n->fid == fid) {
			*child = g->slots[i] - 1;
			return 0;
		}
	}
	if (g->nnodes == g->capnodes) {
		size_t cap = g->capnodes * 2;
		struct node *nodes = realloc(g->nodes, cap * sizeof(*nodes));
		if (!nodes)
			return -ENOMEM;
		g->nodes = nodes;
		g->capnodes = cap;
	}
	struct node *n = &g->nodes[g->nnodes];
	*n = (struct node){.parent = parent, .fid = fid, .depth = g->nodes[parent].depth + 1};
	g->slots[i] = (uint32_t)g->nnodes + 1;
	*child = (uint32_t)g->nnodes++;
	return 0;
}

static bool row_ok(const struct tp_stackset *set, const struct tp_stack_row *r)
{
	if (r->depth == 0 || !r->frames || r->samples < 0 || r->cpu_us < 0 || r->offcpu_us < 0 ||
	    r->gpu_ns < 0)
		return false;
	if (set->differential && (r->b_samples < 0 || r->b_cpu_us < 0))
		return false;
	for (uint32_t d = 0; d < r->depth; d++)
		if (r->frames[d] >= set->nframes)
			return false;
	return true;
}

static int build_tree(struct fg *g, int weight)
{
	const struct tp_stackset *set = g->set;
	int rc;

	g->frame_fid = malloc((set->nframes + 1) * sizeof(*g->frame_fid));
	g->func_frame = malloc((set->nframes + 1) * sizeof(*g->func_frame));
	g->row_svc = malloc((set->nrows + 1) * sizeof(*g->row_svc));
	g->capnodes = 1024;
	g->nodes = malloc(g->capnodes * sizeof(*g->nodes));
	if (!g->frame_fid || !g->func_frame || !g->row_svc || !g->nodes)
		return -ENOMEM;
	for (size_t f = 0; f < set->nframes; f++) {
		const char *fn = set->frames[f].function ? set->frames[f].function : "";
		size_t before = g->funcs.n;
		if ((rc = fg_strtab_intern(&g->funcs, fn, &g->frame_fid[f])) < 0)
			return rc;
		if (g->funcs.n > before)
			g->func_frame[g->frame_fid[f]] = (uint32_t)f;
	}
	for (size_t r = 0; r < set->nrows; r++) {
		const char *svc = set->rows[r].service ? set->rows[r].service : "";
		if ((rc = fg_strtab_intern(&g->services, svc, &g->row_svc[r])) < 0)
			return rc;
	}
	bool by_service = g->services.n > 1;

	g->nodes[0] = (struct node){.parent = NONE, .fid = NONE};
	g->nnodes = 1;
	for (size_t r = 0; r < set->nrows; r++) {
		const struct tp_stack_row *row = &set->rows[r];
		if (!row_ok(set, row)) {
			g->st.rows_dropped++;
			continue;
		}
		/* off-CPU and GPU time weigh as time (GPU ns rounded to us);
		 * they have no samples */
		bool timed = weight != TP_FLAMEGRAPH_SAMPLES && !set->differential;
		int64_t off = timed ? row->offcpu_us : 0;
		int64_t gpu = timed ? (row->gpu_ns + 500) / 1000 : 0;
		int64_t a =
		    weight == TP_FLAMEGRAPH_SAMPLES ? row->samples : row->cpu_us + off + gpu;
		int64_t b = 0;
		if (set->differential)
			b = weight == TP_FLAMEGRAPH_SAMPLES ? row->b_samples : row->b_cpu_us;
		uint32_t depth = row->depth;
		if (depth > TP_FLAMEGRAPH_MAX_DEPTH) {
			depth = TP_FLAMEGRAPH_MAX_DEPTH;
			g->st.rows_truncated++;
		}
		uint32_t cur = 0;
		g->nodes[0].a += a;
		g->nodes[0].b += b;
		g->nodes[0].off += off;
		g->nodes[0].gpu += gpu;
		for (uint32_t d = by_service ? 0 : 1; d <= depth; d++) {
			uint32_t fid = d == 0 ? (uint32_t)g->funcs.n + g->row_svc[r]
					      : g->frame_fid[row->frames[d - 1]];
			if ((rc = tree_child(g, cur, fid, &cur)) < 0)
				return rc;
			g->nodes[cur].a += a;
			g->nodes[cur].b += b;
			g->nodes[cur].off += off;
			g->nodes[cur].gpu += gpu;
		}
	}
	g->st.nodes = g->nnodes;
	return 0;
}

static int cmp_kids(const void *x, const void *y, void *arg)
{
	const struct fg *g = arg;
	const struct node *a = &g->nodes[*(const uint32_t *)x];
	const struct node *b = &g->nodes[*(const uint32_t *)y];
	int c = strcmp(fg_node_name(g, a), fg_node_name(g, b));
	if (c)
		return c;
	/* same name, a service and a function: services first */
	return (a->fid > b->fid) - (a->fid < b->fid);
}

/* Children of each node in one array, each node's run sorted by name. */
static int sort_kids(struct fg *g)
{
	g->kids = malloc(g->nnodes * sizeof(*g->kids));
	if (!g->kids)
		return -ENOMEM;
	for (size_t n = 1; n < g->nnodes; n++)
		g->nodes[g->nodes[n].parent].nkids++;
	uint32_t at = 0;
	for (size_t n = 0; n < g->nnodes; n++) {
		g->nodes[n].kids = at;
		at += g->nodes[n].nkids;
		g->nodes[n].nkids = 0;
	}
	for (size_t n = 1; n < g->nnodes; n++) {
		struct node *p = &g->nodes[g->nodes[n].parent];
		g->kids[p->kids + p->nkids++] = (uint32_t)n;
	}
	for (size_t n = 0; n < g->nnodes; n++)
		if (g->nodes[n].nkids > 1)
			qsort_r(&g->kids[g->nodes[n].kids], g->nodes[n].nkids, sizeof(*g->kids),
				cmp_kids, g);
	return 0;
}

bool fg_node_offcpu(const struct node *n)
{
	return n->off > 0 && n->off == n->a;
}

bool fg_node_gpu(const struct node *n)
{
	return n->gpu > 0 && n->gpu == n->a;
}

/* The node's share of the graph: its width over the root's. */
double fg_node_frac(const struct fg *g, const struct node *n)
{
	double fa = g->ta > 0 ? (double)n->a / g->ta : 0;
	double fb = g->tb > 0 ? (double)n->b / g->tb : 0;
	if (g->ta > 0 && g->tb > 0)
		return (fa + fb) / 2;
	return fa + fb;
}

/* Width in hundredths of a px, as written (the script reads it back). */
int64_t fg_node_w100(const struct fg *g, const struct node *n)
{
	return llround(fg_node_frac(g, n) * g->plot_w * 100);
}

/* Frames drawn with this minimum width; *maxdepth the deepest drawn. */
static size_t count_drawn(const struct fg *g, double min_w, uint32_t *maxdepth)
{
	size_t drawn = 0;
	*maxdepth = 0;
	for (size_t n = 0; n < g->nnodes; n++) {
		int64_t w = fg_node_w100(g, &g->nodes[n]);
		if (w > 0 && (double)w >= min_w * 100) {
			drawn++;
			if (g->nodes[n].depth > *maxdepth)
				*maxdepth = g->nodes[n].depth;
		}
	}
	return drawn;
}

static void fg_free(struct fg *g)
{
	strtab_free(&g->funcs);
	strtab_free(&g->services);
	free(g->frame_fid);
	free(g->func_frame);
	free(g->row_svc);
	free(g->nodes);
	free(g->slots);
	free(g->kids);
}

int tp_flamegraph_svg_write(const struct tp_stackset *set, const struct tp_flamegraph_opts *opts,
			    FILE *out, char *err, size_t errlen)
{
	static const struct tp_flamegraph_opts defaults;
	struct fg g = {.set = set};
	struct fg_layout lay = {0};
	int rc;

	if (!opts)
		opts = &defaults;
	if (errlen)
		err[0] = '\0';
	if (!set || !out) {
		snprintf(err, errlen, "flamegraph: no %s", set ? "output file" : "stack set");
		return -EINVAL;
	}
	if ((set->nframes && !set->frames) || (set->nrows && !set->rows)) {
		snprintf(err, errlen, "flamegraph: the set has %s counted but no array",
			 set->nrows && !set->rows ? "rows" : "frames");
		return -EINVAL;
	}
	if (set->nframes >= NONE / 2 || set->nrows >= NONE) {
		snprintf(err, errlen, "flamegraph: too many frames or rows (%zu, %zu)",
			 set->nframes, set->nrows);
		return -EINVAL;
	}
	if (opts->weight != TP_FLAMEGRAPH_CPU && opts->weight != TP_FLAMEGRAPH_SAMPLES) {
		snprintf(err, errlen, "flamegraph: unknown weight %d (CPU time 0 or samples 1)",
			 opts->weight);
		return -EINVAL;
	}
	if (opts->width < 0 || (opts->width > 0 && opts->width < 200) || opts->width > 100000) {
		snprintf(err, errlen, "flamegraph: width %d px out of range (200 to 100000)",
			 opts->width);
		return -EINVAL;
	}
	if (!(opts->min_width >= 0) || opts->min_width > 1000) {
		snprintf(err, errlen, "flamegraph: min width %g px out of range (0 to 1000)",
			 opts->min_width);
		return -EINVAL;
	}

	lay.width = opts->width ? opts->width : 1200;
	g.plot_w = lay.width - 2 * PAD;
	rc = build_tree(&g, opts->weight);
	if (rc == 0)
		rc = sort_kids(&g);
	if (rc < 0) {
		snprintf(err, errlen, "flamegraph: out of memory for %zu frames", g.nnodes);
		goto out_free;
	}
	g.ta = (double)g.nodes[0].a;
	g.tb = (double)g.nodes[0].b;

	size_t max_frames = opts->max_frames ? opts->max_frames : 20000;
	double min_w = opts->min_width > 0 ? opts->min_width : 0.1;
	uint32_t maxdepth;
	size_t drawn;
	while ((drawn = count_drawn(&g, min_w, &maxdepth)) > max_frames)
		min_w *= 1.25;
	g.st.min_width = min_w;

	lay.fg = &g;
	lay.opts = opts;
	lay.min_w100 = min_w * 100;
	lay.maxdepth = maxdepth;
	lay.drawn = drawn;
	rc = fg_write_svg(&lay, out, err, errlen);
out_free:
	if (opts->stats) {
		*opts->stats = g.st;
		opts->stats->drawn = lay.drawn;
		opts->stats->narrow = g.nnodes - lay.drawn;
		opts->stats->bytes = lay.bytes;
	}
	fg_free(&g);
	return rc;
}
