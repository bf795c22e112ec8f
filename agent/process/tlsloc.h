/*
 * tlsloc.h - where a process keeps its OpenTelemetry thread context
 * pointer (the TLS variable otel_thread_ctx_v1 of OTEP 4947), as the
 * struct tp_tls_loc the BPF sampler evaluates from a thread's thread
 * pointer at sample time.
 *
 * Resolution runs once per process, from outside: the modules mapped in
 * /proc/<pid>/maps are searched for the STT_TLS symbol, then the module's
 * TLS placement is read from the dynamic loader's own bookkeeping (glibc:
 * the link_map list and the nptl_db layout descriptors that libc exports),
 * or computed from the executable's PT_TLS header when there is none to
 * read. docs/agent.md lists what is supported. x86-64 only for now.
 */
#ifndef TRACEPROF_AGENT_TLSLOC_H
#define TRACEPROF_AGENT_TLSLOC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "procmem.h"
#include "bpf/sampler.h"

/* The OTEP 4947 TLS symbol. */
#define TLSLOC_SYMBOL "otel_thread_ctx_v1"

/* tlsloc_resolve flags. */
#define TLSLOC_NO_LINK_MAP 0x1u /* skip the loader's data: compute from PT_TLS only */

/* How a location was found. */
enum tlsloc_method {
	TLSLOC_NOT_FOUND = 0, /* no module defines the symbol: kind TP_TLS_NONE */
	TLSLOC_LINK_MAP = 1,  /* read from the glibc link_map of the defining module */
	TLSLOC_PT_TLS = 2,    /* computed from the executable's PT_TLS (no loader data) */
};

/* What tlsloc_resolve found besides the location, for logs and tests. */
struct tlsloc_info {
	enum tlsloc_method method;     /* how the location was found */
	char module[PROCMEM_PATH_MAX]; /* path (as mapped) of the module defining the symbol */
	uint64_t sym_value;	       /* st_value: offset in the module's TLS block */
	uint64_t tls_offset;	       /* glibc l_tls_offset (or the computed one); 0 if none */
	uint64_t modid;		       /* TLS module id, 0 when not known */
};

/*
 * Resolves the location of otel_thread_ctx_v1 in process pid into *loc
 * (and, when info is not NULL, how it was found into *info). A process
 * without the symbol is not an error: 0 with loc->kind == TP_TLS_NONE.
 * Returns 0, -ESRCH/-ENOENT when the process is gone, -EOPNOTSUPP when a
 * module defines the symbol but its TLS placement cannot be determined
 * (see docs/agent.md), or another -errno (maps, ELF or memory reads).
 */
int tlsloc_resolve(pid_t pid, unsigned flags, struct tp_tls_loc *loc, struct tlsloc_info *info);
/*
 * Files whose symbol tables tlsloc_resolve has read so far, in this
 * process. Whether a file defines the symbol is remembered per file (by
 * device, inode, size and modification time), so this grows with the new
 * files seen, not with the processes looked at.
 */
uint64_t tlsloc_files_read(void);

/* Reads len bytes at addr of the evaluated process into buf: 0 or -errno. */
typedef int (*tlsloc_read_fn)(void *ctx, uint64_t addr, void *buf, size_t len);

/* A tlsloc_read_fn over procmem_read; ctx points to the pid_t. */
int tlsloc_read_pid(void *ctx, uint64_t addr, void *buf, size_t len);

/*
 * The BPF sampler's evaluation in user space: the address of the thread's
 * otel_thread_ctx_v1 (not its value) for the thread whose thread pointer
 * (x86-64: the FS base) is thread_pointer, into *ptr_addr. Memory is read
 * with read(ctx, ...). Returns 0, -ENOENT for TP_TLS_NONE or a DTV entry
 * that this thread has not allocated yet (glibc allocates dynamic TLS on a
 * thread's first access), -EINVAL for an unknown kind, or read's error.
 */
int tlsloc_eval(const struct tp_tls_loc *loc, uint64_t thread_pointer, tlsloc_read_fn read,
		void *ctx, uint64_t *ptr_addr);

/*
 * The symbol lookup tlsloc_resolve uses, on the ELF file at path: the
 * defined symbol name from .dynsym (through its GNU hash table when it has
 * one), else from .symtab. 1: found, *value and *type (STT_*) set; 0: not
 * defined; a negative errno when the file cannot be read as ELF.
 */
int tlsloc_file_symbol(const char *path, const char *name, uint64_t *value, int *type);
/*
 * The same lookup of n names on the open ELF file fd: values[i] and
 * sizes[i] (0 when not defined), and *vaddr0, the ELF address of file
 * offset 0 (from the first PT_LOAD segment). Returns how many were found,
 * or a negative errno when the file is not ELF.
 */
int tlsloc_fd_symbols(int fd, const char *const *names, size_t n, uint64_t *values, uint64_t *sizes,
		      uint64_t *vaddr0);

#endif
