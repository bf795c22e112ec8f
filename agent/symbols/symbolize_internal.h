/*
 * symbolize_internal.h - what symbolize.c (lookups, address cache, kernel)
 * and symcache.c (interned strings, the ELF cache, process snapshots)
 * share. Not for other modules.
 *
 * Ownership graph: the symbolizer owns every sym_elf (a list plus an LRU
 * of those with loaded symbols) and every sym_proc (a hash by pid). A
 * process mapping holds a counted reference on its sym_elf; a sym_elf is
 * destroyed when nothing references it and its symbols are not loaded.
 * Strings are interned for the symbolizer's lifetime.
 */
#ifndef TRACEPROF_AGENT_SYMBOLIZE_INTERNAL_H
#define TRACEPROF_AGENT_SYMBOLIZE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "elfsyms.h"
#include "kallsyms.h"
#include "perfmap.h"
#include "symbolize.h"

#define SYM_PROC_BUCKETS 1024 /* hash buckets of the process table */

/* The identity of a file without a build id: changes when it is replaced or rewritten. */
struct sym_ident {
	uint64_t dev;	  /* st_dev (0 for the vdso) */
	uint64_t ino;	  /* st_ino (0 for the vdso) */
	uint64_t size;	  /* st_size */
	int64_t mtime_ns; /* st_mtim in ns (a hash of the image for the vdso) */
};

/* One ELF file (or vdso image) known to the symbolizer. */
struct sym_elf {
	uint64_t serial;	/* unique per entry, never reused */
	int refs;		/* process mappings pointing here */
	int fd;			/* the file, kept so it can be (re)loaded after its process exits */
	int debug_fd;		/* separate debug file, or -1 */
	void *image;		/* in-memory copy (vdso), or NULL */
	size_t image_len;	/* bytes at image */
	struct sym_ident ident; /* identity of the file first seen */
	struct elfsyms_header hdr; /* build id, segments */
	const char *module;	   /* interned basename */
	const char *build_id;	   /* interned hex build id, "" if none */
	struct elfsyms *syms;	   /* loaded symbols, or NULL */
	bool load_failed;	   /* loading failed: resolve as unknown without retrying */
	size_t bytes;		   /* elfsyms_bytes() while loaded */
	struct sym_elf *lru_prev;  /* more recently used loaded entry */
	struct sym_elf *lru_next;  /* less recently used loaded entry */
	struct sym_elf *next;	   /* all entries */
};

enum sym_map_type {
	SYM_MAP_ELF,  /* an ELF file or the vdso: elf is set */
	SYM_MAP_FILE, /* a file that could not be read as ELF */
	SYM_MAP_ANON, /* anonymous or pseudo memory (JIT code, [stack], ...) */
};

struct sym_map {
	uint64_t start;		/* first address */
	uint64_t end;		/* one past the last */
	uint64_t offset;	/* file offset at start */
	uint64_t inode;		/* from the maps line, to reuse entries on refresh */
	enum sym_map_type type; /* how addresses in it resolve */
	struct sym_elf *elf;	/* counted reference for SYM_MAP_ELF */
	bool jit;	    /* anonymous, [anon:...] or memfd: JIT code, named from the perf map */
	const char *module; /* interned module name */
};

struct sym_proc {
	int pid;		    /* process id */
	uint32_t gen;		    /* snapshot generation, part of the address cache key */
	uint64_t start_time;	    /* /proc/<pid>/stat start time: detects pid reuse */
	uint64_t last_refresh_ms;   /* when the maps were last read */
	uint64_t last_used_ms;	    /* last lookup, for dropping exited processes */
	struct sym_map *maps;	    /* sorted by start */
	size_t nmaps;		    /* entries in maps */
	const char *exe_build_id;   /* interned, NULL if the executable has none */
	struct perfmap *perfmap;    /* its perf map as read so far, or NULL */
	uint64_t perfmap_polled_ms; /* when the perf map was last looked at */
	bool perfmap_pending;	    /* a JIT address was answered without a name since */
	bool maps_pending;	    /* an address was in no mapping: sym_names_gen re-reads them */
	int nspid;		    /* pid in its own namespace, 0 = not read yet */
	uid_t uid;		    /* its effective uid (valid with nspid) */
	struct sym_proc *next;	    /* hash chain */
};

