/*
 * tlsloc_writer.c - a process whose threads tell test_tlsloc where their
 * otel_thread_ctx_v1 really is, so the location resolved from outside can
 * be checked against the truth. One source, built several ways:
 *  - default: the executable defines the variable (built PIE, non-PIE and
 *    static);
 *  - WRITER_SDK: libtraceprof-sdk defines it; each thread attaches a
 *    context whose trace id starts with 0x10 + its index;
 *  - WRITER_DLOPEN: the shared library named by argv[1] defines it and is
 *    dlopen'ed after the threads have started; one more thread never
 *    touches the variable.
 * Each thread (the main thread is index 0) writes one line to stdout:
 *   T <index> <tid> <thread pointer> <&otel_thread_ctx_v1> <its value>
 * (numbers in hex; address and value 0 for the thread that never touched
 * it), then the main thread writes "R" and the process exits when its
 * stdin reaches end of file.
 */
#include <asm/prctl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifdef WRITER_DLOPEN
#include <dlfcn.h>
#endif
#ifdef WRITER_SDK
#include "traceprof/sdk.h"
#endif

#define NTHREADS 4

#if defined(WRITER_SDK)
extern __thread void *otel_thread_ctx_v1;
#elif !defined(WRITER_DLOPEN)
/* Initialized TLS before the variable: its offset in the block is not 0. */
__thread char writer_pad[40] __attribute__((aligned(64))) = {1};
__thread void *otel_thread_ctx_v1 __attribute__((visibility("default")));
#endif

static pthread_barrier_t started; /* all threads run (and the library is loaded) */
static pthread_barrier_t written; /* all lines written */
static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;
static int markers[NTHREADS] __attribute__((unused)); /* what each thread's pointer points at */
#ifdef WRITER_DLOPEN
static void **(*slot_fn)(void); /* &otel_thread_ctx_v1 in the library */
#endif

static uint64_t thread_pointer(void)
{
	unsigned long fs = 0;

	syscall(SYS_arch_prctl, ARCH_GET_FS, &fs);
	return fs;
}

static void report(int idx, bool touch)
{
	void **slot = NULL;

	if (touch) {
#if defined(WRITER_DLOPEN)
		slot = slot_fn();
		*slot = &markers[idx];
#elif defined(WRITER_SDK)
		uint8_t tid[16] = {
		    (uint8_t)(0x10 + idx), 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
		uint8_t sid[8] = {1, 2, 3, 4, 5, 6, 7, (uint8_t)idx};

		tp_sdk_attach(tid, sid, 1, NULL, 0);
		slot = &otel_thread_ctx_v1;
#else
		slot = &otel_thread_ctx_v1;
		*slot = &markers[idx];
#endif
	}
	pthread_mutex_lock(&out_lock);
	printf("T %x %lx %llx %llx %llx\n", idx, (long)syscall(SYS_gettid),
	       (unsigned long long)thread_pointer(), (unsigned long long)(uintptr_t)slot,
	       (unsigned long long)(uintptr_t)(slot ? *slot : NULL));
	fflush(stdout);
	pthread_mutex_unlock(&out_lock);
}

static void *thread_main(void *arg)
{
	int idx = (int)(intptr_t)arg;

	pthread_barrier_wait(&started);
	report(idx, idx < NTHREADS);
	pthread_barrier_wait(&written);
	for (;;)
		pause();
	return NULL;
}

int main(int argc, char **argv)
{
	int nthreads = NTHREADS;
	pthread_t th;
	char buf[64];

#ifdef WRITER_DLOPEN
	nthreads++; /* the last one never touches the variable */
#endif
	pthread_barrier_init(&started, NULL, (unsigned)nthreads);
	pthread_barrier_init(&written, NULL, (unsigned)nthreads);
	for (int i = 1; i < nthreads; i++) {
		if (pthread_create(&th, NULL, thread_main, (void *)(intptr_t)i)) {
			fprintf(stderr, "pthread_create failed\n");
			return 1;
		}
	}
#ifdef WRITER_DLOPEN
	void *h = argc > 1 ? dlopen(argv[1], RTLD_NOW) : NULL;

	slot_fn = h ? (void **(*)(void))dlsym(h, "tlsloc_dso_slot") : NULL;
	if (!slot_fn) {
		fprintf(stderr, "dlopen: %s\n", dlerror());
		return 1;
	}
#else
	(void)argc;
	(void)argv;
#endif
	pthread_barrier_wait(&started);
	report(0, true);
	pthread_barrier_wait(&written);
	printf("R\n");
	fflush(stdout);
	while (read(0, buf, sizeof(buf)) > 0)
		;
	return 0;
}
