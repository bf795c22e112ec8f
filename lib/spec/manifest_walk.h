/*
 * manifest_walk.h - the state of one document's walk and the helpers the
 * walker's parts share: manifest.c (the document, metadata, selector,
 * unknown keys) and manifest_fields.c (the spec table's value kinds).
 */
#ifndef TRACEPROF_SPEC_MANIFEST_WALK_H
#define TRACEPROF_SPEC_MANIFEST_WALK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <yaml.h>

#include "manifest.h"
#include "traceprof/trigger_spec.h"

#define EXCERPT_SIZE MANIFEST_ESCAPED_SIZE(MANIFEST_EXCERPT_MAX)

struct walk {
	yaml_document_t *doc;		  /* the document being walked */
	const char *file;		  /* name for messages */
	int doc_index;			  /* 1-based document index */
	bool multi;			  /* the file has several documents */
	const struct manifest_opts *opts; /* mode */
	bool failed;			  /* an error was recorded */
	char err[512];			  /* the first error */
	char quoted[3][EXCERPT_SIZE + 2]; /* excerpts for the message being written */
	int next_quoted;		  /* the entry of quoted to use next */
};

void mwalk_fail(struct walk *w, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
const char *mwalk_excerpt(struct walk *w, const char *s, bool quote);
yaml_node_t *mwalk_node_at(struct walk *w, int idx);
const char *mwalk_scalar(const yaml_node_t *n);
bool mwalk_is_plain(const yaml_node_t *n);
bool mwalk_is_null(const yaml_node_t *n);
bool mwalk_is_plain_bool(const yaml_node_t *n);
bool mwalk_is_plain_number(const yaml_node_t *n);
const char *mwalk_kind_of(const yaml_node_t *n);
const char *mwalk_get_string(struct walk *w, yaml_node_t *n, const char *field, size_t maxlen);
bool mwalk_get_uint(struct walk *w, yaml_node_t *n, const char *field, uint64_t min, uint64_t max,
		    uint64_t *out);
bool mwalk_parse_selector(struct walk *w, yaml_node_t *n, struct manifest_trigger *t);
bool mwalk_parse_field(struct walk *w, const struct trigger_spec_field *f, yaml_node_t *v,
		       struct manifest_trigger *t);

#endif
