/*
 * elfinflate.c - the declared inflated sizes of an ELF file's compressed
 * sections, held to limits (elfinflate.h).
 */
#include "elfinflate.h"

#include <errno.h>
#include <gelf.h>
#include <stdio.h>
#include <string.h>

#define ZDEBUG_HEADER 12 /* "ZLIB" and the size, 8 bytes big-endian */

/* What scn inflates to when it is compressed, else 0. */
static uint64_t inflated_size(Elf_Scn *scn, const GElf_Shdr *sh, const char *name)
{
	const unsigned char *p;
	Elf_Data *d;
	GElf_Chdr ch;
	uint64_t size = 0;

	if (sh->sh_type == SHT_NOBITS)
		return 0;
	if (sh->sh_flags & SHF_COMPRESSED)
		return gelf_getchdr(scn, &ch) ? ch.ch_size : 0;
	if (strncmp(name, ".zdebug", 7) != 0)
		return 0;
	d = elf_rawdata(scn, NULL);
	if (!d || !d->d_buf || d->d_size < ZDEBUG_HEADER || memcmp(d->d_buf, "ZLIB", 4) != 0)
		return 0; /* libelf does not inflate it either */
	p = d->d_buf;
	for (int i = 4; i < ZDEBUG_HEADER; i++)
		size = size << 8 | p[i];
	return size;
}

static void refuse(struct elf_inflate_refusal *why, const char *name, uint64_t bytes,
		   uint64_t total, uint64_t limit, bool over_total)
{
	if (!why)
		return;
	snprintf(why->section, sizeof(why->section), "%s", name);
	why->bytes = bytes;
	why->total = total;
	why->limit = limit;
	why->over_total = over_total;
}

int elf_inflate_check(Elf *elf, const struct elf_inflate_limits *lim,
		      struct elf_inflate_refusal *why)
{
	uint64_t smax =
	    lim && lim->section ? lim->section : (uint64_t)ELF_INFLATE_SECTION_MIB << 20;
	uint64_t tmax = lim && lim->total ? lim->total : (uint64_t)ELF_INFLATE_TOTAL_MIB << 20;
	uint64_t total = 0;
	Elf_Scn *scn = NULL;
	size_t shstrndx;

	if (elf_getshdrstrndx(elf, &shstrndx) != 0)
		return 0; /* no section names: libdw finds no debug sections either */
	while ((scn = elf_nextscn(elf, scn)) != NULL) {
		GElf_Shdr sh;
		const char *name;
		uint64_t size;

		if (!gelf_getshdr(scn, &sh) || !(name = elf_strptr(elf, shstrndx, sh.sh_name)))
			continue;
		size = inflated_size(scn, &sh, name);
		total = size > UINT64_MAX - total ? UINT64_MAX : total + size;
		if (size > smax || total > tmax) {
			refuse(why, name, size, total, size > smax ? smax : tmax, size <= smax);
			return -EFBIG;
		}
	}
	return 0;
}
