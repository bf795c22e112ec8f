/*
 * cmd_compare.c - `traceprof compare`: two cohorts of a service's requests,
 * each given as an expression (cohort_expr.c) compiled to a cohort spec,
 * compared function by function with traceprof.compare_cohorts and sized
 * with traceprof.cohort_sizes (docs/cohorts.md).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cohort_expr.h"
#include "render.h"
#include "stackset_read.h"

#define CMD	      "compare"
#define DEFAULT_LIMIT 10

/* What the command line of `traceprof compare` sets. */
struct compare_args {
	struct cli_common c;
	struct cli_range_flags rf;
	const char *service, *ea, *eb; /* the cohort expressions */
	const char *metric;	       /* --metric: "cpu" (NULL), "offcpu", "wall" or "gpu" */
	long limit;
	bool exact, help;
};

static const struct cli_formats formats = {
    1u << CLI_FMT_TEXT | 1u << CLI_FMT_JSON | 1u << CLI_FMT_SVG, CMD};

#define T struct compare_args
static const struct tp_option options[] = {
    CLI_OPT_SERVICE(T, "the service (required)"),
    {.name = "cohort-a",
     .type = TP_OPT_STR,
     .offset = offsetof(T, ea),
     .arg = "EXPR",
     .help = "cohort A (required)"},
    {.name = "cohort-b",
     .type = TP_OPT_STR,
     .offset = offsetof(T, eb),
     .arg = "EXPR",
     .help = "cohort B (required)"},
    CLI_OPT_RANGE(T),
    CLI_OPT_LIMIT(
	T, "at most N functions hotter in each cohort (default " TP_OPTS_STR(DEFAULT_LIMIT) ")"),
    {.name = "metric",
     .type = TP_OPT_STR,
     .offset = offsetof(T, metric),
     .arg = "M",
     .help = "cpu (default: CPU share through each function),\noffcpu (blocked time per "
	     "blocking function,\ncompare_offcpu_cohorts), wall (CPU, blocked and\nrunqueue time "
	     "through each function,\ncompare_wall_cohorts) or gpu (GPU time per\nkernel, "
	     "compare_gpu_cohorts)"},
    {.name = "exact",
     .type = TP_OPT_FLAG,
     .offset = offsetof(T, exact),
     .help = "compute from the raw tables, not the rollup"},
    CLI_OPT_FORMAT(T, &formats,
		   "text (default), json, or svg (differential flame graph:\nred hotter in A, blue "
		   "hotter in B)"),
    CLI_OPT_DB(T),
    CLI_OPT_COMMON(T),
};
#undef T

void help_compare(FILE *f)
{
	fputs("usage: traceprof compare --service S --cohort-a EXPR --cohort-b EXPR\n"
	      "                         [--since 1h | --from T --until T] [--limit N] [--exact]\n"
	      "                         [--metric cpu|offcpu|wall|gpu]\n"
	      "                         [--format text|json|svg] [-o FILE] [--db CONNINFO]\n"
	      "\n"
	      "Which functions take a larger share of the CPU of one cohort of requests than\n"
	      "of the other: per function the share of each cohort (inclusive: the function\n"
	      "and what it called), the difference in points and a request-level p-value.\n"
	      "--metric offcpu compares blocked time instead: per blocking function (the\n"
	      "library call a thread slept in, e.g. pthread_mutex_lock) its ms per request\n"
	      "and share of each cohort's blocked time (docs/offcpu.md). --metric wall\n"
	      "compares wall time: per function the CPU and blocked time of the stacks it\n"
	      "is on, as a share of each cohort's CPU, blocked and runqueue time.\n"
	      "--metric gpu compares GPU time: per kernel its GPU ms per request and share\n"
	      "of each cohort's GPU time (which kernels grew; docs/gpu.md).\n"
	      "\n"
	      "cohort expressions (conditions joined with 'and'):\n"
	      "  duration > 1s          also >=, <, <=; units us, ms, s, m, h\n"
	      "  status = 5xx           a code or class; status in (4xx, 500)\n"
	      "  route ~ /api/pay*      glob (* any run, ? one character); route = /exact\n"
	      "  method = POST          method in (GET, HEAD)\n"
	      "  all                    every request of the service\n"
	      "\n"
	      "options:\n",
	      f);
	tp_opts_help(options, TP_OPTS_COUNT(options), f, CLI_HELP_WIDTH, 0);
	fputs("\n"
	      "example:\n"
	      "  traceprof compare --service payment-svc --cohort-a 'duration > 1s' \\\n"
	      "      --cohort-b 'duration < 100ms and status = 2xx' --since 2h\n",
	      f);
}

