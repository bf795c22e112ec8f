/*
 * cfi.h - compact unwind tables from an ELF file's call frame information.
 *
 * cfi_build() turns the .eh_frame (or, without one, the .debug_frame) of
 * one x86-64 ELF file into a sorted array of small rows: for each address
 * range, how to find the canonical frame address (CFA), where the caller's
 * rbp is and where the return address is. Rules the walker cannot follow
 * (DWARF expressions, a CFA in another register, a register saved in a
 * register) are marked unsupported, so a stack walker can fall back to
 * frame pointers for that range; addresses no FDE covers are gaps.
 *
 * Addresses are ELF virtual addresses of the file; rows store them as
 * 32-bit offsets from the file's first executable address (table->base).
 * Everything is bounded (rows per file, rows per FDE, interpretation
 * work) and every problem is counted in struct cfi_stats: a corrupt
 * section gives an error or a partial table, never a wrong row.
 * See agent/unwind/README.md.
 */
#ifndef TRACEPROF_CFI_H
#define TRACEPROF_CFI_H

#include <stddef.h>
#include <stdint.h>

/* How to find the CFA (struct cfi_row.cfa). */
enum cfi_cfa {
	CFI_CFA_GAP = 0,     /* no FDE covers this range */
	CFI_CFA_RSP = 1,     /* CFA = rsp + cfa_off */
	CFI_CFA_RBP = 2,     /* CFA = rbp + cfa_off */
	CFI_CFA_UNSUPPORTED, /* an expression or another register */
	CFI_CFA_PLT,	     /* lazy PLT: rsp + cfa_off, + 8 from byte rbp_off of the entry */
	CFI_CFA_DEREF_RSP,   /* *(rsp + cfa_off) + 8: the caller's rsp saved on the stack */
	CFI_CFA_REG0 = 16,   /* + n: DWARF register n (0-15) + cfa_off, for the leaf only */
};

/* Where the caller's rbp is (bits CFI_RBP_MASK of struct cfi_row.flags). */
enum cfi_rbp {
	CFI_RBP_SAME = 0,	 /* unchanged in this frame */
	CFI_RBP_AT_CFA = 1,	 /* saved at CFA + rbp_off */
	CFI_RBP_UNDEFINED = 2,	 /* not recoverable */
	CFI_RBP_UNSUPPORTED = 3, /* an expression, a register, a value rule */
};

/* Where the return address is (bits CFI_RA_MASK >> CFI_RA_SHIFT). */
enum cfi_ra {
	CFI_RA_CFA_MINUS_8 = 0, /* at CFA - 8, as x86-64 calls leave it */
	CFI_RA_UNDEFINED = 1,	/* the outermost frame: the stack ends here */
	CFI_RA_UNSUPPORTED = 2, /* anything else */
};

#define CFI_RBP_MASK 0x03u
#define CFI_RA_SHIFT 2
#define CFI_RA_MASK  0x0cu
#define CFI_F_SIGNAL 0x10u /* a signal frame (CIE augmentation 'S') */

/* One row: its rules hold from base + addr up to the next row's address. */
struct cfi_row {
	uint32_t addr;	 /* offset from struct cfi_table.base */
	int32_t cfa_off; /* CFA = register + cfa_off */
	int16_t rbp_off; /* CFI_RBP_AT_CFA: caller's rbp at CFA + rbp_off; CFI_CFA_PLT: threshold */
	uint8_t cfa;	 /* enum cfi_cfa */
	uint8_t flags;	 /* enum cfi_rbp | enum cfi_ra << CFI_RA_SHIFT | CFI_F_SIGNAL */
};

static inline enum cfi_rbp cfi_row_rbp(const struct cfi_row *r)
{
	return (enum cfi_rbp)(r->flags & CFI_RBP_MASK);
}

static inline enum cfi_ra cfi_row_ra(const struct cfi_row *r)
{
	return (enum cfi_ra)((r->flags & CFI_RA_MASK) >> CFI_RA_SHIFT);
}

