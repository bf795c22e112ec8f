/*
 * test_conn_limits.c - connection limits of the agent's ports, one by one,
 * with raw TCP clients from chosen loopback addresses (docs/agent.md,
 * "Connection limits"): on OTLP/HTTP the idle, header and body deadlines,
 * the per-peer cap and which connection a full port evicts; on a gRPC
 * server with its own acceptor (rpc_server start_on_connect) the per-peer
 * cap, the port cap with closed connections noticed again, eviction of
 * the heaviest peer's newest connection, and gRPC's idle timeout for a
 * connection that never sends a byte. Times are measured, with margins
 * for a busy machine.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <grpc/grpc.h>
#include <grpc/grpc_security.h>

#include "aggregate.h"
#include "check.h"
#include "otlp.h"
#include "otlp_http.h"
#include "rpc_server.h"

static int64_t now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static int accept_all(void *ctx, struct agg_window *w)
{
	(void)ctx;
	agg_window_free(w);
	return 0;
}

/* A blocking connection from 127.0.0.<src> to 127.0.0.1:port; -1 on failure. */
static int conn_from(int src, int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET}, d = {.sin_family = AF_INET};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	a.sin_addr.s_addr = htonl(0x7f000000u + (uint32_t)src);
	d.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	d.sin_port = htons((uint16_t)port);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
	    connect(fd, (struct sockaddr *)&d, sizeof(d)) != 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

/*
 * Waits up to ms for the peer to close fd, reading (and keeping in buf,
 * when given) what it sends first. Returns the milliseconds it took, or -1
 * when fd is still open.
 */
static int64_t closed_within(int fd, int ms, char *buf, size_t buflen)
{
	int64_t t0 = now_ms();
	size_t got = 0;

	for (;;) {
		int64_t left = t0 + ms - now_ms();
		struct pollfd p = {.fd = fd, .events = POLLIN};
		char tmp[512];
		ssize_t n;

		if (left <= 0 || poll(&p, 1, (int)left) <= 0)
			return -1;
		n = recv(fd, tmp, sizeof(tmp), MSG_DONTWAIT);
		if (n == 0 || (n < 0 && errno == ECONNRESET))
			return now_ms() - t0;
		if (n > 0 && buf && got + 1 < buflen) {
			size_t k = (size_t)n < buflen - 1 - got ? (size_t)n : buflen - 1 - got;

			memcpy(buf + got, tmp, k);
			got += k;
			buf[got] = '\0';
		}
	}
}

/*
 * Sends the len bytes at buf on fd every step_ms until the peer closes it,
 * for at most limit_ms. Returns the milliseconds it took, or -1 when fd
 * is still open (or a send failed).
 */
static int64_t trickle_until_closed(int fd, const void *buf, size_t len, int step_ms,
				    int64_t limit_ms)
{
	for (int64_t t0 = now_ms(); now_ms() - t0 < limit_ms;)
		if (send(fd, buf, len, MSG_NOSIGNAL) != (ssize_t)len ||
		    closed_within(fd, step_ms, NULL, 0) >= 0)
			return now_ms() - t0;
	return -1;
}

/* POSTs an empty export on fd and returns the response's status (-1: none). */
static int post_empty(int fd)
{
	static const char req[] =
	    "POST /v1/traces HTTP/1.1\r\nHost: a\r\n"
	    "Content-Type: application/x-protobuf\r\nContent-Length: 0\r\n\r\n";
	char buf[1024];
	struct pollfd p = {.fd = fd, .events = POLLIN};
	int status = -1;
	ssize_t n;

	if (send(fd, req, sizeof(req) - 1, MSG_NOSIGNAL) != (ssize_t)sizeof(req) - 1)
		return -1;
	if (poll(&p, 1, 5000) <= 0)
		return -1;
	n = recv(fd, buf, sizeof(buf) - 1, 0);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	if (sscanf(buf, "HTTP/1.1 %d", &status) != 1)
		return -1;
	return status;
}

