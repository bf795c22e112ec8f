/*
 * manifest.c - strict validation of one TraceProfileTrigger document
 * (see manifest.h and crds/README.md for the schema): the loaded YAML tree
 * is walked field by field; the first error rejects the document and names
 * the field path and why. The fields of spec, their keys, types and bounds
 * are the table of trigger_spec.h (parse_fields); metadata and the
 * selector's inner shape are checked here. Reading files and splitting
 * documents: manifest_file.c.
 */
#include "manifest.h"
#include "manifest_internal.h"
#include "manifest_walk.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yaml.h>

#include "jsonbuf.h"
#include "traceprof/trigger_spec.h"

void mwalk_fail(struct walk *w, const char *field, const char *fmt, ...)
{
	char why[384];
	va_list ap;

	if (w->failed)
		return;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	w->failed = true;
	if (w->multi)
		snprintf(w->err, sizeof(w->err), "%s: document %d: %s: %s", w->file, w->doc_index,
			 field, why);
	else
		snprintf(w->err, sizeof(w->err), "%s: %s: %s", w->file, field, why);
}

/*
 * A value of the document for a message: at most MANIFEST_EXCERPT_MAX bytes,
 * escaped (manifest_escape), in double quotes when quote; "(not shown)" when
 * the text may not be quoted (opts->no_excerpts). The result lives until the
 * third call after this one.
 */
const char *mwalk_excerpt(struct walk *w, const char *s, bool quote)
{
	char *out = w->quoted[w->next_quoted];
	char esc[EXCERPT_SIZE];

	w->next_quoted = (w->next_quoted + 1) % 3;
	if (w->opts && w->opts->no_excerpts)
		return "(not shown)";
	manifest_escape(esc, sizeof(esc), s, MANIFEST_EXCERPT_MAX);
	snprintf(out, sizeof(w->quoted[0]), quote ? "\"%s\"" : "%s", esc);
	return out;
}

yaml_node_t *mwalk_node_at(struct walk *w, int idx)
{
	return yaml_document_get_node(w->doc, idx);
}

const char *mwalk_scalar(const yaml_node_t *n)
{
	return (const char *)n->data.scalar.value;
}

bool mwalk_is_plain(const yaml_node_t *n)
{
	return n->type == YAML_SCALAR_NODE && n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
}

bool mwalk_is_null(const yaml_node_t *n)
{
	static const char *const nulls[] = {"", "~", "null", "Null", "NULL"};

	if (!mwalk_is_plain(n))
		return false;
	for (size_t i = 0; i < sizeof(nulls) / sizeof(nulls[0]); i++)
		if (strcmp(mwalk_scalar(n), nulls[i]) == 0)
			return true;
	return false;
}

bool mwalk_is_plain_bool(const yaml_node_t *n)
{
	static const char *const bools[] = {"true", "false", "True", "False", "TRUE", "FALSE"};

	if (!mwalk_is_plain(n))
		return false;
	for (size_t i = 0; i < sizeof(bools) / sizeof(bools[0]); i++)
		if (strcmp(mwalk_scalar(n), bools[i]) == 0)
			return true;
	return false;
}

bool mwalk_is_plain_number(const yaml_node_t *n)
{
	const char *s;
	char *end;

	if (!mwalk_is_plain(n))
		return false;
	s = mwalk_scalar(n);
	if (!*s)
		return false;
	errno = 0;
	(void)strtod(s, &end);
	return *end == '\0';
}

const char *mwalk_kind_of(const yaml_node_t *n)
{
	if (n->type == YAML_MAPPING_NODE)
		return "an object";
	if (n->type == YAML_SEQUENCE_NODE)
		return "a list";
	if (mwalk_is_null(n))
		return "null";
	if (mwalk_is_plain_bool(n))
		return "a boolean";
	if (mwalk_is_plain_number(n))
		return "a number";
	return "a string";
}

static bool has_control_chars(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return true;
	return false;
}

