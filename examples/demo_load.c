/*
 * demo_load.c - traceprof-demo-load: the load generator of the demo service,
 * which writes down the ground truth of every request it sends.
 *
 * Data flow: C client threads, one keep-alive connection each, take request
 * numbers from one shared counter. Request i's path (fast, slow or failing
 * checkout, or inventory) and its order come from a hash of (seed, i), so a
 * seed fixes the mix whatever the thread timing; its trace and parent span
 * ids are fresh random ids, sent as a sampled traceparent. With --rate,
 * request i is not sent before start + i / rate (an open-loop schedule, as
 * far as the connections allow). Each answer becomes one CSV row (see
 * usage()) written as it arrives, and a latency histogram per path
 * (32 buckets per power of two: about 3 % resolution) gives the summary's
 * p50/p99 in bounded memory however long the run.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "demo_http.h"
#include "traceprof/hex.h"
#include "traceprof/log.h"
#include "traceprof/sdk.h"

#define MAX_CONCURRENCY	 256
#define IO_TIMEOUT_S	 60 /* a request that takes longer fails */
#define HIST_SUB_BITS	 5  /* 32 buckets per power of two */
#define HIST_SUB	 (1 << HIST_SUB_BITS)
#define HIST_OCTAVES	 40 /* up to 2^46 us */
#define HIST_BUCKETS	 (2 * HIST_SUB + HIST_OCTAVES * HIST_SUB)
#define RESP_BUF_SIZE	 (HTTP_MAX_HEAD + 65536)
#define DEFAULT_REQUESTS 1000
#define CSV_HEADER                                                                                 \
	"trace_id,parent_span_id,server_span_id,method,route,path,status,start_unix_us,"           \
	"duration_us,server_cpu_us\n"

enum path_kind { PATH_FAST, PATH_SLOW, PATH_FAIL, PATH_INVENTORY, PATH_KINDS };

static const char *const path_names[PATH_KINDS] = {"fast", "slow", "fail", "inventory"};
static const int path_status[PATH_KINDS] = {200, 200, 500, 200};

struct load_opts {
	const char *host;	   /* server host name or address */
	const char *port;	   /* server port, as text */
	long requests;		   /* total requests, 0 = no limit */
	double duration_s;	   /* run time limit, 0 = none */
	int concurrency;	   /* client threads = connections */
	double rate;		   /* requests per second, 0 = as fast as possible */
	double slow_fraction;	   /* share of slow checkouts */
	double error_fraction;	   /* share of failing checkouts */
	double inventory_fraction; /* share of inventory lookups */
	uint64_t seed;		   /* fixes the path and order of request i */
	const char *out;	   /* ground truth CSV, "-" = stdout, NULL = none */
	bool quiet;		   /* no summary */
};

struct histogram {
	uint64_t count[HIST_BUCKETS]; /* requests per latency bucket */
	uint64_t n;		      /* requests in all buckets */
};

struct load {
	struct load_opts o;		       /* configuration */
	struct addrinfo *addrs;		       /* resolved server addresses */
	atomic_long next;		       /* next request number */
	int64_t start_ns;		       /* monotonic start of the run */
	int64_t deadline_ns;		       /* monotonic end, 0 = none */
	pthread_mutex_t lock;		       /* guards everything below */
	FILE *out;			       /* ground truth, or NULL */
	int out_error;			       /* first write error, -errno */
	struct histogram hist[PATH_KINDS + 1]; /* per path, then all */
	uint64_t sent[PATH_KINDS];	       /* requests per path */
	uint64_t transport_errors;	       /* no (valid) response */
	uint64_t unexpected_status;	       /* status other than the path's */
	uint64_t reconnects;		       /* connections opened after the first */
};

/* The outcome of one request. */
struct result {
	int status;		 /* HTTP status, 0 when none arrived */
	char server_span[17];	 /* span id from traceresponse, "" if absent */
	long long server_cpu_us; /* from Server-Timing cpu, -1 if absent */
};

struct client {
	struct load *l;		 /* the run */
	pthread_t thread;	 /* its thread */
	int fd;			 /* its connection, -1 when closed */
	bool opened;		 /* a connection was opened before */
	char req[4096];		 /* request being sent */
	char buf[RESP_BUF_SIZE]; /* response being received */
};

