/*
 * rpc_server.h - a unary gRPC server on the C core: one completion queue,
 * one thread, registered methods, and a handler that turns each request's
 * bytes (and metadata) into a status and response bytes. The OTLP trace
 * receiver and the AgentControl service are two handlers on it.
 *
 * A call lives from the request for a new call (WAITING) through the
 * batch that reads its message (READING) to the batch that answers it
 * (ANSWERING): initial metadata, the response message when
 * OK, the status, and the receipt of the client's close. The next call of a
 * method is requested as soon as one arrives, so calls queue inside gRPC
 * while the handler runs; calls are answered one at a time, in the order
 * their messages arrive. Stop: shutdown_and_notify + cancel_all_calls from the stopping
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
 */
#ifndef TRACEPROF_AGENT_RPC_SERVER_H
#define TRACEPROF_AGENT_RPC_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <grpc/grpc.h>
#include <grpc/grpc_security.h>

#define RPC_SERVER_MAX_METHODS 4

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
	const char *addr;		/* "host:port"; port 0 picks one */
	grpc_server_credentials *creds; /* consumed (released) by the call */
	const char *const *methods;	/* "/package.Service/Method" names */
	size_t nmethods;		/* 1..RPC_SERVER_MAX_METHODS */
	int max_receive_bytes;		/* larger messages: RESOURCE_EXHAUSTED by gRPC */
	rpc_handler handler;		/* answers every call, on the server thread */
	void *ctx;			/* its argument */
	const char *name;		/* for log lines ("otlp grpc", "control") */
	bool start_on_connect;		/* insecure creds only: listen ourselves and start the
					   gRPC core at the first connection (see below) */
	bool accept_compressed;		/* hand compressed messages to the handler as sent
					   (req->compressed); otherwise they are refused */
	void (*on_unread)(void *ctx);	/* optional, on the server thread: a call the gRPC
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
/* Cancels calls in progress, stops the thread, frees. NULL is a no-op. */
void rpc_server_stop(struct rpc_server *s);

#endif
