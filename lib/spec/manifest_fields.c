/*
 * manifest_fields.c - the values of spec's fields, by the kind the spec
 * table (trigger_spec.h) gives each: numbers, durations, status patterns,
 * methods, booleans, pid and path lists; the selector is manifest.c's.
 * Each checks its bounds and names the field path when it refuses.
 */
#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "manifest_walk.h"

/* The length of a list node, after checking it is one of at most f->max_len entries. */
static bool list_of(struct walk *w, const struct trigger_spec_field *f, yaml_node_t *v,
		    size_t limit, size_t *cnt)
{
	if (v->type != YAML_SEQUENCE_NODE) {
		mwalk_fail(w, f->path, "must be a list, got %s", mwalk_kind_of(v));
		return false;
	}
	*cnt = (size_t)(v->data.sequence.items.top - v->data.sequence.items.start);
	if (*cnt > limit) {
		mwalk_fail(w, f->path, "more than %zu entries", limit);
		return false;
	}
	return true;
}

static bool parse_pids(struct walk *w, const struct trigger_spec_field *f, yaml_node_t *v,
		       struct manifest_trigger *t)
{
	size_t cnt;

	if (!list_of(w, f, v, f->max_len, &cnt))
		return false;
	t->pids = calloc(cnt ? cnt : 1, sizeof(*t->pids));
	if (!t->pids) {
		mwalk_fail(w, f->path, "out of memory");
		return false;
	}
	for (size_t i = 0; i < cnt; i++) {
		char path[64];
		uint64_t pid;

		snprintf(path, sizeof(path), "%s[%zu]", f->path, i);
		if (!mwalk_get_uint(w, mwalk_node_at(w, v->data.sequence.items.start[i]), path,
				    (uint64_t)f->min, (uint64_t)f->max, &pid))
			return false;
		t->pids[t->n_pids++] = (uint32_t)pid;
	}
	return true;
}

static bool parse_paths(struct walk *w, const struct trigger_spec_field *f, yaml_node_t *v,
			struct manifest_trigger *t)
{
	size_t cnt;

	if (!list_of(w, f, v, TRIGGER_SPEC_MAX_LIST, &cnt))
		return false;
	t->cgroup_paths = calloc(cnt ? cnt : 1, sizeof(*t->cgroup_paths));
	if (!t->cgroup_paths) {
		mwalk_fail(w, f->path, "out of memory");
		return false;
	}
	for (size_t i = 0; i < cnt; i++) {
		char path[64];
		const char *s;

		snprintf(path, sizeof(path), "%s[%zu]", f->path, i);
		s = mwalk_get_string(w, mwalk_node_at(w, v->data.sequence.items.start[i]), path,
				     f->max_len);
		if (!s)
			return false;
		if (s[0] != '/') {
			mwalk_fail(w, path,
				   "must be an absolute cgroup v2 path starting with '/', "
				   "got %s",
				   mwalk_excerpt(w, s, true));
			return false;
		}
		if (!(t->cgroup_paths[t->n_cgroup_paths] = strdup(s))) {
			mwalk_fail(w, path, "out of memory");
			return false;
		}
		t->n_cgroup_paths++;
	}
	return true;
}

static bool get_duration(struct walk *w, yaml_node_t *n, const char *field, uint64_t *us)
{
	const char *s;

	if (n->type != YAML_SCALAR_NODE || mwalk_is_null(n) || mwalk_is_plain_bool(n) ||
	    (mwalk_is_plain_number(n) && strcmp(mwalk_scalar(n), "0") != 0)) {
		mwalk_fail(w, field, "must be a duration string such as 300ms, 1.5s or 2m, got %s",
			   mwalk_kind_of(n));
		return false;
	}
	s = mwalk_scalar(n);
	if (manifest_parse_duration(s, us)) {
		mwalk_fail(w, field,
			   "%s is not a duration (use a number and a unit: 300ms, 1.5s, 2m, 1h2m)",
			   mwalk_excerpt(w, s, true));
		return false;
	}
	return true;
}

static bool dup_into(struct walk *w, const char *field, const char *s, char **out)
{
	if (!(*out = strdup(s))) {
		mwalk_fail(w, field, "out of memory");
		return false;
	}
	return true;
}

/*
 * A duration field: kept in µs, or checked against its bounds and kept in
 * ms (DURATION), or checked against bounds in µs and kept in µs as uint32_t
 * (DURATION_US).
 */
static bool parse_duration(struct walk *w, const struct trigger_spec_field *f, yaml_node_t *v,
			   struct manifest_trigger *t)
{
	uint64_t scale = f->type == TRIGGER_SPEC_DURATION_US ? 1 : 1000; /* µs per bound unit */
	char *at = (char *)t + f->offset;
	uint64_t u;

