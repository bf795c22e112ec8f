/*
 * gpu_internal.h - what gpu.c (processes, rings, the tick) and
 * gpu_join.c (launches, pending records, stacks) share.
 */
#ifndef TRACEPROF_AGENT_GPU_INTERNAL_H
#define TRACEPROF_AGENT_GPU_INTERNAL_H

#include "gpu.h"

#define GPU_STACK_CACHE 16384 /* raw launch stacks -> stack id (power of two) */
#define GPU_FULL_CACHE	16384 /* (launch stack, kernel frame) -> stack id (power of two) */
#define GPU_MAX_FRAMES	512   /* the store's limit on frames per stack */
/* A launch's process without an entry (its library not seen yet): looked at again so often, */
#define GPU_MISS_RETRY_US 100000
/* ... for so long after its last launch. */
#define GPU_MISS_KEEP_US 10000000

/* A launch record kept for its kernel records. */
struct gpu_launch {
	uint64_t key;	      /* pid << 32 | correlation id */
	uint64_t stack_id;    /* its CPU stack (CUDA layers removed); 0: none */
	uint64_t source_id;   /* its process's source */
	uint64_t span_id;     /* its request (0: none) */
	uint8_t trace_id[16]; /* all zero: none */
	int64_t t_us;	      /* when it was read (monotonic) */
	int64_t last_us;      /* when a kernel record last joined it; 0: none yet */
	uint32_t joined;      /* kernel records joined */
	uint32_t live;	      /* 1: in the index (0: removed, its FIFO slot waits) */
};

/* A kernel record waiting for its launch record. */
struct gpu_pending {
	uint64_t key;	    /* pid << 32 | correlation id */
	uint64_t source_id; /* its process's source (0: not known) */
	uint64_t frame_id;  /* the kernel's frame (registered) */
	uint64_t ns;	    /* its GPU time */
	int64_t t_us;	    /* when it was read (monotonic) */
};

/* A process followed: it maps libtraceprof-cuda. */
struct gpu_proc {
	int pid;	      /* 0: free */
	uint64_t source_id;   /* its source, as the process table knows it */
	struct gpu_ring ring; /* fd -1 while not found (yet) */
	int64_t next_try_us;  /* the next look for its ring (monotonic) */
	int64_t step_us;      /* between looks, doubling */
};

struct stack_ent {
	uint64_t key, id;
};

struct gpu {
	struct gpu_opts o;
	struct gpu_stats st;
	struct gpu_proc procs[GPU_MAX_PROCS];
	int nprocs; /* slots in use (some may be free inside) */
	/* the join's tables, allocated at the first GPU process */
	struct gpu_launch *launches; /* FIFO of GPU_MAX_LAUNCHES */
	uint32_t l_head, l_n;	     /* its oldest entry and entries */
	uint32_t *index;	     /* 2 * GPU_MAX_LAUNCHES slots: FIFO position + 1, 0 free */
	struct gpu_pending *pending; /* FIFO of GPU_MAX_PENDING */
	uint32_t p_n;		     /* entries (from 0: compacted at each retry) */
	struct stack_ent *stacks;    /* GPU_STACK_CACHE raw launch stacks */
	struct stack_ent *full;	     /* GPU_FULL_CACHE full stacks */
	uint64_t evictions;	     /* agg_dict_evictions() the caches are valid for */
	struct gpu_krec *krecs;	     /* GPU_DRAIN_CHUNK records of one read */
	uint64_t frame_ids[GPU_MAX_FRAMES + 1];
	uint64_t closed_prod[5]; /* the producers' counters of the rings closed */
	uint64_t added;		 /* launches added (ever) */
	uint64_t added_seen;	 /* ... when the pending records were last looked up */
	int miss_pid;		 /* a launch's process without an entry, looked at */
	int64_t miss_us;	 /* then (monotonic) */
	int64_t miss_last_us;	 /* its last launch (monotonic) */
	uint64_t miss_source;	 /* its source */
};

/* gpu_join.c */
int gpu_join_init(struct gpu *g);
void gpu_join_free(struct gpu *g);
/* The base stack id of launch record s (0: no frames outside the CUDA layers). */
uint64_t gpu_launch_stack(struct gpu *g, const struct tp_sample *s);
void gpu_add_launch(struct gpu *g, const struct gpu_launch *l);
/* Kernel record k of process pid (source) read now (monotonic µs, realtime µs). */
void gpu_add_record(struct gpu *g, int pid, uint64_t source_id, const struct gpu_krec *k,
		    int64_t now_mono, int64_t now_us);
/* Retries the pending records, expires launches. */
void gpu_join_tick(struct gpu *g, int64_t now_mono, int64_t now_us);

#endif
