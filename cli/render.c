/*
 * render.c - text and JSON renderings of a struct tp_stackset, and the
 * SQL API's folded text written out (the command does not fold).
 *
 * Per service the rows become a call tree (frames merged by their display
 * name along the path, as the SQL API's flame graph does) and a function
 * table (self: leaf; total: anywhere on the stack, once per stack).
 * Children are ordered by CPU descending, then name, so output is stable.
 */

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "render.h"
#include "traceprof/flamegraph.h"
#include "traceprof/pprof.h"

struct node {
	const char *label;   /* frame display name (borrowed from the set) */
	const char *module;  /* its module */
	int64_t total_us;    /* this frame and what it called */
	int64_t self_us;     /* this frame as the leaf */
	int64_t samples;     /* samples through this frame */
	struct node **child; /* children, unordered until sort_tree */
	size_t nchild, cap;
};

/* One service of the set: its tree and function table. */
struct service_view {
	const char *service;
	struct node root; /* label NULL: the service itself */
	size_t nfn;
	struct fn_row *fns; /* per display name: self and total */
};

struct fn_row {
	const char *label;
	const char *module;
	int64_t self_us, total_us;
};

static void free_tree(struct node *n)
{
	for (size_t i = 0; i < n->nchild; i++) {
		free_tree(n->child[i]);
		free(n->child[i]);
	}
	free(n->child);
}

static struct node *child_of(struct node *n, const char *label, const char *module)
{
	struct node *c;

	for (size_t i = 0; i < n->nchild; i++)
		if (strcmp(n->child[i]->label, label) == 0)
			return n->child[i];
	if (n->nchild == n->cap) {
		size_t cap = n->cap ? 2 * n->cap : 4;
		struct node **p = realloc(n->child, cap * sizeof(*p));

		if (!p)
			return NULL;
		n->child = p;
		n->cap = cap;
	}
	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->label = label;
	c->module = module;
	n->child[n->nchild++] = c;
	return c;
}

static int cmp_node(const void *a, const void *b)
{
	const struct node *x = *(struct node *const *)a, *y = *(struct node *const *)b;

	if (x->total_us != y->total_us)
		return x->total_us > y->total_us ? -1 : 1;
	return strcmp(x->label, y->label);
}

static void sort_tree(struct node *n)
{
	qsort(n->child, n->nchild, sizeof(*n->child), cmp_node);
	for (size_t i = 0; i < n->nchild; i++)
		sort_tree(n->child[i]);
}

static int cmp_fn(const void *a, const void *b)
{
	const struct fn_row *x = a, *y = b;

	if (x->self_us != y->self_us)
		return x->self_us > y->self_us ? -1 : 1;
	if (x->total_us != y->total_us)
		return x->total_us > y->total_us ? -1 : 1;
	return strcmp(x->label, y->label);
}

/* Row indices ordered by service, then as in the set. */
static int cmp_row_service(const void *a, const void *b, void *ctx)
{
	const struct tp_stackset *s = ctx;
	size_t x = *(const size_t *)a, y = *(const size_t *)b;
	int c = strcmp(s->rows[x].service, s->rows[y].service);

	return c ? c : (x > y) - (x < y);
}

static size_t *rows_by_service(const struct tp_stackset *s)
{
	size_t *idx = malloc((s->nrows + 1) * sizeof(*idx));

	if (!idx)
		return NULL;
	for (size_t i = 0; i < s->nrows; i++)
		idx[i] = i;
	qsort_r(idx, s->nrows, sizeof(*idx), cmp_row_service, (void *)s);
	return idx;
}

/* Builds the view of rows idx[0..n) (one service). */
static int build_view(const struct tp_stackset *s, const size_t *idx, size_t n,
		      struct service_view *v)
{
	const char **seen = NULL;
	size_t maxd = 0;
	int rc = -ENOMEM;

