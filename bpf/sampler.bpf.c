// SPDX-License-Identifier: GPL-2.0
/*
 * sampler.bpf.c - the always-on CPU sampler of traceprof (libbpf CO-RE).
 *
 * on_cpu_clock runs on a software CPU-clock perf event on every online CPU
 * (19 Hz always, up to 100 Hz on demand; the event's bpf cookie is its Hz).
 * For each sample of a wanted process it reads the interrupted thread's
 * OpenTelemetry thread context (OTEP 4947) and emits the sample: one
 * struct tp_sample (header, kernel then user frames) per sample into the
 * ring buffer "samples", with its timestamp (per-request windows and
 * triggers need each sample's time).
 *
 * The thread's record address comes from "thread_records" (the thread's
 * task local storage, filled by on_thread_registered, a uprobe on the SDK's
 * registration call) or is computed from the thread pointer and the
 * process's TLS location in "tls_locs" (the task local storage of the
 * thread-group leader, written by the agent). Task local storage is a few
 * pointer loads from the task; a hash lookup misses in cold caches and
 * TLBs, and a sample finds them cold (bench/results.md). Every user memory
 * read goes through bpf_probe_read_user, so a garbage pointer gives
 * TP_CTX_FAULT, never more.
 *
 * Raised sampling (docs/triggers.md): a second set of CPU-clock events,
 * with its own program on_cpu_clock_raised, runs at raised_hz while a trigger is active.
 * Its samples are kept only for threads of "raised_targets" inside a
 * request, flagged TP_SAMPLE_RAISED, and a per-CPU accumulator flags a
 * base_hz/raised_hz subsample of them TP_SAMPLE_BASE; the base sample of
 * such a thread is skipped while raised_on, so no CPU time is counted
 * twice.
 *
 * on_dl_debug_state (a uprobe on the dynamic loader's rendezvous, at the
 * end of the file) tells the agent, rate-limited, that a target's loader
 * mapped or unmapped objects (dlopen, dlclose), so it looks again at once.
 *
 * The workload: tens to hundreds of samples per second per CPU, so a run
 * costs 3-8 us on the measured machine (bench/results.md); no loops
 * but those inside the BPF helpers.
 */
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "sampler.h"

#define PF_KTHREAD 0x00200000 /* task->flags: a kernel thread, no user stack */

char LICENSE[] SEC("license") = "GPL";

/* Options, set by the loader before load. */
const volatile __u32 filter_mode = TP_FILTER_ALL; /* enum tp_filter */
const volatile __u32 wakeup_bytes = 0; /* wake the reader at this much pending data; 0: always */
const volatile __u32 base_hz = 19;     /* frequency of the base events (the raised subsample) */

/* Raised sampling, written by the agent at run time (docs/triggers.md). */
volatile __u32 raised_on = 0; /* 1: raised events kept, base samples they cover skipped */
volatile __u32 raised_hz = 0; /* frequency of the raised events while raised_on */

/* tgid -> 1: processes whose threads inside a request are sampled at raised_hz. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, TP_MAX_RAISED_TARGETS);
	__type(key, __u32);
	__type(value, __u8);
} raised_targets SEC(".maps");

/*
 * tgid -> threshold (µs): processes whose off-CPU intervals an active
 * trigger asked for (spec.sampling.offCPU), captured in the requests mode
 * even while the global off-CPU mode is off (offcpu.bpf.c). The threshold
 * in force is the sampler's one, offcpu_min_ns (the smallest asked for).
 * Written by sampler_set_offcpu_targets.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, TP_MAX_OFFCPU_TARGETS);
	__type(key, __u32);
	__type(value, __u32);
} offcpu_targets SEC(".maps");

/* Per CPU: the accumulator that picks the base_hz/raised_hz subsample. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} raised_acc SEC(".maps");

/* tgid -> 1: processes sampled under TP_FILTER_PIDS. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u8);
} targets SEC(".maps");

/* cgroup v2 id -> 1: cgroups sampled under TP_FILTER_CGROUP. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u64);
	__type(value, __u8);
} target_cgroups SEC(".maps");

/*
 * Per thread: user address of its OTEP 4947 record (from the uprobe). Task
 * local storage: freed with the thread, cleared when it execs.
 */
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, __u64);
} thread_records SEC(".maps");

/*
 * Per process, on its thread-group leader: where it keeps otel_thread_ctx_v1
 * (from the agent, keyed by a pidfd in user space). Freed with the process,
 * cleared when it execs.
 */
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct tp_tls_loc);
} tls_locs SEC(".maps");

/* The samples; the loader sets the size before load. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} samples SEC(".maps");

/*
 * The counters: one row per CPU of a plain array, indexed by the CPU's
 * number (the loader sets max_entries to the possible CPUs). A small plain
 * array is kmalloc'ed, in the kernel's linear map, where a per-CPU array's
 * values sit in per-CPU chunks mapped page by page: one TLB miss less per
 * sample after the interrupted task evicted everything (bench/lookup_cost,
 * count-percpu:count-array). Rows are 128 bytes: no two CPUs share a
 * cache line. A CPU's programs do not run concurrently, so plain
 * increments suffice.
 */
struct counter_set {
	__u64 n[TP_CNT_MAX]; /* index: enum tp_counter */
	__u16 ask[2];	     /* frames to ask for, kernel and user: take_stack() */
} __attribute__((aligned(64)));

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct counter_set);
} counters SEC(".maps");

/*
 * CFI unwinding (sampler.h): every placed table's rows, in one array the
 * agent fills (batch updates); the loader sizes it (unwind-table-bytes).
 */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct tp_unwind_row);
} unwind_rows SEC(".maps");

/* Where each placed table's rows are (slot -> rows, id). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, TP_UNWIND_MAX_TABLES);
	__type(key, __u32);
	__type(value, struct tp_unwind_table);
} unwind_tables SEC(".maps");

/*
 * Per CPU: the rows of recently walked frames, by (address, process, list
 * generation): a frame seen again costs one lookup here instead of the
 * mapping, table, index and rows (cold after the interrupted task ran).
 */
#define UW_CACHE_SLOTS 512
struct uw_cache_ent {
	__u64 pc;
	__u32 tgid;
	__u32 gen;
	struct tp_unwind_row row;
};

