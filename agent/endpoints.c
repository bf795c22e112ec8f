/*
 * endpoints.c - the agent's network side (endpoints.h). The OTLP receivers
 * run on their own threads and never touch the aggregator: each export
 * becomes a batch of request rows, shown to the trigger engine and then
 * offered to the shipper's queue (shipper_offer() is thread-safe). The
 * AgentControl server (its own thread) programs the engine.
 */
#include "endpoints.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "aggregate.h"
#include "kubepods.h"
#include "otlp.h"
#include "otlp_grpc.h"
#include "otlp_http.h"
#include "raise.h"
#include "sampler.h"
#include "shipper.h"
#include "traceprof/log.h"
#include "triggers.h"
#include "triggers_control.h"

#define KUBE_SYNC_WAIT_MS 3000 /* at start, wait this long for the node's pods */

static const struct agg_source *batch_source(const struct agg_window *w, uint64_t id)
{
	for (size_t i = 0; i < w->nsources; i++)
		if (w->sources[i].id == id)
			return &w->sources[i];
	return NULL;
}

static const struct agg_route *batch_route(const struct agg_window *w, uint64_t id)
{
	for (size_t i = 0; id && i < w->nroutes; i++)
		if (w->routes[i].id == id)
			return &w->routes[i];
	return NULL;
}

/* Shows every request row of an OTLP batch to the trigger engine. */
static void requests_to_triggers(struct endpoints *e, const struct agg_window *w)
{
	for (size_t i = 0; i < w->nrequests; i++) {
		const struct store_request *r = &w->requests[i];
		const struct agg_source *src = batch_source(w, r->source_id);
		const struct agg_route *rt = batch_route(w, r->route_id);
		struct triggers_source ts = {0};
		struct triggers_request tr = {
		    .start_us = r->start_us,
		    .duration_us = r->duration_us,
		    .status = r->status_code,
		    .route = rt ? rt->route : NULL,
		    .method = rt ? rt->method : NULL,
		};

		if (src) {
			ts.service = src->src.service;
			ts.container_id = src->src.container;
		}
		memcpy(tr.trace_id, r->trace_id, 16);
		triggers_request(e->trig, &ts, &tr);
	}
}

/*
 * OTLP batches never push out queued data: no room means UNAVAILABLE / 503, and the sender
 * retries. The trigger engine sees the rows first (a retried batch is seen again; a claim
 * never takes a trace twice).
 */
static int submit_requests(void *ctx, struct agg_window *w)
{
	struct endpoints *e = ctx;

	if (e->trig)
		requests_to_triggers(e, w);
	return shipper_offer(e->shipper, w);
}

static int forward_export(void *ctx, const void *buf, size_t len)
{
	return otlp_forward_submit(ctx, buf, len);
}

/* OTLP resources name a pod by k8s.pod.uid or container.id (otlp.h). */
static bool otlp_pod_lookup(void *ctx, const char *pod_uid, const char *container_id,
			    struct kubepods_pod *out)
{
	struct kubepods *kp = ctx;

	return (pod_uid && *pod_uid && kubepods_find_uid(kp, pod_uid, out)) ||
	       (container_id && *container_id && kubepods_find_container(kp, container_id, out));
}

/* A pod arrived or changed (informer thread): the main loop names its processes now. */
static void on_pods_changed(void *ctx)
{
	struct endpoints *e = ctx;

	sampler_wake(e->sampler);
}

/*
 * The node's pods from the Kubernetes API: with kubeconfig, or in-cluster
 * when kube-in-cluster is on (auto: when KUBERNETES_SERVICE_HOST is set).
 * A configuration that cannot be read stops the start; an API server that
 * does not answer does not (kubepods.h).
 */

