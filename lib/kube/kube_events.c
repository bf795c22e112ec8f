/*
 * kube_events.c - core/v1 Events about objects, and the status update
 * helper.
 *
 * Events: the same (object, type, reason, message) within the window (10
 * minutes) is sent as a merge PATCH of the existing Event's count and
 * lastTimestamp instead of a new Event, like client-go's event correlator.
 * The aggregation cache is bounded (4096 entries by default, least
 * recently used dropped): a chained hash table plus a doubly linked LRU
 * list.
 *
 * Emitting never waits on the API server: kube_event_emit formats the
 * event into a bounded queue (EVENTS_QUEUE; past it the new event is
 * dropped and counted) and returns. One sender thread per emitter, with
 * its own client, aggregates and sends them. A send that fails in a way a
 * retry can fix (no answer, 429, 5xx, after the client's own Retry-After
 * waits) is queued again after a jittered backoff (1 s doubling to 16 s),
 * at most EVENT_TRIES times in all, like client-go's recorder; then it is
 * counted as failed and logged. Other refusals (422, 403) fail at once.
 *
 * Status: kube_update_status PUTs the object's /status with the
 * resourceVersion it was read at; a 409 re-reads the object and asks the
 * caller to compute the status again from what is there now (or to say
 * that what is there already is what it would write: no write).
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kube_internal.h"
#include "traceprof/kube.h"
#include "traceprof/log.h"

#define MESSAGE_MAX  1024
#define BUCKETS	     4096
#define EVENTS_QUEUE 256 /* events waiting to be sent */
#define EVENT_TRIES  5	 /* sends of one event, the first included */
#define RETRY_MIN_MS 1000
#define RETRY_MAX_MS 16000

/* One event waiting to be sent (its strings owned). */
struct pending {
	struct pending *next;	    /* queue order */
	struct kube_object_ref ref; /* the object, strings strdup'd */
	char type[16];		    /* Normal or Warning */
	char reason[128];	    /* CamelCase */
	char *msg;		    /* the message, cut to MESSAGE_MAX */
	char now[32];		    /* when emitted (Time) */
	int tries;		    /* sends so far */
	int64_t not_before;	    /* monotonic ms: no send before */
};

struct ev_entry {
	struct ev_entry *hnext;	      /* hash chain */
	struct ev_entry *prev, *next; /* LRU list, most recent first */
	uint64_t hash;		      /* of the identity */
	char *identity;		      /* uid/kind/ns/name/type/reason/message */
	char ns[256];		      /* namespace of the Event */
	char name[256];		      /* name of the Event */
	int count;		      /* count written last */
	char first[32];		      /* firstTimestamp */
	int64_t first_ms;	      /* when created (monotonic) */
};

struct kube_events {
	struct kube_events_opts o;	   /* options with defaults */
	char *component, *instance;	   /* copies */
	struct kube_client *client;	   /* the sender thread's */
	pthread_mutex_t lock;		   /* the queue, stop, busy, stats */
	pthread_cond_t cond;		   /* queue changed, stop, idle */
	pthread_t thread;		   /* the sender */
	bool stop;			   /* kube_events_free began */
	bool busy;			   /* the sender holds an event */
	struct pending *qhead, *qtail;	   /* events to send */
	size_t qlen;			   /* how many */
	struct ev_entry *buckets[BUCKETS]; /* identity -> entry (sender thread only) */
	struct ev_entry *head, *tail;	   /* LRU (sender thread only) */
	size_t n;			   /* entries */
	struct kube_events_stats stats;	   /* counters, under lock */
	volatile int abort;		   /* ends a send in progress at free */
};

static uint64_t fnv(const char *s)
{
	uint64_t h = 1469598103934665603ULL;

	while (*s)
		h = (h ^ (unsigned char)*s++) * 1099511628211ULL;
	return h;
}

static void lru_unlink(struct kube_events *ev, struct ev_entry *e)
{
	if (e->prev)
		e->prev->next = e->next;
	else
		ev->head = e->next;
	if (e->next)
		e->next->prev = e->prev;
	else
		ev->tail = e->prev;
	e->prev = e->next = NULL;
}

static void lru_front(struct kube_events *ev, struct ev_entry *e)
{
	e->next = ev->head;
	e->prev = NULL;
	if (ev->head)
		ev->head->prev = e;
	ev->head = e;
	if (!ev->tail)
		ev->tail = e;
}

