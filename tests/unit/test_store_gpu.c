/*
 * test_store_gpu: store_add_gpu() against a real PostgreSQL, and the
 * aggregator's GPU rows (agg_add_gpu).
 *
 * GPU rows land in traceprof.gpu with every field (binary and text COPY
 * give identical rows), in the same flush as samples; bad rows are
 * refused and counted while the rest of the batch lands. The aggregator
 * sums launches and ns per (source, trace, span, stack) into GPU rows of
 * the window, after its sample rows, and refuses what the store would.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "aggregate.h"
#include "check.h"
#include "testdb.h"
#include "traceprof/log.h"
#include "traceprof/store.h"

#define SEC 1000000LL

static int64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * SEC + ts.tv_nsec / 1000;
}

#define GPU_ROWS_SQL                                                                               \
	"SELECT coalesce(string_agg(concat_ws('|', (extract(epoch FROM bucket) * "                 \
	"1000000)::bigint, source_id, coalesce(traceprof.trace_id_text(trace_id), 'NULL'),"        \
	" coalesce(traceprof.span_id_text(span_id), 'NULL'), stacks, launches, gpu_ns), E'\\n'"    \
	" ORDER BY bucket), '') FROM traceprof.gpu"

/* Every field, binary and text COPY, with a sample row in the same flush. */
static void test_round_trip(void)
{
	char ci[2][4200], want[2048], tr[33];
	int64_t base = (now_us() / SEC - 600) * SEC + 250001;
	uint64_t stacks[3] = {0x8000000000000005ULL, 7, 0x8000000000000005ULL};
	uint32_t launches[3] = {2147483647, 1, 40};
	uint64_t ns[3] = {9223372036854775807ULL, 0, 123456789};
	struct store_gpu_row r = {.source_id = 5,
				  .span_id = 0x42,
				  .n = 3,
				  .stacks = stacks,
				  .launches = launches,
				  .gpu_ns = ns};
	uint64_t sstack = 9;
	struct store_sample_row s = {.bucket_us = base,
				     .source_id = 5,
				     .span_id = 0x42,
				     .hz = 19,
				     .n = 1,
				     .stacks = &sstack};
	struct store_stats stats;
	char *dump[2];

	for (int i = 0; i < 16; i++)
		r.trace_id[i] = (uint8_t)(i + 1);
	memcpy(s.trace_id, r.trace_id, 16);
	for (int i = 0; i < 16; i++)
		snprintf(tr + 2 * i, 3, "%02x", r.trace_id[i]);
	CHECK(testdb_create("tp_sgpu_bin", ci[0], sizeof(ci[0])) == 0, "db bin");
	CHECK(testdb_create("tp_sgpu_txt", ci[1], sizeof(ci[1])) == 0, "db txt");
	for (int text = 0; text < 2; text++) {
		const char *fmt = text ? "text COPY" : "binary COPY";
		struct store *st = testdb_store(ci[text], text, 0, NULL);
		struct store_gpu_row u = r;
		uint32_t one = 1;
		uint64_t one_ns = 3;
		PGconn *conn;

		r.bucket_us = base;
		CHECK(store_add_gpu(st, &r) == 0, "%s: tagged row", fmt);
		u.bucket_us = base + 1, u.n = 1, u.launches = &one, u.gpu_ns = &one_ns,
		u.span_id = 0;
		memset(u.trace_id, 0, 16);
		CHECK(store_add_gpu(st, &u) == 0, "%s: untagged row", fmt);
		CHECK(store_add_samples(st, &s) == 0, "%s: sample", fmt);
		CHECK(store_pending_rows(st) == 3, "%s: 3 rows pending (%zu)", fmt,
		      store_pending_rows(st));
		CHECK(store_flush(st) == 0, "%s flush: %s", fmt, store_last_error(st));
		store_get_stats(st, &stats);
		CHECK(stats.gpu_rows_written == 2 &&
			  stats.gpu_launches_written == 2147483647ULL + 42 &&
			  stats.sample_rows_written == 1 && stats.rows_invalid == 0,
		      "%s stats: gpu rows %" PRIu64 " launches %" PRIu64, fmt,
		      stats.gpu_rows_written, stats.gpu_launches_written);
		store_free(st);
		conn = testdb_connect(ci[text]);
		snprintf(want, sizeof(want),
			 "%lld|5|%s|0000000000000042|{%lld,7,%lld}|{2147483647,1,40}|"
			 "{9223372036854775807,0,123456789}\n"
			 "%lld|5|NULL|NULL|{%lld}|{1}|{3}",
			 (long long)base, tr, (long long)(int64_t)stacks[0],
			 (long long)(int64_t)stacks[2], (long long)base + 1,
			 (long long)(int64_t)stacks[0]);
		dump[text] = testdb_text(conn, GPU_ROWS_SQL);
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
	uint64_t stacks[2] = {1, 2}, zero_stack[2] = {1, 0}, ns[2] = {10, 20};
	uint64_t huge_ns[2] = {10, 9223372036854775808ULL};
	uint32_t launches[2] = {1, 2}, zero[2] = {1, 0}, huge[2] = {1, 2147483648U};
	struct store_gpu_row ok = {.bucket_us = now_us() - 60 * SEC,
				   .source_id = 9,
				   .span_id = 3,
				   .n = 2,
				   .stacks = stacks,
				   .launches = launches,
				   .gpu_ns = ns};
	struct store_gpu_row r;
	struct store_stats stats;
	struct store *st;
	PGconn *conn;
	int bad = 0;

	ok.trace_id[0] = 1;
	CHECK(testdb_create("tp_sgpu_invalid", ci, sizeof(ci)) == 0, "db invalid");
	st = testdb_store(ci, false, 0, NULL);
#define BAD(row, what)                                                                             \
	do {                                                                                       \
		CHECK(store_add_gpu(st, row) == -EINVAL, "refused: %s", what);                     \
		bad++;                                                                             \
	} while (0)
	CHECK(store_add_gpu(st, &ok) == 0, "valid row");
	BAD(NULL, "no row");
	r = ok, r.n = 0;
	BAD(&r, "no stacks");
	r = ok, r.n = 65537;
	BAD(&r, "over the row limit");
	r = ok, r.stacks = zero_stack;
	BAD(&r, "stack id 0");
	r = ok, r.launches = zero;
	BAD(&r, "0 launches");
	r = ok, r.launches = huge;
	BAD(&r, "launches over 2^31-1");
	r = ok, r.gpu_ns = huge_ns;
	BAD(&r, "ns over 2^63-1");
	r = ok, r.gpu_ns = NULL;
	BAD(&r, "ns NULL");
	r = ok, r.source_id = 0;
	BAD(&r, "source 0");
	r = ok, r.span_id = 0;
	BAD(&r, "a trace without a span");
#undef BAD
	CHECK(store_flush(st) == 0, "flush: %s", store_last_error(st));
	store_get_stats(st, &stats);
	CHECK(stats.rows_invalid == (uint64_t)bad && stats.gpu_rows_written == 1,
	      "%d refused, counted %" PRIu64 ", 1 written", bad, stats.rows_invalid);
	store_free(st);
	conn = testdb_connect(ci);
	CHECK(testdb_scalar(conn, "SELECT sum(n) FROM traceprof.gpu, unnest(gpu_ns) n") == 30,
	      "the valid row stored");
	PQfinish(conn);
}

/* The aggregator: sums per key, GPU rows after sample rows, refusals counted. */
static void test_aggregate(void)
{
	struct agg_opts o = {.window_us = 15 * SEC};
	struct agg *a = agg_new(&o);
	struct store_source src = {"svc", "", "", "", "node", "", NULL};
	uint64_t frames[1] = {11};
	int64_t t = 1700000000000000LL;
	struct agg_gpu g = {
	    .time_us = t, .source_id = 3, .stack_id = 21, .launches = 1, .gpu_ns = 100};
	struct agg_sample s = {.time_us = t, .source_id = 3, .stack_id = 21, .hz = 19};
	struct agg_stats st;
	struct agg_window *w;

	CHECK(a && agg_add_source(a, 3, &src) == 0 && agg_add_function(a, 10, "f", "m", 0) == 0 &&
		  agg_add_frame(a, 11, 10, "", NULL, 0, 0) == 0 &&
		  agg_add_stack(a, 21, frames, 1) == 0,
	      "dictionary");
	CHECK(agg_add(a, &s) == 0, "a sample");
	CHECK(agg_add_gpu(a, &g) == 0 && agg_add_gpu(a, &g) == 0, "two launches");
	g.span_id = 5, g.trace_id[3] = 1, g.gpu_ns = 7;
	CHECK(agg_add_gpu(a, &g) == 0, "a launch of a request");
	g.stack_id = 0;
	CHECK(agg_add_gpu(a, &g) == -EINVAL, "stack 0 refused");
	g.stack_id = 21, g.launches = 0;
	CHECK(agg_add_gpu(a, &g) == -EINVAL, "0 launches refused");
	g.launches = 1, g.span_id = 0;
	CHECK(agg_add_gpu(a, &g) == -EINVAL, "a trace without a span refused");
	CHECK(agg_close(a) == 1 && (w = agg_take(a)) != NULL, "window");
	CHECK(w && w->nrows == 1 && w->noffcpu == 0 && w->ngpu == 2 && w->gpu_launches == 3,
	      "1 sample row, 2 GPU rows, 3 launches");
	if (w && w->ngpu == 2) {
		CHECK(w->gpu[0].span_id == 0 && w->gpu[0].n == 1 && w->gpu[0].launches[0] == 2 &&
			  w->gpu[0].gpu_ns[0] == 200 && w->gpu[0].stacks[0] == 21,
		      "untagged: 2 launches, 200 ns");
		CHECK(w->gpu[1].span_id == 5 && w->gpu[1].launches[0] == 1 &&
			  w->gpu[1].gpu_ns[0] == 7,
		      "the request's: 1 launch, 7 ns");
		CHECK(w->nstacks == 1 && w->stacks[0].id == 21, "the stack in the window");
	}
	agg_get_stats(a, &st);
	CHECK(st.gpu_launches == 3 && st.gpu_ns == 207 && st.gpu_invalid == 3,
	      "stats: %" PRIu64 " launches, %" PRIu64 " ns, %" PRIu64 " invalid", st.gpu_launches,
	      st.gpu_ns, st.gpu_invalid);
	agg_window_free(w);
	agg_free(a);
}

int main(void)
{
	log_set_level(TP_LOG_QUIET);
	test_aggregate();
	test_round_trip();
	test_invalid();
	return check_done();
}
