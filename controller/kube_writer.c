/*
 * kube_writer.c - the Kubernetes mode's status writes, off the main thread.
 *
 * The main thread computes a trigger's status (kube_status.c) and hands the
 * write here; --status-workers threads (4 by default), each with its own
 * API client, PUT it through the status subresource and emit the Events of
 * the transition. A slow API server then delays only the trigger whose
 * write is slow: the :sync pass, the table and the agents never wait on it.
 *
 * Per key (namespace/name): one write at a time, in order; a write handed
 * over while an earlier one waits replaces it (coalesced: only the newest
 * status matters); one equal to the write in flight is dropped
 * (coalesced). At most KWRITER_KEYS keys wait or are in flight; past that
 * a write is refused (dropped, counted, the key retried by the main
 * thread's queue with backoff). Every PUT is fenced: the leader's renew
 * deadline is checked right before it, in the worker. A write that fails
 * sends its key back to the main queue with the per-key backoff; a
 * successful one forgets the key's failures.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "kube_state.h"
#include "traceprof/kube.h"
#include "traceprof/log.h"

#define KWRITER_KEYS 1024 /* keys waiting or in flight at most */

/* One status write: the cached object with the computed status. */
struct kjob {
	char key[600];	/* namespace/name */
	char path[700]; /* the object's API path */
	json_t *obj;	/* object with metadata.resourceVersion and the new status (owned) */
	json_t *base;	/* the status it was computed against (owned; NULL: none) */
};

/* A key with a write waiting or in flight. */
struct kslot {
	struct kslot *next;   /* in the order keys arrived */
	char key[600];	      /* namespace/name */
	struct kjob *pending; /* the newest write not started; NULL: none */
	json_t *inflight;     /* status being written (owned); NULL: idle */
};

struct kwriter {
	struct kstate *s;				    /* the mode's state */
	pthread_mutex_t lock;				    /* everything below */
	pthread_cond_t cond;				    /* a write is ready, or stop */
	struct kslot *head;				    /* slots, oldest first */
	size_t n_slots;					    /* entries of the list */
	bool stop;					    /* kwriter_stop began */
	volatile int abort;				    /* ends the writes in flight at stop */
	struct kwriter_stats st;			    /* counters */
	pthread_t threads[KUBE_MODE_MAX_WRITERS];	    /* the workers */
	struct kube_client *clients[KUBE_MODE_MAX_WRITERS]; /* one per worker */
	int n_threads;					    /* started */
};

/* What a worker passes to kube_update_status's callback. */
struct kctx {
	struct kstate *s;  /* for the write guard */
	const json_t *obj; /* the job's object */
	json_t *base;	   /* the status the write replaces (owned) */
	int why;	   /* the callback's refusal: -EPERM fenced, -ESTALE newer spec */
};

static void job_free(struct kjob *j)
{
	if (!j)
		return;
	json_decref(j->obj);
	json_decref(j->base);
	free(j);
}

static struct kslot *slot_find(struct kwriter *w, const char *key)
{
	for (struct kslot *x = w->head; x; x = x->next)
		if (strcmp(x->key, key) == 0)
			return x;
	return NULL;
}

static void slot_unlink(struct kwriter *w, struct kslot *sl)
{
	struct kslot **pp = &w->head;

	while (*pp && *pp != sl)
		pp = &(*pp)->next;
	if (*pp)
		*pp = sl->next;
	w->n_slots--;
}

static void slot_append(struct kwriter *w, struct kslot *sl)
{
	struct kslot **pp = &w->head;

	while (*pp)
		pp = &(*pp)->next;
	sl->next = NULL;
	*pp = sl;
	w->n_slots++;
}

/* The oldest slot with a write waiting and none in flight, or NULL. */
static struct kslot *slot_ready(struct kwriter *w)
{
	for (struct kslot *x = w->head; x; x = x->next)
		if (x->pending && !x->inflight)
			return x;
	return NULL;
}

