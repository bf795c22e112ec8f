/*
 * proctable.h - what the agent knows about each process it samples: an
 * open-addressing table by pid, filled at first sight (service identity,
 * thread-context location for the BPF side, SDK uprobe, symbol snapshot),
 * given a forked child's parent's look at once, looked at again with
 * backoff while a process has not published everything, renamed when its
 * pod arrives, and emptied by exit and exec records and by a sweep.
 *
 * One thread (the agent's main loop) uses a struct proctable. The modules
 * it tells (sampler, symbolizer, aggregator, trigger engine, pod map) are
 * borrowed: the agent sets them and keeps them alive.
 */
#ifndef TRACEPROF_AGENT_PROCTABLE_H
#define TRACEPROF_AGENT_PROCTABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "identity.h"
#include "traceprof/ids.h"

struct agg;
struct kubepods;
struct sampler;
struct sampler_event;
struct symbolizer;
struct triggers;
struct pycache;
struct pyproc;
struct unwind;
struct zc_owners;

/* What the agent knows about one process. */
struct proc {
	int pid;	     /* 0: free slot */
	uint64_t start_time; /* /proc/<pid>/stat starttime, to detect pid reuse */
	uint64_t gen;	     /* unique per entry: a new program in the pid gets a new one */
	uint64_t source_id;  /* ids_source() of its identity */
	bool complete;	     /* identity from the process context and TLS found */
	bool sdk_uprobe;     /* the SDK registration uprobe was tried on its writer module */
	bool sdk_probe;	     /* ... and is attached: the writer is the SDK (tp_tls_loc.sdk_probe) */
	bool tls_known;	     /* its thread-context location is set in the sampler */
	int64_t recheck_us;  /* when to look again (incomplete processes) */
	int64_t recheck_step_us; /* backoff of those looks */
	int64_t last_sample_us;	 /* last sample seen (for sweeping) */
	int64_t inspected_us;	 /* last proc_inspect() */
	uint64_t maps_fp;	 /* procmem_maps_fingerprint() at the last full look, 0 = none */
	char pod_uid[IDENTITY_POD_UID_LEN + 1]; /* from its cgroup, "" outside a pod */
	bool pod_named;	     /* its source carries the pod's namespace and name */
	int64_t exited_us;   /* when its exit record was read (realtime µs); 0: running */
	int64_t maps_due_us; /* a maps record asked for a look at this time; 0: none pending */
	bool loader_tried;   /* its loader was found and given the rendezvous uprobe (or not) */
	uint8_t tls_retries; /* quick looks again since a writer's location was not ready */
	bool unwind_noted;   /* its mappings are written to the unwind maps (t->unwind) */
	uint8_t py;	     /* enum proc_py: what it runs, as far as Python goes */
	struct pyproc *pyp;  /* PROC_PY_FOUND: its interpreter (owned), else NULL */
};

/* Whether a process runs CPython (docs/python.md). */
enum proc_py {
	PROC_PY_UNKNOWN = 0, /* not looked yet, or its interpreter was not initialized: again */
	PROC_PY_FOUND,	     /* its samples carry Python frames */
	PROC_PY_NOT,	     /* no interpreter mapped (looked again when its mappings change) */
	PROC_PY_UNSUPPORTED, /* a version traceprof has no layout for: native frames only */
};

/* The table's counters (stats file). */
struct proctable_stats {
	uint64_t procs_seen;	     /* processes looked at */
	uint64_t tls_found;	     /* of those, with a thread context location */
	uint64_t tls_unsupported;    /* symbol found, placement not supported */
	uint64_t execs;		     /* new programs started by sampled processes */
	uint64_t forks;		     /* processes forked by sampled processes */
	uint64_t procs_inherited;    /* forked processes given their parent's look */
	uint64_t exits;		     /* processes ended (exit records) */
	uint64_t swept;		     /* dead processes found by the sweep (exit record lost) */
	uint64_t inspections;	     /* proc_inspect() calls (first sight, exec, rechecks) */
	uint64_t rechecks_unchanged; /* of those, rechecks cut short: mappings unchanged */
	uint64_t kube_renamed;	     /* sources renamed when their pod arrived */
	uint64_t cpu_inspect_ns;     /* main thread CPU time looking at processes */
	uint64_t maps_events;	     /* maps records read (a target's loader mapped or unmapped) */
	uint64_t maps_coalesced;     /* of those, folded into a look already pending */
	uint64_t maps_unknown;	     /* of those, of processes not in the table (or exited) */
	uint64_t maps_looks;	     /* looks they caused */
	uint64_t maps_deferred;	     /* looks put off to the next pass (too many due at once) */
	uint64_t tls_not_ready;	     /* looks that found a writer module but not its location */
	uint64_t loaders_found;	     /* processes whose dynamic loader was found in their maps */
	uint64_t loaders_missing;    /* processes without one (static, kernel threads, gone) */
	uint64_t py_found;	     /* processes running a CPython traceprof reads */
	uint64_t py_unsupported;     /* running a CPython version it has no layout for */
	uint64_t py_refused;	     /* found, but the sampler's map refused them (full) */
};

