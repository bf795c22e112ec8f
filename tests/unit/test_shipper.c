/*
 * test_shipper: windows from the aggregator shipped into a real PostgreSQL.
 *
 * - delivery: every sample lands exactly once (sum of counts per trace and
 *   per window equals what was submitted), every dictionary entry the rows
 *   reference is present;
 * - outage (a private cluster stopped and started): no crash, the queue
 *   stays within its bound, the oldest windows are dropped and counted in
 *   one episode, the window in flight is kept, delivery resumes, and
 *   delivered + dropped == submitted exactly, checked against the database;
 *   a restart while windows keep coming loses and duplicates nothing;
 * - database down at start: the shipper keeps retrying store_open() and
 *   delivers once it is up;
 * - stop with the database down returns within its deadline and reports
 *   what was not delivered.
 * Waits poll with generous deadlines; nothing asserts on timing otherwise.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "aggregate.h"
#include "check.h"
#include "shipper.h"
#include "testdb.h"
#include "traceprof/ids.h"
#include "traceprof/log.h"
#include "traceprof/pgcluster.h"

#define SEC	   1000000LL
#define MAX_WIN	   400
#define TRACES	   10 /* tagged requests per window */
#define NSTACKS	   5
#define POLL_LIMIT 120 /* seconds any wait may take before the test fails */

/* What was submitted, window by window. */
struct sent {
	int64_t bucket[MAX_WIN];   /* window start */
	uint64_t samples[MAX_WIN]; /* its samples */
	uint64_t rows[MAX_WIN];	   /* its rows */
	int n;			   /* windows made */
};

static struct agg *agg;
static uint64_t stacks[NSTACKS];
static int64_t base_us;
static struct sent sent;

static int64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * SEC + ts.tv_nsec / 1000;
}

static double mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void trace_of(int win, int j, uint8_t out[16])
{
	memset(out, 0, 16);
	out[0] = 0x7e;
	out[6] = (uint8_t)(win >> 8);
	out[7] = (uint8_t)win;
	out[15] = (uint8_t)(j + 1);
}

static void register_dict(void)
{
	struct store_source src = {"checkout", "shop", "checkout-1", "c0", "node-1", "b1d", ""};
	uint64_t fn[3], fr[4];

	CHECK(agg_add_source(agg, 11, &src) == 0, "source");
	for (int i = 0; i < 3; i++) {
		char name[32];

		snprintf(name, sizeof(name), "shop::step%d", i);
		fn[i] = ids_function("/usr/bin/shop", name);
		CHECK(agg_add_function(agg, fn[i], name, "/usr/bin/shop", 0) == 0, "function");
	}
	for (int i = 0; i < 4; i++) {
		fr[i] = ids_frame(fn[i % 3], "b1d", "shop.c", 10 * i + 1, 0x400000 + (uint64_t)i);
		CHECK(agg_add_frame(agg, fr[i], fn[i % 3], "b1d", "shop.c", 10 * i + 1,
				    0x400000 + (uint64_t)i) == 0,
		      "frame");
	}
	for (int s = 0; s < NSTACKS; s++) {
		/* Prefixes of fr[0..3], the last one with fr[0] again: 5 distinct stacks. */
		uint64_t f[5] = {fr[0], fr[1], fr[2], fr[3], fr[0]};

		stacks[s] = ids_stack(f, (size_t)s + 1);
		CHECK(agg_add_stack(agg, stacks[s], f, (size_t)s + 1) == 0, "stack");
	}
}

/* The next window: TRACES requests with 1..4 samples each, 7 untagged samples. */
static struct agg_window *make_window(void)
{
	int k = sent.n;
	struct agg_sample s = {.time_us = base_us + k * SEC, .source_id = 11, .hz = 19};
	struct agg_window *w;

