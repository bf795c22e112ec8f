/*
 * test_flamegraph.c - SVG flame graphs (flamegraph.h) of hand-built sets.
 *
 * The document is read back the way the browser's script reads it (D:
 * parent, name, module, kind, A, B per frame in preorder; S: strings;
 * the <rect> of every frame in the same order), and every frame's weight
 * is checked against a reference: the sum of the rows whose stack starts
 * with the frame's path. Then: services as the first level, nasty names
 * escaped, differential colors, narrow frames, the frame cap, bad rows,
 * errors and byte-identical output.
 *
 * `test_flamegraph --write DIR` also writes profile.svg, diff.svg and
 * nasty.svg there for the browser test (run_flamegraph_browser_test.sh).
 */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "traceprof/flamegraph.h"

/* frames[9].function as the document shows it */
#define BAD_SANITIZED                                                                              \
	"bad\xef\xbf\xbd\xef\xbf\xbd utf8 \xef\xbf\xbd( ctl\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd "  \
	"sep\xe2\x80\xa8 end\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"
#define NASTY_SCRIPT "]]></script><script>window.PWNED=1</script><![CDATA["

static struct tp_frame_info frames[] = {
    {.function = "main", .name = "main", .module = "checkout"},
    {.function = "handleRequest", .name = "handleRequest", .module = "checkout"},
    {.function = "validateSignature", .name = "validateSignature", .module = "checkout"},
    {.function = "rsaVerify", .name = "rsaVerify", .module = "libcrypto.so.3"},
    {.function = "parseJSON", .name = "parseJSON", .module = "checkout"},
    {.function = "sys_write", .name = "sys_write", .module = "vmlinux", .kind = TP_FRAME_KERNEL},
    {.function = "libc.so.6+0x1234",
     .name = "libc.so.6+0x1234",
     .module = "libc.so.6",
     .kind = TP_FRAME_UNSYMBOLIZED},
    {.function = "std::map<K, V&>::at<\"q\" 'x'>", .name = "at", .module = "a&b<c>"},
    {.function = NASTY_SCRIPT, .name = "n", .module = ""},
    {.function = "bad\xff\xfe utf8 \xc3( ctl\x01\x1b\x7f sep\xe2\x80\xa8 end\xed\xa0\x80",
     .name = "b",
     .module = ""},
    /* a second frame with the name "handleRequest" (another address): one frame */
    {.function = "handleRequest", .name = "handleRequest", .module = "checkout", .address = 64},
};
#define NFRAMES (sizeof(frames) / sizeof(frames[0]))

static const uint32_t s_rsa[] = {0, 1, 2, 3}, s_val[] = {0, 10, 2}, s_parse[] = {0, 1, 4},
		      s_write[] = {0, 1, 4, 5}, s_unsym[] = {0, 6}, s_tmpl[] = {0, 7},
		      s_nasty[] = {0, 8, 9};

/* The profile: 5 s of CPU in one service. */
static struct tp_stack_row profile_rows[] = {
    {s_rsa, 4, 80, 4000000, 0, 0, "checkout", NULL, NULL, 0, 0},
    {s_val, 3, 4, 200000, 0, 0, "checkout", NULL, NULL, 0, 0},
    {s_parse, 3, 10, 500000, 0, 0, "checkout", NULL, NULL, 0, 0},
    {s_write, 4, 2, 100000, 0, 0, "checkout", NULL, NULL, 0, 0},
    {s_unsym, 2, 3, 150000, 0, 0, "checkout", NULL, NULL, 0, 0},
    {s_tmpl, 2, 1, 30000, 0, 0, "checkout", NULL, NULL, 0, 0},
    {s_nasty, 3, 1, 20000, 0, 0, "checkout", NULL, NULL, 0, 0},
};
#define NPROFILE (sizeof(profile_rows) / sizeof(profile_rows[0]))

/* A comparison: validateSignature 80% of A and 10% of B (B ten times larger). */
static struct tp_stack_row diff_rows[] = {
    {s_val, 3, 800, 800, 1000, 1000, "checkout", NULL, NULL, 0, 0},
    {s_parse, 3, 200, 200, 9000, 9000, "checkout", NULL, NULL, 0, 0},
};

