/*
 * cmd_trace.c - `traceprof trace-profile TRACE_ID`: the profile of one
 * request across its services (stackset_read_trace), as a text report,
 * JSON, an SVG flame graph or pprof; folded stacks are the SQL API's
 * trace_folded_text as it is. Formats are one switch: a new one is one case.
 */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "gpu_view.h"
#include "offcpu_view.h"
#include "render.h"
#include "stackset_read.h"

#define CMD "trace-profile"

/* What the command line of `traceprof trace-profile` sets. */
struct trace_args {
	struct cli_common c;
	struct render_opts ro;
	const char *service;
	bool help;
};

static const struct cli_formats formats = {1u << CLI_FMT_TEXT | 1u << CLI_FMT_FOLDED |
					       1u << CLI_FMT_JSON | 1u << CLI_FMT_SVG |
					       1u << CLI_FMT_PPROF,
					   CMD};

#define T struct trace_args
static const struct tp_option options[] = {
    {.name = "service",
     .type = TP_OPT_CUSTOM,
     .offset = offsetof(T, service),
     .arg = "S",
     .help = "only this service",
     .parse = cli_opt_nonempty},
    CLI_OPT_FORMAT(T, &formats,
		   "text (default), folded (flamegraph.pl input, N in\nmicroseconds of CPU), json "
		   "(docs/cli.md), svg (flame\ngraph), pprof (gzip profile.proto; needs -o or a "
		   "pipe)"),
    RENDER_OPT_MIN_PCT(T, CMD,
		       "text: summarize subtrees under P % of the service\n(default " TP_OPTS_STR(
			   RENDER_DEFAULT_MIN_PCT) "; 0 shows everything)"),
    CLI_OPT_DB(T),
    CLI_OPT_COMMON(T),
};
#undef T

void help_trace_profile(FILE *f)
{
	fputs("usage: traceprof trace-profile TRACE_ID [--service S]\n"
	      "                               [--format text|folded|json|svg|pprof]\n"
	      "                               [--min-pct P] [-o FILE] [--db CONNINFO]\n"
	      "\n"
	      "The CPU profile of one request (W3C trace id, 32 hex digits) in every service\n"
	      "it passed through: per service the hotspots (functions by self time) and the\n"
	      "call tree with CPU time and percentages. Raised samples of a request claimed\n"
	      "by a trigger are used where a source has them, as the SQL API does.\n"
	      "Where the trace has off-CPU time (docs/offcpu.md), the text view starts with\n"
	      "its breakdown per span (CPU + blocked + runqueue + other, a bar, the top\n"
	      "blocking functions), the SVG draws the off-CPU stacks in blue next to the CPU\n"
	      "ones (width: time), and pprof has a third sample type, off_cpu nanoseconds.\n"
	      "Where it has GPU time (docs/gpu.md), the text view lists it per kernel\n"
	      "(launches, GPU ms, share; JSON: \"gpu\"), the SVG draws each launching stack\n"
	      "with its [gpu] kernel frame in green (width: GPU time), folded output ends\n"
	      "with those stacks (N: microseconds on the GPU) and pprof has a sample type\n"
	      "gpu nanoseconds.\n"
	      "\n"
	      "options:\n",
	      f);
	tp_opts_help(options, TP_OPTS_COUNT(options), f, CLI_HELP_WIDTH, 0);
	fputs("\n"
	      "example:\n"
	      "  traceprof trace-profile 4bf92f3577b34da6a3ce929d0e0e4736 --service payment-svc\n",
	      f);
}

static bool valid_trace_id(const char *s)
{
	size_t n = 0;
	bool nonzero = false;

	for (; s[n]; n++) {
		if (!isxdigit((unsigned char)s[n]))
			return false;
		if (s[n] != '0')
			nonzero = true;
	}
	return n == 32 && nonzero;
}

/* Says where the trace's samples were looked for; exit 1. */
static int no_samples(struct cli_db *db, const char *trace_id, const char *service)
{
	const char *params[1] = {trace_id};
	int rc;
	PGresult *res = cli_query(db,
				  "SELECT w.lo, w.hi, (SELECT count(*) FROM traceprof.requests r "
				  "WHERE r.trace_id = traceprof.parse_trace_id($1)) "
				  "FROM traceprof._trace_window(traceprof.parse_trace_id($1)) w",
				  1, params, &rc);
	char svc[300] = "";

	if (!res)
		return rc;
	if (service)
		snprintf(svc, sizeof(svc), " of service '%s'", service);
	if (strcmp(PQgetvalue(res, 0, 2), "0") == 0)
		cli_error("no samples%s for trace %s in %s (looked in samples and trigger_samples, "
			  "every partition: no span of the trace is stored either)",
			  svc, trace_id, db->where);
	else
		cli_error("no samples%s for trace %s in %s (looked in samples and trigger_samples "
			  "between %s and %s: its %s span(s) ± trace_window_margin)",
			  svc, trace_id, db->where, PQgetvalue(res, 0, 0), PQgetvalue(res, 0, 1),
			  PQgetvalue(res, 0, 2));
	PQclear(res);
	return CLI_NO_DATA;
}

/* --format folded: trace_folded_text, then the lines of trace_gpu_folded
 * (N in microseconds of GPU time, each ending in its [gpu] kernel frame),
 * one query, written as they come (SQL folds; the command does not). Exit
 * 1 when the trace has neither samples nor GPU time. */
