/*
 * cmd_trigger.c - `traceprof trigger create|list|get|delete`.
 *
 * TraceProfileTriggers live in one of two places, and this command reads
 * and writes them where the controller looks:
 *
 *   cluster    the custom resources of the Kubernetes API
 *              (traceprof.dev/v1alpha1), through a kubeconfig or the pod's
 *              service account, as the controller reads them;
 *   directory  the manifests of the controller's local mode (--triggers-dir)
 *              and the status file it writes next to them.
 *
 * Every trigger created here first goes through the controller's own
 * manifest validator, so a trigger this command accepts is one the
 * controller accepts, and a mistake is reported with the field before
 * anything is sent or written. The cluster still checks the object against
 * the CRD's schema and rules; its answer is shown as it comes.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <yaml.h>

#include "cli.h"
#include "manifest.h"
#include "traceprof/kube.h"

#define TRIG_GROUP_PREFIX "/apis/traceprof.dev/v1alpha1"
#define TRIG_PLURAL	  "traceprofiletriggers"
#define STATUS_FILE	  ".traceprof-status.json"
#define MAX_LABELS	  MANIFEST_MAX_LIST

enum trig_out { OUT_TEXT, OUT_JSON, OUT_NAME };

struct trig_opts {
	/* where */
	const char *kubeconfig;
	const char *context;
	int in_cluster;
	int insecure;
	const char *dir;
	const char *status_file;
	const char *namespace_; /* NULL: the context's, or "default" */
	int all_namespaces;
	/* what */
	const char *file;
	int dry_run;
	enum trig_out out;
	const char *service;
	const char *selector;
	const char *min_duration;
	const char *max_duration;
	const char *status;
	const char *route;
	const char *method;
	const char *max_requests;
	const char *frequency;
	const char *timeout;
};

/* A cluster connection, or nothing (directory mode). */
struct trig_kube {
	struct kube_config *cfg;
	struct kube_client *client;
};

static const char usage_text[] =
    "usage: traceprof trigger create NAME --service S [MATCH] [WHERE]\n"
    "       traceprof trigger create -f FILE [WHERE]\n"
    "       traceprof trigger list [-A] [-o text|json|name] [WHERE]\n"
    "       traceprof trigger get NAME [-o text|json] [WHERE]\n"
    "       traceprof trigger delete NAME [WHERE]\n"
    "\n"
    "Creates and inspects TraceProfileTriggers (traceprof.dev/v1alpha1): in the\n"
    "cluster, through the Kubernetes API, or in a local triggers directory read\n"
    "by traceprof-controller --triggers-dir. A new trigger is checked by the\n"
    "controller's validator before it is sent or written.\n"
    "\n"
    "where (default: the cluster of $KUBECONFIG or ~/.kube/config):\n"
    "  --kubeconfig FILE      the cluster of this kubeconfig\n"
    "  --context NAME         its context (default: current-context)\n"
    "  --in-cluster           the pod's service account\n"
    "  --insecure-skip-tls-verify  accept the kubeconfig's insecure flag\n"
    "  --triggers-dir DIR     a local triggers directory instead of a cluster\n"
    "  --status-file F        its status file (default DIR/.traceprof-status.json)\n"
    "  -n, --namespace NS     namespace (default: the context's, else default)\n"
    "  -A, --all-namespaces   list: every namespace\n"
    "\n"
    "create (from flags; defaults as in the CRD):\n"
    "  --service S            the service to profile (or --selector)\n"
    "  --selector K=V[,K=V]   pods with these labels (cluster only)\n"
    "  --min-duration D       keep requests taking at least D (300ms, 1.5s, 1m)\n"
    "  --max-duration D       ... and at most D\n"
    "  --status P             status pattern: 500, 5xx, 4xx,5xx\n"
    "  --route GLOB           route glob: /api/pay*\n"
    "  --method M             HTTP method\n"
    "  --max-requests N       requests to collect, 1-1000 (default 10)\n"
    "  --frequency HZ         raised sampling rate, 1-100 (default 99)\n"
    "  --timeout D            give up after D, at most 10m (default 5m)\n"
    "  -f, --file FILE        create the triggers of a manifest file instead\n"
    "  --dry-run              print the manifest, send or write nothing\n"
    "\n"
    "output:\n"
    "  -o, --output FMT       text (default), json, name (list only)\n"
    "  -h, --help             this help\n"
    "\n"
    "exit status: 0 done, 1 no such trigger, 2 invalid trigger or usage,\n"
    "3 cluster or directory unreachable, 4 output not written.\n"
    "\n"
    "examples:\n"
    "  traceprof trigger create slow-pay --service payment-svc --min-duration 1s \\\n"
    "      --route '/api/pay*' --max-requests 5\n"
    "  traceprof trigger get slow-pay -o json\n"
    "  traceprof trigger list --triggers-dir ./triggers\n";

void help_trigger(FILE *f)
{
	fputs(usage_text, f);
}

static void usage_hint(void)
{
	fprintf(stderr, "try 'traceprof trigger --help'\n");
}

/* ---- manifests ---------------------------------------------------------- */

