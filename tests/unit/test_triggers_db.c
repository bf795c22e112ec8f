/*
 * test_triggers_db: the controller's passes over the trigger table under
 * fencing, against a real PostgreSQL. Terms from controller_take_term only
 * grow; a pass made with a term that is no longer the current one writes
 * nothing (-ESTALE, the newer term reported), so a replica woken after
 * another took over cannot end a live trigger; with a removal check, a
 * trigger whose object still exists is kept, and removed once it is gone.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "manifest.h"
#include "testdb.h"
#include "triggers_db.h"

static const char one[] = "apiVersion: traceprof.dev/v1alpha1\n"
			  "kind: TraceProfileTrigger\n"
			  "metadata: {name: one, namespace: default}\n"
			  "spec: {service: pay, maxRequests: 3}\n";
static const char two[] = "apiVersion: traceprof.dev/v1alpha1\n"
			  "kind: TraceProfileTrigger\n"
			  "metadata: {name: two, namespace: default}\n"
			  "spec: {service: pay, maxRequests: 4}\n";

static int gone_calls;
static bool gone_answer;

static bool gone(void *arg, const char *ns, const char *name, const char *id)
{
	(void)arg;
	(void)id;
	gone_calls++;
	CHECK(strcmp(ns, "default") == 0 && strcmp(name, "two") == 0,
	      "asked about the removed trigger only (%s/%s)", ns, name);
	return gone_answer;
}

static void parse(struct manifest_list *m, bool with_two)
{
	struct manifest_opts o = {.local = true};

	manifest_parse_buffer(m, "one.yaml", one, strlen(one), &o);
	if (with_two)
		manifest_parse_buffer(m, "two.yaml", two, strlen(two), &o);
	CHECK(m->n == (with_two ? 2u : 1u), "manifests parsed (%zu)", m->n);
}

static const char current_two[] = "SELECT count(*) FROM traceprof.trace_profile_triggers "
				  "WHERE name = 'two' AND phase = 'Active'";

int main(void)
{
	char conninfo[512];
	struct manifest_list both = {0}, only_one = {0};
	uint64_t a = 0, b = 0;
	PGconn *conn;
	int rc;

	if (testdb_create("tp_test_triggers_db", conninfo, sizeof(conninfo)) != 0)
		return 1;
	conn = testdb_connect(conninfo);
	parse(&both, true);
	parse(&only_one, false);

	CHECK(triggers_db_sync(conn, &both, true, NULL) == 0, "unfenced pass");
	CHECK(testdb_scalar(conn, current_two) == 1, "two is Active");

	CHECK(triggers_db_take_term(conn, "replica-a", &a) == 0, "replica-a takes a term");
	CHECK(triggers_db_take_term(conn, "replica-b", &b) == 0 && b > a,
	      "replica-b takes a larger one (%llu > %llu)", (unsigned long long)b,
	      (unsigned long long)a);

	/* replica-a woke with a stale cache that no longer holds "two" */
	{
		struct triggers_db_fence f = {.term = a};

		rc = triggers_db_sync(conn, &only_one, true, &f);
		CHECK(rc == -ESTALE && f.newer == b,
		      "the older term writes nothing (%d, newer %llu)", rc,
		      (unsigned long long)f.newer);
		CHECK(testdb_scalar(conn, current_two) == 1, "two is still Active");
	}
	/* replica-b's cache lags: the object still exists */
	{
		struct triggers_db_fence f = {.term = b, .gone = gone};

		gone_answer = false;
		CHECK(triggers_db_sync(conn, &only_one, true, &f) == 0, "the current term's pass");
		CHECK(gone_calls == 1 && testdb_scalar(conn, current_two) == 1,
		      "kept while its object exists (%d checks)", gone_calls);
		gone_answer = true;
		CHECK(triggers_db_sync(conn, &only_one, true, &f) == 0 && gone_calls == 2,
		      "the next pass, once it is gone");
		CHECK(testdb_scalar(conn, current_two) == 0 &&
			  testdb_scalar(
			      conn, "SELECT count(*) FROM traceprof.trace_profile_triggers "
				    "WHERE name = 'two' AND reason LIKE '%manifest removed'") == 1,
		      "then removed");
	}
	CHECK(testdb_scalar(conn, "SELECT count(*) FROM traceprof.controller_leader "
				  "WHERE identity = 'replica-b'") == 1,
	      "the current term's holder is recorded");
	manifest_list_free(&both);
	manifest_list_free(&only_one);
	PQfinish(conn);
	return check_done();
}
