/*
 * bench_ingest - how fast the store writer ingests sample rows, and how many
 * bytes a stored sample costs.
 *
 * Data flow: synthetic rows are generated in memory first (not timed), then
 * written through lib/store exactly as an agent would: store_add_samples()
 * and store_flush() every --batch rows. Sizes are read back with
 * pg_table_size()/pg_relation_size() over the day partitions after
 * VACUUM ANALYZE.
 *
 * Workloads:
 *  ingest  (a) trace-tagged rows of 19 Hz data, geometric number of samples
 *              per row with mean 5, 5% of rows with one stack sampled
 *              repeatedly; (b) trace-tagged rows of 1 sample. Each run
 *              truncates the samples table and writes --rows rows; binary and
 *              text COPY alternate run by run; medians are reported.
 *  storage (a) --requests requests, one samples row and one requests row each,
 *              as in (a) above, from 20 sources over --window seconds;
 *              (b) untagged continuous samples: one row per source and 1-s
 *              bucket, 19 samples drawn from a Zipf(1) distribution over the
 *              stack pool and aggregated into (stack, count) pairs.
 * Stack ids are random 64-bit values from a pool of 5000 stacks.
 *
 * This is a benchmark: it reports numbers and fails only when the store does.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <libpq-fe.h>

#include "bench_stats.h"
#include "traceprof/log.h"
#include "traceprof/store.h"

#define SEC	    1000000LL
#define POOL	    5000 /* distinct stacks */
#define SOURCES	    20	 /* pods writing */
#define HZ	    19	 /* always-on sampling frequency */
#define MAX_PER_ROW 64	 /* cap of the geometric distribution */
#define MAX_RUNS    25

struct rng {
	uint64_t s; /* xorshift64* state, never 0 */
};

/* Generated rows; stacks and counts of the rows point into the arrays. */
struct workload {
	const char *name;	       /* for the report */
	size_t nrows;		       /* rows generated */
	struct store_sample_row *rows; /* the rows; owned */
	uint64_t *stacks;	       /* every row's stack ids; owned */
	uint32_t *counts;	       /* every row's counts (NULL rows use none); owned */
	uint64_t samples;	       /* sum of samples over the rows */
	size_t rows_with_repeats;      /* rows given counts > 1 */
};

struct pool {
	uint64_t stack[POOL];	  /* stack ids */
	double zipf_cdf[POOL];	  /* cumulative Zipf(1) weights over stack[] */
	uint64_t source[SOURCES]; /* source ids */
};

static uint64_t rng_next(struct rng *r)
{
	r->s ^= r->s >> 12;
	r->s ^= r->s << 25;
	r->s ^= r->s >> 27;
	return r->s * 0x2545f4914f6cdd1dULL;
}

static double rng_unit(struct rng *r)
{
	return (double)(rng_next(r) >> 11) / 9007199254740992.0;
}

/* 1, 2, ... with P(n) = p (1-p)^(n-1): mean 1/p. */
static uint32_t geometric(struct rng *r, double mean)
{
	uint32_t n = 1;

	while (n < MAX_PER_ROW && rng_unit(r) >= 1.0 / mean)
		n++;
	return n;
}

static uint64_t zipf_stack(struct rng *r, const struct pool *p)
{
	double u = rng_unit(r) * p->zipf_cdf[POOL - 1];
	size_t lo = 0, hi = POOL - 1;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (p->zipf_cdf[mid] < u)
			lo = mid + 1;
		else
			hi = mid;
	}
	return p->stack[lo];
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int64_t wall_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * SEC + ts.tv_nsec / 1000;
}

static void *xcalloc(size_t n, size_t size)
{
	void *p = calloc(n, size);

	if (!p) {
		fprintf(stderr, "bench_ingest: out of memory\n");
		exit(1);
	}
	return p;
}

static void workload_free(struct workload *w)
{
	free(w->rows);
	free(w->stacks);
	free(w->counts);
}

/*
 * Trace-tagged rows, one per request, buckets spread over window_s seconds
 * ending a minute ago. mean 1 gives one sample per row.
 */
