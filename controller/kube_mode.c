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
 *
 * Status writes and their Events are not made here: a trigger key computes
 * the status and hands the write to the status writers (kube_writer.c,
 * --status-workers threads, one write at a time per trigger, the newest
 * status only), so neither the pass nor the agents ever wait on the API
 * server's latency.
 *
 * This file owns the wiring: the state's life (setup, teardown), the
 * informers' handlers, what every file uses on an object (its trigger id,
 * its validation) and the write guard, the health probes, leader
 * election, the signal thread and the worker loop. The :sync pass, the
 * pods a trigger selects and the agents are kube_sync.c's; a trigger's
 * status and its events kube_status.c's; the writes kube_writer.c's; the
 * shared state kube_state.h.
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
#include "kube_state.h"
#include "manifest.h"
#include "traceprof/kube.h"
#include "traceprof/log.h"
#include "triggers_db.h"

/*
 * Whether this replica may write now: it leads, holds a term, and its last
 * Lease renewal began less than the renew deadline ago by its own clock
 * (a replica frozen past its Lease acts on nothing, even before its
 * elector notices). Checked right before every write.
 */
bool kmode_may_act(struct kstate *s)
{
	return atomic_load(&s->leading) && (!s->leader || kube_leader_may_act(s->leader));
}

/* ---- objects ------------------------------------------------------------ */

const char *kmode_str_at(const json_t *obj, const char *a, const char *b)
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
void kmode_trigger_id(const json_t *obj, char *out, size_t len)
{
	const char *uid = kmode_str_at(obj, "metadata", "uid");

	snprintf(out, len, "%s/%s/%.*s", kmode_str_at(obj, "metadata", "namespace"),
		 kmode_str_at(obj, "metadata", "name"), ID_UID_CHARS, uid ? uid : "");
}

/*
 * Validates the object's spec with the manifest parser (JSON is YAML): the
 * same checks as local mode, with Kubernetes' options. Returns 0 and *t
 * (the caller clears it), or -EINVAL and the reason in err.
 */
int kmode_validate(const json_t *obj, struct manifest_trigger *t, char *err, size_t errlen)
{
	static const struct manifest_opts opts = {.local = false};
	const char *ns = kmode_str_at(obj, "metadata", "namespace");
	const char *name = kmode_str_at(obj, "metadata", "name");
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
		kmode_trigger_id(obj, err, errlen);
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
	s->writer = kwriter_start(s, cfg->status_workers, err, sizeof(err));
	if (!s->writer) {
		log_error("status writers: %s", err);
		return -1;
	}
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
		    .wall_offset_s = cfg->test_clock_offset_s,
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
	kwriter_stop(s->writer); /* before the Lease is released, the queue and the emitter */
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

/* A trigger key: its status computed, and its write handed to the writers. */
static void reconcile_key(struct kstate *s, const char *k)
{
	int rc = kmode_reconcile(s, k);

	if (rc < 0)
		kube_workqueue_add_rate_limited(s->q, k);
	else if (rc == 0)
		kube_workqueue_forget(s->q, k); /* nothing to write */
	/* else the writer forgets the key once written, or retries it */
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
				kmode_sync_pass(s);
			note_db(s);
			kube_workqueue_add_after(s->q, KEY_SYNC, cfg->interval_ms);
		} else if (strcmp(k, KEY_RESYNC) == 0) {
			if (atomic_load(&s->leading))
				enqueue_all(s);
			kube_workqueue_add_after(s->q, KEY_RESYNC, cfg->resync_ms);
		} else if (!atomic_load(&s->leading)) {
			kube_workqueue_forget(s->q, k); /* the leader's business */
		} else {
			reconcile_key(s, k);
		}
		kube_workqueue_done(s->q, key);
	}
	pthread_kill(sig_thread, SIGTERM);
	pthread_join(sig_thread, NULL);
	teardown(s);
	return rc;
}
