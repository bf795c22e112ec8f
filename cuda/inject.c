/*
 * inject.c - libtraceprof-cuda's CUPTI side (docs/gpu.md).
 *
 * The CUDA driver loads this library into an unmodified application when
 * CUDA_INJECTION64_PATH names it, and calls InitializeInjection() at its
 * initialization. From then on:
 *
 *  - every kernel launch API (runtime and driver, graph launches, the
 *    Ex and cooperative forms; found by name, so a newer CUDA's launch
 *    calls are followed too) calls back here on the launching thread at
 *    its entry, and the marker traceprof_cuda_launch() is called with
 *    the launch's correlation id: the agent's uprobe takes the thread's
 *    stack and request there. A launch call made inside another one (the
 *    runtime calling the driver) is the same launch and calls it once;
 *  - CUPTI's concurrent-kernel activity records come back in buffers
 *    (at least every TPC_FLUSH_MS, and at exit) and each kernel's name,
 *    device, stream, GPU start and end go into the ring (ring.c).
 *
 * Compiled against the real CUPTI headers (where the CUDA toolkit is) or
 * the stand-in's (tests/cuda/cupti_standin.h, for the tests); the code is
 * the same. TP_CUPTI_KERNEL_RECORD names the kernel record's type of the
 * CUPTI the library is built for (cuda/CMakeLists.txt finds it).
 */
#include "tpcuda.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef TRACEPROF_CUPTI_STANDIN
#include "cupti_standin.h"
#else
#include <cupti.h>
#endif

#ifndef TP_CUPTI_KERNEL_RECORD
#error "TP_CUPTI_KERNEL_RECORD: the kernel activity record type (cuda/CMakeLists.txt)"
#endif

#define TPC_BUFFER_BYTES (1u << 20) /* an activity buffer handed to CUPTI */
#define TPC_BUFFER_ALIGN 8u
#define TPC_FLUSH_MS	 100u /* CUPTI delivers records at least this often */

__attribute__((visibility("default"))) int InitializeInjection(void);

static CUpti_SubscriberHandle subscriber;
static int initialized;
static __thread uint32_t launch_depth; /* launch calls of this thread in progress */

/* Which launch calls we follow, and how (0: not a launch). */
static uint8_t runtime_api[CUPTI_RUNTIME_TRACE_CBID_SIZE];
static uint8_t driver_api[CUPTI_DRIVER_TRACE_CBID_SIZE];

static int starts_with(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* enum tp_cuda_api for a launch call's name, 0 for other calls. */
static uint8_t launch_kind(const char *name)
{
	while (*name == '_')
		name++;
	if (strstr(name, "HostFunc"))
		return 0; /* runs a CPU function: no kernel */
	if (starts_with(name, "cudaGraphLaunch") || starts_with(name, "cuGraphLaunch"))
		return TP_CUDA_API_GRAPH;
	if (starts_with(name, "cudaLaunch"))
		return TP_CUDA_API_RUNTIME;
	if (starts_with(name, "cuLaunch"))
		return TP_CUDA_API_DRIVER;
	return 0;
}

static void CUPTIAPI on_api(void *userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
			    const void *cbdata)
{
	const CUpti_CallbackData *cb = cbdata;
	uint8_t api = 0;
	uint32_t device = UINT32_MAX;

	(void)userdata;
	if (domain == CUPTI_CB_DOMAIN_RUNTIME_API && cbid < CUPTI_RUNTIME_TRACE_CBID_SIZE)
		api = runtime_api[cbid];
	else if (domain == CUPTI_CB_DOMAIN_DRIVER_API && cbid < CUPTI_DRIVER_TRACE_CBID_SIZE)
		api = driver_api[cbid];
	if (!api || !cb)
		return;
	if (cb->callbackSite == CUPTI_API_EXIT) {
		if (launch_depth)
			launch_depth--;
		return;
	}
	if (launch_depth++) {
		/* The runtime's launch calling the driver's: the same launch, one marker. */
		TPC_COUNT(nested_launches, 1);
		return;
	}
	if (cb->context)
		(void)cuptiGetDeviceId(cb->context, &device);
	TPC_COUNT(launches, 1);
	traceprof_cuda_launch(cb->correlationId, device, 0, api);
}

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
	void *p = NULL;

	if (posix_memalign(&p, TPC_BUFFER_ALIGN, TPC_BUFFER_BYTES) != 0)
		p = NULL;
	*buffer = p;
	*size = p ? TPC_BUFFER_BYTES : 0;
	*max_records = 0; /* as many as fit */
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream_id, uint8_t *buffer,
				      size_t size, size_t valid)
{
	CUpti_Activity *rec = NULL;
	size_t dropped = 0;

	(void)size;
	TPC_COUNT(buffers, 1);
	while (buffer && valid &&
	       cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
		const TP_CUPTI_KERNEL_RECORD *k = (const TP_CUPTI_KERNEL_RECORD *)rec;

		if (rec->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL &&
		    rec->kind != CUPTI_ACTIVITY_KIND_KERNEL) {
			TPC_COUNT(other_records, 1);
			continue;
		}
		(void)tpc_publish(k->start, k->end, k->streamId, k->correlationId, k->deviceId,
				  k->name, k->name);
	}
	if (cuptiActivityGetNumDroppedRecords(ctx, stream_id, &dropped) == CUPTI_SUCCESS && dropped)
		TPC_COUNT(cupti_dropped, dropped);
	free(buffer);
}

static void flush_at_exit(void)
{
	if (initialized)
		(void)cuptiActivityFlushAll(1);
}

/* Marks every launch call of a domain, found by its name. */
static void mark_launch_calls(CUpti_CallbackDomain domain, uint8_t *table, uint32_t n)
{
	for (uint32_t cbid = 1; cbid < n; cbid++) {
		const char *name = NULL;

		if (cuptiGetCallbackName(domain, cbid, &name) != CUPTI_SUCCESS || !name)
			continue;
		table[cbid] = launch_kind(name);
		if (table[cbid] &&
		    cuptiEnableCallback(1, subscriber, domain, cbid) != CUPTI_SUCCESS) {
			table[cbid] = 0;
			TPC_COUNT(errors, 1);
		}
	}
}

int InitializeInjection(void)
{
	const char *off = getenv("TRACEPROF_CUDA");

	if (initialized)
		return 1;
	if (off && strcmp(off, "off") == 0)
		return 1;
	if (!tpc_ring())
		return 1; /* no ring: nothing to hand records to; the application runs on */
	if (cuptiSubscribe(&subscriber, (CUpti_CallbackFunc)on_api, NULL) != CUPTI_SUCCESS) {
		TPC_COUNT(errors, 1);
		return 1;
	}
	mark_launch_calls(CUPTI_CB_DOMAIN_RUNTIME_API, runtime_api, CUPTI_RUNTIME_TRACE_CBID_SIZE);
	mark_launch_calls(CUPTI_CB_DOMAIN_DRIVER_API, driver_api, CUPTI_DRIVER_TRACE_CBID_SIZE);
	if (cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed) != CUPTI_SUCCESS ||
	    cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS) {
		TPC_COUNT(errors, 1);
		return 1;
	}
	if (cuptiActivityFlushPeriod(TPC_FLUSH_MS) != CUPTI_SUCCESS)
		TPC_COUNT(errors, 1);
	initialized = 1;
	atexit(flush_at_exit);
	return 1;
}
