/*
 * common.c - see common.h. Taken out of the local mode so that the
 * Kubernetes mode programs agents and talks to the database the same way.
 */
#include "common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <grpc/status.h>

#include "manifest.h"
#include "traceprof/log.h"
#include "traceprof/migrate.h"

int64_t ctl_now_ms(clockid_t clk)
{
	struct timespec ts;

	clock_gettime(clk, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void ctl_db_lost(struct ctl_db *db)
{
	if (db->conn && PQstatus(db->conn) == CONNECTION_OK)
		return; /* a statement failed but the connection is fine: logged already */
	snprintf(db->error, sizeof(db->error), "%s",
		 db->conn ? PQerrorMessage(db->conn) : "not connected");
	PQfinish(db->conn);
	db->conn = NULL;
	if (!db->down)
		log_error("database unreachable, retrying: %s", db->error);
	db->down = true;
}

bool ctl_db_ensure(struct ctl_db *db)
{
	if (db->conn && PQstatus(db->conn) == CONNECTION_OK)
		return true;
	PQfinish(db->conn);
	db->conn = PQconnectdb(db->conninfo ? db->conninfo : "");
	if (PQstatus(db->conn) != CONNECTION_OK || migrate_apply(db->conn, NULL)) {
		char *nl;

		snprintf(db->error, sizeof(db->error), "%s", PQerrorMessage(db->conn));
		if ((nl = strchr(db->error, '\n')))
			*nl = '\0';
		if (!db->down)
			log_error("database unreachable, retrying: %s", db->error);
		db->down = true;
		PQfinish(db->conn);
		db->conn = NULL;
		return false;
	}
	if (db->down)
		log_info("database reachable again");
	db->down = false;
	db->error[0] = '\0';
	return true;
}

void ctl_db_close(struct ctl_db *db)
{
	PQfinish(db->conn);
	db->conn = NULL;
}

static void agent_down(struct ctl_agent *a, const char *why)
{
	if (!a->down)
		log_error("agent unreachable, retrying addr=%s: %s", a->addr, why);
	a->down = true;
	snprintf(a->error, sizeof(a->error), "%s", why);
}

/*
 * A call refused (rc) for its credentials: the channel goes, so the next
 * pass reads the token file again (an agent that made a new token, a
 * Secret that was rotated).
 */
static void agent_refused(struct ctl_agent *a, int rc)
{
	if (rc != GRPC_STATUS_UNAUTHENTICATED)
		return;
	control_client_free(a->client);
	a->client = NULL;
}

void ctl_agent_program(struct ctl_agent *a, const struct control_auth *auth,
		       const Traceprof__Control__V1__ApplyTriggersRequest *req)
{
	Traceprof__Control__V1__ApplyTriggersResponse *resp = NULL;
	Traceprof__Control__V1__AgentStatus *st = NULL;
	char err[256] = "";
	int rc;

	if (!a->client) {
		a->client = control_client_new(a->addr, auth, err, sizeof(err));
		if (!a->client) {
			agent_down(a, err);
			return;
		}
	}
	rc = control_client_apply(a->client, req, CTL_AGENT_TIMEOUT_MS, &resp, err, sizeof(err));
	if (rc) {
		agent_down(a, err[0] ? err : "ApplyTriggers failed");
		agent_refused(a, rc);
		return;
	}
	if (resp->changed)
		log_info("agent applied triggers addr=%s%s%s generation=%llu triggers=%zu", a->addr,
			 a->node[0] ? " node=" : "", a->node, (unsigned long long)resp->generation,
			 req->n_triggers);
	a->generation = resp->generation;
	traceprof__control__v1__apply_triggers_response__free_unpacked(resp, NULL);
	rc = control_client_status(a->client, CTL_AGENT_TIMEOUT_MS, &st, err, sizeof(err));
	if (rc) {
		agent_down(a, err[0] ? err : "GetStatus failed");
		agent_refused(a, rc);
		return;
	}
	if (a->status)
		traceprof__control__v1__agent_status__free_unpacked(a->status, NULL);
	a->status = st;
	if (a->down)
		log_info("agent reachable again addr=%s", a->addr);
	a->down = false;
	a->error[0] = '\0';
}

const Traceprof__Control__V1__TriggerStatus *ctl_agent_trigger(const struct ctl_agent *a,
							       const char *id)
{
	if (!a->status || a->down)
		return NULL;
	for (size_t i = 0; i < a->status->n_triggers; i++)
		if (strcmp(a->status->triggers[i]->id, id) == 0)
			return a->status->triggers[i];
	return NULL;
}

const Traceprof__Control__V1__Trigger *ctl_set_trigger(const struct ctl_set *s, const char *id)
{
	for (size_t i = 0; i < s->req.n_triggers; i++)
		if (strcmp(s->req.triggers[i]->id, id) == 0)
			return s->req.triggers[i];
	return NULL;
}

void ctl_agent_clear(struct ctl_agent *a)
{
	control_client_free(a->client);
	a->client = NULL;
	if (a->status)
		traceprof__control__v1__agent_status__free_unpacked(a->status, NULL);
	a->status = NULL;
}

const char *ctl_state_name(Traceprof__Control__V1__TriggerState st)
{
	switch (st) {
	case TRACEPROF__CONTROL__V1__TRIGGER_STATE__TRIGGER_STATE_PENDING:
		return "Pending";
	case TRACEPROF__CONTROL__V1__TRIGGER_STATE__TRIGGER_STATE_ACTIVE:
		return "Active";
	case TRACEPROF__CONTROL__V1__TRIGGER_STATE__TRIGGER_STATE_COMPLETED:
		return "Completed";
	case TRACEPROF__CONTROL__V1__TRIGGER_STATE__TRIGGER_STATE_EXPIRED:
		return "Expired";
	case TRACEPROF__CONTROL__V1__TRIGGER_STATE__TRIGGER_STATE_REJECTED:
		return "Rejected";
	default:
		return "Unknown";
	}
}

void ctl_set_init(struct ctl_set *s)
{
	memset(s, 0, sizeof(*s));
	traceprof__control__v1__apply_triggers_request__init(&s->req);
}

void ctl_set_clear_triggers(struct ctl_set *s)
{
	for (size_t i = 0; i < s->req.n_triggers; i++)
		manifest_proto_free(s->req.triggers[i]);
	free(s->req.triggers);
	s->req.triggers = NULL;
	s->req.n_triggers = 0;
}

bool ctl_set_commit(struct ctl_set *s)
{
	uint64_t generation = s->req.generation;
	bool changed = false;
	uint8_t *bytes;
	size_t len;

	s->req.generation = 0;
	len = traceprof__control__v1__apply_triggers_request__get_packed_size(&s->req);
	bytes = malloc(len ? len : 1);
	if (bytes)
		traceprof__control__v1__apply_triggers_request__pack(&s->req, bytes);
	if (!bytes || len != s->len || memcmp(bytes, s->bytes, len) != 0 || !generation) {
		uint64_t wall = (uint64_t)ctl_now_ms(CLOCK_REALTIME);

		/* wall-clock milliseconds: still increasing after a controller restart */
		generation = wall > generation ? wall : generation + 1;
		free(s->bytes);
		s->bytes = bytes;
		s->len = bytes ? len : 0;
		changed = true;
	} else {
		free(bytes);
	}
	s->req.generation = generation;
	return changed;
}

void ctl_set_free(struct ctl_set *s)
{
	ctl_set_clear_triggers(s);
	free(s->bytes);
	s->bytes = NULL;
	s->len = 0;
}
