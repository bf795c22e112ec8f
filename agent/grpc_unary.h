/*
 * grpc_unary.h - one unary gRPC call with the C core, as every client in
 * traceprof makes it: the OTLP forwarder, the AgentControl client, tests
 * and benchmarks. The message is bytes already encoded; the answer is the
 * call's status, its details and the raw response message.
 */
#ifndef TRACEPROF_AGENT_GRPC_UNARY_H
#define TRACEPROF_AGENT_GRPC_UNARY_H

#include <stddef.h>

#include <grpc/grpc.h>

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
