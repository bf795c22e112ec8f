/*
 * cupti_standin.h - the part of CUPTI's interface that libtraceprof-cuda
 * uses, as the stand-in runtime (standin.c) implements it, for the tests
 * on machines without CUDA (docs/gpu.md, "Tests without a GPU").
 *
 * The names are CUPTI's, so cuda/inject.c compiles unchanged against
 * either; the values and the layouts are the stand-in's own (only code
 * built against this header ever sees them). The real-CUDA build is
 * checked by bench/gpu_device_check.sh on a machine with a GPU.
 */
#ifndef TRACEPROF_CUPTI_STANDIN_H
#define TRACEPROF_CUPTI_STANDIN_H

#include <stddef.h>
#include <stdint.h>

#define CUPTIAPI

typedef enum {
	CUPTI_SUCCESS = 0,
	CUPTI_ERROR_INVALID_PARAMETER = 1,
	CUPTI_ERROR_MAX_LIMIT_REACHED = 12,
	CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED = 39,
} CUptiResult;

typedef enum {
	CUPTI_CB_DOMAIN_INVALID = 0,
	CUPTI_CB_DOMAIN_DRIVER_API = 1,
	CUPTI_CB_DOMAIN_RUNTIME_API = 2,
} CUpti_CallbackDomain;

typedef uint32_t CUpti_CallbackId;

/* The stand-in's API calls (cuptiGetCallbackName gives their names). */
enum {
	CUPTI_RUNTIME_TRACE_CBID_INVALID = 0,
	CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000 = 1,
	CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000 = 2,
	CUPTI_RUNTIME_TRACE_CBID_cudaLaunchHostFunc_v10000 = 3,
	CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020 = 4,
	CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060 = 5,
	CUPTI_RUNTIME_TRACE_CBID_SIZE = 6,
};
enum {
	CUPTI_DRIVER_TRACE_CBID_INVALID = 0,
	CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel = 1,
	CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx = 2,
	CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch = 3,
	CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize = 4,
	CUPTI_DRIVER_TRACE_CBID_SIZE = 5,
};

typedef enum {
	CUPTI_API_ENTER = 0,
	CUPTI_API_EXIT = 1,
} CUpti_ApiCallbackSite;

typedef struct standin_ctx *CUcontext;
typedef struct standin_subscriber *CUpti_SubscriberHandle;

typedef struct {
	CUpti_ApiCallbackSite callbackSite;
	const char *functionName;
	const void *functionParams;
	void *functionReturnValue;
	const char *symbolName;
	CUcontext context;
	uint32_t contextUid;
	uint64_t *correlationData;
	uint32_t correlationId;
} CUpti_CallbackData;

typedef void(CUPTIAPI *CUpti_CallbackFunc)(void *userdata, CUpti_CallbackDomain domain,
					   CUpti_CallbackId cbid, const void *cbdata);

typedef enum {
	CUPTI_ACTIVITY_KIND_INVALID = 0,
	CUPTI_ACTIVITY_KIND_MEMCPY = 1,
	CUPTI_ACTIVITY_KIND_KERNEL = 3,
	CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL = 10,
} CUpti_ActivityKind;

typedef struct {
	CUpti_ActivityKind kind;
} CUpti_Activity;

/* The stand-in's kernel record (CUPTI's have many more fields). */
typedef struct {
	CUpti_ActivityKind kind;
	uint32_t deviceId;
	uint64_t start;
	uint64_t end;
	uint32_t streamId;
	uint32_t correlationId;
	const char *name;
} CUpti_ActivityKernelStandin;

typedef void(CUPTIAPI *CUpti_BuffersCallbackRequestFunc)(uint8_t **buffer, size_t *size,
							 size_t *maxNumRecords);
typedef void(CUPTIAPI *CUpti_BuffersCallbackCompleteFunc)(CUcontext context, uint32_t streamId,
							  uint8_t *buffer, size_t size,
							  size_t validSize);

CUptiResult cuptiSubscribe(CUpti_SubscriberHandle *subscriber, CUpti_CallbackFunc callback,
			   void *userdata);
CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle subscriber);
CUptiResult cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle subscriber,
				CUpti_CallbackDomain domain, CUpti_CallbackId cbid);
CUptiResult cuptiGetCallbackName(CUpti_CallbackDomain domain, uint32_t cbid, const char **name);
CUptiResult cuptiGetDeviceId(CUcontext context, uint32_t *deviceId);
CUptiResult cuptiActivityEnable(CUpti_ActivityKind kind);
CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc requested,
					   CUpti_BuffersCallbackCompleteFunc completed);
CUptiResult cuptiActivityGetNextRecord(uint8_t *buffer, size_t validBufferSizeBytes,
				       CUpti_Activity **record);
CUptiResult cuptiActivityGetNumDroppedRecords(CUcontext context, uint32_t streamId,
					      size_t *dropped);
CUptiResult cuptiActivityFlushAll(uint32_t flag);
CUptiResult cuptiActivityFlushPeriod(uint32_t time);

#endif
