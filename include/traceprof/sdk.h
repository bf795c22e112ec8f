/*
 * sdk.h - the traceprof SDK: how an application tells an out-of-process
 * profiler which request each thread is serving.
 *
 * Two OpenTelemetry formats, written exactly:
 *  - the process context (OTEP 4719): resource attributes (service.name and
 *    any others) in a mapping named OTEL_CTX that a reader finds through
 *    /proc/<pid>/maps;
 *  - the thread context (OTEP 4947): the TLS pointer otel_thread_ctx_v1
 *    (exported in .dynsym) to a per-thread record holding trace id, span id,
 *    trace flags and optional string attributes.
 *
 * A C ABI with plain types only, for use from any language through FFI.
 * All functions return 0 or a negative errno value unless stated otherwise.
 *
 * Threads: the process context functions and tp_sdk_key_register may be
 * called from any thread (they take an internal mutex). tp_sdk_attach and
 * tp_sdk_detach act on the calling thread's record only; they never
 * allocate, lock or enter the kernel, and are async-signal-safe after the
 * thread's first attach.
 */
#ifndef TRACEPROF_SDK_H
#define TRACEPROF_SDK_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bytes of the fixed part of a thread context record (ids, valid, flags, size). */
#define TP_SDK_RECORD_HEADER_SIZE 28
/* Bytes of a whole record, attributes included: the limit OTEP 4947 recommends. */
#define TP_SDK_RECORD_SIZE 640
/* Bytes of a traceparent in text form, without the terminating NUL. */
#define TP_SDK_TRACEPARENT_LEN 55

/* One resource attribute of the process context (a string value). */
struct tp_sdk_kv {
	const char *key;   /* UTF-8, NUL-terminated; borrowed for the call */
	const char *value; /* UTF-8, NUL-terminated; borrowed for the call */
};

/* One attribute of a thread context record. */
struct tp_sdk_attr {
	uint32_t key;	    /* index returned by tp_sdk_key_register */
	uint32_t value_len; /* bytes at value; more than 255 is cut to 255 */
	const char *value;  /* UTF-8, need not be NUL-terminated; borrowed */
};

/*
 * Process context (OTEP 4719).
 *
 * tp_sdk_process_publish publishes service_name (as service.name) and the n
 * attributes in attrs as the ProcessContext's resource, plus the thread
 * context reference data (threadlocal.schema_version "tls_v1",
 * threadlocal.attribute_key_map) in its attributes. The first call
 * creates the OTEL_CTX mapping; later calls update it in place with the
 * update protocol (readers never see a torn payload). The SDK copies what it
 * needs; the caller keeps ownership of its strings. service_name must be
 * non-empty. Returns 0, -EINVAL, -ENOMEM or the errno of a failed mmap.
 */
int tp_sdk_process_publish(const char *service_name, const struct tp_sdk_kv *attrs, size_t n);
/* Unmaps the process context; 0 when there was none. */
int tp_sdk_process_remove(void);

/*
 * Registers an attribute name for thread records and returns its key index
 * (0..255; the same name returns the same index), or -EINVAL for an empty
 * name, -ENOSPC when 256 names exist, -ENOMEM. The key map is append-only;
 * if the process context is published, it is updated to include the name.
 */
int tp_sdk_key_register(const char *name);

/*
 * Thread context (OTEP 4947).
 *
 * tp_sdk_attach publishes trace_id (16 bytes), span_id (8 bytes),
 * trace_flags and n attributes as the calling thread's current context,
 * replacing any attached one. Both ids must be non-zero (-EINVAL
 * otherwise, and nothing changes). Attributes that do not fit in the record
 * (TP_SDK_RECORD_SIZE) are left out: the context is still attached and the
 * call returns -ENOSPC. Attributes with an unregistered key give -EINVAL
 * before anything changes.
 *
 * The first attach on a thread calls tp_sdk_thread_register.
 */
int tp_sdk_attach(const uint8_t *trace_id, const uint8_t *span_id, uint8_t trace_flags,
		  const struct tp_sdk_attr *attrs, size_t n);
