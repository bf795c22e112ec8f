/*
 * offcpu_attach.c - attaches and detaches the off-CPU programs
 * (offcpu_attach.h). Order going on: the options first (mode, threshold,
 * a new generation, so that per-thread entries of an earlier capture are
 * stale), then the programs; going off: mode 0 first (the programs return
 * at once), then detach.
 */
#include <errno.h>
#include <string.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "sampler.skel.h"
#include "traceprof/log.h"

#include "offcpu_attach.h"

static struct bpf_program *prog_of(struct sampler_bpf *skel, int i)
{
	struct bpf_program *p[OFFCPU_PROGS] = {skel->progs.on_off_switch, skel->progs.on_off_wakeup,
					       skel->progs.on_off_wakeup_new,
					       skel->progs.on_off_sys_exit};

	return p[i];
}

void offcpu_links_free(struct offcpu_links *ol)
{
	for (int i = 0; i < OFFCPU_PROGS; i++) {
		bpf_link__destroy(ol->link[i]);
		ol->link[i] = NULL;
	}
	ol->mode = 0;
	ol->targets = false;
	ol->attached = false;
}

int offcpu_links_set(struct offcpu_links *ol, struct sampler_bpf *skel, unsigned mode, bool targets,
		     uint32_t min_us)
{
	int err;

	if (!mode && !targets) {
		skel->bss->offcpu_mode = 0;
		skel->bss->offcpu_targets_on = 0;
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		offcpu_links_free(ol);
		ol->min_us = min_us;
		return 0;
	}
	skel->bss->offcpu_min_ns = (uint64_t)min_us * 1000;
	if (!ol->attached) /* switched on: what earlier captures left is stale */
		skel->bss->offcpu_gen++;
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	skel->bss->offcpu_mode = mode;
	skel->bss->offcpu_targets_on = targets;
	for (int i = 0; i < OFFCPU_PROGS; i++) {
		if (ol->link[i])
			continue;
		ol->link[i] = bpf_program__attach(prog_of(skel, i));
		if (!ol->link[i]) {
			err = -errno;
			log_error("cannot attach off-CPU program name=%s err=%s",
				  bpf_program__name(prog_of(skel, i)), strerror(-err));
			skel->bss->offcpu_mode = 0;
			skel->bss->offcpu_targets_on = 0;
			offcpu_links_free(ol);
			return err;
		}
	}
	ol->mode = mode;
	ol->targets = targets;
	ol->attached = true;
	ol->min_us = min_us;
	return 0;
}

void offcpu_links_run_stats(struct sampler_bpf *skel, uint64_t *run_ns, uint64_t *runs)
{
	*run_ns = *runs = 0;
	for (int i = 0; i < OFFCPU_PROGS; i++) {
		struct bpf_prog_info info;
		__u32 len = sizeof(info);

		memset(&info, 0, sizeof(info));
		if (bpf_obj_get_info_by_fd(bpf_program__fd(prog_of(skel, i)), &info, &len))
			continue;
		*run_ns += info.run_time_ns;
		*runs += info.run_cnt;
	}
}
