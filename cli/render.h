/*
 * render.h - the outputs of `traceprof` drawn from a struct tp_stackset:
 * the text report (per service: hotspots, then the call tree with CPU time
 * and percentages) and the JSON tree; and the SQL API's folded text for
 * flamegraph.pl, written as it is.
 * Renderers only read the set; other formats (SVG, pprof) are further
 * renderers of the same set, one case each in the commands' format switch.
 */
#ifndef TRACEPROF_RENDER_H
#define TRACEPROF_RENDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "traceprof/options.h"
#include "traceprof/stackset.h"

#define RENDER_DEFAULT_MIN_PCT 1.0 /* text tree: subtrees below this % are summarized */
#define RENDER_HOTSPOTS	       5   /* text and JSON: top functions by self time */

struct render_opts {
	double min_pct; /* text tree: leave out subtrees under this % of the service */
};

/* --min-pct P into opts: 0, or CLI_USAGE after saying P is not 0-100. */
int render_parse_min_pct(const char *text, const char *cmd, struct render_opts *opts);
/* The same as the parser of an options row (o->data: the command's name),
 * into the struct render_opts at o->offset; it says what was wrong. */
int render_opt_min_pct(void *obj, const struct tp_option *o, const char *v, char *err,
		       size_t errlen);
/* --min-pct P into member ro (struct render_opts) of T. */
#define RENDER_OPT_MIN_PCT(T, cmd, h)                                                              \
	{                                                                                          \
		.name = "min-pct", .type = TP_OPT_CUSTOM, .offset = offsetof(T, ro), .arg = "P",   \
		.help = h, .parse = render_opt_min_pct, .data = cmd                                \
	}

/* Text: for each service (byte order), a header line, its hotspots and its
 * call tree. Returns 0 or -errno. */
int render_text(FILE *f, const struct tp_stackset *set, const struct render_opts *opts);

/* Folded stacks as the SQL API's folded text gives them (trace_folded_text,
 * service_folded_text: "root;...;leaf N" lines, N in whole microseconds of
 * CPU, in byte order), written as they are with a final newline: SQL folds,
 * the command only prints. Returns 0 or -EIO. */
int render_folded_text(FILE *f, const char *text);

/* The JSON array of services (docs/cli.md, "JSON"): each with cpu_ms,
 * samples, hotspots and the full call tree. Keys in a fixed order. */
int render_json_services(FILE *f, const struct tp_stackset *set, const char *indent);

/* An SVG flame graph (flamegraph.h; differential when the set is) with
 * title and subtitle. Says what went wrong (cli_error) and returns -errno. */
int render_svg(FILE *f, const struct tp_stackset *set, const char *title, const char *subtitle);

/* A gzip-compressed pprof profile (pprof.h) of the set's cohort A. Refuses
 * a terminal (binary output). Says what went wrong and returns -errno. */
int render_pprof(FILE *f, const struct tp_stackset *set);

/* Closes the output once the renderer returned rc (0 or -errno) and gives
 * the exit code. reported: the renderer has said what went wrong (the SVG
 * and pprof writers do, and their -EINVAL is a usage error such as pprof
 * to a terminal); else the error is said here. */
int render_close(FILE *out, const char *path, int rc, bool reported);

#endif
