/* SPDX-License-Identifier: GPL-2.0 */
/*
 * lookup_cost.h - what lookup_cost.bpf.c and its loader
 * (bench/lookup_cost.c) share: the ways a sample can find its thread's
 * context, one per probe mode.
 */
#ifndef TRACEPROF_BPF_LOOKUP_COST_H
#define TRACEPROF_BPF_LOOKUP_COST_H

enum lookup_mode {
	LOOKUP_NONE = 0,	/* nothing: the program's floor */
	LOOKUP_HASH_HIT = 1,	/* a tgid-keyed hash, 16k entries, 64-byte value, found */
	LOOKUP_HASH_MISS = 2,	/* the same hash, a key not in it */
	LOOKUP_HASH_TWO = 3,	/* the tgid hash, then a tid-keyed 64k-entry hash, both found */
	LOOKUP_STORAGE_HIT = 4, /* task local storage of the thread, found */
	LOOKUP_STORAGE_MISS =
	    5, /* task local storage: the thread's, then its leader's, both empty */
	/* handing a sample over: each takes the user stack first (as the agent does) */
	OUT_STACK = 6,	      /* the user stack into a per-CPU buffer, not handed over */
	OUT_RINGBUF = 7,      /* the same, then copied into a BPF ring buffer */
	OUT_RING_RESERVE = 8, /* the stack taken straight into a reserved ring record */
	OUT_PERFBUF = 9,      /* the per-CPU buffer copied into a perf buffer of this CPU */
	/* counting what happened: three increments of 64-bit counters */
	COUNT_PERCPU = 10,	  /* in a per-CPU array (per-CPU areas: mapped page by page) */
	COUNT_ARRAY = 11,	  /* in a plain array indexed by CPU (small: kmalloc'ed) */
	OUT_RINGBUF_ARRAY = 12,	  /* OUT_RINGBUF with the buffer a plain array's row of this CPU */
	OUT_RING_RESERVE_32 = 13, /* OUT_RING_RESERVE, the stack asked for at most 32 frames: the
				     helper zeroes the record's unused tail up to the size asked */
	LOOKUP_MODES = 14,
};

/* The largest sample handed over: a header and 127 frames, as the agent's. */
#define OUT_HEADER 64
#define OUT_FRAMES 127
#define OUT_MAX	   (OUT_HEADER + OUT_FRAMES * 8)

#endif
