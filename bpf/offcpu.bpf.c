// SPDX-License-Identifier: GPL-2.0
/*
 * offcpu.bpf.c - off-CPU capture (docs/offcpu.md), part of the sampler's
 * object: sampler.bpf.c includes it, so the thread-context reader, the
 * target filter, the unwind maps, the counters and the ring are shared.
 *
 * A thread of a wanted process leaves the CPU at sched_switch (it is prev,
 * and current): the time, the kind (blocked when it leaves in a sleeping
 * state, runqueue when preempted) and the context it carries go into its
 * task local storage "off_threads". sched_wakeup ends a blocked interval (the
 * runqueue wait begins); sched_switch with the thread as next ends the
 * interval. Intervals of at least offcpu_min_ns become records; shorter
 * ones are summed per thread, kind and context (TP_SAMPLE_OFF_SHORT).
 *
 * How stacks are taken (docs/offcpu.md, "How stacks are taken"): nothing
 * is walked when a thread leaves the CPU, since most intervals are short.
 * A blocked interval of at least the threshold is known when the thread
 * runs again: its kernel stack, frozen while it was off, is taken then
 * (bpf_get_task_stack of next), and its user stack is walked in the
 * thread's own context at its next syscall exit (on_off_sys_exit) or
 * switch-out, with the sampler's walker, if its user registers are still
 * those it left the CPU with (the same syscall); else the record goes
 * without user frames (TP_CNT_OFF_USTACK_LOST). Runqueue records have no
 * frames.
 */

/* The kernel frames kept for a pending blocked record. */
#define OFF_KFRAMES 48
/* task_struct.__state / prev_state: an exiting task's last switch */
#define OFF_TASK_DEAD 0x0080

/* Options the agent writes (.bss, memory-mapped; sampler_set_offcpu). */
volatile __u32 offcpu_mode = 0;	      /* 0 off, 1 tagged threads only, 2 all threads */
volatile __u32 offcpu_targets_on = 0; /* 1: the processes of offcpu_targets, tagged threads */
volatile __u32 offcpu_gen = 0;	      /* changes at each switch on: older entries are stale */
volatile __u64 offcpu_min_ns = 0;     /* the threshold */

/* One thread's off-CPU state. */
struct off_thread {
	__u64 t_off;  /* when it left the CPU; 0: on a CPU, or not tracked */
	__u64 t_wake; /* when woken (blocked intervals); 0: not yet */
	__u64 uip;    /* its user ip and sp when it left */
	__u64 usp;
	__u32 gen;		/* offcpu_gen when written */
	__u32 tgid;		/* its process */
	__u16 kind;		/* TP_SAMPLE_OFF_BLOCKED or TP_SAMPLE_OFF_RUNQ */
	struct thread_ctx cur;	/* the context it left the CPU with */
	struct thread_ctx sums; /* the context of short_ns */
	__u64 short_ns[2];	/* short intervals not yet emitted: blocked, runqueue */
	/* a blocked interval of at least the threshold, waiting for its user stack */
	__u64 p_time; /* when it ended; 0: none pending */
	__u64 p_ns;
	__u64 p_uip;
	__u64 p_usp;
	__u32 p_kn;
	struct thread_ctx p_ctx;
	__u64 p_kips[OFF_KFRAMES];
};

/*
 * Per thread: its state, task local storage (a few loads from the task, no
 * hash: the switch path looks up two threads per context switch), made
 * when a followed thread first leaves the CPU, freed with the thread.
 */
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct off_thread);
} off_threads SEC(".maps");

/* The user ip and sp a thread entered the kernel with (its saved registers). */
#if defined(__TARGET_ARCH_x86)
#define user_ip(regs) ((regs)->ip) /* a BTF pointer: plain loads */
#define user_sp(regs) ((regs)->sp)
#else
#define user_ip(regs) PT_REGS_IP_CORE(regs)
#define user_sp(regs) PT_REGS_SP_CORE(regs)
#endif

static __always_inline bool same_ctx(const struct thread_ctx *a, const struct thread_ctx *b)
{
	__u64 x[3], y[3];

	if (a->state != b->state)
		return false;
	if (a->state != TP_CTX_TAGGED)
		return true;
	__builtin_memcpy(x, a->hdr.trace_id, 24); /* trace id and span id */
	__builtin_memcpy(y, b->hdr.trace_id, 24);
	return x[0] == y[0] && x[1] == y[1] && x[2] == y[2];
}