/* One document in memory (the caller frees). */
static char *render(const struct tp_stackset *set, const struct tp_flamegraph_opts *opts,
		    size_t *len, int *rc)
{
	char *buf = NULL, err[256];
	FILE *f = open_memstream(&buf, len);
	*rc = tp_flamegraph_svg_write(set, opts, f, err, sizeof(err));
	fclose(f);
	if (*rc)
		fprintf(stderr, "render: %s\n", err);
	return buf;
}

/* The frames as the script sees them. */
struct parsed {
	long long *d;	/* six numbers per frame */
	size_t nd;	/* frames */
	char **s;	/* decoded strings */
	size_t ns;	/* strings */
	double *x, *w;	/* rect x and width per frame */
	unsigned *fill; /* rect fill per frame */
};

static char *js_string(const char **pp)
{
	const char *p = *pp + 1; /* after the quote */
	char *out = malloc(strlen(p) + 1), *o = out;
	while (*p && *p != '"') {
		if (*p == '\\' && p[1] == 'u') {
			unsigned cp =
			    (unsigned)strtoul((char[5]){p[2], p[3], p[4], p[5], 0}, NULL, 16);
			if (cp < 0x80) {
				*o++ = (char)cp;
			} else { /* U+2028 / U+2029 */
				*o++ = (char)(0xe0 | cp >> 12);
				*o++ = (char)(0x80 | ((cp >> 6) & 0x3f));
				*o++ = (char)(0x80 | (cp & 0x3f));
			}
			p += 6;
		} else {
			*o++ = *p++;
		}
	}
	*o = '\0';
	*pp = p + 1;
	return out;
}

static bool parse(const char *doc, struct parsed *ps)
{
	memset(ps, 0, sizeof(*ps));
	const char *p = strstr(doc, "var D=[");
	const char *q = strstr(doc, "var S=[");
	if (!p || !q)
		return false;
	p += 7;
	ps->d = calloc(strlen(p) / 2 + 6, sizeof(*ps->d));
	size_t n = 0;
	while (*p != ']') {
		char *end;
		ps->d[n++] = strtoll(p, &end, 10);
		p = end;
		while (*p == ',' || *p == '\n')
			p++;
	}
	ps->nd = n / 6;
	q += 7;
	ps->s = calloc(strlen(q) / 2 + 1, sizeof(*ps->s));
	while (*q == '"') {
		ps->s[ps->ns++] = js_string(&q);
		while (*q == ',' || *q == '\n')
			q++;
	}
	ps->x = calloc(ps->nd + 1, sizeof(double));
	ps->w = calloc(ps->nd + 1, sizeof(double));
	ps->fill = calloc(ps->nd + 1, sizeof(unsigned));
	const char *r = strstr(doc, "<g id=\"frames\">");
	for (size_t i = 0; r && i < ps->nd; i++) {
		r = strstr(r, "<rect x="); /* in <g> or <g class="off"> */
		if (!r ||
		    sscanf(r, "<rect x=\"%lf\" y=\"%*d\" width=\"%lf\" height=\"15\" fill=\"#%x\"",
			   &ps->x[i], &ps->w[i], &ps->fill[i]) != 3)
			return false;
		r++;
	}
	return r != NULL;
}

static void parsed_free(struct parsed *ps)
{
	for (size_t i = 0; i < ps->ns; i++)
		free(ps->s[i]);
	free(ps->s);
	free(ps->d);
	free(ps->x);
	free(ps->w);
	free(ps->fill);
}

/* The frame in preorder named by path (names from the root's child on). */
static long find(const struct parsed *ps, const char *const *path, size_t depth)
{
	for (size_t i = 0; i < ps->nd; i++) {
		long j = (long)i;
		size_t d = depth;
		while (d > 0 && j > 0 && strcmp(ps->s[ps->d[j * 6 + 1]], path[d - 1]) == 0) {
			j = (long)ps->d[j * 6];
			d--;
		}
		if (d == 0 && j == 0)
			return (long)i;
	}
	return -1;
}

/* A name as the document shows it (the one bad name of the test, sanitized). */
static const char *shown(const char *raw)
{
	return strcmp(raw, frames[9].function) == 0 ? BAD_SANITIZED : raw;
}

