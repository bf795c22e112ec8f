/*
 * kube_status.c - one TraceProfileTrigger's status (a "namespace/name" key,
 * see kube_mode.c): computed from the cached object, its row and the
 * agents' last status (phase, progress, trace ids, targets, conditions),
 * written through the status subresource only when it differs (409:
 * recomputed from the fresh object), and the Events of its transitions.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "common.h"
#include "kube_state.h"
#include "manifest.h"
#include "traceprof/kube.h"
#include "traceprof/log.h"
#include "triggers_db.h"

/* ---- status ------------------------------------------------------------- */

static const struct trigger_row *row_of(struct kstate *s, const char *id)
{
	for (size_t i = 0; i < s->rows.n; i++)
		if (strcmp(s->rows.v[i].id, id) == 0)
			return &s->rows.v[i];
	return NULL;
}

/* A CamelCase reason for the phase and the row's reason. */
static const char *reason_of(const char *phase, const char *row_reason)
{
	if (strcmp(phase, "Rejected") == 0)
		return strncmp(row_reason, "agent ", 6) == 0 ? "AgentRejected" : "TooManyTriggers";
	if (strcmp(phase, "Failed") == 0)
		return "Failed";
	if (strcmp(phase, "Completed") == 0)
		return "MaxRequestsCollected";
	if (strcmp(phase, "Expired") == 0)
		return "DeadlinePassed";
	return phase;
}

static json_t *condition(const json_t *old_status, const char *type, bool on, const char *reason,
			 const char *message, json_int_t gen)
{
	const json_t *c, *old = NULL;
	const char *status = on ? "True" : "False", *ltt = NULL;
	char now[32];
	size_t i;
	struct timespec ts;

	json_array_foreach(json_object_get(old_status, "conditions"), i, c)
	{
		if (kmode_str_at(c, "type", NULL) &&
		    strcmp(kmode_str_at(c, "type", NULL), type) == 0)
			old = c;
	}
	/* lastTransitionTime changes only when the status does */
	if (old && kmode_str_at(old, "status", NULL) &&
	    strcmp(kmode_str_at(old, "status", NULL), status) == 0)
		ltt = kmode_str_at(old, "lastTransitionTime", NULL);
	if (!ltt) {
		clock_gettime(CLOCK_REALTIME, &ts);
		kube_format_time(now, &ts);
		ltt = now;
	}
	return json_pack("{s:s, s:s, s:I, s:s, s:s, s:s}", "type", type, "status", status,
			 "observedGeneration", gen, "lastTransitionTime", ltt, "reason", reason,
			 "message", message);
}

static json_t *trace_ids_array(const char *ids)
{
	json_t *a = json_array();

	while (ids && *ids) {
		const char *comma = strchr(ids, ',');
		size_t n = comma ? (size_t)(comma - ids) : strlen(ids);

		json_array_append_new(a, json_stringn(ids, n));
		ids += n + (comma ? 1 : 0);
	}
	return a;
}

/*
 * The agents that have the trigger, and the message for an Active trigger
 * that targets nothing (NULL otherwise).
 */
static json_t *status_agents(struct kstate *s, const char *id, const char *service, bool selector,
			     bool offcpu, size_t n_pods, char *msg, size_t msglen)
{
	json_t *a = json_array();
	size_t reached = 0, reporting = 0;
	unsigned long long procs = 0;

	msg[0] = '\0';
	for (size_t k = 0; k < s->n_agents; k++) {
		const struct ctl_agent *ag = &s->agents[k].a;
		const Traceprof__Control__V1__TriggerStatus *ts = ctl_agent_trigger(ag, id);
		bool sent = false;

		for (size_t i = 0; i < s->agents[k].set.req.n_triggers && !sent; i++)
			sent = strcmp(s->agents[k].set.req.triggers[i]->id, id) == 0;
		if (!ag->down && ag->status)
			reached++;
		if (ts) {
			reporting++;
			procs += ts->target_processes;
		}
		if (!sent && !ts)
			continue;
		json_array_append_new(a, json_pack("{s:s, s:s, s:s}", "node", ag->node, "address",
						   ag->addr, "state",
						   ts ? ctl_state_name(ts->state)
						      : (ag->down ? "Unreachable" : "Sent")));
	}
	if (selector && !n_pods)
		snprintf(msg, msglen, "no running pod matches spec.selector%s",
			 offcpu ? CTL_NO_TARGET_OFFCPU : "");
	else if (!selector && reached && reporting == reached && !procs)
		snprintf(msg, msglen, "no target process on any agent (service %s)%s", service,
			 offcpu ? CTL_NO_TARGET_OFFCPU : "");
	return a;
}

