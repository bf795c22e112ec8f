/*
 * aggregate.h - folds symbolized samples into windows of counts, ready for
 * the store.
 *
 * Data flow: the symbolizer registers dictionary entries (sources,
 * functions, frames, stacks) once per id with agg_add_*(), then hands every
 * sample to agg_add(). Samples are counted per key (source, trace, span,
 * stack, Hz) in an open-addressing table. When a sample at or past the end
 * of the open window arrives, or agg_tick() sees the clock past it, the
 * window closes into a self-contained struct agg_window: its sample rows,
 * one per (bucket, source, trace, span, Hz), hold arrays of stack ids and
 * counts, and it carries a copy of every dictionary entry those rows
 * reference (stacks, their frames, the frames' functions, the sources).
 * The store skips entries it has already sent, so a window dropped on the
 * way (the shipper's queue is bounded) never leaves a later window pointing
 * at entries that were never sent.
 *
 * Windows are aligned on the Unix epoch (window k is [k*W, (k+1)*W)) and W
 * divides a minute, so a window never straddles a minute or a day
 * partition. Every row of a window has bucket_us = window start (see
 * docs/agent.md for why no finer bucket).
 *
 * A sample older than the open window (a late sample from a slow per-CPU
 * buffer, a clock step back) is counted in the open window and in
 * samples_late. When the window already holds max_keys distinct keys, a
 * sample with a new key is dropped and counted in samples_overflow.
 *
 * agg_add() does not allocate once the table has grown to the working set
 * of the first windows; the agg_add() or agg_tick() that closes a window
 * builds it (one allocation). Dictionary entries not referenced by any of
 * the last dict_idle_windows windows are forgotten at a window close once
 * the dictionary holds more than dict_max entries; agg_has_stack() and
 * agg_has_source() tell the caller what to register again.
 *
 * A struct agg is not thread-safe: one thread adds and closes. A closed
 * window belongs to whoever took it (agg_take()) and may move to another
 * thread. All int-returning functions return 0 or -errno unless stated.
 */
#ifndef TRACEPROF_AGENT_AGGREGATE_H
#define TRACEPROF_AGENT_AGGREGATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "traceprof/store.h"

#define AGG_DEFAULT_WINDOW_US (15 * 1000000LL) /* window length when opts.window_us is 0 */
#define AGG_DEFAULT_MAX_KEYS  262144	       /* distinct keys per window when 0 */
#define AGG_DEFAULT_DICT_MAX  1000000	       /* dictionary entries kept before sweeping */
#define AGG_DEFAULT_DICT_IDLE 240	       /* windows an unused entry survives (1 h) */
#define AGG_ROW_MAX_STACKS    65536	       /* stacks per row (the store's limit) */

struct agg_opts {
	int64_t window_us;	/* window length, divides 60 s; 0 = 15 s */
	uint32_t max_keys;	/* distinct keys per window; 0 = AGG_DEFAULT_MAX_KEYS */
	uint32_t dict_max;	/* entries before idle ones are swept; 0 = AGG_DEFAULT_DICT_MAX */
	uint32_t dict_idle;	/* windows without use before an entry may go; 0 = default */
	int64_t close_grace_us; /* agg_tick() closes at window end + grace; 0 = none */
};

/* One sample, as the sampler and the symbolizer know it. */
struct agg_sample {
	int64_t time_us; /* CLOCK_REALTIME µs since the Unix epoch (or any time in its bucket) */
	uint64_t source_id;   /* ids_source() of a registered source */
	uint8_t trace_id[16]; /* all zero: outside any request */
	uint64_t span_id;     /* 0 when untagged */
	uint64_t stack_id;    /* ids_stack() of the frame ids */
	uint16_t hz;	      /* sampling frequency, 1..1000 */
};

/*
 * Off-CPU time of one thread (docs/offcpu.md): us microseconds of kind
 * STORE_OFFCPU_BLOCKED or STORE_OFFCPU_RUNQ, with stack stack_id (0: none,
 * else a registered stack). Summed per (source, trace, span, kind, stack)
 * into the window's offcpu rows, in the same windows and with the same
 * dictionary as samples.
 */
struct agg_offcpu {
	int64_t time_us;      /* when the interval ended, as agg_sample.time_us */
	uint64_t source_id;   /* ids_source() of a registered source */
	uint8_t trace_id[16]; /* all zero: outside any request */
	uint64_t span_id;     /* 0 when untagged */
	uint64_t stack_id;    /* ids_stack() of the frame ids, or 0 */
	uint8_t kind;	      /* STORE_OFFCPU_BLOCKED or STORE_OFFCPU_RUNQ */
	uint32_t us;	      /* microseconds, >= 1 */
};

