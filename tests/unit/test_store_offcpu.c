/*
 * test_store_offcpu: store_add_offcpu() against a real PostgreSQL.
 *
 * Off-CPU rows land in traceprof.offcpu with every field (binary and text
 * COPY give identical rows; stack id 0 and repeated stacks are kept), in
 * the same flush as samples and requests; bad rows are refused and counted
 * while the rest of the batch lands; they share the row bound with the
 * other rows; a day without a partition gets one; a killed connection
 * loses nothing and duplicates nothing.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "testdb.h"
#include "traceprof/log.h"
#include "traceprof/store.h"

#define SEC 1000000LL
#define DAY (86400 * SEC)

static int64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * SEC + ts.tv_nsec / 1000;
}

static void make_trace(uint8_t id[16], unsigned seed)
{
	for (int i = 0; i < 16; i++)
		id[i] = (uint8_t)(seed * 31 + i + 1);
}

/* count blocked rows of trace seed+i, span 1000+i, 5000 + 700 µs each; *accepted counts. */
static void add_offcpu_rows(struct store *st, int count, int64_t t, unsigned seed, int *accepted)
{
	uint64_t stacks[2] = {101, 0};
	uint32_t us[2] = {5000, 700};
	struct store_offcpu_row r = {.bucket_us = t,
				     .source_id = 77,
				     .kind = STORE_OFFCPU_BLOCKED,
				     .n = 2,
				     .stacks = stacks,
				     .us = us};

	for (int i = 0; i < count; i++) {
		make_trace(r.trace_id, seed + (unsigned)i);
		r.span_id = 1000 + (uint64_t)i;
		if (store_add_offcpu(st, &r) == 0)
			(*accepted)++;
	}
}

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

#define OFFCPU_ROWS_SQL                                                                            \
	"SELECT coalesce(string_agg(concat_ws('|', (extract(epoch FROM bucket) * "                 \
	"1000000)::bigint, source_id, coalesce(traceprof.trace_id_text(trace_id), 'NULL'),"        \
	" coalesce(traceprof.span_id_text(span_id), 'NULL'), kind, stacks, us), E'\\n'"            \
	" ORDER BY bucket, kind), '') FROM traceprof.offcpu"

/* Every field, binary and text COPY, with a sample row and a request in the same flush. */
static void test_round_trip(void)
{
	char ci[2][4200], want[2048], tr[33];
	int64_t base = (now_us() / SEC - 600) * SEC + 250001;
	uint64_t stacks[3] = {0x8000000000000005ULL, 0, 0x8000000000000005ULL};
	uint32_t us[3] = {2147483647, 1, 40};
	struct store_offcpu_row r = {.source_id = 5,
				     .span_id = 0x42,
				     .kind = STORE_OFFCPU_BLOCKED,
				     .n = 3,
				     .stacks = stacks,
				     .us = us};
	uint64_t sstack = 9;
	struct store_sample_row s = {.bucket_us = base,
				     .source_id = 5,
				     .span_id = 0x42,
				     .hz = 19,
				     .n = 1,
				     .stacks = &sstack};
	struct store_request q = {
	    .start_us = base, .duration_us = SEC, .source_id = 5, .span_id = 0x42};
	struct store_stats stats;
	char *dump[2];

	make_trace(r.trace_id, 7);
	memcpy(s.trace_id, r.trace_id, 16);
	memcpy(q.trace_id, r.trace_id, 16);
	for (int i = 0; i < 16; i++)
		snprintf(tr + 2 * i, 3, "%02x", r.trace_id[i]);
	CHECK(testdb_create("tp_soff_bin", ci[0], sizeof(ci[0])) == 0, "db bin");
	CHECK(testdb_create("tp_soff_txt", ci[1], sizeof(ci[1])) == 0, "db txt");
	for (int text = 0; text < 2; text++) {
		const char *fmt = text ? "text COPY" : "binary COPY";
		struct store *st = testdb_store(ci[text], text, 0, NULL);
		struct store_offcpu_row u = r;
		uint64_t one = 0;
		uint32_t one_us = 3;
		PGconn *conn;

		r.bucket_us = base;
		CHECK(store_add_offcpu(st, &r) == 0, "%s: blocked row", fmt);
		u.bucket_us = base + 1, u.kind = STORE_OFFCPU_RUNQ, u.n = 1, u.stacks = &one,
		u.us = &one_us, u.span_id = 0;
		memset(u.trace_id, 0, 16);
		CHECK(store_add_offcpu(st, &u) == 0, "%s: untagged runqueue row", fmt);
		CHECK(store_add_samples(st, &s) == 0 && store_add_request(st, &q) == 0,
		      "%s: sample and request", fmt);
		CHECK(store_pending_rows(st) == 4, "%s: 4 rows pending (%zu)", fmt,
		      store_pending_rows(st));
		CHECK(store_flush(st) == 0, "%s flush: %s", fmt, store_last_error(st));
		store_get_stats(st, &stats);
		CHECK(stats.offcpu_rows_written == 2 &&
			  stats.offcpu_us_written == 2147483647ULL + 1 + 40 + 3 &&
			  stats.sample_rows_written == 1 && stats.requests_written == 1 &&
			  stats.rows_invalid == 0,
		      "%s stats: offcpu rows %" PRIu64 " us %" PRIu64, fmt,
		      stats.offcpu_rows_written, stats.offcpu_us_written);
		CHECK(store_pending_rows(st) == 0, "%s: nothing pending", fmt);
		store_free(st);

		conn = testdb_connect(ci[text]);
		snprintf(want, sizeof(want),
			 "%lld|5|%s|0000000000000042|1|{%lld,0,%lld}|{2147483647,1,40}\n"
			 "%lld|5|NULL|NULL|2|{0}|{3}",
			 (long long)base, tr, (long long)(int64_t)stacks[0],
			 (long long)(int64_t)stacks[2], (long long)base + 1);
		dump[text] = testdb_text(conn, OFFCPU_ROWS_SQL);
		CHECK(strcmp(dump[text], want) == 0, "%s rows:\n  got  %s\n  want %s", fmt,
		      dump[text], want);
		PQfinish(conn);
	}
	CHECK(strcmp(dump[0], dump[1]) == 0, "binary and text COPY give identical rows");
	free(dump[0]);
	free(dump[1]);
}

