/*
 * symbolize.c - the lookup path: address cache, user and kernel frames.
 *
 * Workload: stacks of 10-50 frames at 19-99 Hz on every CPU, where a few
 * thousand distinct addresses make up nearly all samples. So the first
 * step is a direct-mapped cache keyed by (pid, snapshot generation, ip)
 * holding the finished frames: a hit is one hash, one compare and a copy.
 * A miss finds the mapping (binary search), turns the file offset into an
 * ELF virtual address, and looks up the symbol table and DWARF of the
 * file (symcache.c), then fills the slot.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "traceprof/log.h"
#include "symbolize_internal.h"

#define MAX_CHAIN 33 /* frames of one address: the function + 32 inlined */
#define KALLSYMS_RELOAD_MS                                                                         \
	10000 /* kernel modules load rarely: reload kallsyms at most so often                      \
	       */
#define DEFAULT_MAX_ELF_BYTES	((size_t)256 << 20)
#define DEFAULT_CACHE_ENTRIES	16384
#define DEFAULT_REFRESH_MS	1000
#define DEFAULT_IDLE_MS		60000
#define DEFAULT_PERFMAP_ENTRIES 262144
#define DEFAULT_PERFMAP_BYTES	((size_t)32 << 20)
#define DEFAULT_PERFMAP_TOTAL	((size_t)128 << 20)
#define PERFMAP_PASS_BYTES	((size_t)8 << 20) /* of a perf map parsed per look */
#define PERFMAP_MODULE		"[perf-map]"	  /* module of frames named from one */

struct symbolizer *sym_new(const struct sym_opts *opts)
{
	struct symbolizer *sym = calloc(1, sizeof(*sym));
	size_t entries = DEFAULT_CACHE_ENTRIES;

	if (!sym)
		return NULL;
	if (opts)
		sym->opts = *opts;
	if (!sym->opts.max_elf_bytes)
		sym->opts.max_elf_bytes = DEFAULT_MAX_ELF_BYTES;
	if (sym->opts.addr_cache_entries) {
		entries = 2; /* one set of two ways at least */
		while (entries < sym->opts.addr_cache_entries && entries < ((size_t)1 << 30))
			entries <<= 1;
	}
	sym->opts.addr_cache_entries = entries;
	if (!sym->opts.refresh_ms)
		sym->opts.refresh_ms = DEFAULT_REFRESH_MS;
	if (sym->opts.idle_ms == 0)
		sym->opts.idle_ms = DEFAULT_IDLE_MS;
	sym->pm_limits.max_entries =
	    opts && opts->perfmap_max_entries ? opts->perfmap_max_entries : DEFAULT_PERFMAP_ENTRIES;
	sym->pm_limits.max_bytes =
	    opts && opts->perfmap_max_bytes ? opts->perfmap_max_bytes : DEFAULT_PERFMAP_BYTES;
	sym->pm_limits.total_bytes =
	    opts && opts->perfmap_total_bytes ? opts->perfmap_total_bytes : DEFAULT_PERFMAP_TOTAL;
	sym->pm_limits.pass_bytes = PERFMAP_PASS_BYTES;
	sym->cache = calloc(entries, sizeof(*sym->cache));
	if (!sym->cache) {
		free(sym);
		errno = ENOMEM;
		return NULL;
	}
	sym->cache_mask = entries - 1;
	sym->cache_shift = 64;
	for (size_t e = entries; e > 1; e >>= 1)
		sym->cache_shift--;
	sym->last_gc_ms = sym_now_ms();
	return sym;
}

void sym_free(struct symbolizer *sym)
{
	if (!sym)
		return;
	for (size_t b = 0; b < SYM_PROC_BUCKETS; b++) {
		while (sym->procs[b])
			sym_proc_drop(sym, sym->procs[b]);
	}
	sym_elfs_free(sym);
	for (size_t i = 0; i <= sym->cache_mask; i++)
		free(sym->cache[i].frames);
	free(sym->cache);
	kallsyms_free(sym->ks);
	sym_intern_free(sym);
	free(sym);
}