/* Reference: checks every drawn frame's weight against the rows it covers. */
static void check_weights(const struct tp_stackset *set, const struct parsed *ps, int by_service)
{
	for (size_t i = 1; i < ps->nd; i++) {
		const char *path[64];
		size_t depth = 0;
		for (long j = (long)i; j > 0; j = (long)ps->d[j * 6])
			depth++;
		size_t k = depth;
		for (long j = (long)i; j > 0; j = (long)ps->d[j * 6])
			path[--k] = ps->s[ps->d[j * 6 + 1]];
		long long a = 0, b = 0;
		for (size_t r = 0; r < set->nrows; r++) {
			const struct tp_stack_row *row = &set->rows[r];
			size_t off = by_service ? 1 : 0;
			if (by_service && strcmp(row->service, path[0]) != 0)
				continue;
			if (row->depth + off < depth)
				continue;
			bool match = true;
			for (size_t d = off; d < depth && match; d++)
				match = strcmp(shown(set->frames[row->frames[d - off]].function),
					       path[d]) == 0;
			if (match) {
				a += row->cpu_us;
				b += row->b_cpu_us;
			}
		}
		CHECK(ps->d[i * 6 + 4] == a && ps->d[i * 6 + 5] == b,
		      "frame %zu (%s): %lld/%lld, rows give %lld/%lld", i, path[depth - 1],
		      ps->d[i * 6 + 4], ps->d[i * 6 + 5], a, b);
	}
}

static bool valid_utf8_text(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		uint8_t c = (uint8_t)s[i];
		if (c < 0x20 && c != '\n' && c != '\t')
			return false;
		if (c == 0x7f || c == 0xff || c == 0xfe)
			return false;
	}
	return true;
}

static size_t count(const char *hay, const char *needle)
{
	size_t n = 0;
	for (const char *p = hay; (p = strstr(p, needle)); p++)
		n++;
	return n;
}

static struct tp_stackset profile_set(void)
{
	return (struct tp_stackset){
	    .frames = frames, .nframes = NFRAMES, .rows = profile_rows, .nrows = NPROFILE};
}

static struct tp_stackset diff_set(void)
{
	return (struct tp_stackset){.frames = frames,
				    .nframes = NFRAMES,
				    .rows = diff_rows,
				    .nrows = 2,
				    .differential = 1,
				    .a_name = "duration > 1s",
				    .b_name = "duration < 100ms"};
}

