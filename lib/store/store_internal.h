/*
 * store_internal.h - what store.c (connection, validation, buffering) and
 * store_flush.c (the transaction that writes the buffers) share. Private to
 * lib/; the public contract is include/traceprof/store.h.
 */
#ifndef TRACEPROF_STORE_INTERNAL_H
#define TRACEPROF_STORE_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include <libpq-fe.h>

#include "store_copy.h"
#include "traceprof/store.h"

#define STORE_DEFAULT_MAX_ROWS	   100000
#define STORE_MAX_DICT_ENTRIES	   200000      /* pending dictionary entries, all kinds */
#define STORE_MAX_ROW_BYTES	   (256 << 20) /* encoded sample + request rows */
#define STORE_MAX_DICT_BYTES	   (64 << 20)  /* encoded dictionary entries */
#define STORE_MAX_ROW_STACKS	   65536       /* stacks in one sample or offcpu row */
#define STORE_MAX_FRAMES	   512	       /* frames in one stack (schema CHECK) */
#define STORE_MAX_STRING	   65535       /* bytes in one string */
#define STORE_MAX_HZ		   1000
#define STORE_MAX_STATUS	   999
#define STORE_MAX_TRIGGER_ID	   200 /* bytes in a trigger id (schema CHECK) */
#define STORE_DAY_US		   (86400LL * 1000000)
#define STORE_FUTURE_US		   STORE_DAY_US /* rows may be this far ahead of our clock */
#define STORE_DEFAULT_RETENTION_US (7 * STORE_DAY_US)
#define STORE_DAYS_CACHED	   1024
#define STORE_PARTITION_CHUNK	   366 /* days per create_partitions() call (it allows 400) */
#define STORE_COPY_CHUNK	   (256 << 10)
#define STORE_KEEP_BUFFER	   (16 << 20) /* see keep() in store_flush.c */
#define IDSET_MIN_BITS		   12	      /* the id set starts at 4,096 slots... */
#define IDSET_MAX_BITS		   19	      /* ...and doubles up to 524,288 */

enum dict_kind { DICT_FUNCTION, DICT_FRAME, DICT_STACK, DICT_SOURCE, DICT_ROUTE, DICT_KINDS };

/* Counts and sizes of buffered data; also a snapshot of what one flush sends. */
struct pending {
	size_t sample_rows;		 /* rows in the samples buffer */
	size_t request_rows;		 /* rows in the requests buffer */
	size_t trigger_rows;		 /* rows in the trigger_samples buffer */
	size_t offcpu_rows;		 /* rows in the offcpu buffer */
	size_t gpu_rows;		 /* rows in the gpu buffer */
	uint64_t gpu_launches;		 /* sum of launches of those gpu rows */
	uint64_t samples;		 /* sum of counts of those sample rows */
	uint64_t trigger_samples;	 /* sum of counts of those trigger rows */
	uint64_t offcpu_us;		 /* sum of durations of those offcpu rows */
	size_t dict_entries[DICT_KINDS]; /* entries per dictionary buffer */
	size_t sample_bytes;		 /* snapshot only: samples buffer length */
	size_t request_bytes;		 /* snapshot only: requests buffer length */
	size_t trigger_bytes;		 /* snapshot only: trigger_samples buffer length */
	size_t offcpu_bytes;		 /* snapshot only: offcpu buffer length */
	size_t gpu_bytes;		 /* snapshot only: gpu buffer length */
	size_t dict_bytes[DICT_KINDS];	 /* snapshot only: dictionary buffer lengths */
};

/*
 * (kind, id) pairs sent or pending; linear probing, kind 0 marks a free
 * slot. It grows with the dictionary instead of taking its largest size
 * up front: each new id lands on a random slot, so a table of the largest
 * size took a page fault per new id until all its 4.5 MiB were touched.
 */
struct idset {
	uint64_t *ids;	/* slot keys, 1 << bits of them */
	uint8_t *kinds; /* slot kind + 1, 0 = free */
	size_t count;	/* used slots */
	unsigned bits;	/* log2 of the slots */
};

struct store {
	PGconn *conn;			 /* NULL after a failed reconnect */
	char *conninfo;			 /* owned copy; may hold a password, never printed */
	struct store_opts opts;		 /* app_name points to app_name below */
	char app_name[64];		 /* application_name we set */
	enum copy_format format;	 /* binary unless opts.text_copy */
	char describe[512];		 /* host, port, dbname, user: context for messages */
	char last_error[1024];		 /* store_last_error() */
	int64_t retention_us;		 /* rows older than now - this are refused */
	struct copybuf samples;		 /* encoded sample rows */
	struct copybuf requests;	 /* encoded request rows */
	struct copybuf trigger_samples;	 /* encoded trigger_samples rows */
	struct copybuf offcpu;		 /* encoded offcpu rows */
	struct copybuf gpu;		 /* encoded gpu rows */
	struct copybuf dict[DICT_KINDS]; /* encoded dictionary entries */
	struct pending cur;		 /* what is buffered now */
	size_t dict_total;		 /* sum of cur.dict_entries */
	int64_t min_us;			 /* earliest bucket/start buffered (INT64_MAX: none) */
	int64_t max_us;			 /* latest one (INT64_MIN: none) */
	struct idset seen;		 /* dictionary ids sent or pending */
	int32_t days[STORE_DAYS_CACHED]; /* UTC days (since 1970) known to be partitioned */
	size_t ndays;			 /* entries in days */
	bool commit_unknown;		 /* lost the connection during COMMIT of inflight */
	char inflight_xid[32];		 /* that transaction's id */
	struct pending inflight;	 /* what that transaction carried */
	uint64_t inflight_bytes;	 /* its COPY bytes */
	uint64_t flush_bytes;		 /* COPY bytes of the flush in progress */
	bool missing_partition;		 /* the last COPY failed for want of a partition */
	struct store_stats stats;	 /* store_get_stats() */
};

/* Sets store_last_error(): printf-style, folded to one line, password removed. */
void store_set_error(struct store *st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/*
 * Records the failure of one step of a flush (res may be NULL) in last_error.
 * Returns -ECONNRESET when the connection is gone, else -EIO.
 */
int store_step_failed(struct store *st, const char *what, PGresult *res);

#endif
