/*
 * gpu_view.c - the GPU parts of `traceprof trace-profile` (gpu_view.h):
 * the request's GPU time per kernel, in text and JSON.
 *
 * Everything comes from the SQL API (sql/api/gpu.sql): the kernel of a
 * stack, the launches and the GPU time are its rules; the command only
 * prints. A request has a handful of kernels: one query each view.
 */
#include <stdlib.h>
#include <string.h>

#include "gpu_view.h"

static const char kernels_sql[] =
    "SELECT kernel, launches, gpu_ms, gpu_pct FROM traceprof.trace_gpu_kernels($1, $2)";

/* The trace's kernels and their sums; NULL (*rc set) when the query failed. */
static PGresult *query_kernels(struct cli_db *db, const char *trace_id, const char *service,
			       int *rc, double *total, long long *launches)
{
	const char *params[2] = {trace_id, service};
	PGresult *res = cli_query(db, kernels_sql, 2, params, rc);

	*total = 0;
	*launches = 0;
	for (int i = 0; res && i < PQntuples(res); i++) {
		*launches += atoll(PQgetvalue(res, i, 1));
		*total += strtod(PQgetvalue(res, i, 2), NULL);
	}
	return res;
}

int gpu_kernels_text(FILE *out, struct cli_db *db, const char *trace_id, const char *service)
{
	double total;
	long long launches;
	int rc, n;
	PGresult *res = query_kernels(db, trace_id, service, &rc, &total, &launches);

	if (!res)
		return rc;
	n = PQntuples(res);
	if (n > 0) {
		fprintf(out,
			"GPU time: %.1f ms in %lld kernel launches (time on the GPU: it overlaps "
			"the spans,\nit is not part of them)\n",
			total, launches);
		fprintf(out, "  %-40s %9s %10s %7s\n", "KERNEL", "LAUNCHES", "GPU MS", "GPU %");
		for (int i = 0; i < n; i++)
			fprintf(out, "  %-40s %9s %10.1f %6.1f%%\n", PQgetvalue(res, i, 0),
				PQgetvalue(res, i, 1), strtod(PQgetvalue(res, i, 2), NULL),
				strtod(PQgetvalue(res, i, 3), NULL));
		fputc('\n', out);
	}
	PQclear(res);
	return 0;
}

int gpu_kernels_json(FILE *out, struct cli_db *db, const char *trace_id, const char *service)
{
	double total;
	long long launches;
	int rc, n;
	PGresult *res = query_kernels(db, trace_id, service, &rc, &total, &launches);

	if (!res)
		return rc;
	n = PQntuples(res);
	if (n > 0) {
		fputs(",\n \"gpu\": {\"gpu_ms\": ", out);
		cli_json_num(out, total);
		fprintf(out, ", \"launches\": %lld, \"kernels\": [", launches);
		for (int i = 0; i < n; i++) {
			fputs(i ? ",\n   {\"kernel\": " : "\n   {\"kernel\": ", out);
			cli_json_str(out, PQgetvalue(res, i, 0));
			fprintf(out, ", \"launches\": %s, \"gpu_ms\": ", PQgetvalue(res, i, 1));
			cli_json_num(out, strtod(PQgetvalue(res, i, 2), NULL));
			fputs(", \"pct\": ", out);
			if (PQgetisnull(res, i, 3))
				fputs("null", out);
			else
				cli_json_num(out, strtod(PQgetvalue(res, i, 3), NULL));
			fputc('}', out);
		}
		fputs("]}", out);
	}
	PQclear(res);
	return 0;
}

int gpu_has_time(struct cli_db *db, const char *trace_id, const char *service, int *rc)
{
	const char *params[2] = {trace_id, service};
	PGresult *res = cli_query(
	    db, "SELECT EXISTS (SELECT FROM traceprof.trace_gpu_kernels($1, $2))", 2, params, rc);
	int has;

	if (!res)
		return -1;
	has = PQntuples(res) == 1 && strcmp(PQgetvalue(res, 0, 0), "t") == 0;
	PQclear(res);
	return has;
}
