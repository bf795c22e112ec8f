/*
 * standin.c - a stand-in CUDA runtime and CUPTI for the tests
 * (standin_cuda.h, cupti_standin.h; docs/gpu.md, "Tests without a GPU").
 *
 * What it keeps of the real ones, because libtraceprof-cuda relies on it:
 *  - the injection library is loaded from CUDA_INJECTION64_PATH at the
 *    first call and its InitializeInjection() called;
 *  - a launch calls the subscriber on the launching thread at its entry
 *    and exit, with a correlation id; the runtime's launch calls the
 *    driver's inside it with the same id; a graph launch is one id for
 *    all of its kernels; only the calls enabled are called back;
 *  - kernels run later, on another thread (the "GPU"), in launch order,
 *    and their activity records (start, end, device, stream, correlation
 *    id, name) come back in buffers the subscriber hands out, when a
 *    buffer is full, at the flush period, or at cuptiActivityFlushAll;
 *    no buffer: the record is dropped and counted as CUPTI does.
 * Each kernel's GPU time is exactly the duration it was launched with.
 */
#include "cupti_standin.h"
#include "standin_cuda.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define QCAP 4096u /* launches waiting for the GPU; a launch waits when it is full */

struct standin_ctx {
	uint32_t device;
};

struct job {
	const struct standin_kernel *kernels; /* n kernels, or a host function */
	unsigned n;
	void (*fn)(void *);
	void *arg;
	uint32_t corr;
	cudaStream_t stream;
};

static struct standin_ctx ctx0 = {.device = 0};
static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER; /* the queue */
static pthread_cond_t cv_work = PTHREAD_COND_INITIALIZER;
static pthread_cond_t cv_space = PTHREAD_COND_INITIALIZER;
static pthread_cond_t cv_idle = PTHREAD_COND_INITIALIZER;
static struct job queue[QCAP];
static uint64_t q_head, q_tail;
static int gpu_busy;
static uint32_t next_corr;
static long lose_records;

/* CUPTI's side */
static CUpti_CallbackFunc cb_fn;
static void *cb_user;
static int subscribed;
static uint8_t rt_on[CUPTI_RUNTIME_TRACE_CBID_SIZE];
static uint8_t drv_on[CUPTI_DRIVER_TRACE_CBID_SIZE];
static CUpti_BuffersCallbackRequestFunc req_fn;
static CUpti_BuffersCallbackCompleteFunc done_fn;
static int activity_on;
static uint32_t flush_ms;
static pthread_mutex_t buf_mu = PTHREAD_MUTEX_INITIALIZER; /* the open buffer */
static uint8_t *buf;
static size_t buf_size, buf_used;
static uint64_t buf_opened_ns;
static size_t dropped_records;

static const char *const rt_names[CUPTI_RUNTIME_TRACE_CBID_SIZE] = {NULL,
								    "cudaLaunchKernel_v7000",
								    "cudaGraphLaunch_v10000",
								    "cudaLaunchHostFunc_v10000",
								    "cudaDeviceSynchronize_v3020",
								    "cudaLaunchKernelExC_v11060"};
static const char *const drv_names[CUPTI_DRIVER_TRACE_CBID_SIZE] = {
    NULL, "cuLaunchKernel", "cuLaunchKernelEx", "cuGraphLaunch", "cuCtxSynchronize"};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void sleep_until(uint64_t t)
{
	struct timespec ts = {.tv_sec = (time_t)(t / 1000000000u),
			      .tv_nsec = (long)(t % 1000000000u)};

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) != 0)
		;
}

/* Hands the open buffer to the subscriber (outside buf_mu). */
static void complete_buffer(void)
{
	uint8_t *b;
	size_t size, used;

	pthread_mutex_lock(&buf_mu);
	b = buf;
	size = buf_size;
	used = buf_used;
	buf = NULL;
	buf_used = 0;
	pthread_mutex_unlock(&buf_mu);
	if (b && done_fn)
		done_fn(&ctx0, 0, b, size, used);
}