/* Places job into sl (under lock). Returns 1 (queued) or 0 (coalesced into the write in flight). */
static int slot_put(struct kwriter *w, struct kslot *sl, struct kjob *j)
{
	const json_t *st = json_object_get(j->obj, "status");

	if (sl->pending) {
		job_free(sl->pending); /* only the newest status matters */
		sl->pending = NULL;
		w->st.coalesced++;
	}
	if (sl->inflight && json_equal(sl->inflight, st)) {
		job_free(j); /* being written already */
		w->st.coalesced++;
		return 0;
	}
	sl->pending = j;
	w->st.queued++;
	pthread_cond_signal(&w->cond);
	return 1;
}

int kwriter_submit(struct kwriter *w, const char *key, const char *path, json_t *obj,
		   const json_t *base)
{
	struct kslot *sl;
	struct kjob *j = calloc(1, sizeof(*j));
	int rc;

	if (!j) {
		json_decref(obj);
		return -ENOMEM;
	}
	snprintf(j->key, sizeof(j->key), "%s", key);
	snprintf(j->path, sizeof(j->path), "%s", path);
	j->obj = obj;
	j->base = base ? json_deep_copy(base) : NULL;
	pthread_mutex_lock(&w->lock);
	sl = slot_find(w, key);
	if (!sl && w->n_slots < KWRITER_KEYS && (sl = calloc(1, sizeof(*sl)))) {
		snprintf(sl->key, sizeof(sl->key), "%s", key);
		slot_append(w, sl);
	}
	if (!sl) {
		uint64_t n = ++w->st.dropped;

		pthread_mutex_unlock(&w->lock);
		if (n == 1 || n % 1000 == 0)
			log_warn("status writes: %d keys waiting, write dropped key=%s (%llu so "
				 "far; retried with backoff)",
				 KWRITER_KEYS, key, (unsigned long long)n);
		job_free(j);
		return -ENOBUFS;
	}
	rc = slot_put(w, sl, j);
	pthread_mutex_unlock(&w->lock);
	return rc;
}

/* kube_update_status's callback after a 409: the job's status on the fresh object. */
static int rebase_fn(void *arg, const json_t *fresh, json_t **status)
{
	struct kctx *c = arg;
	int rc;

	if (!kmode_may_act(c->s)) {
		c->why = -EPERM; /* fenced: past the renew deadline, write nothing */
		return -EPERM;
	}
	json_decref(c->base);
	c->base = json_deep_copy(json_object_get(fresh, "status"));
	rc = kmode_status_rebase(c->obj, fresh, status);
	if (rc < 0)
		c->why = rc;
	return rc;
}

/* Counts one outcome. */
static void count(struct kwriter *w, uint64_t *field)
{
	pthread_mutex_lock(&w->lock);
	(*field)++;
	pthread_mutex_unlock(&w->lock);
}

/* One write, fenced; its events; the key's backoff. */
static void write_one(struct kwriter *w, struct kube_client *client, struct kjob *j)
{
	struct kstate *s = w->s;
	struct kctx c = {.s = s, .obj = j->obj, .base = json_incref(j->base)};
	struct kube_response resp = {0};
	int rc = -EPERM;

	if (kmode_may_act(s))
		rc = kube_update_status(client, j->path, j->obj, rebase_fn, &c, 0, &resp);
	if (rc == -ECANCELED && c.why)
		rc = c.why;
	if (rc == 0) {
		const json_t *written = json_object_get(resp.body, "status");

		log_debug("status written key=%s phase=%s", j->key,
			  kmode_str_at(written, "phase", NULL));
		kmode_status_events(s, j->obj, c.base,
				    written ? written : json_object_get(j->obj, "status"));
		count(w, &w->st.written);
		kube_workqueue_forget(s->q, j->key);
	} else if (rc == KUBE_STATUS_UNCHANGED || kube_is_not_found(&resp)) {
		count(w, &w->st.unchanged); /* already there, or deleted meanwhile */
		kube_workqueue_forget(s->q, j->key);
	} else if (rc == -ESTALE) {
		kube_workqueue_add(s->q, j->key); /* a newer spec: computed again */
	} else if (rc != -EPERM) {
		log_warn("status update failed key=%s: %s%s", j->key,
			 resp.error[0] ? resp.error : resp.status.message,
			 rc == -EAGAIN ? " (conflicts)" : "");
		count(w, &w->st.failed);
		kube_workqueue_add_rate_limited(s->q, j->key);
	}
	kube_response_clear(&resp);
	json_decref(c.base);
}

