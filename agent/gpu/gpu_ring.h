/*
 * gpu_ring.h - the agent's side of one process's record ring of
 * libtraceprof-cuda (include/traceprof/cuda_ring.h, docs/gpu.md).
 *
 * The ring is the memfd named "/memfd:traceprof-cuda-v1 (deleted)" in the
 * process's maps, opened through /proc/PID/map_files/START-END (any mount
 * namespace). It is read with pread and its tail written with pwrite, not
 * through a mapping: the process owns the file and may shrink it at any
 * time, which would kill a reader of a mapping with SIGBUS; pread returns
 * short instead. The sizes and offsets are read once, at open, validated
 * against the file's size and kept; the process can write anything into
 * the file afterwards, so every record and name is copied, then checked.
 * One reader per ring (the agent's main thread).
 */
#ifndef TRACEPROF_AGENT_GPU_RING_H
#define TRACEPROF_AGENT_GPU_RING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "traceprof/cuda_ring.h"

#define GPU_RING_MAX_BYTES (1ull << 30) /* a larger file is refused */
#define GPU_RING_MAX_RECS  (1u << 24)	/* records in a ring at most */
#define GPU_NAME_MAX	   256		/* bytes of a kernel name kept (cut there) */

/* What the rings refused (summed over rings). */
struct gpu_ring_stats {
	uint64_t opened;      /* rings opened */
	uint64_t open_failed; /* rings found but not opened (permissions, gone) */
	uint64_t bad_header;  /* rings refused at open: magic, version, sizes, offsets */
	uint64_t bad_head;    /* drains whose head was behind the tail or past a whole ring */
	uint64_t skipped;     /* records skipped so (head - tail beyond the ring) */
	uint64_t bad_records; /* records refused: kind, flags, name out of bounds */
	uint64_t bad_names;   /* names that were not UTF-8 (stored as "[bad name]") */
	uint64_t cut_names;   /* names cut at GPU_NAME_MAX bytes */
	uint64_t read_errors; /* preads that came short (the file shrank) */
};

/*
 * A name read before, by its place in the names area: names are
 * append-only and never change once published (cuda_ring.h), and the
 * library interns them, so a kernel launched again names the same bytes;
 * a name is read with a pread once, not once a record. (A producer that
 * rewrites a published name only misnames its own kernels.)
 */
#define GPU_NAME_CACHE 16
struct gpu_name_ent {
	uint32_t off, len; /* the record's name_off and name_len */
	uint32_t ok;	   /* 1: name holds what they gave */
	char name[GPU_NAME_MAX + 1];
};

/* One ring. */
struct gpu_ring {
	int pid;	/* the process */
	int fd;		/* the memfd, through map_files; -1 closed */
	uint64_t size;	/* the file's size at open */
	uint32_t nrecs; /* from the header at open, validated */
	uint32_t names_bytes;
	uint64_t recs_off;
	uint64_t names_off;
	uint64_t tail;	  /* records consumed (ours; the header's copy is written) */
	bool broken;	  /* a read came short: the next drain says -EIO */
	uint64_t prod[5]; /* the producer's counters last read: launches, records, */
			  /* dropped_full, names_lost, cupti_dropped */
	struct gpu_name_ent names[GPU_NAME_CACHE]; /* names read, by their place */
};

/* A record as the agent uses it: checked, its name copied (NUL-terminated). */
struct gpu_krec {
	uint64_t start_ns, end_ns, stream;
	uint32_t correlation_id, device;
	char name[GPU_NAME_MAX + 1]; /* "" when the record has none */
};

/*
 * Finds the ring in pid's maps and opens it. 0; -ENOENT when the process
 * has none (yet); -EPROTO when its header is refused (counted); else
 * -errno of the open (counted).
 */
int gpu_ring_open(struct gpu_ring *r, int pid, struct gpu_ring_stats *st);
/*
 * Reads up to max records of [tail, head) into out, advances the tail and
 * writes it back; returns the records read (refused ones are counted and
 * not returned), or -EIO when the file cannot be read any more (it shrank:
 * the call after the one that found it).
 */
int gpu_ring_drain(struct gpu_ring *r, struct gpu_krec *out, int max, struct gpu_ring_stats *st);
/* The producer's counters now into r->prod (ignored when one went back); -EIO. */
int gpu_ring_counters(struct gpu_ring *r);
/* Clears consumer_pid and closes. */
void gpu_ring_close(struct gpu_ring *r);

/* Whether s[0, n) is well-formed UTF-8 (no NUL). */
bool gpu_utf8_ok(const char *s, size_t n);

#endif
