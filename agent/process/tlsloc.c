/*
 * tlsloc.c - resolving otel_thread_ctx_v1 to a struct tp_tls_loc.
 *
 * Data flow, once per process:
 *  1. /proc/<pid>/maps gives the modules: file mappings at file offset 0
 *     that are ELF files. Each is opened through procmem_open_mapped (works
 *     for containers) and its program headers give the load bias, the
 *     runtime address of its dynamic section and its PT_TLS.
 *  2. Modules that define the STT_TLS symbol (.dynsym, then .symtab) are the
 *     candidates; the first in load order wins, as in symbol resolution.
 *  3. glibc: libc exports nptl_db layout descriptors (_thread_db_*: three
 *     uint32 each, bits, count, offset; constants read from libc's file).
 *     The link_map list, from ld.so's _r_debug or the executable's
 *     DT_DEBUG, is walked in the process's memory; the module's entry is
 *     matched by l_ld and its l_tls_offset and l_tls_modid read at the
 *     offsets the descriptors give. A real static offset gives
 *     TP_TLS_STATIC (x86-64 TLS variant II: blocks below the thread
 *     pointer), anything else TP_TLS_DTV.
 *  4. Without loader data (static executables, other C libraries), an
 *     executable's own symbol gets the offset glibc assigns the first static
 *     block, computed from PT_TLS.
 *
 * Nothing here is on a hot path; symbol tables are scanned linearly.
 */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <libelf.h>
#include <link.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tlsloc.h"
#include "traceprof/log.h"

/* glibc x86-64 (TLS_TCB_AT_TP) l_tls_offset values that are not offsets. */
#define GLIBC_NO_TLS_OFFSET		0
#define GLIBC_FORCED_DYNAMIC_TLS_OFFSET ((uint64_t)-1)
/* glibc's marker of a dtv entry a thread has not allocated yet. */
#define GLIBC_TLS_DTV_UNALLOCATED ((uint64_t)-1)
/* Bounds on what is read from the process: a corrupt list must not loop. */
#define MAX_LINK_MAPS	4096
#define MAX_DYN_ENTRIES 1024

/* A mapped ELF module of the process. */
struct module {
	const struct procmem_map *map; /* its mapping at file offset 0 */
	uint64_t bias;		       /* load bias: runtime address minus ELF address */
	uint64_t dyn_addr;	       /* runtime address of PT_DYNAMIC, 0 if none */
	bool has_interp;	       /* PT_INTERP: started by a dynamic loader */
	bool has_tls;		       /* has a PT_TLS segment */
	uint64_t tls_vaddr;	       /* PT_TLS p_vaddr */
	uint64_t tls_memsz;	       /* PT_TLS p_memsz */
	uint64_t tls_align;	       /* PT_TLS p_align */
	bool defines_sym;	       /* defines otel_thread_ctx_v1 */
	uint64_t sym_value;	       /* its st_value */
};

/* An nptl_db descriptor of a struct field: _thread_db_<struct>_<field>. */
struct db_desc {
	uint32_t bits;	 /* field size in bits (element size for arrays) */
	uint32_t count;	 /* elements */
	uint32_t offset; /* byte offset in the struct */
};

/* The glibc layout facts tlsloc needs, from libc's descriptors. */
struct glibc_layout {
	struct db_desc l_tls_offset; /* link_map.l_tls_offset */
	struct db_desc l_tls_modid;  /* link_map.l_tls_modid */
	struct db_desc dtvp;	     /* pthread.header.dtv: the dtv pointer */
	struct db_desc dtv_slot;     /* dtv array: element size */
	struct db_desc pointer_val;  /* dtv_t.pointer.val */
};

static int elf_ready(void)
{
	static bool done;

	if (!done && elf_version(EV_CURRENT) == EV_NONE)
		return -ENOTSUP;
	done = true;
	return 0;
}

/* The GNU hash of a symbol name (the dynamic linker's). */
static uint32_t gnu_hash(const char *name)
{
	uint32_t h = 5381;

	for (const unsigned char *c = (const unsigned char *)name; *c; c++)
		h = h * 33 + *c;
	return h;
}

/*
 * Looks name up in the dynamic symbols through their GNU hash table
 * (section gh, ELF64): a few probes instead of a walk of every symbol.
 * 1: found (*out), 0: not defined there, -1: the table cannot be used.
 */
