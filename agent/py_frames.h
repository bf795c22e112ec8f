/*
 * py_frames.h - the Python frames of a sample (docs/python.md) among its
 * native ones: the sampler's words (bpf/sampler.h, "Python frames") cut
 * into chunks, one per native evaluation-loop frame, each symbolized
 * through the code object cache.
 */
#ifndef TRACEPROF_AGENT_PY_FRAMES_H
#define TRACEPROF_AGENT_PY_FRAMES_H

#include <stddef.h>
#include <stdint.h>

#include "bpf/sampler.h"
#include "proctable.h"
#include "pyproc.h"
#include "symbolize.h"

/* Frames of a sample cut where each was entered from C: chunk j is [at[j], at[j + 1]). */
struct py_chunks {
	uint32_t n;			   /* chunks */
	uint32_t at[TP_PY_MAX_FRAMES + 1]; /* their starts, then the end */
};

/* The sample's Python frames (0 for other records, or counts that do not fit). */
uint32_t py_frames_count(const struct tp_sample *s);
/* Its chunks, innermost first. */
void py_frames_chunks(const struct tp_sample *s, uint32_t n, struct py_chunks *c);
/* Whether the native address ip is the interpreter's evaluation loop in p. */
int py_frames_is_eval(const struct proc *p, uint64_t ip);

typedef void (*py_emit_fn)(void *ctx, const struct sym_frame *f);
/*
 * Emits frames [from, to) of s, outermost first, each named module.qualname
 * with its file and line (an unreadable code object: "[python]").
 * Returns the frames whose code could not be read.
 */
uint32_t py_frames_emit(struct pycache *pc, const struct proc *p, const struct tp_sample *s,
			uint32_t from, uint32_t to, py_emit_fn emit, void *ctx);

#endif
