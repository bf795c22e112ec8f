/*
 * sdk_internal.h - what the SDK's source files share and do not export.
 */
#ifndef TRACEPROF_SDK_INTERNAL_H
#define TRACEPROF_SDK_INTERNAL_H

#include <stdint.h>

/* The library is built with hidden visibility; the API is marked with this. */
#define TP_SDK_EXPORT __attribute__((visibility("default")))

/*
 * Number of registered attribute keys (process_ctx.c writes it under its
 * mutex, with release order, after the name is stored; attach reads it to
 * reject unregistered keys).
 */
extern _Atomic uint32_t tp_sdk_nkeys;

#endif