static void add_record(const struct standin_kernel *k, uint32_t corr, cudaStream_t stream,
		       uint64_t start)
{
	CUpti_ActivityKernelStandin r = {.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
					 .deviceId = ctx0.device,
					 .start = start,
					 .end = start + k->duration_ns,
					 .streamId = (uint32_t)stream,
					 .correlationId = corr,
					 .name = k->name};
	int full = 0;

	if (!activity_on)
		return;
	pthread_mutex_lock(&buf_mu);
	if (!buf && req_fn) {
		size_t max = 0;

		req_fn(&buf, &buf_size, &max);
		buf_used = 0;
		buf_opened_ns = now_ns();
		if (buf && buf_size < sizeof(r))
			buf = NULL; /* a buffer too small for one record: none */
	}
	if (!buf) {
		dropped_records++;
	} else {
		memcpy(buf + buf_used, &r, sizeof(r));
		buf_used += sizeof(r);
		full = buf_used + sizeof(r) > buf_size;
	}
	pthread_mutex_unlock(&buf_mu);
	if (full)
		complete_buffer();
}

static void flush_if_due(void)
{
	int due;

	pthread_mutex_lock(&buf_mu);
	due = buf && buf_used && flush_ms && now_ns() - buf_opened_ns >= flush_ms * 1000000ull;
	pthread_mutex_unlock(&buf_mu);
	if (due)
		complete_buffer();
}

static void run_job(const struct job *j)
{
	if (j->fn) {
		j->fn(j->arg);
		return;
	}
	for (unsigned i = 0; i < j->n; i++) {
		const struct standin_kernel *k = &j->kernels[i];
		uint64_t start = now_ns();

		if (k->duration_ns)
			sleep_until(start + k->duration_ns);
		if (__atomic_load_n(&lose_records, __ATOMIC_RELAXED) > 0 &&
		    __atomic_fetch_sub(&lose_records, 1, __ATOMIC_RELAXED) > 0)
			continue;
		add_record(k, j->corr, j->stream, start);
	}
}

static void *gpu_main(void *arg)
{
	(void)arg;
	for (;;) {
		struct job j;

		pthread_mutex_lock(&mu);
		while (q_head == q_tail) {
			struct timespec ts;
			uint64_t t = now_ns() + 20000000u;

			pthread_mutex_unlock(&mu);
			flush_if_due();
			pthread_mutex_lock(&mu);
			if (q_head != q_tail)
				break;
			clock_gettime(CLOCK_REALTIME, &ts);
			t = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec + 20000000u;
			ts.tv_sec = (time_t)(t / 1000000000u);
			ts.tv_nsec = (long)(t % 1000000000u);
			pthread_cond_timedwait(&cv_work, &mu, &ts);
		}
		j = queue[q_tail % QCAP];
		q_tail++;
		gpu_busy = 1;
		pthread_cond_signal(&cv_space);
		pthread_mutex_unlock(&mu);
		run_job(&j);
		pthread_mutex_lock(&mu);
		gpu_busy = 0;
		if (q_head == q_tail)
			pthread_cond_broadcast(&cv_idle);
		pthread_mutex_unlock(&mu);
		flush_if_due();
	}
	return NULL;
}

static void init(void)
{
	const char *path = getenv("CUDA_INJECTION64_PATH");
	const char *lose = getenv("TP_STANDIN_LOSE_RECORDS");
	pthread_t t;

	if (lose)
		lose_records = strtol(lose, NULL, 10);
	if (path && *path) {
		void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
		int (*fn)(void) = h ? (int (*)(void))dlsym(h, "InitializeInjection") : NULL;

		if (fn)
			fn();
		else
			fprintf(stderr, "standin: cannot load %s: %s\n", path, dlerror());
	}
	if (pthread_create(&t, NULL, gpu_main, NULL) == 0)
		pthread_detach(t);
}

static void api_cb(CUpti_CallbackDomain domain, uint32_t cbid, CUpti_ApiCallbackSite site,
		   uint32_t corr)
{
	const uint8_t *on = domain == CUPTI_CB_DOMAIN_RUNTIME_API ? rt_on : drv_on;
	const char *const *names = domain == CUPTI_CB_DOMAIN_RUNTIME_API ? rt_names : drv_names;
	CUpti_CallbackData d = {.callbackSite = site,
				.functionName = names[cbid],
				.context = &ctx0,
				.correlationId = corr};

	if (subscribed && on[cbid])
		cb_fn(cb_user, domain, cbid, &d);
}

