/*
 * test_cfi.c - the CFI table builder (agent/unwind/cfi.c) against binutils'
 * reading of the same files: for every row readelf interprets
 * (--debug-dump=frames-interp), cfi_find() at the row's first and last
 * address gives the same CFA, rbp and return address rules ("unsupported"
 * exactly where readelf shows an expression or another CFA register), and
 * addresses between FDEs are gaps. Files: Debian's libc, liblzma,
 * libcrypto and python3.11 where installed, a program built here without
 * frame pointers (CFI_PROG), its .debug_frame-only copy, the same
 * program built by clang and lld where installed; then copies of
 * liblzma with flipped bytes in .eh_frame (counted errors or a partial
 * table, never a row that disagrees on an intact FDE) and a table cut by
 * max_rows.
 */
#include "check.h"

#include "cfi.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <limits.h>
#include <libelf.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- readelf's view ---- */

struct rd_rule {
	char cfa[32], rbp[32], ra[32];
};

struct rd_row {
	uint64_t loc;
	struct rd_rule r;
};

struct rd_cie {
	uint64_t off, len;
	bool signal;
	bool has_rule;
	struct rd_rule last; /* the state its instructions leave: FDEs without rows */
};

struct rd_fde {
	uint64_t off, len, cie, lo, hi;
	size_t row0, nrows;
	int plt_off, plt_from; /* readelf's raw dump shows ld's PLT CFA expression: its N, K */
	int deref_off;	       /* ... OpenSSL's *(rsp + N) + 8: N; INT_MIN: none */
	bool other_exp;	       /* ... another CFA expression, or two different ones */
};

struct rd {
	struct rd_cie *cies;
	size_t ncies;
	struct rd_fde *fdes;
	size_t nfdes;
	struct rd_row *rows;
	size_t nrows;
};

static void *push(void *arr, size_t *n, size_t size)
{
	if ((*n & (*n - 1)) == 0) { /* 0, 1, 2, 4, ...: double */
		arr = realloc(arr, (*n ? *n * 2 : 1) * size);
		if (!arr)
			abort();
	}
	(*n)++;
	return arr;
}

/* Column indexes of the current LOC header (-1: absent). */
struct rd_cols {
	int cfa, rbp, ra;
};

static void parse_header(char *line, struct rd_cols *c)
{
	c->cfa = c->rbp = c->ra = -1;
	int i = 0;
	for (char *t = strtok(line, " \t\n"); t; t = strtok(NULL, " \t\n"), i++) {
		if (strcmp(t, "CFA") == 0)
			c->cfa = i;
		else if (strcmp(t, "rbp") == 0)
			c->rbp = i;
		else if (strcmp(t, "ra") == 0)
			c->ra = i;
	}
}

static void parse_row(char *line, const struct rd_cols *c, struct rd_row *row)
{
	memset(row, 0, sizeof(*row));
	int i = 0;
	for (char *t = strtok(line, " \t\n"); t; t = strtok(NULL, " \t\n"), i++) {
		if (t[0] == '(') { /* "r10 (r10)": the name of the register before */
			i--;
			continue;
		}
		if (i == 0)
			row->loc = strtoull(t, NULL, 16);
		else if (i == c->cfa)
			snprintf(row->r.cfa, sizeof(row->r.cfa), "%s", t);
		else if (i == c->rbp)
			snprintf(row->r.rbp, sizeof(row->r.rbp), "%s", t);
		else if (i == c->ra)
			snprintf(row->r.ra, sizeof(row->r.ra), "%s", t);
	}
}

