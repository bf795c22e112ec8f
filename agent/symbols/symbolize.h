/*
 * symbolize.h - turns sampled instruction pointers into functions, source
 * lines and modules: user frames from ELF symbol tables and DWARF, kernel
 * frames from /proc/kallsyms.
 *
 * Data flow: the agent calls sym_note_process() when it first sees a pid;
 * that snapshots /proc/<pid>/maps and opens every executable file mapped
 * (through /proc/<pid>/map_files, so deleted binaries and other mount
 * namespaces work). sym_user() later resolves an IP of that pid, even after
 * the process has exited: file -> ELF cache entry (keyed by GNU build id,
 * or by (dev, inode, size, mtime) for files without one) -> symbol, line
 * and inlined functions. Each (pid, ip) is resolved once; repeats hit an
 * address cache that neither searches nor allocates.
 *
 * Frames the symbolizer cannot name are still frames: "module+0xoffset"
 * with the module's build id, kind SYM_KIND_UNKNOWN (docs/agent.md lists
 * every form). No input crashes it: corrupt ELF files, vanished processes
 * and unmapped addresses all give such frames.
 *
 * Ownership: every string in a struct sym_frame is interned by the
 * symbolizer and stays valid, at the same address, until sym_free(). The
 * symbol tables themselves are cached within opts.max_elf_bytes.
 *
 * A struct symbolizer is not thread-safe; use one per thread (they share
 * nothing) or lock around it. int functions return 0 or -errno unless
 * stated; pointer functions return NULL and set errno.
 */
#ifndef TRACEPROF_AGENT_SYMBOLIZE_H
#define TRACEPROF_AGENT_SYMBOLIZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Values of sym_frame.kind, as stored in traceprof.functions.kind. */
enum sym_kind {
	SYM_KIND_USER = 0,    /* a user-space function found in a symbol table */
	SYM_KIND_KERNEL = 1,  /* a kernel function from /proc/kallsyms */
	SYM_KIND_UNKNOWN = 2, /* unsymbolized: "module+0xoffset", "[anon]", "[unknown]" */
};

struct sym_frame {
	const char *function; /* function name as in the symbol table, or the unknown forms */
	const char *module;   /* file basename ("libc.so.6"), "[vdso]", "vmlinux", kernel module */
	const char *build_id; /* hex GNU build id of the module, "" when it has none */
	const char *file;     /* source file from DWARF, NULL when unknown */
	int line;	      /* source line, 0 when unknown */
	uint64_t address;     /* ELF virtual address (user), offset in the module (kernel) */
	int kind;	      /* enum sym_kind */
};

struct sym_opts {
	size_t max_elf_bytes;	    /* symbol tables + debug info kept loaded; 0 = 256 MiB */
	size_t addr_cache_entries;  /* resolved addresses remembered; 0 = 16384 (power of two) */
	int refresh_ms;		    /* re-read a process's maps on a miss at most this often;
				       0 = 1000, < 0 = on every miss */
	int idle_ms;		    /* exited processes unused this long are dropped; 0 = 60000;
				       < 0 = never: the caller forgets every process that ends
				       (sym_forget_process), and no /proc is read to find them */
	bool no_lines;		    /* skip DWARF: no file/line, no inlined frames */
	bool no_perf_maps;	    /* do not name JIT code from /tmp/perf-<pid>.map */
	size_t perfmap_max_entries; /* perf map entries kept per process; 0 = 262144 */
	size_t perfmap_max_bytes;   /* perf map bytes kept per process; 0 = 32 MiB */
	size_t perfmap_total_bytes; /* perf map bytes kept over all processes; 0 = 128 MiB */
	const char *kallsyms_path;  /* NULL = /proc/kallsyms */
};

