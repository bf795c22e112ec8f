/*
 * test_listen.c - the listening socket every traceprof server opens from a
 * "host:port" address (include/traceprof/listen.h): the address forms
 * accepted and refused, the port bound, an address in use, and the numeric
 * mode that leaves names to gRPC.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "traceprof/listen.h"

int main(void)
{
	char host[64], err[256], busy[64];
	const char *port = NULL;
	int fd, fd2, p = 0;

	CHECK(tp_addr_split("127.0.0.1:4317", host, sizeof(host), &port) == 0 &&
		  !strcmp(host, "127.0.0.1") && !strcmp(port, "4317"),
	      "ipv4: %s %s", host, port);
	CHECK(tp_addr_split("[::1]:80", host, sizeof(host), &port) == 0 && !strcmp(host, "::1") &&
		  !strcmp(port, "80"),
	      "ipv6 in brackets: %s %s", host, port);
	CHECK(tp_addr_split(":8081", host, sizeof(host), &port) == 0 && host[0] == '\0',
	      "empty host means any: '%s'", host);
	CHECK(tp_addr_split("nonsense", host, sizeof(host), &port) == -EINVAL, "no port");
	CHECK(tp_addr_split("host:", host, sizeof(host), &port) == -EINVAL, "empty port");
	CHECK(tp_addr_split("host:65536", host, sizeof(host), &port) == -EINVAL, "port too big");
	CHECK(tp_addr_split("host:12a", host, sizeof(host), &port) == -EINVAL, "port not digits");
	CHECK(tp_addr_split("averyveryveryverylonghostname:1", host, 8, &port) == -EINVAL,
	      "host longer than the buffer");

	fd = tp_listen_tcp("127.0.0.1:0", 0, 0, 16, &p, err, sizeof(err));
	CHECK(fd >= 0 && p > 0, "listens on a free port: fd %d port %d %s", fd, p, err);
	snprintf(busy, sizeof(busy), "127.0.0.1:%d", p);
	fd2 = tp_listen_tcp(busy, 0, 0, 16, NULL, err, sizeof(err));
	CHECK(fd2 == -EADDRINUSE && strstr(err, busy) && strstr(err, "in use"),
	      "port in use: %d %s", fd2, err);
	if (fd >= 0)
		close(fd);
	fd = tp_listen_tcp("nonsense", 0, 0, 16, NULL, err, sizeof(err));
	CHECK(fd == -EINVAL && strstr(err, "'nonsense' is not HOST:PORT"), "bad address: %s", err);
	fd = tp_listen_tcp("localhost:0", TP_LISTEN_NUMERIC, 0, 16, NULL, err, sizeof(err));
	CHECK(fd == -ENOENT, "numeric mode refuses a name: %d %s", fd, err);
	fd = tp_listen_tcp(":0", TP_LISTEN_NUMERIC, 0, 16, NULL, err, sizeof(err));
	CHECK(fd == -ENOENT, "numeric mode refuses an empty host: %d", fd);
	fd = tp_listen_tcp("[::1]:0", TP_LISTEN_NUMERIC, 0, 16, &p, err, sizeof(err));
	if (fd == -EADDRNOTAVAIL || fd == -EAFNOSUPPORT) {
		fprintf(stderr, "no IPv6 loopback here: [::1] check skipped\n");
	} else {
		CHECK(fd >= 0 && p > 0, "ipv6 literal in numeric mode: %d %s", fd, err);
		if (fd >= 0)
			close(fd);
	}
	return check_done();
}
