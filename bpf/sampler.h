/*
 * sampler.h - what the BPF sampler (sampler.bpf.c) and the agent share:
 * fixed-width types and limits only, included by both sides.
 *
 * Data flow: a perf_event program runs on a CPU-clock event on every online
 * CPU. For each sample of a process the agent wants, it reads the thread's
 * OpenTelemetry thread context (OTEP 4947) through the location the agent
 * resolved for that process (tls_locs) or learned for that thread from the
 * SDK's registration uprobe (thread_records), and emits one struct
 * tp_sample (header + kernel and user frames) into a ring buffer.
 */
#ifndef TRACEPROF_BPF_SAMPLER_H
#define TRACEPROF_BPF_SAMPLER_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

/* Frames kept per stack (kernel and user each); deeper stacks are cut at the root. */
#define TP_MAX_FRAMES 127

/* Which processes are sampled (rodata option filter_mode, set before load). */
enum tp_filter {
	TP_FILTER_ALL = 0,    /* every process but the idle task */
	TP_FILTER_PIDS = 1,   /* only tgids present in the map "targets" */
	TP_FILTER_CGROUP = 2, /* only cgroup v2 ids present in the map "target_cgroups" */
};

/* Where a process keeps its otel_thread_ctx_v1 TLS pointer (tp = thread pointer). */
enum tp_tls_kind {
	TP_TLS_NONE = 0,   /* no thread context in this process */
	TP_TLS_STATIC = 1, /* pointer at tp + tp_offset (static TLS block) */
	TP_TLS_DTV = 2,	   /* pointer at dtv[modid].val + sym_offset, dtv = *(tp + dtv_offset) */
};

/* Per process (task local storage of its leader, keyed by a pidfd), written by the agent. */
struct tp_tls_loc {
	__u32 kind;	      /* enum tp_tls_kind */
	__u32 dtv_stride;     /* bytes per dtv entry (16 on glibc) */
	__s64 tp_offset;      /* TP_TLS_STATIC: pointer address minus thread pointer */
	__u64 dtv_offset;     /* TP_TLS_DTV: offset of the dtv pointer from the thread pointer */
	__u64 modid;	      /* TP_TLS_DTV: the module's TLS module id (dtv index) */
	__u64 sym_offset;     /* TP_TLS_DTV: the variable's offset in the module's TLS block */
	__u64 dtv_val_offset; /* TP_TLS_DTV: offset of the block pointer inside a dtv entry */
	__u32 sdk_probe; /* 1: the writer is the traceprof SDK and its registration uprobe is */
	/* attached: a thread's pointer, once read, is kept (see sampler.bpf.c) */
	__u32 reserved; /* zero */
};

/* The fixed part of an OTEP 4947 record, as the writer lays it out. */
#define TP_CTX_TRACE_ID_OFF 0
#define TP_CTX_SPAN_ID_OFF  16
#define TP_CTX_VALID_OFF    24
#define TP_CTX_FLAGS_OFF    25
#define TP_CTX_HEADER_SIZE  28

/* What the sampler found for the thread's context. */
enum tp_ctx_state {
	TP_CTX_NONE = 0,    /* no location known, or a NULL pointer: outside any request */
	TP_CTX_TAGGED = 1,  /* valid == 1: trace_id/span_id set */
	TP_CTX_INVALID = 2, /* record read, valid != 1 (detached or being written) */
	TP_CTX_FAULT = 3,   /* pointer or record unreadable (garbage pointer, paged out) */
};

/* What a ring record is. */
enum tp_record_kind {
	TP_REC_SAMPLE = 0, /* a CPU sample */
	TP_REC_EXEC = 1,   /* process pid started a new program (header only, no frames) */
	TP_REC_EXIT = 2,   /* the last thread of process pid exited (header only, no frames) */
	TP_REC_FORK = 3,   /* process tid forked process pid (a new process, not a thread); */
			   /* no frames, ips[0] = pid's start time (task->start_boottime, ns) */
	TP_REC_MAPS = 4,   /* process pid's loader loaded or unloaded objects (its debug */
			   /* rendezvous, _dl_debug_state); header only, no frames */
	TP_REC_OFFCPU = 5, /* thread tid was off CPU for off_us µs (docs/offcpu.md): the */
			   /* context it carried when it left, flags TP_SAMPLE_OFF_*, the */
			   /* frames where it left (none for TP_SAMPLE_OFF_SHORT); hz 0 */
	TP_REC_HTTP = 6,   /* thread tid answered an HTTP/1.x request found from its system */
			   /* calls (docs/zero-code-http.md): time_ns its end, the request's */
			   /* context, off_us the status, struct tp_http after the header */
	TP_REC_GPU = 7,	   /* thread tid launched CUDA work (docs/gpu.md): the thread's */
			   /* context, user_n user frames from the launch marker (kern_n 0), */
			   /* off_us the correlation id, struct tp_gpu_launch right after */
			   /* the frames (at ips[user_n]); TP_GPU_BYTES(user_n) bytes long */
};

