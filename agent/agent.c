/*
 * agent.c - the agent's pipeline, on one thread (the shipper has its own).
 *
 * Per sample from the BPF ring buffer: the process it came from is looked
 * up in a table (first sight: service identity, thread-context location for
 * the BPF side, SDK uprobe, symbol snapshot); its raw stack is turned into
 * a stack id through a cache keyed by (process, raw frames), and only a
 * cache miss symbolizes and registers functions, frames and the stack with
 * the aggregator; then the sample is counted. Windows closed by the
 * aggregator go to the shipper, which owns the database connection.
 *
 * The OTLP receivers (otlp_grpc.c, otlp_http.c) run on their own threads
 * and never touch the aggregator: each export becomes a batch of request
 * rows that goes straight into the shipper's queue (shipper_submit() is
 * thread-safe), next to the sample windows. Each request row is shown to
 * the trigger engine first (triggers.c), which the AgentControl server
 * (control.c, its own thread) programs; the engine learns the processes
 * from proc_inspect() and is ticked by the main loop.
 *
 * Workload: tens to thousands of samples per second per node, dominated by
 * repeats of the same hot stacks, so the steady state is a hash of the raw
 * frames, one cache probe and one aggregator probe per sample, no
 * allocation.
 */
#include "agent.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "aggregate.h"
#include "hold.h"
#include "control.h"
#include "identity.h"
#include "kubepods.h"
#include "otlp.h"
#include "otlp_forward.h"
#include "otlp_grpc.h"
#include "otlp_http.h"
#include "procmem.h"
#include "sampler.h"
#include "shipper.h"
#include "spool.h"
#include "symbolize.h"
#include "tlsloc.h"
#include "traceprof/hex.h"
#include "traceprof/ids.h"
#include "traceprof/log.h"
#include "triggers.h"
#include "triggers_control.h"

#define STACK_CACHE_SIZE 65536	   /* raw stack -> stack id entries (power of two) */
#define MAX_STACK_FRAMES 512	   /* the store's limit on frames per stack */
#define MAX_INLINE	 8	   /* inlined frames kept per address */
#define RECHECK_MIN_US	 1000000   /* first re-look at an incomplete process */
#define RECHECK_FAST_US	 4000000   /* looks (x4) up to this step... */
#define RECHECK_MAX_US	 120000000 /* ...then every 2 min, only if sampled meanwhile */
#define SWEEP_EVERY_US	 300000000 /* look for dead processes whose exit record was lost */
#define RENEW_EVERY_US	 10000000  /* check the symbolizer's name budget this often */
#define EXIT_GRACE_US	 1000000   /* an exited process is forgotten this long after its record */
#define POLL_MAX_MS	 10000	   /* longest sleep of the main loop */

/* The listening ports, for their connection counters (conns_stopped, write_conn_stats). */
enum { CONN_PORT_OTLP_GRPC, CONN_PORT_OTLP_HTTP, CONN_PORT_CONTROL };
#define STOP_FLUSH_MS	  10000 /* final flush deadline */
#define KUBE_SYNC_WAIT_MS 3000	/* at start, wait this long for the node's pods */

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
	bool pod_named;	   /* its source carries the pod's namespace and name */
	int64_t exited_us; /* when its exit record was read (realtime µs); 0: running */
};

/* One cached raw stack. */
struct stack_slot {
	uint64_t key;	   /* hash of (pid, start time, entry, frames); 0 = empty */
	uint64_t stack_id; /* ids_stack() of its symbolized frames */
};

/* The trigger engine's verdict on one request, on its way to the main loop. */
#define DECISIONS_MAX 4096
struct decision {
	uint8_t trace_id[16];
	bool keep;	      /* claimed: keep its raised samples */
	char trigger_id[201]; /* for keep */
};

struct agent {
	struct agent_config cfg;		  /* settings (copied) */
	struct sampler *sampler;		  /* BPF side */
	struct symbolizer *sym;			  /* symbol tables */
	struct agg *agg;			  /* open window */
	struct shipper *shipper;		  /* database side */
	struct otlp_receiver *otlp;		  /* OTLP exports -> request rows */
	struct otlp_grpc *otlp_grpc;		  /* OTLP/gRPC server, or NULL */
	struct otlp_http *otlp_http;		  /* OTLP/HTTP server, or NULL */
	struct otlp_forward *otlp_fwd;		  /* upstream forwarding, or NULL */
	struct otlp_forward_stats fwd_stats;	  /* its counters (copy_server_counts) */
	struct hold *hold;			  /* raised samples per trace, until decided */
	uint64_t raised;			  /* samples of the raised events received */
	uint64_t raised_unheld;			  /* of those, refused by the hold */
	uint64_t hold_rows;			  /* rows of kept traces (on_hold_rows) */
	uint64_t hold_rows_lost;		  /* of those, not queued (no memory, bad id) */
	struct triggers *trig;			  /* trigger engine */
	pthread_mutex_t raise_lock;		  /* serializes on_raise's sampler switches */
	uint64_t raise_errors;			  /* raises the sampler refused */
	pthread_mutex_t decide_lock;		  /* guards the decisions ring */
	struct decision decisions[DECISIONS_MAX]; /* from the claim worker to the main loop */
	size_t decide_head;			  /* oldest queued decision */
	size_t ndecisions;			  /* queued */
	uint64_t decisions_dropped;		  /* ring full: those traces' holds expire */
	struct control *control;		  /* AgentControl server, or NULL */
	struct control_stats control_stats;	  /* its counters (copy_server_counts) */
	struct kubepods *kube;			  /* the node's pods (Kubernetes API), or NULL */
	uint64_t kube_gen;			  /* kubepods_generation() last acted on */
	uint64_t kube_renamed;			  /* sources renamed when their pod arrived */
	uint32_t cpus_online;			  /* at start: sysconf reads sysfs every call */
	uint64_t http_timeouts;			  /* OTLP/HTTP connections closed as too slow */
	uint64_t http_refused;			  /* OTLP/HTTP connections refused when full */
	struct tp_conn_limits conn_limits;	  /* every listening port's caps and timeouts */
	struct tp_conn_stats conns_stopped[3];	  /* per CONN_PORT_*: counters of a stopped port */
	struct spool *spool;			  /* windows on disk until committed, or NULL */
	struct spool_previous spool_prev;	  /* how the previous run ended */
	uint64_t closed_samples;		  /* samples of the windows closed */
	struct proc *procs;			  /* open-addressing table by pid */
	size_t nprocs_cap;			  /* slots (power of two) */
	size_t nprocs;				  /* used slots */
	struct stack_slot *stacks;		  /* STACK_CACHE_SIZE entries */
	uint64_t stacks_evictions;		  /* agg_dict_evictions() they are valid for */
	int64_t mono_to_real_us;		  /* CLOCK_REALTIME - CLOCK_MONOTONIC, µs */
	int64_t next_recheck_us;		  /* earliest proc.recheck_us (CLOCK_REALTIME) */
	int self_pid;				  /* the agent's own pid, never sampled */
	uint64_t next_gen;			  /* proc.gen of the next entry */
	bool uprobe_warned;			  /* said once that the SDK uprobe is unavailable */
	uint64_t frame_ids[MAX_STACK_FRAMES];	  /* scratch for one stack */
	/* counters (stats file) */
	uint64_t samples;	     /* samples received */
	uint64_t samples_self;	     /* of the agent itself, skipped */
	uint64_t tagged;	     /* with a valid thread context */
	uint64_t invalid_ctx;	     /* context record present but not valid */
	uint64_t ctx_faults;	     /* context unreadable */
	uint64_t stack_hits;	     /* raw stack cache hits */
	uint64_t stack_misses;	     /* symbolized stacks */
	uint64_t agg_refused;	     /* samples the aggregator refused */
	uint64_t procs_seen;	     /* processes looked at */
	uint64_t tls_found;	     /* of those, with a thread context location */
	uint64_t tls_unsupported;    /* symbol found, placement not supported */
	uint64_t sym_renewals;	     /* symbolizers replaced to bound interned names */
	uint64_t execs;		     /* new programs started by sampled processes */
	uint64_t forks;		     /* processes forked by sampled processes */
	uint64_t procs_inherited;    /* forked processes given their parent's look */
	uint64_t loop_passes;	     /* main loop passes (its wake-ups) */
	size_t ndying;		     /* processes with exited_us set, not yet forgotten */
	int64_t first_exited_us;     /* the earliest exited_us among them (0: not known) */
	uint64_t exits;		     /* processes ended (exit records) */
	uint64_t swept;		     /* dead processes found by the sweep (exit record lost) */
	uint64_t inspections;	     /* proc_inspect() calls (first sight, exec, rechecks) */
	uint64_t rechecks_unchanged; /* of those, rechecks cut short: mappings unchanged */
	/* the main thread's CPU time, where it goes (ns; CLOCK_THREAD_CPUTIME_ID) */
	uint64_t cpu_inspect_ns;   /* looking at processes */
	uint64_t cpu_symbolize_ns; /* symbolizing stacks first seen */
	uint64_t cpu_poll_ns;	   /* reading the ring (samples, symbolizing included) */
	uint64_t cpu_window_ns;	   /* closing windows and handing them to the shipper */
};

