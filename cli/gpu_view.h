/*
 * gpu_view.h - the GPU parts of `traceprof trace-profile`, read through
 * the SQL API as the reader role (docs/gpu.md, docs/sql.md):
 *
 *   per kernel       traceprof.trace_gpu_kernels: launches, GPU ms and
 *                    share per kernel, a table above the text tree and
 *                    the "gpu" object of the JSON view;
 *
 * --format folded appends traceprof.trace_gpu_folded's lines (cmd_trace.c,
 * the same query as the CPU ones); the SVG and pprof views get the GPU
 * stacks with the off-CPU ones (offcpu_merge_trace). A trace without GPU rows prints nothing here.
 */
#ifndef TRACEPROF_GPU_VIEW_H
#define TRACEPROF_GPU_VIEW_H

#include <stdio.h>

#include "cli.h"

/* Writes the trace's GPU time per kernel (service NULL: every service),
 * followed by a blank line, when it has any; nothing otherwise. Returns 0,
 * or an exit code after saying what failed. */
int gpu_kernels_text(FILE *out, struct cli_db *db, const char *trace_id, const char *service);

/* Writes ",\n \"gpu\": {...}" (total, launches, kernels) when the trace
 * has GPU time; nothing otherwise. Returns 0, or an exit code after saying
 * what failed. */
int gpu_kernels_json(FILE *out, struct cli_db *db, const char *trace_id, const char *service);

/* Whether the trace (service NULL: every service) has GPU time: 1 or 0,
 * or -1 after saying what failed (*rc the exit code). */
int gpu_has_time(struct cli_db *db, const char *trace_id, const char *service, int *rc);

#endif