	for (int j = 0; j < TRACES; j++) {
		trace_of(k, j, s.trace_id);
		s.span_id = (uint64_t)j + 1;
		for (int i = 0; i <= j % 4; i++) {
			s.stack_id = stacks[(i + j) % NSTACKS];
			agg_add(agg, &s);
		}
	}
	memset(s.trace_id, 0, 16);
	s.span_id = 0;
	s.hz = 99;
	for (int i = 0; i < 7; i++) {
		s.stack_id = stacks[i % NSTACKS];
		agg_add(agg, &s);
	}
	agg_close(agg);
	w = agg_take(agg);
	if (!w || k >= MAX_WIN) {
		fprintf(stderr, "cannot make window %d\n", k);
		exit(2);
	}
	sent.bucket[k] = w->start_us;
	sent.samples[k] = w->nsamples;
	sent.rows[k] = w->nrows;
	sent.n++;
	return w;
}

static void get(struct shipper *sh, struct shipper_stats *st)
{
	shipper_get_stats(sh, st);
}

/* Polls until the shipper delivered `windows` windows or POLL_LIMIT passes. */
static bool wait_delivered(struct shipper *sh, uint64_t windows)
{
	struct shipper_stats st;
	double end = mono_s() + POLL_LIMIT;

	do {
		get(sh, &st);
		if (st.windows_delivered >= windows && st.queue_windows == 0)
			return true;
		usleep(20000);
	} while (mono_s() < end);
	return false;
}

static bool wait_errors(struct shipper *sh, uint64_t errors)
{
	struct shipper_stats st;
	double end = mono_s() + POLL_LIMIT;

	do {
		get(sh, &st);
		if (st.flush_errors >= errors && !st.connected)
			return true;
		usleep(20000);
	} while (mono_s() < end);
	return false;
}

static const char *SAMPLES_SUM = "coalesce(sum(CASE WHEN counts IS NULL THEN cardinality(stacks)"
				 " ELSE (SELECT sum(c) FROM unnest(counts) c) END), 0)";

/* Samples stored for the window that starts at bucket (µs). */
static long long db_window_samples(PGconn *conn, int64_t bucket)
{
	char sql[512];

	snprintf(sql, sizeof(sql),
		 "SELECT %s FROM traceprof.samples WHERE bucket = "
		 "to_timestamp(%lld / 1000000.0)",
		 SAMPLES_SUM, (long long)bucket);
	return testdb_scalar(conn, sql);
}

/* Windows [from, to) either all stored exactly or absent; returns how many stored. */
static int check_windows(PGconn *conn, int from, int to, bool *stored)
{
	int n = 0;

	for (int k = from; k < to; k++) {
		long long got = db_window_samples(conn, sent.bucket[k]);

		stored[k] = got != 0;
		CHECK(got == 0 || got == (long long)sent.samples[k],
		      "window %d: %lld samples stored, %" PRIu64 " submitted", k, got,
		      sent.samples[k]);
		n += stored[k];
	}
	return n;
}

/* Per trace: the stored sum of counts equals what its window held. */
static void check_traces(PGconn *conn, int from, int to, const bool *stored)
{
	char sql[512], tr[33];
	PGresult *res;
	int rows = 0, bad = 0;

	snprintf(sql, sizeof(sql),
		 "SELECT traceprof.trace_id_text(trace_id), %s FROM traceprof.samples"
		 " WHERE trace_id IS NOT NULL AND bucket >= to_timestamp(%lld / 1000000.0)"
		 " AND bucket < to_timestamp(%lld / 1000000.0) GROUP BY 1",
		 SAMPLES_SUM, (long long)sent.bucket[from], (long long)sent.bucket[to - 1] + 1);
	res = testdb_exec(conn, sql);
	for (int k = from; k < to; k++) {
		if (!stored[k])
			continue;
		for (int j = 0; j < TRACES; j++) {
			uint8_t id[16];
			bool found = false;

			trace_of(k, j, id);
			ids_format_trace_id(id, tr);
			for (int r = 0; r < PQntuples(res); r++)
				if (!strcmp(PQgetvalue(res, r, 0), tr)) {
					found = atoll(PQgetvalue(res, r, 1)) == j % 4 + 1;
					break;
				}
			bad += !found;
			rows++;
		}
	}
	CHECK(bad == 0 && PQntuples(res) == rows,
	      "every trace has its samples exactly: %d wrong of %d, %d stored traces", bad, rows,
	      PQntuples(res));
	PQclear(res);
}

