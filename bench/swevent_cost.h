/* SPDX-License-Identifier: GPL-2.0 */
/*
 * swevent_cost.h - what swevent_cost.bpf.c and its reader
 * (bench/swevent_cost.c) share: the per-CPU totals.
 */
#ifndef TRACEPROF_BPF_SWEVENT_COST_H
#define TRACEPROF_BPF_SWEVENT_COST_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#define SWEVENT_HIST_BUCKETS 256 /* histogram of durations: bucket i holds [i, i+1) x 100 ns */
#define SWEVENT_HIST_NS	     100
#define SWEVENT_NEAR_NS	     500000 /* a callback this soon after the other class's is "near" */

/* Who took the sample: the event's owner, told apart by event->prog. */
enum swevent_class {
	SWEVENT_OUTPUT = 0, /* no BPF program: the kernel writes a sample record (perf record) */
	SWEVENT_BPF = 1,    /* a BPF program runs instead (traceprof-agent) */
	SWEVENT_BPF_B = 2,  /* the BPF program given by id (a second agent build, side by side) */
	SWEVENT_CLASSES = 3,
};

/* Time spent in the software perf events' hrtimer callback, per CPU. */
struct swevent_cost {
	__u64 callbacks;		  /* callbacks timed */
	__u64 total_ns;			  /* their summed duration */
	__u64 max_ns;			  /* the longest */
	__u64 near_callbacks;		  /* of those, started < SWEVENT_NEAR_NS after the other
					     class's last callback on this CPU ended */
	__u64 near_total_ns;		  /* their summed duration */
	__u64 overlap_callbacks;	  /* callbacks that ran while another CPU ran one of
					     the same class (the same profiler) */
	__u64 overlap_total_ns;		  /* their summed duration */
	__u64 hist[SWEVENT_HIST_BUCKETS]; /* durations; the last bucket holds the rest */
};

#endif
