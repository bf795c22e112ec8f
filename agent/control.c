/*
 * control.c - see control.h.
 *
 * The shape of otlp_grpc.c: one completion queue, one thread, a struct
 * call from the request for a new call (WAITING) through the batch that
 * answers it (ANSWERING). Each of the two methods always has one call
 * requested; when one arrives the next is requested for the same method.
 * The token check comes before anything is decoded. Stop:
 * shutdown_and_notify + cancel_all_calls, the thread drains the queue.
 */
#include "control.h"

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

#include "control_auth.h"
#include "traceprof/log.h"

enum phase { WAITING, ANSWERING };
enum method { M_APPLY, M_STATUS, M__COUNT };

struct call {
	enum phase phase;	   /* what the next completion means */
	enum method method;	   /* which method it was requested for */
	grpc_call *call;	   /* the call, once it arrived */
	gpr_timespec deadline;	   /* client's deadline (unused) */
	grpc_metadata_array md;	   /* request metadata */
	grpc_byte_buffer *payload; /* request message, or NULL */
	grpc_byte_buffer *reply;   /* response message, or NULL */
	grpc_slice details;	   /* status message (ANSWERING) */
	int cancelled;		   /* from RECV_CLOSE_ON_SERVER */
};

struct control {
	grpc_server *server;	    /* the server */
	grpc_completion_queue *cq;  /* its one queue */
	void *methods[M__COUNT];    /* registered methods */
	struct triggers *t;	    /* the engine (borrowed) */
	char *token;		    /* bearer token, or NULL */
	char *node;		    /* this node */
	char *version;		    /* reported version */
	pthread_t thread;	    /* serving thread */
	bool started;		    /* thread runs */
	int port;		    /* bound port */
	int shutdown_tag;	    /* address used as the shutdown tag */
	pthread_mutex_t mu;	    /* guards stats */
	struct control_stats stats; /* counters */
};

static struct call *call_new(enum method m)
{
	struct call *c = calloc(1, sizeof(*c));