static void test_http_deadlines(struct otlp_receiver *r)
{
	struct otlp_http *h = otlp_http_start("127.0.0.1:0", r,
					      &(struct tp_conn_limits){.idle_timeout_ms = 1500,
								       .header_timeout_ms = 600,
								       .min_body_rate = 1000});
	int port, fd;
	int64_t t;
	struct tp_conn_stats st;

	CHECK(h != NULL, "http server");
	if (!h)
		return;
	port = otlp_http_port(h);

	/* idle: open past the header deadline, closed at the idle one */
	fd = conn_from(1, port);
	t = closed_within(fd, 5000, NULL, 0);
	CHECK(t >= 1200 && t < 4000, "an idle connection closed after %lld ms (idle 1500)",
	      (long long)t);
	close(fd);

	/* headers trickled a byte every 200 ms: closed at the header deadline, not the idle one */
	fd = conn_from(1, port);
	t = trickle_until_closed(fd, "P", 1, 200, 5000);
	CHECK(t >= 400 && t < 1400, "a slow header sender closed after %lld ms (headers 600)",
	      (long long)t);
	close(fd);

	/* a 2000-byte body at 100 bytes/s: closed at 600 ms + 2000 / 1000 s */
	fd = conn_from(1, port);
	{
		static const char head[] = "POST /v1/traces HTTP/1.1\r\nHost: a\r\nContent-Type: "
					   "application/x-protobuf\r\nContent-Length: 2000\r\n\r\n";
		static const char body[10];

		t = -1;
		if (send(fd, head, sizeof(head) - 1, MSG_NOSIGNAL) == (ssize_t)sizeof(head) - 1)
			t = trickle_until_closed(fd, body, sizeof(body), 100, 6000);
		CHECK(t >= 2200 && t < 4000, "a slow body closed after %lld ms (2600 allowed)",
		      (long long)t);
	}
	close(fd);

	/* a normal request is answered, and the connection kept for the next */
	fd = conn_from(1, port);
	CHECK(post_empty(fd) == 200, "an export answered 200");
	CHECK(post_empty(fd) == 200, "a second export on the same connection answered 200");
	close(fd);
	otlp_http_conn_stats(h, &st);
	CHECK(st.timeouts == 3, "3 deadlines counted: %llu", (unsigned long long)st.timeouts);
	otlp_http_stop(h);
}

/* Sends text on fd; whether it all went. */
static bool send_text(int fd, const char *text)
{
	return send(fd, text, strlen(text), MSG_NOSIGNAL) == (ssize_t)strlen(text);
}

/* A POST's headers with a body of 1000 bytes, and n of them, in one send. */
static bool send_body_part(int fd, size_t n)
{
	static const char head[] = "POST /v1/traces HTTP/1.1\r\nHost: a\r\n"
				   "Content-Type: application/x-protobuf\r\n"
				   "Content-Length: 1000\r\n\r\n";
	char req[sizeof(head) + 1000];

	memcpy(req, head, sizeof(head) - 1);
	memset(req + sizeof(head) - 1, 'x', n);
	return send(fd, req, sizeof(head) - 1 + n, MSG_NOSIGNAL) == (ssize_t)(sizeof(head) - 1 + n);
}

/*
 * Caps on a port of 4 with 3 per peer and a minimum body rate of 100
 * bytes/s: a newcomer replaces the worst connection of its own peer (at
 * the peer's cap, or when the peer is among the heaviest) or of the
 * heaviest peer (when its own is light): slow heads and bodies first, then
 * connections that never completed a request, then kept-alive ones; never
 * a body arriving at the minimum rate. Each eviction counted by reason.
 */
