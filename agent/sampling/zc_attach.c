/*
 * zc_attach.c - the per-process hooks of zero-code HTTP capture
 * (zc_attach.h). The libc hook: a uprobe (entry) on each followed
 * wrapper and a uretprobe (return) on those whose result matters, each a
 * perf event with the process's id, so the kernel puts the breakpoints
 * into that process's memory alone and every other process runs libc
 * untouched; the call's number travels as the attach cookie. Order going
 * on: probes, then the zc_targets entry (the programs do nothing before);
 * going off: the entry, then the probes.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "bpf/sampler.h" /* TP_ZC_HOOK_*, TP_MAX_ZC_TARGETS */
#include "sampler.skel.h"
#include "traceprof/log.h"

#include "zc_attach.h"

/* A followed wrapper: its name, the system call's number, whether its return counts. */
struct zc_fn {
	const char *name;
	uint32_t nr;
	bool ret;
};

/*
 * x86-64 numbers (bpf/zerocode.bpf.c); recv and send are recvfrom and
 * sendto without an address. sendfile64 is sendfile's alias on 64-bit
 * (one address: one probe).
 */
static const struct zc_fn zc_fns[] = {
    /* reads: the return brings the request head */
    {"read", 0, true},
    {"readv", 19, true},
    {"recv", 45, true},
    {"recvfrom", 45, true},
    {"recvmsg", 47, true},
    /* writes: the entry has the status line and stamps the end (one trap a call) */
    {"write", 1, false},
    {"writev", 20, false},
    {"send", 44, false},
    {"sendto", 44, false},
    {"sendmsg", 46, false},
    {"sendfile", 40, false},
    /* calls that end a request at their start */
    {"close", 3, false},
    {"accept", 43, false},
    {"accept4", 288, false},
    {"shutdown", 48, false},
};

#define ZC_NFNS (sizeof(zc_fns) / sizeof(zc_fns[0]))

/* Probes of one process: an entry for each wrapper, a return for those that have one. */
static size_t zc_nprobes(void)
{
	size_t n = 0;

	for (size_t i = 0; i < ZC_NFNS; i++)
		n += 1 + zc_fns[i].ret;
	return n;
}

/* Whether a mapping's path names a glibc: libc.so.6, libc-2.NN.so. */
static bool is_libc(const char *path)
{
	const char *b = strrchr(path, '/');

	b = b ? b + 1 : path;
	return !strcmp(b, "libc.so.6") ||
	       (!strncmp(b, "libc-", 5) && strlen(b) > 8 && !strcmp(b + strlen(b) - 3, ".so"));
}

int zc_find_libc(uint32_t pid, char *out, size_t size)
{
	char name[64], line[4096 + 128];
	int err = -ENOENT;
	FILE *f;

	snprintf(name, sizeof(name), "/proc/%u/maps", pid);
	f = fopen(name, "re");
	if (!f)
		return errno == ENOENT ? -ESRCH : -errno; /* gone */
	while (fgets(line, sizeof(line), f)) {
		char *path = strchr(line, '/'), *nl;

		/* "addr perms offset dev inode path": executable mappings only */
		if (!path || !strstr(line, " r-xp "))
			continue;
		nl = strchr(path, '\n');
		if (nl)
			*nl = 0;
		if (strstr(path, "/ld-linux"))
			err = -EAGAIN; /* glibc's loader: libc comes (just after an exec) */
		if (!is_libc(path) || strstr(path, " (deleted)"))
			continue;
		if ((size_t)snprintf(out, size, "/proc/%u/root%s", pid, path) >= size)
			err = -ENAMETOOLONG;
		else
			err = 0;
		break;
	}
	fclose(f);
	return err;
}

/*
 * Detaching a uprobe waits for an RCU grace period of the kernel (tens to
 * hundreds of milliseconds each under load): the links of a process that
 * went are destroyed by a thread of their own, off the agent's loop. The
 * process's zc_targets entry is gone first, so its probes do nothing
 * meanwhile; z->links counts them until they are destroyed.
 */
struct zc_batch {
	struct zc_batch *next;
	int n;
	struct bpf_link *links[ZC_LIBC_PROBES];
};

struct zc_reaper {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct zc_batch *head;
	bool stop;
	pthread_t th;
	uint64_t *links; /* the owner's count */
};

static void batch_destroy(struct zc_batch *b, uint64_t *links)
{
	for (int i = 0; i < b->n; i++)
		bpf_link__destroy(b->links[i]);
	__atomic_fetch_sub(links, (uint64_t)b->n, __ATOMIC_RELAXED);
	free(b);
}

