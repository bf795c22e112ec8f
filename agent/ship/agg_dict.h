/*
 * agg_dict.h - the aggregator's dictionary (internal to agent/ship/aggregate.c):
 * sources, functions, frames and stacks registered once per id, and the
 * closure of the entries a window's rows reference.
 *
 * Four open-addressing maps (id -> entry; one malloc per entry holding its
 * strings; id 0 marks an empty slot), rebuilt to grow and to sweep idle
 * entries. A window close resets the closure lists, marks each referenced
 * source and stack (a stack pulls in its frames and their functions, each
 * entry once per window through a per-entry mark), sizes the copy and fills
 * it into the window. Not thread-safe; the aggregator's thread owns it.
 */
#ifndef TRACEPROF_AGENT_AGG_DICT_H
#define TRACEPROF_AGENT_AGG_DICT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "aggregate.h"

/* id -> entry, open addressing; id 0 marks an empty slot. */
struct agg_dict_map {
	uint64_t *keys; /* ids */
	void **vals;	/* entries, owned */
	size_t cap;	/* slots, a power of two */
	size_t n;	/* entries */
};

/* Growable array of entry pointers (a closure list), reused across windows. */
struct agg_dict_list {
	void **p;   /* entries, borrowed from the maps */
	size_t n;   /* in use */
	size_t cap; /* allocated */
};

enum { AGG_DICT_SOURCES, AGG_DICT_FUNCTIONS, AGG_DICT_FRAMES, AGG_DICT_STACKS, AGG_DICT_KINDS };

struct agg_dict {
	struct agg_dict_map map[AGG_DICT_KINDS]; /* entries by kind */
	struct agg_dict_list cl[AGG_DICT_KINDS]; /* the closure of the window being closed */
	uint64_t evicted;			 /* entries swept as idle */
	uint64_t missing;			 /* referenced ids not registered */
	uint64_t sanitized; /* names with characters replaced (tp_utf8_sanitize) */
	uint64_t epoch;	    /* closures collected: marks entries in one */
};

/* Sizes of the closure collected since agg_dict_closure_reset(). */
struct agg_dict_size {
	size_t entries[AGG_DICT_KINDS]; /* entries of each kind */
	size_t frame_ids;		/* frame ids of the stacks */
	size_t chars;			/* string bytes, NULs included */
};

/* A 64-bit finalizer (MurmurHash3's fmix64), shared by the aggregator's tables. */
static inline uint64_t agg_mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	x ^= x >> 33;
	return x;
}

/* Frees every entry; the struct itself belongs to the caller. */
void agg_dict_free(struct agg_dict *d);
/* Registration (see agg_add_source() and friends); seq is the open window's. */
int agg_dict_add_source(struct agg_dict *d, uint64_t seq, uint64_t id,
			const struct store_source *src);
int agg_dict_add_function(struct agg_dict *d, uint64_t seq, uint64_t id, const char *name,
			  const char *module, int kind);
int agg_dict_add_frame(struct agg_dict *d, uint64_t seq, uint64_t id, uint64_t function_id,
		       const char *build_id, const char *file, int line, uint64_t address);
int agg_dict_add_stack(struct agg_dict *d, uint64_t seq, uint64_t id, const uint64_t *frame_ids,
		       size_t n);
bool agg_dict_has(const struct agg_dict *d, int kind, uint64_t id);
/* The service name of a registered source, or NULL; valid until the next sweep. */
const char *agg_dict_source_service(const struct agg_dict *d, uint64_t id);
/* A registered stack's frame ids (root first) and their count, or NULL (*n 0). */
const uint64_t *agg_dict_stack_frames(const struct agg_dict *d, uint64_t id, uint32_t *n);
size_t agg_dict_entries(const struct agg_dict *d);
/* Forgets entries no window referenced since window `oldest`. */
void agg_dict_sweep(struct agg_dict *d, uint64_t oldest);

void agg_dict_closure_reset(struct agg_dict *d);
/* Adds a source, or a stack with its frames and functions, to window seq's closure. Returns missing
 * ids or -ENOMEM. */
int64_t agg_dict_mark_source(struct agg_dict *d, uint64_t seq, uint64_t id);
int64_t agg_dict_mark_stack(struct agg_dict *d, uint64_t seq, uint64_t id);
void agg_dict_closure_size(const struct agg_dict *d, struct agg_dict_size *out);
/* Copies the closure into w (whose arrays are allocated); frame ids go to u64, strings to chars. */
void agg_dict_fill(const struct agg_dict *d, struct agg_window *w, uint64_t *u64, char *chars);

#endif