	memset(v, 0, sizeof(*v));
	v->service = s->rows[idx[0]].service;
	v->fns = calloc(s->nframes + 1, sizeof(*v->fns));
	for (size_t i = 0; i < n; i++)
		if (s->rows[idx[i]].depth > maxd)
			maxd = s->rows[idx[i]].depth;
	seen = malloc((maxd + 1) * sizeof(*seen));
	if (!v->fns || !seen)
		goto out;
	for (size_t i = 0; i < n; i++) {
		const struct tp_stack_row *r = &s->rows[idx[i]];
		struct node *at = &v->root;
		size_t nseen = 0;

		at->total_us += r->cpu_us;
		at->samples += r->samples;
		for (uint32_t d = 0; d < r->depth; d++) {
			const struct tp_frame_info *fr = &s->frames[r->frames[d]];
			bool dup = false;

			at = child_of(at, fr->function, fr->module);
			if (!at)
				goto out;
			at->total_us += r->cpu_us;
			at->samples += r->samples;
			for (size_t k = 0; k < nseen && !dup; k++)
				dup = strcmp(seen[k], fr->function) == 0;
			if (!dup)
				seen[nseen++] = fr->function;
		}
		at->self_us += r->cpu_us;
		/* function table: total once per stack, self for the leaf */
		for (size_t k = 0; k < nseen; k++) {
			size_t j;

			for (j = 0; j < v->nfn && strcmp(v->fns[j].label, seen[k]) != 0; j++)
				;
			if (j == v->nfn) {
				v->fns[j].label = seen[k];
				v->fns[j].module = "";
				v->nfn++;
			}
			v->fns[j].total_us += r->cpu_us;
			if (strcmp(seen[k], s->frames[r->frames[r->depth - 1]].function) == 0) {
				v->fns[j].self_us += r->cpu_us;
				v->fns[j].module = s->frames[r->frames[r->depth - 1]].module;
			}
		}
	}
	/* modules of functions never a leaf */
	for (size_t j = 0; j < v->nfn; j++)
		if (!*v->fns[j].module)
			for (size_t f = 0; f < s->nframes; f++)
				if (strcmp(s->frames[f].function, v->fns[j].label) == 0) {
					v->fns[j].module = s->frames[f].module;
					break;
				}
	qsort(v->fns, v->nfn, sizeof(*v->fns), cmp_fn);
	sort_tree(&v->root);
	rc = 0;
out:
	free(seen);
	return rc;
}

static void free_view(struct service_view *v)
{
	free_tree(&v->root);
	free(v->fns);
}

/* Calls fn for each service's view, in byte order of service names. */
static int each_service(const struct tp_stackset *s,
			int (*fn)(FILE *, const struct service_view *, const void *, bool first),
			FILE *f, const void *arg)
{
	size_t *idx = rows_by_service(s);
	int rc = 0;

	if (!idx)
		return -ENOMEM;
	for (size_t i = 0; i < s->nrows && !rc;) {
		struct service_view v;
		size_t j = i;

		while (j < s->nrows &&
		       strcmp(s->rows[idx[j]].service, s->rows[idx[i]].service) == 0)
			j++;
		rc = build_view(s, idx + i, j - i, &v);
		if (!rc)
			rc = fn(f, &v, arg, i == 0);
		free_view(&v);
		i = j;
	}
	free(idx);
	return rc;
}

/* Text ------------------------------------------------------------------- */

static double pct(int64_t part, int64_t whole)
{
	return whole > 0 ? 100.0 * (double)part / (double)whole : 0.0;
}

/* "name (4.2s, 93.3%)", with its own time when it also has callees. */
static void text_line(FILE *f, const struct node *n, int64_t whole)
{
	char t[32], st[32];

	if (n->self_us > 0 && n->nchild > 0)
		fprintf(f, "%s (%s, %.1f%%, self %s)\n", n->label,
			cli_fmt_us(n->total_us, t, sizeof(t)), pct(n->total_us, whole),
			cli_fmt_us(n->self_us, st, sizeof(st)));
	else
		fprintf(f, "%s (%s, %.1f%%)\n", n->label, cli_fmt_us(n->total_us, t, sizeof(t)),
			pct(n->total_us, whole));
}

