/*
 * flamegraph_internal.h - what the flame graph's tree (flamegraph_svg.c)
 * shares with its SVG writer (flamegraph_svg_write.c), and the inline
 * style and script (flamegraph.css and flamegraph.js, embedded by the
 * build) the writer puts in the document. Not installed.
 */
#ifndef TRACEPROF_FLAMEGRAPH_INTERNAL_H
#define TRACEPROF_FLAMEGRAPH_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "traceprof/flamegraph.h"

#define NAME_MAX_BYTES 1000 /* longer names are cut and end with ".." */
#define PAD	       10   /* px left and right of the frames */
#define ROW_H	       16   /* px per stack level (rect height 15) */
#define TOP_H	       50   /* title and subtitle */
#define BOTTOM_H       50   /* details, matched share, footer */
#define CHAR_W	       7.2  /* px per character of the 12 px monospace font */
#define KIND_SERVICE   3    /* a service level node (beyond enum tp_frame_kind) */
#define KIND_ROOT      4    /* the root, "all" */
#define NONE	       UINT32_MAX

struct node {
	uint32_t parent; /* NONE for the root */
	uint32_t fid;	 /* function id; nfuncs + service id for services */
	uint32_t kids;	 /* first child in fg.kids (after the tree is built) */
	uint32_t nkids;	 /* number of children */
	uint32_t depth;	 /* 0 for the root */
	int64_t a;	 /* weight in cohort A (or the only profile) */
	int64_t b;	 /* weight in cohort B */
	int64_t off;	 /* the part of a that is off-CPU time */
	int64_t gpu;	 /* the part of a that is GPU time */
};

/* A set of strings by content; ids in order of first insertion. */
struct strtab {
	const char **keys; /* id -> string (borrowed) */
	uint32_t *slots;   /* hash slot -> id + 1, 0 = empty */
	size_t n;	   /* strings */
	size_t cap;	   /* slots, a power of two */
};

struct fg {
	const struct tp_stackset *set;
	struct tp_flamegraph_stats st; /* counters so far */
	struct strtab funcs;	       /* display names -> function ids */
	uint32_t *func_frame;	       /* function id -> first frame with that name */
	uint32_t *frame_fid;	       /* frame index -> function id */
	struct strtab services;	       /* service names -> ids */
	uint32_t *row_svc;	       /* row -> service id */
	struct node *nodes;	       /* the merged tree, node 0 the root */
	size_t nnodes, capnodes;       /* used and allocated nodes */
	uint32_t *slots;	       /* (parent, fid) hash -> node index + 1 */
	size_t capslots;	       /* a power of two, > 2 * nnodes */
	uint32_t *kids;		       /* children of every node, sorted by name */
	double ta, tb;		       /* totals of A and B */
	double plot_w;		       /* px available to the root */
};

/* What the writer needs besides the tree. */
struct fg_layout {
	struct fg *fg;			       /* the tree */
	const struct tp_flamegraph_opts *opts; /* title, names */
	int width;			       /* image width, px */
	double min_w100;		       /* frames narrower (1/100 px) are not drawn */
	uint32_t maxdepth;		       /* the deepest drawn frame */
	size_t drawn;			       /* frames drawn */
	uint64_t bytes;			       /* out: bytes written */
};

uint32_t fg_hash_str(const char *s);
int fg_strtab_intern(struct strtab *t, const char *s, uint32_t *id);
const char *fg_node_name(const struct fg *g, const struct node *n);
const char *fg_node_module(const struct fg *g, const struct node *n);
int fg_node_kind(const struct fg *g, const struct node *n);
double fg_node_frac(const struct fg *g, const struct node *n);
/* True when all of the node's weight is off-CPU time (drawn blue). */
bool fg_node_offcpu(const struct node *n);
/* True when all of the node's weight is GPU time (drawn green). */
bool fg_node_gpu(const struct node *n);
int64_t fg_node_w100(const struct fg *g, const struct node *n);

/* Writes the document; 0 or -errno with err set. */
int fg_write_svg(struct fg_layout *lay, FILE *out, char *err, size_t errlen);

extern const char fg_svg_style[];  /* the inline <style> body: flamegraph.css */
extern const char fg_svg_script[]; /* the inline script, after its data: flamegraph.js */

#endif
