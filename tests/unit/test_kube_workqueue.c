/*
 * test_kube_workqueue: the work queue's client-go semantics: dedup, a key
 * in process is not handed out twice and comes back if added meanwhile,
 * the rate limiter's sequence and forget, add_after ordering, shutdown
 * waking waiters, and producers and consumers at once.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "traceprof/kube.h"

static long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

static void test_dedup_and_processing(void)
{
	struct kube_workqueue *q = kube_workqueue_new();
	const char *k1, *k2;

	kube_workqueue_add(q, "ns/a");
	kube_workqueue_add(q, "ns/b");
	kube_workqueue_add(q, "ns/a");
	CHECK(kube_workqueue_len(q) == 2, "two distinct keys queued, got %zu",
	      kube_workqueue_len(q));
	CHECK(kube_workqueue_get(q, &k1) == 0 && strcmp(k1, "ns/a") == 0, "FIFO order: a first");
	/* a is in process: an add marks it dirty but does not queue it. */
	kube_workqueue_add(q, "ns/a");
	CHECK(kube_workqueue_len(q) == 1, "a not queued while processing");
	CHECK(kube_workqueue_get(q, &k2) == 0 && strcmp(k2, "ns/b") == 0, "then b");
	CHECK(kube_workqueue_len(q) == 0, "nothing ready while a is in process");
	kube_workqueue_done(q, "ns/a");
	CHECK(kube_workqueue_len(q) == 1, "a back after done");
	kube_workqueue_done(q, "ns/b");
	CHECK(kube_workqueue_len(q) == 1, "b not back (not added meanwhile)");
	CHECK(kube_workqueue_get(q, &k1) == 0 && strcmp(k1, "ns/a") == 0, "a again");
	kube_workqueue_done(q, k1);
	CHECK(kube_workqueue_len(q) == 0, "empty");
	kube_workqueue_free(q);
}

static void test_rate_limit(void)
{
	struct kube_workqueue *q = kube_workqueue_new();
	const char *k;
	long t0, dt;

	/* 5, 10, 20, 40 ms: the fourth retry waits at least 40 ms. */
	for (int i = 0; i < 4; i++) {
		t0 = now_ms();
		kube_workqueue_add_rate_limited(q, "x");
		kube_workqueue_get(q, &k);
		dt = now_ms() - t0;
		CHECK(dt >= (5L << i) - 1, "retry %d waited %ld ms, want >= %ld", i, dt, 5L << i);
		CHECK(dt < (5L << i) + 200, "retry %d waited %ld ms, want about %ld", i, dt,
		      5L << i);
		kube_workqueue_done(q, k);
	}
	CHECK(kube_workqueue_num_requeues(q, "x") == 4, "4 requeues, got %d",
	      kube_workqueue_num_requeues(q, "x"));
	kube_workqueue_forget(q, "x");
	CHECK(kube_workqueue_num_requeues(q, "x") == 0, "forget resets");
	t0 = now_ms();
	kube_workqueue_add_rate_limited(q, "x");
	kube_workqueue_get(q, &k);
	dt = now_ms() - t0;
	CHECK(dt < 100, "after forget the base delay again (%ld ms)", dt);
	kube_workqueue_done(q, k);
	/* The cap: after many failures the delay is 1000 s, not more (not
	 * waited for: the key is simply not ready). */
	for (int i = 0; i < 40; i++)
		kube_workqueue_add_rate_limited(q, "y");
	CHECK(kube_workqueue_num_requeues(q, "y") == 40, "40 failures counted");
	CHECK(kube_workqueue_len(q) == 0, "y waits (5 ms, earliest pending time wins)");
	kube_workqueue_free(q);
}

static void test_add_after(void)
{
	struct kube_workqueue *q = kube_workqueue_new();
	const char *k;
	long t0 = now_ms();

	kube_workqueue_add_after(q, "late", 150);
	kube_workqueue_add_after(q, "early", 50);
	kube_workqueue_add_after(q, "late", 400); /* the earlier time stays */
	CHECK(kube_workqueue_len(q) == 0, "nothing ready yet");
	kube_workqueue_get(q, &k);
	CHECK(strcmp(k, "early") == 0 && now_ms() - t0 >= 49, "early first after 50 ms (%s)", k);
	kube_workqueue_done(q, k);
	kube_workqueue_get(q, &k);
	CHECK(strcmp(k, "late") == 0 && now_ms() - t0 >= 149 && now_ms() - t0 < 380,
	      "late after 150 ms, not 400 (%ld)", now_ms() - t0);
	kube_workqueue_done(q, k);
	/* An immediate add beats a pending delay. */
	kube_workqueue_add_after(q, "z", 10000);
	kube_workqueue_add(q, "z");
	CHECK(kube_workqueue_len(q) == 1, "z ready now");
	kube_workqueue_free(q);
}

