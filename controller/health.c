/*
 * health.c - see health.h.
 *
 * Workload: a kubelet probing twice every few seconds, a person with curl.
 * One thread polls the listening socket and a stop pipe; a connection is
 * served to the end before the next one is accepted: read the request
 * head into a fixed buffer (at most REQUEST_MAX bytes, REQUEST_TIMEOUT_MS
 * in all), answer, close. Nothing is allocated per request, and a slow or
 * silent client holds the thread for the timeout at most.
 *
 *   GET|HEAD /healthz  200 "ok", or 503 and the reason
 *   GET|HEAD /readyz   the same with the readiness probe
 *   another path       404
 *   another method     405
 *   anything else      400 (request line not HTTP/1.x, head too large)
 */
#include "health.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "traceprof/listen.h"
#include "traceprof/log.h"

#define REQUEST_MAX	   2048 /* bytes of a request head */
#define REQUEST_TIMEOUT_MS 2000 /* to receive the head */

struct health {
	struct health_probes p; /* the callbacks */
	int fd;			/* listening socket */
	int stop[2];		/* pipe: a byte asks the thread to stop */
	int port;		/* bound port */
	pthread_t thread;	/* the server */
};

static void send_all(int fd, const char *buf, size_t len)
{
	while (len) {
		ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return; /* the client went away: nothing to tell it */
		buf += n;
		len -= (size_t)n;
	}
}

static void respond(int fd, int code, const char *text, const char *body, bool head)
{
	char out[REQUEST_MAX];
	int n = snprintf(out, sizeof(out),
			 "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\n"
			 "Content-Length: %zu\r\nCache-Control: no-store\r\nConnection: close\r\n"
			 "%s\r\n%s",
			 code, text, strlen(body) + 1, code == 405 ? "Allow: GET, HEAD\r\n" : "",
			 head ? "" : body);

	if (n < 0 || (size_t)n >= sizeof(out) - 1)
		return;
	if (!head)
		out[n++] = '\n';
	send_all(fd, out, (size_t)n);
}

/* Reads the request head into buf; its length, or -1 (timeout, too large, closed). */
static ssize_t read_head(int fd, char *buf, size_t cap)
{
	size_t len = 0;
	int waited = 0;

	while (len < cap - 1) {
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		ssize_t n;

		if (waited >= REQUEST_TIMEOUT_MS || poll(&pfd, 1, 100) < 0)
			return -1;
		if (!(pfd.revents & (POLLIN | POLLHUP | POLLERR))) {
			waited += 100;
			continue;
		}
		n = recv(fd, buf + len, cap - 1 - len, 0);
		if (n <= 0)
			return -1;
		len += (size_t)n;
		buf[len] = '\0';
		if (strstr(buf, "\r\n\r\n") || strstr(buf, "\n\n"))
			return (ssize_t)len;
	}
	return -1;
}

static void serve(struct health *h, int fd)
{
	char buf[REQUEST_MAX], why[HEALTH_REASON_MAX] = "", *sp1, *sp2, *eol, *q;
	health_probe_fn probe = NULL;
	bool head;

	if (read_head(fd, buf, sizeof(buf)) < 0) {
		respond(fd, 400, "Bad Request", "bad request: no complete request head", false);
		return;
	}
	eol = strpbrk(buf, "\r\n");
	*eol = '\0';
	sp1 = strchr(buf, ' ');
	sp2 = sp1 ? strchr(sp1 + 1, ' ') : NULL;
	if (!sp1 || !sp2 || sp2 == sp1 + 1 || sp1[1] != '/' || strchr(sp2 + 1, ' ') ||
	    strncmp(sp2 + 1, "HTTP/1.", 7) != 0 || !sp2[8] || sp2[9]) {
		respond(fd, 400, "Bad Request", "bad request: not an HTTP/1.x request line", false);
		return;
	}
	*sp1 = *sp2 = '\0';
	if ((q = strchr(sp1 + 1, '?')))
		*q = '\0';
	head = strcmp(buf, "HEAD") == 0;
	if (!head && strcmp(buf, "GET") != 0) {
		respond(fd, 405, "Method Not Allowed", "method not allowed: GET or HEAD", false);
		return;
	}
	if (strcmp(sp1 + 1, "/healthz") == 0)
		probe = h->p.live;
	else if (strcmp(sp1 + 1, "/readyz") == 0)
		probe = h->p.ready;
	if (!probe)
		respond(fd, 404, "Not Found", "not found: /healthz or /readyz", head);
	else if (probe(h->p.arg, why, sizeof(why)))
		respond(fd, 200, "OK", "ok", head);
	else
		respond(fd, 503, "Service Unavailable", why, head);
}

static void *run(void *arg)
{
	struct health *h = arg;

	for (;;) {
		struct pollfd pfd[2] = {{.fd = h->fd, .events = POLLIN},
					{.fd = h->stop[0], .events = POLLIN}};
		int c;

		if (poll(pfd, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			log_error("health: poll: %s", strerror(errno));
			return NULL;
		}
		if (pfd[1].revents)
			return NULL;
		if (!(pfd[0].revents & POLLIN))
			continue;
		c = accept4(h->fd, NULL, NULL, SOCK_CLOEXEC);
		if (c < 0)
			continue; /* the client gave up, or out of descriptors for now */
		serve(h, c);
		close(c);
	}
}

struct health *health_start(const char *addr, const struct health_probes *p, char *err,
			    size_t errlen)
{
	struct health *h = calloc(1, sizeof(*h));
	char msg[512];

	if (!h) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	h->p = *p;
	h->stop[0] = h->stop[1] = -1;
	h->fd = tp_listen_tcp(addr, 0, 0, 16, &h->port, msg, sizeof(msg));
	if (h->fd < 0) {
		snprintf(err, errlen, "--health-addr %s", msg);
		goto out_free;
	}
	if (pipe2(h->stop, O_CLOEXEC)) {
		snprintf(err, errlen, "pipe: %s", strerror(errno));
		goto out_close;
	}
	if (pthread_create(&h->thread, NULL, run, h)) {
		snprintf(err, errlen, "cannot start the health thread");
		goto out_pipe;
	}
	log_info("health endpoint listening on %s (port %d)", addr, h->port);
	return h;
out_pipe:
	close(h->stop[0]);
	close(h->stop[1]);
out_close:
	close(h->fd);
out_free:
	free(h);
	return NULL;
}

int health_port(const struct health *h)
{
	return h->port;
}

void health_stop(struct health *h)
{
	if (!h)
		return;
	if (write(h->stop[1], "x", 1) != 1)
		log_warn("health: cannot stop the thread: %s", strerror(errno));
	else
		pthread_join(h->thread, NULL);
	close(h->stop[0]);
	close(h->stop[1]);
	close(h->fd);
	free(h);
}