static void make_tagged(struct workload *w, const struct pool *p, struct rng *r, size_t nrows,
			double mean, double repeat_share, int64_t window_s)
{
	int64_t end = wall_us() - 60 * SEC;
	size_t cap = nrows * 8 + MAX_PER_ROW, used = 0;

	memset(w, 0, sizeof(*w));
	w->nrows = nrows;
	w->rows = xcalloc(nrows, sizeof(*w->rows));
	w->stacks = xcalloc(cap, sizeof(*w->stacks));
	w->counts = xcalloc(cap, sizeof(*w->counts));
	for (size_t i = 0; i < nrows; i++) {
		struct store_sample_row *row = &w->rows[i];
		uint32_t samples = mean > 1 ? geometric(r, mean) : 1;
		uint64_t t = (uint64_t)rng_next(r);

		row->bucket_us =
		    (end - window_s * SEC + (int64_t)(i * (uint64_t)window_s * SEC / nrows)) / SEC *
		    SEC;
		row->source_id = p->source[rng_next(r) % SOURCES];
		memcpy(row->trace_id, &t, 8);
		t = rng_next(r) | 1;
		memcpy(row->trace_id + 8, &t, 8);
		row->span_id = rng_next(r) | 1;
		row->hz = HZ;
		row->stacks = w->stacks + used;
		if (samples >= 2 && rng_unit(r) < repeat_share) {
			/* One stack sampled `rep` times, the rest once. */
			uint32_t rep = 2 + (uint32_t)(rng_next(r) % (samples - 1));

			row->n = samples - rep + 1;
			row->counts = w->counts + used;
			for (uint32_t k = 0; k < row->n; k++) {
				w->stacks[used + k] = p->stack[rng_next(r) % POOL];
				w->counts[used + k] = k == 0 ? rep : 1;
			}
			w->rows_with_repeats++;
		} else {
			row->n = samples;
			for (uint32_t k = 0; k < row->n; k++)
				w->stacks[used + k] = p->stack[rng_next(r) % POOL];
		}
		used += row->n;
		w->samples += samples;
		if (used + MAX_PER_ROW > cap) {
			fprintf(stderr, "bench_ingest: stack array too small\n");
			exit(1);
		}
	}
}

/* Untagged rows: per source and second, HZ samples aggregated by stack. */
static void make_untagged(struct workload *w, const struct pool *p, struct rng *r, size_t nrows)
{
	int64_t end = wall_us() / SEC * SEC - 60 * SEC;
	size_t seconds = (nrows + SOURCES - 1) / SOURCES, used = 0;

	memset(w, 0, sizeof(*w));
	w->nrows = seconds * SOURCES;
	w->rows = xcalloc(w->nrows, sizeof(*w->rows));
	w->stacks = xcalloc(w->nrows * HZ, sizeof(*w->stacks));
	w->counts = xcalloc(w->nrows * HZ, sizeof(*w->counts));
	for (size_t i = 0; i < w->nrows; i++) {
		struct store_sample_row *row = &w->rows[i];

		row->bucket_us = end - (int64_t)(seconds - i / SOURCES) * SEC;
		row->source_id = p->source[i % SOURCES];
		row->hz = HZ;
		row->stacks = w->stacks + used;
		row->counts = w->counts + used;
		for (int k = 0; k < HZ; k++) {
			uint64_t s = zipf_stack(r, p);
			uint32_t j = 0;

			while (j < row->n && w->stacks[used + j] != s)
				j++;
			if (j == row->n) {
				w->stacks[used + j] = s;
				w->counts[used + j] = 0;
				row->n++;
			}
			w->counts[used + j]++;
		}
		if (row->n < HZ)
			w->rows_with_repeats++;
		used += row->n;
		w->samples += HZ;
	}
}

static void make_pool(struct pool *p, struct rng *r)
{
	double acc = 0;

	for (int i = 0; i < POOL; i++) {
		p->stack[i] = rng_next(r) | 1;
		acc += 1.0 / (i + 1);
		p->zipf_cdf[i] = acc;
	}
	for (int i = 0; i < SOURCES; i++)
		p->source[i] = rng_next(r) | 1;
}

/* Dictionaries the rows refer to: sources, and stacks of 4..19 frames. */
static void add_dictionaries(struct store *st, const struct pool *p, struct rng *r)
{
	char name[64];

	for (int i = 0; i < SOURCES; i++) {
		struct store_source src = {"checkout", "shop", name, "", "node-1", "b1d", ""};

		snprintf(name, sizeof(name), "checkout-%d", i);
		store_add_source(st, p->source[i], &src);
	}
	for (int i = 0; i < POOL; i++) {
		uint64_t frames[20];
		size_t n = 4 + rng_next(r) % 16;

		for (size_t k = 0; k < n; k++)
			frames[k] = 1 + rng_next(r) % 20000;
		store_add_stack(st, p->stack[i], frames, n);
	}
}