/* ---- address cache ---- */

/*
 * The cache is 2-way set associative: a key may sit in either entry of its
 * set, the most recently used first. Direct mapping lost a quarter of the
 * lookups to collisions at a quarter load; two ways lose a few percent.
 */
static struct sym_addr_entry *cache_set(struct symbolizer *sym, const struct sym_addr_key *k)
{
	uint64_t h =
	    (k->addr ^ (k->owner * 0xff51afd7ed558ccdULL) ^ (uint64_t)(uintptr_t)k->module) *
	    0x9e3779b97f4a7c15ULL;

	/* the top bits of a multiplicative hash are the well mixed ones */
	return &sym->cache[(h >> sym->cache_shift) & sym->cache_mask & ~(size_t)1];
}

static bool entry_is(const struct sym_addr_entry *s, const struct sym_addr_key *k)
{
	return s->frames && s->key.addr == k->addr && s->key.owner == k->owner &&
	       s->key.module == k->module;
}

static int cache_get(struct symbolizer *sym, const struct sym_addr_key *k, struct sym_frame *out,
		     int max)
{
	struct sym_addr_entry *set = cache_set(sym, k), tmp;
	int n;

	if (!entry_is(&set[0], k)) {
		if (!entry_is(&set[1], k))
			return 0;
		tmp = set[0];
		set[0] = set[1];
		set[1] = tmp;
	}
	n = (int)set[0].n < max ? (int)set[0].n : max;
	memcpy(out, set[0].frames, (size_t)n * sizeof(*out));
	sym->stats.cache_hits++;
	return n;
}

static void cache_put(struct symbolizer *sym, const struct sym_addr_key *k,
		      const struct sym_frame *frames, int n)
{
	struct sym_addr_entry *set = cache_set(sym, k), old = set[1];
	struct sym_frame *copy;

	/* the least recently used way goes; its allocation is reused when it fits */
	if (old.frames && old.n == (uint32_t)n) {
		copy = old.frames;
	} else {
		copy = malloc((size_t)n * sizeof(*copy));
		if (!copy)
			return; /* uncached: resolved again next time */
		free(old.frames);
	}
	memcpy(copy, frames, (size_t)n * sizeof(*copy));
	set[1] = set[0];
	set[0].frames = copy;
	set[0].n = (uint32_t)n;
	set[0].key = *k;
}

static void process_key(struct sym_addr_key *k, int pid, uint32_t gen, uint64_t ip)
{
	k->owner = ((uint64_t)((uint32_t)pid & 0x7fffffffu) << 32) | gen; /* bit 63 clear */
	k->addr = ip;
	k->module = NULL;
}

/* ---- user frames ---- */

static void set_frame(struct sym_frame *f, const char *function, const char *module,
		      const char *build_id, uint64_t address, int kind)
{
	f->function = function;
	f->module = module;
	f->build_id = build_id;
	f->file = NULL;
	f->line = 0;
	f->address = address;
	f->kind = kind;
}

/* "module+0xoffset", interned. */
static const char *offset_name(struct symbolizer *sym, const char *module, uint64_t off)
{
	char buf[512];

	snprintf(buf, sizeof(buf), "%s+0x%" PRIx64, module, off);
	return sym_intern_str(sym, buf, "[unknown]");
}

/* module: the name of the file as this process maps it (builds may be shared by copies). */
static int resolve_elf(struct symbolizer *sym, struct sym_elf *e, const char *module,
		       uint64_t vaddr, struct sym_frame *out)
{
	struct elfsyms_line chain[MAX_CHAIN];
	const char *name = NULL;
	uint64_t start;
	int n = 0;

	if (sym_elf_ensure(sym, e)) {
		name = elfsyms_lookup(e->syms, vaddr, &start);
		if (elfsyms_has_lines(e->syms))
			n = elfsyms_lines(e->syms, vaddr, chain, MAX_CHAIN);
	}
	if (!name && (n == 0 || !chain[0].function)) {
		set_frame(out, offset_name(sym, module, vaddr), module, e->build_id, vaddr,
			  SYM_KIND_UNKNOWN);
		return 1;
	}
	if (n == 0) {
		set_frame(out, sym_intern_str(sym, name, "[unknown]"), module, e->build_id, vaddr,
			  SYM_KIND_USER);
		return 1;
	}
	for (int k = 0; k < n; k++) {
		/* the root keeps the symbol table's name; inlined ones have only DWARF's */
		const char *fn = k == 0 && name ? name : chain[k].function;

		set_frame(&out[k], sym_intern_str(sym, fn, "[inlined]"), module, e->build_id, vaddr,
			  SYM_KIND_USER);
		out[k].file = chain[k].file ? sym_intern_str(sym, chain[k].file, NULL) : NULL;
		out[k].line = chain[k].line;
	}
	return n;
}

