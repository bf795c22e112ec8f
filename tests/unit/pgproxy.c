/*
 * pgproxy.c - see pgproxy.h. Test code: one relay thread, blocking I/O with
 * poll(), client messages buffered until complete so COMMIT can be spotted;
 * server bytes are relayed as they come (parsed only while waiting for the
 * ReadyForQuery that follows a COMMIT whose reply is to be lost).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <libpq-fe.h>

#include "pgproxy.h"

#define PROTO_SSL_REQUEST 80877103 /* untyped requests that precede the startup message */
#define PROTO_GSS_REQUEST 80877104

struct pgproxy {
	char dir[64];		   /* directory holding the proxy's socket */
	struct sockaddr_un addr;   /* the proxy's socket */
	struct sockaddr_un target; /* the server's socket */
	int listen_fd;		   /* accepting connections */
	atomic_int mode;	   /* enum pgproxy_mode for the next COMMIT */
	atomic_int stop;	   /* set by pgproxy_stop() */
	pthread_t thread;	   /* runs relay_loop() */
};

struct msgbuf {
	char *data; /* bytes received, not yet forwarded; owned */
	size_t len; /* bytes in data */
	size_t cap; /* bytes allocated */
};

static int write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static uint32_t be32_at(const char *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return ntohl(v);
}

static int append(struct msgbuf *b, const char *p, size_t n)
{
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap : 65536;
		char *d;

		while (cap < b->len + n)
			cap *= 2;
		d = realloc(b->data, cap);
		if (!d)
			return -1;
		b->data = d;
		b->cap = cap;
	}
	memcpy(b->data + b->len, p, n);
	b->len += n;
	return 0;
}

/* Reads server messages until ReadyForQuery ('Z'); nothing is forwarded. */
static void wait_ready(int s)
{
	struct msgbuf b = {0};
	char tmp[8192];

	for (;;) {
		ssize_t n = read(s, tmp, sizeof(tmp));
		size_t off = 0;

		if (n <= 0 || append(&b, tmp, (size_t)n))
			break;
		while (b.len - off >= 5 && b.len - off >= 1 + be32_at(b.data + off + 1)) {
			if (b.data[off] == 'Z')
				goto out;
			off += 1 + be32_at(b.data + off + 1);
		}
		memmove(b.data, b.data + off, b.len - off);
		b.len -= off;
	}
out:
	free(b.data);
}

/*
 * Forwards the complete client messages in b. Returns 1 to cut the
 * connection now, 0 to go on, -1 on error.
 */
static int forward_client(struct pgproxy *p, struct msgbuf *b, int s, int *started)
{
	size_t off = 0;
	int ret = 0;

	for (;;) {
		size_t avail = b->len - off;
		const char *m = b->data + off;
		size_t size;

		if (!*started) {
			if (avail < 8 || avail < be32_at(m))
				break;
			size = be32_at(m);
			if (be32_at(m + 4) != PROTO_SSL_REQUEST &&
			    be32_at(m + 4) != PROTO_GSS_REQUEST)
				*started = 1;
		} else {
			if (avail < 5 || avail < 1 + (size_t)be32_at(m + 1))
				break;
			size = 1 + be32_at(m + 1);
			if (m[0] == 'Q' && size >= 11 && strncmp(m + 5, "COMMIT", 6) == 0) {
				int mode = atomic_exchange(&p->mode, PGPROXY_PASS);

				if (mode == PGPROXY_DROP_COMMIT) {
					ret = 1;
					break;
				}
				if (mode == PGPROXY_LOSE_COMMIT_REPLY) {
					if (write_all(s, m, size) == 0)
						wait_ready(s);
					ret = 1;
					break;
				}
			}
		}
		if (write_all(s, m, size))
			return -1;
		off += size;
	}
	memmove(b->data, b->data + off, b->len - off);
	b->len -= off;
	return ret;
}