static void test_profile(void)
{
	struct tp_stackset set = profile_set();
	struct tp_flamegraph_stats st;
	struct tp_flamegraph_opts o = {.title = "checkout <profile>", .stats = &st};
	struct parsed ps;
	size_t len;
	int rc;
	char *doc = render(&set, &o, &len, &rc);
	CHECK(rc == 0, "profile rendered: %d", rc);
	CHECK(parse(doc, &ps), "profile parsed");
	CHECK(ps.nd == 11, "11 frames (all, main, 2 under main, ...): %zu", ps.nd);
	CHECK(st.nodes == 11 && st.drawn == 11 && st.narrow == 0, "stats %zu %zu %zu", st.nodes,
	      st.drawn, st.narrow);
	CHECK(st.bytes == len, "bytes %llu of %zu", (unsigned long long)st.bytes, len);
	CHECK(ps.d[4] == 5000000 && strcmp(ps.s[ps.d[1]], "all") == 0, "root all = 5 s");
	check_weights(&set, &ps, 0);
	/* widths: share of the total over 1180 px; children start at the parent */
	for (size_t i = 0; i < ps.nd; i++)
		CHECK(fabs(ps.w[i] - 1180.0 * (double)ps.d[i * 6 + 4] / 5000000) < 0.006,
		      "frame %zu width %.2f", i, ps.w[i]);
	const char *hr[] = {"main", "handleRequest"},
		   *vs[] = {"main", "handleRequest", "validateSignature"};
	long h = find(&ps, hr, 2), v = find(&ps, vs, 3);
	CHECK(h > 0 && v > 0 && ps.d[v * 6] == h, "validateSignature under handleRequest");
	CHECK(h > 0 && ps.d[h * 6 + 4] == 4800000, "handleRequest merges its two frames: 4.8 s");
	CHECK(h > 0 && v > 0 && fabs(ps.x[h] + 1180.0 * 600000 / 5000000 - ps.x[v]) < 0.02,
	      "children by name: parseJSON (0.6 s) first, then validateSignature");
	CHECK(strstr(doc, "<text id=\"title\" x=\"600\" y=\"22\">checkout &lt;profile&gt;</text>"),
	      "title escaped");
	CHECK(strstr(doc, ">handleRequest</text>") && strstr(doc, ">validateSignature</text>"),
	      "labels where they fit");
	CHECK(strstr(doc, "width: CPU time"), "footer names the weight");
	/* kinds: kernel aqua (blue > red), unsymbolized grey, user warm (red high) */
	const char *kw[] = {"main", "handleRequest", "parseJSON", "sys_write"},
		   *un[] = {"main", "libc.so.6+0x1234"};
	long k = find(&ps, kw, 4), u = find(&ps, un, 2);
	CHECK(k > 0 && (ps.fill[k] & 0xff) > (ps.fill[k] >> 16), "kernel frame aqua: %06x",
	      ps.fill[k]);
	CHECK(u > 0 && (ps.fill[u] >> 16) == (ps.fill[u] & 0xff) &&
		  (ps.fill[u] >> 16) == ((ps.fill[u] >> 8) & 0xff),
	      "unsymbolized grey: %06x", ps.fill[u]);
	CHECK(h > 0 && (ps.fill[h] >> 16) >= 205 && (ps.fill[h] & 0xff) <= 55, "user warm: %06x",
	      ps.fill[h]);
	parsed_free(&ps);

	/* same input, same bytes; rows in another order, same bytes */
	size_t len2;
	char *doc2 = render(&set, &o, &len2, &rc);
	CHECK(len == len2 && memcmp(doc, doc2, len) == 0, "deterministic");
	free(doc2);
	struct tp_stack_row rev[NPROFILE];
	for (size_t i = 0; i < NPROFILE; i++)
		rev[i] = profile_rows[NPROFILE - 1 - i];
	set.rows = rev;
	doc2 = render(&set, &o, &len2, &rc);
	CHECK(len == len2 && memcmp(doc, doc2, len) == 0, "row order does not matter");
	free(doc2);
	free(doc);
}

static void test_nasty(void)
{
	struct tp_stackset set = profile_set();
	struct parsed ps;
	size_t len;
	int rc;
	struct tp_flamegraph_opts wide = {.width = 60000}; /* room for whole labels */
	char *doc = render(&set, &wide, &len, &rc);
	CHECK(rc == 0 && parse(doc, &ps), "nasty names rendered");
	CHECK(count(doc, "]]>") == 1, "CDATA ended once: %zu", count(doc, "]]>"));
	CHECK(count(doc, "<script") == 1 && count(doc, "</script>") == 1, "one script element");
	CHECK(count(doc, "<![CDATA[") == 1, "one CDATA section");
	CHECK(valid_utf8_text(doc, len), "no control or invalid bytes in the document");
	CHECK(strstr(doc, ">std::map&lt;K, V&amp;&gt;::at&lt;&quot;q&quot; &#39;x&#39;&gt;</text>"),
	      "template name escaped in its label");
	bool tmpl = false, script = false, bad = false, module = false;
	for (size_t i = 0; i < ps.ns; i++) {
		tmpl |= strcmp(ps.s[i], "std::map<K, V&>::at<\"q\" 'x'>") == 0;
		script |= strcmp(ps.s[i], NASTY_SCRIPT) == 0;
		bad |= strcmp(ps.s[i], BAD_SANITIZED) == 0;
		module |= strcmp(ps.s[i], "a&b<c>") == 0;
	}
	CHECK(tmpl && script && module, "names kept whole in the script's strings");
	CHECK(bad, "bad UTF-8 and control characters replaced by U+FFFD");
	CHECK(!strstr(strstr(doc, "<script"), "\xe2\x80\xa8") && strstr(doc, "sep\\u2028 end"),
	      "U+2028 escaped in the script");
	parsed_free(&ps);
	free(doc);

	/* a 5000-byte name is cut at 1000 bytes */
	static char longname[5001];
	memset(longname, 'x', 5000);
	struct tp_frame_info lf[] = {{.function = longname, .name = longname, .module = ""}};
	static const uint32_t s0[] = {0};
	struct tp_stack_row lr[] = {{s0, 1, 1, 1, 0, 0, "s", NULL, NULL, 0, 0}};
	struct tp_stackset ls = {.frames = lf, .nframes = 1, .rows = lr, .nrows = 1};
	doc = render(&ls, NULL, &len, &rc);
	CHECK(rc == 0 && parse(doc, &ps) && ps.nd == 2, "long name rendered");
	CHECK(ps.nd == 2 && strlen(ps.s[ps.d[7]]) == 1002 && strstr(ps.s[ps.d[7]], "xx.."),
	      "long name cut at 1000 bytes then \"..\": %zu",
	      ps.nd == 2 ? strlen(ps.s[ps.d[7]]) : 0);
	CHECK(len < 12000, "document small: %zu", len);
	parsed_free(&ps);
	free(doc);
}