/* What a TP_REC_GPU record carries after its frames, at ips[user_n]. */
struct tp_gpu_launch {
	__u64 stream; /* the marker's stream argument */
	__u32 device; /* CUDA device ordinal */
	__u32 api;    /* enum tp_cuda_api (include/traceprof/cuda_ring.h) */
};
#define TP_GPU_BYTES(user_n) (64u + ((user_n) + 2u) * 8u)

/*
 * What follows the 64-byte header of a TP_REC_HTTP record (in ips[]):
 * the request as the thread's system calls showed it.
 */
#define TP_HTTP_TARGET 128
struct tp_http {
	__u64 start_ns;		     /* the return of the read that brought its request line */
	__u8 parent_span_id[8];	     /* from its traceparent; zero: none (a new trace) */
	__u32 fd;		     /* the connection */
	__u16 flags;		     /* TP_HTTP_* */
	__u16 target_len;	     /* bytes of target */
	char method[8];		     /* NUL-padded */
	char target[TP_HTTP_TARGET]; /* the request target up to '?', not NUL-terminated */
};
#define TP_HTTP_TRACEPARENT 0x1 /* the trace id came from the request's traceparent */
#define TP_HTTP_UNANSWERED  0x2 /* ended without a status line (closed, or the next request) */
#define TP_HTTP_TRUNCATED   0x4 /* the target was longer than TP_HTTP_TARGET */
#define TP_HTTP_MULTIPLEXED 0x8 /* the thread read another connection's request meanwhile */

/* Least time between two TP_REC_MAPS records of one process (a dlopen storm). */
#define TP_MAPS_GAP_NS 20000000ull

/*
 * Raised sampling (docs/triggers.md): tp_sample.flags. A sample of the
 * raised events has TP_SAMPLE_RAISED (its hz is the raised rate); a
 * base_hz/raised_hz subsample of those also has TP_SAMPLE_BASE and stands
 * for the base events' sample of that thread, which was not taken.
 */
#define TP_SAMPLE_RAISED 0x1
#define TP_SAMPLE_BASE	 0x2
/* The CFI walk of the user stack was cut (TP_CNT_UW_CUT) or truncated (TP_CNT_UW_TRUNC). */
#define TP_SAMPLE_UW_CUT   0x4
#define TP_SAMPLE_UW_TRUNC 0x8
/*
 * TP_REC_OFFCPU: what the interval was. Blocked: from leaving the CPU in
 * a sleeping state until woken; runqueue: runnable (woken, or preempted)
 * until it ran. SHORT: the sum of the thread's intervals of that kind each
 * below the threshold, since its last such record, in one context.
 */
#define TP_SAMPLE_OFF_BLOCKED 0x10
#define TP_SAMPLE_OFF_RUNQ    0x20
#define TP_SAMPLE_OFF_SHORT   0x40
/* The record's context came from OBI's trace map (docs/agent.md, "OBI's trace map"). */
#define TP_SAMPLE_CTX_OBI 0x80
/* The record's context came from a request found from system calls (zero-code HTTP). */
#define TP_SAMPLE_CTX_HTTP 0x100

/*
 * OBI's trace map ("traces_ctx_v1", pinned by OpenTelemetry eBPF
 * Instrumentation): an LRU hash from bpf_get_current_pid_tgid() (tgid in
 * the high 32 bits, thread id in the low) to the trace context the thread
 * serves. The sampler reads it through "obi_maps", an array of one map the
 * agent fills with the pinned map it found.
 */
struct tp_obi_ctx {
	__u8 trace_id[16];
	__u8 span_id[8];
};
#define TP_OBI_MAX_ENTRIES (1u << 14)