struct proctable {
	/* borrowed; sym is replaced by the agent when it renews the symbolizer */
	struct sampler *sampler;
	struct symbolizer *sym;
	struct agg *agg;       /* sources are registered there */
	struct triggers *trig; /* told who each process is, or NULL */
	struct unwind *unwind; /* unwind tables of its mappings, or NULL */
	struct kubepods *kube; /* pod names, or NULL */
	const char *node;      /* this node's name, for sources */
	bool target_pids;      /* processes are targets by pid (re-added after exec) */
	bool zerocode;	       /* HTTP/1.x requests found from system calls, every process */
	bool no_python;	       /* Python frames off (--python off) */
	struct zc_owners *zc;  /* who asked for that capture of a process, or NULL */
	struct pycache *pyc;   /* code objects of Python processes, forgotten with them; or NULL */
	int self_pid;	       /* the agent's own pid, never looked at */
	struct proc *procs;    /* open-addressing table by pid */
	size_t cap;	       /* slots (power of two) */
	size_t n;	       /* used slots */
	uint64_t next_gen;     /* proc.gen of the next entry */
	int64_t next_recheck_us; /* earliest proc.recheck_us (CLOCK_REALTIME) */
	size_t ndying;		 /* processes with exited_us set, not yet forgotten */
	int64_t first_exited_us; /* the earliest exited_us among them (0: not known) */
	uint64_t kube_gen;	 /* kubepods_generation() last acted on */
	bool uprobe_warned;	 /* said once that the SDK uprobe is unavailable */
	bool loader_warned;	 /* said once that the loader uprobe is unavailable */
	/*
	 * told after each full look at a process (first look, exec, new
	 * mappings), or NULL; true: its unwind tables are wanted now (its
	 * launch stacks are taken by a uprobe, not by samples)
	 */
	bool (*on_look)(void *ctx, int pid, uint64_t source_id);
	void *look_ctx;
	struct proctable_stats st;
};

/* The agent's clocks, in µs; the table's times are CLOCK_REALTIME. */
static inline int64_t agent_clock_us(clockid_t clk)
{
	struct timespec ts;

	clock_gettime(clk, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* CPU time of the calling thread, ns: a system call, so only around rare work. */
static inline uint64_t agent_thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* An empty table in a zeroed t (the caller sets the borrowed modules); -ENOMEM. */
int proctable_init(struct proctable *t);
void proctable_free(struct proctable *t);

/* A new entry for pid, looked at now (now_us: CLOCK_REALTIME); NULL: no memory. */
struct proc *proctable_add(struct proctable *t, int pid, int64_t now_us);
/*
 * An exec, exit, fork or maps record from the ring (sampler_event_fn). A
 * maps record (a dlopen or dlclose in the process) asks for a look at the
 * process soon: PROCTABLE_MAPS_SETTLE_US later (the loader finishes its
 * work after the record), at most one a process per
 * PROCTABLE_MAPS_GAP_US, many records of one process until then give one
 * look.
 */
#define PROCTABLE_MAPS_SETTLE_US 50000
#define PROCTABLE_MAPS_GAP_US	 250000
int proctable_on_event(void *ctx, const struct sampler_event *ev);
/* Looks at every running process (all-process mode), so their first samples are tagged. */
void proctable_scan_all(struct proctable *t);
/* Looks at the processes of a cgroup v2 directory and of its descendants. */
void proctable_scan_cgroup(struct proctable *t, const char *dir, int depth);
/*
 * Looks again at the processes that are due: maps records (at most a few
 * dozen looks a pass, the rest in the next) and the incomplete processes'
 * schedule; finds the next due time.
 */
void proctable_recheck(struct proctable *t, int64_t real_us);
/* Forgets the processes whose exit record was read a second ago or more. */
void proctable_forget_exited(struct proctable *t, int64_t real_us);
/* Forgets processes that exited (or whose pid now names another process). */
void proctable_sweep(struct proctable *t);
/* Pods arrived or changed: processes still under their pod UID get their pod's names. */
void proctable_rename_pods(struct proctable *t);

/* pid's entry, or NULL (the per-sample probe: no call, no allocation). */
static inline struct proc *proctable_find(const struct proctable *t, int pid)
{
	size_t mask = t->cap - 1, i = ids_hash_bytes(0, &pid, sizeof(pid)) & mask;

	for (;;) {
		struct proc *p = &t->procs[i];

		if (p->pid == pid)
			return p;
		if (p->pid == 0)
			return NULL;
		i = (i + 1) & mask;
	}
}

/* pid's entry, added and looked at when new; NULL: no memory. */
static inline struct proc *proctable_get(struct proctable *t, int pid, int64_t now_us)
{
	struct proc *p = proctable_find(t, pid);

	return p ? p : proctable_add(t, pid, now_us);
}

/*
 * A sample of p at t_us: a due recheck of a process that runs is brought
 * forward to now (the per-sample part of the recheck schedule), and its
 * unwind tables are asked for at its first sample (or first since its
 * mappings changed), so that tables are built for the files of processes
 * that are sampled, not of every process the agent looked at.
 */
void proctable_note_unwind(struct proctable *t, struct proc *p);

static inline void proctable_sampled(struct proctable *t, struct proc *p, int64_t t_us)
{
	p->last_sample_us = t_us;
	if (!p->unwind_noted && t->unwind)
		proctable_note_unwind(t, p); /* tables for the files of processes that run */
	if (!p->complete && p->recheck_us && t_us >= p->recheck_us && t_us < t->next_recheck_us)
		t->next_recheck_us = t_us; /* a due process that runs: look at it now */
}

#endif
