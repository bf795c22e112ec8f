/*
 * symbols_workload.c - a CPU loop whose functions the symbols test names
 * after the fact: built -O2 -g, stripped, sampled, then named from its
 * debug file (run_symbols_add_test.sh). Each function keeps its own frame
 * (noinline) and its own lines, so the test knows what every frame must read.
 * usage: symbols_workload SECONDS
 * (-DSYMTEST_OTHER_BUILD makes another build: other code, another build id)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static volatile uint64_t sink;

__attribute__((noinline)) static uint64_t symtest_leaf(uint64_t x)
{
	for (int i = 0; i < 4096; i++)
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
	return x;
}

__attribute__((noinline)) static uint64_t symtest_middle(uint64_t x)
{
	for (int i = 0; i < 64; i++)
		x ^= symtest_leaf(x + (uint64_t)i);
	return x;
}

__attribute__((noinline)) static void symtest_outer(double seconds)
{
	struct timespec t0, t;
	uint64_t x = 1;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		x = symtest_middle(x);
		sink = x;
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while ((double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) / 1e9 < seconds);
}

int main(int argc, char **argv)
{
	symtest_outer(argc > 1 ? atof(argv[1]) : 2.0);
#ifdef SYMTEST_OTHER_BUILD
	printf("other build: ");
#endif
	printf("%llu\n", (unsigned long long)sink);
	return 0;
}
