/*
 * kube.h - a small client of the Kubernetes API (libtraceprof_kube).
 *
 * Used by the controller (TraceProfileTrigger, status, events, leader
 * election) and by the agent (the pods of its node). JSON over HTTPS/1.1
 * with libcurl; objects are jansson values. Pieces:
 *
 *   kube_config_*      where the API server is and how to authenticate
 *   kube_client_*      one connection; kube_request() does one call
 *   kube_informer_*    LIST + WATCH into a cache, handlers on its thread
 *   kube_workqueue_*   keys to reconcile, deduplicated, per-key backoff
 *   kube_leader_*      Lease-based leader election
 *   kube_events_*      core/v1 Events, repeated ones aggregated
 *   kube_update_status PUT .../status, re-read and recompute on 409
 *
 * Functions returning int give 0 or -errno; functions returning a pointer
 * give NULL and a message in the caller's err buffer. Threads: a client is
 * used by one thread at a time; informers, work queues, leader electors and
 * event emitters are thread-safe. No global state except libcurl's global
 * init, done once (pthread_once) by the first client. Design notes:
 * docs/kube-client.md.
 */
#ifndef TRACEPROF_KUBE_H
#define TRACEPROF_KUBE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <jansson.h>

/* ---- configuration ---------------------------------------------------- */

struct kube_config {
	char *source;	       /* the kubeconfig path, or "in-cluster" */
	char *context;	       /* the context used (NULL in-cluster) */
	char *user;	       /* the kubeconfig user name (NULL in-cluster) */
	char *server;	       /* "https://host:port" without a trailing slash */
	char *ca_file;	       /* CA bundle path, or NULL */
	char *ca_data;	       /* CA bundle PEM bytes (decoded), or NULL */
	size_t ca_data_len;    /* bytes in ca_data */
	char *tls_server_name; /* name checked in the server's certificate, or NULL */
	bool insecure;	       /* skip TLS verification (only when allowed) */
	char *token;	       /* static bearer token, or NULL */
	char *token_file;      /* bearer token re-read when it changes, or NULL */
	char *cert_file;       /* client certificate path, or NULL */
	char *cert_data;       /* client certificate PEM bytes, or NULL */
	size_t cert_data_len;  /* bytes in cert_data */
	char *key_file;	       /* client key path, or NULL */
	char *key_data;	       /* client key PEM bytes, or NULL */
	size_t key_data_len;   /* bytes in key_data */
	char *namespace;       /* the context's namespace, "default" if unset */
};

struct kube_config_opts {
	const char *path;    /* kubeconfig; NULL: $KUBECONFIG's first entry, else ~/.kube/config */
	const char *context; /* NULL: current-context */
	bool allow_insecure; /* honour insecure-skip-tls-verify (else it is an error) */
};

/*
 * Reads a kubeconfig. On success *out is a new config (the caller frees it
 * with kube_config_free); on failure -errno and a message in err naming the
 * file and the field. Relative paths are resolved against the kubeconfig's
 * directory. exec and auth-provider users are refused (-ENOTSUP).
 */
int kube_config_load(const struct kube_config_opts *opts, struct kube_config **out, char *err,
		     size_t errlen);
/*
 * The in-cluster config: KUBERNETES_SERVICE_HOST/_PORT and the service
 * account's token, ca.crt and namespace in sa_dir (NULL: the standard
 * /var/run/secrets/kubernetes.io/serviceaccount).
 */
int kube_config_in_cluster(const char *sa_dir, struct kube_config **out, char *err, size_t errlen);
/* A deep copy (the caller frees it), NULL on ENOMEM. */
struct kube_config *kube_config_dup(const struct kube_config *cfg);
void kube_config_free(struct kube_config *cfg);

/* ---- client and requests ---------------------------------------------- */

struct kube_client_opts {
	const char *user_agent; /* NULL: "traceprof/VERSION" */
	long timeout_ms;	/* whole request; 0: 30000 */
	size_t max_response;	/* body bytes; 0: 64 MiB; more is an error */
	long retry_wait_ms;	/* most time one call waits for 429/503 answers (their
				   Retry-After, else a jittered backoff); 0: 10000; -1: no wait */
};

enum kube_method {
	KUBE_GET,
	KUBE_POST,
	KUBE_PUT,
	KUBE_PATCH_MERGE,     /* application/merge-patch+json */
	KUBE_PATCH_JSON,      /* application/json-patch+json */
	KUBE_PATCH_STRATEGIC, /* application/strategic-merge-patch+json */
	KUBE_DELETE,
};

