/*
 * buildid.c - GNU build id notes, from memory or through libelf.
 *
 * Files are opened with ELF_C_READ (pread, not mmap): a file truncated
 * while it is read gives an error, never SIGBUS. Note headers are parsed
 * by hand so that the same code serves libelf's data and the raw notes
 * the kernel exports, which libelf cannot take.
 */
#include <errno.h>
#include <gelf.h>
#include <string.h>

#include "buildid.h"
#include "traceprof/hex.h"

#define NOTE_HEADER_BYTES 12 /* namesz, descsz, type: three 32-bit words */

static size_t align_up(size_t v, size_t align)
{
	return (v + align - 1) & ~(align - 1);
}

int buildid_from_notes(const void *notes, size_t len, size_t align, uint8_t id[BUILDID_MAX])
{
	const uint8_t *p = notes;
	size_t off = 0;

	if (align != 8)
		align = 4;
	while (len - off >= NOTE_HEADER_BYTES) {
		uint32_t namesz, descsz, type;
		size_t name_off = off + NOTE_HEADER_BYTES, desc_off;

		memcpy(&namesz, p + off, 4);
		memcpy(&descsz, p + off + 4, 4);
		memcpy(&type, p + off + 8, 4);
		if (namesz > len - name_off)
			return 0;
		desc_off = align_up(name_off + namesz, align);
		if (desc_off > len || descsz > len - desc_off)
			return 0;
		if (type == NT_GNU_BUILD_ID && namesz == 4 && memcmp(p + name_off, "GNU", 4) == 0 &&
		    descsz > 0) {
			if (descsz > BUILDID_MAX)
				return -ENOSPC;
			memcpy(id, p + desc_off, descsz);
			return (int)descsz;
		}
		off = align_up(desc_off + descsz, align);
		if (off > len)
			return 0;
	}
	return 0;
}

/* Scans one Elf_Data of notes (converted by libelf to memory byte order). */
static int from_data(Elf_Data *data, uint8_t id[BUILDID_MAX])
{
	if (!data || !data->d_buf)
		return 0;
	return buildid_from_notes(data->d_buf, data->d_size, data->d_type == ELF_T_NHDR8 ? 8 : 4,
				  id);
}

int buildid_from_elf(Elf *elf, uint8_t id[BUILDID_MAX])
{
	Elf_Scn *scn = NULL;
	size_t phnum;
	int n = 0;

	if (elf_getphdrnum(elf, &phnum) == 0) {
		for (size_t i = 0; i < phnum && n == 0; i++) {
			GElf_Phdr ph;

			if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_NOTE ||
			    ph.p_filesz == 0)
				continue;
			n = from_data(
			    elf_getdata_rawchunk(elf, (int64_t)ph.p_offset, ph.p_filesz,
						 ph.p_align == 8 ? ELF_T_NHDR8 : ELF_T_NHDR),
			    id);
		}
	}
	while (n == 0 && (scn = elf_nextscn(elf, scn)) != NULL) {
		GElf_Shdr sh;

		if (gelf_getshdr(scn, &sh) && sh.sh_type == SHT_NOTE)
			n = from_data(elf_getdata(scn, NULL), id);
	}
	return n;
}

int buildid_read_hex(int fd, char *hex, size_t size)
{
	uint8_t id[BUILDID_MAX];
	Elf *elf;
	int n;

	if (elf_version(EV_CURRENT) == EV_NONE)
		return -ENOTSUP;
	elf = elf_begin(fd, ELF_C_READ, NULL);
	if (!elf || elf_kind(elf) != ELF_K_ELF) {
		elf_end(elf);
		return -EINVAL;
	}
	n = buildid_from_elf(elf, id);
	elf_end(elf);
	if (n <= 0)
		return n ? n : -ENOENT;
	if (size < 2 * (size_t)n + 1)
		return -ENOSPC;
	tp_hex_encode(id, (size_t)n, hex);
	hex[2 * n] = '\0';
	return 0;
}