/*
 * GPU work (docs/gpu.md): launches kernels launched from stack stack_id
 * (its leaf frame the kernel, a registered stack) that ran gpu_ns on the
 * GPU. Summed per (source, trace, span, stack) into the window's gpu rows.
 */
struct agg_gpu {
	int64_t time_us;      /* when the kernels were joined to their launch */
	uint64_t source_id;   /* ids_source() of a registered source */
	uint8_t trace_id[16]; /* all zero: outside any request */
	uint64_t span_id;     /* 0 when untagged */
	uint64_t stack_id;    /* ids_stack() of the frame ids, not 0 */
	uint32_t launches;    /* >= 1 */
	uint64_t gpu_ns;      /* <= INT64_MAX */
};

/* Dictionary entries as a window carries them; strings point into the window. */
struct agg_function {
	uint64_t id;	    /* ids_function() */
	const char *name;   /* function name */
	const char *module; /* module path or "" */
	int kind;	    /* store_add_function() kind */
};

struct agg_frame {
	uint64_t id;	      /* ids_frame() */
	uint64_t function_id; /* its function */
	const char *build_id; /* module build id or "" */
	const char *file;     /* source file or NULL */
	int line;	      /* line, <= 0 unknown */
	uint64_t address;     /* address, 0 unknown */
};

struct agg_stack {
	uint64_t id;		   /* ids_stack() */
	uint32_t n;		   /* frames, root first */
	const uint64_t *frame_ids; /* n frame ids */
};

struct agg_source {
	uint64_t id;		 /* ids_source() */
	struct store_source src; /* strings point into the window */
};

struct agg_route {
	uint64_t id;	    /* ids_route() */
	const char *method; /* HTTP method or "" */
	const char *route;  /* route template or path, or "" */
};

/*
 * A closed window. One allocation holds the struct and everything it points
 * to; whoever holds it frees it with agg_window_free(). The OTLP receiver
 * builds the same struct for a batch of request rows (nrows 0, requests
 * and the sources and routes they reference), so one queue carries both.
 */
struct agg_window {
	uint64_t seq;			 /* windows closed before this one by its aggregator */
	int64_t start_us;		 /* window start = bucket of every row */
	int64_t window_us;		 /* window length */
	size_t nrows;			 /* sample rows */
	struct store_sample_row *rows;	 /* sorted by source, trace, span, hz; stacks by id */
	uint64_t nsamples;		 /* sum of counts over all rows */
	size_t noffcpu;			 /* off-CPU rows */
	struct store_offcpu_row *offcpu; /* sorted by source, trace, span, kind; stacks by id */
	uint64_t offcpu_us;		 /* sum of their durations */
	size_t ngpu;			 /* GPU rows */
	struct store_gpu_row *gpu;	 /* sorted by source, trace, span; stacks by id */
	uint64_t gpu_launches;		 /* sum of their launches */
	size_t nsources;		 /* sources referenced by the rows */
	struct agg_source *sources;	 /* them */
	size_t nfunctions;		 /* functions of the frames */
	struct agg_function *functions;	 /* them */
	size_t nframes;			 /* frames of the stacks */
	struct agg_frame *frames;	 /* them */
	size_t nstacks;			 /* stacks referenced by the rows */
	struct agg_stack *stacks;	 /* them */
	size_t nroutes;			 /* routes referenced by the requests */
	struct agg_route *routes;	 /* them */
	size_t nrequests;		 /* request rows (OTLP batches; 0 for sample windows) */
	struct store_request *requests;	 /* them */
	const char *trigger_id;		 /* set: the rows are raised samples of this trigger's
					    claimed requests (traceprof.trigger_samples) */
	uint64_t missing_entries;	 /* ids referenced but not registered (left out) */
	uint64_t samples_overflow;	 /* samples this window dropped at max_keys */
	size_t bytes;			 /* memory owned, for queue accounting */
	uint64_t spool_id;		 /* its file in the spool (spool.h); 0: not spooled */
	bool spool_replayed;		 /* read back from the spool at start (a previous run's) */
	struct agg_window *next;	 /* link for the current holder's list */
};

