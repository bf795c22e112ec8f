/*
 * unwind.h - the unwind tables of the sampled processes, placed where the
 * BPF sampler walks stacks with them (bpf/sampler.h, "CFI unwinding").
 *
 * For each process it is told about, the module reads the executable
 * mappings, asks the table cache (cfi_cache.h) for each mapped file's
 * table, places each table once in the kernel's rows area (shared by every
 * process mapping the file), and writes the process's mapping list. A
 * table that is not built yet leaves the mapping on frame pointers and the
 * process pending: unwind_tick() tries again until the table is there.
 * Tables nobody maps are evicted from the area, least recently used
 * first, when a new one needs room. The vdso's table is built once from
 * the agent's own vdso (the same code in every process).
 *
 * One thread uses a struct unwind. Nothing here runs per sample.
 */
#ifndef TRACEPROF_UNWIND_H
#define TRACEPROF_UNWIND_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "bpf/sampler.h"
#include "cfi_cache.h"

/* Where the tables go: the sampler's maps (sampler_unwind_maps()). */
struct unwind_maps {
	int rows_fd;   /* array row index -> struct tp_unwind_row: the rows area */
	size_t nrows;  /* its rows */
	int tables_fd; /* array slot -> struct tp_unwind_table */
	int procs_fd;  /* hash tgid -> struct tp_unwind_proc */
};

struct unwind_opts {
	struct cfi_cache_opts cache; /* zero: defaults (budget and rows a build makes: the */
	/* area's, at most 16 MiB of builder rows) */
	uint32_t retry_ms;  /* a pending process is tried again after this (50) */
	uint32_t max_tries; /* ... at most this often, until its maps change (50) */
	/* called from the cache's thread when a table was built: the user's loop should run */
	/* unwind_tick soon (e.g. wake its poll); NULL: ticks come every retry_ms anyway */
	void (*wake)(void *arg);
	void *wake_arg;
};

struct unwind_stats {
	uint64_t procs;		/* processes with a mapping list now */
	uint64_t notes;		/* unwind_note_process calls */
	uint64_t maps_placed;	/* mappings written with a table */
	uint64_t maps_pending;	/* mappings written without one: not built yet */
	uint64_t maps_no_table; /* mappings whose file has no usable table (failed build) */
	uint64_t maps_dropped;	/* mappings over TP_UNWIND_MAX_MAPS, left out */
	uint64_t tables_placed; /* tables copied into the area */
	uint64_t tables;	/* tables in the area now */
	uint64_t rows;		/* their rows */
	uint64_t rows_cap;	/* rows of the area */
	uint64_t evictions;	/* tables evicted from the area for room */
	uint64_t no_room;	/* tables not placed: mapped tables fill the area */
	uint64_t too_large;	/* tables larger than the area or TP_UNWIND_MAX_ROWS */
	uint64_t share_refused; /* tables not placed: their process holds half the area already */
	uint64_t rows_narrowed; /* rows whose offsets do not fit the kernel row: frame pointers */
	uint64_t map_errors;	/* kernel map updates that failed */
	uint64_t gave_up;	/* pending processes given up after max_tries */
	uint64_t place_ns;	/* CPU time converting and copying rows */
	uint64_t note_ns;	/* CPU time writing mapping lists (placing included) */
	struct cfi_cache_stats cache;
};

struct unwind;

/* NULL with errno on failure (also when maps has no rows area: ENOTSUP). */
struct unwind *unwind_new(const struct unwind_maps *maps, const struct unwind_opts *opts);
void unwind_free(struct unwind *u);

/*
 * Reads pid's mappings and writes its mapping list (first sight, or its
 * mappings changed). Returns 0, or -errno (-ESRCH: gone).
 */
int unwind_note_process(struct unwind *u, pid_t pid);
/* pid was forked by parent: it maps what parent maps (the kernel copied the list). */
void unwind_inherit(struct unwind *u, pid_t pid, pid_t parent);
/* pid exited or started a new program: its list and references go. */
void unwind_forget_process(struct unwind *u, pid_t pid);
/* Whether some mapping of pid waits for its table (built, not placed yet). */
int unwind_process_pending(struct unwind *u, pid_t pid);
/*
 * Tries the pending processes whose retry time came (now: monotonic µs),
 * and all of them when a table was built since the last tick.
 */
void unwind_tick(struct unwind *u, int64_t now_us);

void unwind_get_stats(struct unwind *u, struct unwind_stats *out);

/*
 * The kernel row of a builder row (exposed for tests): 0, or -1 when the
 * row cannot be followed in the kernel's format (its offsets do not fit):
 * then *out says "frame pointers" and keeps what the walker can use.
 */
int unwind_row_convert(const struct cfi_row *in, struct tp_unwind_row *out);

#endif
