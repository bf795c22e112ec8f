/*
 * raise_child.c - a workload linked with the static SDK, for test_raise:
 * waits for one byte on stdin, starts a background thread that burns CPU
 * outside any request and writes that thread's id to stdout, then attaches
 * the trace and span ids given as traceparent in argv[1] on the main
 * thread (registering it, which the sampler's uprobe observes) and burns
 * CPU inside that request until killed.
 */
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "traceprof/sdk.h"

static volatile uint64_t sink; /* keeps the loops */

static __attribute__((noinline)) void raise_child_spin(void)
{
	for (uint64_t i = 0; i < 10000000; i++)
		sink += i;
}

static void *background(void *arg)
{
	pid_t tid = gettid();

	(void)arg;
	if (write(1, &tid, sizeof(tid)) != sizeof(tid))
		_exit(5);
	for (;;)
		raise_child_spin();
	return NULL;
}

int main(int argc, char **argv)
{
	uint8_t tid[16], sid[8], flags;
	pthread_t bg;
	char go;

	if (argc != 2 || tp_sdk_traceparent_parse(argv[1], strlen(argv[1]), tid, sid, &flags))
		return 2;
	if (read(0, &go, 1) != 1)
		return 3;
	if (pthread_create(&bg, NULL, background, NULL))
		return 4;
	if (tp_sdk_attach(tid, sid, flags, NULL, 0))
		return 4;
	for (;;)
		raise_child_spin();
}