struct sym_stats {
	uint64_t lookups;      /* sym_user + sym_kernel calls */
	uint64_t cache_hits;   /* answered from the address cache */
	uint64_t cache_misses; /* resolved through mappings and symbol tables */
	uint64_t elf_loads;    /* symbol tables parsed (a file evicted and reloaded counts twice) */
	uint64_t elf_evictions;	  /* symbol tables dropped to stay within max_elf_bytes */
	uint64_t elf_refused;	  /* files refused: compressed sections inflate past the limits */
	uint64_t elf_entries;	  /* files known now (loaded or not) */
	uint64_t elf_bytes;	  /* bytes of the loaded symbol tables and debug info now */
	uint64_t unknown_frames;  /* frames returned with SYM_KIND_UNKNOWN (misses only) */
	uint64_t processes;	  /* process snapshots held now */
	uint64_t inherited;	  /* snapshots copied from a forking parent */
	uint64_t map_refreshes;	  /* maps re-read because an address was outside them */
	uint64_t kernel_symbols;  /* entries of the kallsyms table, 0 if not loaded */
	uint64_t kernel_bytes;	  /* heap bytes of the kallsyms table */
	uint64_t intern_bytes;	  /* bytes of interned strings (grows until sym_free) */
	bool kallsyms_restricted; /* /proc/kallsyms showed only zero addresses */
	/* perf maps (JIT code): docs/symbols.md, "Perf maps (JIT)" */
	uint64_t perfmap_processes; /* processes whose perf map is held now */
	uint64_t perfmap_entries;   /* entries held now, all processes */
	uint64_t perfmap_bytes;	    /* bytes held now (entries and names) */
	uint64_t perfmap_lines;	    /* lines read and kept */
	uint64_t
	    perfmap_bad_lines;	  /* lines skipped: garbage, bad hex, size 0, wrapping, too long */
	uint64_t perfmap_dropped; /* good lines not kept: past a cap */
	uint64_t perfmap_rereads; /* files read again from the start (shrunk, replaced) */
	uint64_t perfmap_refused; /* files not read: not regular, another owner */
	uint64_t perfmap_frames;  /* frames named from perf maps (misses only) */
};

struct symbolizer;

/* opts may be NULL for the defaults. The caller frees with sym_free(). */
struct symbolizer *sym_new(const struct sym_opts *opts);
/* Frees everything, including every string ever returned. NULL is a no-op. */
void sym_free(struct symbolizer *sym);

/*
 * Snapshots the executable mappings of pid and opens the files behind them,
 * so its addresses resolve after it exits. Calling it again for a known pid
 * does nothing, unless the pid now belongs to another process (start time
 * changed): then the snapshot is replaced. Returns 0, -ESRCH (gone),
 * -EACCES, -ENOMEM.
 */
int sym_note_process(struct symbolizer *sym, int pid);
/*
 * pid was forked by parent: it gets a copy of the parent's snapshot (the
 * same mappings, files and executable) without reading /proc, so its
 * addresses resolve even when it is gone before they are looked up.
 * start_time is pid's (procmem_start_time units). Does nothing when pid is
 * known with that start time. Returns 0, -ESRCH (parent not known),
 * -ENOMEM.
 */
int sym_inherit_process(struct symbolizer *sym, int pid, int parent, uint64_t start_time);
/* Drops the snapshot of pid (its files stay cached by build id). */
void sym_forget_process(struct symbolizer *sym, int pid);

/*
 * Symbolizes a user-space ip of pid into out[0..max-1], root first: the
 * function containing ip, then the functions inlined into it, innermost
 * last (all with the same module, build id and address). Returns the
 * number of frames written, >= 1 (a chain longer than max keeps its root
 * side), or -EINVAL when max < 1. A pid never noted is noted first.
 *
 * ip is looked up as given: for a return address (every frame of a stack
 * but the leaf) pass ip - 1, so the call instruction, not the one after
 * it, is found (it may belong to another function or line).
 */
int sym_user(struct symbolizer *sym, int pid, uint64_t ip, struct sym_frame *out, int max);
/*
 * A number that changes whenever frames of pid may resolve differently than
 * before: its mappings were re-read, or its perf map gained entries after
 * one of its JIT addresses was answered without a name (or replaced
 * entries). A cache of stacks keyed by raw addresses mixes it into its
 * key. Cheap enough per sample: a hash lookup, and while an address of pid
 * is unnamed, a clock read and at most one look at its perf map per
 * refresh_ms. 0 for a pid not known.
 */
uint32_t sym_names_gen(struct symbolizer *sym, int pid);

/*
 * Symbolizes a kernel ip into *out (kind SYM_KIND_KERNEL, or UNKNOWN with
 * function "[kernel]" when kallsyms is unavailable or ip is outside it).
 * Loads /proc/kallsyms at the first call. Returns 1 (frames written).
 */
int sym_kernel(struct symbolizer *sym, uint64_t ip, struct sym_frame *out);

/*
 * The hex build id of pid's main executable (noting pid if needed), or NULL
 * with errno ESRCH (unknown and gone) or ENODATA (no build id). The string
 * is owned by the symbolizer until sym_free().
 */
const char *sym_build_id_of_exe(struct symbolizer *sym, int pid);

void sym_get_stats(const struct symbolizer *sym, struct sym_stats *out);

#endif
