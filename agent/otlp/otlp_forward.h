/*
 * otlp_forward.h - forwards every accepted OTLP trace export, unchanged,
 * to an upstream OTLP/gRPC endpoint (a collector), so the agent can sit in
 * front of an existing pipeline.
 *
 * Data flow: the receiver hands each export's bytes to
 * otlp_forward_submit(), which copies them into a queue bounded in bytes
 * (the oldest exports are dropped and counted when it is full) and returns
 * at once; a thread sends them in order as TraceService/Export calls over
 * one gRPC channel, each with a 10 s deadline. A failed call is counted
 * and not retried (the upstream's own clients retry; the agent's job is
 * profiling, and holding exports for a dead upstream would only move the
 * memory problem here); failures are logged once per episode.
 *
 * Threads: submit and get_stats from any thread.
 */
#ifndef TRACEPROF_AGENT_OTLP_FORWARD_H
#define TRACEPROF_AGENT_OTLP_FORWARD_H

#include <stddef.h>
#include <stdint.h>

#define OTLP_FORWARD_QUEUE_BYTES (32u << 20) /* queue bound when 0 is given */

struct otlp_forward_stats {
	uint64_t submitted; /* exports queued */
	uint64_t sent;	    /* exports the upstream answered OK */
	uint64_t failed;    /* exports the upstream refused or that failed */
	uint64_t dropped;   /* exports dropped because the queue was full, or left at stop */
	size_t queue_bytes; /* bytes queued now */
};

struct otlp_forward;

/*
 * Starts forwarding to target ("host:port", insecure). The channel
 * connects lazily. Returns NULL with errno set (EINVAL, ENOMEM).
 */
struct otlp_forward *otlp_forward_start(const char *target, size_t max_queue_bytes);
/* Queues a copy of buf. Returns 0 or -ENOMEM / -ENOBUFS (counted as dropped). */
int otlp_forward_submit(struct otlp_forward *f, const void *buf, size_t len);
void otlp_forward_get_stats(struct otlp_forward *f, struct otlp_forward_stats *out);
/*
 * Sends what is queued until timeout_ms passes (a call in progress may run
 * to its own 10 s deadline), then stops and frees; what is left counts as
 * dropped. The final counters go to *final (may be NULL). NULL f is a no-op.
 */
void otlp_forward_stop(struct otlp_forward *f, int timeout_ms, struct otlp_forward_stats *final);

#endif
