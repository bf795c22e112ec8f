/*
 * otlp_grpc.h - the OTLP/gRPC trace receiver: a gRPC C core server on its
 * own thread serving TraceService/Export into a struct otlp_receiver.
 *
 * Answers: OK with an ExportTraceServiceResponse (partial_success when
 * spans were rejected), INVALID_ARGUMENT for a malformed message,
 * RESOURCE_EXHAUSTED over the receiver's max_bytes (gRPC's own receive
 * limit is set to it), UNAVAILABLE when the rows cannot be queued. Calls
 * are answered one at a time, in arrival order, on the server's thread.
 */
#ifndef TRACEPROF_AGENT_OTLP_GRPC_H
#define TRACEPROF_AGENT_OTLP_GRPC_H

#include "otlp.h"

#define OTLP_GRPC_METHOD "/opentelemetry.proto.collector.trace.v1.TraceService/Export"

struct otlp_grpc;

/*
 * Listens on addr ("host:port"; port 0 picks one) and serves from a new
 * thread. r is borrowed and must outlive the server. Returns NULL with
 * errno set and the reason logged (EADDRINUSE when the address cannot be
 * bound). Stop with otlp_grpc_stop().
 */
struct otlp_grpc *otlp_grpc_start(const char *addr, struct otlp_receiver *r);
/* The port bound. */
int otlp_grpc_port(const struct otlp_grpc *g);
/* Cancels calls in progress, stops the thread, frees everything. NULL is a no-op. */
void otlp_grpc_stop(struct otlp_grpc *g);

#endif
