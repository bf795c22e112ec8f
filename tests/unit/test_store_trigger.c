/*
 * test_store_trigger: store_add_trigger_samples() against a real PostgreSQL.
 *
 * Raised samples of claimed requests land in traceprof.trigger_samples with
 * every field (binary and text COPY give identical rows, trigger ids with
 * characters COPY escapes survive), and the per-trace SQL reads them; bad
 * rows and trigger ids are refused and counted while the rest of the batch
 * lands; they share the row bound with the other rows; a day without a
 * partition gets one; a killed connection and a lost COMMIT reply (through
 * tests/unit/pgproxy.c) lose nothing and duplicate nothing.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "pgproxy.h"
#include "testdb.h"
#include "traceprof/ids.h"
#include "traceprof/log.h"
#include "traceprof/store.h"

#define SEC	    1000000LL
#define DAY	    (86400 * SEC)
#define TRIGGER	    "shop/slow-checkout"
#define ODD_TRIGGER "ns/it's\ta\\b\n\xc3\xa9" /* quote, tab, backslash, newline, UTF-8 */

static int64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * SEC + ts.tv_nsec / 1000;
}

static void expect_text(PGconn *conn, const char *sql, const char *want, const char *what)
{
	char *got = testdb_text(conn, sql);

	CHECK(strcmp(got, want) == 0, "%s:\n  got  %s\n  want %s", what, got, want);
	free(got);
}

static void make_trace(uint8_t id[16], unsigned seed)
{
	for (int i = 0; i < 16; i++)
		id[i] = (uint8_t)(seed * 31 + i + 1);
}

/* count trigger rows of trace seed seed+i, span 1000+i, at t; *accepted counts successes. */
static void add_trigger_rows(struct store *st, const char *trigger, int count, int64_t t,
			     unsigned seed, int *accepted)
{
	uint64_t stacks[2] = {101, 102};
	uint32_t counts[2] = {40, 9};
	struct store_sample_row r = {
	    .bucket_us = t, .source_id = 77, .hz = 99, .n = 2, .stacks = stacks, .counts = counts};

	for (int i = 0; i < count; i++) {
		make_trace(r.trace_id, seed + (unsigned)i);
		r.span_id = 1000 + (uint64_t)i;
		if (store_add_trigger_samples(st, trigger, &r) == 0)
			(*accepted)++;
	}
}

/* The same, as base-rate sample rows. */
static void add_sample_rows(struct store *st, int count, int64_t t, unsigned seed, int *accepted)
{
	uint64_t stacks[1] = {101};
	struct store_sample_row r = {
	    .bucket_us = t, .source_id = 77, .hz = 19, .n = 1, .stacks = stacks};

	for (int i = 0; i < count; i++) {
		make_trace(r.trace_id, seed + (unsigned)i);
		r.span_id = 1000 + (uint64_t)i;
		if (store_add_samples(st, &r) == 0)
			(*accepted)++;
	}
}

#define TRIGGER_ROWS_SQL                                                                           \
	"SELECT coalesce(string_agg(concat_ws('|', (extract(epoch FROM bucket) * "                 \
	"1000000)::bigint,"                                                                        \
	" source_id, traceprof.trace_id_text(trace_id), traceprof.span_id_text(span_id), hz,"      \
	" stacks, coalesce(counts::text, 'NULL'), trigger_id), E'\\n'"                             \
	" ORDER BY bucket, trigger_id COLLATE \"C\"), '') FROM traceprof.trigger_samples"

/*
 * Every field, binary and text COPY: a row with big counts (kept), one with
 * a small repeat (stored repeated), one with counts NULL, the odd trigger id;
 * with a base sample row and the request in the same flush. trace_profile
 * then reads the raised rows of the trace, not its base row.
 */