static int start_kube(struct endpoints *e)
{
	struct kubepods_opts ko = {.kubeconfig = e->cfg->kubeconfig,
				   .node = e->cfg->node,
				   .on_change = on_pods_changed,
				   .change_ctx = e};
	bool in_cluster =
	    e->cfg->kube_in_cluster == CONFIG_ON ||
	    (e->cfg->kube_in_cluster == CONFIG_AUTO && getenv("KUBERNETES_SERVICE_HOST"));
	char err[512];

	if (!e->cfg->kubeconfig[0] && !in_cluster)
		return 0;
	e->kube = kubepods_start(&ko, err, sizeof(err));
	if (!e->kube) {
		log_error("cannot read pods from the Kubernetes API: %s (set kubeconfig, or "
			  "kube-in-cluster=off to run without pod names)",
			  err);
		return -EINVAL;
	}
	/* The processes already running are looked at first thing: name them at once if the
	 * API server answers quickly; if not, they are renamed when their pods arrive. */
	if (!kubepods_wait_synced(e->kube, KUBE_SYNC_WAIT_MS))
		log_info("kube: pods of node=%s not listed within %d ms; starting without them",
			 e->cfg->node, KUBE_SYNC_WAIT_MS);
	return 0;
}

/*
 * The OTLP receivers. An address that cannot be bound is logged and that
 * receiver stays off: the profiler keeps running (docs/agent.md says why).
 */
static int start_otlp(struct endpoints *e)
{
	struct otlp_receiver_opts ro = {
	    .kinds = e->cfg->otlp_span_kinds,
	    .node = e->cfg->node,
	    .max_bytes = e->cfg->otlp_max_bytes,
	    .submit = submit_requests,
	    .submit_ctx = e,
	    .pod_lookup = e->kube ? otlp_pod_lookup : NULL,
	    .pod_ctx = e->kube,
	};

	if (e->cfg->otlp_forward[0]) {
		e->otlp_fwd = otlp_forward_start(e->cfg->otlp_forward, 0);
		if (!e->otlp_fwd) {
			log_error("cannot forward OTLP exports to %s: %s", e->cfg->otlp_forward,
				  strerror(errno));
			return -errno;
		}
		ro.forward = forward_export;
		ro.forward_ctx = e->otlp_fwd;
	}
	e->otlp = otlp_receiver_new(&ro);
	if (!e->otlp) {
		log_error("cannot start the OTLP receiver: %s", strerror(errno));
		return -ENOMEM;
	}
	if (e->cfg->otlp_grpc[0]) {
		e->otlp_grpc = otlp_grpc_start(e->cfg->otlp_grpc, e->otlp, &e->conn_limits);
		if (!e->otlp_grpc)
			log_error("OTLP/gRPC receiver off: cannot listen on %s (set otlp-grpc to "
				  "a free address, or empty to turn it off)",
				  e->cfg->otlp_grpc);
	}
	if (e->cfg->otlp_http[0]) {
		e->otlp_http = otlp_http_start(e->cfg->otlp_http, e->otlp, &e->conn_limits);
		if (!e->otlp_http)
			log_error("OTLP/HTTP receiver off: cannot listen on %s (set otlp-http to "
				  "a free address, or empty to turn it off)",
				  e->cfg->otlp_http);
	}
	return 0;
}

/*
 * The trigger engine and the AgentControl server. Settings a user must fix
 * (no authentication off loopback, half a TLS setup, unreadable files) stop
 * the agent; a port already taken leaves control off and the profiler running.
 */
