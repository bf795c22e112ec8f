/*
 * offcpu_view.c - the off-CPU parts of `traceprof trace-profile`
 * (offcpu_view.h): the time breakdown above the text tree, and the trace's
 * off-CPU and GPU stacks added to its CPU set for the SVG and pprof views.
 *
 * Everything comes from the SQL API: trace_time_breakdown holds the
 * accounting rule (other = span - CPU - blocked - runqueue, clamped, with
 * excess), trace_offcpu_folded and trace_gpu_folded the stacks' labels;
 * the command only draws. A trace has a few spans and tens of off-CPU and
 * GPU stacks: one query each.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "offcpu_view.h"

/* The breakdown --------------------------------------------------------- */

/* One row of trace_time_breakdown, formatted by SQL where it can be. */
static const char breakdown_sql[] =
    "SELECT service, coalesce(span_id, ''), span_ms, cpu_ms, blocked_ms, runq_ms, "
    "coalesce(other_ms, 0), coalesce(excess_ms, 0), "
    "(SELECT string_agg(format('%s%s %s ms (%s %%)', e->>'function', "
    "coalesce(' <- ' || (e->>'caller'), ''), e->>'ms', e->>'pct'), ', ' ORDER BY o) "
    "FROM jsonb_array_elements(blocked_by) WITH ORDINALITY AS x(e, o)) "
    "FROM traceprof.trace_time_breakdown($1) "
    "WHERE $2::text IS NULL OR service = $2";

/* The bar: '#' CPU, '=' blocked, '~' runqueue, '.' other, each part as
 * wide as its share of total (cumulative rounding: the parts fill the bar
 * exactly). */
static void draw_bar(FILE *out, const double *parts, double total)
{
	static const char glyph[4] = {'#', '=', '~', '.'};
	char bar[OFFCPU_BAR_WIDTH + 1];
	double cum = 0;
	int at = 0;

	for (int k = 0; k < 4; k++) {
		cum += parts[k] > 0 ? parts[k] : 0;
		int end = total > 0 ? (int)lround(cum / total * OFFCPU_BAR_WIDTH) : 0;
		if (end > OFFCPU_BAR_WIDTH)
			end = OFFCPU_BAR_WIDTH;
		for (; at < end; at++)
			bar[at] = glyph[k];
	}
	for (; at < OFFCPU_BAR_WIDTH; at++)
		bar[at] = ' ';
	bar[OFFCPU_BAR_WIDTH] = '\0';
	fprintf(out, "    [%s]\n", bar);
}

static void breakdown_row(FILE *out, PGresult *res, int i)
{
	double parts[4], excess = atof(PQgetvalue(res, i, 7)), sum = 0;
	const char *span_id = PQgetvalue(res, i, 1);
	bool has_span = !PQgetisnull(res, i, 2);
	double span = has_span ? atof(PQgetvalue(res, i, 2)) : 0;

	for (int k = 0; k < 4; k++) {
		parts[k] = atof(PQgetvalue(res, i, 3 + k));
		sum += parts[k];
	}
	fprintf(out, "  %s%s%s\n", PQgetvalue(res, i, 0), span_id[0] ? ", span " : ", no span",
		span_id);
	if (has_span)
		fprintf(
		    out,
		    "    span %.1f ms = CPU %.1f + blocked %.1f + runqueue %.1f + other %.1f ms",
		    span, parts[0], parts[1], parts[2], parts[3]);
	else
		fprintf(out, "    no span row: CPU %.1f + blocked %.1f + runqueue %.1f ms",
			parts[0], parts[1], parts[2]);
	if (excess > 0)
		fprintf(out, " (%.1f ms more than the span: subtract it)", excess);
	fputc('\n', out);
	draw_bar(out, parts, has_span && span > sum ? span : sum);
	if (!PQgetisnull(res, i, 8))
		fprintf(out, "    blocked in: %s\n", PQgetvalue(res, i, 8));
}