static void text_tree(FILE *f, const struct node *n, int64_t whole, double min_pct, char *prefix,
		      size_t plen, size_t cap)
{
	size_t shown = 0, hidden = 0;
	int64_t hidden_us = 0;
	char t[32];

	for (size_t i = 0; i < n->nchild; i++) {
		if (pct(n->child[i]->total_us, whole) >= min_pct)
			shown++;
		else {
			hidden++;
			hidden_us += n->child[i]->total_us;
		}
	}
	for (size_t i = 0, k = 0; i < n->nchild; i++) {
		const struct node *c = n->child[i];
		bool last;

		if (pct(c->total_us, whole) < min_pct)
			continue;
		k++;
		last = k == shown && hidden == 0;
		fprintf(f, "%.*s%s", (int)plen, prefix, last ? "└─ " : "├─ ");
		text_line(f, c, whole);
		if (plen + 8 < cap) {
			const char *ext = last ? "   " : "│  ";
			size_t elen = strlen(ext);

			memcpy(prefix + plen, ext, elen);
			text_tree(f, c, whole, min_pct, prefix, plen + elen, cap);
		}
	}
	if (hidden)
		fprintf(f, "%.*s└─ … %zu more below %.1f%% (%s)\n", (int)plen, prefix, hidden,
			min_pct, cli_fmt_us(hidden_us, t, sizeof(t)));
}

static int text_service(FILE *f, const struct service_view *v, const void *arg, bool first)
{
	const struct render_opts *o = arg;
	char t[32], prefix[4096];
	size_t w = 8;

	if (!first)
		fputc('\n', f);
	fprintf(f, "%s: %s CPU in %lld samples\n", v->service,
		cli_fmt_us(v->root.total_us, t, sizeof(t)), (long long)v->root.samples);
	fprintf(f, "\n  hotspots (self time)\n");
	for (size_t i = 0; i < v->nfn && i < RENDER_HOTSPOTS; i++)
		if (strlen(v->fns[i].label) > w)
			w = strlen(v->fns[i].label);
	for (size_t i = 0; i < v->nfn && i < RENDER_HOTSPOTS && v->fns[i].self_us > 0; i++)
		fprintf(f, "  %-*s %8s %6.1f%%\n", (int)w, v->fns[i].label,
			cli_fmt_us(v->fns[i].self_us, t, sizeof(t)),
			pct(v->fns[i].self_us, v->root.total_us));
	fprintf(f, "\n  call tree (CPU time, %% of %s; subtrees under %.1f%% summarized)\n",
		v->service, o->min_pct);
	/* the roots sit at column 2: their children get a connector */
	prefix[0] = ' ';
	prefix[1] = ' ';
	{
		size_t hidden = 0;
		int64_t hidden_us = 0;

		for (size_t i = 0; i < v->root.nchild; i++) {
			const struct node *c = v->root.child[i];

			if (pct(c->total_us, v->root.total_us) < o->min_pct) {
				hidden++;
				hidden_us += c->total_us;
				continue;
			}
			fputs("  ", f);
			text_line(f, c, v->root.total_us);
			text_tree(f, c, v->root.total_us, o->min_pct, prefix, 2, sizeof(prefix));
		}
		if (hidden)
			fprintf(f, "  … %zu more below %.1f%% (%s)\n", hidden, o->min_pct,
				cli_fmt_us(hidden_us, t, sizeof(t)));
	}
	return ferror(f) ? -EIO : 0;
}

int render_text(FILE *f, const struct tp_stackset *set, const struct render_opts *opts)
{
	return each_service(set, text_service, f, opts);
}

/* Folded ---------------------------------------------------------------- */

int render_folded_text(FILE *f, const char *text)
{
	fputs(text, f);
	fputc('\n', f);
	return ferror(f) ? -EIO : 0;
}

/* JSON ------------------------------------------------------------------ */

static void json_node(FILE *f, const struct node *n, int64_t whole, int depth)
{
	fprintf(f, "{\"name\": ");
	cli_json_str(f, n->label);
	fprintf(f, ", \"module\": ");
	cli_json_str(f, n->module ? n->module : "");
	fprintf(f, ", \"cpu_ms\": ");
	cli_json_num(f, n->total_us / 1000.0);
	fprintf(f, ", \"self_ms\": ");
	cli_json_num(f, n->self_us / 1000.0);
	fprintf(f, ", \"pct\": ");
	cli_json_num(f, pct(n->total_us, whole));
	fprintf(f, ", \"samples\": %lld, \"children\": [", (long long)n->samples);
	for (size_t i = 0; i < n->nchild; i++) {
		if (i)
			fputs(", ", f);
		json_node(f, n->child[i], whole, depth + 1);
	}
	fputs("]}", f);
}

