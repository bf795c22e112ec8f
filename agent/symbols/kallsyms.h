/*
 * kallsyms.h - the kernel's text symbols from /proc/kallsyms, sorted for
 * binary search.
 *
 * Without privileges (kernel.kptr_restrict, or no CAP_SYSLOG) the kernel
 * lists every address as 0; kallsyms_load() detects that and fails with
 * EPERM instead of building a table where everything is at address 0.
 */
#ifndef TRACEPROF_AGENT_KALLSYMS_H
#define TRACEPROF_AGENT_KALLSYMS_H

#include <stddef.h>
#include <stdint.h>

struct kallsyms;

struct kallsyms_hit {
	const char *name;     /* symbol name, owned by the table */
	const char *module;   /* module from the [mod] column, "vmlinux" for the kernel itself */
	const char *build_id; /* hex build id of that module or kernel, "" if unknown; owned */
	uint64_t start;	      /* address of the symbol */
	uint64_t base;	      /* lowest text address of the same module */
};

/*
 * Reads path (NULL = "/proc/kallsyms"), keeping text symbols (types t, T, w,
 * W). Returns NULL with errno set: EPERM when all addresses read as zero
 * (not privileged), ENOENT, ENOMEM, EIO when nothing usable was found.
 * The caller frees with kallsyms_free().
 */
struct kallsyms *kallsyms_load(const char *path);
void kallsyms_free(struct kallsyms *ks);
/*
 * Finds the symbol containing addr: the last one at or below it, when addr
 * is before the next symbol (or within a page of the last one). Returns 0
 * or -ENOENT. Build ids are read from /sys/kernel/notes and
 * /sys/module/<mod>/notes once per module, at its first hit.
 */
int kallsyms_lookup(struct kallsyms *ks, uint64_t addr, struct kallsyms_hit *out);
size_t kallsyms_count(const struct kallsyms *ks);
/* Heap bytes held by the table. */
size_t kallsyms_bytes(const struct kallsyms *ks);

#endif