static int gnu_hash_lookup(Elf *elf, Elf_Scn *gh, const char *name, GElf_Sym *out)
{
	Elf_Scn *dyn;
	GElf_Shdr gsh, dsh;
	Elf_Data *gd, *dd;
	const uint32_t *hdr, *buckets, *chain;
	const uint64_t *bloom;
	uint32_t h = gnu_hash(name), nbuckets, symoffset, bloom_size, shift, i;
	size_t words, nsyms;
	uint64_t word;

	if (gelf_getclass(elf) != ELFCLASS64 || !gelf_getshdr(gh, &gsh) ||
	    !(dyn = elf_getscn(elf, gsh.sh_link)) || !gelf_getshdr(dyn, &dsh) ||
	    dsh.sh_type != SHT_DYNSYM || !dsh.sh_entsize || !(gd = elf_rawdata(gh, NULL)) ||
	    !(dd = elf_getdata(dyn, NULL)) || gd->d_size < 16)
		return -1;
	hdr = gd->d_buf;
	nbuckets = hdr[0];
	symoffset = hdr[1];
	bloom_size = hdr[2];
	shift = hdr[3];
	nsyms = dsh.sh_size / dsh.sh_entsize;
	words = gd->d_size / 4;
	if (!nbuckets || !bloom_size || (bloom_size & (bloom_size - 1)) || shift >= 64 ||
	    4 + 2 * (size_t)bloom_size + nbuckets > words)
		return -1;
	bloom = (const uint64_t *)(hdr + 4);
	buckets = hdr + 4 + 2 * (size_t)bloom_size;
	chain = buckets + nbuckets;
	word = bloom[(h / 64) & (bloom_size - 1)];
	if (!((word >> (h % 64)) & (word >> ((h >> shift) % 64)) & 1))
		return 0;
	i = buckets[h % nbuckets];
	if (i < symoffset)
		return 0;
	for (;; i++) {
		size_t c = 4 + 2 * (size_t)bloom_size + nbuckets + (i - symoffset);
		GElf_Sym sym;
		const char *sn;

		if (c >= words || i >= nsyms)
			return -1; /* a chain running off the table: not trusted */
		if ((chain[i - symoffset] | 1) == (h | 1) && gelf_getsym(dd, (int)i, &sym) &&
		    sym.st_shndx != SHN_UNDEF && (sn = elf_strptr(elf, dsh.sh_link, sym.st_name)) &&
		    !strcmp(sn, name)) {
			*out = sym;
			return 1;
		}
		if (chain[i - symoffset] & 1)
			return 0;
	}
}

/*
 * Looks name up in .dynsym (through its GNU hash table when it has one),
 * then .symtab; defined symbols only. Only a file not stripped of .symtab
 * costs a walk of its symbols.
 */
static bool elf_find_symbol(Elf *elf, const char *name, GElf_Sym *out)
{
	static const Elf64_Word types[] = {SHT_DYNSYM, SHT_SYMTAB};
	bool dynsym_hashed = false;
	Elf_Scn *scn = NULL;

	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		int r;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_GNU_HASH)
			continue;
		r = gnu_hash_lookup(elf, scn, name, out);
		if (r == 1)
			return true;
		dynsym_hashed = r == 0;
		break;
	}
	for (size_t t = dynsym_hashed ? 1 : 0; t < 2; t++) {
		scn = NULL;
		while ((scn = elf_nextscn(elf, scn))) {
			GElf_Shdr sh;
			Elf_Data *data;
			size_t n;

			if (!gelf_getshdr(scn, &sh) || sh.sh_type != types[t] || !sh.sh_entsize)
				continue;
			data = elf_getdata(scn, NULL);
			if (!data)
				continue;
			n = sh.sh_size / sh.sh_entsize;
			for (size_t i = 1; i < n; i++) {
				GElf_Sym sym;
				const char *s;

				if (!gelf_getsym(data, (int)i, &sym) || sym.st_shndx == SHN_UNDEF)
					continue;
				s = elf_strptr(elf, sh.sh_link, sym.st_name);
				if (s && !strcmp(s, name)) {
					*out = sym;
					return true;
				}
			}
		}
	}
	return false;
}

