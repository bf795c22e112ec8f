/*
 * kube_sync.c - the Kubernetes mode's level-triggered pass (the ":sync"
 * key, see kube_mode.c): every valid cached trigger mirrored into the table
 * (fenced by the leader's term), the pods each trigger's spec.selector
 * selects, the agents found (--agent ADDR@NODE and the agent DaemonSet's
 * Running pods), each agent's desired set for its node sent with
 * ApplyTriggers + GetStatus, the agents' refusals recorded, and the
 * triggers whose row changed queued for a status write.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "common.h"
#include "kube_state.h"
#include "manifest.h"
#include "traceprof/kube.h"
#include "traceprof/log.h"
#include "triggers_db.h"

/* ---- pods --------------------------------------------------------------- */

static bool label_in(const json_t *values, const char *v)
{
	size_t i;
	json_t *x;

	json_array_foreach(values, i, x)
	{
		if (v && json_is_string(x) && strcmp(json_string_value(x), v) == 0)
			return true;
	}
	return false;
}

/* metav1.LabelSelector semantics; an empty selector selects everything. */
static bool selector_matches(const json_t *sel, const json_t *labels)
{
	const json_t *ml = json_object_get(sel, "matchLabels"), *v, *e;
	const char *k;
	size_t i;

	json_object_foreach((json_t *)ml, k, v)
	{
		const char *have = kmode_str_at(labels, k, NULL);

		if (!have || !json_is_string(v) || strcmp(have, json_string_value(v)) != 0)
			return false;
	}
	json_array_foreach(json_object_get(sel, "matchExpressions"), i, e)
	{
		const char *key = kmode_str_at(e, "key", NULL),
			   *op = kmode_str_at(e, "operator", NULL);
		const char *have = key ? kmode_str_at(labels, key, NULL) : NULL;
		const json_t *vals = json_object_get(e, "values");

		if (!key || !op)
			return false;
		if (strcmp(op, "In") == 0 && !label_in(vals, have))
			return false;
		if (strcmp(op, "NotIn") == 0 && label_in(vals, have))
			return false;
		if (strcmp(op, "Exists") == 0 && !have)
			return false;
		if (strcmp(op, "DoesNotExist") == 0 && have)
			return false;
	}
	return true;
}

/*
 * The Running pods the trigger's spec.selector selects in its namespace,
 * as a new array of {namespace, name, uid, node} (the status form), and,
 * when containers is not NULL, a parallel new array of their container ids
 * (runtime prefix "containerd://" and the like stripped).
 */
json_t *kmode_selected_pods(struct kstate *s, const json_t *obj, json_t **containers)
{
	const json_t *sel = json_object_get(json_object_get(obj, "spec"), "selector");
	const char *ns = kmode_str_at(obj, "metadata", "namespace");
	json_t *all = kube_informer_list(s->pods), *out = json_array(), *p;
	size_t i;

	if (containers)
		*containers = json_array();
	json_array_foreach(all, i, p)
	{
		const json_t *md = json_object_get(p, "metadata"), *cs, *c;
		const char *pns = kmode_str_at(md, "namespace", NULL), *phase;
		json_t *ids;
		size_t j;

		if (!sel || !pns || !ns || strcmp(pns, ns) != 0)
			continue;
		phase = kmode_str_at(p, "status", "phase");
		if (!phase || strcmp(phase, "Running") != 0 ||
		    json_object_get(md, "deletionTimestamp"))
			continue;
		if (!selector_matches(sel, json_object_get(md, "labels")))
			continue;
		json_array_append_new(out, json_pack("{s:s, s:s?, s:s?, s:s?}", "namespace", pns,
						     "name", kmode_str_at(md, "name", NULL), "uid",
						     kmode_str_at(md, "uid", NULL), "node",
						     kmode_str_at(p, "spec", "nodeName")));
		if (!containers)
			continue;
		ids = json_array();
		cs = json_object_get(json_object_get(p, "status"), "containerStatuses");
		json_array_foreach(cs, j, c)
		{
			const char *id = kmode_str_at(c, "containerID", NULL), *sep;

			if (!id || !*id)
				continue;
			sep = strstr(id, "://");
			json_array_append_new(ids, json_string(sep ? sep + 3 : id));
		}
		json_array_append_new(*containers, ids);
	}
	json_decref(all);
	return out;
}

/* ---- agents ------------------------------------------------------------- */

static struct kagent *agent_find_or_add(struct kstate *s, const char *addr, const char *node)
{
	struct kagent *ka;