/*
 * Python frames (python.bpf.c, docs/python.md). For a process in
 * "py_procs" the sampler reads the interrupted thread's interpreter frames
 * after its native ones: TP_PY_WORDS words a frame, innermost first, at
 * ips[kern_n + user_n], their count in py_n (0 for other processes), in
 * CPU samples and in the records of blocked off-CPU intervals. A frame: the code object's address;
 * the address of its function's module name (the str that __module__ points at, read in the same
 * walk, 0 when none); then the instruction's byte offset in its code (low 32 bits), TP_PY_ENTRY
 * when the frame was entered from C (the frames from the innermost to the first such one ran in the
 * innermost native evaluation loop frame, the next chunk in the next one) and the code object's
 * identity at the time of the sample in the top bits (tp_py_ident of its qualified name's and
 * location table's addresses): the agent names the code later, from the process's memory, and a
 * code object freed since and its address reused by another fails that check instead of lending its
 * name. Offsets are per interpreter version, from the agent (agent/process/pyproc.c).
 */
#define TP_PY_MAX_FRAMES  40
#define TP_PY_WORDS	  3
#define TP_PY_ENTRY	  (1ull << 32)
#define TP_PY_IDENT_SHIFT 40
#define TP_PY_NONE	  0xffff /* an offset the interpreter does not have */
#define TP_PY_FRAME_READ  128	 /* bytes of a frame read at once: every offset + 8 below */

/* 24 bits that change when a code object's name or location table does. */
static inline __u64 tp_py_ident(__u64 qualname, __u64 linetable)
{
	__u64 h = (qualname ^ (linetable * 0x9e3779b97f4a7c15ull)) * 0xbf58476d1ce4e5b9ull;

	return (h >> 40) & 0xffffff;
}

struct tp_py_proc {
	__u64 interp_head; /* address of _PyRuntime.interpreters.head */
	__u64 gil_holder;  /* address of the word naming the GIL's holder (a thread state), 0 */
	__u16 interp_threads_head; /* PyInterpreterState: threads.head */
	__u16 ts_next;		   /* PyThreadState: next */
	__u16 ts_native_tid;	   /* PyThreadState: native_thread_id */
	__u16 ts_cframe;	   /* PyThreadState: cframe, or TP_PY_NONE */
	__u16 ts_frame;		   /* cframe (or the thread state without one): current frame */
	__u16 frame_code;	   /* _PyInterpreterFrame: the code object */
	__u16 frame_func;	   /* ... the function object, or TP_PY_NONE */
	__u16 frame_previous;	   /* ... the caller's frame */
	__u16 frame_instr;	   /* ... the current instruction's address */
	__u16 frame_entry;	   /* ... the byte that says it was entered from C, or TP_PY_NONE */
	__u16 frame_owner;	   /* ... the byte of its owner, or TP_PY_NONE */
	__u16 code_adaptive;	   /* PyCodeObject: the first instruction */
	__u16 code_qualname;	   /* ... co_qualname, with co_linetable the next word */
	__u16 func_module;	   /* PyFunctionObject: __module__, or TP_PY_NONE */
	__u16 ts_thread_id;	   /* PyThreadState: thread_id (pthread_self()), or TP_PY_NONE */
	__u8 owner_cstack;	   /* owner of a C-stack shim frame (3.12+), 0xff none */
	__u8 owner_skip;   /* owner of a frame with no code (3.14's base frame), 0xff none */
	__u8 ref_tag_bits; /* low bits of a frame's code and function words that tag them */
	__u8 reserved[1];  /* zero */
	__u16 interp_next; /* PyInterpreterState: next (sub-interpreters), or TP_PY_NONE */
	__u16 reserved2;   /* zero */
};
#define TP_MAX_PY_PROCS 4096

/*
 * Processes whose HTTP/1.x requests are found from system calls, map
 * "zc_targets": tgid -> the hook that follows the process's calls and the
 * capture's epoch.
 */
#define TP_MAX_ZC_TARGETS   4096
#define TP_ZC_HOOK_SYSCALLS 1 /* the raw syscall tracepoints (every process pays them) */
#define TP_ZC_HOOK_LIBC	    2 /* uprobes on the process's libc wrappers (only it pays) */

struct tp_zc_target {
	__u8 hook;   /* TP_ZC_HOOK_* */
	__u8 pad[3]; /* zero */
	__u32 epoch; /* a new one each time capture of the process starts (a fork keeps it) */
};

