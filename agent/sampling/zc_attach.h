/*
 * zc_attach.h - the hooks of zero-code HTTP capture (docs/zero-code-http.md,
 * "Where it hooks"), chosen per process: uprobes on the libc wrappers of
 * the followed calls, attached to that process alone (other processes pay
 * nothing), or, for a process whose libc is not found (a static binary,
 * Go, musl) or when asked, the raw syscall tracepoints, attached while at
 * least one process uses them. Part of the sampler (sampler.h:
 * sampler_zerocode_add); one thread uses it at a time.
 */
#ifndef TRACEPROF_AGENT_ZC_ATTACH_H
#define TRACEPROF_AGENT_ZC_ATTACH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ZC_LIBC_PROBES 26 /* uprobes and uretprobes of one process */

struct bpf_link;
struct sampler_bpf;

/* One target process and its hook. */
struct zc_proc {
	uint32_t tgid;
	uint8_t hook;				/* TP_ZC_HOOK_* */
	int nlinks;				/* entries used in links (the libc hook) */
	struct bpf_link *links[ZC_LIBC_PROBES]; /* owned */
};

struct zc_attach {
	struct zc_proc *procs; /* owned, unordered */
	size_t n, cap;
	bool syscalls_only;	   /* never the libc hook */
	struct bpf_link *tp_enter; /* the syscall tracepoints, while n_syscalls > 0 */
	struct bpf_link *tp_exit;  /* (owned) */
	void *reaper;		   /* the thread that destroys uprobe links; owned */
	size_t n_syscalls;	   /* processes on the syscall hook */
	uint64_t links;		   /* uprobe links held, all processes */
	uint64_t libc_fallbacks;   /* processes that had a libc that could not be probed */
	uint64_t attaches;	   /* hooks attached (processes followed), in all */
	uint32_t epoch;		   /* the last capture epoch given (tp_zc_target.epoch) */
};

/*
 * Follows process tgid: the libc hook when its libc is found and every
 * wrapper probed, else the syscall hook; then its zc_targets entry. A
 * process already followed stays as it is (after an exec the caller
 * removes it first). 0
 * or -errno (-ENOSPC: too many processes, -ESRCH: it exited; the process
 * is not followed).
 */
int zc_attach_add(struct zc_attach *z, struct sampler_bpf *skel, uint32_t tgid);
/* Stops following tgid: its entry, its probes, the tracepoints after the last. */
void zc_attach_remove(struct zc_attach *z, struct sampler_bpf *skel, uint32_t tgid);
/*
 * Detaches everything and frees the table (the zeroed struct may be
 * reused); waits for the links still being destroyed.
 */
void zc_attach_free(struct zc_attach *z);
/* Processes on the libc hook. */
size_t zc_attach_libc(const struct zc_attach *z);

/*
 * The path of the libc mapped by process pid, as this process can open it
 * (through /proc/PID/root, so a container's own), into out; 0, or -ENOENT
 * without one (static, Go, musl), -EAGAIN when glibc's loader is mapped
 * but libc not yet, -ESRCH when the process is gone, -errno
 * when its maps are unreadable.
 */
int zc_find_libc(uint32_t pid, char *out, size_t size);

#endif