/* Adds K=V pairs of text to labels; 0 or -1 after printing what is wrong. */
static int parse_labels(const char *text, json_t *labels)
{
	char *copy = strdup(text), *save = NULL, *tok;
	int rc = 0;

	if (!copy)
		return -1;
	for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(tok, '=');

		if (!eq || eq == tok || !eq[1]) {
			cli_error("--selector: \"%s\" is not KEY=VALUE", tok);
			rc = -1;
			break;
		}
		*eq = '\0';
		if (json_object_size(labels) >= MAX_LABELS) {
			cli_error("--selector: more than %d labels", MAX_LABELS);
			rc = -1;
			break;
		}
		json_object_set_new(labels, tok, json_string(eq + 1));
	}
	if (rc == 0 && json_object_size(labels) == 0) {
		cli_error("--selector: no labels in \"%s\"", text);
		rc = -1;
	}
	free(copy);
	return rc;
}

static void set_str(json_t *obj, const char *key, const char *value)
{
	if (value)
		json_object_set_new(obj, key, json_string(value));
}

/* Integer flag into obj[key] (0, or -1 after an error). The range is the
 * validator's business; this only reads the number. */
static int set_int(json_t *obj, const char *key, const char *flag, const char *value)
{
	char *end;
	long long v;

	if (!value)
		return 0;
	errno = 0;
	v = strtoll(value, &end, 10);
	if (errno || end == value || *end) {
		cli_error("%s: \"%s\" is not a number", flag, value);
		return -1;
	}
	json_object_set_new(obj, key, json_integer(v));
	return 0;
}

/* The manifest of the create flags, as a JSON object (NULL after an error). */
static json_t *manifest_from_flags(const struct trig_opts *o, const char *name, const char *ns)
{
	json_t *m = json_object(), *meta = json_object(), *spec = json_object();
	json_t *match = json_object(), *sampling = json_object();

	json_object_set_new(m, "apiVersion", json_string(MANIFEST_API_VERSION));
	json_object_set_new(m, "kind", json_string(MANIFEST_KIND));
	json_object_set_new(meta, "name", json_string(name));
	json_object_set_new(meta, "namespace", json_string(ns));
	json_object_set_new(m, "metadata", meta);
	set_str(spec, "service", o->service);
	if (o->selector) {
		json_t *sel = json_object(), *labels = json_object();

		json_object_set_new(sel, "matchLabels", labels);
		json_object_set_new(spec, "selector", sel);
		if (parse_labels(o->selector, labels) < 0)
			goto fail;
	}
	set_str(match, "minDuration", o->min_duration);
	set_str(match, "maxDuration", o->max_duration);
	set_str(match, "status", o->status);
	set_str(match, "route", o->route);
	set_str(match, "method", o->method);
	if (json_object_size(match))
		json_object_set(spec, "match", match);
	if (set_int(sampling, "frequencyHz", "--frequency", o->frequency) < 0 ||
	    set_int(spec, "maxRequests", "--max-requests", o->max_requests) < 0)
		goto fail;
	if (json_object_size(sampling))
		json_object_set(spec, "sampling", sampling);
	set_str(spec, "timeout", o->timeout);
	json_object_set_new(m, "spec", spec);
	json_decref(match);
	json_decref(sampling);
	return m;
fail:
	json_decref(spec);
	json_decref(match);
	json_decref(sampling);
	json_decref(m);
	return NULL;
}

/* YAML node -> JSON value, plain scalars typed as YAML's core schema does
 * (integers, floats, true/false, null), quoted ones kept as strings. */
static json_t *yaml_to_json(yaml_document_t *doc, yaml_node_t *n, int depth)
{
	if (!n || depth > MANIFEST_MAX_DEPTH)
		return NULL;
	if (n->type == YAML_SCALAR_NODE) {
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
	if (n->type == YAML_SEQUENCE_NODE) {
		json_t *a = json_array();

		for (yaml_node_item_t *it = n->data.sequence.items.start;
		     it < n->data.sequence.items.top; it++) {
			json_t *v = yaml_to_json(doc, yaml_document_get_node(doc, *it), depth + 1);

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
			v = yaml_to_json(doc, yaml_document_get_node(doc, p->value), depth + 1);
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

/* The documents of a manifest file as JSON objects (already validated by
 * the manifest parser, so only non-empty documents remain). */
static json_t *file_documents(const char *buf, size_t len)
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
		v = yaml_to_json(&doc, root, 0);
		yaml_document_delete(&doc);
		if (v && json_is_object(v))
			json_array_append_new(docs, v);
		else
			json_decref(v);
	}
	yaml_parser_delete(&p);
	return docs;
}

/* Runs the controller's validator over text; prints every error. Returns
 * the number of valid triggers, or -1 when something was invalid. */
static int validate(const char *display, const char *text, size_t len, int local,
		    struct manifest_list *l)
{
	struct manifest_opts mo = {.local = local};

	if (manifest_parse_buffer(l, display, text, len, &mo) < 0) {
		cli_error("out of memory");
		return -1;
	}
	for (size_t i = 0; i < l->n_errors; i++)
		cli_error("invalid trigger %s", l->errors[i].message);
	if (l->n_errors || l->broken_files)
		return -1;
	if (l->n == 0) {
		cli_error("%s: no TraceProfileTrigger in it", display);
		return -1;
	}
	return (int)l->n;
}

/* ---- YAML output of a manifest (create --dry-run, directory files) ------ */

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

/* A mapping in block style, nested mappings indented by two. */
static void yaml_write(FILE *f, const json_t *obj, int indent)
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
			yaml_write(f, val, indent + 2);
		} else {
			fputs(": ", f);
			yaml_inline(f, val);
			fputc('\n', f);
		}
	}
}

/* ---- the cluster -------------------------------------------------------- */

