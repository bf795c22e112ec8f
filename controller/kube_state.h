/*
 * kube_state.h - what the files of the Kubernetes mode share (kube_mode.c,
 * kube_sync.c, kube_status.c): the keys, the API paths, the mode's state
 * (one struct kstate, owned by kube_mode_run) and the functions each file
 * offers the others. Private to the controller.
 */
#ifndef TRACEPROF_CONTROLLER_KUBE_STATE_H
#define TRACEPROF_CONTROLLER_KUBE_STATE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "common.h"
#include "health.h"
#include "kube_mode.h"
#include "manifest.h"
#include "traceprof/kube.h"
#include "triggers_db.h"

#define TRIGGERS_PREFIX "/apis/traceprof.dev/v1alpha1"
#define TRIGGERS_PLURAL "traceprofiletriggers"
#define KEY_SYNC	":sync"
#define KEY_RESYNC	":resync"
#define ID_UID_CHARS	8 /* uid characters in a trigger id */

struct kagent {
	struct ctl_agent a; /* channel and last status */
	struct ctl_set set; /* the desired set for its node */
	bool seen;	    /* found in the current pass */
};

/* Counters of the status writers (kube_writer.c). */
struct kwriter_stats {
	uint64_t queued;    /* writes handed over */
	uint64_t coalesced; /* replaced by a newer one, or equal to the one in flight */
	uint64_t dropped;   /* refused: too many keys waiting (retried with backoff) */
	uint64_t written;   /* PUTs that landed */
	uint64_t unchanged; /* the object already had the status, or was gone */
	uint64_t failed;    /* failed writes (retried with backoff) */
};

struct kwriter;

struct kstate {
	const struct kube_mode_config *cfg;	    /* flags */
	struct kube_config *kc;			    /* API server and credentials */
	struct kube_client *client;		    /* the main thread's client (GETs) */
	struct kwriter *writer;			    /* status writes and their events */
	struct kube_informer *triggers;		    /* every TraceProfileTrigger */
	struct kube_informer *pods;		    /* every pod */
	struct kube_informer *agent_pods;	    /* the agents' pods, or NULL */
	struct kube_workqueue *q;		    /* keys to reconcile */
	struct kube_leader *leader;		    /* NULL without leader election */
	struct kube_events *events;		    /* Events on transitions */
	atomic_int leading;			    /* this replica acts */
	atomic_int need_term;			    /* took the Lease: take a new term */
	atomic_ullong term;			    /* its term (fencing token); 0: none */
	struct ctl_db db;			    /* the database */
	struct trigger_rows rows;		    /* rows of the last pass that reached it */
	bool rows_loaded;			    /* the table was read at least once */
	struct kagent agents[KUBE_MODE_MAX_AGENTS]; /* one per node */
	size_t n_agents;			    /* entries of agents */
	char agent_namespace[256];		    /* where the agent pods are */
	const char *lease_namespace;		    /* where the Lease is */
	struct health *health;			    /* --health-addr server, or NULL */
	atomic_llong loop_ms;			    /* monotonic ms: the worker took a key */
	atomic_size_t n_agents_seen;		    /* n_agents, for the health thread */
	atomic_int db_ok;			    /* the last pass reached the database */
	pthread_mutex_t db_error_lock;		    /* guards db_error */
	char db_error[320];			    /* why not, while !db_ok */
};

/* kube_mode.c: objects and the write guard */
bool kmode_may_act(struct kstate *s);
const char *kmode_str_at(const json_t *obj, const char *a, const char *b);
void kmode_trigger_id(const json_t *obj, char *out, size_t len);
int kmode_validate(const json_t *obj, struct manifest_trigger *t, char *err, size_t errlen);

/* kube_sync.c: pod selection, the agents and the :sync pass */
json_t *kmode_selected_pods(struct kstate *s, const json_t *obj, json_t **containers);
void kmode_sync_pass(struct kstate *s);

/* kube_status.c: one trigger's status and events */
int kmode_reconcile(struct kstate *s, const char *key);
int kmode_status_rebase(const json_t *obj, const json_t *fresh, json_t **status);
void kmode_status_events(struct kstate *s, const json_t *obj, const json_t *old, const json_t *now);

/* kube_writer.c: status writes on worker threads */
struct kwriter *kwriter_start(struct kstate *s, int workers, char *err, size_t errlen);
int kwriter_submit(struct kwriter *w, const char *key, const char *path, json_t *obj,
		   const json_t *base);
void kwriter_get_stats(struct kwriter *w, struct kwriter_stats *st);
void kwriter_stop(struct kwriter *w);

#endif