int offcpu_breakdown_text(FILE *out, struct cli_db *db, const char *trace_id, const char *service)
{
	const char *params[2] = {trace_id, service};
	bool any = false;
	int rc;
	PGresult *res = cli_query(db, breakdown_sql, 2, params, &rc);

	if (!res)
		return rc;
	for (int i = 0; i < PQntuples(res); i++)
		if (atof(PQgetvalue(res, i, 4)) > 0 || atof(PQgetvalue(res, i, 5)) > 0)
			any = true;
	if (any) {
		fprintf(out,
			"time breakdown (span = CPU + blocked + runqueue + other; bar of %d: "
			"# CPU, = blocked, ~ runqueue, . other)\n",
			OFFCPU_BAR_WIDTH);
		for (int i = 0; i < PQntuples(res); i++)
			breakdown_row(out, res, i);
		fputc('\n', out);
	}
	PQclear(res);
	return 0;
}

/* The merged set -------------------------------------------------------- */

/* The set and what it owns (the cpu set's frames and rows are copied, its
 * strings borrowed). */
struct merged {
	struct tp_stackset set; /* first: what callers see */
	PGresult *res;		/* the folded rows; labels point into it */
	uint32_t *idx;		/* the off-CPU rows' frame indices */
	char **labels;		/* strdup'ed frame labels */
	size_t nlabels;
	uint32_t *slots; /* label hash -> added frame index + 1, 0 = empty */
	size_t mask;	 /* slots - 1, a power of two over twice the labels */
};

void offcpu_set_free(struct tp_stackset *set)
{
	struct merged *m = (struct merged *)set;

	if (!set)
		return;
	for (size_t i = 0; i < m->nlabels; i++)
		free(m->labels[i]);
	free(m->labels);
	free(m->slots);
	free(m->idx);
	free(m->set.frames);
	free(m->set.rows);
	PQclear(m->res);
	free(m);
}

/* The index of the frame labelled name (len bytes), added when new (one
 * frame per label: off-CPU frames have no module or address to tell apart;
 * the flame graph merges by label anyway). FNV-1a into open addressing. */
static int frame_of(struct merged *m, const char *name, size_t len, uint32_t *idx)
{
	uint32_t h = 2166136261u;
	size_t i;

	for (size_t k = 0; k < len; k++)
		h = (h ^ (uint8_t)name[k]) * 16777619u;
	for (i = h & m->mask; m->slots[i]; i = (i + 1) & m->mask) {
		const char *f = m->labels[m->slots[i] - 1];
		if (strncmp(f, name, len) == 0 && f[len] == '\0') {
			*idx = (uint32_t)(m->set.nframes - m->nlabels + m->slots[i] - 1);
			return 0;
		}
	}
	char *s = strndup(name, len);
	if (!s)
		return -ENOMEM;
	m->labels[m->nlabels++] = s;
	m->slots[i] = (uint32_t)m->nlabels;
	m->set.frames[m->set.nframes] = (struct tp_frame_info){
	    .function = s,
	    .name = s,
	    .module = strncmp(s, "[gpu] ", 6) == 0 ? "[gpu]" : "", /* a kernel */
	    .build_id = ""};
	*idx = (uint32_t)m->set.nframes++;
	return 0;
}

/* Adds row i of the folded result ("service;root;...;leaf", us) as an
 * off-CPU row; its frames go to m->idx from *used on. */