static int kube_open(const struct trig_opts *o, struct trig_kube *k)
{
	char err[512];
	int rc;

	if (o->in_cluster) {
		rc = kube_config_in_cluster(NULL, &k->cfg, err, sizeof(err));
	} else {
		struct kube_config_opts ko = {
		    .path = o->kubeconfig, .context = o->context, .allow_insecure = o->insecure};

		rc = kube_config_load(&ko, &k->cfg, err, sizeof(err));
	}
	if (rc < 0) {
		cli_error("no cluster: %s (or use --triggers-dir DIR for a local directory)", err);
		return CLI_DB;
	}
	k->client = kube_client_new(k->cfg, &(struct kube_client_opts){.timeout_ms = 15000}, err,
				    sizeof(err));
	if (!k->client) {
		cli_error("cannot talk to %s: %s", k->cfg->server, err);
		return CLI_DB;
	}
	return CLI_OK;
}

static void kube_close(struct trig_kube *k)
{
	kube_client_free(k->client);
	kube_config_free(k->cfg);
}

/* The exit code for a failed call, after saying what failed. */
static int kube_fail(struct trig_kube *k, const struct kube_response *r, int rc, const char *what)
{
	if (rc < 0 || r->http_status == 0) {
		cli_error("%s: the API server at %s did not answer: %s", what, k->cfg->server,
			  *r->error ? r->error : strerror(-rc));
		return CLI_DB;
	}
	cli_error("%s: %s (%ld %s)", what, *r->status.message ? r->status.message : "failed",
		  r->http_status, r->status.reason);
	if (r->status.causes) {
		size_t i;
		json_t *c;

		json_array_foreach(r->status.causes, i, c)
		{
			const char *field = json_string_value(json_object_get(c, "field"));
			const char *msg = json_string_value(json_object_get(c, "message"));

			fprintf(stderr, "  %s: %s\n", field ? field : "(object)", msg ? msg : "");
		}
	}
	if (kube_is_not_found(r))
		return CLI_NO_DATA;
	if (kube_is_unauthorized(r) || kube_is_forbidden(r) || r->http_status >= 500)
		return CLI_DB;
	return CLI_USAGE;
}

static int trig_path(char *buf, size_t len, const char *ns, const char *name)
{
	if (kube_path(buf, len, TRIG_GROUP_PREFIX, ns, TRIG_PLURAL, name, NULL) < 0) {
		cli_error("invalid name or namespace \"%s/%s\"", ns ? ns : "", name ? name : "");
		return -1;
	}
	return 0;
}

/* ---- one view of a trigger, whatever its source ------------------------- */

/*
 * Both sources are read into the same JSON object, which -o json prints
 * and the text views render: namespace, name, service, selector, phase,
 * reason, message, collectedRequests, maxRequests, traceIDs, created,
 * startTime, completionTime, deadline, targetPods, source, spec.
 */
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

static json_t *view_from_object(const json_t *obj)
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
	json_object_set_new(v, "maxRequests", json_integer(max ? json_integer_value(max) : 10));
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

static const char *vstr(const json_t *v, const char *key, const char *dflt)
{
	const char *s = json_string_value(json_object_get(v, key));

	return s && *s ? s : dflt;
}

static void print_list(FILE *f, const json_t *views, int all_ns)
{
	size_t i, wn = 4, wns = 9, ws = 7;
	json_t *v;

	json_array_foreach(views, i, v)
	{
		size_t n = strlen(vstr(v, "name", "")), ns = strlen(vstr(v, "namespace", ""));
		size_t s = strlen(vstr(v, "service", vstr(v, "selector", "-")));

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
		age_of(vstr(v, "created", NULL), age, sizeof(age));
		if (all_ns)
			fprintf(f, "%-*s  ", (int)wns, vstr(v, "namespace", ""));
		fprintf(f, "%-*s  %-*s  %-9s  %-9s  %s\n", (int)wn, vstr(v, "name", ""), (int)ws,
			vstr(v, "service", vstr(v, "selector", "-")), vstr(v, "phase", "-"), coll,
			age);
	}
}

static void print_one(FILE *f, const json_t *v)
{
	const json_t *spec = json_object_get(v, "spec"), *match = json_object_get(spec, "match");
	const json_t *ids = json_object_get(v, "traceIDs");
	const char *key;
	json_t *val;
	size_t i;

	fprintf(f, "Name:        %s/%s\n", vstr(v, "namespace", "default"), vstr(v, "name", ""));
	if (vstr(v, "service", NULL))
		fprintf(f, "Service:     %s\n", vstr(v, "service", ""));
	if (vstr(v, "selector", NULL))
		fprintf(f, "Selector:    %s\n", vstr(v, "selector", ""));
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
	fprintf(f, "Phase:       %s", vstr(v, "phase", "Pending"));
	if (vstr(v, "reason", NULL))
		fprintf(f, " (%s)", vstr(v, "reason", ""));
	fputc('\n', f);
	if (vstr(v, "message", NULL))
		fprintf(f, "Message:     %s\n", vstr(v, "message", ""));
	fprintf(f, "Collected:   %lld/%lld requests\n",
		(long long)json_integer_value(json_object_get(v, "collectedRequests")),
		(long long)json_integer_value(json_object_get(v, "maxRequests")));
	if (json_integer_value(json_object_get(v, "targetPods")))
		fprintf(f, "Target pods: %lld\n",
			(long long)json_integer_value(json_object_get(v, "targetPods")));
	if (vstr(v, "created", NULL))
		fprintf(f, "Created:     %s\n", vstr(v, "created", ""));
	if (vstr(v, "startTime", NULL))
		fprintf(f, "Started:     %s\n", vstr(v, "startTime", ""));
	if (vstr(v, "deadline", NULL))
		fprintf(f, "Deadline:    %s\n", vstr(v, "deadline", ""));
	if (vstr(v, "completionTime", NULL))
		fprintf(f, "Completed:   %s\n", vstr(v, "completionTime", ""));
	if (json_array_size(ids)) {
		fprintf(f, "Trace IDs:\n");
		json_array_foreach(ids, i, val) fprintf(f, "  %s\n", json_string_value(val));
		fprintf(f, "(traceprof trace-profile TRACE_ID shows one request's profile)\n");
	}
}

