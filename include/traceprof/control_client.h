/*
 * control_client.h - the client side of AgentControl (controller -> agent):
 * one channel to one agent, authenticated like the agent's control port
 * (mutual TLS from certificate files and/or a bearer token), and the two
 * unary calls with the protobuf-c messages of
 * control/proto/traceprof/control/v1/agent_control.proto.
 *
 * Library: traceprof_control_client (links the gRPC C core and
 * traceprof_control_proto). Thread safety: one struct control_client per
 * thread, or serialize calls on it.
 */
#ifndef TRACEPROF_CONTROL_CLIENT_H
#define TRACEPROF_CONTROL_CLIENT_H

#include "traceprof/control/v1/agent_control.pb-c.h"

struct control_auth {
	const char *tls_ca;	/* PEM file: CA that signed the agent's certificate; NULL: plain */
	const char *tls_cert;	/* PEM file: client certificate for mutual TLS, or NULL */
	const char *tls_key;	/* PEM file: its private key, or NULL */
	const char *token_file; /* file whose first line is the bearer token, or NULL */
	const char *tls_override; /* expected server name in the certificate, or NULL */
};

struct control_client;

/*
 * A channel to addr ("host:port"). Files named in auth are read now; a
 * missing or unreadable one is an error (NULL, reason in err), and so is a
 * token file that group or others can write, that belongs to another user
 * than ours or root, or whose token is shorter than 32 characters (the
 * message says what to fix). Agents always require a token or mutual TLS:
 * a caller with neither should name the file a local agent makes,
 * CONTROL_AUTH_TOKEN_DEFAULT (control/control_auth.h), as the controller
 * does. Connecting is lazy: an agent that is down fails the calls, not
 * this.
 */
struct control_client *control_client_new(const char *addr, const struct control_auth *auth,
					  char *err, size_t errlen);
void control_client_free(struct control_client *c);

/*
 * One call each, waiting at most timeout_ms. Return 0 and set *out (free it
 * with the matching protobuf-c __free_unpacked(out, NULL)), or the gRPC
 * status code (> 0) with its details in err (UNAVAILABLE: agent not
 * reachable, UNAUTHENTICATED: refused credentials, INVALID_ARGUMENT: the
 * agent refused the message), or -1 when the answer cannot be decoded.
 */
int control_client_apply(struct control_client *c,
			 const Traceprof__Control__V1__ApplyTriggersRequest *req, int timeout_ms,
			 Traceprof__Control__V1__ApplyTriggersResponse **out, char *err,
			 size_t errlen);
int control_client_status(struct control_client *c, int timeout_ms,
			  Traceprof__Control__V1__AgentStatus **out, char *err, size_t errlen);

#endif
