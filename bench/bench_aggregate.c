/*
 * bench_aggregate - cost of agg_add() per sample and of closing a window.
 *
 * Workloads (samples generated before timing, so the generator is not
 * measured; the dictionary holds the stacks with 20 frames each):
 * - node: 2 CPUs x 99 Hz x 15 s = 2,970 samples per window, 1,000 traces
 *   (80 % of samples tagged, two spans per trace), 500 stacks, 2 sources,
 *   19 and 99 Hz; 20 windows per run after 3 warm-up windows;
 * - stress: 1,000,000 samples in one 60 s window, 20,000 traces, 5,000
 *   stacks, max_keys 2^20 (every key fits).
 * Each run reports ns per agg_add() (steady state: the table is warm, no
 * add closes a window) and ms per window close (agg_close + agg_take +
 * agg_window_free: sort, dictionary closure, build), and what spooling that
 * window costs (agent/ship/spool.h: encode, write to a new file, rename, then
 * remove it as after its COMMIT; in a directory under $SPOOL_BENCH_DIR,
 * default /var/tmp, so a disk, not tmpfs). --runs runs (default 7); prints
 * the median with the fastest and slowest run. Reports only.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <unistd.h>

#include "bench_stats.h"
#include "aggregate.h"
#include "spool.h"

#define SEC 1000000LL

static uint64_t rng = 0x9e3779b97f4a7c15ULL;

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

struct workload {
	const char *name;  /* for the report */
	int64_t window_us; /* window length */
	uint32_t max_keys; /* table bound */
	size_t per_window; /* samples per window */
	int windows;	   /* timed windows per run */
	int warmup;	   /* untimed windows first */
	int traces;	   /* distinct traces */
	int stacks;	   /* distinct stacks */
};

/* Registers `stacks` stacks of 20 frames over 400 functions, and 2 sources. */
static void register_dict(struct agg *a, int stacks)
{
	struct store_source src = {"checkout", "shop", "checkout-1", "c0", "node-1", "b1d", ""};
	char name[64];

	agg_add_source(a, 1, &src);
	src.pod = "checkout-2";
	agg_add_source(a, 2, &src);
	for (uint64_t f = 1; f <= 400; f++) {
		snprintf(name, sizeof(name), "shop::module%llu::function", (unsigned long long)f);
		agg_add_function(a, f, name, "/usr/bin/shop", 0);
		agg_add_frame(a, 1000 + f, f, "b1d", "shop.cc", (int)f, 0x400000 + f);
	}
	for (int s = 0; s < stacks; s++) {
		uint64_t frames[20];

		for (int i = 0; i < 20; i++)
			frames[i] = 1001 + (uint64_t)((s * 7 + i * 13) % 400);
		agg_add_stack(a, 100000 + (uint64_t)s, frames, 20);
	}
}

static void gen(const struct workload *wl, struct agg_sample *out, size_t n, int64_t start)
{
	for (size_t i = 0; i < n; i++) {
		struct agg_sample *s = &out[i];
		uint64_t tr = rnd() % (uint64_t)(wl->traces * 5 / 4);

		memset(s, 0, sizeof(*s));
		s->time_us = start + (int64_t)(i * (uint64_t)wl->window_us / n);
		s->source_id = 1 + rnd() % 2;
		if (tr < (uint64_t)wl->traces) {
			memcpy(s->trace_id, &tr, sizeof(tr));
			s->trace_id[15] = 0x5a;
			s->span_id = tr * 2 + 1 + rnd() % 2;
		}
		s->stack_id = 100000 + rnd() % (uint64_t)wl->stacks;
		s->hz = rnd() % 4 ? 99 : 19;
	}
}

static void report(const char *what, double *v, int runs, const char *unit)
{
	qsort(v, (size_t)runs, sizeof(*v), bench_cmp_double);
	printf("| %s | %.1f | %.1f–%.1f | %s |\n", what, v[runs / 2], v[0], v[runs - 1], unit);
}

static struct spool *spool;
static size_t spool_file_bytes;

/* Writes w to the spool and removes it, as a window delivered at once; returns ns. */
static double spool_once(struct agg_window *w)
{
	struct spool_stats st;
	double t = now_ns();

	if (spool_write(spool, w) != 0)
		exit(1);
	t = now_ns() - t;
	spool_get_stats(spool, &st);
	spool_file_bytes = st.bytes;
	spool_remove(spool, w->spool_id);
	return t;
}

