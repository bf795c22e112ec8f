/*
 * bench_queries - latency of the per-request SQL functions on a filled store.
 *
 * Picks random trace ids - any trace with samples, or only traces with a
 * span slower than 1 s (the ones users open) - runs each query once per
 * trace through a prepared statement, and reports client-side latency
 * percentiles (over a Unix socket, so the figure includes a round trip).
 * A warm-up pass runs first; results are printed as Markdown table rows.
 * usage: bench_queries CONNINFO [N] [any|slow] [SEED] [QUERIES]
 * With SEED (an integer) the traces are picked repeatably: two databases
 * holding the same data are timed on the same traces. QUERIES, a
 * comma-separated list of names, times only those (default: all).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <libpq-fe.h>

#include "bench_stats.h"

struct query {
	const char *name; /* label in the report */
	const char *sql;  /* takes $1 = trace id text */
};

static const struct query queries[] = {
    {"trace_profile", "SELECT * FROM traceprof.trace_profile($1)"},
    {"trace_folded", "SELECT * FROM traceprof.trace_folded($1)"},
    {"trace_summary", "SELECT traceprof.trace_summary($1)"},
    {"trace_flamegraph", "SELECT * FROM traceprof.trace_flamegraph($1)"},
    {"trace_folded_text", "SELECT traceprof.trace_folded_text($1)"},
    {"trace_services", "SELECT * FROM traceprof.trace_services($1)"},
    {"trace_stacks", "SELECT * FROM traceprof.trace_stacks($1)"},
    {"trace_time_breakdown", "SELECT * FROM traceprof.trace_time_breakdown($1)"},
    {"trace_offcpu_folded", "SELECT * FROM traceprof.trace_offcpu_folded($1)"},
    {"trace_gpu_kernels", "SELECT * FROM traceprof.trace_gpu_kernels($1)"},
    {"trace_gpu_stacks", "SELECT * FROM traceprof.trace_gpu_stacks($1)"},
    {"trace_gpu_folded", "SELECT * FROM traceprof.trace_gpu_folded($1)"},
};

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Whether name is one of the comma-separated names in list. */
static int listed(const char *list, const char *name)
{
	size_t len = strlen(name);

	for (const char *p = list; p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
		if (strncmp(p, name, len) == 0 && (p[len] == ',' || p[len] == '\0'))
			return 1;
	return 0;
}

static double pct(const double *sorted, int n, double p)
{
	int i = (int)(p * (n - 1) + 0.5);

	return sorted[i < n ? i : n - 1];
}

int main(int argc, char **argv)
{
	const char *conninfo = argc > 1 ? argv[1] : "";
	int n = argc > 2 ? atoi(argv[2]) : 2000;
	const char *pick = argc > 3 ? argv[3] : "any";
	const char *seed = argc > 4 && *argv[4] ? argv[4] : NULL;
	const char *only = argc > 5 ? argv[5] : NULL;
	char repeat[64] = "";
	PGconn *conn = PQconnectdb(conninfo);
	PGresult *res;
	char **traces;
	double *lat;
	char sql[256];
	long long rows_total = 0;

	if (PQstatus(conn) != CONNECTION_OK) {
		fprintf(stderr, "bench_queries: cannot connect: %s", PQerrorMessage(conn));
		return 1;
	}
	if (n < 10)
		n = 10;
	if (seed) {
		long v = atol(seed);
		char set[64];

		snprintf(repeat, sizeof(repeat), " REPEATABLE (%ld)", v);
		snprintf(set, sizeof(set), "SELECT setseed(%f)", (double)(v % 1000) / 1000.0);
		PQclear(PQexec(conn, set));
	}
	/* Random traces that have samples (a profile to compute). */
	if (strcmp(pick, "slow") == 0)
		snprintf(
		    sql, sizeof(sql),
		    "SELECT DISTINCT traceprof.trace_id_text(trace_id) FROM traceprof.requests "
		    "TABLESAMPLE SYSTEM (5)%s WHERE duration_us > 1000000 ORDER BY 1 LIMIT %d",
		    repeat, n);
	else
		snprintf(sql, sizeof(sql),
			 "SELECT traceprof.trace_id_text(trace_id) FROM traceprof.samples "
			 "TABLESAMPLE SYSTEM (1)%s WHERE trace_id IS NOT NULL ORDER BY random() "
			 "LIMIT %d",
			 repeat, n);
	res = PQexec(conn, sql);
	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) < 10) {
		fprintf(stderr, "bench_queries: need a filled store: %s",
			PQresultErrorMessage(res));
		return 1;
	}
	n = PQntuples(res);
	traces = calloc(n, sizeof(*traces));
	lat = calloc(n, sizeof(*lat));
	for (int i = 0; i < n; i++)
		traces[i] = strdup(PQgetvalue(res, i, 0));
	PQclear(res);

	printf("| query | traces (%s) | p50 ms | p90 ms | p99 ms | max ms | rows/trace |\n", pick);
	printf("|---|---|---|---|---|---|---|\n");
	for (size_t q = 0; q < sizeof(queries) / sizeof(queries[0]); q++) {
		char name[16];

		if (only && !listed(only, queries[q].name))
			continue;
		snprintf(name, sizeof(name), "q%zu", q);
		res = PQprepare(conn, name, queries[q].sql, 1, NULL);
		if (PQresultStatus(res) != PGRES_COMMAND_OK) {
			fprintf(stderr, "bench_queries: %s: %s", queries[q].name,
				PQresultErrorMessage(res));
			return 1;
		}
		PQclear(res);
		rows_total = 0;
		for (int pass = 0; pass < 2; pass++) { /* pass 0 warms the caches */
			for (int i = 0; i < n; i++) {
				const char *param = traces[i];
				double t0 = now_ms();

				res = PQexecPrepared(conn, name, 1, &param, NULL, NULL, 0);
				lat[i] = now_ms() - t0;
				if (PQresultStatus(res) != PGRES_TUPLES_OK) {
					fprintf(stderr, "bench_queries: %s(%s): %s",
						queries[q].name, param, PQresultErrorMessage(res));
					return 1;
				}
				if (pass)
					rows_total += PQntuples(res);
				PQclear(res);
			}
		}
		qsort(lat, n, sizeof(*lat), bench_cmp_double);
		printf("| %s | %d | %.2f | %.2f | %.2f | %.2f | %.1f |\n", queries[q].name, n,
		       pct(lat, n, 0.5), pct(lat, n, 0.9), pct(lat, n, 0.99), lat[n - 1],
		       (double)rows_total / n);
	}
	for (int i = 0; i < n; i++)
		free(traces[i]);
	free(traces);
	free(lat);
	PQfinish(conn);
	return 0;
}
