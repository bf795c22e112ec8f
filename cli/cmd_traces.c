/*
 * cmd_traces.c - `traceprof traces --service S`: the service's requests in
 * a time range, newest first, with their duration, status, route and
 * sample count (traceprof.service_requests, 009), to find a trace id.
 * The filters travel as a cohort spec (JSON values), never as SQL.
 */

#include <stdlib.h>
#include <string.h>

#include "cli.h"

#define CMD	      "traces"
#define DEFAULT_LIMIT 20

/* What the command line of `traceprof traces` sets. */
struct traces_args {
	struct cli_common c;
	struct cli_range_flags rf;
	const char *service, *min_dur, *status, *route, *method;
	long limit;
	bool help;
};

static const struct cli_formats formats = {1u << CLI_FMT_TEXT | 1u << CLI_FMT_JSON, CMD};

#define T struct traces_args
#define FILTER(n, m, a, h)                                                                         \
	{                                                                                          \
		.name = n, .type = TP_OPT_STR, .offset = offsetof(T, m), .arg = a, .help = h       \
	}
static const struct tp_option options[] = {
    CLI_OPT_SERVICE(T, "the service (required)"),
    FILTER("min-duration", min_dur, "D", "at least D: 250ms, 1s, 1.5s, 2m"),
    FILTER("status", status, "S", "a status code or class: 500, 5xx, or a list '4xx,503'"),
    FILTER("route", route, "GLOB", "route glob: * any run of characters, ? one character"),
    FILTER("method", method, "M", "HTTP method"),
    CLI_OPT_RANGE(T),
    CLI_OPT_LIMIT(T, "at most N requests (default " TP_OPTS_STR(DEFAULT_LIMIT) ")"),
    CLI_OPT_FORMAT(T, &formats, "text (default) or json"),
    CLI_OPT_DB(T),
    CLI_OPT_COMMON(T),
};
#undef FILTER
#undef T

void help_traces(FILE *f)
{
	fputs("usage: traceprof traces --service S [--min-duration D] [--status S] [--route GLOB]\n"
	      "                        [--method M] [--since 1h | --from T --until T] [--limit N]\n"
	      "                        [--format text|json] [-o FILE] [--db CONNINFO]\n"
	      "\n"
	      "The requests of a service that started in the time range, newest first: start\n"
	      "time (UTC), trace id, duration, status, method and route, and the samples of\n"
	      "the request's span (raised samples when a trigger collected it).\n"
	      "\n"
	      "options:\n",
	      f);
	tp_opts_help(options, TP_OPTS_COUNT(options), f, CLI_HELP_WIDTH, 0);
	fputs(
	    "\n"
	    "example:\n"
	    "  traceprof traces --service payment-svc --min-duration 1s --status 5xx --since 30m\n",
	    f);
}

/* The command line into a and range: -1 to go on, or the exit code. */
static int parse_traces(int argc, char **argv, struct traces_args *a, struct cli_range *range)
{
	int rc = cli_parse_service_args(CMD, options, TP_OPTS_COUNT(options), a, argc, argv,
					help_traces, &a->service);

	if (rc >= 0)
		return rc;
	if (cli_range_parse(a->rf.since, a->rf.from, a->rf.until, range))
		return CLI_USAGE;
	return -1;
}

/* Appends "key": "value" to the spec being written. */
static void spec_kv(FILE *m, bool *first, const char *key, const char *value)
{
	if (!value)
		return;
	fprintf(m, "%s\"%s\": ", *first ? "" : ", ", key);
	cli_json_str(m, value);
	*first = false;
}

