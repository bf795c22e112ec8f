/*
 * procmem.h - another process seen from outside: its mappings
 * (/proc/<pid>/maps), its memory (process_vm_readv, /proc/<pid>/mem as the
 * fallback), the files behind its mappings, opened the way that works
 * across mount namespaces (/proc/<pid>/map_files, then /proc/<pid>/root),
 * its executable's path and its start time.
 *
 * The one place the agent reads these: the thread context locator
 * (tlsloc), the process context reader (procctx), the identity reader
 * (identity), the symbolizer (symcache) and the agent's process table.
 * Reads are rare (once per process or per update), so nothing is cached
 * here.
 */
#ifndef TRACEPROF_AGENT_PROCMEM_H
#define TRACEPROF_AGENT_PROCMEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

/* Longest path of a mapping the kernel writes (PATH_MAX); sizes buffers built from one. */
#define PROCMEM_PATH_MAX 4096

/* One line of /proc/<pid>/maps. */
struct procmem_map {
	uint64_t start;	  /* first address */
	uint64_t end;	  /* one past the last address */
	uint64_t offset;  /* file offset of start */
	uint64_t inode;	  /* inode of the file, 0 for anonymous memory */
	unsigned int dev; /* device of the file, makedev(major, minor) */
	char perms[5];	  /* "r-xp" and the like, NUL-terminated */
	bool deleted;	  /* the path ended in " (deleted)" (cut from path): the file is gone */
	const char *path; /* file path, pseudo name ("[heap]") or "" (anonymous); owned by the
			     procmem_maps */
};

/* All mappings of a process, in address order. */
struct procmem_maps {
	struct procmem_map *maps; /* n entries, sorted by start, non-overlapping */
	size_t n;		  /* number of mappings */
	char *strings;		  /* the paths, one allocation */
};

/*
 * Parses the text of a maps file (len bytes, need not be NUL-terminated)
 * into maps (overwritten). A path may hold spaces and runs to the end of
 * the line; mappings that end before they start are skipped. The caller
 * frees with procmem_maps_free. Returns 0, -EIO when a line is malformed or
 * the mappings are out of order (not a maps file), or -ENOMEM.
 */
int procmem_maps_parse(const char *text, size_t len, struct procmem_maps *maps);
/*
 * Reads /proc/<pid>/maps into maps (overwritten), as procmem_maps_parse.
 * The caller frees with procmem_maps_free. Returns 0, -ENOENT or -ESRCH
 * when the process is gone, -EFBIG past 64 MiB, -EIO, -ENOMEM, or the
 * errno of the failed read.
 */
int procmem_maps_read(pid_t pid, struct procmem_maps *maps);
/*
 * A scope on the calling thread in which the maps of pid are read from the
 * kernel once: later procmem_maps_read(pid) calls parse the same text
 * (generating it is what costs, for a process with many mappings). For
 * one look at a process, whose parts (identity, thread context, symbols)
 * each read the maps; not for longer, as the maps change. The scope also
 * keeps procmem_stat_mapped's answers. begin ends any open scope; end
 * frees the text.
 */
void procmem_maps_scope_begin(pid_t pid);
void procmem_maps_scope_end(void);
/* Frees what procmem_maps_read/parse allocated and zeroes maps; a zeroed struct is fine. */
void procmem_maps_free(struct procmem_maps *maps);
/*
 * A hash of what an inspection of the process depends on: its mappings of
 * files with code (the executable, libraries), memfds and pseudo and named
 * mappings (a published process context), not its anonymous memory, heap
 * or stack, nor data files (shared memory segments, locale archives) or
 * anon_inode: mappings (perf and BPF ring buffers), which change all the
 * time. The same value twice means no library was
 * loaded or unloaded and nothing was published in between. Never 0.
 */
uint64_t procmem_maps_fingerprint(const struct procmem_maps *maps);

/* True when the mapping is backed by a file (a path starting with '/' and an inode). */
bool procmem_map_is_file(const struct procmem_map *map);
/*
 * True when the file of m (a file mapping of maps) is also mapped
 * executable there: a loaded ELF module always has code mapped, data files
 * (shared memory segments, locale archives, database files) never do.
 */
bool procmem_map_has_code(const struct procmem_maps *maps, const struct procmem_map *m);

/*
 * Opens the file behind map read-only: /proc/<pid>/map_files/<range> (same
 * file even in another mount namespace, after the path was replaced or
 * deleted), else /proc/<pid>/root/<path> when the mapping's file still
 * exists and that path still names its inode. Fills *st when st is not
 * NULL. Returns a file descriptor the caller closes, or -errno (-ENOENT
 * when no way leads to the mapped file).
 */
int procmem_open_mapped(pid_t pid, const struct procmem_map *map, struct stat *st);
/*
 * stat() of the file behind map, by the same ways as procmem_open_mapped
 * but without opening it (one system call, where open, fstat and close
 * are three). Within a maps scope on pid the answer is kept per file (the
 * device and inode the maps give): the parts of one look at a process (its
 * thread context, its symbols) stat each file once, whichever of its
 * mappings they ask about. Returns 0 or -errno.
 */
int procmem_stat_mapped(pid_t pid, const struct procmem_map *map, struct stat *st);

/*
 * Copies len bytes at addr in process pid to buf: process_vm_readv, then
 * pread on /proc/<pid>/mem when that is refused. All or nothing: returns 0,
 * or -EFAULT when part of the range is not mapped, or another -errno.
 */
int procmem_read(pid_t pid, uint64_t addr, void *buf, size_t len);

/*
 * The path of pid's executable (the /proc/<pid>/exe link) in buf (size
 * bytes), with a " (deleted)" suffix cut and reported in *deleted (may be
 * NULL). Returns 0, -ENAMETOOLONG, or -errno of readlink (-ENOENT: gone or
 * a kernel thread).
 */
int procmem_exe_path(pid_t pid, char *buf, size_t size, bool *deleted);

/* stat() of the executable of pid (/proc/<pid>/exe); kept within a maps scope on pid. 0 or -errno.
 */
int procmem_exe_stat(pid_t pid, struct stat *st);

/*
 * The start time of pid (field 22 of /proc/<pid>/stat, clock ticks since
 * boot): with the pid, it names one process even after the pid is reused.
 * 0 when the process is gone. Read once within a maps scope on pid.
 */
uint64_t procmem_start_time(pid_t pid);

#endif