static void test_round_trip(void)
{
	static const struct store_source src = {"checkout", "shop", "checkout-1", "", "node-1",
						"",	    ""};
	char ci[2][4200], want[2048], tr[33];
	int64_t base = (now_us() / SEC - 600) * SEC + 250001;
	uint64_t source = ids_source("checkout", "shop", "checkout-1", "", "node-1", "");
	uint64_t fn = ids_function("shop", "validate");
	uint64_t frame = ids_frame(fn, "", NULL, 0, 0);
	uint64_t stack = ids_stack(&frame, 1);
	uint64_t stacks[2] = {stack, 0x8000000000000005ULL};
	uint32_t big[2] = {60, 30}, small[2] = {2, 1};
	struct store_sample_row r = {
	    .source_id = source, .span_id = 0x42, .n = 2, .stacks = stacks};
	struct store_request q = {.start_us = base - SEC,
				  .duration_us = 3 * SEC,
				  .source_id = source,
				  .span_id = 0x42,
				  .status_code = 200};
	struct store_stats stats;
	char *dump[2];

	make_trace(r.trace_id, 7);
	memcpy(q.trace_id, r.trace_id, 16);
	ids_format_trace_id(r.trace_id, tr);
	CHECK(testdb_create("tp_strig_bin", ci[0], sizeof(ci[0])) == 0, "db bin");
	CHECK(testdb_create("tp_strig_txt", ci[1], sizeof(ci[1])) == 0, "db txt");
	for (int text = 0; text < 2; text++) {
		const char *fmt = text ? "text COPY" : "binary COPY";
		struct store *st = testdb_store(ci[text], text, 0, NULL);
		PGconn *conn;
		char sql[256];

		CHECK(store_add_source(st, source, &src) == 0 &&
			  store_add_function(st, fn, "validate", "shop", 0) == 0 &&
			  store_add_frame(st, frame, fn, "", NULL, 0, 0) == 0 &&
			  store_add_stack(st, stack, &frame, 1) == 0,
		      "dictionaries");
		r.bucket_us = base, r.hz = 99, r.counts = big;
		CHECK(store_add_trigger_samples(st, TRIGGER, &r) == 0, "%s: big counts", fmt);
		r.bucket_us = base + 1, r.counts = small;
		CHECK(store_add_trigger_samples(st, TRIGGER, &r) == 0, "%s: small repeat", fmt);
		r.bucket_us = base + 2, r.counts = NULL, r.hz = 100;
		CHECK(store_add_trigger_samples(st, ODD_TRIGGER, &r) == 0, "%s: odd trigger id",
		      fmt);
		r.bucket_us = base, r.hz = 19, r.counts = small;
		CHECK(store_add_samples(st, &r) == 0, "%s: base row", fmt);
		CHECK(store_add_request(st, &q) == 0, "%s: request", fmt);
		CHECK(store_pending_rows(st) == 5, "%s: 5 rows pending (%zu)", fmt,
		      store_pending_rows(st));
		CHECK(store_flush(st) == 0, "%s flush: %s", fmt, store_last_error(st));
		store_get_stats(st, &stats);
		CHECK(stats.trigger_rows_written == 3 &&
			  stats.trigger_samples_written == 90 + 3 + 2 &&
			  stats.sample_rows_written == 1 && stats.samples_written == 3 &&
			  stats.requests_written == 1 && stats.rows_invalid == 0,
		      "%s stats: trigger rows %" PRIu64 " samples %" PRIu64
		      ", sample rows %" PRIu64,
		      fmt, stats.trigger_rows_written, stats.trigger_samples_written,
		      stats.sample_rows_written);
		CHECK(store_pending_rows(st) == 0, "%s: nothing pending", fmt);
		store_free(st);

		conn = testdb_connect(ci[text]);
		snprintf(want, sizeof(want),
			 "%lld|%lld|%s|0000000000000042|99|{%lld,%lld}|{60,30}|" TRIGGER "\n"
			 "%lld|%lld|%s|0000000000000042|99|{%lld,%lld,%lld}|NULL|" TRIGGER "\n"
			 "%lld|%lld|%s|0000000000000042|100|{%lld,%lld}|NULL|" ODD_TRIGGER,
			 (long long)base, (long long)source, tr, (long long)stack,
			 (long long)(int64_t)stacks[1], (long long)base + 1, (long long)source, tr,
			 (long long)stack, (long long)stack, (long long)(int64_t)stacks[1],
			 (long long)base + 2, (long long)source, tr, (long long)stack,
			 (long long)(int64_t)stacks[1]);
		expect_text(conn, TRIGGER_ROWS_SQL, want, fmt);
		CHECK(testdb_scalar(conn, "SELECT count(*) FROM traceprof.samples") == 1,
		      "%s: the base row went to samples", fmt);
		/*
		 * The source has raised rows of two triggers: the trace is read
		 * from the smallest id's only (ODD_TRIGGER, "ns/" < "shop/"):
		 * validate once, not 60 + 2 + 1 raised nor the base row's 2.
		 */
		snprintf(sql, sizeof(sql),
			 "SELECT total_samples FROM traceprof.trace_profile('%s') "
			 "WHERE function = 'validate'",
			 tr);
		CHECK(testdb_scalar(conn, sql) == 1, "%s: trace_profile reads one trigger's rows",
		      fmt);
		dump[text] = testdb_text(conn, TRIGGER_ROWS_SQL);
		PQfinish(conn);
	}
	CHECK(strcmp(dump[0], dump[1]) == 0, "binary and text COPY give identical rows");
	free(dump[0]);
	free(dump[1]);
}

