/*
 * sampler_sdk_child.c - a workload linked with the static SDK, for
 * test_sampler: waits for one byte on stdin, attaches the trace and span ids
 * given as traceparent in argv[1] (registering the thread, which the
 * agent's uprobe observes), then burns CPU until killed.
 */
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "traceprof/sdk.h"

static volatile uint64_t sink; /* keeps the loop */

static __attribute__((noinline)) void sdk_child_spin(void)
{
	for (uint64_t i = 0; i < 100000000; i++)
		sink += i;
}

int main(int argc, char **argv)
{
	uint8_t tid[16], sid[8], flags;
	char go;

	if (argc != 2 || tp_sdk_traceparent_parse(argv[1], strlen(argv[1]), tid, sid, &flags))
		return 2;
	if (read(0, &go, 1) != 1)
		return 3;
	if (tp_sdk_attach(tid, sid, flags, NULL, 0))
		return 4;
	for (;;)
		sdk_child_spin();
}
