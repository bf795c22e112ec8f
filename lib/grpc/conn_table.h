/*
 * conn_table.h - the connections a gRPC acceptor handed to the gRPC core,
 * counted per port and per peer address so that it can refuse past its
 * caps (traceprof/listen.h, struct tp_conn_limits).
 *
 * The core closes a connection's socket when the connection ends and says
 * nothing, so each entry keeps (fd, socket inode): an entry whose fd no
 * longer shows that inode (fstat fails, or another file took the number)
 * is gone. Entries are checked only when a cap is reached, at most every
 * CONN_TABLE_SWEEP_MS, so a flood of connections past a cap costs one
 * accept and one close each. At a cap a newcomer evicts a connection
 * instead of being refused (shutdown(), after checking its inode again):
 * at its peer's cap, or when its peer is among the heaviest, one of its
 * own peer's; when the port is full and its peer holds less than half as
 * many connections as the heaviest peers, one of theirs. The victim is the
 * first that never sent a byte, else the one receiving the fewest bytes/s
 * since admitted (TCP_INFO), never one that received data since it last
 * sent (a call may await its answer). So many connections from a few
 * addresses cannot keep out a peer with one, idle and slow connections
 * cannot keep out a well-behaved client of their own address, and heavy
 * peers do not churn by evicting each other. An evicted
 * connection keeps its descriptor (and the core's memory) until the core
 * notices the end, so evicted ones are remembered as well, up to
 * max_conns: past that, new connections are refused. A port thus holds at
 * most 2 x max_conns descriptors.
 * One thread (the acceptor) uses a table; the counters are read from any.
 */
#ifndef TRACEPROF_GRPC_CONN_TABLE_H
#define TRACEPROF_GRPC_CONN_TABLE_H

#include <sys/socket.h>

#include "traceprof/listen.h"

#define CONN_TABLE_SWEEP_MS 100

struct conn_table;

/* A table for lim (resolved, borrowed for the call). NULL with errno set. */
struct conn_table *conn_table_new(const struct tp_conn_limits *lim);
/*
 * Admits fd, accepted from sa: 0 (fd is now remembered), -EMFILE (the port
 * is full and nothing could be evicted) or -EUSERS (the peer is at its
 * cap and none of its connections could be evicted). The caller closes a refused fd; refusals are
 * counted here.
 */
int conn_table_admit(struct conn_table *t, int fd, const struct sockaddr *sa);
/* The counters (open = entries as last checked). */
void conn_table_get_stats(struct conn_table *t, struct tp_conn_stats *out);
/* Frees the table (the fds stay with their owner). NULL is a no-op. */
void conn_table_free(struct conn_table *t);

#endif