static void test_invalid(void)
{
	char ci[4200], long_id[202];
	int64_t now = now_us();
	uint64_t stacks[2] = {1, 2};
	uint32_t zero_count[2] = {1, 0};
	struct store_sample_row ok = {.bucket_us = now - 60 * SEC,
				      .source_id = 9,
				      .span_id = 3,
				      .hz = 99,
				      .n = 2,
				      .stacks = stacks};
	struct store_sample_row r;
	struct store_stats stats;
	struct store *st;
	PGconn *conn;
	int bad = 0;

	make_trace(ok.trace_id, 2);
	memset(long_id, 'x', 201);
	long_id[201] = '\0';
	CHECK(testdb_create("tp_strig_invalid", ci, sizeof(ci)) == 0, "db invalid");
	st = testdb_store(ci, false, 0, NULL);
#define BAD(id, row, what)                                                                         \
	do {                                                                                       \
		CHECK(store_add_trigger_samples(st, id, row) == -EINVAL, "refused: %s", what);     \
		bad++;                                                                             \
	} while (0)
	CHECK(store_add_trigger_samples(st, TRIGGER, &ok) == 0, "valid row");
	BAD(NULL, &ok, "NULL trigger id");
	BAD("", &ok, "empty trigger id");
	BAD(long_id, &ok, "201-byte trigger id");
	BAD("bad\xff", &ok, "trigger id not UTF-8");
	BAD("cut\xe2\x82", &ok, "trigger id with a truncated character");
	BAD(TRIGGER, NULL, "no row");
	r = ok, r.span_id = 0, memset(r.trace_id, 0, 16);
	BAD(TRIGGER, &r, "untagged: raised samples belong to a request");
	r = ok, r.span_id = 0;
	BAD(TRIGGER, &r, "trace without span");
	r = ok, r.hz = 0;
	BAD(TRIGGER, &r, "hz 0");
	r = ok, r.hz = 1001;
	BAD(TRIGGER, &r, "hz 1001");
	r = ok, r.counts = zero_count;
	BAD(TRIGGER, &r, "count 0");
	r = ok, r.source_id = 0;
	BAD(TRIGGER, &r, "source 0");
	r = ok, r.bucket_us = now - 8 * DAY;
	BAD(TRIGGER, &r, "older than the retention");
	r = ok, r.bucket_us = now + DAY + 60 * SEC;
	BAD(TRIGGER, &r, "more than a day ahead");
#undef BAD
	long_id[200] = '\0';
	CHECK(store_add_trigger_samples(st, long_id, &ok) == 0, "200-byte trigger id");
	CHECK(store_add_trigger_samples(NULL, TRIGGER, &ok) == -EINVAL, "no store");
	store_get_stats(st, &stats);
	CHECK(stats.rows_invalid == (uint64_t)bad, "every refusal counted (%" PRIu64 " of %d)",
	      stats.rows_invalid, bad);
	CHECK(store_flush(st) == 0, "the valid rest lands: %s", store_last_error(st));
	store_get_stats(st, &stats);
	CHECK(stats.trigger_rows_written == 2 && stats.trigger_samples_written == 4,
	      "two valid rows written (%" PRIu64 ")", stats.trigger_rows_written);
	conn = testdb_connect(ci);
	CHECK(testdb_scalar(conn, "SELECT count(*) FROM traceprof.trigger_samples") == 2,
	      "2 trigger rows stored");
	PQfinish(conn);
	store_free(st);
}

