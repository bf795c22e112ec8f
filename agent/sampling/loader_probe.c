/*
 * loader_probe.c - the loader rendezvous uprobe, once per loader file
 * (loader_probe.h).
 */
#include "loader_probe.h"

#include <elf.h>
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#include "tlsloc.h"
#include "traceprof/log.h"

/* Counts and logs (debug only: every answer is normal somewhere) the try of path. */
static const char *probe_func(const struct loader_probes *lp)
{
	return lp->func ? lp->func : LOADER_PROBE_FUNC;
}

static int note(struct loader_probes *lp, const char *path, int err)
{
	if (err == 0) {
		lp->attached++;
		log_debug("uprobe attached path=%s func=%s", path, probe_func(lp));
	} else if (err == -ENOENT) {
		lp->no_symbol++;
		log_debug("no uprobe path=%s: no function %s", path, probe_func(lp));
	} else {
		lp->failed++;
		log_debug("cannot attach uprobe path=%s func=%s err=%s", path, probe_func(lp),
			  strerror(-err));
	}
	return err;
}

int loader_probes_attach(struct loader_probes *lp, struct bpf_program *prog, const char *path,
			 uint64_t dev, uint64_t ino)
{
	LIBBPF_OPTS(bpf_uprobe_opts, uopts, .func_name = probe_func(lp));
	uint64_t value;
	int err, type, i;

	for (i = 0; i < lp->n; i++)
		if (lp->files[i].dev == dev && lp->files[i].ino == ino)
			return lp->files[i].err;
	if (lp->n == LOADER_PROBE_MAX) {
		if (!lp->full++)
			log_info("uprobe on %s in %d files already; %s is not probed",
				 probe_func(lp), LOADER_PROBE_MAX, path);
		return -ENOSPC;
	}
	/* asked for a function the file lacks, libbpf warns: look first */
	err = tlsloc_file_symbol(path, probe_func(lp), &value, &type);
	if (err < 0 && err != -ENOEXEC && err != -ENOTSUP)
		return note(lp, path, err); /* not opened: tried again by the next process */
	if (err <= 0 || type != STT_FUNC) {
		err = -ENOENT; /* not ELF, or no such function: remembered */
	} else {
		lp->files[i].link = bpf_program__attach_uprobe_opts(prog, -1, path, 0, &uopts);
		err = lp->files[i].link ? 0 : -errno;
	}
	lp->files[i].dev = dev;
	lp->files[i].ino = ino;
	lp->files[i].err = err;
	lp->n++;
	return note(lp, path, err);
}

bool loader_probes_known(const struct loader_probes *lp, uint64_t dev, uint64_t ino)
{
	for (int i = 0; i < lp->n; i++)
		if (lp->files[i].dev == dev && lp->files[i].ino == ino)
			return true;
	return false;
}

void loader_probes_free(struct loader_probes *lp)
{
	for (int i = 0; i < lp->n; i++)
		bpf_link__destroy(lp->files[i].link);
	memset(lp->files, 0, sizeof(lp->files));
	lp->n = 0;
}
