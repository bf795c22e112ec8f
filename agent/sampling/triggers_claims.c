/*
 * triggers_claims.c - the trigger engine's claim thread: on its own libpq
 * connection, claims queued matches with traceprof.claim_request(),
 * retrying with backoff while the database is away, and hands each
 * request's verdict to on_decision.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libpq-fe.h>

#include "traceprof/hex.h"
#include "traceprof/log.h"
#include "triggers_internal.h"

#define BACKOFF_MIN_MS 100  /* first retry of a claim after a database error */
#define BACKOFF_MAX_MS 5000 /* longest wait between retries */

/* ---- the claim thread ---- */

void claim_clear(struct claim *c)
{
	for (size_t i = 0; i < c->nids; i++)
		free(c->ids[i]);
	c->nids = 0;
}

enum claim_result { CLAIM_KEPT, CLAIM_NOT_KEPT, CLAIM_RETRY };

/* Marks a trigger Completed or Expired from the database's view. Lock held. */
static void stop_trigger(struct triggers *t, const char *id, pb_state st, const char *why)
{
	struct trigger *tr = find_trigger(t, id);

	if (!tr || !live(tr))
		return;
	tr->state = st;
	snprintf(tr->reason, sizeof(tr->reason), "%s", why);
	log_info("triggers: %s %s", id, why);
	update_raise(t);
}

/* After a NULL claim: looks at the row's phase and stops the trigger when it ended. */
static void check_phase(struct triggers *t, PGconn *conn, const char *id)
{
	const char *params[1] = {id};
	PGresult *res = PQexecParams(conn,
				     "SELECT phase FROM traceprof.trace_profile_triggers "
				     "WHERE trigger_id = $1",
				     1, NULL, params, NULL, NULL, 0);

	if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1) {
		const char *phase = PQgetvalue(res, 0, 0);

		pthread_mutex_lock(&t->mu);
		if (strcmp(phase, "Completed") == 0)
			stop_trigger(t, id, ST(COMPLETED), "max_requests claimed (cluster-wide)");
		else if (strcmp(phase, "Expired") == 0)
			stop_trigger(t, id, ST(EXPIRED), "expired (database)");
		pthread_mutex_unlock(&t->mu);
	}
	PQclear(res);
}

static enum claim_result claim_one(struct triggers *t, PGconn **conn, struct claim *c,
				   const char **kept_id)
{
	char hex[33];

	tp_hex_encode(c->trace, 16, hex);
	hex[32] = 0;
	while (c->next < c->nids) {
		const char *id = c->ids[c->next];
		const char *params[2] = {id, hex};
		struct trigger *tr;
		PGresult *res;
		bool active;

		pthread_mutex_lock(&t->mu);
		tr = find_trigger(t, id);
		active = tr && tr->state == ST(ACTIVE);
		if (!active)
			t->stats.claims_skipped++;
		pthread_mutex_unlock(&t->mu);
		if (!active) {
			c->next++;
			continue;
		}
		if (!*conn) {
			*conn = PQconnectdb(t->conninfo ? t->conninfo : "");
			t->stats.db_connects++;
			if (PQstatus(*conn) != CONNECTION_OK) {
				log_debug("triggers: claim database: %s", PQerrorMessage(*conn));
				PQfinish(*conn);
				*conn = NULL;
				return CLAIM_RETRY;
			}
		}
		res = PQexecParams(*conn, "SELECT traceprof.claim_request($1, $2::uuid)", 2, NULL,
				   params, NULL, NULL, 0);
		if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1) {
			bool down = PQstatus(*conn) != CONNECTION_OK;

			pthread_mutex_lock(&t->mu);
			t->stats.claim_errors++;
			pthread_mutex_unlock(&t->mu);
			log_warn("triggers: claim for %s failed: %s", id,
				 PQresultErrorMessage(res));
			PQclear(res);
			if (down) {
				PQfinish(*conn);
				*conn = NULL;
				return CLAIM_RETRY;
			}
			c->next++; /* the statement itself failed: not this trigger */
			continue;
		}
		if (PQgetisnull(res, 0, 0)) {
			PQclear(res);
			pthread_mutex_lock(&t->mu);
			t->stats.claims_null++;
			pthread_mutex_unlock(&t->mu);
			check_phase(t, *conn, id);
			c->next++;
			continue;
		}
		{
			long count = atol(PQgetvalue(res, 0, 0));

			PQclear(res);
			pthread_mutex_lock(&t->mu);
			t->stats.claims_ok++;
			tr = find_trigger(t, id);
			if (tr) {
				tr->claimed++;
				if (tr->ntraces == tr->traces_cap) {
					size_t cap = tr->traces_cap ? tr->traces_cap * 2 : 16;
					char(*nt)[33] = realloc(tr->traces, cap * sizeof(*nt));

					if (nt) {
						tr->traces = nt;
						tr->traces_cap = cap;
					}
				}
				if (tr->ntraces < tr->traces_cap &&
				    tr->ntraces < TRIGGERS_MAX_REQUESTS)
					memcpy(tr->traces[tr->ntraces++], hex, 33);
				if (count >= (long)tr->max_requests)
					stop_trigger(t, id, ST(COMPLETED),
						     "max_requests claimed (cluster-wide)");
			}
			pthread_mutex_unlock(&t->mu);
			*kept_id = id;
			return CLAIM_KEPT;
		}
	}
	return CLAIM_NOT_KEPT;
}

