/*
 * test_hold: the hold buffer of raised samples (agent/sampling/hold.h): a kept
 * trace's rows (grouping, counts, Hz, trigger id, bucket), a dropped
 * trace, the timeout, the memory bound (oldest traces first, a trace that
 * alone outgrows it), bad input, and a random workload checked against a
 * plain reference count.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "hold.h"

#define MIN_US 60000000LL

/* What on_rows received. */
struct got {
	int rows;			 /* calls */
	uint64_t samples;		 /* counts summed */
	char trigger[64];		 /* trigger id of the last call */
	struct store_sample_row last[8]; /* the first rows (stacks/counts not kept) */
	uint64_t stacks[8][8];		 /* their stacks */
	uint32_t counts[8][8];		 /* their counts */
	uint32_t ref[4][3][3][5];	 /* random test: [trace][source][span][stack] received */
	bool bad;			 /* a row broke a rule */
};

static void on_rows(void *ctx, const char *trigger_id, const struct store_sample_row *row)
{
	struct got *g = ctx;

	snprintf(g->trigger, sizeof(g->trigger), "%s", trigger_id);
	if (row->n < 1 || !row->stacks || !row->counts)
		g->bad = true;
	if (g->rows < 8) {
		g->last[g->rows] = *row;
		for (uint32_t i = 0; i < row->n && i < 8; i++) {
			g->stacks[g->rows][i] = row->stacks[i];
			g->counts[g->rows][i] = row->counts[i];
		}
	}
	for (uint32_t i = 0; i < row->n; i++) {
		g->samples += row->counts[i];
		/* random test ids: trace byte 0, source 1..3, span 1..3, stack 1..5 */
		if (row->trace_id[0] < 4 && row->source_id >= 1 && row->source_id <= 3 &&
		    row->span_id >= 1 && row->span_id <= 3 && row->stacks[i] >= 1 &&
		    row->stacks[i] <= 5)
			g->ref[row->trace_id[0]][row->source_id - 1][row->span_id - 1]
			      [row->stacks[i] - 1] += row->counts[i];
	}
	g->rows++;
}

static struct agg_sample sample(uint8_t trace, uint64_t src, uint64_t span, uint64_t stack,
				int64_t t_us)
{
	struct agg_sample s = {
	    .time_us = t_us, .source_id = src, .span_id = span, .stack_id = stack, .hz = 99};

	s.trace_id[0] = trace;
	s.trace_id[15] = 0xab;
	return s;
}

static void test_keep_drop(void)
{
	struct got g = {0};
	struct hold *h = hold_new(NULL, on_rows, &g);
	int64_t t = 1700000000LL * 1000000 + 12345678;
	uint8_t id1[16] = {1, [15] = 0xab}, id2[16] = {2, [15] = 0xab};
	struct hold_stats st;
	struct agg_sample s;

	CHECK(h != NULL, "hold_new");
	if (!h)
		return;
	for (int i = 0; i < 3; i++) {
		s = sample(1, 10, 100, 7000, t + i * 10000);
		CHECK(hold_add(h, &s) == 0, "add");
	}
	s = sample(1, 10, 100, 8000, t + 40000);
	hold_add(h, &s);
	hold_add(h, &s);
	s = sample(1, 10, 200, 7000, t + 50000);
	hold_add(h, &s);
	s = sample(1, 20, 100, 7000, t + 60000);
	hold_add(h, &s);
	s = sample(2, 10, 100, 7000, t);
	hold_add(h, &s);
	hold_add(h, &s);

	CHECK(hold_decide(h, id1, "payment-slow") == 7, "kept: 7 samples");
	CHECK(g.rows == 3 && !g.bad, "one row per (source, span, Hz): %d", g.rows);
	CHECK(!strcmp(g.trigger, "payment-slow"), "trigger id passed: %s", g.trigger);
	/* rows sorted by source, span: (10,100) {7000:3, 8000:2}, (10,200) {7000:1}, (20,100) */
	CHECK(g.last[0].source_id == 10 && g.last[0].span_id == 100 && g.last[0].n == 2 &&
		  g.stacks[0][0] == 7000 && g.counts[0][0] == 3 && g.stacks[0][1] == 8000 &&
		  g.counts[0][1] == 2,
	      "row 1 stacks and counts");
	CHECK(g.last[1].source_id == 10 && g.last[1].span_id == 200 && g.last[1].n == 1 &&
		  g.counts[1][0] == 1,
	      "row 2");
	CHECK(g.last[2].source_id == 20 && g.last[2].n == 1 && g.counts[2][0] == 1, "row 3");
	for (int i = 0; i < 3; i++) {
		CHECK(g.last[i].hz == 99, "row %d at the raised Hz", i);
		CHECK(!memcmp(g.last[i].trace_id, id1, 16), "row %d trace id", i);
		CHECK(g.last[i].bucket_us == t - t % MIN_US,
		      "row %d bucket: the first sample's minute", i);
	}
	CHECK(hold_decide(h, id1, "payment-slow") == -ENOENT, "decided once only");
	CHECK(hold_decide(h, id2, NULL) == 2, "dropped: 2 samples");
	CHECK(g.rows == 3, "a dropped trace emits nothing");
	hold_get_stats(h, &st);
	CHECK(st.samples == 9 && st.traces == 2 && st.traces_kept == 1 && st.traces_dropped == 1 &&
		  st.samples_kept == 7 && st.samples_lost == 2 && st.rows == 3 &&
		  st.decide_unknown == 1 && st.held_traces == 0 && st.held_bytes == 0,
	      "counters after keep and drop");

	s = sample(0, 10, 100, 7000, t);
	s.trace_id[15] = 0;
	CHECK(hold_add(h, &s) == -EINVAL, "untagged sample refused");
	s = sample(1, 10, 100, 7000, t);
	s.hz = 0;
	CHECK(hold_add(h, &s) == -EINVAL, "hz 0 refused");
	hold_get_stats(h, &st);
	CHECK(st.samples_refused == 2 && st.held_traces == 0, "refusals counted, nothing held");
	hold_free(h);
	hold_free(NULL);
}

