/*
 * demo_ledger.c - the payment ledger of the demo service: the wait next to
 * the slow path's CPU (see demo_work.h, ledger_append).
 *
 * A signed payment is appended to the ledger and answered only once the
 * ledger writer has made it durable. The writer is a batch thread
 * (ledger_flush, started with the first append) that writes out every
 * entry appended since its last write in one write of
 * DEMO_LEDGER_WRITE_MS times the work scale; the payment waits for the
 * write that holds its entry, blocked in pthread_cond_wait under
 * ledger_append, off CPU. An entry appended while a write is under way
 * waits for that one to end and for the next. The write stands in for a
 * synchronous write to a slow disk or a replicated log: the thread sleeps,
 * it uses no CPU, so the CPU a request reports (Server-Timing) stays its
 * CPU alone. The writer never carries a request context.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <time.h>

#include "demo_work.h"

#if defined(__clang__)
#define NOINLINE __attribute__((noinline))
#else
#define NOINLINE __attribute__((noipa)) /* no inlining and no renamed clones */
#endif

static struct {
	pthread_mutex_t lock;	/* guards the fields below */
	pthread_cond_t pending; /* the writer waits here for entries */
	pthread_cond_t written; /* payments wait here for their write */
	uint64_t appended;	/* entries appended so far (the last one's number) */
	uint64_t durable;	/* entries written so far */
	uint64_t checksum;	/* of every entry appended */
	int64_t write_ns;	/* one write, wall time */
	pthread_once_t once;	/* starts the writer */
	int start_rc;		/* 0, or why the writer did not start */
} ledger = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER,
	    .once = PTHREAD_ONCE_INIT};

/* One write of the batch: the device's latency, no CPU. */
static NOINLINE void ledger_write(int64_t ns)
{
	struct timespec ts = {.tv_sec = ns / 1000000000, .tv_nsec = ns % 1000000000};

	while (clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, &ts) == EINTR)
		;
}

/* The writer thread: writes out what was appended since its last write. */
static NOINLINE void *ledger_flush(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&ledger.lock);
	for (;;) {
		uint64_t batch;

		while (ledger.durable == ledger.appended)
			pthread_cond_wait(&ledger.pending, &ledger.lock);
		batch = ledger.appended;
		pthread_mutex_unlock(&ledger.lock);
		ledger_write(ledger.write_ns);
		pthread_mutex_lock(&ledger.lock);
		ledger.durable = batch;
		pthread_cond_broadcast(&ledger.written);
	}
	return NULL;
}

static void ledger_start(void)
{
	pthread_t t;

	ledger.start_rc = -pthread_create(&t, NULL, ledger_flush, NULL);
	if (!ledger.start_rc)
		pthread_detach(t);
}

void demo_ledger_init(double scale)
{
	ledger.write_ns = (int64_t)(DEMO_LEDGER_WRITE_MS * scale * 1e6);
}

NOINLINE int ledger_append(const struct demo_order *order, const struct demo_total *total)
{
	uint64_t entry;

	if (ledger.write_ns <= 0)
		return 0;
	pthread_once(&ledger.once, ledger_start);
	if (ledger.start_rc)
		return ledger.start_rc;
	pthread_mutex_lock(&ledger.lock);
	entry = ++ledger.appended;
	ledger.checksum = ledger.checksum * 1099511628211u ^ total->total_cents ^ order->n_items;
	pthread_cond_signal(&ledger.pending);
	while (ledger.durable < entry)
		pthread_cond_wait(&ledger.written, &ledger.lock);
	pthread_mutex_unlock(&ledger.lock);
	return 0;
}
