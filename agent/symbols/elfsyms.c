/*
 * elfsyms.c - one ELF file's function symbols, line tables and inlines.
 *
 * Files are opened with ELF_C_READ, not ELF_C_READ_MMAP: libelf then reads
 * what it needs with pread, so a file truncated or rewritten while we hold
 * it yields read errors, never SIGBUS, and only the sections used take
 * memory. Every libelf and libdw result is checked; a corrupt file gives
 * fewer symbols (or none), never a crash.
 *
 * The symbol table is an array of 16-byte entries sorted by address, with
 * one blob for the names: FUNC and IFUNC symbols of .symtab and .dynsym
 * (a stripped binary still has .dynsym), one entry per address. Aliases at
 * one address (getpid/__getpid) keep the name with fewer leading
 * underscores, then the strongest binding, so a frame reads as users write
 * the call.
 *
 * DWARF, when present, stays open (libdw reads the debug sections it needs
 * into memory, inflating compressed ones: a file whose compressed sections
 * inflate past the limits of elfinflate.h is refused before libdw opens it). The inlined chain of
 * an address comes from a per-unit index of its function DIEs, built by one walk of the unit the
 * first time an address falls in it: libdw's dwarf_getscopes() walks the unit's DIE tree again for
 * every address (25 us in a small unit, 250 us in a large one, each time), the index answers in
 * about a microsecond.
 */
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <gelf.h>
#include <libelf.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "buildid.h"
#include "elfinflate.h"
#include "elfsyms.h"

#define ELFSYMS_MAX_INLINE   32 /* nesting of inlined functions followed */
#define ELFSYMS_ALIAS_WINDOW 8	/* symbols looked back for one that encloses an address */

/* A function DIE with code in a unit: a subprogram or an inlined subroutine. */
struct cu_fn {
	Dwarf_Die die;	 /* valid while the Dwarf is open */
	uint32_t parent; /* index of the enclosing function, NO_PARENT for the outermost */
	uint32_t end;	 /* index after its subtree (the entries are in DIE order) */
	bool inlined;	 /* DW_TAG_inlined_subroutine */
};

/* One address range of an outermost function. */
struct cu_range {
	uint64_t lo, hi; /* [lo, hi) */
	uint32_t fn;	 /* index in cu_index.fns */
};

/* The function DIEs of one unit. */
struct cu_index {
	Dwarf_Off cu_off;	 /* offset of the unit's DIE: the key */
	struct cu_fn *fns;	 /* in DIE order */
	size_t nfns;		 /* entries in fns */
	struct cu_range *ranges; /* of the outermost functions, sorted by lo */
	size_t nranges;		 /* entries in ranges */
};

#define NO_PARENT UINT32_MAX

struct esym {
	uint64_t addr; /* st_value */
	uint32_t size; /* st_size, clamped; 0 = up to the next symbol */
	uint32_t name; /* offset of the name in names */
};

struct elfsyms {
	struct esym *syms;    /* sorted by address, one per address */
	size_t n;	      /* entries in syms */
	char *names;	      /* NUL-terminated names */
	size_t names_len;     /* bytes in names */
	Elf *elf;	      /* the file (kept while dwarf is open) */
	Elf *debug_elf;	      /* the separate debug file, or NULL */
	Dwarf *dwarf;	      /* debug info of elf or debug_elf, or NULL */
	bool has_aranges;     /* .debug_aranges present: dwarf_addrdie suffices */
	size_t dwarf_bytes;   /* size of the debug sections: what libdw may read */
	struct cu_index *cus; /* units indexed so far, in no order */
	size_t ncus, cus_cap; /* entries in cus, allocated */
};

/* A symbol while the table is built. */
struct raw_sym {
	uint64_t addr; /* st_value */
	uint64_t size; /* st_size */
	uint32_t name; /* offset in the scratch names */
	uint32_t rank; /* alias preference, lower wins */
};