static void check_dictionary(PGconn *conn)
{
	CHECK(testdb_scalar(conn, "SELECT count(*) FROM traceprof.samples s, unnest(s.stacks) x"
				  " WHERE NOT EXISTS (SELECT 1 FROM traceprof.stacks k"
				  "  WHERE k.stack_id = x)") == 0,
	      "every stack of the samples is stored");
	CHECK(testdb_scalar(conn, "SELECT count(*) FROM traceprof.stacks k, unnest(k.frame_ids) f"
				  " WHERE NOT EXISTS (SELECT 1 FROM traceprof.frames r"
				  "  WHERE r.frame_id = f)") == 0,
	      "every frame of the stacks is stored");
	CHECK(testdb_scalar(conn, "SELECT count(*) FROM traceprof.frames r WHERE NOT EXISTS"
				  " (SELECT 1 FROM traceprof.functions f"
				  "  WHERE f.function_id = r.function_id)") == 0,
	      "every function of the frames is stored");
	CHECK(testdb_scalar(conn, "SELECT count(*) FROM traceprof.samples s WHERE NOT EXISTS"
				  " (SELECT 1 FROM traceprof.sources o"
				  "  WHERE o.source_id = s.source_id)") == 0,
	      "every source is stored");
	CHECK(testdb_scalar(conn, "SELECT count(*) FROM traceprof.stacks") == NSTACKS &&
		  testdb_scalar(conn, "SELECT count(*) FROM traceprof.frames") == 4 &&
		  testdb_scalar(conn, "SELECT count(*) FROM traceprof.functions"
				      " WHERE function_id <> 0") == 3,
	      "5 stacks, 4 frames, 3 functions");
}

static void check_accounting(const struct shipper_stats *st, const char *what)
{
	CHECK(st->windows_delivered + st->windows_dropped + st->windows_undelivered ==
		  st->windows_submitted,
	      "%s windows: %" PRIu64 " delivered + %" PRIu64 " dropped + %" PRIu64
	      " undelivered = %" PRIu64 " submitted",
	      what, st->windows_delivered, st->windows_dropped, st->windows_undelivered,
	      st->windows_submitted);
	CHECK(st->rows_delivered + st->rows_dropped + st->rows_undelivered + st->rows_invalid ==
		  st->rows_submitted,
	      "%s rows add up", what);
	CHECK(st->samples_delivered + st->samples_dropped + st->samples_undelivered +
		      st->samples_invalid ==
		  st->samples_submitted,
	      "%s samples: %" PRIu64 " delivered + %" PRIu64 " dropped + %" PRIu64
	      " undelivered = %" PRIu64 " submitted",
	      what, st->samples_delivered, st->samples_dropped, st->samples_undelivered,
	      st->samples_submitted);
}

static void test_deliver(void)
{
	char ci[4200];
	struct shipper_opts o = {.conninfo = ci};
	struct shipper_stats st;
	struct shipper *sh;
	bool stored[MAX_WIN];
	PGconn *conn;
	int first = sent.n;

	CHECK(testdb_create("tp_shipper", ci, sizeof(ci)) == 0, "database");
	sh = shipper_start(&o);
	CHECK(sh != NULL, "shipper_start");
	for (int i = 0; i < 30; i++)
		CHECK(shipper_submit(sh, make_window()) == 0, "submit");
	CHECK(shipper_stop(sh, 60000) == 0, "stop delivers everything");
	CHECK(shipper_submit(sh, make_window()) == -ESHUTDOWN, "no submit after stop");
	sent.n--;
	get(sh, &st);
	shipper_free(sh);
	check_accounting(&st, "deliver");
	CHECK(st.windows_delivered == 30 && st.windows_dropped == 0 && st.rows_invalid == 0,
	      "30 windows delivered");
	conn = testdb_connect(ci);
	CHECK(testdb_scalar(conn, "SELECT count(*) FROM traceprof.samples") ==
		  (long long)st.rows_delivered,
	      "rows stored = rows delivered");
	CHECK(check_windows(conn, first, sent.n, stored) == 30, "every window stored exactly");
	check_traces(conn, first, sent.n, stored);
	check_dictionary(conn);
	PQfinish(conn);
}

