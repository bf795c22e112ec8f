/*
 * kube_workqueue.c - the keys a controller has to reconcile, with the
 * semantics of client-go's workqueue:
 *
 *   - a key is queued once however often it is added (dirty set);
 *   - a key being processed is not handed out again; an add meanwhile
 *     marks it dirty and it is queued again by kube_workqueue_done;
 *   - add_after(delay): the key becomes ready later (the earliest pending
 *     time for a key wins);
 *   - add_rate_limited: delay = 5 ms * 2^failures, capped at 1000 s;
 *     forget resets the count.
 *
 * One entry per known key in a chained hash table; an entry is on the
 * ready FIFO (intrusive list) while dirty and not processing, and on the
 * delayed list (sorted by ready time, intrusive) while waiting. Adding a
 * key that is already queued allocates nothing. Entries are freed as soon
 * as nothing refers to them (not dirty, not processing, not waiting, no
 * failures counted). Consumers wait on a condition variable with a timed
 * wait until the earliest delayed key, so no timer thread is needed.
 * Delayed keys are kept in a sorted list: O(n) inserts, fine for the
 * hundreds of keys of a controller.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kube_internal.h"
#include "traceprof/kube.h"

#define BUCKETS	     1024
#define RATE_BASE_MS 5
#define RATE_MAX_MS  (1000L * 1000L)

struct wq_entry {
	struct wq_entry *hnext; /* hash chain */
	struct wq_entry *qnext; /* ready FIFO */
	struct wq_entry *dnext; /* delayed list */
	bool dirty;		/* added and not yet handed out */
	bool processing;	/* handed out, done not called yet */
	bool queued;		/* on the ready FIFO */
	bool waiting;		/* on the delayed list */
	int64_t ready_ms;	/* when a waiting key becomes ready (monotonic) */
	int failures;		/* for add_rate_limited; reset by forget */
	char key[];		/* the key, NUL-terminated */
};

struct kube_workqueue {
	pthread_mutex_t lock;		   /* everything below */
	pthread_cond_t cond;		   /* a key is ready, or shutdown */
	struct wq_entry *buckets[BUCKETS]; /* key -> entry */
	struct wq_entry *head, *tail;	   /* ready FIFO */
	struct wq_entry *delayed;	   /* waiting keys, earliest first */
	size_t ready;			   /* entries on the FIFO */
	bool shutdown;			   /* no more adds; get drains then fails */
};

static uint32_t hash(const char *s)
{
	uint32_t h = 2166136261u;

	while (*s)
		h = (h ^ (unsigned char)*s++) * 16777619u;
	return h;
}

static struct wq_entry *lookup(struct kube_workqueue *q, const char *key, bool create)
{
	uint32_t b = hash(key) % BUCKETS;
	struct wq_entry *e;
	size_t n;

	for (e = q->buckets[b]; e; e = e->hnext)
		if (strcmp(e->key, key) == 0)
			return e;
	if (!create)
		return NULL;
	n = strlen(key);
	e = calloc(1, sizeof(*e) + n + 1);
	if (!e)
		return NULL;
	memcpy(e->key, key, n + 1);
	e->hnext = q->buckets[b];
	q->buckets[b] = e;
	return e;
}

/* Frees e if nothing refers to it any more. */
static void maybe_free(struct kube_workqueue *q, struct wq_entry *e)
{
	struct wq_entry **pp;

	if (e->dirty || e->processing || e->queued || e->waiting || e->failures)
		return;
	for (pp = &q->buckets[hash(e->key) % BUCKETS]; *pp; pp = &(*pp)->hnext) {
		if (*pp == e) {
			*pp = e->hnext;
			free(e);
			return;
		}
	}
}

static void enqueue(struct kube_workqueue *q, struct wq_entry *e)
{
	e->queued = true;
	e->qnext = NULL;
	if (q->tail)
		q->tail->qnext = e;
	else
		q->head = e;
	q->tail = e;
	q->ready++;
	pthread_cond_signal(&q->cond);
}

/* The add of client-go: dedup, and no queueing while processing. */
static void add_locked(struct kube_workqueue *q, struct wq_entry *e)
{
	if (e->dirty)
		return;
	e->dirty = true;
	if (!e->processing)
		enqueue(q, e);
}

static void unlink_delayed(struct kube_workqueue *q, struct wq_entry *e)
{
	struct wq_entry **pp;

	for (pp = &q->delayed; *pp; pp = &(*pp)->dnext) {
		if (*pp == e) {
			*pp = e->dnext;
			break;
		}
	}
	e->waiting = false;
}

/* Moves the delayed keys whose time has come to the ready FIFO. */
static void promote(struct kube_workqueue *q, int64_t now)
{
	while (q->delayed && q->delayed->ready_ms <= now) {
		struct wq_entry *e = q->delayed;

		q->delayed = e->dnext;
		e->waiting = false;
		add_locked(q, e);
	}
}

struct kube_workqueue *kube_workqueue_new(void)
{
	struct kube_workqueue *q = calloc(1, sizeof(*q));
	pthread_condattr_t ca;

	if (!q)
		return NULL;
	pthread_mutex_init(&q->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&q->cond, &ca);
	pthread_condattr_destroy(&ca);
	return q;
}