static int start_control(struct endpoints *e, struct raise *r)
{
	struct triggers_opts to = {.conninfo = e->cfg->db};
	struct control_opts co = {
	    .listen = e->cfg->control_listen,
	    .tls_cert = e->cfg->control_tls_cert,
	    .tls_key = e->cfg->control_tls_key,
	    .tls_ca = e->cfg->control_tls_ca,
	    .token_file = e->cfg->control_token_file,
	    .token_generate = e->cfg->control_token_generate,
	    .node = e->cfg->node,
	    .version = TRACEPROF_VERSION,
	    .limits = &e->conn_limits,
	};
	struct control_engine ce;
	char err[512];

	raise_trigger_opts(r, &to);
	e->trig = triggers_new(&to);
	if (!e->trig) {
		log_error("cannot start the trigger engine: %s", strerror(errno));
		return -errno;
	}
	if (!e->cfg->control_listen[0])
		return 0;
	triggers_control_engine(e->trig, &ce);
	e->control = control_start(&co, &ce, err, sizeof(err));
	if (!e->control) {
		if (errno != EADDRINUSE)
			return -EINVAL; /* control_start logged why */
		log_error("AgentControl off: cannot listen on %s (set control-listen to a free "
			  "address, or empty to turn it off)",
			  e->cfg->control_listen);
	}
	return 0;
}

/*
 * Copies the servers' refusal counters (control, OTLP/HTTP, forwarder) while
 * they run, so every stats file shows current values; at stop the last copy
 * stays.
 */
void endpoints_copy_counts(struct endpoints *e)
{
	if (e->control)
		control_get_stats(e->control, &e->control_stats);
	if (e->otlp_http)
		otlp_http_get_counts(e->otlp_http, &e->http_timeouts, &e->http_refused);
	if (e->otlp_fwd)
		otlp_forward_get_stats(e->otlp_fwd, &e->fwd_stats);
}

static void stop_control(struct endpoints *e)
{
	if (e->control) {
		control_get_stats(e->control, &e->control_stats);
		control_conn_stats(e->control, &e->conns_stopped[CONN_PORT_CONTROL]);
	}
	control_stop(e->control);
	e->control = NULL;
}

/* Servers first (no more exports), then what the forwarder still holds (5 s at most). */
static void stop_otlp(struct endpoints *e)
{
	if (e->otlp_grpc)
		otlp_grpc_conn_stats(e->otlp_grpc, &e->conns_stopped[CONN_PORT_OTLP_GRPC]);
	otlp_grpc_stop(e->otlp_grpc);
	e->otlp_grpc = NULL;
	if (e->otlp_http) {
		otlp_http_get_counts(e->otlp_http, &e->http_timeouts, &e->http_refused);
		otlp_http_conn_stats(e->otlp_http, &e->conns_stopped[CONN_PORT_OTLP_HTTP]);
	}
	otlp_http_stop(e->otlp_http);
	e->otlp_http = NULL;
	if (e->otlp_fwd)
		otlp_forward_stop(e->otlp_fwd, 5000, &e->fwd_stats);
	e->otlp_fwd = NULL;
}

int endpoints_start(struct endpoints *e, struct raise *r)
{
	const struct agent_config *cfg = e->cfg;
	int rc;

	e->conn_limits = (struct tp_conn_limits){
	    .max_conns = cfg->max_conns,
	    .max_per_peer = cfg->max_conns_per_peer,
	    .idle_timeout_ms = cfg->conn_idle_timeout_s * 1000,
	    .header_timeout_ms = cfg->http_header_timeout_s * 1000,
	    .min_body_rate = (int)cfg->http_min_body_rate,
	    .grpc_max_age_ms = cfg->grpc_max_conn_age_s * 1000,
	    .grpc_keepalive_ms = cfg->grpc_keepalive_s * 1000,
	    .grpc_handshake_ms = cfg->grpc_handshake_timeout_s * 1000,
	};
	rc = start_control(e, r);
	if (rc == 0)
		rc = start_kube(e);
	if (rc == 0)
		rc = start_otlp(e);
	return rc;
}

void endpoints_stop_servers(struct endpoints *e)
{
	stop_otlp(e);
	stop_control(e);
}

void endpoints_free(struct endpoints *e)
{
	endpoints_stop_servers(e);
	triggers_free(e->trig); /* after the OTLP threads, which feed it */
	e->trig = NULL;
	kubepods_stop(e->kube); /* after the OTLP threads, which read it */
	e->kube = NULL;
	otlp_receiver_free(e->otlp);
	e->otlp = NULL;
}
