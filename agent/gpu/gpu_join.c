/*
 * gpu_join.c - launches joined with their kernels' records (gpu.h).
 *
 * Launches are kept in arrival order in a FIFO (one preallocated array)
 * with an open-addressing index on (pid, correlation id): linear probing,
 * removal by backward shift, so the index never holds tombstones. The
 * expiry pops the FIFO's head: a joined launch GPU_MATCHED_KEEP_US after
 * its last record, one never joined after GPU_LAUNCH_EXPIRE_US. A full
 * FIFO pops its head early (counted when it had no record yet). Kernel
 * records that came before their launch wait in a second array, retried
 * at each tick. Nothing here allocates after gpu_join_init.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aggregate.h"
#include "gpu_internal.h"
#include "symbolize.h"
#include "traceprof/ids.h"

#define INDEX_SLOTS (2 * GPU_MAX_LAUNCHES)
#define MAX_INLINE  8

int gpu_join_init(struct gpu *g)
{
	if (g->launches)
		return 0;
	g->launches = calloc(GPU_MAX_LAUNCHES, sizeof(*g->launches));
	g->index = calloc(INDEX_SLOTS, sizeof(*g->index));
	g->pending = calloc(GPU_MAX_PENDING, sizeof(*g->pending));
	g->stacks = calloc(GPU_STACK_CACHE, sizeof(*g->stacks));
	g->full = calloc(GPU_FULL_CACHE, sizeof(*g->full));
	g->krecs = calloc(GPU_DRAIN_CHUNK, sizeof(*g->krecs));
	if (!g->launches || !g->index || !g->pending || !g->stacks || !g->full || !g->krecs) {
		gpu_join_free(g);
		return -ENOMEM;
	}
	return 0;
}

void gpu_join_free(struct gpu *g)
{
	free(g->launches);
	free(g->index);
	free(g->pending);
	free(g->stacks);
	free(g->full);
	free(g->krecs);
	g->launches = NULL;
	g->index = NULL;
	g->pending = NULL;
	g->stacks = NULL;
	g->full = NULL;
	g->krecs = NULL;
}

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	return x ^ (x >> 33);
}

/* ---- the launch index ---- */

static struct gpu_launch *find(struct gpu *g, uint64_t key)
{
	for (uint32_t i = mix(key) & (INDEX_SLOTS - 1); g->index[i];
	     i = (i + 1) & (INDEX_SLOTS - 1))
		if (g->launches[g->index[i] - 1].key == key)
			return &g->launches[g->index[i] - 1];
	return NULL;
}

/* Removes FIFO position pos from the index (backward shift). */
static void unindex(struct gpu *g, uint32_t pos)
{
	struct gpu_launch *l = &g->launches[pos];
	uint32_t i = mix(l->key) & (INDEX_SLOTS - 1), j;

	if (!l->live)
		return;
	l->live = 0;
	while (g->index[i] && g->index[i] != pos + 1)
		i = (i + 1) & (INDEX_SLOTS - 1);
	if (!g->index[i])
		return;
	g->index[i] = 0;
	for (j = (i + 1) & (INDEX_SLOTS - 1); g->index[j]; j = (j + 1) & (INDEX_SLOTS - 1)) {
		uint32_t home = mix(g->launches[g->index[j] - 1].key) & (INDEX_SLOTS - 1);

		/* the entry at j may move to i when its home is not in (i, j] */
		if ((j > i && (home <= i || home > j)) || (j < i && home <= i && home > j)) {
			g->index[i] = g->index[j];
			g->index[j] = 0;
			i = j;
		}
	}
}

/* Pops the FIFO's head; counts a launch that never had a record when early. */
static void pop_head(struct gpu *g, bool early)
{
	struct gpu_launch *l = &g->launches[g->l_head];

	if (l->live && !l->joined)
		g->st.launches_unmatched += !early, g->st.launches_evicted += early;
	unindex(g, g->l_head);
	g->l_head = (g->l_head + 1) & (GPU_MAX_LAUNCHES - 1);
	g->l_n--;
}

void gpu_add_launch(struct gpu *g, const struct gpu_launch *l)
{
	uint32_t pos, i;

	if (find(g, l->key)) {
		g->st.launches_dup++;
		return;
	}
	if (g->l_n == GPU_MAX_LAUNCHES)
		pop_head(g, true);
	pos = (g->l_head + g->l_n) & (GPU_MAX_LAUNCHES - 1);
	g->launches[pos] = *l;
	g->launches[pos].live = 1;
	g->added++;
	g->l_n++;
	for (i = mix(l->key) & (INDEX_SLOTS - 1); g->index[i]; i = (i + 1) & (INDEX_SLOTS - 1))
		;
	g->index[i] = pos + 1;
}

