/*
 * manifest_out.c - what a validated manifest turns into: the canonical spec
 * JSON of the trigger table, the AgentControl Trigger message (its scalar
 * fields where the spec table says), and the duration and status-pattern
 * forms shared by both directions.
 */
#include "manifest.h"

#include <ctype.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsonbuf.h"
#include "traceprof/trigger_spec.h"

static const struct {
	const char *name; /* unit as written */
	uint64_t ns;	  /* its length in nanoseconds */
} duration_units[] = {
    {"ns", 1ULL},	    {"us", 1000ULL},	  {"\xc2\xb5s", 1000ULL}, /* micro sign */
    {"\xce\xbcs", 1000ULL},						  /* Greek mu */
    {"ms", 1000000ULL},	    {"s", 1000000000ULL}, {"m", 60000000000ULL},  {"h", 3600000000000ULL},
};

/* Longest unit name that s starts with. */
static int match_unit(const char *s, size_t *len)
{
	int best = -1;
	size_t best_len = 0;

	for (size_t i = 0; i < sizeof(duration_units) / sizeof(duration_units[0]); i++) {
		size_t n = strlen(duration_units[i].name);

		if (n > best_len && strncmp(s, duration_units[i].name, n) == 0) {
			best = (int)i;
			best_len = n;
		}
	}
	*len = best_len;
	return best;
}

int manifest_parse_duration(const char *s, uint64_t *us)
{
	const uint64_t limit = UINT64_MAX / 2;
	uint64_t total = 0;

	if (strcmp(s, "0") == 0) {
		*us = 0;
		return 0;
	}
	if (!*s)
		return -EINVAL;
	while (*s) {
		uint64_t whole = 0, frac = 0, scale = 1, unit, add;
		bool digits = false;
		size_t ulen;
		int u;

		for (; isdigit((unsigned char)*s); s++, digits = true) {
			if (whole > limit / 10)
				return -EINVAL;
			whole = whole * 10 + (uint64_t)(*s - '0');
		}
		if (*s == '.') {
			for (s++; isdigit((unsigned char)*s); s++, digits = true) {
				if (scale <
				    1000000000000ULL) { /* more digits than that cannot matter */
					frac = frac * 10 + (uint64_t)(*s - '0');
					scale *= 10;
				}
			}
		}
		if (!digits)
			return -EINVAL;
		u = match_unit(s, &ulen);
		if (u < 0)
			return -EINVAL;
		s += ulen;
		unit = duration_units[u].ns;
		if (whole && unit > limit / whole)
			return -EINVAL;
		add = whole * unit;
		/* frac/scale of a unit: at most one unit, computed without overflow */
		add += (uint64_t)((long double)frac * (long double)unit / (long double)scale);
		if (add > limit - total)
			return -EINVAL;
		total += add;
	}
	*us = total / 1000;
	return 0;
}

void manifest_format_duration(uint64_t us, char *out, size_t len)
{
	if (us == 0)
		snprintf(out, len, "0s");
	else if (us % 3600000000ULL == 0)
		snprintf(out, len, "%lluh", (unsigned long long)(us / 3600000000ULL));
	else if (us % 60000000ULL == 0)
		snprintf(out, len, "%llum", (unsigned long long)(us / 60000000ULL));
	else if (us % 1000000ULL == 0)
		snprintf(out, len, "%llus", (unsigned long long)(us / 1000000ULL));
	else if (us % 1000ULL == 0)
		snprintf(out, len, "%llums", (unsigned long long)(us / 1000ULL));
	else
		snprintf(out, len, "%lluus", (unsigned long long)us);
}

int manifest_parse_status(const char *s, char *out, size_t len)
{
	size_t used = 0;
	int n = 0;

	if (len)
		out[0] = '\0';
	for (;;) {
		char tok[4];
		size_t k = 0;

		while (*s == ' ')
			s++;
		while (*s && *s != ',' && *s != ' ') {
			if (k == 3)
				return -EINVAL;
			tok[k++] = (char)tolower((unsigned char)*s++);
		}
		tok[k] = '\0';
		while (*s == ' ')
			s++;
		if (k != 3 || tok[0] < '1' || tok[0] > '5')
			return -EINVAL;
		if (!(strcmp(tok + 1, "xx") == 0 ||
		      (isdigit((unsigned char)tok[1]) && isdigit((unsigned char)tok[2]))))
			return -EINVAL;
		if (++n > 32 || used + 5 > len)
			return -EINVAL;
		used += (size_t)snprintf(out + used, len - used, "%s%s", used ? "," : "", tok);
		if (!*s)
			return 0;
		if (*s != ',')
			return -EINVAL;
		s++;
	}
}

/*
 * Whether field f of t is written: set, or always (service, the fields with
 * a default; one with only_with only when that field is true).
 */