struct uw_cache {
	struct uw_cache_ent e[UW_CACHE_SLOTS];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct uw_cache);
} uw_cache SEC(".maps");

/* tgid -> its executable mappings with tables; no entry: frame pointers only. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct tp_unwind_proc);
} unwind_procs SEC(".maps");

/* The fixed part of an OTEP 4947 record, byte for byte. */
struct ctx_header {
	__u8 trace_id[16];     /* W3C trace id */
	__u8 span_id[8];       /* W3C span id */
	__u8 valid;	       /* 1: ids are current */
	__u8 trace_flags;      /* W3C trace flags */
	__u16 attrs_data_size; /* bytes of attributes after the header (not read) */
};

/* What the sampler found for the interrupted thread. */
struct thread_ctx {
	struct ctx_header hdr; /* meaningful when state == TP_CTX_TAGGED */
	__u8 state;	       /* enum tp_ctx_state */
	__u8 src;	       /* where a tagged context came from: enum ctx_src */
};

/* Where a tagged context came from. */
enum ctx_src {
	CTX_SRC_TLS = 0,  /* the thread's OTEP 4947 record */
	CTX_SRC_OBI = 1,  /* OBI's trace map */
	CTX_SRC_HTTP = 2, /* a request found from the thread's system calls (zerocode.bpf.c) */
};

/* The arm64 layout of the thread pointer, for CO-RE on arm64 kernels. */
struct thread_struct___arm64 {
	struct {
		unsigned long tp_value; /* TPIDR_EL0 of the task */
	} uw;				/* user-visible registers */
};

struct task_struct___arm64 {
	struct thread_struct___arm64 thread; /* arch state */
};

/* This CPU's counters (an inlined array lookup, no helper call). */
static __always_inline struct counter_set *counters_here(void)
{
	__u32 cpu = bpf_get_smp_processor_id();

	return bpf_map_lookup_elem(&counters, &cpu);
}

static __always_inline void count(__u32 which)
{
	struct counter_set *c = counters_here();

	if (c && which < TP_CNT_MAX)
		c->n[which] += 1;
}

static __always_inline bool wanted(__u32 tgid)
{
	if (filter_mode == TP_FILTER_PIDS)
		return bpf_map_lookup_elem(&targets, &tgid) != NULL;
	if (filter_mode == TP_FILTER_CGROUP) {
		__u64 cg = bpf_get_current_cgroup_id();

		return bpf_map_lookup_elem(&target_cgroups, &cg) != NULL;
	}
	return true;
}

/*
 * The user thread pointer of the task (TLS base). task is a BTF pointer: a
 * direct load, no helper call.
 */
static __always_inline __u64 thread_pointer(struct task_struct *task)
{
#if defined(__TARGET_ARCH_arm64)
	return ((struct task_struct___arm64 *)task)->thread.uw.tp_value;
#else
	return task->thread.fsbase;
#endif
}

/*
 * Address of the thread's otel_thread_ctx_v1 variable from the process's
 * TLS location; 0 when the location is unknown or the module's TLS block is
 * not allocated in this thread (*state says which: NONE or FAULT).
 */
static __always_inline __u64 tls_slot_addr(struct task_struct *task, const struct tp_tls_loc *loc,
					   __u8 *state)
{
	__u64 tp = thread_pointer(task), dtv = 0, block = 0;

	if (!tp)
		return 0;
	if (loc->kind == TP_TLS_STATIC)
		return tp + loc->tp_offset;
	if (loc->kind != TP_TLS_DTV)
		return 0;
	if (bpf_probe_read_user(&dtv, sizeof(dtv), (void *)(tp + loc->dtv_offset)) || !dtv) {
		*state = TP_CTX_FAULT;
		return 0;
	}
	if (bpf_probe_read_user(
		&block, sizeof(block),
		(void *)(dtv + loc->modid * loc->dtv_stride + loc->dtv_val_offset))) {
		*state = TP_CTX_FAULT;
		return 0;
	}
	/* glibc: NULL or TLS_DTV_UNALLOCATED until the thread first touches the module */
	if (block == 0 || block == (__u64)-1)
		return 0;
	return block + loc->sym_offset;
}

/*
 * Reads the interrupted thread's context record; never fails, only reports.
 * A thread the SDK registered: one storage lookup. Any other: two (the
 * thread's, then its process's), and none has a hash to compute.
 *
 * When the process's writer is the traceprof SDK and its registration
 * uprobe is attached (loc->sdk_probe), the pointer read through the TLS
 * location is kept in the thread's storage, NULL included: the SDK sets it
 * once per thread and never moves it, and a later registration goes
 * through the uprobe, which overwrites what is kept. The thread's later
 * samples then skip its TLS slot: one storage lookup, and no user memory
 * read at all outside a request. (A uprobe handler and this program never
 * nest on a CPU: the kernel runs one BPF tracing program at a time there.)
 */
static __always_inline void read_tls_ctx(struct task_struct *task, struct thread_ctx *tc)
{
	__u64 record = 0, *known, slot;
	struct tp_tls_loc *loc;

	tc->state = TP_CTX_NONE;
	known = bpf_task_storage_get(&thread_records, task, NULL, 0);
	if (known) {
		record = *known;
	} else {
		loc = bpf_task_storage_get(&tls_locs, task->group_leader, NULL, 0);
		if (!loc)
			return;
		slot = tls_slot_addr(task, loc, &tc->state);
		if (!slot)
			return;
		if (bpf_probe_read_user(&record, sizeof(record), (void *)slot)) {
			tc->state = TP_CTX_FAULT;
			return;
		}
		if (loc->sdk_probe) /* created with record; an existing entry is left alone */
			bpf_task_storage_get(&thread_records, task, &record,
					     BPF_LOCAL_STORAGE_GET_F_CREATE);
	}
	if (!record)
		return;
	if (bpf_probe_read_user(&tc->hdr, sizeof(tc->hdr), (void *)record)) {
		tc->state = TP_CTX_FAULT;
		return;
	}
	tc->state = tc->hdr.valid == 1 ? TP_CTX_TAGGED : TP_CTX_INVALID;
}

/*
 * OBI's trace map, when the agent found one (obi_on): the map itself is
 * OBI's, put in this array by the agent, so it can come, go and be
 * replaced while the sampler runs. The template has OBI's layout; the
 * kernel refuses a map of another type, key or value size.
 */
