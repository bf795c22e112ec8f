/*
 * kube_mode.c - the controller's Kubernetes mode (see kube_mode.h).
 *
 * Three informers (every namespace's TraceProfileTriggers, every pod, the
 * agent DaemonSet's pods) keep caches; their handlers only add keys to one
 * work queue. The main thread is the only worker, so the database
 * connection, the agents' channels and the trigger rows need no lock.
 * Keys:
 *
 *   "namespace/name"  reconcile one trigger's status: computed from the
 *                     cached object, its row and the agents' last status,
 *                     written through the status subresource only when it
 *                     differs from the object's (no write loops); events on
 *                     phase transitions
 *   ":sync"           the level-triggered pass over everything: validate
 *                     every cached trigger, bring the table in line
 *                     (triggers_db_sync), build each agent's desired set for
 *                     its node (pod UIDs and container ids of the selected
 *                     Running pods there), ApplyTriggers + GetStatus on every
 *                     agent, enqueue the triggers whose row changed and every
 *                     Active one; runs on any relevant change and every
 *                     --interval
 *   ":resync"         every trigger key, every --resync
 *
 * A failed reconcile is retried with the queue's per-key backoff. With
 * leader election only the leader takes keys from the queue; the others
 * keep their caches warm and drop what they are handed.
 */
#include "kube_mode.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "common.h"
#include "health.h"
#include "manifest.h"
#include "traceprof/kube.h"
#include "traceprof/log.h"
#include "triggers_db.h"

#define TRIGGERS_PREFIX "/apis/traceprof.dev/v1alpha1"
#define TRIGGERS_PLURAL "traceprofiletriggers"
#define KEY_SYNC	":sync"
#define KEY_RESYNC	":resync"
#define ID_UID_CHARS	8 /* uid characters in a trigger id */

struct kagent {
	struct ctl_agent a; /* channel and last status */
	struct ctl_set set; /* the desired set for its node */
	bool seen;	    /* found in the current pass */
};

struct kstate {
	const struct kube_mode_config *cfg;	    /* flags */
	struct kube_config *kc;			    /* API server and credentials */
	struct kube_client *client;		    /* the worker's client (status writes) */
	struct kube_informer *triggers;		    /* every TraceProfileTrigger */
	struct kube_informer *pods;		    /* every pod */
	struct kube_informer *agent_pods;	    /* the agents' pods, or NULL */
	struct kube_workqueue *q;		    /* keys to reconcile */
	struct kube_leader *leader;		    /* NULL without leader election */
	struct kube_events *events;		    /* Events on transitions */
	atomic_int leading;			    /* this replica acts */
	atomic_int need_term;			    /* took the Lease: take a new term */
	atomic_ullong term;			    /* its term (fencing token); 0: none */
	struct ctl_db db;			    /* the database */
	struct trigger_rows rows;		    /* rows of the last pass that reached it */
	bool rows_loaded;			    /* the table was read at least once */
	struct kagent agents[KUBE_MODE_MAX_AGENTS]; /* one per node */
	size_t n_agents;			    /* entries of agents */
	char agent_namespace[256];		    /* where the agent pods are */
	const char *lease_namespace;		    /* where the Lease is */
	struct health *health;			    /* --health-addr server, or NULL */
	atomic_llong loop_ms;			    /* monotonic ms: the worker took a key */
	atomic_size_t n_agents_seen;		    /* n_agents, for the health thread */
	atomic_int db_ok;			    /* the last pass reached the database */
	pthread_mutex_t db_error_lock;		    /* guards db_error */
	char db_error[320];			    /* why not, while !db_ok */
};

/*
 * Whether this replica may write now: it leads, holds a term, and its last
 * Lease renewal began less than the renew deadline ago by its own clock
 * (a replica frozen past its Lease acts on nothing, even before its
 * elector notices). Checked right before every write.
 */
static bool may_act(struct kstate *s)
{
	return atomic_load(&s->leading) && (!s->leader || kube_leader_may_act(s->leader));
}