static void test_services(void)
{
	struct tp_stack_row rows[] = {
	    {s_parse, 3, 1, 300, 0, 0, "frontend", NULL, NULL, 0, 0},
	    {s_rsa, 4, 1, 700, 0, 0, "payment", NULL, NULL, 0, 0},
	    {s_parse, 3, 1, 100, 0, 0, "payment", NULL, NULL, 0, 0},
	};
	struct tp_stackset set = {.frames = frames, .nframes = NFRAMES, .rows = rows, .nrows = 3};
	struct parsed ps;
	size_t len;
	int rc;
	char *doc = render(&set, NULL, &len, &rc);
	CHECK(rc == 0 && parse(doc, &ps), "services rendered");
	const char *fe[] = {"frontend"}, *pm[] = {"payment"}, *pj[] = {"payment", "main"};
	long f = find(&ps, fe, 1), p = find(&ps, pm, 1), m = find(&ps, pj, 2);
	CHECK(f > 0 && ps.d[f * 6] == 0 && ps.d[f * 6 + 3] == 3, "frontend a service under all");
	CHECK(p > 0 && ps.d[p * 6 + 4] == 800 && m > 0 && ps.d[m * 6] == p,
	      "payment 800 us, main under it");
	check_weights(&set, &ps, 1);
	parsed_free(&ps);
	free(doc);
}

/* Off-CPU rows: weighed as time next to CPU rows, blue with class "off"
 * where a frame's time is all off CPU, nothing else marked. */
static const uint32_t s_wait[] = {0, 1, 4}; /* main;handleRequest;parseJSON */
static struct tp_stack_row offcpu_rows[] = {
    {s_rsa, 4, 6, 600, 0, 0, "checkout", NULL, NULL, 0, 0},
    {s_wait, 3, 0, 0, 0, 0, "checkout", NULL, NULL, 400, 0},
};

static struct tp_stackset offcpu_set(void)
{
	struct tp_stackset s = {
	    .frames = frames, .nframes = NFRAMES, .rows = offcpu_rows, .nrows = 2};
	return s;
}