/* Raised target processes (tgids) at most, map "raised_targets". */
#define TP_MAX_RAISED_TARGETS 4096
/* Off-CPU target processes (tgids) of triggers at most, map "offcpu_targets". */
#define TP_MAX_OFFCPU_TARGETS 4096

/* Ring buffer record; frames follow the header: kern_n kernel, then user_n user (leaf first). */
struct tp_sample {
	__u64 time_ns;	   /* bpf_ktime_get_ns() (CLOCK_MONOTONIC) */
	__u64 cgroup_id;   /* bpf_get_current_cgroup_id() under TP_FILTER_CGROUP, else 0 */
	__u32 pid;	   /* tgid */
	__u32 tid;	   /* thread id */
	__u8 trace_id[16]; /* TP_CTX_TAGGED only */
	__u8 span_id[8];   /* TP_CTX_TAGGED only, bytes as in the record */
	__u8 ctx_state;	   /* enum tp_ctx_state */
	__u8 trace_flags;  /* TP_CTX_TAGGED only */
	__u16 hz;	   /* sampling frequency of the event that fired (its bpf cookie) */
	__u16 kern_n;	   /* kernel frames */
	__u16 user_n;	   /* user frames */
	__u8 kind;	   /* enum tp_record_kind */
	__u8 py_n;	   /* TP_REC_SAMPLE, TP_REC_OFFCPU: Python frames after the native ones */
	__u16 flags;	   /* TP_SAMPLE_RAISED, TP_SAMPLE_BASE */
	__u32 off_us; /* TP_REC_OFFCPU: the interval in µs; HTTP: status; GPU: correlation id */
	__u64 ips[2 * TP_MAX_FRAMES]; /* only kern_n + user_n are meaningful */
};

/*
 * The ring record of a sample that interrupted user mode: the header and
 * room for TP_MAX_FRAMES user frames (a sample of kernel mode reserves the
 * whole struct tp_sample). Only kern_n + user_n frames are meaningful.
 */
#define TP_SAMPLE_USER_BYTES (64 + TP_MAX_FRAMES * 8)

/*
 * Per-CPU counters (array map "counters": a row per CPU starting with
 * __u64[TP_CNT_MAX], index = enum tp_counter; the rest of the row is the
 * program's own). Indices 6, 7, 8 and 14 were the counters of the
 * in-kernel aggregation path, removed (docs/agent.md): they stay free so
 * that the others keep their index. Indices 44 to 47 are kept for the
 * CUDA launch records' counters (docs/gpu.md).
 */
