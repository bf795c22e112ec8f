/*
 * bench_sdk - cost of publishing a request's thread context: ns per
 * tp_sdk_attach + tp_sdk_detach pair, through the shared library (the
 * TLSDESC access an application linking libtraceprof-sdk.so gets).
 *
 * Each run times --pairs pairs (default 10M) on one thread with a span id
 * that changes every pair; --runs runs (default 7); prints the median with
 * the fastest and slowest run, for the fixed part alone and with two
 * attributes (a route and a method, 16 bytes of attrs-data). Reports only.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "traceprof/sdk.h"

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* ns per pair of one run. */
static double run(long pairs, const struct tp_sdk_attr *attrs, size_t n)
{
	uint8_t tid[16], sid[8];
	double t0;

	tp_sdk_new_trace_id(tid);
	tp_sdk_new_span_id(sid);
	t0 = now_ns();
	for (long i = 0; i < pairs; i++) {
		sid[7] = (uint8_t)(i | 1);
		tp_sdk_attach(tid, sid, 1, attrs, n);
		tp_sdk_detach();
	}
	return (now_ns() - t0) / (double)pairs;
}

static void report(const char *what, int runs, long pairs, const struct tp_sdk_attr *attrs,
		   size_t n)
{
	double *ns = calloc((size_t)runs, sizeof(*ns));

	if (!ns)
		exit(1);
	run(pairs / 10, attrs, n); /* warm up */
	for (int r = 0; r < runs; r++)
		ns[r] = run(pairs, attrs, n);
	qsort(ns, (size_t)runs, sizeof(*ns), cmp_double);
	printf("| %s | %.1f | %.1f–%.1f |\n", what, ns[runs / 2], ns[0], ns[runs - 1]);
	free(ns);
}

int main(int argc, char **argv)
{
	int runs = 7;
	long pairs = 10000000;
	struct tp_sdk_attr attrs[2];

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--runs") && i + 1 < argc) {
			runs = atoi(argv[++i]);
		} else if (!strcmp(argv[i], "--pairs") && i + 1 < argc) {
			pairs = atol(argv[++i]);
		} else {
			fprintf(stderr, "usage: bench_sdk [--runs N] [--pairs N]\n");
			return 2;
		}
	}
	if (runs < 1 || pairs < 1) {
		fprintf(stderr, "bench_sdk: --runs and --pairs must be positive\n");
		return 2;
	}
	attrs[0] =
	    (struct tp_sdk_attr){(uint32_t)tp_sdk_key_register("http.route"), 10, "/cart/{id}"};
	attrs[1] = (struct tp_sdk_attr){(uint32_t)tp_sdk_key_register("http.method"), 4, "POST"};
	printf("%d runs of %ld attach+detach pairs\n\n", runs, pairs);
	printf("| record | ns/pair (median) | fastest–slowest run |\n|---|---:|---:|\n");
	report("fixed part (ids, flags)", runs, pairs, NULL, 0);
	report("+ 2 attributes (16 bytes)", runs, pairs, attrs, 2);
	return 0;
}
