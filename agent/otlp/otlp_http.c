/*
 * otlp_http.c - see otlp_http.h.
 *
 * Workload: a few SDK exporters per node, each POSTing a batch every few
 * seconds over a kept-alive connection. One thread polls the listening
 * socket, a wake-up pipe and the connections. A connection reads its
 * headers into a fixed buffer, decides at once when the request cannot be
 * served (wrong path, method, type, no or too large length: answered
 * without reading the body, then closed), else reads exactly
 * Content-Length bytes into a body buffer, exports, and writes the
 * response; bytes after the body (a pipelined request) stay in the header
 * buffer for the next round. A gzip body is inflated by the receiver with
 * a running limit of max_bytes. Every answer given from the request line
 * or headers is counted in the receiver's stats (enum otlp_refusal).
 *
 * Every connection has one deadline for its current phase (waiting for a
 * request, its headers, its body, the response: see otlp_http.h), checked
 * each pass; connection limits are checked at accept.
 */
#include "otlp_http.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "traceprof/listen.h"
#include "traceprof/log.h"

/* gRPC status codes for the google.rpc.Status bodies */
#define RPC_INVALID_ARGUMENT   3
#define RPC_NOT_FOUND	       5
#define RPC_RESOURCE_EXHAUSTED 8
#define RPC_UNIMPLEMENTED      12
#define RPC_UNAVAILABLE	       14

enum conn_state {
	READ_HEAD, /* reading headers */
	READ_BODY, /* reading Content-Length bytes */
	WRITE,	   /* writing the response */
};

struct conn {
	int fd;				 /* socket, -1 when the slot is free */
	enum conn_state state;		 /* what it waits for */
	char head[OTLP_HTTP_MAX_HEADER]; /* header bytes (and what follows them) */
	size_t head_len;		 /* bytes in head */
	uint8_t *body;			 /* body buffer, content_length bytes */
	size_t content_length;		 /* of the current request */
	size_t body_len;		 /* body bytes read */
	char *out;			 /* response being written */
	size_t out_len;			 /* its length */
	size_t out_pos;			 /* bytes written */
	bool close_after;		 /* close once the response is written */
	bool keep_alive;		 /* the request allows another one */
	bool gzip;			 /* the body is Content-Encoding: gzip */
	int64_t deadline_ms;		 /* CLOCK_MONOTONIC limit of the current phase */
	struct tp_peer peer;		 /* the peer's address */
	int64_t since_ms;		 /* when it began waiting for its current request */
	int64_t head_ms;		 /* first byte of the current request's head */
	int64_t body_ms;		 /* when the current body began to be read */
	uint64_t served;		 /* requests answered on it */
};

struct otlp_http {
	struct otlp_receiver *r;	 /* where exports go (borrowed) */
	int lfd;			 /* listening socket */
	int wake[2];			 /* pipe: stop request */
	int port;			 /* bound port */
	struct tp_conn_limits lim;	 /* caps and deadlines (resolved) */
	pthread_t thread;		 /* the serving thread */
	struct conn *conns;		 /* lim.max_conns slots */
	struct pollfd *pfd;		 /* lim.max_conns + 2: poll() set */
	int *idx;			 /* lim.max_conns + 2: slot of each pfd entry */
	struct tp_peer *peers;		 /* lim.max_conns: peers of the open slots (eviction) */
	struct tp_peer *scratch;	 /* lim.max_conns: tp_peer_counts' sort space */
	int *counts;			 /* lim.max_conns: each one's peer's connections */
	int *slot_of;			 /* lim.max_conns: slot of peers[i] */
	_Atomic uint64_t timeouts;	 /* connections closed at a deadline */
	_Atomic uint64_t refused;	 /* connections refused when full */
	_Atomic uint64_t refused_peer;	 /* refused: the peer was at its cap */
	_Atomic uint64_t accepted;	 /* connections admitted */
	_Atomic uint64_t evicted;	 /* closed to admit another connection */
	_Atomic uint64_t evicted_idle;	 /* of those: waiting for a request */
	_Atomic uint64_t evicted_head;	 /* of those: a request head arriving slowly */
	_Atomic uint64_t evicted_body;	 /* of those: a body below min_body_rate */
	_Atomic uint64_t open;		 /* open now */
	_Atomic uint64_t bodies_refused; /* 503: large bodies in flight over their budget */
};

