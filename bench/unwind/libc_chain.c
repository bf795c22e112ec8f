/*
 * A C program without frame pointers whose hot path is libc: main ->
 * chain_f -> chain_g -> qsort_r (libc's qsort is a tail call into it,
 * which calls back into cmp_record), memcpy and snprintf. The unwinding
 * test checks that the agent's flame graph holds the whole chain.
 * usage: unwind_libc [SECONDS] (default 10)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NREC 4096

struct record {
	uint64_t key;
	char name[24];
};

static struct record src[NREC], dst[NREC];
static volatile size_t sink;

static int cmp_record(const void *a, const void *b)
{
	const struct record *x = a, *y = b;

	return x->key < y->key ? -1 : x->key > y->key;
}

static __attribute__((noipa)) size_t chain_g(uint64_t seed)
{
	char line[64];
	size_t n = 0;

	memcpy(dst, src, sizeof(dst));
	for (int i = 0; i < NREC; i++)
		dst[i].key ^= seed * (uint64_t)(i + 1);
	qsort(dst, NREC, sizeof(dst[0]), cmp_record);
	for (int i = 0; i < NREC; i += 4)
		n += (size_t)snprintf(line, sizeof(line), "%s=%llu", dst[i].name,
				      (unsigned long long)dst[i].key);
	return n;
}

static __attribute__((noipa)) size_t chain_f(uint64_t seed)
{
	return chain_g(seed) + chain_g(seed + 1);
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
	uint64_t seed = 1;
	size_t total = 0;

	for (int i = 0; i < NREC; i++) {
		src[i].key = (uint64_t)i * 2654435761u;
		snprintf(src[i].name, sizeof(src[i].name), "rec%d", i);
	}
	while (now_s() < end)
		total += chain_f(seed++);
	sink = total;
	printf("rounds: %llu\n", (unsigned long long)seed);
	return 0;
}