static void test_http_caps(struct otlp_receiver *r)
{
	struct otlp_http *h = otlp_http_start(
	    "127.0.0.1:0", r,
	    &(struct tp_conn_limits){.max_conns = 4, .max_per_peer = 3, .min_body_rate = 100});
	int port, served, idle[2], extra, newcomer, fd, extra3, n2, n3, n4;
	char buf[256] = "";
	struct tp_conn_stats st;

	CHECK(h != NULL, "http server");
	if (!h)
		return;
	port = otlp_http_port(h);

	/* 127.0.0.2: one served connection, then two idle ones; a fourth replaces an idle one */
	served = conn_from(2, port);
	CHECK(post_empty(served) == 200, "the served connection's export");
	idle[0] = conn_from(2, port);
	usleep(20000); /* the oldest of a class goes first */
	idle[1] = conn_from(2, port);
	usleep(20000);
	extra = conn_from(2, port);
	CHECK(post_empty(extra) == 200, "a fourth connection from one peer served");
	CHECK(closed_within(idle[0], 1000, NULL, 0) >= 0,
	      "the peer's oldest connection without a request evicted");
	CHECK(post_empty(served) == 200, "the connection that had served a request kept");
	/* 127.0.0.3 takes the last slot; then 127.0.0.1 comes to a full port */
	fd = conn_from(3, port);
	CHECK(post_empty(fd) == 200, "127.0.0.3 served");
	newcomer = conn_from(1, port);
	CHECK(post_empty(newcomer) == 200, "the newcomer to a full port is served");
	/* the evicted one: 127.0.0.2's (3 > 2 x 0), the idle one, never a served one */
	CHECK(closed_within(idle[1], 1000, NULL, 0) >= 0,
	      "the heaviest peer's connection without a request evicted");
	CHECK(post_empty(served) == 200 && post_empty(extra) == 200,
	      "the connections that had served a request kept");
	CHECK(post_empty(fd) == 200, "the lighter peer's connection kept");
	otlp_http_conn_stats(h, &st);
	CHECK(st.refused_peer == 0 && st.evicted == 2 && st.evicted_idle == 2 &&
		  st.refused_full == 0,
	      "counted: refused_peer %llu evicted %llu idle %llu refused_full %llu",
	      (unsigned long long)st.refused_peer, (unsigned long long)st.evicted,
	      (unsigned long long)st.evicted_idle, (unsigned long long)st.refused_full);
	/* 127.0.0.3 (1 connection) to the full port: not light, so it replaces its own */
	extra3 = conn_from(3, port);
	CHECK(post_empty(extra3) == 200, "127.0.0.3's second connection served");
	CHECK(closed_within(fd, 1000, NULL, 0) >= 0, "in place of its first (kept alive)");
	/* a slow head goes before kept-alive connections */
	CHECK(send_text(served, "POST /v1/tr"), "a partial head");
	usleep(20000);
	n2 = conn_from(2, port);
	usleep(20000);
	CHECK(closed_within(served, 1000, NULL, 0) >= 0, "the slow head evicted");
	CHECK(post_empty(extra) == 200, "the kept-alive connection kept");
	/* a body below 100 bytes/s goes before kept-alive connections */
	CHECK(send_body_part(n2, 1), "a slow body");
	usleep(300000); /* judged after 200 ms */
	n3 = conn_from(2, port);
	CHECK(closed_within(n2, 1000, NULL, 0) >= 0, "the slow body evicted");
	CHECK(post_empty(extra) == 200, "the kept-alive connection kept again");
	otlp_http_conn_stats(h, &st);
	CHECK(st.evicted == 5 && st.evicted_idle == 3 && st.evicted_slow_head == 1 &&
		  st.evicted_slow_body == 1,
	      "by reason: evicted %llu idle %llu slow_head %llu slow_body %llu",
	      (unsigned long long)st.evicted, (unsigned long long)st.evicted_idle,
	      (unsigned long long)st.evicted_slow_head, (unsigned long long)st.evicted_slow_body);
	/* bodies arriving at the minimum rate are never evicted: the newcomer is refused */
	CHECK(send_body_part(extra, 500) && send_body_part(n3, 500), "bodies on pace");
	usleep(20000);
	n4 = conn_from(2, port);
	buf[0] = '\0';
	CHECK(closed_within(n4, 3000, buf, sizeof(buf)) >= 0 && strstr(buf, " 503 "),
	      "nothing to evict: refused with 503: \"%.40s\"", buf);
	otlp_http_conn_stats(h, &st);
	CHECK(st.refused_full == 1 && st.evicted == 5, "refused_full %llu evicted %llu",
	      (unsigned long long)st.refused_full, (unsigned long long)st.evicted);
	close(n4);
	close(n3);
	close(n2);
	close(extra3);
	close(served);
	close(idle[0]);
	close(idle[1]);
	close(extra);
	close(fd);
	close(newcomer);
	otlp_http_stop(h);
}