struct obi_inner {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, TP_OBI_MAX_ENTRIES);
	__uint(key_size, sizeof(__u64));
	__uint(value_size, sizeof(struct tp_obi_ctx));
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, 1);
	__type(key, __u32);
	__array(values, struct obi_inner);
} obi_maps SEC(".maps");

volatile __u32 obi_on = 0; /* 1: obi_maps holds OBI's map */

/*
 * HTTP/1.x requests found from system calls (zerocode.bpf.c,
 * docs/zero-code-http.md): per thread of a target, the call in progress and
 * the request it serves.
 */
struct zc_thread {
	/* the system call in progress, from sys_enter to sys_exit */
	__u64 c_buf; /* its buffer (an iovec call: the first iovec's base) */
	__u32 c_fd;
	__u32 c_nr; /* the call's number + 1; 0: none followed */
	/* the request open on the thread */
	__u64 start_ns;	     /* the return of the read that brought its request line */
	__u64 last_write_ns; /* the return of its last write to fd */
	__u32 fd;	     /* its connection */
	__u8 active;	     /* a request is open */
	__u8 answered;	     /* its status line was written */
	__u8 multiplexed;    /* the thread serves several connections at once: never tagged */
	__u8 pad;
	__u16 status;
	__u16 flags; /* TP_HTTP_* */
	__u16 target_len;
	__u16 pad2;
	__u32 epoch; /* the capture epoch of the process (zc_targets) it was set in */
	__u32 pad3;
	struct ctx_header hdr; /* trace id, span id, valid, flags */
	__u8 parent_span_id[8];
	char method[8];
	char target[TP_HTTP_TARGET];
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct zc_thread);
} zc_threads SEC(".maps");

/* Processes with zero-code capture on (sampler_zerocode_add; zerocode.bpf.c). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, TP_MAX_ZC_TARGETS);
	__type(key, __u32);
	__type(value, struct tp_zc_target);
} zc_targets SEC(".maps");

volatile __u32 zc_on = 0; /* 1: zerocode programs attached, zc_targets filled */

/*
 * The request a thread serves, found from its system calls, if any: only
 * while capture of its process is the one it was found in (zc_targets'
 * epoch), else the request is dropped (stale: capture stopped, or stopped
 * and started again, while the thread was inside it; its calls are no
 * longer followed, so nothing else would ever end it).
 */
static __always_inline void zc_read_ctx(struct task_struct *task, struct thread_ctx *tc)
{
	struct zc_thread *t = bpf_task_storage_get(&zc_threads, task, NULL, 0);
	struct tp_zc_target *z;
	__u32 tgid;

	if (!t || !t->active || t->multiplexed)
		return;
	tgid = task->tgid;
	z = bpf_map_lookup_elem(&zc_targets, &tgid);
	if (!z || z->epoch != t->epoch) {
		t->active = 0;
		count(TP_CNT_HTTP_STALE);
		return;
	}
	tc->hdr = t->hdr;
	tc->state = TP_CTX_TAGGED;
	tc->src = CTX_SRC_HTTP;
}

/* The record flags that say where a tagged context came from. */
static __always_inline __u16 ctx_src_flags(const struct thread_ctx *tc)
{
	if (tc->src == CTX_SRC_OBI)
		return TP_SAMPLE_CTX_OBI;
	if (tc->src == CTX_SRC_HTTP)
		return TP_SAMPLE_CTX_HTTP;
	return 0;
}

/*
 * The thread's request context: its OTEP 4947 record first (the SDK or
 * another writer), then OBI's trace map for a thread without one.
 */
static __always_inline void read_thread_ctx(struct task_struct *task, struct thread_ctx *tc)
{
	struct tp_obi_ctx *o;
	__u32 zero = 0;
	__u64 key;
	void *m;

	tc->src = CTX_SRC_TLS;
	read_tls_ctx(task, tc);
	if (tc->state == TP_CTX_TAGGED)
		return;
	if (obi_on && (m = bpf_map_lookup_elem(&obi_maps, &zero))) {
		key = ((__u64)task->tgid << 32) | (__u32)task->pid;
		o = bpf_map_lookup_elem(m, &key);
		if (o) {
			__builtin_memcpy(tc->hdr.trace_id, o->trace_id, sizeof(o->trace_id));
			__builtin_memcpy(tc->hdr.span_id, o->span_id, sizeof(o->span_id));
			tc->hdr.valid = 1;
			tc->hdr.trace_flags = 0;
			tc->state = TP_CTX_TAGGED;
			tc->src = CTX_SRC_OBI;
			return;
		}
	}
	if (zc_on)
		zc_read_ctx(task, tc);
}

/* Whether the sample interrupted user mode (then the kernel stack is empty). */
static __always_inline bool interrupted_user_mode(struct bpf_perf_event_data *ctx)
{
#if defined(__TARGET_ARCH_x86)
	/* the context allows only 8-byte loads of regs; cs shares its slot with csx */
	__u64 cs = *(volatile __u64 *)((char *)&ctx->regs + __builtin_offsetof(struct pt_regs, cs));

	return (cs & 3) == 3; /* CPL 3 */
#elif defined(__TARGET_ARCH_arm64)
	return (ctx->regs.pstate & 0xf) == 0; /* PSR_MODE_EL0t */
#else
	return false; /* unknown: always ask for the kernel stack */
#endif
}

static __always_inline bool is_kernel_thread(void)
{
	struct task_struct *task = bpf_get_current_task_btf();

	return task->flags & PF_KTHREAD;
}

#if defined(__TARGET_ARCH_x86)
/*
 * CFI unwinding: one caller frame a call of unwind_step. The registers of
 * the frame being left (ip, sp, bp) become the caller's. exact: ip is not
 * a return address (the interrupted instruction, or the one a signal
 * interrupted), so its row is looked up at ip, not ip - 1.
 */
struct uw_state {
	__u64 ip, sp, bp;
	__u32 exact;
	__u32 how;	/* what the step did: enum uw_how */
	__u32 last;	/* the mapping of the last frame looked up (a hint) */
	__u32 leaf;	/* 1: the interrupted frame, whose registers are in regs */
	__u32 tgid;	/* the process (keys the row cache, with its list's gen) */
	__u64 regs[15]; /* its general registers, as struct pt_regs lays out r15 .. di */
};

