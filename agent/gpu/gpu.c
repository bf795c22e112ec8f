/*
 * gpu.c - the processes with libtraceprof-cuda, their rings, the tick
 * (gpu.h; the join: gpu_join.c).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "gpu_internal.h"
#include "procmem.h"
#include "sampler.h"
#include "symbolize.h"
#include "traceprof/log.h"

#define RING_TRY_MIN_US 20000	/* the first look again for a ring: 20 ms, doubling... */
#define RING_TRY_MAX_US 2000000 /* ...up to every 2 s while the library is mapped */
#define LIB_PREFIX	"libtraceprof-cuda"

static int64_t mono_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

struct gpu *gpu_new(const struct gpu_opts *o)
{
	struct gpu *g = calloc(1, sizeof(*g));

	if (!g) {
		errno = ENOMEM;
		return NULL;
	}
	g->o = *o;
	return g;
}

static void close_ring(struct gpu *g, struct gpu_proc *p)
{
	if (p->ring.fd < 0)
		return;
	gpu_ring_counters(&p->ring);
	for (int i = 0; i < 5; i++)
		g->closed_prod[i] += p->ring.prod[i];
	memset(p->ring.prod, 0, sizeof(p->ring.prod));
	gpu_ring_close(&p->ring);
	g->st.rings_closed++;
}

void gpu_free(struct gpu *g)
{
	if (!g)
		return;
	for (int i = 0; i < g->nprocs; i++)
		if (g->procs[i].pid)
			close_ring(g, &g->procs[i]);
	gpu_join_free(g);
	free(g);
}

static struct gpu_proc *find_proc(struct gpu *g, int pid)
{
	for (int i = 0; i < g->nprocs; i++)
		if (g->procs[i].pid == pid)
			return &g->procs[i];
	return NULL;
}

static struct gpu_proc *add_proc(struct gpu *g, int pid)
{
	struct gpu_proc *p = find_proc(g, pid);

	if (p)
		return p;
	for (int i = 0; i < g->nprocs && !p; i++)
		if (!g->procs[i].pid)
			p = &g->procs[i];
	if (!p && g->nprocs < GPU_MAX_PROCS)
		p = &g->procs[g->nprocs++];
	if (!p) {
		g->st.procs_full++;
		return NULL;
	}
	memset(p, 0, sizeof(*p));
	p->pid = pid;
	p->ring.fd = -1;
	return p;
}

/* Whether a mapping is the first of a libtraceprof-cuda file. */
static bool is_lib(const struct procmem_map *m)
{
	const char *b = strrchr(m->path, '/');

	b = b ? b + 1 : m->path;
	return m->offset == 0 && procmem_map_is_file(m) &&
	       !strncmp(b, LIB_PREFIX, strlen(LIB_PREFIX));
}

/*
 * The marker's uprobe on the library file of mapping m of pid: through the
 * process's root (its mount namespace), or map_files when that path names
 * another file now.
 */
static void probe_lib(struct gpu *g, int pid, const struct procmem_map *m)
{
	char path[PROCMEM_PATH_MAX + 64];
	struct stat sb;
	int rc;

	if (sampler_gpu_probe_known(g->o.sampler, m->dev, m->inode))
		return;
	g->st.probe_files++;
	snprintf(path, sizeof(path), "/proc/%d/root%s", pid, m->path);
	if (m->deleted || stat(path, &sb) != 0 || sb.st_ino != m->inode || sb.st_dev != m->dev)
		snprintf(path, sizeof(path), "/proc/%d/map_files/%" PRIx64 "-%" PRIx64, pid,
			 m->start, m->end);
	rc = sampler_attach_gpu_probe(g->o.sampler, path, m->dev, m->inode);
	if (rc == 0)
		log_info("GPU launches of %s followed (pid=%d)", m->path, pid);
	else if (rc != -ENOENT) {
		g->st.probe_failed++;
		log_warn("cannot attach the GPU launch uprobe to %s (pid=%d): %s", m->path, pid,
			 strerror(-rc));
	}
}

static void try_ring(struct gpu *g, struct gpu_proc *p, int64_t now)
{
	int rc;

	if (p->ring.fd >= 0)
		return;
	rc = gpu_ring_open(&p->ring, p->pid, &g->st.ring);
	if (rc == 0)
		return;
	p->ring.fd = -1;
	if (rc == -EPROTO) { /* refused: again only when its mappings change */
		p->next_try_us = INT64_MAX;
		return;
	}
	p->step_us = p->step_us ? p->step_us * 2 : RING_TRY_MIN_US;
	if (p->step_us > RING_TRY_MAX_US)
		p->step_us = RING_TRY_MAX_US;
	p->next_try_us = now + p->step_us;
}

bool gpu_note_process(struct gpu *g, int pid, uint64_t source_id)
{
	struct procmem_maps pm;
	struct gpu_proc *p = NULL;
	bool known = true;

	if (!g || procmem_maps_read(pid, &pm) != 0)
		return false;
	for (size_t i = 0; i < pm.n; i++) {
		if (!is_lib(&pm.maps[i]))
			continue;
		probe_lib(g, pid, &pm.maps[i]);
		if (!p && gpu_join_init(g) == 0) {
			known = find_proc(g, pid) != NULL;
			p = add_proc(g, pid);
		}
	}
	procmem_maps_free(&pm);
	if (!p)
		return false;
	if (!known) {
		/*
		 * The symbolizer's snapshot of its mappings may be older than the
		 * library and the runtime that loaded it (a look at its exec): a
		 * new one, so its launch stacks resolve from the first.
		 */
		sym_forget_process(*g->o.sym, pid);
		sym_note_process(*g->o.sym, pid);
	}
	p->source_id = source_id;
	p->step_us = 0;
	try_ring(g, p, mono_us());
	return true;
}

