/*
 * otlp_grpc.h - the OTLP/gRPC trace receiver: a gRPC C core server on its
 * own thread serving TraceService/Export into a struct otlp_receiver.
 *
 * Answers: OK with an ExportTraceServiceResponse (partial_success when
 * spans were rejected), INVALID_ARGUMENT for a malformed message or one
 * nested deeper than OTLP_MAX_DEPTH, RESOURCE_EXHAUSTED over the
 * receiver's max_bytes (gRPC's own receive limit is set to it, on the
 * bytes as sent; a gzip or deflate message is inflated here, by
 * otlp_receiver_export_compressed(), and refused as soon as it passes
 * max_bytes), UNAVAILABLE when the rows cannot be queued, INTERNAL (from
 * rpc_server.c) for a message flagged compressed without grpc-encoding or
 * a second message on the call. Calls
 * are answered one at a time, in arrival order, on the server's thread.
 */
#ifndef TRACEPROF_AGENT_OTLP_GRPC_H
#define TRACEPROF_AGENT_OTLP_GRPC_H

#include <grpc/grpc.h>

#include "grpc_unary.h"
#include "otlp.h"
#include "traceprof/listen.h"

#define OTLP_GRPC_METHOD "/opentelemetry.proto.collector.trace.v1.TraceService/Export"

/*
 * Client side (forwarding upstream, tests, benchmarks): one unary
 * TraceService/Export call of the len bytes at buf on channel ch, waiting
 * on cq (a pluck queue, reusable) for at most deadline_s seconds.
 */
void otlp_grpc_call(grpc_channel *ch, grpc_completion_queue *cq, const void *buf, size_t len,
		    int deadline_s, struct grpc_unary_answer *out);

struct otlp_grpc;

/*
 * Listens on addr ("host:port"; port 0 picks one) and serves from a new
 * thread. r is borrowed and must outlive the server; lim (NULL: defaults)
 * caps its connections (rpc_server.h). Returns NULL with errno set and the
 * reason logged (EADDRINUSE when the address cannot be bound). Stop with
 * otlp_grpc_stop().
 */
struct otlp_grpc *otlp_grpc_start(const char *addr, struct otlp_receiver *r,
				  const struct tp_conn_limits *lim);
/* The port bound. */
int otlp_grpc_port(const struct otlp_grpc *g);
/* Its connection counters (live). */
void otlp_grpc_conn_stats(struct otlp_grpc *g, struct tp_conn_stats *out);
/* Cancels calls in progress, stops the thread, frees everything. NULL is a no-op. */
void otlp_grpc_stop(struct otlp_grpc *g);

#endif
