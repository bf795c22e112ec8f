/*
 * agent.c - the agent's pipeline, on one thread (the shipper has its own),
 * and its wiring.
 *
 * Per sample from the BPF ring buffer: the process it came from is looked
 * up in the process table (process/proctable.c; first sight: service
 * identity, thread-context location for the BPF side, SDK uprobe, symbol
 * snapshot); its raw stack is turned into a stack id through a cache keyed
 * by (process, raw frames), and only a cache miss symbolizes and registers
 * functions, frames and the stack with the aggregator; then the sample is
 * counted, or held under its trace when it is a raised one
 * (sampling/raise.c). Windows closed by the aggregator go to the shipper,
 * which owns the database connection.
 *
 * The network side (endpoints.c: OTLP receivers, AgentControl and the
 * trigger engine, the Kubernetes API) runs on its own threads; the main
 * loop ticks the engine, applies its verdicts, looks at processes again,
 * and writes the stats file (stats.c).
 *
 * Workload: tens to thousands of samples per second per node, dominated by
 * repeats of the same hot stacks, so the steady state is a hash of the raw
 * frames, one cache probe and one aggregator probe per sample, no
 * allocation.
 */
#include "unwind.h"
#include "agent.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "aggregate.h"
#include "endpoints.h"
#include "gpu.h"
#include "kubepods.h"
#include "proctable.h"
#include "obi_map.h"
#include "otlp_forward.h"
#include "py_frames.h"
#include "otlp_spans_out.h"
#include "zc_owners.h"
#include "zc_requests.h"
#include "raise.h"
#include "sampler.h"
#include "shipper.h"
#include "spool.h"
#include "stats.h"
#include "symbolize.h"
#include "traceprof/ids.h"
#include "traceprof/log.h"
#include "triggers.h"

#define STACK_CACHE_SIZE 65536	   /* raw stack -> stack id entries (power of two) */
#define MAX_STACK_FRAMES 512	   /* the store's limit on frames per stack */
#define MAX_INLINE	 8	   /* inlined frames kept per address */
#define SWEEP_EVERY_US	 300000000 /* look for dead processes whose exit record was lost */
#define RENEW_EVERY_US	 10000000  /* check the symbolizer's name budget this often */
#define POLL_MAX_MS	 10000	   /* longest sleep of the main loop */
#define STOP_FLUSH_MS	 10000	   /* final flush deadline */

/* One cached raw stack. */
struct stack_slot {
	uint64_t key;	   /* hash of (pid, start time, entry, frames); 0 = empty */
	uint64_t stack_id; /* ids_stack() of its symbolized frames */
};

struct agent {
	struct agent_config cfg;	      /* settings (copied) */
	struct sampler *sampler;	      /* BPF side */
	struct symbolizer *sym;		      /* symbol tables */
	struct agg *agg;		      /* open window */
	struct shipper *shipper;	      /* database side */
	struct spool *spool;		      /* windows on disk until committed, or NULL */
	struct spool_previous spool_prev;     /* how the previous run ended */
	uint64_t closed_samples;	      /* samples of the windows closed */
	struct proctable procs;		      /* the processes sampled */
	struct unwind *unwind;		      /* their unwind tables, or NULL */
	struct raise raise;		      /* raised sampling: hold, verdicts */
	struct obi_map obi;		      /* OBI's trace map, when pinned */
	struct zc_requests zc;		      /* requests found from system calls */
	struct zc_owners zco;		      /* who asked for that capture of a process */
	struct pycache *pyc;		      /* code objects of Python processes' frames */
	struct gpu *gpu;		      /* CUDA launches (docs/gpu.md), or NULL (--gpu off) */
	struct endpoints ep;		      /* OTLP, AgentControl, triggers, Kubernetes */
	struct stack_slot *stacks;	      /* STACK_CACHE_SIZE entries */
	uint64_t stacks_evictions;	      /* agg_dict_evictions() they are valid for */
	int64_t mono_to_real_us;	      /* CLOCK_REALTIME - CLOCK_MONOTONIC, µs */
	uint64_t frame_ids[MAX_STACK_FRAMES]; /* scratch for one stack */
	struct agent_counts n;		      /* the sample path's counters (stats file) */
};

