/*
 * cfi.c - compact x86-64 unwind tables from .eh_frame / .debug_frame
 * (cfi.h). libdw enumerates the entries (dwarf_next_cfi) and interprets
 * each FDE's instructions (dwarf_cfi_addrframe); this file decodes the FDE
 * ranges, checks them against each other and the executable segments, and
 * turns every frame state into a 12-byte row.
 */
#include "cfi.h"
#include "elfinflate.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* DWARF register numbers of x86-64 (System V psABI, figure 3.36). */
enum { X86_64_RBP = 6, X86_64_RSP = 7, X86_64_RA = 16 };

_Static_assert(sizeof(struct cfi_row) == 12, "a row stays 12 bytes");

struct cie_info {
	uint64_t off;
	uint8_t enc; /* the FDE pointer encoding (augmentation 'R') */
	bool ok;     /* augmentation understood */
};

struct fde_info {
	uint64_t cie_off;
	const uint8_t *p, *end; /* initial_location .. end of the entry */
	uint64_t start, end_addr;
	bool bad;
};

struct builder {
	const struct cfi_opts *opts;
	struct cfi_stats *st;
	Dwarf_CFI *cfi;
	const unsigned char *ident;
	Elf_Data *data;	   /* the CFI section's raw bytes */
	uint64_t sec_addr; /* its vaddr (pc-relative pointers) */
	bool eh;
	uint64_t base, exec_end;
	struct cie_info *cies;
	size_t ncies, cap_cies;
	struct fde_info *fdes;
	size_t nfdes, cap_fdes;
	struct cfi_row *rows;
	size_t nrows, cap_rows;
	uint64_t work;
};

static int grow(void **p, size_t *cap, size_t n, size_t size)
{
	if (n < *cap)
		return 0;
	size_t ncap = *cap ? *cap * 2 : 64;
	void *q = realloc(*p, ncap * size);
	if (!q)
		return -1;
	*p = q;
	*cap = ncap;
	return 0;
}

/* ---- pointer encodings (DW_EH_PE_*) ---- */

static int uleb(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
	uint64_t r = 0;
	for (unsigned shift = 0; *p < end && shift < 64; shift += 7) {
		uint8_t b = *(*p)++;
		r |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			*v = r;
			return 0;
		}
	}
	return -1;
}

/* Reads the value of encoding enc's format (no application); -1 if not supported. */
static int read_fmt(const uint8_t **p, const uint8_t *end, uint8_t enc, bool le, uint64_t *v)
{
	unsigned n;
	bool sign = false;
	switch (enc & 0x0f) {
	case DW_EH_PE_absptr:
	case DW_EH_PE_udata8:
	case DW_EH_PE_sdata8:
		n = 8;
		break;
	case DW_EH_PE_udata4:
		n = 4;
		break;
	case DW_EH_PE_sdata4:
		n = 4, sign = true;
		break;
	case DW_EH_PE_udata2:
		n = 2;
		break;
	case DW_EH_PE_sdata2:
		n = 2, sign = true;
		break;
	case DW_EH_PE_uleb128:
		return uleb(p, end, v);
	default:
		return -1;
	}
	if ((size_t)(end - *p) < n)
		return -1;
	uint64_t r = 0;
	for (unsigned i = 0; i < n; i++)
		r |= (uint64_t)(*p)[le ? i : n - 1 - i] << (8 * i);
	if (sign && n < 8 && (r >> (8 * n - 1)) & 1)
		r |= ~0ull << (8 * n);
	*p += n;
	*v = r;
	return 0;
}

/* The FDE pointer encoding of a CIE from its augmentation; -1 if not understood. */
static int cie_fde_encoding(const Dwarf_CIE *cie, bool le, uint8_t *enc)
{
	const char *a = cie->augmentation;
	*enc = DW_EH_PE_absptr;
	if (!a || a[0] == '\0')
		return 0;
	if (a[0] != 'z' || !cie->augmentation_data)
		return -1;
	const uint8_t *p = cie->augmentation_data, *end = p + cie->augmentation_data_size;
	for (a++; *a; a++) {
		uint64_t skip;
		switch (*a) {
		case 'R':
			if (p >= end)
				return -1;
			*enc = *p++;
			return 0;
		case 'L':
			if (p >= end)
				return -1;
			p++;
			break;
		case 'P':
			if (p >= end)
				return -1;
			uint8_t pe = *p++;
			if (pe == DW_EH_PE_omit || read_fmt(&p, end, pe, le, &skip) != 0)
				return -1;
			break;
		case 'S':
		case 'B':
		case 'G':
			break;
		default:
			return -1; /* 'R' may follow, but where is unknown */
		}
	}
	return 0;
}

