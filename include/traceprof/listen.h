/*
 * listen.h - a listening TCP socket from a "host:port" address, as every
 * server of traceprof takes one (the OTLP receivers, the control port,
 * the controller's health endpoint).
 */
#ifndef TRACEPROF_LISTEN_H
#define TRACEPROF_LISTEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

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

/*
 * Connection limits of a listening port, applied before any
 * authentication (docs/agent.md, "Connection limits"). Every port of the
 * agent takes one; 0 in a field means "the default" (TP_CONN_DEF_*).
 */
struct tp_conn_limits {
	int max_conns;	       /* concurrent connections on the port */
	int max_per_peer;      /* concurrent connections from one peer address */
	int idle_timeout_ms;   /* no request in progress (first byte, keep-alive) */
	int header_timeout_ms; /* HTTP: request line and headers, from their first byte */
	int min_body_rate;     /* HTTP: bytes/s a body must keep on average */
	int grpc_max_age_ms;   /* gRPC: a connection is closed (GOAWAY) after this */
	int grpc_keepalive_ms; /* gRPC: ping an idle transport after this */
	int grpc_handshake_ms; /* gRPC: TLS handshake deadline (TLS ports) */
};

#define TP_CONN_DEF_MAX		 256
#define TP_CONN_DEF_PER_PEER	 64
#define TP_CONN_DEF_IDLE_MS	 30000
#define TP_CONN_DEF_HEADER_MS	 5000
#define TP_CONN_DEF_BODY_RATE	 (64 * 1024)
#define TP_CONN_DEF_AGE_MS	 (30 * 60 * 1000)
#define TP_CONN_DEF_KEEPALIVE_MS 60000
#define TP_CONN_DEF_HANDSHAKE_MS 10000

/* Counters of one port's connections (live; read from any thread). */
struct tp_conn_stats {
	uint64_t accepted;	    /* connections admitted */
	uint64_t refused_full;	    /* refused: the port was at max_conns */
	uint64_t refused_peer;	    /* refused: the peer was at max_per_peer */
	uint64_t evicted;	    /* closed to admit another connection (sum of the reasons) */
	uint64_t evicted_idle;	    /* of those: waiting for a request (none yet, or kept alive) */
	uint64_t evicted_slow_head; /* of those: request head arriving below min_body_rate */
	uint64_t evicted_slow_body; /* of those: HTTP body below min_body_rate */
	uint64_t evicted_slow;	    /* of those: gRPC, the fewest bytes/s received */
	uint64_t timeouts;	    /* closed by a timeout (idle, headers, body) */
	uint64_t open;		    /* open now (gRPC: as last counted) */
	uint64_t bodies_refused;    /* HTTP: refused, large bodies over their budget */
	uint64_t no_encoding;	    /* gRPC: calls refused, compressed without grpc-encoding */
	uint64_t extra_messages;    /* gRPC: unary calls refused, more than one message */
};

/* A peer's address as 16 bytes (IPv4 as v4-mapped IPv6); port left out. */
struct tp_peer {
	uint8_t a[16]; /* the address */
};

/*
 * lim with every 0 field replaced by its default, and max_conns lowered to
 * 1/16 of the soft RLIMIT_NOFILE: a gRPC port holds at most twice its cap
 * (conn_table.h), so the three ports at their caps use at most 5/16 and the
 * agent keeps the rest for itself. Returns the result.
 */
struct tp_conn_limits tp_conn_limits_resolve(const struct tp_conn_limits *lim);

/* The peer address of a socket address (AF_INET, AF_INET6; others: zeros). */
struct tp_peer tp_peer_of(const struct sockaddr *sa);
/* Whether two peers are the same address. */
bool tp_peer_eq(const struct tp_peer *a, const struct tp_peer *b);

/*
 * counts[i] = how many of peers[0..n) equal peers[i], in O(n log n) with
 * scratch (n entries). Returns the largest count (0 when n is 0).
 */
int tp_peer_counts(const struct tp_peer *peers, int n, struct tp_peer *scratch, int *counts);

/*
 * Raises the soft RLIMIT_NOFILE to the hard one. Returns the soft limit in
 * force afterwards (the old one when it cannot be raised).
 */
long tp_nofile_raise(void);

#endif
