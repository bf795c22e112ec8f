/*
 * demo_service.c - traceprof-demo-service: an HTTP/1.1 "payment" service
 * instrumented with the traceprof SDK, the workload traceprof profiles in
 * its demo and tests.
 *
 * Data flow: the main thread owns an epoll set with the listening socket,
 * a signalfd and every idle connection (one-shot). A readable connection
 * goes into a bounded queue; one of a fixed pool of workers takes it, reads
 * what has arrived, and serves every complete request in its buffer on that
 * same thread (thread-per-request, as the zero-code HTTP source expects),
 * then hands the connection back to epoll. Slow clients therefore never hold
 * a worker, and any number of keep-alive connections share the pool.
 *
 * Per request: the head is parsed (demo_http.c); the span is the incoming
 * traceparent's trace (or a new trace when it is absent or invalid) with a
 * new server span id; the worker begins it with tp_sdk_span_begin (which
 * attaches it; attached again with the http.route attribute), runs
 * route_request (demo_routes.c; the CPU per path is in demo_work.c), writes
 * the response and only then ends it with tp_sdk_span_end, which detaches
 * and queues the span for the SDK's OTLP/HTTP exporter. Writing is part of the server span and its
 * kernel CPU belongs to the request; waiting for the next request is not, and a sampler only sees
 * on-CPU time, so blocking in send() while attached attributes nothing wrongly. A background thread
 * runs refreshCache every second without any context.
 *
 * Every response to a routed request carries traceresponse (W3C Trace
 * Context level 2: trace id and the server span id), X-Trace-Id and
 * Server-Timing: cpu;dur=<ms of thread CPU spent on the request>.
 *
 * Built twice: traceprof-demo-service (the payment service) and, with
 * DEMO_FRONTEND defined, traceprof-demo-frontend, the same server whose
 * POST /api/checkout calls the payment service (demo_frontend.c).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#ifdef DEMO_FRONTEND
#include "demo_frontend.h"
#endif
#include "demo_http.h"
#include "demo_routes.h"
#include "demo_work.h"
#include "traceprof/hex.h"
#include "traceprof/log.h"
#include "traceprof/sdk.h"

#if defined(__clang__)
#define NOINLINE __attribute__((noinline))
#else
#define NOINLINE __attribute__((noipa)) /* no inlining and no renamed clones */
#endif
#define MAX_CONNS	  512	/* open connections; more are refused with 503 */
#define MAX_THREADS	  64	/* largest --threads */
#define IDLE_TIMEOUT_MS	  30000 /* an idle or half-sent connection is closed after this */
#define WRITE_TIMEOUT_MS  5000	/* a client that does not read its response is dropped */
#define LINGER_MS	  1000	/* reading what a refused client still sends */
#define LINGER_BYTES	  (1 << 20)
#define CACHE_INTERVAL_MS 1000 /* refreshCache period */
#define CONN_BUF_SIZE	  (HTTP_MAX_HEAD + HTTP_MAX_BODY)
#define RESP_BUF_SIZE	  (DEMO_BODY_SIZE + 1024)

struct service_opts {
	const char *bind;    /* IPv4 address to listen on */
	int port;	     /* TCP port, 0 = any free port */
	int threads;	     /* worker threads */
	double work_scale;   /* multiplies every CPU budget */
	const char *service; /* service.name in the process context */
	const char *otlp;    /* OTLP/HTTP traces endpoint, or NULL: the SDK's default */
	const char *payment; /* frontend: the payment service, HOST:PORT */
};

#ifdef DEMO_FRONTEND
#define PROGRAM		"traceprof-demo-frontend"
#define DEFAULT_PORT	8081
#define DEFAULT_SERVICE "frontend"
#else
#define PROGRAM		"traceprof-demo-service"
#define DEFAULT_PORT	8080
#define DEFAULT_SERVICE "payment-svc"
#endif

enum conn_state {
	CONN_IDLE, /* armed in epoll, owned by the main thread */
	CONN_BUSY, /* queued or being served, owned by a worker */
};

struct conn {
	int fd;			 /* the client socket, non-blocking */
	enum conn_state state;	 /* who owns it; changed under server.lock */
	int64_t last_active_ms;	 /* monotonic time it was last handed back */
	size_t slot;		 /* index in server.conns */
	size_t len;		 /* bytes in buf */
	bool sent_continue;	 /* 100 Continue sent for the pending request */
	char buf[CONN_BUF_SIZE]; /* received, not yet served bytes */
};

