/*
 * pyproc.h - CPython processes seen from outside (docs/python.md): which
 * interpreter a process runs and where its runtime state is (pyproc_detect,
 * for the sampler's "py_procs"), and the names, files and lines of the
 * code objects its samples' Python frames point at (pycache).
 *
 * Detection: a mapped file named python3* or libpython3* that defines
 * _PyRuntime and Py_Version; the version is read from the process (the
 * value of Py_Version), the layout is the table entry of its major and
 * minor version (pyproc_layouts), completed for 3.13+ from the
 * interpreter's own _Py_DebugOffsets (each offset bounded before use),
 * and the runtime is checked before use: the main interpreter's first
 * thread state must point back at it. An unknown version, or a runtime
 * that does not check out, gives native frames only.
 *
 * Not thread-safe: the agent's main loop owns the cache.
 */
#ifndef TRACEPROF_AGENT_PYPROC_H
#define TRACEPROF_AGENT_PYPROC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "bpf/sampler.h"
#include "procmem.h"

/*
 * Where, in 3.13+'s _Py_DebugOffsets (the 64-bit words at the start of
 * _PyRuntime, after the cookie "xdebugpy"), each offset the agent uses is:
 * a word index per field, per minor version (the struct grows between
 * versions).
 */
struct pyproc_debug_words {
	uint8_t version;				  /* PY_VERSION_HEX */
	uint8_t rt_interp_head;				  /* _PyRuntime: interpreters.head */
	uint8_t is_threads_head;			  /* PyInterpreterState: threads.head */
	uint8_t is_next;				  /* PyInterpreterState: next */
	uint8_t is_gil_holder;				  /* PyInterpreterState: _gil.last_holder */
	uint8_t ts_next, ts_interp, ts_frame;		  /* PyThreadState: ..., current_frame */
	uint8_t ts_thread_id, ts_native_tid;		  /* ... */
	uint8_t fr_previous, fr_code, fr_instr, fr_owner; /* _PyInterpreterFrame */
	uint8_t co_filename, co_name, co_qualname;	  /* PyCodeObject */
	uint8_t co_linetable, co_firstlineno, co_adaptive; /* ... */
	uint8_t bytes_size, bytes_data;			   /* PyBytesObject: ob_size, ob_sval */
	uint8_t str_state, str_length, str_ascii_size;	   /* PyASCIIObject, sizeof it */
	uint8_t count;					   /* words to read */
};

/* Offsets the agent reads code objects with (the sampler's are in struct tp_py_proc). */
struct pyproc_layout {
	unsigned major, minor;			/* the versions it is for */
	const struct pyproc_debug_words *debug; /* 3.13+: the rest from the process */
	struct tp_py_proc bpf;	     /* the sampler's offsets (interp_head: from _PyRuntime) */
	uint16_t runtime_interp;     /* _PyRuntime: interpreters.head */
	uint16_t runtime_gil_holder; /* _PyRuntime: the GIL holder's thread state (3.11) */
	uint32_t interp_gil_holder;  /* the main interpreter: its GIL's last holder (3.13+) */
	uint16_t ts_interp;	     /* PyThreadState: interp */
	uint16_t co_filename;	     /* PyCodeObject */
	uint16_t co_name;	     /* ... */
	uint16_t co_qualname;	     /* ... */
	uint16_t co_linetable;	     /* ... */
	uint16_t co_firstlineno;     /* ... (an int) */
	uint16_t func_module;	     /* PyFunctionObject: __module__ */
	uint16_t str_state;	     /* PyASCIIObject: the state bits (an unsigned int) */
	uint16_t str_length;	     /* ... the length in code points */
	uint16_t str_ascii_data;     /* data of a compact ASCII string */
	uint16_t str_compact_data;   /* data of a compact string that is not ASCII */
	uint16_t bytes_size;	     /* PyBytesObject: ob_size */
	uint16_t bytes_data;	     /* ... ob_sval */
};

