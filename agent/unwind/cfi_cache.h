/*
 * cfi_cache.h - a cache of CFI unwind tables, one per distinct file.
 *
 * A file is named by its key: its GNU build id when it has one, else
 * (device, inode, size, mtime). Every process mapping the same file shares
 * one table, reference-counted: cfi_cache_get() takes a reference,
 * cfi_cache_put() gives it back.
 *
 * cfi_cache_get() never builds on the caller's thread. It returns the
 * table when it is ready; otherwise it queues a build for the cache's one
 * worker thread (a bounded queue: a full one is counted) and returns NULL,
 * "not ready", and the caller goes on with the frames it could find. A
 * build that fails leaves a negative entry, retried only after retry_ms
 * (at most max_negative of them: the oldest is forgotten). All tables
 * together stay within a byte budget: least recently used tables nobody
 * holds are evicted; a table larger than the budget is refused. One mutex guards everything; it is
 * never held while a table is built. See agent/unwind/README.md.
 */
#ifndef TRACEPROF_CFI_CACHE_H
#define TRACEPROF_CFI_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "cfi.h"

#define CFI_CACHE_BUILD_ID_MAX 32

/*
 * Names one file. Fill it with cfi_cache_key_build_id() or
 * cfi_cache_key_file() (they zero what they do not set, so two keys of
 * the same file compare equal byte for byte).
 */
struct cfi_cache_key {
	uint8_t build_id[CFI_CACHE_BUILD_ID_MAX];
	uint32_t build_id_len; /* 0: the file fields below name the file */
	uint32_t pad;
	uint64_t dev;
	uint64_t ino;
	uint64_t size;
	int64_t mtime_ns;
};

/* Returns -1 when len is 0 or over CFI_CACHE_BUILD_ID_MAX. */
int cfi_cache_key_build_id(struct cfi_cache_key *k, const uint8_t *id, size_t len);
void cfi_cache_key_file(struct cfi_cache_key *k, uint64_t dev, uint64_t ino, uint64_t size,
			int64_t mtime_ns);

/* Zero fields take the defaults. */
struct cfi_cache_opts {
	size_t budget_bytes; /* all tables' rows together (CFI_CACHE_DEFAULT_BUDGET) */
	size_t queue_len;    /* builds waiting (CFI_CACHE_DEFAULT_QUEUE) */
	uint32_t retry_ms;   /* a failed file is retried after this (CFI_CACHE_DEFAULT_RETRY_MS) */
	size_t max_negative; /* failed files remembered (CFI_CACHE_DEFAULT_MAX_NEGATIVE) */
	struct cfi_opts build; /* bounds of each build */
	/* called by the worker after each build (done or failed), without the lock held */
	void (*on_built)(void *arg);
	void *on_built_arg;
};

#define CFI_CACHE_DEFAULT_BUDGET       (32u << 20)
#define CFI_CACHE_DEFAULT_QUEUE	       64u
#define CFI_CACHE_DEFAULT_RETRY_MS     60000u
#define CFI_CACHE_DEFAULT_MAX_NEGATIVE 1024u

struct cfi_cache_stats {
	uint64_t hits;		 /* gets that returned a table */
	uint64_t misses;	 /* gets that returned NULL (not ready, failed, queue full) */
	uint64_t builds;	 /* tables built */
	uint64_t build_failures; /* builds that failed (negative entries) */
	uint64_t evictions;	 /* tables evicted for the budget */
	uint64_t refused;	 /* tables larger than the budget (negative entries) */
	uint64_t no_room;	 /* built tables dropped: held tables fill the budget */
	uint64_t queue_full;	 /* builds not queued: the queue was full */
	uint64_t bytes;		 /* bytes of the tables in the cache */
	uint64_t tables;	 /* tables in the cache */
	uint64_t released;	 /* tables dropped at once by cfi_cache_release */
	uint64_t rejected;	 /* tables turned negative by cfi_cache_reject */
};

struct cfi_cache;

/* Starts the worker thread. NULL with errno on failure. */
struct cfi_cache *cfi_cache_new(const struct cfi_cache_opts *opts);

/*
 * The table of key, with a reference, or NULL when it is not ready (a
 * build is queued, running, failed recently or the queue is full). path
 * (e.g. /proc/PID/map_files/START-END) is read by the worker later, so it
 * must stay valid for a while; the cache copies it.
 */
const struct cfi_table *cfi_cache_get(struct cfi_cache *c, const struct cfi_cache_key *key,
				      const char *path);

/* The same with an open file: the cache keeps a duplicate of fd. */
const struct cfi_table *cfi_cache_get_fd(struct cfi_cache *c, const struct cfi_cache_key *key,
					 int fd);

/* Gives back a reference cfi_cache_get() returned. */
void cfi_cache_put(struct cfi_cache *c, const struct cfi_table *t);

/*
 * The same, and the table is dropped at once when nobody else holds it
 * (its user copied it elsewhere): a later get builds it again.
 */
void cfi_cache_release(struct cfi_cache *c, const struct cfi_table *t);

/*
 * Gives back t and turns it into a negative entry (its user cannot use
 * it: too large for where it goes, no room there): the next gets of its
 * key return NULL, and cfi_cache_failed() says so, for retry_ms.
 * Counted in rejected. t must not be held by another reference.
 */
void cfi_cache_reject(struct cfi_cache *c, const struct cfi_table *t);

/* Whether key's last build failed and is not to be retried yet (a negative entry). */
int cfi_cache_failed(struct cfi_cache *c, const struct cfi_cache_key *key);

void cfi_cache_stats(struct cfi_cache *c, struct cfi_cache_stats *out);

/*
 * Stops the worker (after the build it is running, if any), drops the
 * queued builds and frees every table. Every reference must be given back
 * first.
 */
void cfi_cache_destroy(struct cfi_cache *c);

#endif
