/*
 * symcache.c - the symbolizer's memory: interned strings, the cache of ELF
 * files, and the process snapshots that point into it.
 *
 * Workload: a node runs hundreds of processes that share a few hundred
 * distinct files (libc in every one), and new processes appear all the
 * time. So a file is recognized before it is parsed: an open + fstat of
 * the mapping finds an entry by file identity; failing that, reading the
 * ELF header finds one by build id (another copy of the same build, e.g.
 * in another container). Only a new build is parsed, and only when one of
 * its addresses is looked up.
 *
 * Keys (docs/agent.md): the GNU build id when the file has one, else
 * (st_dev, st_ino, st_size, st_mtime): a rebuilt or replaced file gets a
 * new entry while the old one still serves the processes that mapped it.
 *
 * Memory: loaded symbol tables sit on an LRU list and are unloaded past
 * opts.max_elf_bytes; the entry (header, open fd) stays while a snapshot
 * references it, so the table can be loaded again after the process and
 * even the file are gone. Strings are interned in chunks and never freed
 * before sym_free(): a string returned once stays valid.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "traceprof/hex.h"
#include "traceprof/ids.h"
#include "traceprof/log.h"
#include "procmem.h"
#include "symbolize_internal.h"

#define INTERN_CHUNK_BYTES 65536
#define GC_INTERVAL_MS	   1000

struct intern_chunk {
	struct intern_chunk *next; /* older chunk */
	size_t used;		   /* bytes used in data */
	size_t cap;		   /* bytes of data */
	char data[];		   /* the strings, NUL-terminated */
};

uint64_t sym_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts); /* a few ns, ms resolution suffices */
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* ---- interned strings ---- */

static char *intern_store(struct symbolizer *sym, const char *s, size_t len)
{
	struct intern_chunk *c = sym->chunks;
	char *out;

	if (!c || c->cap - c->used < len + 1) {
		size_t cap = len + 1 > INTERN_CHUNK_BYTES ? len + 1 : INTERN_CHUNK_BYTES;

		c = malloc(sizeof(*c) + cap);
		if (!c)
			return NULL;
		c->used = 0;
		c->cap = cap;
		c->next = sym->chunks;
		sym->chunks = c;
		sym->stats.intern_bytes += sizeof(*c) + cap;
	}
	out = c->data + c->used;
	memcpy(out, s, len);
	out[len] = '\0';
	c->used += len + 1;
	return out;
}

static int intern_grow(struct symbolizer *sym)
{
	size_t ncap = sym->intern_cap ? sym->intern_cap * 2 : 4096;
	const char **slots = calloc(ncap, sizeof(*slots));

	if (!slots)
		return -ENOMEM;
	for (size_t i = 0; i < sym->intern_cap; i++) {
		const char *s = sym->intern_slots[i];
		size_t j;

		if (!s)
			continue;
		j = ids_hash_bytes(0, s, strlen(s)) & (ncap - 1);
		while (slots[j])
			j = (j + 1) & (ncap - 1);
		slots[j] = s;
	}
	sym->stats.intern_bytes += (ncap - sym->intern_cap) * sizeof(*slots);
	free(sym->intern_slots);
	sym->intern_slots = slots;
	sym->intern_cap = ncap;
	return 0;
}

const char *sym_intern(struct symbolizer *sym, const char *s, size_t len)
{
	size_t i;
	char *copy;

	if (sym->intern_n * 4 >= sym->intern_cap * 3 && intern_grow(sym) != 0)
		return NULL;
	i = ids_hash_bytes(0, s, len) & (sym->intern_cap - 1);
	for (; sym->intern_slots[i]; i = (i + 1) & (sym->intern_cap - 1)) {
		const char *t = sym->intern_slots[i];

		if (memcmp(t, s, len) == 0 && t[len] == '\0')
			return t;
	}
	copy = intern_store(sym, s, len);
	if (!copy)
		return NULL;
	sym->intern_slots[i] = copy;
	sym->intern_n++;
	return copy;
}

