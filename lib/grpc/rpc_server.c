/*
 * rpc_server.c - see rpc_server.h.
 */
#include "rpc_server.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc_posix.h>
#include <grpc/slice.h>

#include "conn_table.h"
#include "traceprof/listen.h"
#include "traceprof/log.h"

enum phase { WAITING, READING, CHECKING, ANSWERING };

/*
 * The core keeps each received message's flags, the compressed bit
 * included, but its public API only says which algorithm grpc-encoding
 * named; libgrpc exports this accessor (C++ linkage, 1.51) and no other.
 */
uint32_t
rpc_message_flags(grpc_call *call) __asm__("_Z37grpc_call_test_only_get_message_flagsP9grpc_call");
#define RPC_FLAG_COMPRESSED 0x80000000u /* the core's GRPC_WRITE_INTERNAL_COMPRESS */

#define UNKNOWN_METHOD ((size_t)-1) /* struct call.method of a call for no registered method */

struct call {
	enum phase phase;	   /* what the next completion means */
	size_t method;		   /* which method it was requested for, or UNKNOWN_METHOD */
	grpc_call_details cd;	   /* UNKNOWN_METHOD: the method asked for */
	grpc_call *call;	   /* the call, once it arrived */
	gpr_timespec deadline;	   /* client's deadline (unused) */
	grpc_metadata_array md;	   /* request metadata */
	grpc_byte_buffer *payload; /* request message, or NULL */
	grpc_byte_buffer *extra;   /* CHECKING: a second message (refused), or NULL */
	grpc_byte_buffer *reply;   /* response message, or NULL */
	grpc_slice details;	   /* status message (ANSWERING) */
	int cancelled;		   /* from RECV_CLOSE_ON_SERVER */
};

struct rpc_server {
	struct rpc_server_opts o;	       /* settings (borrowed strings) */
	grpc_server *server;		       /* the server */
	grpc_completion_queue *cq;	       /* its one queue */
	void *methods[RPC_SERVER_MAX_METHODS]; /* registered methods */
	pthread_t thread;		       /* serving thread */
	bool started;			       /* thread runs */
	bool core_up;			       /* grpc_init done, server and queue made */
	bool server_started;		       /* grpc_server_start called */
	int port;			       /* bound port */
	int shutdown_tag;		       /* address used as the shutdown tag */
	/* start_on_connect: our own listener, and the acceptor that hands gRPC each connection */
	int listen_fd;			/* -1 when gRPC listens itself */
	grpc_server_credentials *creds; /* insecure credentials for each connection */
	pthread_t acceptor;		/* accept() loop */
	bool acceptor_started;		/* it runs */
	volatile bool stopping;		/* rpc_server_stop began */
	uint64_t unimplemented;		/* calls of unknown methods (server thread writes) */
	uint64_t no_encoding;		/* refused: compressed flag without grpc-encoding */
	uint64_t extra_messages;	/* refused: a unary call with a second message */
	struct tp_conn_limits lim;	/* resolved limits */
	struct conn_table *conns;	/* start_on_connect: connections handed to gRPC */
};

static struct call *call_new(size_t method)
{
	struct call *c = calloc(1, sizeof(*c));