void kube_workqueue_free(struct kube_workqueue *q)
{
	if (!q)
		return;
	kube_workqueue_shutdown(q);
	for (size_t i = 0; i < BUCKETS; i++) {
		struct wq_entry *e = q->buckets[i], *n;

		for (; e; e = n) {
			n = e->hnext;
			free(e);
		}
	}
	pthread_cond_destroy(&q->cond);
	pthread_mutex_destroy(&q->lock);
	free(q);
}

static int add_after_locked(struct kube_workqueue *q, struct wq_entry *e, long delay_ms)
{
	struct wq_entry **pp;
	int64_t at;

	if (delay_ms <= 0) {
		add_locked(q, e);
		return 0;
	}
	at = kube_mono_ms() + delay_ms;
	if (e->waiting) {
		if (e->ready_ms <= at)
			return 0; /* an earlier time is already pending */
		unlink_delayed(q, e);
	}
	e->ready_ms = at;
	e->waiting = true;
	for (pp = &q->delayed; *pp && (*pp)->ready_ms <= at; pp = &(*pp)->dnext)
		;
	e->dnext = *pp;
	*pp = e;
	/* Waiters recompute how long to sleep. */
	pthread_cond_broadcast(&q->cond);
	return 0;
}

int kube_workqueue_add_after(struct kube_workqueue *q, const char *key, long delay_ms)
{
	struct wq_entry *e;
	int rc;

	pthread_mutex_lock(&q->lock);
	if (q->shutdown)
		rc = -ESHUTDOWN;
	else if (!(e = lookup(q, key, true)))
		rc = -ENOMEM;
	else
		rc = add_after_locked(q, e, delay_ms);
	pthread_mutex_unlock(&q->lock);
	return rc;
}

int kube_workqueue_add(struct kube_workqueue *q, const char *key)
{
	return kube_workqueue_add_after(q, key, 0);
}

int kube_workqueue_add_rate_limited(struct kube_workqueue *q, const char *key)
{
	struct wq_entry *e;
	long delay = RATE_BASE_MS;
	int rc;

	pthread_mutex_lock(&q->lock);
	if (q->shutdown) {
		rc = -ESHUTDOWN;
	} else if (!(e = lookup(q, key, true))) {
		rc = -ENOMEM;
	} else {
		for (int i = 0; i < e->failures && delay < RATE_MAX_MS; i++)
			delay *= 2;
		if (delay > RATE_MAX_MS)
			delay = RATE_MAX_MS;
		if (e->failures < 1000)
			e->failures++;
		rc = add_after_locked(q, e, delay);
	}
	pthread_mutex_unlock(&q->lock);
	return rc;
}

void kube_workqueue_forget(struct kube_workqueue *q, const char *key)
{
	struct wq_entry *e;

	pthread_mutex_lock(&q->lock);
	e = lookup(q, key, false);
	if (e) {
		e->failures = 0;
		maybe_free(q, e);
	}
	pthread_mutex_unlock(&q->lock);
}

int kube_workqueue_num_requeues(struct kube_workqueue *q, const char *key)
{
	struct wq_entry *e;
	int n;

	pthread_mutex_lock(&q->lock);
	e = lookup(q, key, false);
	n = e ? e->failures : 0;
	pthread_mutex_unlock(&q->lock);
	return n;
}

int kube_workqueue_get(struct kube_workqueue *q, const char **key)
{
	struct wq_entry *e;

	pthread_mutex_lock(&q->lock);
	for (;;) {
		promote(q, kube_mono_ms());
		if (q->head || q->shutdown)
			break;
		if (q->delayed) {
			struct timespec dl;
			int64_t wait = q->delayed->ready_ms - kube_mono_ms();

			kube_deadline(&dl, wait > 0 ? (long)wait : 0);
			pthread_cond_timedwait(&q->cond, &q->lock, &dl);
		} else {
			pthread_cond_wait(&q->cond, &q->lock);
		}
	}
	e = q->head;
	if (!e) {
		pthread_mutex_unlock(&q->lock);
		*key = NULL;
		return -ESHUTDOWN;
	}
	q->head = e->qnext;
	if (!q->head)
		q->tail = NULL;
	q->ready--;
	e->queued = false;
	e->dirty = false;
	e->processing = true;
	*key = e->key;
	pthread_mutex_unlock(&q->lock);
	return 0;
}

void kube_workqueue_done(struct kube_workqueue *q, const char *key)
{
	struct wq_entry *e;

	pthread_mutex_lock(&q->lock);
	e = lookup(q, key, false);
	if (e && e->processing) {
		e->processing = false;
		if (e->dirty && !q->shutdown)
			enqueue(q, e);
		else
			e->dirty = false;
		maybe_free(q, e);
	}
	pthread_mutex_unlock(&q->lock);
}

void kube_workqueue_shutdown(struct kube_workqueue *q)
{
	pthread_mutex_lock(&q->lock);
	q->shutdown = true;
	pthread_cond_broadcast(&q->cond);
	pthread_mutex_unlock(&q->lock);
}

size_t kube_workqueue_len(struct kube_workqueue *q)
{
	size_t n;

	pthread_mutex_lock(&q->lock);
	n = q->ready;
	pthread_mutex_unlock(&q->lock);
	return n;
}
