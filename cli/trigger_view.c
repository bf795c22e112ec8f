/*
 * trigger_view.c - one view of a trigger, whatever its source: both the
 * cluster's objects and a directory's manifests are read into the same
 * JSON object, which -o json prints and the text views render:
 * namespace, name, service, selector, phase, reason, message,
 * collectedRequests, maxRequests, traceIDs, created, startTime,
 * completionTime, deadline, targetPods, source, spec (and file).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cli.h"
#include "trigger.h"

static const char *str_at(const json_t *o, const char *a, const char *b)
{
	const json_t *v = json_object_get(o, a);

	if (b)
		v = json_object_get(v, b);
	return json_string_value(v);
}

static json_t *jstr_or_null(const char *s)
{
	return s && *s ? json_string(s) : json_null();
}

/* matchLabels as "k=v,k=v" (NULL when none). */
static json_t *selector_text(const json_t *spec)
{
	const json_t *ml = json_object_get(json_object_get(spec, "selector"), "matchLabels");
	const json_t *me = json_object_get(json_object_get(spec, "selector"), "matchExpressions");
	char buf[1024] = "";
	size_t used = 0;
	const char *key;
	json_t *val;

	json_object_foreach((json_t *)ml, key, val)
	{
		int n = snprintf(buf + used, sizeof(buf) - used, "%s%s=%s", used ? "," : "", key,
				 json_string_value(val) ? json_string_value(val) : "");
		if (n < 0 || (size_t)n >= sizeof(buf) - used)
			break;
		used += (size_t)n;
	}
	if (json_array_size(me))
		snprintf(buf + used, sizeof(buf) - used, "%s(+%zu expressions)", used ? "," : "",
			 json_array_size(me));
	return jstr_or_null(buf);
}

json_t *trig_view_from_object(const json_t *obj)
{
	const json_t *spec = json_object_get(obj, "spec"), *st = json_object_get(obj, "status");
	const json_t *max = json_object_get(spec, "maxRequests");
	const json_t *ids = json_object_get(st, "traceIDs");
	const char *phase = str_at(st, "phase", NULL);
	json_t *v = json_object();

	json_object_set_new(v, "namespace", jstr_or_null(str_at(obj, "metadata", "namespace")));
	json_object_set_new(v, "name", jstr_or_null(str_at(obj, "metadata", "name")));
	json_object_set_new(v, "service", jstr_or_null(str_at(spec, "service", NULL)));
	json_object_set_new(v, "selector", selector_text(spec));
	json_object_set_new(v, "phase", json_string(phase ? phase : "Pending"));
	json_object_set_new(v, "reason", jstr_or_null(str_at(st, "reason", NULL)));
	json_object_set_new(v, "message", jstr_or_null(str_at(st, "message", NULL)));
	json_object_set_new(
	    v, "collectedRequests",
	    json_integer(json_integer_value(json_object_get(st, "collectedRequests"))));
	json_object_set_new(
	    v, "maxRequests",
	    json_integer(max ? json_integer_value(max) : TRIGGER_SPEC_REQUESTS_DEFAULT));
	json_object_set_new(v, "traceIDs",
			    json_is_array(ids) ? json_copy((json_t *)ids) : json_array());
	json_object_set_new(v, "created",
			    jstr_or_null(str_at(obj, "metadata", "creationTimestamp")));
	json_object_set_new(v, "startTime", jstr_or_null(str_at(st, "startTime", NULL)));
	json_object_set_new(v, "completionTime", jstr_or_null(str_at(st, "completionTime", NULL)));
	json_object_set_new(v, "deadline", jstr_or_null(str_at(st, "deadline", NULL)));
	json_object_set_new(v, "targetPods",
			    json_integer((json_int_t)json_array_size(
				json_object_get(json_object_get(st, "targets"), "pods"))));
	json_object_set_new(v, "source", json_string("cluster"));
	json_object_set_new(v, "spec", spec ? json_deep_copy(spec) : json_object());
	return v;
}