/* The command line into a and range: -1 to go on, or the exit code. */
static int parse_compare(int argc, char **argv, struct compare_args *a, struct cli_range *range)
{
	int rc = cli_parse_service_args(CMD, options, TP_OPTS_COUNT(options), a, argc, argv,
					help_compare, &a->service);

	if (rc >= 0)
		return rc;
	if (!a->ea || !a->eb)
		return cli_usage_error(CMD,
				       "needs --cohort-a EXPR and --cohort-b EXPR, e.g. "
				       "--cohort-a 'duration > 1s' --cohort-b 'duration < 100ms'");
	if (cli_range_parse(a->rf.since, a->rf.from, a->rf.until, range))
		return CLI_USAGE;
	if (a->metric && strcmp(a->metric, "cpu") == 0)
		a->metric = NULL;
	if (a->metric && strcmp(a->metric, "offcpu") != 0 && strcmp(a->metric, "wall") != 0 &&
	    strcmp(a->metric, "gpu") != 0)
		return cli_usage_error(CMD, "--metric '%.40s' is not one of cpu, offcpu, wall, gpu",
				       a->metric);
	if (a->metric && a->c.format == CLI_FMT_SVG)
		return cli_usage_error(CMD, "--format svg draws CPU stacks only: use --metric cpu");
	return -1;
}

static char *compile(const char *flag, const char *expr)
{
	struct cohort_expr_error e;
	char *spec = cohort_expr_compile(expr, &e);
	char what[64];

	if (!spec) {
		snprintf(what, sizeof(what), "compare: %s", flag);
		cohort_expr_print_error(stderr, what, expr, &e);
	}
	return spec;
}

static void pval(char *buf, size_t len, PGresult *res, int row, int col)
{
	if (PQgetisnull(res, row, col))
		snprintf(buf, len, "n/a");
	else
		snprintf(buf, len, "%.1e", strtod(PQgetvalue(res, row, col), NULL));
}

/* Rows of compare_cohorts hotter in A (sign 1) or B (sign -1), by |delta|. */
static void text_side(FILE *out, PGresult *res, int sign, long limit, const char *name,
		      const char *expr)
{
	int n = 0;

	fprintf(out, "\nhotter in %s (%s)\n", name, expr);
	fprintf(out, "  %-32s %7s %7s %9s %9s\n", "FUNCTION", "A", "B", "DELTA", "P");
	for (int i = 0; i < PQntuples(res) && n < limit; i++) {
		double d = strtod(PQgetvalue(res, i, 6), NULL);
		char p[32];

		if (PQgetisnull(res, i, 6) || (sign > 0 ? d <= 0 : d >= 0))
			continue;
		pval(p, sizeof(p), res, i, 10);
		fprintf(out, "  %-32s %6.1f%% %6.1f%% %+7.1fpt %9s\n", PQgetvalue(res, i, 0),
			100 * strtod(PQgetvalue(res, i, 4), NULL),
			100 * strtod(PQgetvalue(res, i, 5), NULL), 100 * d, p);
		n++;
	}
	if (n == 0)
		fprintf(out, "  (none)\n");
}

