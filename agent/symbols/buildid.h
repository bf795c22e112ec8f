/*
 * buildid.h - the GNU build id of an ELF file or of a buffer of ELF notes.
 *
 * One reader for every place the agent needs one: the executable of a
 * process (identity), each mapped file (the symbolizer's cache key) and
 * the kernel and its modules (/sys/kernel/notes, /sys/module/<m>/notes).
 * PT_NOTE segments are read first: stripped files keep them when their
 * section headers are gone.
 */
#ifndef TRACEPROF_AGENT_BUILDID_H
#define TRACEPROF_AGENT_BUILDID_H

#include <libelf.h>
#include <stddef.h>
#include <stdint.h>

/* Bytes of a build id kept (GNU ids are 16-20); a longer note is refused. */
#define BUILDID_MAX 64

/*
 * Finds the GNU build id note in len bytes of notes in memory byte order
 * (the raw format of /sys/kernel/notes, or what libelf returns for a note
 * segment or section), each note aligned to align (4, or 8 for notes in an
 * 8-aligned segment). Copies the id to id. Returns its length, 0 when there
 * is none (or the buffer is cut short before it), -ENOSPC when it is
 * longer than BUILDID_MAX.
 */
int buildid_from_notes(const void *notes, size_t len, size_t align, uint8_t id[BUILDID_MAX]);

/* The build id of an open ELF handle: PT_NOTE segments, then SHT_NOTE sections. Same returns. */
int buildid_from_elf(Elf *elf, uint8_t id[BUILDID_MAX]);

/*
 * Writes the build id of the ELF file open at fd as lower case hex to hex
 * (size bytes, 2 * BUILDID_MAX + 1 fits all). Returns 0, -ENOENT when the
 * file has none, -ENOSPC, -EINVAL when it is no ELF.
 */
int buildid_read_hex(int fd, char *hex, size_t size);

#endif