/* Large bodies declared and not sent: at most 4 x max_bytes of them; small ones still served. */
static void test_http_bodies(void)
{
	struct otlp_receiver *r = otlp_receiver_new(
	    &(struct otlp_receiver_opts){.submit = accept_all, .max_bytes = 1 << 20});
	struct otlp_http *h = r ? otlp_http_start("127.0.0.1:0", r, NULL) : NULL;
	static const char head[] = "POST /v1/traces HTTP/1.1\r\nHost: a\r\nContent-Type: "
				   "application/x-protobuf\r\nContent-Length: 1000000\r\n\r\n";
	int fds[4], extra, small, port;
	char buf[512] = "";
	struct tp_conn_stats st;

	CHECK(h != NULL, "http server with 1 MiB exports");
	if (!h) {
		otlp_receiver_free(r);
		return;
	}
	port = otlp_http_port(h);
	for (int i = 0; i < 4; i++) { /* 4 x 1,000,000 bytes: within 4 MiB */
		fds[i] = conn_from(10 + i, port);
		CHECK(send(fds[i], head, sizeof(head) - 1, MSG_NOSIGNAL) == sizeof(head) - 1,
		      "large body %d declared", i);
	}
	usleep(200000);
	extra = conn_from(20, port);
	CHECK(send(extra, head, sizeof(head) - 1, MSG_NOSIGNAL) == sizeof(head) - 1,
	      "a fifth declared");
	CHECK(closed_within(extra, 3000, buf, sizeof(buf)) >= 0 && strstr(buf, " 503 ") &&
		  strstr(buf, "Retry-After"),
	      "the fifth large body refused with 503 and Retry-After: \"%.60s\"", buf);
	close(extra);
	small = conn_from(21, port);
	CHECK(post_empty(small) == 200, "a small export still served");
	close(small);
	for (int i = 0; i < 4; i++)
		CHECK(closed_within(fds[i], 100, NULL, 0) < 0, "large body %d still being read", i);
	otlp_http_conn_stats(h, &st);
	CHECK(st.bodies_refused == 1, "bodies_refused %llu", (unsigned long long)st.bodies_refused);
	for (int i = 0; i < 4; i++)
		close(fds[i]);
	otlp_http_stop(h);
	otlp_receiver_free(r);
}

static void echo(void *ctx, const struct rpc_request *req, struct rpc_reply *rep)
{
	(void)ctx;
	(void)req;
	rep->code = GRPC_STATUS_OK;
}

/* Whether the gRPC server took fd: it sends its SETTINGS frame and keeps the connection. */
static bool grpc_took(int fd)
{
	char buf[64];
	struct pollfd p = {.fd = fd, .events = POLLIN};

	return poll(&p, 1, 3000) > 0 && recv(fd, buf, sizeof(buf), MSG_DONTWAIT) > 0;
}

