/*
 * procmaps.h - the executable mappings of a process, read from
 * /proc/<pid>/maps.
 *
 * Only mappings with execute permission are kept: a sampled user IP always
 * lies in one, and a process has far fewer of them than mappings in all.
 * Entries are sorted by start address (the kernel lists them that way) so a
 * lookup is a binary search.
 */
#ifndef TRACEPROF_AGENT_PROCMAPS_H
#define TRACEPROF_AGENT_PROCMAPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct procmaps_entry {
	uint64_t start;	  /* first address of the mapping */
	uint64_t end;	  /* one past the last address */
	uint64_t offset;  /* file offset mapped at start */
	uint64_t inode;	  /* inode of the mapped file, 0 for anonymous memory */
	unsigned int dev; /* device of the file, makedev(major, minor) */
	bool deleted;	  /* the path ended in " (deleted)" (removed from this line's path) */
	const char *path; /* file path, "[vdso]"-like pseudo name, or "" (anonymous); owned by the
			     procmaps */
};

struct procmaps {
	size_t n;			/* entries */
	struct procmaps_entry *entries; /* sorted by start, non-overlapping */
	char *strings;			/* the paths, one allocation */
};

/*
 * Reads the executable mappings of pid from /proc/<pid>/maps. Returns NULL with errno set: ESRCH or
 * ENOENT when the process is gone, EACCES, ENOMEM, EIO. The caller frees with procmaps_free().
 */
struct procmaps *procmaps_read(int pid);
/* Parses the text of a maps file (for tests and procmaps_read). Same errors. */
struct procmaps *procmaps_parse(const char *text, size_t len);
void procmaps_free(struct procmaps *pm);
/* The entry containing addr, or NULL. */
const struct procmaps_entry *procmaps_find(const struct procmaps *pm, uint64_t addr);

#endif