/*
 * How a comparison's rows are written as JSON: column 0 is the function,
 * column 1 its module when module is set; columns first..last are numbers
 * named keys[col - first], shares (share_lo..share_hi) to 0.0001, the last
 * a p-value (3 significant digits: they span many orders of magnitude).
 * The sign of column delta says which side a row is hotter in.
 */
struct json_cols {
	int delta, first, last, share_lo, share_hi;
	bool module;
	const char *const *keys;
	const char *name_key; /* the first column's key; NULL: "function" */
};

static void json_functions(FILE *out, PGresult *res, int sign, long limit,
			   const struct json_cols *c)
{
	int n = 0;

	fputc('[', out);
	for (int i = 0; i < PQntuples(res) && n < limit; i++) {
		double d = strtod(PQgetvalue(res, i, c->delta), NULL);

		if (PQgetisnull(res, i, c->delta) || (sign > 0 ? d <= 0 : d >= 0))
			continue;
		fprintf(out, "%s\n  {\"%s\": ", n ? "," : "",
			c->name_key ? c->name_key : "function");
		cli_json_str(out, PQgetvalue(res, i, 0));
		if (c->module) {
			fputs(", \"module\": ", out);
			cli_json_str(out, PQgetvalue(res, i, 1));
		}
		for (int col = c->first; col <= c->last; col++) {
			fprintf(out, ", \"%s\": ", c->keys[col - c->first]);
			if (PQgetisnull(res, i, col))
				fputs("null", out);
			else if (col == c->last)
				fprintf(out, "%.3g", strtod(PQgetvalue(res, i, col), NULL));
			else if (col >= c->share_lo && col <= c->share_hi)
				fprintf(out, "%.4f", strtod(PQgetvalue(res, i, col), NULL));
			else
				cli_json_num(out, strtod(PQgetvalue(res, i, col), NULL));
		}
		fputc('}', out);
		n++;
	}
	fputs(n ? "\n ]" : "]", out);
}

static void json_side(FILE *out, PGresult *res, int sign, long limit)
{
	static const char *const keys[] = {"a_cpu_ms",	   "b_cpu_ms", "a_share",
					   "b_share",	   "delta",    "a_self_share",
					   "b_self_share", "z",	       "p_value"};
	static const struct json_cols cols = {.delta = 6,
					      .first = 2,
					      .last = 10,
					      .share_lo = 4,
					      .share_hi = 8,
					      .module = true,
					      .keys = keys};

	json_functions(out, res, sign, limit, &cols);
}

static void json_cohort(FILE *out, const char *expr, const char *spec, PGresult *sizes, int row)
{
	fputs("{\"expression\": ", out);
	cli_json_str(out, expr);
	fprintf(out,
		", \"spec\": %s, \"requests\": %s, \"sampled_requests\": %s, \"samples\": %s, "
		"\"cpu_ms\": ",
		spec, PQgetvalue(sizes, row, 1), PQgetvalue(sizes, row, 2),
		PQgetvalue(sizes, row, 3));
	cli_json_num(out, strtod(PQgetvalue(sizes, row, 4), NULL));
	fputc('}', out);
}

/* --format svg: the differential flame graph of the two cohorts' stacks
 * (red: hotter in A, blue: hotter in B). */
static int svg_diff(struct cli_db *db, const struct cli_common *c, const char *service,
		    const struct cli_range *range, const char *sa, const char *sb, const char *ea,
		    const char *eb)
{
	struct tp_stackset *set = NULL;
	char err[1024], title[256], sub[512], a[64], b[64];
	FILE *out;
	int rc;

	rc = stackset_read_cohorts(db->conn, service, range->from_us, range->until_us, sa, sb, ea,
				   eb, &set, err, sizeof(err));
	if (rc) {
		cli_error("%s", err);
		return rc == -EINVAL ? CLI_USAGE : CLI_DB;
	}
	out = cli_open_output(c->output, c->format);
	if (!out) {
		stackset_free(set);
		return CLI_IO;
	}
	snprintf(title, sizeof(title), "%s: %s vs %s", service, ea, eb);
	snprintf(sub, sizeof(sub),
		 "requests started %s to %s; red: hotter in A (%s), blue: hotter in B (%s)",
		 cli_time_rfc3339(range->from_us, a, sizeof(a)),
		 cli_time_rfc3339(range->until_us, b, sizeof(b)), ea, eb);
	rc = render_svg(out, set, title, sub);
	stackset_free(set);
	return render_close(out, c->output, rc, true);
}