static void test_offcpu(void)
{
	struct tp_stackset set = offcpu_set();
	struct tp_flamegraph_opts so = {.weight = TP_FLAMEGRAPH_SAMPLES};
	struct parsed ps;
	size_t len;
	int rc;
	char *doc = render(&set, NULL, &len, &rc);
	CHECK(rc == 0 && parse(doc, &ps), "off-CPU set rendered");
	const char *w[] = {"main", "handleRequest", "parseJSON"}, *h[] = {"main", "handleRequest"},
		   *r[] = {"main", "handleRequest", "validateSignature", "rsaVerify"};
	long kw = find(&ps, w, 3), kh = find(&ps, h, 2), kr = find(&ps, r, 4);
	CHECK(ps.d[4] == 1000 && kh > 0 && ps.d[kh * 6 + 4] == 1000, "CPU + off-CPU time: 1000 us");
	CHECK(kw > 0 && ps.d[kw * 6 + 4] == 400 && fabs(ps.w[kw] - 1180.0 * 0.4) < 0.006,
	      "the off-CPU frame 40 %% of the width: %.2f", kw > 0 ? ps.w[kw] : -1);
	CHECK(kw > 0 && (ps.fill[kw] & 0xff) >= 200 && (ps.fill[kw] >> 16) <= 90,
	      "off-CPU frame blue: %06x", kw > 0 ? ps.fill[kw] : 0);
	CHECK(kh > 0 && (ps.fill[kh] >> 16) >= 205, "a frame with CPU time keeps its colour: %06x",
	      kh > 0 ? ps.fill[kh] : 0);
	CHECK(kr > 0 && (ps.fill[kr] >> 16) >= 205, "a CPU-only frame warm: %06x",
	      kr > 0 ? ps.fill[kr] : 0);
	CHECK(count(doc, "<g class=\"off\">") == 1 && count(doc, "class=\"off\"") == 1,
	      "class off on the off-CPU frame only: %zu", count(doc, "class=\"off\""));
	CHECK(strstr(doc, "<g class=\"off\"><rect") && strstr(doc, ">parseJSON</text></g>"),
	      "the marked group is a frame");
	CHECK(strstr(doc, "width: time; blue: off CPU"), "footer says what blue is");
	parsed_free(&ps);
	free(doc);
	/* by samples, off-CPU time weighs nothing */
	doc = render(&set, &so, &len, &rc);
	CHECK(rc == 0 && !strstr(doc, "class=\"off\"") && strstr(doc, "width: samples"),
	      "samples: no off-CPU frame");
	free(doc);
	/* a set without off-CPU rows has no class and the usual footer */
	set.nrows = 1;
	doc = render(&set, NULL, &len, &rc);
	CHECK(rc == 0 && !strstr(doc, "class=\"off\"") && strstr(doc, "width: CPU time"),
	      "no off-CPU rows: unchanged");
	free(doc);
}

/* GPU rows: weighed as time (ns rounded to us) next to CPU rows, green
 * with class "gpu" where a frame's time is all GPU time, nothing else
 * marked; by samples they weigh nothing. */
static void test_gpu(void)
{
	struct tp_stack_row rows[] = {
	    {s_rsa, 4, 6, 600, 0, 0, "checkout", NULL, NULL, 0, 0},
	    {s_wait, 3, 0, 0, 0, 0, "checkout", NULL, NULL, 0, 400500},
	};
	struct tp_stackset set = {.frames = frames, .nframes = NFRAMES, .rows = rows, .nrows = 2};
	struct tp_flamegraph_opts so = {.weight = TP_FLAMEGRAPH_SAMPLES};
	struct parsed ps;
	size_t len;
	int rc;
	char *doc = render(&set, NULL, &len, &rc);
	CHECK(rc == 0 && parse(doc, &ps), "GPU set rendered");
	const char *w[] = {"main", "handleRequest", "parseJSON"}, *h[] = {"main", "handleRequest"};
	long kw = find(&ps, w, 3), kh = find(&ps, h, 2);
	CHECK(ps.d[4] == 1001 && kh > 0 && ps.d[kh * 6 + 4] == 1001,
	      "CPU 600 us + GPU 400500 ns rounded: 1001 us");
	CHECK(kw > 0 && ps.d[kw * 6 + 4] == 401, "the GPU frame: 401 us");
	CHECK(kw > 0 && ((ps.fill[kw] >> 8) & 0xff) >= 160 && (ps.fill[kw] >> 16) <= 100 &&
		  (ps.fill[kw] & 0xff) <= 90,
	      "GPU frame green: %06x", kw > 0 ? ps.fill[kw] : 0);
	CHECK(kh > 0 && (ps.fill[kh] >> 16) >= 205, "a frame with CPU time keeps its colour: %06x",
	      kh > 0 ? ps.fill[kh] : 0);
	CHECK(count(doc, "<g class=\"gpu\">") == 1 && count(doc, "class=\"off\"") == 0,
	      "class gpu on the GPU frame only: %zu", count(doc, "class=\"gpu\""));
	CHECK(strstr(doc, "width: time; green: on the GPU"), "footer says what green is");
	parsed_free(&ps);
	free(doc);
	doc = render(&set, &so, &len, &rc);
	CHECK(rc == 0 && !strstr(doc, "class=\"gpu\"") && strstr(doc, "width: samples"),
	      "samples: no GPU frame");
	free(doc);
	rows[1].gpu_ns = -1;
	doc = render(&set, NULL, &len, &rc);
	CHECK(rc == 0 && !strstr(doc, "class=\"gpu\""), "a negative GPU time: the row dropped");
	free(doc);
}