static void elf_init(void)
{
	static bool done;

	if (!done) {
		elf_version(EV_CURRENT);
		done = true;
	}
}

static Elf *open_elf(const struct elfsyms_source *src)
{
	elf_init();
	if (src->fd >= 0)
		return elf_begin(src->fd, ELF_C_READ, NULL);
	return elf_memory(src->image, src->image_len);
}

static void read_sections(Elf *elf, struct elfsyms_header *h)
{
	size_t shstrndx;
	Elf_Scn *scn = NULL;

	if (elf_getshdrstrndx(elf, &shstrndx) != 0)
		return;
	while ((scn = elf_nextscn(elf, scn)) != NULL) {
		GElf_Shdr sh;
		const char *name;

		if (!gelf_getshdr(scn, &sh))
			continue;
		name = elf_strptr(elf, shstrndx, sh.sh_name);
		if (!name)
			continue;
		if (strcmp(name, ".gnu_debuglink") == 0) {
			Elf_Data *d = elf_getdata(scn, NULL);

			if (d && d->d_size > 0 && memchr(d->d_buf, '\0', d->d_size) &&
			    strlen(d->d_buf) < sizeof(h->debuglink))
				strcpy(h->debuglink, d->d_buf);
		} else if (strcmp(name, ".debug_info") == 0 && sh.sh_type != SHT_NOBITS) {
			h->has_debug_info = true;
		}
	}
}

int elfsyms_read_header(const struct elfsyms_source *src, struct elfsyms_header *h)
{
	Elf *elf = open_elf(src);
	size_t nph;
	int err = 0, n;

	memset(h, 0, sizeof(*h));
	if (!elf)
		return -ENOEXEC;
	if (elf_kind(elf) != ELF_K_ELF) {
		err = -ENOEXEC;
		goto out;
	}
	if (elf_getphdrnum(elf, &nph) != 0) {
		err = -EIO;
		goto out;
	}
	for (size_t i = 0; i < nph; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(elf, (int)i, &ph))
			continue;
		if (ph.p_type == PT_LOAD && h->nsegments < ELFSYMS_MAX_SEGMENTS) {
			struct elfsyms_segment *s = &h->segments[h->nsegments++];

			s->vaddr = ph.p_vaddr;
			s->offset = ph.p_offset;
			s->filesz = ph.p_filesz;
		}
	}
	n = buildid_from_elf(elf, h->build_id);
	h->build_id_len = n > 0 ? (size_t)n : 0; /* one too long counts as none */
	read_sections(elf, h);
	if (h->nsegments == 0)
		err = -EIO;
out:
	elf_end(elf);
	return err;
}

bool elfsyms_vaddr(const struct elfsyms_header *h, uint64_t off, uint64_t *vaddr)
{
	for (size_t i = 0; i < h->nsegments; i++) {
		const struct elfsyms_segment *s = &h->segments[i];

		if (off >= s->offset && off - s->offset < s->filesz) {
			*vaddr = off - s->offset + s->vaddr;
			return true;
		}
	}
	return false;
}

static uint32_t alias_rank(const char *name, unsigned char bind)
{
	uint32_t underscores = 0;

	while (name[underscores] == '_')
		underscores++;
	return underscores * 4 + (bind == STB_GLOBAL ? 0 : bind == STB_WEAK ? 1 : 2);
}

/* A growable buffer for the build. */
struct build {
	struct raw_sym *raw; /* symbols found so far */
	size_t n, cap;	     /* used and allocated entries in raw */
	char *names;	     /* their names */
	size_t names_len;    /* bytes used in names */
	size_t names_cap;    /* bytes allocated for names */
};

