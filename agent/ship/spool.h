/*
 * spool.h - closed windows kept on disk until the database has them, so a
 * crashed agent (SIGKILL, OOM kill) loses at most its open window.
 *
 * Data flow: the shipper writes every window it queues (samples, raised
 * samples of a trigger, OTLP request rows, with the dictionary entries they
 * reference) to one file, <id>.win, before the window counts as queued:
 * written under a temporary name, then renamed, so a file is whole or
 * absent. Before each COMMIT that carries a window's rows the shipper
 * appends the transaction id and how far into the window that commit
 * reaches to <id>.xid; after the COMMIT it removes both files. At start the
 * files left by a previous run are read back (oldest first) and queued
 * again; for a window with an .xid file the shipper asks PostgreSQL which
 * of those transactions committed (pg_xact_status) and resumes after the
 * last one that did, so a window whose COMMIT happened just before a crash
 * is never stored twice.
 *
 * Layout: DIR/<16 hex digits>/, one subdirectory per database (a hash of
 * the conninfo with its password masked), so agents of different databases
 * never replay each other's windows; a lock file (flock) in it keeps a
 * second agent of the same database out (it runs without a spool, with a
 * warning). A small state record there (state) holds what a crash would
 * lose now: the samples of the open window, raised samples held for
 * triggers and queued windows that could not be spooled. The main loop
 * updates it in place each pass (stores into a shared mapping of the file,
 * which the page cache keeps when the process dies); a clean stop marks it
 * clean. The next start reads it and reports the previous run's loss.
 *
 * Trust: the subdirectory must belong to the agent's user and be writable
 * by it alone (its windows go into the database), else spool_open fails.
 *
 * Bounds: max_bytes of window files; past it a window is not spooled (kept
 * in memory only, counted in windows_full). A file that cannot be read back
 * (bad magic, bad checksum, truncated, a count beyond the file's size) is
 * removed and counted. Files are not fsync'd unless opts.sync: a process
 * crash keeps the page cache, a kernel crash or power loss may not.
 *
 * Threads: spool_write() and spool_remove() from any thread (the shipper's
 * submitters and its delivering thread); spool_note_state() from one
 * thread. All int-returning functions return 0 or -errno.
 */
#ifndef TRACEPROF_AGENT_SPOOL_H
#define TRACEPROF_AGENT_SPOOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "aggregate.h"

#define SPOOL_DEFAULT_BYTES (64u << 20) /* bound on window files when max_bytes is 0 */
#define SPOOL_FILE_HEADER   24		/* bytes before a window file's body */
#define SPOOL_MAX_COMMITS   64		/* commit records read back per window */

struct spool_opts {
	const char
	    *dir; /* spool directory (created 0700); the database's subdirectory goes in it */
	const char *db_key; /* names the database: conninfo with the password masked */
	size_t max_bytes;   /* bound on window file bytes; 0 = SPOOL_DEFAULT_BYTES */
	bool sync;	    /* fsync files and the directory (survive power loss, slower) */
};

/* One COMMIT that carried rows of a window, and how far into it. */
struct spool_commit {
	char xid[32];	   /* pg_current_xact_id() of that transaction */
	uint64_t dict_pos; /* dictionary entries of the window sent up to it */
	uint64_t row_pos;  /* sample rows */
	uint64_t req_pos;  /* request rows */
};

/* What a crash would lose now (the state record); written by the main loop. */
struct spool_state {
	uint64_t samples_open;	     /* samples in the open window */
	uint64_t raised_held;	     /* raised samples held for triggers, not yet decided */
	uint64_t samples_unspooled;  /* samples of queued windows that are not in the spool */
	uint64_t requests_unspooled; /* request rows (spans) of queued windows not in the spool */
};

/* The previous run, as its state record left it. */
struct spool_previous {
	bool found;		 /* a state record was there */
	bool unclean;		 /* it did not stop cleanly (killed, crashed) */
	int pid;		 /* its process id */
	int64_t updated_us;	 /* when it last wrote the record (CLOCK_REALTIME) */
	struct spool_state lost; /* what it lost, when unclean */
};

struct spool_stats {
	uint64_t windows_written;   /* window files written */
	uint64_t bytes_written;	    /* their bytes */
	uint64_t windows_removed;   /* files removed: delivered, or dropped from the queue */
	uint64_t windows_full;	    /* not spooled: max_bytes reached */
	uint64_t write_errors;	    /* not spooled: a write failed (disk full, I/O) */
	uint64_t windows_recovered; /* read back at start */
	uint64_t files_bad;	    /* unreadable files removed at start */
	uint64_t commit_errors;	    /* commit records that could not be written */
	size_t bytes;		    /* window file bytes now */
	size_t files;		    /* window files now */
};

/*
 * Opens (creates) the spool of one database under opts->dir and reads the
 * previous run's state record into *prev (may be NULL). Returns NULL with
 * errno set and a reason in err: EBUSY another agent holds it, or why the
 * directory cannot be used. The caller closes with spool_close().
 */
struct spool *spool_open(const struct spool_opts *opts, struct spool_previous *prev, char *err,
			 size_t errlen);
/*
 * Clean: marks the state record clean and, when no window file is left,
 * removes the subdirectory. Not clean: leaves everything as a crash would.
 * NULL is a no-op.
 */
void spool_close(struct spool *sp, bool clean);
/* The database subdirectory (for messages). */
const char *spool_path(const struct spool *sp);

/*
 * Writes w to a new file and sets w->spool_id. -ENOSPC when max_bytes would
 * be exceeded (counted in windows_full), else -errno of the failed call
 * (counted in write_errors); w->spool_id stays 0 then.
 */
int spool_write(struct spool *sp, struct agg_window *w);
/* Appends a commit record for window id (before that COMMIT). */
int spool_note_commit(struct spool *sp, uint64_t id, const struct spool_commit *c);
/* Reads window id's commit records, oldest first; returns how many (0..max) or -errno. */
int spool_commits(struct spool *sp, uint64_t id, struct spool_commit *out, size_t max);
/* Removes window id's files. id 0 is a no-op. */
void spool_remove(struct spool *sp, uint64_t id);

/*
 * The windows a previous run left, oldest first, linked by next, each with
 * spool_id and spool_replayed set; the caller owns them. Files that cannot
 * be read are removed and counted. NULL when there are none.
 */
struct agg_window *spool_load(struct spool *sp);

/* Updates the state record (stores into its mapping; nothing when unchanged). */
void spool_note_state(struct spool *sp, const struct spool_state *st);
void spool_get_stats(struct spool *sp, struct spool_stats *out);

/*
 * Serializes w into a new buffer (*out, *len; the caller frees *out) and
 * reads one back: spool_decode returns a window in one allocation
 * (agg_window_free) or NULL with errno EINVAL (malformed) or ENOMEM.
 */
int spool_encode(const struct agg_window *w, char **out, size_t *len);
struct agg_window *spool_decode(const char *buf, size_t len);
/* The 64-bit hash of a file's body and of the database key (FNV-1a over words). */
uint64_t spool_hash(const char *p, size_t n);

#endif