static void entry_drop(struct kube_events *ev, struct ev_entry *e)
{
	struct ev_entry **pp;

	for (pp = &ev->buckets[e->hash % BUCKETS]; *pp; pp = &(*pp)->hnext) {
		if (*pp == e) {
			*pp = e->hnext;
			break;
		}
	}
	lru_unlink(ev, e);
	ev->n--;
	free(e->identity);
	free(e);
}

static struct ev_entry *entry_find(struct kube_events *ev, const char *id, uint64_t h)
{
	for (struct ev_entry *e = ev->buckets[h % BUCKETS]; e; e = e->hnext)
		if (e->hash == h && strcmp(e->identity, id) == 0)
			return e;
	return NULL;
}

static void pending_free(struct pending *p)
{
	if (!p)
		return;
	free((char *)p->ref.api_version);
	free((char *)p->ref.kind);
	free((char *)p->ref.namespace);
	free((char *)p->ref.name);
	free((char *)p->ref.uid);
	free((char *)p->ref.resource_version);
	free(p->msg);
	free(p);
}

/* Cuts s to at most max bytes without splitting a UTF-8 sequence. */
static void utf8_truncate(char *s, size_t max)
{
	size_t n = strlen(s);

	if (n <= max)
		return;
	n = max;
	while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
		n--;
	s[n] = '\0';
}

/* Whether an answer (or no answer) is worth sending again. */
static int send_rc(int rc, const struct kube_response *r)
{
	if (rc == -EINVAL || rc == -ENOMEM)
		return rc;
	if (rc || r->http_status == 429 || r->http_status >= 500)
		return -EAGAIN;
	return -EIO;
}

/* PATCHes count and lastTimestamp; 0, -ENOENT (the Event is gone), -EAGAIN or -errno. */
static int bump(struct kube_events *ev, struct ev_entry *e, const char *now)
{
	char path[1024];
	struct kube_response r;
	json_t *patch;
	int rc;

	if (kube_path(path, sizeof(path), "/api/v1", e->ns, "events", e->name, NULL))
		return -EINVAL;
	patch = json_pack("{s:i, s:s}", "count", e->count + 1, "lastTimestamp", now);
	rc = kube_request(ev->client, KUBE_PATCH_MERGE, path, patch, &r);
	json_decref(patch);
	if (!rc && r.http_status == 200)
		e->count++;
	else if (!rc && kube_is_not_found(&r))
		rc = -ENOENT;
	else
		rc = send_rc(rc, &r);
	if (rc && rc != -ENOENT)
		log_warn("kube: event update failed event=%s/%s status=%ld error=\"%s%s\"", e->ns,
			 e->name, r.http_status, r.error, r.status.message);
	kube_response_clear(&r);
	return rc;
}

static int create(struct kube_events *ev, struct ev_entry *e, const struct pending *p)
{
	const struct kube_object_ref *obj = &p->ref;
	char path[1024];
	struct kube_response r;
	struct timespec ts;
	json_t *io, *body;
	int rc;

	clock_gettime(CLOCK_REALTIME, &ts);
	snprintf(e->name, sizeof(e->name), "%.200s.%llx", obj->name,
		 (unsigned long long)ts.tv_sec * 1000000000ULL + (unsigned long long)ts.tv_nsec);
	if (kube_path(path, sizeof(path), "/api/v1", e->ns, "events", NULL, NULL))
		return -EINVAL;
	io = json_pack("{s:s, s:s}", "kind", obj->kind ? obj->kind : "", "name", obj->name);
	if (obj->api_version)
		json_object_set_new(io, "apiVersion", json_string(obj->api_version));
	if (obj->namespace)
		json_object_set_new(io, "namespace", json_string(obj->namespace));
	if (obj->uid)
		json_object_set_new(io, "uid", json_string(obj->uid));
	if (obj->resource_version)
		json_object_set_new(io, "resourceVersion", json_string(obj->resource_version));
	body =
	    json_pack("{s:s, s:s, s:{s:s, s:s}, s:o, s:s, s:s, s:s, s:{s:s, s:s}, s:s, s:s, "
		      "s:s, s:s, s:i}",
		      "apiVersion", "v1", "kind", "Event", "metadata", "name", e->name, "namespace",
		      e->ns, "involvedObject", io, "type", p->type, "reason", p->reason, "message",
		      p->msg, "source", "component", ev->component, "host", ev->instance,
		      "reportingComponent", ev->component, "reportingInstance", ev->instance,
		      "firstTimestamp", p->now, "lastTimestamp", p->now, "count", 1);
	if (!body)
		return -ENOMEM;
	rc = kube_request(ev->client, KUBE_POST, path, body, &r);
	json_decref(body);
	if (!rc && r.http_status == 201) {
		e->count = 1;
		snprintf(e->first, sizeof(e->first), "%s", p->now);
		e->first_ms = kube_mono_ms();
	} else {
		log_warn("kube: event not recorded object=%s/%s reason=%s status=%ld "
			 "error=\"%s%s\"",
			 e->ns, obj->name, p->reason, r.http_status, r.error, r.status.message);
		rc = send_rc(rc, &r);
	}
	kube_response_clear(&r);
	return rc;
}