/* The text report: the cohorts' sizes, then the functions hotter in each. */
static void text_report(FILE *out, const struct compare_args *args, PGresult *sizes, PGresult *res,
			const char *a, const char *b)
{
	const char *service = args->service, *ea = args->ea, *eb = args->eb;
	long limit = args->limit;

	fprintf(out, "service %s, requests started %s to %s\n", service, a, b);
	for (int i = 0; i < 2; i++) {
		char t[32];

		fprintf(out, "  %s: %-28s %s requests, %s with samples, %s samples, %s CPU\n",
			i ? "B" : "A", i ? eb : ea, PQgetvalue(sizes, i, 1),
			PQgetvalue(sizes, i, 2), PQgetvalue(sizes, i, 3),
			cli_fmt_us((int64_t)(strtod(PQgetvalue(sizes, i, 4), NULL) * 1000 + 0.5), t,
				   sizeof(t)));
	}
	text_side(out, res, 1, limit, "A", ea);
	text_side(out, res, -1, limit, "B", eb);
	fprintf(out, "\nA, B: share of the cohort's CPU on stacks through the function; "
		     "DELTA = A - B;\nP: request-level two-sided p-value (n/a: too few "
		     "requests to tell)\n");
}

/*
 * --metric offcpu and wall: the SQL function and the words of its report.
 * Off-CPU time is charged to the blocking function, so the cohorts' blocked
 * time is the sum of the rows; wall time is charged to every function on a
 * stack, so rows do not add up to a total.
 */
struct time_metric {
	const char *name;    /* "offcpu", "wall", "gpu" */
	const char *sql;     /* the comparison's query */
	const char *more;    /* "more blocked in", "more time in" */
	const char *json_a;  /* key of the A side's rows */
	const char *json_b;  /* key of the B side's rows */
	const char *keys[9]; /* JSON names of the numeric columns */
	const char *legend;  /* the text view's last lines */
	bool summed;	     /* the rows add up to the cohort's time */
	const char *what;    /* the time compared: "blocked time" */
	const char *total;   /* after a cohort's summed ms: "blocked" */
	const char *key;     /* JSON key of each row's name: "function" */
	const char *row;     /* the row name's column head: "FUNCTION" */
};

static const struct time_metric metric_offcpu = {
    .name = "offcpu",
    .sql = "SELECT function, a_blocked_ms, b_blocked_ms, a_ms_per_request, b_ms_per_request, "
	   "a_share, b_share, delta, z, p_value FROM traceprof.compare_offcpu_cohorts($1, "
	   "$2::timestamptz, $3::timestamptz, $4::jsonb, $5::jsonb)",
    .more = "more blocked in",
    .json_a = "more_blocked_in_a",
    .json_b = "more_blocked_in_b",
    .keys = {"a_blocked_ms", "b_blocked_ms", "a_ms_per_request", "b_ms_per_request", "a_share",
	     "b_share", "delta", "z", "p_value"},
    .legend = "MS/REQ: blocked ms in the function per request of the cohort; A, B: share of "
	      "the\ncohort's blocked time; DELTA = A - B; P: request-level two-sided p-value\n"
	      "(n/a: too few requests to tell)\n",
    .summed = true,
    .what = "blocked time",
    .total = "blocked",
    .key = "function",
    .row = "FUNCTION",
};

