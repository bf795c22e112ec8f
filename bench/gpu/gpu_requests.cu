// gpu_requests - a CUDA program serving "requests" on a real GPU, each
// with its own thread context (libtraceprof-sdk), for the real-CUDA check
// of GPU time per request (bench/gpu_device_check.sh, docs/gpu.md).
//
// usage: gpu_requests [REQUESTS [THREADS [SETTLE_MS]]]   (default 24 3 5000)
//        gpu_requests --bench N
//
// --bench: the launch call's time on the application thread, N launches
// of a kernel that does nothing (a sync every 1,024 keeps the queue short),
// after 1,000 untimed ones; prints "bench launches=N ns_per_launch=X".
//
// Every request launches, on its thread's own stream:
//   spin_kernel       twice, 1 to 3 ms each   (<<< >>>: the runtime's launch)
//   scale_kernel<float> once, 2 ms            (<<< >>>, a C++ template)
//   tp_softmax_kernel once, 1 ms              (the driver's cuLaunchKernel)
//   a graph of three spin_graph kernels, 1 ms each (cudaGraphLaunch)
// Each kernel spins on the GPU's global timer for its time and writes its
// own start and end, read on that timer, to memory the program reads back:
// the GPU's own measure of each kernel, taken without CUPTI (which allows
// one subscriber: libtraceprof-cuda). Each thread launches every kernel
// once before its first request (CUDA loads a kernel's module inside its
// first launch), outside any request. The program prints the truth, as
// gpu_workload does in the tests:
//   kernel trace=HEX count=N gpu_ns=G fn=LAUNCHER name=KERNEL
//   request trace=HEX kernels=N launches=L gpu_ns=G
// and "events ..." lines: CUDA events around each launch, for reference
// (they include the launch's own time).
#include <cuda.h>
#include <cuda_runtime.h>

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

extern "C" {
#include "traceprof/sdk.h"
}

#define CHECK(x)                                                                                   \
	do {                                                                                       \
		cudaError_t e_ = (x);                                                              \
		if (e_ != cudaSuccess) {                                                           \
			fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); \
			exit(1);                                                                   \
		}                                                                                  \
	} while (0)
#define CHECK_CU(x)                                                                                \
	do {                                                                                       \
		CUresult r_ = (x);                                                                 \
		if (r_ != CUDA_SUCCESS) {                                                          \
			fprintf(stderr, "%s:%d: CUresult %d\n", __FILE__, __LINE__, (int)r_);       \
			exit(1);                                                                   \
		}                                                                                  \
	} while (0)

__device__ static inline uint64_t gtime(void)
{
	uint64_t t;
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	return t;
}

/*
 * Every kernel spins for its time and writes its own start and end, read
 * on the GPU's global timer, to stamp[0] and stamp[1]: the truth.
 */
__global__ void spin_kernel(unsigned long ns, unsigned long *stamp)
{
	uint64_t t0 = gtime(), t;
	while ((t = gtime()) - t0 < ns)
		;
	stamp[0] = t0;
	stamp[1] = t;
}

__global__ void spin_graph(unsigned long ns, unsigned long *stamp)
{
	uint64_t t0 = gtime(), t;
	while ((t = gtime()) - t0 < ns)
		;
	stamp[0] = t0;
	stamp[1] = t;
}

template <typename T> __global__ void scale_kernel(T *p, int ns, T f, unsigned long *stamp)
{
	uint64_t t0 = gtime(), t;
	while ((t = gtime()) - t0 < (uint64_t)ns)
		p[threadIdx.x] *= f;
	if (threadIdx.x == 0) {
		stamp[0] = t0;
		stamp[1] = t;
	}
}

extern "C" __global__ void tp_softmax_kernel(unsigned long ns, unsigned long *stamp)
{
	uint64_t t0 = gtime(), t;
	while ((t = gtime()) - t0 < ns)
		;
	stamp[0] = t0;
	stamp[1] = t;
}

static long n_requests = 24, n_threads = 3, settle_ms = 5000;
static long next_request;
static pthread_mutex_t out_mu = PTHREAD_MUTEX_INITIALIZER;

struct tally {
	const char *name, *fn;
	unsigned count;
	double ns;
};

/* The launchers: plain C names, one frame each, as the GPU flame graph shows them. */
struct thread_state;
extern "C" void launch_spin(struct thread_state *s, unsigned long ns, int slot);
extern "C" void launch_scale(struct thread_state *s, int ns, int slot);
extern "C" void launch_softmax(struct thread_state *s, unsigned long ns, int slot);
extern "C" void launch_graph(struct thread_state *s);

