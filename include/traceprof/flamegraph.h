/*
 * flamegraph.h - self-contained SVG flame graphs of a tp_stackset.
 *
 * One call writes one SVG document: frames merged by display name
 * (tp_frame_info.function) under a root "all"; when the rows come from
 * more than one service, the services are the first level under the
 * root (as the SQL API's folded stacks show them). The document needs no
 * network: its style and script are inline. Hover shows a details line,
 * a click zooms, "Search" highlights a regex or substring and shows the
 * matched share. docs/flamegraph.md describes what is drawn.
 *
 * Differential sets (set->differential): each cohort is normalized to its
 * own total, a frame is as wide as the mean of its two shares, and it is
 * red when its share in cohort A is larger, blue when its share in B is,
 * more saturated the larger the difference.
 *
 * Bad rows (depth 0, a frame index out of range, a negative weight) are
 * left out and counted; the rest is drawn. Output size is bounded: at most
 * max_frames frames are drawn (the minimum frame width is raised until
 * they fit), the rest stays in the width of their parents.
 */
#ifndef TRACEPROF_FLAMEGRAPH_H
#define TRACEPROF_FLAMEGRAPH_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "traceprof/stackset.h"

/* Deeper stacks are cut at this many frames (root first; counted). */
#define TP_FLAMEGRAPH_MAX_DEPTH 1024

/* What a frame's width measures. */
enum tp_flamegraph_weight {
	TP_FLAMEGRAPH_CPU = 0,	   /* cpu_us (b_cpu_us): CPU time */
	TP_FLAMEGRAPH_SAMPLES = 1, /* samples (b_samples) */
};

/* What one rendering did; filled when opts->stats is not NULL. */
struct tp_flamegraph_stats {
	size_t nodes;	       /* frames of the merged tree, the root included */
	size_t drawn;	       /* frames drawn */
	size_t narrow;	       /* frames not drawn: narrower than min_width (their
				  time stays in their parents' width) */
	size_t rows_dropped;   /* rows left out: depth 0, bad frame index, or a
				  negative weight */
	size_t rows_truncated; /* rows cut at TP_FLAMEGRAPH_MAX_DEPTH frames */
	double min_width;      /* the minimum frame width used, px (raised above
				  the asked one when max_frames would be passed) */
	uint64_t bytes;	       /* bytes written */
};

/* Options; a zeroed struct (or NULL) gives every default. */
struct tp_flamegraph_opts {
	const char *title;		   /* heading; NULL: "Flame graph" ("Differential
					      flame graph" for a differential set) */
	const char *subtitle;		   /* second heading line, e.g. the trace id and
					      time range; NULL: none */
	int weight;			   /* enum tp_flamegraph_weight; default CPU time */
	int width;			   /* image width in px; 0: 1200 (at least 200) */
	double min_width;		   /* frames narrower than this (px) are not drawn,
					      nor their children; 0: 0.1 */
	size_t max_frames;		   /* at most this many frames drawn; 0: 20000 */
	const char *a_name;		   /* differential: cohort names shown in the
					      details; NULL: set->a_name, else "A" */
	const char *b_name;		   /* NULL: set->b_name, else "B" */
	struct tp_flamegraph_stats *stats; /* out: what was drawn; NULL: none */
};

/*
 * Writes the flame graph of set to out as one SVG document. Returns 0, or
 * -EINVAL (a NULL set or out, a bad option), -ENOMEM, or -EIO (a write
 * error on out) with a message in err (errlen bytes, may be 0). The set is
 * only read; out is neither flushed nor closed. A set with no rows (or no
 * weight) gives a valid document that says there is nothing to draw.
 */
int tp_flamegraph_svg_write(const struct tp_stackset *set, const struct tp_flamegraph_opts *opts,
			    FILE *out, char *err, size_t errlen);

#endif
