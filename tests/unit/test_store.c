/*
 * test_store: the store writer against a real PostgreSQL.
 *
 * Every field survives the round trip (read back with SQL), binary and text
 * COPY store identical rows, dictionary entries are sent once and are
 * idempotent across writers, bad rows are refused and counted while the rest
 * of the batch lands, bounds give -ENOBUFS, a killed connection (before or
 * during COMMIT, through tests/unit/pgproxy.c) loses nothing and duplicates
 * nothing after store_reconnect(),
 * an old schema and a wrong password give clear messages (without the
 * password), and rows for a day without a partition get one.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "pgproxy.h"
#include "testdb.h"
#include "traceprof/ids.h"
#include "traceprof/log.h"
#include "traceprof/migrate.h"
#include "traceprof/pgcluster.h"
#include "traceprof/store.h"

#define SEC	    1000000LL
#define DAY	    (86400 * SEC)
#define NEG_STACK   0xfedcba9876543210ULL
#define FUNC_NAME   "ns::na\xc3\xafve<T>::run(\tx\\y)\r\nline2 \xf0\x9f\x94\xa5"
#define ROUTE_PATH  "/api/items/{id}"
#define TEST_PASSWD "S3cretPassw0rdXYZ"

static char captured[8192]; /* stderr of the last open_capturing() */

static int64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * SEC + ts.tv_nsec / 1000;
}

/* store_open() with its log lines captured into `captured`. */
static struct store *open_capturing(const char *ci, const struct store_opts *opts)
{
	FILE *tmp = tmpfile();
	int saved = dup(STDERR_FILENO);
	struct store *st;
	size_t n;
	int e;

	fflush(stderr);
	dup2(fileno(tmp), STDERR_FILENO);
	log_set_level(TP_LOG_INFO);
	st = store_open(ci, opts);
	e = errno;
	log_set_level(TP_LOG_QUIET);
	fflush(stderr);
	dup2(saved, STDERR_FILENO);
	close(saved);
	rewind(tmp);
	n = fread(captured, 1, sizeof(captured) - 1, tmp);
	captured[n] = '\0';
	fclose(tmp);
	errno = e;
	return st;
}

static void make_trace(uint8_t id[16], unsigned seed)
{
	for (int i = 0; i < 16; i++)
		id[i] = (uint8_t)(seed * 31 + i + 1);
}

static const struct store_source fixture_src = {"checkout",
						"shop",
						"checkout-7d9f",
						"c0ffee",
						"node-1",
						"abcdef0123",
						"{\"app\": \"checkout\", \"tier\": \"web\"}"};

/* Dictionary entries and rows of every shape; ids of the fixture. */
struct fixture {
	int64_t base;	   /* bucket of the first sample row */
	uint64_t source;   /* ids_source of fixture_src */
	uint64_t fn;	   /* function with special characters */
	uint64_t frame1;   /* frame with file, line and address */
	uint64_t frame2;   /* frame with NULL file, line and address */
	uint64_t stack1;   /* stack of frame1, frame2 */
	uint64_t route;	   /* GET ROUTE_PATH */
	uint8_t trace[16]; /* trace of the tagged rows */
	uint64_t span;	   /* their span */
};

