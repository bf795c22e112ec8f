/*
 * store.h - the writer side of the PostgreSQL store, used by every writer
 * (agent, OTLP receiver, generators, benchmarks).
 *
 * Data flow: callers add dictionary entries (functions, frames, stacks,
 * sources, routes), sample rows and request rows; the store buffers them in
 * memory and store_flush() writes everything buffered in one transaction:
 * new dictionary entries through COPY into temporary tables and
 * INSERT ... ON CONFLICT DO NOTHING, then sample, request and trigger sample
 * rows with COPY straight into the partitioned tables (partitions are
 * created on demand).
 *
 * Dictionary entries the store has already sent are remembered (in a bounded
 * set) and not sent again. Rows are validated when added: a bad row is
 * refused with -EINVAL and counted, and never poisons a batch. Buffers are
 * bounded: when full, adds return -ENOBUFS (counted) until a flush succeeds.
 * When a flush fails (lost connection, server error) the buffered data is
 * kept; the caller may store_reconnect() and flush again.
 *
 * Validation (docs/storage.md lists the rules): hz 1..1000; 1..65536 stacks
 * per row and counts >= 1; span_id is 0 exactly when trace_id is all zero;
 * requests and trigger samples need a trace and span; trigger ids are
 * non-empty and at most 200 bytes; duration >= 0; status 0..999; stacks have
 * 1..512 frames; dictionary ids and source ids are not 0 (0 means "none");
 * service and function names are non-empty; strings are valid UTF-8 of at
 * most 65535 bytes; bucket/start lie in [now - retention, now + 1 day], with
 * retention read from traceprof.config at open (older rows would land in
 * partitions that are being dropped, later ones are a broken clock).
 *
 * Bounds: max_rows rows (samples, requests and trigger samples together) and
 * 256 MiB of them encoded; 200000 dictionary entries and 64 MiB of them.
 *
 * Errors: adds return -EINVAL (refused, counted in rows_invalid), -ENOBUFS
 * (full, counted in rows_dropped_full) or -ENOMEM. store_flush() returns
 * -ECONNRESET when the connection is lost (store_reconnect(), then flush
 * again), -EIO when the server refused the batch (the reason, with host,
 * port and database, is in store_last_error()), or -EAGAIN when a COMMIT
 * interrupted by a lost connection is still in progress on the server
 * (flush again later). A flush whose COMMIT reply was lost asks the server
 * at the next flush whether it committed, so every row lands exactly once.
 * A batch the server keeps refusing stays buffered; store_free() discards it.
 *
 * A struct store is not thread-safe; use one per writer thread.
 * All int-returning functions return 0 or -errno.
 */
#ifndef TRACEPROF_STORE_H
#define TRACEPROF_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct store;

struct store_opts {
	size_t max_rows;       /* sample + request + trigger rows buffered at most; 0 = 100000 */
	bool text_copy;	       /* COPY in text format instead of binary (for comparison) */
	bool migrate;	       /* apply pending migrations at open instead of failing */
	const char *app_name;  /* application_name for the connection; NULL = "traceprof" */
	bool quiet_open;       /* store_open does not log why it failed (the caller does) */
	char *open_error;      /* if set: store_open writes why it failed here (password removed) */
	size_t open_error_len; /* bytes at open_error */
	/*
	 * If set: called by store_flush() after every row of the batch was sent
	 * and before COMMIT, with the transaction's id (pg_current_xact_id()),
	 * so a caller can record it and later ask store_xact_status() whether
	 * that COMMIT happened (the agent's spool). A non-zero return rolls the
	 * batch back (kept, the flush returns it).
	 */
	int (*before_commit)(void *ctx, const char *xid);
	void *commit_ctx; /* passed to before_commit */
};

#define STORE_LABELS_MAX 65536 /* bytes of a source's labels_json */

struct store_source {
	const char *service;	 /* required, non-empty */
	const char *namespace_;	 /* Kubernetes namespace or "" */
	const char *pod;	 /* pod name or "" */
	const char *container;	 /* container id or "" */
	const char *node;	 /* node name or "" */
	const char *build_id;	 /* main executable build id, hex, or "" */
	const char *labels_json; /* JSON object of string values (pod labels); NULL or "" = {} */
};

struct store_sample_row {
	int64_t bucket_us;	/* start of the time bucket, microseconds since the Unix epoch */
	uint64_t source_id;	/* ids_source() of an added source */
	uint8_t trace_id[16];	/* all zero: samples outside any request */
	uint64_t span_id;	/* 0 when trace_id is zero */
	uint16_t hz;		/* sampling frequency of these samples, 1..1000 */
	uint32_t n;		/* entries in stacks (and counts), >= 1 */
	const uint64_t *stacks; /* stack ids, borrowed during the call */
	const uint32_t *counts; /* times each stack was sampled (>= 1), or NULL for once each */
};

