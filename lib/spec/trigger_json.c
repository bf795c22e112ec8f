/*
 * trigger_json.c - see trigger_json.h.
 */
#include "trigger_json.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "manifest.h"
#include "traceprof/trigger_spec.h"

static json_t *scalar_to_json(const yaml_node_t *n)
{
	const char *s = (const char *)n->data.scalar.value;
	size_t len = n->data.scalar.length;
	char *end;

	if (n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
		return json_stringn(s, len);
	if (len == 0 || !strcmp(s, "~") || !strcmp(s, "null") || !strcmp(s, "Null") ||
	    !strcmp(s, "NULL"))
		return json_null();
	if (!strcmp(s, "true") || !strcmp(s, "True") || !strcmp(s, "TRUE"))
		return json_true();
	if (!strcmp(s, "false") || !strcmp(s, "False") || !strcmp(s, "FALSE"))
		return json_false();
	errno = 0;
	long long i = strtoll(s, &end, 10);
	if (!errno && end != s && !*end)
		return json_integer(i);
	double d = strtod(s, &end);
	if (end != s && !*end && strspn(s, "+-0123456789.eE") == len)
		return json_real(d);
	return json_stringn(s, len);
}

json_t *trigger_yaml_to_json(yaml_document_t *doc, yaml_node_t *n, int depth)
{
	if (!n || depth > MANIFEST_MAX_DEPTH)
		return NULL;
	if (n->type == YAML_SCALAR_NODE)
		return scalar_to_json(n);
	if (n->type == YAML_SEQUENCE_NODE) {
		json_t *a = json_array();

		for (yaml_node_item_t *it = n->data.sequence.items.start;
		     it < n->data.sequence.items.top; it++) {
			json_t *v =
			    trigger_yaml_to_json(doc, yaml_document_get_node(doc, *it), depth + 1);

			if (!v) {
				json_decref(a);
				return NULL;
			}
			json_array_append_new(a, v);
		}
		return a;
	}
	if (n->type == YAML_MAPPING_NODE) {
		json_t *o = json_object();

		for (yaml_node_pair_t *p = n->data.mapping.pairs.start;
		     p < n->data.mapping.pairs.top; p++) {
			yaml_node_t *k = yaml_document_get_node(doc, p->key);
			json_t *v;

			if (!k || k->type != YAML_SCALAR_NODE) {
				json_decref(o);
				return NULL;
			}
			v = trigger_yaml_to_json(doc, yaml_document_get_node(doc, p->value),
						 depth + 1);
			if (!v) {
				json_decref(o);
				return NULL;
			}
			json_object_set_new(o, (const char *)k->data.scalar.value, v);
		}
		return o;
	}
	return NULL;
}

json_t *trigger_yaml_documents(const char *buf, size_t len)
{
	yaml_parser_t p;
	json_t *docs = json_array();

	if (!yaml_parser_initialize(&p))
		return NULL;
	yaml_parser_set_input_string(&p, (const unsigned char *)buf, len);
	for (;;) {
		yaml_document_t doc;
		yaml_node_t *root;
		json_t *v;

		if (!yaml_parser_load(&p, &doc)) {
			json_decref(docs);
			docs = NULL;
			break;
		}
		root = yaml_document_get_root_node(&doc);
		if (!root) {
			yaml_document_delete(&doc);
			break;
		}
		v = trigger_yaml_to_json(&doc, root, 0);
		yaml_document_delete(&doc);
		if (v && json_is_object(v))
			json_array_append_new(docs, v);
		else
			json_decref(v);
	}
	yaml_parser_delete(&p);
	return docs;
}

/* A string, double-quoted and escaped: never read back as another type. */
static void yaml_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20 || c == 0x7f)
			fprintf(f, "\\x%02x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

/* A value on one line: scalars as YAML, lists and maps in flow style (JSON,
 * which YAML reads). */
static void yaml_inline(FILE *f, const json_t *v)
{
	if (json_is_string(v)) {
		yaml_str(f, json_string_value(v));
	} else {
		char *text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);

		fputs(text ? text : "null", f);
		free(text);
	}
}

