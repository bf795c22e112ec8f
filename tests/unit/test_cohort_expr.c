/*
 * test_cohort_expr.c - the cohort expressions of `traceprof compare`:
 * accepted expressions and the exact cohort spec JSON they compile to
 * (bounds mapped to inclusive min / exclusive max in microseconds), and
 * rejected ones with their message and the byte offset the caret points at.
 * Also the time flags of every range command (cli_parse_time, _span).
 */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "cli.h"
#include "cohort_expr.h"

static void accepts(const char *expr, const char *want)
{
	struct cohort_expr_error e = {0};
	char *got = cohort_expr_compile(expr, &e);

	CHECK(got && strcmp(got, want) == 0, "'%s' -> %s, want %s (error: %s)", expr,
	      got ? got : "NULL", want, got ? "" : e.message);
	free(got);
}

static void rejects(const char *expr, size_t pos, const char *fragment)
{
	struct cohort_expr_error e = {0};
	char *got = cohort_expr_compile(expr, &e);

	CHECK(!got, "'%s' accepted as %s", expr, got ? got : "");
	CHECK(!got && e.pos == pos && strstr(e.message, fragment),
	      "'%s': pos %zu '%s', want pos %zu containing '%s'", expr, e.pos, e.message, pos,
	      fragment);
	free(got);
}

int main(void)
{
	int64_t us = 0;

	/* durations: > is one microsecond above, <= one microsecond past */
	accepts("duration > 1s", "{\"min_duration\": \"1000001us\"}");
	accepts("duration >= 1s", "{\"min_duration\": \"1000000us\"}");
	accepts("duration < 100ms", "{\"max_duration\": \"100000us\"}");
	accepts("duration <= 100ms", "{\"max_duration\": \"100001us\"}");
	accepts("duration>=1.5s and duration<2m",
		"{\"min_duration\": \"1500000us\", \"max_duration\": \"120000000us\"}");
	accepts("duration > 250us", "{\"min_duration\": \"251us\"}");
	accepts("duration > 1h", "{\"min_duration\": \"3600000001us\"}");
	accepts("duration < 100ms and status = 5xx",
		"{\"max_duration\": \"100000us\", \"status\": [\"5xx\"]}");
	accepts("status in (4xx, 500)", "{\"status\": [\"4xx\", \"500\"]}");
	accepts("route ~ /api/checkout*", "{\"route\": [\"/api/checkout*\"]}");
	/* exact routes escape the glob characters */
	accepts("route = /a*b", "{\"route\": [\"/a\\\\*b\"]}");
	accepts("route ~ \"/with space/(x)\"", "{\"route\": [\"/with space/(x)\"]}");
	accepts("route in (/a*, /b)", "{\"route\": [\"/a*\", \"/b\"]}");
	accepts("method = POST", "{\"method\": [\"POST\"]}");
	accepts("METHOD in (get, head) AND Status = 2XX",
		"{\"status\": [\"2XX\"], \"method\": [\"get\", \"head\"]}");
	accepts("all", "{}");
	accepts("  duration > 1s  ", "{\"min_duration\": \"1000001us\"}");
	/* key order is fixed whatever the order of conditions */
	accepts("method = GET and route ~ /x and status = 404 and duration < 1s and duration > 1ms",
		"{\"min_duration\": \"1001us\", \"max_duration\": \"1000000us\", \"status\": "
		"[\"404\"], \"route\": [\"/x\"], \"method\": [\"GET\"]}");

	rejects("", 0, "empty expression");
	rejects("duration", 8, "expected >, >=, < or <= after 'duration'");
	rejects("duration = 1s", 9, "expected >, >=, < or <=");
	rejects("duration > fast", 11, "'fast' is not a duration");
	rejects("duration > 1", 11, "'1' is not a duration");
	rejects("duration > 1.5us", 11, "not a whole number of microseconds");
	rejects("duration > 1s or status = 5xx", 14, "'or' is not supported");
	rejects("duration > 1s status = 5xx", 14, "expected 'and' or the end");
	rejects("duration > 1s and", 17, "expected duration, status, route or method");
	rejects("latency > 1s", 0, "expected duration, status, route or method, found 'latency'");
	rejects("status = 6xx", 9, "'6xx' is not a status code");
	rejects("status = 5xx and status = 4xx", 17, "status is already given");
	rejects("status in 4xx", 10, "expected '(' after 'in'");
	rejects("status in (4xx 500)", 15, "expected ',' or ')'");
	rejects("status in (4xx,", 15, "expected a status code");
	rejects("route > /a", 6, "expected '~' (glob) or '=' (exact) or 'in'");
	rejects("route ~ \"/open", 8, "unterminated quoted value");
	rejects("method = P0ST", 9, "is not an HTTP method");
	rejects("duration > 1s and duration >= 2s", 27, "already has a lower bound");
	rejects("duration > 2s and duration < 1s", 27, "no duration is both");
	rejects("duration < 0ms", 11, "no request lasts less than 0");
	rejects("all and duration > 1s", 4, "expected the end of the expression after 'all'");

	/* the caret: under the offending token, one column per character */
	{
		struct cohort_expr_error e = {0};
		char *buf = NULL;
		size_t len = 0;
		FILE *f = open_memstream(&buf, &len);

		CHECK(!cohort_expr_compile("route ~ /café or x", &e), "accepted");
		cohort_expr_print_error(f, "compare: --cohort-a", "route ~ /café or x", &e);
		fclose(f);
		CHECK(strcmp(buf,
			     "traceprof: compare: --cohort-a: 'or' is not supported: conditions "
			     "on different keys are all required; for alternatives of one key "
			     "write 'in', e.g. status in (4xx, 5xx)\n"
			     "  route ~ /café or x\n"
			     "                ^\n") == 0,
		      "caret output:\n%s", buf);
		free(buf);
	}

	/* time flags */
	CHECK(cli_parse_time("2030-01-02T10:00:00Z", &us) == 0 && us == 1893578400000000LL,
	      "rfc3339 Z: %lld", (long long)us);
	CHECK(cli_parse_time("2030-01-02 10:00", &us) == 0 && us == 1893578400000000LL,
	      "YYYY-MM-DD HH:MM is UTC: %lld", (long long)us);
	CHECK(cli_parse_time("2030-01-02T12:00:00.5+02:00", &us) == 0 && us == 1893578400500000LL,
	      "offset and fraction: %lld", (long long)us);
	CHECK(cli_parse_time("2030-02-31 10:00", &us) < 0, "February 31st refused");
	CHECK(cli_parse_time("yesterday", &us) < 0, "words refused");
	CHECK(cli_parse_time("2030-01-02T10:00:00Zjunk", &us) < 0, "trailing junk refused");
	CHECK(cli_parse_span("90s", &us) == 0 && us == 90000000LL, "90s");
	CHECK(cli_parse_span("2d", &us) == 0 && us == 172800000000LL, "2d");
	CHECK(cli_parse_span("1.5h", &us) == 0 && us == 5400000000LL, "1.5h");
	CHECK(cli_parse_span("1", &us) < 0, "a span needs a unit");
	CHECK(cli_parse_span("-1h", &us) < 0, "negative refused");
	CHECK(cli_parse_span("500d", &us) < 0, "beyond 400 days refused");
	return check_done();
}