static __always_inline void off_header(struct tp_sample *s, const struct off_thread *t, __u32 tid,
				       const struct thread_ctx *tc, __u64 time, __u64 ns,
				       __u16 flags)
{
	s->kind = TP_REC_OFFCPU;
	s->py_n = 0;
	s->time_ns = time;
	s->cgroup_id = 0;
	s->pid = t->tgid;
	s->tid = tid;
	record_ctx(s, tc);
	s->hz = 0;
	s->kern_n = 0;
	s->user_n = 0;
	s->flags = flags | ctx_src_flags(tc);
	s->off_us = ns / 1000 > 0xffffffffull ? 0xffffffffu : (__u32)(ns / 1000);
}

static __always_inline void off_submit(struct tp_sample *s)
{
	__u64 flags = 0;

	if (wakeup_bytes)
		flags = bpf_ringbuf_query(&samples, BPF_RB_AVAIL_DATA) < wakeup_bytes
			    ? BPF_RB_NO_WAKEUP
			    : BPF_RB_FORCE_WAKEUP;
	bpf_ringbuf_submit(s, flags);
}

static __always_inline void off_lost(struct counter_set *c, __u64 ns)
{
	if (!c)
		return;
	c->n[TP_CNT_OFF_LOST]++;
	c->n[TP_CNT_OFF_LOST_US] += ns / 1000;
}

/*
 * A record without frames: a runqueue interval (flags RUNQ), or a sum of
 * short intervals (SHORT | kind) of the sums' context.
 */
static __always_inline void off_emit_bare(struct off_thread *t, __u32 tid,
					  const struct thread_ctx *tc, __u64 time, __u64 ns,
					  __u16 flags)
{
	struct counter_set *c = counters_here();
	struct tp_sample *s;

	s = bpf_ringbuf_reserve(&samples, offsetof(struct tp_sample, ips), 0);
	if (!s) {
		off_lost(c, ns);
		return;
	}
	off_header(s, t, tid, tc, time, ns, flags);
	off_submit(s);
	if (c)
		c->n[(flags & TP_SAMPLE_OFF_SHORT) ? TP_CNT_OFF_SHORT : TP_CNT_OFF_RECORDS]++;
}

/* Emits the short sums (whole µs; the remainder stays for the next). */
static __always_inline void off_flush_short(struct off_thread *t, __u32 tid, __u64 now, int k)
{
	__u64 ns = t->short_ns[k & 1];

	if (ns < 1000)
		return;
	off_emit_bare(t, tid, &t->sums, now, ns,
		      TP_SAMPLE_OFF_SHORT | (k ? TP_SAMPLE_OFF_RUNQ : TP_SAMPLE_OFF_BLOCKED));
	t->short_ns[k & 1] = ns % 1000;
}

/*
 * The pending blocked record, emitted from the thread's own context
 * (current): its kernel frames, taken when it ran again, and its user
 * stack, walked now if the thread is still in the kernel entry it blocked
 * in (same user ip and sp); otherwise without user frames.
 */
static __always_inline void off_flush_pending(void *ctx, struct off_thread *t, __u32 tid)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct counter_set *c = counters_here();
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(task);
	__u32 kn = t->p_kn, un = 0;
	__u16 sflags = TP_SAMPLE_OFF_BLOCKED;
	struct tp_sample *s;

	if (!t->p_time)
		return;
	s = bpf_ringbuf_reserve(&samples, sizeof(*s), 0);
	if (!s) {
		off_lost(c, t->p_ns);
		t->p_time = 0;
		return;
	}
	if (kn > OFF_KFRAMES)
		kn = OFF_KFRAMES;
	__builtin_memcpy(s->ips, t->p_kips, sizeof(t->p_kips));
	if (user_ip(regs) == t->p_uip && user_sp(regs) == t->p_usp) {
#if defined(__TARGET_ARCH_x86)
		const struct tp_unwind_proc *uw = bpf_map_lookup_elem(&unwind_procs, &t->tgid);

		if (uw)
			un = walk_user(ctx, false, uw, &s->ips[kn & 63], c, &sflags);
		else
			un = take_stack(ctx, &s->ips[kn & 63], BPF_F_USER_STACK, c, 1);
#else
		un = take_stack(ctx, &s->ips[kn & 63], BPF_F_USER_STACK, c, 1);
#endif
	} else if (c) {
		c->n[TP_CNT_OFF_USTACK_LOST]++;
	}
	off_header(s, t, tid, &t->p_ctx, t->p_time, t->p_ns, sflags);
	s->kern_n = kn;
	s->user_n = un;
	/* where it blocked in Python: its frames, read now (it has not run since) */
	if (un && py_on) {
		const struct tp_py_proc *pp = bpf_map_lookup_elem(&py_procs, &t->tgid);

		if (pp)
			py_walk(s, pp, PY_SLOT_OFFCPU);
	}
	off_submit(s);
	t->p_time = 0;
	if (c)
		c->n[TP_CNT_OFF_RECORDS]++;
}