/* Copies len bytes at ELF address vaddr from the file (fd) through PT_LOAD. */
static int elf_read_vaddr(Elf *elf, int fd, uint64_t vaddr, void *buf, size_t len)
{
	size_t n;

	if (elf_getphdrnum(elf, &n))
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD)
			continue;
		if (vaddr < ph.p_vaddr || vaddr + len > ph.p_vaddr + ph.p_filesz)
			continue;
		if (pread(fd, buf, len, (off_t)(ph.p_offset + vaddr - ph.p_vaddr)) != (ssize_t)len)
			return -EIO;
		return 0;
	}
	return -ENOENT;
}

/* Fills m from the program headers; false when this is no loaded ELF module. */
static bool module_read_phdrs(Elf *elf, struct module *m)
{
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
	bool have_bias = false;
	GElf_Ehdr eh;
	size_t n;

	if (elf_kind(elf) != ELF_K_ELF || !gelf_getehdr(elf, &eh) ||
	    eh.e_ident[EI_CLASS] != ELFCLASS64 || elf_getphdrnum(elf, &n))
		return false;
	if (eh.e_type != ET_EXEC && eh.e_type != ET_DYN)
		return false;
	m->dyn_addr = 0;
	for (size_t i = 0; i < n; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(elf, (int)i, &ph))
			continue;
		switch (ph.p_type) {
		case PT_LOAD:
			if (!have_bias && (ph.p_offset & ~(page - 1)) == m->map->offset) {
				m->bias = m->map->start - (ph.p_vaddr & ~(page - 1));
				have_bias = true;
			}
			break;
		case PT_DYNAMIC:
			m->dyn_addr = ph.p_vaddr; /* biased below */
			break;
		case PT_INTERP:
			m->has_interp = true;
			break;
		case PT_TLS:
			m->has_tls = ph.p_memsz != 0;
			m->tls_vaddr = ph.p_vaddr;
			m->tls_memsz = ph.p_memsz;
			m->tls_align = ph.p_align;
			break;
		}
	}
	if (m->dyn_addr)
		m->dyn_addr += m->bias;
	return have_bias;
}

/* Reads a descriptor named _thread_db_<name> from libc's file. */
static int read_desc(Elf *elf, int fd, const char *name, struct db_desc *d)
{
	char sym_name[96];
	uint32_t v[3];
	GElf_Sym sym;
	int err;

	snprintf(sym_name, sizeof(sym_name), "_thread_db_%s", name);
	if (!elf_find_symbol(elf, sym_name, &sym) || sym.st_size < sizeof(v))
		return -ENOENT;
	err = elf_read_vaddr(elf, fd, sym.st_value, v, sizeof(v));
	if (err)
		return err;
	d->bits = v[0];
	d->count = v[1];
	d->offset = v[2];
	return 0;
}

/* Reads libc's layout descriptors; -ENOENT when elf is no glibc libc. */
static int glibc_layout_read(Elf *elf, int fd, struct glibc_layout *g)
{
	int err;

	if ((err = read_desc(elf, fd, "link_map_l_tls_offset", &g->l_tls_offset)) ||
	    (err = read_desc(elf, fd, "link_map_l_tls_modid", &g->l_tls_modid)) ||
	    (err = read_desc(elf, fd, "pthread_dtvp", &g->dtvp)) ||
	    (err = read_desc(elf, fd, "dtv_dtv", &g->dtv_slot)) ||
	    (err = read_desc(elf, fd, "dtv_t_pointer_val", &g->pointer_val)))
		return err;
	/* the fields are read as 64-bit words below; anything else is another ABI */
	if (g->l_tls_offset.bits != 64 || g->l_tls_modid.bits != 64 || g->dtvp.bits != 64 ||
	    g->pointer_val.bits != 64 || g->dtv_slot.bits < 64 || g->dtv_slot.bits % 8)
		return -EPROTO;
	return 0;
}

/* What the scan of a process's modules found. */
struct scan {
	struct module *mods;   /* modules in maps order */
	size_t n;	       /* number of modules */
	bool have_glibc;       /* glibc layout found */
	struct glibc_layout g; /* valid when have_glibc */
	uint64_t r_debug;      /* runtime address of ld.so's _r_debug, 0 if none */
	ssize_t exe;	       /* index of the main executable, -1 if not found */
};

static bool same_file(const struct procmem_map *a, const struct procmem_map *b)
{
	return a->inode == b->inode && !strcmp(a->path, b->path);
}