/* Keys such as apiVersion or app.kubernetes.io/name need no quotes. */
static int plain_key(const char *k)
{
	if (!((*k >= 'a' && *k <= 'z') || (*k >= 'A' && *k <= 'Z')))
		return 0;
	return strspn(k, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./-") ==
	       strlen(k);
}

void trigger_yaml_write(FILE *f, const json_t *obj, int indent)
{
	const char *key;
	json_t *val;

	json_object_foreach((json_t *)obj, key, val)
	{
		fprintf(f, "%*s", indent, "");
		if (plain_key(key))
			fputs(key, f);
		else
			yaml_str(f, key);
		if (json_is_object(val) && json_object_size(val)) {
			fputs(":\n", f);
			trigger_yaml_write(f, val, indent + 2);
		} else {
			fputs(": ", f);
			yaml_inline(f, val);
			fputc('\n', f);
		}
	}
}

/* Adds the K=V pairs of text to labels; 0, or -1 with the reason in err. */
static int parse_labels(const char *flag, const char *text, json_t *labels, char *err,
			size_t errlen)
{
	char *copy = strdup(text), *save = NULL, *tok;
	int rc = 0;

	if (!copy) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(tok, '=');

		if (!eq || eq == tok || !eq[1]) {
			snprintf(err, errlen, "--%s: \"%s\" is not KEY=VALUE", flag, tok);
			rc = -1;
			break;
		}
		*eq = '\0';
		if (json_object_size(labels) >= TRIGGER_SPEC_MAX_LIST) {
			snprintf(err, errlen, "--%s: more than %d labels", flag,
				 TRIGGER_SPEC_MAX_LIST);
			rc = -1;
			break;
		}
		json_object_set_new(labels, tok, json_string(eq + 1));
	}
	if (rc == 0 && json_object_size(labels) == 0) {
		snprintf(err, errlen, "--%s: no labels in \"%s\"", flag, text);
		rc = -1;
	}
	free(copy);
	return rc;
}

/* The value of field f from its text v (a flag's value), or NULL with err set. */
static json_t *value_of(const struct trigger_spec_field *f, const char *v, char *err, size_t errlen)
{
	json_t *sel, *labels;
	char *end;
	long long n;

	switch (f->type) {
	case TRIGGER_SPEC_UINT:
		errno = 0;
		n = strtoll(v, &end, 10);
		if (errno || end == v || *end) {
			snprintf(err, errlen, "--%s: \"%s\" is not a number", f->flag, v);
			return NULL;
		}
		return json_integer(n);
	case TRIGGER_SPEC_BOOL: /* the flag takes no value: given means true */
		return json_boolean(strcmp(v, "true") == 0);
	case TRIGGER_SPEC_SELECTOR:
		sel = json_object();
		labels = json_object();
		json_object_set_new(sel, "matchLabels", labels);
		if (parse_labels(f->flag, v, labels, err, errlen) < 0) {
			json_decref(sel);
			return NULL;
		}
		return sel;
	default:
		return json_string(v);
	}
}

/* Sets obj at the dotted path below it ("match.route"), making the objects between. */
static void set_at(json_t *obj, const char *path, json_t *v)
{
	const char *dot;

	while ((dot = strchr(path, '.'))) {
		char key[64];
		json_t *next;

		snprintf(key, sizeof(key), "%.*s", (int)(dot - path), path);
		if (!(next = json_object_get(obj, key))) {
			next = json_object();
			json_object_set_new(obj, key, next);
		}
		obj = next;
		path = dot + 1;
	}
	json_object_set_new(obj, path, v);
}

json_t *trigger_manifest_from_values(const char *name, const char *ns, const char *const *values,
				     char *err, size_t errlen)
{
	json_t *m = json_object(), *meta = json_object(), *spec = json_object();

	json_object_set_new(m, "apiVersion", json_string(TRIGGER_SPEC_API_VERSION));
	json_object_set_new(m, "kind", json_string(TRIGGER_SPEC_KIND));
	json_object_set_new(meta, "name", json_string(name));
	json_object_set_new(meta, "namespace", json_string(ns));
	json_object_set_new(m, "metadata", meta);
	json_object_set_new(m, "spec", spec);
	for (size_t i = 0; i < trigger_spec_n_fields; i++) {
		const struct trigger_spec_field *f = &trigger_spec_fields[i];
		json_t *v;

		if (!values[i])
			continue;
		if (!f->flag || !(v = value_of(f, values[i], err, errlen))) {
			if (!f->flag)
				snprintf(err, errlen, "%s: no flag sets it", f->path);
			json_decref(m);
			return NULL;
		}
		set_at(spec, f->path + strlen("spec."), v);
	}
	return m;
}
