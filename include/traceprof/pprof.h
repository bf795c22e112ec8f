/*
 * pprof.h - a stack set as a pprof profile (gzip-compressed profile.proto).
 *
 * The `traceprof` command's pprof output: what go tool pprof, Pyroscope,
 * Parca and speedscope open. Two sample types, samples/count and
 * cpu/nanoseconds (the default), and a third, off_cpu/nanoseconds, when a
 * row of cohort A has off-CPU time (offcpu_us: such a sample has cpu 0, a
 * CPU sample off_cpu 0), and gpu/nanoseconds when one has GPU time
 * (gpu_ns: the kernels its stack launched; after off_cpu when both are
 * there, every other value 0); one Location per frame of the set that a
 * stack uses, one Function per distinct (display name, bare name, file),
 * one Mapping per (module, build id); each row becomes one Sample, leaf
 * first, labelled trace_id, span_id and service. docs/pprof.md describes
 * the file.
 *
 * The same set and options always give the same bytes (gzip mtime 0).
 */
#ifndef TRACEPROF_PPROF_H
#define TRACEPROF_PPROF_H

#include <stdio.h>
#include <stddef.h>

#include "traceprof/stackset.h"

/* Longest stack a row may have; longer ones are refused as malformed (the
 * agent records at most 127 user and 127 kernel frames). */
#define TP_PPROF_MAX_DEPTH 4096

struct tp_pprof_opts {
	int cohort_b;	     /* nonzero: write cohort B of a differential set
				(b_samples, b_cpu_us) instead of A */
	const char *comment; /* one more profile comment line (e.g. what was
				asked for), NULL for none; borrowed */
};

/*
 * Writes `set` to `out` as a gzip-compressed pprof profile. opts may be
 * NULL (cohort A, no extra comment). Rows whose two values are both 0 (in
 * the cohort written) are left out. Borrows everything; writes nothing
 * but `out`.
 *
 * Returns 0, or -EINVAL when the set is malformed (a frame index out of
 * range, an empty or too deep stack, a NULL name, a negative or too large
 * value: nothing is written), -ENOMEM, or -EIO when `out` fails (part of
 * the profile may have been written). On failure err (errlen bytes, may be
 * NULL) holds a one-line message naming the row or frame at fault.
 */
int tp_pprof_write(const struct tp_stackset *set, const struct tp_pprof_opts *opts, FILE *out,
		   char *err, size_t errlen);

#endif