/* "3m", "2h", "5d": the age of an RFC 3339 time, "-" when unknown. */
static void age_of(const char *rfc3339, char *buf, size_t len)
{
	struct timespec ts;
	long long s;

	if (!rfc3339 || kube_parse_time(rfc3339, &ts) < 0) {
		snprintf(buf, len, "-");
		return;
	}
	s = (long long)(time(NULL) - ts.tv_sec);
	if (s < 0)
		s = 0;
	if (s < 120)
		snprintf(buf, len, "%llds", s);
	else if (s < 2 * 3600)
		snprintf(buf, len, "%lldm", s / 60);
	else if (s < 2 * 86400)
		snprintf(buf, len, "%lldh", s / 3600);
	else
		snprintf(buf, len, "%lldd", s / 86400);
}

const char *trig_vstr(const json_t *v, const char *key, const char *dflt)
{
	const char *s = json_string_value(json_object_get(v, key));

	return s && *s ? s : dflt;
}

void trig_print_list(FILE *f, const json_t *views, int all_ns)
{
	size_t i, wn = 4, wns = 9, ws = 7;
	json_t *v;

	json_array_foreach(views, i, v)
	{
		size_t n = strlen(trig_vstr(v, "name", "")),
		       ns = strlen(trig_vstr(v, "namespace", ""));
		size_t s = strlen(trig_vstr(v, "service", trig_vstr(v, "selector", "-")));

		wn = n > wn ? n : wn;
		wns = ns > wns ? ns : wns;
		ws = s > ws ? s : ws;
	}
	if (all_ns)
		fprintf(f, "%-*s  ", (int)wns, "NAMESPACE");
	fprintf(f, "%-*s  %-*s  %-9s  %-9s  %s\n", (int)wn, "NAME", (int)ws, "SERVICE", "PHASE",
		"COLLECTED", "AGE");
	json_array_foreach(views, i, v)
	{
		char coll[48], age[24];

		snprintf(coll, sizeof(coll), "%lld/%lld",
			 (long long)json_integer_value(json_object_get(v, "collectedRequests")),
			 (long long)json_integer_value(json_object_get(v, "maxRequests")));
		age_of(trig_vstr(v, "created", NULL), age, sizeof(age));
		if (all_ns)
			fprintf(f, "%-*s  ", (int)wns, trig_vstr(v, "namespace", ""));
		fprintf(f, "%-*s  %-*s  %-9s  %-9s  %s\n", (int)wn, trig_vstr(v, "name", ""),
			(int)ws, trig_vstr(v, "service", trig_vstr(v, "selector", "-")),
			trig_vstr(v, "phase", "-"), coll, age);
	}
}

void trig_print_one(FILE *f, const json_t *v)
{
	const json_t *spec = json_object_get(v, "spec"), *match = json_object_get(spec, "match");
	const json_t *ids = json_object_get(v, "traceIDs");
	const char *key;
	json_t *val;
	size_t i;

	fprintf(f, "Name:        %s/%s\n", trig_vstr(v, "namespace", "default"),
		trig_vstr(v, "name", ""));
	if (trig_vstr(v, "service", NULL))
		fprintf(f, "Service:     %s\n", trig_vstr(v, "service", ""));
	if (trig_vstr(v, "selector", NULL))
		fprintf(f, "Selector:    %s\n", trig_vstr(v, "selector", ""));
	if (json_object_size(match)) {
		fprintf(f, "Match:      ");
		json_object_foreach((json_t *)match, key, val)
		{
			char *text = json_is_string(val) ? NULL : json_dumps(val, JSON_ENCODE_ANY);

			fprintf(f, " %s=%s", key, text ? text : json_string_value(val));
			free(text);
		}
		fputc('\n', f);
	}
	fprintf(f, "Phase:       %s", trig_vstr(v, "phase", "Pending"));
	if (trig_vstr(v, "reason", NULL))
		fprintf(f, " (%s)", trig_vstr(v, "reason", ""));
	fputc('\n', f);
	if (trig_vstr(v, "message", NULL))
		fprintf(f, "Message:     %s\n", trig_vstr(v, "message", ""));
	fprintf(f, "Collected:   %lld/%lld requests\n",
		(long long)json_integer_value(json_object_get(v, "collectedRequests")),
		(long long)json_integer_value(json_object_get(v, "maxRequests")));
	if (json_integer_value(json_object_get(v, "targetPods")))
		fprintf(f, "Target pods: %lld\n",
			(long long)json_integer_value(json_object_get(v, "targetPods")));
	if (trig_vstr(v, "created", NULL))
		fprintf(f, "Created:     %s\n", trig_vstr(v, "created", ""));
	if (trig_vstr(v, "startTime", NULL))
		fprintf(f, "Started:     %s\n", trig_vstr(v, "startTime", ""));
	if (trig_vstr(v, "deadline", NULL))
		fprintf(f, "Deadline:    %s\n", trig_vstr(v, "deadline", ""));
	if (trig_vstr(v, "completionTime", NULL))
		fprintf(f, "Completed:   %s\n", trig_vstr(v, "completionTime", ""));
	if (json_array_size(ids)) {
		fprintf(f, "Trace IDs:\n");
		json_array_foreach(ids, i, val) fprintf(f, "  %s\n", json_string_value(val));
		fprintf(f, "(traceprof trace-profile TRACE_ID shows one request's profile)\n");
	}
}