/*
 * Sends one event (sender thread): a repeat within the window bumps the
 * Event's count, else a new Event. 0 (*aggregated set for a bump), or
 * -EAGAIN (worth another try) or another -errno.
 */
static int send_one(struct kube_events *ev, const struct pending *p, bool *aggregated)
{
	const struct kube_object_ref *obj = &p->ref;
	struct ev_entry *e;
	char *id = NULL;
	uint64_t h;
	int rc;

	*aggregated = false;
	if (asprintf(&id, "%s\x1f%s\x1f%s\x1f%s\x1f%s\x1f%s\x1f%s", obj->uid ? obj->uid : "",
		     obj->kind ? obj->kind : "", obj->namespace ? obj->namespace : "", obj->name,
		     p->type, p->reason, p->msg) < 0)
		return -ENOMEM;
	h = fnv(id);
	e = entry_find(ev, id, h);
	if (e && kube_mono_ms() - e->first_ms < ev->o.window_ms) {
		free(id);
		lru_unlink(ev, e);
		lru_front(ev, e);
		rc = bump(ev, e, p->now);
		if (rc != -ENOENT) {
			*aggregated = rc == 0;
			return rc;
		}
		/* The Event expired on the server: record a new one. */
		return create(ev, e, p);
	}
	if (e)
		entry_drop(ev, e); /* older than the window: start again */
	e = calloc(1, sizeof(*e));
	if (!e) {
		free(id);
		return -ENOMEM;
	}
	e->identity = id;
	e->hash = h;
	snprintf(e->ns, sizeof(e->ns), "%s", obj->namespace ? obj->namespace : "default");
	rc = create(ev, e, p);
	if (rc) {
		free(e->identity);
		free(e);
		return rc;
	}
	e->hnext = ev->buckets[h % BUCKETS];
	ev->buckets[h % BUCKETS] = e;
	lru_front(ev, e);
	ev->n++;
	while (ev->n > ev->o.cache_size)
		entry_drop(ev, ev->tail);
	return 0;
}

/* The first event that may be sent now, unlinked; else NULL and *wait_ms. Under lock. */
static struct pending *take_ready(struct kube_events *ev, long *wait_ms)
{
	int64_t now = kube_mono_ms(), soonest = INT64_MAX;

	for (struct pending **pp = &ev->qhead, *prev = NULL; *pp; prev = *pp, pp = &(*pp)->next) {
		struct pending *p = *pp;

		if (p->not_before <= now) {
			*pp = p->next;
			if (ev->qtail == p)
				ev->qtail = prev;
			ev->qlen--;
			p->next = NULL;
			return p;
		}
		if (p->not_before < soonest)
			soonest = p->not_before;
	}
	*wait_ms = soonest == INT64_MAX ? 1000 : (long)(soonest - now);
	return NULL;
}

static void enqueue(struct kube_events *ev, struct pending *p)
{
	if (ev->qtail)
		ev->qtail->next = p;
	else
		ev->qhead = p;
	ev->qtail = p;
	ev->qlen++;
}

