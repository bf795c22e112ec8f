/*
 * test_stackset_read.c - the store reader of the traceprof command on
 * tests/cli/dataset.sql in a fresh database: a trace's rows per span with
 * their labels and frame details (module, build id, file, line, address),
 * raised rows preferred, a service's profile with display names
 * disambiguated by module, and two cohorts as a differential set whose
 * totals equal traceprof.cohort_sizes.
 */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "stackset_read.h"
#include "testdb.h"

#define TRACE_A	 "0000000000000000000000000000000a"
#define TRACE_B	 "0000000000000000000000000000000B" /* upper case is accepted */
#define FROM_US	 1893578400000000LL		    /* 2030-01-02 10:00 UTC */
#define UNTIL_US (FROM_US + 3600000000LL)

static const struct tp_frame_info *leaf(const struct tp_stackset *s, size_t row)
{
	return &s->frames[s->rows[row].frames[s->rows[row].depth - 1]];
}

static int64_t total(const struct tp_stackset *s, bool b)
{
	int64_t us = 0;

	for (size_t i = 0; i < s->nrows; i++)
		us += b ? s->rows[i].b_cpu_us : s->rows[i].cpu_us;
	return us;
}

static void load(PGconn *conn)
{
	FILE *f = fopen(DATASET, "r");
	char *sql = NULL;
	size_t len = 0;
	PGresult *res;

	if (!f || getdelim(&sql, &len, '\0', f) < 0) {
		fprintf(stderr, "cannot read %s\n", DATASET);
		exit(1);
	}
	fclose(f);
	res = PQexec(conn, sql);
	if (PQresultStatus(res) != PGRES_TUPLES_OK && PQresultStatus(res) != PGRES_COMMAND_OK) {
		fprintf(stderr, "dataset: %s\n", PQresultErrorMessage(res));
		exit(1);
	}
	PQclear(res);
	free(sql);
}