/*
 * What an address cache entry answers for. An address in an ELF file is
 * keyed by the file (its entry's serial, never reused), the module name
 * the process maps it under, and the ELF address: every process mapping
 * that file shares the entry, whatever its load address (forked workers,
 * new processes of a known program, every process's libc). Other
 * addresses (anonymous memory, unreadable files, no snapshot) are keyed
 * by process snapshot and raw address; kernel ones by kallsyms generation.
 */
struct sym_addr_key {
	uint64_t owner;	    /* SYM_KEY_ELF | elf serial, or (pid << 32) | snapshot generation */
	uint64_t addr;	    /* ELF address, or raw address */
	const char *module; /* interned module name (ELF keys), else NULL */
};

#define SYM_KEY_ELF (1ull << 63)

struct sym_addr_entry {
	struct sym_addr_key key;  /* what it answers for */
	uint32_t n;		  /* frames */
	struct sym_frame *frames; /* owned, NULL for an empty slot */
};

struct intern_chunk;

struct symbolizer {
	struct sym_opts opts;			  /* with defaults filled in */
	const char **intern_slots;		  /* open-addressing set of interned strings */
	size_t intern_cap;			  /* slots, a power of two */
	size_t intern_n;			  /* strings interned */
	struct intern_chunk *chunks;		  /* storage of the strings */
	struct sym_elf *elfs;			  /* every entry */
	struct sym_elf *lru_head;		  /* most recently used loaded entry */
	struct sym_elf *lru_tail;		  /* least recently used loaded entry */
	uint64_t next_serial;			  /* for sym_elf.serial */
	struct sym_proc *procs[SYM_PROC_BUCKETS]; /* by pid */
	uint32_t next_gen;			  /* for sym_proc.gen and kernel_gen */
	uint64_t last_gc_ms;			  /* last sweep of exited processes */
	struct sym_addr_entry *cache;		  /* address cache, direct mapped */
	size_t cache_mask;			  /* entries - 1 */
	unsigned int cache_shift;	 /* 64 - log2(entries): selects the top bits of the hash */
	struct kallsyms *ks;		 /* kernel symbols, or NULL */
	bool ks_tried;			 /* kallsyms load attempted */
	uint64_t ks_loaded_ms;		 /* when it was (re)loaded */
	uint32_t kernel_gen;		 /* address cache generation of ks */
	struct sym_stats stats;		 /* counters; some are computed on read */
	struct perfmap_limits pm_limits; /* caps of the perf maps */
	struct perfmap_stats pm_stats;	 /* their counters */
	/*
	 * The last vDSO read: every process of a kernel maps the same image
	 * (one per ABI), so a process whose [vdso] has this length and ELF
	 * header is given the entry found by vdso_hdr/vdso_id without reading
	 * and hashing the whole image again.
	 */
	bool vdso_known;
	size_t vdso_len;
	unsigned char vdso_ehdr[64];
	struct elfsyms_header vdso_hdr;
	struct sym_ident vdso_id;
};

uint64_t sym_now_ms(void);

/* Interns len bytes at s; returns the stable copy or NULL (ENOMEM). */
const char *sym_intern(struct symbolizer *sym, const char *s, size_t len);
/* sym_intern of a C string; on failure returns fallback (a literal). */
const char *sym_intern_str(struct symbolizer *sym, const char *s, const char *fallback);
void sym_intern_free(struct symbolizer *sym);

/* Loads the entry's symbols if needed (evicting others); false when it cannot. */
bool sym_elf_ensure(struct symbolizer *sym, struct sym_elf *e);
void sym_elf_put(struct symbolizer *sym, struct sym_elf *e);
void sym_elfs_free(struct symbolizer *sym);

struct sym_proc *sym_proc_find(struct symbolizer *sym, int pid);
/* Re-reads the maps of p; returns 0 or -errno (p unchanged). */
int sym_proc_refresh(struct symbolizer *sym, struct sym_proc *p);
/* True when pid still runs the process that p describes. */
bool sym_proc_alive(const struct sym_proc *p);
void sym_proc_drop(struct symbolizer *sym, struct sym_proc *p);
/* Looks at p's perf map (reads what was appended); bumps p->gen when names changed. */
void sym_perfmap_poll(struct symbolizer *sym, struct sym_proc *p, uint64_t now);
/* Drops exited processes idle for opts.idle_ms (never when < 0); at most once a second. */
void sym_procs_gc(struct symbolizer *sym, uint64_t now);

#endif
