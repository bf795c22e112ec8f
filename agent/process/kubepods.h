/*
 * kubepods.h - the pods of the agent's node, from the Kubernetes API.
 *
 * The agent finds a process's pod UID and container id in its cgroup
 * (identity.c); the pod's namespace, name and labels come from here. A
 * kube_informer (lib/kube/kube_informer.c, its own thread) lists and watches
 * /api/v1/pods?fieldSelector=spec.nodeName=NODE; its handlers keep a map
 * pod UID -> (namespace, name, labels, container ids). Lookups copy out
 * under a mutex, so any thread may call them. Memory is bounded: at most
 * KUBEPODS_MAX_PODS pods (a node runs a few hundred), KUBEPODS_MAX_CONTAINERS
 * container ids and KUBEPODS_LABELS_MAX bytes of labels per pod; beyond
 * them pods or labels are dropped and counted.
 *
 * The map (kubepods_map_*) has no thread or network and is tested alone
 * (tests/unit/test_kubepods.c); kubepods_start() puts it behind an informer.
 */
#ifndef TRACEPROF_AGENT_KUBEPODS_H
#define TRACEPROF_AGENT_KUBEPODS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#define KUBEPODS_MAX_PODS	4096  /* pods kept (kubelet's max-pods is 110 by default) */
#define KUBEPODS_MAX_CONTAINERS 32    /* container ids kept per pod */
#define KUBEPODS_LABELS_MAX	16384 /* bytes of one pod's labels as JSON */

/* One pod, as copied out of the map. */
struct kubepods_pod {
	char uid[64];	     /* metadata.uid */
	char namespace_[64]; /* metadata.namespace (a DNS label: at most 63) */
	char name[254];	     /* metadata.name (a DNS subdomain: at most 253) */
	char *labels_json;   /* metadata.labels as a JSON object, "{}" if none; the caller frees */
};

/* ---- the map ---- */

struct kubepods_map;

/* A map of at most max_pods pods (0: KUBEPODS_MAX_PODS); NULL on ENOMEM. */
struct kubepods_map *kubepods_map_new(size_t max_pods);
void kubepods_map_free(struct kubepods_map *m);
/*
 * Adds or replaces the pod object (borrowed). Returns 1 when the pod is
 * new or its namespace, name or labels changed, 0 when nothing a lookup
 * returns changed (container ids may have), -EINVAL for an object without
 * metadata.uid, .name or .namespace, -ENOSPC when the map is full (the pod
 * is dropped and counted), -ENOMEM.
 */
int kubepods_map_upsert(struct kubepods_map *m, const json_t *pod);
/* Forgets the pod with obj's metadata.uid; 0, or -ENOENT if unknown. */
int kubepods_map_remove(struct kubepods_map *m, const json_t *pod);
/*
 * Copies the pod with this UID (or, for kubepods_map_find_container, the
 * pod one of whose containers has this id: 64 hex digits, no runtime
 * prefix) into *out; the caller frees out->labels_json. false when
 * unknown (out untouched) or on ENOMEM.
 */
bool kubepods_map_find_uid(struct kubepods_map *m, const char *uid, struct kubepods_pod *out);
bool kubepods_map_find_container(struct kubepods_map *m, const char *container_id,
				 struct kubepods_pod *out);
size_t kubepods_map_count(struct kubepods_map *m);
/* Bumped whenever an upsert returns 1: processes waiting for their pod look again. */
uint64_t kubepods_map_generation(struct kubepods_map *m);

/* ---- the informer behind it ---- */

struct kubepods_opts {
	const char *kubeconfig; /* path; NULL or "": in-cluster */
	const char *node;	/* spec.nodeName of the pods watched (required) */
	/* called from the informer's thread when a pod arrives or is renamed, or NULL */
	void (*on_change)(void *ctx);
	void *change_ctx; /* its context */
};

struct kubepods_stats {
	uint64_t pods_known;	 /* pods in the map now */
	uint64_t pods_dropped;	 /* pods not kept: map full */
	uint64_t labels_dropped; /* pods whose labels were over KUBEPODS_LABELS_MAX (kept as {}) */
	uint64_t errors;	 /* failed LIST/WATCH calls (unreachable, 401, 403, ...) */
	bool synced;		 /* the first LIST has been applied */
};

struct kubepods;

/*
 * Loads the configuration (a kubeconfig file or the in-cluster service
 * account) and starts the informer. Failing to read the configuration is
 * an error (NULL, message in err); an API server that cannot be reached or
 * refuses is not: the informer retries with backoff and kubepods_check()
 * logs it once per episode.
 */
struct kubepods *kubepods_start(const struct kubepods_opts *opts, char *err, size_t errlen);
void kubepods_stop(struct kubepods *kp);
/* Waits up to timeout_ms for the first LIST; true when it arrived. */
bool kubepods_wait_synced(struct kubepods *kp, long timeout_ms);
bool kubepods_find_uid(struct kubepods *kp, const char *uid, struct kubepods_pod *out);
bool kubepods_find_container(struct kubepods *kp, const char *container_id,
			     struct kubepods_pod *out);
uint64_t kubepods_generation(struct kubepods *kp);
/*
 * Called from the agent's main loop (at most once a second): logs once when
 * the API server starts failing (the agent keeps profiling) and once when
 * it answers again.
 */
void kubepods_check(struct kubepods *kp);
void kubepods_get_stats(struct kubepods *kp, struct kubepods_stats *st);

#endif