/* ---- entries ---- */

static int add_cie(struct builder *b, uint64_t off, const Dwarf_CIE *cie)
{
	if (grow((void **)&b->cies, &b->cap_cies, b->ncies, sizeof(*b->cies)) != 0)
		return -1;
	struct cie_info *c = &b->cies[b->ncies++];
	c->off = off;
	c->ok = cie_fde_encoding(cie, b->ident[EI_DATA] == ELFDATA2LSB, &c->enc) == 0;
	b->st->cies++;
	return 0;
}

static int add_fde(struct builder *b, const Dwarf_FDE *fde)
{
	if (grow((void **)&b->fdes, &b->cap_fdes, b->nfdes, sizeof(*b->fdes)) != 0)
		return -1;
	struct fde_info *f = &b->fdes[b->nfdes++];
	memset(f, 0, sizeof(*f));
	f->cie_off = fde->CIE_pointer;
	f->p = fde->start;
	f->end = fde->end;
	b->st->fdes++;
	return 0;
}

/* Every CIE and FDE of the section, in section order; stops at the first entry it cannot skip. */
static int read_entries(struct builder *b)
{
	Dwarf_Off off = 0;
	const uint8_t *lo = b->data->d_buf, *hi = lo + b->data->d_size;
	for (;;) {
		Dwarf_Off next = (Dwarf_Off)-1;
		Dwarf_CFI_Entry e;
		int rc = dwarf_next_cfi(b->ident, b->data, b->eh, off, &next, &e);
		if (rc == 1)
			return 0;
		if (rc != 0) {
			b->st->err_entry++;
			if (next == (Dwarf_Off)-1 || next <= off || next > b->data->d_size)
				return 0;
			off = next;
			continue;
		}
		if (next <= off || next > b->data->d_size) {
			b->st->err_entry++;
			return 0;
		}
		if (dwarf_cfi_cie_p(&e)) {
			if (add_cie(b, off, &e.cie) != 0)
				return -1;
		} else if (e.fde.start < lo || e.fde.end > hi || e.fde.start > e.fde.end) {
			b->st->err_entry++;
		} else if (add_fde(b, &e.fde) != 0) {
			return -1;
		}
		off = next;
	}
}

static int cmp_cie(const void *a, const void *b)
{
	uint64_t x = ((const struct cie_info *)a)->off, y = ((const struct cie_info *)b)->off;
	return x < y ? -1 : x > y;
}

static const struct cie_info *find_cie(const struct builder *b, uint64_t off)
{
	struct cie_info key = {.off = off};
	return bsearch(&key, b->cies, b->ncies, sizeof(*b->cies), cmp_cie);
}

/* Decodes an FDE's [start, end) and checks it lies in the executable range. */
static void decode_range(struct builder *b, struct fde_info *f)
{
	const struct cie_info *c = find_cie(b, f->cie_off);
	if (!c || !c->ok) {
		b->st->err_cie++;
		f->bad = true;
		return;
	}
	bool le = b->ident[EI_DATA] == ELFDATA2LSB;
	uint8_t enc = c->enc, app = enc & 0x70;
	uint64_t field = b->sec_addr + (uint64_t)(f->p - (const uint8_t *)b->data->d_buf);
	const uint8_t *p = f->p;
	uint64_t start, len;
	if ((enc & DW_EH_PE_indirect) || (app != 0 && app != DW_EH_PE_pcrel) ||
	    (app == DW_EH_PE_pcrel && !b->eh) || read_fmt(&p, f->end, enc, le, &start) != 0 ||
	    read_fmt(&p, f->end, enc & 0x0f, le, &len) != 0) {
		b->st->err_encoding++;
		f->bad = true;
		return;
	}
	if (app == DW_EH_PE_pcrel)
		start += field;
	f->start = start;
	f->end_addr = start + len;
	if (len == 0) {
		f->bad = true; /* covers nothing: not an error */
		return;
	}
	if (f->end_addr < start || start < b->base || f->end_addr > b->exec_end ||
	    f->end_addr - b->base > UINT32_MAX) {
		b->st->err_range++;
		f->bad = true;
	}
}

