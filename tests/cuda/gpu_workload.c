/*
 * gpu_workload - requests that launch GPU kernels of known GPU time on
 * the stand-in CUDA runtime (standin_cuda.h), each request with its own
 * thread context (traceprof SDK): the truth for the GPU tests
 * (docs/gpu.md, "Tests without a GPU").
 *
 * Run it with CUDA_INJECTION64_PATH naming libtraceprof-cuda (the test
 * build), as a CUDA application would be. --help lists the options.
 *
 * Per request it prints the truth, one line per kernel name and one in
 * all (GPU time in ns, exact: the stand-in's kernels take exactly their
 * duration):
 *   kernel trace=HEX count=N gpu_ns=G fn=LAUNCHER name=KERNEL
 *   request trace=HEX kernels=N launches=L gpu_ns=G
 * fn is the workload's function that made the launch call: the frame
 * right below the kernel's in a GPU flame graph. KERNEL is the name as a
 * profiler should show it (C++ kernels demangled).
 */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "standin_cuda.h"
#include "traceprof/sdk.h"

#define MAX_KERNELS 64

static long n_requests = 20, n_threads = 2, n_kernels = 4, kernel_us = 200, slow_every;
static long flood_s, flood_rate = 100000, bench_n, settle_ms = 1500, linger_ms = 1000;
static int use_graph;
static long next_request;
static pthread_mutex_t out_mu = PTHREAD_MUTEX_INITIALIZER;

/* The kernels: symbol names as a compiler emits them, and the names a profiler shows. */
struct kdef {
	const char *symbol;
	const char *shown;
	const char *launcher;
};
static const struct kdef K_GEMM = {"standin_gemm", "standin_gemm", "gemm_step"};
static const struct kdef K_ATTN = {"_Z9attentionPKfS0_Pfi",
				   "attention(float const*, float const*, float*, int)",
				   "attention_step"};
static const struct kdef K_SOFTMAX = {"_ZN6layers7softmaxEv", "layers::softmax()", "softmax_step"};
static const struct kdef K_GRAPH[3] = {{"graph_norm", "graph_norm", "graph_step"},
				       {"graph_proj", "graph_proj", "graph_step"},
				       {"graph_add", "graph_add", "graph_step"}};

struct tally {
	const struct kdef *k;
	unsigned count;
	uint64_t ns;
};

struct req {
	struct tally t[MAX_KERNELS];
	unsigned nt;
	unsigned launches;
};

static void tally(struct req *r, const struct kdef *k, uint64_t ns)
{
	unsigned i;

	for (i = 0; i < r->nt && r->t[i].k != k; i++)
		;
	if (i == r->nt) {
		if (r->nt == MAX_KERNELS)
			return;
		r->t[r->nt++] = (struct tally){.k = k};
	}
	r->t[i].count++;
	r->t[i].ns += ns;
}

/* Each launcher is a function of its own: the frame under the kernel's. */
__attribute__((noinline)) static void gemm_step(struct req *r, struct standin_kernel *k)
{
	if (cudaLaunchKernel(k, 1) == 0)
		tally(r, &K_GEMM, k->duration_ns);
	r->launches++;
}

__attribute__((noinline)) static void attention_step(struct req *r, struct standin_kernel *k)
{
	if (cudaLaunchKernelExC(k, 1) == 0)
		tally(r, &K_ATTN, k->duration_ns);
	r->launches++;
}

__attribute__((noinline)) static void softmax_step(struct req *r, struct standin_kernel *k)
{
	if (cuLaunchKernel(k, 2) == 0)
		tally(r, &K_SOFTMAX, k->duration_ns);
	r->launches++;
}

__attribute__((noinline)) static void graph_step(struct req *r, struct standin_kernel *ks)
{
	struct standin_graph g = {.n = 3, .kernels = ks};

	if (cudaGraphLaunch(&g, 1) == 0)
		for (unsigned i = 0; i < 3; i++)
			tally(r, &K_GRAPH[i], ks[i].duration_ns);
	r->launches++;
}

static void host_fn(void *arg)
{
	(void)arg;
}