struct server {
	struct service_opts o;	       /* configuration */
	int listen_fd;		       /* listening socket */
	int epoll_fd;		       /* idle connections, listen_fd, signal_fd */
	int signal_fd;		       /* SIGINT and SIGTERM */
	int route_key;		       /* thread attribute key of http.route */
	pthread_mutex_t lock;	       /* guards everything below */
	pthread_cond_t work_cond;      /* a connection was queued, or stopping */
	pthread_cond_t cache_cond;     /* stopping, for the cache thread */
	atomic_bool stopping;	       /* shutdown requested; set under lock */
	struct conn *conns[MAX_CONNS]; /* open connections */
	size_t n_conns;		       /* entries used in conns */
	struct conn *queue[MAX_CONNS]; /* ready connections, a ring */
	size_t q_head;		       /* index of the oldest entry */
	size_t q_len;		       /* entries in queue */
	atomic_ulong requests;	       /* requests answered with a span */
	atomic_ulong rejected;	       /* malformed requests and refused connections */
};

struct worker {
	struct server *s;	  /* the server it serves */
	pthread_t thread;	  /* its thread */
	struct demo_reply reply;  /* reply being built */
	char resp[RESP_BUF_SIZE]; /* whole response being written */
};

static int64_t monotonic_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- connections ---- */

/* Writes all of buf, waiting up to WRITE_TIMEOUT_MS whenever the socket is full. */
static int write_all(int fd, const char *buf, size_t len)
{
	while (len) {
		ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);

		if (n > 0) {
			buf += n;
			len -= (size_t)n;
		} else if (n < 0 && errno == EINTR) {
			continue;
		} else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			struct pollfd p = {.fd = fd, .events = POLLOUT};
			int rc = poll(&p, 1, WRITE_TIMEOUT_MS);

			if (rc == 0)
				return -ETIMEDOUT;
			if (rc < 0 && errno != EINTR)
				return -errno;
		} else {
			return n < 0 ? -errno : -EPIPE;
		}
	}
	return 0;
}

/* Head and body of a response in w->resp, then written. sp may be NULL. */
static int send_reply(struct worker *w, struct conn *c, const struct http_request *req,
		      const struct demo_span *sp, const struct demo_reply *r)
{
	size_t cap = sizeof(w->resp);
	int n =
	    snprintf(w->resp, cap, "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n",
		     r->status, http_reason(r->status), r->content_type, r->body_len);
	size_t len = n < 0 ? cap : (size_t)n;

	if (sp && len < cap) {
		double cpu_ms = (demo_thread_cpu_ns() - sp->cpu_start_ns) / 1e6;

		n = snprintf(
		    w->resp + len, cap - len,
		    "traceresponse: %s\r\nX-Trace-Id: %s\r\nServer-Timing: cpu;dur=%.3f\r\n",
		    sp->traceresponse, sp->trace_hex, cpu_ms);
		len += n < 0 ? cap : (size_t)n;
	}
	if (r->allow && len < cap) {
		n = snprintf(w->resp + len, cap - len, "Allow: %s\r\n", r->allow);
		len += n < 0 ? cap : (size_t)n;
	}
	if (len < cap) {
		const char *conn = r->close			    ? "close"
				   : req && req->minor_version == 0 ? "keep-alive"
								    : NULL;

		n = conn ? snprintf(w->resp + len, cap - len, "Connection: %s\r\n\r\n", conn)
			 : snprintf(w->resp + len, cap - len, "\r\n");
		len += n < 0 ? cap : (size_t)n;
	}
	if (len + r->body_len > cap)
		return -ENOSPC;
	memcpy(w->resp + len, r->body, r->body_len);
	return write_all(c->fd, w->resp, len + r->body_len);
}

/*
 * Serves one request whose head (and body, unless it is too large) is in
 * c->buf, inside its span. Returns 0 to keep the connection, or -ECONNRESET
 * when it must be closed.
 */
