/*
 * stats.h - the agent's stats file (setting stats-file): key=value lines
 * from every module's counters, replaced atomically (a reader sees the
 * previous file or the new one, whole); written at exit and on SIGUSR1.
 * The keys are an interface (tests and docs/agent.md read them).
 */
#ifndef TRACEPROF_AGENT_STATS_H
#define TRACEPROF_AGENT_STATS_H

#include <stdint.h>

struct agg;
struct endpoints;
struct proctable;
struct raise;
struct sampler;
struct shipper;
struct spool;
struct spool_previous;
struct symbolizer;
struct unwind;
struct obi_map_stats;
struct zc_requests_stats;

/* The sample path's counters (agent.c counts them; the file shows them). */
struct agent_counts {
	uint64_t samples;	 /* samples received */
	uint64_t samples_self;	 /* of the agent itself, skipped */
	uint64_t tagged;	 /* with a valid thread context */
	uint64_t invalid_ctx;	 /* context record present but not valid */
	uint64_t ctx_faults;	 /* context unreadable */
	uint64_t stack_hits;	 /* raw stack cache hits */
	uint64_t stack_misses;	 /* symbolized stacks */
	uint64_t agg_refused;	 /* samples the aggregator refused */
	uint64_t offcpu;	 /* off-CPU records received (docs/offcpu.md) */
	uint64_t offcpu_us;	 /* their time, µs */
	uint64_t offcpu_refused; /* of those, refused by the aggregator */
	uint64_t sym_renewals;	 /* symbolizers replaced to bound interned names */
	uint64_t loop_passes;	 /* main loop passes (its wake-ups) */
	uint64_t py_stacks;	 /* stacks symbolized with Python frames (docs/python.md) */
	uint64_t
	    py_eval_mismatch; /* of those, evaluation-loop frames and chunks differ in number */
	uint64_t py_unknown;  /* Python frames whose code object could not be read */
	/* the main thread's CPU time, where it goes (ns; CLOCK_THREAD_CPUTIME_ID) */
	uint64_t cpu_symbolize_ns; /* symbolizing stacks first seen */
	uint64_t cpu_poll_ns;	   /* reading the ring (samples, symbolizing included) */
	uint64_t cpu_window_ns;	   /* closing windows and handing them to the shipper */
};

/* Where the file's figures come from (all alive for the call; spool may be NULL). */
struct stats_sources {
	const char *path; /* the stats file; "" writes nothing */
	double elapsed_s; /* since the start */
	struct sampler *sampler;
	struct agg *agg;
	struct shipper *shipper;
	struct symbolizer *sym;
	struct spool *spool;
	const struct spool_previous *spool_prev;
	const struct agent_counts *counts;
	const struct proctable *procs;
	struct unwind *unwind; /* NULL: no CFI unwinding */
	struct raise *raise;
	struct endpoints *ep;
	const struct obi_map_stats *obi;    /* OBI's trace map (obi_map.h) */
	const struct zc_requests_stats *zc; /* requests from system calls (zc_requests.h) */
	const struct pycache *pyc;	    /* code objects of Python frames (pyproc.h) */
	const struct gpu *gpu;		    /* CUDA launches (gpu.h), or NULL */
};

/* Writes the file (path.tmp, then renamed over path); a failure is logged. */
void stats_write(const struct stats_sources *s);

#endif
