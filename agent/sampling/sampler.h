/*
 * sampler.h - the agent's BPF CPU sampler: loads bpf/sampler.bpf.c, opens a
 * software CPU-clock perf event per online CPU, attaches the sampler to
 * each, and hands every sample (with the OpenTelemetry thread context of
 * the thread it interrupted) to a callback.
 *
 * Data flow: sampler_open loads and attaches; the agent then tells the
 * kernel side where each process keeps its thread context
 * (sampler_set_tls) and/or attaches the SDK registration uprobe
 * (sampler_attach_sdk_uprobe) and puts the loader uprobe on each
 * process's dynamic loader (sampler_attach_loader_probe); sampler_poll
 * delivers what the CPUs sampled, each sample with its time, and the
 * processes' exec, exit, fork and maps events, through the ring buffer.
 *
 * Errors: int functions return 0 or a negative errno value; sampler_open
 * returns NULL and sets errno. Failures a user can cause (not root,
 * perf_event_paranoid, no kernel BTF) are logged through lib/base/log.c with
 * what to do. One thread uses a struct sampler at a time.
 */
#ifndef TRACEPROF_AGENT_SAMPLER_H
#define TRACEPROF_AGENT_SAMPLER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "bpf/sampler.h" /* struct tp_sample, enums, limits shared with the BPF side */

/* Largest sampling frequency the sampler accepts (Hz). */
#define SAMPLER_MAX_HZ 1000
/* sampler_opts.wakeup_bytes: wake the reader at every sample (lowest latency, most CPU). */
#define SAMPLER_WAKEUP_EVERY ((size_t)-1)

struct sampler_opts {
	int hz;		       /* sampling frequency per CPU, 1..SAMPLER_MAX_HZ (0: 19) */
	size_t ring_bytes;     /* ring size, a power of 2 >= page
				  (0: 128 KiB per CPU, at least 1 MiB) */
	size_t wakeup_bytes;   /* wake the reader at this much pending (0: ring/2; or EVERY) */
	enum tp_filter filter; /* which processes are sampled */
	bool paused;	       /* the base events start disabled, until sampler_resume() */
	size_t unwind_bytes;   /* memory for unwind table rows in the kernel (0: none,
				  8 bytes a row; rounded down to whole pages) */
	bool zc_syscalls_only; /* zero-code HTTP: the syscall hook for every process */
};

/* Counters summed over CPUs, plus the kernel's run statistics of on_cpu_clock. */
struct sampler_stats {
	uint64_t counters[TP_CNT_MAX]; /* enum tp_counter */
	uint64_t run_time_ns;	       /* on_cpu_clock run time (kernel.bpf_stats_enabled=1) */
	uint64_t run_cnt;	       /* on_cpu_clock runs (kernel.bpf_stats_enabled=1) */
	uint64_t raised_run_time_ns;   /* on_cpu_clock_raised run time (same switch) */
	uint64_t raised_run_cnt;       /* on_cpu_clock_raised runs (same switch) */
	uint64_t offcpu_run_time_ns;   /* the off-CPU programs' run time, summed (same switch) */
	uint64_t offcpu_run_cnt;       /* their runs (same switch) */
	uint64_t loaders_probed;       /* loader files with the rendezvous uprobe attached */
	uint64_t loaders_no_symbol;    /* loader files without _dl_debug_state */
	uint64_t loaders_failed;       /* tries that failed (no CAP_SYS_ADMIN, unreadable) */
	uint64_t loaders_over;	       /* loader files not tried: too many */
	uint64_t gpu_probed;	       /* libtraceprof-cuda files with the launch marker's uprobe */
	uint64_t gpu_no_symbol;	       /* such files without traceprof_cuda_launch */
	uint64_t gpu_probe_failed;  /* marker attaches that failed (no CAP_SYS_ADMIN, unreadable) */
	uint64_t gpu_probe_over;    /* such files not tried: too many */
	uint64_t zc_attached;	    /* 1 while the zero-code syscall programs are attached */
	uint64_t zc_hook_libc;	    /* zero-code processes on the libc hook (uprobes) */
	uint64_t zc_hook_syscalls;  /* and on the syscall hook (tracepoints) */
	uint64_t zc_uprobe_links;   /* the libc hook's uprobe links held */
	uint64_t zc_libc_fallbacks; /* processes whose libc could not be probed */
	uint64_t zc_attaches;	    /* hooks attached, in all (an exec attaches again) */
};