static bool spec_json_has(const struct trigger_spec_field *f, const struct manifest_trigger *t)
{
	const char *src = (const char *)t + f->offset;

	if (f->only_with &&
	    !*(const bool *)((const char *)t + trigger_spec_field(f->only_with)->offset))
		return false;
	if (f->default_text || f->offset == offsetof(struct manifest_trigger, service))
		return true;
	switch (f->type) {
	case TRIGGER_SPEC_PIDS:
		return t->n_pids > 0;
	case TRIGGER_SPEC_PATHS:
		return t->n_cgroup_paths > 0;
	case TRIGGER_SPEC_DURATION:
		return *(const uint64_t *)src != 0;
	default:
		return *(char *const *)src != NULL;
	}
}

/* The value of field f of t, as JSON. */
static void spec_json_value(struct jsonbuf *b, const struct trigger_spec_field *f,
			    const struct manifest_trigger *t)
{
	const char *src = (const char *)t + f->offset;
	char d[32];

	switch (f->type) {
	case TRIGGER_SPEC_SELECTOR: /* canonical JSON already */
		jsonbuf_printf(b, "%s", *(char *const *)src);
		break;
	case TRIGGER_SPEC_PIDS:
		jsonbuf_printf(b, "[");
		for (size_t i = 0; i < t->n_pids; i++)
			jsonbuf_printf(b, "%s%u", i ? ", " : "", t->pids[i]);
		jsonbuf_printf(b, "]");
		break;
	case TRIGGER_SPEC_PATHS:
		jsonbuf_printf(b, "[");
		for (size_t i = 0; i < t->n_cgroup_paths; i++) {
			jsonbuf_printf(b, "%s", i ? ", " : "");
			jsonbuf_str(b, t->cgroup_paths[i]);
		}
		jsonbuf_printf(b, "]");
		break;
	case TRIGGER_SPEC_UINT:
		jsonbuf_printf(b, "%u", *(const uint32_t *)src);
		break;
	case TRIGGER_SPEC_DURATION: /* µs, or ms when bounded (spec.timeout) */
		manifest_format_duration(*(const uint64_t *)src * (f->max ? 1000 : 1), d,
					 sizeof(d));
		jsonbuf_printf(b, "\"%s\"", d);
		break;
	case TRIGGER_SPEC_DURATION_US:
		manifest_format_duration(*(const uint32_t *)src, d, sizeof(d));
		jsonbuf_printf(b, "\"%s\"", d);
		break;
	case TRIGGER_SPEC_BOOL:
		jsonbuf_printf(b, "%s", *(const bool *)src ? "true" : "false");
		break;
	default:
		jsonbuf_str(b, *(char *const *)src);
	}
}

/*
 * The fields of the table that t has, in table order; the fields of an
 * object of spec (match, targets...) inside it, the object left out when
 * none is set.
 */
char *manifest_spec_json(const struct manifest_trigger *t)
{
	struct jsonbuf b = {0};
	char group[64] = "";
	bool first = true, first_in_group = true;

	jsonbuf_printf(&b, "{");
	for (size_t i = 0; i < trigger_spec_n_fields; i++) {
		const struct trigger_spec_field *f = &trigger_spec_fields[i];
		const char *key = trigger_spec_key(f), *rel = f->path + strlen("spec.");
		int glen = (int)(key - rel) - 1; /* length of the object's name; -1: spec itself */

		if (!spec_json_has(f, t))
			continue;
		if (glen < 0 || strncmp(group, rel, (size_t)glen) || group[glen]) {
			if (*group)
				jsonbuf_printf(&b, "}");
			snprintf(group, sizeof(group), "%.*s", glen < 0 ? 0 : glen, rel);
			if (*group)
				jsonbuf_printf(&b, "%s\"%s\": {", first ? "" : ", ", group);
			first_in_group = true;
		}
		jsonbuf_printf(&b, "%s\"%s\": ", (*group ? first_in_group : first) ? "" : ", ",
			       key);
		spec_json_value(&b, f, t);
		first = first_in_group = false;
	}
	if (*group)
		jsonbuf_printf(&b, "}");
	jsonbuf_printf(&b, "}");
	return jsonbuf_take(&b);
}

static char *dup_or_empty(const char *s, bool *oom)
{
	char *p = strdup(s ? s : "");

	if (!p)
		*oom = true;
	return p;
}

/* The field at path ("criteria.route") of message m, its descriptor in *fd; NULL if none. */
static void *proto_at(ProtobufCMessage *m, const char *path, const ProtobufCFieldDescriptor **fd)
{
	for (;;) {
		size_t n = strcspn(path, ".");
		char seg[64];
		void *at;

		snprintf(seg, sizeof(seg), "%.*s", (int)n, path);
		*fd = protobuf_c_message_descriptor_get_field_by_name(m->descriptor, seg);
		if (!*fd)
			return NULL;
		at = (char *)m + (*fd)->offset;
		if (!path[n])
			return at;
		if ((*fd)->type != PROTOBUF_C_TYPE_MESSAGE || !(m = *(ProtobufCMessage **)at))
			return NULL;
		path += n + 1;
	}
}

