/*
 * A program that spends most of its time in a signal handler: SIGPROF
 * every millisecond of CPU (setitimer ITIMER_PROF), and a handler that
 * hashes for about half a millisecond three frames deep. Built without
 * frame pointers: a whole stack of a sample in the handler goes through
 * the kernel's signal frame (libc's __restore_rt) back to main_spin and
 * main. usage: unwind_sigwork [SECONDS] (default 10)
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

static volatile uint64_t sink;
static volatile sig_atomic_t handled;

static __attribute__((noipa)) uint64_t sig_hash(uint64_t seed, int rounds)
{
	uint64_t h = seed ^ 0x9e3779b97f4a7c15ULL;

	for (int i = 0; i < rounds; i++) {
		h ^= h >> 33;
		h *= 0xff51afd7ed558ccdULL;
		h ^= h >> 29;
		h += (uint64_t)i;
	}
	return h;
}

static __attribute__((noipa)) uint64_t sig_level2(uint64_t seed)
{
	return sig_hash(seed, 400000) + 1;
}

static __attribute__((noipa)) uint64_t sig_level1(uint64_t seed)
{
	return sig_level2(seed * 3) ^ seed;
}

static __attribute__((noipa)) void on_sigprof(int sig)
{
	sink += sig_level1((uint64_t)sig + sink);
	handled = handled + 1;
}

static __attribute__((noipa)) uint64_t main_spin(uint64_t x)
{
	for (int i = 0; i < 100000; i++)
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
	return x;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	double seconds = argc > 1 ? atof(argv[1]) : 10, end = now_s() + seconds;
	struct itimerval it = {.it_interval = {0, 1000}, .it_value = {0, 1000}};
	struct sigaction sa;
	uint64_t x = 1;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_sigprof;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGPROF, &sa, NULL);
	setitimer(ITIMER_PROF, &it, NULL);
	while (now_s() < end)
		x = main_spin(x);
	printf("signals handled: %d (%llu)\n", (int)handled, (unsigned long long)(x ^ sink));
	return 0;
}