static void enqueue(const struct job *j)
{
	pthread_mutex_lock(&mu);
	while (q_head - q_tail >= QCAP)
		pthread_cond_wait(&cv_space, &mu);
	queue[q_head % QCAP] = *j;
	q_head++;
	pthread_cond_signal(&cv_work);
	pthread_mutex_unlock(&mu);
}

static uint32_t new_corr(void)
{
	return __atomic_add_fetch(&next_corr, 1, __ATOMIC_RELAXED);
}

static cudaError_t driver_launch(uint32_t cbid, const struct job *j)
{
	api_cb(CUPTI_CB_DOMAIN_DRIVER_API, cbid, CUPTI_API_ENTER, j->corr);
	enqueue(j);
	api_cb(CUPTI_CB_DOMAIN_DRIVER_API, cbid, CUPTI_API_EXIT, j->corr);
	return 0;
}

static cudaError_t runtime_launch(uint32_t rt_cbid, uint32_t drv_cbid, struct job *j)
{
	pthread_once(&init_once, init);
	j->corr = new_corr();
	api_cb(CUPTI_CB_DOMAIN_RUNTIME_API, rt_cbid, CUPTI_API_ENTER, j->corr);
	driver_launch(drv_cbid, j);
	api_cb(CUPTI_CB_DOMAIN_RUNTIME_API, rt_cbid, CUPTI_API_EXIT, j->corr);
	return 0;
}

cudaError_t cudaFree(void *p)
{
	(void)p;
	pthread_once(&init_once, init);
	return 0;
}

__attribute__((noinline)) cudaError_t cudaLaunchKernel(const void *func, cudaStream_t stream)
{
	struct job j = {.kernels = func, .n = 1, .stream = stream};

	if (!func)
		return 1;
	return runtime_launch(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
			      CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &j);
}

__attribute__((noinline)) cudaError_t cudaLaunchKernelExC(const void *func, cudaStream_t stream)
{
	struct job j = {.kernels = func, .n = 1, .stream = stream};

	if (!func)
		return 1;
	return runtime_launch(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060,
			      CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, &j);
}

__attribute__((noinline)) cudaError_t cuLaunchKernel(const void *func, cudaStream_t stream)
{
	struct job j = {.kernels = func, .n = 1, .stream = stream};

	if (!func)
		return 1;
	pthread_once(&init_once, init);
	j.corr = new_corr();
	return driver_launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &j);
}

__attribute__((noinline)) cudaError_t cudaGraphLaunch(const struct standin_graph *graph,
						      cudaStream_t stream)
{
	struct job j = {.stream = stream};

	if (!graph || !graph->n)
		return 1;
	j.kernels = graph->kernels;
	j.n = graph->n;
	return runtime_launch(CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000,
			      CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch, &j);
}

cudaError_t cudaLaunchHostFunc(cudaStream_t stream, void (*fn)(void *), void *arg)
{
	struct job j = {.fn = fn, .arg = arg, .stream = stream};
	uint32_t corr;

	if (!fn)
		return 1;
	pthread_once(&init_once, init);
	corr = new_corr();
	api_cb(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchHostFunc_v10000,
	       CUPTI_API_ENTER, corr);
	enqueue(&j);
	api_cb(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchHostFunc_v10000,
	       CUPTI_API_EXIT, corr);
	return 0;
}

cudaError_t cudaDeviceSynchronize(void)
{
	uint32_t corr;

	pthread_once(&init_once, init);
	corr = new_corr();
	api_cb(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020,
	       CUPTI_API_ENTER, corr);
	pthread_mutex_lock(&mu);
	while (q_head != q_tail || gpu_busy)
		pthread_cond_wait(&cv_idle, &mu);
	pthread_mutex_unlock(&mu);
	api_cb(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020,
	       CUPTI_API_EXIT, corr);
	return 0;
}

/* CUPTI */