static void write_fixture(struct store *st, struct fixture *fx)
{
	uint64_t frames[2];
	uint64_t stacks[2];
	uint32_t counts_big[2] = {50, 7};
	uint32_t counts_one[2] = {1, 1};
	uint32_t counts_small[2] = {2, 1};
	struct store_sample_row r = {0};
	struct store_request q = {0};

	fx->source = ids_source(fixture_src.service, fixture_src.namespace_, fixture_src.pod,
				fixture_src.container, fixture_src.node, fixture_src.build_id);
	fx->fn = ids_function("/usr/lib/libshop.so", FUNC_NAME);
	fx->frame1 = ids_frame(fx->fn, "b1d", "src/shop.c", 42, 0x401000);
	fx->frame2 = ids_frame(fx->fn, "", NULL, 0, 0);
	frames[0] = fx->frame1;
	frames[1] = fx->frame2;
	fx->stack1 = ids_stack(frames, 2);
	fx->route = ids_route("GET", ROUTE_PATH);
	make_trace(fx->trace, 1);
	fx->span = 0x1122334455667788ULL;
	CHECK(store_add_source(st, fx->source, &fixture_src) == 0, "source");
	CHECK(store_add_function(st, fx->fn, FUNC_NAME, "/usr/lib/libshop.so", 0) == 0, "function");
	CHECK(store_add_frame(st, fx->frame1, fx->fn, "b1d", "src/shop.c", 42, 0x401000) == 0,
	      "frame1");
	CHECK(store_add_frame(st, fx->frame2, fx->fn, NULL, NULL, 0, 0) == 0, "frame2");
	CHECK(store_add_stack(st, fx->stack1, frames, 2) == 0, "stack");
	CHECK(store_add_route(st, fx->route, "GET", ROUTE_PATH) == 0, "route");

	stacks[0] = fx->stack1;
	stacks[1] = NEG_STACK;
	r.source_id = fx->source;
	r.stacks = stacks;
	r.n = 2;
	/* 1: tagged, counts NULL */
	r.bucket_us = fx->base;
	memcpy(r.trace_id, fx->trace, 16);
	r.span_id = fx->span;
	r.hz = 19;
	CHECK(store_add_samples(st, &r) == 0, "sample row 1");
	/* 2: untagged, counts kept (smaller than repeating) */
	r.bucket_us = fx->base + 1;
	memset(r.trace_id, 0, 16);
	r.span_id = 0;
	r.hz = 99;
	r.counts = counts_big;
	CHECK(store_add_samples(st, &r) == 0, "sample row 2");
	/* 3: all-one counts are stored as NULL */
	r.bucket_us = fx->base + 2;
	memcpy(r.trace_id, fx->trace, 16);
	r.span_id = fx->span;
	r.hz = 1000;
	r.counts = counts_one;
	CHECK(store_add_samples(st, &r) == 0, "sample row 3");
	/* 4: a small repeat is stored as the stack repeated */
	r.bucket_us = fx->base + 3;
	r.hz = 1;
	r.counts = counts_small;
	CHECK(store_add_samples(st, &r) == 0, "sample row 4");

	q.start_us = fx->base + 7;
	q.duration_us = 123456;
	q.source_id = fx->source;
	memcpy(q.trace_id, fx->trace, 16);
	q.span_id = fx->span;
	q.route_id = fx->route;
	q.status_code = 503;
	q.context_source = STORE_CTX_SOURCE_ZEROCODE;
	CHECK(store_add_request(st, &q) == 0, "root request");
	q.start_us = fx->base + 8;
	q.duration_us = 0;
	q.parent_span_id = fx->span;
	q.span_id = 0x8000000000000001ULL;
	q.route_id = 0;
	q.status_code = 0;
	q.context_source = 0; /* not recorded: NULL */
	CHECK(store_add_request(st, &q) == 0, "child request");
	CHECK(store_pending_rows(st) == 6, "6 rows pending (%zu)", store_pending_rows(st));
}

static void expect_text(PGconn *conn, const char *sql, const char *want, const char *what)
{
	char *got = testdb_text(conn, sql);

	CHECK(strcmp(got, want) == 0, "%s:\n  got  %s\n  want %s", what, got, want);
	free(got);
}

static void check_fixture(PGconn *conn, const struct fixture *fx, const char *fmt)
{
	char tr[33], sp[17], want[1024], sql[512];
	long long s1 = (long long)fx->stack1, neg = (long long)(int64_t)NEG_STACK;
	long long src = (long long)fx->source;

	ids_format_trace_id(fx->trace, tr);
	ids_format_span_id(fx->span, sp);
	snprintf(want, sizeof(want),
		 "%lld|%lld|%s|%s|19|{%lld,%lld}|NULL\n"
		 "%lld|%lld|NULL|NULL|99|{%lld,%lld}|{50,7}\n"
		 "%lld|%lld|%s|%s|1000|{%lld,%lld}|NULL\n"
		 "%lld|%lld|%s|%s|1|{%lld,%lld,%lld}|NULL",
		 (long long)fx->base, src, tr, sp, s1, neg, (long long)fx->base + 1, src, s1, neg,
		 (long long)fx->base + 2, src, tr, sp, s1, neg, (long long)fx->base + 3, src, tr,
		 sp, s1, s1, neg);
	expect_text(
	    conn,
	    "SELECT string_agg(concat_ws('|', (extract(epoch FROM bucket) * 1000000)::bigint,"
	    " source_id, coalesce(traceprof.trace_id_text(trace_id), 'NULL'),"
	    " coalesce(traceprof.span_id_text(span_id), 'NULL'), hz, stacks,"
	    " coalesce(counts::text, 'NULL')), E'\\n' ORDER BY bucket) FROM traceprof.samples",
	    want, fmt);
	snprintf(want, sizeof(want),
		 "%lld|%lld|%s|%s|NULL|%lld|123456|503|2\n"
		 "%lld|%lld|%s|8000000000000001|%s|0|0|0|NULL",
		 (long long)fx->base + 7, src, tr, sp, (long long)fx->route,
		 (long long)fx->base + 8, src, tr, sp);
	expect_text(conn,
		    "SELECT string_agg(concat_ws('|', (extract(epoch FROM start_time) * 1000000)"
		    "::bigint, source_id, traceprof.trace_id_text(trace_id),"
		    " traceprof.span_id_text(span_id),"
		    " coalesce(traceprof.span_id_text(parent_span_id), 'NULL'), route_id,"
		    " duration_us, status_code, coalesce(context_source::text, 'NULL')), E'\\n'"
		    " ORDER BY start_time) FROM traceprof.requests",
		    want, fmt);
	snprintf(sql, sizeof(sql), "SELECT name FROM traceprof.functions WHERE function_id = %lld",
		 (long long)fx->fn);
	expect_text(conn, sql, FUNC_NAME, "function name with tab, newline, backslash, UTF-8");
	snprintf(sql, sizeof(sql),
		 "SELECT string_agg(concat_ws('|', function_id, build_id, coalesce(file, 'NULL'),"
		 " coalesce(line::text, 'NULL'), coalesce(address::text, 'NULL')), ';'"
		 " ORDER BY line NULLS LAST) FROM traceprof.frames");
	snprintf(want, sizeof(want), "%lld|b1d|src/shop.c|42|4198400;%lld||NULL|NULL|NULL",
		 (long long)fx->fn, (long long)fx->fn);
	expect_text(conn, sql, want, "frames");
	snprintf(want, sizeof(want), "{%lld,%lld}", (long long)fx->frame1, (long long)fx->frame2);
	expect_text(conn, "SELECT frame_ids::text FROM traceprof.stacks", want, "stack frames");
	expect_text(conn,
		    "SELECT concat_ws('|', service, namespace, pod, container, node, build_id) "
		    "FROM traceprof.sources",
		    "checkout|shop|checkout-7d9f|c0ffee|node-1|abcdef0123", "source");
	expect_text(conn, "SELECT labels ->> 'tier' FROM traceprof.sources", "web",
		    "source labels (jsonb)");
	expect_text(conn, "SELECT concat_ws('|', method, route) FROM traceprof.routes",
		    "GET|" ROUTE_PATH, "route");
	expect_text(conn,
		    "SELECT concat_ws('|', service, method, route, status_code, duration_ms, "
		    "context_source) FROM traceprof.requests_v ORDER BY start_time LIMIT 1",
		    "checkout|GET|" ROUTE_PATH "|503|123.4560000000000000|zero-code-http",
		    "requests_v joins");
}