static PGresult *sql(PGconn *conn, const char *q)
{
	PGresult *res = PQexec(conn, q);

	if (PQresultStatus(res) != PGRES_COMMAND_OK && PQresultStatus(res) != PGRES_TUPLES_OK) {
		fprintf(stderr, "bench_ingest: %s: %s", q, PQresultErrorMessage(res));
		exit(1);
	}
	return res;
}

/* The first value of q; borrowed until the next call. */
static const char *sql_text(PGconn *conn, const char *q)
{
	static char buf[512];
	PGresult *res = sql(conn, q);

	snprintf(buf, sizeof(buf), "%s", PQgetvalue(res, 0, 0));
	PQclear(res);
	return buf;
}

static void sql_do(PGconn *conn, const char *q)
{
	PQclear(sql(conn, q));
}

static double sql_num(PGconn *conn, const char *q)
{
	PGresult *res = sql(conn, q);
	double v = atof(PQgetvalue(res, 0, 0));

	PQclear(res);
	return v;
}

static void must(struct store *st, int err, const char *what)
{
	if (err) {
		fprintf(stderr, "bench_ingest: %s: %s (%s)\n", what, strerror(-err),
			store_last_error(st));
		exit(1);
	}
}

/* Writes w through st, flushing every batch rows; requests too when asked. */
static void write_rows(struct store *st, const struct workload *w, size_t batch, bool requests,
		       double *add_s, double *flush_s)
{
	double t0 = now_s(), t_add = 0, t_flush = 0;

	for (size_t i = 0; i < w->nrows; i++) {
		must(st, store_add_samples(st, &w->rows[i]), "add samples");
		if (requests) {
			struct store_request q = {.start_us = w->rows[i].bucket_us,
						  .duration_us = 250000,
						  .source_id = w->rows[i].source_id,
						  .span_id = w->rows[i].span_id,
						  .route_id = 0,
						  .status_code = 200};

			memcpy(q.trace_id, w->rows[i].trace_id, 16);
			must(st, store_add_request(st, &q), "add request");
		}
		if (store_pending_rows(st) >= batch || i + 1 == w->nrows) {
			double t1 = now_s();

			t_add += t1 - t0;
			must(st, store_flush(st), "flush");
			t0 = now_s();
			t_flush += t0 - t1;
		}
	}
	if (add_s)
		*add_s = t_add;
	if (flush_s)
		*flush_s = t_flush;
}

static void bench_ingest(PGconn *admin, struct store *st[2], const struct workload *w, int runs,
			 size_t batch)
{
	double secs[2][MAX_RUNS], adds[2][MAX_RUNS];
	uint64_t bytes[2] = {0, 0};

	for (int r = 0; r < runs; r++)
		for (int f = 0; f < 2; f++) {
			struct store_stats before, after;
			double flush_s;

			sql_do(admin, "TRUNCATE traceprof.samples");
			sql_do(admin, "CHECKPOINT");
			store_get_stats(st[f], &before);
			write_rows(st[f], w, batch, false, &adds[f][r], &flush_s);
			store_get_stats(st[f], &after);
			secs[f][r] = adds[f][r] + flush_s;
			bytes[f] = after.bytes_sent - before.bytes_sent;
		}
	for (int f = 0; f < 2; f++) {
		double t = bench_median(secs[f], runs), a = bench_median(adds[f], runs);

		/* bench_median() sorted secs: [0] is the fastest run, [runs - 1] the slowest. */
		printf("| %-34s | %-6s | %9.0f | %7.0f-%-7.0f | %10.0f | %6.0f | %6.1f |\n",
		       w->name, f ? "text" : "binary", w->nrows / t, w->nrows / secs[f][runs - 1],
		       w->nrows / secs[f][0], w->samples / t, a / w->nrows * 1e9,
		       (double)bytes[f] / w->nrows);
	}
}

/* Size of every partition of a table or index, summed (partitioned parents hold nothing). */
static double part_size(PGconn *conn, const char *fn, const char *parent)
{
	char q[512];

	snprintf(q, sizeof(q),
		 "SELECT coalesce(sum(%s(inhrelid)), 0) FROM pg_inherits "
		 "WHERE inhparent = '%s'::regclass",
		 fn, parent);
	return sql_num(conn, q);
}

