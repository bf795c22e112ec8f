/*
 * cfi_cache.c - CFI unwind tables shared by file, built lazily by one
 * worker thread, within a byte budget (see cfi_cache.h).
 */
#include "cfi_cache.h"

#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NBUCKETS 256u

enum ent_state {
	ENT_NEW,    /* just created, not queued yet */
	ENT_QUEUED, /* in the queue or being built */
	ENT_READY,  /* table built, in the LRU list */
	ENT_FAILED, /* negative, in the negative list: retried after retry_at */
};

struct ent {
	struct cfi_table table; /* first: cfi_cache_put() casts back */
	struct cfi_cache_key key;
	enum ent_state state;
	unsigned refs;
	uint64_t retry_at; /* ENT_FAILED: monotonic ns */
	char *path;	   /* ENT_QUEUED: what to build from (or fd) */
	int fd;
	struct ent *hnext;		 /* hash chain */
	struct ent *lru_prev, *lru_next; /* ENT_READY, ENT_FAILED: newest first */
};

struct ent_list {
	struct ent *head, *tail;
	size_t n;
};

struct cfi_cache {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	pthread_t worker;
	int stop;
	struct cfi_cache_opts opts;
	struct ent *buckets[NBUCKETS];
	struct ent_list lru; /* ready tables, most recently used first */
	struct ent_list neg; /* negative entries, newest first */
	struct ent **queue;  /* ring of opts.queue_len */
	size_t qhead, qlen;
	struct cfi_cache_stats st;
};

int cfi_cache_key_build_id(struct cfi_cache_key *k, const uint8_t *id, size_t len)
{
	memset(k, 0, sizeof(*k));
	if (len == 0 || len > CFI_CACHE_BUILD_ID_MAX)
		return -1;
	memcpy(k->build_id, id, len);
	k->build_id_len = (uint32_t)len;
	return 0;
}