static int add_raw(struct build *b, const GElf_Sym *sym, const char *name)
{
	size_t len = strlen(name) + 1;

	if (b->n == b->cap) {
		size_t ncap = b->cap ? b->cap * 2 : 1024;
		struct raw_sym *nr = realloc(b->raw, ncap * sizeof(*nr));

		if (!nr)
			return -ENOMEM;
		b->raw = nr;
		b->cap = ncap;
	}
	if (b->names_len + len > b->names_cap) {
		size_t ncap = b->names_cap ? b->names_cap * 2 : 16384;
		char *nn;

		while (ncap < b->names_len + len)
			ncap *= 2;
		nn = realloc(b->names, ncap);
		if (!nn)
			return -ENOMEM;
		b->names = nn;
		b->names_cap = ncap;
	}
	if (b->names_len + len > UINT32_MAX)
		return -E2BIG;
	memcpy(b->names + b->names_len, name, len);
	b->raw[b->n].addr = sym->st_value;
	b->raw[b->n].size = sym->st_size;
	b->raw[b->n].name = (uint32_t)b->names_len;
	b->raw[b->n].rank = alias_rank(name, GELF_ST_BIND(sym->st_info));
	b->n++;
	b->names_len += len;
	return 0;
}

/* Adds the FUNC symbols of every section of type (SHT_SYMTAB or SHT_DYNSYM). */
static int add_symbols(struct build *b, Elf *elf, Elf64_Word type)
{
	Elf_Scn *scn = NULL;

	while ((scn = elf_nextscn(elf, scn)) != NULL) {
		GElf_Shdr sh;
		Elf_Data *data;
		size_t count;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != type || sh.sh_entsize == 0)
			continue;
		data = elf_getdata(scn, NULL);
		if (!data)
			continue;
		count = data->d_size / sh.sh_entsize;
		for (size_t i = 1; i < count; i++) {
			GElf_Sym sym;
			const char *name;
			unsigned char t;
			int err;

			if (!gelf_getsym(data, (int)i, &sym))
				break;
			t = GELF_ST_TYPE(sym.st_info);
			if ((t != STT_FUNC && t != STT_GNU_IFUNC) || sym.st_shndx == SHN_UNDEF ||
			    sym.st_value == 0)
				continue;
			name = elf_strptr(elf, sh.sh_link, sym.st_name);
			if (!name || !*name)
				continue;
			err = add_raw(b, &sym, name);
			if (err)
				return err;
		}
	}
	return 0;
}

static bool has_section_type(Elf *elf, Elf64_Word type)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;

	while ((scn = elf_nextscn(elf, scn)) != NULL) {
		if (gelf_getshdr(scn, &sh) && sh.sh_type == type && sh.sh_size > 0)
			return true;
	}
	return false;
}

static int cmp_raw(const void *a, const void *b)
{
	const struct raw_sym *x = a, *y = b;

	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	if (x->rank != y->rank)
		return x->rank < y->rank ? -1 : 1;
	return x->name < y->name ? -1 : x->name > y->name;
}

/* Sorts, keeps the preferred name per address, compacts names. */
static int finish_table(struct elfsyms *es, struct build *b)
{
	size_t names_len = 0, n = 0;

	if (b->n == 0)
		return 0;
	qsort(b->raw, b->n, sizeof(*b->raw), cmp_raw);
	es->syms = malloc(b->n * sizeof(*es->syms));
	es->names = malloc(b->names_len);
	if (!es->syms || !es->names)
		return -ENOMEM;
	for (size_t i = 0; i < b->n; i++) {
		const struct raw_sym *r = &b->raw[i];
		const char *name = b->names + r->name;
		size_t len = strlen(name) + 1;

		if (n > 0 && es->syms[n - 1].addr == r->addr) {
			/* an alias: keep the first (best) name, the largest size */
			if (r->size > es->syms[n - 1].size)
				es->syms[n - 1].size =
				    r->size > UINT32_MAX ? UINT32_MAX : (uint32_t)r->size;
			continue;
		}
		es->syms[n].addr = r->addr;
		es->syms[n].size = r->size > UINT32_MAX ? UINT32_MAX : (uint32_t)r->size;
		es->syms[n].name = (uint32_t)names_len;
		memcpy(es->names + names_len, name, len);
		names_len += len;
		n++;
	}
	es->n = n;
	es->names_len = names_len;
	/* give back what duplicates left unused */
	{
		struct esym *s = realloc(es->syms, n * sizeof(*s));
		char *nm = realloc(es->names, names_len);

		if (s)
			es->syms = s;
		if (nm)
			es->names = nm;
	}
	return 0;
}