static int json_service(FILE *f, const struct service_view *v, const void *arg, bool first)
{
	const char *in = arg;

	fprintf(f, "%s\n%s  {\"service\": ", first ? "" : ",", in);
	cli_json_str(f, v->service);
	fprintf(f, ", \"cpu_ms\": ");
	cli_json_num(f, v->root.total_us / 1000.0);
	fprintf(f, ", \"samples\": %lld,\n%s   \"hotspots\": [", (long long)v->root.samples, in);
	for (size_t i = 0, k = 0; i < v->nfn && i < RENDER_HOTSPOTS; i++) {
		if (v->fns[i].self_us <= 0)
			break;
		fprintf(f, "%s{\"function\": ", k++ ? ", " : "");
		cli_json_str(f, v->fns[i].label);
		fprintf(f, ", \"module\": ");
		cli_json_str(f, v->fns[i].module);
		fprintf(f, ", \"self_ms\": ");
		cli_json_num(f, v->fns[i].self_us / 1000.0);
		fprintf(f, ", \"self_pct\": ");
		cli_json_num(f, pct(v->fns[i].self_us, v->root.total_us));
		fprintf(f, ", \"total_ms\": ");
		cli_json_num(f, v->fns[i].total_us / 1000.0);
		fprintf(f, ", \"total_pct\": ");
		cli_json_num(f, pct(v->fns[i].total_us, v->root.total_us));
		fputc('}', f);
	}
	fprintf(f, "],\n%s   \"tree\": [", in);
	for (size_t i = 0; i < v->root.nchild; i++) {
		fprintf(f, "%s\n%s    ", i ? "," : "", in);
		json_node(f, v->root.child[i], v->root.total_us, 1);
	}
	fprintf(f, "]}");
	return ferror(f) ? -EIO : 0;
}

int render_json_services(FILE *f, const struct tp_stackset *set, const char *indent)
{
	int rc;

	fputc('[', f);
	rc = each_service(set, json_service, f, indent);
	fprintf(f, "]");
	return rc;
}

int render_svg(FILE *f, const struct tp_stackset *set, const char *title, const char *subtitle)
{
	struct tp_flamegraph_opts o = {.title = title, .subtitle = subtitle};
	char err[256];
	int rc = tp_flamegraph_svg_write(set, &o, f, err, sizeof(err));

	if (rc)
		cli_error("cannot write the flame graph: %s", err);
	return rc;
}

int render_pprof(FILE *f, const struct tp_stackset *set)
{
	char err[256];
	int rc;

	if (isatty(fileno(f))) {
		cli_error("pprof output is binary (gzip): give -o FILE or redirect it");
		return -EINVAL;
	}
	rc = tp_pprof_write(set, NULL, f, err, sizeof(err));
	if (rc)
		cli_error("cannot write the pprof profile: %s", err);
	return rc;
}

int render_close(FILE *out, const char *path, int rc, bool reported)
{
	if (!rc)
		return cli_close_output(out, path);
	if (!reported)
		cli_error("cannot render the profile: %s", strerror(-rc));
	cli_close_output(out, path);
	return reported && rc == -EINVAL ? CLI_USAGE : CLI_IO;
}

int render_parse_min_pct(const char *text, const char *cmd, struct render_opts *opts)
{
	char *end;
	double v = strtod(text, &end);

	if (end == text || *end || !(v >= 0 && v <= 100))
		return cli_usage_error(cmd, "--min-pct '%s' is not a percentage (0-100)", text);
	opts->min_pct = v;
	return 0;
}

int render_opt_min_pct(void *obj, const struct tp_option *o, const char *v, char *err,
		       size_t errlen)
{
	(void)err;
	(void)errlen;
	return render_parse_min_pct(v, o->data, TP_OPT_PTR(obj, o, struct render_opts)) ? -EINVAL
											: 0;
}
