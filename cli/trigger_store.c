/*
 * trigger_store.c - where triggers live: the custom resources of the
 * Kubernetes API (a kubeconfig or the pod's service account), or the
 * manifests of a local triggers directory read with the controller's own
 * reader (lib/spec/manifest_dir.c: the same names, the same refusals) and
 * the status file the controller writes next to them. list, get and delete
 * for both.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "trigger.h"

/* ---- the cluster -------------------------------------------------------- */

int trig_kube_open(const struct trig_opts *o, struct trig_kube *k)
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

void trig_kube_close(struct trig_kube *k)
{
	kube_client_free(k->client);
	kube_config_free(k->cfg);
}

/* The exit code for a failed call, after saying what failed. */
int trig_kube_fail(struct trig_kube *k, const struct kube_response *r, int rc, const char *what)
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

int trig_path(char *buf, size_t len, const char *ns, const char *name)
{
	if (kube_path(buf, len, TRIG_GROUP_PREFIX, ns, TRIG_PLURAL, name, NULL) < 0) {
		cli_error("invalid name or namespace \"%s/%s\"", ns ? ns : "", name ? name : "");
		return -1;
	}
	return 0;
}

/* ---- a local triggers directory ------------------------------------------ */

/* Reads every manifest of the directory as the controller does (*.yaml and
 * *.yml, hidden files skipped, regular files only) and its status file.
 * Invalid manifests are reported on stderr and skipped, as the controller
 * skips them. */
int trig_dir_load(const struct trig_opts *o, struct dir_state *d)
{
	json_error_t jerr;
	int rc;

	memset(d, 0, sizeof(*d));
	rc = manifest_dir_scan(&d->dir, o->dir, &d->m);
	if (rc < 0) {
		cli_error("cannot read the triggers directory %s: %s", o->dir, strerror(-rc));
		trig_dir_free(d);
		return CLI_DB;
	}
	for (size_t i = 0; i < d->m.n_errors; i++)
		fprintf(stderr, "traceprof: skipped: %s/%s\n", o->dir, d->m.errors[i].message);
	if (o->status_file)
		snprintf(d->status_path, sizeof(d->status_path), "%s", o->status_file);
	else
		snprintf(d->status_path, sizeof(d->status_path), "%s/%s", o->dir, TRIG_STATUS_FILE);
	d->status = json_load_file(d->status_path, 0, &jerr);
	return CLI_OK;
}

void trig_dir_free(struct dir_state *d)
{
	manifest_list_free(&d->m);
	manifest_dir_free(&d->dir);
	json_decref(d->status);
	d->status = NULL;
}

/* Index of ns/name among the directory's triggers, or -1. */
long trig_dir_find(const struct dir_state *d, const char *ns, const char *name)
{
	for (size_t i = 0; i < d->m.n; i++)
		if (!strcmp(d->m.items[i].namespace_, ns) && !strcmp(d->m.items[i].name, name))
			return (long)i;
	return -1;
}

void trig_dir_path(const struct trig_opts *o, const struct dir_state *d,
		   const struct manifest_trigger *t, char *buf, size_t len)
{
	const char *name = manifest_dir_file_name(&d->dir, t->file);

	snprintf(buf, len, "%s/%s", o->dir, name ? name : t->file);
}

/* ---- list, get, delete ----------------------------------------------------- */

