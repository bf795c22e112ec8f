/*
 * offcpu_attach.h - switches off-CPU capture (docs/offcpu.md) of the
 * sampler on and off: attaches the scheduler programs of
 * bpf/offcpu.bpf.c (sched_switch, sched_wakeup, sched_wakeup_new,
 * sys_exit) when capture goes on and detaches them when it goes off, so
 * that with capture off a context switch costs what it costs without
 * traceprof. Part of the sampler (sampler.h: sampler_set_offcpu); one
 * thread uses it at a time.
 */
#ifndef TRACEPROF_AGENT_OFFCPU_ATTACH_H
#define TRACEPROF_AGENT_OFFCPU_ATTACH_H

#include <stdbool.h>
#include <stdint.h>

#define OFFCPU_PROGS 4

struct bpf_link;
struct sampler_bpf;

/* The attachments while capture is on (all NULL when off). */
struct offcpu_links {
	struct bpf_link *link[OFFCPU_PROGS]; /* owned */
	unsigned mode;			     /* enum sampler_offcpu_mode in effect */
	bool targets;			     /* trigger targets captured (offcpu_targets map) */
	uint32_t min_us;		     /* the threshold in effect */
	bool attached;			     /* the programs are attached */
};

/*
 * Sets mode (0 off, 1 requests, 2 all: the processes of the target
 * filter), targets (the processes of the offcpu_targets map, in the
 * requests mode) and min_us (checked by the caller) on the loaded
 * skeleton: attaches what is missing when either is on, detaches
 * everything when both are off. A failed attach leaves capture off. 0 or
 * -errno.
 */
int offcpu_links_set(struct offcpu_links *ol, struct sampler_bpf *skel, unsigned mode, bool targets,
		     uint32_t min_us);
/* Run time and runs of the programs (kernel.bpf_stats_enabled), summed. */
void offcpu_links_run_stats(struct sampler_bpf *skel, uint64_t *run_ns, uint64_t *runs);
/* Detaches everything; idempotent. */
void offcpu_links_free(struct offcpu_links *ol);

#endif