/* Every table, canonical text: equal dumps mean equal rows. */
static char *dump_all(PGconn *conn)
{
	return testdb_text(
	    conn, "SELECT string_agg(t, E'\\n' ORDER BY t) FROM ("
		  " SELECT s::text AS t FROM traceprof.samples s"
		  " UNION ALL SELECT r::text FROM traceprof.requests r"
		  " UNION ALL SELECT f::text FROM traceprof.functions f"
		  " UNION ALL SELECT f::text FROM traceprof.frames f"
		  " UNION ALL SELECT s::text FROM traceprof.stacks s"
		  " UNION ALL SELECT concat_ws('|', source_id, service, namespace, pod, container,"
		  "  node, build_id, labels) FROM traceprof.sources"
		  " UNION ALL SELECT r::text FROM traceprof.routes r) x");
}

static void test_round_trip(void)
{
	char ci_bin[4200], ci_txt[4200];
	struct fixture fx = {.base = (now_us() / SEC - 3600) * SEC + 123457};
	struct store_stats stats;
	char *dump_bin, *dump_txt;
	struct store *st;
	PGconn *conn;

	CHECK(testdb_create("tp_store_bin", ci_bin, sizeof(ci_bin)) == 0, "db bin");
	CHECK(testdb_create("tp_store_txt", ci_txt, sizeof(ci_txt)) == 0, "db txt");
	for (int text = 0; text < 2; text++) {
		const char *ci = text ? ci_txt : ci_bin;
		const char *fmt = text ? "text COPY" : "binary COPY";

		st = testdb_store(ci, text, 0, NULL);
		write_fixture(st, &fx);
		CHECK(store_flush(st) == 0, "%s flush: %s", fmt, store_last_error(st));
		CHECK(store_pending_rows(st) == 0, "nothing pending after flush");
		store_get_stats(st, &stats);
		CHECK(stats.sample_rows_written == 4 && stats.samples_written == 2 + 57 + 2 + 3 &&
			  stats.requests_written == 2 && stats.dict_entries_written == 6 &&
			  stats.flushes == 1 && stats.flush_errors == 0 && stats.bytes_sent > 0,
		      "%s stats rows=%" PRIu64 " samples=%" PRIu64 " req=%" PRIu64 " dict=%" PRIu64,
		      fmt, stats.sample_rows_written, stats.samples_written, stats.requests_written,
		      stats.dict_entries_written);
		CHECK(store_flush(st) == 0, "empty flush is fine");
		conn = testdb_connect(ci);
		CHECK(testdb_scalar(conn,
				    "SELECT count(*) FROM pg_stat_activity WHERE datname = "
				    "current_database() AND application_name = 'traceprof'") == 1,
		      "default application_name");
		store_free(st);
		check_fixture(conn, &fx, fmt);
		PQfinish(conn);
	}
	conn = testdb_connect(ci_bin);
	dump_bin = dump_all(conn);
	PQfinish(conn);
	conn = testdb_connect(ci_txt);
	dump_txt = dump_all(conn);
	PQfinish(conn);
	CHECK(strcmp(dump_bin, dump_txt) == 0,
	      "binary and text COPY give identical rows:\n%s\n--\n%s", dump_bin, dump_txt);
	free(dump_bin);
	free(dump_txt);
}