	for (size_t k = 0; k < s->n_agents; k++)
		if (strcmp(s->agents[k].a.addr, addr) == 0) {
			s->agents[k].seen = true;
			snprintf(s->agents[k].a.node, sizeof(s->agents[k].a.node), "%s", node);
			return &s->agents[k];
		}
	if (s->n_agents == KUBE_MODE_MAX_AGENTS) {
		log_warn("more than %d agents: agent ignored addr=%s node=%s", KUBE_MODE_MAX_AGENTS,
			 addr, node);
		return NULL;
	}
	ka = &s->agents[s->n_agents++];
	memset(ka, 0, sizeof(*ka));
	snprintf(ka->a.addr, sizeof(ka->a.addr), "%s", addr);
	snprintf(ka->a.node, sizeof(ka->a.node), "%s", node);
	ctl_set_init(&ka->set);
	ka->seen = true;
	log_info("agent found addr=%s node=%s", addr, node);
	return ka;
}

/* The agents: --agent ADDR@NODE, then the Running pods of the agent DaemonSet. */
static void discover_agents(struct kstate *s)
{
	size_t kept = 0;

	for (size_t k = 0; k < s->n_agents; k++)
		s->agents[k].seen = false;
	for (size_t i = 0; i < s->cfg->n_agents; i++) {
		const char *at = strrchr(s->cfg->agents[i], '@');
		char addr[272];

		snprintf(addr, sizeof(addr), "%.*s", (int)(at - s->cfg->agents[i]),
			 s->cfg->agents[i]);
		agent_find_or_add(s, addr, at + 1);
	}
	if (s->agent_pods) {
		json_t *all = kube_informer_list(s->agent_pods), *p;
		size_t i;

		json_array_foreach(all, i, p)
		{
			const char *ip = kmode_str_at(p, "status", "podIP");
			const char *node = kmode_str_at(p, "spec", "nodeName");
			const char *phase = kmode_str_at(p, "status", "phase");
			char addr[272];

			if (!ip || !node || !phase || strcmp(phase, "Running") != 0)
				continue;
			snprintf(addr, sizeof(addr), strchr(ip, ':') ? "[%s]:%d" : "%s:%d", ip,
				 s->cfg->agent_port);
			agent_find_or_add(s, addr, node);
		}
		json_decref(all);
	}
	for (size_t k = 0; k < s->n_agents; k++) {
		if (!s->agents[k].seen) {
			log_info("agent gone addr=%s node=%s", s->agents[k].a.addr,
				 s->agents[k].a.node);
			ctl_agent_clear(&s->agents[k].a);
			ctl_set_free(&s->agents[k].set);
			continue;
		}
		if (kept != k)
			s->agents[kept] = s->agents[k];
		kept++;
	}
	s->n_agents = kept;
}

