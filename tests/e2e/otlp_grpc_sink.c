/*
 * otlp_grpc_sink - an OTLP/gRPC receiver for tests: traceprof's own receiver
 * (agent/otlp) on 127.0.0.1, printing "listening on 127.0.0.1:PORT" and
 * then one CSV line per server span received:
 * trace_id,parent_span_id,method,route,status,duration_us,service
 * (ids in lower-case hex, parent "" for a root span). Stops on SIGTERM or
 * SIGINT.
 *
 * usage: otlp_grpc_sink
 */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "aggregate.h"
#include "otlp.h"
#include "otlp_grpc.h"

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static const char *service_of(const struct agg_window *w, uint64_t id)
{
	for (size_t i = 0; i < w->nsources; i++)
		if (w->sources[i].id == id)
			return w->sources[i].src.service;
	return "";
}

static const struct agg_route *route_of(const struct agg_window *w, uint64_t id)
{
	for (size_t i = 0; i < w->nroutes; i++)
		if (w->routes[i].id == id)
			return &w->routes[i];
	return NULL;
}

static int print_rows(void *ctx, struct agg_window *w)
{
	(void)ctx;
	for (size_t i = 0; i < w->nrequests; i++) {
		const struct store_request *r = &w->requests[i];
		const struct agg_route *rt = route_of(w, r->route_id);

		for (int k = 0; k < 16; k++)
			printf("%02x", r->trace_id[k]);
		if (r->parent_span_id)
			printf(",%016" PRIx64, r->parent_span_id);
		else
			printf(",");
		printf(",%s,%s,%d,%" PRId64 ",%s\n", rt ? rt->method : "", rt ? rt->route : "",
		       r->status_code, r->duration_us, service_of(w, r->source_id));
	}
	fflush(stdout);
	agg_window_free(w);
	return 0;
}

int main(void)
{
	struct otlp_receiver *r =
	    otlp_receiver_new(&(struct otlp_receiver_opts){.submit = print_rows, .node = "sink"});
	struct otlp_grpc *g = r ? otlp_grpc_start("127.0.0.1:0", r, NULL) : NULL;

	if (!g) {
		fprintf(stderr, "otlp_grpc_sink: cannot start the receiver\n");
		return 1;
	}
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	printf("listening on 127.0.0.1:%d\n", otlp_grpc_port(g));
	fflush(stdout);
	while (!stop)
		pause();
	otlp_grpc_stop(g);
	otlp_receiver_free(r);
	return 0;
}
