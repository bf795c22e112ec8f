// SPDX-License-Identifier: GPL-2.0
/*
 * gpu.bpf.c - CUDA kernel launches (docs/gpu.md), part of the sampler's
 * object: sampler.bpf.c includes it, so the target filter, the
 * thread-context reader, the unwind maps, the counters and the ring are
 * shared.
 *
 * libtraceprof-cuda calls traceprof_cuda_launch(correlation_id, device,
 * stream, api) on the launching thread, inside the application's launch
 * call (include/traceprof/cuda_ring.h). The agent puts on_gpu_launch on
 * that exported function, once per library file, for every process. For a
 * process the target filter wants it reads the thread's request context
 * as a CPU sample does (SDK record, TLS, OBI, zero-code), walks the user
 * stack from the probe's registers with the sampler's walker (CFI tables
 * where placed, else frame pointers) and emits a TP_REC_GPU record: the
 * frames at ips[0, user_n), the correlation id in off_us, the stream and
 * device | api << 32 right after the frames (bpf/sampler.h). The agent
 * joins it with the kernels' records of the same id from the process's
 * shared ring.
 *
 * The record is built in a per-CPU buffer and copied into the ring at its
 * length, TP_GPU_BYTES(user_n), not reserved at its largest (1,096 bytes)
 * as a sample's: a launch stack is tens of frames, and a flood of
 * launches would fill the ring with room never used. The copy of a few
 * hundred bytes from a buffer that stays in cache is small next to the
 * uprobe's trap (bench/results.md).
 */

/* The record being built, per CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct tp_sample);
} gpu_scratch SEC(".maps");

SEC("uprobe")
int BPF_KPROBE(on_gpu_launch, __u32 correlation_id, __u32 device, __u64 stream, __u32 api)
{
	struct task_struct *task = bpf_get_current_task_btf();
	__u32 tgid = task->tgid, tid = task->pid, un, zero = 0;
	struct counter_set *c = counters_here();
	struct thread_ctx tc;
	struct tp_sample *s;
	__u16 sflags = 0;
	__u64 flags = 0;

	if (!wanted(tgid)) {
		if (c)
			c->n[TP_CNT_GPU_FILTERED]++;
		return 0;
	}
	s = bpf_map_lookup_elem(&gpu_scratch, &zero);
	if (!s)
		return 0;
	read_thread_ctx(task, &tc);
	s->kind = TP_REC_GPU;
	s->py_n = 0;
	s->time_ns = bpf_ktime_get_ns();
	s->cgroup_id = filter_mode == TP_FILTER_CGROUP ? bpf_get_current_cgroup_id() : 0;
	s->pid = tgid;
	s->tid = tid;
	record_ctx(s, &tc);
	s->hz = 0;
	s->kern_n = 0;
	s->off_us = correlation_id;
#if defined(__TARGET_ARCH_x86)
	const struct tp_unwind_proc *uw = bpf_map_lookup_elem(&unwind_procs, &tgid);

	if (uw)
		un = walk_user(ctx, false, uw, s->ips, c, &sflags);
	else
		un = take_stack(ctx, s->ips, BPF_F_USER_STACK, c, 1);
#else
	un = take_stack(ctx, s->ips, BPF_F_USER_STACK, c, 1);
#endif
	un &= 0x7f; /* at most TP_MAX_FRAMES: a bound the verifier sees */
	s->user_n = un;
	s->flags = sflags | ctx_src_flags(&tc);
	s->ips[un] = stream;
	s->ips[un + 1] = (__u64)device | (__u64)api << 32;
	/* launches come in floods: wake the reader as samples do (it also polls) */
	if (wakeup_bytes)
		flags = bpf_ringbuf_query(&samples, BPF_RB_AVAIL_DATA) < wakeup_bytes
			    ? BPF_RB_NO_WAKEUP
			    : BPF_RB_FORCE_WAKEUP;
	if (bpf_ringbuf_output(&samples, s, TP_GPU_BYTES(un), flags) != 0) {
		if (c)
			c->n[TP_CNT_GPU_LOST]++;
		return 0;
	}
	if (c) {
		c->n[TP_CNT_GPU_LAUNCHES]++;
		if (tc.state == TP_CTX_TAGGED)
			c->n[TP_CNT_GPU_TAGGED]++;
	}
	return 0;
}