/* A row the walker can follow: CFA from rsp or rbp, RA at CFA - 8, rbp known. */
static inline int cfi_row_supported(const struct cfi_row *r)
{
	if (r->cfa == CFI_CFA_PLT)
		return cfi_row_rbp(r) == CFI_RBP_SAME && cfi_row_ra(r) == CFI_RA_CFA_MINUS_8;
	return (r->cfa == CFI_CFA_RSP || r->cfa == CFI_CFA_RBP || r->cfa == CFI_CFA_DEREF_RSP) &&
	       cfi_row_ra(r) == CFI_RA_CFA_MINUS_8 && cfi_row_rbp(r) != CFI_RBP_UNSUPPORTED;
}

/* What one build saw and did; errors by kind. */
struct cfi_stats {
	uint64_t cies;		   /* CIEs read */
	uint64_t fdes;		   /* FDEs read */
	uint64_t fdes_used;	   /* FDEs whose rows are in the table */
	uint64_t rows;		   /* rows in the table, gaps included */
	uint64_t rows_merged;	   /* rows merged into an identical neighbour */
	uint64_t rows_unsupported; /* rows with !cfi_row_supported() */
	uint64_t rows_signal;	   /* rows of signal frames */
	uint64_t err_entry;	   /* undecodable entries (the walk stops at the first) */
	uint64_t err_cie;	   /* FDEs whose CIE is missing or not understood */
	uint64_t err_encoding;	   /* FDEs with a pointer encoding not supported */
	uint64_t err_range;	   /* FDEs outside the executable range or over 4 GiB */
	uint64_t err_overlap;	   /* FDEs dropped because they overlap another */
	uint64_t err_frame;	   /* FDEs dropped: libdw could not interpret them */
	uint64_t err_fde_rows;	   /* FDEs dropped: over max_fde_rows rows */
	uint64_t err_limit;	   /* builds cut at max_rows (FDEs left out) */
	uint64_t err_work;	   /* builds cut at max_work (FDEs left out) */
};

/* Bounds of one build; zero fields take the defaults below. */
struct cfi_opts {
	size_t max_rows;     /* rows per file (CFI_DEFAULT_MAX_ROWS) */
	size_t max_fde_rows; /* rows per FDE (CFI_DEFAULT_MAX_FDE_ROWS) */
	uint64_t max_work;   /* CFI bytes interpreted per file (CFI_DEFAULT_MAX_WORK) */
};

#define CFI_DEFAULT_MAX_ROWS	 (1u << 21) /* 2 Mi rows, 24 MiB */
#define CFI_DEFAULT_MAX_FDE_ROWS 8192u
#define CFI_DEFAULT_MAX_WORK	 (1ull << 32)

/* Where the table came from. */
enum cfi_source {
	CFI_SOURCE_NONE = 0,
	CFI_SOURCE_EH_FRAME,
	CFI_SOURCE_DEBUG_FRAME,
};

struct cfi_table {
	uint64_t base;	      /* ELF vaddr of the first executable byte */
	struct cfi_row *rows; /* sorted by addr, strictly increasing */
	size_t nrows;
	enum cfi_source source;
	struct cfi_stats stats;
};

/*
 * Builds the table of the ELF file at path (opts may be NULL). Returns 0
 * with *out filled (possibly partial: see out->stats), or -1 with errno
 * and *out zeroed: the file cannot be read, is not an x86-64 ELF file,
 * has no executable segment, has no CFI (ENOENT), or memory ran out.
 */
int cfi_build(const char *path, const struct cfi_opts *opts, struct cfi_table *out);

/* The same from an open file descriptor (not closed). */
int cfi_build_fd(int fd, const struct cfi_opts *opts, struct cfi_table *out);

/* The row covering ELF vaddr addr, or NULL when no FDE covers it. */
const struct cfi_row *cfi_find(const struct cfi_table *t, uint64_t addr);

/* Bytes the table's rows take. */
size_t cfi_table_bytes(const struct cfi_table *t);

void cfi_free(struct cfi_table *t);

#endif
