/*
 * flamegraph_svg_write.c - the SVG text of a merged flame graph tree.
 *
 * One pass in preorder writes a <g><rect/><text/></g> per drawn frame
 * (parents before children, so the script's parent links point back);
 * then the script's data: D (six numbers per frame: parent, name and
 * module in S, kind, weight A, weight B) and S (the distinct strings).
 * Output goes through one 64 KiB buffer with hand-made number formatting:
 * a one-hour profile is written in a few milliseconds.
 *
 * Every untrusted string passes through sanitize() (valid UTF-8, no
 * control characters or bidirectional overrides, bounded length) and then
 * xml_put() or js_put().
 */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "flamegraph_internal.h"
#include "traceprof/utf8.h"

struct wbuf {
	FILE *f;	   /* destination */
	size_t len;	   /* bytes in buf */
	uint64_t total;	   /* bytes written so far */
	int err;	   /* errno of the first failed write, else 0 */
	char buf[1 << 16]; /* pending output */
};

static void w_flush(struct wbuf *w)
{
	if (w->len && !w->err && fwrite(w->buf, 1, w->len, w->f) != w->len)
		w->err = errno ? errno : EIO;
	w->total += w->len;
	w->len = 0;
}

static void w_mem(struct wbuf *w, const char *p, size_t n)
{
	while (n) {
		if (w->len == sizeof(w->buf))
			w_flush(w);
		size_t k = sizeof(w->buf) - w->len;
		if (k > n)
			k = n;
		memcpy(w->buf + w->len, p, k);
		w->len += k;
		p += k;
		n -= k;
	}
}

static void w_str(struct wbuf *w, const char *s)
{
	w_mem(w, s, strlen(s));
}

static void w_i64(struct wbuf *w, int64_t v)
{
	char tmp[24], *p = tmp + sizeof(tmp);
	uint64_t u = v < 0 ? -(uint64_t)v : (uint64_t)v;
	do
		*--p = (char)('0' + u % 10);
	while (u /= 10);
	if (v < 0)
		*--p = '-';
	w_mem(w, p, (size_t)(tmp + sizeof(tmp) - p));
}

/* A length in hundredths as a decimal without trailing zeros: "12.5". */
static void w_fix2(struct wbuf *w, int64_t h)
{
	w_i64(w, h / 100);
	int f = (int)(h % 100);
	if (f) {
		char t[3] = {'.', (char)('0' + f / 10), (char)('0' + f % 10)};
		w_mem(w, t, f % 10 ? 3 : 2);
	}
}

/*
 * Copies s into dst as valid UTF-8 of characters safe to show
 * (tp_utf8_safe_len: no control characters, no bidirectional overrides or
 * isolates; each bad byte or such character becomes U+FFFD), at most
 * NAME_MAX_BYTES bytes then "..". dst holds NAME_MAX_BYTES + 8. Returns
 * the length.
 */
static size_t sanitize(const char *s, char *dst)
{
	const uint8_t *p = (const uint8_t *)s;
	size_t n = 0;
	while (*p) {
		size_t len = tp_utf8_safe_len(p, strnlen((const char *)p, 4));
		if (len == 3 && p[0] == 0xef && p[1] == 0xbf && p[2] >= 0xbe)
			len = 0; /* U+FFFE, U+FFFF: not XML characters */
		if (n + (len ? len : 3) > NAME_MAX_BYTES) {
			memcpy(dst + n, "..", 2);
			n += 2;
			break;
		}
		if (len) {
			memcpy(dst + n, p, len);
			p += len;
		} else {
			memcpy(dst + n, "\xef\xbf\xbd", 3);
			len = 3;
			p++;
		}
		n += len;
	}
	dst[n] = '\0';
	return n;
}

/* Sanitized text as XML character data or attribute value. */
static void xml_put(struct wbuf *w, const char *s, size_t n)
{
	size_t run = 0;
	for (size_t i = 0; i < n; i++) {
		const char *rep;
		switch (s[i]) {
		case '&':
			rep = "&amp;";
			break;
		case '<':
			rep = "&lt;";
			break;
		case '>':
			rep = "&gt;";
			break;
		case '"':
			rep = "&quot;";
			break;
		case '\'':
			rep = "&#39;";
			break;
		default:
			continue;
		}
		w_mem(w, s + run, i - run);
		w_str(w, rep);
		run = i + 1;
	}
	w_mem(w, s + run, n - run);
}