static void free_strv(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

/*
 * Narrows p's targets to the selected pods on node: their UIDs and
 * container ids instead of the service name. Returns false when none of
 * them is there (the trigger is not for this agent).
 */
static bool target_node_pods(Traceprof__Control__V1__Trigger *p, const json_t *pods,
			     const json_t *containers, const char *node)
{
	Traceprof__Control__V1__Targets *tg = p->targets;
	size_t n = json_array_size(pods), i, j;
	const json_t *pod;

	free_strv(tg->services, tg->n_services);
	tg->services = NULL;
	tg->n_services = 0;
	tg->pod_uids = calloc(n ? n : 1, sizeof(*tg->pod_uids));
	tg->container_ids = calloc(1, sizeof(*tg->container_ids));
	json_array_foreach(pods, i, pod)
	{
		const char *pn = kmode_str_at(pod, "node", NULL),
			   *uid = kmode_str_at(pod, "uid", NULL);
		const json_t *ids = json_array_get(containers, i), *id;

		if (!pn || !uid || strcmp(pn, node) != 0 || !tg->pod_uids)
			continue;
		tg->pod_uids[tg->n_pod_uids++] = strdup(uid);
		json_array_foreach(ids, j, id)
		{
			char **nv =
			    realloc(tg->container_ids, (tg->n_container_ids + 1) * sizeof(*nv));

			if (!nv)
				break;
			tg->container_ids = nv;
			tg->container_ids[tg->n_container_ids++] = strdup(json_string_value(id));
		}
	}
	return tg->n_pod_uids > 0;
}

/* The desired set of one agent: every Active row of a valid object for its node. */
static void build_agent_set(struct kstate *s, struct kagent *ka, const struct manifest_list *m,
			    json_t *const *objs)
{
	struct ctl_set *set = &ka->set;

	ctl_set_clear_triggers(set);
	set->req.node = ka->a.node; /* borrowed; set again on every pass */
	set->req.triggers = calloc(m->n ? m->n : 1, sizeof(*set->req.triggers));
	for (size_t i = 0; set->req.triggers && i < m->n; i++) {
		const struct manifest_trigger *t = &m->items[i];
		const struct trigger_row *r = NULL;
		Traceprof__Control__V1__Trigger *p;

		for (size_t j = 0; j < s->rows.n && !r; j++)
			if (strcmp(s->rows.v[j].id, t->id) == 0)
				r = &s->rows.v[j];
		if (!r || strcmp(r->phase, "Active") != 0)
			continue;
		p = manifest_to_proto(t, r->id, r->deadline_ms);
		if (!p)
			continue;
		/* the row is authoritative for limits: maxRequests never below collected */
		p->max_requests = (uint32_t)r->max_requests;
		/* the agents' per-service limit needs a service: a selector-only
		 * trigger is a group of its own */
		if (!t->service) {
			free(p->service);
			if (!(p->service = strdup(r->id))) {
				manifest_proto_free(p);
				continue;
			}
		}
		if (t->has_selector) {
			json_t *containers, *pods = kmode_selected_pods(s, objs[i], &containers);
			bool here = target_node_pods(p, pods, containers, ka->a.node);

			json_decref(pods);
			json_decref(containers);
			if (!here) {
				manifest_proto_free(p);
				continue;
			}
		}
		set->req.triggers[set->req.n_triggers++] = p;
	}
	if (ctl_set_commit(set))
		log_debug("desired set changed node=%s generation=%llu triggers=%zu", ka->a.node,
			  (unsigned long long)set->req.generation, set->req.n_triggers);
}

/* A trigger an agent refused turns Rejected, with the agent's reason. */
static void agent_rejections(struct kstate *s)
{
	for (size_t i = 0; s->db.conn && i < s->rows.n; i++) {
		const struct trigger_row *r = &s->rows.v[i];

		if (strcmp(r->phase, "Active") != 0)
			continue;
		for (size_t k = 0; k < s->n_agents; k++) {
			const Traceprof__Control__V1__TriggerStatus *ts =
			    ctl_agent_trigger(&s->agents[k].a, r->id);
			char reason[512];

			if (!ts ||
			    ts->state !=
				TRACEPROF__CONTROL__V1__TRIGGER_STATE__TRIGGER_STATE_REJECTED)
				continue;
			snprintf(reason, sizeof(reason), "agent %s: %s", s->agents[k].a.addr,
				 ts->reason && *ts->reason ? ts->reason : "rejected");
			if (triggers_db_reject(s->db.conn, r->id, reason))
				ctl_db_lost(&s->db);
			break;
		}
	}
}

/* ---- the pass ----------------------------------------------------------- */

static void enqueue_row(struct kstate *s, const struct trigger_row *r)
{
	char key[300];

	snprintf(key, sizeof(key), "%s/%s", r->namespace_, r->name);
	kube_workqueue_add(s->q, key);
}

static bool row_same(const struct trigger_row *a, const struct trigger_row *b)
{
	return strcmp(a->phase, b->phase) == 0 && strcmp(a->reason, b->reason) == 0 &&
	       a->collected == b->collected && a->max_requests == b->max_requests &&
	       strcmp(a->trace_ids, b->trace_ids) == 0 && strcmp(a->deadline, b->deadline) == 0;
}

static void take_rows(struct kstate *s, struct trigger_rows *rows)
{
	for (size_t i = 0; i < rows->n; i++) {
		const struct trigger_row *r = &rows->v[i], *was = NULL;

		for (size_t j = 0; j < s->rows.n && !was; j++)
			if (strcmp(s->rows.v[j].id, r->id) == 0)
				was = &s->rows.v[j];
		if (!was || !row_same(was, r) || strcmp(r->phase, "Active") == 0)
			enqueue_row(s, r);
		if (was && strcmp(was->phase, r->phase) != 0)
			log_info("trigger %s id=%s service=%s collected=%d/%d was=%s%s%s", r->phase,
				 r->id, r->service, r->collected, r->max_requests, was->phase,
				 *r->reason ? " reason=" : "", r->reason);
	}
	trigger_rows_free(&s->rows);
	s->rows = *rows;
	s->rows_loaded = true;
}

static int cmp_created(const void *a, const void *b)
{
	const json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
	const char *cx = kmode_str_at(x, "metadata", "creationTimestamp");
	const char *cy = kmode_str_at(y, "metadata", "creationTimestamp");
	int c = strcmp(cx ? cx : "", cy ? cy : "");

	return c ? c
		 : strcmp(kmode_str_at(x, "metadata", "name"), kmode_str_at(y, "metadata", "name"));
}

/* Every valid cached trigger, oldest first (the per-service limit goes by age). */
static json_t **valid_triggers(struct kstate *s, json_t *all, struct manifest_list *m)
{
	size_t n = json_array_size(all);
	json_t **sorted = calloc(n ? n : 1, sizeof(*sorted)), **objs;

	objs = calloc(n ? n : 1, sizeof(*objs));
	m->items = calloc(n ? n : 1, sizeof(*m->items));
	if (!sorted || !objs || !m->items) {
		free(sorted);
		free(objs);
		return NULL;
	}
	m->cap = n;
	for (size_t i = 0; i < n; i++)
		sorted[i] = json_array_get(all, i);
	qsort(sorted, n, sizeof(*sorted), cmp_created);
	for (size_t i = 0; i < n; i++) {
		char err[512];

		if (kmode_validate(sorted[i], &m->items[m->n], err, sizeof(err)) == 0)
			objs[m->n++] = sorted[i];
	}
	free(sorted);
	(void)s;
	return objs;
}

/*
 * The term is taken once per leadership, before the first write: the
 * database's sequence makes it larger than every earlier leader's.
 */
static bool take_term(struct kstate *s)
{
	const char *id = s->leader ? kube_leader_identity(s->leader) : s->cfg->identity;
	char host[128] = "controller", fallback[160];
	uint64_t term;

	if (!atomic_load(&s->need_term))
		return atomic_load(&s->term) != 0;
	if (!id) {
		gethostname(host, sizeof(host) - 1);
		snprintf(fallback, sizeof(fallback), "%s_%ld", host, (long)getpid());
		id = fallback;
	}
	if (triggers_db_take_term(s->db.conn, id, &term)) {
		ctl_db_lost(&s->db);
		return false;
	}
	atomic_store(&s->term, term);
	atomic_store(&s->need_term, 0);
	log_info("leading with term %llu", (unsigned long long)term);
	return true;
}

/* A newer leader's term is in the database: stop acting until leading again. */
static void fenced(struct kstate *s, uint64_t newer)
{
	log_warn("a newer leader holds term %llu (this replica's is %llu): stopped acting",
		 (unsigned long long)newer, (unsigned long long)atomic_load(&s->term));
	atomic_store(&s->term, 0);
	atomic_store(&s->leading, 0);
}

/*
 * Confirms from the API server itself, not the cache, that the object whose
 * trigger id is id is gone (404, or re-created with another uid). Any error
 * keeps the row.
 */
static bool object_gone(void *arg, const char *ns, const char *name, const char *id)
{
	struct kstate *s = arg;
	struct kube_response r;
	char path[700], cur[700];
	bool gone = false;

	if (kube_path(path, sizeof(path), TRIGGERS_PREFIX, ns, TRIGGERS_PLURAL, name, NULL))
		return false;
	if (kube_request(s->client, KUBE_GET, path, NULL, &r) == 0) {
		if (kube_is_not_found(&r)) {
			gone = true;
		} else if (r.http_status == 200) {
			kmode_trigger_id(r.body, cur, sizeof(cur));
			gone = strcmp(cur, id) != 0;
		}
	}
	if (!gone)
		kube_workqueue_add(s->q, KEY_SYNC);
	kube_response_clear(&r);
	return gone;
}

void kmode_sync_pass(struct kstate *s)
{
	json_t *all = kube_informer_list(s->triggers), **objs;
	struct manifest_list m = {0};
	bool synced = kube_informer_has_synced(s->triggers);

	objs = valid_triggers(s, all, &m);
	if (!objs)
		goto out;
	if (kmode_may_act(s) && ctl_db_ensure(&s->db) && take_term(s)) {
		struct trigger_rows rows;
		struct triggers_db_fence fence = {
		    .term = atomic_load(&s->term), .gone = object_gone, .arg = s};
		/* removals only once the cache holds the whole collection */
		int rc = triggers_db_sync(s->db.conn, &m, synced, &fence);

		if (rc == -ESTALE) {
			fenced(s, fence.newer);
		} else if (rc || triggers_db_load(s->db.conn, &rows)) {
			ctl_db_lost(&s->db);
		} else {
			take_rows(s, &rows);
		}
	}
	/* never send a set before the table was read: it would clear the agents */
	if (s->rows_loaded && synced && kube_informer_has_synced(s->pods) && kmode_may_act(s)) {
		discover_agents(s);
		for (size_t k = 0; k < s->n_agents && kmode_may_act(s); k++) {
			/* before the set is compared: a new term is a new generation */
			s->agents[k].set.req.fencing_token = atomic_load(&s->term);
			build_agent_set(s, &s->agents[k], &m, objs);
			ctl_agent_program(&s->agents[k].a, &s->cfg->auth, &s->agents[k].set.req);
		}
		agent_rejections(s);
	}
	free(objs);
out:
	manifest_list_free(&m);
	json_decref(all);
}
