/*
 * elfsyms.h - the function symbols (and optionally the line tables and
 * inlined functions) of one ELF file, read with libelf and libdw.
 *
 * Two steps, because the first is needed for every mapping and the second
 * only for files whose addresses are actually sampled:
 *   elfsyms_read_header(): build id, PT_LOAD segments (to turn a file
 *     offset into an ELF virtual address), .gnu_debuglink; cheap.
 *   elfsyms_load(): the sorted symbol table from .symtab and .dynsym, and
 *     the DWARF of the file or of its separate debug file.
 * Addresses here are always ELF virtual addresses (st_value, p_vaddr), the
 * same for every process that maps the file, wherever it is loaded.
 */
#ifndef TRACEPROF_AGENT_ELFSYMS_H
#define TRACEPROF_AGENT_ELFSYMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buildid.h"
#include "elfinflate.h"

#define ELFSYMS_MAX_SEGMENTS 16 /* PT_LOAD segments kept (binaries have 2-5) */

struct elfsyms_segment {
	uint64_t vaddr;	 /* p_vaddr */
	uint64_t offset; /* p_offset */
	uint64_t filesz; /* p_filesz */
};

struct elfsyms_header {
	uint8_t build_id[BUILDID_MAX];			       /* GNU build id note */
	size_t build_id_len;				       /* 0: the file has none */
	struct elfsyms_segment segments[ELFSYMS_MAX_SEGMENTS]; /* PT_LOAD, in header order */
	size_t nsegments;				       /* entries in segments */
	char debuglink[256];				       /* .gnu_debuglink file name, or "" */
	bool has_debug_info; /* a .debug_info section is present */
};

/* Where an ELF image is read from: an open file or a copy in memory. */
struct elfsyms_source {
	int fd;		  /* file descriptor, or -1 to use image */
	void *image;	  /* the whole ELF image (e.g. the vdso), borrowed */
	size_t image_len; /* bytes at image */
};

/*
 * Reads the header of src. Returns 0, -ENOEXEC when it is not an ELF file,
 * or -EIO when it is truncated or corrupt beyond use.
 */
int elfsyms_read_header(const struct elfsyms_source *src, struct elfsyms_header *h);
/*
 * The ELF virtual address at file offset off, through the PT_LOAD segment
 * that maps it. False when no segment does.
 */
bool elfsyms_vaddr(const struct elfsyms_header *h, uint64_t off, uint64_t *vaddr);

struct elfsyms;

/*
 * Loads the function symbols of src and, when lines is set, its DWARF (or
 * that of debug, a separate debug file with the same build, may be NULL).
 * A file without symbols loads fine and finds nothing. The sources must
 * stay open until elfsyms_free(): the DWARF is read lazily. With lines, the
 * file whose DWARF would be opened is refused when its compressed sections
 * inflate past lim (NULL: the defaults of elfinflate.h): errno EFBIG, why
 * (may be NULL) says which section. Returns NULL with errno set: ENOEXEC,
 * EIO, ENOMEM, EFBIG. The caller frees with elfsyms_free().
 */
struct elfsyms *elfsyms_load(const struct elfsyms_source *src, const struct elfsyms_source *debug,
			     bool lines, const struct elf_inflate_limits *lim,
			     struct elf_inflate_refusal *why);
void elfsyms_free(struct elfsyms *es);
/* Heap bytes held (symbols, names, an estimate of the DWARF read). */
size_t elfsyms_bytes(const struct elfsyms *es);
bool elfsyms_has_lines(const struct elfsyms *es);
/* Function symbols in the table (one per address). */
size_t elfsyms_count(const struct elfsyms *es);

/*
 * The function symbol containing vaddr (start in *start), or NULL. The name
 * is owned by es and valid until elfsyms_free().
 */
const char *elfsyms_lookup(const struct elfsyms *es, uint64_t vaddr, uint64_t *start);

struct elfsyms_line {
	const char *function; /* DWARF name of the function or inlined function, NULL if none */
	const char *file;     /* source file, NULL if unknown */
	int line;	      /* line, 0 if unknown */
};

/*
 * Source positions of vaddr from the DWARF, root first: the function that
 * contains the address, then each function inlined into the previous one;
 * each entry's file and line is where the next one was inlined (for the
 * last, where vaddr is). Writes at most max entries (keeping the root
 * side) and returns the count, 0 when there is no debug info for vaddr.
 * Strings are owned by es, valid until elfsyms_free(); copy them.
 */
int elfsyms_lines(struct elfsyms *es, uint64_t vaddr, struct elfsyms_line *out, int max);

#endif