/* A private cluster that the test stops and starts. */
static char cluster[256];

static void cluster_stop(void)
{
	CHECK(pgcluster_stop(cluster) == 0, "cluster stopped");
}

static void cluster_start(void)
{
	CHECK(pgcluster_start(cluster) == 0, "cluster started");
}

static void test_outage(const char *ci)
{
	struct shipper_opts o = {.conninfo = ci, .backoff_min_ms = 20, .backoff_max_ms = 300};
	struct shipper_stats st;
	struct shipper *sh;
	struct agg_window *w;
	bool stored[MAX_WIN];
	PGconn *conn;
	int first = sent.n, outage, n_out = 40, delivered_out, k;
	bool bounded = true, suffix = true;
	size_t bound;

	w = make_window();
	bound = 8 * w->bytes + w->bytes / 2; /* room for 8 windows */
	o.max_queue_bytes = bound;
	sh = shipper_start(&o);
	CHECK(sh != NULL, "shipper_start");
	shipper_submit(sh, w);
	for (int i = 1; i < 10; i++) {
		CHECK(wait_delivered(sh, (uint64_t)i), "window %d delivered", i);
		shipper_submit(sh, make_window());
	}
	CHECK(wait_delivered(sh, 10), "10 windows delivered before the outage");

	/* The database goes away while the shipper is idle. */
	cluster_stop();
	outage = sent.n;
	for (int i = 0; i < n_out; i++) {
		shipper_submit(sh, make_window());
		get(sh, &st);
		bounded &= st.queue_bytes <= bound;
		if (i == 0)
			CHECK(wait_errors(sh, 1), "the first window fails to flush");
	}
	CHECK(bounded, "queue bytes never above the bound");
	get(sh, &st);
	CHECK(st.queue_windows == 8 && !st.connected && *st.last_error,
	      "queue full at 8 windows, not connected, error \"%s\"", st.last_error);
	CHECK(st.windows_dropped == (uint64_t)n_out - 8 && st.drop_episodes == 1,
	      "%" PRIu64 " oldest windows dropped in %" PRIu64 " episode", st.windows_dropped,
	      st.drop_episodes);
	CHECK(wait_errors(sh, st.flush_errors + 3), "still retrying");
	{
		/* what a sender can retry (OTLP) is refused, not queued at the cost of older data
		 */
		uint64_t dropped = st.windows_dropped;

		CHECK(shipper_offer(sh, make_window()) == -EAGAIN,
		      "an offer to a full queue is refused");
		get(sh, &st);
		CHECK(st.windows_refused == 1 && st.windows_dropped == dropped &&
			  st.queue_windows == 8,
		      "refused %" PRIu64 ", nothing dropped for it, queue still 8",
		      st.windows_refused);
	}

	/* It comes back: delivery resumes. */
	cluster_start();
	CHECK(wait_delivered(sh, 10 + 8), "the queued windows are delivered after the outage");

	/* A restart while windows keep coming. */
	for (int i = 0; i < 60; i++) {
		shipper_submit(sh, make_window());
		if (i == 20)
			cluster_stop();
		if (i == 35)
			cluster_start();
		usleep(20000);
	}
	CHECK(shipper_stop(sh, 60000) == 0, "stop delivers the rest");
	get(sh, &st);
	shipper_free(sh);
	check_accounting(&st, "outage");
	CHECK(st.windows_undelivered == 0 && st.rows_invalid == 0, "nothing undelivered");

	conn = testdb_connect(ci);
	CHECK(check_windows(conn, first, sent.n, stored) == (int)st.windows_delivered,
	      "stored windows = %" PRIu64 " delivered", st.windows_delivered);
	CHECK(testdb_scalar(conn, "SELECT count(*) FROM traceprof.samples") ==
		  (long long)st.rows_delivered,
	      "rows stored = rows delivered");
	{
		char sql[256];

		snprintf(sql, sizeof(sql), "SELECT %s FROM traceprof.samples", SAMPLES_SUM);
		CHECK(testdb_scalar(conn, sql) == (long long)st.samples_delivered,
		      "samples stored = samples delivered");
	}
	check_traces(conn, first, sent.n, stored);
	/* Outage windows: the one in flight, then the newest; the oldest were dropped. */
	CHECK(stored[outage], "the window in flight when the database went away is kept");
	delivered_out = 0;
	for (k = outage + 1; k < outage + n_out && !stored[k]; k++)
		;
	for (; k < outage + n_out; k++)
		suffix &= stored[k];
	for (k = outage; k < outage + n_out; k++)
		delivered_out += stored[k];
	CHECK(suffix && delivered_out == 8, "the 7 newest outage windows and the first are stored");
	check_dictionary(conn);
	PQfinish(conn);
}

