// SPDX-License-Identifier: GPL-2.0
/*
 * python.bpf.c - the interpreter frames of a sampled CPython thread
 * (docs/python.md), included by sampler.bpf.c.
 *
 * For a process in "py_procs" (written by the agent with the offsets of
 * its interpreter's version), the thread's PyThreadState is found once by
 * walking the thread lists of the process's interpreters (sub-interpreters
 * first, as the runtime links them; mod_wsgi runs applications in
 * sub-interpreters) for the one whose native thread
 * id is the sampled thread's or, failing that, whose thread_id is the
 * thread's pthread_self() (its thread pointer on x86-64 and arm64 glibc:
 * how the interpreter itself tells threads apart). The second finds the
 * main thread of a worker that a server forked from C (uWSGI): the fork
 * copied the master's thread state with the master's native id, but the
 * thread pointer of the forking thread is the same in the child. The
 * state is kept in the thread's task storage ("py_threads"); each sample
 * checks that it still names the thread (one read, two for a forked
 * worker) before trusting it. From the thread state's current frame the
 * walk follows the previous links, reading TP_PY_FRAME_READ bytes of each
 * frame at once, and writes TP_PY_WORDS words a frame into the record
 * (sampler.h). Every read is bpf_probe_read_user: a freed or scribbled
 * frame ends the walk (TP_CNT_PY_FAULT), never more. The walk is a bounded
 * loop of at most TP_PY_MAX_FRAMES steps, and the thread list at most
 * TP_PY_MAX_THREADS.
 */

#define TP_PY_MAX_THREADS 64

volatile __u32 py_on = 0; /* 1: "py_procs" has entries (the agent sets it) */

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, TP_MAX_PY_PROCS);
	__type(key, __u32);
	__type(value, struct tp_py_proc);
} py_procs SEC(".maps");

/* The thread's PyThreadState, once found; checked against its native id at each use. */
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, __u64);
} py_threads SEC(".maps");

/* bpf_loop's state for the thread list and the frame chain. */
struct py_walk_ctx {
	__u64 addr; /* the thread state, or the frame, to look at next */
	__u32 tid;  /* the thread list: whose */
	__u32 n;    /* the frame chain: frames taken */
	__u32 slot; /* its py_scratch slot (PY_SLOT_*) */
	__u8 fault; /* a read failed */
	__u8 trunc; /* more frames than room */
};

/*
 * Per CPU, one slot per kind of program that walks (a CPU sample's
 * perf_event program may interrupt the scheduler's off-CPU program on the
 * same CPU mid-walk): the buffers, and what of the walk's state need not
 * be on the BPF stack (which the off-CPU program's own frames nearly
 * fill; bpf_loop's context must be on it).
 */
#define PY_SLOT_SAMPLE 0
#define PY_SLOT_OFFCPU 1
struct py_scratch {
	struct tp_py_proc pp;			     /* the offsets (copied: a per-CPU read) */
	__u64 tp;				     /* the thread's pointer (pthread_self()) */
	__u64 interp;				     /* the thread list: whose interpreter */
	__u64 found;				     /* the thread list: the thread state found */
	__u64 found_tp;				     /* ... whose thread_id is the thread pointer */
	__u8 frame[TP_PY_FRAME_READ + 8];	     /* one frame as read */
	__u64 words[TP_PY_MAX_FRAMES * TP_PY_WORDS]; /* the frames taken, copied at once */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, struct py_scratch);
} py_scratch SEC(".maps");

/* The record's room for Python frames: they are copied in one piece of this size. */
#define TP_PY_BYTES    (TP_PY_MAX_FRAMES * TP_PY_WORDS * 8)
#define TP_PY_AT_LIMIT (2 * TP_MAX_FRAMES - TP_PY_MAX_FRAMES * TP_PY_WORDS)

static __always_inline __u64 py_u64(const __u8 *b, __u16 off)
{
	return *(const __u64 *)(b + (off & (TP_PY_FRAME_READ - 8)));
}

static __always_inline __u8 py_u8(const __u8 *b, __u16 off)
{
	return b[off & (TP_PY_FRAME_READ - 1)];
}

