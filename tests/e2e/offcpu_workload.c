/*
 * offcpu_workload - requests that wait for known durations in known
 * functions, for the agent's off-CPU test (run_agent_offcpu_test.sh).
 *
 * usage: offcpu_workload REQUESTS [TAG [WARMUP_MS]]
 *
 * Publishes its service ("offcpu-workload", traceprof SDK), burns CPU for
 * WARMUP_MS (default 2000: time for the agent to find its thread
 * context), then serves REQUESTS requests one after the other on a worker
 * thread. Each request attaches its own trace id (0ff0c0, the byte TAG
 * (0..255, default 0), then its number; span 00000000000000NN) and waits
 * three times:
 *
 *   wait_sleep  nanosleep for 30 ms;
 *   wait_lock   a mutex that a holder thread keeps for 40 ms;
 *   wait_pipe   a read from a pipe that a writer thread fills after 20 ms;
 *
 * then burns 10 ms of CPU in burn_cpu and detaches. For every wait it
 * prints "trace=HEX fn=NAME us=N": the call's duration, the truth the test
 * compares the stored off-CPU time with. The holder and writer threads,
 * and an idle thread that sleeps 5 ms at a time throughout, carry no
 * request: their waits must not be stored in the requests mode. Exit
 * status 0, 1 on a failure, 2 for bad usage.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "traceprof/sdk.h"

static volatile uint64_t sink; /* keeps the loops */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t hand_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t hand_cv = PTHREAD_COND_INITIALIZER;
static int holding;	  /* the holder has the lock */
static int fds[2];	  /* the pipe */
static volatile int stop; /* the idle thread ends */
static long requests;	  /* to serve */
static int tag;		  /* the trace ids' fourth byte */

static int64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};

	while (nanosleep(&ts, &ts) != 0)
		;
}

static __attribute__((noinline)) void burn_cpu(int ms)
{
	int64_t end = now_us() + ms * 1000;

	while (now_us() < end)
		for (int i = 0; i < 10000; i++)
			sink += (uint64_t)i;
}

static __attribute__((noinline)) void wait_sleep(void)
{
	sleep_ms(30);
	__asm__ volatile("" ::: "memory"); /* not a tail call: the frame stays */
}

static __attribute__((noinline)) void wait_lock(void)
{
	pthread_mutex_lock(&lock);
	pthread_mutex_unlock(&lock);
	__asm__ volatile("" ::: "memory");
}

static __attribute__((noinline)) void wait_pipe(void)
{
	char c;

	if (read(fds[0], &c, 1) != 1)
		perror("offcpu_workload: read");
	__asm__ volatile("" ::: "memory");
}

/* Takes the lock, says so, keeps it 40 ms; once per request. */
static void *holder(void *arg)
{
	(void)arg;
	for (long i = 0; i < requests; i++) {
		pthread_mutex_lock(&hand_mu);
		while (holding != 1)
			pthread_cond_wait(&hand_cv, &hand_mu);
		pthread_mutex_lock(&lock);
		holding = 2;
		pthread_cond_broadcast(&hand_cv);
		pthread_mutex_unlock(&hand_mu);
		sleep_ms(40);
		pthread_mutex_unlock(&lock);
	}
	return NULL;
}

/* Writes a byte 20 ms after being asked; once per request. */
static void *writer(void *arg)
{
	(void)arg;
	for (long i = 0; i < requests; i++) {
		pthread_mutex_lock(&hand_mu);
		while (holding != 3)
			pthread_cond_wait(&hand_cv, &hand_mu);
		holding = 0;
		pthread_mutex_unlock(&hand_mu);
		sleep_ms(20);
		if (write(fds[1], "x", 1) != 1)
			perror("offcpu_workload: write");
	}
	return NULL;
}

static void *idle(void *arg)
{
	(void)arg;
	while (!stop)
		sleep_ms(5);
	return NULL;
}

static void ask(int what)
{
	pthread_mutex_lock(&hand_mu);
	holding = what;
	pthread_cond_broadcast(&hand_cv);
	if (what == 1)
		while (holding != 2)
			pthread_cond_wait(&hand_cv, &hand_mu);
	pthread_mutex_unlock(&hand_mu);
}

static void report(const uint8_t *tid, const char *fn, int64_t us)
{
	char hex[33];

	for (int i = 0; i < 16; i++)
		snprintf(hex + 2 * i, 3, "%02x", tid[i]);
	printf("trace=%s fn=%s us=%lld\n", hex, fn, (long long)us);
}

static void *serve(void *arg)
{
	(void)arg;
	for (long r = 0; r < requests; r++) {
		uint8_t tid[16] = {0x0f, 0xf0, 0xc0, (uint8_t)tag}, sid[8] = {0};
		int64_t t;

		tid[15] = (uint8_t)(r + 1);
		tid[14] = (uint8_t)((r + 1) >> 8);
		sid[7] = (uint8_t)(r + 1);
		if (tp_sdk_attach(tid, sid, 1, NULL, 0)) {
			fprintf(stderr, "offcpu_workload: cannot attach\n");
			exit(1);
		}
		t = now_us();
		wait_sleep();
		report(tid, "wait_sleep", now_us() - t);
		ask(1); /* the holder has the lock when this returns */
		t = now_us();
		wait_lock();
		report(tid, "wait_lock", now_us() - t);
		ask(3);
		t = now_us();
		wait_pipe();
		report(tid, "wait_pipe", now_us() - t);
		burn_cpu(10);
		tp_sdk_detach();
		fflush(stdout);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t th[4];
	long warmup = argc > 3 ? atol(argv[3]) : 2000;

	if (argc < 2 || argc > 4 || (requests = atol(argv[1])) < 1 || requests > 10000 ||
	    (argc > 2 && ((tag = atoi(argv[2])) < 0 || tag > 255)) || warmup < 0 ||
	    warmup > 600000) {
		fprintf(stderr, "usage: offcpu_workload REQUESTS [TAG [WARMUP_MS]]\n");
		return 2;
	}
	if (pipe(fds) || tp_sdk_process_publish("offcpu-workload", NULL, 0)) {
		fprintf(stderr, "offcpu_workload: cannot publish the process context\n");
		return 1;
	}
	burn_cpu((int)warmup);
	if (pthread_create(&th[0], NULL, holder, NULL) ||
	    pthread_create(&th[1], NULL, writer, NULL) ||
	    pthread_create(&th[2], NULL, idle, NULL) || pthread_create(&th[3], NULL, serve, NULL)) {
		fprintf(stderr, "offcpu_workload: cannot start threads\n");
		return 1;
	}
	pthread_join(th[3], NULL);
	pthread_join(th[0], NULL);
	pthread_join(th[1], NULL);
	stop = 1;
	pthread_join(th[2], NULL);
	return 0;
}