static void xml_put_raw(struct wbuf *w, const char *s)
{
	char buf[NAME_MAX_BYTES + 8];
	xml_put(w, buf, sanitize(s, buf));
}

/* A JavaScript string literal that can end neither itself nor CDATA. */
static void js_put(struct wbuf *w, const char *raw)
{
	char s[NAME_MAX_BYTES + 8];
	size_t n = sanitize(raw, s), run = 0;
	w_mem(w, "\"", 1);
	for (size_t i = 0; i < n; i++) {
		char esc[8];
		uint8_t c = (uint8_t)s[i];
		if (c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' || c == ']' ||
		    c == '\'') {
			snprintf(esc, sizeof(esc), "\\u%04x", c);
		} else if (c == 0xe2 && (uint8_t)s[i + 1] == 0x80 &&
			   ((uint8_t)s[i + 2] == 0xa8 || (uint8_t)s[i + 2] == 0xa9)) {
			snprintf(esc, sizeof(esc), "\\u%04x", 0x2000 + (uint8_t)s[i + 2] - 0x80);
			w_mem(w, s + run, i - run);
			w_str(w, esc);
			i += 2;
			run = i + 1;
			continue;
		} else {
			continue;
		}
		w_mem(w, s + run, i - run);
		w_str(w, esc);
		run = i + 1;
	}
	w_mem(w, s + run, n - run);
	w_mem(w, "\"", 1);
}

/* The text that fits in w100/100 px: all of name, its start and "..", or none. */
static size_t fit_text(const char *name, size_t n, int64_t w100)
{
	double fit = floor(((double)w100 / 100.0 - 6) / CHAR_W);
	if (fit < 3)
		return 0;
	size_t cps = 0, keep = 0;
	for (size_t i = 0; i < n; i++) {
		if (((uint8_t)name[i] & 0xc0) == 0x80)
			continue;
		if (cps == (size_t)fit - 2)
			keep = i;
		cps++;
	}
	return cps <= (size_t)fit ? n : keep;
}

static uint32_t frame_color(const struct fg *g, const struct node *n, double dscale)
{
	if (g->set->differential) {
		double fa = g->ta > 0 ? (double)n->a / g->ta : 0;
		double fb = g->tb > 0 ? (double)n->b / g->tb : 0;
		double s = fabs(fa - fb) / dscale;
		uint32_t v = (uint32_t)lround(245 - 205 * (s > 1 ? 1 : s));
		if (fa > fb)
			return 0xff0000u | v << 8 | v;
		if (fb > fa)
			return v << 16 | v << 8 | 0xffu;
		return 0xf5f5f5u;
	}
	uint32_t h = fg_hash_str(fg_node_name(g, n));
	uint32_t v1 = h & 0xff, v2 = (h >> 8) & 0xff, v3 = (h >> 16) & 0xff;
	if (fg_node_offcpu(n)) /* off-CPU time only: blue */
		return (40 + v1 * 50 / 255) << 16 | (90 + v2 * 70 / 255) << 8 |
		       (200 + v3 * 55 / 255);
	if (fg_node_gpu(n)) /* GPU time only: green */
		return (40 + v1 * 60 / 255) << 16 | (160 + v2 * 60 / 255) << 8 |
		       (40 + v3 * 50 / 255);
	switch (fg_node_kind(g, n)) {
	case KIND_ROOT:
		return 0xe0d8c8u;
	case KIND_SERVICE: /* violet */
		return (170 + v1 * 40 / 255) << 16 | (150 + v2 * 40 / 255) << 8 |
		       (215 + v3 * 40 / 255);
	case TP_FRAME_KERNEL: /* aqua */
		return (60 + v1 * 60 / 255) << 16 | (175 + v2 * 50 / 255) << 8 |
		       (185 + v3 * 50 / 255);
	case TP_FRAME_UNSYMBOLIZED: { /* grey */
		uint32_t v = 165 + v1 * 40 / 255;
		return v << 16 | v << 8 | v;
	}
	default: /* warm: red to yellow */
		return (205 + v1 * 50 / 255) << 16 | (v2 * 230 / 255) << 8 | (v3 * 55 / 255);
	}
}