struct thread_state {
	cudaStream_t stream;
	cudaGraphExec_t graph;
	float *buf;
	unsigned long *stamps; /* on the GPU: 2 per kernel of a request (slots 0-3; 4-6 the graph's) */
	CUfunction softmax;
	cudaEvent_t ev[16];
};

static void add(struct tally *t, int *nt, const char *name, const char *fn, unsigned count,
		double ns)
{
	for (int i = 0; i < *nt; i++)
		if (strcmp(t[i].name, name) == 0) {
			t[i].count += count;
			t[i].ns += ns;
			return;
		}
	t[*nt] = (struct tally){name, fn, count, ns};
	(*nt)++;
}

/* The empty asm after each launch keeps the launch from being a tail call: the launcher's frame stays. */
extern "C" __attribute__((noinline, noclone)) void launch_spin(struct thread_state *s, unsigned long ns, int slot)
{
	spin_kernel<<<1, 1, 0, s->stream>>>(ns, s->stamps + 2 * slot);
	asm volatile("" ::: "memory");
}

extern "C" __attribute__((noinline, noclone)) void launch_scale(struct thread_state *s, int ns, int slot)
{
	scale_kernel<float><<<1, 32, 0, s->stream>>>(s->buf, ns, 1.0f, s->stamps + 2 * slot);
	asm volatile("" ::: "memory");
}

extern "C" __attribute__((noinline, noclone)) void launch_softmax(struct thread_state *s, unsigned long ns, int slot)
{
	unsigned long *stamp = s->stamps + 2 * slot;
	void *args[] = {&ns, &stamp};
	CHECK_CU(cuLaunchKernel(s->softmax, 1, 1, 1, 1, 1, 1, 0, (CUstream)s->stream, args, NULL));
	asm volatile("" ::: "memory");
}

extern "C" __attribute__((noinline, noclone)) void launch_graph(struct thread_state *s)
{
	CHECK(cudaGraphLaunch(s->graph, s->stream));
	asm volatile("" ::: "memory");
}

static void setup(struct thread_state *s)
{
	cudaGraph_t g;

	CHECK(cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking));
	CHECK(cudaMalloc(&s->buf, 32 * sizeof(float)));
	CHECK(cudaMemset(s->buf, 0, 32 * sizeof(float)));
	CHECK(cudaMalloc(&s->stamps, 16 * sizeof(unsigned long)));
	for (int i = 0; i < 16; i++)
		CHECK(cudaEventCreate(&s->ev[i]));
	CHECK(cudaGetFuncBySymbol(&s->softmax, (const void *)tp_softmax_kernel));
	/* The graph, captured once: three kernels of 1 ms (slots 4-6). */
	CHECK(cudaStreamBeginCapture(s->stream, cudaStreamCaptureModeThreadLocal));
	for (int i = 0; i < 3; i++)
		spin_graph<<<1, 1, 0, s->stream>>>(1000000ul, s->stamps + 2 * (4 + i));
	CHECK(cudaStreamEndCapture(s->stream, &g));
	CHECK(cudaGraphInstantiate(&s->graph, g, 0));
	CHECK(cudaGraphDestroy(g));
	/* Warm-up, outside any request: CUDA loads a kernel's module at its first launch. */
	launch_spin(s, 1000ul, 0);
	launch_scale(s, 1000, 1);
	launch_softmax(s, 1000ul, 3);
	launch_graph(s);
	CHECK(cudaStreamSynchronize(s->stream));
}