struct sampler;

/*
 * Called once per sample. sample and its frames (sample->ips) are borrowed
 * for the call only; len is the record's length in bytes. A negative return
 * stops the poll and is returned by sampler_poll.
 */
typedef int (*sampler_sample_fn)(void *ctx, const struct tp_sample *sample, size_t len);
/* A process's life event, from the ring (see sampler_event_fn). */
struct sampler_event {
	enum tp_record_kind kind; /* TP_REC_EXEC, TP_REC_EXIT, TP_REC_FORK or TP_REC_MAPS */
	pid_t pid;		  /* the process */
	pid_t parent;		  /* TP_REC_FORK: the process that forked it */
	uint64_t start_time;	  /* TP_REC_FORK: pid's start time as procmem_start_time gives it */
};

/*
 * Called, in ring order, when a process the target filter wants starts a
 * new program (kind TP_REC_EXEC: samples delivered before the call are of
 * the old program, after it of the new one), ends (TP_REC_EXIT: its last
 * thread exited; no sample of it follows), or was forked (TP_REC_FORK:
 * before any of its samples; it runs the parent's program, its thread
 * context is where the parent's is), or its loader mapped or unmapped
 * objects (TP_REC_MAPS: a dlopen or dlclose, from the loader uprobe; at
 * most one per process per TP_MAPS_GAP_NS, and possibly before the loader
 * has finished). ev is borrowed for the call. A negative return stops the
 * poll.
 */
typedef int (*sampler_event_fn)(void *ctx, const struct sampler_event *ev);

/*
 * Loads the BPF sampler with opts (NULL: defaults) and starts sampling on
 * every online CPU. Returns the sampler (free with sampler_free) or NULL
 * with errno set: EPERM (not root / no CAP_BPF and CAP_PERFMON), EACCES
 * (perf_event_paranoid), ENOTSUP (no kernel BTF), EINVAL (bad opts), or what
 * the kernel said.
 */
struct sampler *sampler_open(const struct sampler_opts *opts);
/* Starts the base events of a sampler opened with opts.paused. */
int sampler_resume(struct sampler *s);
/* Detaches everything and frees s; NULL is a no-op. */
void sampler_free(struct sampler *s);

/* TP_FILTER_PIDS: sample process pid too (-ENOSPC when the map is full). */
int sampler_add_target_pid(struct sampler *s, pid_t pid);
/* TP_FILTER_CGROUP: sample the cgroup v2 with this id (its directory's inode number). */
int sampler_add_target_cgroup(struct sampler *s, uint64_t cgroup_id);
/* TP_FILTER_CGROUP: sample the cgroup v2 at path (e.g. under /sys/fs/cgroup). */
int sampler_add_target_cgroup_path(struct sampler *s, const char *path);

/*
 * Where process pid keeps otel_thread_ctx_v1; replaces what was set before
 * (TP_TLS_NONE removes it). The kernel side forgets it when the process
 * execs or exits. -ESRCH when pid is gone.
 */
int sampler_set_tls(struct sampler *s, pid_t pid, const struct tp_tls_loc *loc);
/*
 * Forgets process pid: its TLS location and target entry (the kernel side
 * also forgets them when the process exits). 0 also when nothing was known.
 * The records the SDK uprobe learned stay with their threads until they
 * exit or exec.
 */
int sampler_forget_pid(struct sampler *s, pid_t pid);

/*
 * Attaches the registration uprobe to tp_sdk_probe_thread_registered in the
 * ELF file binary_path (libtraceprof-sdk.so, or an executable linking the
 * static SDK), for process pid or for every process (-1). Attaching the same
 * (path, pid) again does nothing and returns 0. -ENOENT when the file or the
 * function is missing, -ENOSPC when SAMPLER_MAX_UPROBES are attached.
 */
#define SAMPLER_MAX_UPROBES 64
int sampler_attach_sdk_uprobe(struct sampler *s, const char *binary_path, pid_t pid);
/*
 * Attaches the loader rendezvous uprobe (agent/sampling/loader_probe.h) to
 * the dynamic loader at path, the file (dev, ino), for every process: from
 * then on a dlopen or dlclose in a target process gives a TP_REC_MAPS
 * event. Once per file (a file tried before gives its first answer). 0,
 * -ENOENT when the loader has no _dl_debug_state (counted, not an error),
 * -ENOSPC when too many loader files were tried, or -errno of the attach.
 */
