/*
 * grpc_unary.h - one unary gRPC call with the C core, as every client in
 * traceprof makes it: the OTLP forwarder, the AgentControl client, tests
 * and benchmarks. The message is bytes already encoded; the answer is the
 * call's status, its details and the raw response message.
 */
#ifndef TRACEPROF_GRPC_UNARY_H
#define TRACEPROF_GRPC_UNARY_H

#include <stdbool.h>
#include <stddef.h>

#include <grpc/grpc.h>
#include <grpc/slice.h>

/* What one unary call got back. */
struct grpc_unary_answer {
	grpc_status_code code;	/* the call's status; GRPC_STATUS_INTERNAL if it could not start */
	char details[256];	/* its status details, cut to fit */
	grpc_byte_buffer *resp; /* the response message, or NULL; the caller destroys it */
};

/*
 * Calls method ("/package.Service/Method") on channel ch with the len
 * bytes at buf, waiting on cq (a pluck queue, reusable) for at most
 * timeout_ms. authorization, when not NULL, is sent as the value of the
 * "authorization" metadata (e.g. "Bearer abc").
 */
void grpc_unary_call(grpc_channel *ch, grpc_completion_queue *cq, const char *method,
		     const char *authorization, const void *buf, size_t len, int timeout_ms,
		     struct grpc_unary_answer *out);

/*
 * The same call with gz, gzip data already, as the message: it is sent as
 * it is with the message's compressed flag set, as a client of the gRPC
 * core sends a message it compressed (the core does not compress a buffer
 * made with grpc_raw_compressed_byte_buffer_create() again). The channel
 * must say "grpc-encoding: gzip" (grpc_unary_insecure_channel(..., true)).
 */
void grpc_unary_call_gzipped(grpc_channel *ch, grpc_completion_queue *cq, const char *method,
			     const char *authorization, const void *gz, size_t len, int timeout_ms,
			     struct grpc_unary_answer *out);

/*
 * The bytes of the response message in a (a slice the caller unrefs;
 * empty when there is none or it cannot be read); destroys a->resp and
 * sets it to NULL.
 */
grpc_slice grpc_unary_answer_take(struct grpc_unary_answer *a);

/* The name of status code c ("OK", "INVALID_ARGUMENT", ...), "?" if unknown. */
const char *grpc_unary_code_name(grpc_status_code c);

/*
 * A plain insecure channel to target with gRPC's default backoff, as tests
 * and end-to-end tools open one; with gzip its calls say "grpc-encoding:
 * gzip" (and the core compresses a message not compressed yet).
 */
grpc_channel *grpc_unary_insecure_channel(const char *target, bool gzip);

/*
 * A client channel to target with creds, as every client in traceprof
 * opens one: after the peer goes away it tries to reconnect every second
 * at most (gRPC's default backoff grows to two minutes, so a restarted
 * agent or collector would wait that long for its next call).
 * ssl_target_name, when not NULL, overrides the name checked in the
 * server's certificate.
 */
grpc_channel *grpc_unary_channel(const char *target, grpc_channel_credentials *creds,
				 const char *ssl_target_name);

#endif
