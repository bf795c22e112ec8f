/*
 * offcpu_view.h - the off-CPU parts of `traceprof trace-profile`, read
 * through the SQL API as the reader role (docs/offcpu.md, docs/sql.md):
 *
 *   the breakdown    traceprof.trace_time_breakdown: per service and span,
 *                    span ms = CPU + blocked + runqueue + other, drawn as a
 *                    bar, with the top blocking functions (text view);
 *   the stacks       traceprof.trace_offcpu_folded (blocked and runqueue):
 *                    added to the trace's CPU set as off-CPU rows
 *                    (tp_stack_row.offcpu_us) for the SVG and pprof views,
 *                    with traceprof.trace_gpu_folded's GPU rows
 *                    (tp_stack_row.gpu_ns; gpu_view.h has the rest of the
 *                    GPU views).
 */
#ifndef TRACEPROF_OFFCPU_VIEW_H
#define TRACEPROF_OFFCPU_VIEW_H

#include <stdio.h>

#include "cli.h"
#include "traceprof/stackset.h"

#define OFFCPU_BAR_WIDTH 40 /* characters of the breakdown's bar */

/* Writes the breakdown of the trace (service NULL: every service) to out,
 * followed by a blank line, when the trace has off-CPU time; writes
 * nothing otherwise. Returns 0, or an exit code after saying what failed. */
int offcpu_breakdown_text(FILE *out, struct cli_db *db, const char *trace_id, const char *service);

/* A new set: the rows and frames of cpu followed by the trace's off-CPU
 * stacks (frames by display name, service root left out; runqueue stacks
 * end in a "[runqueue]" frame) and its GPU stacks (traceprof.trace_gpu_folded,
 * ending in their "[gpu] kernel" frame, tp_stack_row.gpu_ns). *out is NULL
 * when the trace has neither off-CPU nor GPU time. Borrows cpu, which must outlive *out; the caller
 * frees *out with offcpu_set_free. Returns 0, or an exit code after saying what failed. */
int offcpu_merge_trace(struct cli_db *db, const char *trace_id, const char *service,
		       const struct tp_stackset *cpu, struct tp_stackset **out);

/* Frees a set from offcpu_merge_trace; NULL is a no-op. */
void offcpu_set_free(struct tp_stackset *set);

#endif