static long py_thread_step(__u32 i, void *arg)
{
	struct py_walk_ctx *w = arg;
	struct py_scratch *sc;
	__u64 id;

	sc = bpf_map_lookup_elem(&py_scratch, &w->slot);
	if (!sc)
		return 1;
	if (!w->addr) {
		/* the end of one interpreter's threads: the next interpreter's (mod_wsgi's, ...) */
		if (sc->pp.interp_next == TP_PY_NONE || !sc->interp ||
		    bpf_probe_read_user(&sc->interp, sizeof(sc->interp),
					(void *)(sc->interp + sc->pp.interp_next)) ||
		    !sc->interp ||
		    bpf_probe_read_user(&w->addr, sizeof(w->addr),
					(void *)(sc->interp + sc->pp.interp_threads_head)))
			return 1;
		return 0;
	}
	if (bpf_probe_read_user(&id, sizeof(id), (void *)(w->addr + sc->pp.ts_native_tid))) {
		w->fault = 1;
		return 1;
	}
	if (id == w->tid) {
		sc->found = w->addr;
		return 1;
	}
	if (!sc->found_tp && sc->pp.ts_thread_id != TP_PY_NONE && sc->tp &&
	    !bpf_probe_read_user(&id, sizeof(id), (void *)(w->addr + sc->pp.ts_thread_id)) &&
	    id == sc->tp)
		sc->found_tp = w->addr;
	if (bpf_probe_read_user(&w->addr, sizeof(w->addr), (void *)(w->addr + sc->pp.ts_next))) {
		w->fault = 1;
		return 1;
	}
	return 0;
}

static long py_frame_step(__u32 i, void *arg)
{
	struct py_walk_ctx *w = arg;
	struct py_scratch *sc;
	__u32 k;
	__u64 code, instr, func, module, names[2];

	if (!w->addr)
		return 1;
	sc = bpf_map_lookup_elem(&py_scratch, &w->slot);
	if (!sc)
		return 1;
	if (bpf_probe_read_user(sc->frame, TP_PY_FRAME_READ, (void *)w->addr)) {
		w->fault = 1;
		return 1;
	}
	w->addr = py_u64(sc->frame, sc->pp.frame_previous);
	if (sc->pp.owner_cstack != 0xff && sc->pp.frame_owner != TP_PY_NONE &&
	    py_u8(sc->frame, sc->pp.frame_owner) == sc->pp.owner_cstack) {
		/* a shim the interpreter pushes where C called in: the frame below was the entry */
		k = (w->n - 1) * TP_PY_WORDS + 2;
		if (w->n > 0 && k < TP_PY_MAX_FRAMES * TP_PY_WORDS)
			sc->words[k] |= TP_PY_ENTRY;
		return 0;
	}
	if (sc->pp.owner_skip != 0xff && sc->pp.frame_owner != TP_PY_NONE &&
	    py_u8(sc->frame, sc->pp.frame_owner) == sc->pp.owner_skip)
		return 0; /* the thread's base frame (3.14): no code of its own */
	if (w->n >= TP_PY_MAX_FRAMES) {
		w->trunc = 1;
		return 1;
	}
	k = w->n * TP_PY_WORDS;
	if (k > TP_PY_MAX_FRAMES * TP_PY_WORDS - TP_PY_WORDS)
		return 1;
	code = py_u64(sc->frame, sc->pp.frame_code) & ~(__u64)sc->pp.ref_tag_bits;
	instr = py_u64(sc->frame, sc->pp.frame_instr);
	instr = instr > code + sc->pp.code_adaptive ? instr - code - sc->pp.code_adaptive : 0;
	/*
	 * The name's parts as they are now, while the frame holds its code and
	 * function: the agent reads the strings later and checks them against
	 * these (sampler.h). A failed read leaves 0: the agent then finds no
	 * module, or a code object that does not check out ("[python]").
	 */
	names[0] = names[1] = module = 0;
	if (bpf_probe_read_user(names, sizeof(names), (void *)(code + sc->pp.code_qualname)))
		names[0] = names[1] = 0;
	func = sc->pp.frame_func != TP_PY_NONE
		   ? py_u64(sc->frame, sc->pp.frame_func) & ~(__u64)sc->pp.ref_tag_bits
		   : 0;
	if (func && sc->pp.func_module != TP_PY_NONE &&
	    bpf_probe_read_user(&module, sizeof(module), (void *)(func + sc->pp.func_module)))
		module = 0;
	sc->words[k] = code;
	sc->words[k + 1] = module;
	sc->words[k + 2] =
	    (instr & 0xffffffffull) | (tp_py_ident(names[0], names[1]) << TP_PY_IDENT_SHIFT) |
	    (sc->pp.frame_entry != TP_PY_NONE && py_u8(sc->frame, sc->pp.frame_entry) ? TP_PY_ENTRY
										      : 0);
	w->n++;
	return 0;
}