int cmd_traces(int argc, char **argv)
{
	struct traces_args args = {.c = {.format = CLI_FMT_TEXT}, .limit = DEFAULT_LIMIT};
	struct cli_common c;
	const char *service;
	struct cli_range range;
	struct cli_db db = {0};
	char *spec = NULL, lim[32], a[64], b[64];
	size_t speclen = 0;
	bool first = true;
	PGresult *res = NULL;
	int rc, n;
	FILE *m, *out;

	rc = parse_traces(argc, argv, &args, &range);
	if (rc >= 0)
		return rc;
	c = args.c;
	service = args.service;
	m = open_memstream(&spec, &speclen);
	if (!m)
		return CLI_IO;
	fputc('{', m);
	spec_kv(m, &first, "min_duration", args.min_dur);
	spec_kv(m, &first, "status", args.status);
	spec_kv(m, &first, "route", args.route);
	spec_kv(m, &first, "method", args.method);
	fputc('}', m);
	fclose(m);

	rc = cli_connect(c.conninfo, &db);
	if (rc)
		goto out;
	snprintf(lim, sizeof(lim), "%ld", args.limit);
	{
		const char *params[5] = {service, cli_time_sql(range.from_us, a, sizeof(a)),
					 cli_time_sql(range.until_us, b, sizeof(b)), spec, lim};

		res = cli_query(&db,
				"SELECT to_char(start_time, 'YYYY-MM-DD HH24:MI:SS.MS'), trace_id, "
				"span_id, duration_ms, status_code, method, route, samples, "
				"to_char(start_time, 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"'), cpu_ms "
				"FROM traceprof.service_requests($1, $2::timestamptz, "
				"$3::timestamptz, $4::jsonb, $5::integer)",
				5, params, &rc);
	}
	if (!res)
		goto out;
	n = PQntuples(res);
	if (n == 0) {
		if (!cli_unknown_service(&db, service))
			cli_error("no requests of service '%s'%s in %s between %s and %s", service,
				  first ? "" : " matching the filters", db.where,
				  cli_time_rfc3339(range.from_us, a, sizeof(a)),
				  cli_time_rfc3339(range.until_us, b, sizeof(b)));
		rc = CLI_NO_DATA;
		goto out;
	}
	out = cli_open_output(c.output, c.format);
	if (!out) {
		rc = CLI_IO;
		goto out;
	}
	switch (c.format) {
	case CLI_FMT_TEXT:
		fprintf(out, "%-23s  %-32s  %8s  %6s  %-30s  %7s\n", "START (UTC)", "TRACE ID",
			"DURATION", "STATUS", "REQUEST", "SAMPLES");
		for (int i = 0; i < n; i++) {
			char d[32], req[512];

			cli_fmt_us((int64_t)(strtod(PQgetvalue(res, i, 3), NULL) * 1000.0 + 0.5), d,
				   sizeof(d));
			snprintf(req, sizeof(req), "%s%s%s", PQgetvalue(res, i, 5),
				 *PQgetvalue(res, i, 5) ? " " : "",
				 *PQgetvalue(res, i, 6) ? PQgetvalue(res, i, 6) : "(no route)");
			fprintf(out, "%-23s  %-32s  %8s  %6s  %-30s  %7s\n", PQgetvalue(res, i, 0),
				PQgetvalue(res, i, 1), d, PQgetvalue(res, i, 4), req,
				PQgetvalue(res, i, 7));
		}
		break;
	case CLI_FMT_JSON:
		fputs("[", out);
		for (int i = 0; i < n; i++) {
			fprintf(out,
				"%s\n {\"start\": \"%s\", \"trace_id\": \"%s\", \"span_id\": "
				"\"%s\", \"duration_ms\": ",
				i ? "," : "", PQgetvalue(res, i, 8), PQgetvalue(res, i, 1),
				PQgetvalue(res, i, 2));
			cli_json_num(out, strtod(PQgetvalue(res, i, 3), NULL));
			fprintf(out, ", \"status\": %s, \"method\": ", PQgetvalue(res, i, 4));
			cli_json_str(out, PQgetvalue(res, i, 5));
			fputs(", \"route\": ", out);
			cli_json_str(out, PQgetvalue(res, i, 6));
			fprintf(out, ", \"samples\": %s, \"cpu_ms\": ", PQgetvalue(res, i, 7));
			cli_json_num(out, strtod(PQgetvalue(res, i, 9), NULL));
			fputc('}', out);
		}
		fputs("\n]\n", out);
		break;
	default:
		break;
	}
	rc = cli_close_output(out, c.output);
out:
	PQclear(res);
	free(spec);
	cli_disconnect(&db);
	return rc;
}
