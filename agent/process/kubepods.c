/*
 * kubepods.c - the pods of the agent's node (kubepods.h).
 *
 * Workload: one node's pods, a few hundred at most, changing a few times a
 * minute; lookups happen when the agent first looks at a process or
 * receives an OTLP export, never per sample. So the map is a plain array
 * searched linearly under one mutex, and a lookup copies the pod out
 * (labels as a new string) so that nothing the caller holds can change
 * under it.
 */
#include "kubepods.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "traceprof/kube.h"
#include "traceprof/log.h"

/* One pod in the map. */
struct kpod {
	char uid[64];	     /* metadata.uid */
	char namespace_[64]; /* metadata.namespace */
	char name[254];	     /* metadata.name */
	char *labels;	     /* metadata.labels as JSON (owned), "{}" if none */
	char (*cids)[65];    /* container ids, 64 hex digits (owned) */
	size_t ncids;	     /* entries in cids */
};

struct kubepods_map {
	pthread_mutex_t lock;	 /* everything below */
	struct kpod *pods;	 /* the pods, unordered */
	size_t n;		 /* pods in use */
	size_t max;		 /* capacity of pods */
	uint64_t generation;	 /* bumped when a lookup's answer changes */
	uint64_t dropped;	 /* pods refused: map full */
	uint64_t labels_dropped; /* pods whose labels were too large */
};

struct kubepods_map *kubepods_map_new(size_t max_pods)
{
	struct kubepods_map *m = calloc(1, sizeof(*m));

	if (!m)
		return NULL;
	m->max = max_pods ? max_pods : KUBEPODS_MAX_PODS;
	m->pods = calloc(m->max, sizeof(*m->pods));
	if (!m->pods) {
		free(m);
		return NULL;
	}
	pthread_mutex_init(&m->lock, NULL);
	return m;
}

static void kpod_clear(struct kpod *p)
{
	free(p->labels);
	free(p->cids);
	memset(p, 0, sizeof(*p));
}

void kubepods_map_free(struct kubepods_map *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->n; i++)
		kpod_clear(&m->pods[i]);
	free(m->pods);
	pthread_mutex_destroy(&m->lock);
	free(m);
}

static const char *md_str(const json_t *obj, const char *key)
{
	return json_string_value(json_object_get(json_object_get(obj, "metadata"), key));
}

static struct kpod *find_uid_locked(struct kubepods_map *m, const char *uid)
{
	for (size_t i = 0; i < m->n; i++)
		if (strcmp(m->pods[i].uid, uid) == 0)
			return &m->pods[i];
	return NULL;
}

/*
 * The 64 hex digits of a containerStatuses[].containerID
 * ("containerd://<id>", "cri-o://<id>", "docker://<id>"), or false.
 */
static bool container_hex(const char *s, char out[65])
{
	const char *p = s ? strstr(s, "://") : NULL;
	size_t i;

	p = p ? p + 3 : s;
	if (!p || strlen(p) != 64)
		return false;
	for (i = 0; i < 64; i++) {
		char c = p[i];

		if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
			return false;
		out[i] = c;
	}
	out[64] = '\0';
	return true;
}

/* The container ids of every kind of container status of pod, into a new array. */
static int read_cids(const json_t *pod, char (**out)[65], size_t *n)
{
	static const char *const lists[] = {"containerStatuses", "initContainerStatuses",
					    "ephemeralContainerStatuses"};
	const json_t *status = json_object_get(pod, "status");
	char(*cids)[65] = NULL;
	size_t k = 0;

	*out = NULL;
	*n = 0;
	for (size_t l = 0; l < sizeof(lists) / sizeof(lists[0]); l++) {
		const json_t *arr = json_object_get(status, lists[l]);
		const json_t *cs;
		size_t i;

		json_array_foreach(arr, i, cs)
		{
			char hex[65];

			if (k >= KUBEPODS_MAX_CONTAINERS)
				break;
			if (!container_hex(json_string_value(json_object_get(cs, "containerID")),
					   hex))
				continue;
			if (!cids) {
				cids = calloc(KUBEPODS_MAX_CONTAINERS, sizeof(*cids));
				if (!cids)
					return -ENOMEM;
			}
			memcpy(cids[k++], hex, sizeof(hex));
		}
	}
	*out = cids;
	*n = k;
	return 0;
}

