/*
 * kube_informer.c - LIST + WATCH of one collection into a cache, with
 * add/update/delete handlers: the reflector and informer of client-go,
 * reduced to what traceprof needs.
 *
 * One thread per informer:
 *
 *   LIST (pages of `limit`, `continue`) -> replace the cache, deliver the
 *        difference (add / update when the resourceVersion changed /
 *        delete of what is gone) -> synced
 *   WATCH from the list's resourceVersion, allowWatchBookmarks, a
 *        timeoutSeconds drawn from [min,max] -> every event moves the
 *        resourceVersion (BOOKMARK too)
 *   a watch that was open (200, and an event or a second passed) and
 *        ends -- its timeout, EOF, a connection reset -> WATCH again from
 *        the last resourceVersion at once, as client-go's reflector does;
 *        not an error
 *   410 (HTTP or an ERROR event), an event line over max_line -> LIST again
 *   errors (connection refused, non-200 answers, ERROR events) and short
 *        watches (ended within a second with no event: a server or proxy
 *        that closes at once) -> wait (100 ms doubling to 30 s, jittered
 *        to [d/2, d]; back to 100 ms after an open watch, or after a
 *        minute without an error)
 *
 * The cache is a jansson object (key "namespace/name" -> object) behind a
 * mutex; the objects are shared with readers by reference and never
 * modified after insertion. Handlers run on the informer thread, after the
 * cache already holds the new state. Memory is bounded by the collection
 * itself plus one event line (max_line).
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kube_internal.h"
#include "traceprof/kube.h"
#include "traceprof/log.h"

#define BACKOFF_MIN_MS	  100
#define BACKOFF_MAX_MS	  30000
#define HEALTHY_MS	  60000 /* this long without an error resets the backoff */
#define SHORT_WATCH_MS	  1000	/* a watch ending sooner with no event is an error */
#define DEFAULT_PAGE	  500
#define DEFAULT_WATCH_MIN 300
#define DEFAULT_WATCH_MAX 600
#define DEFAULT_MAX_LINE  ((size_t)16 << 20)
#define PATH_MAX_LEN	  4096

struct kube_informer {
	struct kube_informer_opts o;	  /* options (strings copied below) */
	char *path;			  /* collection path */
	char *label_selector;		  /* or NULL */
	char *field_selector;		  /* or NULL */
	struct kube_client *client;	  /* used by the thread only */
	pthread_t thread;		  /* the informer thread */
	pthread_mutex_t lock;		  /* cache, stats, synced */
	pthread_cond_t cond;		  /* stop and synced */
	json_t *cache;			  /* key -> object */
	bool synced;			  /* the first LIST is delivered */
	volatile int stop;		  /* set by kube_informer_stop */
	struct kube_informer_stats stats; /* counters, under lock */
	char rv[64];			  /* resourceVersion to watch from (thread only) */
	unsigned watch_events;		  /* events of the current watch (thread only) */
	int64_t watch_started;		  /* when it was asked for (thread only) */
	bool watch_proven;     /* it was open long enough, or had an event (thread only) */
	int64_t failing_since; /* monotonic ms of the first error in a row; 0: healthy
				  (under lock) */
	char last_error[160];  /* what failed last (under lock) */
};

/* Notes a failure: the informer has been failing since the first in a row. */
static void failed(struct kube_informer *inf, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void failed(struct kube_informer *inf, const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&inf->lock);
	if (!inf->failing_since)
		inf->failing_since = kube_mono_ms();
	va_start(ap, fmt);
	vsnprintf(inf->last_error, sizeof(inf->last_error), fmt, ap);
	va_end(ap);
	pthread_mutex_unlock(&inf->lock);
}

static void healthy(struct kube_informer *inf)
{
	pthread_mutex_lock(&inf->lock);
	inf->failing_since = 0;
	pthread_mutex_unlock(&inf->lock);
}

