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

/* Where a process keeps its otel_thread_ctx_v1 TLS pointer (tp = thread pointer). */
enum tp_tls_kind {
	TP_TLS_NONE = 0,   /* no thread context in this process */
	TP_TLS_STATIC = 1, /* pointer at tp + tp_offset (static TLS block) */
	TP_TLS_DTV = 2,	   /* pointer at dtv[modid].val + sym_offset, dtv = *(tp + dtv_offset) */
};

/* Per process (key: tgid), written by the agent. */
struct tp_tls_loc {
	__u32 kind;	      /* enum tp_tls_kind */
	__u32 dtv_stride;     /* bytes per dtv entry (16 on glibc) */
	__s64 tp_offset;      /* TP_TLS_STATIC: pointer address minus thread pointer */
	__u64 dtv_offset;     /* TP_TLS_DTV: offset of the dtv pointer from the thread pointer */
	__u64 modid;	      /* TP_TLS_DTV: the module's TLS module id (dtv index) */
	__u64 sym_offset;     /* TP_TLS_DTV: the variable's offset in the module's TLS block */
	__u64 dtv_val_offset; /* TP_TLS_DTV: offset of the block pointer inside a dtv entry */
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

/* Ring buffer record; frames follow the header: kern_n kernel, then user_n user (leaf first). */
struct tp_sample {
	__u64 time_ns;	   /* bpf_ktime_get_ns() (CLOCK_MONOTONIC) */
	__u64 cgroup_id;   /* bpf_get_current_cgroup_id() */
	__u32 pid;	   /* tgid */
	__u32 tid;	   /* thread id */
	__u8 trace_id[16]; /* TP_CTX_TAGGED only */
	__u8 span_id[8];   /* TP_CTX_TAGGED only, bytes as in the record */
	__u8 ctx_state;	   /* enum tp_ctx_state */
	__u8 trace_flags;  /* TP_CTX_TAGGED only */
	__u16 hz;	   /* sampling frequency of the event that fired (its bpf cookie) */
	__u16 kern_n;	   /* kernel frames */
	__u16 user_n;	   /* user frames */
	__u32 cpu;	   /* CPU the sample was taken on */
	char comm[16];	   /* thread name */
	__u64 ips[2 * TP_MAX_FRAMES]; /* only kern_n + user_n are meaningful */
};

/* Per-CPU counters (array map "counters", index = enum tp_counter). */
enum tp_counter {
	TP_CNT_SAMPLES = 0,	 /* program runs that kept a sample */
	TP_CNT_FILTERED = 1,	 /* runs skipped by the target filter or idle */
	TP_CNT_RINGBUF_FULL = 2, /* samples lost: ring buffer full */
	TP_CNT_TAGGED = 3,	 /* samples with TP_CTX_TAGGED */
	TP_CNT_CTX_FAULT = 4,	 /* samples with TP_CTX_FAULT */
	TP_CNT_NO_USTACK = 5,	 /* samples whose user stack could not be read */
	TP_CNT_MAX = 6,
};

#endif