/* ---- stacks ---- */

/* Whether a frame's module is one of the CUDA layers under the application's launch call. */
static bool cuda_layer(const char *module)
{
	const char *b = module ? strrchr(module, '/') : NULL;

	b = b ? b + 1 : module;
	return b && (!strncmp(b, "libtraceprof-cuda", 17) || !strncmp(b, "libcupti", 8) ||
		     !strncmp(b, "libcuda.so", 10));
}

static void add_frame(struct gpu *g, const struct sym_frame *f, size_t *n)
{
	uint64_t fn, fr;

	if (*n >= GPU_MAX_FRAMES)
		return;
	fn = ids_function(f->module, f->function);
	fr = ids_frame(fn, f->build_id, f->file, f->line, f->address);
	agg_add_function(g->o.agg, fn, f->function, f->module, f->kind);
	agg_add_frame(g->o.agg, fr, fn, f->build_id, f->file, f->line, f->address);
	g->frame_ids[(*n)++] = fr;
}

static void check_evictions(struct gpu *g)
{
	if (agg_dict_evictions(g->o.agg) == g->evictions)
		return;
	g->evictions = agg_dict_evictions(g->o.agg);
	memset(g->stacks, 0, GPU_STACK_CACHE * sizeof(*g->stacks));
	memset(g->full, 0, GPU_FULL_CACHE * sizeof(*g->full));
}

/* Symbolizes the launch's user frames, root first, without the CUDA layers at the leaf. */
static uint64_t symbolize_launch(struct gpu *g, const struct tp_sample *s)
{
	struct sym_frame frames[MAX_INLINE];
	size_t n = 0, keep = 0;

	for (int i = (int)s->user_n - 1; i >= 0; i--) {
		uint64_t ip = s->ips[i] - (i > 0 ? 1 : 0);
		int k = sym_user(*g->o.sym, (int)s->pid, ip, frames, MAX_INLINE);

		for (int f = 0; f < k; f++) {
			add_frame(g, &frames[f], &n);
			if (!cuda_layer(frames[f].module))
				keep = n;
		}
	}
	g->st.stack_frames_dropped += n - keep;
	if (!keep)
		return 0;
	return agg_add_stack(g->o.agg, ids_stack(g->frame_ids, keep), g->frame_ids, keep) == 0
		   ? ids_stack(g->frame_ids, keep)
		   : 0;
}

uint64_t gpu_launch_stack(struct gpu *g, const struct tp_sample *s)
{
	/* the symbolizer's generation: the process's mappings re-read, JIT code named */
	uint64_t names = sym_names_gen(*g->o.sym, (int)s->pid);
	uint64_t key = ids_hash_bytes(0x6770750000000000ull ^ ((uint64_t)s->pid << 8) ^ s->user_n ^
					  (names << 32),
				      s->ips, (size_t)s->user_n * sizeof(uint64_t)) |
		       1;
	struct stack_ent *e;

	check_evictions(g);
	e = &g->stacks[key & (GPU_STACK_CACHE - 1)];
	if (e->key == key)
		return e->id;
	e->id = symbolize_launch(g, s);
	e->key = e->id ? key : 0;
	return e->id;
}

/* The kernel's frame "[gpu] NAME" in module "[gpu]", registered; its id. */
static uint64_t kernel_frame(struct gpu *g, const char *name)
{
	char fname[GPU_NAME_MAX + 32];
	uint64_t fn, fr;

	snprintf(fname, sizeof(fname), "[gpu] %s", name[0] ? name : "[unknown kernel]");
	fn = ids_function("[gpu]", fname);
	fr = ids_frame(fn, "", NULL, 0, 0);
	agg_add_function(g->o.agg, fn, fname, "[gpu]", SYM_KIND_USER);
	agg_add_frame(g->o.agg, fr, fn, "", NULL, 0, 0);
	return fr;
}