/* Sums the sizes of the .debug_* sections: what libdw may read into memory. */
static size_t debug_bytes(Elf *elf, bool *has_aranges)
{
	size_t shstrndx, total = 0;
	Elf_Scn *scn = NULL;

	if (elf_getshdrstrndx(elf, &shstrndx) != 0)
		return 0;
	while ((scn = elf_nextscn(elf, scn)) != NULL) {
		GElf_Shdr sh;
		const char *name;

		if (!gelf_getshdr(scn, &sh))
			continue;
		name = elf_strptr(elf, shstrndx, sh.sh_name);
		if (name && strncmp(name, ".debug_", 7) == 0 && sh.sh_type != SHT_NOBITS) {
			total += sh.sh_size;
			if (strcmp(name, ".debug_aranges") == 0)
				*has_aranges = true;
		}
	}
	return total;
}

/*
 * Opens the DWARF of the file or of debug. -EFBIG (why filled) when the
 * one it would open has compressed sections that inflate past lim: libdw
 * inflates them whole.
 */
static int open_dwarf(struct elfsyms *es, const struct elfsyms_source *debug,
		      const struct elf_inflate_limits *lim, struct elf_inflate_refusal *why)
{
	Elf *candidates[2] = {es->elf, NULL};

	if (debug) {
		es->debug_elf = open_elf(debug);
		if (es->debug_elf && elf_kind(es->debug_elf) != ELF_K_ELF) {
			elf_end(es->debug_elf);
			es->debug_elf = NULL;
		}
		candidates[1] = es->debug_elf;
	}
	for (int i = 0; i < 2 && !es->dwarf; i++) {
		if (!candidates[i])
			continue;
		if (elf_inflate_check(candidates[i], lim, why))
			return -EFBIG;
		es->dwarf = dwarf_begin_elf(candidates[i], DWARF_C_READ, NULL);
		if (es->dwarf)
			es->dwarf_bytes = debug_bytes(candidates[i], &es->has_aranges);
	}
	return 0;
}

struct elfsyms *elfsyms_load(const struct elfsyms_source *src, const struct elfsyms_source *debug,
			     bool lines, const struct elf_inflate_limits *lim,
			     struct elf_inflate_refusal *why)
{
	struct elfsyms *es = calloc(1, sizeof(*es));
	struct build b = {0};
	int err = -ENOMEM;

	if (!es)
		goto out_err;
	es->elf = open_elf(src);
	if (!es->elf || elf_kind(es->elf) != ELF_K_ELF) {
		err = -ENOEXEC;
		goto out_free;
	}
	err = add_symbols(&b, es->elf, SHT_SYMTAB);
	if (!err)
		err = add_symbols(&b, es->elf, SHT_DYNSYM);
	if (!err && lines)
		err = open_dwarf(es, debug, lim, why);
	/* a stripped file whose debug file has the full .symtab */
	if (!err && debug && !has_section_type(es->elf, SHT_SYMTAB)) {
		Elf *d = es->debug_elf ? es->debug_elf : open_elf(debug);

		if (d && elf_kind(d) == ELF_K_ELF)
			err = add_symbols(&b, d, SHT_SYMTAB);
		if (d && d != es->debug_elf)
			elf_end(d);
	}
	if (!err)
		err = finish_table(es, &b);
	free(b.raw);
	free(b.names);
	if (err)
		goto out_free;
	if (!es->dwarf) {
		/* nothing reads the files any more: give back libelf's buffers */
		elf_end(es->elf);
		es->elf = NULL;
		elf_end(es->debug_elf);
		es->debug_elf = NULL;
	}
	return es;

out_free:
	elfsyms_free(es);
out_err:
	errno = -err;
	return NULL;
}