enum tp_counter {
	TP_CNT_SAMPLES = 0,	  /* program runs that kept a sample */
	TP_CNT_FILTERED = 1,	  /* runs skipped by the target filter (idle ticks never run) */
	TP_CNT_RINGBUF_FULL = 2,  /* samples lost: ring buffer full */
	TP_CNT_TAGGED = 3,	  /* samples with TP_CTX_TAGGED */
	TP_CNT_CTX_FAULT = 4,	  /* samples with TP_CTX_FAULT */
	TP_CNT_NO_USTACK = 5,	  /* samples whose user stack could not be read */
	TP_CNT_RAISED = 9,	  /* raised samples kept (also in TP_CNT_SAMPLES) */
	TP_CNT_RAISED_BASE = 10,  /* of those, flagged TP_SAMPLE_BASE */
	TP_CNT_RAISED_OTHER = 11, /* raised runs discarded: not a raised target, or raised off */
	TP_CNT_RAISED_IDLE = 12,  /* raised runs discarded: target thread outside a request */
	TP_CNT_BASE_COVERED = 13, /* base runs skipped: the thread is covered by raised events */
	TP_CNT_STACK_RETAKE = 15, /* stacks walked twice: deeper than this CPU's recent ones */
	/* CFI unwinding (unwind_step in sampler.bpf.c), stacks of processes with unwind maps */
	TP_CNT_UW_STACKS = 16,	   /* user stacks walked with unwind tables */
	TP_CNT_UW_ROOT = 17,	   /* of those, ended at an outermost frame (CFI: RA undefined) */
	TP_CNT_UW_FP_END = 18,	   /* ended where the frame pointer chain ends (rbp 0, ip 0) */
	TP_CNT_UW_CUT = 19,	   /* cut: memory unreadable, or the stack did not move up */
	TP_CNT_UW_TRUNC = 20,	   /* cut at TP_MAX_FRAMES frames */
	TP_CNT_UW_FRAMES_CFI = 21, /* caller frames found through unwind tables */
	TP_CNT_UW_FRAMES_FP = 22,  /* caller frames found through frame pointers (no row) */
	TP_CNT_UW_NOT_READY = 23,  /* of those, in a file whose table was not there (yet) */
	TP_CNT_MAPS = 24,	   /* TP_REC_MAPS records emitted (loader rendezvous of a target) */
	TP_CNT_MAPS_LIMITED = 25,  /* rendezvous calls skipped: within TP_MAPS_GAP_NS of a record */
	/* off-CPU capture (offcpu.bpf.c, docs/offcpu.md) */
	TP_CNT_OFF_RECORDS = 26,     /* TP_REC_OFFCPU records of one interval (>= threshold) */
	TP_CNT_OFF_SHORT = 27,	     /* TP_SAMPLE_OFF_SHORT records (sums of short intervals) */
	TP_CNT_OFF_LOST = 28,	     /* off-CPU records lost: ring buffer full */
	TP_CNT_OFF_LOST_US = 29,     /* the µs those records held */
	TP_CNT_OFF_STATE_FULL = 30,  /* switch-outs not followed: no "off_threads" state made */
	TP_CNT_OFF_NO_WAKEUP = 31,   /* blocked intervals whose wakeup was not seen (all blocked) */
	TP_CNT_OFF_USTACK_LOST = 32, /* blocked records without user frames: back in user mode */
	/* by another path than its syscall's exit */
	TP_CNT_CTX_OBI = 33, /* samples tagged from OBI's trace map (also in TP_CNT_TAGGED) */
	/* HTTP/1.x from system calls (zerocode.bpf.c, docs/zero-code-http.md) */
	TP_CNT_CTX_HTTP = 34,	    /* samples tagged from a request found from system calls */
	TP_CNT_HTTP_REQUESTS = 35,  /* TP_REC_HTTP records */
	TP_CNT_HTTP_LOST = 36,	    /* of those, lost: ring buffer full */
	TP_CNT_HTTP_MULTIPLEX = 37, /* request heads read while another connection's was open */
	TP_CNT_HTTP_NO_STATE = 38,  /* system calls of targets not followed: no thread state */
	/* Python frames (python.bpf.c, docs/python.md) */
	TP_CNT_PY_STACKS = 39,	  /* samples of Python processes with a thread state found */
	TP_CNT_PY_NO_TSTATE = 40, /* samples of Python processes whose thread has none (yet) */
	TP_CNT_PY_FRAMES = 41,	  /* Python frames taken */
	TP_CNT_PY_TRUNC = 42,	  /* walks cut at TP_PY_MAX_FRAMES or the record's room */
	TP_CNT_PY_FAULT = 43,	  /* walks cut by memory that could not be read */
	/* CUDA kernel launches (gpu.bpf.c, docs/gpu.md) */
	TP_CNT_GPU_LAUNCHES = 44, /* TP_REC_GPU records emitted (marker calls of targets) */
	TP_CNT_GPU_LOST = 45,	  /* marker calls of targets lost: ring buffer full */
	TP_CNT_GPU_FILTERED = 46, /* marker calls of processes the target filter skips */
	TP_CNT_GPU_TAGGED = 47,	  /* of the records, with a request context */
	/* HTTP/1.x from system calls: what was read and not taken for a request */
	TP_CNT_HTTP_NOT_HEAD = 48,  /* socket reads, no request open, not starting with a method */
	TP_CNT_HTTP_BAD_LINE = 49,  /* a method, then no valid HTTP/1.x request line */
	TP_CNT_HTTP_SPLIT = 50,	    /* a request line not complete in its read: not taken */
	TP_CNT_HTTP_PIPELINED = 51, /* two requests in one read: neither taken */
	TP_CNT_HTTP_HEAD_CUT = 52,  /* requests whose head did not end in the bytes looked at */
	TP_CNT_HTTP_STALE = 53, /* requests dropped open: capture stopped, or the thread exec'd */
	TP_CNT_HTTP_BAD_TRACEPARENT = 54, /* traceparents refused (malformed, two): a new trace */
	TP_CNT_MAX = 55,
};