static void test_invalid(void)
{
	char ci[4200];
	int64_t now = now_us();
	uint64_t stacks[2] = {1, 0};
	uint32_t us[2] = {10, 20}, zero_us[2] = {10, 0}, huge_us[2] = {10, 2147483648U};
	struct store_offcpu_row ok = {.bucket_us = now - 60 * SEC,
				      .source_id = 9,
				      .span_id = 3,
				      .kind = STORE_OFFCPU_RUNQ,
				      .n = 2,
				      .stacks = stacks,
				      .us = us};
	struct store_offcpu_row r;
	struct store_stats stats;
	struct store *st;
	PGconn *conn;
	int bad = 0;

	make_trace(ok.trace_id, 2);
	CHECK(testdb_create("tp_soff_invalid", ci, sizeof(ci)) == 0, "db invalid");
	st = testdb_store(ci, false, 0, NULL);
#define BAD(row, what)                                                                             \
	do {                                                                                       \
		CHECK(store_add_offcpu(st, row) == -EINVAL, "refused: %s", what);                  \
		bad++;                                                                             \
	} while (0)
	CHECK(store_add_offcpu(st, &ok) == 0, "valid row");
	BAD(NULL, "no row");
	r = ok, r.kind = 0;
	BAD(&r, "kind 0");
	r = ok, r.kind = 3;
	BAD(&r, "kind 3");
	r = ok, r.n = 0;
	BAD(&r, "no stacks");
	r = ok, r.n = 65537;
	BAD(&r, "over the row limit");
	r = ok, r.stacks = NULL;
	BAD(&r, "stacks NULL");
	r = ok, r.us = NULL;
	BAD(&r, "durations NULL");
	r = ok, r.us = zero_us;
	BAD(&r, "a zero duration");
	r = ok, r.us = huge_us;
	BAD(&r, "a duration over 2^31-1 µs");
	r = ok, r.source_id = 0;
	BAD(&r, "source 0");
	r = ok, r.span_id = 0;
	BAD(&r, "trace without span");
	r = ok, memset(r.trace_id, 0, 16);
	BAD(&r, "span without trace");
	r = ok, r.bucket_us = now - 8 * DAY;
	BAD(&r, "older than the retention");
	r = ok, r.bucket_us = now + DAY + 60 * SEC;
	BAD(&r, "more than a day ahead");
#undef BAD
	r = ok, r.kind = STORE_OFFCPU_BLOCKED, r.span_id = 0, memset(r.trace_id, 0, 16);
	CHECK(store_add_offcpu(st, &r) == 0, "untagged blocked row");
	CHECK(store_add_offcpu(NULL, &ok) == -EINVAL, "no store");
	store_get_stats(st, &stats);
	CHECK(stats.rows_invalid == (uint64_t)bad, "every refusal counted (%" PRIu64 " of %d)",
	      stats.rows_invalid, bad);
	CHECK(store_flush(st) == 0, "the valid rest lands: %s", store_last_error(st));
	store_get_stats(st, &stats);
	CHECK(stats.offcpu_rows_written == 2 && stats.offcpu_us_written == 60,
	      "two valid rows written (%" PRIu64 ", %" PRIu64 " µs)", stats.offcpu_rows_written,
	      stats.offcpu_us_written);
	conn = testdb_connect(ci);
	CHECK(testdb_scalar(conn, "SELECT sum(u) FROM traceprof.offcpu, unnest(us) u") == 60,
	      "60 µs stored");
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

	CHECK(testdb_create("tp_soff_bounds", ci, sizeof(ci)) == 0, "db bounds");
	conn = testdb_connect(ci);
	st = testdb_store(ci, true, 10, NULL);
	add_sample_rows(st, 6, now_us() - 60 * SEC, 1, &n);
	add_offcpu_rows(st, 6, now_us() - 60 * SEC, 1, &m);
	CHECK(n == 6 && m == 4, "offcpu rows share the 10-row bound (%d + %d)", n, m);
	store_get_stats(st, &stats);
	CHECK(stats.rows_dropped_full == 2, "2 dropped (%" PRIu64 ")", stats.rows_dropped_full);
	CHECK(store_flush(st) == 0, "flush: %s", store_last_error(st));
	m = 0;
	add_offcpu_rows(st, 10, now_us() - 60 * SEC, 100, &m);
	CHECK(m == 10, "room again after a flush");
	CHECK(store_flush(st) == 0, "flush offcpu rows alone: %s", store_last_error(st));
	CHECK(testdb_scalar(conn, "SELECT count(*) FROM traceprof.offcpu") == 14, "14 rows");

	strftime(part, sizeof(part), "%Y%m%d", gmtime(&day));
	snprintf(sql, sizeof(sql), "SELECT (to_regclass('traceprof.offcpu_p%s') IS NULL)::int",
		 part);
	CHECK(testdb_scalar(conn, sql) == 1, "no partition for 4 days ago yet");
	m = 0;
	add_offcpu_rows(st, 5, old, 200, &m);
	CHECK(store_flush(st) == 0, "flush into a new day: %s", store_last_error(st));
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM traceprof.offcpu_p%s", part);
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

	CHECK(testdb_create("tp_soff_kill", ci, sizeof(ci)) == 0, "db kill");
	conn = testdb_connect(ci);
	st = testdb_store(ci, false, 0, "tp_soff_kill");
	add_sample_rows(st, 500, now_us() - 60 * SEC, 1, &n);
	add_offcpu_rows(st, 500, now_us() - 60 * SEC, 1, &m);
	CHECK(testdb_scalar(conn, "SELECT count(pg_terminate_backend(pid, 10000)) FROM "
				  "pg_stat_activity WHERE application_name = 'tp_soff_kill'") == 1,
	      "terminated the store's backend");
	CHECK(store_flush(st) == -ECONNRESET, "flush on a killed connection: %s",
	      store_last_error(st));
	CHECK(store_pending_rows(st) == 1000, "data kept");
	CHECK(store_reconnect(st) == 0, "reconnect: %s", store_last_error(st));
	CHECK(store_flush(st) == 0, "flush after reconnect: %s", store_last_error(st));
	CHECK(testdb_scalar(conn, "SELECT count(*) FROM traceprof.offcpu") == 500 &&
		  testdb_scalar(conn, "SELECT count(*) FROM traceprof.samples") == 500,
	      "every row exactly once");
	store_get_stats(st, &stats);
	CHECK(stats.offcpu_rows_written == 500 && stats.offcpu_us_written == 500 * 5700 &&
		  stats.flush_errors == 1,
	      "stats after a killed connection");
	store_free(st);
	PQfinish(conn);
}

int main(void)
{
	log_set_level(TP_LOG_QUIET);
	test_round_trip();
	test_invalid();
	test_bounds_and_partitions();
	test_killed_connection();
	return check_done();
}