void elfsyms_free(struct elfsyms *es)
{
	if (!es)
		return;
	for (size_t i = 0; i < es->ncus; i++) {
		free(es->cus[i].fns);
		free(es->cus[i].ranges);
	}
	free(es->cus);
	if (es->dwarf)
		dwarf_end(es->dwarf);
	elf_end(es->debug_elf);
	elf_end(es->elf);
	free(es->syms);
	free(es->names);
	free(es);
}

size_t elfsyms_bytes(const struct elfsyms *es)
{
	return sizeof(*es) + es->n * sizeof(*es->syms) + es->names_len + es->dwarf_bytes;
}

bool elfsyms_has_lines(const struct elfsyms *es)
{
	return es->dwarf != NULL;
}

size_t elfsyms_count(const struct elfsyms *es)
{
	return es->n;
}

static bool covers(const struct elfsyms *es, size_t i, uint64_t vaddr)
{
	const struct esym *s = &es->syms[i];

	if (s->size > 0)
		return vaddr - s->addr < s->size;
	/* no size (hand-written assembly): up to the next symbol */
	return i + 1 < es->n && vaddr < es->syms[i + 1].addr;
}

/*
 * How many of the n entries at arr (stride bytes apart, sorted by a
 * uint64_t key at offset 0) have a key at or below v.
 */
static size_t count_at_or_below(const void *arr, size_t n, size_t stride, uint64_t v)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		uint64_t key;

		memcpy(&key, (const char *)arr + mid * stride, sizeof(key));
		if (key <= v)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

_Static_assert(offsetof(struct esym, addr) == 0, "esym sorted by its first member");
_Static_assert(offsetof(struct cu_range, lo) == 0, "cu_range sorted by its first member");

const char *elfsyms_lookup(const struct elfsyms *es, uint64_t vaddr, uint64_t *start)
{
	size_t lo = count_at_or_below(es->syms, es->n, sizeof(*es->syms), vaddr);

	/* lo - 1 is the last symbol at or below vaddr; a nested one may hide an enclosing one */
	for (size_t k = 0; k < ELFSYMS_ALIAS_WINDOW && lo > k; k++) {
		size_t i = lo - 1 - k;

		if (covers(es, i, vaddr)) {
			*start = es->syms[i].addr;
			return es->names + es->syms[i].name;
		}
	}
	return NULL;
}

/* The compilation unit containing vaddr. */
static bool find_cu(struct elfsyms *es, uint64_t vaddr, Dwarf_Die *cudie)
{
	Dwarf_Off off = 0, next;
	size_t hsize;

	if (dwarf_addrdie(es->dwarf, vaddr, cudie))
		return true;
	if (es->has_aranges)
		return false;
	/* no .debug_aranges (some compilers omit it): walk the units */
	while (dwarf_nextcu(es->dwarf, off, &next, &hsize, NULL, NULL, NULL) == 0) {
		if (dwarf_offdie(es->dwarf, off + hsize, cudie) && dwarf_haspc(cudie, vaddr) > 0)
			return true;
		off = next;
	}
	return false;
}

static int call_site(Dwarf_Die *die, Dwarf_Files *files, size_t nfiles, const char **file)
{
	Dwarf_Attribute attr;
	Dwarf_Word v;
	int line = 0;

	*file = NULL;
	if (files && dwarf_formudata(dwarf_attr(die, DW_AT_call_file, &attr), &v) == 0 &&
	    v < nfiles)
		*file = dwarf_filesrc(files, v, NULL, NULL);
	if (dwarf_formudata(dwarf_attr(die, DW_AT_call_line, &attr), &v) == 0 && v <= INT32_MAX)
		line = (int)v;
	return line;
}

