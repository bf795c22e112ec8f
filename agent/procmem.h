/*
 * procmem.h - another process seen from outside: its mappings
 * (/proc/<pid>/maps), its memory (process_vm_readv, /proc/<pid>/mem as the
 * fallback) and the files behind its mappings, opened the way that works
 * across mount namespaces (/proc/<pid>/map_files, then /proc/<pid>/root).
 *
 * Shared by the thread context locator (tlsloc), the process context reader
 * (procctx) and the identity reader (identity). Reads are rare (once per
 * process or per update), so nothing is cached here.
 */
#ifndef TRACEPROF_AGENT_PROCMEM_H
#define TRACEPROF_AGENT_PROCMEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Longest path kept for a mapping; longer ones are cut (and not opened). */
#define PROCMEM_PATH_MAX 512

/* One line of /proc/<pid>/maps. */
struct procmem_map {
	uint64_t start;		     /* first address */
	uint64_t end;		     /* one past the last address */
	uint64_t offset;	     /* file offset of start */
	uint64_t inode;		     /* inode of the file, 0 for anonymous memory */
	char perms[5];		     /* "r-xp" and the like, NUL-terminated */
	char path[PROCMEM_PATH_MAX]; /* file path or pseudo name ("[heap]"), may be empty */
};

/* All mappings of a process, in address order. */
struct procmem_maps {
	struct procmem_map *maps; /* n entries, malloc'd */
	size_t n;		  /* number of mappings */
};

/*
 * Reads /proc/<pid>/maps into maps (overwritten). The caller frees with
 * procmem_maps_free. Returns 0, -ENOENT when the process is gone, -ENOMEM,
 * or the errno of the failed read.
 */
int procmem_maps_read(pid_t pid, struct procmem_maps *maps);
/* Frees what procmem_maps_read allocated; a zeroed struct is fine. */
void procmem_maps_free(struct procmem_maps *maps);

/*
 * Copies len bytes at addr in process pid to buf: process_vm_readv, then
 * pread on /proc/<pid>/mem when that is refused. All or nothing: returns 0,
 * or -EFAULT when part of the range is not mapped, or another -errno.
 */
int procmem_read(pid_t pid, uint64_t addr, void *buf, size_t len);

/*
 * Opens the file behind map read-only: /proc/<pid>/map_files/<range> (same
 * file even in another mount namespace or after the path was replaced),
 * else /proc/<pid>/root/<path>. Returns a file descriptor the caller closes,
 * or -errno.
 */
int procmem_open_mapped(pid_t pid, const struct procmem_map *map);

/* True when the mapping is backed by a file (a path starting with '/' and an inode). */
bool procmem_map_is_file(const struct procmem_map *map);

#endif