/* CPU time of the calling thread, ns: a system call, so only around rare work. */
static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int64_t clock_us(clockid_t clk)
{
	struct timespec ts;

	clock_gettime(clk, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void sync_clocks(struct agent *a)
{
	a->mono_to_real_us = clock_us(CLOCK_REALTIME) - clock_us(CLOCK_MONOTONIC);
}

/* ---- process table ---- */

static struct proc *proc_slot(struct agent *a, int pid, bool insert)
{
	size_t mask = a->nprocs_cap - 1, i = ids_hash_bytes(0, &pid, sizeof(pid)) & mask;

	for (;;) {
		struct proc *p = &a->procs[i];

		if (p->pid == pid)
			return p;
		if (p->pid == 0) {
			if (!insert)
				return NULL;
			memset(p, 0, sizeof(*p));
			p->pid = pid;
			a->nprocs++;
			return p;
		}
		i = (i + 1) & mask;
	}
}

static int procs_grow(struct agent *a)
{
	struct proc *old = a->procs;
	size_t oldcap = a->nprocs_cap;

	a->procs = calloc(oldcap * 2, sizeof(*a->procs));
	if (!a->procs) {
		a->procs = old;
		return -ENOMEM;
	}
	a->nprocs_cap = oldcap * 2;
	a->nprocs = 0;
	for (size_t i = 0; i < oldcap; i++)
		if (old[i].pid)
			*proc_slot(a, old[i].pid, true) = old[i];
	free(old);
	return 0;
}

/* Removes p, re-inserting the run of entries after it (linear probing). */
static void proc_remove(struct agent *a, struct proc *p)
{
	size_t mask = a->nprocs_cap - 1, i = (size_t)(p - a->procs);

	if (a->trig)
		triggers_proc_remove(a->trig, (uint32_t)p->pid);
	if (p->exited_us)
		a->ndying--;
	p->pid = 0;
	a->nprocs--;
	for (i = (i + 1) & mask; a->procs[i].pid; i = (i + 1) & mask) {
		struct proc tmp = a->procs[i];

		a->procs[i].pid = 0;
		a->nprocs--;
		*proc_slot(a, tmp.pid, true) = tmp;
	}
}

/*
 * Attaches the SDK registration uprobe to module, the file that defines the
 * process's otel_thread_ctx_v1 (libtraceprof-sdk.so, or an executable
 * linking the static SDK). Other writers have no probe function (-ENOENT):
 * their threads are found through the TLS location alone.
 */
static void attach_sdk_uprobe(struct agent *a, struct proc *p, const char *module)
{
	char full[PROCMEM_PATH_MAX + 64];
	int rc;

	p->sdk_uprobe = true;
	snprintf(full, sizeof(full), "/proc/%d/root%s", p->pid, module);
	rc = sampler_attach_sdk_uprobe(a->sampler, full, -1);
	p->sdk_probe = rc == 0;
	if (rc != 0 && rc != -ENOENT && !a->uprobe_warned) {
		/* needs CAP_SYS_ADMIN; the TLS location finds the same records */
		log_info("SDK registration uprobe unavailable (%s); threads are found "
			 "through their TLS alone",
			 strerror(-rc));
		a->uprobe_warned = true;
	}
}

/* Tells the trigger engine who the process is (targets by service, container, pod, cgroup). */
static void note_trigger_proc(struct agent *a, int pid, const struct identity *id)
{
	struct triggers_proc tp = {
	    .pid = (uint32_t)pid,
	    .service = id->service_name,
	    .container_id = id->container_id,
	    .pod_uid = id->pod_uid,
	    .cgroup = id->cgroup_v2 ? id->cgroup_v2 : "", /* read with the identity */
	};

	if (!a->trig)
		return;
	if (triggers_proc_add(a->trig, &tp) != 0)
		log_warn("triggers: out of memory noting pid=%d", pid);
}

/* The next look at an incomplete process: 1 s, 4 s, then every 2 min if it runs. */
static void schedule_recheck(struct agent *a, struct proc *p, int64_t now_us)
{
	p->recheck_step_us = p->recheck_step_us ? p->recheck_step_us * 4 : RECHECK_MIN_US;
	if (p->recheck_step_us > RECHECK_FAST_US)
		p->recheck_step_us = RECHECK_MAX_US;
	p->recheck_us = now_us + p->recheck_step_us;
	if (p->recheck_us < a->next_recheck_us)
		a->next_recheck_us = p->recheck_us;
}

/* procmem_maps_fingerprint() of pid's mappings, 0 when they cannot be read. */
static uint64_t maps_fingerprint(int pid)
{
	struct procmem_maps pm;
	uint64_t fp;

	if (procmem_maps_read(pid, &pm) != 0)
		return 0;
	fp = procmem_maps_fingerprint(&pm);
	procmem_maps_free(&pm);
	return fp;
}

/*
 * The source of a process from its identity: with the Kubernetes API on
 * and its pod known, the pod's namespace, name and labels; else the pod
 * UID stands in for the name until the pod arrives (rename_pod_procs).
 */
static void proc_set_source(struct agent *a, struct proc *p, const struct identity *id)
{
	struct kubepods_pod pod = {0};
	struct store_source src = {0};

	snprintf(p->pod_uid, sizeof(p->pod_uid), "%s", id->pod_uid);
	p->pod_named = id->pod_uid[0] && kubepods_find_uid(a->kube, id->pod_uid, &pod);
	src.service = id->service_name;
	src.namespace_ = p->pod_named ? pod.namespace_ : "";
	src.pod = p->pod_named ? pod.name : id->pod_uid;
	src.container = id->container_id;
	src.node = a->cfg.node;
	src.build_id = id->build_id;
	src.labels_json = pod.labels_json;
	p->source_id =
	    ids_source(src.service, src.namespace_, src.pod, src.container, src.node, src.build_id);
	if (!agg_has_source(a->agg, p->source_id))
		agg_add_source(a->agg, p->source_id, &src);
	free(pod.labels_json);
}

/*
 * Pods arrived or changed: processes still under their pod UID get their
 * pod's names from now on (samples already aggregated keep the old source).
 */
static void rename_pod_procs(struct agent *a)
{
	uint64_t gen = kubepods_generation(a->kube);

	if (gen == a->kube_gen)
		return;
	a->kube_gen = gen;
	for (size_t i = 0; i < a->nprocs_cap; i++) {
		struct proc *p = &a->procs[i];
		struct identity id;

		if (!p->pid || !p->pod_uid[0] || p->pod_named)
			continue;
		if (identity_read(p->pid, &id) != 0)
			continue;
		proc_set_source(a, p, &id);
		if (p->pod_named) {
			a->kube_renamed++;
			log_debug("process pid=%d now named after its pod uid=%s", p->pid,
				  p->pod_uid);
		}
		identity_clear(&id);
	}
}

/*
 * Looks at a process: identity -> source, thread-context location -> BPF,
 * symbols snapshot. Called at first sight and again, with backoff, while
 * the process has not published everything yet (an SDK that starts after
 * the agent first saw the process).
 */
static const char *proc_inspect_now(struct agent *a, struct proc *p, int64_t now_us)
{
	const char *what = "again: mappings changed";
	struct identity id;
	struct tp_tls_loc loc;
	struct tlsloc_info info;
	bool has_ctx = false, has_tls = false, kernel_thread = false;
	uint64_t fp;
	int rc;

	p->inspected_us = now_us;
	fp = maps_fingerprint(p->pid);
	if (p->start_time == 0) {
		what = "first look";
		a->procs_seen++;
		p->start_time = procmem_start_time(p->pid);
		sym_note_process(a->sym, p->pid);
	} else if (fp && fp == p->maps_fp) {
		/*
		 * A recheck, and no library came or went and nothing was published
		 * since the last look (the environment cannot change without an
		 * exec, which starts over): what it would find is what it found.
		 */
		a->rechecks_unchanged++;
		schedule_recheck(a, p, now_us);
		return "again: mappings unchanged";
	}
	p->maps_fp = fp;
	if (identity_read(p->pid, &id) == 0) {
		proc_set_source(a, p, &id);
		note_trigger_proc(a, p->pid, &id);
		has_ctx = id.source == IDENTITY_FROM_PROCCTX;
		kernel_thread = id.source == IDENTITY_FROM_COMM && !id.build_id[0];
		log_debug("process pid=%d service=%s from=%d build_id=%s", p->pid, id.service_name,
			  (int)id.source, id.build_id);
		identity_clear(&id);
	} else if (p->source_id == 0) {
		p->source_id = ids_source("[unknown]", "", "", "", a->cfg.node, "");
		if (!agg_has_source(a->agg, p->source_id)) {
			struct store_source unk = {"[unknown]", "", "", "", a->cfg.node, "", ""};

			agg_add_source(a->agg, p->source_id, &unk);
		}
	}
	rc = tlsloc_resolve(p->pid, 0, &loc, &info);
	/* first the uprobe: the location says whether it is attached */
	if (!p->sdk_uprobe && info.module[0])
		attach_sdk_uprobe(a, p, info.module);
	if (rc == 0 && loc.kind != TP_TLS_NONE) {
		has_tls = true;
		loc.sdk_probe = p->sdk_probe;
		if (sampler_set_tls(a->sampler, p->pid, &loc) == 0 && !p->tls_known) {
			p->tls_known = true;
			a->tls_found++;
		}
		log_debug("thread context pid=%d module=%s kind=%u", p->pid, info.module, loc.kind);
	} else if (rc == -EOPNOTSUPP && p->recheck_step_us == 0) {
		a->tls_unsupported++;
		log_info("thread context of pid=%d is in %s, whose TLS placement is not "
			 "supported; its samples stay untagged unless it uses the traceprof SDK",
			 p->pid, info.module);
	}
	p->complete = (has_ctx && has_tls) || kernel_thread; /* kernel threads never change */
	if (!p->complete)
		schedule_recheck(a, p, now_us);
	return what;
}

/* proc_inspect_now, with its maps read once and its CPU time counted. */
static void proc_inspect(struct agent *a, struct proc *p, int64_t now_us)
{
	uint64_t t0 = thread_cpu_ns(), ns;
	const char *what;

	procmem_maps_scope_begin(p->pid); /* one read of its maps for every part of the look */
	what = proc_inspect_now(a, p, now_us);
	procmem_maps_scope_end();
	a->inspections++;
	ns = thread_cpu_ns() - t0;
	a->cpu_inspect_ns += ns;
	log_debug("looked at pid=%d (%s) in %" PRIu64 " us", p->pid, what, ns / 1000);
}

static struct proc *proc_get(struct agent *a, int pid, int64_t now_us)
{
	struct proc *p = proc_slot(a, pid, false);

	if (p)
		return p;
	if ((a->nprocs + 1) * 2 > a->nprocs_cap && procs_grow(a) != 0)
		return NULL;
	p = proc_slot(a, pid, true);
	p->gen = ++a->next_gen;
	proc_inspect(a, p, now_us);
	return p;
}

/*
 * Forgets the processes whose exit record was read EXIT_GRACE_US ago or
 * more. Called after the ring was read: the samples of the end of their
 * exit, taken microseconds after the record, have been read by then.
 */
static void procs_forget_exited(struct agent *a, int64_t real)
{
	int64_t first = 0;

	/* nothing is due before the earliest exit's grace ends: no walk of the table */
	if (a->first_exited_us && real - a->first_exited_us < EXIT_GRACE_US)
		return;
	for (size_t i = 0; a->ndying && i < a->nprocs_cap; i++) {
		struct proc *p = &a->procs[i];

		if (!p->pid || !p->exited_us)
			continue;
		if (real - p->exited_us < EXIT_GRACE_US) {
			if (!first || p->exited_us < first)
				first = p->exited_us;
			continue;
		}
		sym_forget_process(a->sym, p->pid);
		proc_remove(a, p);
		i--; /* the slot may now hold an entry moved back */
	}
	a->first_exited_us = first; /* 0 (walk next time) if an entry moved past the walk */
}

/* Forgets processes that exited (or whose pid now names another process). */
static void procs_sweep(struct agent *a)
{
	for (size_t i = 0; i < a->nprocs_cap; i++) {
		struct proc *p = &a->procs[i];
		uint64_t st;

		if (!p->pid)
			continue;
		st = procmem_start_time(p->pid);
		if (st != 0 && st == p->start_time)
			continue;
		log_debug("process gone pid=%d", p->pid);
		a->swept++;
		sampler_forget_pid(a->sampler, p->pid);
		sym_forget_process(a->sym, p->pid);
		if (a->cfg.target == CONFIG_TARGET_PIDS && st != 0)
			sampler_add_target_pid(a->sampler, p->pid); /* still a target by pid */
		proc_remove(a, p);
		i--; /* the slot may now hold an entry moved back */
	}
}

/* ---- stacks ---- */

static int add_frame(struct agent *a, const struct sym_frame *f, size_t *n)
{
	uint64_t fn, fr;

	if (*n >= MAX_STACK_FRAMES)
		return 0; /* deeper than the store keeps: the leaf side is cut */
	fn = ids_function(f->module, f->function);
	fr = ids_frame(fn, f->build_id, f->file, f->line, f->address);
	agg_add_function(a->agg, fn, f->function, f->module, f->kind);
	agg_add_frame(a->agg, fr, fn, f->build_id, f->file, f->line, f->address);
	a->frame_ids[(*n)++] = fr;
	return 0;
}

/*
 * Symbolizes a sample's frames (root first: user, then kernel) into a
 * stack id; returns whether the aggregator has the stack registered.
 */
static bool symbolize_stack(struct agent *a, const struct tp_sample *s, uint64_t *id)
{
	const __u64 *kern = s->ips, *user = s->ips + s->kern_n;
	struct sym_frame frames[MAX_INLINE];
	size_t n = 0;

	for (int i = (int)s->user_n - 1; i >= 0; i--) {
		uint64_t ip = user[i] - (i > 0 ? 1 : 0);
		int k = sym_user(a->sym, (int)s->pid, ip, frames, MAX_INLINE);

		for (int j = 0; j < k; j++)
			add_frame(a, &frames[j], &n);
	}
	for (int i = (int)s->kern_n - 1; i >= 0; i--) {
		uint64_t ip = kern[i] - (i > 0 ? 1 : 0);

		if (sym_kernel(a->sym, ip, frames) == 1)
			add_frame(a, &frames[0], &n);
	}
	if (n == 0) {
		struct sym_frame none = {.function = "[no stack]",
					 .module = "",
					 .build_id = "",
					 .kind = SYM_KIND_UNKNOWN};

		add_frame(a, &none, &n);
	}
	*id = ids_stack(a->frame_ids, n);
	return agg_add_stack(a->agg, *id, a->frame_ids, n) == 0;
}

static uint64_t stack_of(struct agent *a, const struct tp_sample *s, const struct proc *p)
{
	/* kern_n in the seed: the same addresses split differently are another stack */
	uint64_t key = ids_hash_bytes(((uint64_t)p->pid << 32) ^ ((uint64_t)s->kern_n << 16) ^
					  p->start_time ^ (p->gen << 40),
				      s->ips, ((size_t)s->kern_n + s->user_n) * sizeof(uint64_t)) |
		       1;
	struct stack_slot *slot;
	uint64_t t0, id;

	if (agg_dict_evictions(a->agg) != a->stacks_evictions) {
		/* the aggregator forgot idle stacks: cached ids may need registering again */
		a->stacks_evictions = agg_dict_evictions(a->agg);
		memset(a->stacks, 0, STACK_CACHE_SIZE * sizeof(*a->stacks));
	}
	slot = &a->stacks[key & (STACK_CACHE_SIZE - 1)];
	if (slot->key == key) {
		a->stack_hits++;
		return slot->stack_id;
	}
	t0 = thread_cpu_ns();
	a->stack_misses++;
	/* cached only when registered: a refused stack is tried again at its next sample */
	slot->key = symbolize_stack(a, s, &id) ? key : 0;
	slot->stack_id = id;
	a->cpu_symbolize_ns += thread_cpu_ns() - t0;
	return id;
}

/* ---- the sample callback ---- */

static void ship_closed(struct agent *a)
{
	struct agg_window *w;

	while ((w = agg_take(a->agg)) != NULL) {
		log_debug("window closed start=%" PRId64 " rows=%zu samples=%" PRIu64, w->start_us,
			  w->nrows, w->nsamples);
		a->closed_samples += w->nsamples;
		shipper_submit(a->shipper, w);
	}
}

/*
 * A sample of the raised events (docs/triggers.md): held under its trace
 * until the trigger engine decides (hold_decide). Returns whether it also
 * goes into the continuous profile: only the BASE subsample, at the base
 * Hz, so a trigger never inflates it.
 */
static bool hold_raised(struct agent *a, struct agg_sample *as, unsigned flags)
{
	a->raised++;
	if (hold_add(a->hold, as) != 0)
		a->raised_unheld++;
	as->hz = (uint16_t)a->cfg.frequency;
	return flags & TP_SAMPLE_BASE;
}

/* A kept trace's rows; the integration with the store writes them to trigger_samples. */
static void on_hold_rows(void *ctx, const char *trigger_id, const struct store_sample_row *row)
{
	struct agent *a = ctx;

	struct agg_window *w;

	a->hold_rows++;
	log_debug("trigger rows trigger=%s span=%016" PRIx64 " hz=%u stacks=%u", trigger_id,
		  row->span_id, row->hz, row->n);
	/* its own window with the stacks it needs: base windows may not carry them */
	w = agg_trigger_window(a->agg, trigger_id, row, 1);
	if (w)
		shipper_submit(a->shipper, w);
	else
		a->hold_rows_lost++;
}

static int on_sample(void *ctx, const struct tp_sample *s, size_t len)
{
	struct agent *a = ctx;
	int64_t t_us = (int64_t)(s->time_ns / 1000) + a->mono_to_real_us;
	struct agg_sample as;
	struct proc *p;

	(void)len;
	a->samples++;
	if ((int)s->pid == a->self_pid) {
		a->samples_self++;
		return 0;
	}
	p = proc_get(a, (int)s->pid, t_us);
	if (!p)
		return 0;
	p->last_sample_us = t_us;
	if (!p->complete && p->recheck_us && t_us >= p->recheck_us && t_us < a->next_recheck_us)
		a->next_recheck_us = t_us; /* a due process that runs: look at it now */
	memset(&as, 0, sizeof(as));
	as.time_us = t_us;
	as.source_id = p->source_id;
	as.hz = s->hz;
	switch (s->ctx_state) {
	case TP_CTX_TAGGED: {
		uint64_t span = 0;

		for (int i = 0; i < 8; i++)
			span = span << 8 | s->span_id[i];
		memcpy(as.trace_id, s->trace_id, 16);
		as.span_id = span;
		a->tagged++;
		/* a record with a zero trace or span id is not a request (the SDK refuses them) */
		if (span == 0 || !memcmp(as.trace_id, (uint8_t[16]){0}, 16)) {
			memset(as.trace_id, 0, 16);
			as.span_id = 0;
		}
		break;
	}
	case TP_CTX_INVALID:
		a->invalid_ctx++;
		break;
	case TP_CTX_FAULT:
		a->ctx_faults++;
		break;
	default:
		break;
	}
	as.stack_id = stack_of(a, s, p);
	if ((s->flags & TP_SAMPLE_RAISED) && !hold_raised(a, &as, s->flags))
		return 0;
	if (agg_add(a->agg, &as) < 0)
		a->agg_refused++;
	ship_closed(a);
	return 0;
}

/*
 * Process pid was forked by parent: it runs the parent's program in a copy
 * of its memory, so it is the parent's service with the parent's symbols,
 * and the BPF side already gave it the parent's thread-context location.
 * It gets the parent's look at once, without reading /proc, so a child
 * gone before its samples are read (a forked worker, a database backend of
 * a short connection) keeps its name and symbols. An unknown parent leaves
 * the child to be looked at on its first sample, as any new process.
 */
static void proc_inherit(struct agent *a, pid_t pid, pid_t parent, uint64_t start_time)
{
	struct proc *from = proc_slot(a, parent, false), copy, *p;
	int64_t now = clock_us(CLOCK_REALTIME);

	if (!from || !from->start_time)
		return;
	copy = *from; /* proc_slot may move the table */
	p = proc_slot(a, pid, false);
	if (p) {
		/* the pid was reused (the old process's exit record was lost); the
		 * sampler's entries for pid are already the child's */
		sym_forget_process(a->sym, pid);
		proc_remove(a, p);
	}
	if ((a->nprocs + 1) * 2 > a->nprocs_cap && procs_grow(a) != 0)
		return;
	p = proc_slot(a, pid, true);
	p->start_time = start_time;
	p->gen = ++a->next_gen;
	p->source_id = copy.source_id;
	p->complete = copy.complete;
	p->sdk_uprobe = copy.sdk_uprobe; /* attached for every process */
	p->sdk_probe = copy.sdk_probe;
	p->tls_known = copy.tls_known;
	p->inspected_us = now;
	p->maps_fp = copy.maps_fp;
	memcpy(p->pod_uid, copy.pod_uid, sizeof(p->pod_uid));
	p->pod_named = copy.pod_named;
	if (!p->complete)
		schedule_recheck(a, p, now);
	sym_inherit_process(a->sym, pid, parent, start_time);
	a->procs_inherited++;
}

/*
 * A sampled process started a new program: what the agent knew about it
 * (symbols, thread-context location, identity) is of the old one. Look at
 * it afresh now, while it runs, so its symbols are cached even if it exits
 * before its samples are read. A process that ended (its last thread
 * exited; all its samples came before this record) is forgotten.
 */
static int on_event(void *ctx, const struct sampler_event *ev)
{
	struct agent *a = ctx;
	enum tp_record_kind kind = ev->kind;
	pid_t pid = ev->pid;
	struct proc *p = proc_slot(a, pid, false);

	if (pid == a->self_pid)
		return 0;
	if (kind == TP_REC_FORK) {
		a->forks++;
		if (!p || p->start_time != ev->start_time)
			proc_inherit(a, pid, ev->parent, ev->start_time);
		return 0;
	}
	if (kind == TP_REC_EXIT) {
		a->exits++;
		/*
		 * The BPF side already dropped its TLS location and target entry.
		 * The kernel still runs the rest of the exit (freeing the memory,
		 * telling the parent) after the record, and samples of that come
		 * after it in the ring: the process is forgotten a little later
		 * (procs_forget_exited), so they keep its name.
		 */
		if (p && !p->exited_us) {
			p->exited_us = clock_us(CLOCK_REALTIME);
			if (!a->ndying++ || p->exited_us < a->first_exited_us)
				a->first_exited_us = p->exited_us;
		}
		return 0;
	}
	if (kind != TP_REC_EXEC)
		return 0;
	a->execs++;
	if (p) {
		sampler_forget_pid(a->sampler, pid);
		sym_forget_process(a->sym, pid);
		if (a->cfg.target == CONFIG_TARGET_PIDS)
			sampler_add_target_pid(a->sampler, pid);
		proc_remove(a, p);
	}
	proc_get(a, pid, clock_us(CLOCK_REALTIME));
	return 0;
}

/* ---- life cycle ---- */

/* Looks at every running process (all-process mode), so their first samples are tagged. */
static void scan_processes(struct agent *a)
{
	DIR *d = opendir("/proc");
	struct dirent *de;
	int64_t now = clock_us(CLOCK_REALTIME);

	if (!d)
		return;
	while ((de = readdir(d)) != NULL) {
		char *end;
		long pid = strtol(de->d_name, &end, 10);

		if (*end || pid <= 0 || pid == a->self_pid)
			continue;
		proc_get(a, (int)pid, now);
	}
	closedir(d);
}

/* Looks at the processes of a cgroup v2 directory and of its descendants. */
static void scan_cgroup(struct agent *a, const char *dir, int depth)
{
	char path[PATH_MAX];
	struct dirent *de;
	FILE *f;
	DIR *d;
	int pid;

	if (snprintf(path, sizeof(path), "%s/cgroup.procs", dir) >= (int)sizeof(path))
		return;
	f = fopen(path, "r");
	if (f) {
		int64_t now = clock_us(CLOCK_REALTIME);

		while (fscanf(f, "%d", &pid) == 1)
			if (pid > 0 && pid != a->self_pid)
				proc_get(a, pid, now);
		fclose(f);
	}
	if (depth >= 16 || !(d = opendir(dir)))
		return;
	while ((de = readdir(d)) != NULL)
		if (de->d_type == DT_DIR && de->d_name[0] != '.' &&
		    snprintf(path, sizeof(path), "%s/%s", dir, de->d_name) < (int)sizeof(path))
			scan_cgroup(a, path, depth + 1);
	closedir(d);
}

static const struct agg_source *batch_source(const struct agg_window *w, uint64_t id)
{
	for (size_t i = 0; i < w->nsources; i++)
		if (w->sources[i].id == id)
			return &w->sources[i];
	return NULL;
}

static const struct agg_route *batch_route(const struct agg_window *w, uint64_t id)
{
	for (size_t i = 0; id && i < w->nroutes; i++)
		if (w->routes[i].id == id)
			return &w->routes[i];
	return NULL;
}

/* Shows every request row of an OTLP batch to the trigger engine. */
static void requests_to_triggers(struct agent *a, const struct agg_window *w)
{
	for (size_t i = 0; i < w->nrequests; i++) {
		const struct store_request *r = &w->requests[i];
		const struct agg_source *src = batch_source(w, r->source_id);
		const struct agg_route *rt = batch_route(w, r->route_id);
		struct triggers_source ts = {0};
		struct triggers_request tr = {
		    .start_us = r->start_us,
		    .duration_us = r->duration_us,
		    .status = r->status_code,
		    .route = rt ? rt->route : NULL,
		    .method = rt ? rt->method : NULL,
		};

		if (src) {
			ts.service = src->src.service;
			ts.container_id = src->src.container;
		}
		memcpy(tr.trace_id, r->trace_id, 16);
		triggers_request(a->trig, &ts, &tr);
	}
}

/*
 * OTLP batches never push out queued data: no room means UNAVAILABLE / 503, and the sender
 * retries. The trigger engine sees the rows first (a retried batch is seen again; a claim
 * never takes a trace twice).
 */
static int submit_requests(void *ctx, struct agg_window *w)
{
	struct agent *a = ctx;

	if (a->trig)
		requests_to_triggers(a, w);
	return shipper_offer(a->shipper, w);
}

static int forward_export(void *ctx, const void *buf, size_t len)
{
	return otlp_forward_submit(ctx, buf, len);
}

/* OTLP resources name a pod by k8s.pod.uid or container.id (otlp.h). */
static bool otlp_pod_lookup(void *ctx, const char *pod_uid, const char *container_id,
			    struct kubepods_pod *out)
{
	struct kubepods *kp = ctx;

	return (pod_uid && *pod_uid && kubepods_find_uid(kp, pod_uid, out)) ||
	       (container_id && *container_id && kubepods_find_container(kp, container_id, out));
}

/*
 * The node's pods from the Kubernetes API: with kubeconfig, or in-cluster
 * when kube-in-cluster is on (auto: when KUBERNETES_SERVICE_HOST is set).
 * A configuration that cannot be read stops the start; an API server that
 * does not answer does not (kubepods.h).
 */
/* A pod arrived or changed (informer thread): the main loop names its processes now. */
static void on_pods_changed(void *ctx)
{
	struct agent *a = ctx;

	sampler_wake(a->sampler);
}

static int start_kube(struct agent *a)
{
	struct kubepods_opts ko = {.kubeconfig = a->cfg.kubeconfig,
				   .node = a->cfg.node,
				   .on_change = on_pods_changed,
				   .change_ctx = a};
	bool in_cluster =
	    a->cfg.kube_in_cluster == CONFIG_ON ||
	    (a->cfg.kube_in_cluster == CONFIG_AUTO && getenv("KUBERNETES_SERVICE_HOST"));
	char err[512];

	if (!a->cfg.kubeconfig[0] && !in_cluster)
		return 0;
	a->kube = kubepods_start(&ko, err, sizeof(err));
	if (!a->kube) {
		log_error("cannot read pods from the Kubernetes API: %s (set kubeconfig, or "
			  "kube-in-cluster=off to run without pod names)",
			  err);
		return -EINVAL;
	}
	/* The processes already running are looked at first thing: name them at once if the
	 * API server answers quickly; if not, they are renamed when their pods arrive. */
	if (!kubepods_wait_synced(a->kube, KUBE_SYNC_WAIT_MS))
		log_info("kube: pods of node=%s not listed within %d ms; starting without them",
			 a->cfg.node, KUBE_SYNC_WAIT_MS);
	return 0;
}

/*
 * The OTLP receivers. An address that cannot be bound is logged and that
 * receiver stays off: the profiler keeps running (docs/agent.md says why).
 */
static int start_otlp(struct agent *a)
{
	struct otlp_receiver_opts ro = {
	    .kinds = a->cfg.otlp_span_kinds,
	    .node = a->cfg.node,
	    .max_bytes = a->cfg.otlp_max_bytes,
	    .submit = submit_requests,
	    .submit_ctx = a,
	    .pod_lookup = a->kube ? otlp_pod_lookup : NULL,
	    .pod_ctx = a->kube,
	};

	if (a->cfg.otlp_forward[0]) {
		a->otlp_fwd = otlp_forward_start(a->cfg.otlp_forward, 0);
		if (!a->otlp_fwd) {
			log_error("cannot forward OTLP exports to %s: %s", a->cfg.otlp_forward,
				  strerror(errno));
			return -errno;
		}
		ro.forward = forward_export;
		ro.forward_ctx = a->otlp_fwd;
	}
	a->otlp = otlp_receiver_new(&ro);
	if (!a->otlp) {
		log_error("cannot start the OTLP receiver: %s", strerror(errno));
		return -ENOMEM;
	}
	if (a->cfg.otlp_grpc[0]) {
		a->otlp_grpc = otlp_grpc_start(a->cfg.otlp_grpc, a->otlp, &a->conn_limits);
		if (!a->otlp_grpc)
			log_error("OTLP/gRPC receiver off: cannot listen on %s (set otlp-grpc to "
				  "a free address, or empty to turn it off)",
				  a->cfg.otlp_grpc);
	}
	if (a->cfg.otlp_http[0]) {
		a->otlp_http = otlp_http_start(a->cfg.otlp_http, a->otlp, &a->conn_limits);
		if (!a->otlp_http)
			log_error("OTLP/HTTP receiver off: cannot listen on %s (set otlp-http to "
				  "a free address, or empty to turn it off)",
				  a->cfg.otlp_http);
	}
	return 0;
}

/*
 * The engine's raise: which processes are sampled at which raised rate.
 * Called from whichever thread changed the engine's state (the control
 * server's, the main loop's tick, the claim worker's), with the engine's
 * lock held; the sampler's switches are map updates and ioctls, serialized
 * by raise_lock. A rate at or below the base rate raises nothing: the base
 * events already sample those threads that often.
 */
static void on_raise(void *ctx, const uint32_t *tgids, size_t n, unsigned hz)
{
	struct agent *a = ctx;
	unsigned want = hz > (unsigned)a->cfg.frequency ? hz : 0;
	int err;

	pthread_mutex_lock(&a->raise_lock);
	if (!want || !n) {
		err = sampler_set_raised(a->sampler, 0);
		if (!err)
			err = sampler_set_raised_targets(a->sampler, NULL, 0);
	} else {
		/* targets first: raised events never run without their set */
		err = sampler_set_raised_targets(a->sampler, tgids, n);
		if (!err)
			err = sampler_set_raised(a->sampler, want);
	}
	if (err) {
		a->raise_errors++;
		log_warn("triggers: cannot raise sampling to %u Hz for %zu processes: %s", hz, n,
			 strerror(-err));
	} else {
		log_info("triggers: sampling %s", want && n ? "raised" : "back at the base rate");
		log_debug("triggers: raised hz=%u processes=%zu", want && n ? want : 0, n);
	}
	pthread_mutex_unlock(&a->raise_lock);
}

/*
 * The engine's verdict on one finished request of a target, from the
 * claim worker: queued for the main loop, which owns the hold.
 */
static void on_decision(void *ctx, const uint8_t trace_id[16], const char *trigger_id, bool keep)
{
	struct agent *a = ctx;
	struct decision *d;
	bool first;

	pthread_mutex_lock(&a->decide_lock);
	if (a->ndecisions == DECISIONS_MAX) {
		a->decisions_dropped++;
		pthread_mutex_unlock(&a->decide_lock);
		return;
	}
	d = &a->decisions[(a->decide_head + a->ndecisions) % DECISIONS_MAX];
	memcpy(d->trace_id, trace_id, 16);
	d->keep = keep && trigger_id;
	snprintf(d->trigger_id, sizeof(d->trigger_id), "%s", d->keep ? trigger_id : "");
	first = a->ndecisions++ == 0;
	pthread_mutex_unlock(&a->decide_lock);
	/* the main loop reads the trace's samples still in the ring, then decides */
	if (first)
		sampler_wake(a->sampler);
}

/* Main loop: kept traces' raised samples become trigger rows, the others are dropped. */
static void apply_decisions(struct agent *a)
{
	for (;;) {
		struct decision d;

		pthread_mutex_lock(&a->decide_lock);
		if (!a->ndecisions) {
			pthread_mutex_unlock(&a->decide_lock);
			return;
		}
		d = a->decisions[a->decide_head];
		a->decide_head = (a->decide_head + 1) % DECISIONS_MAX;
		a->ndecisions--;
		pthread_mutex_unlock(&a->decide_lock);
		if (a->hold)
			hold_decide(a->hold, d.trace_id, d.keep ? d.trigger_id : NULL);
	}
}

/* Deadlines: every pass of the main loop (which wakes at the earliest one). */
static void tick_triggers(struct agent *a)
{
	if (a->trig)
		triggers_tick(a->trig);
}

/*
 * The sampler's figures, asked by the control thread when it answers a
 * status call (reading the BPF counters costs a per-CPU map copy: done on
 * demand, not every second). The sampler lives until after control stops.
 */
static void sampler_figures(void *ctx, struct triggers_sampler *ts)
{
	struct agent *a = ctx;
	struct sampler_stats ss = {0};

	sampler_get_stats(a->sampler, &ss);
	ts->running = true;
	ts->base_hz = (uint32_t)a->cfg.frequency;
	ts->cpus = a->cpus_online;
	ts->samples = ss.counters[TP_CNT_SAMPLES];
	ts->samples_raised = ss.counters[TP_CNT_RAISED];
	ts->samples_lost = ss.counters[TP_CNT_RINGBUF_FULL];
}

/*
 * The trigger engine and the AgentControl server. Settings a user must fix
 * (no authentication off loopback, half a TLS setup, unreadable files) stop
 * the agent; a port already taken leaves control off and the profiler running.
 */
static int start_control(struct agent *a)
{
	struct triggers_opts to = {
	    .conninfo = a->cfg.db,
	    .on_raise = on_raise,
	    .raise_ctx = a,
	    .on_decision = on_decision,
	    .decision_ctx = a,
	    .sampler_figures = sampler_figures,
	    .sampler_ctx = a,
	};
	struct control_opts co = {
	    .listen = a->cfg.control_listen,
	    .tls_cert = a->cfg.control_tls_cert,
	    .tls_key = a->cfg.control_tls_key,
	    .tls_ca = a->cfg.control_tls_ca,
	    .token_file = a->cfg.control_token_file,
	    .token_generate = a->cfg.control_token_generate,
	    .node = a->cfg.node,
	    .version = TRACEPROF_VERSION,
	    .limits = &a->conn_limits,
	};
	struct control_engine ce;
	char err[512];

	a->cpus_online = (uint32_t)sysconf(_SC_NPROCESSORS_ONLN);
	a->trig = triggers_new(&to);
	if (!a->trig) {
		log_error("cannot start the trigger engine: %s", strerror(errno));
		return -errno;
	}
	if (!a->cfg.control_listen[0])
		return 0;
	triggers_control_engine(a->trig, &ce);
	a->control = control_start(&co, &ce, err, sizeof(err));
	if (!a->control) {
		if (errno != EADDRINUSE)
			return -EINVAL; /* control_start logged why */
		log_error("AgentControl off: cannot listen on %s (set control-listen to a free "
			  "address, or empty to turn it off)",
			  a->cfg.control_listen);
	}
	return 0;
}

/*
 * Copies the servers' refusal counters (control, OTLP/HTTP, forwarder) while
 * they run, so every stats file shows current values; at stop the last copy
 * stays.
 */
static void copy_server_counts(struct agent *a)
{
	if (a->control)
		control_get_stats(a->control, &a->control_stats);
	if (a->otlp_http)
		otlp_http_get_counts(a->otlp_http, &a->http_timeouts, &a->http_refused);
	if (a->otlp_fwd)
		otlp_forward_get_stats(a->otlp_fwd, &a->fwd_stats);
}

static void stop_control(struct agent *a)
{
	if (a->control) {
		control_get_stats(a->control, &a->control_stats);
		control_conn_stats(a->control, &a->conns_stopped[CONN_PORT_CONTROL]);
	}
	control_stop(a->control);
	a->control = NULL;
}

/* The Kubernetes API side: kube_synced is 1 once the node's pods were listed. */
static void write_kube_stats(struct agent *a, FILE *f)
{
	struct kubepods_stats ks;

	if (!a->kube)
		return;
	kubepods_get_stats(a->kube, &ks);
	fprintf(f,
		"kube_pods_known=%" PRIu64 "\nkube_errors=%" PRIu64 "\nkube_synced=%d\n"
		"kube_pods_dropped=%" PRIu64 "\nkube_labels_dropped=%" PRIu64
		"\nkube_renamed=%" PRIu64 "\n",
		ks.pods_known, ks.errors, ks.synced ? 1 : 0, ks.pods_dropped, ks.labels_dropped,
		a->kube_renamed);
}

static void write_trigger_stats(struct agent *a, FILE *f)
{
	struct triggers_stats ts;

	if (!a->trig)
		return;
	triggers_get_stats(a->trig, &ts);
	fprintf(f,
		"trigger_applies=%" PRIu64 "\ntrigger_applies_changed=%" PRIu64
		"\ntrigger_applies_fenced=%" PRIu64 "\ntrigger_requests=%" PRIu64
		"\ntrigger_requests_target=%" PRIu64 "\ntrigger_claims_queued=%" PRIu64
		"\ntrigger_claims_dropped=%" PRIu64 "\ntrigger_claims_abandoned=%" PRIu64
		"\ntrigger_claims_ok=%" PRIu64 "\ntrigger_claims_null=%" PRIu64
		"\ntrigger_claims_skipped=%" PRIu64 "\ntrigger_claim_errors=%" PRIu64 "\n",
		ts.applies, ts.applies_changed, ts.applies_fenced, ts.requests, ts.requests_target,
		ts.claims_queued, ts.claims_dropped, ts.claims_abandoned, ts.claims_ok,
		ts.claims_null, ts.claims_skipped, ts.claim_errors);
	fprintf(f,
		"control_calls=%" PRIu64 "\ncontrol_ok=%" PRIu64
		"\ncontrol_unauthenticated=%" PRIu64 "\ncontrol_invalid=%" PRIu64
		"\ncontrol_unimplemented=%" PRIu64 "\ncontrol_log_suppressed=%" PRIu64 "\n",
		a->control_stats.calls, a->control_stats.ok, a->control_stats.unauthenticated,
		a->control_stats.invalid, a->control_stats.unimplemented,
		a->control_stats.log_suppressed);
}

/* Servers first (no more exports), then what the forwarder still holds (5 s at most). */
static void stop_otlp(struct agent *a)
{
	if (a->otlp_grpc)
		otlp_grpc_conn_stats(a->otlp_grpc, &a->conns_stopped[CONN_PORT_OTLP_GRPC]);
	otlp_grpc_stop(a->otlp_grpc);
	a->otlp_grpc = NULL;
	if (a->otlp_http) {
		otlp_http_get_counts(a->otlp_http, &a->http_timeouts, &a->http_refused);
		otlp_http_conn_stats(a->otlp_http, &a->conns_stopped[CONN_PORT_OTLP_HTTP]);
	}
	otlp_http_stop(a->otlp_http);
	a->otlp_http = NULL;
	if (a->otlp_fwd)
		otlp_forward_stop(a->otlp_fwd, 5000, &a->fwd_stats);
	a->otlp_fwd = NULL;
}

/*
 * Every listening port's connection counters, live while it runs (the
 * stats file at exit and the SIGUSR1 snapshot): <port>_conns_accepted,
 * _refused_full, _refused_peer, _evicted, _timeouts, _open.
 */
static void write_conn_stats(struct agent *a, FILE *f)
{
	static const char *const names[3] = {"otlp_grpc", "otlp_http", "control"};

	for (int i = 0; i < 3; i++) {
		struct tp_conn_stats st = a->conns_stopped[i];

		if (i == CONN_PORT_OTLP_GRPC && a->otlp_grpc)
			otlp_grpc_conn_stats(a->otlp_grpc, &st);
		else if (i == CONN_PORT_OTLP_HTTP && a->otlp_http)
			otlp_http_conn_stats(a->otlp_http, &st);
		else if (i == CONN_PORT_CONTROL && a->control)
			control_conn_stats(a->control, &st);
		fprintf(f,
			"%s_conns_accepted=%" PRIu64 "\n%s_conns_refused_full=%" PRIu64
			"\n%s_conns_refused_peer=%" PRIu64 "\n%s_conns_evicted=%" PRIu64
			"\n%s_conns_timeouts=%" PRIu64 "\n%s_conns_open=%" PRIu64 "\n",
			names[i], st.accepted, names[i], st.refused_full, names[i], st.refused_peer,
			names[i], st.evicted, names[i], st.timeouts, names[i], st.open);
		if (i == CONN_PORT_OTLP_HTTP)
			fprintf(f, "otlp_http_bodies_refused=%" PRIu64 "\n", st.bodies_refused);
	}
}

static void write_otlp_stats(struct agent *a, FILE *f)
{
	struct otlp_stats os;

	if (!a->otlp)
		return;
	otlp_receiver_get_stats(a->otlp, &os);
	for (int i = 0; i < OTLP_STATUS__COUNT; i++)
		fprintf(f, "otlp_exports_%s=%" PRIu64 "\n", otlp_status_name(i), os.exports[i]);
	fprintf(f,
		"otlp_exports_partial=%" PRIu64 "\notlp_bytes=%" PRIu64 "\notlp_spans=%" PRIu64
		"\notlp_rows=%" PRIu64 "\notlp_rows_unqueued=%" PRIu64
		"\notlp_ignored_kind=%" PRIu64 "\n",
		os.exports_partial, os.bytes, os.spans, os.rows, os.rows_unqueued, os.ignored_kind);
	for (int i = 0; i < OTLP_REJ__COUNT; i++)
		fprintf(f, "otlp_rejected_%s=%" PRIu64 "\n", otlp_reject_name(i), os.rejected[i]);
	fprintf(f, "otlp_rows_status_none=%" PRIu64 "\n", os.rows_by_status[0]);
	for (int i = 1; i < 6; i++)
		fprintf(f, "otlp_rows_status_%dxx=%" PRIu64 "\n", i, os.rows_by_status[i]);
	fprintf(f, "otlp_compressed=%" PRIu64 "\n", os.compressed);
	for (int i = 0; i < OTLP_REFUSE__COUNT; i++)
		fprintf(f, "otlp_refused_%s=%" PRIu64 "\n", otlp_refusal_name(i), os.refused[i]);
	fprintf(f, "otlp_http_timeouts=%" PRIu64 "\notlp_http_refused=%" PRIu64 "\n",
		a->http_timeouts, a->http_refused);
	fprintf(f,
		"otlp_forward_submitted=%" PRIu64 "\notlp_forward_sent=%" PRIu64
		"\notlp_forward_failed=%" PRIu64 "\notlp_forward_dropped=%" PRIu64 "\n",
		a->fwd_stats.submitted, a->fwd_stats.sent, a->fwd_stats.failed,
		a->fwd_stats.dropped);
}

/*
 * The agent forgets every process that ends (exit and exec records, the
 * sweep), so the symbolizer never reads /proc to find the gone ones: on a
 * node with hundreds of idle processes its once-a-minute liveness check
 * cost more than all symbolization.
 */
static struct symbolizer *new_symbolizer(const struct agent *a)
{
	struct sym_opts o = {.max_elf_bytes = a->cfg.symbol_cache_bytes, .idle_ms = -1};

	return sym_new(&o);
}

/*
 * The spool of this database under spool-dir (docs/agent.md, "What a crash
 * loses"). One that cannot be used (another agent holds it, no permission)
 * is logged and the agent runs without it.
 */
static void open_spool(struct agent *a)
{
	struct spool_opts o = {.dir = a->cfg.spool_dir, .max_bytes = a->cfg.spool_bytes};
	char key[sizeof(a->cfg.db) + 16], err[512];

	if (!a->cfg.spool_dir[0])
		return;
	config_db_masked(&a->cfg, key, sizeof(key));
	o.db_key = key;
	a->spool = spool_open(&o, &a->spool_prev, err, sizeof(err));
	if (!a->spool)
		log_warn("running without a spool: a crash loses every window not yet in the "
			 "database (%s)",
			 err);
}

static void report_previous_run(struct agent *a)
{
	const struct spool_previous *p = &a->spool_prev;
	struct shipper_stats sh;

	if (!a->spool)
		return;
	shipper_get_stats(a->shipper, &sh);
	if (p->unclean)
		log_warn(
		    "previous run ended without a clean stop: %" PRIu64 " samples and %" PRIu64
		    " spans lost (its open window, and queued windows it could not spool); %" PRIu64
		    " windows recovered from the spool pid=%d raised_samples_lost=%" PRIu64
		    " spool=%s",
		    p->lost.samples_open + p->lost.samples_unspooled, p->lost.requests_unspooled,
		    sh.windows_recovered, p->pid, p->lost.raised_held, spool_path(a->spool));
	else if (sh.windows_recovered)
		log_info("%" PRIu64 " windows recovered from the spool spool=%s",
			 sh.windows_recovered, spool_path(a->spool));
}

struct agent *agent_new(const struct agent_config *cfg)
{
	struct agent *a = calloc(1, sizeof(*a));
	struct sampler_opts so = {0};
	struct agg_opts ao = {0};
	struct shipper_opts sho = {0};

	if (!a)
		return NULL;
	a->cfg = *cfg;
	a->conn_limits = (struct tp_conn_limits){
	    .max_conns = cfg->max_conns,
	    .max_per_peer = cfg->max_conns_per_peer,
	    .idle_timeout_ms = cfg->conn_idle_timeout_s * 1000,
	    .header_timeout_ms = cfg->http_header_timeout_s * 1000,
	    .min_body_rate = (int)cfg->http_min_body_rate,
	    .grpc_max_age_ms = cfg->grpc_max_conn_age_s * 1000,
	    .grpc_keepalive_ms = cfg->grpc_keepalive_s * 1000,
	    .grpc_handshake_ms = cfg->grpc_handshake_timeout_s * 1000,
	};
	pthread_mutex_init(&a->raise_lock, NULL);
	pthread_mutex_init(&a->decide_lock, NULL);
	a->self_pid = getpid();
	a->next_recheck_us = INT64_MAX;
	a->nprocs_cap = 1024;
	a->procs = calloc(a->nprocs_cap, sizeof(*a->procs));
	a->stacks = calloc(STACK_CACHE_SIZE, sizeof(*a->stacks));
	if (!a->procs || !a->stacks)
		goto out_free;
	sync_clocks(a);

	a->sym = new_symbolizer(a);
	ao.window_us = (int64_t)cfg->window_s * 1000000;
	ao.max_keys = (uint32_t)cfg->max_keys;
	ao.close_grace_us = 500000; /* samples wait in per-CPU buffers briefly */
	a->agg = agg_new(&ao);
	if (!a->sym || !a->agg) {
		log_error("cannot start: %s", strerror(errno));
		goto out_free;
	}
	{
		/* load kallsyms now, not while the first samples (and short-lived programs) wait */
		struct sym_frame unused;

		sym_kernel(a->sym, 0, &unused);
	}

	so.hz = cfg->frequency;
	so.ring_bytes = 0; /* "auto": the sampler sizes it by the CPUs */
	if (cfg->ring_bytes) {
		so.ring_bytes = 4096;
		while (so.ring_bytes < cfg->ring_bytes) /* a power-of-two number of pages */
			so.ring_bytes *= 2;
	}
	so.filter = cfg->target == CONFIG_TARGET_PIDS	  ? TP_FILTER_PIDS
		    : cfg->target == CONFIG_TARGET_CGROUP ? TP_FILTER_CGROUP
							  : TP_FILTER_ALL;
	so.path = TP_PATH_RINGBUF;
	a->sampler = sampler_open(&so);
	if (!a->sampler)
		goto out_free; /* sampler_open logged why */
	sampler_set_event_fn(a->sampler, on_event, a);
	a->hold =
	    hold_new(&(struct hold_opts){.max_bytes = cfg->trigger_hold_bytes}, on_hold_rows, a);
	if (!a->hold)
		goto out_free;
	for (int i = 0; i < cfg->npids && cfg->target == CONFIG_TARGET_PIDS; i++)
		if (sampler_add_target_pid(a->sampler, cfg->pids[i]) != 0)
			log_warn("cannot target pid=%d", cfg->pids[i]);
	if (cfg->target == CONFIG_TARGET_CGROUP &&
	    sampler_add_target_cgroup_path(a->sampler, cfg->cgroup) != 0) {
		log_error("cannot target cgroup %s (want a cgroup v2 directory)", cfg->cgroup);
		goto out_free;
	}

	sho.conninfo = cfg->db[0] ? cfg->db : NULL;
	sho.max_queue_bytes = cfg->queue_bytes;
	sho.store.app_name = "traceprof-agent";
	open_spool(a);
	sho.spool = a->spool;
	a->shipper = shipper_start(&sho);
	if (!a->shipper) {
		log_error("cannot start the shipper: %s", strerror(errno));
		goto out_free;
	}
	report_previous_run(a);

	if (start_control(a) != 0)
		goto out_free;
	if (start_kube(a) != 0)
		goto out_free;
	if (start_otlp(a) != 0)
		goto out_free;

	if (cfg->target == CONFIG_TARGET_PIDS) {
		int64_t now = clock_us(CLOCK_REALTIME);

		for (int i = 0; i < cfg->npids; i++)
			proc_get(a, cfg->pids[i], now);
	} else if (cfg->target == CONFIG_TARGET_CGROUP) {
		scan_cgroup(a, cfg->cgroup, 0);
	} else {
		scan_processes(a);
	}
	log_info("sampling at %d Hz, window %ds, %zu processes known, node %s", cfg->frequency,
		 cfg->window_s, a->nprocs, cfg->node);
	return a;

out_free:
	agent_free(a);
	return NULL;
}

/* What a crash would lose now, for the next start to report (one pwrite, when it changed). */
static void note_spool_state(struct agent *a)
{
	struct spool_state st = {0};
	struct shipper_stats sh;
	struct hold_stats hs;
	struct agg_stats ag;

	if (!a->spool)
		return;
	agg_get_stats(a->agg, &ag);
	hold_get_stats(a->hold, &hs);
	shipper_get_stats(a->shipper, &sh);
	st.samples_open = ag.samples - a->closed_samples;
	st.raised_held = hs.samples - hs.samples_refused - hs.samples_kept - hs.samples_lost;
	st.samples_unspooled = sh.samples_unspooled;
	st.requests_unspooled = sh.requests_unspooled;
	spool_note_state(a->spool, &st);
}

static void write_spool_stats(struct agent *a, FILE *f, const struct shipper_stats *sh)
{
	struct spool_stats sp = {0};
	const struct spool_state *lost = &a->spool_prev.lost;

	if (a->spool)
		spool_get_stats(a->spool, &sp);
	fprintf(f,
		"spool_on=%d\nspool_windows_written=%" PRIu64 "\nspool_windows_removed=%" PRIu64
		"\nspool_windows_full=%" PRIu64 "\nspool_write_errors=%" PRIu64
		"\nspool_commit_errors=%" PRIu64 "\nspool_files_bad=%" PRIu64
		"\nspool_files=%zu\nspool_bytes=%zu\nspool_windows_recovered=%" PRIu64
		"\nspool_windows_resumed=%" PRIu64 "\nsamples_unspooled=%" PRIu64
		"\nrequests_unspooled=%" PRIu64 "\n",
		a->spool != NULL, sp.windows_written, sp.windows_removed, sp.windows_full,
		sp.write_errors, sp.commit_errors, sp.files_bad, sp.files, sp.bytes,
		sh->windows_recovered, sh->windows_resumed, sh->samples_unspooled,
		sh->requests_unspooled);
	fprintf(f,
		"prev_run_unclean=%d\nprev_run_samples_lost=%" PRIu64
		"\nprev_run_spans_lost=%" PRIu64 "\nprev_run_raised_lost=%" PRIu64 "\n",
		a->spool_prev.unclean, lost->samples_open + lost->samples_unspooled,
		lost->requests_unspooled, lost->raised_held);
}

static void write_hold_stats(struct agent *a, FILE *f)
{
	struct sampler_stats ss = {0};
	struct hold_stats hs;

	sampler_get_stats(a->sampler, &ss);
	hold_get_stats(a->hold, &hs);
	fprintf(f,
		"bpf_raised=%" PRIu64 "\nbpf_raised_base=%" PRIu64 "\nbpf_raised_other=%" PRIu64
		"\nbpf_raised_idle=%" PRIu64 "\nbpf_base_covered=%" PRIu64 "\nraised=%" PRIu64
		"\nraised_unheld=%" PRIu64 "\n",
		ss.counters[TP_CNT_RAISED], ss.counters[TP_CNT_RAISED_BASE],
		ss.counters[TP_CNT_RAISED_OTHER], ss.counters[TP_CNT_RAISED_IDLE],
		ss.counters[TP_CNT_BASE_COVERED], a->raised, a->raised_unheld);
	fprintf(f,
		"hold_samples=%" PRIu64 "\nhold_traces=%" PRIu64 "\nhold_traces_kept=%" PRIu64
		"\nhold_traces_dropped=%" PRIu64 "\nhold_traces_evicted=%" PRIu64
		"\nhold_traces_expired=%" PRIu64 "\nhold_decide_unknown=%" PRIu64
		"\nhold_samples_kept=%" PRIu64 "\nhold_samples_lost=%" PRIu64 "\nhold_rows=%" PRIu64
		"\nhold_bytes=%" PRIu64 "\n",
		hs.samples, hs.traces, hs.traces_kept, hs.traces_dropped, hs.traces_evicted,
		hs.traces_expired, hs.decide_unknown, hs.samples_kept, hs.samples_lost, hs.rows,
		hs.held_bytes);
	fprintf(f,
		"trigger_rows_queued=%" PRIu64 "\ntrigger_rows_lost=%" PRIu64
		"\ntrigger_raise_errors=%" PRIu64 "\ntrigger_decisions_dropped=%" PRIu64 "\n",
		a->hold_rows - a->hold_rows_lost, a->hold_rows_lost, a->raise_errors,
		a->decisions_dropped);
}

static void write_stats(struct agent *a, double elapsed_s)
{
	struct sampler_stats ss = {0};
	struct agg_stats ag;
	struct shipper_stats sh;
	struct sym_stats sy;
	struct rusage ru;
	char tmp[sizeof(a->cfg.stats_file) + 16];
	FILE *f;

	if (!a->cfg.stats_file[0])
		return;
	/* replaced atomically: a reader sees the previous file or this one, whole */
	snprintf(tmp, sizeof(tmp), "%s.tmp", a->cfg.stats_file);
	f = fopen(tmp, "w");
	if (!f) {
		log_warn("cannot write stats file %s: %s", tmp, strerror(errno));
		return;
	}
	copy_server_counts(a);
	sampler_get_stats(a->sampler, &ss);
	agg_get_stats(a->agg, &ag);
	shipper_get_stats(a->shipper, &sh);
	sym_get_stats(a->sym, &sy);
	getrusage(RUSAGE_SELF, &ru);
	fprintf(f, "elapsed_s=%.3f\n", elapsed_s);
	fprintf(f, "cpu_user_s=%.6f\ncpu_sys_s=%.6f\nmax_rss_kb=%ld\n",
		(double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6,
		(double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6, ru.ru_maxrss);
	fprintf(f,
		"bpf_samples=%" PRIu64 "\nbpf_filtered=%" PRIu64 "\nbpf_ringbuf_full=%" PRIu64
		"\nbpf_tagged=%" PRIu64 "\nbpf_ctx_fault=%" PRIu64 "\nbpf_no_ustack=%" PRIu64
		"\nbpf_run_time_ns=%" PRIu64 "\nbpf_run_cnt=%" PRIu64 "\nbpf_stack_retakes=%" PRIu64
		"\n",
		ss.counters[TP_CNT_SAMPLES], ss.counters[TP_CNT_FILTERED],
		ss.counters[TP_CNT_RINGBUF_FULL], ss.counters[TP_CNT_TAGGED],
		ss.counters[TP_CNT_CTX_FAULT], ss.counters[TP_CNT_NO_USTACK], ss.run_time_ns,
		ss.run_cnt, ss.counters[TP_CNT_STACK_RETAKE]);
	fprintf(f,
		"samples=%" PRIu64 "\nsamples_self=%" PRIu64 "\ntagged=%" PRIu64
		"\ninvalid_ctx=%" PRIu64 "\nctx_faults=%" PRIu64 "\nstack_hits=%" PRIu64
		"\nstack_misses=%" PRIu64 "\nagg_refused=%" PRIu64 "\nprocesses=%" PRIu64
		"\ntls_found=%" PRIu64 "\ntls_unsupported=%" PRIu64 "\nexecs=%" PRIu64
		"\nexits=%" PRIu64 "\nswept=%" PRIu64 "\nsym_renewals=%" PRIu64 "\n",
		a->samples, a->samples_self, a->tagged, a->invalid_ctx, a->ctx_faults,
		a->stack_hits, a->stack_misses, a->agg_refused, a->procs_seen, a->tls_found,
		a->tls_unsupported, a->execs, a->exits, a->swept, a->sym_renewals);
	fprintf(f,
		"agg_samples=%" PRIu64 "\nagg_late=%" PRIu64 "\nagg_overflow=%" PRIu64
		"\nagg_windows=%" PRIu64 "\n",
		ag.samples, ag.samples_late, ag.samples_overflow, ag.windows);
	fprintf(f,
		"windows_submitted=%" PRIu64 "\nwindows_delivered=%" PRIu64
		"\nwindows_dropped=%" PRIu64 "\nsamples_submitted=%" PRIu64
		"\nsamples_delivered=%" PRIu64 "\nsamples_dropped=%" PRIu64
		"\nsamples_undelivered=%" PRIu64 "\nflush_errors=%" PRIu64 "\n",
		sh.windows_submitted, sh.windows_delivered, sh.windows_dropped,
		sh.samples_submitted, sh.samples_delivered, sh.samples_dropped,
		sh.samples_undelivered, sh.flush_errors);
	fprintf(f,
		"requests_submitted=%" PRIu64 "\nrequests_delivered=%" PRIu64
		"\nrequests_dropped=%" PRIu64 "\nrequests_invalid=%" PRIu64
		"\nrequests_undelivered=%" PRIu64 "\nrequests_refused=%" PRIu64 "\n",
		sh.requests_submitted, sh.requests_delivered, sh.requests_dropped,
		sh.requests_invalid, sh.requests_undelivered, sh.requests_refused);
	write_spool_stats(a, f, &sh);
	write_otlp_stats(a, f);
	write_hold_stats(a, f);
	write_trigger_stats(a, f);
	write_kube_stats(a, f);
	write_conn_stats(a, f);
	fprintf(f,
		"sym_lookups=%" PRIu64 "\nsym_cache_hits=%" PRIu64 "\nsym_elf_loads=%" PRIu64
		"\nsym_elf_bytes=%" PRIu64 "\nsym_unknown_frames=%" PRIu64
		"\nsym_map_refreshes=%" PRIu64 "\n",
		sy.lookups, sy.cache_hits, sy.elf_loads, sy.elf_bytes, sy.unknown_frames,
		sy.map_refreshes);
	fprintf(f,
		"forks=%" PRIu64 "\nprocs_inherited=%" PRIu64 "\nsym_inherited=%" PRIu64
		"\nloop_passes=%" PRIu64 "\ntls_files_read=%" PRIu64 "\n",
		a->forks, a->procs_inherited, sy.inherited, a->loop_passes, tlsloc_files_read());
	fprintf(f,
		"inspections=%" PRIu64 "\nrechecks_unchanged=%" PRIu64 "\nmain_cpu_ns=%" PRIu64
		"\nmain_cpu_inspect_ns=%" PRIu64 "\nmain_cpu_symbolize_ns=%" PRIu64
		"\nmain_cpu_poll_ns=%" PRIu64 "\nmain_cpu_window_ns=%" PRIu64 "\n",
		a->inspections, a->rechecks_unchanged, thread_cpu_ns(), a->cpu_inspect_ns,
		a->cpu_symbolize_ns, a->cpu_poll_ns, a->cpu_window_ns);
	if (fclose(f) != 0 || rename(tmp, a->cfg.stats_file) != 0) {
		log_warn("cannot write stats file %s: %s", a->cfg.stats_file, strerror(errno));
		unlink(tmp);
	}
}

/*
 * The symbolizer interns every name it returns and frees them only with
 * itself. Names are copied by the aggregator, so when the pool outgrows a
 * quarter of the symbol cache budget the symbolizer is replaced: live
 * processes are noted again at their next sample; stacks already cached
 * keep their ids.
 */
static void renew_symbolizer(struct agent *a)
{
	struct sym_stats st;
	struct symbolizer *fresh;

	sym_get_stats(a->sym, &st);
	if (st.intern_bytes <= a->cfg.symbol_cache_bytes / 4)
		return;
	fresh = new_symbolizer(a);
	if (!fresh)
		return;
	log_info("symbolizer renewed: %" PRIu64 " bytes of names", st.intern_bytes);
	sym_free(a->sym);
	a->sym = fresh;
	a->sym_renewals++;
}

static void log_progress(struct agent *a)
{
	struct shipper_stats sh;

	shipper_get_stats(a->shipper, &sh);
	log_info("samples=%" PRIu64 " tagged=%" PRIu64 " windows delivered=%" PRIu64
		 " dropped=%" PRIu64 " queued=%zu connected=%s%s%s",
		 a->samples, a->tagged, sh.windows_delivered, sh.windows_dropped, sh.queue_windows,
		 sh.connected ? "yes" : "no", sh.last_error[0] ? " last_error=" : "",
		 sh.last_error);
}

/* Looks again at the incomplete processes that are due; finds the next due time. */
static void recheck_processes(struct agent *a, int64_t real)
{
	a->next_recheck_us = INT64_MAX;
	for (size_t i = 0; i < a->nprocs_cap; i++) {
		struct proc *p = &a->procs[i];

		if (!p->pid || p->complete || !p->recheck_us || p->exited_us)
			continue;
		/* after the first seconds, only processes that run are worth a look */
		if (real >= p->recheck_us) {
			if (p->recheck_step_us > RECHECK_FAST_US &&
			    p->last_sample_us <= p->inspected_us)
				continue;	  /* due, but waits for a sample (on_sample) */
			proc_inspect(a, p, real); /* sets a new recheck_us when still incomplete */
		}
		if (!p->complete && p->recheck_us && p->recheck_us < a->next_recheck_us)
			a->next_recheck_us = p->recheck_us;
	}
}

/*
 * How long the main loop may sleep in the ring poll: until the next thing
 * due (a window to close, a process to look at again, the sweep, a
 * trigger's deadline, the end), at most POLL_MAX_MS. A deadline wakes the
 * loop at that millisecond, so the agent ends an expired trigger (and
 * lowers sampling) itself, before the controller's next pass does.
 * Samples carry their own time, so sleeping longer delays them but never
 * misfiles them. The loop is woken early by the BPF side for an exec or
 * when wakeup_bytes are pending, and by sampler_wake for a request's
 * verdict (its held samples) and for new pods (process names). Each
 * wake-up costs tens of microseconds of cold caches, so the loop sleeps
 * as long as nothing needs it (docs/agent.md, "The main loop's sleep").
 */
static int poll_timeout_ms(const struct agent *a, int64_t next_sweep_mono, int64_t end_mono)
{
	int64_t mono = clock_us(CLOCK_MONOTONIC), due = next_sweep_mono;
	int64_t close_us = agg_next_close_us(a->agg);

	if (close_us != INT64_MAX && close_us - a->mono_to_real_us < due)
		due = close_us - a->mono_to_real_us;
	if (a->next_recheck_us != INT64_MAX && a->next_recheck_us - a->mono_to_real_us < due)
		due = a->next_recheck_us - a->mono_to_real_us;
	if (end_mono && end_mono < due)
		due = end_mono;
	if (a->trig) {
		int64_t dl_ms = triggers_next_deadline_ms(a->trig);

		if (dl_ms != INT64_MAX && dl_ms * 1000 - a->mono_to_real_us < due)
			due = dl_ms * 1000 - a->mono_to_real_us;
	}
	if (due - mono >= POLL_MAX_MS * 1000)
		return POLL_MAX_MS;
	return due <= mono ? 0 : (int)((due - mono + 999) / 1000);
}

int agent_run(struct agent *a, volatile sig_atomic_t *stop, volatile sig_atomic_t *stats_now)
{
	int64_t t0 = clock_us(CLOCK_MONOTONIC), next_sweep = t0 + SWEEP_EVERY_US;
	int64_t next_renew = t0 + RENEW_EVERY_US;
	int64_t next_progress = t0 + 60000000;
	int64_t next_kube_check = t0;
	int64_t end = a->cfg.duration_s > 0 ? t0 + (int64_t)(a->cfg.duration_s * 1e6) : 0;
	int rc = 0, n;

	while (!*stop) {
		int timeout =
		    poll_timeout_ms(a, next_sweep < next_renew ? next_sweep : next_renew, end);
		uint64_t c0 = thread_cpu_ns(), c1, c2;
		int64_t mono, real;

		n = sampler_poll(a->sampler, timeout, on_sample, a);
		c1 = thread_cpu_ns();
		a->loop_passes++;
		a->cpu_poll_ns += c1 - c0;
		if (n < 0 && n != -EINTR) {
			log_error("sampler failed: %s", strerror(-n));
			rc = n;
			break;
		}
		sync_clocks(a);
		mono = clock_us(CLOCK_MONOTONIC);
		real = mono + a->mono_to_real_us;
		agg_tick(a->agg, real);
		apply_decisions(a);
		hold_tick(a->hold, real);
		ship_closed(a);
		note_spool_state(a);
		c2 = thread_cpu_ns();
		a->cpu_window_ns += c2 - c1;
		tick_triggers(a);
		if (a->kube) {
			rename_pod_procs(a);
			if (mono >= next_kube_check) {
				kubepods_check(a->kube);
				next_kube_check = mono + 1000000;
			}
		}
		if (real >= a->next_recheck_us)
			recheck_processes(a, real);
		if (a->ndying)
			procs_forget_exited(a, real);
		if (mono >= next_sweep) {
			procs_sweep(a);
			next_sweep = mono + SWEEP_EVERY_US;
		}
		if (mono >= next_renew) {
			renew_symbolizer(a);
			next_renew = mono + RENEW_EVERY_US;
		}
		if (mono >= next_progress) {
			log_progress(a);
			next_progress = mono + 60000000;
		}
		if (stats_now && *stats_now) {
			*stats_now = 0;
			write_stats(a, (double)(mono - t0) / 1e6);
		}
		if (end && mono >= end)
			break;
	}

	/* Stop: no more exports or control calls, take what the CPUs still hold, close, flush. */
	stop_otlp(a);
	stop_control(a);
	while (sampler_poll(a->sampler, 0, on_sample, a) > 0)
		;
	apply_decisions(a); /* requests already claimed keep their raised samples */
	agg_close(a->agg);
	ship_closed(a);
	if (shipper_stop(a->shipper, STOP_FLUSH_MS) != 0) {
		struct shipper_stats sh;

		shipper_get_stats(a->shipper, &sh);
		log_warn("stopped with %" PRIu64 " samples not delivered (database %s)",
			 sh.samples_undelivered, sh.last_error[0] ? sh.last_error : "unreachable");
	}
	log_progress(a);
	write_stats(a, (double)(clock_us(CLOCK_MONOTONIC) - t0) / 1e6);
	return rc;
}

void agent_free(struct agent *a)
{
	if (!a)
		return;
	stop_otlp(a);
	stop_control(a);
	triggers_free(a->trig); /* after the OTLP threads, which feed it */
	a->trig = NULL;
	kubepods_stop(a->kube); /* after the OTLP threads, which read it */
	a->kube = NULL;
	sampler_free(a->sampler);
	hold_free(a->hold);
	shipper_free(a->shipper);
	spool_close(a->spool, true); /* what stays in it is delivered by the next start */
	otlp_receiver_free(a->otlp);
	agg_free(a->agg);
	sym_free(a->sym);
	free(a->procs);
	free(a->stacks);
	free(a);
}