	if (c) {
		c->method = method;
		grpc_metadata_array_init(&c->md);
		grpc_call_details_init(&c->cd);
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
	if (c->extra)
		grpc_byte_buffer_destroy(c->extra);
	if (c->reply)
		grpc_byte_buffer_destroy(c->reply);
	if (c->phase == ANSWERING)
		grpc_slice_unref(c->details);
	grpc_metadata_array_destroy(&c->md);
	grpc_call_details_destroy(&c->cd);
	free(c);
}

/*
 * Asks gRPC for the next call of a method, or (UNKNOWN_METHOD) for the
 * next call of any method not registered: without such a request gRPC
 * keeps those calls waiting until the client's deadline.
 */
static int request_call(struct rpc_server *s, size_t method)
{
	struct call *c = call_new(method);
	grpc_call_error e;

	if (!c)
		return -ENOMEM;
	if (method == UNKNOWN_METHOD)
		e = grpc_server_request_call(s->server, &c->call, &c->cd, &c->md, s->cq, s->cq, c);
	else
		e = grpc_server_request_registered_call(s->server, s->methods[method], &c->call,
							&c->deadline, &c->md, NULL, s->cq, s->cq,
							c);
	if (e != GRPC_CALL_OK) {
		call_free(c);
		return -EIO;
	}
	return 0;
}

/* Answers a call with status code and msg, without a message and without the handler. */
static void answer_status(struct call *c, grpc_status_code code, const char *msg)
{
	grpc_op ops[3];

	memset(ops, 0, sizeof(ops));
	ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
	c->details = grpc_slice_from_copied_string(msg);
	ops[1].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
	ops[1].data.send_status_from_server.status = code;
	ops[1].data.send_status_from_server.status_details = &c->details;
	ops[2].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
	ops[2].data.recv_close_on_server.cancelled = &c->cancelled;
	c->phase = ANSWERING;
	if (grpc_call_start_batch(c->call, ops, 3, c, NULL) != GRPC_CALL_OK)
		call_free(c); /* no completion will come */
}

/* Answers a call of an unknown method UNIMPLEMENTED, its message unread. */
static void answer_unknown(struct rpc_server *s, struct call *c)
{
	const char *m = (const char *)GRPC_SLICE_START_PTR(c->cd.method);
	size_t n = GRPC_SLICE_LENGTH(c->cd.method), k;
	char name[65], msg[96];

	__atomic_fetch_add(&s->unimplemented, 1, __ATOMIC_RELAXED);
	for (k = 0; k < n && k < sizeof(name) - 1; k++) /* the caller's text: printable, cut */
		name[k] = m[k] >= 0x21 && m[k] <= 0x7e ? m[k] : '?';
	name[k] = 0;
	snprintf(msg, sizeof(msg), "unknown method %s", name);
	log_debug("%s: %s", s->o.name, msg);
	answer_status(c, GRPC_STATUS_UNIMPLEMENTED, msg);
}

/* The bytes of a message as they came, in one slice (the caller unrefs). */
static grpc_slice raw_bytes(const grpc_slice_buffer *sb)
{
	grpc_slice all = grpc_slice_malloc(sb->length);
	uint8_t *p = GRPC_SLICE_START_PTR(all);

	for (size_t i = 0; i < sb->count; i++) {
		memcpy(p, GRPC_SLICE_START_PTR(sb->slices[i]), GRPC_SLICE_LENGTH(sb->slices[i]));
		p += GRPC_SLICE_LENGTH(sb->slices[i]);
	}
	return all;
}

/* Runs the handler on the request and starts the answering batch. */
static void answer(struct rpc_server *s, struct call *c)
{
	struct rpc_reply rep = {.code = GRPC_STATUS_OK};
	struct rpc_request req = {.method = c->method, .md = &c->md};
	grpc_byte_buffer_reader rd;
	grpc_slice all = grpc_empty_slice();
	grpc_op ops[4];
	size_t n = 0;

	if (c->payload && c->payload->type == GRPC_BB_RAW &&
	    c->payload->data.raw.compression != GRPC_COMPRESS_NONE) {
		/* never grpc_byte_buffer_reader_init(): it would inflate in full */
		if (s->o.accept_compressed) {
			all = raw_bytes(&c->payload->data.raw.slice_buffer);
			req.has_message = req.compressed = true;
		} else {
			rep.code = GRPC_STATUS_INVALID_ARGUMENT;
			snprintf(rep.message, sizeof(rep.message),
				 "compressed messages are not accepted here: send them "
				 "uncompressed");
			req.unreadable = true;
		}
	} else if (c->payload && !grpc_byte_buffer_reader_init(&rd, c->payload)) {
		rep.code = GRPC_STATUS_INVALID_ARGUMENT;
		snprintf(rep.message, sizeof(rep.message), "cannot read the request message");
		req.unreadable = true;
	} else if (c->payload) {
		all = grpc_byte_buffer_reader_readall(&rd);
		grpc_byte_buffer_reader_destroy(&rd);
		req.has_message = true;
	}
	req.data = GRPC_SLICE_START_PTR(all);
	req.len = GRPC_SLICE_LENGTH(all);
	s->o.handler(s->o.ctx, &req, &rep);
	grpc_slice_unref(all);
	memset(ops, 0, sizeof(ops));
	ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA;
	if (rep.code == GRPC_STATUS_OK) { /* a response message, empty or not */
		grpc_slice sl = rep.len
				    ? grpc_slice_from_copied_buffer((const char *)rep.data, rep.len)
				    : grpc_empty_slice();

		c->reply = grpc_raw_byte_buffer_create(&sl, 1);
		grpc_slice_unref(sl);
		ops[n].op = GRPC_OP_SEND_MESSAGE;
		ops[n].data.send_message.send_message = c->reply;
		n++;
	}
	free(rep.data);
	c->details = grpc_slice_from_copied_string(rep.code == GRPC_STATUS_OK ? "" : rep.message);
	ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
	ops[n].data.send_status_from_server.status = rep.code;
	ops[n].data.send_status_from_server.status_details = &c->details;
	n++;
	ops[n].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
	ops[n].data.recv_close_on_server.cancelled = &c->cancelled;
	n++;
	c->phase = ANSWERING;
	if (grpc_call_start_batch(c->call, ops, n, c, NULL) != GRPC_CALL_OK)
		call_free(c); /* no completion will come */
}

static void name_thread(const struct rpc_server *s, const char *suffix);

/*
 * Reads the call's next message into *into with a batch of its own (phase
 * READING: the request; CHECKING: whether another follows), so that a
 * message the core refuses comes back as a failed batch (with
 * GRPC_SRM_PAYLOAD_READ_INITIAL_BYTE_BUFFER such calls never surface).
 */
static void read_message(struct call *c, grpc_byte_buffer **into, enum phase phase)
{
	grpc_op op;

	memset(&op, 0, sizeof(op));
	op.op = GRPC_OP_RECV_MESSAGE;
	op.data.recv_message.recv_message = into;
	c->phase = phase;
	if (grpc_call_start_batch(c->call, &op, 1, c, NULL) != GRPC_CALL_OK)
		call_free(c); /* no completion will come */
}

/*
 * The request message was read: one flagged compressed without an
 * algorithm (no grpc-encoding, or identity) is refused INTERNAL as the
 * spec says; else the call waits for the client's end of stream, since a
 * unary call has exactly one message.
 */
static void after_message(struct rpc_server *s, struct call *c)
{
	if (c->payload && c->payload->type == GRPC_BB_RAW &&
	    c->payload->data.raw.compression == GRPC_COMPRESS_NONE &&
	    (rpc_message_flags(c->call) & RPC_FLAG_COMPRESSED)) {
		__atomic_fetch_add(&s->no_encoding, 1, __ATOMIC_RELAXED);
		answer_status(c, GRPC_STATUS_INTERNAL, "compressed message without grpc-encoding");
		return;
	}
	if (!c->payload) { /* the client closed without a message: nothing can follow */
		answer(s, c);
		return;
	}
	read_message(c, &c->extra, CHECKING);
}

/* The client's end of stream, or a second message (refused INTERNAL, as grpc-java does). */
static void after_check(struct rpc_server *s, struct call *c)
{
	if (c->extra) {
		__atomic_fetch_add(&s->extra_messages, 1, __ATOMIC_RELAXED);
		answer_status(c, GRPC_STATUS_INTERNAL, "unary call with more than one message");
		return;
	}
	answer(s, c);
}

static void *serve(void *arg)
{
	struct rpc_server *s = arg;
	bool shutting_down = false;

	name_thread(s, "");
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
		if (c->phase == ANSWERING || (c->phase == WAITING && !ev.success)) {
			call_free(c);
			continue;
		}
		if (c->phase == WAITING) {
			if (!shutting_down && request_call(s, c->method) != 0)
				log_warn("%s: cannot wait for the next call", s->o.name);
			if (c->method == UNKNOWN_METHOD)
				answer_unknown(s, c); /* its message is never read */
			else
				read_message(c, &c->payload, READING);
			continue;
		}
		if (!ev.success && c->phase == CHECKING) {
			call_free(c); /* broken off by the client after its message */
			continue;
		}
		if (!ev.success) {
			/*
			 * The core ended the call before its message came (RESOURCE_EXHAUSTED
			 * past the receive limit, or the client broke it off): the handler
			 * never sees it, the owner counts it. Calls cancelled by
			 * rpc_server_stop() are not counted.
			 */
			if (s->o.on_unread && !s->stopping)
				s->o.on_unread(s->o.ctx);
			call_free(c);
			continue;
		}
		if (c->phase == READING)
			after_message(s, c);
		else
			after_check(s, c);
	}
	return NULL;
}