struct store_request {
	int64_t start_us;	 /* span start, microseconds since the Unix epoch */
	int64_t duration_us;	 /* span duration, >= 0 */
	uint64_t source_id;	 /* ids_source() of an added source */
	uint8_t trace_id[16];	 /* not all zero */
	uint64_t span_id;	 /* not zero */
	uint64_t parent_span_id; /* 0 for a root span */
	uint64_t route_id;	 /* ids_route() of an added route, or 0 */
	int status_code;	 /* HTTP status, 0 when unknown */
	uint8_t context_source;	 /* STORE_CTX_SOURCE_*: what found the request; 0 unknown */
};

/* requests.context_source (sql/014_context_source.sql); 0 is stored as NULL. */
#define STORE_CTX_SOURCE_OTLP	  1 /* a server span received over OTLP */
#define STORE_CTX_SOURCE_ZEROCODE 2 /* zero-code HTTP/1.x capture from system calls */
#define STORE_CTX_SOURCE_MAX	  2

/*
 * Off-CPU time (docs/offcpu.md), for traceprof.offcpu: one row = the
 * intervals of one kind of one span (or of no request, trace_id zero)
 * from one source in one time bucket. us[i] microseconds were spent off
 * CPU with stack stacks[i]; stack id 0 stands for intervals without a
 * stack (each below the capture threshold, or whose stack was not taken).
 */
#define STORE_OFFCPU_BLOCKED 1 /* sleeping until woken (lock, I/O, sleep, a downstream call) */
#define STORE_OFFCPU_RUNQ    2 /* runnable, waiting for a CPU */
struct store_offcpu_row {
	int64_t bucket_us;	/* start of the time bucket, microseconds since the Unix epoch */
	uint64_t source_id;	/* ids_source() of an added source */
	uint8_t trace_id[16];	/* all zero: outside any request */
	uint64_t span_id;	/* 0 when trace_id is zero */
	uint8_t kind;		/* STORE_OFFCPU_BLOCKED or STORE_OFFCPU_RUNQ */
	uint32_t n;		/* entries in stacks and us, >= 1 */
	const uint64_t *stacks; /* stack ids (0: no stack), borrowed during the call */
	const uint32_t *us;	/* microseconds off CPU with each stack, >= 1 */
};

/*
 * GPU time (docs/gpu.md), for traceprof.gpu: one row = the kernels that
 * the launches of one span (or of no request, trace_id zero) caused, from
 * one source in one time bucket: stacks[i] (a launch stack whose leaf
 * frame is the kernel) launched launches[i] kernels that ran gpu_ns[i] ns.
 */
struct store_gpu_row {
	int64_t bucket_us;	  /* start of the time bucket, microseconds since the Unix epoch */
	uint64_t source_id;	  /* ids_source() of an added source */
	uint8_t trace_id[16];	  /* all zero: outside any request */
	uint64_t span_id;	  /* 0 when trace_id is zero */
	uint32_t n;		  /* entries in stacks, launches and gpu_ns, >= 1 */
	const uint64_t *stacks;	  /* stack ids (not 0), borrowed during the call */
	const uint32_t *launches; /* kernels launched with each stack, >= 1 */
	const uint64_t *gpu_ns;	  /* their GPU time, ns, <= INT64_MAX */
};

struct store_stats {
	uint64_t sample_rows_written;	  /* samples rows committed */
	uint64_t samples_written;	  /* sum of counts in those rows */
	uint64_t requests_written;	  /* request rows committed */
	uint64_t dict_entries_written;	  /* dictionary entries sent (new to this store) */
	uint64_t flushes;		  /* successful flushes */
	uint64_t flush_errors;		  /* failed flushes (data kept) */
	uint64_t rows_invalid;		  /* rows and entries refused by validation */
	uint64_t rows_dropped_full;	  /* rows refused because the buffer was full */
	uint64_t bytes_sent;		  /* COPY payload bytes */
	uint64_t trigger_rows_written;	  /* trigger_samples rows committed */
	uint64_t trigger_samples_written; /* sum of counts in those rows */
	uint64_t offcpu_rows_written;	  /* offcpu rows committed */
	uint64_t offcpu_us_written;	  /* sum of their durations (µs) */
	uint64_t gpu_rows_written;	  /* gpu rows committed */
	uint64_t gpu_launches_written;	  /* sum of their launches */
};