static void set_rv(struct kube_informer *inf, const char *rv)
{
	if (!rv || !*rv)
		return;
	snprintf(inf->rv, sizeof(inf->rv), "%s", rv);
	pthread_mutex_lock(&inf->lock);
	snprintf(inf->stats.resource_version, sizeof(inf->stats.resource_version), "%s", rv);
	pthread_mutex_unlock(&inf->lock);
}

static void count(struct kube_informer *inf, uint64_t *field)
{
	pthread_mutex_lock(&inf->lock);
	(*field)++;
	pthread_mutex_unlock(&inf->lock);
}

/* Sleeps ms unless stopped first; true if stopped. */
static bool sleep_or_stop(struct kube_informer *inf, long ms)
{
	struct timespec dl;

	kube_deadline(&dl, ms);
	pthread_mutex_lock(&inf->lock);
	while (!inf->stop && pthread_cond_timedwait(&inf->cond, &inf->lock, &dl) != ETIMEDOUT)
		;
	pthread_mutex_unlock(&inf->lock);
	return inf->stop;
}

static const char *object_rv(const json_t *obj)
{
	return json_string_value(
	    json_object_get(json_object_get(obj, "metadata"), "resourceVersion"));
}

static int add_selectors(struct kube_informer *inf, char *path, size_t len)
{
	int rc = 0;

	if (inf->label_selector)
		rc = kube_query_add(path, len, "labelSelector", inf->label_selector);
	if (!rc && inf->field_selector)
		rc = kube_query_add(path, len, "fieldSelector", inf->field_selector);
	return rc;
}

/* Replaces the cache with fresh and delivers the difference. Takes fresh. */
static void replace(struct kube_informer *inf, json_t *fresh)
{
	json_t *old;
	const char *key;
	json_t *obj;
	bool first;

	json_incref(fresh);
	pthread_mutex_lock(&inf->lock);
	old = inf->cache;
	inf->cache = fresh;
	first = !inf->synced;
	pthread_mutex_unlock(&inf->lock);

	json_object_foreach(fresh, key, obj)
	{
		json_t *prev = json_object_get(old, key);

		if (!prev) {
			if (inf->o.handlers.add)
				inf->o.handlers.add(inf->o.handlers.arg, obj);
		} else {
			const char *a = object_rv(prev), *b = object_rv(obj);

			if ((!a || !b || strcmp(a, b) != 0) && inf->o.handlers.update)
				inf->o.handlers.update(inf->o.handlers.arg, prev, obj);
		}
	}
	json_object_foreach(old, key, obj)
	{
		if (!json_object_get(fresh, key) && inf->o.handlers.del)
			inf->o.handlers.del(inf->o.handlers.arg, obj);
	}
	json_decref(old);
	json_decref(fresh);

	pthread_mutex_lock(&inf->lock);
	inf->synced = true;
	inf->stats.lists++;
	pthread_cond_broadcast(&inf->cond);
	pthread_mutex_unlock(&inf->lock);
	if (first)
		log_debug("kube: informer synced path=%s objects=%zu rv=%s", inf->path,
			  json_object_size(fresh), inf->rv);
}

/* The kind of a list's items ("PodList" -> "Pod"), given to items without one. */
static void fill_kind(json_t *list, json_t *item)
{
	const char *lk = json_string_value(json_object_get(list, "kind"));
	const char *av = json_string_value(json_object_get(list, "apiVersion"));
	size_t n = lk ? strlen(lk) : 0;

	if (!json_object_get(item, "kind") && n > 4 && strcmp(lk + n - 4, "List") == 0)
		json_object_set_new(item, "kind", json_stringn(lk, n - 4));
	if (!json_object_get(item, "apiVersion") && av)
		json_object_set_new(item, "apiVersion", json_string(av));
}