/* The decoded metav1.Status of a failed call. */
struct kube_status {
	long code;	   /* Status.code (or the HTTP status when the body had none) */
	char reason[64];   /* e.g. "NotFound", "Conflict", "AlreadyExists", "Expired" */
	char message[512]; /* Status.message, truncated */
	json_t *causes;	   /* details.causes (new reference) or NULL */
};

struct kube_response {
	long http_status;	   /* 0 when no response arrived */
	json_t *body;		   /* decoded body (new reference) or NULL */
	struct kube_status status; /* filled when http_status is not 2xx */
	char error[256];	   /* transport or decoding error, "" if none */
};

struct kube_client;

/*
 * A client for cfg (borrowed: it must outlive the client). One libcurl easy
 * handle, kept alive between calls. Not thread-safe: one thread at a time.
 */
struct kube_client *kube_client_new(const struct kube_config *cfg,
				    const struct kube_client_opts *opts, char *err, size_t errlen);
void kube_client_free(struct kube_client *c);
/*
 * A flag that aborts a call in progress within about a second once it is
 * non-zero (an informer's or elector's stop flag). Borrowed.
 */
void kube_client_set_abort(struct kube_client *c, const volatile int *flag);
/* Requests this client sent again after a 429 or 503 answer. */
uint64_t kube_client_retries(const struct kube_client *c);

/*
 * One call. path includes the query ("/api/v1/namespaces/a/pods?limit=5");
 * body is borrowed (NULL for none). Returns 0 when the server answered
 * (whatever the status: check resp->http_status), -errno when it did not
 * or the answer was unusable: -ETIMEDOUT, -ECONNREFUSED, -EFBIG (over
 * max_response), -EPROTO (not JSON), -ECANCELED (aborted), -EAGAIN (the
 * server's Retry-After has not passed and is longer than the call may
 * wait); resp->error says why. 429 and 503 answers are tried again first
 * (their Retry-After honoured, within retry_wait_ms). The caller clears
 * resp with kube_response_clear.
 */
int kube_request(struct kube_client *c, enum kube_method method, const char *path,
		 const json_t *body, struct kube_response *resp);
void kube_response_clear(struct kube_response *resp);

/* What a failed call means (false on success). */
bool kube_is_not_found(const struct kube_response *r);	    /* 404 */
bool kube_is_conflict(const struct kube_response *r);	    /* 409 Conflict (stale version) */
bool kube_is_already_exists(const struct kube_response *r); /* 409 AlreadyExists */
bool kube_is_gone(const struct kube_response *r);	    /* 410 Expired / Gone */
bool kube_is_invalid(const struct kube_response *r);	    /* 422 Invalid */
bool kube_is_unauthorized(const struct kube_response *r);   /* 401 */
bool kube_is_forbidden(const struct kube_response *r);	    /* 403 */

/*
 * Resource paths: prefix is "/api/v1" or "/apis/GROUP/VERSION"; namespace,
 * name and subresource may be NULL. Writes into buf; -ENAMETOOLONG when it
 * does not fit, -EINVAL for a segment with '/' or an empty one.
 */
int kube_path(char *buf, size_t len, const char *prefix, const char *namespace, const char *plural,
	      const char *name, const char *subresource);
/* Appends "?key=value" or "&key=value", value URL-escaped. */
int kube_query_add(char *buf, size_t len, const char *key, const char *value);

/* ---- informer --------------------------------------------------------- */

struct kube_informer_handlers {
	/* Called on the informer's thread; the objects are borrowed and must
	 * not be modified. Any may be NULL. */
	void (*add)(void *arg, const json_t *obj);
	void (*update)(void *arg, const json_t *old_obj, const json_t *new_obj);
	void (*del)(void *arg, const json_t *last_known);
	void *arg; /* passed to every handler */
};

struct kube_informer_opts {
	const char *path; /* collection, e.g. "/api/v1/pods" or ".../namespaces/ns/pods" */
	const char *label_selector; /* or NULL */
	const char *field_selector; /* or NULL, e.g. "spec.nodeName=node-1" */
	int page_size;		    /* LIST limit; 0: 500 */
	int watch_min_s;	    /* watch timeoutSeconds drawn from [min,max]; 0: 300 */
	int watch_max_s;	    /* 0: 600 */
	size_t max_line;	    /* longest watch event; 0: 16 MiB */
	struct kube_informer_handlers handlers;
	struct kube_client_opts client; /* for the informer's own client */
};

