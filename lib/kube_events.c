/*
 * kube_events.c - core/v1 Events about objects, and the status update
 * helper.
 *
 * Events: the same (object, type, reason, message) within the window (10
 * minutes) is sent as a merge PATCH of the existing Event's count and
 * lastTimestamp instead of a new Event, like client-go's event correlator.
 * The aggregation cache is bounded (4096 entries by default, least
 * recently used dropped): a chained hash table plus a doubly linked LRU
 * list. Emitting is synchronous on the emitter's own client (its timeout is
 * the bound on how long a caller waits once it has the emitter's lock);
 * failures are counted and logged, and never retried.
 *
 * Status: kube_update_status PUTs the object's /status with the
 * resourceVersion it was read at; a 409 re-reads the object and asks the
 * caller to compute the status again from what is there now.
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

#define MESSAGE_MAX 1024
#define BUCKETS	    4096

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
	struct kube_client *client;	   /* under lock */
	pthread_mutex_t lock;		   /* everything */
	struct ev_entry *buckets[BUCKETS]; /* identity -> entry */
	struct ev_entry *head, *tail;	   /* LRU */
	size_t n;			   /* entries */
	struct kube_events_stats stats;	   /* counters */
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

struct kube_events *kube_events_new(const struct kube_config *cfg,
				    const struct kube_events_opts *opts, char *err, size_t errlen)
{
	struct kube_events *ev = calloc(1, sizeof(*ev));
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
	pthread_mutex_init(&ev->lock, NULL);
	return ev;
out_free:
	free(ev->component);
	free(ev->instance);
	free(ev);
	return NULL;
}

void kube_events_free(struct kube_events *ev)
{
	if (!ev)
		return;
	while (ev->head)
		entry_drop(ev, ev->head);
	kube_client_free(ev->client);
	pthread_mutex_destroy(&ev->lock);
	free(ev->component);
	free(ev->instance);
	free(ev);
}

void kube_events_get_stats(struct kube_events *ev, struct kube_events_stats *st)
{
	pthread_mutex_lock(&ev->lock);
	*st = ev->stats;
	pthread_mutex_unlock(&ev->lock);
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

/* PATCHes count and lastTimestamp; 0, -ENOENT (the Event is gone) or -errno. */
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
	else if (!rc)
		rc = -EIO;
	if (rc && rc != -ENOENT)
		log_warn("kube: event update failed event=%s/%s status=%ld error=\"%s%s\"", e->ns,
			 e->name, r.http_status, r.error, r.status.message);
	kube_response_clear(&r);
	return rc;
}

static int create(struct kube_events *ev, struct ev_entry *e, const struct kube_object_ref *obj,
		  const char *type, const char *reason, const char *msg, const char *now)
{
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
	body = json_pack("{s:s, s:s, s:{s:s, s:s}, s:o, s:s, s:s, s:s, s:{s:s, s:s}, s:s, s:s, "
			 "s:s, s:s, s:i}",
			 "apiVersion", "v1", "kind", "Event", "metadata", "name", e->name,
			 "namespace", e->ns, "involvedObject", io, "type", type, "reason", reason,
			 "message", msg, "source", "component", ev->component, "host", ev->instance,
			 "reportingComponent", ev->component, "reportingInstance", ev->instance,
			 "firstTimestamp", now, "lastTimestamp", now, "count", 1);
	if (!body)
		return -ENOMEM;
	rc = kube_request(ev->client, KUBE_POST, path, body, &r);
	json_decref(body);
	if (!rc && r.http_status == 201) {
		e->count = 1;
		snprintf(e->first, sizeof(e->first), "%s", now);
		e->first_ms = kube_mono_ms();
	} else {
		log_warn("kube: event not recorded object=%s/%s reason=%s status=%ld "
			 "error=\"%s%s\"",
			 e->ns, obj->name, reason, r.http_status, r.error, r.status.message);
		rc = rc ? rc : -EIO;
	}
	kube_response_clear(&r);
	return rc;
}

int kube_event_emit(struct kube_events *ev, const struct kube_object_ref *obj, const char *type,
		    const char *reason, const char *fmt, ...)
{
	char msg[MESSAGE_MAX * 2], now[32];
	struct timespec ts;
	struct ev_entry *e;
	char *id = NULL;
	uint64_t h;
	va_list ap;
	int rc;

	if (!obj || !obj->name || !type || !reason)
		return -EINVAL;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	utf8_truncate(msg, MESSAGE_MAX);
	clock_gettime(CLOCK_REALTIME, &ts);
	kube_format_time(now, &ts);
	if (asprintf(&id, "%s\x1f%s\x1f%s\x1f%s\x1f%s\x1f%s\x1f%s", obj->uid ? obj->uid : "",
		     obj->kind ? obj->kind : "", obj->namespace ? obj->namespace : "", obj->name,
		     type, reason, msg) < 0)
		return -ENOMEM;
	h = fnv(id);

	pthread_mutex_lock(&ev->lock);
	e = entry_find(ev, id, h);
	if (e && kube_mono_ms() - e->first_ms < ev->o.window_ms) {
		free(id);
		lru_unlink(ev, e);
		lru_front(ev, e);
		rc = bump(ev, e, now);
		if (rc == 0) {
			ev->stats.aggregated++;
			goto out;
		}
		if (rc != -ENOENT)
			goto out_failed;
		/* The Event expired on the server: record a new one. */
		rc = create(ev, e, obj, type, reason, msg, now);
		if (rc)
			goto out_failed;
		ev->stats.created++;
		goto out;
	}
	if (e) {
		entry_drop(ev, e); /* older than the window: start again */
		e = NULL;
	}
	e = calloc(1, sizeof(*e));
	if (!e) {
		free(id);
		rc = -ENOMEM;
		goto out_failed;
	}
	e->identity = id;
	e->hash = h;
	snprintf(e->ns, sizeof(e->ns), "%s", obj->namespace ? obj->namespace : "default");
	rc = create(ev, e, obj, type, reason, msg, now);
	if (rc) {
		free(e->identity);
		free(e);
		goto out_failed;
	}
	ev->stats.created++;
	e->hnext = ev->buckets[h % BUCKETS];
	ev->buckets[h % BUCKETS] = e;
	lru_front(ev, e);
	ev->n++;
	while (ev->n > ev->o.cache_size)
		entry_drop(ev, ev->tail);
	goto out;
out_failed:
	ev->stats.failed++;
out:
	pthread_mutex_unlock(&ev->lock);
	return rc;
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
		if (!fresh || fn(arg, r->body, &status) != 0 || !status) {
			json_decref(fresh);
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