const char *sym_intern_str(struct symbolizer *sym, const char *s, const char *fallback)
{
	const char *r = s ? sym_intern(sym, s, strlen(s)) : NULL;

	return r ? r : fallback;
}

void sym_intern_free(struct symbolizer *sym)
{
	while (sym->chunks) {
		struct intern_chunk *c = sym->chunks;

		sym->chunks = c->next;
		free(c);
	}
	free(sym->intern_slots);
	sym->intern_slots = NULL;
	sym->intern_cap = sym->intern_n = 0;
}

/* ---- the ELF cache ---- */

static void lru_unlink(struct symbolizer *sym, struct sym_elf *e)
{
	if (e->lru_prev)
		e->lru_prev->lru_next = e->lru_next;
	else
		sym->lru_head = e->lru_next;
	if (e->lru_next)
		e->lru_next->lru_prev = e->lru_prev;
	else
		sym->lru_tail = e->lru_prev;
	e->lru_prev = e->lru_next = NULL;
}

static void lru_push_front(struct symbolizer *sym, struct sym_elf *e)
{
	e->lru_prev = NULL;
	e->lru_next = sym->lru_head;
	if (sym->lru_head)
		sym->lru_head->lru_prev = e;
	sym->lru_head = e;
	if (!sym->lru_tail)
		sym->lru_tail = e;
}

static void elf_destroy(struct symbolizer *sym, struct sym_elf *e)
{
	struct sym_elf **pp = &sym->elfs;

	while (*pp && *pp != e)
		pp = &(*pp)->next;
	if (*pp)
		*pp = e->next;
	if (e->fd >= 0)
		close(e->fd);
	if (e->debug_fd >= 0)
		close(e->debug_fd);
	free(e->image);
	free(e);
	sym->stats.elf_entries--;
}

static void elf_unload(struct symbolizer *sym, struct sym_elf *e)
{
	lru_unlink(sym, e);
	elfsyms_free(e->syms);
	e->syms = NULL;
	sym->stats.elf_bytes -= e->bytes;
	e->bytes = 0;
	sym->stats.elf_evictions++;
	if (e->refs == 0)
		elf_destroy(sym, e);
}

bool sym_elf_ensure(struct symbolizer *sym, struct sym_elf *e)
{
	struct elfsyms_source src = {.fd = e->fd, .image = e->image, .image_len = e->image_len};
	struct elfsyms_source dbg = {.fd = e->debug_fd, .image = NULL, .image_len = 0};

	if (e->syms) {
		if (sym->lru_head != e) {
			lru_unlink(sym, e);
			lru_push_front(sym, e);
		}
		return true;
	}
	if (e->load_failed)
		return false;
	e->syms =
	    elfsyms_load(&src, e->debug_fd >= 0 ? &dbg : NULL, !sym->opts.no_lines, NULL, NULL);
	if (!e->syms) {
		log_debug("cannot load symbols module=%s build_id=%s err=%d", e->module,
			  e->build_id, errno);
		sym->stats.elf_refused += errno == EFBIG;
		e->load_failed = true;
		return false;
	}
	sym->stats.elf_loads++;
	e->bytes = elfsyms_bytes(e->syms);
	log_debug("loaded symbols module=%s build_id=%s bytes=%zu", e->module, e->build_id,
		  e->bytes);
	sym->stats.elf_bytes += e->bytes;
	lru_push_front(sym, e);
	while (sym->stats.elf_bytes > sym->opts.max_elf_bytes && sym->lru_tail != e)
		elf_unload(sym, sym->lru_tail);
	return true;
}

void sym_elf_put(struct symbolizer *sym, struct sym_elf *e)
{
	if (!e)
		return;
	e->refs--;
	if (e->refs == 0 && !e->syms)
		elf_destroy(sym, e);
}

void sym_elfs_free(struct symbolizer *sym)
{
	while (sym->elfs) {
		struct sym_elf *e = sym->elfs;

		sym->elfs = e->next;
		elfsyms_free(e->syms);
		if (e->fd >= 0)
			close(e->fd);
		if (e->debug_fd >= 0)
			close(e->debug_fd);
		free(e->image);
		free(e);
	}
}

