/*
 * pingpong - a context-switch-heavy workload for the off-CPU capture
 * benchmark (bench/offcpu_cost.sh): pairs of threads hand a token back and
 * forth, over two pipes (even pairs) or two futex words (odd pairs), so
 * each hand-over blocks one thread and wakes the other. Every thread
 * publishes a request context (an OTEP 4947 record through static TLS,
 * as a traceprof-instrumented server would), so capture of request
 * threads sees all of them.
 *
 *   pingpong [--pairs N] [--seconds S] [--work N] [--untagged] [--wait]
 *
 * --work N: N iterations of arithmetic per hand-over and side (0: none),
 * to set the switch rate (about 50,000 switches/s: --work 20000 on the
 * 2-vCPU machine of bench/results.md).
 *
 * Prints "tls_offset=N" first (the TLS location a loader needs), waits for
 * a line on stdin with --wait, runs, then prints one line:
 * "handoffs_per_s=X switches_per_s=Y" (switches: the process's voluntary
 * and involuntary context switches, getrusage).
 */
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <asm/prctl.h>
#endif

#define MAX_PAIRS 64

struct record {
	uint8_t trace_id[16];
	uint8_t span_id[8];
	uint8_t valid;
	uint8_t trace_flags;
	uint16_t attrs_size;
} __attribute__((packed));

struct pair {
	int id;
	int p1[2], p2[2];	 /* pipes: A -> B, B -> A */
	volatile uint32_t turn;	 /* futex pairs: 0 A's turn, 1 B's */
	volatile uint64_t count; /* hand-overs */
};

static __thread void *ctx_slot;
static __thread struct record my_rec;
static volatile int stop;
static int tagged = 1;
static long work;
static volatile uint64_t sink;

static void do_work(void)
{
	uint64_t x = sink;

	for (long i = 0; i < work; i++)
		x = x * 6364136223846793005ull + 1442695040888963407ull;
	sink = x;
}

static void publish(int id)
{
	if (!tagged)
		return;
	memset(&my_rec, 0, sizeof(my_rec));
	my_rec.trace_id[0] = 0x7e;
	my_rec.trace_id[15] = (uint8_t)id;
	my_rec.span_id[7] = 1;
	my_rec.trace_flags = 1;
	my_rec.valid = 1;
	*(void *volatile *)&ctx_slot = &my_rec;
}

static long futex(volatile uint32_t *uaddr, int op, uint32_t val)
{
	return syscall(SYS_futex, uaddr, op, val, NULL, NULL, 0);
}

/* Waits until turn == me, then gives it to the other. */
static void futex_pass(struct pair *p, uint32_t me)
{
	uint32_t t;

	while ((t = __atomic_load_n(&p->turn, __ATOMIC_ACQUIRE)) != me && !stop)
		futex(&p->turn, FUTEX_WAIT_PRIVATE, t);
	__atomic_store_n(&p->turn, !me, __ATOMIC_RELEASE);
	futex(&p->turn, FUTEX_WAKE_PRIVATE, 1);
}

static void *side(struct pair *p, int b)
{
	char c = 'x';

	publish(p->id);
	while (!stop) {
		do_work();
		if (p->id % 2 == 0) {
			if (b) {
				if (read(p->p1[0], &c, 1) != 1 || write(p->p2[1], &c, 1) != 1)
					break;
			} else {
				if (write(p->p1[1], &c, 1) != 1 || read(p->p2[0], &c, 1) != 1)
					break;
			}
		} else {
			futex_pass(p, (uint32_t)b);
		}
		if (!b)
			p->count++;
	}
	return NULL;
}

static void *side_a(void *arg)
{
	return side(arg, 0);
}

static void *side_b(void *arg)
{
	return side(arg, 1);
}

static uint64_t thread_pointer(void)
{
#if defined(__x86_64__)
	unsigned long fs = 0;

	syscall(SYS_arch_prctl, ARCH_GET_FS, &fs);
	return fs;
#else
	return (uint64_t)__builtin_thread_pointer();
#endif
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	static struct pair pairs[MAX_PAIRS];
	pthread_t th[2 * MAX_PAIRS];
	int npairs = 2, wait = 0;
	double seconds = 3, t0, t1;
	struct rusage r0, r1;
	uint64_t total = 0;
	char line[16];

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--pairs") && i + 1 < argc)
			npairs = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
			seconds = atof(argv[++i]);
		else if (!strcmp(argv[i], "--work") && i + 1 < argc)
			work = atol(argv[++i]);
		else if (!strcmp(argv[i], "--untagged"))
			tagged = 0;
		else if (!strcmp(argv[i], "--wait"))
			wait = 1;
		else {
			fprintf(stderr, "usage: pingpong [--pairs N] [--seconds S] [--work N] "
					"[--untagged] [--wait]\n");
			return 2;
		}
	}
	if (npairs < 1 || npairs > MAX_PAIRS || seconds <= 0) {
		fprintf(stderr, "pingpong: pairs 1..%d, seconds > 0\n", MAX_PAIRS);
		return 2;
	}
	printf("tls_offset=%lld\n", (long long)((uint64_t)&ctx_slot - thread_pointer()));
	fflush(stdout);
	if (wait && !fgets(line, sizeof(line), stdin))
		return 1;
	getrusage(RUSAGE_SELF, &r0);
	t0 = now_s();
	for (int i = 0; i < npairs; i++) {
		pairs[i].id = i;
		if (pipe(pairs[i].p1) || pipe(pairs[i].p2))
			return 1;
		pthread_create(&th[2 * i], NULL, side_a, &pairs[i]);
		pthread_create(&th[2 * i + 1], NULL, side_b, &pairs[i]);
	}
	while (now_s() - t0 < seconds)
		usleep(10000);
	stop = 1;
	for (int i = 0; i < npairs; i++) {
		total += pairs[i].count;
		/* wake whoever waits, so the threads see stop */
		__atomic_store_n(&pairs[i].turn, 2, __ATOMIC_RELEASE);
		futex(&pairs[i].turn, FUTEX_WAKE_PRIVATE, 2);
		close(pairs[i].p1[1]);
		close(pairs[i].p2[1]);
	}
	t1 = now_s();
	getrusage(RUSAGE_SELF, &r1);
	for (int i = 0; i < 2 * npairs; i++)
		pthread_join(th[i], NULL);
	printf("handoffs_per_s=%.0f switches_per_s=%.0f\n", total / (t1 - t0),
	       ((r1.ru_nvcsw - r0.ru_nvcsw) + (r1.ru_nivcsw - r0.ru_nivcsw)) / (t1 - t0));
	fflush(stdout);
	return 0;
}