/* Thread names: "tp-otlp-grpc", "tp-control" (what top -H and the benchmarks show). */
static void name_thread(const struct rpc_server *s, const char *suffix)
{
	char name[16];

	snprintf(name, sizeof(name), "tp-%s%s", s->o.name, suffix);
	for (char *c = name; *c; c++)
		if (*c == ' ')
			*c = '-';
	pthread_setname_np(pthread_self(), name);
}

/* Integer channel argument n of args. */
static size_t int_arg(grpc_arg *args, size_t n, const char *key, int value)
{
	args[n].type = GRPC_ARG_INTEGER;
	args[n].key = (char *)key;
	args[n].value.integer = value;
	return n + 1;
}

/* The connection limits as gRPC channel arguments (see rpc_server.h). */
static size_t limit_args(const struct rpc_server *s, grpc_arg *args, size_t n)
{
	n = int_arg(args, n, GRPC_ARG_MAX_CONCURRENT_STREAMS, RPC_SERVER_MAX_STREAMS);
	n = int_arg(args, n, GRPC_ARG_MAX_CONNECTION_IDLE_MS, s->lim.idle_timeout_ms);
	n = int_arg(args, n, GRPC_ARG_MAX_CONNECTION_AGE_MS, s->lim.grpc_max_age_ms);
	n = int_arg(args, n, GRPC_ARG_MAX_CONNECTION_AGE_GRACE_MS, 30000);
	n = int_arg(args, n, GRPC_ARG_KEEPALIVE_TIME_MS, s->lim.grpc_keepalive_ms);
	n = int_arg(args, n, GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 20000);
	return int_arg(args, n, GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS, s->lim.grpc_handshake_ms);
}