/* ---- objects ------------------------------------------------------------ */

static const char *str_at(const json_t *obj, const char *a, const char *b)
{
	const json_t *v = json_object_get(obj, a);

	if (b)
		v = json_object_get(v, b);
	return json_is_string(v) ? json_string_value(v) : NULL;
}

static void enqueue_key_of(struct kstate *s, const json_t *obj)
{
	char key[600];

	if (kube_object_key(obj, key, sizeof(key)) == 0)
		kube_workqueue_add(s->q, key);
}

static void on_trigger_add(void *arg, const json_t *obj)
{
	struct kstate *s = arg;

	enqueue_key_of(s, obj);
	kube_workqueue_add(s->q, KEY_SYNC);
}

static void on_trigger_update(void *arg, const json_t *old_obj, const json_t *new_obj)
{
	struct kstate *s = arg;
	const json_t *g0 = json_object_get(json_object_get(old_obj, "metadata"), "generation");
	const json_t *g1 = json_object_get(json_object_get(new_obj, "metadata"), "generation");

	enqueue_key_of(s, new_obj);
	/* a status write changes no generation: it calls for no pass */
	if (!json_equal(g0, g1))
		kube_workqueue_add(s->q, KEY_SYNC);
}

static void on_trigger_del(void *arg, const json_t *obj)
{
	struct kstate *s = arg;

	enqueue_key_of(s, obj);
	kube_workqueue_add(s->q, KEY_SYNC);
}

static void on_pod_add(void *arg, const json_t *obj)
{
	(void)obj;
	kube_workqueue_add(((struct kstate *)arg)->q, KEY_SYNC);
}

static void on_pod_update(void *arg, const json_t *old_obj, const json_t *new_obj)
{
	(void)old_obj;
	on_pod_add(arg, new_obj);
}

/* "namespace/name/uid prefix": stable for one object, new for a re-created one. */
static void trigger_id(const json_t *obj, char *out, size_t len)
{
	const char *uid = str_at(obj, "metadata", "uid");

	snprintf(out, len, "%s/%s/%.*s", str_at(obj, "metadata", "namespace"),
		 str_at(obj, "metadata", "name"), ID_UID_CHARS, uid ? uid : "");
}

/*
 * Validates the object's spec with the manifest parser (JSON is YAML): the
 * same checks as local mode, with Kubernetes' options. Returns 0 and *t
 * (the caller clears it), or -EINVAL and the reason in err.
 */
