/*
 * unwind_workload - a program built the way real services are (-O2, no
 * frame pointers) whose time goes where test_unwind_walk looks for it:
 *
 *   libc:   main -> work_outer -> qsort (glibc's msort_with_tmp) -> by_value (a
 *           comparator called from inside libc, itself without frame
 *           pointers), so a stack crosses our code, libc's and ours again;
 *   signal: main -> spin_main, with a SIGPROF timer whose handler runs
 *           handler_outer -> handler_inner for most of the time: stacks go
 *           through the kernel's signal frame (glibc's __restore_rt);
 *   deep:   recursion 300 frames deep, deeper than the sampler keeps;
 *   vdso:   main -> clock_loop -> clock_gettime, most of the time in the
 *           kernel's vdso (its table is built from the agent's own vdso).
 *
 * Runs until killed. Prints "ready" on stdout once running.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static volatile unsigned long sink;

static int by_value(const void *a, const void *b)
{
	unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;

	for (int i = 0; i < 40; i++) /* make the comparator where the time goes */
		sink += (x ^ (unsigned)i) * 2654435761u;
	return (x > y) - (x < y);
}

__attribute__((noinline)) static void work_inner(unsigned *v, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		v[i] = (unsigned)(i * 2654435761u) ^ seed;
	qsort(v, n, sizeof(*v), by_value);
}

__attribute__((noinline)) static void work_outer(unsigned *v, size_t n)
{
	for (unsigned seed = 0;; seed++) {
		work_inner(v, n, seed);
		sink += v[n / 2];
	}
}

__attribute__((noinline)) static void handler_inner(void)
{
	for (int i = 0; i < 20000000; i++)
		sink += (unsigned long)i * 7;
}

__attribute__((noinline)) static void handler_outer(int sig)
{
	(void)sig;
	handler_inner();
	sink++;
}

__attribute__((noinline)) static void spin_main(void)
{
	for (;;)
		sink += 3;
}

__attribute__((noinline)) static void clock_loop(void)
{
	struct timespec ts;

	for (;;) {
		clock_gettime(CLOCK_MONOTONIC, &ts);
		sink += (unsigned long)ts.tv_nsec;
	}
}

__attribute__((noinline)) static unsigned long deep(int n)
{
	volatile unsigned long here = (unsigned long)n; /* a frame of its own, not a loop */

	if (n == 0) {
		for (;;)
			sink++;
	}
	return deep(n - 1) * 3 + here;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "libc";

	if (write(1, "ready\n", 6) != 6)
		return 1;
	if (!strcmp(mode, "signal")) {
		struct sigaction sa;
		struct itimerval it = {{0, 20000}, {0, 20000}};

		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = handler_outer;
		sigaction(SIGPROF, &sa, NULL);
		setitimer(ITIMER_PROF, &it, NULL);
		spin_main();
	} else if (!strcmp(mode, "vdso")) {
		clock_loop();
	} else if (!strcmp(mode, "deep")) {
		sink = deep(300);
	} else {
		static unsigned v[4096];

		work_outer(v, sizeof(v) / sizeof(v[0]));
	}
	return 0;
}