/* ---- the per-unit function index ---- */

struct index_build {
	struct cu_fn *fns;
	size_t n, cap;
	struct cu_range *ranges;
	size_t nranges, ranges_cap;
	bool failed; /* out of memory */
};

static bool push(void **arr, size_t *cap, size_t n, size_t size)
{
	void *p;
	size_t c;

	if (n < *cap)
		return true;
	c = *cap ? *cap * 2 : 64;
	p = realloc(*arr, c * size);
	if (!p)
		return false;
	*arr = p;
	*cap = c;
	return true;
}

static void add_ranges(struct index_build *b, Dwarf_Die *die, uint32_t fn)
{
	Dwarf_Addr base, lo, hi;
	ptrdiff_t off = 0;

	while ((off = dwarf_ranges(die, off, &base, &lo, &hi)) > 0) {
		if (hi <= lo)
			continue;
		if (!push((void **)&b->ranges, &b->ranges_cap, b->nranges, sizeof(*b->ranges))) {
			b->failed = true;
			return;
		}
		b->ranges[b->nranges++] = (struct cu_range){.lo = lo, .hi = hi, .fn = fn};
	}
}

/* DIEs whose children may hold functions with code. */
static bool may_hold_functions(int tag)
{
	switch (tag) {
	case DW_TAG_subprogram:
	case DW_TAG_inlined_subroutine:
	case DW_TAG_lexical_block:
	case DW_TAG_namespace:
	case DW_TAG_module:
	case DW_TAG_class_type:
	case DW_TAG_structure_type:
	case DW_TAG_union_type:
	case DW_TAG_try_block:
	case DW_TAG_catch_block:
		return true;
	default:
		return false;
	}
}

/*
 * Adds the function DIEs among parent's children, and their descendants,
 * in DIE order; fn is the enclosing function's index (NO_PARENT outside
 * any). Depth is bounded: a corrupt unit cannot recurse without end.
 */
static void index_children(struct index_build *b, Dwarf_Die *parent, uint32_t fn, int depth)
{
	Dwarf_Die child;

	if (depth > 64 || dwarf_child(parent, &child) != 0)
		return;
	do {
		int tag = dwarf_tag(&child);
		uint32_t self = fn;

		if ((tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine) &&
		    (dwarf_hasattr(&child, DW_AT_low_pc) || dwarf_hasattr(&child, DW_AT_ranges))) {
			if (b->n >= NO_PARENT ||
			    !push((void **)&b->fns, &b->cap, b->n, sizeof(*b->fns))) {
				b->failed = true;
				return;
			}
			self = (uint32_t)b->n++;
			b->fns[self] = (struct cu_fn){.die = child,
						      .parent = fn,
						      .inlined = tag == DW_TAG_inlined_subroutine};
			if (fn == NO_PARENT)
				add_ranges(b, &child, self);
		}
		if (may_hold_functions(tag))
			index_children(b, &child, self, depth + 1);
		if (self != fn)
			b->fns[self].end = (uint32_t)b->n;
		if (b->failed)
			return;
	} while (dwarf_siblingof(&child, &child) == 0);
}

