/*
 * control.h - the AgentControl gRPC service (controller -> agent): a gRPC
 * C core server on its own thread serving ApplyTriggers and GetStatus over
 * a trigger engine, reached through struct control_engine (the agent's is
 * agent/sampling/triggers.h, triggers_control_engine), so this folder does not
 * depend on the agent.
 *
 * Authentication (docs/triggers.md) is always on, loopback included: with
 * tls_cert, tls_key and tls_ca the port requires mutual TLS (a client
 * certificate signed by tls_ca); with token_file every call must carry
 * "authorization: Bearer <token>" (checked in constant time). Both may be
 * on. With neither, the agent makes its own token in token_generate
 * (control_auth_make_token: mode 0600, in a directory of mode 0700) for
 * the local controller to read; with none of the three it does not start.
 * Token files are checked as control_auth.h says.
 *
 * Refused calls are answered UNAUTHENTICATED or INVALID_ARGUMENT and
 * counted; the log gets the first CONTROL_LOG_BURST refusals of every
 * CONTROL_LOG_INTERVAL_S seconds and then one line per interval saying how
 * many were not logged, so a flood of bad calls costs a few lines. Methods
 * the service does not have are answered UNIMPLEMENTED at once, before
 * any authentication (rpc_server.h), and counted.
 *
 * Answers: OK; UNAUTHENTICATED; INVALID_ARGUMENT with a message for a
 * message that does not decode or is meant for another node;
 * RESOURCE_EXHAUSTED over CONTROL_MAX_BYTES (gRPC's own receive limit).
 * Calls are answered one at a time, in arrival order.
 */
#ifndef TRACEPROF_CONTROL_H
#define TRACEPROF_CONTROL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "control_names.h"
#include "traceprof/control/v1/agent_control.pb-c.h"
#include "traceprof/listen.h"

#define CONTROL_MAX_BYTES      (1u << 20) /* largest request message */
#define CONTROL_LOG_BURST      5	  /* refused calls logged per interval */
#define CONTROL_LOG_INTERVAL_S 10	  /* seconds of that interval */

struct control_opts {
	const char *listen;	    /* "host:port" (port 0 picks one); required */
	const char *tls_cert;	    /* PEM server certificate, or NULL/"" */
	const char *tls_key;	    /* its PEM private key, or NULL/"" */
	const char *tls_ca;	    /* PEM CA that signs client certificates, or NULL/"" */
	const char *token_file;	    /* file whose first line is the bearer token, or NULL/"" */
	const char *token_generate; /* with neither TLS nor token_file: the token made here */
	const char *node;	    /* this agent's node (AgentStatus.node, set check) */
	const char *version;	    /* AgentStatus.version */
	const struct tp_conn_limits *limits; /* connection caps and timeouts; NULL: defaults */
};

struct control_stats {
	uint64_t calls;		  /* calls answered */
	uint64_t ok;		  /* answered OK */
	uint64_t unauthenticated; /* refused: missing or wrong token */
	uint64_t invalid;	  /* refused: message did not decode, or another node's */
	uint64_t errors;	  /* answered with another error (memory) */
	uint64_t unimplemented;	  /* refused: a method the service does not have */
	uint64_t log_suppressed;  /* refused calls not logged (rate limit) */
};

/*
 * The trigger engine the service drives, called from the server's thread
 * only, one call at a time; ctx is passed to every function.
 */
struct control_engine {
	void *ctx;
	/*
	 * Replaces the set with req's triggers; *changed false when the same
	 * set was in force. 0; -ESTALE for a fencing token below the highest
	 * applied, that one in *fence; -ENOMEM (the old set stays).
	 */
	int (*apply)(void *ctx, const Traceprof__Control__V1__ApplyTriggersRequest *req,
		     bool *changed, uint64_t *fence);
	/* The generation in force. */
	uint64_t (*generation)(void *ctx);
	/* Status of every trigger: a new array of *n messages, freed with status_free. */
	Traceprof__Control__V1__TriggerStatus **(*status)(void *ctx, size_t *n);
	void (*status_free)(Traceprof__Control__V1__TriggerStatus **st, size_t n);
	/* The sampler's health for GetStatus. */
	void (*sampler_health)(void *ctx, Traceprof__Control__V1__SamplerHealth *out);
};

struct control;

/*
 * Listens and serves from a new thread. e is copied; e->ctx is borrowed
 * and must outlive the server. Returns NULL with the reason in err (and logged): bad or
 * incomplete TLS settings, unreadable files, a token file that fails the
 * checks of control_auth.h, no authentication at all (errno EINVAL), an
 * address that cannot be bound (errno EADDRINUSE).
 */
struct control *control_start(const struct control_opts *o, const struct control_engine *e,
			      char *err, size_t errlen);
/* The port bound. */
int control_port(const struct control *c);
void control_get_stats(struct control *c, struct control_stats *out);
/* The control port's connection counters (live; zeros with TLS, where gRPC listens). */
void control_conn_stats(struct control *c, struct tp_conn_stats *out);
/* Cancels calls in progress, stops the thread, frees everything; NULL is a no-op. */
void control_stop(struct control *c);

#endif