static void *reaper_main(void *arg)
{
	struct zc_reaper *r = arg;
	struct zc_batch *b;

	for (;;) {
		pthread_mutex_lock(&r->mu);
		while (!r->head && !r->stop)
			pthread_cond_wait(&r->cv, &r->mu);
		b = r->head;
		if (b)
			r->head = b->next;
		pthread_mutex_unlock(&r->mu);
		if (!b)
			return NULL; /* stopped, nothing left */
		batch_destroy(b, r->links);
	}
}

static struct zc_reaper *reaper_get(struct zc_attach *z)
{
	struct zc_reaper *r = z->reaper;

	if (r)
		return r;
	r = calloc(1, sizeof(*r));
	if (!r)
		return NULL;
	pthread_mutex_init(&r->mu, NULL);
	pthread_cond_init(&r->cv, NULL);
	r->links = &z->links;
	if (pthread_create(&r->th, NULL, reaper_main, r)) {
		free(r);
		return NULL;
	}
	z->reaper = r;
	return r;
}

static void proc_detach(struct zc_attach *z, struct zc_proc *p)
{
	struct zc_batch *b;
	struct zc_reaper *r;

	if (!p->nlinks)
		return;
	b = malloc(sizeof(*b));
	if (!b) { /* destroyed here, slowly */
		for (int i = 0; i < p->nlinks; i++)
			bpf_link__destroy(p->links[i]);
		__atomic_fetch_sub(&z->links, (uint64_t)p->nlinks, __ATOMIC_RELAXED);
		p->nlinks = 0;
		return;
	}
	b->n = p->nlinks;
	memcpy(b->links, p->links, sizeof(b->links[0]) * (size_t)p->nlinks);
	p->nlinks = 0;
	r = reaper_get(z);
	if (!r) {
		batch_destroy(b, &z->links);
		return;
	}
	pthread_mutex_lock(&r->mu);
	b->next = r->head;
	r->head = b;
	pthread_cond_signal(&r->cv);
	pthread_mutex_unlock(&r->mu);
}

/* The libc hook for p: every wrapper probed, or none (-errno). */
static int attach_libc(struct zc_attach *z, struct sampler_bpf *skel, struct zc_proc *p)
{
	char path[4096 + 64];
	int err = zc_find_libc(p->tgid, path, sizeof(path));

	if (err)
		return err;
	if (zc_nprobes() > ZC_LIBC_PROBES)
		return -E2BIG; /* ZC_LIBC_PROBES too small for zc_fns */
	for (size_t i = 0; i < ZC_NFNS; i++) {
		LIBBPF_OPTS(bpf_uprobe_opts, o, .func_name = zc_fns[i].name,
			    .bpf_cookie = zc_fns[i].nr);

		for (int r = 0; r < 1 + zc_fns[i].ret; r++) {
			struct bpf_program *prog =
			    r ? skel->progs.on_zc_uexit : skel->progs.on_zc_uenter;
			struct bpf_link *l;

			o.retprobe = r;
			l = bpf_program__attach_uprobe_opts(prog, (pid_t)p->tgid, path, 0, &o);
			if (!l) {
				err = -errno;
				proc_detach(z, p);
				if (err == -ESRCH)
					return err; /* it exited */
				log_warn("cannot probe %s in libc of pid=%u (%s) err=%s",
					 zc_fns[i].name, p->tgid, path, strerror(-err));
				z->libc_fallbacks++;
				return err;
			}
			p->links[p->nlinks++] = l;
			__atomic_fetch_add(&z->links, 1, __ATOMIC_RELAXED);
		}
	}
	return 0;
}

/* The syscall tracepoints for one more process. */
static int attach_syscalls(struct zc_attach *z, struct sampler_bpf *skel)
{
	int err;

	if (z->tp_enter) {
		z->n_syscalls++;
		return 0;
	}
	z->tp_enter = bpf_program__attach(skel->progs.on_zc_enter);
	z->tp_exit = z->tp_enter ? bpf_program__attach(skel->progs.on_zc_exit) : NULL;
	if (!z->tp_exit) {
		err = -errno;
		log_error("cannot attach the zero-code HTTP programs err=%s", strerror(-err));
		bpf_link__destroy(z->tp_enter);
		z->tp_enter = NULL;
		return err;
	}
	z->n_syscalls = 1;
	return 0;
}

static void detach_syscalls(struct zc_attach *z)
{
	if (!z->n_syscalls || --z->n_syscalls)
		return;
	/* the last one gone: the tracepoints go too (every system call pays them) */
	bpf_link__destroy(z->tp_enter);
	bpf_link__destroy(z->tp_exit);
	z->tp_enter = z->tp_exit = NULL;
}

static bool alive(uint32_t pid)
{
	char name[32];

	snprintf(name, sizeof(name), "/proc/%u", pid);
	return access(name, F_OK) == 0;
}