static NOINLINE int handle_request(struct worker *w, struct conn *c, const struct http_request *req)
{
	struct demo_reply *r = &w->reply;
	const char *route = demo_route_path(req);
	struct tp_sdk_attr attr = {0};
	struct demo_span sp;
	char method[16];
	int rc;

	memset(r, 0, offsetof(struct demo_reply, buf));
	r->close = !req->keep_alive;
	demo_span_start(&sp, req);
	if (route && w->s->route_key >= 0) {
		/* the same span again, now with its http.route thread attribute */
		attr.key = (uint32_t)w->s->route_key;
		attr.value = route;
		attr.value_len = (uint32_t)strlen(route);
		tp_sdk_attach(sp.sdk.trace_id, sp.sdk.span_id, sp.sdk.trace_flags, &attr, 1);
	}
	if (req->content_length > HTTP_MAX_BODY) {
		demo_reply_error(r, 413, "request body too large");
		r->close = true;
	} else {
		route_request(req, c->buf + req->head_len, &sp, r);
	}
	rc = send_reply(w, c, req, &sp, r);
	snprintf(method, sizeof(method), "%.*s", (int)req->method_len, req->method);
	/* detaches and queues the span for the OTLP exporter (unknown paths: no route) */
	tp_sdk_span_end(&sp.sdk, method, route, r->status);
	atomic_fetch_add(&w->s->requests, 1);
	log_debug("request method=%.*s target=%.*s status=%d trace_id=%s", (int)req->method_len,
		  req->method, (int)req->target_len, req->target, r->status, sp.trace_hex);
	return rc || r->close ? -ECONNRESET : 0;
}

/* Answers a malformed head without a span. Always -ECONNRESET. */
static int reject_request(struct worker *w, struct conn *c, int status)
{
	struct demo_reply *r = &w->reply;

	memset(r, 0, offsetof(struct demo_reply, buf));
	r->close = true;
	snprintf(r->buf, sizeof(r->buf), "%s\n", http_reason(status));
	demo_reply_text(r, status, r->buf);
	send_reply(w, c, NULL, NULL, r);
	atomic_fetch_add(&w->s->rejected, 1);
	log_debug("rejected status=%d", status);
	return -ECONNRESET;
}

/*
 * Serves the complete requests in c->buf. Returns 0 when it needs more
 * bytes, -ECONNRESET when the connection must be closed.
 */
static NOINLINE int serve_buffered(struct worker *w, struct conn *c)
{
	while (c->len) {
		struct http_request req;
		int rc = http_parse_request(c->buf, c->len, &req);
		size_t total;

		if (rc == -EAGAIN)
			return 0;
		if (rc)
			return reject_request(w, c, req.error_status);
		if (req.content_length > HTTP_MAX_BODY)
			return handle_request(w, c, &req);
		total = req.head_len + (size_t)req.content_length;
		if (c->len < total) {
			if (req.expect_continue && !c->sent_continue) {
				c->sent_continue = true;
				if (write_all(c->fd, "HTTP/1.1 100 Continue\r\n\r\n", 25))
					return -ECONNRESET;
			}
			return 0;
		}
		rc = handle_request(w, c, &req);
		if (rc)
			return rc;
		memmove(c->buf, c->buf + total, c->len - total);
		c->len -= total;
		c->sent_continue = false;
		if (atomic_load(&w->s->stopping))
			return -ECONNRESET;
	}
	return 0;
}

/* Reads what the client still sends for a while, so closing does not reset the reply. */
static void linger_close(int fd)
{
	int64_t deadline = monotonic_ms() + LINGER_MS;
	size_t drained = 0;
	char sink[4096];

	shutdown(fd, SHUT_WR);
	while (drained < LINGER_BYTES) {
		int64_t left = deadline - monotonic_ms();
		struct pollfd p = {.fd = fd, .events = POLLIN};
		ssize_t n;

		if (left <= 0 || poll(&p, 1, (int)left) <= 0)
			break;
		n = read(fd, sink, sizeof(sink));
		if (n <= 0 && !(n < 0 && (errno == EAGAIN || errno == EINTR)))
			break;
		drained += n > 0 ? (size_t)n : 0;
	}
	close(fd);
}

static void conn_remove(struct server *s, struct conn *c)
{
	s->conns[c->slot] = s->conns[--s->n_conns];
	s->conns[c->slot]->slot = c->slot;
}

/* Closes a connection a worker owns. */
static void conn_close(struct server *s, struct conn *c, bool linger)
{
	pthread_mutex_lock(&s->lock);
	conn_remove(s, c);
	pthread_mutex_unlock(&s->lock);
	if (linger)
		linger_close(c->fd);
	else
		close(c->fd);
	free(c);
}