static const struct time_metric metric_wall = {
    .name = "wall",
    .sql = "SELECT function, a_ms, b_ms, a_ms_per_request, b_ms_per_request, a_share, b_share, "
	   "delta, z, p_value FROM traceprof.compare_wall_cohorts($1, $2::timestamptz, "
	   "$3::timestamptz, $4::jsonb, $5::jsonb)",
    .more = "more time in",
    .json_a = "more_time_in_a",
    .json_b = "more_time_in_b",
    .keys = {"a_ms", "b_ms", "a_ms_per_request", "b_ms_per_request", "a_share", "b_share", "delta",
	     "z", "p_value"},
    .legend = "MS/REQ: ms through the function (on CPU, blocked) per request of the cohort; A, "
	      "B:\nshare of the cohort's wall time (CPU, blocked and runqueue); DELTA = A - B; "
	      "P:\nrequest-level two-sided p-value (n/a: too few requests to tell)\n",
    .summed = false,
    .what = "wall time",
    .key = "function",
    .row = "FUNCTION",
};

static const struct time_metric metric_gpu = {
    .name = "gpu",
    .sql = "SELECT kernel, a_gpu_ms, b_gpu_ms, a_ms_per_request, b_ms_per_request, a_share, "
	   "b_share, delta, z, p_value FROM traceprof.compare_gpu_cohorts($1, $2::timestamptz, "
	   "$3::timestamptz, $4::jsonb, $5::jsonb)",
    .more = "more GPU time in",
    .json_a = "more_gpu_in_a",
    .json_b = "more_gpu_in_b",
    .keys = {"a_gpu_ms", "b_gpu_ms", "a_ms_per_request", "b_ms_per_request", "a_share", "b_share",
	     "delta", "z", "p_value"},
    .legend = "MS/REQ: GPU ms of the kernel per request of the cohort; A, B: share of the\n"
	      "cohort's GPU time; DELTA = A - B; P: request-level two-sided p-value (n/a: too\n"
	      "few requests to tell)\n",
    .summed = true,
    .what = "GPU time",
    .total = "on the GPU",
    .key = "kernel",
    .row = "KERNEL",
};

/* Rows of compare_offcpu_cohorts with more blocked time in A (sign 1) or
 * B (sign -1), by |delta|. */
static void offcpu_text_side(FILE *out, PGresult *res, int sign, long limit, const char *name,
			     const char *expr, const struct time_metric *m)
{
	int n = 0;

	fprintf(out, "\n%s %s (%s)\n", m->more, name, expr);
	fprintf(out, "  %-32s %9s %9s %7s %7s %9s %9s\n", m->row, "A MS/REQ", "B MS/REQ", "A", "B",
		"DELTA", "P");
	for (int i = 0; i < PQntuples(res) && n < limit; i++) {
		double d = strtod(PQgetvalue(res, i, 7), NULL);
		char p[32];

		if (PQgetisnull(res, i, 7) || (sign > 0 ? d <= 0 : d >= 0))
			continue;
		pval(p, sizeof(p), res, i, 9);
		fprintf(out, "  %-32s %9.1f %9.1f %6.1f%% %6.1f%% %+7.1fpt %9s\n",
			PQgetvalue(res, i, 0), strtod(PQgetvalue(res, i, 3), NULL),
			strtod(PQgetvalue(res, i, 4), NULL),
			100 * strtod(PQgetvalue(res, i, 5), NULL),
			100 * strtod(PQgetvalue(res, i, 6), NULL), 100 * d, p);
		n++;
	}
	if (n == 0)
		fprintf(out, "  (none)\n");
}

static void offcpu_json_side(FILE *out, PGresult *res, int sign, long limit,
			     const struct time_metric *m)
{
	const struct json_cols cols = {.delta = 7,
				       .first = 1,
				       .last = 9,
				       .share_lo = 5,
				       .share_hi = 7,
				       .keys = m->keys,
				       .name_key = m->key};

	json_functions(out, res, sign, limit, &cols);
}