static int cmp_fde(const void *a, const void *b)
{
	const struct fde_info *x = a, *y = b;
	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->end_addr < y->end_addr ? -1 : x->end_addr > y->end_addr;
}

/* Sorts the usable FDEs by address and drops every one overlapping another:
 * one of them is wrong and nothing tells which. */
static void drop_overlaps(struct builder *b)
{
	size_t n = 0;
	for (size_t i = 0; i < b->nfdes; i++)
		if (!b->fdes[i].bad)
			b->fdes[n++] = b->fdes[i];
	b->nfdes = n;
	qsort(b->fdes, n, sizeof(*b->fdes), cmp_fde);
	size_t owner = 0; /* the FDE reaching furthest so far */
	for (size_t i = 1; i < n; i++) {
		if (b->fdes[i].start < b->fdes[owner].end_addr) {
			if (!b->fdes[owner].bad)
				b->st->err_overlap++;
			if (!b->fdes[i].bad)
				b->st->err_overlap++;
			b->fdes[owner].bad = b->fdes[i].bad = true;
		}
		if (b->fdes[i].end_addr > b->fdes[owner].end_addr)
			owner = i;
	}
}

/* ---- rows ---- */

static bool same_rules(const struct cfi_row *a, const struct cfi_row *b)
{
	return a->cfa == b->cfa && a->cfa_off == b->cfa_off && a->rbp_off == b->rbp_off &&
	       a->flags == b->flags;
}

/* Appends a row, replacing a gap at the same address and merging into an
 * identical predecessor. */
static int push_row(struct builder *b, const struct cfi_row *r)
{
	if (b->nrows > 0 && b->rows[b->nrows - 1].addr == r->addr)
		b->nrows--; /* only a gap can end where a row starts */
	if (b->nrows > 0 && same_rules(&b->rows[b->nrows - 1], r)) {
		b->st->rows_merged++;
		return 0;
	}
	if (b->nrows >= b->opts->max_rows) {
		errno = E2BIG;
		return -1;
	}
	if (grow((void **)&b->rows, &b->cap_rows, b->nrows, sizeof(*b->rows)) != 0)
		return -1;
	b->rows[b->nrows++] = *r;
	return 0;
}

/*
 * ld's CFA expression for lazy PLT entries (push; jmp): rsp + N, plus 8
 * once the entry's push ran, at byte K of each 16-byte entry:
 * breg7 N; breg16 0; lit15; and; litK; ge; lit3; shl; plus.
 */
static bool plt_cfa(const Dwarf_Op *o, size_t n, struct cfi_row *r)
{
	if (n != 9 || o[0].atom != DW_OP_breg7 || o[1].atom != DW_OP_breg16 || o[1].number != 0 ||
	    o[2].atom != DW_OP_lit15 || o[3].atom != DW_OP_and || o[4].atom < DW_OP_lit0 ||
	    o[4].atom > DW_OP_lit15 || o[5].atom != DW_OP_ge || o[6].atom != DW_OP_lit3 ||
	    o[7].atom != DW_OP_shl || o[8].atom != DW_OP_plus)
		return false;
	int64_t off = (int64_t)o[0].number;
	if (off < 0 || off > 64)
		return false;
	r->cfa = CFI_CFA_PLT;
	r->cfa_off = (int32_t)off;
	r->rbp_off = (int16_t)(o[4].atom - DW_OP_lit0);
	return true;
}

/*
 * The CFA OpenSSL's assembly (bignum, SHA, AES) gives its bodies, where
 * the caller's rsp is saved in the frame: breg7 N; deref; plus_uconst 8.
 */
static bool deref_cfa(const Dwarf_Op *o, size_t n, struct cfi_row *r)
{
	if (n != 3 || o[0].atom != DW_OP_breg7 || o[1].atom != DW_OP_deref ||
	    o[2].atom != DW_OP_plus_uconst || o[2].number != 8)
		return false;
	int64_t off = (int64_t)o[0].number;
	if (off < INT32_MIN || off > INT32_MAX)
		return false;
	r->cfa = CFI_CFA_DEREF_RSP;
	r->cfa_off = (int32_t)off;
	return true;
}