/* A complete, paged LIST; 0 and the cache replaced, or -errno. */
static int do_list(struct kube_informer *inf)
{
	char path[PATH_MAX_LEN], limit[16], key[512];
	char *cont = NULL;
	json_t *fresh = json_object();
	struct kube_response r;
	bool restarted = false;
	int rc = 0;

	if (!fresh)
		return -ENOMEM;
	snprintf(limit, sizeof(limit), "%d", inf->o.page_size);
	for (;;) {
		json_t *items, *item, *md;
		size_t i;

		snprintf(path, sizeof(path), "%s", inf->path);
		rc = kube_query_add(path, sizeof(path), "limit", limit);
		if (!rc)
			rc = add_selectors(inf, path, sizeof(path));
		if (!rc && cont)
			rc = kube_query_add(path, sizeof(path), "continue", cont);
		if (rc)
			break;
		rc = kube_request(inf->client, KUBE_GET, path, NULL, &r);
		if (rc) {
			log_warn("kube: list failed path=%s error=\"%s\"", inf->path, r.error);
			failed(inf, "list: %s", r.error);
			kube_response_clear(&r);
			break;
		}
		if (kube_is_gone(&r) && cont && !restarted) {
			/* The continue token expired: start again from the top. */
			kube_response_clear(&r);
			free(cont);
			cont = NULL;
			json_object_clear(fresh);
			restarted = true;
			continue;
		}
		if (r.http_status != 200) {
			log_warn("kube: list failed path=%s status=%ld reason=%s message=\"%s\"",
				 inf->path, r.http_status, r.status.reason, r.status.message);
			failed(inf, "list: %ld %s", r.http_status, r.status.message);
			kube_response_clear(&r);
			rc = -EIO;
			break;
		}
		items = json_object_get(r.body, "items");
		json_array_foreach(items, i, item)
		{
			if (kube_object_key(item, key, sizeof(key)) != 0)
				continue;
			fill_kind(r.body, item);
			json_object_set(fresh, key, item);
		}
		md = json_object_get(r.body, "metadata");
		free(cont);
		cont = NULL;
		if (json_string_length(json_object_get(md, "continue")) > 0)
			cont = strdup(json_string_value(json_object_get(md, "continue")));
		if (!cont)
			set_rv(inf, json_string_value(json_object_get(md, "resourceVersion")));
		kube_response_clear(&r);
		if (!cont)
			break;
	}
	free(cont);
	if (rc) {
		json_decref(fresh);
		return rc;
	}
	replace(inf, fresh);
	return 0;
}

/* One watch event line. 0, or -ESTALE (relist), -EPROTO (undecodable), -EREMOTEIO (an ERROR
 * event). */
static int on_event(void *arg, char *line, size_t len)
{
	struct kube_informer *inf = arg;
	json_error_t je;
	json_t *ev = kube_json_loadb(line, len, &je);
	json_t *obj = json_object_get(ev, "object");
	const char *type = json_string_value(json_object_get(ev, "type"));
	json_t *prev = NULL;
	char key[512];
	int rc = 0;

	if (!ev || !type || !json_is_object(obj)) {
		log_warn("kube: bad watch event path=%s error=\"%s\"", inf->path,
			 ev ? "no type or object" : je.text);
		failed(inf, "watch: bad event: %s", ev ? "no type or object" : je.text);
		count(inf, &inf->stats.errors);
		json_decref(ev);
		return -EPROTO;
	}
	if (strcmp(type, "BOOKMARK") == 0) {
		inf->watch_events++;
		set_rv(inf, object_rv(obj));
		count(inf, &inf->stats.bookmarks);
		goto out;
	}
	if (strcmp(type, "ERROR") == 0) {
		json_int_t code = json_integer_value(json_object_get(obj, "code"));

		count(inf, &inf->stats.errors);
		if (code == 410) {
			log_info("kube: watch expired, listing again path=%s rv=%s", inf->path,
				 inf->rv);
			rc = -ESTALE;
		} else {
			const char *m = json_string_value(json_object_get(obj, "message"));

			log_warn("kube: watch error path=%s code=%lld message=\"%s\"", inf->path,
				 (long long)code, m ? m : "");
			failed(inf, "watch: ERROR event %lld %s", (long long)code, m ? m : "");
			rc = -EREMOTEIO;
		}
		goto out;
	}
	if (kube_object_key(obj, key, sizeof(key)) != 0) {
		count(inf, &inf->stats.errors);
		goto out;
	}
	set_rv(inf, object_rv(obj));
	inf->watch_events++;
	pthread_mutex_lock(&inf->lock);
	prev = json_incref(json_object_get(inf->cache, key));
	if (strcmp(type, "DELETED") == 0)
		json_object_del(inf->cache, key);
	else if (strcmp(type, "ADDED") == 0 || strcmp(type, "MODIFIED") == 0)
		json_object_set(inf->cache, key, obj);
	else
		type = NULL;
	inf->stats.events += type != NULL;
	pthread_mutex_unlock(&inf->lock);
	if (!type)
		goto out;
	if (type[0] == 'D') {
		if (inf->o.handlers.del)
			inf->o.handlers.del(inf->o.handlers.arg, obj);
	} else if (prev) {
		if (inf->o.handlers.update)
			inf->o.handlers.update(inf->o.handlers.arg, prev, obj);
	} else if (inf->o.handlers.add) {
		inf->o.handlers.add(inf->o.handlers.arg, obj);
	}
out:
	json_decref(prev);
	json_decref(ev);
	return rc;
}