/* Hands a connection back to the main thread's epoll set. */
static int conn_rearm(struct server *s, struct conn *c)
{
	struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP | EPOLLONESHOT, .data.ptr = c};
	int rc = 0;

	pthread_mutex_lock(&s->lock);
	c->state = CONN_IDLE;
	c->last_active_ms = monotonic_ms();
	if (epoll_ctl(s->epoll_fd, EPOLL_CTL_MOD, c->fd, &ev))
		rc = -errno;
	pthread_mutex_unlock(&s->lock);
	return rc;
}

static NOINLINE void serve_connection(struct worker *w, struct conn *c)
{
	bool eof = false;

	for (;;) {
		ssize_t n = 0;
		int rc;

		if (c->len < sizeof(c->buf)) {
			n = read(c->fd, c->buf + c->len, sizeof(c->buf) - c->len);
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
				return conn_close(w->s, c, false);
			if (n == 0)
				eof = true;
			if (n > 0)
				c->len += (size_t)n;
		}
		rc = serve_buffered(w, c);
		if (rc)
			return conn_close(w->s, c, true);
		if (c->len == sizeof(c->buf)) /* cannot happen: a whole request fits */
			return conn_close(w->s, c, false);
		if (eof)
			return conn_close(w->s, c, false);
		if (n < 0)
			break;
	}
	if (conn_rearm(w->s, c))
		conn_close(w->s, c, false);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct server *s = w->s;

	tp_sdk_thread_register();
	for (;;) {
		struct conn *c;

		pthread_mutex_lock(&s->lock);
		while (!s->stopping && s->q_len == 0)
			pthread_cond_wait(&s->work_cond, &s->lock);
		if (s->stopping) {
			pthread_mutex_unlock(&s->lock);
			break;
		}
		c = s->queue[s->q_head];
		s->q_head = (s->q_head + 1) % MAX_CONNS;
		s->q_len--;
		pthread_mutex_unlock(&s->lock);
		serve_connection(w, c);
	}
	return NULL;
}

/* Background work outside any request: this thread never attaches a context. */
static void *cache_main(void *arg)
{
	struct server *s = arg;

	pthread_mutex_lock(&s->lock);
	while (!s->stopping) {
		struct timespec ts;

		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_sec += CACHE_INTERVAL_MS / 1000;
		pthread_cond_timedwait(&s->cache_cond, &s->lock, &ts);
		if (s->stopping)
			break;
		pthread_mutex_unlock(&s->lock);
		refreshCache();
		pthread_mutex_lock(&s->lock);
	}
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

/* ---- main thread ---- */

static const char listen_tag, signal_tag; /* epoll data of the two non-connection fds */

static void refuse_connection(struct server *s, int fd)
{
	static const char busy[] = "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n"
				   "Connection: close\r\n\r\n";

	if (send(fd, busy, sizeof(busy) - 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
		log_debug("503 not sent errno=%d", errno);
	close(fd);
	atomic_fetch_add(&s->rejected, 1);
}

static void accept_connections(struct server *s)
{
	for (;;) {
		int one = 1;
		struct conn *c;
		struct epoll_event ev;
		int fd = accept4(s->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd < 0) {
			if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
				log_warn("accept failed errno=%d", errno);
			return;
		}
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		c = malloc(sizeof(*c));
		if (!c) {
			refuse_connection(s, fd);
			continue;
		}
		c->fd = fd;
		c->len = 0;
		c->sent_continue = false;
		c->state = CONN_IDLE;
		c->last_active_ms = monotonic_ms();
		ev.events = EPOLLIN | EPOLLRDHUP | EPOLLONESHOT;
		ev.data.ptr = c;
		pthread_mutex_lock(&s->lock);
		if (s->n_conns == MAX_CONNS) {
			pthread_mutex_unlock(&s->lock);
			free(c);
			refuse_connection(s, fd);
			continue;
		}
		c->slot = s->n_conns;
		s->conns[s->n_conns++] = c;
		if (epoll_ctl(s->epoll_fd, EPOLL_CTL_ADD, fd, &ev)) {
			log_warn("epoll_ctl failed errno=%d", errno);
			conn_remove(s, c);
			close(fd);
			free(c);
		}
		pthread_mutex_unlock(&s->lock);
	}
}

static void enqueue(struct server *s, struct conn *c)
{
	pthread_mutex_lock(&s->lock);
	c->state = CONN_BUSY;
	s->queue[(s->q_head + s->q_len) % MAX_CONNS] = c;
	s->q_len++;
	pthread_cond_signal(&s->work_cond);
	pthread_mutex_unlock(&s->lock);
}

/* Closes idle connections that have been silent for IDLE_TIMEOUT_MS. */
static void sweep_idle(struct server *s)
{
	int64_t now = monotonic_ms();

	pthread_mutex_lock(&s->lock);
	for (size_t i = 0; i < s->n_conns;) {
		struct conn *c = s->conns[i];

		if (c->state != CONN_IDLE || now - c->last_active_ms < IDLE_TIMEOUT_MS) {
			i++;
			continue;
		}
		epoll_ctl(s->epoll_fd, EPOLL_CTL_DEL, c->fd, NULL);
		conn_remove(s, c);
		close(c->fd);
		free(c);
	}
	pthread_mutex_unlock(&s->lock);
}

static void event_loop(struct server *s)
{
	int64_t last_sweep = monotonic_ms();

	for (;;) {
		struct epoll_event evs[64];
		int n = epoll_wait(s->epoll_fd, evs, 64, 1000);

		if (n < 0 && errno != EINTR) {
			log_error("epoll_wait failed errno=%d", errno);
			return;
		}
		for (int i = 0; i < n; i++) {
			if (evs[i].data.ptr == &listen_tag) {
				accept_connections(s);
			} else if (evs[i].data.ptr == &signal_tag) {
				struct signalfd_siginfo si;

				if (read(s->signal_fd, &si, sizeof(si)) == sizeof(si))
					log_info("stopping signal=%u", si.ssi_signo);
				return;
			} else {
				enqueue(s, evs[i].data.ptr);
			}
		}
		if (monotonic_ms() - last_sweep >= 1000) {
			sweep_idle(s);
			last_sweep = monotonic_ms();
		}
	}
}

static int open_listener(struct server *s, struct sockaddr_in *addr)
{
	socklen_t alen = sizeof(*addr);
	int one = 1;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)addr, sizeof(*addr)) || listen(fd, 128) ||
	    getsockname(fd, (struct sockaddr *)addr, &alen)) {
		int rc = -errno;

		close(fd);
		return rc;
	}
	s->listen_fd = fd;
	return 0;
}