struct kworker_arg {
	struct kwriter *w;	    /* the pool */
	struct kube_client *client; /* this worker's */
};

static void *worker(void *arg)
{
	struct kwriter *w = ((struct kworker_arg *)arg)->w;
	struct kube_client *client = ((struct kworker_arg *)arg)->client;
	struct kslot *sl;

	free(arg);
	pthread_mutex_lock(&w->lock);
	for (;;) {
		struct kjob *j;

		while (!w->stop && !(sl = slot_ready(w)))
			pthread_cond_wait(&w->cond, &w->lock);
		if (w->stop)
			break;
		j = sl->pending;
		sl->pending = NULL;
		sl->inflight = json_incref(json_object_get(j->obj, "status"));
		pthread_mutex_unlock(&w->lock);
		write_one(w, client, j);
		job_free(j);
		pthread_mutex_lock(&w->lock);
		json_decref(sl->inflight);
		sl->inflight = NULL;
		slot_unlink(w, sl);
		if (sl->pending) {
			slot_append(w, sl); /* the next write of this key, behind the others */
			pthread_cond_signal(&w->cond);
		} else {
			free(sl);
		}
	}
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

static int start_worker(struct kwriter *w, char *err, size_t errlen)
{
	struct kworker_arg *a = calloc(1, sizeof(*a));
	int i = w->n_threads;

	if (!a) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	w->clients[i] = kube_client_new(w->s->kc, NULL, err, errlen);
	if (!w->clients[i]) {
		free(a);
		return -EINVAL;
	}
	kube_client_set_abort(w->clients[i], &w->abort);
	a->w = w;
	a->client = w->clients[i];
	if (pthread_create(&w->threads[i], NULL, worker, a) != 0) {
		snprintf(err, errlen, "cannot start a status writer thread");
		kube_client_free(w->clients[i]);
		free(a);
		return -EAGAIN;
	}
	w->n_threads++;
	return 0;
}

struct kwriter *kwriter_start(struct kstate *s, int workers, char *err, size_t errlen)
{
	struct kwriter *w = calloc(1, sizeof(*w));

	if (!w) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	w->s = s;
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->cond, NULL);
	if (workers < 1 || workers > KUBE_MODE_MAX_WRITERS)
		workers = 4;
	while (w->n_threads < workers)
		if (start_worker(w, err, errlen)) {
			kwriter_stop(w);
			return NULL;
		}
	return w;
}

void kwriter_get_stats(struct kwriter *w, struct kwriter_stats *st)
{
	pthread_mutex_lock(&w->lock);
	*st = w->st;
	pthread_mutex_unlock(&w->lock);
}

void kwriter_stop(struct kwriter *w)
{
	struct kwriter_stats st;

	if (!w)
		return;
	pthread_mutex_lock(&w->lock);
	w->stop = true;
	w->abort = 1; /* a slow write is not waited for: leadership ends here */
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
	for (int i = 0; i < w->n_threads; i++) {
		pthread_join(w->threads[i], NULL);
		kube_client_free(w->clients[i]);
	}
	while (w->head) {
		struct kslot *sl = w->head;

		w->head = sl->next;
		job_free(sl->pending);
		json_decref(sl->inflight);
		free(sl);
	}
	kwriter_get_stats(w, &st);
	log_info("status writes: queued=%llu written=%llu unchanged=%llu coalesced=%llu "
		 "dropped=%llu failed=%llu",
		 (unsigned long long)st.queued, (unsigned long long)st.written,
		 (unsigned long long)st.unchanged, (unsigned long long)st.coalesced,
		 (unsigned long long)st.dropped, (unsigned long long)st.failed);
	pthread_cond_destroy(&w->cond);
	pthread_mutex_destroy(&w->lock);
	free(w);
}