static int64_t now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static void conn_close(struct conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	free(c->body);
	free(c->out);
	c->fd = -1;
	c->body = NULL;
	c->out = NULL;
}

static const char *reason_of(int status)
{
	switch (status) {
	case 200:
		return "OK";
	case 400:
		return "Bad Request";
	case 404:
		return "Not Found";
	case 405:
		return "Method Not Allowed";
	case 411:
		return "Length Required";
	case 413:
		return "Payload Too Large";
	case 415:
		return "Unsupported Media Type";
	case 431:
		return "Request Header Fields Too Large";
	case 503:
		return "Service Unavailable";
	}
	return "Error";
}

/* Queues a response; body may be NULL. Returns 0 or -ENOMEM (the connection closes). */
static int respond(struct conn *c, int status, const void *body, size_t len, const char *extra)
{
	char head[512];
	int n;

	n = snprintf(head, sizeof(head),
		     "HTTP/1.1 %d %s\r\nContent-Type: application/x-protobuf\r\n"
		     "Content-Length: %zu\r\n%s%s\r\n",
		     status, reason_of(status), len, extra ? extra : "",
		     c->close_after || !c->keep_alive ? "Connection: close\r\n" : "");
	free(c->out);
	c->out = malloc((size_t)n + len);
	if (!c->out)
		return -ENOMEM;
	memcpy(c->out, head, (size_t)n);
	if (len)
		memcpy(c->out + n, body, len);
	c->out_len = (size_t)n + len;
	c->out_pos = 0;
	c->state = WRITE;
	if (!c->keep_alive)
		c->close_after = true;
	return 0;
}

static int respond_error(struct conn *c, int status, int rpc_code, const char *msg,
			 const char *extra)
{
	uint8_t body[600];
	size_t len = otlp_pack_rpc_status(rpc_code, msg, body, sizeof(body));

	return respond(c, status, body, len, extra);
}

/* respond_error() for a request refused from its request line or headers, counted. */
static int refuse(struct otlp_http *h, struct conn *c, int status, int rpc_code, const char *msg,
		  const char *extra)
{
	static const struct {
		int status;	       /* HTTP status */
		enum otlp_refusal why; /* its counter */
	} counters[] = {{400, OTLP_REFUSE_HTTP_400}, {404, OTLP_REFUSE_HTTP_404},
			{405, OTLP_REFUSE_HTTP_405}, {411, OTLP_REFUSE_HTTP_411},
			{413, OTLP_REFUSE_HTTP_413}, {415, OTLP_REFUSE_HTTP_415},
			{431, OTLP_REFUSE_HTTP_431}};

	/* counted before the client can see the answer */
	for (size_t i = 0; i < sizeof(counters) / sizeof(counters[0]); i++)
		if (counters[i].status == status)
			otlp_receiver_count_refusal(h->r, counters[i].why);
	return respond_error(c, status, rpc_code, msg, extra);
}

/* The value of header name in the header block, copied into out; false when absent. */
static bool header(const char *head, const char *name, char *out, size_t outlen)
{
	size_t nlen = strlen(name);

	for (const char *p = strstr(head, "\r\n"); p && p[2] != '\r'; p = strstr(p + 2, "\r\n")) {
		const char *line = p + 2, *end = strstr(line, "\r\n"), *v;
		size_t vlen;

		if (!end)
			break;
		if ((size_t)(end - line) <= nlen || line[nlen] != ':' ||
		    strncasecmp(line, name, nlen) != 0)
			continue;
		v = line + nlen + 1;
		while (v < end && (*v == ' ' || *v == '\t'))
			v++;
		vlen = (size_t)(end - v);
		while (vlen && (v[vlen - 1] == ' ' || v[vlen - 1] == '\t'))
			vlen--;
		if (vlen >= outlen)
			vlen = outlen - 1;
		memcpy(out, v, vlen);
		out[vlen] = '\0';
		return true;
	}
	return false;
}