static void test_diff(void)
{
	struct tp_stackset set = diff_set();
	struct parsed ps;
	size_t len;
	int rc;
	char *doc = render(&set, NULL, &len, &rc);
	CHECK(rc == 0 && parse(doc, &ps), "diff rendered");
	check_weights(&set, &ps, 0);
	const char *vs[] = {"main", "handleRequest", "validateSignature"},
		   *pj[] = {"main", "handleRequest", "parseJSON"}, *m[] = {"main"};
	long v = find(&ps, vs, 3), p = find(&ps, pj, 3), r = find(&ps, m, 1);
	/* shares A 80% / B 10%: red; 20% / 90%: blue; widths = mean shares */
	CHECK(v > 0 && ps.fill[v] >> 16 == 0xff && (ps.fill[v] & 0xff) < 0x60,
	      "hotter in A red: %06x", ps.fill[v]);
	CHECK(p > 0 && (ps.fill[p] & 0xff) == 0xff && ps.fill[p] >> 16 < 0x60,
	      "hotter in B blue: %06x", ps.fill[p]);
	CHECK(r > 0 && ps.fill[r] == 0xf5f5f5, "same share neutral: %06x", ps.fill[r]);
	CHECK(v > 0 && fabs(ps.w[v] - 1180 * (0.8 + 0.1) / 2) < 0.006, "width = mean share: %.2f",
	      ps.w[v]);
	CHECK(strstr(doc, "AN=\"duration \\u003e 1s\",BN=\"duration \\u003c 100ms\""),
	      "cohort names in the script");
	CHECK(strstr(doc, "red: larger share in duration &gt; 1s"), "footer explains colors");
	parsed_free(&ps);
	free(doc);
}

static void test_narrow_and_bad(void)
{
	enum { N = 3000 };
	struct tp_frame_info *fr = calloc(N + 1, sizeof(*fr));
	struct tp_stack_row *rows = calloc(N + 4, sizeof(*rows));
	uint32_t(*stk)[2] = calloc(N, sizeof(*stk));
	char(*names)[16] = calloc(N, sizeof(*names));
	static const uint32_t bad_idx[] = {0, 99999};
	fr[N] = (struct tp_frame_info){.function = "root", .name = "root", .module = ""};
	for (uint32_t i = 0; i < N; i++) {
		snprintf(names[i], sizeof(names[i]), "leaf%04u", i);
		fr[i] =
		    (struct tp_frame_info){.function = names[i], .name = names[i], .module = ""};
		stk[i][0] = N;
		stk[i][1] = i;
		/* leaf 0 has most of the time; the others 1 us each */
		rows[i] = (struct tp_stack_row){stk[i], 2, 1, i == 0 ? 1000000 : 1, 0, 0, "s", NULL,
						NULL,	0, 0};
	}
	rows[N] = (struct tp_stack_row){bad_idx, 2, 1, 5, 0, 0, "s", NULL, NULL, 0, 0};
	rows[N + 1] = (struct tp_stack_row){stk[1], 0, 1, 5, 0, 0, "s", NULL, NULL, 0, 0};
	rows[N + 2] = (struct tp_stack_row){stk[1], 2, 1, -5, 0, 0, "s", NULL, NULL, 0, 0};
	struct tp_stackset set = {.frames = fr, .nframes = N + 1, .rows = rows, .nrows = N + 3};
	struct tp_flamegraph_stats st;
	struct tp_flamegraph_opts o = {.stats = &st};
	struct parsed ps;
	size_t len;
	int rc;
	char *doc = render(&set, &o, &len, &rc);
	CHECK(rc == 0 && parse(doc, &ps), "narrow set rendered");
	CHECK(st.rows_dropped == 3, "3 bad rows dropped: %zu", st.rows_dropped);
	CHECK(strstr(doc, "3 rows left out"), "footer counts the dropped rows");
	/* each 1 us leaf is 1180 / 1002999 px wide: not drawn, time in root */
	CHECK(st.nodes == N + 2 && st.drawn == 3 && st.narrow == N - 1,
	      "narrow leaves not drawn: nodes %zu drawn %zu narrow %zu", st.nodes, st.drawn,
	      st.narrow);
	CHECK(ps.nd == 3 && ps.d[4] == 1000000 + N - 1 && ps.d[6 + 4] == 1000000 + N - 1,
	      "their time stays in the parents");
	CHECK(strstr(doc, "2999 frames too narrow to draw"), "footer counts narrow frames");
	parsed_free(&ps);
	free(doc);

	/* all leaves equal: the cap raises the min width, bounded document */
	for (uint32_t i = 0; i < N; i++)
		rows[i].cpu_us = 100;
	o.max_frames = 500;
	doc = render(&set, &o, &len, &rc);
	CHECK(rc == 0 && st.drawn == 2 && st.min_width > 1180.0 / N,
	      "cap: %zu drawn, min width %.3f", st.drawn, st.min_width);
	free(doc);
	o.max_frames = 0;
	o.min_width = 0.01;
	doc = render(&set, &o, &len, &rc);
	CHECK(rc == 0 && st.drawn == N + 2, "min width 0.01 px draws all: %zu", st.drawn);
	CHECK(len < (size_t)N * 200, "3000 frames in %zu bytes", len);
	free(doc);

	free(fr);
	free(rows);
	free(stk);
	free(names);
}

