/*
 * control_client.c - see include/traceprof/control_client.h.
 *
 * One channel per client (insecure, or SSL credentials from the CA and the
 * client's key/certificate pair), one pluck completion queue reused by
 * every call. The bearer token goes into each call's initial metadata.
 * Each call: create, one batch of all six ops, pluck it with the deadline
 * plus a second (gRPC ends the call at its deadline itself).
 */
#include "traceprof/control_client.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <grpc/byte_buffer.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/slice.h>

#include "control_auth.h"
#include "control_names.h"
#include "grpc_unary.h"

struct control_client {
	grpc_channel *channel;	   /* to the agent */
	grpc_completion_queue *cq; /* pluck queue for our calls */
	char *bearer;		   /* "Bearer <token>", or NULL */
};

static bool set(const char *s)
{
	return s && *s;
}

struct control_client *control_client_new(const char *addr, const struct control_auth *auth,
					  char *err, size_t errlen)
{
	struct control_client *c = calloc(1, sizeof(*c));
	grpc_channel_credentials *creds = NULL;
	char *ca = NULL, *cert = NULL, *key = NULL;
	const char *override = NULL;

	if (!c) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	if (auth && set(auth->token_file)) {
		char *tok = control_auth_read_token(auth->token_file, err, errlen);

		if (!tok)
			goto out_free;
		c->bearer = malloc(strlen(tok) + 8);
		if (c->bearer)
			sprintf(c->bearer, "Bearer %s", tok);
		free(tok);
		if (!c->bearer) {
			snprintf(err, errlen, "out of memory");
			goto out_free;
		}
	}
	if (auth && (set(auth->tls_cert) != set(auth->tls_key))) {
		snprintf(err, errlen, "tls_cert and tls_key go together");
		goto out_free;
	}
	if (auth && set(auth->tls_cert) && !set(auth->tls_ca)) {
		snprintf(err, errlen, "a client certificate needs tls_ca (the agent's CA) too");
		goto out_free;
	}
	if (auth && set(auth->tls_ca)) {
		grpc_ssl_pem_key_cert_pair pair;

		if (!(ca = control_auth_read_file(auth->tls_ca, err, errlen)))
			goto out_free;
		if (set(auth->tls_cert) &&
		    (!(cert = control_auth_read_file(auth->tls_cert, err, errlen)) ||
		     !(key = control_auth_read_file(auth->tls_key, err, errlen))))
			goto out_free;
		pair.private_key = key;
		pair.cert_chain = cert;
		creds = grpc_ssl_credentials_create(ca, cert ? &pair : NULL, NULL, NULL);
		if (set(auth->tls_override))
			override = auth->tls_override;
	} else {
		creds = grpc_insecure_credentials_create();
	}
	if (!creds) {
		snprintf(err, errlen, "cannot make channel credentials (bad PEM?)");
		goto out_free;
	}
	grpc_init();
	c->channel = grpc_unary_channel(addr, creds, override);
	grpc_channel_credentials_release(creds);
	c->cq = grpc_completion_queue_create_for_pluck(NULL);
	free(ca);
	free(cert);
	free(key);
	return c;

out_free:
	free(ca);
	free(cert);
	free(key);
	free(c->bearer);
	free(c);
	return NULL;
}

void control_client_free(struct control_client *c)
{
	if (!c)
		return;
	grpc_channel_destroy(c->channel);
	grpc_completion_queue_shutdown(c->cq);
	while (grpc_completion_queue_pluck(c->cq, NULL, gpr_inf_future(GPR_CLOCK_REALTIME), NULL)
		   .type != GRPC_QUEUE_SHUTDOWN)
		;
	grpc_completion_queue_destroy(c->cq);
	grpc_shutdown();
	free(c->bearer);
	free(c);
}

/*
 * One unary call of method with the packed request msg, its answer decoded
 * as a message of type out_desc into *out. Returns 0, the status code, or
 * -1 (no memory, no or an undecodable answer) with err set.
 */
static int call(struct control_client *c, const char *method, const ProtobufCMessage *msg,
		const ProtobufCMessageDescriptor *out_desc, int timeout_ms, ProtobufCMessage **out,
		char *err, size_t errlen)
{
	size_t len = protobuf_c_message_get_packed_size(msg);
	uint8_t *buf = malloc(len ? len : 1);
	struct grpc_unary_answer ans;
	grpc_slice all;

	*out = NULL;
	if (!buf) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	protobuf_c_message_pack(msg, buf);
	grpc_unary_call(c->channel, c->cq, method, c->bearer, buf, len, timeout_ms, &ans);
	free(buf);
	if (ans.code != GRPC_STATUS_OK) {
		snprintf(err, errlen, "%s: %s", method, ans.details);
		if (ans.resp)
			grpc_byte_buffer_destroy(ans.resp);
		return (int)ans.code;
	}
	if (!ans.resp) {
		snprintf(err, errlen, "%s: OK without a response message", method);
		return -1;
	}
	all = grpc_unary_answer_take(&ans);
	*out = protobuf_c_message_unpack(out_desc, NULL, GRPC_SLICE_LENGTH(all),
					 GRPC_SLICE_START_PTR(all));
	grpc_slice_unref(all);
	if (!*out) {
		snprintf(err, errlen, "%s: the answer is not a %s", method, out_desc->short_name);
		return -1;
	}
	return 0;
}

int control_client_apply(struct control_client *c,
			 const Traceprof__Control__V1__ApplyTriggersRequest *req, int timeout_ms,
			 Traceprof__Control__V1__ApplyTriggersResponse **out, char *err,
			 size_t errlen)
{
	return call(c, CONTROL_METHOD_APPLY, &req->base,
		    &traceprof__control__v1__apply_triggers_response__descriptor, timeout_ms,
		    (ProtobufCMessage **)out, err, errlen);
}

int control_client_status(struct control_client *c, int timeout_ms,
			  Traceprof__Control__V1__AgentStatus **out, char *err, size_t errlen)
{
	Traceprof__Control__V1__GetStatusRequest req =
	    TRACEPROF__CONTROL__V1__GET_STATUS_REQUEST__INIT;

	return call(c, CONTROL_METHOD_STATUS, &req.base,
		    &traceprof__control__v1__agent_status__descriptor, timeout_ms,
		    (ProtobufCMessage **)out, err, errlen);
}