static int setup_epoll(struct server *s)
{
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = (void *)&listen_tag};
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	s->signal_fd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	s->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
	if (s->signal_fd < 0 || s->epoll_fd < 0)
		return -errno;
	if (epoll_ctl(s->epoll_fd, EPOLL_CTL_ADD, s->listen_fd, &ev))
		return -errno;
	ev.data.ptr = (void *)&signal_tag;
	if (epoll_ctl(s->epoll_fd, EPOLL_CTL_ADD, s->signal_fd, &ev))
		return -errno;
	return 0;
}

static void usage(FILE *out)
{
#ifdef DEMO_FRONTEND
	fprintf(out,
		"usage: traceprof-demo-frontend [OPTIONS]\n"
		"\n"
		"The frontend of the two-service demo, instrumented with the traceprof SDK:\n"
		"POST /api/checkout checks the order (parseOrder, 0.8 ms CPU) and calls the\n"
		"payment service (traceprof-demo-service, POST /api/pay) with traceparent =\n"
		"its own span, waits for the answer and passes its status on. Prints\n"
		"\"listening on ADDR:PORT\" on stdout when ready; SIGTERM or SIGINT stops it.\n"
		"\n"
		"  POST /api/checkout   X-Demo-Path fast, slow or fail, forwarded to payment\n"
		"  GET /api/inventory   lookupInventory (1 ms), served here\n"
		"  GET /healthz         no work\n"
		"\n"
		"  --payment HOST:PORT  the payment service (default 127.0.0.1:8080)\n");
#else
	fprintf(out,
		"usage: traceprof-demo-service [OPTIONS]\n"
		"\n"
		"An HTTP/1.1 payment service instrumented with the traceprof SDK: every\n"
		"request runs inside its W3C trace context, with a fixed CPU cost per path.\n"
		"Prints \"listening on ADDR:PORT\" on stdout when ready; SIGTERM or SIGINT\n"
		"stops it.\n"
		"\n"
		"  POST /api/checkout   parseOrder, computeTotal, serializeResponse (3 ms CPU);\n"
		"                       X-Demo-Path: slow adds validateSignature (400 ms),\n"
		"                       X-Demo-Path: fail ends in chargeCard (30 ms) with 500\n"
		"  POST /api/pay        the same work, called by traceprof-demo-frontend\n"
		"  GET /api/inventory   lookupInventory (1 ms); ?sku=SKU-0000..SKU-4095\n"
		"  GET /healthz         no work\n"
		"\n");
#endif
	fprintf(out,
		"  --port N             TCP port (default %d; 0 picks a free one)\n"
		"  --bind ADDR          IPv4 address to listen on (default 127.0.0.1)\n"
		"  --threads N          worker threads, 1-%d (default 4)\n"
		"  --work-scale F       multiply every CPU cost by F, 0-1000 (default 1)\n"
		"  --service NAME       service.name to publish (default %s)\n"
		"  --otlp-endpoint URL  where server spans go, http://HOST:PORT/PATH (default:\n"
		"                       OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, "
		"OTEL_EXPORTER_OTLP_ENDPOINT\n"
		"                       + /v1/traces, else http://127.0.0.1:4318/v1/traces)\n"
		"  -v, --verbose        log every request on stderr\n"
		"  -h, --help           this help\n",
		DEFAULT_PORT, MAX_THREADS, DEFAULT_SERVICE);
}