static void test_down_at_start(const char *ci)
{
	struct shipper_opts o = {.conninfo = ci, .backoff_min_ms = 20, .backoff_max_ms = 200};
	struct shipper_stats st;
	struct shipper *sh;
	PGconn *conn;
	uint64_t before;
	double t0, took;
	int rc;

	cluster_stop();
	sh = shipper_start(&o);
	CHECK(sh != NULL, "shipper_start with the database down");
	for (int i = 0; i < 3; i++)
		CHECK(shipper_submit(sh, make_window()) == 0, "submit while down");
	CHECK(wait_errors(sh, 3), "store_open keeps failing");
	cluster_start();
	CHECK(wait_delivered(sh, 3), "delivered once the database is up");

	/* Down again; stop must give up at its deadline and say what is left. */
	cluster_stop();
	for (int i = 0; i < 5; i++)
		shipper_submit(sh, make_window());
	get(sh, &st);
	before = st.windows_delivered;
	t0 = mono_s();
	rc = shipper_stop(sh, 1500);
	took = mono_s() - t0;
	CHECK(rc == -ETIMEDOUT, "stop with the database down: %d", rc);
	CHECK(took < 1.5 + 10, "stop returned after %.1f s (deadline 1.5 s)", took);
	get(sh, &st);
	CHECK(st.windows_undelivered == 5 && st.windows_delivered == before &&
		  st.rows_undelivered == 5 * sent.rows[sent.n - 1],
	      "5 windows (%" PRIu64 " rows) reported undelivered", st.rows_undelivered);
	check_accounting(&st, "stop while down");
	shipper_free(sh);
	cluster_start();
	conn = testdb_connect(ci);
	for (int k = sent.n - 5; k < sent.n; k++)
		CHECK(db_window_samples(conn, sent.bucket[k]) == 0, "undelivered window %d absent",
		      k);
	for (int k = sent.n - 8; k < sent.n - 5; k++)
		CHECK(db_window_samples(conn, sent.bucket[k]) == (long long)sent.samples[k],
		      "window %d delivered after a down start", k);
	PQfinish(conn);
}
/*
 * Raised samples kept for a trigger travel in their own window with the
 * stacks they use, and land in trigger_samples (not samples) with their
 * trigger id, Hz and counts, their stacks complete in a database that never
 * saw a base window.
 */