/* metadata.labels as compact JSON with sorted keys, "{}" when absent; NULL on ENOMEM. */
static char *read_labels(struct kubepods_map *m, const json_t *pod)
{
	const json_t *labels = json_object_get(json_object_get(pod, "metadata"), "labels");
	json_t *clean = json_object();
	const char *k;
	json_t *v;
	char *s;

	if (!clean)
		return NULL;
	/* Label values are strings; anything else is not a label and is left out. */
	json_object_foreach((json_t *)labels, k, v) if (json_is_string(v))
	    json_object_set(clean, k, v);
	s = json_dumps(clean, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(clean);
	if (s && strlen(s) > KUBEPODS_LABELS_MAX) {
		free(s);
		s = strdup("{}");
		m->labels_dropped++;
	}
	return s;
}

int kubepods_map_upsert(struct kubepods_map *m, const json_t *pod)
{
	const char *uid = md_str(pod, "uid"), *ns = md_str(pod, "namespace"),
		   *name = md_str(pod, "name");
	struct kpod fresh = {0}, *p;
	int rc = 0;

	if (!uid || !*uid || !ns || !*ns || !name || !*name || strlen(uid) >= sizeof(fresh.uid) ||
	    strlen(ns) >= sizeof(fresh.namespace_) || strlen(name) >= sizeof(fresh.name))
		return -EINVAL;
	snprintf(fresh.uid, sizeof(fresh.uid), "%s", uid);
	snprintf(fresh.namespace_, sizeof(fresh.namespace_), "%s", ns);
	snprintf(fresh.name, sizeof(fresh.name), "%s", name);
	pthread_mutex_lock(&m->lock);
	fresh.labels = read_labels(m, pod);
	if (!fresh.labels || read_cids(pod, &fresh.cids, &fresh.ncids) != 0) {
		rc = -ENOMEM;
		goto out_unlock;
	}
	p = find_uid_locked(m, uid);
	if (!p) {
		if (m->n >= m->max) {
			m->dropped++;
			rc = -ENOSPC;
			goto out_unlock;
		}
		p = &m->pods[m->n++];
		rc = 1;
	} else {
		rc = strcmp(p->namespace_, fresh.namespace_) || strcmp(p->name, fresh.name) ||
		     strcmp(p->labels, fresh.labels);
		kpod_clear(p);
	}
	*p = fresh;
	memset(&fresh, 0, sizeof(fresh));
	if (rc == 1)
		m->generation++;
out_unlock:
	pthread_mutex_unlock(&m->lock);
	kpod_clear(&fresh);
	return rc;
}

int kubepods_map_remove(struct kubepods_map *m, const json_t *pod)
{
	const char *uid = md_str(pod, "uid");
	struct kpod *p;
	int rc = -ENOENT;

	if (!uid)
		return -ENOENT;
	pthread_mutex_lock(&m->lock);
	p = find_uid_locked(m, uid);
	if (p) {
		kpod_clear(p);
		*p = m->pods[--m->n]; /* the last one fills the hole */
		memset(&m->pods[m->n], 0, sizeof(m->pods[m->n]));
		rc = 0;
	}
	pthread_mutex_unlock(&m->lock);
	return rc;
}

static bool copy_out(const struct kpod *p, struct kubepods_pod *out)
{
	char *labels = strdup(p->labels);

	if (!labels)
		return false;
	memcpy(out->uid, p->uid, sizeof(out->uid));
	memcpy(out->namespace_, p->namespace_, sizeof(out->namespace_));
	memcpy(out->name, p->name, sizeof(out->name));
	out->labels_json = labels;
	return true;
}

bool kubepods_map_find_uid(struct kubepods_map *m, const char *uid, struct kubepods_pod *out)
{
	struct kpod *p;
	bool ok = false;

	if (!uid || !*uid)
		return false;
	pthread_mutex_lock(&m->lock);
	p = find_uid_locked(m, uid);
	if (p)
		ok = copy_out(p, out);
	pthread_mutex_unlock(&m->lock);
	return ok;
}

bool kubepods_map_find_container(struct kubepods_map *m, const char *container_id,
				 struct kubepods_pod *out)
{
	bool ok = false, found = false;

	if (!container_id || strlen(container_id) != 64)
		return false;
	pthread_mutex_lock(&m->lock);
	for (size_t i = 0; i < m->n && !found; i++)
		for (size_t c = 0; c < m->pods[i].ncids && !found; c++)
			if (memcmp(m->pods[i].cids[c], container_id, 64) == 0) {
				found = true;
				ok = copy_out(&m->pods[i], out);
			}
	pthread_mutex_unlock(&m->lock);
	return ok;
}

size_t kubepods_map_count(struct kubepods_map *m)
{
	size_t n;

	pthread_mutex_lock(&m->lock);
	n = m->n;
	pthread_mutex_unlock(&m->lock);
	return n;
}

uint64_t kubepods_map_generation(struct kubepods_map *m)
{
	uint64_t g;

	pthread_mutex_lock(&m->lock);
	g = m->generation;
	pthread_mutex_unlock(&m->lock);
	return g;
}

/* ---- the informer ---- */

struct kubepods {
	struct kube_config *cfg;      /* borrowed by the informer: freed after it */
	struct kube_informer *inf;    /* list + watch of the node's pods */
	struct kubepods_map *map;     /* filled by inf's handlers */
	uint64_t bad_objects;	      /* pods without uid/name/namespace */
	bool failing;		      /* an episode of errors is under way (main loop only) */
	uint64_t errors_seen;	      /* informer errors at the last check (main loop only) */
	uint64_t progress_seen;	      /* lists + events + bookmarks at the last check */
	char node[256];		      /* the node watched */
	void (*on_change)(void *ctx); /* a lookup's answer changed, or NULL */
	void *change_ctx;	      /* its context */
};

static void on_add(void *arg, const json_t *obj)
{
	struct kubepods *kp = arg;
	int rc = kubepods_map_upsert(kp->map, obj);

	if (rc == 1 && kp->on_change)
		kp->on_change(kp->change_ctx);
	else if (rc == -EINVAL)
		__atomic_fetch_add(&kp->bad_objects, 1, __ATOMIC_RELAXED);
	else if (rc == -ENOSPC)
		log_warn("kube: more than %zu pods on node=%s; pod uid=%s is not named",
			 (size_t)KUBEPODS_MAX_PODS, kp->node, md_str(obj, "uid"));
}

static void on_update(void *arg, const json_t *old_obj, const json_t *new_obj)
{
	(void)old_obj;
	on_add(arg, new_obj);
}

static void on_del(void *arg, const json_t *last_known)
{
	struct kubepods *kp = arg;

	kubepods_map_remove(kp->map, last_known);
}

struct kubepods *kubepods_start(const struct kubepods_opts *opts, char *err, size_t errlen)
{
	struct kube_informer_opts io = {0};
	struct kubepods *kp;
	char selector[300];
	int rc;

	if (!opts->node || !*opts->node || strlen(opts->node) >= sizeof(kp->node)) {
		snprintf(err, errlen, "the node name is needed to watch its pods (set node)");
		return NULL;
	}
	kp = calloc(1, sizeof(*kp));
	if (!kp) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	snprintf(kp->node, sizeof(kp->node), "%s", opts->node);
	kp->on_change = opts->on_change;
	kp->change_ctx = opts->change_ctx;
	if (opts->kubeconfig && *opts->kubeconfig) {
		struct kube_config_opts co = {.path = opts->kubeconfig};

		rc = kube_config_load(&co, &kp->cfg, err, errlen);
	} else {
		rc = kube_config_in_cluster(NULL, &kp->cfg, err, errlen);
	}
	if (rc)
		goto out_free;
	kp->map = kubepods_map_new(0);
	if (!kp->map) {
		snprintf(err, errlen, "out of memory");
		goto out_free;
	}
	snprintf(selector, sizeof(selector), "spec.nodeName=%s", kp->node);
	io.path = "/api/v1/pods";
	io.field_selector = selector;
	io.handlers = (struct kube_informer_handlers){on_add, on_update, on_del, kp};
	kp->inf = kube_informer_start(kp->cfg, &io, err, errlen);
	if (!kp->inf)
		goto out_free;
	log_info("kube: watching the pods of node=%s server=%s", kp->node, kp->cfg->server);
	return kp;
out_free:
	kubepods_map_free(kp->map);
	kube_config_free(kp->cfg);
	free(kp);
	return NULL;
}

void kubepods_stop(struct kubepods *kp)
{
	if (!kp)
		return;
	kube_informer_stop(kp->inf);
	kubepods_map_free(kp->map);
	kube_config_free(kp->cfg);
	free(kp);
}

bool kubepods_wait_synced(struct kubepods *kp, long timeout_ms)
{
	return kp && kube_informer_wait_synced(kp->inf, timeout_ms);
}

bool kubepods_find_uid(struct kubepods *kp, const char *uid, struct kubepods_pod *out)
{
	return kp && kubepods_map_find_uid(kp->map, uid, out);
}

bool kubepods_find_container(struct kubepods *kp, const char *container_id,
			     struct kubepods_pod *out)
{
	return kp && kubepods_map_find_container(kp->map, container_id, out);
}

uint64_t kubepods_generation(struct kubepods *kp)
{
	return kp ? kubepods_map_generation(kp->map) : 0;
}

void kubepods_check(struct kubepods *kp)
{
	struct kube_informer_stats st;
	uint64_t progress;

	if (!kp)
		return;
	kube_informer_get_stats(kp->inf, &st);
	progress = st.lists + st.events + st.bookmarks;
	if (st.errors > kp->errors_seen && !kp->failing) {
		kp->failing = true;
		log_warn("kube: cannot read the pods of node=%s from %s (unreachable or not "
			 "allowed: the agent's service account needs get, list and watch on pods); "
			 "profiling goes on, processes stay without pod names until it answers",
			 kp->node, kp->cfg->server);
	} else if (kp->failing && st.errors == kp->errors_seen && progress > kp->progress_seen) {
		kp->failing = false;
		log_info("kube: the API server answers again; pods of node=%s known=%zu", kp->node,
			 kubepods_map_count(kp->map));
	}
	kp->errors_seen = st.errors;
	kp->progress_seen = progress;
}

void kubepods_get_stats(struct kubepods *kp, struct kubepods_stats *st)
{
	struct kube_informer_stats is;

	memset(st, 0, sizeof(*st));
	if (!kp)
		return;
	kube_informer_get_stats(kp->inf, &is);
	pthread_mutex_lock(&kp->map->lock);
	st->pods_known = kp->map->n;
	st->pods_dropped = kp->map->dropped;
	st->labels_dropped = kp->map->labels_dropped;
	pthread_mutex_unlock(&kp->map->lock);
	st->errors = is.errors;
	st->synced = kube_informer_has_synced(kp->inf);
}