static int add_folded(struct merged *m, int i, size_t *used)
{
	const char *stack = PQgetvalue(m->res, i, 1), *p = strchr(stack, ';');
	bool runq = strcmp(PQgetvalue(m->res, i, 3), "runqueue") == 0;
	struct tp_stack_row *row = &m->set.rows[m->set.nrows];
	uint32_t *frames = &m->idx[*used];
	uint32_t depth = 0;
	int rc;

	while (p) {
		const char *s = p + 1, *e = strchr(s, ';');
		size_t len = e ? (size_t)(e - s) : strlen(s);
		if ((rc = frame_of(m, s, len, &frames[depth++])) < 0)
			return rc;
		p = e;
	}
	if (runq && (rc = frame_of(m, "[runqueue]", 10, &frames[depth++])) < 0)
		return rc;
	if (depth == 0)
		return 0;
	*row = (struct tp_stack_row){.frames = frames,
				     .depth = depth,
				     .service = PQgetvalue(m->res, i, 0),
				     .trace_id = PQgetvalue(m->res, i, 4),
				     .offcpu_us = atoll(PQgetvalue(m->res, i, 2)),
				     .gpu_ns = atoll(PQgetvalue(m->res, i, 5))};
	m->set.nrows++;
	*used += depth;
	return 0;
}

/* Both off-CPU kinds and the GPU stacks (us 0, ns their weight), one
 * query; frames of a stack are at most its ';' + 2. */
static const char folded_sql[] =
    "SELECT f.service, f.stack, f.us, k.kind, $1::text, 0::bigint FROM unnest(ARRAY['blocked', "
    "'runqueue']) AS k(kind), traceprof.trace_offcpu_folded($1, k.kind) f "
    "WHERE ($2::text IS NULL OR f.service = $2) AND f.us > 0 "
    "UNION ALL SELECT g.service, g.stack, 0, 'gpu', $1::text, g.ns "
    "FROM traceprof.trace_gpu_folded($1, $2) g WHERE g.ns > 0 ORDER BY 4, 1, 2";

static int merge_rows(struct merged *m, const struct tp_stackset *cpu)
{
	size_t nframes = 0, nres = (size_t)PQntuples(m->res), used = 0;

	for (size_t i = 0; i < nres; i++)
		for (const char *p = PQgetvalue(m->res, (int)i, 1); *p; p++)
			nframes += *p == ';';
	nframes += 2 * nres;
	m->set = *cpu;
	m->set.frames = malloc((cpu->nframes + nframes + 1) * sizeof(*m->set.frames));
	m->set.rows = malloc((cpu->nrows + nres + 1) * sizeof(*m->set.rows));
	m->idx = malloc((nframes + 1) * sizeof(*m->idx));
	m->labels = malloc((nframes + 1) * sizeof(*m->labels));
	for (m->mask = 15; m->mask < 2 * nframes; m->mask = 2 * m->mask + 1)
		;
	m->slots = calloc(m->mask + 1, sizeof(*m->slots));
	if (!m->set.frames || !m->set.rows || !m->idx || !m->labels || !m->slots)
		return -ENOMEM;
	memcpy(m->set.frames, cpu->frames, cpu->nframes * sizeof(*cpu->frames));
	memcpy(m->set.rows, cpu->rows, cpu->nrows * sizeof(*cpu->rows));
	for (size_t i = 0; i < nres; i++) {
		int rc = add_folded(m, (int)i, &used);
		if (rc < 0)
			return rc;
	}
	return 0;
}

int offcpu_merge_trace(struct cli_db *db, const char *trace_id, const char *service,
		       const struct tp_stackset *cpu, struct tp_stackset **out)
{
	const char *params[2] = {trace_id, service};
	struct merged *m;
	int rc;
	PGresult *res = cli_query(db, folded_sql, 2, params, &rc);

	*out = NULL;
	if (!res)
		return rc;
	if (PQntuples(res) == 0) {
		PQclear(res);
		return 0;
	}
	m = calloc(1, sizeof(*m));
	if (!m) {
		PQclear(res);
		cli_error("out of memory for the trace's off-CPU stacks");
		return CLI_DB;
	}
	m->res = res;
	if (merge_rows(m, cpu) < 0) {
		offcpu_set_free(&m->set);
		cli_error("out of memory for the trace's off-CPU stacks");
		return CLI_DB;
	}
	*out = &m->set;
	return 0;
}