/* A string field: a scalar that YAML would not read as a number, boolean or null. */
const char *mwalk_get_string(struct walk *w, yaml_node_t *n, const char *field, size_t maxlen)
{
	const char *s;

	if (n->type != YAML_SCALAR_NODE || mwalk_is_null(n) || mwalk_is_plain_bool(n) ||
	    mwalk_is_plain_number(n)) {
		mwalk_fail(w, field, "must be a string, got %s%s", mwalk_kind_of(n),
			   n->type == YAML_SCALAR_NODE && !mwalk_is_null(n) ? " (quote it)" : "");
		return NULL;
	}
	s = mwalk_scalar(n);
	if (!*s) {
		mwalk_fail(w, field, "must not be empty");
		return NULL;
	}
	if (strlen(s) > maxlen) {
		mwalk_fail(w, field, "longer than %zu characters", maxlen);
		return NULL;
	}
	if (has_control_chars(s)) {
		mwalk_fail(w, field, "contains control characters");
		return NULL;
	}
	return s;
}

bool mwalk_get_uint(struct walk *w, yaml_node_t *n, const char *field, uint64_t min, uint64_t max,
		    uint64_t *out)
{
	const char *s;
	uint64_t v = 0;

	if (!mwalk_is_plain(n) || mwalk_is_null(n)) {
		mwalk_fail(w, field, "must be an integer, got %s", mwalk_kind_of(n));
		return false;
	}
	s = mwalk_scalar(n);
	if (*s == '+')
		s++;
	if (!*s) {
		mwalk_fail(w, field, "must be an integer, got %s",
			   mwalk_excerpt(w, mwalk_scalar(n), true));
		return false;
	}
	for (const char *p = s; *p; p++) {
		if (!isdigit((unsigned char)*p)) {
			mwalk_fail(w, field, "must be an integer between %llu and %llu, got %s",
				   (unsigned long long)min, (unsigned long long)max,
				   mwalk_excerpt(w, mwalk_scalar(n), false));
			return false;
		}
		if (v > (UINT64_MAX - 9) / 10) {
			v = UINT64_MAX;
			break;
		}
		v = v * 10 + (uint64_t)(*p - '0');
	}
	if (v < min || v > max) {
		mwalk_fail(w, field, "must be between %llu and %llu, got %s",
			   (unsigned long long)min, (unsigned long long)max,
			   mwalk_excerpt(w, mwalk_scalar(n), false));
		return false;
	}
	*out = v;
	return true;
}

/*
 * Checks that n is a mapping whose keys are distinct strings among known
 * (NULL-terminated). Returns false after recording the error.
 */
static bool check_mapping(struct walk *w, yaml_node_t *n, const char *field,
			  const char *const *known)
{
	yaml_node_pair_t *p, *q;

	if (n->type != YAML_MAPPING_NODE) {
		mwalk_fail(w, field, "must be an object, got %s", mwalk_kind_of(n));
		return false;
	}
	for (p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
		yaml_node_t *k = mwalk_node_at(w, p->key);
		char path[256];

		if (!k || k->type != YAML_SCALAR_NODE) {
			mwalk_fail(w, field, "keys must be strings");
			return false;
		}
		snprintf(path, sizeof(path), "%s.%s", field,
			 mwalk_excerpt(w, mwalk_scalar(k), false));
		for (q = n->data.mapping.pairs.start; q < p; q++)
			if (strcmp(mwalk_scalar(mwalk_node_at(w, q->key)), mwalk_scalar(k)) == 0) {
				mwalk_fail(w, path, "duplicate field");
				return false;
			}
		if (!known)
			continue;
		bool found = false;
		char list[200] = "";
		size_t used = 0;

		for (const char *const *kn = known; *kn; kn++) {
			if (strcmp(*kn, mwalk_scalar(k)) == 0)
				found = true;
			used += (size_t)snprintf(list + used,
						 used < sizeof(list) ? sizeof(list) - used : 0,
						 "%s%s", kn == known ? "" : ", ", *kn);
		}
		if (!found) {
			mwalk_fail(w, path, "unknown field (known: %s)", list);
			return false;
		}
	}
	return true;
}