/*
 * The watch is open: once it has an event or has stayed open a second, the
 * informer is no longer failing (a watch closed at once proves nothing).
 */
static void watch_alive(void *arg)
{
	struct kube_informer *inf = arg;

	if (!inf->watch_proven &&
	    (inf->watch_events > 0 || kube_mono_ms() - inf->watch_started >= SHORT_WATCH_MS)) {
		inf->watch_proven = true;
		healthy(inf);
	}
}

/*
 * One WATCH. 0 or -errno as the stream ended; *opened is true when the
 * server answered 200 (the watch was established before it ended).
 */
static int do_watch(struct kube_informer *inf, bool *opened)
{
	char path[PATH_MAX_LEN], t[16];
	struct kube_response r;
	int span = inf->o.watch_max_s - inf->o.watch_min_s;
	int timeout_s = inf->o.watch_min_s + (int)kube_rand((uint64_t)span + 1);
	int rc;

	*opened = false;
	snprintf(t, sizeof(t), "%d", timeout_s);
	snprintf(path, sizeof(path), "%s", inf->path);
	rc = kube_query_add(path, sizeof(path), "watch", "1");
	if (!rc)
		rc = kube_query_add(path, sizeof(path), "resourceVersion", inf->rv);
	if (!rc)
		rc = kube_query_add(path, sizeof(path), "allowWatchBookmarks", "true");
	if (!rc)
		rc = kube_query_add(path, sizeof(path), "timeoutSeconds", t);
	if (!rc)
		rc = add_selectors(inf, path, sizeof(path));
	if (rc)
		return rc;
	count(inf, &inf->stats.watches);
	inf->watch_events = 0;
	inf->watch_started = kube_mono_ms();
	inf->watch_proven = false;
	rc = kube_stream(inf->client, path, (timeout_s + 30) * 1000L, inf->o.max_line, on_event,
			 watch_alive, inf, &r);
	*opened = r.http_status == 200;
	if (rc == -EMSGSIZE)
		log_warn("kube: watch event over %zu bytes, listing again path=%s", inf->o.max_line,
			 inf->path);
	else if (rc && rc != -ESTALE && rc != -ECANCELED && *opened)
		log_debug("kube: watch ended path=%s events=%u error=\"%s\"", inf->path,
			  inf->watch_events, r.error);
	else if (rc && rc != -ESTALE && rc != -ECANCELED)
		log_warn("kube: watch failed path=%s error=\"%s\"", inf->path, r.error);
	if (rc && rc != -ESTALE && rc != -ECANCELED && !*opened)
		failed(inf, "watch: %s", r.error);
	if (!rc && r.http_status != 200) {
		if (kube_is_gone(&r)) {
			rc = -ESTALE;
		} else {
			log_warn("kube: watch refused path=%s status=%ld reason=%s message=\"%s\"",
				 inf->path, r.http_status, r.status.reason, r.status.message);
			failed(inf, "watch: %ld %s", r.http_status, r.status.message);
			rc = -EIO;
		}
	}
	kube_response_clear(&r);
	return rc;
}

