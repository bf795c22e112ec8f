/*
 * shipper.c - see shipper.h.
 *
 * Workload: one window every 15 s in the steady state (a few hundred KiB),
 * a backlog of hundreds after an outage. The queue is a singly linked list
 * of windows through agg_window.next, oldest first, under one mutex; the
 * thread never holds the mutex across a store call. Only the head can be in
 * flight (head_busy): its data may sit in the store's buffers, so it is
 * never dropped; the progress of its delivery (how far its dictionary and
 * rows were added, what is added but not committed) lives in struct
 * progress, touched by the thread alone.
 *
 * The thread loops: wait for work (or for a store to open), make sure the
 * store is open and connected, add the head's entries and rows, flush. A
 * failure keeps everything (the store keeps its buffers, the window stays
 * queued) and sleeps an exponential backoff, cut short by shipper_stop()'s
 * deadline.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "shipper.h"
#include "traceprof/log.h"

#define STOP_GRACE_S 1 /* after the deadline, for the store call in progress */

/* Delivery of the head window, owned by the thread. */
struct progress {
	const struct agg_window *w; /* the window these numbers are about */
	size_t dict_pos;       /* dictionary entries handled (sources, functions, frames, stacks) */
	size_t row_pos;	       /* rows handled */
	uint64_t rows_pending; /* rows added to the store, not committed yet */
	uint64_t samples_pending; /* their samples */
	uint64_t rows_done;	  /* rows committed or refused as invalid */
	uint64_t samples_done;	  /* their samples */
	size_t req_pos;		  /* request rows handled */
	uint64_t reqs_pending;	  /* request rows added, not committed yet */
	uint64_t reqs_done;	  /* request rows committed or refused */
};

struct shipper {
	struct shipper_opts o;	    /* options, defaults filled, strings owned */
	pthread_mutex_t mu;	    /* guards everything below up to `st` */
	pthread_cond_t cv;	    /* work arrived, stop requested, thread done */
	pthread_t thread;	    /* the delivering thread */
	struct agg_window *head;    /* oldest queued window */
	struct agg_window *tail;    /* newest queued window */
	bool head_busy;		    /* the head is in flight: never dropped */
	bool dropping;		    /* in a drop episode (logged once) */
	bool stopping;		    /* shipper_stop() was called */
	bool done;		    /* the thread has finished */
	struct timespec deadline;   /* CLOCK_MONOTONIC end of delivery after stop */
	struct shipper_stats stats; /* counters, queue_bytes and queue_windows */
	struct store *st;	    /* the thread's store; NULL until opened */
	bool need_reconnect;	    /* the thread must store_reconnect() first */
	bool spool_failing;	    /* the last spool write failed (logged once) */
	uint64_t failures;	    /* consecutive failures, for the log */
	struct progress prog;	    /* the head's delivery */
};

/* ---- time ---- */

static struct timespec mono_after(int ms)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	t.tv_sec += ms / 1000;
	t.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (t.tv_nsec >= 1000000000L) {
		t.tv_sec++;
		t.tv_nsec -= 1000000000L;
	}
	return t;
}