/* The mapping holding ip, or NULL. */
static const struct sym_map *find_map(const struct sym_proc *p, uint64_t ip)
{
	size_t lo = 0, hi = p ? p->nmaps : 0;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (ip < p->maps[mid].start)
			hi = mid;
		else if (ip >= p->maps[mid].end)
			lo = mid + 1;
		else
			return &p->maps[mid];
	}
	return NULL;
}

/* The ELF address of ip in mapping m of an ELF file. */
static uint64_t elf_vaddr(const struct sym_map *m, uint64_t ip)
{
	uint64_t off = ip - m->start + m->offset, vaddr;

	return elfsyms_vaddr(&m->elf->hdr, off, &vaddr) ? vaddr : off;
}

/* The cache key of ip in process p (NULL: not known). */
static void user_key(struct sym_addr_key *k, const struct sym_proc *p, int pid, uint64_t ip)
{
	const struct sym_map *m = find_map(p, ip);

	if (m && m->type == SYM_MAP_ELF) {
		k->owner = SYM_KEY_ELF | m->elf->serial;
		k->addr = elf_vaddr(m, ip);
		k->module = m->module;
	} else {
		process_key(k, pid, p ? p->gen : 0, ip);
	}
}

/* ---- JIT code: perf maps ---- */

/* Whether the perf map may be looked at again (at most once per refresh_ms). */
static bool perfmap_due(const struct symbolizer *sym, const struct sym_proc *p, uint64_t now)
{
	return p->perfmap_polled_ms == 0 || sym->opts.refresh_ms < 0 ||
	       now - p->perfmap_polled_ms >= (uint64_t)sym->opts.refresh_ms;
}

void sym_perfmap_poll(struct symbolizer *sym, struct sym_proc *p, uint64_t now)
{
	int fd, r;

	p->perfmap_polled_ms = now ? now : 1;
	if (!sym_proc_alive(p))
		return; /* gone, or the pid is another process's now: keep what was read */
	fd = perfmap_open(p->pid, &p->nspid, &p->uid, &sym->pm_stats);
	if (fd < 0)
		return; /* none (yet): Java writes it on request */
	if (!p->perfmap) {
		p->perfmap = perfmap_new();
		if (!p->perfmap) {
			close(fd);
			return;
		}
		sym->stats.perfmap_processes++;
	}
	r = perfmap_update(p->perfmap, fd, &sym->pm_limits, &sym->pm_stats);
	close(fd);
	if (r < 0) {
		log_debug("cannot read perf map pid=%d err=%d", p->pid, r);
		return;
	}
	/* answers cached under the old generation may be stale: start a new one */
	if ((r & PERFMAP_REPLACED) || ((r & PERFMAP_ADDED) && p->perfmap_pending)) {
		p->gen = ++sym->next_gen;
		p->perfmap_pending = false;
	}
}