static int64_t now_ns(clockid_t clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static uint64_t mix64(uint64_t z)
{
	z += 0x9e3779b97f4a7c15ULL;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static double unit_of(uint64_t h)
{
	return (h >> 11) * (1.0 / 9007199254740992.0);
}

static enum path_kind path_of(const struct load_opts *o, long i)
{
	double u = unit_of(mix64(o->seed * 0x100000001b3ULL ^ (uint64_t)i));

	if (u < o->slow_fraction)
		return PATH_SLOW;
	u -= o->slow_fraction;
	if (u < o->error_fraction)
		return PATH_FAIL;
	u -= o->error_fraction;
	if (u < o->inventory_fraction)
		return PATH_INVENTORY;
	return PATH_FAST;
}

/* ---- histogram ---- */

static size_t hist_index(uint64_t us)
{
	int e;

	if (us < 2 * HIST_SUB)
		return (size_t)us;
	e = 63 - __builtin_clzll(us); /* >= HIST_SUB_BITS + 1 */
	if (e - HIST_SUB_BITS - 1 >= HIST_OCTAVES)
		return HIST_BUCKETS - 1;
	return 2 * HIST_SUB + (size_t)(e - HIST_SUB_BITS - 1) * HIST_SUB +
	       ((us >> (e - HIST_SUB_BITS)) & (HIST_SUB - 1));
}

/* The middle of bucket i, in microseconds. */
static double hist_value(size_t i)
{
	size_t k;
	int e;

	if (i < 2 * HIST_SUB)
		return (double)i;
	k = i - 2 * HIST_SUB;
	e = (int)(k / HIST_SUB) + HIST_SUB_BITS + 1;
	return ldexp((double)(HIST_SUB + k % HIST_SUB) + 0.5, e - HIST_SUB_BITS);
}

static double hist_quantile(const struct histogram *h, double q)
{
	uint64_t rank = (uint64_t)ceil(q * (double)h->n), seen = 0;

	if (rank == 0)
		rank = 1;
	for (size_t i = 0; i < HIST_BUCKETS; i++) {
		seen += h->count[i];
		if (seen >= rank)
			return hist_value(i);
	}
	return 0;
}

/* ---- one request ---- */

static int build_request(struct client *c, long i, enum path_kind path, const char *traceparent,
			 size_t *len)
{
	const struct load_opts *o = &c->l->o;
	uint64_t h = mix64(o->seed ^ mix64((uint64_t)i));
	int n;

	if (path == PATH_INVENTORY) {
		n = snprintf(c->req, sizeof(c->req),
			     "GET /api/inventory?sku=SKU-%04u HTTP/1.1\r\nHost: %s:%s\r\n"
			     "traceparent: %s\r\nUser-Agent: traceprof-demo-load\r\n\r\n",
			     (unsigned)(h % 4096), o->host, o->port, traceparent);
	} else {
		char body[1024];
		size_t blen = 0;
		unsigned items = 1 + (unsigned)(h % 4);

		blen += (size_t)snprintf(body, sizeof(body), "{\"items\":[");
		for (unsigned k = 0; k < items; k++) {
			uint64_t hk = mix64(h + k);

			blen += (size_t)snprintf(
			    body + blen, sizeof(body) - blen,
			    "%s{\"sku\":\"SKU-%04u\",\"qty\":%u,\"price_cents\":%u}", k ? "," : "",
			    (unsigned)(hk % 4096), 1 + (unsigned)(hk >> 12) % 9,
			    99 + (unsigned)(hk >> 20) % 20000);
		}
		blen += (size_t)snprintf(body + blen, sizeof(body) - blen, "]}");
		n = snprintf(c->req, sizeof(c->req),
			     "POST /api/checkout HTTP/1.1\r\nHost: %s:%s\r\ntraceparent: %s\r\n"
			     "X-Demo-Path: %s\r\nUser-Agent: traceprof-demo-load\r\n"
			     "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
			     o->host, o->port, traceparent, path_names[path], blen, body);
	}
	if (n < 0 || (size_t)n >= sizeof(c->req))
		return -ENOSPC;
	*len = (size_t)n;
	return 0;
}

static int client_connect(struct client *c)
{
	struct timeval tv = {.tv_sec = IO_TIMEOUT_S};
	int one = 1;
	int rc = -ECONNREFUSED;

	for (struct addrinfo *a = c->l->addrs; a; a = a->ai_next) {
		int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);

		if (fd < 0) {
			rc = -errno;
			continue;
		}
		if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
			setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
			setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
			setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
			if (c->opened) {
				pthread_mutex_lock(&c->l->lock);
				c->l->reconnects++;
				pthread_mutex_unlock(&c->l->lock);
			}
			c->fd = fd;
			c->opened = true;
			return 0;
		}
		rc = -errno;
		close(fd);
	}
	return rc;
}