static void rule_cfa(Dwarf_Frame *fr, struct cfi_row *r)
{
	Dwarf_Op *ops;
	size_t nops;
	r->cfa = CFI_CFA_UNSUPPORTED;
	if (dwarf_frame_cfa(fr, &ops, &nops) != 0)
		return;
	if (plt_cfa(ops, nops, r) || deref_cfa(ops, nops, r))
		return;
	if (nops != 1 || ops[0].atom != DW_OP_bregx)
		return;
	int64_t off = (int64_t)ops[0].number2;
	if (off < INT32_MIN || off > INT32_MAX)
		return;
	if (ops[0].number == X86_64_RSP)
		r->cfa = CFI_CFA_RSP;
	else if (ops[0].number == X86_64_RBP)
		r->cfa = CFI_CFA_RBP;
	else if (ops[0].number < 16)
		r->cfa = (uint8_t)(CFI_CFA_REG0 + ops[0].number);
	else
		return;
	r->cfa_off = (int32_t)off;
}

/* Register regno's rule: 0 same value, 1 undefined, 2 at CFA + *off, -1 anything else. */
static int rule_reg(Dwarf_Frame *fr, int regno, int64_t *off)
{
	Dwarf_Op mem[3], *ops;
	size_t nops;
	if (dwarf_frame_register(fr, regno, mem, &ops, &nops) != 0)
		return -1;
	if (nops == 0)
		return ops == NULL ? 0 : 1;
	if (ops != mem || ops[0].atom != DW_OP_call_frame_cfa)
		return -1;
	if (nops == 1) {
		*off = 0;
		return 2;
	}
	if (nops == 2 && ops[1].atom == DW_OP_plus_uconst) {
		*off = (int64_t)ops[1].number;
		return 2;
	}
	return -1; /* a value rule (DW_OP_stack_value) */
}

static void frame_row(Dwarf_Frame *fr, int ra_reg, bool signal, struct cfi_row *r)
{
	int64_t off = 0;
	rule_cfa(fr, r);
	switch (rule_reg(fr, X86_64_RBP, &off)) {
	case 0:
		r->flags = CFI_RBP_SAME;
		break;
	case 1:
		r->flags = CFI_RBP_UNDEFINED;
		break;
	case 2:
		if (off >= INT16_MIN && off <= INT16_MAX && r->cfa != CFI_CFA_PLT) {
			r->flags = CFI_RBP_AT_CFA;
			r->rbp_off = (int16_t)off;
			break;
		}
		/* fall through */
	default:
		r->flags = CFI_RBP_UNSUPPORTED;
	}
	enum cfi_ra ra = CFI_RA_UNSUPPORTED;
	if (ra_reg == X86_64_RA) {
		int k = rule_reg(fr, X86_64_RA, &off);
		if (k == 1)
			ra = CFI_RA_UNDEFINED;
		else if (k == 2 && off == -8)
			ra = CFI_RA_CFA_MINUS_8;
	}
	r->flags |= (uint8_t)(ra << CFI_RA_SHIFT);
	if (signal)
		r->flags |= CFI_F_SIGNAL;
}

/* The rows of one FDE, then a gap at its end. Returns 0, 1 when the FDE
 * was dropped (counted), -1 when the build stops at a limit (the rows
 * before this FDE stay), -2 when memory ran out. */
static int fde_rows(struct builder *b, const struct fde_info *f)
{
	size_t n0 = b->nrows, nfde = 0;
	struct cfi_row last = n0 ? b->rows[n0 - 1] : (struct cfi_row){0};
	uint64_t cost = (uint64_t)(f->end - f->p) + 16;
	int rc = 0;
	for (uint64_t addr = f->start; addr < f->end_addr && rc == 0;) {
		if (++nfde > b->opts->max_fde_rows) {
			b->st->err_fde_rows++;
			rc = 1;
			break;
		}
		b->work += cost;
		if (b->work > b->opts->max_work) {
			b->st->err_work++;
			rc = -1;
			break;
		}
		Dwarf_Frame *fr = NULL;
		Dwarf_Addr s, e;
		bool signal = false;
		if (dwarf_cfi_addrframe(b->cfi, addr, &fr) != 0) {
			b->st->err_frame++;
			rc = 1;
			break;
		}
		int ra_reg = dwarf_frame_info(fr, &s, &e, &signal);
		if (ra_reg < 0 || s > addr || e <= addr || s < f->start || e > f->end_addr) {
			free(fr);
			b->st->err_frame++;
			rc = 1;
			break;
		}
		struct cfi_row r = {.addr = (uint32_t)(addr - b->base)};
		frame_row(fr, ra_reg, signal, &r);
		free(fr);
		if (push_row(b, &r) != 0) {
			rc = errno == E2BIG ? (b->st->err_limit++, -1) : -2;
			break;
		}
		addr = e;
	}
	if (rc == 0) {
		struct cfi_row gap = {.addr = (uint32_t)(f->end_addr - b->base),
				      .cfa = CFI_CFA_GAP};
		if (push_row(b, &gap) == 0)
			return 0;
		rc = errno == E2BIG ? (b->st->err_limit++, -1) : -2;
	}
	b->nrows = n0; /* roll back: no half FDE in the table */
	if (n0)
		b->rows[n0 - 1] = last;
	return rc;
}