static void test_dictionary(void)
{
	char ci[4200];
	struct store_stats a_stats, b_stats;
	uint64_t frames[1] = {7};
	struct store *a, *b;
	PGconn *conn;

	CHECK(testdb_create("tp_store_dict", ci, sizeof(ci)) == 0, "db dict");
	a = testdb_store(ci, false, 0, NULL);
	b = testdb_store(ci, true, 0, NULL);
	for (int i = 0; i < 3; i++) {
		CHECK(store_add_function(a, 11, "f", "", 0) == 0, "function again is fine");
		CHECK(store_add_stack(a, 12, frames, 1) == 0, "stack again is fine");
	}
	CHECK(store_add_stack(a, 11, frames, 1) == 0, "same id, other kind is another entry");
	CHECK(store_flush(a) == 0, "flush a: %s", store_last_error(a));
	CHECK(store_add_function(a, 11, "f", "", 0) == 0, "already sent");
	CHECK(store_flush(a) == 0, "flush a again");
	store_get_stats(a, &a_stats);
	CHECK(a_stats.dict_entries_written == 3, "a sent each entry once (%" PRIu64 ")",
	      a_stats.dict_entries_written);
	CHECK(store_add_function(b, 11, "f", "", 0) == 0 && store_add_stack(b, 12, frames, 1) == 0,
	      "b adds the same entries");
	CHECK(store_flush(b) == 0, "second writer's flush of the same ids: %s",
	      store_last_error(b));
	store_get_stats(b, &b_stats);
	CHECK(b_stats.dict_entries_written == 2, "b sent its two");
	conn = testdb_connect(ci);
	CHECK(testdb_scalar(conn,
			    "SELECT count(*) FROM traceprof.functions WHERE function_id = 11") == 1,
	      "one function row");
	CHECK(testdb_scalar(conn, "SELECT count(*) FROM traceprof.stacks") == 2, "two stacks");
	store_free(b);

	/* Bounded pending entries; a full id set is cleared and nothing is lost. */
	for (uint64_t i = 1; i <= 200000; i++)
		if (store_add_stack(a, 1000000 + i, frames, 1) != 0) {
			CHECK(0, "stack %" PRIu64 " refused", i);
			break;
		}
	CHECK(store_add_stack(a, 5, frames, 1) == -ENOBUFS, "dictionary buffer full");
	store_get_stats(a, &a_stats);
	CHECK(a_stats.rows_dropped_full == 1, "counted as dropped");
	CHECK(store_flush(a) == 0, "flush 200k stacks: %s", store_last_error(a));
	/* the id set grew from 4,096 slots through the 200k and still knows them all */
	store_get_stats(a, &a_stats);
	b_stats = a_stats;
	for (uint64_t i = 1; i <= 200000; i += 7)
		CHECK(store_add_stack(a, 1000000 + i, frames, 1) == 0, "known stack");
	CHECK(store_flush(a) == 0, "flush known stacks");
	store_get_stats(a, &a_stats);
	CHECK(a_stats.dict_entries_written == b_stats.dict_entries_written,
	      "known stacks not sent again (%" PRIu64 " -> %" PRIu64 ")",
	      b_stats.dict_entries_written, a_stats.dict_entries_written);
	for (uint64_t i = 200001; i <= 400000; i++)
		if (store_add_stack(a, 1000000 + i, frames, 1) != 0) {
			CHECK(0, "stack %" PRIu64 " refused", i);
			break;
		}
	CHECK(store_flush(a) == 0, "flush 200k more");
	CHECK(testdb_scalar(conn, "SELECT count(*) FROM traceprof.stacks") == 400002,
	      "every stack stored once");
	PQfinish(conn);
	store_free(a);
}