/* The thread's state, made (zeroed) or reset for this capture; NULL when none. */
static __always_inline struct off_thread *off_entry(struct task_struct *task, bool create)
{
	struct off_thread *t = bpf_task_storage_get(&off_threads, task, NULL, 0);

	if (t && t->gen == offcpu_gen)
		return t;
	if (!t && !create)
		return NULL;
	if (!t) {
		t = bpf_task_storage_get(&off_threads, task, NULL, BPF_LOCAL_STORAGE_GET_F_CREATE);
		if (!t) {
			count(TP_CNT_OFF_STATE_FULL);
			return NULL;
		}
	} else {
		__builtin_memset(t, 0, sizeof(*t)); /* left by an earlier capture */
	}
	t->gen = offcpu_gen;
	return t;
}

/* The thread's state of this capture, or NULL. */
static __always_inline struct off_thread *off_find(struct task_struct *task)
{
	struct off_thread *t = bpf_task_storage_get(&off_threads, task, NULL, 0);

	return t && t->gen == offcpu_gen ? t : NULL;
}

/* prev leaves the CPU (prev is current). */
static __always_inline void off_switch_out(void *ctx, bool preempt, struct task_struct *prev,
					   unsigned int prev_state, __u64 now)
{
	__u32 tgid = prev->tgid, tid = prev->pid, mode = offcpu_mode;
	struct pt_regs *regs;
	struct off_thread *t;
	struct thread_ctx tc;

	if ((!mode && !offcpu_targets_on) || tid == 0 || (prev->flags & PF_KTHREAD) ||
	    (prev_state & OFF_TASK_DEAD))
		return;
	/* the filter's processes in the mode asked for, a trigger's in the requests mode */
	if (!mode || !wanted(tgid)) {
		if (!offcpu_targets_on || !bpf_map_lookup_elem(&offcpu_targets, &tgid))
			return;
		mode = 1;
	}
	read_thread_ctx(prev, &tc);
	t = off_entry(prev, mode == 2 || tc.state == TP_CTX_TAGGED);
	if (!t)
		return;
	t->tgid = tgid;
	if (t->p_time) /* blocked again before a syscall exit: maybe the same syscall */
		off_flush_pending(ctx, t, tid);
	if (!same_ctx(&t->sums, &tc)) {
		off_flush_short(t, tid, now, 0);
		off_flush_short(t, tid, now, 1);
		t->short_ns[0] = t->short_ns[1] = 0; /* sub-µs remainders of the old context */
		t->sums = tc;
	}
	if (mode == 1 && tc.state != TP_CTX_TAGGED) {
		t->t_off = 0; /* outside a request: not captured */
		return;
	}
	regs = (struct pt_regs *)bpf_task_pt_regs(prev);
	t->t_off = now;
	t->t_wake = 0;
	t->kind = preempt || prev_state == 0 ? TP_SAMPLE_OFF_RUNQ : TP_SAMPLE_OFF_BLOCKED;
	t->cur = tc;
	t->uip = user_ip(regs);
	t->usp = user_sp(regs);
}

/* An interval of kind k (0 blocked, 1 runqueue) ended at end: summed, or recorded. */
static __always_inline void off_short(struct off_thread *t, __u32 tid, __u64 now, __u64 ns, int k)
{
	t->short_ns[k & 1] += ns;
	if (t->short_ns[k & 1] >= offcpu_min_ns)
		off_flush_short(t, tid, now, k);
}