void cfi_cache_key_file(struct cfi_cache_key *k, uint64_t dev, uint64_t ino, uint64_t size,
			int64_t mtime_ns)
{
	memset(k, 0, sizeof(*k));
	k->dev = dev;
	k->ino = ino;
	k->size = size;
	k->mtime_ns = mtime_ns;
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static unsigned key_hash(const struct cfi_cache_key *k)
{
	const uint8_t *p = (const uint8_t *)k;
	uint64_t h = 1469598103934665603ull;
	for (size_t i = 0; i < sizeof(*k); i++)
		h = (h ^ p[i]) * 1099511628211ull;
	return (unsigned)(h % NBUCKETS);
}

static struct ent *lookup(struct cfi_cache *c, const struct cfi_cache_key *k)
{
	for (struct ent *e = c->buckets[key_hash(k)]; e; e = e->hnext)
		if (memcmp(&e->key, k, sizeof(*k)) == 0)
			return e;
	return NULL;
}

static void list_unlink(struct ent_list *l, struct ent *e)
{
	if (e->lru_prev)
		e->lru_prev->lru_next = e->lru_next;
	else
		l->head = e->lru_next;
	if (e->lru_next)
		e->lru_next->lru_prev = e->lru_prev;
	else
		l->tail = e->lru_prev;
	e->lru_prev = e->lru_next = NULL;
	l->n--;
}

static void list_push_front(struct ent_list *l, struct ent *e)
{
	e->lru_prev = NULL;
	e->lru_next = l->head;
	if (l->head)
		l->head->lru_prev = e;
	else
		l->tail = e;
	l->head = e;
	l->n++;
}

static void ent_free(struct ent *e)
{
	cfi_free(&e->table);
	free(e->path);
	if (e->fd >= 0)
		close(e->fd);
	free(e);
}

/* Unhashes e, takes it out of its list (LRU or negative) and frees it. */
static void ent_remove(struct cfi_cache *c, struct ent *e)
{
	struct ent **pp = &c->buckets[key_hash(&e->key)];
	while (*pp != e)
		pp = &(*pp)->hnext;
	*pp = e->hnext;
	if (e->state == ENT_READY) {
		list_unlink(&c->lru, e);
		c->st.bytes -= cfi_table_bytes(&e->table);
		c->st.tables--;
	} else if (e->state == ENT_FAILED) {
		list_unlink(&c->neg, e);
	}
	ent_free(e);
}

/* Evicts unreferenced tables, least recently used first, until need fits. */
static void evict_for(struct cfi_cache *c, size_t need)
{
	struct ent *e = c->lru.tail;
	while (e && c->st.bytes + need > c->opts.budget_bytes) {
		struct ent *prev = e->lru_prev;
		if (e->refs == 0) {
			ent_remove(c, e);
			c->st.evictions++;
		}
		e = prev;
	}
}

/* A negative entry; the oldest is forgotten past max_negative. */
static void fail(struct cfi_cache *c, struct ent *e)
{
	cfi_free(&e->table);
	e->state = ENT_FAILED;
	e->retry_at = now_ns() + (uint64_t)c->opts.retry_ms * 1000000ull;
	list_push_front(&c->neg, e);
	if (c->neg.n > c->opts.max_negative)
		ent_remove(c, c->neg.tail);
}

/* With the lock held: files a built (or failed) table of e. */
static void finish(struct cfi_cache *c, struct ent *e, int rc)
{
	if (rc != 0) {
		c->st.build_failures++;
		fail(c, e);
		return;
	}
	size_t bytes = cfi_table_bytes(&e->table);
	if (bytes > c->opts.budget_bytes) {
		c->st.refused++;
		fail(c, e);
		return;
	}
	evict_for(c, bytes);
	if (c->st.bytes + bytes > c->opts.budget_bytes) {
		c->st.no_room++; /* held tables fill the budget: retry on the next get */
		ent_remove(c, e);
		return;
	}
	c->st.builds++;
	c->st.bytes += bytes;
	c->st.tables++;
	e->state = ENT_READY;
	list_push_front(&c->lru, e);
}

static void *worker_main(void *arg)
{
	struct cfi_cache *c = arg;
	pthread_setname_np(pthread_self(), "tp-cfi");
	pthread_mutex_lock(&c->mu);
	for (;;) {
		while (!c->stop && c->qlen == 0)
			pthread_cond_wait(&c->cv, &c->mu);
		if (c->stop)
			break;
		struct ent *e = c->queue[c->qhead];
		c->qhead = (c->qhead + 1) % c->opts.queue_len;
		c->qlen--;
		char *path = e->path;
		int fd = e->fd;
		e->path = NULL;
		e->fd = -1;
		pthread_mutex_unlock(&c->mu);

		/* The entry stays QUEUED and unreferenced: nothing frees it meanwhile. */
		struct cfi_table t;
		int rc = fd >= 0 ? cfi_build_fd(fd, &c->opts.build, &t)
				 : cfi_build(path, &c->opts.build, &t);
		if (fd >= 0)
			close(fd);
		free(path);
		/* libdw's allocations of a large file's build: back to the system */
		malloc_trim(0);

		pthread_mutex_lock(&c->mu);
		e->table = t;
		finish(c, e, rc);
		if (c->opts.on_built) {
			pthread_mutex_unlock(&c->mu);
			c->opts.on_built(c->opts.on_built_arg);
			pthread_mutex_lock(&c->mu);
		}
	}
	pthread_mutex_unlock(&c->mu);
	return NULL;
}

struct cfi_cache *cfi_cache_new(const struct cfi_cache_opts *opts)
{
	struct cfi_cache *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	if (opts)
		c->opts = *opts;
	if (!c->opts.budget_bytes)
		c->opts.budget_bytes = CFI_CACHE_DEFAULT_BUDGET;
	if (!c->opts.queue_len)
		c->opts.queue_len = CFI_CACHE_DEFAULT_QUEUE;
	if (!c->opts.retry_ms)
		c->opts.retry_ms = CFI_CACHE_DEFAULT_RETRY_MS;
	if (!c->opts.max_negative)
		c->opts.max_negative = CFI_CACHE_DEFAULT_MAX_NEGATIVE;
	c->queue = calloc(c->opts.queue_len, sizeof(*c->queue));
	if (!c->queue) {
		free(c);
		return NULL;
	}
	pthread_mutex_init(&c->mu, NULL);
	pthread_cond_init(&c->cv, NULL);
	int err = pthread_create(&c->worker, NULL, worker_main, c);
	if (err) {
		pthread_cond_destroy(&c->cv);
		pthread_mutex_destroy(&c->mu);
		free(c->queue);
		free(c);
		errno = err;
		return NULL;
	}
	return c;
}

/* With the lock held: queues a build of e from path or fd (owned by e). */
static int enqueue(struct cfi_cache *c, struct ent *e, const char *path, int fd)
{
	if (c->qlen == c->opts.queue_len) {
		c->st.queue_full++;
		return -1;
	}
	if (fd >= 0) {
		e->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
		if (e->fd < 0)
			return -1;
	} else {
		e->path = strdup(path);
		if (!e->path)
			return -1;
	}
	if (e->state == ENT_FAILED)
		list_unlink(&c->neg, e);
	e->state = ENT_QUEUED;
	c->queue[(c->qhead + c->qlen) % c->opts.queue_len] = e;
	c->qlen++;
	pthread_cond_signal(&c->cv);
	return 0;
}

static const struct cfi_table *get(struct cfi_cache *c, const struct cfi_cache_key *key,
				   const char *path, int fd)
{
	const struct cfi_table *ret = NULL;
	pthread_mutex_lock(&c->mu);
	struct ent *e = lookup(c, key);
	if (e && e->state == ENT_READY) {
		e->refs++;
		list_unlink(&c->lru, e);
		list_push_front(&c->lru, e);
		c->st.hits++;
		ret = &e->table;
		goto out;
	}
	c->st.misses++;
	if (e && (e->state == ENT_QUEUED || now_ns() < e->retry_at))
		goto out;
	if (!e) {
		/* One allocation per file first seen, not per sample. */
		e = calloc(1, sizeof(*e));
		if (!e)
			goto out;
		e->key = *key;
		e->fd = -1;
		unsigned b = key_hash(key);
		e->hnext = c->buckets[b];
		c->buckets[b] = e;
		e->state = ENT_NEW;
	}
	if (enqueue(c, e, path, fd) != 0 && e->state == ENT_NEW)
		ent_remove(c, e); /* never tried: forget it, the next get queues again */
out:
	pthread_mutex_unlock(&c->mu);
	return ret;
}

const struct cfi_table *cfi_cache_get(struct cfi_cache *c, const struct cfi_cache_key *key,
				      const char *path)
{
	if (!path) {
		errno = EINVAL;
		return NULL;
	}
	return get(c, key, path, -1);
}

const struct cfi_table *cfi_cache_get_fd(struct cfi_cache *c, const struct cfi_cache_key *key,
					 int fd)
{
	if (fd < 0) {
		errno = EBADF;
		return NULL;
	}
	return get(c, key, NULL, fd);
}

/* What unref() does with a table nobody holds any more. */
enum unref_then {
	KEEP,	/* stays in the LRU list */
	DROP,	/* freed at once (released) */
	REJECT, /* freed, its key a negative entry (rejected) */
};

/* Gives back a reference to t, then what `then` says. */
static void unref(struct cfi_cache *c, const struct cfi_table *t, enum unref_then then)
{
	if (!t)
		return;
	struct ent *e = (struct ent *)(void *)t;
	pthread_mutex_lock(&c->mu);
	if (e->refs > 0)
		e->refs--;
	if (then != KEEP && e->refs == 0 && e->state == ENT_READY) {
		if (then == DROP) {
			ent_remove(c, e);
			c->st.released++;
		} else {
			list_unlink(&c->lru, e);
			c->st.bytes -= cfi_table_bytes(&e->table);
			c->st.tables--;
			c->st.rejected++;
			fail(c, e); /* frees the rows, files the entry as negative */
		}
	}
	pthread_mutex_unlock(&c->mu);
}

void cfi_cache_put(struct cfi_cache *c, const struct cfi_table *t)
{
	unref(c, t, KEEP);
}

void cfi_cache_release(struct cfi_cache *c, const struct cfi_table *t)
{
	unref(c, t, DROP);
}

void cfi_cache_reject(struct cfi_cache *c, const struct cfi_table *t)
{
	unref(c, t, REJECT);
}

int cfi_cache_failed(struct cfi_cache *c, const struct cfi_cache_key *key)
{
	pthread_mutex_lock(&c->mu);
	struct ent *e = lookup(c, key);
	int failed = e && e->state == ENT_FAILED && now_ns() < e->retry_at;
	pthread_mutex_unlock(&c->mu);
	return failed;
}

void cfi_cache_stats(struct cfi_cache *c, struct cfi_cache_stats *out)
{
	pthread_mutex_lock(&c->mu);
	*out = c->st;
	pthread_mutex_unlock(&c->mu);
}

void cfi_cache_destroy(struct cfi_cache *c)
{
	if (!c)
		return;
	pthread_mutex_lock(&c->mu);
	c->stop = 1;
	pthread_cond_signal(&c->cv);
	pthread_mutex_unlock(&c->mu);
	pthread_join(c->worker, NULL);
	for (unsigned b = 0; b < NBUCKETS; b++)
		while (c->buckets[b])
			ent_remove(c, c->buckets[b]);
	pthread_cond_destroy(&c->cv);
	pthread_mutex_destroy(&c->mu);
	free(c->queue);
	free(c);
}
