/*
 * listen.c - see include/traceprof/listen.h.
 */
#include "traceprof/listen.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
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