static void sync_clocks(struct agent *a)
{
	a->mono_to_real_us = agent_clock_us(CLOCK_REALTIME) - agent_clock_us(CLOCK_MONOTONIC);
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

/* py_frames_emit's callback: a Python frame onto the stack being built. */
struct py_emit_ctx {
	struct agent *a;
	size_t *n;
};

static void emit_py(void *ctx, const struct sym_frame *f)
{
	struct py_emit_ctx *e = ctx;

	add_frame(e->a, f, e->n);
}

/*
 * Where each native frame of the interpreter's evaluation loop gets its
 * chunk of Python frames (docs/python.md): the j-th innermost loop frame
 * runs chunk j. evals[j] is the user-stack index of the j-th innermost;
 * returns how many there are.
 */
static uint32_t eval_frames(const struct proc *p, const struct tp_sample *s, uint32_t *evals)
{
	const __u64 *user = s->ips + s->kern_n;
	uint32_t e = 0;

	for (uint32_t i = 0; i < s->user_n && e < TP_PY_MAX_FRAMES; i++)
		if (py_frames_is_eval(p, user[i] - (i > 0 ? 1 : 0)))
			evals[e++] = i;
	return e;
}

/*
 * Symbolizes a sample's frames (root first: user, then kernel) into a
 * stack id; returns whether the aggregator has the stack registered. A
 * Python process's evaluation-loop frames are replaced by the Python
 * frames they ran; chunks without a loop frame (its stack was cut) go at
 * the root.
 */
static bool symbolize_stack(struct agent *a, const struct tp_sample *s, const struct proc *p,
			    uint64_t *id)
{
	const __u64 *kern = s->ips, *user = s->ips + s->kern_n;
	struct sym_frame frames[MAX_INLINE];
	uint32_t npy = p ? py_frames_count(s) : 0, evals[TP_PY_MAX_FRAMES], ne = 0, j;
	struct py_chunks ch = {0};
	size_t n = 0;
	struct py_emit_ctx pe = {a, &n};

	if (npy) {
		py_frames_chunks(s, npy, &ch);
		ne = eval_frames(p, s, evals);
		a->n.py_stacks++;
		a->n.py_eval_mismatch += ne != ch.n;
		for (j = ch.n; j-- > ne;) /* chunks of loop frames the native walk did not reach */
			a->n.py_unknown +=
			    py_frames_emit(a->pyc, p, s, ch.at[j], ch.at[j + 1], emit_py, &pe);
	}
	for (int i = (int)s->user_n - 1; i >= 0; i--) {
		uint64_t ip = user[i] - (i > 0 ? 1 : 0);
		int k;

		if (npy && py_frames_is_eval(p, ip)) {
			for (j = 0; j < ne && evals[j] != (uint32_t)i; j++)
				;
			if (j < ch.n) {
				a->n.py_unknown += py_frames_emit(a->pyc, p, s, ch.at[j],
								  ch.at[j + 1], emit_py, &pe);
				continue;
			}
		}
		k = sym_user(a->sym, (int)s->pid, ip, frames, MAX_INLINE);
		for (int f = 0; f < k; f++)
			add_frame(a, &frames[f], &n);
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
	/*
	 * kern_n in the seed: the same addresses split differently are another
	 * stack; the symbolizer's generation: JIT code named since (a perf map)
	 */
	uint32_t npy = py_frames_count(s);
	uint64_t names = sym_names_gen(a->sym, (int)p->pid);
	uint64_t key =
	    ids_hash_bytes(((uint64_t)p->pid << 32) ^ ((uint64_t)s->kern_n << 16) ^ p->start_time ^
			       (p->gen << 40) ^ ((uint64_t)npy << 56) ^ (names << 20),
			   s->ips,
			   ((size_t)s->kern_n + s->user_n + (size_t)npy * TP_PY_WORDS) *
			       sizeof(uint64_t)) |
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
		a->n.stack_hits++;
		return slot->stack_id;
	}
	t0 = agent_thread_cpu_ns();
	a->n.stack_misses++;
	/* cached only when registered: a refused stack is tried again at its next sample */
	slot->key = symbolize_stack(a, s, p, &id) ? key : 0;
	slot->stack_id = id;
	a->n.cpu_symbolize_ns += agent_thread_cpu_ns() - t0;
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
 * The request of record s into trace (16 bytes) and *span: zero outside a
 * request. Counts what the context was when count is set.
 */
static void record_request(struct agent *a, const struct tp_sample *s, uint8_t *trace,
			   uint64_t *span, bool count)
{
	uint64_t sp = 0;

	memset(trace, 0, 16);
	*span = 0;
	switch (s->ctx_state) {
	case TP_CTX_TAGGED:
		for (int i = 0; i < 8; i++)
			sp = sp << 8 | s->span_id[i];
		if (count)
			a->n.tagged++;
		/* a record with a zero trace or span id is not a request (the SDK refuses them) */
		if (sp && memcmp(s->trace_id, (uint8_t[16]){0}, 16)) {
			memcpy(trace, s->trace_id, 16);
			*span = sp;
		}
		break;
	case TP_CTX_INVALID:
		if (count)
			a->n.invalid_ctx++;
		break;
	case TP_CTX_FAULT:
		if (count)
			a->n.ctx_faults++;
		break;
	default:
		break;
	}
}

/*
 * An off-CPU interval (docs/offcpu.md): its stack symbolized as a sample's
 * (none for a sum of short intervals), its time summed per key.
 */
static int on_offcpu(struct agent *a, const struct tp_sample *s, const struct proc *p, int64_t t_us)
{
	struct agg_offcpu o = {.time_us = t_us, .source_id = p->source_id, .us = s->off_us};

	a->n.offcpu++;
	a->n.offcpu_us += s->off_us;
	record_request(a, s, o.trace_id, &o.span_id, false);
	o.kind = (s->flags & TP_SAMPLE_OFF_RUNQ) ? STORE_OFFCPU_RUNQ : STORE_OFFCPU_BLOCKED;
	if (!(s->flags & TP_SAMPLE_OFF_SHORT) && s->kern_n + s->user_n)
		o.stack_id = stack_of(a, s, p);
	if (agg_add_offcpu(a->agg, &o) < 0)
		a->n.offcpu_refused++;
	ship_closed(a);
	return 0;
}

/*
 * The requests found from system calls, as server spans to otlp-forward
 * (docs/zero-code-http.md): one export a batch.
 */
static void forward_requests(struct agent *a)
{
	struct otlp_span_out *v = calloc(a->zc.n, sizeof(*v));
	uint8_t *buf = NULL;
	size_t len = 0;

	for (size_t i = 0; v && i < a->zc.n; i++) {
		const struct store_request *r = &a->zc.rows[i];
		const struct zc_request_info *in = &a->zc.info[i];

		v[i].service = in->service;
		memcpy(v[i].trace_id, r->trace_id, 16);
		v[i].span_id = r->span_id;
		v[i].parent_span_id = r->parent_span_id;
		v[i].start_unix_ns = (uint64_t)r->start_us * 1000;
		v[i].end_unix_ns = (uint64_t)(r->start_us + r->duration_us) * 1000;
		v[i].method = in->method;
		v[i].path = in->route;
		v[i].status_code = r->status_code;
	}
	if (v && otlp_spans_encode(v, a->zc.n, &buf, &len) == 0 &&
	    otlp_forward_submit(a->ep.otlp_fwd, buf, len) == 0)
		a->zc.st.forwarded += a->zc.n;
	else
		a->zc.st.forward_lost += a->zc.n;
	free(buf);
	free(v);
}

/*
 * The requests found from system calls as one window: when ZC_SHIP_US have
 * passed since the first of them, the batch is full, or force (the agent
 * stops). A window (and a database transaction) per request would cost a
 * busy server's agent more than the capture itself; the trigger engine
 * sees each request at once anyway (on_http).
 */
#define ZC_SHIP_US 200000
#define ZC_POLL_MS 50 /* the loop's longest sleep while zero-code processes exist */
static void ship_requests(struct agent *a, bool force)
{
	struct agg_window *w;

	if (!a->zc.n ||
	    (!force && !zc_requests_full(&a->zc) &&
	     agent_clock_us(CLOCK_MONOTONIC) - (int64_t)(a->zc.first_ns / 1000) < ZC_SHIP_US))
		return;
	if (a->ep.otlp_fwd)
		forward_requests(a);
	if (a->zc.n && (w = zc_requests_take(&a->zc)) != NULL)
		shipper_submit(a->shipper, w);
}

/*
 * A request found from system calls (docs/zero-code-http.md): a request
 * row, shown to the trigger engine as the OTLP receiver shows its spans.
 */
static int on_http(struct agent *a, const struct tp_sample *s, size_t len, const struct proc *p)
{
	const struct store_request *r;

	if (zc_requests_full(&a->zc))
		ship_requests(a, true);
	r = zc_requests_add(&a->zc, s, len, p->source_id, agg_source_service(a->agg, p->source_id),
			    a->mono_to_real_us);
	if (r && a->ep.trig) {
		const struct zc_request_info *in = zc_requests_info(&a->zc, r);
		struct triggers_source ts = {.pid = (uint32_t)p->pid};
		struct triggers_request tr = {
		    .start_us = r->start_us,
		    .duration_us = r->duration_us,
		    .status = r->status_code,
		    .route = in->route,
		    .method = in->method,
		};

		memcpy(tr.trace_id, r->trace_id, 16);
		triggers_request(a->ep.trig, &ts, &tr);
	}
	return 0;
}

/* A CUDA launch (docs/gpu.md): its request here, the rest in gpu.c. */
static int on_gpu(struct agent *a, const struct tp_sample *s, size_t len, const struct proc *p,
		  int64_t t_us)
{
	uint8_t trace[16];
	uint64_t span;

	record_request(a, s, trace, &span, false);
	gpu_on_launch(a->gpu, s, len, p->source_id, trace, span, t_us);
	return 0;
}

static int on_sample(void *ctx, const struct tp_sample *s, size_t len)
{
	struct agent *a = ctx;
	int64_t t_us = (int64_t)(s->time_ns / 1000) + a->mono_to_real_us;
	struct agg_sample as;
	struct proc *p;

	if (s->kind != TP_REC_SAMPLE && s->kind != TP_REC_OFFCPU && s->kind != TP_REC_HTTP &&
	    s->kind != TP_REC_GPU)
		return 0;
	if (s->kind == TP_REC_SAMPLE)
		a->n.samples++;
	if ((int)s->pid == a->procs.self_pid) {
		a->n.samples_self += s->kind == TP_REC_SAMPLE;
		return 0;
	}
	p = proctable_get(&a->procs, (int)s->pid, t_us);
	if (!p)
		return 0;
	if (s->kind == TP_REC_HTTP)
		return on_http(a, s, len, p);
	if (s->kind == TP_REC_GPU)
		return on_gpu(a, s, len, p, t_us);
	proctable_sampled(&a->procs, p, t_us);
	if (s->kind == TP_REC_OFFCPU)
		return on_offcpu(a, s, p, t_us);
	memset(&as, 0, sizeof(as));
	as.time_us = t_us;
	as.source_id = p->source_id;
	as.hz = s->hz;
	record_request(a, s, as.trace_id, &as.span_id, true);
	as.stack_id = stack_of(a, s, p);
	if ((s->flags & TP_SAMPLE_RAISED) && !raise_hold(&a->raise, &as, s->flags))
		return 0;
	if (agg_add(a->agg, &as) < 0)
		a->n.agg_refused++;
	ship_closed(a);
	return 0;
}

/* ---- life cycle ---- */

/* Exec and exit records: a GPU process's ring is read a last time, then the table's turn. */
static int on_event(void *ctx, const struct sampler_event *ev)
{
	struct agent *a = ctx;

	if (a->gpu && (ev->kind == TP_REC_EXIT || ev->kind == TP_REC_EXEC))
		gpu_forget_process(a->gpu, ev->pid, agent_clock_us(CLOCK_REALTIME));
	return proctable_on_event(&a->procs, ev);
}

static bool note_gpu(void *ctx, int pid, uint64_t source_id)
{
	return gpu_note_process(ctx, pid, source_id);
}

/*
 * The agent forgets every process that ends (exit and exec records, the
 * sweep), so the symbolizer never reads /proc to find the gone ones: on a
 * node with hundreds of idle processes its once-a-minute liveness check
 * cost more than all symbolization.
 */
static struct symbolizer *new_symbolizer(const struct agent *a)
{
	struct sym_opts o = {.max_elf_bytes = a->cfg.symbol_cache_bytes,
			     .idle_ms = -1,
			     .no_perf_maps = a->cfg.perf_maps == 0};

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

/*
 * CFI unwinding (docs/agent.md): the tables of the sampled processes in
 * the sampler's maps. Without them (unwind-table-bytes 0, or no memory)
 * stacks are walked with frame pointers only.
 */
static void wake_loop(void *sampler)
{
	sampler_wake(sampler);
}

/*
 * Named targets are sampled from the start: their tables are built before
 * sampling starts (at most TARGET_TABLES_WAIT_MS), so that their first
 * samples already have whole stacks.
 */
#define TARGET_TABLES_WAIT_MS 1000
static void wait_target_tables(struct agent *a)
{
	int64_t t0 = agent_clock_us(CLOCK_MONOTONIC), now = t0;
	struct timespec nap = {0, 5000000};
	bool pending = true;

	for (int i = 0; i < a->cfg.npids; i++)
		unwind_note_process(a->unwind, a->cfg.pids[i]);
	while (pending && now - t0 < TARGET_TABLES_WAIT_MS * 1000) {
		nanosleep(&nap, NULL);
		now = agent_clock_us(CLOCK_MONOTONIC);
		unwind_tick(a->unwind, now);
		pending = false;
		for (int i = 0; i < a->cfg.npids; i++)
			pending |= unwind_process_pending(a->unwind, a->cfg.pids[i]) != 0;
	}
	log_debug("unwind tables of the %d targets %s in %" PRId64 " ms", a->cfg.npids,
		  pending ? "not all built" : "built", (now - t0) / 1000);
}

static void open_unwind(struct agent *a)
{
	struct unwind_opts uo = {.wake = wake_loop, .wake_arg = a->sampler};
	struct sampler_unwind_maps sm;
	struct unwind_maps um;

	if (sampler_unwind_maps(a->sampler, &sm) != 0)
		return;
	um.rows_fd = sm.rows_fd;
	um.nrows = sm.nrows;
	um.tables_fd = sm.tables_fd;
	um.procs_fd = sm.procs_fd;
	a->unwind = unwind_new(&um, &uo);
	if (!a->unwind) {
		log_warn("no CFI unwinding, stacks use frame pointers only: %s", strerror(errno));
		return;
	}
	a->procs.unwind = a->unwind;
	if (a->cfg.target == CONFIG_TARGET_PIDS)
		wait_target_tables(a);
}

/*
 * The BPF sampler with its targets, and the hold of its raised samples. A
 * sampler that cannot run (privileges, no BTF) stops the start, logged.
 */
static int open_sampler(struct agent *a)
{
	const struct agent_config *cfg = &a->cfg;
	struct sampler_opts so = {0};

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
	so.unwind_bytes = cfg->unwind_table_bytes;
	so.zc_syscalls_only = cfg->zero_code_http == 2;
	so.paused = so.unwind_bytes && cfg->target == CONFIG_TARGET_PIDS;
	a->sampler = sampler_open(&so);
	if (!a->sampler)
		return -1; /* sampler_open logged why */
	open_unwind(a);
	if (so.paused && sampler_resume(a->sampler) != 0) {
		log_error("cannot start sampling: %s", strerror(errno));
		return -1;
	}
	sampler_set_event_fn(a->sampler, on_event, a);
	a->raise.sampler = a->zco.sampler = a->sampler;
	a->raise.base_hz = (unsigned)cfg->frequency;
	a->raise.zc = a->procs.zc = &a->zco;
	if (raise_init(&a->raise, cfg->trigger_hold_bytes) != 0)
		return -1;
	for (int i = 0; i < cfg->npids && cfg->target == CONFIG_TARGET_PIDS; i++)
		if (sampler_add_target_pid(a->sampler, cfg->pids[i]) != 0)
			log_warn("cannot target pid=%d", cfg->pids[i]);
	if (cfg->target == CONFIG_TARGET_CGROUP &&
	    sampler_add_target_cgroup_path(a->sampler, cfg->cgroup) != 0) {
		log_error("cannot target cgroup %s (want a cgroup v2 directory)", cfg->cgroup);
		return -1;
	}
	if (cfg->offcpu != SAMPLER_OFFCPU_OFF &&
	    sampler_set_offcpu(a->sampler, (enum sampler_offcpu_mode)cfg->offcpu,
			       cfg->offcpu_min_us) != 0) {
		log_error("cannot capture off-CPU time: %s", strerror(errno));
		return -1;
	}
	obi_map_init(&a->obi, cfg->obi_map);
	obi_map_tick(&a->obi, a->sampler, agent_clock_us(CLOCK_MONOTONIC));
	return 0;
}

/* The shipper (connects in the background) over the spool, if one can be used. */
static int start_shipper(struct agent *a)
{
	struct shipper_opts sho = {0};

	sho.conninfo = a->cfg.db[0] ? a->cfg.db : NULL;
	sho.max_queue_bytes = a->cfg.queue_bytes;
	sho.store.app_name = "traceprof-agent";
	open_spool(a);
	sho.spool = a->spool;
	a->shipper = shipper_start(&sho);
	if (!a->shipper) {
		log_error("cannot start the shipper: %s", strerror(errno));
		return -1;
	}
	report_previous_run(a);
	return 0;
}

struct agent *agent_new(const struct agent_config *cfg)
{
	struct agent *a = calloc(1, sizeof(*a));
	struct agg_opts ao = {0};

	if (!a)
		return NULL;
	a->cfg = *cfg;
	a->procs.self_pid = getpid();
	a->procs.node = a->cfg.node;
	a->procs.target_pids = cfg->target == CONFIG_TARGET_PIDS;
	a->procs.zerocode = cfg->zero_code_http != 0;
	a->procs.no_python = cfg->python == 0;
	if (a->procs.zerocode && cfg->target == CONFIG_TARGET_ALL) {
		log_error("zero-code-http needs --target pid:N or cgroup:PATH (it follows every "
			  "system call of its processes)");
		goto out_free;
	}
	a->stacks = calloc(STACK_CACHE_SIZE, sizeof(*a->stacks));
	a->pyc = pycache_new(a->cfg.python_cache_bytes);
	a->procs.pyc = a->pyc;
	if (proctable_init(&a->procs) != 0 || !a->stacks || !a->pyc ||
	    zc_owners_init(&a->zco, NULL) != 0)
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
	if (open_sampler(a) != 0)
		goto out_free;
	if (start_shipper(a) != 0)
		goto out_free;
	a->procs.sampler = a->raise.sampler = a->ep.sampler = a->sampler;
	a->procs.sym = a->sym;
	a->procs.agg = a->raise.agg = a->agg;
	a->raise.shipper = a->ep.shipper = a->shipper;
	a->ep.cfg = &a->cfg;
	if (endpoints_start(&a->ep, &a->raise) != 0)
		goto out_free;
	a->procs.trig = a->raise.trig = a->ep.trig;
	a->procs.kube = a->ep.kube;
	if (cfg->gpu) {
		struct gpu_opts go = {.sampler = a->sampler, .sym = &a->sym, .agg = a->agg};

		a->gpu = gpu_new(&go);
		if (!a->gpu)
			goto out_free;
		a->procs.on_look = note_gpu;
		a->procs.look_ctx = a->gpu;
	}

	if (cfg->target == CONFIG_TARGET_PIDS) {
		int64_t now = agent_clock_us(CLOCK_REALTIME);

		for (int i = 0; i < cfg->npids; i++)
			proctable_get(&a->procs, cfg->pids[i], now);
	} else if (cfg->target == CONFIG_TARGET_CGROUP) {
		proctable_scan_cgroup(&a->procs, cfg->cgroup, 0);
	} else {
		proctable_scan_all(&a->procs);
	}
	log_info("sampling at %d Hz, window %ds, %zu processes known, node %s", cfg->frequency,
		 cfg->window_s, a->procs.n, cfg->node);
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
	hold_get_stats(a->raise.hold, &hs);
	shipper_get_stats(a->shipper, &sh);
	st.samples_open = ag.samples - a->closed_samples;
	st.raised_held = hs.samples - hs.samples_refused - hs.samples_kept - hs.samples_lost;
	st.samples_unspooled = sh.samples_unspooled;
	st.requests_unspooled = sh.requests_unspooled;
	spool_note_state(a->spool, &st);
}

static void write_stats(struct agent *a, double elapsed_s)
{
	struct stats_sources s = {
	    .path = a->cfg.stats_file,
	    .elapsed_s = elapsed_s,
	    .sampler = a->sampler,
	    .agg = a->agg,
	    .shipper = a->shipper,
	    .sym = a->sym,
	    .spool = a->spool,
	    .spool_prev = &a->spool_prev,
	    .counts = &a->n,
	    .procs = &a->procs,
	    .unwind = a->unwind,
	    .raise = &a->raise,
	    .ep = &a->ep,
	    .obi = &a->obi.st,
	    .zc = &a->zc.st,
	    .pyc = a->pyc,
	    .gpu = a->gpu,
	};

	stats_write(&s);
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
	a->procs.sym = fresh;
	a->n.sym_renewals++;
}

static void log_progress(struct agent *a)
{
	struct shipper_stats sh;

	shipper_get_stats(a->shipper, &sh);
	log_info("samples=%" PRIu64 " tagged=%" PRIu64 " windows delivered=%" PRIu64
		 " dropped=%" PRIu64 " queued=%zu connected=%s%s%s",
		 a->n.samples, a->n.tagged, sh.windows_delivered, sh.windows_dropped,
		 sh.queue_windows, sh.connected ? "yes" : "no",
		 sh.last_error[0] ? " last_error=" : "", sh.last_error);
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
	int64_t mono = agent_clock_us(CLOCK_MONOTONIC), due = next_sweep_mono;
	int64_t close_us = agg_next_close_us(a->agg);

	if (close_us != INT64_MAX && close_us - a->mono_to_real_us < due)
		due = close_us - a->mono_to_real_us;
	if (a->procs.next_recheck_us != INT64_MAX &&
	    a->procs.next_recheck_us - a->mono_to_real_us < due)
		due = a->procs.next_recheck_us - a->mono_to_real_us;
	if (end_mono && end_mono < due)
		due = end_mono;
	/* request records wake the loop at most every 5 ms (zerocode.bpf.c): one may wait */
	if (a->zco.nagent + a->zco.ntrig > 0 && mono + ZC_POLL_MS * 1000 < due)
		due = mono + ZC_POLL_MS * 1000;
	/* kernel records wait in the GPU processes' rings, launches for them (docs/gpu.md) */
	if (gpu_active(a->gpu) && mono + GPU_POLL_MS * 1000 < due)
		due = mono + GPU_POLL_MS * 1000;
	if (a->zc.n && (int64_t)(a->zc.first_ns / 1000) + ZC_SHIP_US < due)
		due = (int64_t)(a->zc.first_ns / 1000) + ZC_SHIP_US;
	if (a->ep.trig) {
		int64_t dl_ms = triggers_next_deadline_ms(a->ep.trig);

		if (dl_ms != INT64_MAX && dl_ms * 1000 - a->mono_to_real_us < due)
			due = dl_ms * 1000 - a->mono_to_real_us;
	}
	if (due - mono >= POLL_MAX_MS * 1000)
		return POLL_MAX_MS;
	return due <= mono ? 0 : (int)((due - mono + 999) / 1000);
}

/* A trigger's new targets: their unwind tables now, not at their first sample read. */
static void note_new_targets(struct agent *a)
{
	uint32_t tgids[64];
	size_t n;

	while ((n = raise_take_targets(&a->raise, tgids, 64)) > 0)
		for (size_t i = 0; i < n; i++) {
			struct proc *p = proctable_find(&a->procs, (int)tgids[i]);

			if (p && !p->unwind_noted)
				proctable_note_unwind(&a->procs, p);
		}
}

int agent_run(struct agent *a, volatile sig_atomic_t *stop, volatile sig_atomic_t *stats_now)
{
	int64_t t0 = agent_clock_us(CLOCK_MONOTONIC), next_sweep = t0 + SWEEP_EVERY_US;
	int64_t next_renew = t0 + RENEW_EVERY_US;
	int64_t next_progress = t0 + 60000000;
	int64_t next_kube_check = t0;
	int64_t end = a->cfg.duration_s > 0 ? t0 + (int64_t)(a->cfg.duration_s * 1e6) : 0;
	int rc = 0, n;

	while (!*stop) {
		int timeout =
		    poll_timeout_ms(a, next_sweep < next_renew ? next_sweep : next_renew, end);
		uint64_t c0 = agent_thread_cpu_ns(), c1, c2;
		int64_t mono, real;

		n = sampler_poll(a->sampler, timeout, on_sample, a);
		ship_requests(a, false);
		c1 = agent_thread_cpu_ns();
		a->n.loop_passes++;
		a->n.cpu_poll_ns += c1 - c0;
		if (n < 0 && n != -EINTR) {
			log_error("sampler failed: %s", strerror(-n));
			rc = n;
			break;
		}
		sync_clocks(a);
		mono = agent_clock_us(CLOCK_MONOTONIC);
		real = mono + a->mono_to_real_us;
		gpu_tick(a->gpu, real, mono);
		agg_tick(a->agg, real);
		raise_apply_decisions(&a->raise);
		note_new_targets(a);
		raise_expire(&a->raise, real);
		ship_closed(a);
		note_spool_state(a);
		c2 = agent_thread_cpu_ns();
		a->n.cpu_window_ns += c2 - c1;
		raise_tick(&a->raise);
		if (a->ep.kube) {
			proctable_rename_pods(&a->procs);
			if (mono >= next_kube_check) {
				kubepods_check(a->ep.kube);
				next_kube_check = mono + 1000000;
			}
		}
		if (a->unwind)
			unwind_tick(a->unwind, mono);
		obi_map_tick(&a->obi, a->sampler, mono);
		if (real >= a->procs.next_recheck_us)
			proctable_recheck(&a->procs, real);
		if (a->procs.ndying)
			proctable_forget_exited(&a->procs, real);
		if (mono >= next_sweep) {
			proctable_sweep(&a->procs);
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
	endpoints_stop_servers(&a->ep);
	while (sampler_poll(a->sampler, 0, on_sample, a) > 0)
		;
	/* the rings a last time; what still waits is counted as its wait's end would */
	gpu_tick(a->gpu, agent_clock_us(CLOCK_REALTIME), agent_clock_us(CLOCK_MONOTONIC));
	gpu_tick(a->gpu, agent_clock_us(CLOCK_REALTIME),
		 agent_clock_us(CLOCK_MONOTONIC) + GPU_LAUNCH_EXPIRE_US + GPU_PENDING_US);
	raise_apply_decisions(&a->raise); /* requests already claimed keep their raised samples */
	agg_close(a->agg);
	ship_closed(a);
	ship_requests(a, true);
	if (shipper_stop(a->shipper, STOP_FLUSH_MS) != 0) {
		struct shipper_stats sh;

		shipper_get_stats(a->shipper, &sh);
		log_warn("stopped with %" PRIu64 " samples not delivered (database %s)",
			 sh.samples_undelivered, sh.last_error[0] ? sh.last_error : "unreachable");
	}
	log_progress(a);
	write_stats(a, (double)(agent_clock_us(CLOCK_MONOTONIC) - t0) / 1e6);
	return rc;
}

void agent_free(struct agent *a)
{
	if (!a)
		return;
	endpoints_free(&a->ep); /* servers, trigger engine, pod informer: before the sampler */
	unwind_free(a->unwind); /* writes the sampler's maps: before it */
	gpu_free(a->gpu);	/* its rings; the uprobes go with the sampler */
	a->zco.sampler = NULL;	/* the sampler's links go with it */
	sampler_free(a->sampler);
	raise_free(&a->raise);
	shipper_free(a->shipper);
	spool_close(a->spool, true); /* what stays in it is delivered by the next start */
	agg_free(a->agg);
	sym_free(a->sym);
	proctable_free(&a->procs);
	zc_owners_free(&a->zco);
	pycache_free(a->pyc);
	free(a->stacks);
	free(a);
}