enum uw_how {
	UW_CFI = 0,	 /* the caller's frame from a row */
	UW_FP = 1,	 /* from the frame pointer: no table, gap or rule not followed */
	UW_FP_NOTAB = 2, /* the same, in a mapping whose table is not placed (yet) */
	UW_ROOT = 3,	 /* the walk ends: the outermost frame (no return address) */
	UW_FP_END = 4,	 /* the walk ends: frame pointer chain ends (rbp or ip 0) */
	UW_CUT = 5,	 /* the walk is cut: memory unreadable or the stack did not move */
};

/* The row of a table that covers addr (addr - table base), or NULL. */
static __always_inline struct tp_unwind_row *uw_row(const struct tp_unwind_table *t, __u64 key)
{
	__u32 lo = 0, hi = t->nrows, mid, idx, b;
	struct tp_unwind_row *r;

	if (hi == 0 || hi > TP_UNWIND_MAX_ROWS || key > 0xffffffffull)
		return NULL;
	if (t->nbuckets && t->shift < 32) {
		/* the rows between the bucket's entry and the next one's (inclusive) */
		b = (__u32)(key >> t->shift);
		if (b >= t->nbuckets)
			b = t->nbuckets - 1;
		idx = t->row0 + t->nrows + b;
		r = bpf_map_lookup_elem(&unwind_rows, &idx);
		if (r && r->addr < t->nrows)
			lo = r->addr;
		idx++;
		r = b + 1 < t->nbuckets ? bpf_map_lookup_elem(&unwind_rows, &idx) : NULL;
		if (r && r->addr < t->nrows && r->addr >= lo)
			hi = r->addr + 1;
	}
	for (int k = 0; k < TP_UNWIND_SEARCH && hi - lo > 1; k++) {
		mid = lo + (hi - lo) / 2;
		idx = t->row0 + mid;
		r = bpf_map_lookup_elem(&unwind_rows, &idx);
		if (!r)
			return NULL;
		if (r->addr <= key)
			lo = mid;
		else
			hi = mid;
	}
	idx = t->row0 + lo;
	r = bpf_map_lookup_elem(&unwind_rows, &idx);
	if (!r || r->addr > key)
		return NULL;
	return r;
}

/* The mapping of p that holds pc, or NULL; *last: the previous frame's mapping (a hint). */
static __always_inline const struct tp_unwind_map *uw_map(const struct tp_unwind_proc *p, __u64 pc,
							  __u32 *last)
{
	__u32 lo = 0, hi = p->n, mid;
	const struct tp_unwind_map *m;

	if (hi == 0 || hi > TP_UNWIND_MAX_MAPS)
		return NULL;
	m = &p->maps[*last & (TP_UNWIND_MAX_MAPS - 1)];
	if (*last < hi && pc >= m->start && pc < m->end)
		return m; /* most callers are in the callee's file */
	for (int k = 0; k < TP_UNWIND_MAP_SEARCH && hi - lo > 1; k++) {
		mid = lo + (hi - lo) / 2;
		if (p->maps[mid & (TP_UNWIND_MAX_MAPS - 1)].start <= pc)
			lo = mid;
		else
			hi = mid;
	}
	m = &p->maps[lo & (TP_UNWIND_MAX_MAPS - 1)];
	if (pc < m->start || pc >= m->end)
		return NULL;
	*last = lo;
	return m;
}

/* The caller through the frame pointer (rbp -> saved rbp, return address). */
static __always_inline int uw_frame_pointer(struct uw_state *st, int how)
{
	__u64 fp[2], bp = st->bp;

	if (!bp) {
		st->how = UW_FP_END;
		return 1;
	}
	if (bp < st->sp || bpf_probe_read_user(fp, sizeof(fp), (void *)bp)) {
		st->how = UW_CUT;
		return 1;
	}
	if (!fp[1]) {
		st->how = UW_FP_END;
		return 1;
	}
	st->ip = fp[1];
	st->sp = bp + 16;
	st->bp = fp[0];
	st->exact = 0;
	st->leaf = 0;
	st->how = how;
	return 0;
}

/* x86-64 signal frame: sp is the struct ucontext the kernel pushed. */
#define UC_RBP 120 /* uc_mcontext (40) + 8 * REG_RBP (10) */
#define UC_RSP 160 /* + 8 * REG_RSP (15) */
#define UC_RIP 168 /* + 8 * REG_RIP (16) */

static __always_inline int uw_signal(struct uw_state *st)
{
	__u64 r[7]; /* rbp .. rip: offsets 120 to 168 */

	if (bpf_probe_read_user(r, sizeof(r), (void *)(st->sp + UC_RBP)) || !r[6]) {
		st->how = UW_CUT;
		return 1;
	}
	st->bp = r[0];
	st->sp = r[5];
	st->ip = r[6];
	st->leaf = 0;  /* its other registers are not read */
	st->exact = 1; /* the interrupted instruction, not a return address */
	st->how = UW_CFI;
	return 0;
}

/*
 * One step: 0 with st at the caller's frame (st->how UW_CFI, UW_FP or
 * UW_FP_NOTAB), 1 when the walk ends (st->how says why). A global
 * function, verified once whatever the number of frames.
 */