static int range_cmp(const void *a, const void *b)
{
	const struct cu_range *x = a, *y = b;

	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* The index of the unit cudie, built on first use; NULL without memory. */
static const struct cu_index *cu_index_of(struct elfsyms *es, Dwarf_Die *cudie)
{
	Dwarf_Off off = dwarf_dieoffset(cudie);
	struct index_build b = {0};
	struct cu_index *ci;

	for (size_t i = 0; i < es->ncus; i++)
		if (es->cus[i].cu_off == off)
			return &es->cus[i];
	if (!push((void **)&es->cus, &es->cus_cap, es->ncus, sizeof(*es->cus)))
		return NULL;
	index_children(&b, cudie, NO_PARENT, 0);
	if (b.failed) {
		free(b.fns);
		free(b.ranges);
		return NULL;
	}
	if (b.nranges > 1)
		qsort(b.ranges, b.nranges, sizeof(*b.ranges), range_cmp);
	ci = &es->cus[es->ncus++];
	*ci = (struct cu_index){
	    .cu_off = off, .fns = b.fns, .nfns = b.n, .ranges = b.ranges, .nranges = b.nranges};
	return ci;
}

/* The outermost function containing vaddr, or NO_PARENT. */
static uint32_t outermost_fn(const struct cu_index *ci, uint64_t vaddr)
{
	size_t lo = count_at_or_below(ci->ranges, ci->nranges, sizeof(*ci->ranges), vaddr);
	/* ranges[lo - 1] starts at or below vaddr; an overlapping one may start earlier */
	for (size_t k = 0; k < ELFSYMS_ALIAS_WINDOW && lo > k; k++) {
		const struct cu_range *r = &ci->ranges[lo - 1 - k];

		if (vaddr < r->hi)
			return r->fn;
	}
	return NO_PARENT;
}

/* The innermost function inside fns[outer] containing vaddr (outer itself if none). */
static uint32_t innermost_fn(const struct cu_index *ci, uint32_t outer, uint64_t vaddr)
{
	uint32_t cur = outer, i = outer + 1;

	while (i < ci->fns[cur].end) {
		const struct cu_fn *f = &ci->fns[i];

		if (f->parent == cur && dwarf_haspc((Dwarf_Die *)&f->die, vaddr) > 0) {
			cur = i++; /* descend: its children follow it */
		} else {
			i = f->end > i ? f->end : i + 1; /* skip its subtree */
		}
	}
	return cur;
}

int elfsyms_lines(struct elfsyms *es, uint64_t vaddr, struct elfsyms_line *out, int max)
{
	Dwarf_Die cudie, *fn[ELFSYMS_MAX_INLINE];
	const struct cu_index *ci;
	Dwarf_Files *files = NULL;
	size_t nfiles = 0;
	const char *leaf_file = NULL;
	int leaf_line = 0, nfn = 0, count;
	uint32_t outer, cur;
	Dwarf_Line *dl;

	if (!es->dwarf || max < 1 || !find_cu(es, vaddr, &cudie))
		return 0;
	dl = dwarf_getsrc_die(&cudie, vaddr);
	if (dl) {
		leaf_file = dwarf_linesrc(dl, NULL, NULL);
		if (dwarf_lineno(dl, &leaf_line) != 0)
			leaf_line = 0;
	}
	ci = cu_index_of(es, &cudie);
	outer = ci ? outermost_fn(ci, vaddr) : NO_PARENT;
	if (outer == NO_PARENT) {
		if (!leaf_file && leaf_line == 0)
			return 0;
		out[0].function = NULL;
		out[0].file = leaf_file;
		out[0].line = leaf_line;
		return 1;
	}
	/* fn[0] is the innermost, up to the first function that is not inlined */
	for (cur = innermost_fn(ci, outer, vaddr); cur != NO_PARENT && nfn < ELFSYMS_MAX_INLINE;
	     cur = ci->fns[cur].parent) {
		fn[nfn++] = (Dwarf_Die *)&ci->fns[cur].die;
		if (!ci->fns[cur].inlined)
			break;
	}
	if (dwarf_getsrcfiles(&cudie, &files, &nfiles) != 0)
		files = NULL;
	/* out[0] is the root, fn[nfn - 1] */
	count = nfn < max ? nfn : max;
	for (int k = 0; k < count; k++) {
		int j = nfn - 1 - k;

		out[k].function = dwarf_diename(fn[j]);
		if (j == 0) {
			out[k].file = leaf_file;
			out[k].line = leaf_line;
		} else {
			out[k].line = call_site(fn[j - 1], files, nfiles, &out[k].file);
		}
	}
	return count;
}