/* The value of key in mapping n (checked before), or NULL; a null value counts as absent. */
static yaml_node_t *field_of(struct walk *w, yaml_node_t *n, const char *key)
{
	for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++)
		if (strcmp(mwalk_scalar(mwalk_node_at(w, p->key)), key) == 0) {
			yaml_node_t *v = mwalk_node_at(w, p->value);

			return v && !mwalk_is_null(v) ? v : NULL;
		}
	return NULL;
}

static bool is_dns_label(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > MANIFEST_NAME_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];

		if (!(islower((unsigned char)c) || isdigit((unsigned char)c) || c == '-'))
			return false;
	}
	return s[0] != '-' && s[n - 1] != '-';
}

static bool parse_label_name(struct walk *w, yaml_node_t *n, const char *field, char *out)
{
	const char *s = mwalk_get_string(w, n, field, 253);

	if (!s)
		return false;
	if (!is_dns_label(s)) {
		mwalk_fail(w, field,
			   "%s is not a DNS-1123 label (at most 63 characters: lower case "
			   "letters, digits and '-', starting and ending with a letter or digit)",
			   mwalk_excerpt(w, s, true));
		return false;
	}
	strcpy(out, s);
	return true;
}

static bool check_string_map(struct walk *w, yaml_node_t *n, const char *field)
{
	if (!check_mapping(w, n, field, NULL))
		return false;
	if (n->data.mapping.pairs.top - n->data.mapping.pairs.start > MANIFEST_MAX_LIST) {
		mwalk_fail(w, field, "more than %d entries", MANIFEST_MAX_LIST);
		return false;
	}
	for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top;
	     p++) {
		yaml_node_t *v = mwalk_node_at(w, p->value);
		char path[256];

		snprintf(path, sizeof(path), "%s.%s", field,
			 mwalk_excerpt(w, mwalk_scalar(mwalk_node_at(w, p->key)), false));
		if (v->type != YAML_SCALAR_NODE ||
		    (mwalk_is_plain(v) && !mwalk_is_null(v) &&
		     (mwalk_is_plain_bool(v) || mwalk_is_plain_number(v)))) {
			mwalk_fail(w, path, "must be a string, got %s (quote it)",
				   mwalk_kind_of(v));
			return false;
		}
	}
	return true;
}

static bool parse_metadata(struct walk *w, yaml_node_t *n, struct manifest_trigger *t)
{
	static const char *const known[] = {"name", "namespace", "labels", "annotations", NULL};
	yaml_node_t *v;

	if (!check_mapping(w, n, "metadata", known))
		return false;
	strcpy(t->namespace_, "default");
	if ((v = field_of(w, n, "namespace")) &&
	    !parse_label_name(w, v, "metadata.namespace", t->namespace_))
		return false;
	if (!(v = field_of(w, n, "name"))) {
		mwalk_fail(w, "metadata.name", "required");
		return false;
	}
	if (!parse_label_name(w, v, "metadata.name", t->name))
		return false;
	if ((v = field_of(w, n, "labels")) && !check_string_map(w, v, "metadata.labels"))
		return false;
	if ((v = field_of(w, n, "annotations")) && !check_string_map(w, v, "metadata.annotations"))
		return false;
	return true;
}

/* The scalar n as a JSON string (a null value as ""). */
static void json_scalar(struct jsonbuf *b, const yaml_node_t *n)
{
	jsonbuf_str(b, mwalk_is_null(n) ? "" : mwalk_scalar(n));
}

/*
 * The selector (checked before) as canonical JSON: matchLabels, then
 * matchExpressions, in the order written. Stored with the spec so that the
 * table holds what the trigger selects.
 */
