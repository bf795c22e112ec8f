/*
 * elfinflate.h - the bound on what an ELF file's compressed sections
 * inflate to, checked before libelf or libdw inflates any of them.
 *
 * libelf inflates a compressed section (SHF_COMPRESSED, or a GNU .zdebug_*
 * section with its "ZLIB" header) into one buffer of the size its header
 * declares, and fails when the data would go past it; libdw inflates the
 * .debug_* sections it opens. So a 1 MB file that declares 1 GiB sections
 * used to take 1 GiB. elf_inflate_check() reads the declared sizes
 * (headers only) and refuses the file when one section passes
 * limits->section or all of them together pass limits->total, counting as
 * it goes; the declared size is also the most libelf ever writes.
 */
#ifndef TRACEPROF_AGENT_ELFINFLATE_H
#define TRACEPROF_AGENT_ELFINFLATE_H

#include <libelf.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ELF_INFLATE_SECTION_MIB 64  /* MiB one section may inflate to */
#define ELF_INFLATE_TOTAL_MIB	256 /* MiB all of a file's sections may inflate to */

struct elf_inflate_limits {
	size_t section; /* bytes one compressed section may inflate to; 0: the default */
	size_t total;	/* bytes all of them together may inflate to; 0: the default */
};

/* Why a file was refused. */
struct elf_inflate_refusal {
	char section[64]; /* name of the section that passed a limit */
	uint64_t bytes;	  /* what that section declares it inflates to */
	uint64_t total;	  /* the running total with that section */
	uint64_t limit;	  /* the limit it passed (section or total) */
	bool over_total;  /* the total passed its limit, not the section */
};

/*
 * 0 when every compressed section of elf inflates within lim (NULL: the
 * defaults), else -EFBIG with why filled (why may be NULL).
 */
int elf_inflate_check(Elf *elf, const struct elf_inflate_limits *lim,
		      struct elf_inflate_refusal *why);

#endif
