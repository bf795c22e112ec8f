// SPDX-License-Identifier: GPL-2.0
/*
 * lookup_cost.bpf.c - what one way of finding a thread's context costs a
 * CPU-clock sample (a benchmark probe, not part of the agent).
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
	}
	out = bpf_map_lookup_elem(&sink, &zero);
	if (out)
		*out += found;
	return 0;
}