static int validate(const json_t *obj, struct manifest_trigger *t, char *err, size_t errlen)
{
	static const struct manifest_opts opts = {.local = false};
	const char *ns = str_at(obj, "metadata", "namespace");
	const char *name = str_at(obj, "metadata", "name");
	struct manifest_list l = {0};
	char display[300], *text;
	json_t *doc;
	int rc = -EINVAL;

	if (!ns || !name) {
		snprintf(err, errlen, "metadata: namespace and name required");
		return -EINVAL;
	}
	snprintf(display, sizeof(display), "%s/%s", ns, name);
	doc = json_pack("{s:s, s:s, s:{s:s, s:s}, s:O?}", "apiVersion", MANIFEST_API_VERSION,
			"kind", MANIFEST_KIND, "metadata", "name", name, "namespace", ns, "spec",
			json_object_get(obj, "spec"));
	text = doc ? json_dumps(doc, 0) : NULL;
	json_decref(doc);
	if (!text) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	if (manifest_parse_buffer(&l, display, text, strlen(text), &opts) == 0 && l.n == 1) {
		*t = l.items[0];
		l.n = 0;
		trigger_id(obj, err, errlen);
		t->id = strdup(err);
		err[0] = '\0';
		rc = t->id ? 0 : -ENOMEM;
		if (rc)
			manifest_trigger_clear(t);
	} else if (l.n_errors) {
		const char *m = l.errors[0].message;
		size_t dl = strlen(display);

		/* the message starts with the display name: the object is known */
		if (strncmp(m, display, dl) == 0 && m[dl] == ':' && m[dl + 1] == ' ')
			m += dl + 2;
		snprintf(err, errlen, "%s", m);
	} else {
		snprintf(err, errlen, "spec: not a single trigger");
	}
	free(text);
	manifest_list_free(&l);
	return rc;
}

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
		const char *have = str_at(labels, k, NULL);

		if (!have || !json_is_string(v) || strcmp(have, json_string_value(v)) != 0)
			return false;
	}
	json_array_foreach(json_object_get(sel, "matchExpressions"), i, e)
	{
		const char *key = str_at(e, "key", NULL), *op = str_at(e, "operator", NULL);
		const char *have = key ? str_at(labels, key, NULL) : NULL;
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
static json_t *selected_pods(struct kstate *s, const json_t *obj, json_t **containers)
{
	const json_t *sel = json_object_get(json_object_get(obj, "spec"), "selector");
	const char *ns = str_at(obj, "metadata", "namespace");
	json_t *all = kube_informer_list(s->pods), *out = json_array(), *p;
	size_t i;

	if (containers)
		*containers = json_array();
	json_array_foreach(all, i, p)
	{
		const json_t *md = json_object_get(p, "metadata"), *cs, *c;
		const char *pns = str_at(md, "namespace", NULL), *phase;
		json_t *ids;
		size_t j;

		if (!sel || !pns || !ns || strcmp(pns, ns) != 0)
			continue;
		phase = str_at(p, "status", "phase");
		if (!phase || strcmp(phase, "Running") != 0 ||
		    json_object_get(md, "deletionTimestamp"))
			continue;
		if (!selector_matches(sel, json_object_get(md, "labels")))
			continue;
		json_array_append_new(out, json_pack("{s:s, s:s?, s:s?, s:s?}", "namespace", pns,
						     "name", str_at(md, "name", NULL), "uid",
						     str_at(md, "uid", NULL), "node",
						     str_at(p, "spec", "nodeName")));
		if (!containers)
			continue;
		ids = json_array();
		cs = json_object_get(json_object_get(p, "status"), "containerStatuses");
		json_array_foreach(cs, j, c)
		{
			const char *id = str_at(c, "containerID", NULL), *sep;

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
			const char *ip = str_at(p, "status", "podIP");
			const char *node = str_at(p, "spec", "nodeName");
			const char *phase = str_at(p, "status", "phase");
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
		const char *pn = str_at(pod, "node", NULL), *uid = str_at(pod, "uid", NULL);
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
			json_t *containers, *pods = selected_pods(s, objs[i], &containers);
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
	const char *cx = str_at(x, "metadata", "creationTimestamp");
	const char *cy = str_at(y, "metadata", "creationTimestamp");
	int c = strcmp(cx ? cx : "", cy ? cy : "");

	return c ? c : strcmp(str_at(x, "metadata", "name"), str_at(y, "metadata", "name"));
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

		if (validate(sorted[i], &m->items[m->n], err, sizeof(err)) == 0)
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
			trigger_id(r.body, cur, sizeof(cur));
			gone = strcmp(cur, id) != 0;
		}
	}
	if (!gone)
		kube_workqueue_add(s->q, KEY_SYNC);
	kube_response_clear(&r);
	return gone;
}

static void sync_pass(struct kstate *s)
{
	json_t *all = kube_informer_list(s->triggers), **objs;
	struct manifest_list m = {0};
	bool synced = kube_informer_has_synced(s->triggers);

	objs = valid_triggers(s, all, &m);
	if (!objs)
		goto out;
	if (may_act(s) && ctl_db_ensure(&s->db) && take_term(s)) {
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
	if (s->rows_loaded && synced && kube_informer_has_synced(s->pods) && may_act(s)) {
		discover_agents(s);
		for (size_t k = 0; k < s->n_agents && may_act(s); k++) {
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
		if (str_at(c, "type", NULL) && strcmp(str_at(c, "type", NULL), type) == 0)
			old = c;
	}
	/* lastTransitionTime changes only when the status does */
	if (old && str_at(old, "status", NULL) && strcmp(str_at(old, "status", NULL), status) == 0)
		ltt = str_at(old, "lastTransitionTime", NULL);
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
			     size_t n_pods, char *msg, size_t msglen)
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
		snprintf(msg, msglen, "no running pod matches spec.selector");
	else if (!selector && reached && reporting == reached && !procs)
		snprintf(msg, msglen, "no target process on any agent (service %s)", service);
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
	bool valid = validate(fresh, &t, err, sizeof(err)) == 0;

	trigger_id(fresh, id, sizeof(id));
	json_object_set_new(st, "observedGeneration", json_integer(gen));
	if (!valid) {
		phase = "Rejected";
		reason = "InvalidSpec";
		snprintf(msg, sizeof(msg), "%s", err);
	} else if ((r = row_of(s, id))) {
		json_t *pods = t.has_selector ? selected_pods(s, fresh, NULL) : json_array();

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
			      status_agents(s, id, r->service, t.has_selector,
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
	const char *was = str_at(old, "phase", NULL), *phase = str_at(now, "phase", NULL);
	const char *reason = str_at(now, "reason", NULL), *msg = str_at(now, "message", NULL);
	const char *old_msg = str_at(old, "message", NULL);
	struct kube_object_ref ref = {
	    .api_version = MANIFEST_API_VERSION,
	    .kind = MANIFEST_KIND,
	    .namespace = str_at(obj, "metadata", "namespace"),
	    .name = str_at(obj, "metadata", "name"),
	    .uid = str_at(obj, "metadata", "uid"),
	};
	bool changed = !was || strcmp(was, phase) != 0 ||
		       (reason && (!str_at(old, "reason", NULL) ||
				   strcmp(reason, str_at(old, "reason", NULL)) != 0));

	if (!s->events || !phase)
		return;
	if (changed && strcmp(phase, "Active") == 0)
		kube_event_emit(s->events, &ref, "Normal", "Activated",
				"trigger active: sampling raised for its targets until %s",
				str_at(now, "deadline", NULL) ? str_at(now, "deadline", NULL)
							      : "the deadline");
	else if (changed && strcmp(phase, "Completed") == 0)
		kube_event_emit(s->events, &ref, "Normal", "Completed", "collected %s requests",
				str_at(now, "progress", NULL));
	else if (changed && strcmp(phase, "Expired") == 0)
		kube_event_emit(s->events, &ref, "Normal", "Expired",
				"deadline passed with %s requests collected",
				str_at(now, "progress", NULL));
	else if (changed && strcmp(phase, "Rejected") == 0)
		kube_event_emit(s->events, &ref, "Warning",
				reason && strcmp(reason, "InvalidSpec") == 0 ? "InvalidSpec"
									     : "Rejected",
				"%s", msg ? msg : "rejected");
	if (strcmp(phase, "Active") == 0 && msg && (!old_msg || strcmp(old_msg, msg) != 0))
		kube_event_emit(s->events, &ref, "Warning", "NoTargets", "%s", msg);
}

/* One trigger's status. Returns 0, or -errno to retry with backoff. */
static int reconcile(struct kstate *s, const char *key)
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
	rc = kube_path(path, sizeof(path), TRIGGERS_PREFIX, str_at(obj, "metadata", "namespace"),
		       TRIGGERS_PLURAL, str_at(obj, "metadata", "name"), NULL);
	if (!rc && !may_act(s))
		rc = -EPERM; /* lost the lease meanwhile, or past the renew deadline: write nothing
			      */
	if (!rc)
		rc = kube_update_status(s->client, path, copy, status_fn, s, 0, &resp);
	if (rc == 0) {
		const json_t *written = json_object_get(resp.body, "status");

		log_debug("status written key=%s phase=%s", key, str_at(written, "phase", NULL));
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

static void enqueue_all(struct kstate *s)
{
	json_t *all = kube_informer_list(s->triggers), *o;
	size_t i;

	json_array_foreach(all, i, o) enqueue_key_of(s, o);
	json_decref(all);
}

/* ---- health --------------------------------------------------------------- */

/*
 * After each :sync: whether the database answered. The leader's pass has
 * just used it; a follower runs no pass and checks it with a trivial
 * statement, so that it reports whether it could take over.
 */
static void note_db(struct kstate *s)
{
	bool ok;

	if (!atomic_load(&s->leading) && ctl_db_ensure(&s->db)) {
		PGresult *r = PQexec(s->db.conn, "SELECT 1");

		if (PQresultStatus(r) != PGRES_TUPLES_OK) {
			PQclear(r);
			ctl_db_lost(&s->db);
		} else {
			PQclear(r);
		}
	}
	ok = s->db.conn && !s->db.down;
	if (!ok) {
		pthread_mutex_lock(&s->db_error_lock);
		snprintf(s->db_error, sizeof(s->db_error), "database unreachable: %s",
			 s->db.error[0] ? s->db.error : "not connected yet");
		pthread_mutex_unlock(&s->db_error_lock);
	}
	atomic_store(&s->db_ok, ok);
	atomic_store(&s->n_agents_seen, s->n_agents);
}

/*
 * The worker has taken a key recently. A pass calls every agent (two calls
 * of at most CTL_AGENT_TIMEOUT_MS each) and the database, so the allowance
 * grows with the agents.
 */
static bool probe_live(void *arg, char *why, size_t len)
{
	struct kstate *s = arg;
	int64_t idle = ctl_now_ms(CLOCK_MONOTONIC) - atomic_load(&s->loop_ms);
	int64_t limit = 60000 + 3 * (int64_t)s->cfg->interval_ms +
			2 * CTL_AGENT_TIMEOUT_MS * (int64_t)atomic_load(&s->n_agents_seen);

	if (idle <= limit)
		return true;
	snprintf(why, len, "the reconcile loop has taken no work for %lld ms (limit %lld ms)",
		 (long long)idle, (long long)limit);
	return false;
}

/* An informer that has failed for longer than --stuck-after: true and why. */
static bool stuck(struct kstate *s, struct kube_informer *inf, const char *what, char *why,
		  size_t len)
{
	struct kube_informer_stats st;
	int limit = s->cfg->stuck_ms > 0 ? s->cfg->stuck_ms : 60000;

	if (!inf)
		return false;
	kube_informer_get_stats(inf, &st);
	if (st.failing_ms < limit)
		return false;
	snprintf(why, len, "the %s watch has failed for %lld s: %s", what,
		 (long long)(st.failing_ms / 1000), st.last_error);
	return true;
}

/*
 * Ready: caches filled, no watch failing for longer than --stuck-after, and
 * the database reachable, leader or not.
 */
static bool probe_ready(void *arg, char *why, size_t len)
{
	struct kstate *s = arg;

	if (!kube_informer_has_synced(s->triggers))
		snprintf(why, len, "the TraceProfileTrigger list is not synced yet");
	else if (!kube_informer_has_synced(s->pods))
		snprintf(why, len, "the pod list is not synced yet");
	else if (s->agent_pods && !kube_informer_has_synced(s->agent_pods))
		snprintf(why, len, "the agent pod list is not synced yet");
	else if (stuck(s, s->triggers, "TraceProfileTrigger", why, len) ||
		 stuck(s, s->pods, "pod", why, len) ||
		 stuck(s, s->agent_pods, "agent pod", why, len))
		;
	else if (!atomic_load(&s->db_ok)) {
		pthread_mutex_lock(&s->db_error_lock);
		snprintf(why, len, "%s", s->db_error);
		pthread_mutex_unlock(&s->db_error_lock);
	} else
		return true;
	return false;
}

/* ---- leader election, signals, the loop ---------------------------------- */

static void started_leading(void *arg)
{
	struct kstate *s = arg;

	log_info("leading: this replica reconciles");
	atomic_store(&s->need_term, 1);
	atomic_store(&s->leading, 1);
	kube_workqueue_add(s->q, KEY_SYNC);
	kube_workqueue_add(s->q, KEY_RESYNC);
}

static void stopped_leading(void *arg)
{
	struct kstate *s = arg;

	if (atomic_exchange(&s->leading, 0))
		log_warn("lost the leader lease: stopped acting");
	atomic_store(&s->term, 0);
}

static void new_leader(void *arg, const char *identity)
{
	(void)arg;
	log_info("leader is %s", *identity ? identity : "(none)");
}

static void *signal_thread(void *arg)
{
	struct kstate *s = arg;
	sigset_t mask;
	int sig = 0;

	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	sigwait(&mask, &sig);
	log_info("stopping on signal %d", sig);
	atomic_store(&s->leading, 0);
	kube_workqueue_shutdown(s->q);
	return NULL;
}

static struct kube_informer *informer(struct kstate *s, const char *path, const char *labels,
				      const struct kube_informer_handlers *h)
{
	struct kube_informer_opts o = {.path = path, .label_selector = labels, .handlers = *h};
	char err[512];
	struct kube_informer *inf = kube_informer_start(s->kc, &o, err, sizeof(err));

	if (!inf)
		log_error("cannot watch %s: %s", path, err);
	return inf;
}

static int setup(struct kstate *s)
{
	const struct kube_mode_config *cfg = s->cfg;
	struct kube_informer_handlers th = {on_trigger_add, on_trigger_update, on_trigger_del, s};
	struct kube_informer_handlers ph = {on_pod_add, on_pod_update, on_pod_add, s};
	struct kube_config_opts co = {.path = cfg->kubeconfig, .context = cfg->context};
	struct kube_events_opts eo = {.component = "traceprof-controller"};
	char err[512], path[512];
	int rc;

	rc = cfg->in_cluster ? kube_config_in_cluster(NULL, &s->kc, err, sizeof(err))
			     : kube_config_load(&co, &s->kc, err, sizeof(err));
	if (rc) {
		log_error("kubernetes configuration: %s", err);
		return -1;
	}
	snprintf(s->agent_namespace, sizeof(s->agent_namespace), "%s",
		 cfg->agent_namespace ? cfg->agent_namespace : s->kc->namespace);
	s->lease_namespace = cfg->lease_namespace ? cfg->lease_namespace : s->kc->namespace;
	if (!(s->client = kube_client_new(s->kc, NULL, err, sizeof(err)))) {
		log_error("kubernetes client: %s", err);
		return -1;
	}
	if (!(s->events = kube_events_new(s->kc, &eo, err, sizeof(err))))
		log_warn("no events will be recorded: %s", err);
	s->q = kube_workqueue_new();
	if (!s->q)
		return -1;
	snprintf(path, sizeof(path), "%s/%s", TRIGGERS_PREFIX, TRIGGERS_PLURAL);
	s->triggers = informer(s, path, NULL, &th);
	s->pods = informer(s, "/api/v1/pods", NULL, &ph);
	if (cfg->agent_selector && *cfg->agent_selector) {
		rc = kube_path(path, sizeof(path), "/api/v1", s->agent_namespace, "pods", NULL,
			       NULL);
		s->agent_pods = rc ? NULL : informer(s, path, cfg->agent_selector, &ph);
	}
	if (!s->triggers || !s->pods)
		return -1;
	log_info("kubernetes mode server=%s (%s) agents: %zu given, selector '%s' in namespace %s",
		 s->kc->server, s->kc->source, cfg->n_agents,
		 cfg->agent_selector ? cfg->agent_selector : "", s->agent_namespace);
	if (cfg->health_addr) {
		struct health_probes hp = {probe_live, probe_ready, s};

		s->health = health_start(cfg->health_addr, &hp, err, sizeof(err));
		if (!s->health) {
			log_error("health endpoint: %s", err);
			return -1;
		}
	}
	if (!kube_informer_wait_synced(s->triggers, 30000))
		log_warn("triggers not listed yet (the CRD installed?); still trying");
	if (cfg->leader_elect) {
		struct kube_leader_opts lo = {
		    .namespace = s->lease_namespace,
		    .name = KUBE_MODE_LEASE,
		    .identity = cfg->identity,
		    .started_leading = started_leading,
		    .stopped_leading = stopped_leading,
		    .new_leader = new_leader,
		    .arg = s,
		};

		s->leader = kube_leader_start(s->kc, &lo, err, sizeof(err));
		if (!s->leader) {
			log_error("leader election: %s", err);
			return -1;
		}
		log_info("campaigning for the lease %s/%s as %s", s->lease_namespace,
			 KUBE_MODE_LEASE, kube_leader_identity(s->leader));
	} else {
		started_leading(s);
	}
	return 0;
}

static void teardown(struct kstate *s)
{
	health_stop(s->health);
	if (s->leader)
		kube_leader_stop(s->leader);
	if (s->triggers)
		kube_informer_stop(s->triggers);
	if (s->pods)
		kube_informer_stop(s->pods);
	if (s->agent_pods)
		kube_informer_stop(s->agent_pods);
	if (s->q)
		kube_workqueue_free(s->q);
	if (s->events)
		kube_events_free(s->events);
	kube_client_free(s->client);
	for (size_t k = 0; k < s->n_agents; k++) {
		ctl_agent_clear(&s->agents[k].a);
		ctl_set_free(&s->agents[k].set);
	}
	trigger_rows_free(&s->rows);
	ctl_db_close(&s->db);
	kube_config_free(s->kc);
}

int kube_mode_run(const struct kube_mode_config *cfg)
{
	static struct kstate st; /* large (agents): not on the stack */
	struct kstate *s = &st;
	pthread_t sig_thread;
	sigset_t mask;
	const char *key;
	int rc = 0;

	s->cfg = cfg;
	s->db.conninfo = cfg->db;
	pthread_mutex_init(&s->db_error_lock, NULL);
	atomic_store(&s->loop_ms, ctl_now_ms(CLOCK_MONOTONIC));
	/* block the signals in every thread; one thread waits for them */
	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &mask, NULL);
	if (setup(s)) {
		teardown(s);
		return 2;
	}
	if (pthread_create(&sig_thread, NULL, signal_thread, s)) {
		teardown(s);
		return 2;
	}
	kube_workqueue_add(s->q, KEY_SYNC); /* a follower checks the database too */
	while (kube_workqueue_get(s->q, &key) == 0) {
		char k[600];

		snprintf(k, sizeof(k), "%s", key);
		atomic_store(&s->loop_ms, ctl_now_ms(CLOCK_MONOTONIC));
		if (strcmp(k, KEY_SYNC) == 0) {
			if (atomic_load(&s->leading))
				sync_pass(s);
			note_db(s);
			kube_workqueue_add_after(s->q, KEY_SYNC, cfg->interval_ms);
		} else if (strcmp(k, KEY_RESYNC) == 0) {
			if (atomic_load(&s->leading))
				enqueue_all(s);
			kube_workqueue_add_after(s->q, KEY_RESYNC, cfg->resync_ms);
		} else if (!atomic_load(&s->leading)) {
			kube_workqueue_forget(s->q, k); /* the leader's business */
		} else if (reconcile(s, k)) {
			kube_workqueue_add_rate_limited(s->q, k);
		} else {
			kube_workqueue_forget(s->q, k);
		}
		kube_workqueue_done(s->q, key);
	}
	pthread_kill(sig_thread, SIGTERM);
	pthread_join(sig_thread, NULL);
	teardown(s);
	return rc;
}
