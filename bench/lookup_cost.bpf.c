// SPDX-License-Identifier: GPL-2.0
/*
 * lookup_cost.bpf.c - what one way of finding a thread's context, of
 * handing a sample over or of counting costs a CPU-clock sample (a
 * benchmark probe, not part of the agent).
 *
 * A perf_event program on a CPU-clock event runs in a timer interrupt
 * after the interrupted task ran: whatever it touches may be out of the
 * caches and TLBs. Each loaded copy does the lookups of its rodata mode
 * (enum lookup_mode) for the interrupted thread and adds what it found
 * into a sink, so nothing is optimized away; the loader compares two
 * copies by their run time (kernel.bpf_stats_enabled).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "lookup_cost.h"

char LICENSE[] SEC("license") = "GPL";

const volatile __u32 mode = LOOKUP_NONE;

struct loc {
	__u64 v[8]; /* the size of struct tp_tls_loc, rounded up */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct loc);
} by_tgid SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, __u64);
} by_tid SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, __u64);
} on_thread SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, __u64);
} never SEC(".maps");

/* A sample under construction, per CPU (too large for the BPF stack). */
struct out_buf {
	__u8 b[OUT_MAX];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct out_buf);
} out_buf SEC(".maps");

/* The same buffer as rows of a plain array, one per CPU (loader sets the size). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct out_buf);
} out_rows SEC(".maps");

/* Where OUT_RINGBUF and OUT_RING_RESERVE hand samples over (the loader drains it). */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} ring SEC(".maps");

/* Where OUT_PERFBUF hands them over: one perf buffer per CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_PERF_EVENT_ARRAY);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(__u32));
} perfbuf SEC(".maps");

/* Counters, 16 per CPU: a per-CPU array, or a plain one of one row per CPU. */
struct count_row {
	__u64 n[16];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct count_row);
} pcounters SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1); /* the loader sets the number of possible CPUs */
	__type(key, __u32);
	__type(value, struct count_row);
} acounters SEC(".maps");

/* What was found, per CPU, so that nothing is optimized away. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} sink SEC(".maps");

/* The tgid entry, created at the first sample of a process. */
static __always_inline struct loc *tgid_entry(__u32 tgid)
{
	struct loc *l = bpf_map_lookup_elem(&by_tgid, &tgid), zero = {};

	if (!l)
		bpf_map_update_elem(&by_tgid, &tgid, &zero, BPF_NOEXIST);
	return l;
}

/*
 * The user stack into the per-CPU buffer after a header, and, by mode,
 * the used part copied into the ring or this CPU's perf buffer (no wakeup:
 * the loader drains both on a timer). Returns the bytes taken.
 */
static __always_inline __u64 hand_over(struct bpf_perf_event_data *ctx, struct task_struct *task)
{
	__u32 zero = 0, cpu = bpf_get_smp_processor_id();
	struct out_buf *o = mode == OUT_RINGBUF_ARRAY ? bpf_map_lookup_elem(&out_rows, &cpu)
						      : bpf_map_lookup_elem(&out_buf, &zero);
	__u64 size;
	long n;

	if (!o)
		return 0;
	*(__u64 *)o->b = bpf_ktime_get_ns();
	*(__u32 *)&o->b[8] = task->tgid;
	n = bpf_get_stack(ctx, &o->b[OUT_HEADER], OUT_FRAMES * 8, BPF_F_USER_STACK);
	size = OUT_HEADER + (n > 0 ? (__u64)n & 0x3ff : 0);
	if (size > OUT_MAX)
		size = OUT_MAX;
	if (mode == OUT_RINGBUF || mode == OUT_RINGBUF_ARRAY)
		bpf_ringbuf_output(&ring, o, size, BPF_RB_NO_WAKEUP);
	else if (mode == OUT_PERFBUF)
		bpf_perf_event_output(ctx, &perfbuf, BPF_F_CURRENT_CPU, o, size);
	return size;
}

/* The user stack taken straight into a ring record of the largest size. */
static __always_inline __u64 reserve_and_submit(struct bpf_perf_event_data *ctx,
						struct task_struct *task)
{
	struct out_buf *o = bpf_ringbuf_reserve(&ring, sizeof(*o), 0);
	long n;

	if (!o)
		return 0;
	*(__u64 *)o->b = bpf_ktime_get_ns();
	*(__u32 *)&o->b[8] = task->tgid;
	if (mode == OUT_RING_RESERVE_32)
		n = bpf_get_stack(ctx, &o->b[OUT_HEADER], 32 * 8, BPF_F_USER_STACK);
	else
		n = bpf_get_stack(ctx, &o->b[OUT_HEADER], OUT_FRAMES * 8, BPF_F_USER_STACK);
	bpf_ringbuf_submit(o, BPF_RB_NO_WAKEUP);
	return n > 0 ? (__u64)n : 0;
}

SEC("perf_event")
int probe(struct bpf_perf_event_data *ctx)
{
	struct task_struct *task = bpf_get_current_task_btf();
	__u32 tgid = task->tgid, tid = task->pid, absent = 0x7fffffff, zero = 0;
	__u64 found = 0, *v, *out;
	struct loc *l;

	if (!tid)
		return 0;
	switch (mode) {
	case LOOKUP_HASH_HIT:
		l = tgid_entry(tgid);
		found = l ? l->v[0] + 1 : 0;
		break;
	case LOOKUP_HASH_MISS:
		found = bpf_map_lookup_elem(&by_tgid, &absent) != NULL;
		break;
	case LOOKUP_HASH_TWO:
		l = tgid_entry(tgid);
		if (!l)
			break;
		v = bpf_map_lookup_elem(&by_tid, &tid);
		if (!v)
			bpf_map_update_elem(&by_tid, &tid, &found, BPF_NOEXIST);
		found = v ? *v + 1 : 0;
		break;
	case LOOKUP_STORAGE_HIT:
		v = bpf_task_storage_get(&on_thread, task, NULL, BPF_LOCAL_STORAGE_GET_F_CREATE);
		found = v ? *v + 1 : 0;
		break;
	case LOOKUP_STORAGE_MISS:
		v = bpf_task_storage_get(&never, task, NULL, 0);
		if (!v)
			v = bpf_task_storage_get(&never, task->group_leader, NULL, 0);
		found = v ? *v + 1 : 0;
		break;
	case OUT_STACK:
	case OUT_RINGBUF:
	case OUT_RINGBUF_ARRAY:
	case OUT_PERFBUF:
		found = hand_over(ctx, task);
		break;
	case OUT_RING_RESERVE:
	case OUT_RING_RESERVE_32:
		found = reserve_and_submit(ctx, task);
		break;
	case COUNT_PERCPU:
	case COUNT_ARRAY: {
		__u32 row = mode == COUNT_ARRAY ? bpf_get_smp_processor_id() : 0;
		struct count_row *c = bpf_map_lookup_elem(
		    mode == COUNT_ARRAY ? (void *)&acounters : (void *)&pcounters, &row);

		if (c) {
			c->n[0]++;
			c->n[3]++;
			c->n[9]++;
			found = c->n[0];
		}
		break;
	}
	}
	out = bpf_map_lookup_elem(&sink, &zero);
	if (out)
		*out += found;
	return 0;
}