int main(void)
{
	char conninfo[512], err[512];
	struct tp_stackset *s = NULL;
	PGconn *conn;
	int rc;

	if (testdb_create("tp_stackset_read", conninfo, sizeof(conninfo)))
		return 1;
	conn = testdb_connect(conninfo);
	load(conn);

	/* one trace, every service: rows per span, labels kept */
	rc = stackset_read_trace(conn, TRACE_A, NULL, &s, err, sizeof(err));
	CHECK(rc == 0, "read trace: %s", err);
	if (rc == 0) {
		size_t vs = 0;

		CHECK(s->nrows == 5, "5 (span, stack) rows, got %zu", s->nrows);
		CHECK(!s->differential, "not differential");
		CHECK(llabs(total(s, false) - 4526316) <= 2, "CPU 4421.05 + 105.26 ms, got %lld",
		      (long long)total(s, false));
		CHECK(llabs(s->period_ns - 52631579) < 1000, "19 Hz period, got %lld",
		      (long long)s->period_ns);
		for (size_t i = 0; i < s->nrows; i++) {
			CHECK(s->rows[i].trace_id && strcmp(s->rows[i].trace_id, TRACE_A) == 0,
			      "row %zu trace id", i);
			CHECK(s->rows[i].span_id &&
				  strcmp(s->rows[i].span_id,
					 strcmp(s->rows[i].service, "checkout-svc") == 0
					     ? "00000000000000a1"
					     : "00000000000000a2") == 0,
			      "row %zu span id %s", i, s->rows[i].span_id);
			if (strcmp(leaf(s, i)->name, "validateSignature") == 0) {
				const struct tp_frame_info *f = leaf(s, i);

				vs++;
				CHECK(s->rows[i].samples == 20 && s->rows[i].depth == 3,
				      "validateSignature self: 20 samples, depth 3");
				CHECK(strcmp(f->module, "payment") == 0 &&
					  strcmp(f->build_id, "aaaa1111") == 0 && f->file &&
					  strcmp(f->file, "sig.c") == 0 && f->line == 7 &&
					  f->address == 12288 && f->kind == TP_FRAME_USER,
				      "frame details of validateSignature");
			}
			if (strcmp(leaf(s, i)->name, "rsa_verify") == 0)
				CHECK(leaf(s, i)->file == NULL && leaf(s, i)->line == 0 &&
					  strcmp(leaf(s, i)->build_id, "") == 0,
				      "unknown file, line and build id");
		}
		CHECK(vs == 1, "one validateSignature leaf row");
	}
	stackset_free(s);
	s = NULL;

	/* a claimed trace: its raised rows (99 Hz) replace the base ones */
	rc = stackset_read_trace(conn, TRACE_B, "payment-svc", &s, err, sizeof(err));
	CHECK(rc == 0 && s->nrows == 2, "claimed trace rows: %s", rc ? err : "");
	if (rc == 0) {
		int64_t n = 0;

		for (size_t i = 0; i < s->nrows; i++)
			n += s->rows[i].samples;
		CHECK(n == 115, "115 raised samples, got %lld", (long long)n);
		CHECK(llabs(s->period_ns - 10101010) < 1000, "99 Hz period, got %lld",
		      (long long)s->period_ns);
		CHECK(strcmp(s->rows[0].trace_id, "0000000000000000000000000000000b") == 0,
		      "trace id in lower case");
	}
	stackset_free(s);
	s = NULL;

	/* bad input: refused with the SQL API's message, -EINVAL */
	rc = stackset_read_trace(conn, "nothex", NULL, &s, err, sizeof(err));
	CHECK(rc == -EINVAL && strstr(err, "invalid trace id"), "bad trace id: %d %s", rc, err);
	CHECK(s == NULL, "no set on error");
	rc = stackset_read_trace(conn, "00000000000000000000000000000abc", NULL, &s, err,
				 sizeof(err));
	CHECK(rc == 0 && s->nrows == 0, "unknown trace: empty set");
	stackset_free(s);
	s = NULL;

	/* a service over an hour: two "poll" functions read "poll [module]" */
	rc = stackset_read_service(conn, "payment-svc", FROM_US, UNTIL_US, &s, err, sizeof(err));
	CHECK(rc == 0, "read service: %s", err);
	if (rc == 0) {
		int polls = 0;

		CHECK(s->nrows == 7, "7 stacks, got %zu", s->nrows);
		CHECK(s->time_from_ns == FROM_US * 1000 && s->time_until_ns == UNTIL_US * 1000,
		      "range kept");
		for (size_t i = 0; i < s->nrows; i++)
			CHECK(s->rows[i].trace_id == NULL && s->rows[i].span_id == NULL,
			      "service rows aggregate requests");
		for (size_t i = 0; i < s->nframes; i++)
			if (strcmp(s->frames[i].name, "poll") == 0) {
				polls++;
				CHECK(strcmp(s->frames[i].function, "poll [libev]") == 0 ||
					  strcmp(s->frames[i].function, "poll [payment]") == 0,
				      "display name %s", s->frames[i].function);
			} else {
				CHECK(strcmp(s->frames[i].function, s->frames[i].name) == 0,
				      "%s keeps its name", s->frames[i].name);
			}
		CHECK(polls == 2, "two poll frames");
		CHECK(llabs(total(s, false) - 6368421) <= 7, "121 samples at 19 Hz, got %lld",
		      (long long)total(s, false));
	}
	stackset_free(s);
	s = NULL;

	/* two cohorts: differential, totals as cohort_sizes */
	rc = stackset_read_cohorts(conn, "payment-svc", FROM_US, UNTIL_US,
				   "{\"min_duration\": \"1000001us\"}",
				   "{\"max_duration\": \"100000us\"}", "duration > 1s",
				   "duration < 100ms", &s, err, sizeof(err));
	CHECK(rc == 0, "read cohorts: %s", err);
	if (rc == 0) {
		PGresult *res = testdb_exec(
		    conn,
		    "SELECT round(cpu_ms * 1000) FROM traceprof.cohort_sizes('payment-svc', "
		    "'2030-01-02 10:00+00', '2030-01-02 11:00+00', "
		    "'{\"min_duration\": \"1000001us\"}', '{\"max_duration\": \"100000us\"}') "
		    "ORDER BY cohort");

		CHECK(s->differential && strcmp(s->a_name, "duration > 1s") == 0 &&
			  strcmp(s->b_name, "duration < 100ms") == 0,
		      "differential with names");
		CHECK(llabs(total(s, false) - atoll(PQgetvalue(res, 0, 0))) <= 5,
		      "cohort A CPU %lld = cohort_sizes %s", (long long)total(s, false),
		      PQgetvalue(res, 0, 0));
		CHECK(llabs(total(s, true) - atoll(PQgetvalue(res, 1, 0))) <= 5,
		      "cohort B CPU %lld = cohort_sizes %s", (long long)total(s, true),
		      PQgetvalue(res, 1, 0));
		/* writeLog is in both cohorts: one row with a and b */
		for (size_t i = 0; i < s->nrows; i++)
			if (strcmp(leaf(s, i)->name, "writeLog") == 0)
				CHECK(s->rows[i].samples == 3 && s->rows[i].b_samples == 1,
				      "writeLog a=3 b=1, got %lld %lld",
				      (long long)s->rows[i].samples,
				      (long long)s->rows[i].b_samples);
		PQclear(res);
	}
	stackset_free(s);
	s = NULL;
	rc = stackset_read_cohorts(conn, "payment-svc", FROM_US, UNTIL_US, "{\"duraton\": 1}", "{}",
				   "a", "b", &s, err, sizeof(err));
	CHECK(rc == -EINVAL && strstr(err, "unknown cohort key \"duraton\" in cohort_a"),
	      "bad spec: %d %s", rc, err);
	stackset_free(NULL);
	PQfinish(conn);
	return check_done();
}