/* Bytes of the bodies over OTLP_HTTP_SMALL_BODY being read now. */
static size_t big_bodies(const struct otlp_http *h)
{
	size_t sum = 0;

	for (int i = 0; i < h->lim.max_conns; i++) {
		const struct conn *c = &h->conns[i];

		if (c->fd >= 0 && c->state == READ_BODY && c->content_length > OTLP_HTTP_SMALL_BODY)
			sum += c->content_length;
	}
	return sum;
}

/* Headers complete at head[0..end): decide, and start reading the body or answer. */
static int start_request(struct otlp_http *h, struct conn *c, size_t end)
{
	char method[16], path[256], version[16], val[256];
	char *hdrs = c->head;
	size_t max = otlp_receiver_max_bytes(h->r), extra;
	unsigned long long len;
	char *e;

	hdrs[end - 2] = '\0'; /* keep one CRLF to end the last header line */
	if (sscanf(hdrs, "%15s %255s %15s", method, path, version) != 3 ||
	    strncmp(version, "HTTP/1.", 7) != 0) {
		c->keep_alive = false;
		return refuse(h, c, 400, RPC_INVALID_ARGUMENT, "malformed HTTP request line", NULL);
	}
	c->keep_alive = strcmp(version, "HTTP/1.0") != 0;
	if (header(hdrs, "Connection", val, sizeof(val)))
		c->keep_alive = strcasecmp(val, "close") != 0 &&
				(c->keep_alive || strcasecmp(val, "keep-alive") == 0);
	/* An unread body leaves the stream unusable: every early answer closes. */
	c->close_after = true;
	{
		char *q = strchr(path, '?');

		if (q)
			*q = '\0';
	}
	if (strcmp(path, OTLP_HTTP_PATH) != 0)
		return refuse(h, c, 404, RPC_NOT_FOUND, "not found: traces go to POST /v1/traces",
			      NULL);
	if (strcmp(method, "POST") != 0)
		return refuse(h, c, 405, RPC_UNIMPLEMENTED, "method not allowed: use POST",
			      "Allow: POST\r\n");
	if (!header(hdrs, "Content-Type", val, sizeof(val)) ||
	    strncasecmp(val, "application/x-protobuf", 22) != 0 ||
	    (val[22] && val[22] != ';' && val[22] != ' ')) {
		bool json = strstr(val, "json") != NULL;

		return refuse(h, c, 415, RPC_INVALID_ARGUMENT,
			      json ? "JSON is not supported: send application/x-protobuf"
				   : "unsupported content type: send application/x-protobuf",
			      NULL);
	}
	/* gzip: inflated with a running limit of max bytes (otlp_receiver_export_compressed) */
	c->gzip = false;
	if (header(hdrs, "Content-Encoding", val, sizeof(val)) &&
	    strcasecmp(val, "identity") != 0) {
		if (strcasecmp(val, "gzip") != 0)
			return refuse(h, c, 415, RPC_INVALID_ARGUMENT,
				      "unsupported Content-Encoding: send gzip or identity", NULL);
		c->gzip = true;
	}
	if (!header(hdrs, "Content-Length", val, sizeof(val)))
		return refuse(h, c, 411, RPC_INVALID_ARGUMENT,
			      "Content-Length required (chunked bodies are not read)", NULL);
	errno = 0;
	len = strtoull(val, &e, 10);
	if (e == val || *e || errno || val[0] == '-') {
		c->keep_alive = false;
		return refuse(h, c, 400, RPC_INVALID_ARGUMENT, "malformed Content-Length", NULL);
	}
	if (len > max) {
		char msg[128];

		snprintf(msg, sizeof(msg), "body of %llu bytes is over the limit of %zu bytes", len,
			 max);
		return refuse(h, c, 413, RPC_RESOURCE_EXHAUSTED, msg, NULL);
	}
	if (len > OTLP_HTTP_SMALL_BODY && big_bodies(h) + len > OTLP_HTTP_BIG_BODIES * max) {
		atomic_fetch_add(&h->bodies_refused, 1);
		return respond_error(c, 503, RPC_UNAVAILABLE, "too many large bodies in flight",
				     "Retry-After: 1\r\n");
	}
	c->close_after = false;
	c->content_length = (size_t)len;
	c->body_len = 0;
	c->body = malloc(len ? len : 1);
	if (!c->body)
		return -ENOMEM;
	if (header(hdrs, "Expect", val, sizeof(val)) && strcasecmp(val, "100-continue") == 0 &&
	    c->head_len == end) {
		static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";

		/* best effort: a client that does not get it sends the body after a delay */
		if (send(c->fd, cont, sizeof(cont) - 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
			log_debug("otlp http: cannot send 100 Continue: %s", strerror(errno));
	}
	/* bytes already read past the headers */
	extra = c->head_len - end;
	if (extra > c->content_length)
		extra = c->content_length;
	memcpy(c->body, c->head + end, extra);
	c->body_len = extra;
	memmove(c->head, c->head + end + extra, c->head_len - end - extra);
	c->head_len -= end + extra;
	c->state = READ_BODY;
	c->body_ms = now_ms();
	return 0;
}

/* The body is complete: export and answer. */
static int finish_request(struct otlp_http *h, struct conn *c)
{
	struct otlp_result res;
	uint8_t *buf = NULL;
	size_t len = 0;
	int rc;

	if (c->gzip)
		otlp_receiver_export_compressed(h->r, c->body, c->content_length, &res);
	else
		otlp_receiver_export(h->r, c->body, c->content_length, &res);
	free(c->body);
	c->body = NULL;
	switch (res.status) {
	case OTLP_OK:
		if (otlp_pack_response(&res, &buf, &len) != 0)
			return -ENOMEM;
		rc = respond(c, 200, buf, len, NULL);
		free(buf);
		return rc;
	case OTLP_MALFORMED:
	case OTLP_TOO_DEEP:
		return respond_error(c, 400, RPC_INVALID_ARGUMENT, res.message, NULL);
	case OTLP_TOO_LARGE:
		return respond_error(c, 413, RPC_RESOURCE_EXHAUSTED, res.message, NULL);
	default:
		return respond_error(c, 503, RPC_UNAVAILABLE, res.message, "Retry-After: 5\r\n");
	}
}

/* Looks for complete headers in what was read. */
static int try_head(struct otlp_http *h, struct conn *c)
{
	char *end;

	if (c->head_len == 0)
		return 0;
	end = memmem(c->head, c->head_len, "\r\n\r\n", 4);
	if (!end) {
		if (c->head_len == sizeof(c->head)) {
			c->keep_alive = false;
			return refuse(h, c, 431, RPC_INVALID_ARGUMENT, "request headers too large",
				      NULL);
		}
		return 0;
	}
	return start_request(h, c, (size_t)(end - c->head) + 4);
}

/* The deadline of the phase c just entered (READ_BODY or WRITE). */
static void phase_deadline(struct otlp_http *h, struct conn *c)
{
	int64_t ms = h->lim.header_timeout_ms;

	if (c->state == READ_BODY)
		ms += (int64_t)(c->content_length / (size_t)h->lim.min_body_rate) * 1000 +
		      (int64_t)(c->content_length % (size_t)h->lim.min_body_rate) * 1000 /
			  h->lim.min_body_rate;
	c->deadline_ms = now_ms() + ms;
}

/* Advances a connection after its body or response progressed. -1: close it. */
static int advance(struct otlp_http *h, struct conn *c)
{
	for (;;) {
		if (c->state == READ_HEAD) {
			if (try_head(h, c) != 0)
				return -1;
			if (c->state == READ_HEAD)
				return 0;
			phase_deadline(h, c);
		}
		if (c->state == READ_BODY) {
			if (c->body_len < c->content_length)
				return 0;
			if (finish_request(h, c) != 0)
				return -1;
			phase_deadline(h, c);
		}
		if (c->state == WRITE) {
			while (c->out_pos < c->out_len) {
				ssize_t n =
				    send(c->fd, c->out + c->out_pos, c->out_len - c->out_pos,
					 MSG_NOSIGNAL | MSG_DONTWAIT);

				if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
					return 0;
				if (n < 0 && errno == EINTR)
					continue;
				if (n <= 0)
					return -1;
				c->out_pos += (size_t)n;
			}
			free(c->out);
			c->out = NULL;
			if (c->close_after)
				return -1;
			c->state = READ_HEAD;
			c->served++;
			c->since_ms = c->head_ms = now_ms();
			/* a pipelined request has begun: its headers are due */
			c->deadline_ms = c->since_ms + (c->head_len ? h->lim.header_timeout_ms
								    : h->lim.idle_timeout_ms);
			if (!c->head_len)
				return 0;
		}
	}
}

static void on_readable(struct otlp_http *h, struct conn *c)
{
	ssize_t n;

	if (c->state == READ_HEAD)
		n = recv(c->fd, c->head + c->head_len, sizeof(c->head) - c->head_len, MSG_DONTWAIT);
	else
		n = recv(c->fd, c->body + c->body_len, c->content_length - c->body_len,
			 MSG_DONTWAIT);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return;
	if (n <= 0) {
		conn_close(c);
		return;
	}
	if (c->state == READ_HEAD && c->head_len == 0) { /* a request begins: headers due */
		c->head_ms = now_ms();
		c->deadline_ms = c->head_ms + h->lim.header_timeout_ms;
	}
	if (c->state == READ_HEAD)
		c->head_len += (size_t)n;
	else
		c->body_len += (size_t)n;
	if (advance(h, c) != 0)
		conn_close(c);
}

/* Serves the connections poll() found ready; pfd[k] belongs to conns[idx[k]]. */
static void dispatch(struct otlp_http *h, const struct pollfd *pfd, const int *idx, nfds_t first,
		     nfds_t n)
{
	for (nfds_t k = first; k < n; k++) {
		struct conn *c = &h->conns[idx[k]];

		if (!pfd[k].revents || c->fd < 0)
			continue;
		if (c->state == WRITE) {
			if (pfd[k].revents & (POLLERR | POLLHUP | POLLNVAL) || advance(h, c) != 0)
				conn_close(c);
		} else {
			on_readable(h, c);
		}
	}
}

/*
 * The table is full: before refusing a new connection, serve whatever the
 * open ones have ready, so peers that already hung up free their slots.
 */
static void reap(struct otlp_http *h)
{
	/* the serving loop's arrays: on_accept runs after that pass is done with them */
	struct pollfd *pfd = h->pfd;
	int *idx = h->idx;
	nfds_t n = 0;

	for (int i = 0; i < h->lim.max_conns; i++)
		if (h->conns[i].fd >= 0) {
			idx[n] = i;
			pfd[n++] = (struct pollfd){
			    .fd = h->conns[i].fd,
			    .events = h->conns[i].state == WRITE ? POLLOUT : POLLIN | POLLRDHUP};
		}
	if (poll(pfd, n, 0) > 0)
		dispatch(h, pfd, idx, 0, n);
}

static struct conn *free_slot(struct otlp_http *h)
{
	for (int i = 0; i < h->lim.max_conns; i++)
		if (h->conns[i].fd < 0)
			return &h->conns[i];
	return NULL;
}

/* Open connections from peer p. */
static int peer_conns(const struct otlp_http *h, const struct tp_peer *p)
{
	int n = 0;

	for (int i = 0; i < h->lim.max_conns; i++)
		n += h->conns[i].fd >= 0 && tp_peer_eq(&h->conns[i].peer, p);
	return n;
}

#define OTLP_HTTP_BODY_GRACE_MS 200 /* a body is never judged slow before this */

/* Why a connection may be evicted, worst first; EVICT_NONE: it may not. */
enum evict_class {
	EVICT_SLOW_BODY,   /* its body arrives below min_body_rate */
	EVICT_SLOW_HEAD,   /* its request head arrives below min_body_rate */
	EVICT_IDLE_NEW,	   /* waiting for its first request */
	EVICT_IDLE_SERVED, /* kept alive after a request */
	EVICT_NONE,	   /* being answered, or a request arriving fast enough */
};

/*
 * c's class at now, and in *since when it entered it (the oldest of a
 * class goes first). A request head that began is slow at once: requests
 * that arrived were read just before (reap), and a client writes its head
 * in one go. A body is slow once it has had OTLP_HTTP_BODY_GRACE_MS and
 * has taken longer than its bytes at min_body_rate: a client that writes
 * head and body apart without TCP_NODELAY sends the body only when the
 * head is acknowledged, up to 40 ms later (delayed ACK).
 */
static enum evict_class evict_class(const struct otlp_http *h, const struct conn *c, int64_t now,
				    int64_t *since)
{
	if (c->state == WRITE)
		return EVICT_NONE;
	if (c->state == READ_BODY) {
		*since = c->body_ms;
		return now - c->body_ms >= OTLP_HTTP_BODY_GRACE_MS &&
			       (int64_t)c->body_len * 1000 <
				   (now - c->body_ms) * h->lim.min_body_rate
			   ? EVICT_SLOW_BODY
			   : EVICT_NONE;
	}
	if (c->head_len) {
		*since = c->head_ms;
		return EVICT_SLOW_HEAD;
	}
	*since = c->since_ms;
	return c->served ? EVICT_IDLE_SERVED : EVICT_IDLE_NEW;
}

/* Closes c to admit a newcomer, counted by its reason. */
static void evict_one(struct otlp_http *h, struct conn *c, enum evict_class why)
{
	conn_close(c);
	atomic_fetch_add(why == EVICT_SLOW_BODY	  ? &h->evicted_body
			 : why == EVICT_SLOW_HEAD ? &h->evicted_head
						  : &h->evicted_idle,
			 1);
	atomic_fetch_add(&h->evicted, 1);
}

/*
 * A newcomer from peer p, holding mine connections, finds its peer at
 * max_per_peer or the port full. The connections it may replace: its own
 * peer's when that peer is at its cap or among the heaviest (one address
 * cannot take another's place, however many connections it opens), else
 * those of the peers holding the most, when that is more than twice mine
 * (heavy peers do not churn by evicting each other). Of those, the worst
 * by evict_class goes, the oldest of its class first: slow bodies and
 * heads, then connections waiting for a first request, then kept-alive
 * ones; never one being answered or receiving its request at
 * min_body_rate. So a well-behaved exporter is served beside a flood of
 * slow senders from its own address. Returns the freed slot or NULL.
 */
static struct conn *evict(struct otlp_http *h, const struct tp_peer *p, int mine)
{
	struct conn *best = NULL;
	enum evict_class best_class = EVICT_NONE;
	int64_t now = now_ms(), best_since = 0;
	int n = 0, max;
	bool own = mine >= h->lim.max_per_peer;

	for (int i = 0; i < h->lim.max_conns; i++)
		if (h->conns[i].fd >= 0) {
			h->slot_of[n] = i;
			h->peers[n++] = h->conns[i].peer;
		}
	max = tp_peer_counts(h->peers, n, h->scratch, h->counts);
	own = own || max <= 2 * mine;
	for (int k = 0; k < n; k++) {
		struct conn *c = &h->conns[h->slot_of[k]];
		enum evict_class why;
		int64_t since = 0;

		if (own ? !tp_peer_eq(&c->peer, p) : h->counts[k] != max)
			continue;
		why = evict_class(h, c, now, &since);
		if (why < best_class ||
		    (why == best_class && why != EVICT_NONE && since < best_since)) {
			best = c;
			best_class = why;
			best_since = since;
		}
	}
	if (!best)
		return NULL;
	evict_one(h, best, best_class);
	return best;
}

static void refuse_conn(int fd, _Atomic uint64_t *counter)
{
	static const char busy[] = "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n"
				   "Retry-After: 1\r\nConnection: close\r\n\r\n";

	/* counted before the client can see the answer */
	atomic_fetch_add(counter, 1);
	if (send(fd, busy, sizeof(busy) - 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
		log_debug("otlp http: cannot refuse a connection: %s", strerror(errno));
	close(fd);
}

static void on_accept(struct otlp_http *h)
{
	for (;;) {
		struct sockaddr_storage sa;
		socklen_t salen = sizeof(sa);
		int fd =
		    accept4(h->lfd, (struct sockaddr *)&sa, &salen, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct tp_peer p;
		struct conn *c;
		int mine;

		if (fd < 0)
			return;
		p = tp_peer_of((struct sockaddr *)&sa);
		mine = peer_conns(h, &p);
		c = mine < h->lim.max_per_peer ? free_slot(h) : NULL;
		if (!c) {
			reap(h); /* requests that arrived are served before anyone is evicted */
			mine = peer_conns(h, &p);
			c = mine < h->lim.max_per_peer ? free_slot(h) : NULL;
		}
		if (!c)
			c = evict(h, &p, mine);
		if (!c) {
			refuse_conn(fd,
				    mine >= h->lim.max_per_peer ? &h->refused_peer : &h->refused);
			continue;
		}
		atomic_fetch_add(&h->accepted, 1);
		c->fd = fd;
		c->peer = p;
		c->served = 0;
		c->state = READ_HEAD;
		c->head_len = 0;
		c->close_after = false;
		c->keep_alive = true;
		c->since_ms = now_ms();
		c->deadline_ms = c->since_ms + h->lim.idle_timeout_ms;
	}
}

static void *serve(void *arg)
{
	struct otlp_http *h = arg;
	struct pollfd *pfd = h->pfd;
	int *idx = h->idx;

	pthread_setname_np(pthread_self(), "tp-otlp-http");
	for (;;) {
		int64_t now = now_ms(), next = INT64_MAX; /* no connection: sleep until one comes */
		nfds_t n = 0;
		int rc;

		pfd[n++] = (struct pollfd){.fd = h->wake[0], .events = POLLIN};
		pfd[n++] = (struct pollfd){.fd = h->lfd, .events = POLLIN};
		for (int i = 0; i < h->lim.max_conns; i++) {
			struct conn *c = &h->conns[i];

			if (c->fd < 0)
				continue;
			if (now >= c->deadline_ms) {
				atomic_fetch_add(&h->timeouts, 1);
				conn_close(c);
				continue;
			}
			if (c->deadline_ms < next)
				next = c->deadline_ms;
			idx[n] = i;
			pfd[n++] = (struct pollfd){.fd = c->fd,
						   .events = c->state == WRITE ? POLLOUT : POLLIN};
		}
		atomic_store(&h->open, (uint64_t)(n - 2));
		rc = poll(pfd, n, next == INT64_MAX ? -1 : (int)(next - now));
		if (rc < 0 && errno != EINTR) {
			log_error("otlp http: poll failed: %s", strerror(errno));
			break;
		}
		if (rc <= 0)
			continue;
		if (pfd[0].revents)
			break;
		dispatch(h, pfd, idx, 2, n);
		if (pfd[1].revents)
			on_accept(h);
	}
	return NULL;
}

static void free_tables(struct otlp_http *h)
{
	free(h->conns);
	free(h->pfd);
	free(h->idx);
	free(h->peers);
	free(h->scratch);
	free(h->counts);
	free(h->slot_of);
}

struct otlp_http *otlp_http_start(const char *addr, struct otlp_receiver *r,
				  const struct tp_conn_limits *lim)
{
	struct otlp_http *h = calloc(1, sizeof(*h));
	char msg[512];
	size_t m;
	int rc;

	if (!h)
		return NULL;
	h->r = r;
	h->lim = tp_conn_limits_resolve(lim);
	h->wake[0] = h->wake[1] = -1;
	m = (size_t)h->lim.max_conns;
	/* slots are touched only when used: an idle port holds no header buffers */
	h->conns = calloc(m, sizeof(*h->conns));
	h->pfd = calloc(m + 2, sizeof(*h->pfd));
	h->idx = calloc(m + 2, sizeof(*h->idx));
	h->peers = calloc(m, sizeof(*h->peers));
	h->scratch = calloc(m, sizeof(*h->scratch));
	h->counts = calloc(m, sizeof(*h->counts));
	h->slot_of = calloc(m, sizeof(*h->slot_of));
	if (!h->conns || !h->pfd || !h->idx || !h->peers || !h->scratch || !h->counts ||
	    !h->slot_of) {
		rc = -ENOMEM;
		goto out_free;
	}
	for (int i = 0; i < h->lim.max_conns; i++)
		h->conns[i].fd = -1;
	h->lfd = tp_listen_tcp(addr, 0, SOCK_NONBLOCK, SOMAXCONN, &h->port, msg, sizeof(msg));
	if (h->lfd < 0) {
		log_error("otlp http: cannot listen on %s", msg);
		rc = h->lfd;
		goto out_free;
	}
	if (pipe2(h->wake, O_CLOEXEC) != 0) {
		rc = -errno;
		goto out_close;
	}
	rc = -pthread_create(&h->thread, NULL, serve, h);
	if (rc)
		goto out_close;
	log_info("otlp http: listening on %s port=%d max_conns=%d per_peer=%d", addr, h->port,
		 h->lim.max_conns, h->lim.max_per_peer);
	return h;

out_close:
	close(h->lfd);
	if (h->wake[0] >= 0) {
		close(h->wake[0]);
		close(h->wake[1]);
	}
out_free:
	free_tables(h);
	free(h);
	errno = -rc;
	return NULL;
}

int otlp_http_port(const struct otlp_http *h)
{
	return h->port;
}

void otlp_http_get_counts(struct otlp_http *h, uint64_t *timeouts, uint64_t *refused)
{
	*timeouts = atomic_load(&h->timeouts);
	*refused = atomic_load(&h->refused) + atomic_load(&h->refused_peer);
}

void otlp_http_conn_stats(struct otlp_http *h, struct tp_conn_stats *out)
{
	*out = (struct tp_conn_stats){
	    .accepted = atomic_load(&h->accepted),
	    .refused_full = atomic_load(&h->refused),
	    .refused_peer = atomic_load(&h->refused_peer),
	    .evicted = atomic_load(&h->evicted),
	    .evicted_idle = atomic_load(&h->evicted_idle),
	    .evicted_slow_head = atomic_load(&h->evicted_head),
	    .evicted_slow_body = atomic_load(&h->evicted_body),
	    .timeouts = atomic_load(&h->timeouts),
	    .open = atomic_load(&h->open),
	    .bodies_refused = atomic_load(&h->bodies_refused),
	};
}

void otlp_http_stop(struct otlp_http *h)
{
	if (!h)
		return;
	if (write(h->wake[1], "x", 1) != 1)
		log_warn("otlp http: cannot wake the server thread: %s", strerror(errno));
	pthread_join(h->thread, NULL);
	for (int i = 0; i < h->lim.max_conns; i++)
		conn_close(&h->conns[i]);
	close(h->lfd);
	close(h->wake[0]);
	close(h->wake[1]);
	free_tables(h);
	free(h);
}
