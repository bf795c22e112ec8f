/*
 * dlopen_workload - a process that loads a thread-context writer library
 * late, for the late-dlopen test (run_agent_dlopen_test.sh) and its
 * benchmark (bench/bench_dlopen.sh).
 *
 * usage: dlopen_workload LIBRARY DELAY_S TAG BURN_S [CYCLES]
 *
 * Sleeps DELAY_S seconds after it starts (the agent sees it at its exec),
 * then loads LIBRARY (dlopen_writer.c) and runs dlopen_writer_run(TAG, t0,
 * BURN_S) on its main thread, t0 being the time just before dlopen: its
 * samples carry trace ids that say how long after t0 they were taken.
 * Prints "dlopen_unix_us=N" (the wall-clock time of t0) and
 * "dlopen_us=N" (how long dlopen took). TAG is hex, up to 16 digits.
 * With CYCLES, it then closes the library and opens and closes it again
 * CYCLES times as fast as it can (a dlopen storm: four loader rendezvous
 * calls a cycle) and prints "cycles_per_s=N".
 * Exit status 0, 1 when the library cannot be loaded, 2 for bad usage.
 */
#include <dlfcn.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

typedef void (*run_fn)(uint64_t tag, uint64_t t0, double seconds);

static uint64_t clock_ns(clockid_t clk)
{
	struct timespec ts;

	clock_gettime(clk, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int main(int argc, char **argv)
{
	double delay, burn;
	uint64_t tag, t0, wall0, t1;
	char *end;
	void *h;
	run_fn run;

	long cycles = 0;

	if (argc != 5 && argc != 6) {
		fprintf(stderr, "usage: dlopen_workload LIBRARY DELAY_S TAG BURN_S [CYCLES]\n");
		return 2;
	}
	delay = strtod(argv[2], &end);
	if (*end || delay < 0 || delay > 3600)
		return 2;
	tag = strtoull(argv[3], &end, 16);
	if (*end)
		return 2;
	burn = strtod(argv[4], &end);
	if (*end || burn <= 0 || burn > 3600)
		return 2;
	if (argc == 6 && ((cycles = strtol(argv[5], &end, 10)) < 0 || *end))
		return 2;
	usleep((useconds_t)(delay * 1e6));
	t0 = clock_ns(CLOCK_MONOTONIC);
	wall0 = clock_ns(CLOCK_REALTIME);
	h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	t1 = clock_ns(CLOCK_MONOTONIC);
	if (!h) {
		fprintf(stderr, "dlopen_workload: %s\n", dlerror());
		return 1;
	}
	run = (run_fn)dlsym(h, "dlopen_writer_run");
	if (!run) {
		fprintf(stderr, "dlopen_workload: %s\n", dlerror());
		return 1;
	}
	printf("dlopen_unix_us=%" PRIu64 "\ndlopen_us=%" PRIu64 "\n", wall0 / 1000,
	       (t1 - t0) / 1000);
	fflush(stdout);
	run(tag, t0, burn);
	if (!cycles)
		return 0;
	dlclose(h);
	t0 = clock_ns(CLOCK_MONOTONIC);
	for (long i = 0; i < cycles; i++) {
		h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
		if (!h || dlclose(h) != 0)
			return 1;
	}
	t1 = clock_ns(CLOCK_MONOTONIC);
	printf("cycles_per_s=%.0f\n", (double)cycles * 1e9 / (double)(t1 - t0 + 1));
	return 0;
}
