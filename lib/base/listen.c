/*
 * listen.c - see include/traceprof/listen.h.
 */
#include "traceprof/listen.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

int tp_addr_split(const char *addr, char *host, size_t hostlen, const char **port)
{
	const char *colon = strrchr(addr, ':');
	unsigned long v = 0;
	size_t n;

	if (!colon || !colon[1])
		return -EINVAL;
	for (const char *c = colon + 1; *c; c++) {
		if (*c < '0' || *c > '9')
			return -EINVAL;
		v = v * 10 + (unsigned long)(*c - '0');
		if (v > 65535)
			return -EINVAL;
	}
	*port = colon + 1;
	n = (size_t)(colon - addr);
	if (n >= 2 && addr[0] == '[' && addr[n - 1] == ']') {
		addr++;
		n -= 2;
	}
	if (n >= hostlen)
		return -EINVAL;
	memcpy(host, addr, n);
	host[n] = '\0';
	return 0;
}

static int bound_port(int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	if (getsockname(fd, (struct sockaddr *)&ss, &len) != 0)
		return 0;
	return ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
					      : ((struct sockaddr_in *)&ss)->sin_port);
}

int tp_listen_tcp(const char *addr, unsigned flags, int sock_flags, int backlog, int *port,
		  char *err, size_t errlen)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC,
				 .ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_PASSIVE | AI_NUMERICSERV},
			*res, *ai;
	char host[256];
	const char *p;
	int fd = -1, rc, one = 1;

	if (tp_addr_split(addr, host, sizeof(host), &p)) {
		snprintf(err, errlen, "'%s' is not HOST:PORT", addr);
		return -EINVAL;
	}
	if (flags & TP_LISTEN_NUMERIC) {
		if (!*host) {
			snprintf(err, errlen, "'%s': no numeric host", addr);
			return -ENOENT;
		}
		hints.ai_flags |= AI_NUMERICHOST;
	}
	rc = getaddrinfo(*host ? host : NULL, p, &hints, &res);
	if (rc) {
		snprintf(err, errlen, "'%s': %s", addr, gai_strerror(rc));
		return (flags & TP_LISTEN_NUMERIC) && rc == EAI_NONAME ? -ENOENT : -EINVAL;
	}
	rc = -EADDRNOTAVAIL;
	snprintf(err, errlen, "'%s': no address", addr);
	for (ai = res; ai; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | sock_flags,
			    ai->ai_protocol);
		if (fd < 0)
			continue;
		(void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, backlog) == 0)
			break;
		rc = -errno;
		snprintf(err, errlen, "'%s': %s", addr, strerror(errno));
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd < 0)
		return rc;
	if (port)
		*port = bound_port(fd);
	return fd;
}

struct tp_conn_limits tp_conn_limits_resolve(const struct tp_conn_limits *lim)
{
	struct tp_conn_limits l = lim ? *lim : (struct tp_conn_limits){0};
	struct {
		int *v;	 /* a field of l */
		int def; /* its value when not positive */
	} defaults[] = {{&l.max_conns, TP_CONN_DEF_MAX},
			{&l.max_per_peer, TP_CONN_DEF_PER_PEER},
			{&l.idle_timeout_ms, TP_CONN_DEF_IDLE_MS},
			{&l.header_timeout_ms, TP_CONN_DEF_HEADER_MS},
			{&l.min_body_rate, TP_CONN_DEF_BODY_RATE},
			{&l.grpc_max_age_ms, TP_CONN_DEF_AGE_MS},
			{&l.grpc_keepalive_ms, TP_CONN_DEF_KEEPALIVE_MS},
			{&l.grpc_handshake_ms, TP_CONN_DEF_HANDSHAKE_MS}};
	struct rlimit rl;

	for (size_t i = 0; i < sizeof(defaults) / sizeof(defaults[0]); i++)
		if (*defaults[i].v <= 0)
			*defaults[i].v = defaults[i].def;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
	    (rlim_t)l.max_conns > rl.rlim_cur / 16)
		l.max_conns = rl.rlim_cur / 16 > 0 ? (int)(rl.rlim_cur / 16) : 1;
	if (l.max_per_peer > l.max_conns)
		l.max_per_peer = l.max_conns;
	return l;
}

struct tp_peer tp_peer_of(const struct sockaddr *sa)
{
	struct tp_peer p = {{0}};

	if (sa->sa_family == AF_INET6) {
		memcpy(p.a, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
	} else if (sa->sa_family == AF_INET) {
		p.a[10] = p.a[11] = 0xff;
		memcpy(p.a + 12, &((const struct sockaddr_in *)sa)->sin_addr, 4);
	}
	return p;
}

bool tp_peer_eq(const struct tp_peer *a, const struct tp_peer *b)
{
	return memcmp(a->a, b->a, sizeof(a->a)) == 0;
}

static int peer_cmp(const void *a, const void *b)
{
	return memcmp(a, b, sizeof(struct tp_peer));
}

int tp_peer_counts(const struct tp_peer *peers, int n, struct tp_peer *scratch, int *counts)
{
	int max = 0;

	memcpy(scratch, peers, (size_t)n * sizeof(*peers));
	qsort(scratch, (size_t)n, sizeof(*scratch), peer_cmp);
	for (int i = 0; i < n; i++) {
		int lo = 0, hi = n, first, c;

		while (lo < hi) { /* first entry >= peers[i] */
			int mid = lo + (hi - lo) / 2;

			if (peer_cmp(&scratch[mid], &peers[i]) < 0)
				lo = mid + 1;
			else
				hi = mid;
		}
		first = lo;
		hi = n;
		while (lo < hi) { /* first entry > peers[i] */
			int mid = lo + (hi - lo) / 2;

			if (peer_cmp(&scratch[mid], &peers[i]) <= 0)
				lo = mid + 1;
			else
				hi = mid;
		}
		c = lo - first;
		counts[i] = c;
		if (c > max)
			max = c;
	}
	return max;
}

long tp_nofile_raise(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return -1;
	if (rl.rlim_cur < rl.rlim_max) {
		struct rlimit want = {rl.rlim_max, rl.rlim_max};

		if (setrlimit(RLIMIT_NOFILE, &want) == 0)
			rl.rlim_cur = rl.rlim_max;
	}
	return rl.rlim_cur == RLIM_INFINITY ? (long)1 << 30 : (long)rl.rlim_cur;
}