/*
 * Connects with a libpq conninfo string or URI; NULL or "" uses the standard
 * PG* environment. Checks the schema version (or migrates, see opts).
 * Returns NULL with errno set and the reason logged (never the password):
 * EINVAL malformed conninfo, ECONNREFUSED cannot connect, EPROTO no schema or
 * an older one (run traceprof-db migrate, or set opts.migrate), EIO the
 * version could not be read or the migration failed, ENOMEM.
 * The caller frees with store_free().
 */
struct store *store_open(const char *conninfo, const struct store_opts *opts);
/* Closes the connection and frees everything; unflushed data is discarded. NULL is a no-op. */
void store_free(struct store *st);
/*
 * Drops and re-opens the connection, keeping buffered data. Returns 0 or
 * -ECONNREFUSED (reason in store_last_error()).
 */
int store_reconnect(struct store *st);
/* The last error message with its context, or ""; borrowed until the next call. */
const char *store_last_error(const struct store *st);
/* Host and port (or socket directory) and database, for messages; never the password. */
const char *store_describe(const struct store *st);

/*
 * Dictionary entries. An id already sent or pending is a no-op returning 0.
 * NULL strings other than function names are stored as "", except a frame's
 * file, which is stored as NULL, as are a line <= 0 and an address of 0.
 */
int store_add_function(struct store *st, uint64_t function_id, const char *name, const char *module,
		       int kind);
int store_add_frame(struct store *st, uint64_t frame_id, uint64_t function_id, const char *build_id,
		    const char *file, int line, uint64_t address);
/*
 * frame_ids root first, 1..512 of them. Add the frames first (in the same
 * flush or an earlier one): when the stack is inserted the database derives
 * its function ids from them; a frame unknown at that moment reads as the
 * unknown function until traceprof.repair_stack_functions() runs.
 */
int store_add_stack(struct store *st, uint64_t stack_id, const uint64_t *frame_ids, size_t n);
int store_add_source(struct store *st, uint64_t source_id, const struct store_source *src);
int store_add_route(struct store *st, uint64_t route_id, const char *method, const char *route);

/*
 * The row is copied. Counts that are all 1 are stored as NULL, and counts
 * whose row is smaller with each stack repeated (few samples, the usual
 * case for one request) are stored that way; both forms mean the same.
 */
int store_add_samples(struct store *st, const struct store_sample_row *row);
int store_add_request(struct store *st, const struct store_request *req);
/*
 * The raised-rate samples of a request claimed by trigger_id, for
 * traceprof.trigger_samples (docs/triggers.md): the same row as
 * store_add_samples, validated the same way, and also refused (-EINVAL,
 * counted in rows_invalid) without a trace id, or when trigger_id is NULL,
 * empty, not valid UTF-8 or longer than 200 bytes. Both are copied. The
 * rows share the buffer bound and the flush transaction of the other rows,
 * so they land exactly once, together with the samples and requests added
 * before the same flush.
 */
int store_add_trigger_samples(struct store *st, const char *trigger_id,
			      const struct store_sample_row *row);
/*
 * Off-CPU rows (struct store_offcpu_row), copied; validated like sample
 * rows (-EINVAL, counted in rows_invalid: source 0, n 0 or over the row
 * limit, a span without a trace, a kind other than the two, a zero
 * duration), buffered and flushed in the same transaction as the others.
 */
int store_add_offcpu(struct store *st, const struct store_offcpu_row *row);
/*
 * GPU rows (struct store_gpu_row), copied; validated like off-CPU rows
 * (-EINVAL, counted in rows_invalid: source 0, n 0 or over the row limit,
 * a span without a trace, a stack id 0, launches 0 or over INT32_MAX,
 * gpu_ns over INT64_MAX), flushed in the same transaction as the others.
 */
int store_add_gpu(struct store *st, const struct store_gpu_row *row);

/*
 * Whether s is text the store accepts: well-formed UTF-8 as PostgreSQL
 * checks it, at most 65535 bytes. For writers that check strings before
 * building rows (the OTLP receiver).
 */
bool store_valid_text(const char *s);

/* Rows buffered now (sample + request + trigger sample + off-CPU rows). */
size_t store_pending_rows(const struct store *st);
/*
 * Whether the transaction xid (a pg_current_xact_id() text, e.g. recorded
 * by before_commit) committed: 1 committed, 0 aborted, -EAGAIN still in
 * progress, -ENOENT unknown to the server (too old, or not of this
 * cluster), -EINVAL a malformed xid, -ECONNRESET / -EIO.
 */
int store_xact_status(struct store *st, const char *xid);
/* Writes everything buffered in one transaction; a flush of nothing returns 0. */
int store_flush(struct store *st);
void store_get_stats(const struct store *st, struct store_stats *out);

#endif