static void w_header(struct wbuf *w, const struct fg_layout *lay, int height)
{
	const struct fg *g = lay->fg;
	const struct tp_flamegraph_opts *o = lay->opts;
	const char *title = o->title		   ? o->title
			    : g->set->differential ? "Differential flame graph"
						   : "Flame graph";
	w_str(w, "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n"
		 "<svg version=\"1.1\" xmlns=\"http://www.w3.org/2000/svg\" width=\"");
	w_i64(w, lay->width);
	w_str(w, "\" height=\"");
	w_i64(w, height);
	w_str(w, "\" viewBox=\"0 0 ");
	w_i64(w, lay->width);
	w_mem(w, " ", 1);
	w_i64(w, height);
	w_str(w, "\">\n<style>");
	w_str(w, fg_svg_style);
	w_str(w, "</style>\n<rect class=\"bg\" width=\"100%\" height=\"100%\"/>\n"
		 "<text id=\"title\" x=\"");
	w_i64(w, lay->width / 2);
	w_str(w, "\" y=\"22\">");
	xml_put_raw(w, title);
	w_str(w, "</text>\n<text id=\"subtitle\" x=\"");
	w_i64(w, lay->width / 2);
	w_str(w, "\" y=\"40\">");
	xml_put_raw(w, o->subtitle ? o->subtitle : "");
	w_str(w,
	      "</text>\n<text id=\"reset\" class=\"ctl hide\" x=\"10\" y=\"22\">Reset zoom</text>\n"
	      "<text id=\"search\" class=\"ctl\" x=\"");
	w_i64(w, lay->width - PAD);
	w_str(w, "\" y=\"22\">Search</text>\n<text id=\"details\" x=\"10\" y=\"");
	w_i64(w, height - 30);
	w_str(w, "\"> </text>\n<text id=\"matched\" x=\"");
	w_i64(w, lay->width - PAD);
	w_str(w, "\" y=\"");
	w_i64(w, height - 30);
	w_str(w, "\"> </text>\n");
}

static void w_footer(struct wbuf *w, const struct fg_layout *lay, int height, const char *an,
		     const char *bn)
{
	const struct fg *g = lay->fg;
	char num[64];
	w_str(w, "<text id=\"foot\" x=\"10\" y=\"");
	w_i64(w, height - 12);
	w_str(w, "\">");
	if (lay->drawn == 0)
		w_str(w, "no samples to draw; ");
	if (g->set->differential) {
		w_str(w, "width: mean of the shares of ");
		xml_put_raw(w, an);
		w_str(w, " and ");
		xml_put_raw(w, bn);
		w_str(w, "; red: larger share in ");
		xml_put_raw(w, an);
		w_str(w, ", blue: larger share in ");
		xml_put_raw(w, bn);
	} else {
		const struct node *r = &g->nodes[0];
		w_str(w, lay->opts->weight == TP_FLAMEGRAPH_SAMPLES ? "width: samples"
			 : r->off > 0 && r->gpu > 0
			     ? "width: time; blue: off CPU (blocked or waiting for a CPU); green: "
			       "on the GPU (kernels the stack launched)"
			 : r->off > 0 ? "width: time; blue: off CPU (blocked or waiting for a CPU)"
			 : r->gpu > 0
			     ? "width: time; green: on the GPU (kernels the stack launched)"
			     : "width: CPU time");
	}
	if (g->nnodes > lay->drawn && lay->drawn) {
		w_str(w, "; ");
		w_i64(w, (int64_t)(g->nnodes - lay->drawn));
		snprintf(num, sizeof(num), "%.2g", lay->min_w100 / 100);
		w_str(w, " frames too narrow to draw (under ");
		w_str(w, num);
		w_str(w, " px; their time is in their parents)");
	}
	if (g->st.rows_dropped) {
		w_str(w, "; ");
		w_i64(w, (int64_t)g->st.rows_dropped);
		w_str(w, " rows left out (depth 0, bad frame index or negative weight)");
	}
	if (g->st.rows_truncated) {
		w_str(w, "; ");
		w_i64(w, (int64_t)g->st.rows_truncated);
		w_str(w, " stacks cut at 1024 frames");
	}
	w_str(w, "</text>\n");
}

