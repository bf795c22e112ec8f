/*
 * perfmap.h - names of JIT code from a process's perf map
 * (/tmp/perf-<pid>.map), the text file that JIT compilers write for perf:
 * one line per piece of code, "START SIZE name", START and SIZE in hex
 * (with or without "0x"). Node.js writes it with --perf-basic-prof, Java
 * with `jcmd <pid> Compiler.perfmap`, Python 3.12+ with -X perf.
 *
 * One struct perfmap per process: the entries read so far, sorted and
 * non-overlapping, and where reading stopped. perfmap_update() parses only
 * what was appended since the last call; a file that shrank, was replaced
 * (another inode) or rewritten (its first 64 bytes, or the 64 before where
 * reading stopped, changed) is read again from the start. A later line wins over earlier ones it
 * overlaps (JITs reuse code space): the earlier entries are dropped whole.
 *
 * Hostile files are normal input: garbage lines, bad hex, sizes of 0,
 * ranges that wrap, names longer than PERFMAP_NAME_MAX and lines longer
 * than PERFMAP_LINE_MAX are counted and skipped; a pass parses at most
 * limits.pass_bytes; entries beyond the caps (per process and over all
 * processes) are counted and not kept. Names are kept as valid UTF-8
 * without control characters (other bytes become '?').
 *
 * Not thread-safe. int functions return 0 or -errno unless stated.
 */
#ifndef TRACEPROF_AGENT_PERFMAP_H
#define TRACEPROF_AGENT_PERFMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define PERFMAP_NAME_MAX 2048 /* bytes of a name kept; longer lines are skipped */
#define PERFMAP_LINE_MAX 4096 /* bytes of a line; longer ones are skipped */

struct perfmap_limits {
	size_t max_entries; /* entries kept per process */
	size_t max_bytes;   /* bytes per process: 24 per entry plus the names */
	size_t total_bytes; /* bytes over all processes (stats.bytes) */
	size_t pass_bytes;  /* bytes of the file parsed per perfmap_update */
};

/* Counters over all processes; entries and bytes are what is held now. */
struct perfmap_stats {
	uint64_t entries; /* entries held */
	uint64_t bytes;	  /* bytes held (entries and names) */
	uint64_t lines;	  /* lines parsed and kept */
	uint64_t
	    bad_lines;	  /* skipped: not "START SIZE name", bad hex, size 0, wrapping, too long */
	uint64_t dropped; /* good lines not kept: a cap was reached */
	uint64_t rereads; /* files read again from the start (shrunk, replaced, rewritten) */
	uint64_t refused; /* files not read: a link, not regular, or another user's */
};

/* What perfmap_update changed (bits of its result). */
enum {
	PERFMAP_ADDED = 1,    /* entries were added */
	PERFMAP_REPLACED = 2, /* entries were dropped or replaced (names of addresses changed) */
};

struct perfmap;

struct perfmap *perfmap_new(void);
/* Frees pm and takes its entries and bytes off st. NULL is a no-op. */
void perfmap_free(struct perfmap *pm, struct perfmap_stats *st);

/*
 * Opens the perf map of pid as the process sees it: tmp/perf-<NSPID>.map
 * under /proc/<pid>/root (NSPID: its pid in its own pid namespace, the last
 * field of NSpid in /proc/<pid>/status), resolved inside that root (no
 * symbolic link is followed at all), without blocking. *nspid (0 = not
 * known yet) and *uid cache the status fields. A symbolic link, a file
 * that is not regular, has more than one name or is not owned by the
 * process's user is refused (-EPERM, counted): the agent reads as root
 * what the process's user could have pointed it at. Returns a file
 * descriptor or -errno (-ENOENT: no perf map).
 */
int perfmap_open(int pid, int *nspid, uid_t *uid, struct perfmap_stats *st);
/* As perfmap_open for the file rel under the directory dirfd, owned by uid. */
int perfmap_open_at(int dirfd, const char *rel, uid_t uid, struct perfmap_stats *st);

/*
 * Reads what fd (a perf map) holds past the last update into pm. Returns
 * PERFMAP_ADDED | PERFMAP_REPLACED bits (0: nothing changed) or -errno
 * (pm unchanged).
 */
int perfmap_update(struct perfmap *pm, int fd, const struct perfmap_limits *lim,
		   struct perfmap_stats *st);

/*
 * The name of the entry containing addr, or NULL; *start (may be NULL) is
 * the entry's first address. The string lives until the next update.
 */
const char *perfmap_lookup(const struct perfmap *pm, uint64_t addr, uint64_t *start);
/* Entries held. */
size_t perfmap_count(const struct perfmap *pm);

#endif