static bool selector_json(struct walk *w, yaml_node_t *n, struct manifest_trigger *t)
{
	struct jsonbuf b = {0};
	yaml_node_t *v;
	const char *sep = "";

	jsonbuf_printf(&b, "{");
	if ((v = field_of(w, n, "matchLabels"))) {
		jsonbuf_printf(&b, "\"matchLabels\": {");
		for (yaml_node_pair_t *p = v->data.mapping.pairs.start;
		     p < v->data.mapping.pairs.top; p++) {
			jsonbuf_printf(&b, "%s", p == v->data.mapping.pairs.start ? "" : ", ");
			jsonbuf_str(&b, mwalk_scalar(mwalk_node_at(w, p->key)));
			jsonbuf_printf(&b, ": ");
			json_scalar(&b, mwalk_node_at(w, p->value));
		}
		jsonbuf_printf(&b, "}");
		sep = ", ";
	}
	if ((v = field_of(w, n, "matchExpressions"))) {
		jsonbuf_printf(&b, "%s\"matchExpressions\": [", sep);
		for (yaml_node_item_t *it = v->data.sequence.items.start;
		     it < v->data.sequence.items.top; it++) {
			yaml_node_t *e = mwalk_node_at(w, *it), *vals = field_of(w, e, "values");

			jsonbuf_printf(
			    &b, "%s{\"key\": ", it == v->data.sequence.items.start ? "" : ", ");
			jsonbuf_str(&b, mwalk_scalar(field_of(w, e, "key")));
			jsonbuf_printf(&b, ", \"operator\": ");
			jsonbuf_str(&b, mwalk_scalar(field_of(w, e, "operator")));
			if (vals) {
				jsonbuf_printf(&b, ", \"values\": [");
				for (yaml_node_item_t *x = vals->data.sequence.items.start;
				     x < vals->data.sequence.items.top; x++) {
					jsonbuf_printf(&b, "%s",
						       x == vals->data.sequence.items.start ? ""
											    : ", ");
					json_scalar(&b, mwalk_node_at(w, *x));
				}
				jsonbuf_printf(&b, "]");
			}
			jsonbuf_printf(&b, "}");
		}
		jsonbuf_printf(&b, "]");
	}
	jsonbuf_printf(&b, "}");
	if (!(t->selector_json = jsonbuf_take(&b))) {
		mwalk_fail(w, "spec.selector", "out of memory");
		return false;
	}
	return true;
}

bool mwalk_parse_selector(struct walk *w, yaml_node_t *n, struct manifest_trigger *t)
{
	static const char *const known[] = {"matchLabels", "matchExpressions", NULL};
	static const char *const expr_known[] = {"key", "operator", "values", NULL};
	yaml_node_t *v;

	if (!check_mapping(w, n, "spec.selector", known))
		return false;
	if ((v = field_of(w, n, "matchLabels")) &&
	    !check_string_map(w, v, "spec.selector.matchLabels"))
		return false;
	if ((v = field_of(w, n, "matchExpressions"))) {
		if (v->type != YAML_SEQUENCE_NODE) {
			mwalk_fail(w, "spec.selector.matchExpressions", "must be a list, got %s",
				   mwalk_kind_of(v));
			return false;
		}
		if (v->data.sequence.items.top - v->data.sequence.items.start > MANIFEST_MAX_LIST) {
			mwalk_fail(w, "spec.selector.matchExpressions", "more than %d entries",
				   MANIFEST_MAX_LIST);
			return false;
		}
		int i = 0;

		for (yaml_node_item_t *it = v->data.sequence.items.start;
		     it < v->data.sequence.items.top; it++, i++) {
			yaml_node_t *e = mwalk_node_at(w, *it), *op, *vals;
			char path[128], sub[160];

			snprintf(path, sizeof(path), "spec.selector.matchExpressions[%d]", i);
			if (!check_mapping(w, e, path, expr_known))
				return false;
			snprintf(sub, sizeof(sub), "%s.key", path);
			if (!field_of(w, e, "key")) {
				mwalk_fail(w, sub, "required");
				return false;
			}
			if (!mwalk_get_string(w, field_of(w, e, "key"), sub,
					      TRIGGER_SPEC_LABEL_KEY_MAX))
				return false;
			snprintf(sub, sizeof(sub), "%s.operator", path);
			op = field_of(w, e, "operator");
			if (!op || op->type != YAML_SCALAR_NODE ||
			    (strcmp(mwalk_scalar(op), "In") && strcmp(mwalk_scalar(op), "NotIn") &&
			     strcmp(mwalk_scalar(op), "Exists") &&
			     strcmp(mwalk_scalar(op), "DoesNotExist"))) {
				mwalk_fail(w, sub, "must be In, NotIn, Exists or DoesNotExist");
				return false;
			}
			snprintf(sub, sizeof(sub), "%s.values", path);
			vals = field_of(w, e, "values");
			if (vals && vals->type != YAML_SEQUENCE_NODE) {
				mwalk_fail(w, sub, "must be a list, got %s", mwalk_kind_of(vals));
				return false;
			}
			if (vals &&
			    vals->data.sequence.items.top - vals->data.sequence.items.start >
				MANIFEST_MAX_LIST) {
				mwalk_fail(w, sub, "more than %d entries", MANIFEST_MAX_LIST);
				return false;
			}
			for (yaml_node_item_t *x = vals ? vals->data.sequence.items.start : NULL;
			     vals && x < vals->data.sequence.items.top; x++)
				if (mwalk_node_at(w, *x)->type != YAML_SCALAR_NODE) {
					mwalk_fail(w, sub, "must be a list of strings, got %s",
						   mwalk_kind_of(mwalk_node_at(w, *x)));
					return false;
				}
		}
	}
	t->has_selector = true;
	return selector_json(w, n, t);
}

