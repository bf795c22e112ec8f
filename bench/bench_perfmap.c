/*
 * bench_perfmap - cost of reading perf maps (agent/symbols/perfmap.h), the
 * JIT names of Node.js, Java and Python.
 *
 * Writes Node-like perf maps (lines of about 80 bytes: "JS:*name file:line")
 * in a temporary directory and measures, per run:
 *   parse10k   the first read of a map of 10,000 lines
 *   parse100k  the first read of a map of 100,000 lines
 *   shuffled   the same with its lines out of address order
 *   append1k   reading 1,000 lines appended to the 100,000-line map (the
 *              steady state of a JIT that keeps compiling)
 *   lookup     perfmap_lookup() of random addresses in the 100,000 entries
 * and the bytes held per entry. Prints medians (min-max) over the runs;
 * never fails on timing.
 *
 *   bench_perfmap [--runs N]     (default 7)
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_stats.h"
#include "perfmap.h"

#define MAX_RUNS 64

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int shuffle; /* addresses out of order (prime stride) when set */

/* Appends lines [from, to) of the synthetic map to path. */
static void write_lines(const char *path, const char *mode, int from, int to)
{
	FILE *f = fopen(path, mode);

	if (!f) {
		perror(path);
		exit(1);
	}
	for (int i = from; i < to; i++)
		fprintf(f, "%x %x JS:*function_%d_handleRequest /srv/app/lib/module_%d.js:%d:%d\n",
			0x10000000 + (shuffle ? (i * 7919) % to : i) * 0x400,
			0x100 + (i % 7) * 0x40, i, i % 97, i % 500 + 1, i % 40 + 1);
	fclose(f);
}

/* Reads path into pm (first read or appended lines); returns ns. */
static double read_map(struct perfmap *pm, const char *path, struct perfmap_stats *st)
{
	static const struct perfmap_limits lim = {
	    .max_entries = 1 << 20,
	    .max_bytes = 256u << 20,
	    .total_bytes = 1u << 30,
	    .pass_bytes = 64u << 20,
	};
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	double t0 = now_ns();

	if (fd < 0 || perfmap_update(pm, fd, &lim, st) < 0) {
		fprintf(stderr, "cannot read %s\n", path);
		exit(1);
	}
	t0 = now_ns() - t0;
	close(fd);
	return t0;
}

static void report(const char *what, double *v, int n, double div, const char *unit)
{
	double lo, hi, med;

	qsort(v, (size_t)n, sizeof(*v), bench_cmp_double);
	lo = v[0];
	hi = v[n - 1];
	med = bench_median(v, n);
	printf("%-10s %10.3f %s  (%.3f-%.3f)\n", what, med / div, unit, lo / div, hi / div);
}

int main(int argc, char **argv)
{
	double p10[MAX_RUNS], p100[MAX_RUNS], shuf[MAX_RUNS], app[MAX_RUNS], look[MAX_RUNS];
	char dir[] = "/tmp/bench_perfmap_XXXXXX", small[64], big[64];
	struct perfmap_stats st = {0};
	double per_entry = 0;
	int runs = 7;
	uint64_t sink = 0;

	if (argc == 3 && strcmp(argv[1], "--runs") == 0)
		runs = atoi(argv[2]);
	if (runs < 1 || runs > MAX_RUNS || !mkdtemp(dir))
		return 2;
	snprintf(small, sizeof(small), "%s/s.map", dir);
	snprintf(big, sizeof(big), "%s/b.map", dir);
	write_lines(small, "w", 0, 10000);
	for (int r = 0; r < runs; r++) {
		struct perfmap *a = perfmap_new(), *b = perfmap_new();
		uint32_t x = 12345;
		double t0;

		p10[r] = read_map(a, small, &st);
		write_lines(big, "w", 0, 100000);
		p100[r] = read_map(b, big, &st);
		write_lines(big, "a", 100000, 101000);
		app[r] = read_map(b, big, &st);
		per_entry = (double)st.bytes / (double)st.entries;
		t0 = now_ns();
		for (int i = 0; i < 1000000; i++) {
			x = x * 1103515245 + 12345;
			sink += (uintptr_t)perfmap_lookup(
			    b, 0x10000000 + (uint64_t)(x % 101000) * 0x400 + 5, NULL);
		}
		look[r] = now_ns() - t0;
		perfmap_free(a, &st);
		perfmap_free(b, &st);
		b = perfmap_new();
		shuffle = 1;
		write_lines(big, "w", 0, 100000);
		shuffle = 0;
		shuf[r] = read_map(b, big, &st);
		perfmap_free(b, &st);
	}
	printf("bench_perfmap: %d runs, median (min-max)\n", runs);
	report("parse10k", p10, runs, 1e6, "ms");
	report("parse100k", p100, runs, 1e6, "ms");
	report("shuffled", shuf, runs, 1e6, "ms");
	report("append1k", app, runs, 1e6, "ms");
	report("lookup", look, runs, 1e6, "ns");
	printf("bytes/entry %.1f\n", per_entry);
	unlink(small);
	unlink(big);
	rmdir(dir);
	return sink == 1; /* keeps the lookups */
}