struct agg_stats {
	uint64_t samples;	   /* samples counted into windows */
	uint64_t samples_late;	   /* of those, older than their window */
	uint64_t samples_overflow; /* dropped: window already had max_keys keys */
	uint64_t samples_invalid;  /* refused: hz 0 or > 1000, span without trace, source 0 */
	uint64_t windows;	   /* windows closed */
	uint64_t windows_nomem;	   /* windows lost because building them failed */
	uint64_t table_slots;	   /* current hash table size */
	uint64_t dict_entries;	   /* dictionary entries held */
	uint64_t dict_evicted;	   /* entries swept as idle */
	uint64_t missing_entries;  /* referenced ids that were not registered */
	uint64_t names_sanitized;  /* names stored with unsafe characters replaced by '?' */
	uint64_t trigger_windows;  /* windows of raised samples built (agg_trigger_window) */
	uint64_t offcpu;	   /* off-CPU intervals counted into windows */
	uint64_t offcpu_invalid;   /* refused: kind, us 0, span without trace, source 0 */
	uint64_t offcpu_overflow;  /* dropped: window already had max_keys keys */
	uint64_t gpu_launches;	   /* GPU launches counted into windows */
	uint64_t gpu_ns;	   /* their GPU time */
	uint64_t gpu_invalid;	   /* refused: stack 0, launches 0, span without trace, source 0 */
	uint64_t gpu_overflow;	   /* dropped: window already had max_keys keys */
};

/* Returns NULL with errno EINVAL (bad opts) or ENOMEM. Free with agg_free(). */
struct agg *agg_new(const struct agg_opts *opts);
/* Frees the aggregator, its open window and closed windows not taken. NULL is a no-op. */
void agg_free(struct agg *a);

/*
 * Dictionary. Strings are copied. Registering an id again is a no-op
 * returning 0 (the first registration wins). -EINVAL for id 0, an empty
 * service or function name, 0 or more than 512 frames; -ENOMEM.
 */
int agg_add_source(struct agg *a, uint64_t id, const struct store_source *src);
int agg_add_function(struct agg *a, uint64_t id, const char *name, const char *module, int kind);
int agg_add_frame(struct agg *a, uint64_t id, uint64_t function_id, const char *build_id,
		  const char *file, int line, uint64_t address);
int agg_add_stack(struct agg *a, uint64_t id, const uint64_t *frame_ids, size_t n);
/* Whether the id is registered (false after an idle entry was swept). */
bool agg_has_stack(const struct agg *a, uint64_t id);
/*
 * Dictionary entries forgotten so far: while it stays the same, every
 * stack the caller registered is still known (no agg_has_stack() needed).
 */
uint64_t agg_dict_evictions(const struct agg *a);
bool agg_has_source(const struct agg *a, uint64_t id);
/*
 * The frame ids (root first) of a registered stack and their count, or
 * NULL when it is not registered; valid until the next agg_add_* or close.
 */
const uint64_t *agg_stack_frames(const struct agg *a, uint64_t id, uint32_t *n);
/* The service name of a registered source, or NULL; valid until the next agg_add or agg_take. */
const char *agg_source_service(const struct agg *a, uint64_t id);

/*
 * Counts one sample. Returns 0, 1 when the sample closed the open window
 * (take it with agg_take()), -EINVAL for a sample the store would refuse
 * (counted), -ENOMEM when the closed window could not be built (its data is
 * lost and counted; the sample itself is counted).
 */
int agg_add(struct agg *a, const struct agg_sample *s);
/*
 * Adds one off-CPU interval; returns as agg_add (invalid ones counted in
 * offcpu_invalid, keys over max_keys in offcpu_overflow). A key's sum
 * saturates at INT32_MAX µs, the largest the store keeps (35 minutes in
 * one window: over a hundred threads of one span blocked in one stack).
 */
int agg_add_offcpu(struct agg *a, const struct agg_offcpu *o);
/*
 * Adds GPU launches; returns as agg_add (invalid ones counted in
 * gpu_invalid, keys over max_keys in gpu_overflow). A key's launches
 * saturate at INT32_MAX, its ns at INT64_MAX.
 */
int agg_add_gpu(struct agg *a, const struct agg_gpu *g);
/* Closes the open window when now_us >= its end + close_grace_us. Returns 1 if closed. */
int agg_tick(struct agg *a, int64_t now_us);
/* When agg_tick() will close the open window (end + grace), INT64_MAX when none is open. */
int64_t agg_next_close_us(const struct agg *a);
/* Closes the open window now, whatever the time (shutdown). Returns 1 if closed. */
int agg_close(struct agg *a);
/* The oldest closed window, or NULL (errno 0) when none; the caller frees it. */
struct agg_window *agg_take(struct agg *a);
void agg_get_stats(const struct agg *a, struct agg_stats *out);

/*
 * A window of raised samples kept for a trigger (docs/triggers.md): the n
 * rows (any buckets; the hold gives one bucket per trace) with the
 * dictionary entries their stacks and sources need, and w->trigger_id set,
 * so the shipper writes them to trigger_samples. Built at once, apart from
 * the open window; the caller submits it. Returns NULL with errno EINVAL
 * (no rows, a bad trigger id) or ENOMEM.
 */
struct agg_window *agg_trigger_window(struct agg *a, const char *trigger_id,
				      const struct store_sample_row *rows, size_t n);

/* Frees a window. NULL is a no-op. */
void agg_window_free(struct agg_window *w);

#endif