/* --metric offcpu or wall: the cohorts' requests (and blocked time), then
 * the functions with more of it in each. Returns the exit code. */
static int offcpu_report(const struct compare_args *args, PGresult *sizes, PGresult *res,
			 const char *sa, const char *sb, const char *a, const char *b,
			 const struct time_metric *m)
{
	double blocked[2] = {0, 0};
	FILE *out = cli_open_output(args->c.output, args->c.format);

	if (!out)
		return CLI_IO;
	for (int i = 0; i < PQntuples(res); i++)
		for (int k = 0; k < 2; k++)
			blocked[k] += strtod(PQgetvalue(res, i, 1 + k), NULL);
	if (args->c.format == CLI_FMT_JSON) {
		fputs("{\"service\": ", out);
		cli_json_str(out, args->service);
		fprintf(out, ", \"metric\": \"%s\", \"from\": \"%s\", \"until\": \"%s\"", m->name,
			a, b);
		for (int k = 0; k < 2; k++) {
			fprintf(out, ",\n \"cohort_%c\": {\"expression\": ", k ? 'b' : 'a');
			cli_json_str(out, k ? args->eb : args->ea);
			fprintf(out, ", \"spec\": %s, \"requests\": %s", k ? sb : sa,
				PQgetvalue(sizes, k, 1));
			if (m->summed) {
				fprintf(out, ", \"%s\": ", m->keys[0] + 2); /* "blocked_ms" */
				cli_json_num(out, blocked[k]);
			}
			fputc('}', out);
		}
		fprintf(out, ",\n \"%s\": ", m->json_a);
		offcpu_json_side(out, res, 1, args->limit, m);
		fprintf(out, ",\n \"%s\": ", m->json_b);
		offcpu_json_side(out, res, -1, args->limit, m);
		fputs("}\n", out);
		return cli_close_output(out, args->c.output);
	}
	fprintf(out, "service %s, requests started %s to %s, %s\n", args->service, a, b, m->what);
	for (int k = 0; k < 2; k++) {
		fprintf(out, "  %s: %-28s %s requests", k ? "B" : "A", k ? args->eb : args->ea,
			PQgetvalue(sizes, k, 1));
		if (m->summed)
			fprintf(out, ", %.1f ms %s", blocked[k], m->total);
		fputc('\n', out);
	}
	offcpu_text_side(out, res, 1, args->limit, "A", args->ea, m);
	offcpu_text_side(out, res, -1, args->limit, "B", args->eb, m);
	fprintf(out, "\n%s", m->legend);
	return cli_close_output(out, args->c.output);
}

/* --metric offcpu or wall: the comparison with compare_cohorts' first five
 * parameters, then the report. Returns the exit code. */
static int compare_offcpu(struct cli_db *db, const struct compare_args *args,
			  const char *const *params, PGresult *sizes, const char *sa,
			  const char *sb, const char *a, const char *b)
{
	const struct time_metric *m = strcmp(args->metric, "wall") == 0	 ? &metric_wall
				      : strcmp(args->metric, "gpu") == 0 ? &metric_gpu
									 : &metric_offcpu;
	int rc;
	PGresult *res = cli_query(db, m->sql, 5, params, &rc);

	if (!res)
		return rc;
	rc = offcpu_report(args, sizes, res, sa, sb, a, b, m);
	PQclear(res);
	return rc;
}