/* One entry header: "OFF LEN ID CIE \"aug\" ..." or "OFF LEN PTR FDE cie=C pc=LO..HI". */
static void parse_entry(struct rd *rd, const char *line, int *cur_cie, int *cur_fde)
{
	unsigned long long off, len, id;
	char kind[8];
	*cur_cie = *cur_fde = -1;
	if (sscanf(line, "%llx %llx %llx %7s", &off, &len, &id, kind) != 4)
		return;
	if (strcmp(kind, "CIE") == 0) {
		rd->cies = push(rd->cies, &rd->ncies, sizeof(*rd->cies));
		struct rd_cie *c = &rd->cies[rd->ncies - 1];
		memset(c, 0, sizeof(*c));
		c->off = off, c->len = len;
		const char *q = strchr(line, '"'), *e = q ? strchr(q + 1, '"') : NULL;
		c->signal = q && e && memchr(q, 'S', (size_t)(e - q)) != NULL;
		*cur_cie = (int)rd->ncies - 1;
	} else if (strcmp(kind, "FDE") == 0) {
		unsigned long long cie, lo, hi;
		const char *p = strstr(line, "cie=");
		if (!p || sscanf(p, "cie=%llx pc=%llx..%llx", &cie, &lo, &hi) != 3)
			return;
		rd->fdes = push(rd->fdes, &rd->nfdes, sizeof(*rd->fdes));
		struct rd_fde *f = &rd->fdes[rd->nfdes - 1];
		*f = (struct rd_fde){
		    .off = off, .len = len, .cie = cie, .lo = lo, .hi = hi, .row0 = rd->nrows};
		*cur_fde = (int)rd->nfdes - 1;
	}
}

/*
 * FDEs whose CFA is ld's lazy-PLT expression, from readelf's raw dump
 * (frames-interp shows "exp"): "DW_OP_breg7 (rsp): N; DW_OP_breg16 (rip):
 * 0; DW_OP_lit15; DW_OP_and; DW_OP_litK; DW_OP_ge; DW_OP_lit3; DW_OP_shl;
 * DW_OP_plus", remembered by the FDE's offset.
 */
static void readelf_plt(const char *path, struct rd *rd)
{
	char cmd[1024], line[4096];
	unsigned long long off = 0, len, id;
	snprintf(cmd, sizeof(cmd), "readelf --debug-dump=frames '%s' 2>/dev/null", path);
	FILE *f = popen(cmd, "r");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		char kind[8];
		int n, k;
		if (strspn(line, "0123456789abcdef") == 8 &&
		    sscanf(line, "%llx %llx %llx %7s", &off, &len, &id, kind) == 4)
			continue;
		const char *e = strstr(line, "DW_CFA_def_cfa_expression (");
		struct rd_fde *fde = NULL;
		char tail[64];
		if (!e)
			continue;
		for (size_t i = 0; i < rd->nfdes && !fde; i++)
			if (rd->fdes[i].off == off)
				fde = &rd->fdes[i];
		if (!fde)
			continue;
		if (sscanf(e,
			   "DW_CFA_def_cfa_expression (DW_OP_breg7 (rsp): %d; DW_OP_breg16 "
			   "(rip): 0; DW_OP_lit15; DW_OP_and; DW_OP_lit%d; DW_OP_ge; "
			   "DW_OP_lit3; DW_OP_shl; DW_OP_plus%63s",
			   &n, &k, tail) == 3 &&
		    strcmp(tail, ")") == 0 && fde->deref_off == INT_MIN) {
			fde->plt_off = n, fde->plt_from = k;
		} else if (sscanf(e,
				  "DW_CFA_def_cfa_expression (DW_OP_breg7 (rsp): %d; DW_OP_deref; "
				  "DW_OP_plus_uconst: 8%63s",
				  &n, tail) == 2 &&
			   strcmp(tail, ")") == 0 && fde->plt_from < 0 &&
			   (fde->deref_off == INT_MIN || fde->deref_off == n)) {
			fde->deref_off = n;
		} else {
			fde->other_exp = true;
		}
	}
	pclose(f);
}