__noinline int unwind_step(const struct tp_unwind_proc *p, struct uw_state *st)
{
	const struct tp_unwind_map *m;
	const struct tp_unwind_table *t;
	struct tp_unwind_row *r = NULL;
	__u64 pc, cfa, ra = 0, bp;
	__u32 slot, reg, zero = 0;
	struct uw_cache_ent *ce = NULL;
	struct uw_cache *cache;

	if (!p || !st)
		return 1;
	pc = st->exact ? st->ip : st->ip - 1;
	cache = bpf_map_lookup_elem(&uw_cache, &zero);
	if (cache) {
		ce = &cache->e[(pc ^ (pc >> 9) ^ st->tgid) & (UW_CACHE_SLOTS - 1)];
		if (ce->pc == pc && ce->tgid == st->tgid && ce->gen == p->gen && p->gen) {
			r = &ce->row;
			goto have_row;
		}
	}
	m = uw_map(p, pc, &st->last);
	if (!m)
		return uw_frame_pointer(st, UW_FP);
	slot = m->table;
	t = bpf_map_lookup_elem(&unwind_tables, &slot);
	if (!t || t->id != m->id || !m->id)
		return uw_frame_pointer(st, UW_FP_NOTAB);
	r = uw_row(t, pc - m->bias);
	if (!r)
		return uw_frame_pointer(st, UW_FP);
	if (ce) {
		ce->pc = pc;
		ce->tgid = st->tgid;
		ce->gen = p->gen;
		ce->row = *r;
	}
have_row:
	if (r->rule & TP_UW_SIGNAL)
		return uw_signal(st);
	switch (r->rule & TP_UW_CFA_MASK) {
	case TP_UW_CFA_RSP:
		cfa = st->sp + r->cfa_off;
		break;
	case TP_UW_CFA_RBP:
		cfa = st->bp + r->cfa_off;
		break;
	case TP_UW_CFA_PLT:
		cfa = st->sp + r->cfa_off + ((st->ip & 15) >= (__u64)r->rbp_off8 ? 8 : 0);
		break;
	case TP_UW_CFA_REG:
		reg = ((__u16)r->cfa_off >> 8) & 0xf;
		if (!st->leaf || reg > 14) /* another register of a caller is not known */
			return uw_frame_pointer(st, UW_FP);
		cfa = st->regs[reg] + (__s8)(r->cfa_off & 0xff);
		break;
	case TP_UW_CFA_DEREF:
		if (bpf_probe_read_user(&cfa, sizeof(cfa), (void *)(st->sp + r->cfa_off))) {
			st->how = UW_CUT;
			return 1;
		}
		cfa += 8;
		break;
	default:
		return uw_frame_pointer(st, UW_FP);
	}
	if (r->rule & TP_UW_RA_UNDEF) {
		st->how = UW_ROOT;
		return 1;
	}
	if (cfa <= st->sp) {
		st->how = UW_CUT;
		return 1;
	}
	bp = st->bp;
	if ((r->rule & TP_UW_RBP_MASK) == TP_UW_RBP_AT_CFA && r->rbp_off8 == -2) {
		/* the usual frame: rbp pushed right after the call, both in one read */
		__u64 pair[2];

		if (bpf_probe_read_user(pair, sizeof(pair), (void *)(cfa - 16))) {
			st->how = UW_CUT;
			return 1;
		}
		bp = pair[0];
		ra = pair[1];
	} else {
		if (bpf_probe_read_user(&ra, sizeof(ra), (void *)(cfa - 8))) {
			st->how = UW_CUT;
			return 1;
		}
		if ((r->rule & TP_UW_RBP_MASK) == TP_UW_RBP_AT_CFA) {
			if (bpf_probe_read_user(&bp, sizeof(bp),
						(void *)(cfa + 8 * (__s64)r->rbp_off8))) {
				st->how = UW_CUT;
				return 1;
			}
		} else if ((r->rule & TP_UW_RBP_MASK) == TP_UW_RBP_UNDEF) {
			bp = 0;
		}
	}
	if (!ra) {
		st->how = UW_FP_END;
		return 1;
	}
	st->ip = ra;
	st->sp = cfa;
	st->bp = bp;
	st->exact = 0;
	st->leaf = 0;
	st->how = UW_CFI;
	return 0;
}

/*
 * The user stack of a process with unwind tables p, walked with them into
 * out (room for TP_MAX_FRAMES frames, leaf first); returns the frames. The
 * registers are the interrupted ones (user mode) or those the thread had
 * when it entered the kernel (user_mode false: any program's context, the
 * current thread's; the off-CPU programs walk that way).
 */
static __always_inline __u32 walk_user(void *pctx, bool user_mode, const struct tp_unwind_proc *p,
				       __u64 *out, struct counter_set *c, __u16 *sflags)
{
	__u32 n = 1, i, cfi = 0, fp = 0, notab = 0;
	struct uw_state st = {};

	if (user_mode) {
		/* only a perf_event program's context has the interrupted registers */
		struct bpf_perf_event_data *ctx = pctx;

		st.ip = ctx->regs.ip;
		st.sp = ctx->regs.sp;
		st.bp = ctx->regs.bp;
		/* the context allows loads only, field by field */
		st.regs[0] = ctx->regs.r15;
		st.regs[1] = ctx->regs.r14;
		st.regs[2] = ctx->regs.r13;
		st.regs[3] = ctx->regs.r12;
		st.regs[4] = ctx->regs.bp;
		st.regs[5] = ctx->regs.bx;
		st.regs[6] = ctx->regs.r11;
		st.regs[7] = ctx->regs.r10;
		st.regs[8] = ctx->regs.r9;
		st.regs[9] = ctx->regs.r8;
		st.regs[10] = ctx->regs.ax;
		st.regs[11] = ctx->regs.cx;
		st.regs[12] = ctx->regs.dx;
		st.regs[13] = ctx->regs.si;
		st.regs[14] = ctx->regs.di;
	} else {
		struct pt_regs *regs =
		    (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());

		st.ip = BPF_CORE_READ(regs, ip);
		st.sp = BPF_CORE_READ(regs, sp);
		st.bp = BPF_CORE_READ(regs, bp);
		bpf_probe_read_kernel(st.regs, sizeof(st.regs), regs);
	}
	st.leaf = 1;
	st.tgid = bpf_get_current_pid_tgid() >> 32;
	if (!st.ip)
		return 0;
	st.exact = 1;
	out[0] = st.ip;
	for (i = 1; i < TP_MAX_FRAMES; i++) {
		if (unwind_step(p, &st))
			break;
		out[i] = st.ip;
		n++;
		if (st.how == UW_CFI)
			cfi++;
		else if (st.how == UW_FP_NOTAB)
			notab++;
		else
			fp++;
	}
	if (i == TP_MAX_FRAMES)
		*sflags |= TP_SAMPLE_UW_TRUNC;
	else if (st.how == UW_CUT)
		*sflags |= TP_SAMPLE_UW_CUT;
	if (!c)
		return n;
	c->n[TP_CNT_UW_STACKS]++;
	if (i == TP_MAX_FRAMES)
		c->n[TP_CNT_UW_TRUNC]++;
	else if (st.how == UW_ROOT)
		c->n[TP_CNT_UW_ROOT]++;
	else if (st.how == UW_FP_END)
		c->n[TP_CNT_UW_FP_END]++;
	else
		c->n[TP_CNT_UW_CUT]++;
	c->n[TP_CNT_UW_FRAMES_CFI] += cfi;
	c->n[TP_CNT_UW_FRAMES_FP] += fp + notab;
	c->n[TP_CNT_UW_NOT_READY] += notab;
	return n;
}
#endif