/* Marks the calling thread's record invalid: no context. Always 0. */
int tp_sdk_detach(void);

/*
 * Points the calling thread's otel_thread_ctx_v1 at its record, once per
 * thread (later calls do nothing), and calls tp_sdk_probe_thread_registered.
 * Call it at thread start to let an agent learn the record early; attach
 * calls it otherwise. Always 0.
 */
int tp_sdk_thread_register(void);
/*
 * Uprobe target, called once per thread by tp_sdk_thread_register with the
 * thread's record and the address of its otel_thread_ctx_v1. It does
 * nothing; applications do not call it.
 */
void tp_sdk_probe_thread_registered(const void *record, const void *tls_slot);

/*
 * W3C traceparent. tp_sdk_traceparent_parse reads len bytes at text
 * strictly (W3C Trace Context level 2): lower case hex only, version ff
 * invalid, version 00 exactly 55 bytes, later versions at least 55 bytes and
 * a '-' after the first 55, all-zero ids invalid. Fills trace_id[16],
 * span_id[8] and *trace_flags on success; returns 0 or -EINVAL.
 */
int tp_sdk_traceparent_parse(const char *text, size_t len, uint8_t *trace_id, uint8_t *span_id,
			     uint8_t *trace_flags);
/*
 * Writes a version 00 traceparent and a NUL to out (out_size >= 56, else
 * -ENOSPC). Returns 0, -EINVAL for zero ids, -ENOSPC.
 */
int tp_sdk_traceparent_format(const uint8_t *trace_id, const uint8_t *span_id, uint8_t trace_flags,
			      char *out, size_t out_size);

/*
 * Random non-zero ids from a per-thread generator seeded once from
 * getrandom(2): trace ids qualify for the W3C random trace-id flag (0x02).
 * Not for cryptographic use. Always 0.
 */
int tp_sdk_new_trace_id(uint8_t *trace_id);
int tp_sdk_new_span_id(uint8_t *span_id);

/*
 * Server spans, exported as OTLP.
 *
 * A request handler calls tp_sdk_span_begin when the request arrives and
 * tp_sdk_span_end when the response is sent, on the same thread:
 *
 *   struct tp_sdk_span sp;
 *   tp_sdk_span_begin(&sp, traceparent_header, header_len); // attaches the context
 *   ... serve the request ...
 *   tp_sdk_span_end(&sp, "GET", "/api/pay", 200);           // detaches, queues the span
 *
 * Both calls take no lock, allocate nothing and make no system call (the
 * clocks are read through the vDSO); tp_sdk_span_end copies the finished
 * span into a bounded queue, and a background thread of the SDK batches
 * the queue and exports it with OTLP/HTTP (protobuf, POST .../v1/traces).
 * A full queue drops the span and counts it (tp_sdk_export_get_stats).
 * The resource's service.name is the one given to tp_sdk_process_publish,
 * else OTEL_SERVICE_NAME, else the executable's name. Every span is
 * exported, whatever its sampled flag (the profiler wants them all).
 *
 * The exporter polls the queue every 25 ms at most (the request path never
 * wakes it: that would be a system call). Only http:// endpoints are
 * supported; https is refused with -EINVAL (point the SDK at the node's
 * agent or a local collector).
 *
 * fork: the child has no exporter thread and an empty queue (the parent's
 * spans stay the parent's), and its statistics start at zero. If the parent
 * was exporting, the child's first tp_sdk_span_end starts a new exporter
 * with the parent's settings; the child may instead call
 * tp_sdk_export_start itself.
 */

/* A span in progress: filled by tp_sdk_span_begin, read by tp_sdk_span_end. */
struct tp_sdk_span {
	uint8_t trace_id[16];	   /* the trace: the caller's, or a new one */
	uint8_t span_id[8];	   /* this span, new */
	uint8_t parent_span_id[8]; /* the caller's span from traceparent; zero for a root span */
	uint8_t trace_flags;	   /* from traceparent, or 0x01 (sampled) for a new trace */
	int64_t start_unix_ns;	   /* wall-clock start: start_mono_ns + (REALTIME - MONOTONIC) */
	int64_t start_mono_ns;	   /* CLOCK_MONOTONIC at begin (the duration's base) */
};

