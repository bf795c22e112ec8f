/*
 * otlp_forward.c - see otlp_forward.h.
 *
 * A FIFO of copied exports under one mutex; the thread pops the oldest and
 * makes one blocking unary call on its own completion queue (pluck), never
 * holding the mutex across it.
 */
#include "otlp_forward.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <grpc/byte_buffer.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>

#include "otlp_grpc.h"
#include "traceprof/log.h"

#define CALL_DEADLINE_S 10

struct item {
	struct item *next; /* newer export */
	size_t len;	   /* bytes in data */
	uint8_t data[];	   /* the export, unchanged */
};

struct otlp_forward {
	char *target;			 /* upstream host:port */
	size_t max_bytes;		 /* queue bound */
	grpc_channel *channel;		 /* to the upstream */
	pthread_t thread;		 /* sender */
	pthread_mutex_t mu;		 /* guards below */
	pthread_cond_t cv;		 /* work or stop */
	struct item *head, *tail;	 /* queue, oldest first */
	bool stopping;			 /* stop requested */
	struct timespec deadline;	 /* CLOCK_REALTIME end of sending after stop */
	bool failing;			 /* in a failure episode (logged once) */
	struct otlp_forward_stats stats; /* counters */
};

/* Frees what otlp_forward_start set up (the thread is not running). */
static void release(struct otlp_forward *f)
{
	grpc_channel_destroy(f->channel);
	grpc_shutdown();
	pthread_cond_destroy(&f->cv);
	pthread_mutex_destroy(&f->mu);
	free(f->target);
	free(f);
}

/* One Export call; true when the upstream answered OK. */
static bool send_one(struct otlp_forward *f, const struct item *it)
{
	grpc_completion_queue *cq = grpc_completion_queue_create_for_pluck(NULL);
	struct grpc_unary_answer ans;
	bool ok, first;

	otlp_grpc_call(f->channel, cq, it->data, it->len, CALL_DEADLINE_S, &ans);
	ok = ans.code == GRPC_STATUS_OK;
	if (!ok) {
		pthread_mutex_lock(&f->mu);
		first = !f->failing;
		f->failing = true;
		pthread_mutex_unlock(&f->mu);
		if (first)
			log_warn(
			    "otlp forward: upstream %s refused an export status=%d error=\"%s\"",
			    f->target, (int)ans.code, ans.details);
	}
	if (ans.resp)
		grpc_byte_buffer_destroy(ans.resp);
	grpc_completion_queue_shutdown(cq);
	grpc_completion_queue_destroy(cq);
	return ok;
}

static bool past(const struct timespec *t)
{
	struct timespec now;

	clock_gettime(CLOCK_REALTIME, &now);
	return now.tv_sec > t->tv_sec || (now.tv_sec == t->tv_sec && now.tv_nsec >= t->tv_nsec);
}

static void *run(void *arg)
{
	struct otlp_forward *f = arg;

	pthread_setname_np(pthread_self(), "tp-otlp-fwd");
	pthread_mutex_lock(&f->mu);
	for (;;) {
		struct item *it;
		bool ok;

		while (!f->head && !f->stopping)
			pthread_cond_wait(&f->cv, &f->mu);
		if (!f->head || (f->stopping && past(&f->deadline)))
			break;
		it = f->head;
		f->head = it->next;
		if (!f->head)
			f->tail = NULL;
		f->stats.queue_bytes -= it->len;
		pthread_mutex_unlock(&f->mu);
		ok = send_one(f, it);
		free(it);
		pthread_mutex_lock(&f->mu);
		if (ok) {
			f->stats.sent++;
			if (f->failing)
				log_info("otlp forward: upstream %s accepts exports again",
					 f->target);
			f->failing = false;
		} else {
			f->stats.failed++;
		}
	}
	pthread_mutex_unlock(&f->mu);
	return NULL;
}

struct otlp_forward *otlp_forward_start(const char *target, size_t max_queue_bytes)
{
	struct otlp_forward *f;
	grpc_channel_credentials *creds;
	int rc;

	if (!target || !*target) {
		errno = EINVAL;
		return NULL;
	}
	f = calloc(1, sizeof(*f));
	if (!f || !(f->target = strdup(target))) {
		free(f);
		errno = ENOMEM;
		return NULL;
	}
	f->max_bytes = max_queue_bytes ? max_queue_bytes : OTLP_FORWARD_QUEUE_BYTES;
	grpc_init();
	creds = grpc_insecure_credentials_create();
	f->channel = grpc_unary_channel(target, creds, NULL);
	grpc_channel_credentials_release(creds);
	pthread_mutex_init(&f->mu, NULL);
	pthread_cond_init(&f->cv, NULL);
	rc = pthread_create(&f->thread, NULL, run, f);
	if (rc) {
		release(f);
		errno = rc;
		return NULL;
	}
	log_info("otlp forward: exports go on to %s", target);
	return f;
}

int otlp_forward_submit(struct otlp_forward *f, const void *buf, size_t len)
{
	struct item *it, *victims = NULL;

	if (len > f->max_bytes) {
		pthread_mutex_lock(&f->mu);
		f->stats.dropped++;
		pthread_mutex_unlock(&f->mu);
		return -ENOBUFS;
	}
	it = malloc(sizeof(*it) + len);
	if (!it) {
		pthread_mutex_lock(&f->mu);
		f->stats.dropped++;
		pthread_mutex_unlock(&f->mu);
		return -ENOMEM;
	}
	it->next = NULL;
	it->len = len;
	memcpy(it->data, buf, len);
	pthread_mutex_lock(&f->mu);
	if (f->stopping) {
		f->stats.dropped++;
		pthread_mutex_unlock(&f->mu);
		free(it);
		return -ESHUTDOWN;
	}
	while (f->head && f->stats.queue_bytes + len > f->max_bytes) {
		struct item *v = f->head;

		f->head = v->next;
		if (!f->head)
			f->tail = NULL;
		f->stats.queue_bytes -= v->len;
		f->stats.dropped++;
		v->next = victims;
		victims = v;
	}
	if (f->tail)
		f->tail->next = it;
	else
		f->head = it;
	f->tail = it;
	f->stats.queue_bytes += len;
	f->stats.submitted++;
	pthread_cond_signal(&f->cv);
	pthread_mutex_unlock(&f->mu);
	while (victims) {
		it = victims;
		victims = it->next;
		free(it);
	}
	return 0;
}

void otlp_forward_get_stats(struct otlp_forward *f, struct otlp_forward_stats *out)
{
	pthread_mutex_lock(&f->mu);
	*out = f->stats;
	pthread_mutex_unlock(&f->mu);
}

void otlp_forward_stop(struct otlp_forward *f, int timeout_ms, struct otlp_forward_stats *final)
{
	if (!f)
		return;
	pthread_mutex_lock(&f->mu);
	f->stopping = true;
	clock_gettime(CLOCK_REALTIME, &f->deadline);
	f->deadline.tv_sec += timeout_ms / 1000;
	f->deadline.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
	if (f->deadline.tv_nsec >= 1000000000L) {
		f->deadline.tv_sec++;
		f->deadline.tv_nsec -= 1000000000L;
	}
	pthread_cond_signal(&f->cv);
	pthread_mutex_unlock(&f->mu);
	pthread_join(f->thread, NULL);
	while (f->head) {
		struct item *it = f->head;

		f->head = it->next;
		f->stats.dropped++;
		f->stats.queue_bytes -= it->len;
		free(it);
	}
	if (final)
		*final = f->stats;
	release(f);
}