static struct sym_elf *find_by_ident(struct symbolizer *sym, const struct sym_ident *id)
{
	for (struct sym_elf *e = sym->elfs; e; e = e->next) {
		if (memcmp(&e->ident, id, sizeof(*id)) == 0)
			return e;
	}
	return NULL;
}

static struct sym_elf *find_by_build_id(struct symbolizer *sym, const struct elfsyms_header *h)
{
	if (h->build_id_len == 0)
		return NULL;
	for (struct sym_elf *e = sym->elfs; e; e = e->next) {
		if (e->hdr.build_id_len == h->build_id_len &&
		    memcmp(e->hdr.build_id, h->build_id, h->build_id_len) == 0)
			return e;
	}
	return NULL;
}

static const char *basename_of(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash ? slash + 1 : path;
}

/* Opens a separate debug file: by build id, then by .gnu_debuglink, under root. */
static int open_debug_file(const char *root, const char *path, const struct elfsyms_header *h)
{
	char buf[PATH_MAX], hex[2 * BUILDID_MAX + 1], dir[PATH_MAX];
	const char *slash;
	int fd;

	if (h->build_id_len >= 2) {
		tp_hex_encode(h->build_id, h->build_id_len, hex);
		hex[2 * h->build_id_len] = '\0';
		snprintf(buf, sizeof(buf), "%s/usr/lib/debug/.build-id/%.2s/%s.debug", root, hex,
			 hex + 2);
		fd = open(buf, O_RDONLY | O_CLOEXEC);
		if (fd >= 0)
			return fd;
	}
	if (!h->debuglink[0] || !path || path[0] != '/')
		return -1;
	slash = strrchr(path, '/');
	snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
	const char *forms[] = {"%s%s/%s", "%s%s/.debug/%s", "%s/usr/lib/debug%s/%s"};
	for (size_t i = 0; i < sizeof(forms) / sizeof(forms[0]); i++) {
		if (snprintf(buf, sizeof(buf), forms[i], root, dir, h->debuglink) >=
		    (int)sizeof(buf))
			continue;
		if (strcmp(buf + strlen(root), path) == 0)
			continue; /* the file itself */
		fd = open(buf, O_RDONLY | O_CLOEXEC);
		if (fd >= 0)
			return fd;
	}
	return -1;
}

static struct sym_elf *elf_new(struct symbolizer *sym, const struct elfsyms_header *h,
			       const struct sym_ident *id, const char *module)
{
	struct sym_elf *e = calloc(1, sizeof(*e));
	char hex[2 * BUILDID_MAX + 1];

	if (!e)
		return NULL;
	e->serial = ++sym->next_serial;
	e->fd = e->debug_fd = -1;
	e->ident = *id;
	e->hdr = *h;
	tp_hex_encode(h->build_id, h->build_id_len, hex);
	hex[2 * h->build_id_len] = '\0';
	e->build_id = sym_intern_str(sym, hex, "");
	e->module = sym_intern_str(sym, module, "[unknown]");
	e->next = sym->elfs;
	sym->elfs = e;
	sym->stats.elf_entries++;
	return e;
}