/* Options into o; returns 0, 1 for --help, or -EINVAL after a message. */
static int parse_args(int argc, char **argv, struct service_opts *o)
{
	static const struct option longopts[] = {
	    {"port", required_argument, NULL, 'p'},
	    {"bind", required_argument, NULL, 'b'},
	    {"threads", required_argument, NULL, 't'},
	    {"work-scale", required_argument, NULL, 'w'},
	    {"service", required_argument, NULL, 's'},
	    {"verbose", no_argument, NULL, 'v'},
	    {"otlp-endpoint", required_argument, NULL, 'o'},
#ifdef DEMO_FRONTEND
	    {"payment", required_argument, NULL, 'P'},
#endif
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	double v;
	int c;

	while ((c = getopt_long(argc, argv, "vh", longopts, NULL)) != -1) {
		switch (c) {
		case 'p':
			if (demo_parse_number("--port", optarg, 0, 65535, &v) || v != (int)v)
				return -EINVAL;
			o->port = (int)v;
			break;
		case 'b':
			o->bind = optarg;
			break;
		case 't':
			if (demo_parse_number("--threads", optarg, 1, MAX_THREADS, &v) ||
			    v != (int)v)
				return -EINVAL;
			o->threads = (int)v;
			break;
		case 'w':
			if (demo_parse_number("--work-scale", optarg, 0, 1000, &o->work_scale))
				return -EINVAL;
			break;
		case 's':
			if (!*optarg) {
				log_error("--service: the name must not be empty");
				return -EINVAL;
			}
			o->service = optarg;
			break;
		case 'o':
			o->otlp = optarg;
			break;
		case 'P':
			o->payment = optarg;
			break;
		case 'v':
			log_set_level(TP_LOG_DEBUG);
			break;
		case 'h':
			usage(stdout);
			return 1;
		default:
			usage(stderr);
			return -EINVAL;
		}
	}
	if (optind < argc) {
		log_error("unexpected argument '%s'", argv[optind]);
		return -EINVAL;
	}
	return 0;
}

/*
 * What the threads need before they start: the work tables, the process
 * context, the span exporter, the http.route key, the listener and epoll.
 * Returns 0, or the exit status (1; 2 for a bad OTLP endpoint) once it has
 * said why.
 */
static int start_serving(struct server *s, struct sockaddr_in *addr)
{
	const struct service_opts *o = &s->o;
	struct tp_sdk_export_opts xo = {0};
	int rc;

	rc = demo_work_init(o->work_scale);
	if (rc) {
		log_error("cannot set up the work tables: %s", strerror(-rc));
		return 1;
	}
	rc = tp_sdk_process_publish(o->service, NULL, 0);
	if (rc) {
		log_error("cannot publish the process context: %s", strerror(-rc));
		return 1;
	}
	xo.endpoint = o->otlp;
	rc = tp_sdk_export_start(&xo);
	if (rc) {
		log_error("cannot start the span exporter: %s", strerror(-rc));
		if (rc == -EINVAL)
			log_error("hint: the OTLP endpoint must be http://HOST:PORT/PATH "
				  "(https is not supported)");
		return rc == -EINVAL ? 2 : 1;
	}
	s->route_key = tp_sdk_key_register("http.route");
	if (s->route_key < 0)
		log_warn("http.route attribute unavailable: %s", strerror(-s->route_key));
	rc = open_listener(s, addr);
	if (rc) {
		log_error("cannot listen on %s:%d: %s", o->bind, o->port, strerror(-rc));
		log_error("hint: pick another --port, or 0 for any free port");
		return 1;
	}
	rc = setup_epoll(s);
	if (rc) {
		log_error("cannot set up epoll: %s", strerror(-rc));
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct service_opts o = {"127.0.0.1", DEFAULT_PORT,    4, 1.0, DEFAULT_SERVICE,
				 NULL,	      "127.0.0.1:8080"};
	struct tp_sdk_export_stats xs;
	struct sockaddr_in addr = {.sin_family = AF_INET};
	struct server *s;
	struct worker *workers;
	pthread_condattr_t cattr;
	pthread_t cache_thread;
	sigset_t set;
	int started = 0;
	int rc;

	log_set_prefix(PROGRAM);
	rc = parse_args(argc, argv, &o);
	if (rc)
		return rc > 0 ? 0 : 2;
#ifdef DEMO_FRONTEND
	if (demo_frontend_init(o.payment))
		return 2;
#endif
	if (inet_pton(AF_INET, o.bind, &addr.sin_addr) != 1) {
		log_error("--bind: '%s' is not an IPv4 address", o.bind);
		return 2;
	}
	addr.sin_port = htons((uint16_t)o.port);
	s = calloc(1, sizeof(*s));
	workers = calloc((size_t)o.threads, sizeof(*workers));
	if (!s || !workers) {
		log_error("out of memory");
		return 1;
	}
	s->o = o;
	s->listen_fd = s->epoll_fd = s->signal_fd = -1;
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->work_cond, NULL);
	pthread_condattr_init(&cattr);
	pthread_condattr_setclock(&cattr, CLOCK_MONOTONIC);
	pthread_cond_init(&s->cache_cond, &cattr);
	signal(SIGPIPE, SIG_IGN);
	/* Every thread inherits the mask; only the signalfd sees the signals. */
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &set, NULL);

	rc = start_serving(s, &addr);
	if (rc)
		return rc;
	{
		bool cache = false;

		for (started = 0; started < o.threads; started++) {
			workers[started].s = s;
			rc = -pthread_create(&workers[started].thread, NULL, worker_main,
					     &workers[started]);
			if (rc)
				break;
		}
		if (!rc) {
			rc = -pthread_create(&cache_thread, NULL, cache_main, s);
			cache = !rc;
		}
		if (rc) {
			log_error("cannot start threads: %s", strerror(-rc));
		} else {
			printf("listening on %s:%d\n", o.bind, ntohs(addr.sin_port));
			fflush(stdout);
			log_info("serving service=%s threads=%d work_scale=%g", o.service,
				 o.threads, o.work_scale);
			event_loop(s);
		}
		pthread_mutex_lock(&s->lock);
		s->stopping = true;
		pthread_cond_broadcast(&s->work_cond);
		pthread_cond_broadcast(&s->cache_cond);
		pthread_mutex_unlock(&s->lock);
		for (int i = 0; i < started; i++)
			pthread_join(workers[i].thread, NULL);
		if (cache)
			pthread_join(cache_thread, NULL);
	}
	while (s->n_conns) {
		struct conn *c = s->conns[0];

		conn_remove(s, c);
		close(c->fd);
		free(c);
	}
	close(s->listen_fd);
	close(s->epoll_fd);
	close(s->signal_fd);
	tp_sdk_export_stop(2000);
	tp_sdk_export_get_stats(&xs);
	tp_sdk_process_remove();
	log_info("spans ended=%lu exported=%lu dropped_full=%lu dropped_error=%lu",
		 (unsigned long)xs.spans_ended, (unsigned long)xs.spans_exported,
		 (unsigned long)xs.spans_dropped_full, (unsigned long)xs.spans_dropped_error);
	log_info("stopped requests=%lu rejected=%lu", atomic_load(&s->requests),
		 atomic_load(&s->rejected));
	free(workers);
	free(s);
	return rc ? 1 : 0;
}
