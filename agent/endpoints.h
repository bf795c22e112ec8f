/*
 * endpoints.h - the agent's network side, started after the pipeline and
 * stopped before it: the OTLP receivers (gRPC, HTTP) and the forwarder,
 * the trigger engine and the AgentControl server over it, the node's pods
 * from the Kubernetes API. Their refusal and connection counters are
 * copied here while they run and kept when they stop, for the stats file.
 */
#ifndef TRACEPROF_AGENT_ENDPOINTS_H
#define TRACEPROF_AGENT_ENDPOINTS_H

#include <stdint.h>

#include "config.h"
#include "control.h"
#include "otlp_forward.h"
#include "traceprof/listen.h"

struct kubepods;
struct otlp_grpc;
struct otlp_http;
struct otlp_receiver;
struct raise;
struct sampler;
struct shipper;
struct triggers;

/* The listening ports, for their connection counters (conns_stopped, the stats file). */
enum { CONN_PORT_OTLP_GRPC, CONN_PORT_OTLP_HTTP, CONN_PORT_CONTROL, CONN_PORTS };

struct endpoints {
	/* borrowed: set by the agent before endpoints_start */
	const struct agent_config *cfg;
	struct sampler *sampler;	     /* woken when pods change */
	struct shipper *shipper;	     /* takes the OTLP batches */
	struct tp_conn_limits conn_limits;   /* every listening port's caps and timeouts */
	struct otlp_receiver *otlp;	     /* OTLP exports -> request rows */
	struct otlp_grpc *otlp_grpc;	     /* OTLP/gRPC server, or NULL */
	struct otlp_http *otlp_http;	     /* OTLP/HTTP server, or NULL */
	struct otlp_forward *otlp_fwd;	     /* upstream forwarding, or NULL */
	struct otlp_forward_stats fwd_stats; /* its counters (endpoints_copy_counts) */
	struct triggers *trig;		     /* trigger engine */
	struct control *control;	     /* AgentControl server, or NULL */
	struct control_stats control_stats;  /* its counters (endpoints_copy_counts) */
	struct kubepods *kube;		     /* the node's pods (Kubernetes API), or NULL */
	uint64_t http_timeouts;		     /* OTLP/HTTP connections closed as too slow */
	uint64_t http_refused;		     /* OTLP/HTTP connections refused when full */
	struct tp_conn_stats conns_stopped[CONN_PORTS]; /* per CONN_PORT_*: of a stopped port */
};

/*
 * The trigger engine (its callbacks from r) and the AgentControl server,
 * the Kubernetes API side, the OTLP receivers, in that order. Settings a
 * user must fix stop the start (-errno, logged); a port already taken
 * leaves that server off, logged.
 */
int endpoints_start(struct endpoints *e, struct raise *r);
/* Copies the servers' counters while they run (every stats file shows current values). */
void endpoints_copy_counts(struct endpoints *e);
/* Stops the OTLP servers (then what the forwarder holds, 5 s at most) and AgentControl. */
void endpoints_stop_servers(struct endpoints *e);
/* Stops everything (servers, engine, pod informer) and frees; safe on a zeroed e. */
void endpoints_free(struct endpoints *e);

#endif