static void test_invalid(void)
{
	char ci[4200];
	int64_t now = now_us();
	uint64_t stacks[2] = {1, 2};
	uint64_t frames513[513] = {0};
	uint32_t zero_count[2] = {1, 0};
	struct store_source src = {"svc", "", "", "", "", "", ""};
	struct store_sample_row ok = {.bucket_us = now - 60 * SEC,
				      .source_id = 9,
				      .span_id = 3,
				      .hz = 19,
				      .n = 2,
				      .stacks = stacks};
	struct store_sample_row r;
	struct store_request q0 = {.start_us = now - 60 * SEC,
				   .duration_us = 5,
				   .source_id = 9,
				   .span_id = 4,
				   .status_code = 200};
	struct store_request q;
	struct store_stats stats;
	struct store *st;
	PGconn *conn;
	int bad = 0, good = 0;

	make_trace(ok.trace_id, 2);
	make_trace(q0.trace_id, 3);
	CHECK(testdb_create("tp_store_invalid", ci, sizeof(ci)) == 0, "db invalid");
	st = testdb_store(ci, false, 0, NULL);
#define BAD(call, what)                                                                            \
	do {                                                                                       \
		CHECK((call) == -EINVAL, "refused: %s", what);                                     \
		bad++;                                                                             \
	} while (0)
#define GOOD(call, what)                                                                           \
	do {                                                                                       \
		CHECK((call) == 0, "accepted: %s", what);                                          \
		good++;                                                                            \
	} while (0)
	GOOD(store_add_samples(st, &ok), "valid row");
	r = ok, r.hz = 0;
	BAD(store_add_samples(st, &r), "hz 0");
	r = ok, r.hz = 1001;
	BAD(store_add_samples(st, &r), "hz 1001");
	r = ok, r.n = 0;
	BAD(store_add_samples(st, &r), "n 0");
	r = ok, r.stacks = NULL;
	BAD(store_add_samples(st, &r), "no stacks");
	r = ok, r.counts = zero_count;
	BAD(store_add_samples(st, &r), "count 0");
	r = ok, r.span_id = 0;
	BAD(store_add_samples(st, &r), "trace without span");
	r = ok, memset(r.trace_id, 0, 16);
	BAD(store_add_samples(st, &r), "span without trace");
	r = ok, r.source_id = 0;
	BAD(store_add_samples(st, &r), "source 0");
	r = ok, r.bucket_us = now - 8 * DAY;
	BAD(store_add_samples(st, &r), "older than the 7-day retention");
	r = ok, r.bucket_us = now + DAY + 60 * SEC;
	BAD(store_add_samples(st, &r), "more than a day ahead");
	r = ok, r.bucket_us = now - 6 * DAY;
	GOOD(store_add_samples(st, &r), "6 days old");
	r = ok, r.span_id = 0, memset(r.trace_id, 0, 16);
	GOOD(store_add_samples(st, &r), "untagged");
	q = q0, memset(q.trace_id, 0, 16);
	BAD(store_add_request(st, &q), "request without trace");
	q = q0, q.span_id = 0;
	BAD(store_add_request(st, &q), "request without span");
	q = q0, q.duration_us = -1;
	BAD(store_add_request(st, &q), "negative duration");
	q = q0, q.status_code = 1000;
	BAD(store_add_request(st, &q), "status 1000");
	q = q0, q.status_code = -1;
	BAD(store_add_request(st, &q), "status -1");
	q = q0, q.context_source = STORE_CTX_SOURCE_MAX + 1;
	BAD(store_add_request(st, &q), "unknown context source");
	q = q0, q.start_us = now - 30 * DAY;
	BAD(store_add_request(st, &q), "request too old");
	GOOD(store_add_request(st, &q0), "valid request");
	BAD(store_add_function(st, 1, NULL, "", 0), "function without name");
	BAD(store_add_function(st, 1, "", "", 0), "empty function name");
	BAD(store_add_function(st, 1, "bad\xff", "", 0), "invalid UTF-8");
	BAD(store_add_function(st, 1, "over\xc0\xaflong", "", 0), "overlong UTF-8");
	BAD(store_add_function(st, 1, "surrogate\xed\xa0\x80", "", 0), "UTF-16 surrogate");
	BAD(store_add_function(st, 1, "cut\xe2\x82", "", 0), "truncated UTF-8");
	BAD(store_add_function(st, 1, "beyond\xf4\x90\x80\x80", "", 0), "above U+10FFFF");
	BAD(store_add_function(st, 1, "f", "mod\x80", 0), "invalid module");
	BAD(store_add_function(st, 1, "f", "", 3), "kind 3");
	BAD(store_add_function(st, 0, "f", "", 0), "id 0");
	GOOD(store_add_function(st, 1, "max \xf4\x8f\xbf\xbf \xe2\x82\xac", "", 0), "valid UTF-8");
	BAD(store_add_source(st, 2, NULL), "no source");
	src.service = "";
	BAD(store_add_source(st, 2, &src), "empty service");
	src.service = "svc";
	src.pod = "p\xfe";
	BAD(store_add_source(st, 2, &src), "invalid pod");
	src.pod = NULL;
	src.labels_json = "[\"a\"]";
	BAD(store_add_source(st, 2, &src), "labels not an object");
	src.labels_json = "{\"a\": 1}";
	BAD(store_add_source(st, 2, &src), "a label value not a string");
	src.labels_json = "{\"a\": \"x\\u0000\"}";
	BAD(store_add_source(st, 2, &src), "a label with NUL (jsonb refuses it)");
	src.labels_json = "{\"a\": ";
	BAD(store_add_source(st, 2, &src), "labels not JSON");
	src.labels_json = NULL;
	GOOD(store_add_source(st, 2, &src), "source with NULL members");
	BAD(store_add_stack(st, 3, stacks, 0), "empty stack");
	BAD(store_add_stack(st, 3, frames513, 513), "513 frames");
	GOOD(store_add_stack(st, 3, frames513, 512), "512 frames");
	BAD(store_add_frame(st, 4, 1, "", "f\xc3", 1, 0), "invalid file");
	BAD(store_add_route(st, 5, "GET\xff", "/"), "invalid method");
	GOOD(store_add_route(st, 5, NULL, NULL), "route with NULL members");
#undef BAD
#undef GOOD
	store_get_stats(st, &stats);
	CHECK(stats.rows_invalid == (uint64_t)bad, "every refusal counted (%" PRIu64 " of %d)",
	      stats.rows_invalid, bad);
	CHECK(store_flush(st) == 0, "the valid rest lands: %s", store_last_error(st));
	store_get_stats(st, &stats);
	CHECK(stats.sample_rows_written == 3 && stats.requests_written == 1 &&
		  stats.dict_entries_written == 4,
	      "valid rows written");
	conn = testdb_connect(ci);
	CHECK(testdb_scalar(conn, "SELECT count(*) FROM traceprof.samples") == 3, "3 sample rows");
	CHECK(testdb_scalar(conn, "SELECT count(*) FROM traceprof.sources WHERE pod = ''") == 1,
	      "NULL members stored as ''");
	PQfinish(conn);
	store_free(st);
	(void)good;
}