static void hex(const uint8_t *b, size_t n, char *out)
{
	for (size_t i = 0; i < n; i++)
		snprintf(out + 2 * i, 3, "%02x", b[i]);
}

static void serve(long i)
{
	struct standin_kernel ks[MAX_KERNELS], gk[3];
	struct req r = {.nt = 0};
	uint8_t tid[16], sid[8];
	char th[33];
	uint64_t u = (uint64_t)kernel_us * 1000u, total = 0;
	unsigned kernels = 0;

	tp_sdk_new_trace_id(tid);
	tp_sdk_new_span_id(sid);
	if (tp_sdk_attach(tid, sid, 1, NULL, 0) != 0) {
		fprintf(stderr, "gpu_workload: cannot attach a context\n");
		exit(1);
	}
	for (long j = 0; j < n_kernels && j < MAX_KERNELS; j++) {
		ks[j].duration_ns = u * (1 + (uint64_t)((i + j) % 3));
		switch (j % 3) {
		case 0:
			ks[j].name = K_GEMM.symbol;
			gemm_step(&r, &ks[j]);
			break;
		case 1:
			ks[j].name = K_ATTN.symbol;
			if (slow_every && i % slow_every == slow_every - 1)
				ks[j].duration_ns *= 4;
			attention_step(&r, &ks[j]);
			break;
		default:
			ks[j].name = K_SOFTMAX.symbol;
			ks[j].duration_ns = u / 2;
			softmax_step(&r, &ks[j]);
		}
	}
	if (use_graph) {
		for (unsigned g = 0; g < 3; g++)
			gk[g] = (struct standin_kernel){.name = K_GRAPH[g].symbol,
							.duration_ns = u / 4 * (g + 1)};
		graph_step(&r, gk);
	}
	cudaLaunchHostFunc(1, host_fn, NULL); /* no kernel: must not count */
	cudaDeviceSynchronize();
	tp_sdk_detach();
	hex(tid, 16, th);
	pthread_mutex_lock(&out_mu);
	for (unsigned t = 0; t < r.nt; t++) {
		printf("kernel trace=%s count=%u gpu_ns=%llu fn=%s name=%s\n", th, r.t[t].count,
		       (unsigned long long)r.t[t].ns, r.t[t].k->launcher, r.t[t].k->shown);
		kernels += r.t[t].count;
		total += r.t[t].ns;
	}
	printf("request trace=%s kernels=%u launches=%u gpu_ns=%llu\n", th, kernels, r.launches,
	       (unsigned long long)total);
	fflush(stdout);
	pthread_mutex_unlock(&out_mu);
}

static void *worker(void *arg)
{
	long i;

	(void)arg;
	while ((i = __atomic_fetch_add(&next_request, 1, __ATOMIC_RELAXED)) < n_requests)
		serve(i);
	return NULL;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

__attribute__((noinline)) static void flood_step(struct standin_kernel *k)
{
	cudaLaunchKernel(k, 3);
}

/*
 * Launches zero-time kernels at flood_rate a second (or as fast as it
 * can, if slower) for flood_s seconds, outside any request.
 */
static void flood(void)
{
	struct standin_kernel k = {.name = "flood_kernel", .duration_ns = 0};
	double t0 = now_s(), t;
	unsigned long n = 0;

	do {
		for (int i = 0; i < 100; i++)
			flood_step(&k);
		n += 100;
		t = now_s();
		if ((double)n / (double)flood_rate > t - t0)
			usleep((useconds_t)(((double)n / (double)flood_rate - (t - t0)) * 1e6));
		t = now_s();
	} while (t - t0 < (double)flood_s);
	cudaDeviceSynchronize();
	printf("flood launches=%lu seconds=%.3f per_s=%.0f\n", n, t - t0, (double)n / (t - t0));
}

/* The application thread's time per launch call, in ns: the cost figure. */
static void bench(void)
{
	struct standin_kernel k = {.name = "bench_kernel", .duration_ns = 0};
	double t0, t1;

	for (int i = 0; i < 1000; i++)
		flood_step(&k);
	cudaDeviceSynchronize();
	t0 = now_s();
	for (long i = 0; i < bench_n; i++) {
		flood_step(&k);
		if ((i & 1023) == 1023)
			cudaDeviceSynchronize(); /* keep the queue short: time the call, not waits
						  */
	}
	t1 = now_s();
	cudaDeviceSynchronize();
	printf("bench launches=%ld ns_per_launch=%.1f\n", bench_n,
	       (t1 - t0) * 1e9 / (double)bench_n);
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: gpu_workload [--requests N] [--threads T] [--kernels K] [--kernel-us U]\n"
		"                    [--graph] [--slow-every M] [--settle-ms MS] [--linger-ms MS]\n"
		"                    [--lose-records N] [--flood SECONDS [--flood-rate N]]\n"
		"                    [--bench N]\n"
		"Serves N requests (default 20) on T threads (2), each launching K kernels\n"
		"(4) of U µs (200) times 1 to 3 (gemm_step, attention_step, softmax_step), and\n"
		"with --graph a graph of 3 kernels (graph_step); with --slow-every M every\n"
		"M-th request's attention kernels take 4 times as long. It waits MS (1500)\n"
		"after initializing the runtime before the first request, and MS (1000) before\n"
		"exiting. --lose-records N: the stand-in drops the first N kernel records.\n"
		"--flood S: zero-time launches for S seconds, no requests, N a second\n"
		"(--flood-rate, default 100000; fewer if the launch calls are slower).\n"
		"--bench N: times N launch calls and prints the time per call.\n");
}