/* A file's identity from its stat. */
static void ident_of(const struct stat *st, struct sym_ident *id)
{
	id->dev = (uint64_t)st->st_dev;
	id->ino = (uint64_t)st->st_ino;
	id->size = (uint64_t)st->st_size;
	id->mtime_ns = (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
}

/* The entry for a file mapping: found by identity or build id, or new. NULL if not ELF. */
static struct sym_elf *elf_for_file(struct symbolizer *sym, int pid, const struct procmem_map *m)
{
	struct elfsyms_header h;
	struct elfsyms_source src = {.fd = -1, .image = NULL, .image_len = 0};
	struct sym_ident id = {0};
	struct sym_elf *e;
	struct stat st;
	char root[64];

	/* a file already known needs a stat only, not an open */
	if (procmem_stat_mapped(pid, m, &st) == 0) {
		ident_of(&st, &id);
		e = find_by_ident(sym, &id);
		if (e)
			return e;
	}
	src.fd = procmem_open_mapped(pid, m, &st);
	if (src.fd < 0)
		return NULL;
	ident_of(&st, &id);
	e = find_by_ident(sym, &id);
	if (!e && elfsyms_read_header(&src, &h) == 0) {
		e = find_by_build_id(sym, &h);
		if (!e) {
			e = elf_new(sym, &h, &id, basename_of(m->path));
			if (e) {
				e->fd = src.fd;
				src.fd = -1;
				snprintf(root, sizeof(root), "/proc/%d/root", pid);
				if (!h.has_debug_info && !sym->opts.no_lines)
					e->debug_fd = open_debug_file(root, m->path, &h);
			}
		}
	}
	if (src.fd >= 0)
		close(src.fd);
	return e;
}

/* The vdso, copied out of the process: the same image for every process of a boot. */
static struct sym_elf *elf_for_vdso(struct symbolizer *sym, int pid, const struct procmem_map *m)
{
	size_t len = (size_t)(m->end - m->start);
	unsigned char ehdr[sizeof(sym->vdso_ehdr)];
	struct elfsyms_source src = {.fd = -1, .image = NULL, .image_len = len};
	struct sym_ident id = {0};
	struct elfsyms_header h;
	struct sym_elf *e = NULL;

	if (len > (1u << 20))
		return NULL;
	if (sym->vdso_known && len == sym->vdso_len && len >= sizeof(ehdr) &&
	    procmem_read(pid, m->start, ehdr, sizeof(ehdr)) == 0 &&
	    !memcmp(ehdr, sym->vdso_ehdr, sizeof(ehdr))) {
		e = sym->vdso_hdr.build_id_len ? find_by_build_id(sym, &sym->vdso_hdr)
					       : find_by_ident(sym, &sym->vdso_id);
		if (e)
			return e; /* the image this kernel maps into every process */
	}
	src.image = malloc(len);
	if (!src.image || procmem_read(pid, m->start, src.image, len) != 0)
		goto out;
	if (elfsyms_read_header(&src, &h) != 0)
		goto out;
	id.size = len;
	id.mtime_ns = (int64_t)ids_hash_bytes(0, src.image, len);
	e = h.build_id_len ? find_by_build_id(sym, &h) : find_by_ident(sym, &id);
	if (len >= sizeof(ehdr)) {
		sym->vdso_known = true;
		sym->vdso_len = len;
		memcpy(sym->vdso_ehdr, src.image, sizeof(ehdr));
		sym->vdso_hdr = h;
		sym->vdso_id = id;
	}
	if (!e) {
		e = elf_new(sym, &h, &id, "[vdso]");
		if (e) {
			e->image = src.image;
			e->image_len = len;
			src.image = NULL;
		}
	}
out:
	free(src.image);
	return e;
}

/* ---- process snapshots ---- */

bool sym_proc_alive(const struct sym_proc *p)
{
	uint64_t t = procmem_start_time(p->pid);

	return t != 0 && t == p->start_time;
}

struct sym_proc *sym_proc_find(struct symbolizer *sym, int pid)
{
	struct sym_proc *p = sym->procs[(unsigned int)pid % SYM_PROC_BUCKETS];

	while (p && p->pid != pid)
		p = p->next;
	return p;
}

static void maps_release(struct symbolizer *sym, struct sym_map *maps, size_t n)
{
	for (size_t i = 0; i < n; i++)
		sym_elf_put(sym, maps[i].elf);
	free(maps);
}

static const char *anon_module(const char *path)
{
	return path[0] ? path : "[anon]";
}

/* Builds the mappings of pid, reusing the entries of old (may be NULL) for unchanged ones. */
static int build_maps(struct symbolizer *sym, int pid, const struct sym_proc *old,
		      struct sym_map **out, size_t *nout)
{
	struct procmem_maps pm;
	struct sym_map *maps;
	size_t n = 0;
	int err = procmem_maps_read(pid, &pm);

	if (err)
		return err;
	maps = calloc(pm.n ? pm.n : 1, sizeof(*maps));
	if (!maps) {
		procmem_maps_free(&pm);
		return -ENOMEM;
	}
	for (size_t i = 0; i < pm.n; i++) {
		const struct procmem_map *m = &pm.maps[i];
		struct sym_map *s;

		if (m->perms[2] != 'x')
			continue; /* a sampled user IP always lies in an executable mapping */
		s = &maps[n++];
		s->start = m->start;
		s->end = m->end;
		s->offset = m->offset;
		s->inode = m->inode;
		for (size_t j = 0; old && j < old->nmaps; j++) {
			const struct sym_map *o = &old->maps[j];

			if (o->start == s->start && o->end == s->end && o->offset == s->offset &&
			    o->inode == s->inode) {
				s->type = o->type;
				s->elf = o->elf;
				s->module = o->module;
				s->jit = o->jit;
				break;
			}
		}
		if (s->module) {
			if (s->elf)
				s->elf->refs++;
			continue;
		}
		if (strcmp(m->path, "[vdso]") == 0)
			s->elf = elf_for_vdso(sym, pid, m);
		else if (m->path[0] == '/')
			s->elf = elf_for_file(sym, pid, m);
		if (s->elf) {
			s->type = SYM_MAP_ELF;
			s->elf->refs++;
			s->module = m->path[0] == '/'
					? sym_intern_str(sym, basename_of(m->path), s->elf->module)
					: s->elf->module;
		} else if (m->path[0] == '/' || strncmp(m->path, "memfd:", 6) == 0 ||
			   strcmp(m->path, "[vdso]") == 0) {
			/* unreadable or not ELF: "name+0xoffset" frames */
			s->type = SYM_MAP_FILE;
			s->module = sym_intern_str(sym, basename_of(m->path), "[unknown]");
			s->jit = strncmp(basename_of(m->path), "memfd:", 6) == 0;
		} else {
			s->type = SYM_MAP_ANON;
			s->module = sym_intern_str(sym, anon_module(m->path), "[anon]");
			s->jit = !m->path[0] || strncmp(m->path, "[anon:", 6) == 0;
		}
	}
	*out = maps;
	*nout = n;
	procmem_maps_free(&pm);
	return 0;
}

/* The build id of the executable: the mapping whose file is /proc/P/exe. */
static const char *exe_build_id(int pid, const struct sym_map *maps, size_t n)
{
	struct stat st;

	if (procmem_exe_stat(pid, &st) != 0)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		const struct sym_elf *e = maps[i].elf;

		if (e && e->ident.ino == (uint64_t)st.st_ino && e->ident.dev == (uint64_t)st.st_dev)
			return e->build_id[0] ? e->build_id : NULL;
	}
	/* the executable's entry was found by build id under another identity */
	for (size_t i = 0; i < n; i++) {
		if (maps[i].elf && maps[i].inode == (uint64_t)st.st_ino)
			return maps[i].elf->build_id[0] ? maps[i].elf->build_id : NULL;
	}
	return NULL;
}

