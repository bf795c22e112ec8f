/*
 * trigger.h - between the parts of `traceprof trigger`: the command line
 * (cmd_trigger.c), create (trigger_create.c), the two places triggers live
 * (trigger_store.c: the cluster and a local triggers directory) and the
 * views printed (trigger_view.c).
 */
#ifndef TRACEPROF_CLI_TRIGGER_H
#define TRACEPROF_CLI_TRIGGER_H

#include <stdio.h>

#include <jansson.h>

#include "manifest.h"
#include "manifest_dir.h"
#include "traceprof/kube.h"
#include "traceprof/trigger_spec.h"

#define TRIG_GROUP_PREFIX "/apis/traceprof.dev/v1alpha1"
#define TRIG_PLURAL	  "traceprofiletriggers"
#define TRIG_STATUS_FILE  ".traceprof-status.json"

enum trig_out { OUT_TEXT, OUT_JSON, OUT_NAME };

/* The command line, parsed. */
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
	/* the spec's flags: spec[i] for trigger_spec_fields[i], NULL when not given */
	const char *spec[TRIGGER_SPEC_N_FIELDS];
};

/* A cluster connection, or nothing (directory mode). */
struct trig_kube {
	struct kube_config *cfg;
	struct kube_client *client;
};

/* A local triggers directory, read as the controller reads it. */
struct dir_state {
	struct manifest_dir dir; /* the directory's files (the controller's reader) */
	struct manifest_list m;	 /* every valid trigger of the directory */
	json_t *status;		 /* the controller's status file, or NULL */
	char status_path[4096];
};

/* trigger_store.c: the cluster */
int trig_kube_open(const struct trig_opts *o, struct trig_kube *k);
void trig_kube_close(struct trig_kube *k);
int trig_kube_fail(struct trig_kube *k, const struct kube_response *r, int rc, const char *what);
int trig_path(char *buf, size_t len, const char *ns, const char *name);
/* trigger_store.c: a triggers directory */
int trig_dir_load(const struct trig_opts *o, struct dir_state *d);
void trig_dir_free(struct dir_state *d);
long trig_dir_find(const struct dir_state *d, const char *ns, const char *name);
/* The path of a trigger's file (t->file is its name in messages). */
void trig_dir_path(const struct trig_opts *o, const struct dir_state *d,
		   const struct manifest_trigger *t, char *buf, size_t len);

/* trigger_view.c: one JSON view of a trigger, whatever its source */
json_t *trig_view_from_object(const json_t *obj);
json_t *trig_view_from_manifest(const struct dir_state *d, const struct manifest_trigger *t,
				const char *path);
void trig_print_list(FILE *f, const json_t *views, int all_ns);
void trig_print_one(FILE *f, const json_t *v);
int trig_print_json(const json_t *v);
const char *trig_vstr(const json_t *v, const char *key, const char *dflt);

/* the subcommands */
int trig_create(const struct trig_opts *o, const char *name, const char *ns, struct trig_kube *k);
int trig_list(const struct trig_opts *o, const char *ns, struct trig_kube *k);
int trig_get(const struct trig_opts *o, const char *ns, const char *name, struct trig_kube *k);
int trig_delete(const struct trig_opts *o, const char *ns, const char *name, struct trig_kube *k);

#endif