static void test_bounds_and_partitions(void)
{
	char ci[4200], sql[256], part[32];
	int64_t old = now_us() - 4 * DAY;
	time_t day = (time_t)(old / SEC);
	struct store_stats stats;
	struct store *st;
	PGconn *conn;
	int n = 0, m = 0;

	CHECK(testdb_create("tp_strig_bounds", ci, sizeof(ci)) == 0, "db bounds");
	conn = testdb_connect(ci);
	st = testdb_store(ci, true, 10, NULL);
	add_sample_rows(st, 6, now_us() - 60 * SEC, 1, &n);
	add_trigger_rows(st, TRIGGER, 6, now_us() - 60 * SEC, 1, &m);
	CHECK(n == 6 && m == 4, "trigger rows share the 10-row bound (%d + %d)", n, m);
	store_get_stats(st, &stats);
	CHECK(stats.rows_dropped_full == 2, "2 dropped (%" PRIu64 ")", stats.rows_dropped_full);
	CHECK(store_flush(st) == 0, "flush: %s", store_last_error(st));
	m = 0;
	add_trigger_rows(st, TRIGGER, 10, now_us() - 60 * SEC, 100, &m);
	CHECK(m == 10, "room again after a flush");
	CHECK(store_flush(st) == 0, "flush trigger rows alone: %s", store_last_error(st));
	CHECK(testdb_scalar(conn, "SELECT count(*) FROM traceprof.trigger_samples") == 14,
	      "14 trigger rows");

	strftime(part, sizeof(part), "%Y%m%d", gmtime(&day));
	snprintf(sql, sizeof(sql),
		 "SELECT (to_regclass('traceprof.trigger_samples_p%s') IS NULL)::int", part);
	CHECK(testdb_scalar(conn, sql) == 1, "no partition for 4 days ago yet");
	m = 0;
	add_trigger_rows(st, TRIGGER, 5, old, 200, &m);
	CHECK(store_flush(st) == 0, "flush into a new day: %s", store_last_error(st));
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM traceprof.trigger_samples_p%s", part);
	CHECK(testdb_scalar(conn, sql) == 5, "rows in the new partition");
	store_free(st);
	PQfinish(conn);
}

