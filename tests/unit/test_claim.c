/*
 * test_claim: traceprof.claim_request() run concurrently from many
 * connections never collects more than max_requests, never claims a trace
 * twice, completes the trigger with its last claim, and refuses expired or
 * inactive triggers.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "testdb.h"
#include "traceprof/log.h"

#define THREADS	 8
#define ATTEMPTS 60

struct worker {
	const char *conninfo; /* database to connect to */
	const char *trigger;  /* trigger id to claim for */
	int index;	      /* worker number: picks its trace ids */
	int claimed;	      /* successful claims */
	int errors;	      /* failed statements */
};

static void *claim_loop(void *arg)
{
	struct worker *w = arg;
	PGconn *conn = testdb_connect(w->conninfo);

	for (int i = 0; i < ATTEMPTS; i++) {
		char trace[33];
		const char *params[2];
		PGresult *res;

		/* Every third attempt uses a trace shared by all workers. */
		snprintf(trace, sizeof(trace), "%032x",
			 i % 3 == 0 ? 1000 + i : w->index * 1000 + i + 1);
		params[0] = w->trigger;
		params[1] = trace;
		res = PQexecParams(conn, "SELECT traceprof.claim_request($1, $2::uuid)", 2, NULL,
				   params, NULL, NULL, 0);
		if (PQresultStatus(res) != PGRES_TUPLES_OK)
			w->errors++;
		else if (!PQgetisnull(res, 0, 0))
			w->claimed++;
		PQclear(res);
	}
	PQfinish(conn);
	return NULL;
}

static void race(const char *ci, PGconn *conn, const char *trigger, int max)
{
	pthread_t threads[THREADS];
	struct worker workers[THREADS];
	char sql[512];
	int claimed = 0;
	int errors = 0;

	snprintf(sql, sizeof(sql),
		 "INSERT INTO traceprof.trace_profile_triggers (trigger_id, name, phase, "
		 "max_requests, deadline) VALUES ('%s', '%s', 'Active', %d, now() + interval '5 "
		 "minutes')",
		 trigger, trigger, max);
	PQclear(testdb_exec(conn, sql));
	for (int i = 0; i < THREADS; i++) {
		workers[i] = (struct worker){.conninfo = ci, .trigger = trigger, .index = i + 1};
		pthread_create(&threads[i], NULL, claim_loop, &workers[i]);
	}
	for (int i = 0; i < THREADS; i++) {
		pthread_join(threads[i], NULL);
		claimed += workers[i].claimed;
		errors += workers[i].errors;
	}
	CHECK(errors == 0, "%s: %d statements failed", trigger, errors);
	CHECK(claimed == max, "%s: %d claims succeeded, max_requests %d", trigger, claimed, max);
	snprintf(sql, sizeof(sql),
		 "SELECT collected_requests FROM traceprof.trace_profile_triggers WHERE trigger_id "
		 "= '%s'",
		 trigger);
	CHECK(testdb_scalar(conn, sql) == max, "%s: collected_requests == max", trigger);
	snprintf(
	    sql, sizeof(sql),
	    "SELECT count(DISTINCT t) FROM traceprof.trace_profile_triggers, unnest(trace_ids) "
	    "t WHERE trigger_id = '%s'",
	    trigger);
	CHECK(testdb_scalar(conn, sql) == max, "%s: claimed traces are distinct", trigger);
	snprintf(sql, sizeof(sql),
		 "SELECT count(*) FROM traceprof.trace_profile_triggers WHERE trigger_id = '%s' "
		 "AND phase = 'Completed' AND completed_at IS NOT NULL",
		 trigger);
	CHECK(testdb_scalar(conn, sql) == 1, "%s: completed with its last claim", trigger);
}

int main(void)
{
	char ci[4200];
	PGconn *conn;

	log_set_level(TP_LOG_QUIET);
	if (testdb_create("tp_claim", ci, sizeof(ci)))
		return 2;
	conn = testdb_connect(ci);

	race(ci, conn, "t-one", 1);
	race(ci, conn, "t-ten", 10);
	race(ci, conn, "t-many", 100);

	/* Expired, inactive and duplicate claims are refused. */
	PQclear(testdb_exec(
	    conn, "INSERT INTO traceprof.trace_profile_triggers (trigger_id, name, phase, "
		  "deadline) VALUES ('t-old', 'old', 'Active', now() - interval '1 s'), "
		  "('t-pending', 'p', 'Pending', now() + interval '1 minute'), "
		  "('t-dup', 'd', 'Active', now() + interval '1 minute')"));
	CHECK(testdb_scalar(conn, "SELECT count(*) FROM traceprof.claim_request('t-old', "
				  "'0000000000000000000000000000000a') c WHERE c IS NOT NULL") == 0,
	      "expired trigger claims nothing");
	CHECK(testdb_scalar(conn, "SELECT traceprof.expire_triggers()") == 1, "one expired");
	CHECK(testdb_scalar(conn, "SELECT count(*) FROM traceprof.trace_profile_triggers WHERE "
				  "trigger_id = 't-old' AND phase = 'Expired'") == 1,
	      "phase Expired");
	CHECK(testdb_scalar(conn, "SELECT count(*) FROM traceprof.claim_request('t-pending', "
				  "'0000000000000000000000000000000a') c WHERE c IS NOT NULL") == 0,
	      "pending trigger claims nothing");
	CHECK(testdb_scalar(conn, "SELECT traceprof.claim_request('t-dup', "
				  "'0000000000000000000000000000000a')") == 1,
	      "first claim");
	CHECK(testdb_scalar(conn, "SELECT count(*) FROM traceprof.claim_request('t-dup', "
				  "'0000000000000000000000000000000a') c WHERE c IS NOT NULL") == 0,
	      "same trace twice is claimed once");
	CHECK(testdb_scalar(conn, "SELECT count(*) FROM traceprof.claim_request('no-such', "
				  "'0000000000000000000000000000000a') c WHERE c IS NOT NULL") == 0,
	      "unknown trigger claims nothing");
	PQfinish(conn);
	return check_done();
}