static void *sender(void *arg)
{
	struct kube_events *ev = arg;

	pthread_mutex_lock(&ev->lock);
	while (!ev->stop) {
		struct pending *p;
		bool aggregated;
		long wait = 0;
		int rc;

		p = take_ready(ev, &wait);
		if (!p) {
			struct timespec dl;

			kube_deadline(&dl, wait > 0 ? wait : 1);
			pthread_cond_timedwait(&ev->cond, &ev->lock, &dl);
			continue;
		}
		ev->busy = true;
		pthread_mutex_unlock(&ev->lock);
		rc = send_one(ev, p, &aggregated);
		pthread_mutex_lock(&ev->lock);
		ev->busy = false;
		p->tries++;
		if (rc == 0) {
			if (aggregated)
				ev->stats.aggregated++;
			else
				ev->stats.created++;
			pending_free(p);
		} else if (rc == -EAGAIN && p->tries < EVENT_TRIES && !ev->stop) {
			long d = RETRY_MIN_MS << (p->tries - 1);

			d = d > RETRY_MAX_MS ? RETRY_MAX_MS : d;
			p->not_before =
			    kube_mono_ms() + d / 2 + (long)kube_rand((uint64_t)d / 2 + 1);
			enqueue(ev, p);
			ev->stats.retried++;
		} else {
			log_warn("kube: event dropped after %d tries object=%s/%s reason=%s",
				 p->tries, p->ref.namespace ? p->ref.namespace : "", p->ref.name,
				 p->reason);
			ev->stats.failed++;
			pending_free(p);
		}
		pthread_cond_broadcast(&ev->cond);
	}
	pthread_mutex_unlock(&ev->lock);
	return NULL;
}

struct kube_events *kube_events_new(const struct kube_config *cfg,
				    const struct kube_events_opts *opts, char *err, size_t errlen)
{
	struct kube_events *ev = calloc(1, sizeof(*ev));
	pthread_condattr_t ca;
	char host[256];

	if (!ev) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	ev->o = *opts;
	if (!ev->o.cache_size)
		ev->o.cache_size = 4096;
	if (ev->o.window_ms <= 0)
		ev->o.window_ms = 10 * 60 * 1000L;
	if (gethostname(host, sizeof(host)) != 0)
		snprintf(host, sizeof(host), "unknown");
	host[sizeof(host) - 1] = '\0';
	ev->component = strdup(opts->component ? opts->component : "traceprof");
	ev->instance = strdup(opts->instance ? opts->instance : host);
	if (!ev->component || !ev->instance) {
		snprintf(err, errlen, "out of memory");
		goto out_free;
	}
	ev->client = kube_client_new(cfg, &opts->client, err, errlen);
	if (!ev->client)
		goto out_free;
	kube_client_set_abort(ev->client, &ev->abort);
	pthread_mutex_init(&ev->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&ev->cond, &ca);
	pthread_condattr_destroy(&ca);
	if (pthread_create(&ev->thread, NULL, sender, ev) != 0) {
		snprintf(err, errlen, "cannot start the event sender thread");
		pthread_cond_destroy(&ev->cond);
		pthread_mutex_destroy(&ev->lock);
		kube_client_free(ev->client);
		goto out_free;
	}
	return ev;
out_free:
	free(ev->component);
	free(ev->instance);
	free(ev);
	return NULL;
}

int kube_events_flush(struct kube_events *ev, long timeout_ms)
{
	struct timespec dl;
	int rc = 0;

	kube_deadline(&dl, timeout_ms);
	pthread_mutex_lock(&ev->lock);
	while ((ev->qlen || ev->busy) && rc != ETIMEDOUT)
		rc = pthread_cond_timedwait(&ev->cond, &ev->lock, &dl);
	rc = ev->qlen || ev->busy ? -ETIMEDOUT : 0;
	pthread_mutex_unlock(&ev->lock);
	return rc;
}

void kube_events_free(struct kube_events *ev)
{
	bool late;

	if (!ev)
		return;
	late = kube_events_flush(ev, 2000) != 0;
	pthread_mutex_lock(&ev->lock);
	if (late)
		log_warn("kube: %zu events not sent at exit", ev->qlen);
	ev->stop = true;
	ev->abort = 1;
	pthread_cond_broadcast(&ev->cond);
	pthread_mutex_unlock(&ev->lock);
	pthread_join(ev->thread, NULL);
	while (ev->qhead) {
		struct pending *p = ev->qhead;

		ev->qhead = p->next;
		pending_free(p);
	}
	while (ev->head)
		entry_drop(ev, ev->head);
	kube_client_free(ev->client);
	pthread_cond_destroy(&ev->cond);
	pthread_mutex_destroy(&ev->lock);
	free(ev->component);
	free(ev->instance);
	free(ev);
}