static void relay(struct pgproxy *p, int c, int s)
{
	struct msgbuf b = {0};
	int started = 0;

	while (!atomic_load(&p->stop)) {
		struct pollfd fds[2] = {{.fd = c, .events = POLLIN}, {.fd = s, .events = POLLIN}};
		char tmp[65536];
		ssize_t n;

		if (poll(fds, 2, 100) <= 0)
			continue;
		if (fds[1].revents) {
			n = read(s, tmp, sizeof(tmp));
			if (n <= 0 || write_all(c, tmp, (size_t)n))
				break;
		}
		if (fds[0].revents) {
			n = read(c, tmp, sizeof(tmp));
			if (n <= 0 || append(&b, tmp, (size_t)n) ||
			    forward_client(p, &b, s, &started))
				break;
		}
	}
	free(b.data);
}

static void *relay_loop(void *arg)
{
	struct pgproxy *p = arg;

	while (!atomic_load(&p->stop)) {
		struct pollfd pfd = {.fd = p->listen_fd, .events = POLLIN};
		int c, s;

		if (poll(&pfd, 1, 100) <= 0)
			continue;
		c = accept(p->listen_fd, NULL, NULL);
		if (c < 0)
			continue;
		s = socket(AF_UNIX, SOCK_STREAM, 0);
		if (s >= 0 && connect(s, (struct sockaddr *)&p->target, sizeof(p->target)) == 0)
			relay(p, c, s);
		if (s >= 0)
			close(s);
		close(c);
	}
	return NULL;
}

struct pgproxy *pgproxy_start(const char *server, char *out, size_t len)
{
	struct pgproxy *p = calloc(1, sizeof(*p));
	size_t max = sizeof(p->addr.sun_path);
	PQconninfoOption *opts = PQconninfoParse(server, NULL);
	const char *host = NULL, *port = "5432", *db = "", *user = "", *passfile = NULL;

	for (PQconninfoOption *o = opts; o && o->keyword; o++) {
		if (!o->val)
			continue;
		if (!strcmp(o->keyword, "host"))
			host = o->val;
		else if (!strcmp(o->keyword, "port"))
			port = o->val;
		else if (!strcmp(o->keyword, "dbname"))
			db = o->val;
		else if (!strcmp(o->keyword, "user"))
			user = o->val;
		else if (!strcmp(o->keyword, "passfile"))
			passfile = o->val;
	}
	if (!p || !host || host[0] != '/') {
		fprintf(stderr, "pgproxy: needs a Unix socket directory as host\n");
		goto fail;
	}
	p->target.sun_family = AF_UNIX;
	p->addr.sun_family = AF_UNIX;
	snprintf(p->dir, sizeof(p->dir), "/tmp/tp-proxy-XXXXXX");
	if ((size_t)snprintf(p->target.sun_path, max, "%s/.s.PGSQL.%s", host, port) >= max ||
	    !mkdtemp(p->dir) ||
	    (size_t)snprintf(p->addr.sun_path, max, "%s/.s.PGSQL.%s", p->dir, port) >= max) {
		fprintf(stderr, "pgproxy: socket path too long or no temp dir\n");
		goto fail;
	}
	p->listen_fd = socket(AF_UNIX, SOCK_STREAM, 0);
	if (p->listen_fd < 0 || bind(p->listen_fd, (struct sockaddr *)&p->addr, sizeof(p->addr)) ||
	    listen(p->listen_fd, 4)) {
		perror("pgproxy: listen");
		goto fail;
	}
	if (pthread_create(&p->thread, NULL, relay_loop, p))
		goto fail;
	snprintf(out, len, "host=%s port=%s dbname=%s user=%s%s%s", p->dir, port, db, user,
		 passfile ? " passfile=" : "", passfile ? passfile : "");
	PQconninfoFree(opts);
	return p;
fail:
	PQconninfoFree(opts);
	if (p && p->listen_fd > 0)
		close(p->listen_fd);
	free(p);
	return NULL;
}

void pgproxy_set_mode(struct pgproxy *p, enum pgproxy_mode mode)
{
	atomic_store(&p->mode, mode);
}

void pgproxy_stop(struct pgproxy *p)
{
	if (!p)
		return;
	atomic_store(&p->stop, 1);
	pthread_join(p->thread, NULL);
	close(p->listen_fd);
	unlink(p->addr.sun_path);
	rmdir(p->dir);
	free(p);
}