static void test_trigger_window(void)
{
	char ci[4200];
	struct shipper_opts o = {.conninfo = ci};
	struct shipper_stats st;
	struct shipper *sh;
	struct agg_window *w;
	uint64_t stk[3] = {stacks[0], stacks[2], stacks[4]};
	uint32_t cnt[3] = {3, 2, 1};
	struct store_sample_row row = {.bucket_us = base_us / (60 * SEC) * (60 * SEC),
				       .source_id = 11,
				       .span_id = 5,
				       .hz = 99,
				       .n = 3,
				       .stacks = stk,
				       .counts = cnt};
	PGconn *conn;

	trace_of(900, 0, row.trace_id);
	CHECK(agg_trigger_window(agg, "", &row, 1) == NULL && errno == EINVAL,
	      "empty trigger id refused");
	CHECK(agg_trigger_window(agg, "default/slow/1a2b3c4d", &row, 0) == NULL && errno == EINVAL,
	      "no rows refused");
	w = agg_trigger_window(agg, "default/slow/1a2b3c4d", &row, 1);
	CHECK(w && w->trigger_id && !strcmp(w->trigger_id, "default/slow/1a2b3c4d") &&
		  w->nrows == 1 && w->nsamples == 6 && w->nstacks == 3 && w->nsources == 1 &&
		  w->rows[0].hz == 99 && w->rows[0].bucket_us == row.bucket_us,
	      "trigger window: one row of 6 samples at 99 Hz, 3 stacks, 1 source");
	if (!w)
		return;
	CHECK(testdb_create("tp_shipper_trigger", ci, sizeof(ci)) == 0, "database");
	sh = shipper_start(&o);
	CHECK(sh && shipper_submit(sh, w) == 0, "submit the trigger window");
	CHECK(shipper_stop(sh, 60000) == 0, "stop delivers it");
	get(sh, &st);
	shipper_free(sh);
	CHECK(st.windows_delivered == 1 && st.rows_invalid == 0, "delivered");
	conn = testdb_connect(ci);
	CHECK(testdb_scalar(conn, "SELECT count(*) FROM traceprof.samples") == 0,
	      "nothing in samples");
	CHECK(testdb_scalar(conn, "SELECT sum(coalesce(u.c, 1)) FROM traceprof.trigger_samples t, "
				  "unnest(t.stacks, t.counts) u(s, c) WHERE t.trigger_id = "
				  "'default/slow/1a2b3c4d' AND t.hz = 99 AND t.span_id = 5") == 6,
	      "6 samples at 99 Hz in trigger_samples under the trigger id");
	CHECK(testdb_scalar(conn, "SELECT count(DISTINCT k.stack_id) FROM "
				  "traceprof.trigger_samples t, unnest(t.stacks) s(id) JOIN "
				  "traceprof.stacks k ON k.stack_id = s.id") == 3,
	      "its 3 stacks stored with it");
	PQfinish(conn);
}

int main(void)
{
	char tmpl[] = "/tmp/tp-shipper-XXXXXX";
	struct pgcluster_opts po = {.fast = true};
	char ci[4200];

	log_set_level(getenv("TEST_VERBOSE") ? TP_LOG_DEBUG : TP_LOG_QUIET);
	agg = agg_new(&(struct agg_opts){.window_us = SEC});
	if (!agg)
		return 2;
	register_dict();
	base_us = (now_us() / SEC - 3 * 3600) * SEC; /* windows one second apart, in the past */
	test_deliver();
	test_trigger_window();

	if (!mkdtemp(tmpl))
		return 2;
	chmod(tmpl, 0755);
	snprintf(cluster, sizeof(cluster), "%s/db", tmpl);
	CHECK(pgcluster_create(cluster, &po) == 0, "private cluster");
	CHECK(pgcluster_conninfo(cluster, NULL, ci, sizeof(ci)) == 0, "conninfo");
	test_outage(ci);
	test_down_at_start(ci);
	pgcluster_remove(cluster);
	rmdir(tmpl);
	agg_free(agg);
	return check_done();
}
