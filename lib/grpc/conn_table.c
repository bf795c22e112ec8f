/*
 * conn_table.c - see conn_table.h.
 *
 * Workload: a few long-lived exporter connections per node, and, under
 * attack, floods of connections that are refused at the cap. Entries are a
 * dense array of at most max_conns; every lookup is a linear pass (a few
 * hundred entries), cheaper than any index at this size.
 */
#include "conn_table.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>

struct entry {
	int fd;		     /* the socket handed over */
	ino_t ino;	     /* its inode when handed over */
	struct tp_peer peer; /* its peer's address */
	uint64_t seq;	     /* admission order (oldest: smallest) */
};

struct conn_table {
	struct tp_conn_limits lim;     /* caps */
	struct entry *e;	       /* max_conns entries: live connections */
	struct entry *gone;	       /* max_conns: evicted, until the core closes them */
	int ngone;		       /* entries in gone */
	struct tp_peer *peers;	       /* max_conns: the entries' peers, for counting */
	struct tp_peer *scratch;       /* max_conns: tp_peer_counts' sort space */
	int *counts;		       /* max_conns: each entry's peer's count */
	uint64_t seq;		       /* next admission's number */
	int n;			       /* entries in use */
	int64_t swept_ms;	       /* last sweep, CLOCK_MONOTONIC */
	_Atomic uint64_t accepted;     /* admitted */
	_Atomic uint64_t refused_full; /* refused at max_conns */
	_Atomic uint64_t refused_peer; /* refused at max_per_peer */
	_Atomic uint64_t evicted;      /* shut down to admit another peer */
	_Atomic uint64_t open;	       /* n, for readers on other threads */
};

static int64_t now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

void conn_table_free(struct conn_table *t)
{
	if (!t)
		return;
	free(t->e);
	free(t->gone);
	free(t->peers);
	free(t->scratch);
	free(t->counts);
	free(t);
}

struct conn_table *conn_table_new(const struct tp_conn_limits *lim)
{
	struct conn_table *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->lim = *lim;
	t->e = calloc((size_t)lim->max_conns, sizeof(*t->e));
	t->gone = calloc((size_t)lim->max_conns, sizeof(*t->gone));
	t->peers = calloc((size_t)lim->max_conns, sizeof(*t->peers));
	t->scratch = calloc((size_t)lim->max_conns, sizeof(*t->scratch));
	t->counts = calloc((size_t)lim->max_conns, sizeof(*t->counts));
	if (!t->e || !t->gone || !t->peers || !t->scratch || !t->counts) {
		conn_table_free(t);
		errno = ENOMEM;
		return NULL;
	}
	t->swept_ms = INT64_MIN / 2;
	return t;
}

static bool still_open(const struct entry *e)
{
	struct stat st;

	return fstat(e->fd, &st) == 0 && S_ISSOCK(st.st_mode) && st.st_ino == e->ino;
}

static void drop(struct conn_table *t, int i)
{
	t->e[i] = t->e[--t->n];
}

/* Forgets the connections the core closed; at most every CONN_TABLE_SWEEP_MS unless forced. */
static void sweep(struct conn_table *t, bool force)
{
	int64_t now = now_ms();

	if (!force && now - t->swept_ms < CONN_TABLE_SWEEP_MS)
		return;
	t->swept_ms = now;
	for (int i = 0; i < t->n;)
		if (still_open(&t->e[i]))
			i++;
		else
			drop(t, i);
	for (int i = 0; i < t->ngone;)
		if (still_open(&t->gone[i]))
			i++;
		else
			t->gone[i] = t->gone[--t->ngone];
}

static int peer_count(const struct conn_table *t, const struct tp_peer *p)
{
	int n = 0;

	for (int i = 0; i < t->n; i++)
		n += tp_peer_eq(&t->e[i].peer, p);
	return n;
}

/*
 * The port is full: shuts down the newest connection among those of the
 * peers holding the most connections, when they hold more than twice what
 * the newcomer's peer holds (mine): a light peer gets in, heavy peers do
 * not evict each other. Long-lived connections (exporters that connected
 * before a flood) are the last to go. Returns whether a slot was freed;
 * O(n log n).
 */
static bool evict(struct conn_table *t, int mine)
{
	int best = -1, max;

	for (int i = 0; i < t->n; i++)
		t->peers[i] = t->e[i].peer;
	max = tp_peer_counts(t->peers, t->n, t->scratch, t->counts);
	if (max <= 2 * mine)
		return false;
	if (t->ngone >= t->lim.max_conns)
		sweep(t, true);
	if (t->ngone >= t->lim.max_conns)
		return false; /* the core is slower to close than the peers are to come */
	for (int i = 0; i < t->n; i++)
		if (t->counts[i] == max && (best < 0 || t->e[i].seq > t->e[best].seq))
			best = i;
	/* checked again: shutting down a number the core closed could hit another file */
	if (still_open(&t->e[best])) {
		(void)shutdown(t->e[best].fd, SHUT_RDWR); /* the core sees EOF and closes it */
		t->gone[t->ngone++] = t->e[best];	  /* its descriptor counts until then */
	}
	drop(t, best);
	atomic_fetch_add(&t->evicted, 1);
	return true;
}

int conn_table_admit(struct conn_table *t, int fd, const struct sockaddr *sa)
{
	struct tp_peer p = tp_peer_of(sa);
	struct stat st;
	int mine;

	/* the number may be a closed connection's, reused by this accept */
	for (int i = 0; i < t->n; i++)
		if (t->e[i].fd == fd) {
			drop(t, i);
			break;
		}
	for (int i = 0; i < t->ngone; i++)
		if (t->gone[i].fd == fd) {
			t->gone[i] = t->gone[--t->ngone];
			break;
		}
	mine = peer_count(t, &p);
	if (mine >= t->lim.max_per_peer || t->n >= t->lim.max_conns) {
		sweep(t, false);
		mine = peer_count(t, &p);
	}
	if (mine >= t->lim.max_per_peer) {
		atomic_fetch_add(&t->refused_peer, 1);
		atomic_store(&t->open, (uint64_t)t->n);
		return -EUSERS;
	}
	if (t->n >= t->lim.max_conns && !evict(t, mine)) {
		atomic_fetch_add(&t->refused_full, 1);
		atomic_store(&t->open, (uint64_t)t->n);
		return -EMFILE;
	}
	if (fstat(fd, &st) != 0)
		return -errno;
	t->e[t->n++] = (struct entry){.fd = fd, .ino = st.st_ino, .peer = p, .seq = t->seq++};
	atomic_fetch_add(&t->accepted, 1);
	atomic_store(&t->open, (uint64_t)t->n);
	return 0;
}

void conn_table_get_stats(struct conn_table *t, struct tp_conn_stats *out)
{
	*out = (struct tp_conn_stats){
	    .accepted = atomic_load(&t->accepted),
	    .refused_full = atomic_load(&t->refused_full),
	    .refused_peer = atomic_load(&t->refused_peer),
	    .evicted = atomic_load(&t->evicted),
	    .open = atomic_load(&t->open),
	};
}
