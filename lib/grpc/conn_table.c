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
#include <netinet/in.h>
#include <linux/tcp.h> /* struct tcp_info with tcpi_bytes_received */
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>

struct entry {
	int fd;		     /* the socket handed over */
	ino_t ino;	     /* its inode when handed over */
	struct tp_peer peer; /* its peer's address */
	int64_t since_ms;    /* admitted, CLOCK_MONOTONIC */
};

struct conn_table {
	struct tp_conn_limits lim;     /* caps */
	struct entry *e;	       /* max_conns entries: live connections */
	struct entry *gone;	       /* max_conns: evicted, until the core closes them */
	int ngone;		       /* entries in gone */
	struct tp_peer *peers;	       /* max_conns: the entries' peers, for counting */
	struct tp_peer *scratch;       /* max_conns: tp_peer_counts' sort space */
	int *counts;		       /* max_conns: each entry's peer's count */
	int n;			       /* entries in use */
	int64_t swept_ms;	       /* last sweep, CLOCK_MONOTONIC */
	_Atomic uint64_t accepted;     /* admitted */
	_Atomic uint64_t refused_full; /* refused at max_conns */
	_Atomic uint64_t refused_peer; /* refused at max_per_peer */
	_Atomic uint64_t evicted;      /* shut down to admit another connection */
	_Atomic uint64_t evicted_idle; /* of those: nothing received yet, or for a second */
	_Atomic uint64_t evicted_slow; /* of those: the fewest bytes/s received */
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

/* What eviction knows of a connection, from the kernel (TCP_INFO). */
struct activity {
	bool busy;	/* received since it last sent: a call may await its answer */
	bool silent;	/* has not sent a byte */
	bool idle;	/* nothing received for a second (or ever) */
	uint64_t rate;	/* bytes/s received since admitted (a second at least) */
	int64_t age_ms; /* since admitted */
};

static void activity_of(const struct entry *e, int64_t now, struct activity *a)
{
	struct tcp_info ti = {0};
	socklen_t len = sizeof(ti);
	int64_t age = now - e->since_ms;

	*a = (struct activity){.age_ms = age};
	if (getsockopt(e->fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0) {
		a->silent = a->idle = true; /* gone or not TCP: nothing to lose */
		return;
	}
	a->silent = ti.tcpi_bytes_received == 0;
	a->busy = !a->silent && ti.tcpi_last_data_recv < ti.tcpi_last_data_sent &&
		  ti.tcpi_last_data_recv < 1000;
	a->idle = a->silent || ti.tcpi_last_data_recv >= 1000;
	a->rate = ti.tcpi_bytes_received * 1000 / (uint64_t)(age > 1000 ? age : 1000);
}

/*
 * The connections a newcomer from p (holding mine) may replace: its own
 * peer's when that peer is at its cap or among the heaviest, else those of
 * the peers holding the most when that is more than twice mine (heavy
 * peers do not churn by evicting each other). Of those, the first that has
 * never sent a byte goes, else the one receiving the fewest bytes/s;
 * never one that may await the answer to a call (data received in the
 * last second, after the server last sent). Returns its index or -1
 * (*idle: why); O(n log n) plus a TCP_INFO per candidate looked at.
 */
static int pick(struct conn_table *t, const struct tp_peer *p, int mine, bool *idle)
{
	int best = -1, max;
	uint64_t best_rate = UINT64_MAX;
	int64_t now = now_ms();
	bool own = mine >= t->lim.max_per_peer;

	for (int i = 0; i < t->n; i++)
		t->peers[i] = t->e[i].peer;
	max = tp_peer_counts(t->peers, t->n, t->scratch, t->counts);
	own = own || max <= 2 * mine;
	for (int i = 0; i < t->n; i++) {
		struct activity a;

		if (own ? !tp_peer_eq(&t->e[i].peer, p) : t->counts[i] != max)
			continue;
		activity_of(&t->e[i], now, &a);
		if (a.silent) {
			*idle = true;
			return i;
		}
		if (!a.busy && a.rate < best_rate) {
			best = i;
			best_rate = a.rate;
			*idle = a.idle;
		}
	}
	return best;
}

/*
 * A cap is reached: shuts down the connection pick() chose, so a
 * well-behaved client is served beside idle and slow connections from
 * its own address, and a light peer beside heavy ones. Returns whether a
 * slot was freed.
 */
static bool evict(struct conn_table *t, const struct tp_peer *p, int mine)
{
	bool idle = false;
	int best;

	if (t->ngone >= t->lim.max_conns)
		sweep(t, true);
	if (t->ngone >= t->lim.max_conns)
		return false; /* the core is slower to close than the peers are to come */
	best = pick(t, p, mine, &idle);
	if (best < 0)
		return false;
	/* checked again: shutting down a number the core closed could hit another file */
	if (still_open(&t->e[best])) {
		(void)shutdown(t->e[best].fd, SHUT_RDWR); /* the core sees EOF and closes it */
		t->gone[t->ngone++] = t->e[best];	  /* its descriptor counts until then */
	}
	drop(t, best);
	atomic_fetch_add(idle ? &t->evicted_idle : &t->evicted_slow, 1);
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
	if ((mine >= t->lim.max_per_peer || t->n >= t->lim.max_conns) && !evict(t, &p, mine)) {
		bool peer = mine >= t->lim.max_per_peer;

		atomic_fetch_add(peer ? &t->refused_peer : &t->refused_full, 1);
		atomic_store(&t->open, (uint64_t)t->n);
		return peer ? -EUSERS : -EMFILE;
	}
	if (fstat(fd, &st) != 0)
		return -errno;
	t->e[t->n++] = (struct entry){.fd = fd, .ino = st.st_ino, .peer = p, .since_ms = now_ms()};
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
	    .evicted_idle = atomic_load(&t->evicted_idle),
	    .evicted_slow = atomic_load(&t->evicted_slow),
	    .open = atomic_load(&t->open),
	};
}