static void test_killed_connection(void)
{
	char ci[4200];
	struct store_stats stats;
	struct store *st;
	PGconn *conn;
	int n = 0, m = 0;

	CHECK(testdb_create("tp_strig_kill", ci, sizeof(ci)) == 0, "db kill");
	conn = testdb_connect(ci);
	st = testdb_store(ci, false, 0, "tp_strig_kill");
	add_sample_rows(st, 500, now_us() - 60 * SEC, 1, &n);
	add_trigger_rows(st, TRIGGER, 500, now_us() - 60 * SEC, 1, &m);
	CHECK(testdb_scalar(conn, "SELECT count(pg_terminate_backend(pid, 10000)) FROM "
				  "pg_stat_activity WHERE application_name = 'tp_strig_kill'") == 1,
	      "terminated the store's backend");
	CHECK(store_flush(st) == -ECONNRESET, "flush on a killed connection: %s",
	      store_last_error(st));
	CHECK(store_pending_rows(st) == 1000, "data kept");
	CHECK(store_reconnect(st) == 0, "reconnect: %s", store_last_error(st));
	CHECK(store_flush(st) == 0, "flush after reconnect: %s", store_last_error(st));
	CHECK(testdb_scalar(conn, "SELECT count(*) FROM traceprof.trigger_samples") == 500 &&
		  testdb_scalar(conn, "SELECT count(*) FROM traceprof.samples") == 500,
	      "every row exactly once");
	store_get_stats(st, &stats);
	CHECK(stats.trigger_rows_written == 500 && stats.trigger_samples_written == 500 * 49 &&
		  stats.flush_errors == 1,
	      "stats after a killed connection");
	store_free(st);
	PQfinish(conn);
}

/* A flush whose COMMIT outcome the client never learns lands exactly once. */
static void test_lost_commit(void)
{
	char ci[4200], via[4200];
	struct store_stats stats;
	struct pgproxy *proxy;
	struct store *st;
	PGconn *conn;
	int m = 0, rc, tries = 0;

	CHECK(testdb_create("tp_strig_commit", ci, sizeof(ci)) == 0, "db commit");
	proxy = pgproxy_start(ci, via, sizeof(via));
	if (!proxy) {
		CHECK(0, "proxy");
		return;
	}
	conn = testdb_connect(ci);
	st = testdb_store(via, false, 0, NULL);

	add_trigger_rows(st, TRIGGER, 300, now_us() - 60 * SEC, 1, &m);
	pgproxy_set_mode(proxy, PGPROXY_LOSE_COMMIT_REPLY);
	CHECK(store_flush(st) == -ECONNRESET, "reply to COMMIT lost: %s", store_last_error(st));
	CHECK(store_pending_rows(st) == 300, "kept while the outcome is unknown");
	CHECK(testdb_scalar(conn, "SELECT count(*) FROM traceprof.trigger_samples") == 300,
	      "the server did commit");
	add_trigger_rows(st, TRIGGER, 20, now_us() - 50 * SEC, 1000, &m);
	CHECK(store_reconnect(st) == 0, "reconnect: %s", store_last_error(st));
	CHECK(store_flush(st) == 0, "flush after a lost commit reply: %s", store_last_error(st));
	CHECK(testdb_scalar(conn, "SELECT count(*) FROM traceprof.trigger_samples") == 320,
	      "committed batch not sent twice, later rows sent");
	store_get_stats(st, &stats);
	CHECK(stats.trigger_rows_written == 320 && stats.trigger_samples_written == 320 * 49,
	      "stats count the recovered batch once (%" PRIu64 ")", stats.trigger_rows_written);

	add_trigger_rows(st, TRIGGER, 100, now_us() - 40 * SEC, 2000, &m);
	pgproxy_set_mode(proxy, PGPROXY_DROP_COMMIT);
	CHECK(store_flush(st) == -ECONNRESET, "COMMIT lost on the way");
	CHECK(store_reconnect(st) == 0, "reconnect");
	while ((rc = store_flush(st)) == -EAGAIN && tries++ < 100)
		usleep(50000);
	CHECK(rc == 0, "flush after a dropped commit: %s", store_last_error(st));
	CHECK(testdb_scalar(conn, "SELECT count(*) FROM traceprof.trigger_samples") == 420,
	      "aborted batch written once");
	CHECK(m == 420, "every row accepted (%d)", m);
	store_free(st);
	PQfinish(conn);
	pgproxy_stop(proxy);
}

int main(void)
{
	log_set_level(TP_LOG_QUIET);
	test_round_trip();
	test_invalid();
	test_bounds_and_partitions();
	test_killed_connection();
	test_lost_commit();
	return check_done();
}