/*
 * What ends a watch, and what comes next. A watch the server answered and
 * kept open (an event, or a second) ended normally whatever ended it:
 * kube-apiserver ends watches at their timeout, load balancers and
 * restarts cut them, and client-go resumes from the last resourceVersion
 * at once in every such case. Only errors and watches that end at once
 * with nothing wait.
 */
enum watch_end { WATCH_RESUME, WATCH_RELIST, WATCH_RELIST_NOW, WATCH_BACKOFF, WATCH_STOP };

static enum watch_end classify(int rc, bool opened, unsigned events, int64_t ms)
{
	if (rc == -ECANCELED)
		return WATCH_STOP;
	if (rc == -ESTALE)
		return WATCH_RELIST_NOW;
	if (rc == -EMSGSIZE)
		return WATCH_RELIST;
	if (opened && (events > 0 || ms >= SHORT_WATCH_MS) && rc != -EPROTO && rc != -EREMOTEIO)
		return WATCH_RESUME;
	return WATCH_BACKOFF;
}

static void *run(void *arg)
{
	struct kube_informer *inf = arg;
	long backoff = BACKOFF_MIN_MS;
	int64_t last_error = 0;
	bool need_list = true;

	while (!inf->stop) {
		int64_t started = kube_mono_ms();
		bool opened;
		int rc;

		if (need_list) {
			rc = do_list(inf);
			if (rc == 0) {
				healthy(inf);
				need_list = false;
				continue;
			}
		} else {
			rc = do_watch(inf, &opened);
			switch (classify(rc, opened, inf->watch_events, kube_mono_ms() - started)) {
			case WATCH_STOP:
				continue;
			case WATCH_RESUME:
				healthy(inf);
				count(inf, &inf->stats.watch_ends);
				backoff = BACKOFF_MIN_MS;
				continue;
			case WATCH_RELIST_NOW:
				need_list = true;
				count(inf, &inf->stats.relists);
				continue;
			case WATCH_RELIST:
				need_list = true;
				count(inf, &inf->stats.relists);
				break;
			case WATCH_BACKOFF:
				if (rc == 0) {
					count(inf, &inf->stats.short_watches);
					failed(inf, "watch: closed at once with no event");
				}
				break;
			}
		}
		if (inf->stop)
			break;
		if (last_error && kube_mono_ms() - last_error >= HEALTHY_MS)
			backoff = BACKOFF_MIN_MS;
		last_error = kube_mono_ms();
		pthread_mutex_lock(&inf->lock);
		inf->stats.errors += rc != 0 && rc != -EMSGSIZE;
		inf->stats.reconnects++;
		pthread_mutex_unlock(&inf->lock);
		if (sleep_or_stop(inf, backoff / 2 + (long)kube_rand((uint64_t)backoff / 2 + 1)))
			break;
		backoff = backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff * 2;
	}
	return NULL;
}

static char *dup_opt(const char *s, bool *oom)
{
	char *d;

	if (!s || !*s)
		return NULL;
	d = strdup(s);
	if (!d)
		*oom = true;
	return d;
}

