/*
 * cmd_profile.c - `traceprof profile --service S`: the continuous profile of
 * a service over a time range (stackset_read_service), with the builds it
 * spans (traceprof.service_builds) when a redeployment falls in the range.
 */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "render.h"
#include "stackset_read.h"

#define CMD "profile"

void help_profile(FILE *f)
{
	fprintf(f,
		"usage: traceprof profile --service S [--since 1h | --from T --until T]\n"
		"                         [--format text|folded|json|svg|pprof] [--min-pct P]\n"
		"                         [-o FILE]\n"
		"                         [--db CONNINFO]\n"
		"\n"
		"The continuous profile of a service: every sample of its pods in the range,\n"
		"serving a request or not. When the range spans more than one build of the\n"
		"service, text output starts with the builds and their time spans, json has a\n"
		"\"builds\" array, and folded output (which has no place for it) prints the\n"
		"note on standard error.\n"
		"\n"
		"options:\n"
		"  --service S          the service (required)\n" CLI_HELP_RANGE
		"  --format F           text (default), folded, json, svg (flame graph) or pprof\n"
		"                       (gzip profile.proto; needs -o or a pipe)\n"
		"  --min-pct P          text: summarize subtrees under P %% (default "
		"%.1f)\n" CLI_HELP_DB CLI_HELP_COMMON "\n"
		"example:\n"
		"  traceprof profile --service payment-svc --since 30m --format folded | "
		"flamegraph.pl\n",
		RENDER_DEFAULT_MIN_PCT);
}