struct kube_informer_stats {
	uint64_t lists;	     /* complete LISTs (first and relists) */
	uint64_t relists;    /* LISTs after a 410 or an oversized event */
	uint64_t watches;    /* WATCH requests started */
	uint64_t events;     /* ADDED/MODIFIED/DELETED applied */
	uint64_t bookmarks;  /* BOOKMARK events */
	uint64_t errors;     /* failed requests and ERROR events */
	uint64_t reconnects; /* waits before retrying after an error */
	uint64_t watch_ends; /* watches the server ended after they were open (re-opened at once) */
	uint64_t short_watches; /* watches that ended within a second with no event (backed off) */
	char resource_version[64]; /* the last resourceVersion seen */
	int64_t failing_ms;	   /* how long every list or watch has failed; 0: healthy */
	char last_error[160];	   /* what failed last */
};

struct kube_informer;

/* Starts the informer thread (its own client on cfg, borrowed). */
struct kube_informer *kube_informer_start(const struct kube_config *cfg,
					  const struct kube_informer_opts *opts, char *err,
					  size_t errlen);
/* Stops the thread (within about a second) and frees everything. */
void kube_informer_stop(struct kube_informer *inf);
/* True once the first LIST has been delivered. */
bool kube_informer_has_synced(struct kube_informer *inf);
/* Waits up to timeout_ms for has_synced. */
bool kube_informer_wait_synced(struct kube_informer *inf, long timeout_ms);
/* The cached object for "namespace/name" (or "name"): a new reference, or
 * NULL. Cached objects are shared: read them, never modify them. */
json_t *kube_informer_get(struct kube_informer *inf, const char *key);
/* Every cached object as a new array (the caller decrefs it). */
json_t *kube_informer_list(struct kube_informer *inf);
void kube_informer_get_stats(struct kube_informer *inf, struct kube_informer_stats *st);
/* "namespace/name" or "name" of obj into buf; -EINVAL without a name. */
int kube_object_key(const json_t *obj, char *buf, size_t len);

/* ---- work queue ------------------------------------------------------- */

struct kube_workqueue;

struct kube_workqueue *kube_workqueue_new(void);
/* Shuts down (if not yet) and frees; no thread may still use the queue. */
void kube_workqueue_free(struct kube_workqueue *q);
/* Adds key (copied). A key already waiting is not added twice; a key being
 * processed comes back after kube_workqueue_done. Ignored after shutdown. */
int kube_workqueue_add(struct kube_workqueue *q, const char *key);
/* Adds key after delay_ms (an earlier pending delay for it wins). */
int kube_workqueue_add_after(struct kube_workqueue *q, const char *key, long delay_ms);
/* Adds key after its backoff: 5 ms * 2^failures, at most 1000 s. */
int kube_workqueue_add_rate_limited(struct kube_workqueue *q, const char *key);
/* Resets the backoff of key. */
void kube_workqueue_forget(struct kube_workqueue *q, const char *key);
/* Failures counted for key since the last forget. */
int kube_workqueue_num_requeues(struct kube_workqueue *q, const char *key);
/*
 * Blocks until a key is ready; *key points to the queue's copy, valid until
 * kube_workqueue_done(q, *key). Returns -ESHUTDOWN once the queue is shut
 * down and empty.
 */
int kube_workqueue_get(struct kube_workqueue *q, const char **key);
void kube_workqueue_done(struct kube_workqueue *q, const char *key);
/* Wakes every waiter; later adds are ignored. */
void kube_workqueue_shutdown(struct kube_workqueue *q);
/* Keys ready to be handed out (not counting delayed or in-process ones). */
size_t kube_workqueue_len(struct kube_workqueue *q);

/* ---- leader election -------------------------------------------------- */

struct kube_leader_opts {
	const char *namespace;	/* of the Lease */
	const char *name;	/* of the Lease */
	const char *identity;	/* NULL: "hostname_pid" */
	long lease_duration_ms; /* 0: 15000 */
	long renew_deadline_ms; /* 0: 10000 */
	long retry_period_ms;	/* 0: 2000 */
	bool no_release;	/* do not release the Lease on stop */
	long wall_offset_s;	/* tests only: added to the wall clock written (a skewed node) */
	void (*started_leading)(void *arg);
	void (*stopped_leading)(void *arg);
	void (*new_leader)(void *arg, const char *identity); /* "" when released */
	void *arg;
	struct kube_client_opts client;
};

struct kube_leader_stats {
	uint64_t acquired;  /* times this elector became leader */
	uint64_t renewals;  /* successful renewals */
	uint64_t conflicts; /* writes refused with 409 */
	uint64_t errors;    /* other failed calls */
};

struct kube_leader;