static int readelf_frames(const char *path, struct rd *rd)
{
	char cmd[1024];
	memset(rd, 0, sizeof(*rd));
	snprintf(cmd, sizeof(cmd), "readelf --debug-dump=frames-interp '%s' 2>/dev/null", path);
	FILE *f = popen(cmd, "r");
	if (!f)
		return -1;
	char line[4096];
	struct rd_cols cols = {-1, -1, -1};
	int cie = -1, fde = -1;
	while (fgets(line, sizeof(line), f)) {
		size_t hex = strspn(line, "0123456789abcdef");
		if (strncmp(line, "   LOC", 6) == 0) {
			parse_header(line, &cols);
		} else if (hex == 16 && line[16] == ' ' && (cie >= 0 || fde >= 0)) {
			struct rd_row row;
			parse_row(line, &cols, &row);
			if (cie >= 0) {
				rd->cies[cie].last = row.r;
				rd->cies[cie].has_rule = true;
			} else {
				rd->rows = push(rd->rows, &rd->nrows, sizeof(*rd->rows));
				rd->rows[rd->nrows - 1] = row;
				rd->fdes[fde].nrows++;
			}
		} else if (hex == 8 && line[8] == ' ') {
			parse_entry(rd, line, &cie, &fde);
		}
	}
	pclose(f); /* its status is 1 for some intact files: the entries decide */
	for (size_t i = 0; i < rd->nfdes; i++)
		rd->fdes[i].plt_from = -1, rd->fdes[i].deref_off = INT_MIN;
	readelf_plt(path, rd);
	return rd->nfdes > 0 ? 0 : -1;
}

static void rd_free(struct rd *rd)
{
	free(rd->cies);
	free(rd->fdes);
	free(rd->rows);
	memset(rd, 0, sizeof(*rd));
}

static const struct rd_cie *rd_cie(const struct rd *rd, uint64_t off)
{
	for (size_t i = 0; i < rd->ncies; i++)
		if (rd->cies[i].off == off)
			return &rd->cies[i];
	return NULL;
}

/* ---- comparing ---- */

/* The row readelf's rule stands for; -1 where the test cannot tell. */
static void expect_row(const struct rd_rule *r, bool signal, struct cfi_row *e)
{
	memset(e, 0, sizeof(*e));
	e->cfa = CFI_CFA_UNSUPPORTED;
	if (strncmp(r->cfa, "rsp", 3) == 0 && (r->cfa[3] == '+' || r->cfa[3] == '-')) {
		e->cfa = CFI_CFA_RSP;
		e->cfa_off = (int32_t)strtol(r->cfa + 3, NULL, 10);
	} else if (strncmp(r->cfa, "rbp", 3) == 0 && (r->cfa[3] == '+' || r->cfa[3] == '-')) {
		e->cfa = CFI_CFA_RBP;
		e->cfa_off = (int32_t)strtol(r->cfa + 3, NULL, 10);
	} else {
		/* another register, by readelf's name: CFI_CFA_REG0 + its DWARF number */
		static const char *const names[16] = {"rax", "rdx", "rcx", "rbx", "rsi", "rdi",
						      "rbp", "rsp", "r8",  "r9",  "r10", "r11",
						      "r12", "r13", "r14", "r15"};
		for (int n = 0; n < 16; n++) {
			size_t len = strlen(names[n]);
			if (strncmp(r->cfa, names[n], len) == 0 &&
			    (r->cfa[len] == '+' || r->cfa[len] == '-')) {
				e->cfa = (uint8_t)(CFI_CFA_REG0 + n);
				e->cfa_off = (int32_t)strtol(r->cfa + len, NULL, 10);
			}
		}
	}
	unsigned rbp = CFI_RBP_UNSUPPORTED;
	if (r->rbp[0] == '\0' || strcmp(r->rbp, "u") == 0 || strcmp(r->rbp, "s") == 0) {
		rbp = CFI_RBP_SAME;
	} else if (r->rbp[0] == 'c' && (r->rbp[1] == '+' || r->rbp[1] == '-')) {
		rbp = CFI_RBP_AT_CFA;
		e->rbp_off = (int16_t)strtol(r->rbp + 1, NULL, 10);
	}
	unsigned ra = CFI_RA_UNSUPPORTED;
	if (strcmp(r->ra, "c-8") == 0)
		ra = CFI_RA_CFA_MINUS_8;
	else if (strcmp(r->ra, "u") == 0)
		ra = CFI_RA_UNDEFINED;
	e->flags = (uint8_t)(rbp | ra << CFI_RA_SHIFT | (signal ? CFI_F_SIGNAL : 0));
}

static bool rules_equal(const struct cfi_row *a, const struct cfi_row *e)
{
	if (a->cfa != e->cfa || a->flags != e->flags)
		return false;
	if (e->cfa != CFI_CFA_UNSUPPORTED && a->cfa_off != e->cfa_off)
		return false;
	if (e->cfa == CFI_CFA_PLT)
		return a->rbp_off == e->rbp_off;
	return cfi_row_rbp(e) != CFI_RBP_AT_CFA || a->rbp_off == e->rbp_off;
}

