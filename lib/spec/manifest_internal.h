/*
 * manifest_internal.h - between the document walker (manifest.c) and the
 * file reader (manifest_file.c).
 */
#ifndef TRACEPROF_SPEC_MANIFEST_INTERNAL_H
#define TRACEPROF_SPEC_MANIFEST_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include <yaml.h>

#include "manifest.h"

int manifest_walk_document(yaml_document_t *doc, const char *file, int doc_index, bool multi,
			   const struct manifest_opts *opts, struct manifest_trigger *t,
			   struct manifest_error *e, char *err, size_t errlen);

#endif
