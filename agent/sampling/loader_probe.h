/*
 * loader_probe.h - the uprobe on the dynamic loader's debug rendezvous
 * (_dl_debug_state, the function r_debug.r_brk names), attached once per
 * distinct loader file (device and inode) for every process that maps it.
 * The BPF program (on_dl_debug_state, bpf/sampler.bpf.c) turns each call
 * in a target process into a TP_REC_MAPS record: the loader is about to
 * map, or has mapped, new objects (dlopen) or unmapped some (dlclose).
 *
 * Part of the sampler (sampler.h: sampler_attach_loader_probe); one thread
 * uses it at a time. A file is tried once: its answer (attached, no such
 * function, the attach failed) is remembered, so asking again per look at
 * a process costs a scan of a small array.
 */
#ifndef TRACEPROF_AGENT_LOADER_PROBE_H
#define TRACEPROF_AGENT_LOADER_PROBE_H

#include <stdbool.h>
#include <stdint.h>

/* Distinct loader files tried at most (a node runs few C libraries). */
#define LOADER_PROBE_MAX 32
/* The rendezvous function the probe is put on. */
#define LOADER_PROBE_FUNC "_dl_debug_state"

struct bpf_link;
struct bpf_program;

/* The loader files tried, with their counters. */
struct loader_probes {
	struct {
		uint64_t dev, ino;     /* the file */
		int err;	       /* 0: attached; else what the try gave */
		struct bpf_link *link; /* the attachment, owned; NULL unless err == 0 */
	} files[LOADER_PROBE_MAX];
	int n;		    /* entries used in files */
	uint64_t attached;  /* files the probe is on */
	uint64_t no_symbol; /* files without LOADER_PROBE_FUNC (a static loader, another libc) */
	uint64_t failed;    /* files where the attach failed (no CAP_SYS_ADMIN, unreadable) */
	uint64_t full;	    /* files not tried: LOADER_PROBE_MAX reached */
	const char *func;   /* the function probed: NULL for LOADER_PROBE_FUNC (another set */
			    /* of files uses the same logic: the CUDA launch marker) */
};

/*
 * Puts prog on LOADER_PROBE_FUNC (or lp->func) of the ELF file at path, which is the file
 * (dev, ino), for every process. The same file again returns the first
 * answer without reading it. 0: attached; -ENOENT: the file has no such
 * function (normal for some loaders: a debug line, counted, never a
 * warning); -ENOSPC: LOADER_PROBE_MAX files tried; else -errno of the try.
 */
int loader_probes_attach(struct loader_probes *lp, struct bpf_program *prog, const char *path,
			 uint64_t dev, uint64_t ino);
/* Whether the file (dev, ino) was tried already (attached or not). */
bool loader_probes_known(const struct loader_probes *lp, uint64_t dev, uint64_t ino);
/* Detaches everything; lp is empty (counters kept). */
void loader_probes_free(struct loader_probes *lp);

#endif