static void report_storage(PGconn *admin, const char *what)
{
	double rows, samples, counted, heap, trace, source, total, req_rows, req_total;

	sql_do(admin, "VACUUM ANALYZE traceprof.samples");
	sql_do(admin, "VACUUM ANALYZE traceprof.requests");
	rows = sql_num(admin, "SELECT count(*) FROM traceprof.samples");
	samples = sql_num(admin, "SELECT sum(coalesce((SELECT sum(c) FROM unnest(counts) c), "
				 "cardinality(stacks))) FROM traceprof.samples");
	counted = sql_num(admin, "SELECT count(*) FROM traceprof.samples WHERE counts IS NOT NULL");
	heap = part_size(admin, "pg_table_size", "traceprof.samples");
	trace = part_size(admin, "pg_relation_size", "traceprof.samples_trace_idx");
	source = part_size(admin, "pg_relation_size", "traceprof.samples_source_idx");
	total = part_size(admin, "pg_total_relation_size", "traceprof.samples");
	req_rows = sql_num(admin, "SELECT count(*) FROM traceprof.requests");
	req_total = part_size(admin, "pg_total_relation_size", "traceprof.requests");
	printf("\n%s: %.0f rows, %.0f samples (%.2f per row), %.1f%% of rows stored with counts\n",
	       what, rows, samples, samples / rows, 100 * counted / rows);
	printf("| samples partitions | MiB | bytes/row | bytes/sample |\n|---|---:|---:|---:|\n");
	printf("| heap (pg_table_size) | %.1f | %.1f | %.2f |\n", heap / 1048576, heap / rows,
	       heap / samples);
	printf("| trace_id hash index | %.1f | %.1f | %.2f |\n", trace / 1048576, trace / rows,
	       trace / samples);
	printf("| (source_id, bucket) btree | %.1f | %.1f | %.2f |\n", source / 1048576,
	       source / rows, source / samples);
	printf("| **total** (pg_total_relation_size) | %.1f | %.1f | **%.2f** |\n", total / 1048576,
	       total / rows, total / samples);
	if (req_rows > 0)
		printf("requests table: %.0f rows, %.1f MiB, %.1f bytes/request (heap + both "
		       "indexes)\n",
		       req_rows, req_total / 1048576, req_total / req_rows);
}

static void usage(FILE *out)
{
	fprintf(out, "usage: bench_ingest --db CONNINFO [--runs N] [--rows N] [--batch N]\n"
		     "                    [--requests N] [--window SECONDS] [--no-ingest] "
		     "[--no-storage]\n"
		     "Writes into the traceprof database at CONNINFO; truncates its samples and\n"
		     "requests tables. Use a throwaway cluster (see bench/run_ingest.sh).\n");
}

/* What to run, from the command line. */
struct bench_args {
	const char *db;			/* --db */
	int runs;			/* --runs: ingest runs, median kept */
	size_t nrows, batch, nrequests; /* --rows, --batch, --requests */
	int64_t window;			/* --window: seconds of the storage workload */
	bool do_ingest, do_storage;	/* not --no-ingest, not --no-storage */
};

/*
 * The options into *a (its defaults set by the caller). Returns -1 to run,
 * else the exit status: 0 after --help, 2 after a wrong option.
 */
static int parse_args(int argc, char **argv, struct bench_args *a)
{
	static const struct option longopts[] = {
	    {"db", required_argument, NULL, 'd'},	{"runs", required_argument, NULL, 'r'},
	    {"rows", required_argument, NULL, 'n'},	{"batch", required_argument, NULL, 'b'},
	    {"requests", required_argument, NULL, 'q'}, {"window", required_argument, NULL, 'w'},
	    {"no-ingest", no_argument, NULL, 'I'},	{"no-storage", no_argument, NULL, 'S'},
	    {"help", no_argument, NULL, 'h'},		{NULL, 0, NULL, 0},
	};
	int c;

	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case 'd':
			a->db = optarg;
			break;
		case 'r':
			a->runs = atoi(optarg);
			break;
		case 'n':
			a->nrows = strtoul(optarg, NULL, 10);
			break;
		case 'b':
			a->batch = strtoul(optarg, NULL, 10);
			break;
		case 'q':
			a->nrequests = strtoul(optarg, NULL, 10);
			break;
		case 'w':
			a->window = atoll(optarg);
			break;
		case 'I':
			a->do_ingest = false;
			break;
		case 'S':
			a->do_storage = false;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (!a->db || a->runs < 1 || a->runs > MAX_RUNS || !a->nrows || !a->batch ||
	    !a->nrequests || a->window < 1) {
		usage(stderr);
		return 2;
	}
	return -1;
}