static long num(const char *s, long lo, long hi)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || v < lo || v > hi) {
		fprintf(stderr, "gpu_workload: bad number %s\n", s);
		exit(2);
	}
	return v;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {{"requests", 1, 0, 'r'},
					     {"threads", 1, 0, 't'},
					     {"kernels", 1, 0, 'k'},
					     {"kernel-us", 1, 0, 'u'},
					     {"graph", 0, 0, 'g'},
					     {"slow-every", 1, 0, 's'},
					     {"settle-ms", 1, 0, 'w'},
					     {"linger-ms", 1, 0, 'l'},
					     {"lose-records", 1, 0, 'x'},
					     {"flood", 1, 0, 'f'},
					     {"bench", 1, 0, 'b'},
					     {"help", 0, 0, 'h'},
					     {0, 0, 0, 0}};
	pthread_t th[64];
	int c;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'r':
			n_requests = num(optarg, 0, 1000000);
			break;
		case 't':
			n_threads = num(optarg, 1, 64);
			break;
		case 'k':
			n_kernels = num(optarg, 0, MAX_KERNELS);
			break;
		case 'u':
			kernel_us = num(optarg, 0, 1000000);
			break;
		case 'g':
			use_graph = 1;
			break;
		case 's':
			slow_every = num(optarg, 1, 1000000);
			break;
		case 'w':
			settle_ms = num(optarg, 0, 600000);
			break;
		case 'l':
			linger_ms = num(optarg, 0, 600000);
			break;
		case 'x':
			setenv("TP_STANDIN_LOSE_RECORDS", optarg, 1);
			break;
		case 'f':
			flood_s = num(optarg, 1, 3600);
			break;
		case 'b':
			bench_n = num(optarg, 1, 100000000);
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc) {
		usage(stderr);
		return 2;
	}
	if (tp_sdk_process_publish("gpu-workload", NULL, 0) != 0) {
		fprintf(stderr, "gpu_workload: cannot publish the process context\n");
		return 1;
	}
	cudaFree(NULL); /* the runtime starts: the injection library is loaded now */
	printf("ready pid=%d\n", (int)getpid());
	fflush(stdout);
	usleep((useconds_t)settle_ms * 1000);
	if (bench_n)
		bench();
	if (flood_s)
		flood();
	if (!bench_n && !flood_s) {
		for (long t = 0; t < n_threads; t++)
			if (pthread_create(&th[t], NULL, worker, NULL) != 0)
				return 1;
		for (long t = 0; t < n_threads; t++)
			pthread_join(th[t], NULL);
	}
	cudaDeviceSynchronize();
	fflush(stdout);
	usleep((useconds_t)linger_ms * 1000);
	return 0;
}
