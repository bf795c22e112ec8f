/*
 * otlp_grpc.c - see otlp_grpc.h. The server is an rpc_server (one queue,
 * one thread) whose handler decodes each Export into the receiver.
 */
#include "otlp_grpc.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include <grpc/grpc.h>
#include <grpc/grpc_security.h>

#include "rpc_server.h"
#include "traceprof/log.h"

struct otlp_grpc {
	struct rpc_server *srv;	 /* the server */
	struct otlp_receiver *r; /* where exports go (borrowed) */
};

static grpc_status_code grpc_status_of(enum otlp_status s)
{
	switch (s) {
	case OTLP_OK:
		return GRPC_STATUS_OK;
	case OTLP_MALFORMED:
	case OTLP_TOO_DEEP:
		return GRPC_STATUS_INVALID_ARGUMENT;
	case OTLP_TOO_LARGE:
		return GRPC_STATUS_RESOURCE_EXHAUSTED;
	case OTLP_UNAVAILABLE:
	case OTLP_NOMEM:
	case OTLP_STATUS__COUNT:
		break;
	}
	return GRPC_STATUS_UNAVAILABLE;
}

/* Decodes one Export request into the receiver and answers it. */
static void handle(void *ctx, const struct rpc_request *req, struct rpc_reply *rep)
{
	struct otlp_grpc *g = ctx;
	struct otlp_result res = {0};

	if (req->unreadable)
		return; /* INVALID_ARGUMENT, as for any malformed export */
	if (!req->has_message) {
		res.status = OTLP_MALFORMED;
		snprintf(res.message, sizeof(res.message), "no request message");
	} else if (req->compressed) {
		otlp_receiver_export_compressed(g->r, req->data, req->len, &res);
	} else {
		otlp_receiver_export(g->r, req->data, req->len, &res);
	}
	rep->code = grpc_status_of(res.status);
	if (rep->code == GRPC_STATUS_OK && otlp_pack_response(&res, &rep->data, &rep->len) != 0) {
		rep->code = GRPC_STATUS_UNAVAILABLE;
		snprintf(res.message, sizeof(res.message), "out of memory");
	}
	snprintf(rep->message, sizeof(rep->message), "%s", res.message);
}

/* A call gRPC ended before its message reached handle(): over the receive limit. */
static void count_unread(void *ctx)
{
	struct otlp_grpc *g = ctx;

	otlp_receiver_count_refusal(g->r, OTLP_REFUSE_GRPC_TOO_LARGE);
}

struct otlp_grpc *otlp_grpc_start(const char *addr, struct otlp_receiver *r,
				  const struct tp_conn_limits *lim)
{
	static const char *const methods[] = {OTLP_GRPC_METHOD};
	struct otlp_grpc *g = calloc(1, sizeof(*g));
	int err;

	if (!g)
		return NULL;
	g->r = r;
	g->srv = rpc_server_start(&(struct rpc_server_opts){
	    .addr = addr,
	    .creds = grpc_insecure_server_credentials_create(),
	    .methods = methods,
	    .nmethods = 1,
	    .max_receive_bytes = (int)otlp_receiver_max_bytes(r),
	    .handler = handle,
	    .ctx = g,
	    .name = "otlp grpc",
	    .start_on_connect = true,
	    .limits = lim,
	    .accept_compressed = true,
	    .on_unread = count_unread,
	});
	if (!g->srv) {
		err = errno;
		free(g);
		errno = err;
		return NULL;
	}
	log_info("otlp grpc: listening on %s port=%d", addr, rpc_server_port(g->srv));
	return g;
}

int otlp_grpc_port(const struct otlp_grpc *g)
{
	return rpc_server_port(g->srv);
}

void otlp_grpc_conn_stats(struct otlp_grpc *g, struct tp_conn_stats *out)
{
	rpc_server_conn_stats(g->srv, out);
}

void otlp_grpc_stop(struct otlp_grpc *g)
{
	if (!g)
		return;
	rpc_server_stop(g->srv);
	free(g);
}

void otlp_grpc_call(grpc_channel *ch, grpc_completion_queue *cq, const void *buf, size_t len,
		    int deadline_s, struct grpc_unary_answer *out)
{
	grpc_unary_call(ch, cq, OTLP_GRPC_METHOD, NULL, buf, len, deadline_s * 1000, out);
}
