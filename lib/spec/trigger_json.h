/*
 * trigger_json.h - manifests as JSON values (jansson): YAML documents to
 * JSON, JSON back to YAML, and a manifest built from the values of the
 * spec table's fields (the flags of `traceprof trigger create`). The
 * result is then checked by the validator (manifest.h) like any file.
 */
#ifndef TRACEPROF_SPEC_TRIGGER_JSON_H
#define TRACEPROF_SPEC_TRIGGER_JSON_H

#include <stddef.h>
#include <stdio.h>

#include <jansson.h>
#include <yaml.h>

/*
 * A YAML node as a JSON value, plain scalars typed as YAML's core schema
 * does (integers, floats, true/false, null), quoted ones kept as strings.
 * NULL when deeper than MANIFEST_MAX_DEPTH or a key is not a scalar.
 */
json_t *trigger_yaml_to_json(yaml_document_t *doc, yaml_node_t *n, int depth);
/*
 * The documents of a manifest file (buf, len bytes) as a JSON array of
 * objects; empty documents and other values are left out. NULL when the
 * text is not YAML.
 */
json_t *trigger_yaml_documents(const char *buf, size_t len);
/*
 * A JSON object as a YAML mapping in block style, nested mappings indented
 * by two, strings double-quoted (never read back as another type), lists
 * and other values in flow style.
 */
void trigger_yaml_write(FILE *f, const json_t *obj, int indent);
/*
 * The manifest of namespace/name with values[i] (NULL: unset) for
 * trigger_spec_fields[i], as a command line gives them: numbers as text,
 * a selector as "K=V[,K=V]". Only numbers and labels are read here; the
 * rest is the validator's. NULL with the reason, naming the field's flag,
 * in err.
 */
json_t *trigger_manifest_from_values(const char *name, const char *ns, const char *const *values,
				     char *err, size_t errlen);

#endif