CUptiResult cuptiSubscribe(CUpti_SubscriberHandle *subscriber, CUpti_CallbackFunc callback,
			   void *userdata)
{
	if (!subscriber || !callback)
		return CUPTI_ERROR_INVALID_PARAMETER;
	if (subscribed)
		return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
	cb_fn = callback;
	cb_user = userdata;
	subscribed = 1;
	*subscriber = (CUpti_SubscriberHandle)&cb_fn;
	return CUPTI_SUCCESS;
}

CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle subscriber)
{
	(void)subscriber;
	subscribed = 0;
	return CUPTI_SUCCESS;
}

CUptiResult cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle subscriber,
				CUpti_CallbackDomain domain, CUpti_CallbackId cbid)
{
	if (!subscriber)
		return CUPTI_ERROR_INVALID_PARAMETER;
	if (domain == CUPTI_CB_DOMAIN_RUNTIME_API && cbid > 0 &&
	    cbid < CUPTI_RUNTIME_TRACE_CBID_SIZE)
		rt_on[cbid] = enable != 0;
	else if (domain == CUPTI_CB_DOMAIN_DRIVER_API && cbid > 0 &&
		 cbid < CUPTI_DRIVER_TRACE_CBID_SIZE)
		drv_on[cbid] = enable != 0;
	else
		return CUPTI_ERROR_INVALID_PARAMETER;
	return CUPTI_SUCCESS;
}

CUptiResult cuptiGetCallbackName(CUpti_CallbackDomain domain, uint32_t cbid, const char **name)
{
	if (!name)
		return CUPTI_ERROR_INVALID_PARAMETER;
	*name = NULL;
	if (domain == CUPTI_CB_DOMAIN_RUNTIME_API && cbid > 0 &&
	    cbid < CUPTI_RUNTIME_TRACE_CBID_SIZE)
		*name = rt_names[cbid];
	else if (domain == CUPTI_CB_DOMAIN_DRIVER_API && cbid > 0 &&
		 cbid < CUPTI_DRIVER_TRACE_CBID_SIZE)
		*name = drv_names[cbid];
	return *name ? CUPTI_SUCCESS : CUPTI_ERROR_INVALID_PARAMETER;
}

CUptiResult cuptiGetDeviceId(CUcontext context, uint32_t *deviceId)
{
	if (!context || !deviceId)
		return CUPTI_ERROR_INVALID_PARAMETER;
	*deviceId = context->device;
	return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityEnable(CUpti_ActivityKind kind)
{
	if (kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && kind != CUPTI_ACTIVITY_KIND_KERNEL)
		return CUPTI_ERROR_INVALID_PARAMETER;
	activity_on = 1;
	return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc requested,
					   CUpti_BuffersCallbackCompleteFunc completed)
{
	if (!requested || !completed)
		return CUPTI_ERROR_INVALID_PARAMETER;
	req_fn = requested;
	done_fn = completed;
	return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityGetNextRecord(uint8_t *buffer, size_t valid, CUpti_Activity **record)
{
	size_t off;

	if (!buffer || !record)
		return CUPTI_ERROR_INVALID_PARAMETER;
	off = *record ? (size_t)((uint8_t *)*record - buffer) + sizeof(CUpti_ActivityKernelStandin)
		      : 0;
	if (off + sizeof(CUpti_ActivityKernelStandin) > valid)
		return CUPTI_ERROR_MAX_LIMIT_REACHED;
	*record = (CUpti_Activity *)(buffer + off);
	return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityGetNumDroppedRecords(CUcontext context, uint32_t streamId, size_t *dropped)
{
	(void)context;
	(void)streamId;
	if (!dropped)
		return CUPTI_ERROR_INVALID_PARAMETER;
	pthread_mutex_lock(&buf_mu);
	*dropped = dropped_records;
	dropped_records = 0;
	pthread_mutex_unlock(&buf_mu);
	return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityFlushAll(uint32_t flag)
{
	(void)flag;
	complete_buffer();
	return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityFlushPeriod(uint32_t time)
{
	flush_ms = time;
	return CUPTI_SUCCESS;
}