int main(int argc, char **argv)
{
	struct bench_args a = {.runs = 5,
			       .nrows = 500000,
			       .batch = 20000,
			       .nrequests = 1000000,
			       .window = 3600,
			       .do_ingest = true,
			       .do_storage = true};
	int rc;
	struct rng r = {0x9e3779b97f4a7c15ULL};
	struct pool *p = xcalloc(1, sizeof(*p));
	struct store_opts opts = {.app_name = "bench_ingest"};
	struct store *st[2];
	struct workload w;
	PGconn *admin;

	rc = parse_args(argc, argv, &a);
	if (rc >= 0)
		return rc;
	setvbuf(stdout, NULL, _IOLBF, 0); /* progress shows when redirected to a file */
	opts.max_rows = a.batch * 2 + 16;
	admin = PQconnectdb(a.db);
	if (PQstatus(admin) != CONNECTION_OK) {
		fprintf(stderr, "bench_ingest: cannot connect: %s", PQerrorMessage(admin));
		return 1;
	}
	sql_do(admin, "SET client_min_messages = warning");
	printf("server: %s\n", sql_text(admin, "SELECT version()"));
	printf("settings: %s\n",
	       sql_text(admin, "SELECT string_agg(name || '=' || setting, ' ' ORDER BY name) "
			       "FROM pg_settings WHERE name IN ('fsync', 'synchronous_commit', "
			       "'full_page_writes', 'shared_buffers', 'wal_level')"));
	make_pool(p, &r);
	for (int f = 0; f < 2; f++) {
		opts.text_copy = f;
		st[f] = store_open(a.db, &opts);
		if (!st[f])
			return 1;
		add_dictionaries(st[f], p, &r);
		must(st[f], store_flush(st[f]), "dictionaries");
	}
	if (a.do_ingest) {
		printf("\ningest: %zu rows per run, flush every %zu rows, median of %d runs\n",
		       a.nrows, a.batch, a.runs);
		printf("| workload | COPY | rows/s | rows/s min-max | samples/s | add ns/row | "
		       "COPY bytes/row |\n|---|---|---:|---:|---:|---:|---:|\n");
		make_tagged(&w, p, &r, a.nrows, 5.0, 0.05, 600);
		w.name = "(a) tagged, 5 samples/row, 19 Hz";
		bench_ingest(admin, st, &w, a.runs, a.batch);
		workload_free(&w);
		make_tagged(&w, p, &r, a.nrows, 1.0, 0, 600);
		w.name = "(b) tagged, 1 sample/row";
		bench_ingest(admin, st, &w, a.runs, a.batch);
		workload_free(&w);
	}
	if (a.do_storage) {
		double t0;

		sql_do(admin, "TRUNCATE traceprof.samples, traceprof.requests");
		make_tagged(&w, p, &r, a.nrequests, 5.0, 0.05, a.window);
		t0 = now_s();
		write_rows(st[0], &w, a.batch, true, NULL, NULL);
		printf("\nstorage (a): %zu requests at %d Hz over %" PRId64
		       " s from %d sources, %zu rows given repeated stacks; written in %.1f s\n",
		       a.nrequests, HZ, a.window, SOURCES, w.rows_with_repeats, now_s() - t0);
		report_storage(admin, "(a) trace-tagged");
		workload_free(&w);

		sql_do(admin, "TRUNCATE traceprof.samples, traceprof.requests");
		make_untagged(&w, p, &r, a.nrequests / 10);
		write_rows(st[0], &w, a.batch, false, NULL, NULL);
		printf("\nstorage (b): untagged, %zu rows = %d sources x %zu s at %d Hz, Zipf(1) "
		       "stacks aggregated per row\n",
		       w.nrows, SOURCES, w.nrows / SOURCES, HZ);
		report_storage(admin, "(b) untagged");
		workload_free(&w);
	}
	store_free(st[0]);
	store_free(st[1]);
	PQfinish(admin);
	free(p);
	return 0;
}