struct cmp {
	size_t rows, unsupported, gaps, missing, mismatches; /* missing, mismatches: of 2 per row */
	size_t plt;					     /* rows of ld's lazy PLT expression */
	size_t deref;	/* rows of the *(rsp + N) + 8 expression */
	size_t skipped; /* expression rows of FDEs with several expressions: not compared */
};

/* entry [off, off + 4 + len) holds no flipped byte */
static bool untouched(uint64_t off, uint64_t len, const size_t *flips, size_t nflips)
{
	for (size_t i = 0; i < nflips; i++)
		if (flips[i] >= off && flips[i] < off + 4 + len)
			return false;
	return true;
}

static void check_at(const struct cfi_table *t, uint64_t addr, const struct cfi_row *e,
		     bool allow_missing, const char *label, struct cmp *c)
{
	const struct cfi_row *got = cfi_find(t, addr);
	if (!got && allow_missing) {
		c->missing++;
		return;
	}
	bool ok = got && rules_equal(got, e);
	if (!ok && c->mismatches++ < 8)
		fprintf(stderr,
			"%s: at %#" PRIx64 ": want cfa %u%+d flags %#x rbp%+d, got %s cfa %u%+d "
			"flags %#x rbp%+d\n",
			label, addr, e->cfa, e->cfa_off, e->flags, e->rbp_off, got ? "" : "(none)",
			got ? got->cfa : 0, got ? got->cfa_off : 0, got ? got->flags : 0,
			got ? got->rbp_off : 0);
}

/* Every readelf row of every FDE (of the untouched ones where flips are given). */
static void compare_rows(const struct rd *rd, const struct cfi_table *t, bool allow_missing,
			 const size_t *flips, size_t nflips, const char *label, struct cmp *c)
{
	for (size_t i = 0; i < rd->nfdes; i++) {
		const struct rd_fde *f = &rd->fdes[i];
		const struct rd_cie *cie = rd_cie(rd, f->cie);
		if (f->lo >= f->hi || !cie)
			continue;
		if (!untouched(f->off, f->len, flips, nflips) ||
		    !untouched(cie->off, cie->len, flips, nflips))
			continue;
		struct rd_row only = {.loc = f->lo, .r = cie->last};
		const struct rd_row *rows = f->nrows ? &rd->rows[f->row0] : &only;
		size_t n = f->nrows ? f->nrows : 1;
		for (size_t k = 0; k < n; k++) {
			uint64_t next = k + 1 < n ? rows[k + 1].loc : f->hi;
			if (rows[k].loc >= next)
				continue;
			struct cfi_row e;
			expect_row(&rows[k].r, cie->signal, &e);
			if (strcmp(rows[k].r.cfa, "exp") == 0 && f->other_exp) {
				c->skipped++; /* which expression: readelf's table does not say */
				continue;
			}
			if (f->plt_from >= 0 && strcmp(rows[k].r.cfa, "exp") == 0) {
				e.cfa = CFI_CFA_PLT; /* readelf's raw dump named the expression */
				e.cfa_off = f->plt_off;
				e.rbp_off = (int16_t)f->plt_from;
				c->plt++;
			} else if (f->deref_off != INT_MIN && strcmp(rows[k].r.cfa, "exp") == 0) {
				e.cfa = CFI_CFA_DEREF_RSP;
				e.cfa_off = f->deref_off;
				c->deref++;
			}
			c->rows++;
			c->unsupported += !cfi_row_supported(&e);
			check_at(t, rows[k].loc, &e, allow_missing, label, c);
			check_at(t, next - 1, &e, allow_missing, label, c);
		}
	}
}

