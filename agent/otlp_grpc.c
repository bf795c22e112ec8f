/*
 * otlp_grpc.c - see otlp_grpc.h.
 *
 * One completion queue, one thread. A struct call lives from the request
 * for a new call (phase WAITING) through the batch that answers it
 * (phase ANSWERING): initial metadata, the response message when OK, the
 * status, and the receipt of the client's close. The next call is
 * requested as soon as one arrives, so calls queue inside gRPC while one
 * is decoded. Stop: shutdown_and_notify + cancel_all_calls from the
 * stopping thread; the server thread shuts the queue down when the
 * shutdown tag arrives and exits once the queue is drained.
 */
#include "otlp_grpc.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/slice.h>

#include "traceprof/log.h"

enum phase { WAITING, ANSWERING };

struct call {
	enum phase phase;	   /* what the next completion means */
	grpc_call *call;	   /* the call, once it arrived */
	gpr_timespec deadline;	   /* client's deadline (unused) */
	grpc_metadata_array md;	   /* request metadata */
	grpc_byte_buffer *payload; /* request message, or NULL */
	grpc_byte_buffer *reply;   /* response message, or NULL */
	grpc_slice details;	   /* status message */
	int cancelled;		   /* from RECV_CLOSE_ON_SERVER */
};

struct otlp_grpc {
	grpc_server *server;	   /* the server */
	grpc_completion_queue *cq; /* its one queue */
	void *method;		   /* registered Export method */
	struct otlp_receiver *r;   /* where exports go (borrowed) */
	pthread_t thread;	   /* serving thread */
	bool started;		   /* thread runs */
	int port;		   /* bound port */
	int shutdown_tag;	   /* address used as the shutdown tag */
};

static struct call *call_new(void)
{
	struct call *c = calloc(1, sizeof(*c));

	if (c)
		grpc_metadata_array_init(&c->md);
	return c;
}

static void call_free(struct call *c)
{
	if (!c)
		return;
	if (c->call)
		grpc_call_unref(c->call);
	if (c->payload)
		grpc_byte_buffer_destroy(c->payload);
	if (c->reply)
		grpc_byte_buffer_destroy(c->reply);
	if (c->phase == ANSWERING)
		grpc_slice_unref(c->details);
	grpc_metadata_array_destroy(&c->md);
	free(c);
}

/* Asks gRPC for the next call. */
static int request_call(struct otlp_grpc *g)
{
	struct call *c = call_new();

	if (!c)
		return -ENOMEM;
	if (grpc_server_request_registered_call(g->server, g->method, &c->call, &c->deadline,
						&c->md, &c->payload, g->cq, g->cq,
						c) != GRPC_CALL_OK) {
		call_free(c);
		return -EIO;
	}
	return 0;
}

