/*
 * stackset.h - a set of weighted stacks read from the store.
 *
 * This is the one in-memory shape every output of the `traceprof` command
 * renders: the text tree, folded stacks, JSON, SVG flame graphs and pprof.
 * The command reads it from PostgreSQL (one trace, one service over a time
 * range, or two cohorts); the renderers only read it, so they are tested on
 * hand-built sets without a database.
 *
 * Plain data: every pointer is owned by whoever built the set (the reader
 * keeps its strings in one arena and frees it with the set).
 */
#ifndef TRACEPROF_STACKSET_H
#define TRACEPROF_STACKSET_H

#include <stddef.h>
#include <stdint.h>

/* Frame kinds, as traceprof.functions.kind. */
enum tp_frame_kind {
	TP_FRAME_USER = 0,
	TP_FRAME_KERNEL = 1,
	TP_FRAME_UNSYMBOLIZED = 2, /* function is "module+0xoffset" */
};

/* One distinct frame: a function at one place of one build. */
struct tp_frame_info {
	const char *function; /* display name, never NULL: the function name,
				 or "name [module]" where two functions of one
				 service share a name (as the SQL API shows) */
	const char *name;     /* the bare function name, never NULL */
	const char *module;   /* module (executable or library) name, "" if unknown */
	const char *build_id; /* GNU build id in hex, "" if unknown */
	const char *file;     /* source file, NULL if unknown */
	int32_t line;	      /* source line, 0 if unknown */
	uint64_t address;     /* address in the module, 0 if unknown */
	uint8_t kind;	      /* enum tp_frame_kind */
};

/* One row: a stack and its weight in cohort A (and B for comparisons). */
struct tp_stack_row {
	const uint32_t *frames; /* indices into tp_stackset.frames, root first */
	uint32_t depth;		/* number of frames, >= 1 */
	int64_t samples;	/* samples of cohort A (or of the only profile) */
	int64_t cpu_us;		/* CPU microseconds of those samples */
	int64_t b_samples;	/* cohort B; 0 unless the set is differential */
	int64_t b_cpu_us;
	const char *service;  /* never NULL */
	const char *trace_id; /* 32 lowercase hex digits, NULL when the row
				 aggregates several requests or none */
	const char *span_id;  /* 16 lowercase hex digits, or NULL */
	int64_t offcpu_us;    /* off-CPU microseconds (blocked or waiting for a
				 CPU); an off-CPU row has samples and cpu_us 0,
				 a CPU row offcpu_us 0 */
	int64_t gpu_ns;	      /* GPU nanoseconds of the kernels this stack
				 launched (its leaf is the "[gpu] kernel"
				 frame); a GPU row has every other weight 0,
				 other rows gpu_ns 0 */
};

struct tp_stackset {
	struct tp_frame_info *frames;
	size_t nframes;
	struct tp_stack_row *rows;
	size_t nrows;
	int differential;   /* nonzero: b_* are a second cohort */
	const char *a_name; /* cohort names, e.g. "duration > 1s" */
	const char *b_name;
	int64_t time_from_ns;  /* the range the samples come from, Unix ns; */
	int64_t time_until_ns; /* 0 when unknown */
	int64_t period_ns;     /* nominal sampling period, e.g. 1e9 / 19 */
};

#endif