static void client_close(struct client *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
}

static void read_trace_headers(const struct http_response *resp, struct result *res)
{
	const struct http_header *h;
	uint8_t tid[16], sid[8], flags;

	h = http_find_header(resp->headers, resp->n_headers, "traceresponse", NULL);
	if (h && !tp_sdk_traceparent_parse(h->value, h->value_len, tid, sid, &flags)) {
		tp_hex_encode(sid, 8, res->server_span);
		res->server_span[16] = '\0';
	}
	h = http_find_header(resp->headers, resp->n_headers, "server-timing", NULL);
	if (h && h->value_len > 8 && h->value_len < 64 && !memcmp(h->value, "cpu;dur=", 8)) {
		char num[64];
		char *end;
		double ms;

		memcpy(num, h->value + 8, h->value_len - 8);
		num[h->value_len - 8] = '\0';
		ms = strtod(num, &end);
		if (end != num && !*end && ms >= 0)
			res->server_cpu_us = llround(ms * 1000);
	}
}

/*
 * Sends c->req and reads the whole response. Returns 0, or -errno with
 * *got_bytes telling whether any response byte arrived.
 */
static int exchange(struct client *c, size_t len, struct result *res, bool *got_bytes)
{
	struct http_response resp;
	size_t have = 0;
	int rc;

	*got_bytes = false;
	rc = demo_send_all(c->fd, c->req, len);
	if (rc)
		return rc;
	for (;;) {
		ssize_t n = recv(c->fd, c->buf + have, sizeof(c->buf) - have, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -ECONNRESET;
		have += (size_t)n;
		*got_bytes = true;
		rc = http_parse_response(c->buf, have, &resp);
		if (rc == -EAGAIN)
			continue;
		if (rc)
			return rc;
		if (resp.status < 200) { /* an interim response: drop it, read on */
			memmove(c->buf, c->buf + resp.head_len, have - resp.head_len);
			have -= resp.head_len;
			continue;
		}
		if (resp.head_len + resp.content_length > sizeof(c->buf))
			return -EMSGSIZE;
		if (have >= resp.head_len + resp.content_length)
			break;
	}
	res->status = resp.status;
	read_trace_headers(&resp, res);
	if (!resp.keep_alive)
		client_close(c);
	return 0;
}

/* One request on the client's connection, reconnecting once when a reused one was closed. */
static int send_request(struct client *c, size_t len, struct result *res)
{
	for (int attempt = 0;; attempt++) {
		bool reused = c->fd >= 0, got_bytes;
		int rc;

		if (c->fd < 0 && (rc = client_connect(c)))
			return rc;
		rc = exchange(c, len, res, &got_bytes);
		if (!rc)
			return 0;
		client_close(c);
		if (!reused || got_bytes || attempt > 0)
			return rc;
	}
}

static void record(struct client *c, long i, enum path_kind path, const char *traceparent,
		   const struct result *res, int64_t start_unix_us, int64_t duration_us)
{
	struct load *l = c->l;

	pthread_mutex_lock(&l->lock);
	l->sent[path]++;
	if (res->status == 0)
		l->transport_errors++;
	else if (res->status != path_status[path])
		l->unexpected_status++;
	if (res->status) {
		l->hist[path].count[hist_index((uint64_t)duration_us)]++;
		l->hist[path].n++;
		l->hist[PATH_KINDS].count[hist_index((uint64_t)duration_us)]++;
		l->hist[PATH_KINDS].n++;
	}
	if (l->out) {
		char cpu[24] = "";

		if (res->server_cpu_us >= 0)
			snprintf(cpu, sizeof(cpu), "%lld", res->server_cpu_us);
		/* traceparent = 00-<trace 32>-<span 16>-<flags> */
		if (fprintf(l->out, "%.32s,%.16s,%s,%s,%s,%s,%d,%lld,%lld,%s\n", traceparent + 3,
			    traceparent + 36, res->server_span,
			    path == PATH_INVENTORY ? "GET" : "POST",
			    path == PATH_INVENTORY ? "/api/inventory" : "/api/checkout",
			    path_names[path], res->status, (long long)start_unix_us,
			    (long long)duration_us, cpu) < 0 &&
		    !l->out_error)
			l->out_error = -errno;
	}
	pthread_mutex_unlock(&l->lock);
}

/* Waits until request i's turn under --rate; false when the run is over. */
static bool wait_turn(const struct load *l, long i)
{
	int64_t at;
	struct timespec ts;

	if (l->o.rate <= 0)
		return !l->deadline_ns || now_ns(CLOCK_MONOTONIC) < l->deadline_ns;
	at = l->start_ns + (int64_t)((double)i * 1e9 / l->o.rate);
	if (l->deadline_ns && at >= l->deadline_ns)
		return false;
	ts.tv_sec = at / 1000000000;
	ts.tv_nsec = at % 1000000000;
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
	return true;
}

static void *client_main(void *arg)
{
	struct client *c = arg;
	struct load *l = c->l;

	for (;;) {
		long i = atomic_fetch_add(&l->next, 1);
		enum path_kind path = path_of(&l->o, i);
		uint8_t tid[16], sid[8];
		char traceparent[TP_SDK_TRACEPARENT_LEN + 1];
		struct result res = {.server_cpu_us = -1};
		int64_t start_unix_us, t0;
		size_t len;
		int rc;

		if ((l->o.requests && i >= l->o.requests) || !wait_turn(l, i))
			break;
		tp_sdk_new_trace_id(tid);
		tp_sdk_new_span_id(sid);
		tp_sdk_traceparent_format(tid, sid, 0x01, traceparent, sizeof(traceparent));
		if (build_request(c, i, path, traceparent, &len))
			break;
		start_unix_us = now_ns(CLOCK_REALTIME) / 1000;
		t0 = now_ns(CLOCK_MONOTONIC);
		rc = send_request(c, len, &res);
		if (rc) {
			log_debug("request failed n=%ld path=%s error=%s", i, path_names[path],
				  strerror(-rc));
			res.status = 0;
		}
		record(c, i, path, traceparent, &res, start_unix_us,
		       (now_ns(CLOCK_MONOTONIC) - t0) / 1000);
	}
	client_close(c);
	return NULL;
}

/* ---- command line ---- */

static void usage(FILE *out)
{
	fprintf(out,
		"usage: traceprof-demo-load [OPTIONS]\n"
		"\n"
		"Sends a known mix of requests to traceprof-demo-service, each with a fresh\n"
		"sampled traceparent, and writes the ground truth of every request.\n"
		"\n"
		"  --host HOST              server (default 127.0.0.1)\n"
		"  --port PORT              server port (default 8080)\n"
		"  --requests N             requests in all (default %d unless --duration)\n"
		"  --duration SECONDS       stop after this long (with --requests: first wins)\n"
		"  --concurrency N          connections, one thread each, 1-%d (default 4)\n"
		"  --rate R                 requests per second in all (default: no limit)\n"
		"  --slow-fraction F        share of slow checkouts (default 0.02)\n"
		"  --error-fraction F       share of failing checkouts, status 500 (default 0.02)\n"
		"  --inventory-fraction F   share of inventory lookups (default 0.3);\n"
		"                           the rest are fast checkouts\n"
		"  --seed N                 fixes the path and order of every request (default 1)\n"
		"  --out FILE               ground truth CSV (\"-\": stdout, summary to stderr)\n"
		"  -q, --quiet              no summary\n"
		"  -v, --verbose            log failed requests\n"
		"  -h, --help               this help\n"
		"\n"
		"Ground truth: a header line, then one line per request in completion order:\n"
		"  trace_id,parent_span_id,server_span_id,method,route,path,status,\n"
		"  start_unix_us,duration_us,server_cpu_us\n"
		"path is fast, slow, fail or inventory; status 0 means no response;\n"
		"server_span_id and server_cpu_us come from the traceresponse and\n"
		"Server-Timing headers (empty when absent).\n"
		"\n"
		"Exit status: 0 when every request got its path's status (200, or 500 for\n"
		"fail), 1 otherwise, 2 for wrong usage.\n",
		DEFAULT_REQUESTS, MAX_CONCURRENCY);
}

/* Options into o; returns 0, 1 for --help, or -EINVAL after a message. */
static int parse_args(int argc, char **argv, struct load_opts *o)
{
	static const struct option longopts[] = {
	    {"host", required_argument, NULL, 'H'},
	    {"port", required_argument, NULL, 'p'},
	    {"requests", required_argument, NULL, 'n'},
	    {"duration", required_argument, NULL, 'd'},
	    {"concurrency", required_argument, NULL, 'c'},
	    {"rate", required_argument, NULL, 'r'},
	    {"slow-fraction", required_argument, NULL, 'S'},
	    {"error-fraction", required_argument, NULL, 'E'},
	    {"inventory-fraction", required_argument, NULL, 'I'},
	    {"seed", required_argument, NULL, 's'},
	    {"out", required_argument, NULL, 'o'},
	    {"quiet", no_argument, NULL, 'q'},
	    {"verbose", no_argument, NULL, 'v'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	double v;
	int c;

	while ((c = getopt_long(argc, argv, "qvh", longopts, NULL)) != -1) {
		switch (c) {
		case 'H':
			o->host = optarg;
			break;
		case 'p':
			if (demo_parse_number("--port", optarg, 1, 65535, &v) || v != (int)v)
				return -EINVAL;
			o->port = optarg;
			break;
		case 'n':
			if (demo_parse_number("--requests", optarg, 1, 1e12, &v) || v != (long)v)
				return -EINVAL;
			o->requests = (long)v;
			break;
		case 'd':
			if (demo_parse_number("--duration", optarg, 0.001, 1e7, &o->duration_s))
				return -EINVAL;
			break;
		case 'c':
			if (demo_parse_number("--concurrency", optarg, 1, MAX_CONCURRENCY, &v) ||
			    v != (int)v)
				return -EINVAL;
			o->concurrency = (int)v;
			break;
		case 'r':
			if (demo_parse_number("--rate", optarg, 0, 1e7, &o->rate))
				return -EINVAL;
			break;
		case 'S':
			if (demo_parse_number("--slow-fraction", optarg, 0, 1, &o->slow_fraction))
				return -EINVAL;
			break;
		case 'E':
			if (demo_parse_number("--error-fraction", optarg, 0, 1, &o->error_fraction))
				return -EINVAL;
			break;
		case 'I':
			if (demo_parse_number("--inventory-fraction", optarg, 0, 1,
					      &o->inventory_fraction))
				return -EINVAL;
			break;
		case 's':
			if (demo_parse_number("--seed", optarg, 0, 1e18, &v) ||
			    v != (double)(uint64_t)v)
				return -EINVAL;
			o->seed = (uint64_t)v;
			break;
		case 'o':
			o->out = optarg;
			break;
		case 'q':
			o->quiet = true;
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
	if (o->slow_fraction + o->error_fraction + o->inventory_fraction > 1 + 1e-9) {
		log_error("--slow-fraction, --error-fraction and --inventory-fraction add up to "
			  "more than 1");
		return -EINVAL;
	}
	if (!o->requests && !o->duration_s)
		o->requests = DEFAULT_REQUESTS;
	return 0;
}

static void print_summary(const struct load *l, FILE *f, double elapsed_s)
{
	uint64_t total = 0;

	for (int p = 0; p < PATH_KINDS; p++)
		total += l->sent[p];
	fprintf(f,
		"requests %llu in %.2f s (%.1f/s), errors %llu (no response %llu, unexpected "
		"status %llu), reconnects %llu\n",
		(unsigned long long)total, elapsed_s, elapsed_s > 0 ? total / elapsed_s : 0.0,
		(unsigned long long)(l->transport_errors + l->unexpected_status),
		(unsigned long long)l->transport_errors, (unsigned long long)l->unexpected_status,
		(unsigned long long)l->reconnects);
	fprintf(f, "%-10s %8s %6s %10s %10s\n", "path", "requests", "status", "p50 ms", "p99 ms");
	for (int p = 0; p <= PATH_KINDS; p++) {
		const struct histogram *h = &l->hist[p];
		char status[8] = "";

		if (p < PATH_KINDS)
			snprintf(status, sizeof(status), "%d", path_status[p]);
		fprintf(f, "%-10s %8llu %6s %10.2f %10.2f\n",
			p < PATH_KINDS ? path_names[p] : "all",
			(unsigned long long)(p < PATH_KINDS ? l->sent[p] : total), status,
			h->n ? hist_quantile(h, 0.5) / 1000 : 0,
			h->n ? hist_quantile(h, 0.99) / 1000 : 0);
	}
}

static int resolve(struct load *l)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
	int rc = getaddrinfo(l->o.host, l->o.port, &hints, &l->addrs);

	if (rc) {
		log_error("cannot resolve %s: %s", l->o.host, gai_strerror(rc));
		return -EHOSTUNREACH;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct load_opts o = {"127.0.0.1", "8080", 0, 0, 4, 0, 0.02, 0.02, 0.3, 1, NULL, false};
	struct load *l;
	struct client *clients;
	int started = 0;
	int rc;

	log_set_prefix("traceprof-demo-load");
	rc = parse_args(argc, argv, &o);
	if (rc)
		return rc > 0 ? 0 : 2;
	l = calloc(1, sizeof(*l));
	clients = calloc((size_t)o.concurrency, sizeof(*clients));
	if (!l || !clients) {
		log_error("out of memory");
		return 1;
	}
	l->o = o;
	pthread_mutex_init(&l->lock, NULL);
	if (resolve(l))
		return 1;
	if (o.out) {
		l->out = strcmp(o.out, "-") ? fopen(o.out, "w") : stdout;
		if (!l->out) {
			log_error("cannot write %s: %s", o.out, strerror(errno));
			return 1;
		}
		fputs(CSV_HEADER, l->out);
	}
	/* Fail early, with one clear message, when nothing listens. */
	{
		struct client probe = {.l = l, .fd = -1};

		rc = client_connect(&probe);
		if (rc) {
			log_error("cannot connect to %s:%s: %s", o.host, o.port, strerror(-rc));
			log_error("hint: start traceprof-demo-service, or pass its --port");
			return 1;
		}
		client_close(&probe);
	}
	l->start_ns = now_ns(CLOCK_MONOTONIC);
	if (o.duration_s)
		l->deadline_ns = l->start_ns + (int64_t)(o.duration_s * 1e9);
	for (; started < o.concurrency; started++) {
		clients[started].l = l;
		clients[started].fd = -1;
		rc = pthread_create(&clients[started].thread, NULL, client_main, &clients[started]);
		if (rc) {
			log_error("cannot start client threads: %s", strerror(rc));
			break;
		}
	}
	for (int i = 0; i < started; i++)
		pthread_join(clients[i].thread, NULL);
	if (l->out && l->out != stdout && fclose(l->out) && !l->out_error)
		l->out_error = -errno;
	if (l->out_error)
		log_error("cannot write %s: %s", o.out, strerror(-l->out_error));
	if (!o.quiet)
		print_summary(l, l->out == stdout ? stderr : stdout,
			      (now_ns(CLOCK_MONOTONIC) - l->start_ns) / 1e9);
	rc = started < o.concurrency || l->out_error || l->transport_errors || l->unexpected_status;
	freeaddrinfo(l->addrs);
	free(clients);
	free(l);
	return rc ? 1 : 0;
}