static void test_timeout(void)
{
	struct hold_opts o = {.timeout_us = MIN_US};
	struct hold *h = hold_new(&o, on_rows, NULL);
	uint8_t id3[16] = {3, [15] = 0xab}, id4[16] = {4, [15] = 0xab};
	struct hold_stats st;
	struct agg_sample s;

	s = sample(3, 1, 1, 1, 100 * 1000000LL);
	hold_add(h, &s);
	s = sample(4, 1, 1, 1, 100 * 1000000LL);
	hold_add(h, &s);
	s = sample(4, 1, 1, 2, 130 * 1000000LL); /* trace 4 sampled again later */
	hold_add(h, &s);
	hold_tick(h, 159 * 1000000LL);
	hold_get_stats(h, &st);
	CHECK(st.traces_expired == 0 && st.held_traces == 2, "nothing expires before 60 s");
	hold_tick(h, 160 * 1000000LL);
	hold_get_stats(h, &st);
	CHECK(st.traces_expired == 1 && st.held_traces == 1 && st.samples_lost == 1,
	      "60 s after its last sample a trace expires");
	CHECK(hold_decide(h, id3, "t") == -ENOENT, "expired trace gone");
	hold_tick(h, 190 * 1000000LL);
	CHECK(hold_decide(h, id4, "t") == -ENOENT, "the later trace expires 60 s after its last");
	hold_free(h);
}

static void test_bound(void)
{
	struct hold_opts o = {.max_bytes = 2000};
	struct hold *h = hold_new(&o, on_rows, NULL);
	uint8_t first[16] = {10, [15] = 0xab}, last[16] = {19, [15] = 0xab};
	struct hold_stats st;
	struct agg_sample s;
	int refused = 0;

	for (int i = 10; i < 20; i++) {
		s = sample((uint8_t)i, 1, 1, 1, i * 1000000LL);
		CHECK(hold_add(h, &s) == 0, "add trace %d", i);
		hold_get_stats(h, &st);
		CHECK(st.held_bytes <= o.max_bytes, "bound held: %llu",
		      (unsigned long long)st.held_bytes);
	}
	hold_get_stats(h, &st);
	CHECK(st.held_traces < 10 && st.held_traces >= 2, "some traces held: %llu",
	      (unsigned long long)st.held_traces);
	CHECK(st.traces_evicted + st.held_traces == 10 && st.samples_lost == st.traces_evicted,
	      "evictions counted: %llu", (unsigned long long)st.traces_evicted);
	CHECK(hold_decide(h, first, NULL) == -ENOENT, "the oldest trace went first");
	CHECK(hold_decide(h, last, NULL) == 1, "the newest trace stayed");

	/* one trace with ever more stacks: evicts the others, then is refused */
	for (int i = 0; i < 1000; i++) {
		s = sample(30, 1, 1, 1000 + i, 50 * 1000000LL);
		refused += hold_add(h, &s) == -ENOSPC;
		hold_get_stats(h, &st);
		if (st.held_bytes > o.max_bytes)
			break;
	}
	hold_get_stats(h, &st);
	CHECK(st.held_bytes <= o.max_bytes, "bound held for one big trace");
	CHECK(refused > 0 && st.samples_refused == (uint64_t)refused,
	      "samples beyond the bound refused and counted: %d", refused);
	CHECK(hold_decide(h, (uint8_t[16]){30, [15] = 0xab}, NULL) > 0,
	      "the big trace keeps what fitted");
	hold_free(h);
}

/* A random workload against a plain reference count. */
static void test_random(void)
{
	static uint32_t want[4][3][3][5];
	struct got *g = calloc(1, sizeof(*g));
	struct hold *h = hold_new(NULL, on_rows, g);
	uint64_t total = 0;
	bool same = true;

	srand(7);
	for (int i = 0; i < 20000; i++) {
		int tr = rand() % 4, so = rand() % 3, sp = rand() % 3, st = rand() % 5;
		struct agg_sample s = sample((uint8_t)tr, so + 1, sp + 1, st + 1, i);

		s.trace_id[15] = 0xcd;
		if (hold_add(h, &s) == 0)
			want[tr][so][sp][st]++;
	}
	for (int tr = 0; tr < 4; tr++) {
		uint8_t id[16] = {(uint8_t)tr, [15] = 0xcd};

		CHECK(hold_decide(h, id, "r") > 0, "random: trace %d kept", tr);
	}
	for (int a = 0; a < 4; a++)
		for (int b = 0; b < 3; b++)
			for (int c = 0; c < 3; c++)
				for (int d = 0; d < 5; d++) {
					same &= g->ref[a][b][c][d] == want[a][b][c][d];
					total += want[a][b][c][d];
				}
	CHECK(same && total == 20000 && g->samples == total && !g->bad,
	      "random: every count emitted exactly (%llu of %llu)", (unsigned long long)g->samples,
	      (unsigned long long)total);
	CHECK(g->rows == 4 * 3 * 3, "random: one row per (trace, source, span): %d", g->rows);
	hold_free(h);
	free(g);
}

int main(void)
{
	test_keep_drop();
	test_timeout();
	test_bound();
	test_random();
	return check_done();
}
