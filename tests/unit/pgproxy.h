/*
 * pgproxy.h - a PostgreSQL wire-protocol relay for tests that need a
 * connection to fail at an exact point.
 *
 * The proxy listens on a Unix socket in a directory of its own and relays
 * each client connection to the real server socket, one connection at a
 * time, in a thread. It reads the client's messages (startup, then type +
 * length framing) so it can act on the next simple-query COMMIT: drop it and
 * cut the connection (the server aborts: outcome "aborted"), or forward it,
 * wait for the server's ReadyForQuery and cut the connection before the
 * client sees the reply (the server committed, the client cannot know).
 */
#ifndef TRACEPROF_PGPROXY_H
#define TRACEPROF_PGPROXY_H

#include <stddef.h>

enum pgproxy_mode {
	PGPROXY_PASS = 0,	   /* relay everything */
	PGPROXY_DROP_COMMIT,	   /* next COMMIT: not forwarded, connection cut */
	PGPROXY_LOSE_COMMIT_REPLY, /* next COMMIT: forwarded, its reply never delivered */
};

struct pgproxy;

/*
 * Starts a proxy for the server of libpq conninfo `server` (host = socket
 * directory, port). Writes the conninfo to reach it through the proxy, with
 * dbname, user and passfile of `server`, to out. Returns NULL on failure (message on
 * stderr). Stop and free with pgproxy_stop().
 */
struct pgproxy *pgproxy_start(const char *server, char *out, size_t len);
/* Applies to the next COMMIT, then the mode returns to PGPROXY_PASS. */
void pgproxy_set_mode(struct pgproxy *p, enum pgproxy_mode mode);
void pgproxy_stop(struct pgproxy *p);

#endif