static struct zc_proc *find(struct zc_attach *z, uint32_t tgid)
{
	for (size_t i = 0; i < z->n; i++)
		if (z->procs[i].tgid == tgid)
			return &z->procs[i];
	return NULL;
}

int zc_attach_add(struct zc_attach *z, struct sampler_bpf *skel, uint32_t tgid)
{
	int fd = bpf_map__fd(skel->maps.zc_targets), err;
	struct tp_zc_target zt = {0};
	struct timespec t0, t1;
	struct zc_proc *p;

	if (find(z, tgid))
		return 0; /* looked at again: the same program (an exec removes it first) */
	if (z->n == TP_MAX_ZC_TARGETS) {
		log_warn("too many zero-code HTTP processes max=%d", TP_MAX_ZC_TARGETS);
		return -ENOSPC;
	}
	if (z->n == z->cap) {
		size_t cap = z->cap ? 2 * z->cap : 16;
		struct zc_proc *np = realloc(z->procs, cap * sizeof(*np));

		if (!np)
			return -ENOMEM;
		z->procs = np;
		z->cap = cap;
	}
	p = &z->procs[z->n];
	memset(p, 0, sizeof(*p));
	p->tgid = tgid;
	p->hook = TP_ZC_HOOK_LIBC;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	err = z->syscalls_only ? -ENOTSUP : attach_libc(z, skel, p);
	/*
	 * Just after an exec the loader has not mapped libc yet, or the
	 * process is still between its two programs: a few tries, 20 ms at
	 * most, before the fallback.
	 */
	for (int i = 0; i < 20 && (err == -EAGAIN || (err == -ESRCH && alive(tgid))); i++) {
		nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
		err = attach_libc(z, skel, p);
	}
	if (err == -ESRCH) {
		log_debug("zero-code HTTP pid=%u gone before its hook", tgid);
		return err; /* nothing to follow */
	}
	if (err) {
		p->hook = TP_ZC_HOOK_SYSCALLS;
		err = attach_syscalls(z, skel);
		if (err)
			return err;
	}
	/*
	 * A new capture epoch, so that a thread's request state from an
	 * earlier capture of this pid is stale; but an entry the fork program
	 * copied from the parent keeps its epoch: the child's threads may be
	 * inside requests already.
	 */
	if (bpf_map_lookup_elem(fd, &tgid, &zt) || !zt.epoch) {
		if (++z->epoch == 0) /* 0: a thread state never set */
			z->epoch = 1;
		zt.epoch = z->epoch;
	}
	zt.hook = p->hook;
	memset(zt.pad, 0, sizeof(zt.pad));
	if (bpf_map_update_elem(fd, &tgid, &zt, BPF_ANY)) {
		err = -errno;
		if (p->hook == TP_ZC_HOOK_SYSCALLS)
			detach_syscalls(z);
		proc_detach(z, p);
		return err;
	}
	z->n++;
	z->attaches++;
	skel->bss->zc_on = 1;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	log_debug("zero-code HTTP pid=%u hook=%s attach_us=%ld", tgid,
		  p->hook == TP_ZC_HOOK_LIBC ? "libc" : "syscalls",
		  (long)((t1.tv_sec - t0.tv_sec) * 1000000 + (t1.tv_nsec - t0.tv_nsec) / 1000));
	return 0;
}

void zc_attach_remove(struct zc_attach *z, struct sampler_bpf *skel, uint32_t tgid)
{
	struct zc_proc *p = find(z, tgid);

	if (!p)
		return;
	bpf_map_delete_elem(bpf_map__fd(skel->maps.zc_targets), &tgid);
	if (p->hook == TP_ZC_HOOK_SYSCALLS)
		detach_syscalls(z);
	proc_detach(z, p);
	*p = z->procs[--z->n];
	if (!z->n)
		skel->bss->zc_on = 0;
}

void zc_attach_free(struct zc_attach *z)
{
	struct zc_reaper *r;

	for (size_t i = 0; i < z->n; i++)
		proc_detach(z, &z->procs[i]);
	free(z->procs);
	r = z->reaper;
	if (r) { /* it destroys what is queued, then ends */
		pthread_mutex_lock(&r->mu);
		r->stop = true;
		pthread_cond_signal(&r->cv);
		pthread_mutex_unlock(&r->mu);
		pthread_join(r->th, NULL);
		pthread_mutex_destroy(&r->mu);
		pthread_cond_destroy(&r->cv);
		free(r);
	}
	bpf_link__destroy(z->tp_enter);
	bpf_link__destroy(z->tp_exit);
	memset(z, 0, sizeof(*z));
}

size_t zc_attach_libc(const struct zc_attach *z)
{
	return z->n - z->n_syscalls;
}