/* ip in JIT code m of p, named from the perf map: 1 frame written, or 0. */
static int resolve_jit(struct symbolizer *sym, struct sym_proc *p, const struct sym_map *m,
		       uint64_t ip, struct sym_frame *out)
{
	const char *name;
	uint64_t now;

	if (!p || !m->jit || sym->opts.no_perf_maps)
		return 0;
	name = perfmap_lookup(p->perfmap, ip, NULL);
	if (!name && perfmap_due(sym, p, now = sym_now_ms())) {
		sym_perfmap_poll(sym, p, now);
		name = perfmap_lookup(p->perfmap, ip, NULL);
	}
	if (!name) {
		p->perfmap_pending = true; /* sym_names_gen looks again */
		return 0;
	}
	/* one frame per function: JIT addresses mean nothing across processes or runs */
	set_frame(out, sym_intern_str(sym, name, "[perf-map]"), PERFMAP_MODULE, "", 0,
		  SYM_KIND_USER);
	sym->stats.perfmap_frames++;
	return 1;
}

uint32_t sym_names_gen(struct symbolizer *sym, int pid)
{
	struct sym_proc *p = sym ? sym_proc_find(sym, pid) : NULL;
	uint64_t now;

	if (!p)
		return 0;
	if (p->perfmap_pending && perfmap_due(sym, p, now = sym_now_ms()))
		sym_perfmap_poll(sym, p, now);
	if (p->maps_pending && sym->opts.refresh_ms >= 0 &&
	    (now = sym_now_ms()) - p->last_refresh_ms >= (uint64_t)sym->opts.refresh_ms &&
	    sym_proc_alive(p)) {
		p->maps_pending = false;
		sym_proc_refresh(sym, p); /* a new generation: stacks are symbolized again */
	}
	return p->gen;
}

static int resolve_user(struct symbolizer *sym, struct sym_proc *p, uint64_t ip,
			struct sym_frame *out)
{
	const struct sym_map *m = find_map(p, ip);
	uint64_t off;

	if (m && m->jit && resolve_jit(sym, p, m, ip, out) == 1)
		return 1;
	if (!m) {
		set_frame(out, "[unknown]", "", "", ip, SYM_KIND_UNKNOWN);
		return 1;
	}
	off = ip - m->start + m->offset;
	switch (m->type) {
	case SYM_MAP_ELF:
		return resolve_elf(sym, m->elf, m->module, elf_vaddr(m, ip), out);
	case SYM_MAP_FILE:
		set_frame(out, offset_name(sym, m->module, off), m->module, "", off,
			  SYM_KIND_UNKNOWN);
		return 1;
	case SYM_MAP_ANON:
	default:
		/* offsets in anonymous memory mean nothing across processes: one frame */
		set_frame(out, m->module, m->module, "", 0, SYM_KIND_UNKNOWN);
		return 1;
	}
}

static void count_unknown(struct symbolizer *sym, const struct sym_frame *f, int n)
{
	for (int i = 0; i < n; i++)
		sym->stats.unknown_frames += f[i].kind == SYM_KIND_UNKNOWN;
}

int sym_user(struct symbolizer *sym, int pid, uint64_t ip, struct sym_frame *out, int max)
{
	struct sym_frame frames[MAX_CHAIN];
	struct sym_addr_key key;
	struct sym_proc *p;
	uint64_t now;
	int n;

	if (!sym || !out || max < 1)
		return -EINVAL;
	sym->stats.lookups++;
	p = sym_proc_find(sym, pid);
	if (p) {
		user_key(&key, p, pid, ip);
		n = cache_get(sym, &key, out, max);
		if (n > 0) {
			/* a coarse clock read (a few ns): keeps a busy process from looking idle */
			p->last_used_ms = sym_now_ms();
			return n;
		}
	}
	now = sym_now_ms();
	sym_procs_gc(sym, now);
	if (!p && sym_note_process(sym, pid) == 0)
		p = sym_proc_find(sym, pid);
	if (p) {
		p->last_used_ms = now;
		/* a new dlopen or JIT region: re-read the maps, not more often than refresh_ms */
		if (!find_map(p, ip)) {
			if ((sym->opts.refresh_ms < 0 ||
			     now - p->last_refresh_ms >= (uint64_t)sym->opts.refresh_ms) &&
			    sym_proc_alive(p))
				sym_proc_refresh(sym, p);
			/* still in none (too soon to look again): sym_names_gen looks later */
			p->maps_pending = !find_map(p, ip);
		}
	}
	sym->stats.cache_misses++;
	n = resolve_user(sym, p, ip, frames);
	count_unknown(sym, frames, n);
	if (p) {
		user_key(&key, p, pid, ip); /* the snapshot may be new */
		cache_put(sym, &key, frames, n);
	}
	if (n > max)
		n = max;
	memcpy(out, frames, (size_t)n * sizeof(*out));
	return n;
}

