/*
 * gpu.h - CUDA kernel launches per request (docs/gpu.md): the agent's
 * side of libtraceprof-cuda.
 *
 * Data flow: for each process that maps a libtraceprof-cuda file
 * exporting the launch marker, the marker's uprobe is attached (once per
 * file, through the sampler) and the process's record ring is opened
 * (gpu_ring.h). The uprobe's TP_REC_GPU records (the launching thread's
 * request and CPU stack, the correlation id) come through the sampler's
 * ring: gpu_on_launch keeps each in a table of launches. gpu_tick drains
 * every ring (a bounded batch each) and joins each kernel record with its
 * launch on (process, correlation id): the kernel's frame "[gpu] NAME" is
 * put under the launch's stack, and its launch and GPU time are added to
 * the aggregator (agg_add_gpu). One launch may have many kernel records
 * (a graph launch): it stays in the table GPU_MATCHED_KEEP_US after its
 * last one. A kernel record may come before its launch record (two
 * channels): it waits GPU_PENDING_US for it, then is stored with the
 * kernel's frame alone and no request (gpu_records_unmatched). A launch
 * whose record never comes expires after GPU_LAUNCH_EXPIRE_US
 * (gpu_launches_unmatched). The tables are allocated once, at the first
 * GPU process; when full, the oldest entry goes early and is counted.
 *
 * One thread (the agent's main loop) uses it.
 */
#ifndef TRACEPROF_AGENT_GPU_H
#define TRACEPROF_AGENT_GPU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bpf/sampler.h"
#include "gpu_ring.h"

#define GPU_LAUNCH_EXPIRE_US 30000000	/* a launch without any kernel record: gone after 30 s */
#define GPU_MATCHED_KEEP_US  1000000	/* a joined launch waits 1 s for more (a graph's) */
#define GPU_PENDING_US	     2000000	/* a kernel record waits 2 s for its launch record */
#define GPU_MAX_LAUNCHES     (1u << 17) /* launches kept at once */
#define GPU_MAX_PENDING	     (1u << 16) /* kernel records waiting at once */
#define GPU_MAX_PROCS	     256	/* processes with a ring (or waiting for one) */
#define GPU_DRAIN_BATCH	     16384	/* kernel records read from one ring per tick */
#define GPU_DRAIN_CHUNK	     1024	/* ... GPU_DRAIN_CHUNK at a time */
#define GPU_MAX_NS	     (3600ull * 1000000000ull) /* a longer kernel is refused */

struct agg;
struct sampler;
struct symbolizer;

/* Counters (stats file). */
struct gpu_stats {
	uint64_t launches;	     /* launch records read (TP_REC_GPU) */
	uint64_t launches_joined;    /* of those, joined with at least one kernel record */
	uint64_t launches_unmatched; /* expired without a kernel record */
	uint64_t launches_evicted;   /* went before their time, no record yet: table full */
	uint64_t launches_dup;	     /* a second launch record with the same id (the first kept) */
	uint64_t records;	     /* kernel records read from the rings */
	uint64_t records_joined;     /* of those, joined with their launch */
	uint64_t records_unmatched;  /* stored without a launch (no record after the wait) */
	uint64_t records_pending_full; /* dropped: the pending table was full */
	uint64_t records_bad_time;     /* dropped: end before start, or over GPU_MAX_NS */
	uint64_t records_refused;      /* dropped: the aggregator refused them */
	uint64_t records_stored;       /* added to the aggregator (joined + unmatched) */
	uint64_t gpu_ns;	       /* their GPU time */
	uint64_t probe_files;	       /* libtraceprof-cuda files seen (the uprobe tried on each) */
	uint64_t probe_failed;	       /* of those, attach failures (other than no marker) */
	uint64_t procs_full;	       /* processes not followed: GPU_MAX_PROCS reached */
	uint64_t rings_closed;	       /* rings closed (exit, exec, unreadable) */
	uint64_t stack_frames_dropped; /* leaf frames of the CUDA layers removed from stacks */
	/* the producers' counters (struct tp_cuda_ring_hdr), summed over the rings */
	uint64_t prod_launches, prod_records, prod_dropped_full, prod_names_lost,
	    prod_cupti_dropped;
	struct gpu_ring_stats ring;
};

struct gpu;

struct gpu_opts {
	struct sampler *sampler; /* attaches the marker's uprobe (borrowed) */
	struct symbolizer **sym; /* the agent's symbolizer (it may be replaced) */
	struct agg *agg;	 /* the aggregator (borrowed) */
};

/* NULL with errno (ENOMEM). The tables are allocated later, at the first GPU process. */
struct gpu *gpu_new(const struct gpu_opts *o);
void gpu_free(struct gpu *g);

/*
 * Looks at process pid's mappings (first look, exec, a dlopen): the
 * marker's uprobe on each libtraceprof-cuda file, its ring when it has
 * one (or a later look for it while the library is there). Returns
 * whether the process is followed (it maps the library).
 */
bool gpu_note_process(struct gpu *g, int pid, uint64_t source_id);
/* The process ended or started a new program: its ring is drained and closed. */
void gpu_forget_process(struct gpu *g, int pid, int64_t now_us);
/*
 * A TP_REC_GPU record of process pid (len bytes), source source_id, its
 * request (trace all zero, span 0: none), at t_us (CLOCK_REALTIME).
 */
void gpu_on_launch(struct gpu *g, const struct tp_sample *s, size_t len, uint64_t source_id,
		   const uint8_t trace[16], uint64_t span, int64_t t_us);
/*
 * Drains the rings, joins, expires (now_us CLOCK_REALTIME, now_mono_us
 * CLOCK_MONOTONIC). Call every loop pass, after the sampler's ring.
 */
void gpu_tick(struct gpu *g, int64_t now_us, int64_t now_mono_us);
/* Whether a GPU process is followed (the loop then wakes at least every GPU_POLL_MS). */
bool gpu_active(const struct gpu *g);
#define GPU_POLL_MS 50
void gpu_get_stats(const struct gpu *g, struct gpu_stats *out);

#endif
