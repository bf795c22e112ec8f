/*
 * control.c - see control.h.
 *
 * An rpc_server (one completion queue, one thread; see rpc_server.h) with
 * two methods; the handler checks the token before anything is decoded,
 * then applies the set or reports status through the trigger engine
 * (struct control_engine).
 * Refusals go through a small log limiter (log_refusal): a fixed window
 * of CONTROL_LOG_INTERVAL_S seconds with CONTROL_LOG_BURST lines, the
 * count of the rest said by the first line of the next window.
 */
#include "control.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/slice.h>

#include "control_auth.h"
#include "rpc_server.h"
#include "traceprof/log.h"

enum method { M_APPLY, M_STATUS, M__COUNT };

struct control {
	struct rpc_server *srv;	    /* the server */
	struct control_engine e;    /* the engine (its ctx borrowed) */
	char *token;		    /* bearer token, or NULL */
	char *node;		    /* this node */
	char *version;		    /* reported version */
	pthread_mutex_t mu;	    /* guards stats */
	struct control_stats stats; /* counters */
	/* log limiter (server thread only) */
	double log_window;  /* monotonic seconds when the current window began */
	unsigned log_lines; /* refusals logged in it */
	uint64_t log_held;  /* refusals not logged since the last line */
};

/* Whether the call carries "authorization: Bearer <token>" with our token. */
static bool authorized(const struct control *s, const grpc_metadata_array *md)
{
	static const char prefix[] = "Bearer ";
	bool ok = false;

	if (!s->token)
		return true; /* mutual TLS alone: gRPC verified the client's certificate */
	for (size_t i = 0; i < md->count; i++) {
		const grpc_metadata *m = &md->metadata[i];
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

/* Serializes msg into the reply; 0 or -ENOMEM. */
static int set_reply(struct rpc_reply *rep, const ProtobufCMessage *msg)
{
	size_t len = protobuf_c_message_get_packed_size(msg);

	rep->data = malloc(len ? len : 1);
	if (!rep->data)
		return -ENOMEM;
	rep->len = protobuf_c_message_pack(msg, rep->data);
	return 0;
}

/* An empty or absent message decodes to an empty set: proto3 has no "missing". */
static grpc_status_code do_apply(struct control *s, const struct rpc_request *in,
				 struct rpc_reply *rep)
{
	Traceprof__Control__V1__ApplyTriggersRequest *req;
	Traceprof__Control__V1__ApplyTriggersResponse resp =
	    TRACEPROF__CONTROL__V1__APPLY_TRIGGERS_RESPONSE__INIT;
	char *msg = rep->message;
	size_t len = sizeof(rep->message);
	uint64_t fence = 0;
	bool changed;
	int rc;

	req = traceprof__control__v1__apply_triggers_request__unpack(NULL, in->len, in->data);
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
	rc = s->e.apply(s->e.ctx, req, &changed, &fence);
	if (rc == -ESTALE) {
		snprintf(msg, len,
			 "fencing token %llu is older than %llu, applied before: a newer "
			 "controller leads",
			 (unsigned long long)req->fencing_token, (unsigned long long)fence);
		traceprof__control__v1__apply_triggers_request__free_unpacked(req, NULL);
		return GRPC_STATUS_FAILED_PRECONDITION;
	}
	traceprof__control__v1__apply_triggers_request__free_unpacked(req, NULL);
	if (rc != 0) {
		snprintf(msg, len, "out of memory applying the set");
		return GRPC_STATUS_RESOURCE_EXHAUSTED;
	}
	resp.generation = s->e.generation(s->e.ctx);
	resp.changed = changed;
	resp.triggers = s->e.status(s->e.ctx, &resp.n_triggers);
	rc = set_reply(rep, &resp.base);
	s->e.status_free(resp.triggers, resp.n_triggers);
	if (rc) {
		snprintf(msg, len, "out of memory");
		return GRPC_STATUS_RESOURCE_EXHAUSTED;
	}
	return GRPC_STATUS_OK;
}

static grpc_status_code do_status(struct control *s, const struct rpc_request *in,
				  struct rpc_reply *rep)
{
	Traceprof__Control__V1__AgentStatus st = TRACEPROF__CONTROL__V1__AGENT_STATUS__INIT;
	Traceprof__Control__V1__SamplerHealth health;
	Traceprof__Control__V1__GetStatusRequest *req;
	int rc;

	if (in->has_message) {
		req = traceprof__control__v1__get_status_request__unpack(NULL, in->len, in->data);
		if (!req) {
			snprintf(rep->message, sizeof(rep->message),
				 "not a valid GetStatusRequest (protobuf decoding failed)");
			return GRPC_STATUS_INVALID_ARGUMENT;
		}
		traceprof__control__v1__get_status_request__free_unpacked(req, NULL);
	}
	s->e.sampler_health(s->e.ctx, &health);
	st.node = s->node;
	st.version = s->version;
	st.generation = s->e.generation(s->e.ctx);
	st.sampler = &health;
	st.triggers = s->e.status(s->e.ctx, &st.n_triggers);
	rc = set_reply(rep, &st.base);
	s->e.status_free(st.triggers, st.n_triggers);
	if (rc) {
		snprintf(rep->message, sizeof(rep->message), "out of memory");
		return GRPC_STATUS_RESOURCE_EXHAUSTED;
	}
	return GRPC_STATUS_OK;
}

static double mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/*
 * Logs a refusal unless CONTROL_LOG_BURST were logged in this window;
 * the first line of a later window says how many were left out. Returns
 * whether it was logged.
 */
static bool log_refusal(struct control *s, const char *method, const char *why)
{
	double now = mono_s();

	if (now - s->log_window >= CONTROL_LOG_INTERVAL_S) {
		s->log_window = now;
		s->log_lines = 0;
	}
	if (s->log_lines >= CONTROL_LOG_BURST) {
		s->log_held++;
		return false;
	}
	s->log_lines++;
	if (s->log_held)
		log_info("control: %s refused: %s (%llu more refused calls were not logged)",
			 method, why, (unsigned long long)s->log_held);
	else
		log_info("control: %s refused: %s", method, why);
	if (s->log_lines == CONTROL_LOG_BURST)
		log_info("control: more refused calls in the next %d s are counted, not logged",
			 CONTROL_LOG_INTERVAL_S);
	s->log_held = 0;
	return true;
}

/* The handler of both methods: token, then the method; counted and logged when refused. */
static void handle(void *ctx, const struct rpc_request *req, struct rpc_reply *rep)
{
	struct control *s = ctx;
	grpc_status_code code;

	if (!authorized(s, req->md)) {
		code = GRPC_STATUS_UNAUTHENTICATED;
		snprintf(rep->message, sizeof(rep->message), "missing or wrong bearer token");
	} else if (req->unreadable) {
		code = rep->code; /* INVALID_ARGUMENT, said by the server */
	} else if (req->method == M_APPLY) {
		code = do_apply(s, req, rep);
	} else {
		code = do_status(s, req, rep);
	}
	rep->code = code;
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
	if (code != GRPC_STATUS_OK &&
	    !log_refusal(s, req->method == M_APPLY ? "ApplyTriggers" : "GetStatus", rep->message)) {
		pthread_mutex_lock(&s->mu);
		s->stats.log_suppressed++;
		pthread_mutex_unlock(&s->mu);
	}
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

struct control *control_start(const struct control_opts *o, const struct control_engine *e,
			      char *err, size_t errlen)
{
	static const char *const methods[M__COUNT] = {CONTROL_METHOD_APPLY, CONTROL_METHOD_STATUS};
	struct control *s;
	grpc_server_credentials *creds;
	bool tls = set(o->tls_cert) || set(o->tls_key) || set(o->tls_ca);
	int rc;

	errno = EINVAL; /* settings errors, unless changed below */
	if (!set(o->listen)) {
		snprintf(err, errlen, "control-listen is empty");
		return NULL;
	}
	if (!tls && !set(o->token_file) && !set(o->token_generate)) {
		snprintf(err, errlen,
			 "control-listen %s has no authentication: set control-token-file, or "
			 "control-tls-cert, control-tls-key and control-tls-ca (mutual TLS), or "
			 "control-token-generate (a token the agent makes), or turn control off "
			 "with an empty control-listen",
			 o->listen);
		log_error("control: %s", err);
		return NULL;
	}
	s = calloc(1, sizeof(*s));
	if (!s) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	s->e = *e;
	s->node = strdup(o->node ? o->node : "");
	s->version = strdup(o->version ? o->version : "");
	pthread_mutex_init(&s->mu, NULL);
	if (!s->node || !s->version) {
		snprintf(err, errlen, "out of memory");
		goto out_free;
	}
	if (set(o->token_file)) {
		s->token = control_auth_read_token(o->token_file, err, errlen);
		if (!s->token)
			goto out_free;
	} else if (!tls) {
		bool created;

		s->token = control_auth_make_token(o->token_generate, &created, err, errlen);
		if (!s->token)
			goto out_free;
		log_info("control: %s token file=%s (clients read it; delete it for a new one)",
			 created ? "made a new" : "using the", o->token_generate);
	}
	creds = make_creds(o, err, errlen);
	if (!creds)
		goto out_free;
	s->srv = rpc_server_start(&(struct rpc_server_opts){
	    .addr = o->listen,
	    .creds = creds,
	    .methods = methods,
	    .nmethods = M__COUNT,
	    .max_receive_bytes = CONTROL_MAX_BYTES,
	    .handler = handle,
	    .ctx = s,
	    .name = "control",
	    .start_on_connect = !tls,
	    .limits = o->limits,
	});
	if (!s->srv) {
		rc = errno;
		if (rc == EADDRINUSE)
			snprintf(err, errlen,
				 "cannot listen on %s (address in use, or not host:port?)",
				 o->listen);
		else
			snprintf(err, errlen, "cannot start serving on %s", o->listen);
		errno = rc;
		goto out_free;
	}
	log_info("control: listening on %s port=%d tls=%s token=%s", o->listen,
		 rpc_server_port(s->srv), tls ? "mutual" : "no",
		 !s->token	      ? "no"
		 : set(o->token_file) ? "file"
				      : "generated");
	return s;

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
	return rpc_server_port(c->srv);
}

void control_get_stats(struct control *c, struct control_stats *out)
{
	pthread_mutex_lock(&c->mu);
	*out = c->stats;
	pthread_mutex_unlock(&c->mu);
	out->unimplemented = rpc_server_unimplemented(c->srv);
}

void control_conn_stats(struct control *c, struct tp_conn_stats *out)
{
	rpc_server_conn_stats(c->srv, out);
}

void control_stop(struct control *s)
{
	if (!s)
		return;
	rpc_server_stop(s->srv);
	free(s->token);
	free(s->node);
	free(s->version);
	pthread_mutex_destroy(&s->mu);
	free(s);
}