/* Whether any candidate of c is still active. Lock held. */
static bool claim_alive(struct triggers *t, const struct claim *c)
{
	for (size_t i = c->next; i < c->nids; i++) {
		struct trigger *tr = find_trigger(t, c->ids[i]);

		if (tr && tr->state == ST(ACTIVE))
			return true;
	}
	return false;
}

void *claim_thread(void *arg)
{
	struct triggers *t = arg;
	PGconn *conn = NULL;

	pthread_setname_np(pthread_self(), "tp-claims");
	pthread_mutex_lock(&t->mu);
	for (;;) {
		struct claim *c;
		const char *kept = NULL;
		enum claim_result res;
		int64_t now;

		while (!t->stopping && t->qlen == 0)
			pthread_cond_wait(&t->cv, &t->mu);
		if (t->stopping)
			break;
		now = mono_ms();
		if (now < t->next_try_ms) {
			struct timespec ts;
			int64_t until = t->next_try_ms;

			clock_gettime(CLOCK_MONOTONIC, &ts);
			ts.tv_sec = until / 1000;
			ts.tv_nsec = (until % 1000) * 1000000;
			pthread_cond_timedwait(&t->cv, &t->mu, &ts);
			continue;
		}
		c = &t->q[t->qhead]; /* only this thread removes entries: c stays valid */
		pthread_mutex_unlock(&t->mu);
		res = claim_one(t, &conn, c, &kept);
		pthread_mutex_lock(&t->mu);
		if (res == CLAIM_RETRY) {
			if (claim_alive(t, c) &&
			    now_ms(t) - c->queued_ms < TRIGGERS_CLAIM_HOLD_MS) {
				t->backoff_ms = t->backoff_ms ? t->backoff_ms * 2 : BACKOFF_MIN_MS;
				if (t->backoff_ms > BACKOFF_MAX_MS)
					t->backoff_ms = BACKOFF_MAX_MS;
				t->next_try_ms = mono_ms() + t->backoff_ms;
				continue;
			}
			t->stats.claims_abandoned++;
			res = CLAIM_NOT_KEPT;
		} else {
			t->backoff_ms = 0;
		}
		{
			struct claim done = *c;

			t->qhead = (t->qhead + 1) % t->qcap;
			t->qlen--;
			pthread_mutex_unlock(&t->mu);
			if (t->o.on_decision)
				t->o.on_decision(t->o.decision_ctx, done.trace,
						 res == CLAIM_KEPT ? kept : NULL,
						 res == CLAIM_KEPT);
			claim_clear(&done);
			pthread_mutex_lock(&t->mu);
		}
	}
	pthread_mutex_unlock(&t->mu);
	PQfinish(conn);
	return NULL;
}