/* A kept sample's counters, in this CPU's counters c (NULL: none). */
#include "python.bpf.c"

static __always_inline void count_kept(struct counter_set *c, const struct thread_ctx *tc)
{
	if (!c)
		return;
	c->n[TP_CNT_SAMPLES]++;
	if (tc->state == TP_CTX_TAGGED)
		c->n[TP_CNT_TAGGED]++;
	if (tc->src == CTX_SRC_OBI)
		c->n[TP_CNT_CTX_OBI]++;
	else if (tc->src == CTX_SRC_HTTP)
		c->n[TP_CNT_CTX_HTTP]++;
	else if (tc->state == TP_CTX_FAULT)
		c->n[TP_CNT_CTX_FAULT]++;
}

/*
 * The stack (kernel, or user with BPF_F_USER_STACK) into buf, which has
 * room for TP_MAX_FRAMES frames; returns the frames taken. bpf_get_stack
 * zeroes the buffer past the frames it took up to the size asked, ~0.4 us
 * a sample for the ~900 bytes a stack of a few frames leaves of 127
 * (bench/lookup_cost ring-reserve:ring-reserve-32). So it is asked for
 * what this CPU's recent stacks of the kind needed, *ask frames (the
 * deepest recent one plus a margin, at least TP_ASK_MIN, decaying by a
 * frame a sample): a stack that fills that is walked again at the full
 * TP_MAX_FRAMES, and the next ones are asked for more. Stacks are never
 * cut short by it; a CPU that moves from shallow to deep stacks pays a
 * second walk once.
 */
#define TP_ASK_MIN    32
#define TP_ASK_MARGIN 8
static __always_inline __u32 take_stack(void *ctx, __u64 *buf, __u64 flags, struct counter_set *c,
					int which)
{
	__u32 ask = c ? c->ask[which & 1] : TP_MAX_FRAMES, n;
	long got, size;

	if (ask < TP_ASK_MIN)
		ask = TP_ASK_MIN;
	else if (ask > TP_MAX_FRAMES)
		ask = TP_MAX_FRAMES;
	/* & 0x7f: at most TP_MAX_FRAMES frames, a bound the verifier sees (also below) */
	size = (ask & 0x7f) * sizeof(__u64);
	got = bpf_get_stack(ctx, buf, size, flags);
	if (got == size && ask < TP_MAX_FRAMES) {
		/* full: maybe cut; the whole stack, and ask for more from now on */
		got = bpf_get_stack(ctx, buf, TP_MAX_FRAMES * sizeof(__u64), flags);
		if (c)
			c->n[TP_CNT_STACK_RETAKE]++;
	}
	n = got > 0 ? (got / sizeof(__u64)) & 0x7f : 0;
	if (c) {
		__u32 want = n + TP_ASK_MARGIN;

		c->ask[which & 1] = want > ask - 1 ? want : ask - 1;
	}
	return n;
}

/* The request context tc into record s (zero outside a request); also off-CPU records. */
static __always_inline void record_ctx(struct tp_sample *s, const struct thread_ctx *tc)
{
	s->ctx_state = tc->state;
	if (tc->state == TP_CTX_TAGGED) {
		__builtin_memcpy(s->trace_id, tc->hdr.trace_id, sizeof(s->trace_id));
		__builtin_memcpy(s->span_id, tc->hdr.span_id, sizeof(s->span_id));
		s->trace_flags = tc->hdr.trace_flags;
	} else {
		__builtin_memset(s->trace_id, 0, sizeof(s->trace_id));
		__builtin_memset(s->span_id, 0, sizeof(s->span_id));
		s->trace_flags = 0;
	}
}

/*
 * One sample into the ring. The stacks are taken straight into the ring
 * record, reserved at its largest: TP_SAMPLE_USER_BYTES when the sample
 * interrupted user mode (no kernel frames then), the whole struct
 * otherwise. Taking them into a per-CPU buffer and copying only the frames
 * taken into the ring would keep records short, but cost ~0.55 us more a
 * sample: the buffer's pages, then the copy (bench/lookup_cost,
 * ringbuf:ring-reserve). user_mode is a constant at each call, so the
 * verifier sees each record's size.
 */
static __always_inline void emit_record(struct bpf_perf_event_data *ctx, bool user_mode, __u32 tgid,
					__u32 tid, const struct thread_ctx *tc, __u16 hz,
					__u16 sflags)
{
	struct counter_set *c = counters_here();
	const struct tp_py_proc *pp = NULL;
	__u32 kn = 0, un = 0;
	struct tp_sample *s;
	__u64 flags = 0;

	/* a Python process: the whole record, its interpreter frames follow the native ones */
	if (py_on)
		pp = bpf_map_lookup_elem(&py_procs, &tgid);
	if (pp)
		s = bpf_ringbuf_reserve(&samples, sizeof(*s), 0);
	else
		s = bpf_ringbuf_reserve(&samples, user_mode ? TP_SAMPLE_USER_BYTES : sizeof(*s), 0);
	if (!s) {
		if (c)
			c->n[TP_CNT_RINGBUF_FULL]++;
		return;
	}
	s->kind = TP_REC_SAMPLE;
	s->time_ns = bpf_ktime_get_ns();
	/* the cgroup's id is three dependent loads from the task: only when filtering by it */
	s->cgroup_id = filter_mode == TP_FILTER_CGROUP ? bpf_get_current_cgroup_id() : 0;
	s->pid = tgid;
	s->tid = tid;
	record_ctx(s, tc);
	s->hz = hz;
	s->off_us = 0;
	s->py_n = 0;

	/* a sample of user mode has no kernel frames: skip the helper call */
	if (!user_mode)
		kn = take_stack(ctx, s->ips, 0, c, 0);
#if defined(__TARGET_ARCH_x86)
	const struct tp_unwind_proc *uw = bpf_map_lookup_elem(&unwind_procs, &tgid);

	if (uw)
		un = walk_user(ctx, user_mode, uw, &s->ips[kn], c, &sflags);
	else
		un = take_stack(ctx, &s->ips[kn], BPF_F_USER_STACK, c, 1);
#else
	un = take_stack(ctx, &s->ips[kn], BPF_F_USER_STACK, c, 1);
#endif
	if (!un && !is_kernel_thread() && c)
		c->n[TP_CNT_NO_USTACK]++;
	s->kern_n = kn;
	s->user_n = un;
	s->flags = sflags | ctx_src_flags(tc);
	if (pp)
		py_walk(s, pp, PY_SLOT_SAMPLE);

	/*
	 * A wakeup per sample costs more than the rest of the program (an
	 * irq_work and an IPI, a VM exit in a guest): batch them; the reader
	 * also polls with a timeout. The pending data includes this record.
	 */
	if (wakeup_bytes)
		flags = bpf_ringbuf_query(&samples, BPF_RB_AVAIL_DATA) < wakeup_bytes
			    ? BPF_RB_NO_WAKEUP
			    : BPF_RB_FORCE_WAKEUP;
	bpf_ringbuf_submit(s, flags);
	count_kept(c, tc);
	if (!c)
		return;
	if (sflags & TP_SAMPLE_RAISED)
		c->n[TP_CNT_RAISED]++;
	if (sflags & TP_SAMPLE_BASE)
		c->n[TP_CNT_RAISED_BASE]++;
}