struct kube_informer *kube_informer_start(const struct kube_config *cfg,
					  const struct kube_informer_opts *opts, char *err,
					  size_t errlen)
{
	struct kube_informer *inf = calloc(1, sizeof(*inf));
	pthread_condattr_t ca;
	bool oom = false;

	if (!inf) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	if (!opts->path || opts->path[0] != '/' || strchr(opts->path, '?')) {
		snprintf(err, errlen, "informer path must be a collection path without a query");
		free(inf);
		return NULL;
	}
	inf->o = *opts;
	if (inf->o.page_size <= 0)
		inf->o.page_size = DEFAULT_PAGE;
	if (inf->o.watch_min_s <= 0)
		inf->o.watch_min_s = DEFAULT_WATCH_MIN;
	if (inf->o.watch_max_s < inf->o.watch_min_s)
		inf->o.watch_max_s =
		    inf->o.watch_min_s > DEFAULT_WATCH_MAX ? inf->o.watch_min_s : DEFAULT_WATCH_MAX;
	if (inf->o.max_line == 0)
		inf->o.max_line = DEFAULT_MAX_LINE;
	inf->path = dup_opt(opts->path, &oom);
	inf->label_selector = dup_opt(opts->label_selector, &oom);
	inf->field_selector = dup_opt(opts->field_selector, &oom);
	inf->cache = json_object();
	if (oom || !inf->cache) {
		snprintf(err, errlen, "out of memory");
		goto out_free;
	}
	inf->client = kube_client_new(cfg, &opts->client, err, errlen);
	if (!inf->client)
		goto out_free;
	kube_client_set_abort(inf->client, &inf->stop);
	pthread_mutex_init(&inf->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&inf->cond, &ca);
	pthread_condattr_destroy(&ca);
	if (pthread_create(&inf->thread, NULL, run, inf) != 0) {
		snprintf(err, errlen, "cannot start the informer thread");
		pthread_cond_destroy(&inf->cond);
		pthread_mutex_destroy(&inf->lock);
		goto out_free;
	}
	return inf;
out_free:
	kube_client_free(inf->client);
	json_decref(inf->cache);
	free(inf->path);
	free(inf->label_selector);
	free(inf->field_selector);
	free(inf);
	return NULL;
}

void kube_informer_stop(struct kube_informer *inf)
{
	if (!inf)
		return;
	pthread_mutex_lock(&inf->lock);
	inf->stop = 1;
	pthread_cond_broadcast(&inf->cond);
	pthread_mutex_unlock(&inf->lock);
	pthread_join(inf->thread, NULL);
	kube_client_free(inf->client);
	pthread_cond_destroy(&inf->cond);
	pthread_mutex_destroy(&inf->lock);
	json_decref(inf->cache);
	free(inf->path);
	free(inf->label_selector);
	free(inf->field_selector);
	free(inf);
}

bool kube_informer_has_synced(struct kube_informer *inf)
{
	bool s;

	pthread_mutex_lock(&inf->lock);
	s = inf->synced;
	pthread_mutex_unlock(&inf->lock);
	return s;
}

bool kube_informer_wait_synced(struct kube_informer *inf, long timeout_ms)
{
	struct timespec dl;
	bool s;

	kube_deadline(&dl, timeout_ms);
	pthread_mutex_lock(&inf->lock);
	while (!inf->synced && !inf->stop &&
	       pthread_cond_timedwait(&inf->cond, &inf->lock, &dl) != ETIMEDOUT)
		;
	s = inf->synced;
	pthread_mutex_unlock(&inf->lock);
	return s;
}

json_t *kube_informer_get(struct kube_informer *inf, const char *key)
{
	json_t *o;

	pthread_mutex_lock(&inf->lock);
	o = json_incref(json_object_get(inf->cache, key));
	pthread_mutex_unlock(&inf->lock);
	return o;
}

json_t *kube_informer_list(struct kube_informer *inf)
{
	json_t *a = json_array(), *obj;
	const char *key;

	if (!a)
		return NULL;
	pthread_mutex_lock(&inf->lock);
	json_object_foreach(inf->cache, key, obj) json_array_append(a, obj);
	pthread_mutex_unlock(&inf->lock);
	return a;
}

void kube_informer_get_stats(struct kube_informer *inf, struct kube_informer_stats *st)
{
	pthread_mutex_lock(&inf->lock);
	*st = inf->stats;
	st->failing_ms = inf->failing_since ? kube_mono_ms() - inf->failing_since : 0;
	snprintf(st->last_error, sizeof(st->last_error), "%s", inf->last_error);
	pthread_mutex_unlock(&inf->lock);
}