int sampler_attach_loader_probe(struct sampler *s, const char *path, uint64_t dev, uint64_t ino);
/*
 * Attaches on_gpu_launch (bpf/gpu.bpf.c) to the CUDA launch marker
 * (traceprof_cuda_launch, include/traceprof/cuda_ring.h) of the
 * libtraceprof-cuda file at path, the file (dev, ino), for every process.
 * Once per file; answers as sampler_attach_loader_probe.
 */
int sampler_attach_gpu_probe(struct sampler *s, const char *path, uint64_t dev, uint64_t ino);
/* Whether sampler_attach_gpu_probe was tried on the file (dev, ino) already. */
bool sampler_gpu_probe_known(const struct sampler *s, uint64_t dev, uint64_t ino);
/* Whether sampler_attach_loader_probe was tried on the file (dev, ino) already. */
bool sampler_loader_known(const struct sampler *s, uint64_t dev, uint64_t ino);
/*
 * The record address the uprobe learned for thread tid; -ENOENT when none
 * or tid is gone. A tid other than its process's leader needs Linux 6.9
 * (PIDFD_THREAD); -EINVAL before.
 */
int sampler_thread_record(struct sampler *s, pid_t tid, uint64_t *record);

/*
 * Waits up to timeout_ms (0: none, -1: forever) for
 * samples, then calls cb for every pending one. The kernel wakes the
 * reader only once wakeup_bytes are pending (or for an exec record), so a
 * sample may wait until the timeout: poll with a finite one. sampler_wake
 * ends the wait early. Returns the number of samples delivered, cb's
 * negative return, or a negative errno (-EINTR on a signal).
 */
int sampler_poll(struct sampler *s, int timeout_ms, sampler_sample_fn cb, void *ctx);
/*
 * Ends the wait of the sampler_poll running (or of the next one) at once;
 * it still reads what is pending. Safe from any thread and from a signal
 * handler.
 */
void sampler_wake(struct sampler *s);
/* Sets the exec/exit/fork/maps callback sampler_poll uses (NULL: those records are skipped). */
void sampler_set_event_fn(struct sampler *s, sampler_event_fn cb, void *ctx);

/*
 * Raised sampling (docs/triggers.md). sampler_open creates a second set of
 * CPU-clock events, disabled. hz > 0 sets their
 * frequency (PERF_EVENT_IOC_PERIOD) and enables them: threads of the raised
 * targets inside a request are then sampled at hz (flag TP_SAMPLE_RAISED,
 * a base/hz subsample also TP_SAMPLE_BASE) instead of the base rate; 0
 * disables them. No reload, no restart; the same hz again does nothing.
 * -EINVAL when hz is below the base frequency or above SAMPLER_MAX_HZ,
 * -EOPNOTSUPP when the sampler has no raised events.
 */
int sampler_set_raised(struct sampler *s, unsigned hz);
/* The raised frequency in effect; 0 when off. */
unsigned sampler_raised_hz(const struct sampler *s);
/*
 * Replaces the whole set of raised target processes (tgids, not 0) with
 * tgids[0..n): map updates only. -ENOSPC (nothing changed) when n exceeds
 * TP_MAX_RAISED_TARGETS. The kernel side drops a process at its exit.
 */
int sampler_set_raised_targets(struct sampler *s, const uint32_t *tgids, size_t n);

/*
 * Off-CPU capture (docs/offcpu.md). OFF: the scheduler programs are
 * detached (no cost on any context switch). REQUESTS: threads of the
 * processes the target filter wants, while they carry a request context
 * (tagged) when they leave the CPU. ALL: every thread of those processes.
 * An interval of min_us or more comes as a TP_REC_OFFCPU record with its
 * stack; shorter ones are summed per thread, kind and context into
 * TP_SAMPLE_OFF_SHORT records without frames. Records reach the sample
 * callback of sampler_poll (sample->kind tells them apart). -EINVAL for a
 * bad mode or min_us outside [SAMPLER_OFFCPU_MIN_US_LO, _HI].
 */
