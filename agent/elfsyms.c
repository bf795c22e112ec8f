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
 * into memory); dwarf_getscopes() gives the inlined chain of an address.
 */
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <gelf.h>
#include <libelf.h>
#include <stdlib.h>
#include <string.h>

#include "buildid.h"
#include "elfsyms.h"

#define ELFSYMS_MAX_INLINE   32 /* nesting of inlined functions followed */
#define ELFSYMS_ALIAS_WINDOW 8	/* symbols looked back for one that encloses an address */

struct esym {
	uint64_t addr; /* st_value */
	uint32_t size; /* st_size, clamped; 0 = up to the next symbol */
	uint32_t name; /* offset of the name in names */
};

struct elfsyms {
	struct esym *syms;  /* sorted by address, one per address */
	size_t n;	    /* entries in syms */
	char *names;	    /* NUL-terminated names */
	size_t names_len;   /* bytes in names */
	Elf *elf;	    /* the file (kept while dwarf is open) */
	Elf *debug_elf;	    /* the separate debug file, or NULL */
	Dwarf *dwarf;	    /* debug info of elf or debug_elf, or NULL */
	bool has_aranges;   /* .debug_aranges present: dwarf_addrdie suffices */
	size_t dwarf_bytes; /* size of the debug sections: what libdw may read */
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

static void open_dwarf(struct elfsyms *es, const struct elfsyms_source *debug)
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
		es->dwarf = dwarf_begin_elf(candidates[i], DWARF_C_READ, NULL);
		if (es->dwarf)
			es->dwarf_bytes = debug_bytes(candidates[i], &es->has_aranges);
	}
}

struct elfsyms *elfsyms_load(const struct elfsyms_source *src, const struct elfsyms_source *debug,
			     bool lines)
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
		open_dwarf(es, debug);
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

size_t elfsyms_count(const struct elfsyms *es)
{
	return es->n;
}

bool elfsyms_has_lines(const struct elfsyms *es)
{
	return es->dwarf != NULL;
}

static bool covers(const struct elfsyms *es, size_t i, uint64_t vaddr)
{
	const struct esym *s = &es->syms[i];

	if (s->size > 0)
		return vaddr - s->addr < s->size;
	/* no size (hand-written assembly): up to the next symbol */
	return i + 1 < es->n && vaddr < es->syms[i + 1].addr;
}

const char *elfsyms_lookup(const struct elfsyms *es, uint64_t vaddr, uint64_t *start)
{
	size_t lo = 0, hi = es->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (es->syms[mid].addr <= vaddr)
			lo = mid + 1;
		else
			hi = mid;
	}
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

int elfsyms_lines(struct elfsyms *es, uint64_t vaddr, struct elfsyms_line *out, int max)
{
	Dwarf_Die cudie, *scopes = NULL, *fn[ELFSYMS_MAX_INLINE];
	Dwarf_Files *files = NULL;
	size_t nfiles = 0;
	const char *leaf_file = NULL;
	int leaf_line = 0, nscopes, nfn = 0, count;
	Dwarf_Line *dl;

	if (!es->dwarf || max < 1 || !find_cu(es, vaddr, &cudie))
		return 0;
	dl = dwarf_getsrc_die(&cudie, vaddr);
	if (dl) {
		leaf_file = dwarf_linesrc(dl, NULL, NULL);
		if (dwarf_lineno(dl, &leaf_line) != 0)
			leaf_line = 0;
	}
	/*
	 * dwarf_getscopes() continues past an inlined instance with the scopes
	 * of its abstract origin; the concrete callers come from the parents
	 * of the innermost function's DIE (dwarf_getscopes_die).
	 */
	nscopes = dwarf_getscopes(&cudie, vaddr, &scopes);
	for (int i = 0; i < nscopes; i++) {
		int tag = dwarf_tag(&scopes[i]);

		if (tag == DW_TAG_inlined_subroutine || tag == DW_TAG_subprogram) {
			Dwarf_Die innermost = scopes[i];

			free(scopes);
			scopes = NULL;
			nscopes = dwarf_getscopes_die(&innermost, &scopes);
			break;
		}
	}
	for (int i = 0; i < nscopes && nfn < ELFSYMS_MAX_INLINE; i++) {
		int tag = dwarf_tag(&scopes[i]);

		if (tag == DW_TAG_inlined_subroutine || tag == DW_TAG_subprogram)
			fn[nfn++] = &scopes[i];
		if (tag == DW_TAG_subprogram)
			break;
	}
	if (nfn == 0) {
		free(scopes);
		if (!leaf_file && leaf_line == 0)
			return 0;
		out[0].function = NULL;
		out[0].file = leaf_file;
		out[0].line = leaf_line;
		return 1;
	}
	if (dwarf_getsrcfiles(&cudie, &files, &nfiles) != 0)
		files = NULL;
	/* fn[0] is the innermost; out[0] the root, fn[nfn - 1] */
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
	free(scopes);
	return count;
}
