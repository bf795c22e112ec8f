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
	LOOKUP_MODES = 6,
};

#endif