const char *sym_build_id_of_exe(struct symbolizer *sym, int pid)
{
	struct sym_proc *p = sym_proc_find(sym, pid);

	if (!p && sym_note_process(sym, pid) == 0)
		p = sym_proc_find(sym, pid);
	if (!p) {
		errno = ESRCH;
		return NULL;
	}
	if (!p->exe_build_id)
		errno = ENODATA;
	return p->exe_build_id;
}

/* ---- kernel frames ---- */

static void kallsyms_ensure(struct symbolizer *sym, bool missed)
{
	uint64_t now = sym_now_ms();
	struct kallsyms *ks;

	if (sym->ks_tried && !(missed && sym->ks && now - sym->ks_loaded_ms >= KALLSYMS_RELOAD_MS))
		return;
	sym->ks_tried = true;
	sym->ks_loaded_ms = now;
	ks = kallsyms_load(sym->opts.kallsyms_path);
	if (!ks) {
		if (errno == EPERM) {
			sym->stats.kallsyms_restricted = true;
			log_warn(
			    "kernel symbols unavailable: /proc/kallsyms shows zero addresses "
			    "hint=\"run the agent with CAP_SYSLOG or set kernel.kptr_restrict=0\"");
		} else if (!sym->ks) {
			log_warn("kernel symbols unavailable: cannot read kallsyms err=%d", errno);
		}
		return;
	}
	kallsyms_free(sym->ks);
	sym->ks = ks;
	sym->kernel_gen = ++sym->next_gen;
	sym->stats.kernel_symbols = kallsyms_count(ks);
}

int sym_kernel(struct symbolizer *sym, uint64_t ip, struct sym_frame *out)
{
	struct kallsyms_hit hit;
	struct sym_addr_key key;

	if (!sym || !out)
		return -EINVAL;
	sym->stats.lookups++;
	process_key(&key, -1, sym->kernel_gen, ip);
	if (sym->ks && cache_get(sym, &key, out, 1) == 1)
		return 1;
	kallsyms_ensure(sym, false);
	sym->stats.cache_misses++;
	if (sym->ks && kallsyms_lookup(sym->ks, ip, &hit) != 0) {
		kallsyms_ensure(sym, true);
	}
	if (!sym->ks || kallsyms_lookup(sym->ks, ip, &hit) != 0) {
		/* kernel addresses differ per boot (KASLR): one frame for all unknown ones */
		set_frame(out, "[kernel]", "[kernel]", "", 0, SYM_KIND_UNKNOWN);
		sym->stats.unknown_frames++;
		return 1;
	}
	set_frame(out, sym_intern_str(sym, hit.name, "[kernel]"),
		  sym_intern_str(sym, hit.module, "[kernel]"),
		  sym_intern_str(sym, hit.build_id, ""), ip - hit.base, SYM_KIND_KERNEL);
	process_key(&key, -1, sym->kernel_gen, ip); /* kallsyms may have been reloaded */
	cache_put(sym, &key, out, 1);
	return 1;
}

void sym_get_stats(const struct symbolizer *sym, struct sym_stats *out)
{
	*out = sym->stats;
	out->kernel_bytes = sym->ks ? kallsyms_bytes(sym->ks) : 0;
	out->perfmap_entries = sym->pm_stats.entries;
	out->perfmap_bytes = sym->pm_stats.bytes;
	out->perfmap_lines = sym->pm_stats.lines;
	out->perfmap_bad_lines = sym->pm_stats.bad_lines;
	out->perfmap_dropped = sym->pm_stats.dropped;
	out->perfmap_rereads = sym->pm_stats.rereads;
	out->perfmap_refused = sym->pm_stats.refused;
}