int sym_proc_refresh(struct symbolizer *sym, struct sym_proc *p)
{
	struct sym_map *maps;
	size_t n;
	int err = build_maps(sym, p->pid, p, &maps, &n);

	p->last_refresh_ms = sym_now_ms();
	if (err)
		return err;
	maps_release(sym, p->maps, p->nmaps);
	p->maps = maps;
	p->nmaps = n;
	p->gen = ++sym->next_gen;
	if (!p->exe_build_id)
		p->exe_build_id = exe_build_id(p->pid, maps, n);
	sym->stats.map_refreshes++;
	return 0;
}

void sym_proc_drop(struct symbolizer *sym, struct sym_proc *p)
{
	struct sym_proc **pp = &sym->procs[(unsigned int)p->pid % SYM_PROC_BUCKETS];

	while (*pp && *pp != p)
		pp = &(*pp)->next;
	if (*pp)
		*pp = p->next;
	maps_release(sym, p->maps, p->nmaps);
	if (p->perfmap) {
		perfmap_free(p->perfmap, &sym->pm_stats);
		sym->stats.perfmap_processes--;
	}
	free(p);
	sym->stats.processes--;
}

int sym_note_process(struct symbolizer *sym, int pid)
{
	uint64_t start_time;
	struct sym_proc *p;
	int err;

	if (!sym || pid <= 0)
		return -EINVAL;
	start_time = procmem_start_time(pid);
	p = sym_proc_find(sym, pid);
	sym_procs_gc(sym, sym_now_ms());
	if (p && (start_time == 0 || p->start_time == start_time))
		return 0; /* known (or gone: keep what we have) */
	if (start_time == 0)
		return -ESRCH;
	if (p)
		sym_proc_drop(sym, p); /* the pid was reused */
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->pid = pid;
	p->start_time = start_time;
	err = build_maps(sym, pid, NULL, &p->maps, &p->nmaps);
	if (err) {
		free(p);
		return err == -ENOENT ? -ESRCH : err;
	}
	p->gen = ++sym->next_gen;
	p->last_refresh_ms = p->last_used_ms = sym_now_ms();
	p->exe_build_id = exe_build_id(pid, p->maps, p->nmaps);
	p->next = sym->procs[(unsigned int)pid % SYM_PROC_BUCKETS];
	sym->procs[(unsigned int)pid % SYM_PROC_BUCKETS] = p;
	sym->stats.processes++;
	return 0;
}

