/*
 * listen.h - a listening TCP socket from a "host:port" address, as every
 * server of traceprof takes one (the OTLP receivers, the control port,
 * the controller's health endpoint).
 */
#ifndef TRACEPROF_LISTEN_H
#define TRACEPROF_LISTEN_H

#include <stddef.h>

/* tp_listen_tcp flags */
#define TP_LISTEN_NUMERIC 1u /* the host must be a numeric IPv4 or IPv6 address */

/*
 * Splits "host:port", "[v6]:port" or ":port" into host (brackets removed;
 * empty: any address) and port (digits, at most 65535, pointing into
 * addr). Returns 0, or -EINVAL when addr is not of that form.
 */
int tp_addr_split(const char *addr, char *host, size_t hostlen, const char **port);

/*
 * Binds (SO_REUSEADDR) and listens with backlog on the first address that
 * addr resolves to and that can be bound; sock_flags (SOCK_NONBLOCK) are
 * added to SOCK_STREAM | SOCK_CLOEXEC. The bound port goes into *port
 * when port is not NULL. Returns the socket, or a negative errno with err
 * set to a message that starts with the quoted address:
 *   -EINVAL  addr is not host:port, or does not resolve;
 *   -ENOENT  TP_LISTEN_NUMERIC and the host is a name or empty;
 *   other    why socket(), bind() or listen() failed (-EADDRINUSE...).
 */
int tp_listen_tcp(const char *addr, unsigned flags, int sock_flags, int backlog, int *port,
		  char *err, size_t errlen);

#endif