static bool ts_before(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec < b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

static bool past(const struct timespec *t)
{
	struct timespec now = mono_after(0);

	return !ts_before(&now, t);
}

/* ---- accounting (called with mu held) ---- */

/* Rows of w to store: sample rows, then off-CPU rows, then GPU rows (one position for all). */
static size_t win_rows(const struct agg_window *w)
{
	return w->nrows + w->noffcpu + w->ngpu;
}

static uint64_t row_samples(const struct store_sample_row *r)
{
	uint64_t n = 0;

	if (!r->counts)
		return r->n;
	for (uint32_t i = 0; i < r->n; i++)
		n += r->counts[i];
	return n;
}

static void set_error(struct shipper *s, const char *what, const char *detail)
{
	snprintf(s->stats.last_error, sizeof(s->stats.last_error), "%s: %s", what, detail);
}

/* The queue's figures as w joins or leaves it (s->mu held). */
static void queue_add(struct shipper *s, const struct agg_window *w)
{
	s->stats.queue_bytes += w->bytes;
	s->stats.queue_windows++;
	if (!w->spool_id) {
		s->stats.samples_unspooled += w->nsamples;
		s->stats.requests_unspooled += w->nrequests;
	}
}

static void queue_sub(struct shipper *s, const struct agg_window *w)
{
	s->stats.queue_bytes -= w->bytes;
	s->stats.queue_windows--;
	if (!w->spool_id) {
		s->stats.samples_unspooled -= w->nsamples;
		s->stats.requests_unspooled -= w->nrequests;
	}
}

/* Unlinks the head (delivered or abandoned). */
static struct agg_window *pop_head(struct shipper *s)
{
	struct agg_window *w = s->head;

	s->head = w->next;
	if (!s->head)
		s->tail = NULL;
	w->next = NULL;
	s->head_busy = false;
	queue_sub(s, w);
	return w;
}

static void count_dropped(struct shipper *s, const struct agg_window *w)
{
	s->stats.windows_dropped++;
	s->stats.rows_dropped += win_rows(w);
	s->stats.samples_dropped += w->nsamples;
	s->stats.requests_dropped += w->nrequests;
}

/* ---- submit ---- */

static void count_submitted(struct shipper *s, const struct agg_window *w)
{
	s->stats.windows_submitted++;
	s->stats.rows_submitted += win_rows(w);
	s->stats.samples_submitted += w->nsamples;
	s->stats.requests_submitted += w->nrequests;
}

/* Appends w to the queue (s->mu held, room checked). */
static void enqueue_locked(struct shipper *s, struct agg_window *w)
{
	w->next = NULL;
	if (s->tail)
		s->tail->next = w;
	else
		s->head = w;
	s->tail = w;
	queue_add(s, w);
	pthread_cond_broadcast(&s->cv);
}

/* Frees w, and its spool file. */
static void discard(struct shipper *s, struct agg_window *w)
{
	if (w)
		spool_remove(s->o.spool, w->spool_id);
	agg_window_free(w);
}

/*
 * Writes w to the spool before it is queued (the caller's thread, no lock
 * held). A window the spool refuses is queued all the same, unspooled.
 */
static void spool_window(struct shipper *s, struct agg_window *w)
{
	int rc;

	w->spool_id = 0;
	if (!s->o.spool)
		return;
	rc = spool_write(s->o.spool, w);
	if (rc && rc != -ENOSPC) {
		bool first;

		pthread_mutex_lock(&s->mu);
		first = !s->spool_failing;
		s->spool_failing = true;
		pthread_mutex_unlock(&s->mu);
		if (first)
			log_warn(
			    "shipper: cannot write to the spool, windows are kept in memory only "
			    "path=%s error=\"%s\"",
			    spool_path(s->o.spool), strerror(-rc));
	} else if (!rc) {
		pthread_mutex_lock(&s->mu);
		s->spool_failing = false;
		pthread_mutex_unlock(&s->mu);
	}
}

/*
 * Takes s->mu for w, spooled already: true with the lock held; false, the
 * lock released and w discarded, when the shipper is stopping.
 */
static bool lock_unless_stopping(struct shipper *s, struct agg_window *w)
{
	pthread_mutex_lock(&s->mu);
	if (s->stopping) {
		pthread_mutex_unlock(&s->mu);
		discard(s, w);
		return false;
	}
	return true;
}

int shipper_offer(struct shipper *s, struct agg_window *w)
{
	if (!s || !w) {
		agg_window_free(w);
		return -EINVAL;
	}
	pthread_mutex_lock(&s->mu);
	if (s->stopping) {
		pthread_mutex_unlock(&s->mu);
		agg_window_free(w);
		return -ESHUTDOWN;
	}
	if (s->stats.queue_bytes + w->bytes > s->o.max_queue_bytes) {
		s->stats.windows_refused++;
		s->stats.requests_refused += w->nrequests;
		pthread_mutex_unlock(&s->mu);
		agg_window_free(w);
		return -EAGAIN;
	}
	pthread_mutex_unlock(&s->mu);
	/* on disk before the sender hears it was accepted */
	spool_window(s, w);
	if (!lock_unless_stopping(s, w))
		return -ESHUTDOWN;
	if (s->stats.queue_bytes + w->bytes > s->o.max_queue_bytes) {
		/* another receiver thread took the room meanwhile */
		s->stats.windows_refused++;
		s->stats.requests_refused += w->nrequests;
		pthread_mutex_unlock(&s->mu);
		discard(s, w);
		return -EAGAIN;
	}
	count_submitted(s, w);
	enqueue_locked(s, w);
	pthread_mutex_unlock(&s->mu);
	return 0;
}

int shipper_submit(struct shipper *s, struct agg_window *w)
{
	struct agg_window *victims = NULL, *v;
	size_t max;
	bool fits, log_drop = false;

	if (!s || !w) {
		agg_window_free(w);
		return -EINVAL;
	}
	max = s->o.max_queue_bytes;
	spool_window(s, w);
	if (!lock_unless_stopping(s, w))
		return -ESHUTDOWN;
	count_submitted(s, w);
	/* Drop the oldest windows that are not in flight until w fits. */
	while (w->bytes <= max && s->stats.queue_bytes + w->bytes > max) {
		struct agg_window *prev = s->head_busy ? s->head : NULL;

		v = prev ? prev->next : s->head;
		if (!v)
			break;
		if (prev) {
			prev->next = v->next;
			if (s->tail == v)
				s->tail = prev;
		} else {
			s->head = v->next;
			if (!s->head)
				s->tail = NULL;
		}
		queue_sub(s, v);
		count_dropped(s, v);
		v->next = victims;
		victims = v;
	}
	fits = s->stats.queue_bytes + w->bytes <= max;
	if (fits) {
		enqueue_locked(s, w);
	} else {
		count_dropped(s, w);
		w->next = victims;
		victims = w;
	}
	if (victims && !s->dropping) {
		s->dropping = true;
		s->stats.drop_episodes++;
		log_drop = true;
	} else if (!victims) {
		s->dropping = false;
	}
	pthread_mutex_unlock(&s->mu);
	if (log_drop)
		log_warn("shipper: queue full, dropping the oldest windows max_queue_bytes=%zu",
			 max);
	while (victims) {
		v = victims;
		victims = v->next;
		discard(s, v);
	}
	return fits ? 0 : -ENOBUFS;
}

/* ---- the thread ---- */

static void note_failure_detail(struct shipper *s, int rc, const char *what, const char *why)
{
	const char *detail = why				 ? why
			     : s->st && *store_last_error(s->st) ? store_last_error(s->st)
								 : strerror(-rc);
	bool first;

	pthread_mutex_lock(&s->mu);
	set_error(s, what, detail);
	s->stats.connected = false;
	s->stats.flush_errors++;
	first = s->failures++ == 0;
	pthread_mutex_unlock(&s->mu);
	if (rc == -ECONNRESET)
		s->need_reconnect = true;
	if (first)
		log_warn("shipper: %s failed, keeping the data and retrying error=\"%s\"", what,
			 detail);
}

static void note_failure(struct shipper *s, int rc, const char *what)
{
	note_failure_detail(s, rc, what, NULL);
}

static void note_success(struct shipper *s)
{
	uint64_t failures;

	pthread_mutex_lock(&s->mu);
	s->stats.connected = true;
	failures = s->failures;
	s->failures = 0;
	pthread_mutex_unlock(&s->mu);
	if (failures)
		log_info("shipper: delivery resumed failed_attempts=%llu",
			 (unsigned long long)failures);
}

static int note_commit(void *ctx, const char *xid);

/* Opens the store or reconnects it as needed. */
static int ensure_store(struct shipper *s)
{
	int rc;

	if (!s->st) {
		struct store_opts so = s->o.store;
		char why[sizeof(s->stats.last_error)] = "";

		/* one log line per outage (note_failure), not one per retry */
		so.quiet_open = true;
		if (s->o.spool) {
			so.before_commit = note_commit;
			so.commit_ctx = s;
		}
		so.open_error = why;
		so.open_error_len = sizeof(why);
		s->st = store_open(s->o.conninfo, &so);
		if (!s->st) {
			rc = -errno;
			note_failure_detail(s, rc, "store open", why[0] ? why : NULL);
			return rc;
		}
		s->need_reconnect = false;
		note_success(s);
	} else if (s->need_reconnect) {
		rc = store_reconnect(s->st);
		if (rc) {
			note_failure(s, rc, "reconnect");
			return rc;
		}
		s->need_reconnect = false;
	}
	return 0;
}

static size_t dict_total(const struct agg_window *w)
{
	return w->nsources + w->nfunctions + w->nframes + w->nstacks + w->nroutes;
}

/* Adds dictionary entry i of w: sources, functions, frames, stacks, routes, in that order. */
static int add_dict(struct store *st, const struct agg_window *w, size_t i)
{
	if (i < w->nsources)
		return store_add_source(st, w->sources[i].id, &w->sources[i].src);
	i -= w->nsources;
	if (i < w->nfunctions) {
		const struct agg_function *f = &w->functions[i];

		return store_add_function(st, f->id, f->name, f->module, f->kind);
	}
	i -= w->nfunctions;
	if (i < w->nframes) {
		const struct agg_frame *f = &w->frames[i];

		return store_add_frame(st, f->id, f->function_id, f->build_id, f->file, f->line,
				       f->address);
	}
	i -= w->nframes;
	if (i < w->nstacks)
		return store_add_stack(st, w->stacks[i].id, w->stacks[i].frame_ids, w->stacks[i].n);
	i -= w->nstacks;
	return store_add_route(st, w->routes[i].id, w->routes[i].method, w->routes[i].route);
}

/*
 * Adds what fits of the head's remaining entries and rows, then flushes.
 * Returns 0 (progress committed) or the failing call's -errno.
 */
static int deliver_chunk(struct shipper *s, const struct agg_window *w)
{
	static const struct store_sample_row none; /* an off-CPU row's samples: none */
	struct progress *p = &s->prog;
	uint64_t inv_rows = 0, inv_samples = 0, inv_dict = 0, inv_reqs = 0;
	bool full = false;
	int rc = 0;

	while (p->dict_pos < dict_total(w)) {
		rc = add_dict(s->st, w, p->dict_pos);
		if (rc == -ENOBUFS) {
			full = true;
			break;
		}
		if (rc == -EINVAL) {
			inv_dict++;
			rc = 0;
		} else if (rc) {
			break;
		}
		p->dict_pos++;
	}
	while (!rc && !full && p->row_pos < win_rows(w)) {
		const struct store_sample_row *r =
		    p->row_pos < w->nrows ? &w->rows[p->row_pos] : &none;

		if (p->row_pos >= w->nrows + w->noffcpu)
			rc = store_add_gpu(s->st, &w->gpu[p->row_pos - w->nrows - w->noffcpu]);
		else if (p->row_pos >= w->nrows)
			rc = store_add_offcpu(s->st, &w->offcpu[p->row_pos - w->nrows]);
		else if (w->trigger_id)
			rc = store_add_trigger_samples(s->st, w->trigger_id, r);
		else
			rc = store_add_samples(s->st, r);
		if (rc == -ENOBUFS) {
			full = true;
			break;
		}
		if (rc == -EINVAL) {
			inv_rows++;
			inv_samples += row_samples(r);
			rc = 0;
		} else if (rc) {
			break;
		} else {
			p->rows_pending++;
			p->samples_pending += row_samples(r);
		}
		p->row_pos++;
	}
	while (!rc && !full && p->row_pos == win_rows(w) && p->req_pos < w->nrequests) {
		rc = store_add_request(s->st, &w->requests[p->req_pos]);
		if (rc == -ENOBUFS) {
			full = true;
			break;
		}
		if (rc == -EINVAL) {
			inv_reqs++;
			rc = 0;
		} else if (rc) {
			break;
		} else {
			p->reqs_pending++;
		}
		p->req_pos++;
	}
	pthread_mutex_lock(&s->mu);
	s->stats.requests_invalid += inv_reqs;
	s->stats.rows_invalid += inv_rows;
	s->stats.samples_invalid += inv_samples;
	s->stats.dict_invalid += inv_dict;
	pthread_mutex_unlock(&s->mu);
	p->rows_done += inv_rows;
	p->samples_done += inv_samples;
	p->reqs_done += inv_reqs;
	if (rc && rc != -ENOBUFS)
		return rc;
	return store_flush(s->st);
}

/*
 * The store's before_commit (shipper thread): records the transaction and
 * how far into the head window it reaches. When that cannot be written the
 * window leaves the spool first: a crash then loses it rather than storing
 * it twice.
 */
static int note_commit(void *ctx, const char *xid)
{
	struct shipper *s = ctx;
	struct progress *p = &s->prog;
	struct agg_window *w = (struct agg_window *)p->w;
	struct spool_commit c = {
	    .dict_pos = p->dict_pos, .row_pos = p->row_pos, .req_pos = p->req_pos};

	if (!w || !w->spool_id)
		return 0;
	snprintf(c.xid, sizeof(c.xid), "%s", xid);
	if (spool_note_commit(s->o.spool, w->spool_id, &c) == 0)
		return 0;
	spool_remove(s->o.spool, w->spool_id);
	pthread_mutex_lock(&s->mu);
	queue_sub(s, w);
	w->spool_id = 0;
	queue_add(s, w);
	pthread_mutex_unlock(&s->mu);
	return 0;
}

/*
 * A window a previous run left in the spool: which of the transactions it
 * recorded committed? Resumes after the last one that did (what it stored
 * counts as delivered). Returns 0, or -errno to retry later.
 */
static int resume_replayed(struct shipper *s, struct agg_window *w)
{
	struct spool_commit c[SPOOL_MAX_COMMITS];
	struct progress *p = &s->prog;
	int n = spool_commits(s->o.spool, w->spool_id, c, SPOOL_MAX_COMMITS);

	for (int i = n - 1; i >= 0; i--) {
		int st = store_xact_status(s->st, c[i].xid);
		uint64_t samples = 0;

		if (st == -EAGAIN || st == -ECONNRESET || st == -EIO)
			return st == -EIO ? -EAGAIN : st;
		if (st != 1)
			continue; /* aborted, or unknown: the rows are not there */
		p->dict_pos = c[i].dict_pos <= dict_total(w) ? c[i].dict_pos : dict_total(w);
		p->row_pos = c[i].row_pos <= win_rows(w) ? c[i].row_pos : win_rows(w);
		p->req_pos = c[i].req_pos <= w->nrequests ? c[i].req_pos : w->nrequests;
		for (size_t r = 0; r < p->row_pos && r < w->nrows; r++)
			samples += row_samples(&w->rows[r]);
		p->rows_done = p->row_pos;
		p->samples_done = samples;
		p->reqs_done = p->req_pos;
		pthread_mutex_lock(&s->mu);
		s->stats.windows_resumed++;
		s->stats.rows_delivered += p->row_pos;
		s->stats.samples_delivered += samples;
		s->stats.requests_delivered += p->req_pos;
		pthread_mutex_unlock(&s->mu);
		log_info("shipper: spooled window %016llx was stored up to transaction %s before "
			 "the restart; resuming after it rows=%zu/%zu requests=%zu/%zu",
			 (unsigned long long)w->spool_id, c[i].xid, p->row_pos, win_rows(w),
			 p->req_pos, w->nrequests);
		break;
	}
	w->spool_replayed = false;
	return 0;
}

/* Delivers the head window w until it is committed or a call fails. */
static int deliver(struct shipper *s, struct agg_window *w)
{
	struct progress *p = &s->prog;
	struct agg_window *done = NULL;
	int rc;

	if (p->w != w)
		*p = (struct progress){.w = w};
	if (w->spool_replayed) {
		rc = resume_replayed(s, w);
		if (rc)
			return rc;
	}
	for (;;) {
		rc = deliver_chunk(s, w);
		if (rc)
			return rc;
		pthread_mutex_lock(&s->mu);
		s->stats.flushes++;
		s->stats.rows_delivered += p->rows_pending;
		s->stats.samples_delivered += p->samples_pending;
		p->rows_done += p->rows_pending;
		p->samples_done += p->samples_pending;
		p->rows_pending = 0;
		p->samples_pending = 0;
		s->stats.requests_delivered += p->reqs_pending;
		p->reqs_done += p->reqs_pending;
		p->reqs_pending = 0;
		if (p->dict_pos == dict_total(w) && p->row_pos == win_rows(w) &&
		    p->req_pos == w->nrequests) {
			done = pop_head(s);
			s->stats.windows_delivered++;
			p->w = NULL;
		}
		pthread_mutex_unlock(&s->mu);
		if (done) {
			if (done->spool_id && s->o.after_commit)
				s->o.after_commit(s->o.hook_ctx, done);
			discard(s, done);
			return 0;
		}
	}
}

/* Sleeps *backoff (doubled each time, capped) or until the stop deadline. */
static void sleep_backoff(struct shipper *s, int *backoff)
{
	struct timespec until;

	*backoff = *backoff ? *backoff * 2 : s->o.backoff_min_ms;
	if (*backoff > s->o.backoff_max_ms)
		*backoff = s->o.backoff_max_ms;
	until = mono_after(*backoff);
	pthread_mutex_lock(&s->mu);
	for (;;) {
		struct timespec t = until;

		if (s->stopping && ts_before(&s->deadline, &t))
			t = s->deadline;
		if (past(&t))
			break;
		pthread_cond_timedwait(&s->cv, &s->mu, &t);
	}
	pthread_mutex_unlock(&s->mu);
}

/* At exit: what stays queued is undelivered (with mu held). */
static void count_undelivered(struct shipper *s)
{
	for (struct agg_window *w = s->head; w; w = w->next) {
		bool head = w == s->head && s->prog.w == w;

		s->stats.windows_undelivered++;
		s->stats.rows_undelivered += win_rows(w) - (head ? s->prog.rows_done : 0);
		s->stats.samples_undelivered += w->nsamples - (head ? s->prog.samples_done : 0);
		s->stats.requests_undelivered += w->nrequests - (head ? s->prog.reqs_done : 0);
	}
}

static void *run(void *arg)
{
	struct shipper *s = arg;
	int backoff = 0;

	pthread_setname_np(pthread_self(), "tp-shipper");
	for (;;) {
		struct agg_window *w;
		int rc;

		pthread_mutex_lock(&s->mu);
		while (!s->stopping && !s->head && s->st && !s->need_reconnect)
			pthread_cond_wait(&s->cv, &s->mu);
		if (s->stopping && (!s->head || past(&s->deadline)))
			break;
		pthread_mutex_unlock(&s->mu);

		rc = ensure_store(s);
		if (!rc) {
			pthread_mutex_lock(&s->mu);
			w = s->head;
			if (w)
				s->head_busy = true;
			pthread_mutex_unlock(&s->mu);
			rc = w ? deliver(s, w) : 0;
			if (rc)
				note_failure(s, rc, "flush");
		}
		if (!rc) {
			note_success(s);
			backoff = 0;
			continue;
		}
		sleep_backoff(s, &backoff);
	}
	count_undelivered(s);
	s->done = true;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

/* ---- life cycle ---- */

/* Queues what a previous run left in the spool, before anything new. */
static void load_spool(struct shipper *s)
{
	struct agg_window *w = spool_load(s->o.spool), *next;

	for (; w; w = next) {
		next = w->next;
		count_submitted(s, w);
		s->stats.windows_recovered++;
		enqueue_locked(s, w);
	}
}

static void free_opts(struct shipper *s)
{
	free((char *)s->o.conninfo);
	free((char *)s->o.store.app_name);
}

struct shipper *shipper_start(const struct shipper_opts *opts)
{
	struct shipper *s;
	pthread_condattr_t ca;
	int rc;

	if (!opts || opts->backoff_min_ms < 0 || opts->backoff_max_ms < 0) {
		errno = EINVAL;
		return NULL;
	}
	s = calloc(1, sizeof(*s));
	if (!s) {
		errno = ENOMEM;
		return NULL;
	}
	s->o = *opts;
	s->o.conninfo = opts->conninfo ? strdup(opts->conninfo) : NULL;
	s->o.store.app_name = opts->store.app_name ? strdup(opts->store.app_name) : NULL;
	if ((opts->conninfo && !s->o.conninfo) || (opts->store.app_name && !s->o.store.app_name)) {
		free_opts(s);
		free(s);
		errno = ENOMEM;
		return NULL;
	}
	if (!s->o.max_queue_bytes)
		s->o.max_queue_bytes = SHIPPER_DEFAULT_QUEUE_BYTES;
	if (!s->o.backoff_min_ms)
		s->o.backoff_min_ms = SHIPPER_DEFAULT_BACKOFF_MIN;
	if (!s->o.backoff_max_ms)
		s->o.backoff_max_ms = SHIPPER_DEFAULT_BACKOFF_MAX;
	if (s->o.backoff_max_ms < s->o.backoff_min_ms)
		s->o.backoff_max_ms = s->o.backoff_min_ms;
	pthread_mutex_init(&s->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&s->cv, &ca);
	pthread_condattr_destroy(&ca);
	load_spool(s);
	rc = pthread_create(&s->thread, NULL, run, s);
	if (rc) {
		pthread_cond_destroy(&s->cv);
		pthread_mutex_destroy(&s->mu);
		free_opts(s);
		free(s);
		errno = rc;
		return NULL;
	}
	return s;
}

int shipper_stop(struct shipper *s, int timeout_ms)
{
	struct timespec until;
	int rc;

	if (!s)
		return -EINVAL;
	pthread_mutex_lock(&s->mu);
	if (!s->stopping) {
		s->stopping = true;
		s->deadline = mono_after(timeout_ms > 0 ? timeout_ms : 0);
		pthread_cond_broadcast(&s->cv);
	}
	/* The thread checks the deadline between store calls: give the last one a moment. */
	until = s->deadline;
	until.tv_sec += STOP_GRACE_S;
	while (!s->done && !past(&until))
		pthread_cond_timedwait(&s->cv, &s->mu, &until);
	rc = s->done && !s->head ? 0 : -ETIMEDOUT;
	pthread_mutex_unlock(&s->mu);
	return rc;
}

void shipper_get_stats(struct shipper *s, struct shipper_stats *out)
{
	pthread_mutex_lock(&s->mu);
	*out = s->stats;
	pthread_mutex_unlock(&s->mu);
}

void shipper_free(struct shipper *s)
{
	if (!s)
		return;
	shipper_stop(s, 0);
	pthread_join(s->thread, NULL);
	while (s->head)
		agg_window_free(pop_head(s));
	store_free(s->st);
	pthread_cond_destroy(&s->cv);
	pthread_mutex_destroy(&s->mu);
	free_opts(s);
	free(s);
}