int sym_inherit_process(struct symbolizer *sym, int pid, int parent, uint64_t start_time)
{
	struct sym_proc *p, *from;

	if (!sym || pid <= 0 || parent <= 0 || pid == parent)
		return -EINVAL;
	from = sym_proc_find(sym, parent);
	if (!from)
		return -ESRCH;
	p = sym_proc_find(sym, pid);
	if (p && p->start_time == start_time)
		return 0;
	if (p)
		sym_proc_drop(sym, p); /* the pid was reused */
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	if (from->nmaps) {
		p->maps = malloc(from->nmaps * sizeof(*p->maps));
		if (!p->maps) {
			free(p);
			return -ENOMEM;
		}
		memcpy(p->maps, from->maps, from->nmaps * sizeof(*p->maps));
		for (size_t i = 0; i < from->nmaps; i++)
			if (p->maps[i].elf)
				p->maps[i].elf->refs++;
	}
	p->nmaps = from->nmaps;
	p->pid = pid;
	p->start_time = start_time;
	p->gen = ++sym->next_gen;
	p->last_refresh_ms = from->last_refresh_ms;
	p->last_used_ms = sym_now_ms();
	p->exe_build_id = from->exe_build_id;
	p->next = sym->procs[(unsigned int)pid % SYM_PROC_BUCKETS];
	sym->procs[(unsigned int)pid % SYM_PROC_BUCKETS] = p;
	sym->stats.processes++;
	sym->stats.inherited++;
	return 0;
}

void sym_forget_process(struct symbolizer *sym, int pid)
{
	struct sym_proc *p = sym_proc_find(sym, pid);

	if (p)
		sym_proc_drop(sym, p);
}

void sym_procs_gc(struct symbolizer *sym, uint64_t now)
{
	if (sym->opts.idle_ms < 0 || now - sym->last_gc_ms < GC_INTERVAL_MS)
		return;
	sym->last_gc_ms = now;
	for (size_t b = 0; b < SYM_PROC_BUCKETS; b++) {
		struct sym_proc *p = sym->procs[b];

		while (p) {
			struct sym_proc *next = p->next;

			if (now - p->last_used_ms >= (uint64_t)sym->opts.idle_ms) {
				if (!sym_proc_alive(p))
					sym_proc_drop(sym, p);
				else /* idle but alive: its next look after another idle period */
					p->last_used_ms = now;
			}
			p = next;
		}
	}
}