#define MAX_KEYS 16

/*
 * The keys the table has directly under parent ("spec", "spec.match"), in
 * table order, into keys (NULL-terminated); names holds their text.
 */
static void known_keys(const char *parent, const char *keys[MAX_KEYS + 1], char names[MAX_KEYS][32])
{
	size_t plen = strlen(parent), n = 0;

	for (size_t i = 0; i < trigger_spec_n_fields && n < MAX_KEYS; i++) {
		const char *path = trigger_spec_fields[i].path, *rest;
		size_t len;
		bool seen = false;

		/* rest only once path is known to go on past parent and its '.' */
		if (strncmp(path, parent, plen) != 0 || path[plen] != '.')
			continue;
		rest = path + plen + 1;
		len = strcspn(rest, ".");
		if (len >= 32)
			continue;
		snprintf(names[n], 32, "%.*s", (int)len, rest);
		for (size_t k = 0; k < n; k++)
			seen |= strcmp(keys[k], names[n]) == 0;
		if (!seen) {
			keys[n] = names[n];
			n++;
		}
	}
	keys[n] = NULL;
}

/* check_mapping() with the keys of the table under field. */
static bool check_known(struct walk *w, yaml_node_t *n, const char *field)
{
	const char *keys[MAX_KEYS + 1];
	char names[MAX_KEYS][32];

	known_keys(field, keys, names);
	return check_mapping(w, n, field, keys);
}

/* Every field of the table, in its order; objects (spec.match...) checked when first met. */
static bool parse_fields(struct walk *w, yaml_node_t *spec, struct manifest_trigger *t)
{
	char group[64] = "";
	yaml_node_t *holder = NULL;

	for (size_t i = 0; i < trigger_spec_n_fields; i++) {
		const struct trigger_spec_field *f = &trigger_spec_fields[i];
		const char *key = trigger_spec_key(f);
		char parent[64];
		yaml_node_t *v;

		snprintf(parent, sizeof(parent), "%.*s", (int)(key - 1 - f->path), f->path);
		if (strcmp(parent, group) != 0) {
			snprintf(group, sizeof(group), "%s", parent);
			holder = strcmp(parent, "spec") == 0
				     ? spec
				     : field_of(w, spec, parent + strlen("spec."));
			if (holder && holder != spec && !check_known(w, holder, parent))
				return false;
		}
		if (!holder || !(v = field_of(w, holder, key)))
			continue;
		if (!mwalk_parse_field(w, f, v, t))
			return false;
		if (f->only_with &&
		    !*(const bool *)((const char *)t + trigger_spec_field(f->only_with)->offset)) {
			mwalk_fail(w, f->path, "set only with %s: true", f->only_with);
			return false;
		}
	}
	return true;
}

