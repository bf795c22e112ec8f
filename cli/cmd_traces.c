/*
 * cmd_traces.c - `traceprof traces --service S`: the service's requests in
 * a time range, newest first, with their duration, status, route and
 * sample count (traceprof.service_requests, 009), to find a trace id.
 * The filters travel as a cohort spec (JSON values), never as SQL.
 */

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#define CMD	      "traces"
#define DEFAULT_LIMIT 20

void help_traces(FILE *f)
{
	fprintf(
	    f,
	    "usage: traceprof traces --service S [--min-duration D] [--status S] [--route GLOB]\n"
	    "                        [--method M] [--since 1h | --from T --until T] [--limit N]\n"
	    "                        [--format text|json] [-o FILE] [--db CONNINFO]\n"
	    "\n"
	    "The requests of a service that started in the time range, newest first: start\n"
	    "time (UTC), trace id, duration, status, method and route, and the samples of\n"
	    "the request's span (raised samples when a trigger collected it).\n"
	    "\n"
	    "options:\n"
	    "  --service S          the service (required)\n"
	    "  --min-duration D     at least D: 250ms, 1s, 1.5s, 2m\n"
	    "  --status S           a status code or class: 500, 5xx, or a list '4xx,503'\n"
	    "  --route GLOB         route glob: * any run of characters, ? one character\n"
	    "  --method M           HTTP method\n" CLI_HELP_RANGE
	    "  --limit N            at most N requests (default %d)\n"
	    "  --format F           text (default) or json\n" CLI_HELP_DB CLI_HELP_COMMON "\n"
	    "example:\n"
	    "  traceprof traces --service payment-svc --min-duration 1s --status 5xx --since 30m\n",
	    DEFAULT_LIMIT);
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
	static const struct option opts[] = {{"service", required_argument, NULL, 's'},
					     {"min-duration", required_argument, NULL, 'D'},
					     {"status", required_argument, NULL, 'S'},
					     {"route", required_argument, NULL, 'r'},
					     {"method", required_argument, NULL, 'M'},
					     {"since", required_argument, NULL, 'n'},
					     {"from", required_argument, NULL, 'F'},
					     {"until", required_argument, NULL, 'U'},
					     {"limit", required_argument, NULL, 'l'},
					     {"format", required_argument, NULL, 'f'},
					     {"output", required_argument, NULL, 'o'},
					     {"db", required_argument, NULL, 'd'},
					     {"help", no_argument, NULL, 'h'},
					     {NULL, 0, NULL, 0}};
	struct cli_common c = {.format = CLI_FMT_TEXT};
	const char *service = NULL, *min_dur = NULL, *status = NULL, *route = NULL, *method = NULL;
	struct cli_range_flags rf = {0};
	long limit = DEFAULT_LIMIT;
	struct cli_range range;
	struct cli_db db = {0};
	char *spec = NULL, lim[32], a[64], b[64];
	size_t speclen = 0;
	bool first = true;
	PGresult *res = NULL;
	int ch, rc, n;
	FILE *m, *out;

	opterr = 0;
	optind = 1;
	while ((ch = getopt_long(argc, argv, ":o:h", opts, NULL)) != -1) {
		if (cli_common_flag(&c, &rf, ch, optarg))
			continue;
		switch (ch) {
		case 's':
			service = optarg;
			break;
		case 'D':
			min_dur = optarg;
			break;
		case 'S':
			status = optarg;
			break;
		case 'r':
			route = optarg;
			break;
		case 'M':
			method = optarg;
			break;
		case 'l':
			if (cli_parse_count(optarg, &limit))
				return cli_usage_error(
				    CMD, "--limit '%s' is not a count (1-1000000)", optarg);
			break;
		case 'f':
			if (cli_set_format(&c, optarg, 1u << CLI_FMT_TEXT | 1u << CLI_FMT_JSON,
					   CMD))
				return CLI_USAGE;
			break;
		case 'h':
			help_traces(stdout);
			return CLI_OK;
		default:
			return cli_bad_option(CMD, argv, ch, optopt);
		}
	}
	if (optind < argc)
		return cli_usage_error(CMD, "unexpected argument '%s'", argv[optind]);
	if (!service || !*service)
		return cli_usage_error(CMD, "needs --service S");
	if (cli_range_parse(rf.since, rf.from, rf.until, &range))
		return CLI_USAGE;
	m = open_memstream(&spec, &speclen);
	if (!m)
		return CLI_IO;
	fputc('{', m);
	spec_kv(m, &first, "min_duration", min_dur);
	spec_kv(m, &first, "status", status);
	spec_kv(m, &first, "route", route);
	spec_kv(m, &first, "method", method);
	fputc('}', m);
	fclose(m);

	rc = cli_connect(c.conninfo, &db);
	if (rc)
		goto out;
	snprintf(lim, sizeof(lim), "%ld", limit);
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
	out = cli_open_output(c.output);
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