static grpc_status_code grpc_status_of(enum otlp_status s)
{
	switch (s) {
	case OTLP_OK:
		return GRPC_STATUS_OK;
	case OTLP_MALFORMED:
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

/* Decodes the request and starts the answering batch. */
static void answer(struct otlp_grpc *g, struct call *c)
{
	struct otlp_result res = {0};
	grpc_op ops[4];
	grpc_status_code code;
	size_t n = 0;

	if (!c->payload) {
		res.status = OTLP_MALFORMED;
		snprintf(res.message, sizeof(res.message), "no request message");
	} else {
		grpc_byte_buffer_reader rd;
		grpc_slice all;

		if (!grpc_byte_buffer_reader_init(&rd, c->payload)) {
			res.status = OTLP_MALFORMED;
			snprintf(res.message, sizeof(res.message),
				 "cannot read the request message (compression?)");
		} else {
			all = grpc_byte_buffer_reader_readall(&rd);
			grpc_byte_buffer_reader_destroy(&rd);
			otlp_receiver_export(g->r, GRPC_SLICE_START_PTR(all),
					     GRPC_SLICE_LENGTH(all), &res);
			grpc_slice_unref(all);
		}
	}
	code = grpc_status_of(res.status);
	memset(ops, 0, sizeof(ops));
	ops[n].op = GRPC_OP_SEND_INITIAL_METADATA;
	n++;
	if (code == GRPC_STATUS_OK) {
		uint8_t *buf = NULL;
		size_t len = 0;
		grpc_slice s;

		if (otlp_pack_response(&res, &buf, &len) == 0) {
			s = grpc_slice_from_copied_buffer((const char *)buf, len);
			c->reply = grpc_raw_byte_buffer_create(&s, 1);
			grpc_slice_unref(s);
			free(buf);
			ops[n].op = GRPC_OP_SEND_MESSAGE;
			ops[n].data.send_message.send_message = c->reply;
			n++;
		} else {
			code = GRPC_STATUS_UNAVAILABLE;
			snprintf(res.message, sizeof(res.message), "out of memory");
		}
	}
	c->details = grpc_slice_from_copied_string(code == GRPC_STATUS_OK ? "" : res.message);
	ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
	ops[n].data.send_status_from_server.status = code;
	ops[n].data.send_status_from_server.status_details = &c->details;
	n++;
	ops[n].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
	ops[n].data.recv_close_on_server.cancelled = &c->cancelled;
	n++;
	c->phase = ANSWERING;
	if (grpc_call_start_batch(c->call, ops, n, c, NULL) != GRPC_CALL_OK)
		call_free(c); /* no completion will come */
}

static void *serve(void *arg)
{
	struct otlp_grpc *g = arg;
	bool shutting_down = false;

	for (;;) {
		grpc_event ev =
		    grpc_completion_queue_next(g->cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
		struct call *c;

		if (ev.type == GRPC_QUEUE_SHUTDOWN)
			break;
		if (ev.type != GRPC_OP_COMPLETE)
			continue;
		if (ev.tag == &g->shutdown_tag) {
			shutting_down = true;
			grpc_completion_queue_shutdown(g->cq);
			continue;
		}
		c = ev.tag;
		if (c->phase == ANSWERING || !ev.success) {
			call_free(c);
			continue;
		}
		if (!shutting_down && request_call(g) != 0)
			log_warn("otlp grpc: cannot wait for the next call");
		answer(g, c);
	}
	return NULL;
}

struct otlp_grpc *otlp_grpc_start(const char *addr, struct otlp_receiver *r)
{
	struct otlp_grpc *g = calloc(1, sizeof(*g));
	grpc_arg args[2];
	grpc_channel_args chargs = {2, args};
	grpc_server_credentials *creds;
	int rc;

	if (!g)
		return NULL;
	grpc_init();
	g->r = r;
	memset(args, 0, sizeof(args));
	args[0].type = GRPC_ARG_INTEGER;
	args[0].key = GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH;
	args[0].value.integer = (int)otlp_receiver_max_bytes(r);
	args[1].type = GRPC_ARG_INTEGER;
	args[1].key = GRPC_ARG_ALLOW_REUSEPORT;
	args[1].value.integer = 0;
	g->server = grpc_server_create(&chargs, NULL);
	g->cq = grpc_completion_queue_create_for_next(NULL);
	grpc_server_register_completion_queue(g->server, g->cq, NULL);
	g->method = grpc_server_register_method(g->server, OTLP_GRPC_METHOD, NULL,
						GRPC_SRM_PAYLOAD_READ_INITIAL_BYTE_BUFFER, 0);
	creds = grpc_insecure_server_credentials_create();
	g->port = grpc_server_add_http2_port(g->server, addr, creds);
	grpc_server_credentials_release(creds);
	if (!g->port) {
		log_error("otlp grpc: cannot listen on %s (address in use, or not host:port?)",
			  addr);
		errno = EADDRINUSE;
		goto out_destroy;
	}
	grpc_server_start(g->server);
	if (request_call(g) != 0) {
		errno = EIO;
		goto out_shutdown;
	}
	rc = pthread_create(&g->thread, NULL, serve, g);
	if (rc) {
		errno = rc;
		goto out_shutdown;
	}
	g->started = true;
	log_info("otlp grpc: listening on %s port=%d", addr, g->port);
	return g;

out_shutdown:
	rc = errno;
	otlp_grpc_stop(g);
	errno = rc;
	return NULL;
out_destroy:
	rc = errno;
	grpc_server_destroy(g->server);
	grpc_completion_queue_shutdown(g->cq);
	while (grpc_completion_queue_next(g->cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL).type !=
	       GRPC_QUEUE_SHUTDOWN)
		;
	grpc_completion_queue_destroy(g->cq);
	grpc_shutdown();
	free(g);
	errno = rc;
	return NULL;
}

int otlp_grpc_port(const struct otlp_grpc *g)
{
	return g->port;
}

void otlp_grpc_stop(struct otlp_grpc *g)
{
	if (!g)
		return;
	grpc_server_shutdown_and_notify(g->server, g->cq, &g->shutdown_tag);
	grpc_server_cancel_all_calls(g->server);
	if (g->started) {
		pthread_join(g->thread, NULL);
	} else {
		for (;;) {
			grpc_event ev = grpc_completion_queue_next(
			    g->cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);

			if (ev.type == GRPC_QUEUE_SHUTDOWN)
				break;
			if (ev.tag == &g->shutdown_tag)
				grpc_completion_queue_shutdown(g->cq);
			else if (ev.tag)
				call_free(ev.tag);
		}
	}
	grpc_server_destroy(g->server);
	grpc_completion_queue_destroy(g->cq);
	grpc_shutdown();
	free(g);
}

void otlp_grpc_call(grpc_channel *ch, grpc_completion_queue *cq, const void *buf, size_t len,
		    int deadline_s, struct grpc_unary_answer *out)
{
	grpc_unary_call(ch, cq, OTLP_GRPC_METHOD, NULL, buf, len, deadline_s * 1000, out);
}
