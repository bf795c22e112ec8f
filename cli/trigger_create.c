/*
 * trigger_create.c - `traceprof trigger create`: a manifest file, or the
 * manifest of the create flags (one per field of the spec table,
 * trigger_spec.h), goes through the controller's own validator first, so
 * a trigger this command accepts is one the controller accepts, and a
 * mistake is reported with the field before anything is sent or written.
 * Then it is printed (--dry-run), written into the triggers directory, or
 * sent to the cluster, which still checks it against the CRD's schema and
 * rules; its answer is shown as it comes.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "trigger.h"
#include "trigger_json.h"

/* What create works on: the valid triggers, their documents as JSON, and
 * the file's text (NULL for flags). */
struct create {
	struct manifest_list l;
	json_t *docs;
	char *text;
	size_t len;
};

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

/* The triggers to create, from -f FILE or from the flags; CLI_OK or an exit code. */
static int create_read(const struct trig_opts *o, const char *name, const char *ns,
		       struct create *c)
{
	char err[512];

	if (o->file) {
		int rc = read_file(o->file, &c->text, &c->len);

		if (rc)
			return rc;
		if (validate(o->file, c->text, c->len, o->dir != NULL, &c->l) < 0)
			return CLI_USAGE;
		c->docs = trigger_yaml_documents(c->text, c->len);
		if (!c->docs) {
			cli_error("%s: cannot read it as YAML", o->file);
			return CLI_USAGE;
		}
		return CLI_OK;
	}

	json_t *m = trigger_manifest_from_values(name, ns, o->spec, err, sizeof(err));
	char *json;

	if (!m) {
		cli_error("%s", err);
		return CLI_USAGE;
	}
	json = json_dumps(m, JSON_COMPACT);
	if (!json || validate(name, json, strlen(json), o->dir != NULL, &c->l) < 0) {
		free(json);
		json_decref(m);
		return CLI_USAGE;
	}
	free(json);
	c->docs = json_array();
	json_array_append_new(c->docs, m);
	return CLI_OK;
}

/* Writes the triggers as a new file of the directory (never replacing one). */
static int create_in_dir(const struct trig_opts *o, const char *name, const struct create *c)
{
	struct dir_state d;
	char err[8192 + 128];
	int rc, r;

	if ((rc = trig_dir_load(o, &d)))
		return rc;
	for (size_t i = 0; i < c->l.n; i++) {
		long at = trig_dir_find(&d, c->l.items[i].namespace_, c->l.items[i].name);
		char path[8192];

		if (at < 0)
			continue;
		trig_dir_path(o, &d, &d.m.items[at], path, sizeof(path));
		cli_error("trigger %s/%s already exists in %s", c->l.items[i].namespace_,
			  c->l.items[i].name, path);
		rc = CLI_USAGE;
	}
	trig_dir_free(&d);
	if (rc)
		return rc;
	if (o->file) {
		const char *base = strrchr(o->file, '/') ? strrchr(o->file, '/') + 1 : o->file;

		r = manifest_dir_create(o->dir, strcmp(o->file, "-") ? base : "stdin.yaml", c->text,
					c->len, err, sizeof(err));
	} else {
		char *yaml = NULL, file[1024];
		size_t ylen = 0;
		FILE *mf = open_memstream(&yaml, &ylen);

		if (!mf)
			return CLI_IO;
		fprintf(mf, "# created by traceprof trigger create\n");
		trigger_yaml_write(mf, json_array_get(c->docs, 0), 0);
		fclose(mf);
		snprintf(file, sizeof(file), "%s.yaml", name);
		r = manifest_dir_create(o->dir, file, yaml, ylen, err, sizeof(err));
		free(yaml);
	}
	if (r < 0) {
		cli_error("%s", err);
		return r == -EEXIST ? CLI_USAGE : CLI_IO;
	}
	for (size_t i = 0; i < c->l.n; i++)
		printf("traceprofiletrigger %s/%s created in %s\n", c->l.items[i].namespace_,
		       c->l.items[i].name, o->dir);
	return CLI_OK;
}

/* POSTs one document m into namespace ns (its own, else ns); CLI_OK or an exit code. */
static int create_one(struct trig_kube *k, json_t *m, const char *ns)
{
	json_t *meta = json_object_get(m, "metadata");
	const char *dns = json_string_value(json_object_get(meta, "namespace"));
	const char *dname = json_string_value(json_object_get(meta, "name"));
	struct kube_response resp = {0};
	char what[256], path[1024];
	int r;

	if (!dns) {
		json_object_set_new(meta, "namespace", json_string(ns));
		dns = ns;
	}
	if (trig_path(path, sizeof(path), dns, NULL) < 0)
		return CLI_USAGE;
	r = kube_request(k->client, KUBE_POST, path, m, &resp);
	snprintf(what, sizeof(what), "create %s/%s", dns, dname ? dname : "?");
	if (r == 0 && resp.http_status / 100 == 2) {
		printf("traceprofiletrigger %s/%s created\n", dns, dname);
	} else if (kube_is_already_exists(&resp)) {
		cli_error("trigger %s/%s already exists; delete it first, or change it with "
			  "kubectl apply",
			  dns, dname);
		r = CLI_USAGE;
	} else {
		r = trig_kube_fail(k, &resp, r, what);
		r = r ? r : CLI_USAGE;
	}
	kube_response_clear(&resp);
	return r == 0 ? CLI_OK : r;
}

/* The cluster, connected only now that the triggers are known valid: each
 * document in order; a failure does not stop the rest. */
static int create_in_cluster(const struct trig_opts *o, const char *ns, struct trig_kube *k,
			     const struct create *c)
{
	size_t i;
	json_t *m;
	int rc;

	if ((rc = trig_kube_open(o, k)))
		return rc;
	if (!o->namespace_)
		ns = k->cfg->namespace && *k->cfg->namespace ? k->cfg->namespace : "default";
	json_array_foreach(c->docs, i, m)
	{
		int r;

		if (!o->file && !o->namespace_) /* flags: the context's namespace */
			json_object_del(json_object_get(m, "metadata"), "namespace");
		r = create_one(k, m, ns);
		if (r != CLI_OK && (rc == CLI_OK || r == CLI_DB))
			rc = r;
	}
	return rc;
}

int trig_create(const struct trig_opts *o, const char *name, const char *ns, struct trig_kube *k)
{
	struct create c = {0};
	int rc = create_read(o, name, ns, &c);

	if (rc == CLI_OK && o->dry_run) {
		size_t i;
		json_t *m;

		if (o->file) {
			fwrite(c.text, 1, c.len, stdout);
		} else {
			json_array_foreach(c.docs, i, m) trigger_yaml_write(stdout, m, 0);
		}
	} else if (rc == CLI_OK && o->dir) {
		rc = create_in_dir(o, name, &c);
	} else if (rc == CLI_OK) {
		rc = create_in_cluster(o, ns, k, &c);
	}
	json_decref(c.docs);
	manifest_list_free(&c.l);
	free(c.text);
	return rc;
}
