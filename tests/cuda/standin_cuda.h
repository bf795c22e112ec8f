/*
 * standin_cuda.h - the stand-in CUDA runtime's launch calls (standin.c),
 * for test programs (gpu_workload.c). Named as CUDA's, simplified: a
 * "kernel" is a name and the GPU time it takes; the stand-in's GPU is a
 * thread that runs the launched kernels of all streams one after the
 * other, for exactly their time, and reports each through the CUPTI
 * activity interface of cupti_standin.h.
 *
 * At its first call the runtime loads CUDA_INJECTION64_PATH and calls its
 * InitializeInjection(), as CUDA's does.
 *
 * Environment (tests): TP_STANDIN_LOSE_RECORDS=N: the first N kernels
 * run but produce no activity record (their launches stay unmatched).
 */
#ifndef TRACEPROF_STANDIN_CUDA_H
#define TRACEPROF_STANDIN_CUDA_H

#include <stdint.h>

typedef int cudaError_t; /* 0: success */
typedef uintptr_t cudaStream_t;

struct standin_kernel {
	const char *name;     /* as a real kernel's symbol: may be a mangled C++ name */
	uint64_t duration_ns; /* its GPU time */
};

/* A graph: its kernels run one after the other, all under the launch's correlation id. */
struct standin_graph {
	unsigned n;
	const struct standin_kernel *kernels;
};

cudaError_t cudaFree(void *p); /* initializes the runtime, as cudaFree(0) does */
/* The runtime launch: calls the driver's (cuLaunchKernel) inside, as CUDA's does. */
cudaError_t cudaLaunchKernel(const void *func, cudaStream_t stream);
cudaError_t cudaLaunchKernelExC(const void *func, cudaStream_t stream);
cudaError_t cuLaunchKernel(const void *func, cudaStream_t stream);
cudaError_t cudaGraphLaunch(const struct standin_graph *graph, cudaStream_t stream);
/* Runs fn(arg) on the GPU's thread in stream order: no kernel. */
cudaError_t cudaLaunchHostFunc(cudaStream_t stream, void (*fn)(void *), void *arg);
cudaError_t cudaDeviceSynchronize(void);

#endif