/* The views of ns (NULL: every namespace) or of ns/name, into *out. */
static int collect(const struct trig_opts *o, const char *ns, const char *name, struct trig_kube *k,
		   json_t **out)
{
	json_t *views = json_array();
	int rc = CLI_OK;

	*out = views;
	if (o->dir) {
		struct dir_state d;

		if ((rc = trig_dir_load(o, &d)))
			return rc;
		for (size_t i = 0; i < d.m.n; i++) {
			const struct manifest_trigger *t = &d.m.items[i];
			char file[8192];

			if ((ns && strcmp(t->namespace_, ns)) || (name && strcmp(t->name, name)))
				continue;
			trig_dir_path(o, &d, t, file, sizeof(file));
			json_array_append_new(views, trig_view_from_manifest(&d, t, file));
		}
		trig_dir_free(&d);
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
			rc = trig_kube_fail(k, &resp, r, name ? "get" : "list");
	} else if (name) {
		json_array_append_new(views, trig_view_from_object(resp.body));
	} else {
		size_t i;
		json_t *item;

		json_array_foreach(json_object_get(resp.body, "items"), i, item)
		    json_array_append_new(views, trig_view_from_object(item));
	}
	kube_response_clear(&resp);
	return rc;
}

int trig_list(const struct trig_opts *o, const char *ns, struct trig_kube *k)
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
		if (trig_print_json(views) != CLI_OK)
			rc = CLI_IO;
	} else if (o->out == OUT_NAME) {
		json_array_foreach(views, i, v)
		    printf("%s/%s\n", trig_vstr(v, "namespace", ""), trig_vstr(v, "name", ""));
	} else if (json_array_size(views)) {
		trig_print_list(stdout, views, o->all_namespaces);
	} else if (o->all_namespaces || o->dir) {
		fprintf(stderr, "No triggers found in %s.\n", o->dir ? o->dir : "any namespace");
	} else {
		fprintf(stderr, "No triggers found in namespace %s.\n", ns);
	}
	json_decref(views);
	return rc;
}

int trig_get(const struct trig_opts *o, const char *ns, const char *name, struct trig_kube *k)
{
	json_t *views;
	int rc = collect(o, ns, name, k, &views);

	if (rc == CLI_OK && json_array_size(views) == 0)
		rc = CLI_NO_DATA;
	if (rc == CLI_NO_DATA)
		cli_error("no trigger %s/%s in %s", ns, name, o->dir ? o->dir : k->cfg->server);
	else if (rc == CLI_OK && o->out == OUT_JSON)
		rc = trig_print_json(json_array_get(views, 0));
	else if (rc == CLI_OK)
		trig_print_one(stdout, json_array_get(views, 0));
	json_decref(views);
	return rc;
}

/* Removes the file of ns/name, when it holds that trigger alone. */
static int delete_in_dir(const struct trig_opts *o, const char *ns, const char *name)
{
	struct dir_state d;
	long at;
	size_t in_file = 0;
	int rc;

	if ((rc = trig_dir_load(o, &d)))
		return rc;
	at = trig_dir_find(&d, ns, name);
	if (at < 0) {
		cli_error("no trigger %s/%s in %s", ns, name, o->dir);
		rc = CLI_NO_DATA;
	} else {
		const char *file = d.m.items[at].file;
		char path[8192];

		trig_dir_path(o, &d, &d.m.items[at], path, sizeof(path));
		for (size_t i = 0; i < d.m.n; i++)
			in_file += !strcmp(d.m.items[i].file, file);
		for (size_t i = 0; i < d.m.n_errors; i++)
			in_file += !strcmp(d.m.errors[i].file, file);
		if (in_file > 1) {
			cli_error("%s holds %zu triggers; remove %s from it by hand", path, in_file,
				  name);
			rc = CLI_USAGE;
		} else if (unlink(path) != 0) {
			cli_error("cannot remove %s: %s", path, strerror(errno));
			rc = CLI_IO;
		} else {
			printf("traceprofiletrigger %s/%s deleted (%s)\n", ns, name, path);
		}
	}
	trig_dir_free(&d);
	return rc;
}

int trig_delete(const struct trig_opts *o, const char *ns, const char *name, struct trig_kube *k)
{
	char path[1024];
	int rc = CLI_OK;

	if (o->dir)
		return delete_in_dir(o, ns, name);

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
		rc = trig_kube_fail(k, &resp, r, "delete");
	}
	kube_response_clear(&resp);
	return rc;
}