/* grpc_init, the server with its queue and methods; not started yet. */
static void core_create(struct rpc_server *s)
{
	grpc_arg args[10];
	grpc_channel_args chargs = {0, args};

	grpc_init();
	memset(args, 0, sizeof(args));
	args[0].type = GRPC_ARG_INTEGER;
	args[0].key = GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH;
	args[0].value.integer = s->o.max_receive_bytes;
	args[1].type = GRPC_ARG_INTEGER;
	args[1].key = GRPC_ARG_ALLOW_REUSEPORT;
	args[1].value.integer = 0;
	/* the core would inflate a compressed message in full before any limit (rpc_server.h) */
	args[2].type = GRPC_ARG_INTEGER;
	args[2].key = GRPC_ARG_ENABLE_PER_MESSAGE_DECOMPRESSION;
	args[2].value.integer = 0;
	chargs.num_args = limit_args(s, args, 3);
	s->server = grpc_server_create(&chargs, NULL);
	s->cq = grpc_completion_queue_create_for_next(NULL);
	grpc_server_register_completion_queue(s->server, s->cq, NULL);
	for (size_t i = 0; i < s->o.nmethods; i++)
		s->methods[i] = grpc_server_register_method(s->server, s->o.methods[i], NULL,
							    GRPC_SRM_PAYLOAD_NONE, 0);
	s->core_up = true;
}