/*
 * Whether a file defines the thread-context symbol, remembered per file so
 * that processes without any writer (nearly all of them) cost a stat() per
 * mapped file instead of a scan of its symbol tables. The key includes size
 * and modification time, so a file replaced under the same inode is read
 * again.
 */
struct sym_memo {
	uint64_t dev;	  /* st_dev; 0 = empty slot */
	uint64_t ino;	  /* st_ino */
	int64_t size;	  /* st_size */
	int64_t mtime_ns; /* st_mtim */
	bool defines;	  /* the file defines otel_thread_ctx_v1 */
};

#define SYM_MEMO_SLOTS 4096 /* power of two; probing stops after SYM_MEMO_PROBE */
#define SYM_MEMO_PROBE 8
static struct sym_memo sym_memo[SYM_MEMO_SLOTS];
static uint64_t files_read; /* tlsloc_files_read() */

/* The slot of the file st, or the slot to fill for it (evicting within the probe run). */
static struct sym_memo *memo_slot(const struct stat *st)
{
	uint64_t h = ((uint64_t)st->st_dev << 32) ^ (uint64_t)st->st_ino, i;

	h *= 0x9e3779b97f4a7c15ULL;
	h ^= h >> 31;
	i = h & (SYM_MEMO_SLOTS - 1);
	for (int k = 0; k < SYM_MEMO_PROBE; k++) {
		struct sym_memo *m = &sym_memo[(i + (uint64_t)k) & (SYM_MEMO_SLOTS - 1)];

		if (m->dev == 0 ||
		    (m->dev == (uint64_t)st->st_dev && m->ino == (uint64_t)st->st_ino))
			return m;
	}
	return &sym_memo[(i + (h >> 60) % SYM_MEMO_PROBE) & (SYM_MEMO_SLOTS - 1)];
}

/* Remembers whether the file open at fd defines the symbol. */
static void remember_file(int fd, bool defines)
{
	struct stat st;
	struct sym_memo *m;

	if (fstat(fd, &st) != 0 || st.st_dev == 0)
		return;
	m = memo_slot(&st);
	m->dev = (uint64_t)st.st_dev;
	m->ino = (uint64_t)st.st_ino;
	m->size = (int64_t)st.st_size;
	m->mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
	m->defines = defines;
}

/*
 * Opens module m's file as an ELF module of the process (its load bias and
 * segments read into m). NULL when the file cannot be opened, or (*not_elf)
 * when it is no loadable ELF file (locale data, fonts...), which is then
 * remembered as not defining the symbol. The caller ends the handle and
 * closes *fd.
 */
static Elf *module_open(pid_t pid, struct module *m, int *fd, bool *not_elf)
{
	Elf *elf;

	*not_elf = false;
	*fd = procmem_open_mapped(pid, m->map, NULL);
	if (*fd < 0) {
		log_debug("tlsloc: cannot open module pid=%d path=%s err=%d", (int)pid,
			  m->map->path, *fd);
		return NULL;
	}
	files_read++;
	elf = elf_begin(*fd, ELF_C_READ_MMAP, NULL);
	if (elf && module_read_phdrs(elf, m))
		return elf;
	remember_file(*fd, false);
	elf_end(elf);
	close(*fd);
	*not_elf = true;
	return NULL;
}

/* Whether module m (open as elf at fd) defines the symbol, remembered for its file. */
static bool module_defines(Elf *elf, int fd, struct module *m)
{
	GElf_Sym sym;

	m->defines_sym =
	    elf_find_symbol(elf, TLSLOC_SYMBOL, &sym) && GELF_ST_TYPE(sym.st_info) == STT_TLS;
	if (m->defines_sym)
		m->sym_value = sym.st_value;
	remember_file(fd, m->defines_sym);
	return m->defines_sym;
}

/*
 * True when some file mapped by the process may define the symbol. A file
 * not remembered yet is read for it here, and only that file: a process
 * that loaded one new library since the last look costs a scan of that
 * library, not of all its modules. Files are identified through
 * /proc/<pid>/map_files, which follows the mapping even across mount
 * namespaces and deletions.
 */