static void serve(struct thread_state *s, long i)
{
	uint8_t tid[16], sid[8];
	char th[33];
	struct tally t[8];
	int nt = 0;
	float ms[8];
	unsigned long st[14];
	double k_ns[7];
	unsigned long d0 = 1000000ul * (unsigned long)(1 + i % 3), d1 = 1000000ul * (unsigned long)(1 + (i + 1) % 3);
	double total = 0;
	unsigned kernels = 0;

	tp_sdk_new_trace_id(tid);
	tp_sdk_new_span_id(sid);
	if (tp_sdk_attach(tid, sid, 1, NULL, 0) != 0) {
		fprintf(stderr, "gpu_requests: cannot attach a context\n");
		exit(1);
	}
	CHECK(cudaEventRecord(s->ev[0], s->stream));
	launch_spin(s, d0, 0);
	CHECK(cudaEventRecord(s->ev[1], s->stream));
	launch_scale(s, 2000000, 1);
	CHECK(cudaEventRecord(s->ev[2], s->stream));
	launch_spin(s, d1, 2);
	CHECK(cudaEventRecord(s->ev[3], s->stream));
	launch_softmax(s, 1000000ul, 3);
	CHECK(cudaEventRecord(s->ev[4], s->stream));
	launch_graph(s);
	CHECK(cudaEventRecord(s->ev[5], s->stream));
	CHECK(cudaStreamSynchronize(s->stream));
	tp_sdk_detach();
	CHECK(cudaMemcpy(st, s->stamps, sizeof(st), cudaMemcpyDeviceToHost));
	for (int k = 0; k < 5; k++)
		CHECK(cudaEventElapsedTime(&ms[k], s->ev[k], s->ev[k + 1]));
	for (int k = 0; k < 7; k++)
		k_ns[k] = (double)(st[2 * k + 1] - st[2 * k]);
	add(t, &nt, "spin_kernel(unsigned long, unsigned long*)", "launch_spin", 2, k_ns[0] + k_ns[2]);
	add(t, &nt, "void scale_kernel<float>(float*, int, float, unsigned long*)", "launch_scale", 1,
	    k_ns[1]);
	add(t, &nt, "tp_softmax_kernel", "launch_softmax", 1, k_ns[3]);
	add(t, &nt, "spin_graph(unsigned long, unsigned long*)", "launch_graph", 3,
	    k_ns[4] + k_ns[5] + k_ns[6]);
	for (int k = 0; k < 16; k++)
		snprintf(th + 2 * k, 3, "%02x", tid[k]);
	pthread_mutex_lock(&out_mu);
	for (int k = 0; k < nt; k++) {
		printf("kernel trace=%s count=%u gpu_ns=%.0f fn=%s name=%s\n", th, t[k].count, t[k].ns,
		       t[k].fn, t[k].name);
		kernels += t[k].count;
		total += t[k].ns;
	}
	printf("request trace=%s kernels=%u launches=5 gpu_ns=%.0f\n", th, kernels, total);
	printf("events trace=%s spin=%.4f scale=%.4f spin=%.4f softmax=%.4f graph=%.4f ms\n", th,
	       ms[0], ms[1], ms[2], ms[3], ms[4]);
	fflush(stdout);
	pthread_mutex_unlock(&out_mu);
}

static void *worker(void *arg)
{
	struct thread_state *s = (struct thread_state *)arg;
	long i;

	while ((i = __atomic_fetch_add(&next_request, 1, __ATOMIC_RELAXED)) < n_requests)
		serve(s, i);
	return NULL;
}

/* The launch call's time: the cost figure of following launches. */
static int bench(long n)
{
	struct thread_state s;
	struct timespec t0, t1;

	CHECK(cudaFree(0));
	setup(&s);
	for (int i = 0; i < 1000; i++)
		launch_spin(&s, 0ul, 0);
	CHECK(cudaStreamSynchronize(s.stream));
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (long i = 0; i < n; i++) {
		launch_spin(&s, 0ul, 0);
		if ((i & 1023) == 1023)
			CHECK(cudaStreamSynchronize(s.stream));
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	CHECK(cudaStreamSynchronize(s.stream));
	printf("bench launches=%ld ns_per_launch=%.1f\n", n,
	       ((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec)) / (double)n);
	return 0;
}

int main(int argc, char **argv)
{
	struct thread_state st[16];
	pthread_t th[16];
	cudaDeviceProp prop;

	if (argc == 3 && strcmp(argv[1], "--bench") == 0)
		return bench(atol(argv[2]) > 0 ? atol(argv[2]) : 1);
	if (argc > 1)
		n_requests = atol(argv[1]);
	if (argc > 2)
		n_threads = atol(argv[2]);
	if (argc > 3)
		settle_ms = atol(argv[3]);
	if (n_requests < 0 || n_threads < 1 || n_threads > 16 || settle_ms < 0) {
		fprintf(stderr, "usage: gpu_requests [REQUESTS [THREADS [SETTLE_MS]]]\n");
		return 2;
	}
	if (tp_sdk_process_publish("gpu-requests", NULL, 0) != 0) {
		fprintf(stderr, "gpu_requests: cannot publish the process context\n");
		return 1;
	}
	CHECK(cudaFree(0)); /* CUDA starts: the injection library is loaded now */
	CHECK(cudaGetDeviceProperties(&prop, 0));
	for (long t = 0; t < n_threads; t++)
		setup(&st[t]);
	CHECK(cudaDeviceSynchronize());
	printf("ready pid=%d device=%s\n", (int)getpid(), prop.name);
	fflush(stdout);
	usleep((useconds_t)settle_ms * 1000);
	for (long t = 0; t < n_threads; t++)
		if (pthread_create(&th[t], NULL, worker, &st[t]) != 0)
			return 1;
	for (long t = 0; t < n_threads; t++)
		pthread_join(th[t], NULL);
	CHECK(cudaDeviceSynchronize());
	fflush(stdout);
	sleep(1); /* CUPTI's last records reach the ring; the agent drains it */
	return 0;
}
