// SPDX-License-Identifier: GPL-2.0
/*
 * swevent_cost.bpf.c - how long the kernel spends taking a sample of a
 * software CPU-clock perf event, whoever the profiler is (a benchmark tool,
 * not part of the agent).
 *
 * A CPU-clock event is an hrtimer whose callback, perf_swevent_hrtimer,
 * takes the sample: for perf record, the callchain walk and the copy into
 * its mmap buffer; for a BPF profiler, its perf_event program. The timer
 * interrupt around it is the same for every profiler at the same rate, so
 * the callback's duration is the per-sample cost that differs between
 * them. hrtimer_expire_entry/exit bracket every hrtimer callback; the
 * loader passes the callback's address (from /proc/kallsyms) in
 * swevent_fn, and only those callbacks are timed.
 *
 * The hrtimer is embedded in its perf_event, so each callback is filed by
 * whether the event has a BPF program (a BPF profiler) or not (perf
 * record): two profilers running at once are measured side by side, under
 * the same conditions. Not quite: when one profiler's timer fires shortly
 * after the other's, it finds the sampling path warm and costs less (a
 * quarter less and more on a 2-vCPU VM), and which one follows which
 * depends on when each started. Callbacks that start less than
 * SWEVENT_NEAR_NS after another class's last one ended on the same CPU
 * are also counted apart, so a reader can compare the rest. With
 * prog_b_id set, one BPF program's callbacks are a class of their own
 * (SWEVENT_BPF_B): two builds of a BPF profiler measured side by side.
 */
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "swevent_cost.h"

char LICENSE[] SEC("license") = "GPL";

const volatile __u64 swevent_fn = 0; /* address of perf_swevent_hrtimer */
const volatile __u32 prog_b_id = 0;  /* a BPF program whose callbacks are SWEVENT_BPF_B */

/* Per-class arrays have a power-of-two number of slots: a masked index is in bounds. */
#define SLOTS 4

/*
 * The callback running on this CPU: start time (0: none timed) and class;
 * when each class's last callback here ended.
 */
struct timing {
	__u64 start_ns;
	__u64 entries_at_start; /* entries[cls] when this callback began */
	__u32 cls;
	__u32 overlap; /* another CPU was in a callback of this class when it began */
	__u64 last_end_ns[SLOTS];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct timing);
} started SEC(".maps");

/*
 * Per class, over all CPUs: callbacks running now, and callbacks begun.
 * A callback overlaps another CPU's when one was running as it began, or
 * one began before it ended: two CPUs sampling at the same instant share
 * whatever the profiler shares between CPUs (a BPF ring buffer's lock and
 * positions; perf record has a buffer per CPU).
 */
__u64 running[SLOTS];
__u64 entries[SLOTS];

/* enum swevent_class -> totals, per CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SWEVENT_CLASSES);
	__type(key, __u32);
	__type(value, struct swevent_cost);
} cost SEC(".maps");

SEC("tp_btf/hrtimer_expire_entry")
int BPF_PROG(on_expire_entry, struct hrtimer *timer)
{
	__u64 off = bpf_core_field_offset(struct perf_event, hw) +
		    bpf_core_field_offset(struct hw_perf_event, hrtimer);
	struct perf_event *event;
	struct bpf_prog *prog;
	struct timing *t;
	__u32 zero = 0, cls;

	if ((__u64)timer->function != swevent_fn)
		return 0;
	t = bpf_map_lookup_elem(&started, &zero);
	if (!t)
		return 0;
	event = (struct perf_event *)((char *)timer - off);
	prog = BPF_CORE_READ(event, prog);
	if (!prog)
		cls = SWEVENT_OUTPUT;
	else if (prog_b_id && BPF_CORE_READ(prog, aux, id) == prog_b_id)
		cls = SWEVENT_BPF_B;
	else
		cls = SWEVENT_BPF;
	t->cls = cls;
	t->overlap = __sync_fetch_and_add(&running[cls & (SLOTS - 1)], 1) != 0;
	t->entries_at_start = __sync_fetch_and_add(&entries[cls & (SLOTS - 1)], 1);
	t->start_ns = bpf_ktime_get_ns();
	return 0;
}

SEC("tp_btf/hrtimer_expire_exit")
int BPF_PROG(on_expire_exit, struct hrtimer *timer)
{
	__u64 now = bpf_ktime_get_ns(), start, d, other, begun;
	struct swevent_cost *c;
	struct timing *t;
	__u32 zero = 0, cls;

	t = bpf_map_lookup_elem(&started, &zero);
	if (!t || !t->start_ns)
		return 0;
	start = t->start_ns;
	t->start_ns = 0;
	d = now - start;
	cls = t->cls & (SLOTS - 1);
	/* the latest end of another class's callback here */
	other = 0;
	for (__u32 k = 0; k < SWEVENT_CLASSES; k++)
		if (k != cls && t->last_end_ns[k] > other)
			other = t->last_end_ns[k];
	t->last_end_ns[cls] = now;
	__sync_fetch_and_add(&running[cls], -1);
	begun = entries[cls];
	c = bpf_map_lookup_elem(&cost, &cls);
	if (!c)
		return 0;
	c->callbacks++;
	c->total_ns += d;
	if (other && start - other < SWEVENT_NEAR_NS) {
		c->near_callbacks++;
		c->near_total_ns += d;
	}
	if (t->overlap || begun > t->entries_at_start + 1) {
		c->overlap_callbacks++;
		c->overlap_total_ns += d;
	}
	if (d > c->max_ns)
		c->max_ns = d;
	d /= SWEVENT_HIST_NS;
	if (d >= SWEVENT_HIST_BUCKETS)
		d = SWEVENT_HIST_BUCKETS - 1;
	c->hist[d]++;
	return 0;
}