/*
 * The scalar fields of the spec table into p, each where the table says
 * (strings, numbers, durations in µs, booleans). Lists, the selector (resolved to
 * pods by the controller) and the timeout (the caller's deadline) are not
 * scalars and are filled by the caller.
 */
static void proto_scalars(Traceprof__Control__V1__Trigger *p, const struct manifest_trigger *t,
			  bool *oom)
{
	for (size_t i = 0; i < trigger_spec_n_fields; i++) {
		const struct trigger_spec_field *f = &trigger_spec_fields[i];
		const char *src = (const char *)t + f->offset;
		const ProtobufCFieldDescriptor *fd;
		void *at;

		if (f->type == TRIGGER_SPEC_SELECTOR || f->type == TRIGGER_SPEC_PIDS ||
		    f->type == TRIGGER_SPEC_PATHS || (f->type == TRIGGER_SPEC_DURATION && f->max))
			continue;
		if (!(at = proto_at(&p->base, f->proto, &fd))) {
			*oom = true; /* a table naming no field: test_trigger_spec catches it */
			continue;
		}
		if (fd->type == PROTOBUF_C_TYPE_STRING)
			*(char **)at = dup_or_empty(*(char *const *)src, oom);
		else if (fd->type == PROTOBUF_C_TYPE_UINT32)
			*(uint32_t *)at = *(const uint32_t *)src;
		else if (fd->type == PROTOBUF_C_TYPE_UINT64)
			*(uint64_t *)at = *(const uint64_t *)src;
		else if (fd->type == PROTOBUF_C_TYPE_BOOL)
			*(protobuf_c_boolean *)at = *(const bool *)src;
		else
			*oom = true;
	}
}

Traceprof__Control__V1__Trigger *manifest_to_proto(const struct manifest_trigger *t, const char *id,
						   int64_t deadline_unix_ms)
{
	Traceprof__Control__V1__Trigger *p = calloc(1, sizeof(*p));
	Traceprof__Control__V1__Targets *tg = calloc(1, sizeof(*tg));
	Traceprof__Control__V1__Criteria *c = calloc(1, sizeof(*c));
	bool oom = !p || !tg || !c;

	if (oom) {
		free(p);
		free(tg);
		free(c);
		return NULL;
	}
	traceprof__control__v1__trigger__init(p);
	traceprof__control__v1__targets__init(tg);
	traceprof__control__v1__criteria__init(c);
	p->targets = tg;
	p->criteria = c;
	p->id = dup_or_empty(id, &oom);
	p->namespace_ = dup_or_empty(t->namespace_, &oom);
	p->name = dup_or_empty(t->name, &oom);
	p->deadline_unix_ms = deadline_unix_ms;
	proto_scalars(p, t, &oom);
	if (t->service) {
		tg->services = calloc(1, sizeof(*tg->services));
		if (tg->services) {
			tg->services[0] = dup_or_empty(t->service, &oom);
			tg->n_services = 1;
		} else {
			oom = true;
		}
	}
	if (t->n_pids) {
		tg->pids = calloc(t->n_pids, sizeof(*tg->pids));
		if (tg->pids) {
			memcpy(tg->pids, t->pids, t->n_pids * sizeof(*tg->pids));
			tg->n_pids = t->n_pids;
		} else {
			oom = true;
		}
	}
	if (t->n_cgroup_paths) {
		tg->cgroup_paths = calloc(t->n_cgroup_paths, sizeof(*tg->cgroup_paths));
		if (tg->cgroup_paths) {
			for (size_t i = 0; i < t->n_cgroup_paths; i++)
				tg->cgroup_paths[i] = dup_or_empty(t->cgroup_paths[i], &oom);
			tg->n_cgroup_paths = t->n_cgroup_paths;
		} else {
			oom = true;
		}
	}
	if (oom) {
		manifest_proto_free(p);
		return NULL;
	}
	return p;
}

void manifest_proto_free(Traceprof__Control__V1__Trigger *p)
{
	if (!p)
		return;
	free(p->id);
	free(p->namespace_);
	free(p->name);
	free(p->service);
	if (p->criteria) {
		free(p->criteria->status);
		free(p->criteria->route);
		free(p->criteria->method);
		free(p->criteria);
	}
	if (p->targets) {
		for (size_t i = 0; i < p->targets->n_services; i++)
			free(p->targets->services[i]);
		free(p->targets->services);
		free(p->targets->pids);
		for (size_t i = 0; i < p->targets->n_cgroup_paths; i++)
			free(p->targets->cgroup_paths[i]);
		free(p->targets->cgroup_paths);
		for (size_t i = 0; i < p->targets->n_pod_uids; i++)
			free(p->targets->pod_uids[i]);
		free(p->targets->pod_uids);
		for (size_t i = 0; i < p->targets->n_container_ids; i++)
			free(p->targets->container_ids[i]);
		free(p->targets->container_ids);
		free(p->targets);
	}
	free(p);
}