/* next runs again (current is still the previous task). */
static __always_inline void off_switch_in(struct task_struct *next, __u64 now)
{
	__u32 tid = next->pid;
	__u64 wake, blocked, runq, min = offcpu_min_ns;
	struct off_thread *t;
	long got;

	t = off_find(next);
	if (!t || !t->t_off)
		return;
	wake = t->t_off;
	if (t->kind == TP_SAMPLE_OFF_BLOCKED) {
		wake = t->t_wake;
		if (!wake || wake > now) {
			count(TP_CNT_OFF_NO_WAKEUP);
			wake = now;
		}
	}
	blocked = wake - t->t_off;
	runq = now - wake;
	t->t_off = 0;
	if (blocked >= min && blocked) {
		if (t->p_time) /* never flushed: no switch-out since (cannot happen) */
			off_lost(counters_here(), t->p_ns);
		t->p_time = wake;
		t->p_ns = blocked;
		t->p_uip = t->uip;
		t->p_usp = t->usp;
		t->p_ctx = t->cur;
		/* its kernel stack is where it blocked until it runs */
		got = bpf_get_task_stack(next, t->p_kips, sizeof(t->p_kips), 0);
		t->p_kn = got > 0 ? (__u64)got / 8 : 0;
	} else if (blocked) {
		off_short(t, tid, now, blocked, 0);
	}
	if (runq >= min && runq)
		off_emit_bare(t, tid, &t->cur, now, runq, TP_SAMPLE_OFF_RUNQ);
	else if (runq)
		off_short(t, tid, now, runq, 1);
}

SEC("tp_btf/sched_switch")
int BPF_PROG(on_off_switch, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	__u64 now = bpf_ktime_get_ns();

	off_switch_out(ctx, preempt, prev, prev_state, now);
	off_switch_in(next, now);
	return 0;
}

/* A blocked thread is woken: runnable from now. */
static __always_inline void off_wakeup(struct task_struct *p)
{
	struct off_thread *t = off_find(p);

	if (!t || !t->t_off || t->kind != TP_SAMPLE_OFF_BLOCKED || t->t_wake)
		return;
	t->t_wake = bpf_ktime_get_ns();
}

SEC("tp_btf/sched_wakeup")
int BPF_PROG(on_off_wakeup, struct task_struct *p)
{
	off_wakeup(p);
	return 0;
}

/*
 * A new thread is runnable for the first time: with all threads captured,
 * its wait for a CPU until it first runs is a runqueue interval (it carries
 * no context yet).
 */
SEC("tp_btf/sched_wakeup_new")
int BPF_PROG(on_off_wakeup_new, struct task_struct *p)
{
	__u32 tgid = p->tgid;
	struct off_thread *t;

	if (offcpu_mode != 2 || (p->flags & PF_KTHREAD) || !wanted(tgid))
		return 0;
	t = off_entry(p, true);
	if (!t)
		return 0;
	t->tgid = tgid;
	t->t_off = bpf_ktime_get_ns();
	t->t_wake = 0;
	t->kind = TP_SAMPLE_OFF_RUNQ;
	t->uip = t->usp = 0;
	__builtin_memset(&t->cur, 0, sizeof(t->cur));
	return 0;
}

/* A syscall returns: the thread's pending blocked record gets its user stack. */
SEC("tp_btf/sys_exit")
int BPF_PROG(on_off_sys_exit, struct pt_regs *regs, long ret)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct off_thread *t = bpf_task_storage_get(&off_threads, task, NULL, 0);

	if (t && t->p_time && t->gen == offcpu_gen)
		off_flush_pending(ctx, t, task->pid);
	return 0;
}

/*
 * A thread exits (current): what it has pending and summed goes out; its
 * state goes with its task (and is stale for a later capture anyway).
 */
static __always_inline void off_thread_exit(void *ctx, struct task_struct *task)
{
	__u32 tid = task->pid;
	struct off_thread *t;
	__u64 now;

	if (!offcpu_mode && !offcpu_targets_on)
		return;
	t = off_find(task);
	if (!t)
		return;
	now = bpf_ktime_get_ns();
	off_flush_pending(ctx, t, tid);
	off_flush_short(t, tid, now, 0);
	off_flush_short(t, tid, now, 1);
	t->gen = 0; /* its last switch-out (TASK_DEAD) finds nothing to do */
}