/* The stack of launch stack base (0: none) with the kernel's frame at the leaf. */
static uint64_t full_stack(struct gpu *g, uint64_t base, uint64_t frame)
{
	uint64_t key = mix(base ^ mix(frame)) | 1, id;
	const uint64_t *f = NULL;
	uint32_t n = 0;
	struct stack_ent *e;

	check_evictions(g);
	e = &g->full[key & (GPU_FULL_CACHE - 1)];
	if (e->key == key)
		return e->id;
	if (base)
		f = agg_stack_frames(g->o.agg, base, &n);
	if (n > GPU_MAX_FRAMES - 1)
		n = GPU_MAX_FRAMES - 1;
	if (n)
		memcpy(g->frame_ids, f, n * sizeof(uint64_t));
	g->frame_ids[n++] = frame;
	id = ids_stack(g->frame_ids, n);
	e->key = agg_add_stack(g->o.agg, id, g->frame_ids, n) == 0 ? key : 0;
	e->id = id;
	return id;
}

/* ---- the join ---- */

static void store(struct gpu *g, const struct gpu_launch *l, uint64_t source, uint64_t frame,
		  uint64_t ns, int64_t now_us)
{
	struct agg_gpu a = {.time_us = now_us, .launches = 1, .gpu_ns = ns};

	a.source_id = l ? l->source_id : source;
	if (l) {
		memcpy(a.trace_id, l->trace_id, 16);
		a.span_id = l->span_id;
	}
	a.stack_id = full_stack(g, l ? l->stack_id : 0, frame);
	if (agg_add_gpu(g->o.agg, &a) < 0) {
		g->st.records_refused++;
		return;
	}
	g->st.records_stored++;
	g->st.gpu_ns += ns;
}

static void join(struct gpu *g, struct gpu_launch *l, uint64_t frame, uint64_t ns, int64_t now_mono,
		 int64_t now_us)
{
	if (!l->joined)
		g->st.launches_joined++;
	l->joined++;
	l->last_us = now_mono;
	g->st.records_joined++;
	store(g, l, 0, frame, ns, now_us);
}

void gpu_add_record(struct gpu *g, int pid, uint64_t source_id, const struct gpu_krec *k,
		    int64_t now_mono, int64_t now_us)
{
	uint64_t key = (uint64_t)(uint32_t)pid << 32 | k->correlation_id, frame, ns;
	struct gpu_launch *l;

	g->st.records++;
	if (k->end_ns < k->start_ns || k->end_ns - k->start_ns > GPU_MAX_NS) {
		g->st.records_bad_time++;
		return;
	}
	ns = k->end_ns - k->start_ns;
	frame = kernel_frame(g, k->name);
	l = find(g, key);
	if (l) {
		join(g, l, frame, ns, now_mono, now_us);
		return;
	}
	if (g->p_n == GPU_MAX_PENDING) {
		g->st.records_pending_full++;
		return;
	}
	g->pending[g->p_n++] = (struct gpu_pending){
	    .key = key, .source_id = source_id, .frame_id = frame, .ns = ns, .t_us = now_mono};
}

void gpu_join_tick(struct gpu *g, int64_t now_mono, int64_t now_us)
{
	/* no launch came since the last pass: only the oldest can change (expire) */
	bool lookup = g->added != g->added_seen;
	uint32_t kept = 0;

	g->added_seen = g->added;
	for (uint32_t i = 0; i < g->p_n; i++) {
		struct gpu_pending *p = &g->pending[i];
		struct gpu_launch *l = NULL;

		if (!lookup && now_mono - p->t_us < GPU_PENDING_US) {
			/* in arrival order: the rest are younger still */
			memmove(&g->pending[kept], p, (g->p_n - i) * sizeof(*p));
			kept += g->p_n - i;
			break;
		}
		l = lookup ? find(g, p->key) : NULL;
		if (l) {
			join(g, l, p->frame_id, p->ns, now_mono, now_us);
		} else if (now_mono - p->t_us >= GPU_PENDING_US) {
			g->st.records_unmatched++;
			if (p->source_id)
				store(g, NULL, p->source_id, p->frame_id, p->ns, now_us);
			else
				g->st.records_refused++;
		} else {
			g->pending[kept++] = *p;
		}
	}
	g->p_n = kept;
	while (g->l_n) {
		const struct gpu_launch *h = &g->launches[g->l_head];

		if (h->live && (h->joined ? now_mono - h->last_us < GPU_MATCHED_KEEP_US
					  : now_mono - h->t_us < GPU_LAUNCH_EXPIRE_US))
			break;
		pop_head(g, false);
	}
}