/* HTTP/2's client preface and an empty SETTINGS frame: a gRPC client's first bytes. */
static bool send_preface(int fd)
{
	static const char p[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0";

	return send(fd, p, sizeof(p) - 1, MSG_NOSIGNAL) == (ssize_t)sizeof(p) - 1;
}

/*
 * A gRPC server with its own acceptor, 6 connections with 4 per peer: a
 * newcomer at its peer's cap replaces that peer's connection that never
 * sent a byte, else its slowest, never one that just sent data the server
 * has not answered (a call in flight); a light peer replaces one of the
 * heaviest peer's at the port's cap. Each eviction counted by reason.
 */
static void test_grpc_caps(void)
{
	static const char *const methods[] = {"/t.T/M"};
	struct rpc_server *s = rpc_server_start(&(struct rpc_server_opts){
	    .addr = "127.0.0.1:0",
	    .creds = grpc_insecure_server_credentials_create(),
	    .methods = methods,
	    .nmethods = 1,
	    .max_receive_bytes = 1 << 16,
	    .handler = echo,
	    .name = "test",
	    .start_on_connect = true,
	    .limits = &(struct tp_conn_limits){.max_conns = 6, .max_per_peer = 4},
	});
	int port, a[4], b[2], c, extra, extra2;
	struct tp_conn_stats st;
	int64_t t;

	CHECK(s != NULL, "grpc server");
	if (!s)
		return;
	port = rpc_server_port(s);
	for (int i = 0; i < 4; i++) {
		a[i] = conn_from(2, port);
		CHECK(grpc_took(a[i]), "127.0.0.2 connection %d taken", i);
		if (i < 3)
			CHECK(send_preface(a[i]), "127.0.0.2 connection %d speaks", i);
	}
	usleep(50000);
	extra = conn_from(2, port);
	CHECK(grpc_took(extra), "a fifth from 127.0.0.2 taken");
	CHECK(closed_within(a[3], 2000, NULL, 0) >= 0, "in place of the one that never spoke");
	for (int i = 0; i < 3; i++)
		CHECK(closed_within(a[i], 100, NULL, 0) < 0, "connection %d kept", i);
	rpc_server_conn_stats(s, &st);
	CHECK(st.evicted == 1 && st.evicted_idle == 1 && st.refused_peer == 0 && st.accepted == 5,
	      "evicted %llu idle %llu refused_peer %llu accepted %llu",
	      (unsigned long long)st.evicted, (unsigned long long)st.evicted_idle,
	      (unsigned long long)st.refused_peer, (unsigned long long)st.accepted);
	/* every connection of the peer awaits an answer (a frame begun): the newcomer is refused */
	CHECK(send_preface(extra), "the fifth speaks");
	usleep(50000);
	for (int i = 0; i < 3; i++)
		CHECK(send(a[i], "\0", 1, MSG_NOSIGNAL) == 1, "a frame begun on %d", i);
	CHECK(send(extra, "\0", 1, MSG_NOSIGNAL) == 1, "a frame begun on the fifth");
	usleep(50000);
	extra2 = conn_from(2, port);
	CHECK(closed_within(extra2, 2000, NULL, 0) >= 0, "a sixth from 127.0.0.2 refused");
	close(extra2);
	rpc_server_conn_stats(s, &st);
	CHECK(st.refused_peer == 1 && st.evicted == 1, "refused_peer %llu evicted %llu",
	      (unsigned long long)st.refused_peer, (unsigned long long)st.evicted);

	/* the peer's connections end: the acceptor notices, and the peer may connect again */
	for (int i = 0; i < 3; i++)
		close(a[i]);
	close(a[3]);
	close(extra);
	usleep(300000);
	for (int i = 0; i < 4; i++) {
		a[i] = conn_from(2, port);
		CHECK(grpc_took(a[i]), "127.0.0.2 reconnection %d taken", i);
	}
	b[0] = conn_from(3, port);
	b[1] = conn_from(3, port);
	CHECK(grpc_took(b[0]) && grpc_took(b[1]), "127.0.0.3 fills the port");
	CHECK(send_preface(b[1]), "127.0.0.3's second speaks");
	usleep(50000);

	/* full: 127.0.0.3 (2, not less than half of 4) replaces its own silent one */
	extra = conn_from(3, port);
	CHECK(grpc_took(extra), "127.0.0.3 taken into the full port");
	CHECK(closed_within(b[0], 2000, NULL, 0) >= 0, "in place of its own silent connection");
	CHECK(closed_within(b[1], 100, NULL, 0) < 0, "its other kept");
	/* 127.0.0.1 (0) replaces one of 127.0.0.2's (4) */
	c = conn_from(1, port);
	CHECK(grpc_took(c), "127.0.0.1 taken into the full port");
	rpc_server_conn_stats(s, &st);
	CHECK(st.evicted == 3 && st.evicted_idle == 3 && st.refused_full == 0,
	      "evicted %llu idle %llu refused_full %llu", (unsigned long long)st.evicted,
	      (unsigned long long)st.evicted_idle, (unsigned long long)st.refused_full);
	close(extra);
	close(b[0]);
	close(b[1]);

	close(c);
	for (int i = 0; i < 4; i++)
		close(a[i]);
	rpc_server_stop(s);

	/* nothing sent at all: gRPC's max_connection_idle closes it */
	s = rpc_server_start(&(struct rpc_server_opts){
	    .addr = "127.0.0.1:0",
	    .creds = grpc_insecure_server_credentials_create(),
	    .methods = methods,
	    .nmethods = 1,
	    .max_receive_bytes = 1 << 16,
	    .handler = echo,
	    .name = "test",
	    .start_on_connect = true,
	    .limits = &(struct tp_conn_limits){.idle_timeout_ms = 1000},
	});
	CHECK(s != NULL, "grpc server with a 1 s idle timeout");
	if (!s)
		return;
	c = conn_from(1, rpc_server_port(s));
	t = closed_within(c, 8000, NULL, 0);
	CHECK(t >= 500 && t < 6000, "a silent connection closed by the idle timeout after %lld ms",
	      (long long)t);
	close(c);
	rpc_server_stop(s);
}

int main(void)
{
	struct otlp_receiver *r =
	    otlp_receiver_new(&(struct otlp_receiver_opts){.submit = accept_all});

	CHECK(r != NULL, "receiver");
	if (!r)
		return check_done();
	test_http_deadlines(r);
	test_http_caps(r);
	test_http_bodies();
	test_grpc_caps();
	otlp_receiver_free(r);
	return check_done();
}
