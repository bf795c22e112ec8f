/*
 * cmd_profile.c - `traceprof profile --service S`: the continuous profile of
 * a service over a time range (stackset_read_service), with the builds it
 * spans (traceprof.service_builds) when a redeployment falls in the range.
 * Folded stacks are the SQL API's service_folded_text as it is.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "render.h"
#include "stackset_read.h"

#define CMD "profile"

/* What the command line of `traceprof profile` sets. */
struct profile_args {
	struct cli_common c;
	struct cli_range_flags rf;
	struct render_opts ro;
	const char *service;
	bool help;
};

static const struct cli_formats formats = {1u << CLI_FMT_TEXT | 1u << CLI_FMT_FOLDED |
					       1u << CLI_FMT_JSON | 1u << CLI_FMT_SVG |
					       1u << CLI_FMT_PPROF,
					   CMD};

#define T struct profile_args
static const struct tp_option options[] = {
    CLI_OPT_SERVICE(T, "the service (required)"),
    CLI_OPT_RANGE(T),
    CLI_OPT_FORMAT(T, &formats,
		   "text (default), folded, json, svg (flame graph) or pprof\n(gzip profile.proto; "
		   "needs -o or a pipe)"),
    RENDER_OPT_MIN_PCT(
	T, CMD,
	"text: summarize subtrees under P % (default " TP_OPTS_STR(RENDER_DEFAULT_MIN_PCT) ")"),
    CLI_OPT_DB(T),
    CLI_OPT_COMMON(T),
};
#undef T

void help_profile(FILE *f)
{
	fputs("usage: traceprof profile --service S [--since 1h | --from T --until T]\n"
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
	      "options:\n",
	      f);
	tp_opts_help(options, TP_OPTS_COUNT(options), f, CLI_HELP_WIDTH, 0);
	fputs("\n"
	      "example:\n"
	      "  traceprof profile --service payment-svc --since 30m --format folded | "
	      "flamegraph.pl\n",
	      f);
}

/* The command line into a and range: -1 to go on, or the exit code. */
static int parse_profile(int argc, char **argv, struct profile_args *a, struct cli_range *range)
{
	int rc = cli_parse_service_args(CMD, options, TP_OPTS_COUNT(options), a, argc, argv,
					help_profile, &a->service);

	if (rc >= 0)
		return rc;
	if (cli_range_parse(a->rf.since, a->rf.from, a->rf.until, range))
		return CLI_USAGE;
	return -1;
}

/* Text: the header, and the builds when the range spans more than one. */
static void text_builds(FILE *out, const char *service, const char *a, const char *b,
			PGresult *builds)
{
	int nb = PQntuples(builds);

	fprintf(out, "service %s, %s to %s\n", service, a, b);
	if (nb > 1) {
		fprintf(out, "the range spans %d builds (first to last sample, samples):\n", nb);
		for (int i = 0; i < nb; i++)
			fprintf(out, "  %s  %s .. %s  %s\n", PQgetvalue(builds, i, 0),
				PQgetvalue(builds, i, 1), PQgetvalue(builds, i, 2),
				PQgetvalue(builds, i, 3));
	}
	fputc('\n', out);
}

/* Folded output has no place for the builds: a note on standard error. */
static void folded_builds_note(const char *service, PGresult *builds)
{
	int nb = PQntuples(builds);

	if (nb > 1) {
		fprintf(stderr, "traceprof: note: the profile of %s spans %d builds:", service, nb);
		for (int i = 0; i < nb; i++)
			fprintf(stderr, "%s %s (%s .. %s)", i ? "," : "", PQgetvalue(builds, i, 0),
				PQgetvalue(builds, i, 1), PQgetvalue(builds, i, 2));
		fputc('\n', stderr);
	}
}

/* The builds the range spans (service_builds), or NULL with *rc set. */
static PGresult *read_builds(struct cli_db *db, const char *service, const struct cli_range *range,
			     int *rc)
{
	char fa[64], fb[64];
	const char *params[3] = {service, cli_time_sql(range->from_us, fa, sizeof(fa)),
				 cli_time_sql(range->until_us, fb, sizeof(fb))};

	return cli_query(db,
			 "SELECT CASE WHEN build_id = '' THEN '(unknown build)' ELSE "
			 "build_id END, to_char(first_bucket, 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'), "
			 "to_char(last_bucket, 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'), samples "
			 "FROM traceprof.service_builds($1, $2::timestamptz, $3::timestamptz)",
			 3, params, rc);
}

/* Says there is nothing in [a, b) (or no such service); exit 1. */
static int no_samples(struct cli_db *db, const char *service, const char *a, const char *b)
{
	if (!cli_unknown_service(db, service))
		cli_error("no samples of service '%s' in %s between %s and %s", service, db->where,
			  a, b);
	return CLI_NO_DATA;
}

/* --format folded: service_folded_text, one query, written as it comes (SQL
 * folds; the command does not), the builds note on standard error first.
 * Exit 1 when the range has no samples. */
static int profile_folded(struct cli_db *db, const char *service, const struct cli_range *range,
			  const char *path)
{
	char fa[64], fb[64], a[64], b[64];
	const char *params[3] = {service, cli_time_sql(range->from_us, fa, sizeof(fa)),
				 cli_time_sql(range->until_us, fb, sizeof(fb))};
	PGresult *builds = NULL, *res;
	FILE *out;
	int rc;

	res = cli_query(
	    db, "SELECT traceprof.service_folded_text($1, $2::timestamptz, $3::timestamptz)", 3,
	    params, &rc);
	if (!res)
		return rc;
	if (PQntuples(res) != 1 || PQgetisnull(res, 0, 0))
		rc = no_samples(db, service, cli_time_rfc3339(range->from_us, a, sizeof(a)),
				cli_time_rfc3339(range->until_us, b, sizeof(b)));
	else if ((builds = read_builds(db, service, range, &rc))) {
		folded_builds_note(service, builds);
		if (!(out = cli_open_output(path, CLI_FMT_FOLDED)))
			rc = CLI_IO;
		else
			rc = render_close(out, path, render_folded_text(out, PQgetvalue(res, 0, 0)),
					  false);
	}
	PQclear(builds);
	PQclear(res);
	return rc;
}

int cmd_profile(int argc, char **argv)
{
	struct profile_args args = {.c = {.format = CLI_FMT_TEXT},
				    .ro = {.min_pct = RENDER_DEFAULT_MIN_PCT}};
	struct cli_common c;
	struct render_opts ro;
	const char *service;
	struct cli_range range;
	struct cli_db db = {0};
	struct tp_stackset *set = NULL;
	PGresult *builds = NULL;
	char err[1024], a[64], b[64];
	bool reported = false; /* by the SVG or pprof writer */
	int rc, nb;
	FILE *out;

	rc = parse_profile(argc, argv, &args, &range);
	if (rc >= 0)
		return rc;
	c = args.c;
	ro = args.ro;
	service = args.service;
	rc = cli_connect(c.conninfo, &db);
	if (rc)
		return rc;
	if (c.format == CLI_FMT_FOLDED) {
		rc = profile_folded(&db, service, &range, c.output);
		goto out;
	}
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
		rc = no_samples(&db, service, a, b);
		goto out;
	}
	builds = read_builds(&db, service, &range, &rc);
	if (!builds)
		goto out;
	nb = PQntuples(builds);
	out = cli_open_output(c.output, c.format);
	if (!out) {
		rc = CLI_IO;
		goto out;
	}
	switch (c.format) {
	case CLI_FMT_TEXT:
		text_builds(out, service, a, b, builds);
		rc = render_text(out, set, &ro);
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