static void bench(const struct workload *wl, int runs)
{
	size_t total = wl->per_window * (size_t)(wl->windows + wl->warmup);
	struct agg_sample *samples = malloc(total * sizeof(*samples));
	double *add_ns = calloc((size_t)runs, sizeof(double));
	double *close_ms = calloc((size_t)runs, sizeof(double));
	double *spool_ms = calloc((size_t)runs, sizeof(double));
	int64_t t0 = 1767225600LL * SEC;
	size_t rows = 0, keys = 0, bytes = 0;

	if (!samples || !add_ns || !close_ms || !spool_ms)
		exit(1);
	for (int w = 0; w < wl->windows + wl->warmup; w++)
		gen(wl, samples + (size_t)w * wl->per_window, wl->per_window,
		    t0 + w * wl->window_us);
	for (int r = 0; r < runs; r++) {
		struct agg_opts o = {.window_us = wl->window_us, .max_keys = wl->max_keys};
		struct agg *a = agg_new(&o);
		double adds = 0, closes = 0, spools = 0;

		if (!a)
			exit(1);
		register_dict(a, wl->stacks);
		for (int w = 0; w < wl->windows + wl->warmup; w++) {
			const struct agg_sample *s = samples + (size_t)w * wl->per_window;
			struct agg_window *win;
			double t = now_ns();

			for (size_t i = 0; i < wl->per_window; i++)
				agg_add(a, &s[i]);
			if (w >= wl->warmup)
				adds += now_ns() - t;
			t = now_ns();
			agg_close(a);
			win = agg_take(a);
			if (win && r == 0 && w == wl->warmup) {
				rows = win->nrows;
				bytes = win->bytes;
				for (size_t i = 0; i < win->nrows; i++)
					keys += win->rows[i].n;
			}
			if (w >= wl->warmup)
				closes += now_ns() - t;
			if (win && w >= wl->warmup)
				spools += spool_once(win);
			agg_window_free(win);
		}
		add_ns[r] = adds / (double)(wl->per_window * (size_t)wl->windows);
		close_ms[r] = closes / 1e6 / wl->windows;
		spool_ms[r] = spools / 1e6 / wl->windows;
		agg_free(a);
	}
	printf("\n%s: %zu samples/window, %zu keys, %zu rows, %zu bytes per window, %d runs\n\n",
	       wl->name, wl->per_window, keys, rows, bytes, runs);
	printf("| measure | median | min–max | unit |\n|---|---:|---:|---|\n");
	report("agg_add", add_ns, runs, "ns/sample");
	report("close", close_ms, runs, "ms/window");
	report("spool write (remove apart)", spool_ms, runs, "ms/window");
	printf("\nspool file: %zu bytes per window\n", spool_file_bytes);
	free(spool_ms);
	free(samples);
	free(add_ns);
	free(close_ms);
}

int main(int argc, char **argv)
{
	int runs = 7;
	struct workload node = {
	    "node (2 CPUs x 99 Hz x 15 s, 1,000 traces)", 15 * SEC, 0, 2970, 20, 3, 1000, 500};
	struct workload stress = {"stress (1M samples in one window, 20,000 traces)",
				  60 * SEC,
				  1u << 20,
				  1000000,
				  1,
				  1,
				  20000,
				  5000};

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--runs") && i + 1 < argc) {
			runs = atoi(argv[++i]);
		} else {
			fprintf(stderr, "usage: bench_aggregate [--runs N]\n");
			return 2;
		}
	}
	if (runs < 1)
		runs = 1;
	{
		const char *base = getenv("SPOOL_BENCH_DIR");
		char dir[4096], err[256];
		struct spool_opts so = {.dir = dir, .db_key = "bench", .max_bytes = 1u << 30};

		snprintf(dir, sizeof(dir), "%s/tp-bench-spool-XXXXXX", base ? base : "/var/tmp");
		if (!mkdtemp(dir) || !(spool = spool_open(&so, NULL, err, sizeof(err)))) {
			fprintf(stderr, "cannot open a spool in %s\n", dir);
			return 1;
		}
		bench(&node, runs);
		bench(&stress, runs);
		spool_close(spool, true);
		rmdir(dir);
	}
	return 0;
}