	if (!get_duration(w, v, f->path, &u))
		return false;
	if (f->max == 0) {
		*(uint64_t *)at = u;
	} else if (u < (uint64_t)f->min * scale || u > (uint64_t)f->max * scale) {
		char lo[32], hi[32];

		manifest_format_duration((uint64_t)f->min * scale, lo, sizeof(lo));
		manifest_format_duration((uint64_t)f->max * scale, hi, sizeof(hi));
		mwalk_fail(w, f->path, "must be at least %s and at most %s, got %s", lo, hi,
			   mwalk_excerpt(w, mwalk_scalar(v), false));
		return false;
	} else if (f->type == TRIGGER_SPEC_DURATION_US) {
		*(uint32_t *)at = (uint32_t)u;
	} else {
		*(uint64_t *)at = u / 1000;
	}
	if (f->offset == offsetof(struct manifest_trigger, max_duration_us) && t->max_duration_us &&
	    t->min_duration_us > t->max_duration_us) {
		char a[32], b[32];

		manifest_format_duration(t->min_duration_us, a, sizeof(a));
		manifest_format_duration(t->max_duration_us, b, sizeof(b));
		mwalk_fail(w, "spec.match.minDuration", "%s is greater than maxDuration %s", a, b);
		return false;
	}
	return true;
}

static bool parse_status(struct walk *w, const struct trigger_spec_field *f, yaml_node_t *v,
			 char **out)
{
	char norm[128];
	const char *s = mwalk_get_string(w, v, f->path, f->max_len);

	if (!s)
		return false;
	if (manifest_parse_status(s, norm, sizeof(norm))) {
		mwalk_fail(w, f->path,
			   "%s is not a status pattern (a comma list of codes such as 404 "
			   "or classes 1xx to 5xx, e.g. \"4xx,503\")",
			   mwalk_excerpt(w, s, true));
		return false;
	}
	return dup_into(w, f->path, norm, out);
}

static bool parse_method(struct walk *w, const struct trigger_spec_field *f, yaml_node_t *v,
			 char **out)
{
	const char *s = mwalk_get_string(w, v, f->path, f->max_len);

	if (!s)
		return false;
	for (const char *p = s; *p; p++)
		if (!isalpha((unsigned char)*p)) {
			mwalk_fail(w, f->path, "%s is not an HTTP method (letters only, e.g. POST)",
				   mwalk_excerpt(w, s, true));
			return false;
		}
	if (!dup_into(w, f->path, s, out))
		return false;
	for (char *p = *out; *p; p++)
		*p = (char)toupper((unsigned char)*p);
	return true;
}

/* A boolean field: a plain true or false, never a string ("true" quoted). */
static bool parse_bool(struct walk *w, const struct trigger_spec_field *f, yaml_node_t *v,
		       bool *out)
{
	if (!mwalk_is_plain_bool(v)) {
		mwalk_fail(w, f->path, "must be true or false, got %s%s", mwalk_kind_of(v),
			   v->type == YAML_SCALAR_NODE && !mwalk_is_plain(v) ? " (do not quote it)"
									     : "");
		return false;
	}
	*out = tolower((unsigned char)mwalk_scalar(v)[0]) == 't';
	return true;
}

/* One field of the table (trigger_spec.h) from its node v into t. */
bool mwalk_parse_field(struct walk *w, const struct trigger_spec_field *f, yaml_node_t *v,
		       struct manifest_trigger *t)
{
	char *at = (char *)t + f->offset;
	const char *s;
	uint64_t u;

	switch (f->type) {
	case TRIGGER_SPEC_STRING:
		s = mwalk_get_string(w, v, f->path, f->max_len);
		return s && dup_into(w, f->path, s, (char **)at);
	case TRIGGER_SPEC_UINT:
		if (!mwalk_get_uint(w, v, f->path, (uint64_t)f->min, (uint64_t)f->max, &u))
			return false;
		*(uint32_t *)at = (uint32_t)u;
		return true;
	case TRIGGER_SPEC_DURATION:
	case TRIGGER_SPEC_DURATION_US:
		return parse_duration(w, f, v, t);
	case TRIGGER_SPEC_BOOL:
		return parse_bool(w, f, v, (bool *)at);
	case TRIGGER_SPEC_STATUS:
		return parse_status(w, f, v, (char **)at);
	case TRIGGER_SPEC_METHOD:
		return parse_method(w, f, v, (char **)at);
	case TRIGGER_SPEC_SELECTOR:
		return mwalk_parse_selector(w, v, t);
	case TRIGGER_SPEC_PIDS:
		return parse_pids(w, f, v, t);
	case TRIGGER_SPEC_PATHS:
		return parse_paths(w, f, v, t);
	}
	return false;
}