static void test_errors(void)
{
	struct tp_stackset set = profile_set(), empty = {0};
	char err[256];
	FILE *f = fopen("/dev/null", "w");
	int rc = tp_flamegraph_svg_write(NULL, NULL, f, err, sizeof(err));
	CHECK(rc == -EINVAL && strstr(err, "no stack set"), "NULL set: %d %s", rc, err);
	struct tp_flamegraph_opts o = {.width = 50};
	rc = tp_flamegraph_svg_write(&set, &o, f, err, sizeof(err));
	CHECK(rc == -EINVAL && strstr(err, "width 50 px"), "bad width: %s", err);
	o = (struct tp_flamegraph_opts){.weight = 7};
	rc = tp_flamegraph_svg_write(&set, &o, f, err, sizeof(err));
	CHECK(rc == -EINVAL && strstr(err, "weight 7"), "bad weight: %s", err);
	fclose(f);

	f = fopen("/dev/full", "w");
	if (f) {
		setvbuf(f, NULL, _IONBF, 0);
		rc = tp_flamegraph_svg_write(&set, NULL, f, err, sizeof(err));
		CHECK(rc == -EIO && strstr(err, "write error"), "full disk: %d %s", rc, err);
		fclose(f);
	}

	size_t len;
	char *doc = render(&empty, NULL, &len, &rc);
	CHECK(rc == 0 && strstr(doc, "no samples to draw") && strstr(doc, "var D=[];"),
	      "empty set: a document that says so");
	free(doc);
}

static int write_file(const char *dir, const char *name, const struct tp_stackset *set,
		      const struct tp_flamegraph_opts *o)
{
	char path[4096], err[256];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "w");
	if (!f) {
		fprintf(stderr, "%s: %s\n", path, strerror(errno));
		return 1;
	}
	int rc = tp_flamegraph_svg_write(set, o, f, err, sizeof(err));
	if (fclose(f) != 0 || rc) {
		fprintf(stderr, "%s: %s\n", path, rc ? err : strerror(errno));
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "--write") == 0) {
		struct tp_stackset p = profile_set(), d = diff_set(), o = offcpu_set();
		struct tp_flamegraph_opts po = {.title = "checkout", .subtitle = "last hour"};
		struct tp_flamegraph_opts dopt = {.weight = TP_FLAMEGRAPH_SAMPLES};
		return write_file(argv[2], "profile.svg", &p, &po) ||
		       write_file(argv[2], "diff.svg", &d, &dopt) ||
		       write_file(argv[2], "offcpu.svg", &o, NULL);
	}
	test_profile();
	test_nasty();
	test_services();
	test_diff();
	test_offcpu();
	test_gpu();
	test_narrow_and_bad();
	test_errors();
	return check_done();
}
