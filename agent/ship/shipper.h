/*
 * shipper.h - delivers closed aggregation windows to PostgreSQL from a
 * background thread, surviving database outages without blocking the
 * sampler.
 *
 * Data flow: the aggregating thread hands each struct agg_window to
 * shipper_submit(), which appends it to a queue bounded in bytes and
 * returns at once. The shipper's thread owns a struct store: for the oldest
 * queued window it adds the dictionary entries (the store skips what it has
 * sent) and the sample rows, then flushes; the window leaves the queue
 * only once that flush has committed (rows land exactly once: the store
 * resolves a COMMIT whose reply was lost). One window is in flight at a
 * time; a window larger than the store's buffers goes in several flushes.
 *
 * Back-pressure: when a submitted window would take the queue past
 * max_queue_bytes, the oldest windows that are not in flight are dropped
 * (counted in windows/rows/samples_dropped, one log line per episode of
 * drops); a window that cannot fit even then is itself dropped.
 *
 * Failures: a flush that fails (-ECONNRESET, -EIO, -EAGAIN), a reconnect or
 * the first store_open() that fails (the database is down at start) keeps
 * the data and is retried with exponential backoff (backoff_min_ms doubling
 * to backoff_max_ms) and store_reconnect(); delivery resumes when the
 * database returns. Rows the store refuses as invalid are counted in
 * rows_invalid and never retried.
 *
 * Windows may also carry request rows (the OTLP receiver's batches, see
 * aggregate.h): their routes are added with the other dictionary entries
 * and the requests after the sample rows, with the same guarantees.
 *
 * Spool (opts.spool, spool.h): every window is written to the spool before
 * it is queued (in the submitting thread), its spool file is removed after
 * the COMMIT that completes it or when the queue drops it, and the windows
 * a previous run left there are queued first at start (counted as
 * submitted and in windows_recovered). Before each COMMIT the transaction
 * id goes into the window's commit record; a recovered window with such
 * records resumes after the last transaction that committed
 * (windows_resumed; rows already stored are counted as delivered), so no
 * row is stored twice. A window the spool refuses (full, write error) is
 * queued all the same and counted in the unspooled figures: only a crash
 * loses it. Windows left at shipper_stop() stay in the spool.
 *
 * Accounting: once stopped, for rows, samples and requests, submitted =
 * delivered + dropped + invalid + undelivered; for windows, submitted = delivered +
 * dropped + undelivered (a window leaves the queue delivered when its last
 * flush committed, even if the store refused some of its rows).
 *
 * Threads: shipper_submit() may be called from any thread (the aggregating
 * thread and the OTLP receivers); it takes a mutex the shipper's
 * thread holds only to move windows and counters, never across I/O.
 * shipper_get_stats() is safe from any thread. All int-returning functions
 * return 0 or -errno.
 */
#ifndef TRACEPROF_AGENT_SHIPPER_H
#define TRACEPROF_AGENT_SHIPPER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "aggregate.h"
#include "spool.h"
#include "traceprof/store.h"

#define SHIPPER_DEFAULT_QUEUE_BYTES (64u << 20) /* queue bound when max_queue_bytes is 0 */
#define SHIPPER_DEFAULT_BACKOFF_MIN 100		/* ms, first retry delay */
#define SHIPPER_DEFAULT_BACKOFF_MAX 5000	/* ms, retry delay cap */

struct shipper_opts {
	const char *conninfo;	 /* libpq conninfo; NULL = PG* environment; copied */
	size_t max_queue_bytes;	 /* bound on queued window bytes; 0 = 64 MiB */
	int backoff_min_ms;	 /* first retry delay; 0 = 100 ms */
	int backoff_max_ms;	 /* retry delay cap; 0 = 5 s */
	struct store_opts store; /* options for store_open() (app_name is copied) */
	struct spool *spool;	 /* windows on disk until committed; NULL: none (borrowed) */
	/* tests: called after the COMMIT that completes a spooled window, before its file goes */
	void (*after_commit)(void *ctx, const struct agg_window *w);
	void *hook_ctx; /* passed to after_commit */
};