/* The status file's entry of ns/name, or NULL. */
static const json_t *dir_status_of(const struct dir_state *d, const char *ns, const char *name)
{
	size_t i;
	json_t *t;

	json_array_foreach(json_object_get(d->status, "triggers"), i, t)
	{
		if (!strcmp(trig_vstr(t, "namespace", "default"), ns) &&
		    !strcmp(trig_vstr(t, "name", ""), name))
			return t;
	}
	return NULL;
}

json_t *trig_view_from_manifest(const struct dir_state *d, const struct manifest_trigger *t,
				const char *path)
{
	const json_t *st = dir_status_of(d, t->namespace_, t->name);
	char *spec_text = manifest_spec_json(t), created[32] = "";
	json_t *spec = spec_text ? json_loads(spec_text, 0, NULL) : NULL;
	json_t *v = json_object(), *ids = json_object_get(st, "traceIDs");
	struct stat sb;

	free(spec_text);
	if (stat(path, &sb) == 0) {
		struct timespec ts = {.tv_sec = sb.st_mtime};

		kube_format_time(created, &ts);
	}
	json_object_set_new(v, "namespace", json_string(t->namespace_));
	json_object_set_new(v, "name", json_string(t->name));
	json_object_set_new(v, "service", jstr_or_null(t->service));
	json_object_set_new(v, "selector", json_null());
	json_object_set_new(v, "phase",
			    json_string(st ? trig_vstr(st, "phase", "Pending") : "Pending"));
	json_object_set_new(v, "reason", jstr_or_null(st ? trig_vstr(st, "reason", NULL) : NULL));
	json_object_set_new(v, "message",
			    st ? jstr_or_null(trig_vstr(st, "message", NULL))
			       : json_string("no status yet: is traceprof-controller watching this "
					     "directory?"));
	json_object_set_new(
	    v, "collectedRequests",
	    json_integer(json_integer_value(json_object_get(st, "collectedRequests"))));
	json_object_set_new(v, "maxRequests", json_integer(t->max_requests));
	json_object_set_new(v, "traceIDs", json_is_array(ids) ? json_copy(ids) : json_array());
	json_object_set_new(v, "created", jstr_or_null(created));
	json_object_set_new(v, "startTime", json_null());
	json_object_set_new(v, "completionTime", json_null());
	json_object_set_new(v, "deadline",
			    jstr_or_null(st ? trig_vstr(st, "deadline", NULL) : NULL));
	json_object_set_new(v, "targetPods", json_integer(0));
	json_object_set_new(v, "source", json_string("directory"));
	json_object_set_new(v, "file", json_string(path));
	json_object_set_new(v, "spec", spec ? spec : json_object());
	return v;
}

int trig_print_json(const json_t *v)
{
	if (json_dumpf(v, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER) < 0)
		return CLI_IO;
	fputc('\n', stdout);
	return CLI_OK;
}