/*
 * Starts a server span on the calling thread. traceparent (len bytes, need
 * not be NUL-terminated) is the incoming W3C header; NULL, empty or invalid
 * starts a new trace. Fills *span and attaches its ids as the thread's
 * context (tp_sdk_attach, no attributes). Returns 0 or -EINVAL (span NULL).
 */
int tp_sdk_span_begin(struct tp_sdk_span *span, const char *traceparent, size_t len);

/*
 * Ends the span begun on this thread: detaches the context and queues the
 * span for export with its method (e.g. "GET"), route (e.g. "/api/pay",
 * the template, not the full path) and HTTP status code (0 = unknown; 5xx
 * marks the span as an error). method and route are copied (cut to 15 and
 * 127 bytes) and may be NULL. Starts the exporter thread on the first call
 * if tp_sdk_export_start was not called (settings from the environment);
 * if that fails, it is not tried again, and the span is dropped, counted
 * in spans_dropped_error, and the start's error returned. After
 * tp_sdk_export_stop, spans are queued (until the queue is full) for a
 * later tp_sdk_export_start. Returns 0, -EINVAL, the error of a failed
 * start, or -ENOBUFS when the queue was full (the span is dropped and
 * counted). The name is "METHOD ROUTE", or whichever of the two is given,
 * or "request".
 */
int tp_sdk_span_end(struct tp_sdk_span *span, const char *method, const char *route,
		    int status_code);

/* Exporter settings; zero fields take the defaults. */
struct tp_sdk_export_opts {
	const char *endpoint; /* http://host:port[/path]; NULL: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
			       * (used as is), else OTEL_EXPORTER_OTLP_ENDPOINT + /v1/traces,
			       * else http://127.0.0.1:4318/v1/traces */
	uint32_t queue_spans; /* queue capacity in spans, rounded up to a power of two, at least 8;
			       * 0: 2048 */
	uint32_t batch_spans; /* spans per export request at most; 0: 512 */
	uint32_t interval_ms; /* export when spans waited this long, or batch_spans wait; 0: 1000 */
	uint32_t timeout_ms;  /* per export request; 0: 5000 */
};

/*
 * Starts the exporter thread with opts (NULL: defaults): allocates the
 * queue (kept for the process's life; a restart with another queue_spans
 * allocates a new one), the batch and a connection. The thread blocks all
 * signals. -EALREADY while an exporter runs; after tp_sdk_export_stop it may
 * be started again. Returns 0, -EINVAL (bad endpoint or an option above
 * 1048576 spans), -EALREADY, -ENOMEM, or the errno of a failed thread
 * creation.
 */
int tp_sdk_export_start(const struct tp_sdk_export_opts *opts);
/*
 * Exports what is queued, waits up to timeout_ms, stops the thread.
 * Returns 0 when the queue was emptied in time (each batch accepted, or
 * refused and counted in spans_dropped_error), -ETIMEDOUT otherwise (the
 * rest is counted in spans_dropped_error), 0 when no exporter runs,
 * -EALREADY when another thread is stopping it. Export
 * requests in flight are cut at the deadline. Also turns off the automatic
 * start of tp_sdk_span_end.
 */
int tp_sdk_export_stop(int timeout_ms);

/* What the exporter did since the process started. */
struct tp_sdk_export_stats {
	uint64_t spans_ended;	      /* tp_sdk_span_end calls that queued a span */
	uint64_t spans_exported;      /* accepted by the endpoint */
	uint64_t spans_dropped_full;  /* dropped: the queue was full */
	uint64_t spans_dropped_error; /* dropped: the endpoint failed or refused them */
	uint64_t requests;	      /* export requests sent */
	uint64_t request_errors;      /* of which failed (connection, HTTP status, timeout) */
};

/* Fills *out (never fails for a non-NULL out; -EINVAL otherwise). */
int tp_sdk_export_get_stats(struct tp_sdk_export_stats *out);

#ifdef __cplusplus
}
#endif

#endif