/* The status the trigger should have now (a new object), from fresh (borrowed). */
static json_t *compute_status(struct kstate *s, const json_t *fresh)
{
	const json_t *old = json_object_get(fresh, "status");
	json_int_t gen =
	    json_integer_value(json_object_get(json_object_get(fresh, "metadata"), "generation"));
	struct manifest_trigger t = {0};
	const struct trigger_row *r = NULL;
	const char *phase = "Pending", *reason = NULL;
	char err[512], msg[512] = "", id[300];
	json_t *st = json_object(), *conds;
	bool valid = kmode_validate(fresh, &t, err, sizeof(err)) == 0;

	kmode_trigger_id(fresh, id, sizeof(id));
	json_object_set_new(st, "observedGeneration", json_integer(gen));
	if (!valid) {
		phase = "Rejected";
		reason = "InvalidSpec";
		snprintf(msg, sizeof(msg), "%s", err);
	} else if ((r = row_of(s, id))) {
		json_t *pods = t.has_selector ? kmode_selected_pods(s, fresh, NULL) : json_array();

		phase = r->phase;
		if (strcmp(phase, "Active") != 0 && strcmp(phase, "Pending") != 0) {
			reason = reason_of(phase, r->reason);
			snprintf(msg, sizeof(msg), "%s", r->reason);
		}
		json_object_set_new(st, "collectedRequests", json_integer(r->collected));
		json_object_set_new(st, "progress",
				    json_sprintf("%d/%d", r->collected, r->max_requests));
		json_object_set_new(st, "traceIDs", trace_ids_array(r->trace_ids));
		json_object_set_new(
		    st, "targets",
		    json_pack("{s:o, s:o}", "agents",
			      status_agents(s, id, r->service, t.has_selector, t.offcpu,
					    json_array_size(pods),
					    strcmp(phase, "Active") == 0 ? msg : err, sizeof(msg)),
			      "pods", pods));
		if (*r->started)
			json_object_set_new(st, "startTime", json_string(r->started));
		if (*r->completed)
			json_object_set_new(st, "completionTime", json_string(r->completed));
		json_object_set_new(st, "deadline", json_string(r->deadline));
	} else {
		snprintf(msg, sizeof(msg), "%s",
			 s->db.down ? "waiting for the database" : "waiting for the controller");
	}
	json_object_set_new(st, "phase", json_string(phase));
	if (reason)
		json_object_set_new(st, "reason", json_string(reason));
	if (*msg)
		json_object_set_new(st, "message", json_string(msg));
	conds = json_array();
	json_array_append_new(conds, condition(old, "Active", strcmp(phase, "Active") == 0,
					       reason ? reason : phase, msg, gen));
	json_array_append_new(conds,
			      condition(old, "Completed", strcmp(phase, "Completed") == 0,
					strcmp(phase, "Completed") == 0 ? "MaxRequestsCollected"
									: (reason ? reason : phase),
					strcmp(phase, "Completed") == 0 ? msg : "", gen));
	json_object_set_new(st, "conditions", conds);
	manifest_trigger_clear(&t);
	return st;
}

static int status_fn(void *arg, const json_t *fresh, json_t **status)
{
	*status = compute_status(arg, fresh);
	return *status ? 0 : -ENOMEM;
}