static __always_inline void emit_sample(struct bpf_perf_event_data *ctx, __u32 tgid, __u32 tid,
					const struct thread_ctx *tc, __u16 hz, __u16 sflags)
{
	if (interrupted_user_mode(ctx))
		emit_record(ctx, true, tgid, tid, tc, hz, sflags);
	else
		emit_record(ctx, false, tgid, tid, tc, hz, sflags);
}

SEC("perf_event")
int on_cpu_clock(struct bpf_perf_event_data *ctx)
{
	struct task_struct *task = bpf_get_current_task_btf(); /* direct loads from here */
	__u32 tgid = task->tgid, tid = task->pid;
	struct thread_ctx tc;

	if (tid == 0 || !wanted(tgid)) {
		count(TP_CNT_FILTERED);
		return 0;
	}
	read_thread_ctx(task, &tc);
	/* a thread the raised events cover: its base sample is their BASE subsample */
	/* the state first: an untagged sample never reads raised_on's page */
	if (tc.state == TP_CTX_TAGGED && raised_on && bpf_map_lookup_elem(&raised_targets, &tgid)) {
		count(TP_CNT_BASE_COVERED);
		return 0;
	}
	emit_sample(ctx, tgid, tid, &tc, (__u16)bpf_get_attach_cookie(ctx), 0);
	return 0;
}

/*
 * The raised events: a sample is kept only for a thread of a raised target
 * inside a request; every base_hz/raised_hz-th kept one (per CPU) is
 * flagged BASE. Everything else costs one map lookup.
 */
SEC("perf_event")
int on_cpu_clock_raised(struct bpf_perf_event_data *ctx)
{
	struct task_struct *task = bpf_get_current_task_btf();
	__u32 tgid = task->tgid, tid = task->pid, zero = 0, *acc, rhz = raised_hz;
	__u16 sflags = TP_SAMPLE_RAISED;
	struct thread_ctx tc;

	if (!raised_on || tid == 0 || !rhz || !bpf_map_lookup_elem(&raised_targets, &tgid) ||
	    !wanted(tgid)) {
		count(TP_CNT_RAISED_OTHER);
		return 0;
	}
	read_thread_ctx(task, &tc);
	if (tc.state != TP_CTX_TAGGED) {
		count(TP_CNT_RAISED_IDLE);
		return 0;
	}
	acc = bpf_map_lookup_elem(&raised_acc, &zero);
	if (acc) {
		*acc += base_hz;
		if (*acc >= rhz) {
			*acc -= rhz;
			sflags |= TP_SAMPLE_BASE;
		}
	}
	emit_sample(ctx, tgid, tid, &tc, (__u16)rhz, sflags);
	return 0;
}

/*
 * uprobe on tp_sdk_probe_thread_registered(record, tls_slot): learn the
 * thread's record; the sampler looks there before the process's TLS
 * location.
 */
SEC("uprobe")
int BPF_KPROBE(on_thread_registered, const void *record)
{
	__u64 addr = (__u64)record, *known;

	known = bpf_task_storage_get(&thread_records, bpf_get_current_task_btf(), &addr,
				     BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (known)
		*known = addr; /* created with addr, or registered again */
	return 0;
}

/*
 * Reserves a life record of process tgid (exec, fork, exit: the header and
 * extra bytes) in the ring, header filled in; NULL (counted) when full.
 */
static __always_inline struct tp_sample *life_record(__u16 kind, __u32 tgid, __u32 tid, __u32 extra)
{
	struct tp_sample *r =
	    bpf_ringbuf_reserve(&samples, offsetof(struct tp_sample, ips) + extra, 0);

	if (!r) {
		count(TP_CNT_RINGBUF_FULL);
		return NULL;
	}
	__builtin_memset(r, 0, offsetof(struct tp_sample, ips));
	r->kind = kind;
	r->time_ns = bpf_ktime_get_ns();
	r->cgroup_id = filter_mode == TP_FILTER_CGROUP ? bpf_get_current_cgroup_id() : 0;
	r->pid = tgid;
	r->tid = tid;
	return r;
}

/* Off-CPU capture: its maps and programs (uses the helpers above). */
#include "offcpu.bpf.c"
#include "zerocode.bpf.c"
#include "gpu.bpf.c"

/*
 * Per process, on its thread-group leader: when its last TP_REC_MAPS
 * record was emitted, or when it started its program (bpf_ktime_get_ns).
 * Freed with the process.
 */
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, __u64);
} maps_emitted SEC(".maps");

/*
 * A process starts a new program: its mappings, symbols and thread-context
 * location change. The record goes through the sample ring, so the agent
 * sees it between the samples of the old and of the new program, and looks
 * at the process while it runs (so its symbols survive an early exit).
 */