static bool may_define_symbol(pid_t pid, const struct procmem_maps *maps)
{
	for (size_t i = 0; i < maps->n; i++) {
		const struct procmem_map *mp = &maps->maps[i];
		struct module mod = {.map = mp};
		struct stat st;
		struct sym_memo *m;
		bool defines, not_elf;
		Elf *elf;
		int fd;

		/* only a file with code is a module; data files are never worth a stat */
		if (mp->offset != 0 || !procmem_map_is_file(mp) || mp->perms[0] != 'r' ||
		    !procmem_map_has_code(maps, mp))
			continue;
		if (procmem_stat_mapped(pid, mp, &st) != 0)
			return true; /* cannot tell: scan */
		m = memo_slot(&st);
		if (m->dev == (uint64_t)st.st_dev && m->ino == (uint64_t)st.st_ino &&
		    m->size == (int64_t)st.st_size &&
		    m->mtime_ns == (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec) {
			if (m->defines)
				return true;
			continue;
		}
		elf = module_open(pid, &mod, &fd, &not_elf);
		if (!elf) {
			if (not_elf)
				continue;
			return true; /* cannot tell: scan */
		}
		defines = module_defines(elf, fd, &mod);
		elf_end(elf);
		close(fd);
		if (defines)
			return true;
	}
	return false;
}

static void scan_module(pid_t pid, struct scan *s, struct module *m, unsigned flags)
{
	GElf_Sym sym;
	bool not_elf;
	Elf *elf;
	int fd;

	elf = module_open(pid, m, &fd, &not_elf);
	if (!elf)
		return;
	module_defines(elf, fd, m);
	if (!(flags & TLSLOC_NO_LINK_MAP)) {
		if (!s->have_glibc && glibc_layout_read(elf, fd, &s->g) == 0)
			s->have_glibc = true;
		if (!s->r_debug && elf_find_symbol(elf, "_r_debug", &sym) &&
		    GELF_ST_TYPE(sym.st_info) == STT_OBJECT)
			s->r_debug = m->bias + sym.st_value;
	}
	s->n++;
	elf_end(elf);
	close(fd);
}

static int scan_modules(pid_t pid, const struct procmem_maps *maps, unsigned flags, struct scan *s)
{
	char exe[PROCMEM_PATH_MAX];
	bool exe_deleted = false;

	memset(s, 0, sizeof(*s));
	s->exe = -1;
	s->mods = calloc(maps->n ? maps->n : 1, sizeof(*s->mods));
	if (!s->mods)
		return -ENOMEM;
	if (procmem_exe_path(pid, exe, sizeof(exe), &exe_deleted))
		exe[0] = '\0';
	for (size_t i = 0; i < maps->n; i++) {
		const struct procmem_map *mp = &maps->maps[i];
		bool seen = false;

		if (mp->offset != 0 || !procmem_map_is_file(mp) || mp->perms[0] != 'r' ||
		    !procmem_map_has_code(maps, mp))
			continue;
		for (size_t j = 0; j < s->n && !seen; j++)
			seen = same_file(s->mods[j].map, mp);
		if (seen)
			continue;
		memset(&s->mods[s->n], 0, sizeof(s->mods[s->n]));
		s->mods[s->n].map = mp;
		if (exe[0] && s->exe < 0 && mp->deleted == exe_deleted && !strcmp(mp->path, exe)) {
			size_t before = s->n;

			scan_module(pid, s, &s->mods[s->n], flags);
			if (s->n > before)
				s->exe = (ssize_t)before;
			continue;
		}
		scan_module(pid, s, &s->mods[s->n], flags);
	}
	return 0;
}

static int read_word(pid_t pid, uint64_t addr, uint64_t *out)
{
	return procmem_read(pid, addr, out, sizeof(*out));
}

/* The r_debug address from the executable's DT_DEBUG entry, 0 if none. */
static uint64_t r_debug_from_dt_debug(pid_t pid, const struct module *exe)
{
	Elf64_Dyn dyn;

	if (!exe->dyn_addr)
		return 0;
	for (uint64_t i = 0; i < MAX_DYN_ENTRIES; i++) {
		if (procmem_read(pid, exe->dyn_addr + i * sizeof(dyn), &dyn, sizeof(dyn)))
			return 0;
		if (dyn.d_tag == DT_NULL)
			return 0;
		if (dyn.d_tag == DT_DEBUG)
			return dyn.d_un.d_ptr;
	}
	return 0;
}

/*
 * Walks the link_map list and returns in *winner the first module (load
 * order) defining the symbol, with its l_tls_offset and l_tls_modid.
 */
static int walk_link_maps(pid_t pid, const struct scan *s, const struct module **winner,
			  uint64_t *tls_offset, uint64_t *modid)
{
	uint64_t r_debug = s->r_debug, lm;
	int err;

	if (!r_debug && s->exe >= 0)
		r_debug = r_debug_from_dt_debug(pid, &s->mods[s->exe]);
	if (!r_debug)
		return -ENOENT;
	err = read_word(pid, r_debug + offsetof(struct r_debug, r_map), &lm);
	if (err)
		return err;
	for (int i = 0; lm && i < MAX_LINK_MAPS; i++) {
		uint64_t l_ld, next;

		if ((err = read_word(pid, lm + offsetof(struct link_map, l_ld), &l_ld)) ||
		    (err = read_word(pid, lm + offsetof(struct link_map, l_next), &next)))
			return err;
		for (size_t j = 0; j < s->n; j++) {
			const struct module *m = &s->mods[j];

			if (!m->defines_sym || !l_ld || m->dyn_addr != l_ld)
				continue;
			if ((err = read_word(pid, lm + s->g.l_tls_offset.offset, tls_offset)) ||
			    (err = read_word(pid, lm + s->g.l_tls_modid.offset, modid)))
				return err;
			*winner = m;
			return 0;
		}
		lm = next;
	}
	return -ENOENT;
}

static uint64_t roundup_to(uint64_t v, uint64_t align)
{
	return align > 1 ? (v + align - 1) / align * align : v;
}

/*
 * The offset below the thread pointer glibc gives the executable's TLS
 * block, computed from PT_TLS (x86-64, variant II). Static executables:
 * __libc_setup_tls places it at roundup(memsz, align). Dynamic ones:
 * _dl_determine_tlsoffset gives the first module (the executable, module
 * id 1) roundup(memsz - firstbyte, align) + firstbyte, where firstbyte
 * makes the block's start congruent to p_vaddr modulo p_align.
 */
static uint64_t exe_static_tls_offset(const struct module *exe)
{
	uint64_t align = exe->tls_align ? exe->tls_align : 1;
	uint64_t firstbyte;

	if (!exe->has_interp)
		return roundup_to(exe->tls_memsz, align);
	firstbyte = (-(exe->tls_vaddr & (align - 1))) & (align - 1);
	return roundup_to(exe->tls_memsz - firstbyte, align) + firstbyte;
}

static void fill_info(struct tlsloc_info *info, enum tlsloc_method method, const struct module *m,
		      uint64_t tls_offset, uint64_t modid)
{
	if (!info)
		return;
	info->method = method;
	snprintf(info->module, sizeof(info->module), "%s", m->map->path);
	info->sym_value = m->sym_value;
	info->tls_offset = tls_offset;
	info->modid = modid;
}

static int locate(pid_t pid, const struct scan *s, unsigned flags, struct tp_tls_loc *loc,
		  struct tlsloc_info *info)
{
	const struct module *m = NULL;
	uint64_t tls_offset = 0, modid = 0;
	int err = -ENOENT;

	if (!(flags & TLSLOC_NO_LINK_MAP) && s->have_glibc)
		err = walk_link_maps(pid, s, &m, &tls_offset, &modid);
	if (!err) {
		if (tls_offset != GLIBC_NO_TLS_OFFSET &&
		    tls_offset != GLIBC_FORCED_DYNAMIC_TLS_OFFSET) {
			loc->kind = TP_TLS_STATIC;
			loc->tp_offset = (int64_t)(m->sym_value - tls_offset);
		} else {
			loc->kind = TP_TLS_DTV;
			loc->dtv_offset = s->g.dtvp.offset;
			loc->dtv_stride = s->g.dtv_slot.bits / 8;
			loc->dtv_val_offset = s->g.pointer_val.offset;
			loc->modid = modid;
			loc->sym_offset = m->sym_value;
		}
		fill_info(info, TLSLOC_LINK_MAP, m, tls_offset, modid);
		return 0;
	}
	if (err != -ENOENT)
		log_debug("tlsloc: link_map walk failed pid=%d err=%d", (int)pid, err);
	/* No loader data: the executable's own symbol is still computable. */
	if (s->exe >= 0 && s->mods[s->exe].defines_sym && s->mods[s->exe].has_tls) {
		m = &s->mods[s->exe];
		tls_offset = exe_static_tls_offset(m);
		loc->kind = TP_TLS_STATIC;
		loc->tp_offset = (int64_t)(m->sym_value - tls_offset);
		fill_info(info, TLSLOC_PT_TLS, m, tls_offset, 1);
		return 0;
	}
	return -EOPNOTSUPP;
}

int tlsloc_resolve(pid_t pid, unsigned flags, struct tp_tls_loc *loc, struct tlsloc_info *info)
{
	struct procmem_maps maps;
	bool any = false;
	struct scan s;
	int err;

	memset(loc, 0, sizeof(*loc));
	if (info)
		memset(info, 0, sizeof(*info));
#if !defined(__x86_64__)
	return -EOPNOTSUPP;
#endif
	err = elf_ready();
	if (err)
		return err;
	err = procmem_maps_read(pid, &maps);
	if (err)
		return err;
	if (!may_define_symbol(pid, &maps))
		goto out_maps; /* every file is known not to define it: TP_TLS_NONE */
	err = scan_modules(pid, &maps, flags, &s);
	if (err)
		goto out_maps;
	for (size_t i = 0; i < s.n; i++)
		any |= s.mods[i].defines_sym;
	if (any)
		err = locate(pid, &s, flags, loc, info);
	if (err == -EOPNOTSUPP)
		log_debug("tlsloc: symbol defined but placement unknown pid=%d", (int)pid);
	free(s.mods);
out_maps:
	procmem_maps_free(&maps);
	return err;
}

uint64_t tlsloc_files_read(void)
{
	return files_read;
}

int tlsloc_read_pid(void *ctx, uint64_t addr, void *buf, size_t len)
{
	return procmem_read(*(pid_t *)ctx, addr, buf, len);
}

int tlsloc_eval(const struct tp_tls_loc *loc, uint64_t thread_pointer, tlsloc_read_fn read,
		void *ctx, uint64_t *ptr_addr)
{
	uint64_t dtv, block;
	int err;

	switch (loc->kind) {
	case TP_TLS_NONE:
		return -ENOENT;
	case TP_TLS_STATIC:
		*ptr_addr = thread_pointer + (uint64_t)loc->tp_offset;
		return 0;
	case TP_TLS_DTV:
		err = read(ctx, thread_pointer + loc->dtv_offset, &dtv, sizeof(dtv));
		if (err)
			return err;
		err = read(ctx, dtv + loc->modid * loc->dtv_stride + loc->dtv_val_offset, &block,
			   sizeof(block));
		if (err)
			return err;
		if (!block || block == GLIBC_TLS_DTV_UNALLOCATED)
			return -ENOENT;
		*ptr_addr = block + loc->sym_offset;
		return 0;
	}
	return -EINVAL;
}

int tlsloc_file_symbol(const char *path, const char *name, uint64_t *value, int *type)
{
	GElf_Sym sym;
	Elf *elf;
	int fd, found;

	if (elf_ready())
		return -ENOTSUP;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!elf || elf_kind(elf) != ELF_K_ELF) {
		if (elf)
			elf_end(elf);
		close(fd);
		return -ENOEXEC;
	}
	found = elf_find_symbol(elf, name, &sym);
	if (found) {
		*value = sym.st_value;
		*type = GELF_ST_TYPE(sym.st_info);
	}
	elf_end(elf);
	close(fd);
	return found;
}

int tlsloc_fd_symbols(int fd, const char *const *names, size_t n, uint64_t *values, uint64_t *sizes,
		      uint64_t *vaddr0)
{
	GElf_Sym sym;
	size_t nph = 0;
	Elf *elf;
	int found = 0;

	if (elf_ready())
		return -ENOTSUP;
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!elf || elf_kind(elf) != ELF_K_ELF) {
		if (elf)
			elf_end(elf);
		return -ENOEXEC;
	}
	*vaddr0 = 0;
	for (size_t i = 0; !elf_getphdrnum(elf, &nph) && i < nph; i++) {
		GElf_Phdr ph;

		if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_LOAD) {
			*vaddr0 = ph.p_vaddr - ph.p_offset; /* the first PT_LOAD: file offset 0 */
			break;
		}
	}
	for (size_t i = 0; i < n; i++) {
		values[i] = sizes[i] = 0;
		if (elf_find_symbol(elf, names[i], &sym)) {
			values[i] = sym.st_value;
			sizes[i] = sym.st_size;
			found++;
		}
	}
	elf_end(elf);
	return found;
}
