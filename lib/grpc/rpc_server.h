/*
 * rpc_server.h - a unary gRPC server on the C core: one completion queue,
 * one thread, registered methods, and a handler that turns each request's
 * bytes (and metadata) into a status and response bytes. The OTLP trace
 * receiver and the AgentControl service are two handlers on it.
 *
 * A call lives from the request for a new call (WAITING) through the
 * batch that reads its message (READING) and the one that waits for the
 * client's end of stream (CHECKING) to the batch that answers it
 * (ANSWERING): initial metadata, the response message when
 * OK, the status, and the receipt of the client's close. What the gRPC
 * spec refuses is answered INTERNAL without the handler, and counted
 * (struct rpc_server_errors): a message flagged compressed without
 * grpc-encoding (or with identity), and a second message on a call (every
 * method here is unary; grpc-java and grpc-go answer INTERNAL too). The next call of a
 * method is requested as soon as one arrives, so calls queue inside gRPC
 * while the handler runs; calls are answered one at a time, in the order
 * their messages arrive. Calls of any other method are answered
 * UNIMPLEMENTED at once (a generic grpc_server_request_call stands waiting
 * for them), without the handler, and counted. Stop: shutdown_and_notify +
 * cancel_all_calls from the stopping
 * thread; the server thread shuts the queue down when the shutdown tag
 * arrives and exits once the queue is drained.
 *
 * Compressed messages: gRPC's own per-message decompression is off
 * (GRPC_ARG_ENABLE_PER_MESSAGE_DECOMPRESSION = 0), since the core inflates
 * a message in full before any limit applies (a 1 MB gzip bomb becomes
 * 1 GiB). The receive limit then applies to the bytes as sent, and a
 * compressed message reaches the handler as it came (accept_compressed,
 * the handler inflates with a limit) or is refused with INVALID_ARGUMENT.
 *
 * start_on_connect (plaintext servers with a numeric "a.b.c.d:port" or
 * "[v6]:port" address): the server listens on its own socket and an
 * acceptor thread blocked in accept() hands every connection to gRPC
 * (grpc_server_add_channel_from_fd, which takes only insecure
 * credentials). The gRPC core, whose timer and executor threads wake about
 * twice a second while it runs, starts with the first connection: an
 * agent no client ever connects to runs none of it. Other addresses and
 * TLS servers start the core at once and let gRPC listen.
 *
 * Connection limits (limits, struct tp_conn_limits): the acceptor of a
 * start_on_connect server admits each connection through a conn_table
 * (conn_table.h: caps per port and per peer, refusals closed at once and
 * counted, eviction of a silent or slow connection at a cap).
 * Every server, TLS ones included, gets gRPC's channel arguments: idle
 * connections closed after idle_timeout_ms (max_connection_idle), every
 * connection after grpc_max_age_ms (+30 s grace), at most
 * RPC_SERVER_MAX_STREAMS calls at once per connection, keepalive pings after
 * grpc_keepalive_ms (20 s to answer), TLS handshakes within
 * grpc_handshake_ms. A server where gRPC listens itself has no caps on
 * the number of connections: only these arguments bound them.
 */
#ifndef TRACEPROF_GRPC_RPC_SERVER_H
#define TRACEPROF_GRPC_RPC_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <grpc/grpc.h>
#include <grpc/grpc_security.h>

#include "traceprof/listen.h"

#define RPC_SERVER_MAX_METHODS 4
#define RPC_SERVER_MAX_STREAMS 32 /* concurrent calls per connection (answered one at a time) */

/* One request, as the handler sees it (borrowed for the call). */
struct rpc_request {
	size_t method;		       /* index into rpc_server_opts.methods */
	const grpc_metadata_array *md; /* request metadata */
	bool has_message;	       /* false: the client sent no message */
	bool unreadable;	       /* a message that cannot be read (compressed where not
					  accepted): the reply already says INVALID_ARGUMENT; the
					  handler may keep it */
	bool compressed;	       /* data is the message as sent, compressed (gzip or
					  deflate); only with accept_compressed */
	const uint8_t *data;	       /* the message bytes (empty without one) */
	size_t len;		       /* their length */
};

/* The handler's answer. */
struct rpc_reply {
	grpc_status_code code; /* GRPC_STATUS_OK, or why not */
	char message[256];     /* status details when not OK */
	uint8_t *data;	       /* response message when OK (malloc'd or NULL when len is 0;
				  the server frees it); OK always sends one, maybe empty */
	size_t len;	       /* its length */
};

typedef void (*rpc_handler)(void *ctx, const struct rpc_request *req, struct rpc_reply *rep);

struct rpc_server_opts {
	const char *addr;		     /* "host:port"; port 0 picks one */
	grpc_server_credentials *creds;	     /* consumed (released) by the call */
	const char *const *methods;	     /* "/package.Service/Method" names */
	size_t nmethods;		     /* 1..RPC_SERVER_MAX_METHODS */
	int max_receive_bytes;		     /* larger messages: RESOURCE_EXHAUSTED by gRPC */
	rpc_handler handler;		     /* answers every call, on the server thread */
	void *ctx;			     /* its argument */
	const char *name;		     /* for log lines ("otlp grpc", "control") */
	bool start_on_connect;		     /* insecure creds only: listen ourselves and start the
						gRPC core at the first connection (see below) */
	const struct tp_conn_limits *limits; /* caps and timeouts (borrowed); NULL: defaults */
	bool accept_compressed;		     /* hand compressed messages to the handler as sent
						(req->compressed); otherwise they are refused */
	void (*on_unread)(void *ctx);	     /* optional, on the server thread: a call the gRPC
						core ended before its message was read (over
						max_receive_bytes, or broken off by the client) */
};

struct rpc_server;

/*
 * Listens and serves from a new thread. Returns NULL with errno set
 * (EADDRINUSE when the address cannot be bound, logged) or the server.
 */
struct rpc_server *rpc_server_start(const struct rpc_server_opts *o);
/* The port bound. */
int rpc_server_port(const struct rpc_server *s);
/* Whether the gRPC core runs for this server (always, unless start_on_connect waits). */
bool rpc_server_core_started(const struct rpc_server *s);
/* Calls of unregistered methods answered UNIMPLEMENTED so far. */
uint64_t rpc_server_unimplemented(const struct rpc_server *s);
/* Calls refused for breaking gRPC's rules (live counters). */
struct rpc_server_errors {
	uint64_t no_encoding;	 /* a message flagged compressed without grpc-encoding */
	uint64_t extra_messages; /* a unary call with more than one message */
};

/* The counters of those refusals. */
void rpc_server_get_errors(const struct rpc_server *s, struct rpc_server_errors *out);
/* Connection counters: start_on_connect servers count; others report zeros. */
void rpc_server_conn_stats(struct rpc_server *s, struct tp_conn_stats *out);
/* Cancels calls in progress, stops the thread, frees. NULL is a no-op. */
void rpc_server_stop(struct rpc_server *s);

#endif