static void add_rows(struct store *st, int count, int64_t t, unsigned seed, int *accepted)
{
	uint64_t stacks[3] = {101, 102, 103};
	struct store_sample_row r = {
	    .bucket_us = t, .source_id = 77, .hz = 19, .n = 3, .stacks = stacks};

	for (int i = 0; i < count; i++) {
		make_trace(r.trace_id, seed + (unsigned)i);
		r.span_id = 1000 + (uint64_t)i;
		if (store_add_samples(st, &r) == 0)
			(*accepted)++;
	}
}

static void test_bounds_and_partitions(void)
{
	char ci[4200], sql[256];
	struct store_request q = {.duration_us = 1, .source_id = 77, .span_id = 1};
	struct store_stats stats;
	struct store *st;
	PGconn *conn;
	int64_t old = now_us() - 4 * DAY;
	time_t day = (time_t)(old / SEC);
	char part[32];
	int n = 0;

	CHECK(testdb_create("tp_store_bounds", ci, sizeof(ci)) == 0, "db bounds");
	conn = testdb_connect(ci);
	st = testdb_store(ci, true, 10, NULL);
	add_rows(st, 12, now_us() - 60 * SEC, 1, &n);
	CHECK(n == 10, "10 of 12 rows fit (%d)", n);
	make_trace(q.trace_id, 5);
	q.start_us = now_us();
	CHECK(store_add_request(st, &q) == -ENOBUFS, "requests share the bound");
	store_get_stats(st, &stats);
	CHECK(stats.rows_dropped_full == 3, "3 dropped (%" PRIu64 ")", stats.rows_dropped_full);
	CHECK(store_flush(st) == 0, "flush");
	CHECK(store_add_request(st, &q) == 0, "room again after a flush");

	/* A day that has no partition yet gets one. */
	strftime(part, sizeof(part), "%Y%m%d", gmtime(&day));
	snprintf(sql, sizeof(sql), "SELECT (to_regclass('traceprof.samples_p%s') IS NULL)::int",
		 part);
	CHECK(testdb_scalar(conn, sql) == 1, "no partition for 4 days ago yet");
	n = 0;
	add_rows(st, 5, old, 100, &n);
	CHECK(store_flush(st) == 0, "flush into a new day: %s", store_last_error(st));
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM traceprof.samples_p%s", part);
	CHECK(testdb_scalar(conn, sql) == 5, "rows in the new partition");

	/* Dropped behind the store's back (it remembers the day): found and recreated. */
	snprintf(sql, sizeof(sql), "DROP TABLE traceprof.samples_p%s", part);
	PQclear(testdb_exec(conn, sql));
	n = 0;
	add_rows(st, 4, old, 200, &n);
	CHECK(store_flush(st) == 0, "flush after the partition was dropped: %s",
	      store_last_error(st));
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM traceprof.samples_p%s", part);
	CHECK(testdb_scalar(conn, sql) == 4, "partition recreated with the rows");
	store_get_stats(st, &stats);
	CHECK(stats.flush_errors == 0, "no flush error for a recreated partition");
	store_free(st);
	PQfinish(conn);
}