static int cmp_lo(const void *a, const void *b)
{
	const struct rd_fde *x = a, *y = b;
	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* Addresses no FDE covers: before the first, between two, after the last. */
static void compare_gaps(const struct rd *rd, const struct cfi_table *t, const char *label,
			 struct cmp *c)
{
	struct rd_fde *f = malloc(rd->nfdes * sizeof(*f));
	size_t n = 0;
	for (size_t i = 0; i < rd->nfdes; i++)
		if (rd->fdes[i].lo < rd->fdes[i].hi)
			f[n++] = rd->fdes[i];
	qsort(f, n, sizeof(*f), cmp_lo);
	if (n > 0 && f[0].lo > 0) {
		c->gaps++;
		CHECK(cfi_find(t, f[0].lo - 1) == NULL, "%s: before the first FDE", label);
	}
	uint64_t reach = 0;
	for (size_t i = 0; i < n; i++) {
		if (f[i].hi > reach)
			reach = f[i].hi;
		uint64_t next = i + 1 < n ? f[i + 1].lo : reach + 4096;
		if (reach >= next)
			continue;
		c->gaps++;
		CHECK(cfi_find(t, reach) == NULL && cfi_find(t, next - 1) == NULL,
		      "%s: gap %#" PRIx64 "..%#" PRIx64 " has a row", label, reach, next);
	}
	free(f);
}

static uint64_t errors(const struct cfi_stats *s)
{
	return s->err_entry + s->err_cie + s->err_encoding + s->err_range + s->err_overlap +
	       s->err_frame + s->err_fde_rows + s->err_limit + s->err_work;
}

static void check_file(const char *path, const char *label)
{
	struct rd rd;
	if (access(path, R_OK) != 0) {
		printf("%s: %s not installed, skipped\n", label, path);
		return;
	}
	CHECK(readelf_frames(path, &rd) == 0, "%s: readelf on %s", label, path);
	struct cfi_table t;
	int rc = cfi_build(path, NULL, &t);
	CHECK(rc == 0, "%s: cfi_build: %s", label, strerror(errno));
	if (rc != 0) {
		rd_free(&rd);
		return;
	}
	struct cmp c = {0};
	compare_rows(&rd, &t, false, NULL, 0, label, &c);
	compare_gaps(&rd, &t, label, &c);
	CHECK(c.mismatches == 0, "%s: %zu of %zu addresses differ (2 per readelf row)", label,
	      c.mismatches, 2 * c.rows);
	CHECK(errors(&t.stats) == 0, "%s: %" PRIu64 " errors", label, errors(&t.stats));
	CHECK(t.stats.fdes_used > 0, "%s: no FDE used", label);
	printf("%s: %zu PLT rows, %zu *(rsp + N) + 8 rows, %zu rows of other expressions not "
	       "compared\n",
	       label, c.plt, c.deref, c.skipped);
	printf("%s: %zu FDEs, %zu readelf rows compared (%zu unsupported), %zu gaps; table "
	       "%zu rows, %zu bytes, %" PRIu64 " merged, %" PRIu64 " unsupported, %" PRIu64
	       " signal, %" PRIu64 " errors (%s)\n",
	       label, rd.nfdes, c.rows, c.unsupported, c.gaps, t.nrows, cfi_table_bytes(&t),
	       t.stats.rows_merged, t.stats.rows_unsupported, t.stats.rows_signal, errors(&t.stats),
	       t.source == CFI_SOURCE_EH_FRAME ? ".eh_frame" : ".debug_frame");
	cfi_free(&t);
	rd_free(&rd);
}

/* ---- damaged and bounded tables ---- */

static int read_file(const char *path, unsigned char **buf, size_t *size)
{
	FILE *f = fopen(path, "rb");
	struct stat st;
	if (!f || fstat(fileno(f), &st) != 0) {
		if (f)
			fclose(f);
		return -1;
	}
	*size = (size_t)st.st_size;
	*buf = malloc(*size);
	int rc = *buf && fread(*buf, 1, *size, f) == *size ? 0 : -1;
	fclose(f);
	return rc;
}

static int write_file(const char *path, const unsigned char *buf, size_t size)
{
	FILE *f = fopen(path, "wb");
	if (!f)
		return -1;
	int rc = fwrite(buf, 1, size, f) == size ? 0 : -1;
	return fclose(f) == 0 ? rc : -1;
}

/* The file offset and size of a section. */
static int section_at(const char *path, const char *name, uint64_t *off, uint64_t *size)
{
	int fd = open(path, O_RDONLY);
	elf_version(EV_CURRENT);
	Elf *elf = fd >= 0 ? elf_begin(fd, ELF_C_READ, NULL) : NULL;
	size_t shstrndx;
	int rc = -1;
	if (elf && elf_getshdrstrndx(elf, &shstrndx) == 0) {
		for (Elf_Scn *s = elf_nextscn(elf, NULL); s; s = elf_nextscn(elf, s)) {
			GElf_Shdr sh;
			const char *n =
			    gelf_getshdr(s, &sh) ? elf_strptr(elf, shstrndx, sh.sh_name) : NULL;
			if (n && strcmp(n, name) == 0) {
				*off = sh.sh_offset, *size = sh.sh_size, rc = 0;
				break;
			}
		}
	}
	if (elf)
		elf_end(elf);
	if (fd >= 0)
		close(fd);
	return rc;
}

/* Copies of path with nflip bytes of section sec flipped, one per seed:
 * each builds (or fails) without crashing, and every row it has for an
 * FDE whose bytes (and CIE's) are intact agrees with readelf on the
 * original. Flips in .eh_frame_hdr (libdw's search table) leave every FDE
 * intact. */
static void check_corrupt(const char *path, const char *sec, const char *dir, int seeds,
			  size_t nflip)
{
	bool eh = strcmp(sec, ".eh_frame") == 0;
	struct rd rd;
	unsigned char *orig = NULL, *buf;
	size_t size = 0;
	uint64_t eh_off = 0, eh_size = 0;
	if (access(path, R_OK) != 0 || readelf_frames(path, &rd) != 0)
		return;
	if (read_file(path, &orig, &size) != 0 || section_at(path, sec, &eh_off, &eh_size) != 0 ||
	    eh_size == 0) {
		CHECK(0, "read %s of %s", sec, path);
		free(orig);
		rd_free(&rd);
		return;
	}
	buf = malloc(size);
	char copy[512];
	snprintf(copy, sizeof(copy), "%s/corrupt.so", dir);
	size_t *flips = calloc(nflip, sizeof(*flips));
	uint64_t errs = 0, failed = 0, rows = 0, partial = 0;
	for (int seed = 1; seed <= seeds; seed++) {
		srand((unsigned)seed);
		memcpy(buf, orig, size);
		for (size_t i = 0; i < nflip; i++) {
			flips[i] = (size_t)rand() % eh_size; /* offset within sec */
			buf[eh_off + flips[i]] ^= (unsigned char)(1 + rand() % 255);
		}
		CHECK(write_file(copy, buf, size) == 0, "write %s", copy);
		struct cfi_table t;
		if (cfi_build(copy, NULL, &t) != 0) {
			failed++;
			continue;
		}
		char label[64];
		snprintf(label, sizeof(label), "corrupt %s seed %d", sec, seed);
		struct cmp c = {0};
		compare_rows(&rd, &t, true, flips, eh ? nflip : 0, label, &c);
		CHECK(c.mismatches == 0, "%s: %zu addresses in intact FDEs differ", label,
		      c.mismatches);
		errs += errors(&t.stats);
		rows += c.rows;
		partial += c.missing > 0;
		cfi_free(&t);
	}
	printf("corrupt: %d copies of %s, %zu byte(s) of %s flipped in each: %" PRIu64
	       " refused, %" PRIu64 " errors counted, %" PRIu64 " partial, %" PRIu64
	       " rows of intact FDEs compared\n",
	       seeds, path, nflip, sec, failed, errs, partial, rows);
	CHECK(!eh || errs + failed > 0, "no corruption noticed in %d copies", seeds);
	unlink(copy);
	free(flips);
	free(buf);
	free(orig);
	rd_free(&rd);
}

/* max_rows cuts the table at a whole FDE: fewer rows, counted, all right. */
static void check_limit(const char *path)
{
	struct rd rd;
	if (access(path, R_OK) != 0 || readelf_frames(path, &rd) != 0)
		return;
	struct cfi_opts o = {.max_rows = 100};
	struct cfi_table t;
	CHECK(cfi_build(path, &o, &t) == 0, "build with max_rows");
	CHECK(t.nrows <= 100 && t.nrows > 0, "%zu rows", t.nrows);
	CHECK(t.stats.err_limit == 1, "err_limit %" PRIu64, t.stats.err_limit);
	struct cmp c = {0};
	compare_rows(&rd, &t, true, NULL, 0, "max_rows", &c);
	CHECK(c.mismatches == 0 && c.missing > 0, "max_rows: %zu differ, %zu missing", c.mismatches,
	      c.missing);
	cfi_free(&t);
	struct cfi_opts r = {.max_fde_rows = 3};
	CHECK(cfi_build(path, &r, &t) == 0 && t.stats.err_fde_rows > 0, "max_fde_rows");
	c = (struct cmp){0};
	compare_rows(&rd, &t, true, NULL, 0, "max_fde_rows", &c);
	CHECK(c.mismatches == 0 && c.missing > 0, "max_fde_rows: %zu differ, %zu missing",
	      c.mismatches, c.missing);
	cfi_free(&t);
	struct cfi_opts w = {.max_work = 4096};
	CHECK(cfi_build(path, &w, &t) == 0 && t.stats.err_work == 1, "max_work");
	cfi_free(&t);
	rd_free(&rd);
}

static void check_errors(const char *dir)
{
	struct cfi_table t;
	CHECK(cfi_build("/nonexistent/lib.so", NULL, &t) != 0 && errno == ENOENT, "no file");
	char p[512];
	snprintf(p, sizeof(p), "%s/notelf", dir);
	CHECK(write_file(p, (const unsigned char *)"hello", 5) == 0, "write");
	CHECK(cfi_build(p, NULL, &t) != 0 && errno == ENOEXEC && t.nrows == 0, "not ELF");
	unlink(p);
	CHECK(cfi_find(&t, 0x1000) == NULL, "empty table");
}

int main(void)
{
	char dir[] = "/tmp/test_cfi.XXXXXX";
	if (!mkdtemp(dir))
		return 1;
	check_file("/usr/lib/x86_64-linux-gnu/libc.so.6", "libc.so.6");
	check_file("/usr/lib/x86_64-linux-gnu/liblzma.so.5", "liblzma.so.5");
	check_file("/usr/lib/x86_64-linux-gnu/libcrypto.so.3", "libcrypto.so.3");
	check_file("/usr/bin/python3.11", "python3.11");
	check_file(CFI_PROG, "cfi_prog (no frame pointers)");
	/* the same program with .debug_frame only */
	char cmd[1024], dbg[512];
	snprintf(dbg, sizeof(dbg), "%s/cfi_prog.debug_frame", dir);
	snprintf(cmd, sizeof(cmd),
		 "objcopy --remove-section=.eh_frame --remove-section=.eh_frame_hdr '%s' '%s'",
		 CFI_PROG_G, dbg);
	if (system(cmd) == 0)
		check_file(dbg, "cfi_prog (.debug_frame only)");
	else
		printf("objcopy failed: .debug_frame not checked\n");
	unlink(dbg);
	/* the same program from another toolchain, where installed */
	snprintf(dbg, sizeof(dbg), "%s/cfi_prog.clang", dir);
	snprintf(cmd, sizeof(cmd),
		 "clang -O2 -fomit-frame-pointer -fuse-ld=lld '%s' -o '%s' 2>/dev/null",
		 CFI_PROG_SRC, dbg);
	if (system(cmd) == 0)
		check_file(dbg, "cfi_prog (clang, lld)");
	else
		printf("clang with lld not installed: skipped\n");
	unlink(dbg);
	const char *lzma = "/usr/lib/x86_64-linux-gnu/liblzma.so.5";
	check_corrupt(lzma, ".eh_frame", dir, 32, 1);
	check_corrupt(lzma, ".eh_frame", dir, 32, 16);
	check_corrupt(lzma, ".eh_frame", dir, 8, 256);
	check_corrupt("/usr/lib/x86_64-linux-gnu/libc.so.6", ".eh_frame", dir, 8, 64);
	check_corrupt(lzma, ".eh_frame_hdr", dir, 16, 8);
	check_limit("/usr/lib/x86_64-linux-gnu/liblzma.so.5");
	check_errors(dir);
	rmdir(dir);
	return check_done();
}