/* Starts the server, asks for the first call of each method, starts the serving thread. */
static int core_run(struct rpc_server *s)
{
	int rc = 0;

	grpc_server_start(s->server);
	s->server_started = true;
	for (size_t i = 0; i < s->o.nmethods && !rc; i++)
		rc = request_call(s, i) ? EIO : 0;
	if (!rc)
		rc = request_call(s, UNKNOWN_METHOD) ? EIO : 0;
	if (!rc)
		rc = pthread_create(&s->thread, NULL, serve, s);
	if (rc) {
		log_error("%s: cannot start serving: %s", s->o.name, strerror(rc));
		return rc;
	}
	s->started = true;
	return 0;
}

/* Shuts the server down and frees what core_create made. */
static void core_destroy(struct rpc_server *s)
{
	if (!s->core_up)
		return;
	if (s->server_started) {
		grpc_server_shutdown_and_notify(s->server, s->cq, &s->shutdown_tag);
		grpc_server_cancel_all_calls(s->server);
	} else {
		grpc_completion_queue_shutdown(s->cq); /* nothing can arrive on it */
	}
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
	s->core_up = false;
}

/*
 * The acceptor of a start_on_connect server: blocks in accept(), so it
 * costs nothing while no client comes. The first connection starts the
 * gRPC core (its timer and executor threads wake about twice a second
 * for as long as it runs); every connection is handed to it.
 */
static void *accept_loop(void *arg)
{
	struct rpc_server *s = arg;
	bool warned = false, capped = false;

	name_thread(s, "-l");
	for (;;) {
		struct sockaddr_storage peer;
		socklen_t plen = sizeof(peer);
		int fd = accept4(s->listen_fd, (struct sockaddr *)&peer, &plen,
				 SOCK_NONBLOCK | SOCK_CLOEXEC),
		    one = 1;

		if (s->stopping) {
			if (fd >= 0)
				close(fd);
			break;
		}
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO)
				continue;
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
			    errno == ENOMEM) {
				if (!warned)
					log_warn("%s: cannot accept a connection: %s", s->o.name,
						 strerror(errno));
				warned = true;
				usleep(100000); /* the backlog keeps the client waiting */
				continue;
			}
			log_error("%s: accept failed: %s; no further connections", s->o.name,
				  strerror(errno));
			break;
		}
		if (conn_table_admit(s->conns, fd, (struct sockaddr *)&peer) != 0) {
			if (!capped)
				log_warn(
				    "%s: connection refused at a cap (max-conns %d, "
				    "max-conns-per-peer %d); further refusals are counted only",
				    s->o.name, s->lim.max_conns, s->lim.max_per_peer);
			capped = true;
			close(fd); /* refused: closed at once */
			continue;
		}
		(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		if (!s->core_up) {
			core_create(s);
			if (core_run(s) != 0) {
				close(fd);
				break;
			}
			log_info("%s: first connection, gRPC core started", s->o.name);
		}
		grpc_server_add_channel_from_fd(s->server, fd, s->creds); /* owns fd now */
	}
	return NULL;
}

struct rpc_server *rpc_server_start(const struct rpc_server_opts *o)
{
	struct rpc_server *s;
	char msg[512];
	int rc, fd = -ENOENT; /* -ENOENT: gRPC listens */