static int build_rows(struct builder *b)
{
	for (size_t i = 0; i < b->nfdes; i++) {
		if (b->fdes[i].bad)
			continue;
		int rc = fde_rows(b, &b->fdes[i]);
		if (rc == -2)
			return -1;
		if (rc < 0)
			return 0;
		if (rc == 0)
			b->st->fdes_used++;
	}
	return 0;
}

/* ---- the file ---- */

/* [base, exec_end): the executable PT_LOAD segments' span. */
static int exec_range(Elf *elf, uint64_t *base, uint64_t *end)
{
	size_t n;
	if (elf_getphdrnum(elf, &n) != 0)
		return -1;
	*base = UINT64_MAX;
	*end = 0;
	for (size_t i = 0; i < n; i++) {
		GElf_Phdr ph;
		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD || !(ph.p_flags & PF_X))
			continue;
		if (ph.p_vaddr < *base)
			*base = ph.p_vaddr;
		if (ph.p_vaddr + ph.p_memsz > *end)
			*end = ph.p_vaddr + ph.p_memsz;
	}
	return *base < *end ? 0 : -1;
}

static Elf_Scn *find_section(Elf *elf, const char *name)
{
	size_t shstrndx;
	if (elf_getshdrstrndx(elf, &shstrndx) != 0)
		return NULL;
	for (Elf_Scn *scn = elf_nextscn(elf, NULL); scn; scn = elf_nextscn(elf, scn)) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh) || sh.sh_size == 0 ||
		    (sh.sh_type != SHT_PROGBITS && sh.sh_type != SHT_X86_64_UNWIND))
			continue;
		const char *n = elf_strptr(elf, shstrndx, sh.sh_name);
		if (n && strcmp(n, name) == 0)
			return scn;
	}
	return NULL;
}

/* Opens the CFI: .eh_frame through dwarf_getcfi_elf, else .debug_frame
 * through dwarf_getcfi; fills b->cfi, data, sec_addr, eh. */
static int open_cfi(struct builder *b, Elf *elf, Dwarf **dw, enum cfi_source *src)
{
	Elf_Scn *scn = find_section(elf, ".eh_frame");
	b->eh = scn != NULL;
	if (!scn)
		scn = find_section(elf, ".debug_frame");
	GElf_Shdr sh;
	if (!scn || !gelf_getshdr(scn, &sh)) {
		errno = ENOENT;
		return -1;
	}
	/* libelf (this section) and libdw (.debug_*) inflate whole: bounded first */
	if ((!b->eh || (sh.sh_flags & SHF_COMPRESSED)) && elf_inflate_check(elf, NULL, NULL)) {
		errno = EFBIG;
		return -1;
	}
	if ((sh.sh_flags & SHF_COMPRESSED) && elf_compress(scn, 0, 0) < 0) {
		errno = EINVAL;
		return -1;
	}
	b->data = elf_getdata(scn, NULL);
	b->sec_addr = sh.sh_addr;
	if (!b->data || !b->data->d_buf) {
		errno = EINVAL;
		return -1;
	}
	if (b->eh) {
		b->cfi = dwarf_getcfi_elf(elf);
		*src = CFI_SOURCE_EH_FRAME;
	} else {
		*dw = dwarf_begin_elf(elf, DWARF_C_READ, NULL);
		b->cfi = *dw ? dwarf_getcfi(*dw) : NULL;
		*src = CFI_SOURCE_DEBUG_FRAME;
	}
	if (!b->cfi) {
		errno = EINVAL;
		return -1;
	}
	return 0;
}