struct visit {
	uint32_t node;	/* tree node */
	int64_t parent; /* output index of its parent, -1 for the root */
	int64_t x100;	/* left edge, 1/100 px */
};

/* Writes the frames in preorder; order[] gets the nodes, parent[] their parents. */
static int w_frames(struct wbuf *w, const struct fg_layout *lay, uint32_t *order, int64_t *parent)
{
	const struct fg *g = lay->fg;
	struct visit *stack = malloc((g->nnodes + 1) * sizeof(*stack));
	char name[NAME_MAX_BYTES + 8];
	size_t sp = 0, out = 0;
	double dscale = 0.01;

	if (!stack)
		return -ENOMEM;
	for (size_t i = 0; g->set->differential && i < g->nnodes; i++) {
		const struct node *n = &g->nodes[i];
		double d = fabs((g->ta > 0 ? n->a / g->ta : 0) - (g->tb > 0 ? n->b / g->tb : 0));
		if (d > dscale)
			dscale = d;
	}
	if (lay->drawn)
		stack[sp++] = (struct visit){0, -1, PAD * 100};
	while (sp) {
		struct visit v = stack[--sp];
		const struct node *n = &g->nodes[v.node];
		int64_t w100 = fg_node_w100(g, n);
		int64_t y = TOP_H + (int64_t)(lay->maxdepth - n->depth) * ROW_H;
		uint32_t rgb = frame_color(g, n, dscale);
		char fill[6];
		for (int k = 0; k < 6; k++)
			fill[k] = "0123456789abcdef"[(rgb >> (20 - 4 * k)) & 0xf];
		w_str(w, fg_node_offcpu(n) ? "<g class=\"off\"><rect x=\""
			 : fg_node_gpu(n)  ? "<g class=\"gpu\"><rect x=\""
					   : "<g><rect x=\"");
		w_fix2(w, v.x100);
		w_str(w, "\" y=\"");
		w_i64(w, y);
		w_str(w, "\" width=\"");
		w_fix2(w, w100);
		w_str(w, "\" height=\"15\" fill=\"#");
		w_mem(w, fill, 6);
		w_str(w, "\"/>");
		size_t len = sanitize(fg_node_name(g, n), name);
		size_t fit = fit_text(name, len, w100);
		if (fit) {
			w_str(w, "<text x=\"");
			w_fix2(w, v.x100 + 300);
			w_str(w, "\" y=\"");
			w_i64(w, y + 12);
			w_str(w, "\">");
			xml_put(w, name, fit);
			if (fit < len)
				w_mem(w, "..", 2);
			w_str(w, "</text>");
		}
		w_str(w, "</g>\n");
		order[out] = v.node;
		parent[out] = v.parent;
		/* children: pushed last to first, so they come out left to right */
		double cum = 0;
		for (uint32_t k = 0; k < n->nkids; k++)
			cum += fg_node_frac(g, &g->nodes[g->kids[n->kids + k]]);
		for (uint32_t k = n->nkids; k-- > 0;) {
			const struct node *c = &g->nodes[g->kids[n->kids + k]];
			cum -= fg_node_frac(g, c);
			int64_t cw = fg_node_w100(g, c);
			if (cw > 0 && (double)cw >= lay->min_w100)
				stack[sp++] =
				    (struct visit){g->kids[n->kids + k], (int64_t)out,
						   v.x100 + llround(cum * g->plot_w * 100)};
		}
		out++;
	}
	free(stack);
	return 0;
}

