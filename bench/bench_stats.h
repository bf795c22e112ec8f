/*
 * bench_stats.h - the order statistics the benchmarks report: an ascending
 * qsort() comparison of doubles and the median of an array (sorted in
 * place). Header only; each benchmark is one C file.
 */
#ifndef TRACEPROF_BENCH_STATS_H
#define TRACEPROF_BENCH_STATS_H

#include <stdlib.h>

/* qsort() comparison: ascending doubles. */
static inline int bench_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* The median of v[0..n-1] (n >= 1); sorts v. */
static inline double bench_median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), bench_cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

#endif