	if (c) {
		c->method = m;
		grpc_metadata_array_init(&c->md);
	}
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

static int request_call(struct control *s, enum method m)
{
	struct call *c = call_new(m);

	if (!c)
		return -ENOMEM;
	if (grpc_server_request_registered_call(s->server, s->methods[m], &c->call, &c->deadline,
						&c->md, &c->payload, s->cq, s->cq,
						c) != GRPC_CALL_OK) {
		call_free(c);
		return -EIO;
	}
	return 0;
}

/* Whether the call carries "authorization: Bearer <token>" with our token. */
static bool authorized(const struct control *s, const struct call *c)
{
	static const char prefix[] = "Bearer ";
	bool ok = false;

	if (!s->token)
		return true;
	for (size_t i = 0; i < c->md.count; i++) {
		const grpc_metadata *m = &c->md.metadata[i];
		const char *v = (const char *)GRPC_SLICE_START_PTR(m->value);
		size_t vlen = GRPC_SLICE_LENGTH(m->value);

		if (GRPC_SLICE_LENGTH(m->key) != 13 ||
		    memcmp(GRPC_SLICE_START_PTR(m->key), "authorization", 13) != 0)
			continue;
		if (vlen >= sizeof(prefix) - 1 && memcmp(v, prefix, sizeof(prefix) - 1) == 0 &&
		    control_auth_equal(v + sizeof(prefix) - 1, vlen - (sizeof(prefix) - 1),
				       s->token, strlen(s->token)))
			ok = true;
	}
	return ok;
}

/* Serializes msg into c->reply; 0 or -ENOMEM. */
static int set_reply(struct call *c, const ProtobufCMessage *msg)
{
	size_t len = protobuf_c_message_get_packed_size(msg);
	uint8_t *buf = malloc(len ? len : 1);
	grpc_slice sl;

	if (!buf)
		return -ENOMEM;
	protobuf_c_message_pack(msg, buf);
	sl = grpc_slice_from_copied_buffer((const char *)buf, len);
	c->reply = grpc_raw_byte_buffer_create(&sl, 1);
	grpc_slice_unref(sl);
	free(buf);
	return 0;
}

/* The request message as one slice (the caller unrefs), or false when unreadable. */
static bool read_payload(struct call *c, grpc_slice *out)
{
	grpc_byte_buffer_reader rd;

	if (!c->payload || !grpc_byte_buffer_reader_init(&rd, c->payload))
		return false;
	*out = grpc_byte_buffer_reader_readall(&rd);
	grpc_byte_buffer_reader_destroy(&rd);
	return true;
}

static grpc_status_code do_apply(struct control *s, struct call *c, char *msg, size_t len)
{
	Traceprof__Control__V1__ApplyTriggersRequest *req;
	Traceprof__Control__V1__ApplyTriggersResponse resp =
	    TRACEPROF__CONTROL__V1__APPLY_TRIGGERS_RESPONSE__INIT;
	grpc_slice all;
	bool changed;
	int rc;

	if (!c->payload) {
		/* an empty message decodes to an empty set: proto3 has no "missing" */
		all = grpc_empty_slice();
	} else if (!read_payload(c, &all)) {
		snprintf(msg, len, "cannot read the request message (compression?)");
		return GRPC_STATUS_INVALID_ARGUMENT;
	}
	req = traceprof__control__v1__apply_triggers_request__unpack(NULL, GRPC_SLICE_LENGTH(all),
								     GRPC_SLICE_START_PTR(all));
	grpc_slice_unref(all);
	if (!req) {
		snprintf(msg, len, "not a valid ApplyTriggersRequest (protobuf decoding failed)");
		return GRPC_STATUS_INVALID_ARGUMENT;
	}
	if (req->node[0] && s->node[0] && strcmp(req->node, s->node) != 0) {
		snprintf(msg, len, "the set is for node \"%.64s\", this agent is node \"%.64s\"",
			 req->node, s->node);
		traceprof__control__v1__apply_triggers_request__free_unpacked(req, NULL);
		return GRPC_STATUS_INVALID_ARGUMENT;
	}
	rc = triggers_apply(s->t, req, &changed);
	traceprof__control__v1__apply_triggers_request__free_unpacked(req, NULL);
	if (rc != 0) {
		snprintf(msg, len, "out of memory applying the set");
		return GRPC_STATUS_RESOURCE_EXHAUSTED;
	}
	resp.generation = triggers_generation(s->t);
	resp.changed = changed;
	resp.triggers = triggers_status(s->t, &resp.n_triggers);
	rc = set_reply(c, &resp.base);
	triggers_status_free(resp.triggers, resp.n_triggers);
	if (rc) {
		snprintf(msg, len, "out of memory");
		return GRPC_STATUS_RESOURCE_EXHAUSTED;
	}
	return GRPC_STATUS_OK;
}

static grpc_status_code do_status(struct control *s, struct call *c, char *msg, size_t len)
{
	Traceprof__Control__V1__AgentStatus st = TRACEPROF__CONTROL__V1__AGENT_STATUS__INIT;
	Traceprof__Control__V1__SamplerHealth health;
	Traceprof__Control__V1__GetStatusRequest *req;
	grpc_slice all;
	int rc;

	if (c->payload) {
		if (!read_payload(c, &all)) {
			snprintf(msg, len, "cannot read the request message (compression?)");
			return GRPC_STATUS_INVALID_ARGUMENT;
		}
		req = traceprof__control__v1__get_status_request__unpack(
		    NULL, GRPC_SLICE_LENGTH(all), GRPC_SLICE_START_PTR(all));
		grpc_slice_unref(all);
		if (!req) {
			snprintf(msg, len,
				 "not a valid GetStatusRequest (protobuf decoding failed)");
			return GRPC_STATUS_INVALID_ARGUMENT;
		}
		traceprof__control__v1__get_status_request__free_unpacked(req, NULL);
	}
	triggers_sampler_health(s->t, &health);
	st.node = s->node;
	st.version = s->version;
	st.generation = triggers_generation(s->t);
	st.sampler = &health;
	st.triggers = triggers_status(s->t, &st.n_triggers);
	rc = set_reply(c, &st.base);
	triggers_status_free(st.triggers, st.n_triggers);
	if (rc) {
		snprintf(msg, len, "out of memory");
		return GRPC_STATUS_RESOURCE_EXHAUSTED;
	}
	return GRPC_STATUS_OK;
}

static void answer(struct control *s, struct call *c)
{
	char msg[256] = "";
	grpc_status_code code;
	grpc_op ops[4];
	size_t n = 0;

	if (!authorized(s, c)) {
		code = GRPC_STATUS_UNAUTHENTICATED;
		snprintf(msg, sizeof(msg), "missing or wrong bearer token");
	} else if (c->method == M_APPLY) {
		code = do_apply(s, c, msg, sizeof(msg));
	} else {
		code = do_status(s, c, msg, sizeof(msg));
	}
	pthread_mutex_lock(&s->mu);
	s->stats.calls++;
	if (code == GRPC_STATUS_OK)
		s->stats.ok++;
	else if (code == GRPC_STATUS_UNAUTHENTICATED)
		s->stats.unauthenticated++;
	else if (code == GRPC_STATUS_INVALID_ARGUMENT)
		s->stats.invalid++;
	else
		s->stats.errors++;
	pthread_mutex_unlock(&s->mu);
	if (code != GRPC_STATUS_OK)
		log_info("control: %s refused: %s",
			 c->method == M_APPLY ? "ApplyTriggers" : "GetStatus", msg);
	memset(ops, 0, sizeof(ops));
	ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA;
	if (code == GRPC_STATUS_OK && c->reply) {
		ops[n].op = GRPC_OP_SEND_MESSAGE;
		ops[n].data.send_message.send_message = c->reply;
		n++;
	}
	c->details = grpc_slice_from_copied_string(code == GRPC_STATUS_OK ? "" : msg);
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
	struct control *s = arg;
	bool shutting_down = false;

	for (;;) {
		grpc_event ev =
		    grpc_completion_queue_next(s->cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
		struct call *c;

		if (ev.type == GRPC_QUEUE_SHUTDOWN)
			break;
		if (ev.type != GRPC_OP_COMPLETE)
			continue;
		if (ev.tag == &s->shutdown_tag) {
			shutting_down = true;
			grpc_completion_queue_shutdown(s->cq);
			continue;
		}
		c = ev.tag;
		if (c->phase == ANSWERING || !ev.success) {
			call_free(c);
			continue;
		}
		if (!shutting_down && request_call(s, c->method) != 0)
			log_warn("control: cannot wait for the next call");
		answer(s, c);
	}
	return NULL;
}

bool control_addr_is_loopback(const char *addr)
{
	char host[256];
	const char *colon;
	size_t n;

	if (addr[0] == '[') {
		const char *end = strchr(addr, ']');

		if (!end)
			return false;
		n = (size_t)(end - addr - 1);
		if (n >= sizeof(host))
			return false;
		memcpy(host, addr + 1, n);
	} else {
		colon = strrchr(addr, ':');
		n = colon ? (size_t)(colon - addr) : strlen(addr);
		if (n >= sizeof(host))
			return false;
		memcpy(host, addr, n);
	}
	host[n] = 0;
	if (strcmp(host, "localhost") == 0 || strcmp(host, "::1") == 0 ||
	    strcmp(host, "ip6-localhost") == 0)
		return true;
	if (strncmp(host, "127.", 4) == 0) {
		for (const char *p = host + 4; *p; p++)
			if ((*p < '0' || *p > '9') && *p != '.')
				return false;
		return true;
	}
	return false;
}

static bool set(const char *s)
{
	return s && *s;
}

/* Server credentials from the options, or NULL with err set. */
static grpc_server_credentials *make_creds(const struct control_opts *o, char *err, size_t errlen)
{
	grpc_ssl_pem_key_cert_pair pair;
	grpc_server_credentials *creds;
	char *ca, *cert, *key;
	int nset = set(o->tls_cert) + set(o->tls_key) + set(o->tls_ca);

	if (nset == 0)
		return grpc_insecure_server_credentials_create();
	if (nset != 3) {
		snprintf(err, errlen,
			 "control-tls-cert, control-tls-key and control-tls-ca go together: set "
			 "all three for mutual TLS, or none");
		return NULL;
	}
	ca = control_auth_read_file(o->tls_ca, err, errlen);
	cert = ca ? control_auth_read_file(o->tls_cert, err, errlen) : NULL;
	key = cert ? control_auth_read_file(o->tls_key, err, errlen) : NULL;
	creds = NULL;
	if (key) {
		pair.private_key = key;
		pair.cert_chain = cert;
		creds = grpc_ssl_server_credentials_create_ex(
		    ca, &pair, 1, GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY, NULL);
		if (!creds)
			snprintf(err, errlen,
				 "control TLS: the certificate, key or CA is not "
				 "valid PEM");
	}
	free(ca);
	free(cert);
	free(key);
	return creds;
}

struct control *control_start(const struct control_opts *o, struct triggers *t, char *err,
			      size_t errlen)
{
	struct control *s;
	grpc_arg args[2];
	grpc_channel_args chargs = {2, args};
	grpc_server_credentials *creds;
	bool tls = set(o->tls_cert) || set(o->tls_key) || set(o->tls_ca);
	int rc;

	errno = EINVAL; /* settings errors, unless changed below */
	if (!set(o->listen)) {
		snprintf(err, errlen, "control-listen is empty");
		return NULL;
	}
	if (!tls && !set(o->token_file) && !control_addr_is_loopback(o->listen)) {
		snprintf(err, errlen,
			 "control-listen %s is not a loopback address and no authentication is "
			 "set: set control-tls-cert, control-tls-key and control-tls-ca (mutual "
			 "TLS) and/or control-token-file, or listen on 127.0.0.1",
			 o->listen);
		log_error("%s", err);
		return NULL;
	}
	s = calloc(1, sizeof(*s));
	if (!s) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	s->t = t;
	s->node = strdup(o->node ? o->node : "");
	s->version = strdup(o->version ? o->version : "");
	pthread_mutex_init(&s->mu, NULL);
	if (!s->node || !s->version) {
		snprintf(err, errlen, "out of memory");
		goto out_free;
	}
	if (set(o->token_file) && !(s->token = control_auth_read_token(o->token_file, err, errlen)))
		goto out_free;
	creds = make_creds(o, err, errlen);
	if (!creds)
		goto out_free;
	grpc_init();
	memset(args, 0, sizeof(args));
	args[0].type = GRPC_ARG_INTEGER;
	args[0].key = GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH;
	args[0].value.integer = CONTROL_MAX_BYTES;
	args[1].type = GRPC_ARG_INTEGER;
	args[1].key = GRPC_ARG_ALLOW_REUSEPORT;
	args[1].value.integer = 0;
	s->server = grpc_server_create(&chargs, NULL);
	s->cq = grpc_completion_queue_create_for_next(NULL);
	grpc_server_register_completion_queue(s->server, s->cq, NULL);
	s->methods[M_APPLY] = grpc_server_register_method(
	    s->server, CONTROL_METHOD_APPLY, NULL, GRPC_SRM_PAYLOAD_READ_INITIAL_BYTE_BUFFER, 0);
	s->methods[M_STATUS] = grpc_server_register_method(
	    s->server, CONTROL_METHOD_STATUS, NULL, GRPC_SRM_PAYLOAD_READ_INITIAL_BYTE_BUFFER, 0);
	s->port = grpc_server_add_http2_port(s->server, o->listen, creds);
	grpc_server_credentials_release(creds);
	if (!s->port) {
		snprintf(err, errlen, "cannot listen on %s (address in use, or not host:port?)",
			 o->listen);
		rc = EADDRINUSE;
		goto out_destroy;
	}
	grpc_server_start(s->server);
	if (request_call(s, M_APPLY) != 0 || request_call(s, M_STATUS) != 0) {
		snprintf(err, errlen, "cannot wait for calls");
		rc = EIO;
		goto out_stop;
	}
	rc = pthread_create(&s->thread, NULL, serve, s);
	if (rc) {
		snprintf(err, errlen, "cannot start the control thread: %s", strerror(rc));
		goto out_stop;
	}
	s->started = true;
	log_info("control: listening on %s port=%d tls=%s token=%s", o->listen, s->port,
		 tls ? "mutual" : "no", s->token ? "yes" : "no");
	return s;

out_stop:
	log_error("control: %s", err);
	control_stop(s);
	errno = rc;
	return NULL;
out_destroy:
	grpc_server_destroy(s->server);
	grpc_completion_queue_shutdown(s->cq);
	while (grpc_completion_queue_next(s->cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL).type !=
	       GRPC_QUEUE_SHUTDOWN)
		;
	grpc_completion_queue_destroy(s->cq);
	grpc_shutdown();
	errno = rc;
out_free:
	rc = errno;
	log_error("control: %s", err);
	free(s->token);
	free(s->node);
	free(s->version);
	pthread_mutex_destroy(&s->mu);
	free(s);
	errno = rc;
	return NULL;
}

int control_port(const struct control *c)
{
	return c->port;
}

void control_get_stats(struct control *c, struct control_stats *out)
{
	pthread_mutex_lock(&c->mu);
	*out = c->stats;
	pthread_mutex_unlock(&c->mu);
}

void control_stop(struct control *s)
{
	if (!s)
		return;
	grpc_server_shutdown_and_notify(s->server, s->cq, &s->shutdown_tag);
	grpc_server_cancel_all_calls(s->server);
	if (s->started) {
		pthread_join(s->thread, NULL);
	} else {
		for (;;) {
			grpc_event ev = grpc_completion_queue_next(
			    s->cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);

			if (ev.type == GRPC_QUEUE_SHUTDOWN)
				break;
			if (ev.tag == &s->shutdown_tag)
				grpc_completion_queue_shutdown(s->cq);
			else if (ev.tag)
				call_free(ev.tag);
		}
	}
	grpc_server_destroy(s->server);
	grpc_completion_queue_destroy(s->cq);
	grpc_shutdown();
	free(s->token);
	free(s->node);
	free(s->version);
	pthread_mutex_destroy(&s->mu);
	free(s);
}