static bool parse_spec(struct walk *w, yaml_node_t *n, struct manifest_trigger *t)
{
	t->frequency_hz = TRIGGER_SPEC_HZ_DEFAULT;
	t->max_requests = TRIGGER_SPEC_REQUESTS_DEFAULT;
	t->timeout_ms = TRIGGER_SPEC_TIMEOUT_DEFAULT_MS;
	t->offcpu_threshold_us = TRIGGER_SPEC_OFFCPU_DEFAULT_US;
	if (!check_known(w, n, "spec") || !parse_fields(w, n, t))
		return false;
	if (w->opts && w->opts->local) {
		if (!t->service) {
			mwalk_fail(w, "spec.service",
				   t->has_selector
				       ? "selector needs the Kubernetes API; set spec.service"
				       : "required (the service the trigger profiles)");
			return false;
		}
	} else if (!t->service && !t->has_selector) {
		mwalk_fail(w, "spec", "set spec.selector or spec.service");
		return false;
	}
	if (!w->opts || !w->opts->local) {
		if (t->n_pids || t->n_cgroup_paths) {
			mwalk_fail(w, "spec.targets", "only outside Kubernetes (local mode)");
			return false;
		}
	}
	return true;
}

static bool parse_root(struct walk *w, yaml_node_t *n, struct manifest_trigger *t,
		       struct manifest_error *e)
{
	static const char *const known[] = {"apiVersion", "kind",   "metadata",
					    "spec",	  "status", NULL};
	yaml_node_t *v;
	const char *s;

	if (!check_mapping(w, n, "(document)", known))
		return false;
	if (!(v = field_of(w, n, "apiVersion"))) {
		mwalk_fail(w, "apiVersion", "required (%s)", MANIFEST_API_VERSION);
		return false;
	}
	if (!(s = mwalk_get_string(w, v, "apiVersion", 128)))
		return false;
	if (strcmp(s, MANIFEST_API_VERSION) != 0) {
		mwalk_fail(w, "apiVersion", "must be %s, got %s", MANIFEST_API_VERSION,
			   mwalk_excerpt(w, s, true));
		return false;
	}
	if (!(v = field_of(w, n, "kind"))) {
		mwalk_fail(w, "kind", "required (%s)", MANIFEST_KIND);
		return false;
	}
	if (!(s = mwalk_get_string(w, v, "kind", 128)))
		return false;
	if (strcmp(s, MANIFEST_KIND) != 0) {
		mwalk_fail(w, "kind", "must be %s, got %s", MANIFEST_KIND,
			   mwalk_excerpt(w, s, true));
		return false;
	}
	if (!(v = field_of(w, n, "metadata"))) {
		mwalk_fail(w, "metadata", "required");
		return false;
	}
	if (!parse_metadata(w, v, t))
		return false;
	strcpy(e->namespace_, t->namespace_);
	strcpy(e->name, t->name);
	if (!(v = field_of(w, n, "spec"))) {
		mwalk_fail(w, "spec", "required");
		return false;
	}
	return parse_spec(w, v, t);
}

/*
 * Walks one loaded document. Returns 1 with *t filled, 0 with the error in
 * err (and the trigger's namespace and name in e when they were readable),
 * or -1 when the document is empty (null).
 */
int manifest_walk_document(yaml_document_t *doc, const char *file, int doc_index, bool multi,
			   const struct manifest_opts *opts, struct manifest_trigger *t,
			   struct manifest_error *e, char *err, size_t errlen)
{
	struct walk w = {
	    .doc = doc, .file = file, .doc_index = doc_index, .multi = multi, .opts = opts};
	yaml_node_t *root = yaml_document_get_root_node(doc);

	if (!root || mwalk_is_null(root))
		return -1;
	if (parse_root(&w, root, t, e))
		return 1;
	snprintf(err, errlen, "%s", w.err);
	return 0;
}