/* ---- a local triggers directory ------------------------------------------ */

struct dir_state {
	struct manifest_list m; /* every valid trigger of the directory */
	json_t *status;		/* the controller's status file, or NULL */
	char status_path[4096];
};

static int is_manifest_name(const char *n)
{
	size_t len = strlen(n);

	if (n[0] == '.')
		return 0;
	return (len > 5 && !strcmp(n + len - 5, ".yaml")) ||
	       (len > 4 && !strcmp(n + len - 4, ".yml"));
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Reads every manifest of the directory (the controller's rules: *.yaml and
 * *.yml, hidden files skipped) and its status file. Invalid manifests are
 * reported on stderr and skipped, as the controller skips them. */
static int dir_load(const struct trig_opts *o, struct dir_state *d)
{
	struct manifest_opts mo = {.local = true};
	char **names = NULL;
	size_t n = 0, cap = 0;
	struct dirent *e;
	json_error_t jerr;
	DIR *dir;

	memset(d, 0, sizeof(*d));
	dir = opendir(o->dir);
	if (!dir) {
		cli_error("cannot read the triggers directory %s: %s", o->dir, strerror(errno));
		return CLI_DB;
	}
	while ((e = readdir(dir))) {
		if (!is_manifest_name(e->d_name))
			continue;
		if (n == cap) {
			char **grown = realloc(names, (cap = cap ? 2 * cap : 16) * sizeof(*names));

			if (!grown)
				break;
			names = grown;
		}
		names[n++] = strdup(e->d_name);
	}
	closedir(dir);
	qsort(names, n, sizeof(*names), name_cmp);
	for (size_t i = 0; i < n; i++) {
		char path[4096];

		snprintf(path, sizeof(path), "%s/%s", o->dir, names[i]);
		if (names[i])
			manifest_parse_file(&d->m, path, path, &mo);
		free(names[i]);
	}
	free(names);
	for (size_t i = 0; i < d->m.n_errors; i++)
		fprintf(stderr, "traceprof: skipped: %s\n", d->m.errors[i].message);
	if (o->status_file)
		snprintf(d->status_path, sizeof(d->status_path), "%s", o->status_file);
	else
		snprintf(d->status_path, sizeof(d->status_path), "%s/%s", o->dir, STATUS_FILE);
	d->status = json_load_file(d->status_path, 0, &jerr);
	return CLI_OK;
}

static void dir_free(struct dir_state *d)
{
	manifest_list_free(&d->m);
	json_decref(d->status);
}

/* The status file's entry of ns/name, or NULL. */
static const json_t *dir_status_of(const struct dir_state *d, const char *ns, const char *name)
{
	size_t i;
	json_t *t;

	json_array_foreach(json_object_get(d->status, "triggers"), i, t)
	{
		if (!strcmp(vstr(t, "namespace", "default"), ns) &&
		    !strcmp(vstr(t, "name", ""), name))
			return t;
	}
	return NULL;
}

static json_t *view_from_manifest(const struct dir_state *d, const struct manifest_trigger *t)
{
	const json_t *st = dir_status_of(d, t->namespace_, t->name);
	char *spec_text = manifest_spec_json(t), created[32] = "";
	json_t *spec = spec_text ? json_loads(spec_text, 0, NULL) : NULL;
	json_t *v = json_object(), *ids = json_object_get(st, "traceIDs");
	struct stat sb;

	free(spec_text);
	if (stat(t->file, &sb) == 0) {
		struct timespec ts = {.tv_sec = sb.st_mtime};

		kube_format_time(created, &ts);
	}
	json_object_set_new(v, "namespace", json_string(t->namespace_));
	json_object_set_new(v, "name", json_string(t->name));
	json_object_set_new(v, "service", jstr_or_null(t->service));
	json_object_set_new(v, "selector", json_null());
	json_object_set_new(v, "phase", json_string(st ? vstr(st, "phase", "Pending") : "Pending"));
	json_object_set_new(v, "reason", jstr_or_null(st ? vstr(st, "reason", NULL) : NULL));
	json_object_set_new(v, "message",
			    st ? jstr_or_null(vstr(st, "message", NULL))
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
	json_object_set_new(v, "deadline", jstr_or_null(st ? vstr(st, "deadline", NULL) : NULL));
	json_object_set_new(v, "targetPods", json_integer(0));
	json_object_set_new(v, "source", json_string("directory"));
	json_object_set_new(v, "file", json_string(t->file));
	json_object_set_new(v, "spec", spec ? spec : json_object());
	return v;
}

/* Index of ns/name among the directory's triggers, or -1. */
static long dir_find(const struct dir_state *d, const char *ns, const char *name)
{
	for (size_t i = 0; i < d->m.n; i++)
		if (!strcmp(d->m.items[i].namespace_, ns) && !strcmp(d->m.items[i].name, name))
			return (long)i;
	return -1;
}

/* Writes text to DIR/base atomically (a hidden temporary file, which the
 * controller ignores, then rename), refusing to replace a file. */
static int dir_write(const char *dir, const char *base, const char *text, size_t len)
{
	char path[4096], tmp[4096];
	FILE *f;
	int ok;

	snprintf(path, sizeof(path), "%s/%s", dir, base);
	snprintf(tmp, sizeof(tmp), "%s/.%s.%ld.tmp", dir, base, (long)getpid());
	if (access(path, F_OK) == 0) {
		cli_error("%s already exists; delete the trigger first", path);
		return CLI_USAGE;
	}
	f = fopen(tmp, "wx");
	if (!f) {
		cli_error("cannot write %s: %s", tmp, strerror(errno));
		return CLI_IO;
	}
	ok = fwrite(text, 1, len, f) == len;
	ok = (fflush(f) == 0) & ok & (fsync(fileno(f)) == 0);
	ok = (fclose(f) == 0) & ok;
	/* link() fails when path appeared meanwhile: never replaces a file */
	if (ok && link(tmp, path) != 0) {
		cli_error("cannot create %s: %s", path, strerror(errno));
		unlink(tmp);
		return errno == EEXIST ? CLI_USAGE : CLI_IO;
	}
	unlink(tmp);
	if (!ok) {
		cli_error("cannot write %s", path);
		return CLI_IO;
	}
	return CLI_OK;
}

/* ---- the subcommands ------------------------------------------------------ */

/* The whole of path ("-": standard input), at most MANIFEST_MAX_BYTES, NUL
 * terminated, into *buf (the caller frees it). CLI_OK, or the exit code
 * after saying what went wrong (*buf is then NULL). */
static int read_file(const char *path, char **buf, size_t *len)
{
	FILE *f = strcmp(path, "-") ? fopen(path, "re") : stdin;
	size_t cap = 0, got;
	int rc = CLI_OK;

	*buf = NULL;
	*len = 0;
	if (!f) {
		cli_error("cannot read %s: %s", path, strerror(errno));
		return CLI_USAGE;
	}
	do {
		if (*len + 4096 + 1 > cap) {
			size_t want = cap ? 2 * cap : 8192;
			char *grown = realloc(*buf, want);

			if (!grown) {
				cli_error("%s: out of memory", path);
				rc = CLI_IO;
				break;
			}
			*buf = grown;
			cap = want;
		}
		got = fread(*buf + *len, 1, cap - *len - 1, f);
		*len += got;
		if (*len > MANIFEST_MAX_BYTES) {
			cli_error("%s: larger than %d bytes", path, MANIFEST_MAX_BYTES);
			rc = CLI_USAGE;
		}
	} while (rc == CLI_OK && got > 0);
	if (rc == CLI_OK && ferror(f)) {
		cli_error("cannot read %s: %s", path, strerror(errno));
		rc = CLI_USAGE;
	}
	if (f != stdin)
		fclose(f);
	if (rc != CLI_OK) {
		free(*buf);
		*buf = NULL;
		return rc;
	}
	(*buf)[*len] = '\0';
	return CLI_OK;
}

static int do_create(const struct trig_opts *o, const char *name, const char *ns,
		     struct trig_kube *k)
{
	struct manifest_list l = {0};
	char *text = NULL, path[1024];
	size_t len = 0;
	int rc = CLI_OK;
	json_t *docs = NULL;

	if (o->file) {
		if ((rc = read_file(o->file, &text, &len)))
			return rc;
		if (validate(o->file, text, len, o->dir != NULL, &l) < 0) {
			rc = CLI_USAGE;
			goto out;
		}
		docs = file_documents(text, len);
		if (!docs) {
			cli_error("%s: cannot read it as YAML", o->file);
			rc = CLI_USAGE;
			goto out;
		}
	} else {
		json_t *m = manifest_from_flags(o, name, ns);
		char *json;

		if (!m)
			return CLI_USAGE;
		json = json_dumps(m, JSON_COMPACT);
		if (!json || validate(name, json, strlen(json), o->dir != NULL, &l) < 0) {
			free(json);
			json_decref(m);
			rc = CLI_USAGE;
			goto out;
		}
		free(json);
		docs = json_array();
		json_array_append_new(docs, m);
	}

	if (o->dry_run) {
		size_t i;
		json_t *m;

		if (o->file) {
			fwrite(text, 1, len, stdout);
		} else {
			json_array_foreach(docs, i, m) yaml_write(stdout, m, 0);
		}
		goto out;
	}

	if (o->dir) {
		struct dir_state d;

		if ((rc = dir_load(o, &d)))
			goto out;
		for (size_t i = 0; i < l.n; i++)
			if (dir_find(&d, l.items[i].namespace_, l.items[i].name) >= 0) {
				cli_error(
				    "trigger %s/%s already exists in %s", l.items[i].namespace_,
				    l.items[i].name,
				    d.m.items[dir_find(&d, l.items[i].namespace_, l.items[i].name)]
					.file);
				rc = CLI_USAGE;
			}
		dir_free(&d);
		if (rc)
			goto out;
		if (o->file) {
			const char *base =
			    strrchr(o->file, '/') ? strrchr(o->file, '/') + 1 : o->file;

			rc = dir_write(o->dir, strcmp(o->file, "-") ? base : "stdin.yaml", text,
				       len);
		} else {
			char *yaml = NULL;
			size_t ylen = 0;
			FILE *mf = open_memstream(&yaml, &ylen);

			if (!mf) {
				rc = CLI_IO;
				goto out;
			}
			fprintf(mf, "# created by traceprof trigger create\n");
			yaml_write(mf, json_array_get(docs, 0), 0);
			fclose(mf);
			snprintf(path, sizeof(path), "%s.yaml", name);
			rc = dir_write(o->dir, path, yaml, ylen);
			free(yaml);
		}
		for (size_t i = 0; rc == CLI_OK && i < l.n; i++)
			printf("traceprofiletrigger %s/%s created in %s\n", l.items[i].namespace_,
			       l.items[i].name, o->dir);
		goto out;
	}

	/* the cluster, connected only now that the triggers are known valid:
	 * each document in order; a failure does not stop the rest */
	size_t i;
	json_t *m;

	if ((rc = kube_open(o, k)))
		goto out;
	if (!o->namespace_)
		ns = k->cfg->namespace && *k->cfg->namespace ? k->cfg->namespace : "default";
	json_array_foreach(docs, i, m)
	{
		if (!o->file && !o->namespace_) /* flags: the context's namespace */
			json_object_del(json_object_get(m, "metadata"), "namespace");

		json_t *meta = json_object_get(m, "metadata");
		const char *dns = json_string_value(json_object_get(meta, "namespace"));
		const char *dname = json_string_value(json_object_get(meta, "name"));
		struct kube_response resp = {0};
		char what[256];
		int r;

		if (!dns) {
			json_object_set_new(meta, "namespace", json_string(ns));
			dns = ns;
		}
		if (trig_path(path, sizeof(path), dns, NULL) < 0) {
			rc = CLI_USAGE;
			continue;
		}
		r = kube_request(k->client, KUBE_POST, path, m, &resp);
		snprintf(what, sizeof(what), "create %s/%s", dns, dname ? dname : "?");
		if (r == 0 && resp.http_status / 100 == 2) {
			printf("traceprofiletrigger %s/%s created\n", dns, dname);
		} else {
			if (kube_is_already_exists(&resp))
				cli_error(
				    "trigger %s/%s already exists; delete it first, or change "
				    "it with kubectl apply",
				    dns, dname);
			else
				r = kube_fail(k, &resp, r, what);
			if (kube_is_already_exists(&resp))
				r = CLI_USAGE;
			if (rc == CLI_OK || r == CLI_DB)
				rc = r ? r : CLI_USAGE;
		}
		kube_response_clear(&resp);
	}
out:
	json_decref(docs);
	manifest_list_free(&l);
	free(text);
	return rc;
}

/* The views of ns (NULL: every namespace) or of ns/name, into *out. */
static int collect(const struct trig_opts *o, const char *ns, const char *name, struct trig_kube *k,
		   json_t **out)
{
	json_t *views = json_array();
	int rc = CLI_OK;

	*out = views;
	if (o->dir) {
		struct dir_state d;

		if ((rc = dir_load(o, &d)))
			return rc;
		for (size_t i = 0; i < d.m.n; i++) {
			const struct manifest_trigger *t = &d.m.items[i];

			if ((ns && strcmp(t->namespace_, ns)) || (name && strcmp(t->name, name)))
				continue;
			json_array_append_new(views, view_from_manifest(&d, t));
		}
		dir_free(&d);
		return CLI_OK;
	}

	char path[1024];
	struct kube_response resp = {0};
	int r;

	if (trig_path(path, sizeof(path), ns, name) < 0)
		return CLI_USAGE;
	r = kube_request(k->client, KUBE_GET, path, NULL, &resp);
	if (r < 0 || resp.http_status / 100 != 2) {
		if (name && kube_is_not_found(&resp))
			rc = CLI_NO_DATA; /* the caller says which */
		else
			rc = kube_fail(k, &resp, r, name ? "get" : "list");
	} else if (name) {
		json_array_append_new(views, view_from_object(resp.body));
	} else {
		size_t i;
		json_t *item;

		json_array_foreach(json_object_get(resp.body, "items"), i, item)
		    json_array_append_new(views, view_from_object(item));
	}
	kube_response_clear(&resp);
	return rc;
}

static int print_json(const json_t *v)
{
	if (json_dumpf(v, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER) < 0)
		return CLI_IO;
	fputc('\n', stdout);
	return CLI_OK;
}

static int do_list(const struct trig_opts *o, const char *ns, struct trig_kube *k)
{
	json_t *views;
	int rc = collect(o, o->all_namespaces ? NULL : ns, NULL, k, &views);
	size_t i;
	json_t *v;

	if (rc == CLI_OK && json_array_size(views) == 0)
		rc = CLI_NO_DATA; /* still printed: [] for json, a sentence for people */
	if (rc != CLI_OK && rc != CLI_NO_DATA) {
		/* nothing read */
	} else if (o->out == OUT_JSON) {
		if (print_json(views) != CLI_OK)
			rc = CLI_IO;
	} else if (o->out == OUT_NAME) {
		json_array_foreach(views, i, v)
		    printf("%s/%s\n", vstr(v, "namespace", ""), vstr(v, "name", ""));
	} else if (json_array_size(views)) {
		print_list(stdout, views, o->all_namespaces);
	} else if (o->all_namespaces || o->dir) {
		fprintf(stderr, "No triggers found in %s.\n", o->dir ? o->dir : "any namespace");
	} else {
		fprintf(stderr, "No triggers found in namespace %s.\n", ns);
	}
	json_decref(views);
	return rc;
}

static int do_get(const struct trig_opts *o, const char *ns, const char *name, struct trig_kube *k)
{
	json_t *views;
	int rc = collect(o, ns, name, k, &views);

	if (rc == CLI_OK && json_array_size(views) == 0)
		rc = CLI_NO_DATA;
	if (rc == CLI_NO_DATA)
		cli_error("no trigger %s/%s in %s", ns, name, o->dir ? o->dir : k->cfg->server);
	else if (rc == CLI_OK && o->out == OUT_JSON)
		rc = print_json(json_array_get(views, 0));
	else if (rc == CLI_OK)
		print_one(stdout, json_array_get(views, 0));
	json_decref(views);
	return rc;
}

static int do_delete(const struct trig_opts *o, const char *ns, const char *name,
		     struct trig_kube *k)
{
	char path[1024];
	int rc = CLI_OK;

	if (o->dir) {
		struct dir_state d;
		long at;
		size_t in_file = 0;

		if ((rc = dir_load(o, &d)))
			return rc;
		at = dir_find(&d, ns, name);
		if (at < 0) {
			cli_error("no trigger %s/%s in %s", ns, name, o->dir);
			rc = CLI_NO_DATA;
		} else {
			const char *file = d.m.items[at].file;

			for (size_t i = 0; i < d.m.n; i++)
				in_file += !strcmp(d.m.items[i].file, file);
			for (size_t i = 0; i < d.m.n_errors; i++)
				in_file += !strcmp(d.m.errors[i].file, file);
			if (in_file > 1) {
				cli_error("%s holds %zu triggers; remove %s from it by hand", file,
					  in_file, name);
				rc = CLI_USAGE;
			} else if (unlink(file) != 0) {
				cli_error("cannot remove %s: %s", file, strerror(errno));
				rc = CLI_IO;
			} else {
				printf("traceprofiletrigger %s/%s deleted (%s)\n", ns, name, file);
			}
		}
		dir_free(&d);
		return rc;
	}

	struct kube_response resp = {0};
	int r;

	if (trig_path(path, sizeof(path), ns, name) < 0)
		return CLI_USAGE;
	r = kube_request(k->client, KUBE_DELETE, path, NULL, &resp);
	if (r == 0 && resp.http_status / 100 == 2) {
		printf("traceprofiletrigger %s/%s deleted\n", ns, name);
	} else if (kube_is_not_found(&resp)) {
		cli_error("no trigger %s/%s in %s", ns, name, k->cfg->server);
		rc = CLI_NO_DATA;
	} else {
		rc = kube_fail(k, &resp, r, "delete");
	}
	kube_response_clear(&resp);
	return rc;
}

int cmd_trigger(int argc, char **argv)
{
	enum {
		OPT_KUBECONFIG = 256,
		OPT_CONTEXT,
		OPT_IN_CLUSTER,
		OPT_INSECURE,
		OPT_DIR,
		OPT_STATUS_FILE,
		OPT_SERVICE,
		OPT_SELECTOR,
		OPT_MIN,
		OPT_MAX,
		OPT_STATUS,
		OPT_ROUTE,
		OPT_METHOD,
		OPT_MAX_REQ,
		OPT_FREQ,
		OPT_TIMEOUT,
		OPT_DRY_RUN,
	};
	static const struct option longopts[] = {
	    {"kubeconfig", required_argument, NULL, OPT_KUBECONFIG},
	    {"context", required_argument, NULL, OPT_CONTEXT},
	    {"in-cluster", no_argument, NULL, OPT_IN_CLUSTER},
	    {"insecure-skip-tls-verify", no_argument, NULL, OPT_INSECURE},
	    {"triggers-dir", required_argument, NULL, OPT_DIR},
	    {"status-file", required_argument, NULL, OPT_STATUS_FILE},
	    {"namespace", required_argument, NULL, 'n'},
	    {"all-namespaces", no_argument, NULL, 'A'},
	    {"file", required_argument, NULL, 'f'},
	    {"output", required_argument, NULL, 'o'},
	    {"service", required_argument, NULL, OPT_SERVICE},
	    {"selector", required_argument, NULL, OPT_SELECTOR},
	    {"min-duration", required_argument, NULL, OPT_MIN},
	    {"max-duration", required_argument, NULL, OPT_MAX},
	    {"status", required_argument, NULL, OPT_STATUS},
	    {"route", required_argument, NULL, OPT_ROUTE},
	    {"method", required_argument, NULL, OPT_METHOD},
	    {"max-requests", required_argument, NULL, OPT_MAX_REQ},
	    {"frequency", required_argument, NULL, OPT_FREQ},
	    {"timeout", required_argument, NULL, OPT_TIMEOUT},
	    {"dry-run", no_argument, NULL, OPT_DRY_RUN},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	struct trig_opts o = {0};
	struct trig_kube k = {0};
	const char *sub, *name = NULL, *ns;
	int c, rc, creating, has_spec_flags;

	if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") ||
	    !strcmp(argv[1], "help")) {
		fputs(usage_text, argc < 2 ? stderr : stdout);
		return argc < 2 ? CLI_USAGE : CLI_OK;
	}
	sub = argv[1];
	if (strcmp(sub, "create") && strcmp(sub, "list") && strcmp(sub, "get") &&
	    strcmp(sub, "delete")) {
		cli_error("trigger: unknown subcommand \"%s\" (create, list, get, delete)", sub);
		usage_hint();
		return CLI_USAGE;
	}
	argc--;
	argv++;
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":n:Af:o:h", longopts, NULL)) != -1) {
		switch (c) {
		case OPT_KUBECONFIG:
			o.kubeconfig = optarg;
			break;
		case OPT_CONTEXT:
			o.context = optarg;
			break;
		case OPT_IN_CLUSTER:
			o.in_cluster = 1;
			break;
		case OPT_INSECURE:
			o.insecure = 1;
			break;
		case OPT_DIR:
			o.dir = optarg;
			break;
		case OPT_STATUS_FILE:
			o.status_file = optarg;
			break;
		case 'n':
			o.namespace_ = optarg;
			break;
		case 'A':
			o.all_namespaces = 1;
			break;
		case 'f':
			o.file = optarg;
			break;
		case 'o':
			if (!strcmp(optarg, "text"))
				o.out = OUT_TEXT;
			else if (!strcmp(optarg, "json"))
				o.out = OUT_JSON;
			else if (!strcmp(optarg, "name") && !strcmp(sub, "list"))
				o.out = OUT_NAME;
			else {
				cli_error("trigger %s: unknown output \"%s\" (text, json%s)", sub,
					  optarg, strcmp(sub, "list") ? "" : ", name");
				return CLI_USAGE;
			}
			break;
		case OPT_SERVICE:
			o.service = optarg;
			break;
		case OPT_SELECTOR:
			o.selector = optarg;
			break;
		case OPT_MIN:
			o.min_duration = optarg;
			break;
		case OPT_MAX:
			o.max_duration = optarg;
			break;
		case OPT_STATUS:
			o.status = optarg;
			break;
		case OPT_ROUTE:
			o.route = optarg;
			break;
		case OPT_METHOD:
			o.method = optarg;
			break;
		case OPT_MAX_REQ:
			o.max_requests = optarg;
			break;
		case OPT_FREQ:
			o.frequency = optarg;
			break;
		case OPT_TIMEOUT:
			o.timeout = optarg;
			break;
		case OPT_DRY_RUN:
			o.dry_run = 1;
			break;
		case 'h':
			fputs(usage_text, stdout);
			return CLI_OK;
		case ':':
			cli_error("trigger %s: %s needs a value", sub, argv[optind - 1]);
			usage_hint();
			return CLI_USAGE;
		default:
			cli_error("trigger %s: unknown flag %s", sub, argv[optind - 1]);
			usage_hint();
			return CLI_USAGE;
		}
	}
	creating = !strcmp(sub, "create");
	has_spec_flags = o.service || o.selector || o.min_duration || o.max_duration || o.status ||
			 o.route || o.method || o.max_requests || o.frequency || o.timeout;
	if (optind < argc)
		name = argv[optind++];
	if (optind < argc) {
		cli_error("trigger %s: unexpected argument \"%s\"", sub, argv[optind]);
		return CLI_USAGE;
	}
	if (!creating && (has_spec_flags || o.file || o.dry_run)) {
		cli_error("trigger %s: trigger flags belong to create", sub);
		return CLI_USAGE;
	}
	if (creating && o.file && (has_spec_flags || name)) {
		cli_error("trigger create: -f FILE takes the triggers from the file; give no NAME "
			  "or trigger flags with it");
		return CLI_USAGE;
	}
	if (creating && !o.file && !name) {
		cli_error("trigger create: give the trigger's NAME (or -f FILE)");
		return CLI_USAGE;
	}
	if ((!strcmp(sub, "get") || !strcmp(sub, "delete")) && !name) {
		cli_error("trigger %s: give the trigger's NAME", sub);
		return CLI_USAGE;
	}
	if (!strcmp(sub, "list") && name) {
		cli_error("trigger list: takes no NAME (use trigger get NAME)");
		return CLI_USAGE;
	}
	if (o.all_namespaces && strcmp(sub, "list")) {
		cli_error("trigger %s: -A belongs to list", sub);
		return CLI_USAGE;
	}
	if (o.dir && (o.kubeconfig || o.context || o.in_cluster)) {
		cli_error("trigger %s: --triggers-dir is a local directory; give it or a cluster "
			  "(--kubeconfig, --context, --in-cluster), not both",
			  sub);
		return CLI_USAGE;
	}
	if (o.status_file && !o.dir) {
		cli_error("trigger %s: --status-file needs --triggers-dir", sub);
		return CLI_USAGE;
	}
	if (o.selector && o.dir) {
		cli_error("trigger create: --selector needs the Kubernetes API; use --service with "
			  "--triggers-dir");
		return CLI_USAGE;
	}

	/* create connects once the triggers are valid (and a dry run never) */
	if (!o.dir && !creating && (rc = kube_open(&o, &k)))
		goto out;
	ns = o.namespace_ ? o.namespace_ : k.cfg && k.cfg->namespace ? k.cfg->namespace : "default";

	if (creating)
		rc = do_create(&o, name, ns, &k);
	else if (!strcmp(sub, "list"))
		rc = do_list(&o, ns, &k);
	else if (!strcmp(sub, "get"))
		rc = do_get(&o, ns, name, &k);
	else
		rc = do_delete(&o, ns, name, &k);
	if (rc == CLI_OK && (fflush(stdout) != 0 || ferror(stdout))) {
		cli_error("cannot write the output: %s", strerror(errno));
		rc = CLI_IO;
	}
out:
	if (k.client || k.cfg)
		kube_close(&k);
	return rc;
}