/* Starts campaigning on its own thread (cfg borrowed). */
struct kube_leader *kube_leader_start(const struct kube_config *cfg,
				      const struct kube_leader_opts *opts, char *err,
				      size_t errlen);
bool kube_leader_is_leader(struct kube_leader *l);
/*
 * True while leading and the last successful renewal round began less than
 * the renew deadline ago (this process's monotonic clock): call it right
 * before every write made as leader. After a freeze past the Lease it is
 * false at once, before the elector's next round notices the loss.
 */
bool kube_leader_may_act(struct kube_leader *l);
/* The identity in use (valid until stop). */
const char *kube_leader_identity(struct kube_leader *l);
void kube_leader_get_stats(struct kube_leader *l, struct kube_leader_stats *st);
/* Stops (releasing the Lease when leading unless no_release) and frees. */
void kube_leader_stop(struct kube_leader *l);

/* Time as MicroTime ("2006-01-02T15:04:05.000000Z") or Time (no fraction). */
void kube_format_microtime(char buf[32], const struct timespec *ts);
void kube_format_time(char buf[32], const struct timespec *ts);
/* Parses either form (fraction optional) into *ts. */
int kube_parse_time(const char *s, struct timespec *ts);

/* ---- events ----------------------------------------------------------- */

struct kube_object_ref {
	const char *api_version;      /* e.g. "traceprof.dev/v1alpha1" */
	const char *kind;	      /* e.g. "TraceProfileTrigger" */
	const char *namespace;	      /* NULL for cluster-scoped objects */
	const char *name;	      /* required */
	const char *uid;	      /* or NULL */
	const char *resource_version; /* or NULL */
};

struct kube_events_opts {
	const char *component; /* source.component and reportingComponent */
	const char *instance;  /* reportingInstance; NULL: the host name */
	size_t cache_size;     /* aggregation entries (LRU); 0: 4096 */
	long window_ms;	       /* repeat window; 0: 10 minutes */
	struct kube_client_opts client;
};

struct kube_events_stats {
	uint64_t created;    /* Events created */
	uint64_t aggregated; /* repeats sent as a count PATCH */
	uint64_t retried;    /* sends that failed and were queued again */
	uint64_t failed;     /* events given up on after their tries (logged) */
	uint64_t dropped;    /* events not queued: the queue was full */
	uint64_t queued;     /* events waiting now */
};

struct kube_events;

struct kube_events *kube_events_new(const struct kube_config *cfg,
				    const struct kube_events_opts *opts, char *err, size_t errlen);
void kube_events_free(struct kube_events *ev);
/*
 * Queues an event for the emitter's sender thread and returns at once
 * (never waits on the API server). type is "Normal" or "Warning", reason
 * CamelCase; the message is truncated to 1024 bytes on a UTF-8 boundary.
 * Repeats are aggregated into one Event's count; failed sends are tried
 * again with backoff (5 tries in all). Thread-safe; 0, -ENOBUFS (the queue
 * of 256 is full: dropped and counted) or -errno.
 */
int kube_event_emit(struct kube_events *ev, const struct kube_object_ref *obj, const char *type,
		    const char *reason, const char *fmt, ...) __attribute__((format(printf, 5, 6)));
void kube_events_get_stats(struct kube_events *ev, struct kube_events_stats *st);
/* Waits up to timeout_ms until every queued event was sent or given up; 0 or -ETIMEDOUT. */
int kube_events_flush(struct kube_events *ev, long timeout_ms);

/* ---- status ----------------------------------------------------------- */

/* A kube_status_fn's answer: fresh already holds the status to write. */
#define KUBE_STATUS_UNCHANGED 1

/*
 * Computes the status to write from fresh (the object as the server has it
 * now, borrowed); *status is a new reference. KUBE_STATUS_UNCHANGED: fresh
 * already has it (nothing is written); another non-zero aborts the update.
 */
typedef int (*kube_status_fn)(void *arg, const json_t *fresh, json_t **status);

/*
 * PUTs obj (borrowed, with metadata.resourceVersion and status) to
 * obj_path + "/status". On 409 re-reads obj_path, recomputes the status with
 * fn and tries again, at most max_retries times (0: 5). Returns 0 when
 * written, KUBE_STATUS_UNCHANGED when fn found the fresh object already
 * holding it (resp: that GET), -EAGAIN when every try conflicted,
 * -ECANCELED when fn refused, another -errno otherwise; resp (may be NULL)
 * holds the last answer.
 */
int kube_update_status(struct kube_client *c, const char *obj_path, const json_t *obj,
		       kube_status_fn fn, void *arg, int max_retries, struct kube_response *resp);

#endif