	if (o->nmethods < 1 || o->nmethods > RPC_SERVER_MAX_METHODS || !o->handler) {
		grpc_server_credentials_release(o->creds);
		errno = EINVAL;
		return NULL;
	}
	s = calloc(1, sizeof(*s));
	if (!s) {
		grpc_server_credentials_release(o->creds);
		errno = ENOMEM;
		return NULL;
	}
	s->o = *o;
	s->o.creds = NULL;
	s->o.limits = NULL;
	s->lim = tp_conn_limits_resolve(o->limits);
	s->listen_fd = -1;
	/* a name, "unix:..." or no host: gRPC resolves and listens itself (below) */
	if (o->start_on_connect)
		fd = tp_listen_tcp(o->addr, TP_LISTEN_NUMERIC, 0, SOMAXCONN, &s->port, msg,
				   sizeof(msg));
	if (fd < 0 && fd != -EINVAL && fd != -ENOENT) {
		log_error("%s: cannot listen on %s", o->name, msg);
		grpc_server_credentials_release(o->creds);
		free(s);
		errno = EADDRINUSE;
		return NULL;
	}
	if (fd >= 0) {
		s->listen_fd = fd;
		s->creds = o->creds;
		s->conns = conn_table_new(&s->lim);
		if (!s->conns) {
			log_error("%s: out of memory", o->name);
			rpc_server_stop(s);
			errno = ENOMEM;
			return NULL;
		}
		rc = pthread_create(&s->acceptor, NULL, accept_loop, s);
		if (rc) {
			log_error("%s: cannot start accepting: %s", o->name, strerror(rc));
			rpc_server_stop(s);
			errno = rc;
			return NULL;
		}
		s->acceptor_started = true;
		return s;
	}
	core_create(s);
	s->port = grpc_server_add_http2_port(s->server, o->addr, o->creds);
	grpc_server_credentials_release(o->creds);
	if (!s->port) {
		log_error("%s: cannot listen on %s (address in use, or not host:port?)", o->name,
			  o->addr);
		rpc_server_stop(s);
		errno = EADDRINUSE;
		return NULL;
	}
	rc = core_run(s);
	if (rc) {
		rpc_server_stop(s);
		errno = rc;
		return NULL;
	}
	return s;
}

int rpc_server_port(const struct rpc_server *s)
{
	return s->port;
}

bool rpc_server_core_started(const struct rpc_server *s)
{
	return s->core_up;
}

uint64_t rpc_server_unimplemented(const struct rpc_server *s)
{
	return __atomic_load_n(&s->unimplemented, __ATOMIC_RELAXED);
}

void rpc_server_get_errors(const struct rpc_server *s, struct rpc_server_errors *out)
{
	out->no_encoding = __atomic_load_n(&s->no_encoding, __ATOMIC_RELAXED);
	out->extra_messages = __atomic_load_n(&s->extra_messages, __ATOMIC_RELAXED);
}

void rpc_server_conn_stats(struct rpc_server *s, struct tp_conn_stats *out)
{
	if (s->conns)
		conn_table_get_stats(s->conns, out);
	else
		*out = (struct tp_conn_stats){0};
	out->no_encoding = __atomic_load_n(&s->no_encoding, __ATOMIC_RELAXED);
	out->extra_messages = __atomic_load_n(&s->extra_messages, __ATOMIC_RELAXED);
}

void rpc_server_stop(struct rpc_server *s)
{
	if (!s)
		return;
	s->stopping = true;
	if (s->listen_fd >= 0) {
		/* wakes the acceptor: accept() on a shut-down listener fails */
		shutdown(s->listen_fd, SHUT_RDWR);
		if (s->acceptor_started)
			pthread_join(s->acceptor, NULL);
		close(s->listen_fd);
	}
	core_destroy(s);
	if (s->creds)
		grpc_server_credentials_release(s->creds);
	conn_table_free(s->conns);
	free(s);
}