static void *waiter(void *arg)
{
	const char *k;

	return (void *)(long)kube_workqueue_get(arg, &k);
}

static void test_shutdown(void)
{
	struct kube_workqueue *q = kube_workqueue_new();
	pthread_t t[3];
	const char *k;
	void *rv;

	for (int i = 0; i < 3; i++)
		pthread_create(&t[i], NULL, waiter, q);
	struct timespec ts = {0, 50 * 1000000L};
	nanosleep(&ts, NULL);
	kube_workqueue_shutdown(q);
	for (int i = 0; i < 3; i++) {
		pthread_join(t[i], &rv);
		CHECK((long)rv == -ESHUTDOWN, "waiter %d woken with -ESHUTDOWN", i);
	}
	CHECK(kube_workqueue_add(q, "a") == -ESHUTDOWN, "add refused after shutdown");
	CHECK(kube_workqueue_get(q, &k) == -ESHUTDOWN, "get fails at once");
	kube_workqueue_free(q);
}

#define KEYS	  200
#define PRODUCERS 4
#define CONSUMERS 4
#define ROUNDS	  50

struct stress {
	struct kube_workqueue *q;
	atomic_int busy[KEYS];	    /* consumers inside a key */
	atomic_int processed[KEYS]; /* times a key was processed */
	atomic_int overlap;	    /* a key processed by two at once */
	atomic_int added[KEYS];	    /* last round added */
};

static void *producer(void *arg)
{
	struct stress *s = arg;
	char key[32];

	for (int r = 0; r < ROUNDS; r++) {
		for (int i = 0; i < KEYS; i++) {
			snprintf(key, sizeof(key), "ns/k%d", i);
			atomic_store(&s->added[i], r + 1);
			kube_workqueue_add(s->q, key);
		}
	}
	return NULL;
}

static void *consumer(void *arg)
{
	struct stress *s = arg;
	const char *k;

	while (kube_workqueue_get(s->q, &k) == 0) {
		int i = atoi(k + 4);

		if (atomic_fetch_add(&s->busy[i], 1) != 0)
			atomic_fetch_add(&s->overlap, 1);
		atomic_fetch_add(&s->processed[i], 1);
		atomic_fetch_sub(&s->busy[i], 1);
		kube_workqueue_done(s->q, k);
	}
	return NULL;
}

static void test_stress(void)
{
	static struct stress s;
	pthread_t p[PRODUCERS], c[CONSUMERS];
	int missing = 0;

	s.q = kube_workqueue_new();
	for (int i = 0; i < CONSUMERS; i++)
		pthread_create(&c[i], NULL, consumer, &s);
	for (int i = 0; i < PRODUCERS; i++)
		pthread_create(&p[i], NULL, producer, &s);
	for (int i = 0; i < PRODUCERS; i++)
		pthread_join(p[i], NULL);
	/* Every add happened-before now: each key must be processed after it. */
	for (int i = 0; i < KEYS; i++)
		atomic_store(&s.processed[i], 0);
	{
		char key[32];

		for (int i = 0; i < KEYS; i++) {
			snprintf(key, sizeof(key), "ns/k%d", i);
			kube_workqueue_add(s.q, key);
		}
	}
	for (int spin = 0; spin < 500 && kube_workqueue_len(s.q) > 0; spin++) {
		struct timespec ts = {0, 10 * 1000000L};
		nanosleep(&ts, NULL);
	}
	{
		struct timespec ts = {0, 100 * 1000000L};
		nanosleep(&ts, NULL);
	}
	kube_workqueue_shutdown(s.q);
	for (int i = 0; i < CONSUMERS; i++)
		pthread_join(c[i], NULL);
	for (int i = 0; i < KEYS; i++)
		missing += atomic_load(&s.processed[i]) == 0;
	CHECK(missing == 0, "every key processed after its last add (%d missing)", missing);
	CHECK(atomic_load(&s.overlap) == 0, "never two consumers on one key (%d)",
	      atomic_load(&s.overlap));
	kube_workqueue_free(s.q);
}

int main(void)
{
	test_dedup_and_processing();
	test_rate_limit();
	test_add_after();
	test_shutdown();
	test_stress();
	return check_done();
}