static void terminate(PGconn *admin, const char *app)
{
	char sql[256];

	snprintf(sql, sizeof(sql),
		 "SELECT count(pg_terminate_backend(pid, 10000)) FROM pg_stat_activity "
		 "WHERE application_name = '%s'",
		 app);
	CHECK(testdb_scalar(admin, sql) == 1, "terminated the store's backend");
}

static void test_killed_connection(void)
{
	char ci[4200];
	struct store_stats stats;
	struct store *st;
	PGconn *conn;
	int n = 0;

	CHECK(testdb_create("tp_store_kill", ci, sizeof(ci)) == 0, "db kill");
	conn = testdb_connect(ci);
	st = testdb_store(ci, false, 0, "tp_kill_test");
	add_rows(st, 1000, now_us() - 60 * SEC, 1, &n);
	CHECK(store_add_route(st, 9, "GET", "/a") == 0, "route");
	terminate(conn, "tp_kill_test");
	CHECK(store_flush(st) == -ECONNRESET, "flush on a killed connection: %s",
	      store_last_error(st));
	CHECK(strstr(store_last_error(st), "dbname=tp_store_kill") != NULL, "error has context: %s",
	      store_last_error(st));
	CHECK(store_pending_rows(st) == 1000, "data kept");
	CHECK(store_flush(st) == -ECONNRESET, "still not connected");
	store_get_stats(st, &stats);
	CHECK(stats.flush_errors == 2 && stats.sample_rows_written == 0, "errors counted");
	CHECK(store_reconnect(st) == 0, "reconnect: %s", store_last_error(st));
	CHECK(store_flush(st) == 0, "flush after reconnect: %s", store_last_error(st));
	CHECK(testdb_scalar(conn, "SELECT count(*) FROM traceprof.samples") == 1000,
	      "every row exactly once");
	CHECK(testdb_scalar(conn, "SELECT count(*) FROM traceprof.routes WHERE route_id = 9") == 1,
	      "dictionary written");

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
	int n = 0, rc, tries = 0;

	CHECK(testdb_create("tp_store_commit", ci, sizeof(ci)) == 0, "db commit");
	proxy = pgproxy_start(ci, via, sizeof(via));
	if (!proxy) {
		CHECK(0, "proxy");
		return;
	}
	conn = testdb_connect(ci);
	st = testdb_store(via, false, 0, NULL);

	/* Committed, reply lost: the next flush finds it committed and does not resend. */
	add_rows(st, 300, now_us() - 60 * SEC, 1, &n);
	CHECK(store_add_route(st, 10, "GET", "/b") == 0, "route");
	pgproxy_set_mode(proxy, PGPROXY_LOSE_COMMIT_REPLY);
	CHECK(store_flush(st) == -ECONNRESET, "reply to COMMIT lost: %s", store_last_error(st));
	CHECK(strstr(store_last_error(st), "commit failed") != NULL, "says it was the commit: %s",
	      store_last_error(st));
	CHECK(store_pending_rows(st) == 300, "kept while the outcome is unknown");
	CHECK(testdb_scalar(conn, "SELECT count(*) FROM traceprof.samples") == 300,
	      "the server did commit");
	add_rows(st, 20, now_us() - 50 * SEC, 1000, &n);
	CHECK(store_reconnect(st) == 0, "reconnect: %s", store_last_error(st));
	CHECK(store_flush(st) == 0, "flush after a lost commit reply: %s", store_last_error(st));
	CHECK(testdb_scalar(conn, "SELECT count(*) FROM traceprof.samples") == 320,
	      "committed batch not sent twice, later rows sent (%lld)",
	      testdb_scalar(conn, "SELECT count(*) FROM traceprof.samples"));
	store_get_stats(st, &stats);
	CHECK(stats.sample_rows_written == 320 && stats.flushes == 2 && stats.flush_errors == 1 &&
		  stats.dict_entries_written == 1,
	      "stats count the recovered batch once");

	/* COMMIT never reached the server: it aborts; the batch is sent again. */
	add_rows(st, 100, now_us() - 40 * SEC, 2000, &n);
	pgproxy_set_mode(proxy, PGPROXY_DROP_COMMIT);
	CHECK(store_flush(st) == -ECONNRESET, "COMMIT lost on the way");
	CHECK(store_reconnect(st) == 0, "reconnect");
	/* Until the old backend notices its client is gone, the outcome is "in progress". */
	while ((rc = store_flush(st)) == -EAGAIN && tries++ < 100)
		usleep(50000);
	CHECK(rc == 0, "flush after a dropped commit: %s", store_last_error(st));
	CHECK(testdb_scalar(conn, "SELECT count(*) FROM traceprof.samples") == 420,
	      "aborted batch written once");
	store_free(st);
	PQfinish(conn);
	pgproxy_stop(proxy);
}

