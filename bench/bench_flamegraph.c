/*
 * bench_flamegraph.c - time to render the SVG flame graph of a one-hour
 * service profile: 10,000 distinct stacks of depth 10 to 40 over 2,000
 * functions, with the prefix sharing of real services: 4 entry points, 30
 * handlers, and each new stack shares 50-95% of an earlier stack's frames
 * before it diverges (a third end in a kernel frame).
 *
 * Each run renders the whole document into memory (tree, layout, writing);
 * the median, fastest and slowest of N runs and the document size are
 * printed. Never fails on timing.
 * usage: bench_flamegraph [--runs N] [--stacks N] [--out FILE]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_stats.h"
#include "traceprof/flamegraph.h"

static uint64_t rng = 88172645463325252ull;

static uint32_t next(uint32_t n)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng % n);
}

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

int main(int argc, char **argv)
{
	int runs = 21;
	uint32_t nstacks = 10000, nfuncs = 2000;
	const char *outpath = NULL;
	for (int i = 1; i + 1 < argc; i += 2) {
		if (strcmp(argv[i], "--runs") == 0)
			runs = atoi(argv[i + 1]);
		else if (strcmp(argv[i], "--stacks") == 0)
			nstacks = (uint32_t)atoi(argv[i + 1]);
		else if (strcmp(argv[i], "--out") == 0)
			outpath = argv[i + 1];
	}
	if (runs < 1 || nstacks < 1) {
		fprintf(stderr, "usage: bench_flamegraph [--runs N] [--stacks N] [--out FILE]\n");
		return 2;
	}

	struct tp_frame_info *frames = calloc(nfuncs, sizeof(*frames));
	char(*names)[64] = calloc(nfuncs, sizeof(*names));
	for (uint32_t f = 0; f < nfuncs; f++) {
		int kernel = f >= nfuncs - 100;
		snprintf(names[f], sizeof(names[f]),
			 kernel ? "__x64_sys_fn%u" : "app::module%u::Function%u", f / 50, f);
		frames[f] = (struct tp_frame_info){
		    .function = names[f],
		    .name = names[f],
		    .module = kernel ? "vmlinux" : "checkout-svc",
		    .kind = (uint8_t)(kernel ? TP_FRAME_KERNEL : TP_FRAME_USER)};
	}
	struct tp_stack_row *rows = calloc(nstacks, sizeof(*rows));
	uint32_t *pool = calloc((size_t)nstacks * 40, sizeof(*pool));
	uint64_t steps = 0;
	for (uint32_t r = 0; r < nstacks; r++) {
		uint32_t depth = 10 + next(31), *s = pool + (size_t)r * 40, shared = 0;
		if (r > 0) { /* share a prefix with an earlier stack, as calls do */
			const struct tp_stack_row *o = &rows[next(r)];
			shared = o->depth * (50 + next(46)) / 100;
			if (shared > depth - 1)
				shared = depth - 1;
			memcpy(s, o->frames, shared * sizeof(*s));
		}
		if (shared == 0) {
			s[0] = next(4);
			shared = 1;
		}
		for (uint32_t d = shared; d < depth; d++)
			s[d] = d == 1 ? 4 + next(30) : 34 + next(nfuncs - 134);
		if (next(3) == 0)
			s[depth - 1] = nfuncs - 100 + next(100);
		int64_t samples = 1 + next(100) * next(100) / 10;
		rows[r] = (struct tp_stack_row){
		    s,	  depth, samples, samples * 1000000 / 19, 0, 0, "checkout-svc", NULL,
		    NULL, 0,	 0};
		steps += depth;
	}
	struct tp_stackset set = {
	    .frames = frames, .nframes = nfuncs, .rows = rows, .nrows = nstacks};

	double *ms = calloc((size_t)runs, sizeof(*ms));
	struct tp_flamegraph_stats st = {0};
	struct tp_flamegraph_opts opts = {.title = "checkout-svc, last hour", .stats = &st};
	size_t size = 0;
	char err[256];
	for (int i = 0; i < runs; i++) {
		char *buf = NULL;
		size_t len = 0;
		FILE *f = open_memstream(&buf, &len);
		double t0 = now_ms();
		int rc = tp_flamegraph_svg_write(&set, &opts, f, err, sizeof(err));
		fflush(f);
		ms[i] = now_ms() - t0;
		fclose(f);
		if (rc) {
			fprintf(stderr, "bench_flamegraph: %s\n", err);
			return 1;
		}
		if (i == 0 && outpath) {
			FILE *o = fopen(outpath, "w");
			if (o) {
				fwrite(buf, 1, len, o);
				fclose(o);
			}
		}
		size = len;
		free(buf);
	}
	qsort(ms, (size_t)runs, sizeof(*ms), bench_cmp_double);
	printf("stacks=%u frame_steps=%llu tree_nodes=%zu drawn=%zu narrow=%zu min_width_px=%.2f\n",
	       nstacks, (unsigned long long)steps, st.nodes, st.drawn, st.narrow, st.min_width);
	printf("render_ms_median=%.1f min=%.1f max=%.1f runs=%d svg_bytes=%zu\n", ms[runs / 2],
	       ms[0], ms[runs - 1], runs, size);
	free(ms);
	free(pool);
	free(rows);
	free(names);
	free(frames);
	return 0;
}