void kube_events_get_stats(struct kube_events *ev, struct kube_events_stats *st)
{
	pthread_mutex_lock(&ev->lock);
	*st = ev->stats;
	st->queued = ev->qlen;
	pthread_mutex_unlock(&ev->lock);
}

static char *dup_or_null(const char *s, bool *oom)
{
	char *d = s ? strdup(s) : NULL;

	if (s && !d)
		*oom = true;
	return d;
}

int kube_event_emit(struct kube_events *ev, const struct kube_object_ref *obj, const char *type,
		    const char *reason, const char *fmt, ...)
{
	char msg[MESSAGE_MAX * 2];
	struct pending *p;
	struct timespec ts;
	bool oom = false;
	va_list ap;

	if (!obj || !obj->name || !type || !reason)
		return -EINVAL;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	utf8_truncate(msg, MESSAGE_MAX);
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->ref.api_version = dup_or_null(obj->api_version, &oom);
	p->ref.kind = dup_or_null(obj->kind, &oom);
	p->ref.namespace = dup_or_null(obj->namespace, &oom);
	p->ref.name = dup_or_null(obj->name, &oom);
	p->ref.uid = dup_or_null(obj->uid, &oom);
	p->ref.resource_version = dup_or_null(obj->resource_version, &oom);
	p->msg = dup_or_null(msg, &oom);
	snprintf(p->type, sizeof(p->type), "%s", type);
	snprintf(p->reason, sizeof(p->reason), "%s", reason);
	clock_gettime(CLOCK_REALTIME, &ts);
	kube_format_time(p->now, &ts);
	if (oom) {
		pending_free(p);
		return -ENOMEM;
	}
	pthread_mutex_lock(&ev->lock);
	if (ev->qlen >= EVENTS_QUEUE || ev->stop) {
		ev->stats.dropped++;
		pthread_mutex_unlock(&ev->lock);
		pending_free(p);
		return -ENOBUFS;
	}
	enqueue(ev, p);
	pthread_cond_broadcast(&ev->cond);
	pthread_mutex_unlock(&ev->lock);
	return 0;
}

int kube_update_status(struct kube_client *c, const char *obj_path, const json_t *obj,
		       kube_status_fn fn, void *arg, int max_retries, struct kube_response *resp)
{
	char path[2048];
	struct kube_response local, *r = resp ? resp : &local;
	json_t *cur = json_incref((json_t *)obj);
	int rc = -EAGAIN;

	if ((size_t)snprintf(path, sizeof(path), "%s/status", obj_path) >= sizeof(path)) {
		json_decref(cur);
		return -ENAMETOOLONG;
	}
	if (max_retries <= 0)
		max_retries = 5;
	memset(r, 0, sizeof(*r));
	for (int attempt = 0; attempt <= max_retries; attempt++) {
		json_t *fresh, *status = NULL;

		kube_response_clear(r);
		rc = kube_request(c, KUBE_PUT, path, cur, r);
		if (rc)
			break;
		if (r->http_status == 200 || r->http_status == 201) {
			rc = 0;
			break;
		}
		if (!kube_is_conflict(r)) {
			rc = -EIO;
			break;
		}
		/* Someone wrote first: never overwrite, recompute from what is there. */
		rc = -EAGAIN;
		if (attempt == max_retries)
			break;
		kube_response_clear(r);
		rc = kube_request(c, KUBE_GET, obj_path, NULL, r);
		if (rc)
			break;
		if (r->http_status != 200) {
			rc = -EIO;
			break;
		}
		fresh = json_deep_copy(r->body);
		rc = fresh ? fn(arg, r->body, &status) : -ENOMEM;
		if (rc == KUBE_STATUS_UNCHANGED) {
			json_decref(fresh); /* already there: nothing to write */
			break;
		}
		if (rc != 0 || !status) {
			json_decref(fresh);
			json_decref(status);
			rc = -ECANCELED;
			break;
		}
		json_object_set_new(fresh, "status", status);
		json_decref(cur);
		cur = fresh;
		rc = -EAGAIN;
	}
	json_decref(cur);
	if (!resp)
		kube_response_clear(&local);
	return rc;
}