/* The layouts known, and how many. */
extern const struct pyproc_layout pyproc_layouts[];
extern const size_t pyproc_nlayouts;

struct pyproc {
	uint32_t version;	     /* Py_Version (0x030b07f0 is 3.11.7 final), 0 when not read */
	struct pyproc_layout layout; /* the table's entry, completed from the process (3.13+) */
	struct tp_py_proc bpf;	     /* for sampler_set_python */
	uint64_t eval_start, eval_end; /* _PyEval_EvalFrameDefault in the process, [start, end) */
	uint64_t cache_epoch;	       /* the pycache's epoch when cache_bytes was counted */
	size_t cache_bytes;	       /* bytes of the pycache holding this process's code */
};

/*
 * Looks at pid's mappings (maps, read by the caller) for a CPython
 * interpreter. 0: found and checked (*out set); -ENOENT: not Python;
 * -ENOTSUP: a version without a layout (out->version set); -EAGAIN: the
 * runtime is not initialized yet (look again later); another -errno.
 */
int pyproc_detect(pid_t pid, const struct procmem_maps *maps, struct pyproc *out);

/*
 * A code object as the agent names it: one allocation holding the struct,
 * its strings and its location table (free with free()). Strings are
 * valid UTF-8.
 */
struct pycode {
	const char *function;	  /* "module.qualname" ("qualname" when the module is unknown) */
	const char *file;	  /* co_filename */
	int firstlineno;	  /* co_firstlineno */
	const uint8_t *linetable; /* co_linetable bytes, NULL when unreadable */
	size_t linetable_len;	  /* its length */
	size_t bytes;		  /* the allocation's size */
};

/*
 * Reads the code object at code of pid, named with the module whose name
 * is the str at module (0: none), and checks that its qualified name and
 * location table are still those the sample saw (ident, tp_py_ident of
 * their addresses: a code object freed since and its address reused fails
 * it). *out is the caller's to free. 0; -ESTALE when it is no longer the
 * code the sample saw; -EFAULT when the memory is not a readable code
 * object; -ENOMEM.
 */
int pycode_read(pid_t pid, const struct pyproc_layout *l, uint64_t code, uint64_t module,
		uint32_t ident, struct pycode **out);
/* The line of the instruction at byte offset instr in the code (CPython 3.11's location table). */
int pycode_line(const struct pycode *c, uint32_t instr);

/*
 * Code objects read, per (process, program generation, code address,
 * module, identity), bounded in bytes: the whole cache by budget_bytes and
 * each process by budget_bytes / PYCACHE_SHARE (a process over its share
 * loses its own entries, counted; a full cache is emptied, counted), and
 * by PYCACHE_MAX entries.
 */
#define PYCACHE_MAX   16384
#define PYCACHE_SHARE 4 /* a process may hold a quarter of the budget */
struct pycache_stats {
	uint64_t hits, misses; /* lookups */
	uint64_t faults;       /* code objects that could not be read */
	uint64_t stale;	       /* code objects freed (or changed) since their sample */
	uint64_t flushes;      /* the cache was full and emptied */
	uint64_t share_evicts; /* a process over its share lost its entries */
	uint64_t bytes;	       /* held now */
	uint64_t budget_bytes; /* the bound */
};
struct pycache;
/* A cache of at most budget_bytes; NULL on ENOMEM. */
struct pycache *pycache_new(size_t budget_bytes);
void pycache_free(struct pycache *pc);
/*
 * The code that frame word f (the sampler's three words, sampler.h) of
 * process pid (program generation gen, interpreter pp) names, read on a
 * miss; NULL when unreadable or stale. Valid until the next call.
 */
const struct pycode *pycache_get(struct pycache *pc, pid_t pid, uint64_t gen, struct pyproc *pp,
				 const __u64 f[TP_PY_WORDS]);
/* Forgets the process's entries (it exited or exec'd). */
void pycache_forget(struct pycache *pc, pid_t pid);
void pycache_get_stats(const struct pycache *pc, struct pycache_stats *out);

#endif