static void test_old_schema(void)
{
	char ci[4200];
	struct store_opts o = {0};
	struct store *st;
	PGconn *conn;

	CHECK(testdb_create("tp_store_old", ci, sizeof(ci)) == 0, "db old");
	conn = testdb_connect(ci);
	PQclear(
	    testdb_exec(conn, "SET client_min_messages = warning; DROP SCHEMA traceprof CASCADE"));
	st = open_capturing(ci, &o);
	CHECK(!st && errno == EPROTO, "no schema refused (errno %d)", errno);
	CHECK(strstr(captured, "no traceprof schema") && strstr(captured, "traceprof-db migrate"),
	      "says what to run: %s", captured);
	CHECK(migrate_apply_upto(conn, 1, NULL) == 0, "schema version 1");
	st = open_capturing(ci, &o);
	CHECK(!st && errno == EPROTO, "old schema refused");
	CHECK(strstr(captured, "schema version 1") && strstr(captured, "traceprof-db migrate") &&
		  strstr(captured, "dbname=tp_store_old"),
	      "says which database and what to run: %s", captured);
	o.migrate = true;
	st = open_capturing(ci, &o);
	CHECK(st != NULL, "opens with migrate: %s", captured);
	CHECK(migrate_current_version(conn) == migrate_latest_version(), "migrated");
	store_free(st);
	PQfinish(conn);
}

static void test_password(void)
{
	char tmpl[] = "/tmp/tp-store-XXXXXX";
	char dir[256], ci[512], pw[64] = "";
	struct pgcluster_opts opts = {.fast = true, .port = 40000 + getpid() % 20000};
	struct store *st;
	FILE *f;

	if (!mkdtemp(tmpl))
		return;
	chmod(tmpl, 0755);
	snprintf(dir, sizeof(dir), "%s/db", tmpl);
	if (pgcluster_create(dir, &opts) != 0) {
		CHECK(0, "cluster with a TCP port");
		return;
	}
	snprintf(ci, sizeof(ci), "postgresql://traceprof_writer:%s@127.0.0.1:%d/traceprof",
		 TEST_PASSWD, opts.port);
	st = open_capturing(ci, NULL);
	CHECK(!st && errno == ECONNREFUSED, "wrong password refused");
	CHECK(strstr(captured, "password authentication failed"), "says why: %s", captured);
	CHECK(strstr(captured, "host=127.0.0.1") && strstr(captured, "dbname=traceprof"),
	      "says where: %s", captured);
	CHECK(!strstr(captured, TEST_PASSWD), "never the password: %s", captured);
	snprintf(ci, sizeof(ci),
		 "host=127.0.0.1 port=%d dbname=traceprof user=traceprof_writer password=%s",
		 opts.port, TEST_PASSWD);
	st = open_capturing(ci, NULL);
	CHECK(!st && !strstr(captured, TEST_PASSWD) && strstr(captured, "failed"),
	      "keyword form: %s", captured);
	st = open_capturing("postgresql://traceprof:" TEST_PASSWD "%zz@127.0.0.1/traceprof", NULL);
	CHECK(!st && errno == EINVAL && !strstr(captured, TEST_PASSWD),
	      "malformed URI, no password: %s", captured);

	/* The writer's password, from its passfile: "*:*:*:traceprof_writer:PASSWORD". */
	snprintf(ci, sizeof(ci), "%s/auth/writer.pgpass", dir);
	f = fopen(ci, "r");
	CHECK(f && fgets(ci, sizeof(ci), f) && strncmp(ci, "*:*:*:traceprof_writer:", 23) == 0,
	      "the writer's passfile");
	if (f)
		fclose(f);
	snprintf(pw, sizeof(pw), "%.*s", (int)strcspn(ci + 23, "\n"), ci + 23);
	snprintf(ci, sizeof(ci), "postgresql://traceprof_writer:%s@127.0.0.1:%d/traceprof", pw,
		 opts.port);
	st = open_capturing(ci, NULL);
	CHECK(st != NULL, "right password connects: %s", captured);
	CHECK(st && !strstr(store_describe(st), pw), "describe has no password: %s",
	      store_describe(st));
	store_free(st);
	pgcluster_remove(dir);
	rmdir(tmpl);
}

int main(void)
{
	log_set_level(TP_LOG_QUIET);
	test_round_trip();
	test_dictionary();
	test_invalid();
	test_bounds_and_partitions();
	test_killed_connection();
	test_lost_commit();
	test_old_schema();
	test_password();
	return check_done();
}