/* The script's data: constants, D (per frame) and S (strings). */
static int w_data(struct wbuf *w, const struct fg_layout *lay, const uint32_t *order,
		  const int64_t *parent, const char *an, const char *bn)
{
	const struct fg *g = lay->fg;
	struct strtab s = {0};
	uint32_t id;
	int rc = 0;

	w_str(w, "var PW=");
	w_i64(w, (int64_t)g->plot_w);
	w_str(w, ",PAD=");
	w_i64(w, PAD);
	w_str(w, ",CW=7.2,DIFF=");
	w_i64(w, g->set->differential ? 1 : 0);
	w_str(w, lay->opts->weight == TP_FLAMEGRAPH_SAMPLES ? ",U=\"samples\"" : ",U=\"us\"");
	w_str(w, ",TA=");
	w_i64(w, g->nodes[0].a);
	w_str(w, ",TB=");
	w_i64(w, g->nodes[0].b);
	w_str(w, ",AN=");
	js_put(w, an);
	w_str(w, ",BN=");
	js_put(w, bn);
	w_str(w, ";\nvar D=[");
	for (size_t i = 0; i < lay->drawn; i++) {
		const struct node *n = &g->nodes[order[i]];
		if (i)
			w_mem(w, ",", 1);
		w_i64(w, parent[i]);
		w_mem(w, ",", 1);
		if ((rc = fg_strtab_intern(&s, fg_node_name(g, n), &id)) < 0)
			goto out_free;
		w_i64(w, id);
		w_mem(w, ",", 1);
		if ((rc = fg_strtab_intern(&s, fg_node_module(g, n), &id)) < 0)
			goto out_free;
		w_i64(w, id);
		w_mem(w, ",", 1);
		w_i64(w, fg_node_kind(g, n));
		w_mem(w, ",", 1);
		w_i64(w, n->a);
		w_mem(w, ",", 1);
		w_i64(w, n->b);
		if (i % 8 == 7)
			w_mem(w, "\n", 1);
	}
	w_str(w, "];\nvar S=[");
	for (size_t i = 0; i < s.n; i++) {
		if (i)
			w_mem(w, i % 16 ? "," : ",\n", i % 16 ? 1 : 2);
		js_put(w, s.keys[i]);
	}
	w_str(w, "];\n");
out_free:
	free(s.keys);
	free(s.slots);
	return rc;
}

int fg_write_svg(struct fg_layout *lay, FILE *out, char *err, size_t errlen)
{
	const struct fg *g = lay->fg;
	const struct tp_flamegraph_opts *o = lay->opts;
	const char *an = o->a_name ? o->a_name : g->set->a_name ? g->set->a_name : "A";
	const char *bn = o->b_name ? o->b_name : g->set->b_name ? g->set->b_name : "B";
	int height = TOP_H + (lay->drawn ? (int)(lay->maxdepth + 1) * ROW_H : 0) + BOTTOM_H;
	uint32_t *order = malloc((lay->drawn + 1) * sizeof(*order));
	int64_t *parent = malloc((lay->drawn + 1) * sizeof(*parent));
	struct wbuf *w = malloc(sizeof(*w));
	int rc = -ENOMEM;

	if (!order || !parent || !w) {
		snprintf(err, errlen, "flamegraph: out of memory for %zu frames", lay->drawn);
		goto out_free;
	}
	w->f = out;
	w->len = 0;
	w->total = 0;
	w->err = 0;
	w_header(w, lay, height);
	w_footer(w, lay, height, an, bn);
	w_str(w, "<g id=\"frames\">\n");
	if ((rc = w_frames(w, lay, order, parent)) < 0) {
		snprintf(err, errlen, "flamegraph: out of memory for %zu frames", lay->drawn);
		goto out_free;
	}
	w_str(w, "</g>\n<script><![CDATA[\n");
	if ((rc = w_data(w, lay, order, parent, an, bn)) < 0) {
		snprintf(err, errlen, "flamegraph: out of memory for %zu frames", lay->drawn);
		goto out_free;
	}
	w_str(w, fg_svg_script);
	w_str(w, "]]></script>\n</svg>\n");
	w_flush(w);
	lay->bytes = w->total;
	if (w->err) {
		snprintf(err, errlen, "flamegraph: write error: %s", strerror(w->err));
		rc = -EIO;
	}
out_free:
	free(w);
	free(order);
	free(parent);
	return rc;
}