struct shipper_stats {
	uint64_t windows_submitted;  /* windows handed to shipper_submit() */
	uint64_t rows_submitted;     /* their sample rows */
	uint64_t samples_submitted;  /* their samples */
	uint64_t windows_delivered;  /* windows whose last flush committed */
	uint64_t rows_delivered;     /* rows committed */
	uint64_t samples_delivered;  /* samples in committed rows */
	uint64_t windows_dropped;    /* windows dropped because the queue was full */
	uint64_t rows_dropped;	     /* their rows */
	uint64_t samples_dropped;    /* their samples */
	uint64_t rows_invalid;	     /* rows the store refused as invalid */
	uint64_t samples_invalid;    /* their samples */
	uint64_t dict_invalid;	     /* dictionary entries the store refused */
	uint64_t requests_submitted; /* request rows in submitted windows (OTLP batches) */
	uint64_t requests_delivered; /* of those, committed */
	uint64_t requests_dropped;   /* dropped with their window (queue full) */
	uint64_t windows_refused;    /* shipper_offer: not queued, no room (sender told to retry) */
	uint64_t requests_refused;   /* request rows in those */
	uint64_t requests_invalid;   /* refused by the store as invalid */
	uint64_t requests_undelivered; /* left when shipper_stop() gave up */
	uint64_t windows_undelivered;  /* left in the queue when shipper_stop() gave up */
	uint64_t rows_undelivered;     /* rows of those not committed */
	uint64_t samples_undelivered;  /* samples of those rows */
	uint64_t drop_episodes;	       /* runs of drops (one log line each) */
	uint64_t flushes;	       /* flushes that committed */
	uint64_t flush_errors;	       /* flushes, opens and reconnects that failed */
	size_t queue_bytes;	       /* bytes of queued windows now (in flight included) */
	size_t queue_windows;	       /* queued windows now */
	uint64_t windows_recovered;    /* queued at start from a previous run's spool */
	uint64_t windows_resumed;      /* of those, partly or wholly committed before: resumed */
	uint64_t samples_unspooled;    /* samples of queued windows not in the spool, now */
	uint64_t requests_unspooled;   /* request rows of queued windows not in the spool, now */
	bool connected;		       /* the last database operation succeeded */
	char last_error[256];	       /* the last failure, or "" */
};

/*
 * Starts the shipper's thread, which connects in the background (a database
 * that is down is retried). Returns NULL with errno EINVAL or ENOMEM (or
 * the pthread_create error). Stop with shipper_stop(), free with
 * shipper_free().
 */
struct shipper *shipper_start(const struct shipper_opts *opts);

/*
 * Queues a window; never waits for the database or for room. Always takes
 * ownership of w. Returns 0 (queued, possibly after dropping older windows),
 * -ENOBUFS (w alone does not fit: dropped and counted) or -ESHUTDOWN
 * (after shipper_stop(): freed, not counted).
 */
int shipper_submit(struct shipper *s, struct agg_window *w);

/*
 * Queues w only if it fits without dropping anything (for data whose sender
 * can be told to retry, such as OTLP exports). Always takes ownership of w.
 * Returns 0 (queued), -EAGAIN (no room now: freed, counted as refused, not
 * as dropped) or -ESHUTDOWN.
 */
int shipper_offer(struct shipper *s, struct agg_window *w);

/*
 * Delivers what is queued until the queue is empty or timeout_ms passes,
 * then stops the thread. Returns 0 when everything was delivered,
 * -ETIMEDOUT when windows were left (counted in *_undelivered). The thread
 * checks the deadline between store calls; a libpq call in progress is not
 * interrupted, so stop waits for it at most 1 s past the deadline (put
 * connect_timeout and keepalives in the conninfo to bound such calls); if
 * it is still running then, the undelivered counts are final only after
 * shipper_free(). Calling it again returns the same result.
 */
int shipper_stop(struct shipper *s, int timeout_ms);

void shipper_get_stats(struct shipper *s, struct shipper_stats *out);

/* Stops (without waiting) if still running, joins the thread, frees everything. NULL is a no-op. */
void shipper_free(struct shipper *s);

#endif