enum sampler_offcpu_mode {
	SAMPLER_OFFCPU_OFF = 0,
	SAMPLER_OFFCPU_REQUESTS = 1,
	SAMPLER_OFFCPU_ALL = 2,
};
#define SAMPLER_OFFCPU_MIN_US_LO      1
#define SAMPLER_OFFCPU_MIN_US_HI      10000000
#define SAMPLER_OFFCPU_MIN_US_DEFAULT 1000
int sampler_set_offcpu(struct sampler *s, enum sampler_offcpu_mode mode, uint32_t min_us);
/*
 * Off-CPU capture asked for by triggers (docs/offcpu.md, "From a trigger"):
 * replaces the whole set of target processes (tgids, not 0) with
 * tgids[0..n), each with the threshold min_us, map updates only; n 0
 * clears it (min_us is then not read). Their threads are captured as in
 * REQUESTS mode even while the mode of sampler_set_offcpu is OFF. -ENOSPC
 * (nothing changed) when n exceeds TP_MAX_OFFCPU_TARGETS, -EINVAL for a
 * tgid 0 or min_us outside [SAMPLER_OFFCPU_MIN_US_LO, _HI].
 */
int sampler_set_offcpu_targets(struct sampler *s, const uint32_t *tgids, size_t n, uint32_t min_us);
/*
 * The off-CPU target set as the kernel map holds it: up to max tgids into
 * tgids (and their thresholds into min_us when not NULL). Returns how many
 * (all of them, also beyond max), or -errno.
 */
int sampler_offcpu_targets(struct sampler *s, uint32_t *tgids, uint32_t *min_us, size_t max);

/*
 * OBI's trace map as a context source for threads without a thread
 * context (docs/agent.md, "OBI's trace map"): fd, a map with its layout
 * (struct tp_obi_ctx), is read from now on; fd < 0 stops reading it. The
 * sampler keeps its own reference: the caller may close fd. -EINVAL when
 * the kernel refuses the map (another type, key or value size).
 */
int sampler_set_obi_map(struct sampler *s, int fd);

/*
 * Python frames (docs/python.md): the interpreter of process tgid is laid
 * out as pp says (pyproc_detect); its samples carry its threads' Python
 * frames from now on. pp NULL: no more (the process ended or exec'd).
 * -ENOSPC beyond TP_MAX_PY_PROCS.
 */
int sampler_set_python(struct sampler *s, uint32_t tgid, const struct tp_py_proc *pp);

/*
 * HTTP/1.x requests from system calls (docs/zero-code-http.md) for process
 * tgid: its TP_REC_HTTP records come through the sample callback, its
 * threads are tagged with the requests they serve. The hook is chosen
 * per process (agent/sampling/zc_attach.h): uprobes on the libc it maps,
 * attached to it alone, else (or with opts.zc_syscalls_only) the two
 * syscall programs, attached while some process uses them. Adding a
 * process already followed does nothing (after an exec: remove, then
 * add). -ENOSPC beyond
 * TP_MAX_ZC_TARGETS.
 * sampler_zerocode_remove: the process is no longer followed (gone, or
 * capture off for it).
 */
int sampler_zerocode_add(struct sampler *s, uint32_t tgid);
void sampler_zerocode_remove(struct sampler *s, uint32_t tgid);
/* sampler_zerocode_clear: no process is followed any more, also none that
 * the fork program made a target (a child of one) */
void sampler_zerocode_clear(struct sampler *s);

/*
 * CFI unwinding (agent/unwind/unwind.h): the maps the sampler walks user
 * stacks with, for the module that fills them; the fds are the sampler's
 * (not to be closed). -ENOTSUP without unwinding (opts.unwind_bytes 0).
 */
struct sampler_unwind_maps {
	int rows_fd; /* array "unwind_rows": row index -> struct tp_unwind_row */
	size_t nrows;
	int tables_fd; /* array "unwind_tables": slot -> struct tp_unwind_table */
	int procs_fd;  /* hash "unwind_procs": tgid -> struct tp_unwind_proc */
};
int sampler_unwind_maps(struct sampler *s, struct sampler_unwind_maps *out);

/* Fills *st; run_time_ns/run_cnt stay 0 unless kernel.bpf_stats_enabled is 1. */
int sampler_get_stats(struct sampler *s, struct sampler_stats *st);

#endif