/* The thread state of thread tid (w->pp set), or 0. */
static __always_inline __u64 py_tstate(struct task_struct *task, struct py_walk_ctx *w)
{
	__u64 *cached = bpf_task_storage_get(&py_threads, task, NULL, 0);
	struct py_scratch *sc = bpf_map_lookup_elem(&py_scratch, &w->slot);
	__u64 interp, id, holder, tp = thread_pointer(task);

	if (!sc)
		return 0;
	/*
	 * The thread holding the GIL is running Python: the state it runs under
	 * is the GIL's holder. This names the right one also for a thread with
	 * states in several interpreters (mod_wsgi's applications each have
	 * their own), which the cache or the lists alone would not.
	 */
	if (sc->pp.gil_holder &&
	    !bpf_probe_read_user(&holder, sizeof(holder), (void *)sc->pp.gil_holder) && holder &&
	    ((!bpf_probe_read_user(&id, sizeof(id), (void *)(holder + sc->pp.ts_native_tid)) &&
	      id == w->tid) ||
	     (sc->pp.ts_thread_id != TP_PY_NONE && tp &&
	      !bpf_probe_read_user(&id, sizeof(id), (void *)(holder + sc->pp.ts_thread_id)) &&
	      id == tp))) {
		if (!cached || *cached != holder) {
			cached = bpf_task_storage_get(&py_threads, task, NULL,
						      BPF_LOCAL_STORAGE_GET_F_CREATE);
			if (cached)
				*cached = holder;
		}
		return holder;
	}
	if (cached && *cached &&
	    !bpf_probe_read_user(&id, sizeof(id), (void *)(*cached + sc->pp.ts_native_tid)) &&
	    id == w->tid)
		return *cached;
	if (cached && *cached && sc->pp.ts_thread_id != TP_PY_NONE && tp &&
	    !bpf_probe_read_user(&id, sizeof(id), (void *)(*cached + sc->pp.ts_thread_id)) &&
	    id == tp)
		return *cached;
	if (bpf_probe_read_user(&interp, sizeof(interp), (void *)sc->pp.interp_head) || !interp ||
	    bpf_probe_read_user(&w->addr, sizeof(w->addr),
				(void *)(interp + sc->pp.interp_threads_head)))
		return 0;
	sc->tp = tp;
	sc->interp = interp;
	sc->found = 0;
	sc->found_tp = 0;
	bpf_loop(TP_PY_MAX_THREADS, py_thread_step, w, 0);
	sc = bpf_map_lookup_elem(&py_scratch, &w->slot);
	if (!sc)
		return 0;
	id = sc->found ? sc->found : sc->found_tp;
	if (id) {
		cached =
		    bpf_task_storage_get(&py_threads, task, NULL, BPF_LOCAL_STORAGE_GET_F_CREATE);
		if (cached)
			*cached = id;
	}
	return id;
}

/*
 * The Python frames of the interrupted thread into record s after its
 * native frames, TP_PY_WORDS words a frame, their count in s->py_n. A
 * global function: the verifier checks it once, not at every call site.
 */
__noinline int py_walk(struct tp_sample *s, const struct tp_py_proc *pp, __u32 slot)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct counter_set *c = counters_here();
	struct py_walk_ctx w = {};
	struct py_scratch *sc;
	__u32 at;
	__u64 ts, frame = 0;

	if (!s || !pp)
		return 0;
	s->py_n = 0;
	sc = bpf_map_lookup_elem(&py_scratch, &slot);
	if (!sc)
		return 0;
	w.slot = slot;
	w.tid = s->tid;
	at = (__u32)s->kern_n + s->user_n;
	__builtin_memcpy(&sc->pp, pp, sizeof(sc->pp));
	ts = py_tstate(task, &w);
	if (!ts) {
		if (c)
			c->n[w.fault ? TP_CNT_PY_FAULT : TP_CNT_PY_NO_TSTATE]++;
		return 0;
	}
	if (at > TP_PY_AT_LIMIT) {
		if (c)
			c->n[TP_CNT_PY_TRUNC]++; /* a native stack too deep to leave room */
		return 0;
	}
	frame = ts;
	if ((sc->pp.ts_cframe != TP_PY_NONE &&
	     bpf_probe_read_user(&frame, sizeof(frame), (void *)(ts + sc->pp.ts_cframe))) ||
	    !frame ||
	    bpf_probe_read_user(&w.addr, sizeof(w.addr), (void *)(frame + sc->pp.ts_frame))) {
		if (c)
			c->n[TP_CNT_PY_FAULT]++;
		return 0;
	}
	w.fault = 0;
	w.n = 0;
	bpf_loop(TP_PY_MAX_FRAMES + 8, py_frame_step, &w, 0);
	if (!w.n || w.n > TP_PY_MAX_FRAMES)
		return 0;
	bpf_probe_read_kernel(&s->ips[at], TP_PY_BYTES, sc->words);
	s->py_n = (__u8)w.n;
	if (c) {
		c->n[TP_CNT_PY_STACKS]++;
		c->n[TP_CNT_PY_FRAMES] += w.n;
		if (w.trunc)
			c->n[TP_CNT_PY_TRUNC]++;
		if (w.fault)
			c->n[TP_CNT_PY_FAULT]++;
	}
	return w.n;
}