SEC("tp_btf/sched_process_exec")
int BPF_PROG(on_sched_process_exec, struct task_struct *task)
{
	__u32 tgid = task->tgid;
	struct zc_thread *zt;
	__u64 now, *last;
	struct tp_sample *r;

	/* the new program has neither the old one's TLS location nor its records */
	bpf_task_storage_delete(&thread_records, task);
	bpf_task_storage_delete(&tls_locs, task);  /* the thread that execs leads its group */
	bpf_map_delete_elem(&unwind_procs, &tgid); /* the new program maps other files */
	bpf_map_delete_elem(&py_procs, &tgid);	   /* ... and may not be Python */
	bpf_task_storage_delete(&py_threads, task);
	/* ... nor the request the old one was serving (its calls, its fds) */
	zt = bpf_task_storage_get(&zc_threads, task, NULL, 0);
	if (zt && zt->active)
		count(TP_CNT_HTTP_STALE);
	bpf_task_storage_delete(&zc_threads, task);
	if (!wanted(tgid))
		return 0;
	/*
	 * The loader's start-up rendezvous calls follow within milliseconds:
	 * the exec record's look covers them, so they give no maps record
	 * (no second wakeup and look per new program)
	 */
	now = bpf_ktime_get_ns();
	last = bpf_task_storage_get(&maps_emitted, task, &now, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (last)
		*last = now; /* a second exec: kept across it */
	r = life_record(TP_REC_EXEC, tgid, task->pid, 0);
	if (!r)
		return 0;
	/* wake the agent now: a short-lived program may be gone by the next poll */
	bpf_ringbuf_submit(r, BPF_RB_FORCE_WAKEUP);
	return 0;
}

/*
 * A process forks a new process (not a thread). The child has a copy of
 * the parent's memory, so where the parent keeps its thread context is
 * where the child keeps it: the parent's TLS location (and the forking
 * thread's record from the SDK's registration) become the child's, and
 * the child's samples are tagged from its first one, before the agent
 * has looked at it. A fork record (no wakeup) lets the agent give the
 * child what it knows of the parent, also when the child is gone by the
 * time its samples are read.
 */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(on_sched_process_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 ptgid = parent->tgid, ctgid = child->tgid;
	struct tp_tls_loc *loc, lcopy;
	struct tp_zc_target *hook;
	struct tp_unwind_proc *uw;
	__u64 *rec, rcopy;
	struct tp_sample *r;

	if (ptgid == ctgid)
		return 0; /* a new thread of the same process */
	/* the child is its process's only thread, so it leads its group */
	loc = bpf_task_storage_get(&tls_locs, parent->group_leader, NULL, 0);
	if (loc) {
		lcopy = *loc;
		bpf_task_storage_get(&tls_locs, child, &lcopy, BPF_LOCAL_STORAGE_GET_F_CREATE);
	}
	/* the child maps what the parent maps, at the same addresses */
	uw = bpf_map_lookup_elem(&unwind_procs, &ptgid);
	if (uw)
		bpf_map_update_elem(&unwind_procs, &ctgid, uw, BPF_ANY);
	rec = bpf_task_storage_get(&thread_records, parent, NULL, 0);
	if (rec) {
		rcopy = *rec;
		bpf_task_storage_get(&thread_records, child, &rcopy,
				     BPF_LOCAL_STORAGE_GET_F_CREATE);
	}
	/*
	 * zero-code capture follows the fork: a prefork server's new worker
	 * serves requests at once, before the agent reads this record
	 */
	hook = bpf_map_lookup_elem(&zc_targets, &ptgid);
	if (hook) /* the parent's hook (libc: the child's probes come at the agent's look) */
		bpf_map_update_elem(&zc_targets, &ctgid, hook, BPF_NOEXIST);
	if (!wanted(ctgid))
		return 0;
	r = life_record(TP_REC_FORK, ctgid, ptgid, sizeof(__u64));
	if (!r)
		return 0;
	r->ips[0] = BPF_CORE_READ(child, start_boottime);
	/* a zero-code worker on the libc hook waits for its probes: the agent now */
	bpf_ringbuf_submit(r, hook ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP);
	return 0;
}

/*
 * A thread exits (its record and, for the last thread, the process's TLS
 * location go with its task). When it is the process's last, its target
 * entries go, and an exit record tells the agent (no wakeup: it is read
 * with the next samples), so the agent never has to poll /proc to find
 * dead processes.
 */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(on_sched_process_exit, struct task_struct *task)
{
	__u32 tid = task->pid, tgid = task->tgid;
	struct tp_sample *r;

	off_thread_exit(ctx, task);
	/* signal->live reaches 0 when the last thread of the group exits */
	if (BPF_CORE_READ(task, signal, live.counter) != 0)
		return 0;
	if (wanted(tgid)) {
		r = life_record(TP_REC_EXIT, tgid, tid, 0);
		if (r)
			bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);
	}
	bpf_map_delete_elem(&targets, &tgid);
	bpf_map_delete_elem(&raised_targets, &tgid);
	bpf_map_delete_elem(&unwind_procs, &tgid);
	bpf_map_delete_elem(&zc_targets, &tgid);
	return 0;
}

/*
 * uprobe on the dynamic loader's debug rendezvous, _dl_debug_state (r_brk):
 * glibc's and musl's loaders call it when they start and around every
 * dlopen and dlclose that maps or unmaps objects. For a process the target
 * filter wants, a maps record tells the agent to look at the process again
 * (new libraries: a thread-context writer, code to unwind), waking it at
 * once. At most one record per process per TP_MAPS_GAP_NS (a dlopen loop
 * cannot flood the ring; the calls skipped are counted, and the agent's
 * look comes after the gap anyway).
 */
SEC("uprobe")
int on_dl_debug_state(struct pt_regs *ctx)
{
	struct task_struct *task = bpf_get_current_task_btf();
	__u32 tgid = task->tgid;
	__u64 now = bpf_ktime_get_ns(), zero = 0, *last;
	struct tp_sample *r;

	if (!wanted(tgid))
		return 0;
	last = bpf_task_storage_get(&maps_emitted, task->group_leader, &zero,
				    BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (last && *last && now - *last < TP_MAPS_GAP_NS) {
		count(TP_CNT_MAPS_LIMITED);
		return 0;
	}
	if (last)
		*last = now;
	r = life_record(TP_REC_MAPS, tgid, task->pid, 0);
	if (!r)
		return 0;
	count(TP_CNT_MAPS);
	bpf_ringbuf_submit(r, BPF_RB_FORCE_WAKEUP);
	return 0;
}