int cmd_profile(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"service", required_argument, NULL, 's'}, {"since", required_argument, NULL, 'n'},
	    {"from", required_argument, NULL, 'F'},    {"until", required_argument, NULL, 'U'},
	    {"format", required_argument, NULL, 'f'},  {"min-pct", required_argument, NULL, 'm'},
	    {"output", required_argument, NULL, 'o'},  {"db", required_argument, NULL, 'd'},
	    {"help", no_argument, NULL, 'h'},	       {NULL, 0, NULL, 0}};
	struct cli_common c = {.format = CLI_FMT_TEXT};
	struct render_opts ro = {.min_pct = RENDER_DEFAULT_MIN_PCT};
	const char *service = NULL;
	struct cli_range_flags rf = {0};
	struct cli_range range;
	struct cli_db db = {0};
	struct tp_stackset *set = NULL;
	PGresult *builds = NULL;
	char err[1024], a[64], b[64];
	bool reported = false; /* by the SVG or pprof writer */
	int ch, rc, nb;
	FILE *out;

	opterr = 0;
	optind = 1;
	while ((ch = getopt_long(argc, argv, ":o:h", opts, NULL)) != -1) {
		if (cli_common_flag(&c, &rf, ch, optarg))
			continue;
		switch (ch) {
		case 's':
			service = optarg;
			break;
		case 'f':
			if (cli_set_format(&c, optarg,
					   1u << CLI_FMT_TEXT | 1u << CLI_FMT_FOLDED |
					       1u << CLI_FMT_JSON | 1u << CLI_FMT_SVG |
					       1u << CLI_FMT_PPROF,
					   CMD))
				return CLI_USAGE;
			break;
		case 'm':
			if (render_parse_min_pct(optarg, CMD, &ro))
				return CLI_USAGE;
			break;
		case 'h':
			help_profile(stdout);
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
	rc = cli_connect(c.conninfo, &db);
	if (rc)
		return rc;
	rc = stackset_read_service(db.conn, service, range.from_us, range.until_us, &set, err,
				   sizeof(err));
	if (rc) {
		cli_error("%s", err);
		rc = rc == -EINVAL ? CLI_USAGE : CLI_DB;
		goto out;
	}
	cli_time_rfc3339(range.from_us, a, sizeof(a));
	cli_time_rfc3339(range.until_us, b, sizeof(b));
	if (set->nrows == 0) {
		if (!cli_unknown_service(&db, service))
			cli_error("no samples of service '%s' in %s between %s and %s", service,
				  db.where, a, b);
		rc = CLI_NO_DATA;
		goto out;
	}
	{
		char fa[64], fb[64];
		const char *params[3] = {service, cli_time_sql(range.from_us, fa, sizeof(fa)),
					 cli_time_sql(range.until_us, fb, sizeof(fb))};

		builds = cli_query(
		    &db,
		    "SELECT CASE WHEN build_id = '' THEN '(unknown build)' ELSE "
		    "build_id END, to_char(first_bucket, 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'), "
		    "to_char(last_bucket, 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'), samples "
		    "FROM traceprof.service_builds($1, $2::timestamptz, $3::timestamptz)",
		    3, params, &rc);
		if (!builds)
			goto out;
	}
	nb = PQntuples(builds);
	out = cli_open_output(c.output);
	if (!out) {
		rc = CLI_IO;
		goto out;
	}
	switch (c.format) {
	case CLI_FMT_TEXT:
		fprintf(out, "service %s, %s to %s\n", service, a, b);
		if (nb > 1) {
			fprintf(out, "the range spans %d builds (first to last sample, samples):\n",
				nb);
			for (int i = 0; i < nb; i++)
				fprintf(out, "  %s  %s .. %s  %s\n", PQgetvalue(builds, i, 0),
					PQgetvalue(builds, i, 1), PQgetvalue(builds, i, 2),
					PQgetvalue(builds, i, 3));
		}
		fputc('\n', out);
		rc = render_text(out, set, &ro);
		break;
	case CLI_FMT_FOLDED:
		if (nb > 1) {
			fprintf(stderr,
				"traceprof: note: the profile of %s spans %d builds:", service, nb);
			for (int i = 0; i < nb; i++)
				fprintf(stderr, "%s %s (%s .. %s)", i ? "," : "",
					PQgetvalue(builds, i, 0), PQgetvalue(builds, i, 1),
					PQgetvalue(builds, i, 2));
			fputc('\n', stderr);
		}
		rc = render_folded(out, set, false);
		break;
	case CLI_FMT_JSON:
		fputs("{\"service\": ", out);
		cli_json_str(out, service);
		fprintf(out, ", \"from\": \"%s\", \"until\": \"%s\",\n \"builds\": [", a, b);
		for (int i = 0; i < nb; i++) {
			fprintf(out, "%s{\"build_id\": ", i ? ", " : "");
			cli_json_str(out, PQgetvalue(builds, i, 0));
			fprintf(out, ", \"first\": \"%s\", \"last\": \"%s\", \"samples\": %s}",
				PQgetvalue(builds, i, 1), PQgetvalue(builds, i, 2),
				PQgetvalue(builds, i, 3));
		}
		fputs("],\n \"services\": ", out);
		rc = render_json_services(out, set, " ");
		fputs("}\n", out);
		break;
	case CLI_FMT_SVG: {
		/* the builds go into the subtitle: a redeployment shows on the graph */
		char sub[512];
		int n = snprintf(sub, sizeof(sub), "%s to %s", a, b);

		for (int i = 0; nb > 1 && i < nb && n > 0 && (size_t)n < sizeof(sub); i++)
			n += snprintf(sub + n, sizeof(sub) - (size_t)n, "%s%.12s (%s .. %s)",
				      i ? ", " : "; builds ", PQgetvalue(builds, i, 0),
				      PQgetvalue(builds, i, 1), PQgetvalue(builds, i, 2));
		rc = render_svg(out, set, service, sub);
		reported = true;
		break;
	}
	case CLI_FMT_PPROF: /* each location's mapping carries its build id */
		rc = render_pprof(out, set);
		reported = true;
		break;
	default:
		rc = -EINVAL;
	}
	rc = render_close(out, c.output, rc, reported);
out:
	PQclear(builds);
	stackset_free(set);
	cli_disconnect(&db);
	return rc;
}