int cmd_compare(int argc, char **argv)
{
	struct compare_args args = {.c = {.format = CLI_FMT_TEXT}, .limit = DEFAULT_LIMIT};
	struct cli_common c;
	const char *service, *ea, *eb;
	long limit;
	bool exact;
	struct cli_range range;
	struct cli_db db = {0};
	char *sa = NULL, *sb = NULL, fa[64], fb[64], a[64], b[64];
	PGresult *sizes = NULL, *res = NULL;
	int rc;
	FILE *out;

	rc = parse_compare(argc, argv, &args, &range);
	if (rc >= 0)
		return rc;
	c = args.c;
	service = args.service;
	ea = args.ea;
	eb = args.eb;
	limit = args.limit;
	exact = args.exact;
	sa = compile("--cohort-a", ea);
	sb = sa ? compile("--cohort-b", eb) : NULL;
	if (!sa || !sb) {
		rc = CLI_USAGE;
		goto out;
	}
	rc = cli_connect(c.conninfo, &db);
	if (rc)
		goto out;
	if (cli_unknown_service(&db, service)) {
		rc = CLI_NO_DATA;
		goto out;
	}
	{
		const char *params[6] = {service,
					 cli_time_sql(range.from_us, fa, sizeof(fa)),
					 cli_time_sql(range.until_us, fb, sizeof(fb)),
					 sa,
					 sb,
					 exact ? "false" : "true"};

		sizes = cli_query(&db,
				  "SELECT cohort, requests, sampled_requests, samples, cpu_ms FROM "
				  "traceprof.cohort_sizes($1, $2::timestamptz, $3::timestamptz, "
				  "$4::jsonb, $5::jsonb, $6::boolean) ORDER BY cohort",
				  6, params, &rc);
		if (!sizes)
			goto out;
		cli_time_rfc3339(range.from_us, a, sizeof(a));
		cli_time_rfc3339(range.until_us, b, sizeof(b));
		for (int i = 0; i < 2; i++)
			if (strcmp(PQgetvalue(sizes, i, args.metric ? 1 : 2), "0") == 0) {
				cli_error("cohort %s (%s) has no requests%s in service "
					  "'%s' in %s between %s and %s (%s requests matched)",
					  i ? "B" : "A", i ? eb : ea,
					  args.metric ? "" : " with samples", service, db.where, a,
					  b, PQgetvalue(sizes, i, 1));
				rc = CLI_NO_DATA;
				goto out;
			}
		if (c.format == CLI_FMT_SVG) {
			rc = svg_diff(&db, &c, service, &range, sa, sb, ea, eb);
			goto out;
		}
		if (args.metric) {
			rc = compare_offcpu(&db, &args, params, sizes, sa, sb, a, b);
			goto out;
		}
		res = cli_query(
		    &db,
		    "SELECT function, module, a_cpu_ms, b_cpu_ms, a_share, b_share, delta, "
		    "a_self_share, b_self_share, z, p_value FROM "
		    "traceprof.compare_cohorts($1, $2::timestamptz, $3::timestamptz, "
		    "$4::jsonb, $5::jsonb, $6::boolean)",
		    6, params, &rc);
		if (!res)
			goto out;
	}
	out = cli_open_output(c.output, c.format);
	if (!out) {
		rc = CLI_IO;
		goto out;
	}
	switch (c.format) {
	case CLI_FMT_TEXT:
		text_report(out, &args, sizes, res, a, b);
		break;
	case CLI_FMT_JSON:
		fputs("{\"service\": ", out);
		cli_json_str(out, service);
		fprintf(out, ", \"from\": \"%s\", \"until\": \"%s\",\n \"cohort_a\": ", a, b);
		json_cohort(out, ea, sa, sizes, 0);
		fputs(",\n \"cohort_b\": ", out);
		json_cohort(out, eb, sb, sizes, 1);
		fputs(",\n \"hotter_in_a\": ", out);
		json_side(out, res, 1, limit);
		fputs(",\n \"hotter_in_b\": ", out);
		json_side(out, res, -1, limit);
		fputs("}\n", out);
		break;
	default:
		break;
	}
	rc = cli_close_output(out, c.output);
out:
	PQclear(sizes);
	PQclear(res);
	free(sa);
	free(sb);
	cli_disconnect(&db);
	return rc;
}