/*
 * CFI unwinding (docs/agent.md, agent/unwind/README.md). The agent turns
 * each mapped file's call frame information into rows, places them in the
 * array "unwind_rows" (one area for all files, memory-mapped by the
 * agent), describes each placed table in "unwind_tables" and each sampled
 * process's executable mappings in "unwind_procs". For a process with an
 * entry there, the sampler walks the user stack frame by frame: the row
 * of the frame's address says where the caller's frame is; where there is
 * no row (no table, a gap, a rule the walker cannot follow) it takes the
 * frame pointer.
 */
#define TP_UNWIND_MAX_MAPS   128	/* executable mappings of a process with tables */
#define TP_UNWIND_MAX_TABLES 8192	/* tables placed at once (unwind_tables) */
#define TP_UNWIND_MAX_ROWS   (1u << 24) /* rows of one table (the search is 24 steps) */
#define TP_UNWIND_SEARCH     24
#define TP_UNWIND_MAP_SEARCH 8 /* steps of the mapping search (2^8 > MAX_MAPS) */

/* struct tp_unwind_row.rule */
#define TP_UW_CFA_MASK	0x07u /* how the CFA is found: */
#define TP_UW_CFA_NONE	0x00u /* no rule: the frame pointer is taken */
#define TP_UW_CFA_RSP	0x01u /* CFA = rsp + cfa_off */
#define TP_UW_CFA_RBP	0x02u /* CFA = rbp + cfa_off */
#define TP_UW_CFA_PLT	0x03u /* CFA = rsp + cfa_off, + 8 when (ip & 15) >= rbp_off8 (PLT) */
#define TP_UW_CFA_DEREF 0x04u /* CFA = *(rsp + cfa_off) + 8 (rsp saved in the frame) */
#define TP_UW_CFA_REG	0x05u /* interrupted frame only: CFA = register + offset, */
/* cfa_off = register's index in struct pt_regs (r15 = 0 .. di = 14) << 8 | (__u8)offset */
#define TP_UW_RBP_MASK	 0x18u /* where the caller's rbp is: */
#define TP_UW_RBP_SAME	 0x00u /* unchanged */
#define TP_UW_RBP_AT_CFA 0x08u /* at CFA + 8 * rbp_off8 */
#define TP_UW_RBP_UNDEF	 0x10u /* not recoverable (0) */
#define TP_UW_RA_UNDEF	 0x20u /* no return address: the outermost frame, the walk ends */
#define TP_UW_SIGNAL	 0x40u /* a signal frame: the interrupted registers are in a ucontext */

/* One row (8 bytes): its rule holds from its address to the next row's. */
struct tp_unwind_row {
	__u32 addr;    /* address minus the table's base (see tp_unwind_map.bias) */
	__s16 cfa_off; /* see TP_UW_CFA_* */
	__s8 rbp_off8; /* TP_UW_RBP_AT_CFA: offset / 8; TP_UW_CFA_PLT: the ip threshold */
	__u8 rule;     /* TP_UW_* */
};

/*
 * One placed table (array "unwind_tables", index = table slot). Its rows
 * are followed in unwind_rows by a bucket index: entry b (its addr field)
 * is the table's last row at or before address b << shift, so a search
 * looks only between two entries (a few rows, one or two cache lines)
 * instead of the whole table.
 */
struct tp_unwind_table {
	__u32 row0;	/* first row in unwind_rows */
	__u32 nrows;	/* rows, at most TP_UNWIND_MAX_ROWS */
	__u32 id;	/* changes when the slot is reused; 0: empty */
	__u32 nbuckets; /* index entries after the rows (0: none, search the whole table) */
	__u32 shift;	/* bucket b covers addresses [b << shift, (b + 1) << shift) */
	__u32 reserved;
};

/* One executable mapping of a process. */
struct tp_unwind_map {
	__u64 start; /* first address */
	__u64 end;   /* one past the last */
	__u64 bias;  /* row address = ip - bias */
	__u32 table; /* slot in unwind_tables */
	__u32 id;    /* the table's id when the entry was written: another id, no table */
};

/* A process's executable mappings with tables (hash "unwind_procs", key tgid). */
struct tp_unwind_proc {
	__u32 n;   /* mappings, sorted by start, not overlapping */
	__u32 gen; /* changes whenever the agent writes the list (keys the walker's cache) */
	struct tp_unwind_map maps[TP_UNWIND_MAX_MAPS];
};

#endif