static int trace_folded(struct cli_db *db, const char *trace_id, const char *service,
			const char *path)
{
	const char *params[2] = {trace_id, service};
	FILE *out;
	int rc;
	PGresult *res = cli_query(db,
				  "SELECT traceprof.trace_folded_text($1, $2), (SELECT "
				  "string_agg(g.stack || ' ' || g.us, E'\\n' ORDER BY g.service "
				  "COLLATE \"C\", g.stack COLLATE \"C\") FROM "
				  "traceprof.trace_gpu_folded($1, $2) g WHERE g.us > 0)",
				  2, params, &rc);

	if (!res)
		return rc;
	if (PQntuples(res) != 1 || (PQgetisnull(res, 0, 0) && PQgetisnull(res, 0, 1)))
		rc = no_samples(db, trace_id, service);
	else if (!(out = cli_open_output(path, CLI_FMT_FOLDED)))
		rc = CLI_IO;
	else {
		rc = PQgetisnull(res, 0, 0) ? 0 : render_folded_text(out, PQgetvalue(res, 0, 0));
		if (!rc && !PQgetisnull(res, 0, 1))
			rc = render_folded_text(out, PQgetvalue(res, 0, 1));
		rc = render_close(out, path, rc, false);
	}
	PQclear(res);
	return rc;
}

/* The command line into a and the trace id: -1 to go on, or the exit code. */
static int parse_trace(int argc, char **argv, struct trace_args *a, const char **trace_id)
{
	int next, rc;

	rc = cli_parse_args(CMD, options, TP_OPTS_COUNT(options), a, argc, argv, help_trace_profile,
			    &next);
	if (rc >= 0)
		return rc;
	if (argc - next != 1)
		return cli_usage_error(
		    CMD, argc == next ? "needs a TRACE_ID" : "takes one TRACE_ID, not %d arguments",
		    argc - next);
	*trace_id = argv[next];
	if (!valid_trace_id(*trace_id))
		return cli_usage_error(CMD,
				       "'%.80s' is not a trace id: expected 32 hexadecimal digits, "
				       "not all zero",
				       *trace_id);
	return -1;
}

int cmd_trace_profile(int argc, char **argv)
{
	struct trace_args args = {.c = {.format = CLI_FMT_TEXT},
				  .ro = {.min_pct = RENDER_DEFAULT_MIN_PCT}};
	const char *service, *trace_id = NULL;
	struct tp_stackset *set = NULL, *merged = NULL;
	struct cli_db db = {0};
	char err[1024], lower[33];
	bool reported = false; /* by the SVG or pprof writer */
	int rc;
	FILE *out;

	rc = parse_trace(argc, argv, &args, &trace_id);
	if (rc >= 0)
		return rc;
	service = args.service;
	for (int i = 0; i < 33; i++)
		lower[i] = (char)tolower((unsigned char)trace_id[i]);
	trace_id = lower;

	rc = cli_connect(args.c.conninfo, &db);
	if (rc)
		return rc;
	if (args.c.format == CLI_FMT_FOLDED) {
		rc = trace_folded(&db, trace_id, service, args.c.output);
		goto out;
	}
	rc = stackset_read_trace(db.conn, trace_id, service, &set, err, sizeof(err));
	if (rc) {
		cli_error("%s", err);
		rc = rc == -EINVAL ? CLI_USAGE : CLI_DB;
		goto out;
	}
	if (set->nrows == 0) { /* GPU time without CPU samples: a short request */
		int has = gpu_has_time(&db, trace_id, service, &rc);
		if (has <= 0) {
			if (has == 0)
				rc = no_samples(&db, trace_id, service);
			goto out;
		}
	}
	/* SVG and pprof draw the off-CPU and GPU stacks with the CPU ones */
	if (args.c.format == CLI_FMT_SVG || args.c.format == CLI_FMT_PPROF) {
		rc = offcpu_merge_trace(&db, trace_id, service, set, &merged);
		if (rc)
			goto out;
	}
	out = cli_open_output(args.c.output, args.c.format);
	if (!out) {
		rc = CLI_IO;
		goto out;
	}
	switch (args.c.format) {
	case CLI_FMT_TEXT:
		fprintf(out, "trace %s%s%s\n\n", trace_id, service ? ", service " : "",
			service ? service : "");
		rc = offcpu_breakdown_text(out, &db, trace_id, service);
		if (!rc)
			rc = gpu_kernels_text(out, &db, trace_id, service);
		if (rc) { /* said what failed */
			cli_close_output(out, args.c.output);
			goto out;
		}
		if (set->nrows == 0)
			fputs("no CPU samples: the request's GPU time only (above)\n", out);
		rc = render_text(out, set, &args.ro);
		break;
	case CLI_FMT_JSON:
		fprintf(out, "{\"trace_id\": \"%s\", \"service\": ", trace_id);
		if (service)
			cli_json_str(out, service);
		else
			fputs("null", out);
		fputs(",\n \"services\": ", out);
		rc = render_json_services(out, set, " ");
		if (!rc && (rc = gpu_kernels_json(out, &db, trace_id, service)) != 0) {
			cli_close_output(out, args.c.output); /* said what failed */
			goto out;
		}
		fputs("}\n", out);
		break;
	case CLI_FMT_SVG: {
		char title[64];

		snprintf(title, sizeof(title), "trace %s", trace_id);
		rc = render_svg(out, merged ? merged : set, title,
				service ? service : "all services");
		reported = true;
		break;
	}
	case CLI_FMT_PPROF:
		rc = render_pprof(out, merged ? merged : set);
		reported = true;
		break;
	default:
		rc = -EINVAL;
	}
	rc = render_close(out, args.c.output, rc, reported);
out:
	offcpu_set_free(merged);
	stackset_free(set);
	cli_disconnect(&db);
	return rc;
}
