/*
 * test_kubepods.c - the agent's pod map (agent/process/kubepods.h) without a
 * server: pods in and out by UID and container id, labels as sorted JSON,
 * changes that do and do not bump the generation, bad objects and the
 * bounds (map full, labels too large).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kubepods.h"

static json_t *pod(const char *uid, const char *ns, const char *name, const char *labels,
		   const char *cid)
{
	json_t *o =
	    json_pack("{s:{s:s, s:s, s:s}}", "metadata", "uid", uid, "namespace", ns, "name", name);

	if (labels)
		json_object_set_new(json_object_get(o, "metadata"), "labels",
				    json_loads(labels, 0, NULL));
	if (cid)
		json_object_set_new(
		    o, "status", json_pack("{s:[{s:s}]}", "containerStatuses", "containerID", cid));
	return o;
}

#define UID_A "0b6d3c1e-2f4a-4e5b-9c7d-8e9f0a1b2c3d"
#define UID_B "1c7e4d2f-3a5b-4f6c-8d9e-9fa0b1c2d3e4"
#define CID_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

int main(void)
{
	struct kubepods_map *m = kubepods_map_new(2);
	struct kubepods_pod out = {0};
	json_t *a, *b, *c;
	uint64_t g;

	CHECK(m != NULL, "map");
	a = pod(UID_A, "shop", "checkout-1", "{\"tier\": \"web\", \"app\": \"checkout\"}",
		"containerd://" CID_A);
	CHECK(kubepods_map_upsert(m, a) == 1, "a new pod changes lookups");
	CHECK(kubepods_map_generation(m) == 1, "generation %llu",
	      (unsigned long long)kubepods_map_generation(m));
	CHECK(kubepods_map_find_uid(m, UID_A, &out), "found by uid");
	CHECK(strcmp(out.namespace_, "shop") == 0 && strcmp(out.name, "checkout-1") == 0, "%s/%s",
	      out.namespace_, out.name);
	CHECK(strcmp(out.labels_json, "{\"app\":\"checkout\",\"tier\":\"web\"}") == 0,
	      "labels sorted and compact: %s", out.labels_json);
	free(out.labels_json);
	out.labels_json = NULL;
	CHECK(kubepods_map_find_container(m, CID_A, &out) && strcmp(out.uid, UID_A) == 0,
	      "found by container id without the runtime prefix");
	free(out.labels_json);
	out.labels_json = NULL;
	CHECK(!kubepods_map_find_uid(m, UID_B, &out), "unknown uid");
	CHECK(!kubepods_map_find_container(m, "containerd://" CID_A, &out),
	      "a prefixed id is not a container id");

	/* The same pod again (a resync, a status change): nothing a lookup gives changes. */
	CHECK(kubepods_map_upsert(m, a) == 0, "unchanged");
	CHECK(kubepods_map_generation(m) == 1, "no new generation");
	json_decref(a);
	a = pod(UID_A, "shop", "checkout-1", "{\"app\": \"checkout\", \"tier\": \"api\"}", NULL);
	CHECK(kubepods_map_upsert(m, a) == 1, "a label change is a change");
	CHECK(!kubepods_map_find_container(m, CID_A, &out), "container ids replaced");

	/* No labels: {}; values that are not strings are left out. */
	b = pod(UID_B, "shop", "pay-1", "{\"n\": 1}", NULL);
	CHECK(kubepods_map_upsert(m, b) == 1, "b");
	CHECK(kubepods_map_find_uid(m, UID_B, &out) && strcmp(out.labels_json, "{}") == 0, "%s",
	      out.labels_json ? out.labels_json : "(null)");
	free(out.labels_json);
	out.labels_json = NULL;

	/* Bounds: the map holds 2. */
	c = pod("2d8f5e3a-4b6c-4a7d-9eaf-a0b1c2d3e4f5", "shop", "third", NULL, NULL);
	g = kubepods_map_generation(m);
	CHECK(kubepods_map_upsert(m, c) == -ENOSPC, "map full");
	CHECK(kubepods_map_count(m) == 2 && kubepods_map_generation(m) == g, "nothing changed");

	/* Objects without the fields a source needs are refused. */
	json_decref(c);
	c = json_pack("{s:{s:s}}", "metadata", "name", "no-uid");
	CHECK(kubepods_map_upsert(m, c) == -EINVAL, "no uid");

	/* Removal frees a slot. */
	CHECK(kubepods_map_remove(m, a) == 0, "removed");
	CHECK(kubepods_map_remove(m, a) == -ENOENT, "removed twice");
	CHECK(!kubepods_map_find_uid(m, UID_A, &out) && kubepods_map_count(m) == 1, "gone");

	/* Labels over KUBEPODS_LABELS_MAX are kept as {} (the pod is still named). */
	{
		json_t *big = pod(UID_A, "shop", "big", NULL, NULL);
		json_t *labels = json_object();
		char key[32], *val = malloc(2000);

		memset(val, 'v', 1999);
		val[1999] = '\0';
		for (int i = 0; i < 20; i++) {
			snprintf(key, sizeof(key), "k%d", i);
			json_object_set_new(labels, key, json_string(val));
		}
		json_object_set_new(json_object_get(big, "metadata"), "labels", labels);
		CHECK(kubepods_map_upsert(m, big) == 1, "big");
		CHECK(kubepods_map_find_uid(m, UID_A, &out) && strcmp(out.name, "big") == 0 &&
			  strcmp(out.labels_json, "{}") == 0,
		      "labels dropped");
		free(out.labels_json);
		free(val);
		json_decref(big);
	}
	json_decref(a);
	json_decref(b);
	json_decref(c);
	kubepods_map_free(m);
	return check_done();
}