/* Events for what changed between the old status and the new one. */
static void emit_events(struct kstate *s, const json_t *obj, const json_t *old, const json_t *now)
{
	const char *was = kmode_str_at(old, "phase", NULL),
		   *phase = kmode_str_at(now, "phase", NULL);
	const char *reason = kmode_str_at(now, "reason", NULL),
		   *msg = kmode_str_at(now, "message", NULL);
	const char *old_msg = kmode_str_at(old, "message", NULL);
	struct kube_object_ref ref = {
	    .api_version = MANIFEST_API_VERSION,
	    .kind = MANIFEST_KIND,
	    .namespace = kmode_str_at(obj, "metadata", "namespace"),
	    .name = kmode_str_at(obj, "metadata", "name"),
	    .uid = kmode_str_at(obj, "metadata", "uid"),
	};
	bool changed = !was || strcmp(was, phase) != 0 ||
		       (reason && (!kmode_str_at(old, "reason", NULL) ||
				   strcmp(reason, kmode_str_at(old, "reason", NULL)) != 0));

	if (!s->events || !phase)
		return;
	if (changed && strcmp(phase, "Active") == 0)
		kube_event_emit(s->events, &ref, "Normal", "Activated",
				"trigger active: sampling raised for its targets until %s",
				kmode_str_at(now, "deadline", NULL)
				    ? kmode_str_at(now, "deadline", NULL)
				    : "the deadline");
	else if (changed && strcmp(phase, "Completed") == 0)
		kube_event_emit(s->events, &ref, "Normal", "Completed", "collected %s requests",
				kmode_str_at(now, "progress", NULL));
	else if (changed && strcmp(phase, "Expired") == 0)
		kube_event_emit(s->events, &ref, "Normal", "Expired",
				"deadline passed with %s requests collected",
				kmode_str_at(now, "progress", NULL));
	else if (changed && strcmp(phase, "Rejected") == 0)
		kube_event_emit(s->events, &ref, "Warning",
				reason && strcmp(reason, "InvalidSpec") == 0 ? "InvalidSpec"
									     : "Rejected",
				"%s", msg ? msg : "rejected");
	if (strcmp(phase, "Active") == 0 && msg && (!old_msg || strcmp(old_msg, msg) != 0))
		kube_event_emit(s->events, &ref, "Warning", "NoTargets", "%s", msg);
}

/* One trigger's status. Returns 0, or -errno to retry with backoff. */
int kmode_reconcile(struct kstate *s, const char *key)
{
	json_t *obj = kube_informer_get(s->triggers, key), *st, *copy;
	struct kube_response resp = {0};
	char path[700];
	int rc;

	if (!obj)
		return 0; /* deleted: the pass ends its row and the agents drop it */
	st = compute_status(s, obj);
	if (!st) {
		json_decref(obj);
		return -ENOMEM;
	}
	if (json_equal(st, json_object_get(obj, "status"))) {
		json_decref(st);
		json_decref(obj);
		return 0;
	}
	copy = json_deep_copy(obj);
	json_object_set(copy, "status", st);
	rc = kube_path(path, sizeof(path), TRIGGERS_PREFIX,
		       kmode_str_at(obj, "metadata", "namespace"), TRIGGERS_PLURAL,
		       kmode_str_at(obj, "metadata", "name"), NULL);
	if (!rc && !kmode_may_act(s))
		rc = -EPERM; /* lost the lease meanwhile, or past the renew deadline: write nothing
			      */
	if (!rc)
		rc = kube_update_status(s->client, path, copy, status_fn, s, 0, &resp);
	if (rc == 0) {
		const json_t *written = json_object_get(resp.body, "status");

		log_debug("status written key=%s phase=%s", key,
			  kmode_str_at(written, "phase", NULL));
		emit_events(s, obj, json_object_get(obj, "status"), written ? written : st);
	} else if (kube_is_not_found(&resp)) {
		rc = 0; /* deleted meanwhile */
	} else if (rc != -EPERM) {
		log_warn("status update failed key=%s: %s%s", key,
			 resp.error[0] ? resp.error : resp.status.message,
			 rc == -EAGAIN ? " (conflicts)" : "");
	}
	kube_response_clear(&resp);
	json_decref(copy);
	json_decref(st);
	json_decref(obj);
	return rc == -EPERM ? 0 : rc;
}