static void count_rows(struct cfi_table *t)
{
	t->stats.rows = t->nrows;
	for (size_t i = 0; i < t->nrows; i++) {
		const struct cfi_row *r = &t->rows[i];
		if (r->cfa == CFI_CFA_GAP)
			continue;
		if (!cfi_row_supported(r))
			t->stats.rows_unsupported++;
		if (r->flags & CFI_F_SIGNAL)
			t->stats.rows_signal++;
	}
}

static int build(struct builder *b, Elf *elf, struct cfi_table *out)
{
	Dwarf *dw = NULL;
	GElf_Ehdr eh;
	int rc = -1;
	b->ident = (const unsigned char *)elf_getident(elf, NULL);
	if (elf_kind(elf) != ELF_K_ELF || !gelf_getehdr(elf, &eh) || !b->ident ||
	    eh.e_machine != EM_X86_64 || b->ident[EI_CLASS] != ELFCLASS64) {
		errno = ENOEXEC;
		return -1;
	}
	if (exec_range(elf, &b->base, &b->exec_end) != 0) {
		errno = ENOEXEC;
		return -1;
	}
	if (open_cfi(b, elf, &dw, &out->source) != 0)
		goto out;
	if (read_entries(b) != 0)
		goto out;
	qsort(b->cies, b->ncies, sizeof(*b->cies), cmp_cie);
	for (size_t i = 0; i < b->nfdes; i++)
		decode_range(b, &b->fdes[i]);
	drop_overlaps(b);
	if (build_rows(b) != 0)
		goto out;
	out->base = b->base;
	out->nrows = b->nrows;
	out->rows = b->nrows ? realloc(b->rows, b->nrows * sizeof(*b->rows)) : NULL;
	if (b->nrows && !out->rows)
		out->rows = b->rows;
	if (!b->nrows)
		free(b->rows);
	b->rows = NULL;
	count_rows(out);
	rc = 0;
out:
	if (b->eh && b->cfi)
		dwarf_cfi_end(b->cfi);
	if (dw)
		dwarf_end(dw);
	return rc;
}

int cfi_build_fd(int fd, const struct cfi_opts *opts, struct cfi_table *out)
{
	struct cfi_opts o = opts ? *opts : (struct cfi_opts){0};
	if (!o.max_rows)
		o.max_rows = CFI_DEFAULT_MAX_ROWS;
	if (!o.max_fde_rows)
		o.max_fde_rows = CFI_DEFAULT_MAX_FDE_ROWS;
	if (!o.max_work)
		o.max_work = CFI_DEFAULT_MAX_WORK;
	memset(out, 0, sizeof(*out));
	struct builder b = {.opts = &o, .st = &out->stats};
	elf_version(EV_CURRENT);
	Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!elf) {
		errno = ENOEXEC;
		return -1;
	}
	int rc = build(&b, elf, out);
	int saved = errno;
	elf_end(elf);
	free(b.cies);
	free(b.fdes);
	free(b.rows);
	if (rc != 0) {
		memset(out, 0, sizeof(*out));
		errno = saved;
	}
	return rc;
}

int cfi_build(const char *path, const struct cfi_opts *opts, struct cfi_table *out)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		memset(out, 0, sizeof(*out));
		return -1;
	}
	int rc = cfi_build_fd(fd, opts, out);
	int saved = errno;
	close(fd);
	errno = saved;
	return rc;
}

const struct cfi_row *cfi_find(const struct cfi_table *t, uint64_t addr)
{
	if (!t->nrows || addr < t->base || addr - t->base > UINT32_MAX)
		return NULL;
	uint32_t off = (uint32_t)(addr - t->base);
	size_t lo = 0, hi = t->nrows; /* the last row with row.addr <= off is in [lo, hi) */
	if (t->rows[0].addr > off)
		return NULL;
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;
		if (t->rows[mid].addr <= off)
			lo = mid;
		else
			hi = mid;
	}
	return t->rows[lo].cfa == CFI_CFA_GAP ? NULL : &t->rows[lo];
}

size_t cfi_table_bytes(const struct cfi_table *t)
{
	return t->nrows * sizeof(*t->rows);
}

void cfi_free(struct cfi_table *t)
{
	free(t->rows);
	memset(t, 0, sizeof(*t));
}
