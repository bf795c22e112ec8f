/*
 * triggers_db.h - the controller's side of traceprof.trace_profile_triggers.
 *
 * One transaction per reconcile pass brings the table in line with the
 * manifests on disk: a new (namespace, name) gets a fresh trigger id and an
 * Active row, a changed spec updates its row in place (same id, progress
 * kept), a manifest that is gone ends its row (Failed, 'manifest removed'),
 * at most 3 Active triggers per service (later ones, by first-seen time,
 * Rejected), then traceprof.expire_triggers(). A row whose reason ends in
 * 'manifest removed' is detached: a manifest with the same name later is a
 * new trigger. A manifest that carries its own id (Kubernetes: from the
 * object's uid) keeps it; a row of the same name with another id is ended
 * as removed (the object was deleted and created again).
 */
#ifndef TRACEPROF_CONTROLLER_TRIGGERS_DB_H
#define TRACEPROF_CONTROLLER_TRIGGERS_DB_H

#include <stdbool.h>
#include <stdint.h>

#include <libpq-fe.h>

#include "manifest.h"

#define TRIGGERS_PER_SERVICE 3

struct trigger_row {
	char *id;	     /* trigger_id: namespace/name/8 hex digits */
	char *namespace_;    /* metadata.namespace */
	char *name;	     /* metadata.name */
	char *service;	     /* spec.service ("" when none) */
	char *spec;	     /* the spec as JSON text */
	char *phase;	     /* Pending, Active, Completed, Expired, Rejected, Failed */
	char *reason;	     /* why, "" when none */
	int frequency_hz;    /* sampling frequency */
	int max_requests;    /* requests to collect */
	int collected;	     /* requests collected so far */
	char *trace_ids;     /* the collected trace ids, 32 hex digits each, comma separated */
	int64_t deadline_ms; /* deadline, Unix milliseconds */
	char *deadline;	     /* deadline, ISO 8601 UTC */
	char *started;	     /* started_at, ISO 8601 UTC ("" when none) */
	char *completed;     /* completed_at, ISO 8601 UTC ("" when none) */
};

struct trigger_rows {
	struct trigger_row *v; /* the rows, by namespace and name */
	size_t n;	       /* how many */
};

/*
 * Before a row is ended as removed: true only when a fresh read of the
 * source (not a cache) confirms that the object (namespace, name) whose
 * trigger id is id is gone; any doubt is false and the row stays.
 */
typedef bool (*triggers_db_gone_fn)(void *arg, const char *ns, const char *name, const char *id);

struct triggers_db_fence {
	uint64_t term;		  /* the leader's term (controller_take_term); 0: unfenced */
	triggers_db_gone_fn gone; /* confirms removals, or NULL: the manifests are the truth */
	void *arg;		  /* its argument */
	uint64_t newer;		  /* on -ESTALE: the current term, a newer leader's */
};

/*
 * One reconcile pass over the table for the manifests in m (inside one
 * transaction). Rows named by an error of m (an invalid manifest with a
 * readable name) are left as they are; removals happen only when
 * allow_removals (every file of the directory could be read) and, with
 * fence->gone, only once it confirms the object is gone. With
 * fence->term, the pass first checks (FOR SHARE) that the term is still
 * the current one and writes nothing when a newer leader took one
 * (-ESTALE, fence->newer set). fence may be NULL. Returns 0, -ESTALE, or
 * -EIO with the database's message logged.
 */
int triggers_db_sync(PGconn *conn, const struct manifest_list *m, bool allow_removals,
		     struct triggers_db_fence *fence);
/*
 * Takes a new term for identity (controller_take_term) into *term.
 * Returns 0 or -EIO (logged).
 */
int triggers_db_take_term(PGconn *conn, const char *identity, uint64_t *term);
/* The current (not detached) rows; the caller frees them with trigger_rows_free(). */
int triggers_db_load(PGconn *conn, struct trigger_rows *out);
/* An Active row turns Rejected with reason (an agent refused it). */
int triggers_db_reject(PGconn *conn, const char *id, const char *reason);
void trigger_rows_free(struct trigger_rows *r);

#endif