/* Reads ring r's records into the join; false when it cannot be read any more. */
static bool drain(struct gpu *g, struct gpu_proc *p, int64_t now_mono, int64_t now_us)
{
	for (int k = 0; k < GPU_DRAIN_BATCH / GPU_DRAIN_CHUNK; k++) {
		uint64_t t0 = p->ring.tail;
		int n = gpu_ring_drain(&p->ring, g->krecs, GPU_DRAIN_CHUNK, &g->st.ring);

		if (n < 0)
			return false;
		for (int i = 0; i < n; i++)
			gpu_add_record(g, p->pid, p->source_id, &g->krecs[i], now_mono, now_us);
		if (p->ring.tail - t0 != GPU_DRAIN_CHUNK)
			break; /* the ring is empty (or was resynchronized) */
	}
	return gpu_ring_counters(&p->ring) == 0;
}

void gpu_forget_process(struct gpu *g, int pid, int64_t now_us)
{
	struct gpu_proc *p = g ? find_proc(g, pid) : NULL;

	if (!p)
		return;
	if (p->ring.fd >= 0)
		drain(g, p, mono_us(), now_us);
	close_ring(g, p);
	p->pid = 0;
}

void gpu_on_launch(struct gpu *g, const struct tp_sample *s, size_t len, uint64_t source_id,
		   const uint8_t trace[16], uint64_t span, int64_t t_us)
{
	struct gpu_launch l = {0};
	struct gpu_proc *p;

	(void)t_us;
	if (!g || s->user_n > TP_MAX_FRAMES || len < TP_GPU_BYTES(s->user_n) ||
	    gpu_join_init(g) != 0)
		return;
	g->st.launches++;
	p = find_proc(g, (int)s->pid);
	if (!p) {
		/*
		 * Its library came after the agent's last look (a dlopen whose
		 * maps record was not sent, or a look that failed): a look now,
		 * again every GPU_MISS_RETRY_US while it launches and for
		 * GPU_MISS_KEEP_US after its last launch (gpu_tick), so that its
		 * ring is read even when its launches stopped.
		 */
		g->miss_last_us = mono_us();
		g->miss_source = source_id;
		if (g->miss_pid != (int)s->pid ||
		    g->miss_last_us - g->miss_us >= GPU_MISS_RETRY_US) {
			g->miss_pid = (int)s->pid;
			g->miss_us = g->miss_last_us;
			if (gpu_note_process(g, (int)s->pid, source_id))
				g->miss_pid = 0;
		}
	} else if (p && p->ring.fd < 0 && mono_us() >= p->next_try_us) {
		try_ring(g, p, mono_us());
	}
	l.key = (uint64_t)s->pid << 32 | s->off_us;
	l.stack_id = gpu_launch_stack(g, s);
	l.source_id = source_id;
	l.span_id = span;
	memcpy(l.trace_id, trace, 16);
	l.t_us = mono_us();
	gpu_add_launch(g, &l);
}

void gpu_tick(struct gpu *g, int64_t now_us, int64_t now_mono)
{
	if (!g || !g->launches)
		return;
	if (g->miss_pid && now_mono - g->miss_us >= GPU_MISS_RETRY_US) {
		int pid = g->miss_pid;

		g->miss_us = now_mono;
		if (gpu_note_process(g, pid, g->miss_source) ||
		    now_mono - g->miss_last_us > GPU_MISS_KEEP_US)
			g->miss_pid = 0; /* found, or given up on */
	}
	for (int i = 0; i < g->nprocs; i++) {
		struct gpu_proc *p = &g->procs[i];

		if (!p->pid)
			continue;
		if (p->ring.fd < 0) {
			if (now_mono >= p->next_try_us)
				try_ring(g, p, now_mono);
			continue;
		}
		if (!drain(g, p, now_mono, now_us)) {
			log_info("GPU ring of pid=%d unreadable: closed", p->pid);
			close_ring(g, p);
			p->next_try_us = now_mono + RING_TRY_MAX_US;
		}
	}
	gpu_join_tick(g, now_mono, now_us);
}

bool gpu_active(const struct gpu *g)
{
	if (!g)
		return false;
	for (int i = 0; i < g->nprocs; i++)
		if (g->procs[i].pid)
			return true;
	return g->l_n || g->p_n;
}

void gpu_get_stats(const struct gpu *g, struct gpu_stats *out)
{
	uint64_t prod[5];

	memset(out, 0, sizeof(*out));
	if (!g)
		return;
	*out = g->st;
	memcpy(prod, g->closed_prod, sizeof(prod));
	for (int i = 0; i < g->nprocs; i++)
		if (g->procs[i].pid && g->procs[i].ring.fd >= 0)
			for (int k = 0; k < 5; k++)
				prod[k] += g->procs[i].ring.prod[k];
	out->prod_launches = prod[0];
	out->prod_records = prod[1];
	out->prod_dropped_full = prod[2];
	out->prod_names_lost = prod[3];
	out->prod_cupti_dropped = prod[4];
}
