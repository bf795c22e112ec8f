/*
 * kube_status.c - one TraceProfileTrigger's status (a "namespace/name" key,
 * see kube_mode.c): computed on the main thread from the cached object, its
 * row and the agents' last status (phase, progress, trace ids, targets,
 * conditions) and, only when it differs, handed to the status writers
 * (kube_writer.c). After a 409 a writer puts the status on the fresh
 * object (kmode_status_rebase: nothing is written when the fresh object
 * already has it), and the Events of a transition compare the written
 * status with the one it replaced on the server, never with the cache.
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

static json_t *condition(struct kstate *s, const json_t *old_status, const char *type, bool on,
			 const char *reason, const char *message, json_int_t gen)
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
		ts.tv_sec += s->cfg->test_clock_offset_s; /* tests only: a skewed node */
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
	json_array_append_new(conds, condition(s, old, "Active", strcmp(phase, "Active") == 0,
					       reason ? reason : phase, msg, gen));
	json_array_append_new(conds,
			      condition(s, old, "Completed", strcmp(phase, "Completed") == 0,
					strcmp(phase, "Completed") == 0 ? "MaxRequestsCollected"
									: (reason ? reason : phase),
					strcmp(phase, "Completed") == 0 ? msg : "", gen));
	json_object_set_new(st, "conditions", conds);
	manifest_trigger_clear(&t);
	return st;
}

/* c's lastTransitionTime from the same condition in status when it has the same status. */
static void keep_transition_time(json_t *c, const json_t *status)
{
	const json_t *o;
	size_t i;

	json_array_foreach(json_object_get(status, "conditions"), i, o)
	{
		const char *type = kmode_str_at(o, "type", NULL), *ltt;

		if (!type || !kmode_str_at(c, "type", NULL) ||
		    strcmp(type, kmode_str_at(c, "type", NULL)) != 0)
			continue;
		ltt = kmode_str_at(o, "lastTransitionTime", NULL);
		if (ltt && kmode_str_at(o, "status", NULL) && kmode_str_at(c, "status", NULL) &&
		    strcmp(kmode_str_at(o, "status", NULL), kmode_str_at(c, "status", NULL)) == 0)
			json_object_set_new(c, "lastTransitionTime", json_string(ltt));
	}
}

static bool same_at(const json_t *a, const json_t *b, const char *field)
{
	return json_equal(json_object_get(json_object_get(a, "metadata"), field),
			  json_object_get(json_object_get(b, "metadata"), field));
}

/*
 * After a 409, on a status writer's thread: obj's status (computed by the
 * main thread) put on fresh, the object as the server has it now. It
 * depends on the object only through its uid, generation and spec (the
 * same for both, else -ESTALE: the main thread computes it again) and the
 * conditions' transition times (taken from fresh). Returns 0 and *status
 * (new), KUBE_STATUS_UNCHANGED when fresh already holds it, or -errno.
 */
int kmode_status_rebase(const json_t *obj, const json_t *fresh, json_t **status)
{
	const json_t *c;
	json_t *st;
	size_t i;

	*status = NULL;
	if (!same_at(obj, fresh, "uid") || !same_at(obj, fresh, "generation") ||
	    !json_equal(json_object_get(obj, "spec"), json_object_get(fresh, "spec")))
		return -ESTALE;
	st = json_deep_copy(json_object_get(obj, "status"));
	if (!st)
		return -ENOMEM;
	json_array_foreach(json_object_get(st, "conditions"), i, c)
	{
		keep_transition_time((json_t *)c, json_object_get(fresh, "status"));
	}
	if (json_equal(st, json_object_get(fresh, "status"))) {
		json_decref(st);
		return KUBE_STATUS_UNCHANGED;
	}
	*status = st;
	return 0;
}

/*
 * Events for what changed between old, the status a write replaced on the
 * server, and now, the one written (thread-safe: kube_event_emit queues).
 */
void kmode_status_events(struct kstate *s, const json_t *obj, const json_t *old, const json_t *now)
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

/*
 * One trigger's status, computed and handed to the status writers when it
 * differs from the cached object's. Returns 0 (nothing to write), 1 (handed
 * over: the writer forgets or retries the key) or -errno to retry with
 * backoff.
 */
int kmode_reconcile(struct kstate *s, const char *key)
{
	json_t *obj = kube_informer_get(s->triggers, key), *st, *copy;
	char path[700];
	int rc;

	if (!obj)
		return 0; /* deleted: the pass ends its row and the agents drop it */
	st = compute_status(s, obj);
	if (!st || json_equal(st, json_object_get(obj, "status"))) {
		rc = st ? 0 : -ENOMEM;
		json_decref(st);
		json_decref(obj);
		return rc;
	}
	copy = json_deep_copy(obj);
	json_object_set_new(copy, "status", st);
	rc = kube_path(path, sizeof(path), TRIGGERS_PREFIX,
		       kmode_str_at(obj, "metadata", "namespace"), TRIGGERS_PLURAL,
		       kmode_str_at(obj, "metadata", "name"), NULL);
	if (rc || !copy)
		json_decref(copy);
	else
		rc = kwriter_submit(s->writer, key, path, copy, json_object_get(obj, "status"));
	json_decref(obj);
	return rc;
}
