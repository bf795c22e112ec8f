/*
 * test_manifest: TraceProfileTrigger manifests as a user writes them. Valid
 * ones give the fields and defaults the agents get; every kind of mistake is
 * refused with a message naming the file, the document (when there are
 * several), the field and why, while the other documents still count; size,
 * depth and aliases are bounded. Messages quote at most a short escaped
 * excerpt, and nothing of a file that is not the user's own; only regular
 * files are read; the directory cache parses a file again only when it
 * changed; a selector is kept in the spec JSON.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "jsonbuf.h"
#include "manifest.h"
#include "manifest_dir.h"

static const struct manifest_opts local = {.local = true};

#define HEAD "apiVersion: traceprof.dev/v1alpha1\nkind: TraceProfileTrigger\n"

static void parse(struct manifest_list *l, const char *text)
{
	memset(l, 0, sizeof(*l));
	CHECK(manifest_parse_buffer(l, "t.yaml", text, strlen(text), &local) == 0, "parse failed");
}

/* text must be refused with one error containing every one of the parts. */
static void expect_error(const char *text, const char *const *parts)
{
	struct manifest_list l;

	parse(&l, text);
	CHECK(l.n == 0, "accepted: %s", text);
	CHECK(l.n_errors == 1, "%zu errors for: %s", l.n_errors, text);
	if (l.n_errors == 1)
		for (const char *const *p = parts; *p; p++)
			CHECK(strstr(l.errors[0].message, *p), "message \"%s\" lacks \"%s\"",
			      l.errors[0].message, *p);
	manifest_list_free(&l);
}

#define EXPECT_ERROR(text, ...) expect_error(text, (const char *const[]){__VA_ARGS__, NULL})

static void test_valid_full(void)
{
	struct manifest_list l;
	const struct manifest_trigger *t;

	parse(&l, HEAD "metadata: {name: slow-payments, namespace: shop, labels: {team: pay}}\n"
		       "spec:\n"
		       "  service: payment-svc\n"
		       "  targets: {pids: [42, 43], cgroupPaths: [/system.slice/pay.service]}\n"
		       "  match: {minDuration: 200ms, maxDuration: 10s, status: \"4XX, 503\",\n"
		       "          route: \"/api/pay*\", method: post}\n"
		       "  sampling: {frequencyHz: 50}\n"
		       "  maxRequests: 25\n"
		       "  timeout: 1.5m\n");
	CHECK(l.n == 1 && l.n_errors == 0, "n=%zu errors=%zu %s", l.n, l.n_errors,
	      l.n_errors ? l.errors[0].message : "");
	if (l.n != 1)
		goto out;
	t = &l.items[0];
	CHECK(strcmp(t->namespace_, "shop") == 0 && strcmp(t->name, "slow-payments") == 0, "%s/%s",
	      t->namespace_, t->name);
	CHECK(strcmp(t->service, "payment-svc") == 0, "service %s", t->service);
	CHECK(t->n_pids == 2 && t->pids[0] == 42 && t->pids[1] == 43, "pids");
	CHECK(t->n_cgroup_paths == 1 &&
		  strcmp(t->cgroup_paths[0], "/system.slice/pay.service") == 0,
	      "cgroup paths");
	CHECK(t->min_duration_us == 200000 && t->max_duration_us == 10000000, "durations %llu %llu",
	      (unsigned long long)t->min_duration_us, (unsigned long long)t->max_duration_us);
	CHECK(strcmp(t->status, "4xx,503") == 0, "status normalized: %s", t->status);
	CHECK(strcmp(t->route, "/api/pay*") == 0, "route %s", t->route);
	CHECK(strcmp(t->method, "POST") == 0, "method upper case: %s", t->method);
	CHECK(t->frequency_hz == 50 && t->max_requests == 25, "limits");
	CHECK(t->timeout_ms == 90000, "timeout %llu", (unsigned long long)t->timeout_ms);
	CHECK(strcmp(t->file, "t.yaml") == 0 && t->doc == 1, "origin %s %d", t->file, t->doc);
out:
	manifest_list_free(&l);
}

static void test_defaults(void)
{
	struct manifest_list l;
	const struct manifest_trigger *t;

	parse(&l, HEAD "metadata:\n  name: a\nspec:\n  service: s\n");
	CHECK(l.n == 1 && l.n_errors == 0, "minimal manifest refused: %s",
	      l.n_errors ? l.errors[0].message : "");
	if (l.n == 1) {
		t = &l.items[0];
		CHECK(strcmp(t->namespace_, "default") == 0, "namespace %s", t->namespace_);
		CHECK(t->frequency_hz == 99, "default frequency %u", t->frequency_hz);
		CHECK(t->max_requests == 10, "default maxRequests %u", t->max_requests);
		CHECK(t->timeout_ms == 300000, "default timeout %llu",
		      (unsigned long long)t->timeout_ms);
		CHECK(!t->status && !t->route && !t->method && !t->min_duration_us &&
			  !t->max_duration_us,
		      "no criteria: match everything");
	}
	manifest_list_free(&l);
	/* null values count as absent */
	parse(&l, HEAD "metadata: {name: a}\nspec: {service: s, match: ~, maxRequests: null}\n");
	CHECK(l.n == 1 && l.items[0].max_requests == 10, "null fields are defaults");
	manifest_list_free(&l);
	/* empty file, comments only, empty documents: nothing, no error */
	parse(&l, "# nothing here\n");
	CHECK(l.n == 0 && l.n_errors == 0, "comment-only file");
	manifest_list_free(&l);
	parse(&l, "---\n" HEAD "metadata: {name: a}\nspec: {service: s}\n---\n");
	CHECK(l.n == 1 && l.n_errors == 0, "leading and trailing ---");
	manifest_list_free(&l);
}

static void test_malformed_yaml(void)
{
	EXPECT_ERROR(HEAD "metadata: {name: a\nspec: {service: s}\n", "t.yaml:", "line ",
		     "invalid YAML");
	EXPECT_ERROR(HEAD "metadata:\n  name: a\n   bad: indent\nspec: {}\n",
		     "t.yaml:", "invalid YAML");
	EXPECT_ERROR("just a string\n", "t.yaml:", "must be an object, got a string");
	EXPECT_ERROR("- a\n- b\n", "must be an object, got a list");
}

static void test_unknown_fields(void)
{
	EXPECT_ERROR(HEAD "metadata: {name: a}\nspec: {service: s}\nextra: 1\n",
		     "t.yaml:", "extra: unknown field");
	EXPECT_ERROR(HEAD "metadata: {name: a, uid: x}\nspec: {service: s}\n",
		     "metadata.uid: unknown field");
	EXPECT_ERROR(HEAD "metadata: {name: a}\nspec: {service: s, maxRequest: 3}\n",
		     "spec.maxRequest: unknown field", "maxRequests");
	EXPECT_ERROR(HEAD "metadata: {name: a}\nspec: {service: s, match: {minDurration: 1s}}\n",
		     "spec.match.minDurration: unknown field", "minDuration");
	EXPECT_ERROR(HEAD "metadata: {name: a}\nspec: {service: s, sampling: {hz: 5}}\n",
		     "spec.sampling.hz: unknown field");
	EXPECT_ERROR(HEAD "metadata: {name: a}\nspec: {service: s, targets: {pods: [x]}}\n",
		     "spec.targets.pods: unknown field");
	EXPECT_ERROR(HEAD "metadata: {name: a}\nspec: {service: s, service: t}\n",
		     "spec.service: duplicate field");
}

static void test_wrong_types(void)
{
	EXPECT_ERROR(HEAD
		     "metadata: {name: a}\nspec: {service: s, sampling: {frequencyHz: \"99\"}}\n",
		     "spec.sampling.frequencyHz", "must be an integer, got a string");
	EXPECT_ERROR(HEAD "metadata: {name: a}\nspec: {service: s, maxRequests: 2.5}\n",
		     "spec.maxRequests", "integer");
	EXPECT_ERROR(HEAD "metadata: {name: a}\nspec: {service: 123}\n", "spec.service",
		     "must be a string, got a number");
	EXPECT_ERROR(HEAD "metadata: {name: a}\nspec: {service: true}\n", "spec.service",
		     "must be a string, got a boolean");
	EXPECT_ERROR(HEAD "metadata: {name: a}\nspec: {service: s, match: [1]}\n", "spec.match",
		     "must be an object, got a list");
	EXPECT_ERROR(HEAD "metadata: {name: a}\nspec: {service: s, targets: {pids: 5}}\n",
		     "spec.targets.pids", "must be a list");
	EXPECT_ERROR(HEAD "metadata: {name: a}\nspec: {service: s, targets: {pids: [1, x]}}\n",
		     "spec.targets.pids[1]", "integer");
	EXPECT_ERROR(HEAD "metadata: {name: a}\nspec: {service: s, match: {status: 500}}\n",
		     "spec.match.status", "must be a string", "quote it");
	EXPECT_ERROR(HEAD "metadata: {name: a}\nspec: {service: s, timeout: 300}\n", "spec.timeout",
		     "duration");
	EXPECT_ERROR("apiVersion: traceprof.dev/v1\nkind: TraceProfileTrigger\n"
		     "metadata: {name: a}\nspec: {service: s}\n",
		     "apiVersion: must be traceprof.dev/v1alpha1");
	EXPECT_ERROR("apiVersion: traceprof.dev/v1alpha1\nkind: Trigger\nmetadata: {name: a}\n"
		     "spec: {service: s}\n",
		     "kind: must be TraceProfileTrigger");
	EXPECT_ERROR(HEAD "metadata: {namespace: x}\nspec: {service: s}\n",
		     "metadata.name: required");
	EXPECT_ERROR(HEAD "metadata: {name: Slow_Payments}\nspec: {service: s}\n", "metadata.name",
		     "DNS-1123");
	EXPECT_ERROR(HEAD "metadata: {name: a}\n", "spec: required");
	EXPECT_ERROR(HEAD "metadata: {name: a}\nspec: {service: s, match: {method: \"PO ST\"}}\n",
		     "spec.match.method", "HTTP method");
	EXPECT_ERROR(HEAD "metadata: {name: a}\nspec: {service: s, targets: {cgroupPaths: [x]}}\n",
		     "spec.targets.cgroupPaths[0]", "absolute");
}

static void test_out_of_range(void)
{
	EXPECT_ERROR(HEAD "metadata: {name: a}\nspec: {service: s, sampling: {frequencyHz: 0}}\n",
		     "t.yaml: spec.sampling.frequencyHz: must be between 1 and 100, got 0");
	EXPECT_ERROR(HEAD "metadata: {name: a}\nspec: {service: s, sampling: {frequencyHz: 101}}\n",
		     "spec.sampling.frequencyHz", "between 1 and 100");
	EXPECT_ERROR(HEAD "metadata: {name: a}\nspec: {service: s, maxRequests: 0}\n",
		     "spec.maxRequests", "between 1 and 1000");
	EXPECT_ERROR(HEAD "metadata: {name: a}\nspec: {service: s, maxRequests: 1001}\n",
		     "spec.maxRequests", "between 1 and 1000");
	EXPECT_ERROR(
	    HEAD "metadata: {name: a}\nspec: {service: s, maxRequests: 99999999999999999999999}\n",
	    "spec.maxRequests", "between 1 and 1000");
	EXPECT_ERROR(HEAD "metadata: {name: a}\nspec: {service: s, timeout: 11m}\n", "spec.timeout",
		     "at most 10m");
	EXPECT_ERROR(HEAD "metadata: {name: a}\nspec: {service: s, timeout: 0s}\n", "spec.timeout",
		     "at least");
	EXPECT_ERROR(HEAD "metadata: {name: a}\nspec: {service: s, targets: {pids: [0]}}\n",
		     "spec.targets.pids[0]", "between");
}

static void test_min_max(void)
{
	struct manifest_list l;

	EXPECT_ERROR(HEAD "metadata: {name: a}\nspec: {service: s, match: {minDuration: 2s, "
			  "maxDuration: 1500ms}}\n",
		     "spec.match.minDuration", "2s is greater than maxDuration 1500ms");
	parse(&l, HEAD "metadata: {name: a}\nspec: {service: s, match: {minDuration: 1s, "
		       "maxDuration: 1000ms}}\n");
	CHECK(l.n == 1, "min == max is allowed");
	manifest_list_free(&l);
}

static void test_durations(void)
{
	static const struct {
		const char *text;
		uint64_t us;
	} good[] = {{"300ms", 300000},	     {"1.5s", 1500000}, {"2m", 120000000},
		    {"1h2m", 3720000000ULL}, {"0", 0},		{"250us", 250},
		    {"1m30s", 90000000},     {".5s", 500000},	{"1500ns", 1}};
	static const char *const bad[] = {"",	 "5",  "5 minutes", "-1s", "1x",
					  "1.5", "ms", "1s2",	    "1d",  "99999999999999999999h"};
	char out[32];
	uint64_t us;

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		CHECK(manifest_parse_duration(good[i].text, &us) == 0 && us == good[i].us,
		      "%s -> %llu", good[i].text, (unsigned long long)us);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK(manifest_parse_duration(bad[i], &us) == -EINVAL, "%s accepted", bad[i]);
	manifest_format_duration(300000000, out, sizeof(out));
	CHECK(strcmp(out, "5m") == 0, "format 5m: %s", out);
	manifest_format_duration(1500000, out, sizeof(out));
	CHECK(strcmp(out, "1500ms") == 0, "format 1500ms: %s", out);
	EXPECT_ERROR(HEAD
		     "metadata: {name: a}\nspec: {service: s, match: {minDuration: 5 minutes}}\n",
		     "t.yaml: spec.match.minDuration: \"5 minutes\" is not a duration");
	EXPECT_ERROR(HEAD "metadata: {name: a}\nspec: {service: s, timeout: -1s}\n", "spec.timeout",
		     "not a duration");
}

static void test_status_patterns(void)
{
	static const char *const bad[] = {"6xx",     "5x",  "50",   "5xx,", "abc",
					  "5xx;4xx", "0xx", "5xxx", "5x0",  ",5xx"};
	char out[64];

	CHECK(manifest_parse_status("5xx", out, sizeof(out)) == 0 && strcmp(out, "5xx") == 0,
	      "5xx");
	CHECK(manifest_parse_status("2xx, 404", out, sizeof(out)) == 0 &&
		  strcmp(out, "2xx,404") == 0,
	      "2xx, 404 -> %s", out);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char text[256];

		CHECK(manifest_parse_status(bad[i], out, sizeof(out)) == -EINVAL, "%s accepted",
		      bad[i]);
		snprintf(text, sizeof(text),
			 HEAD "metadata: {name: a}\nspec: {service: s, match: {status: \"%s\"}}\n",
			 bad[i]);
		EXPECT_ERROR(text, "spec.match.status", "is not a status pattern");
	}
}

static void test_multi_document(void)
{
	struct manifest_list l;

	parse(&l,
	      HEAD "metadata: {name: one}\nspec: {service: s}\n"
		   "---\n" HEAD "metadata: {name: two}\nspec: {service: s, maxRequests: 0}\n"
		   "---\n" HEAD "metadata: {name: three, namespace: ops}\nspec: {service: t}\n");
	CHECK(l.n == 2, "two valid documents, got %zu", l.n);
	CHECK(l.n == 2 && strcmp(l.items[0].name, "one") == 0 &&
		  strcmp(l.items[1].name, "three") == 0 && l.items[1].doc == 3,
	      "the valid ones, in order");
	CHECK(l.n_errors == 1 && strstr(l.errors[0].message,
					"t.yaml: document 2: spec.maxRequests: must be between"),
	      "error names file, document, field: %s", l.n_errors ? l.errors[0].message : "");
	CHECK(l.n_errors == 1 && l.errors[0].doc == 2 && strcmp(l.errors[0].name, "two") == 0 &&
		  strcmp(l.errors[0].namespace_, "default") == 0,
	      "the invalid trigger's name is known");
	CHECK(l.broken_files == 0, "one bad document does not break the file");
	manifest_list_free(&l);
}

static void test_local_mode(void)
{
	struct manifest_list l;
	const struct manifest_opts k8s = {.local = false};
	const char *sel = HEAD "metadata: {name: a}\nspec: {selector: {matchLabels: {app: pay}}}\n";

	EXPECT_ERROR(sel, "spec.service: selector needs the Kubernetes API; set spec.service");
	EXPECT_ERROR(HEAD "metadata: {name: a}\nspec: {match: {status: 5xx}}\n", "spec.service",
		     "required");
	memset(&l, 0, sizeof(l));
	manifest_parse_buffer(&l, "k.yaml", sel, strlen(sel), &k8s);
	CHECK(l.n == 1 && l.items[0].has_selector, "a selector is fine with the Kubernetes API");
	manifest_list_free(&l);
	parse(&l, HEAD
	      "metadata: {name: a}\nspec: {service: s, selector: {matchLabels: {app: pay}}}\n");
	CHECK(l.n == 1, "service and selector together are fine locally");
	manifest_list_free(&l);
}

static void test_bounds(void)
{
	struct manifest_list l;
	size_t big = MANIFEST_MAX_BYTES + 1;
	char *buf = malloc(big + 1), deep[512], path[] = "/tmp/test_manifest_XXXXXX";
	int fd;

	memset(buf, '#', big);
	buf[big] = '\0';
	parse(&l, buf);
	CHECK(l.n == 0 && l.n_errors == 1 &&
		  strstr(l.errors[0].message, "t.yaml: file is larger than"),
	      "over 1 MiB refused");
	CHECK(l.broken_files == 1, "counted as a broken file");
	manifest_list_free(&l);
	/* the same from disk */
	fd = mkstemp(path);
	CHECK(fd >= 0 && write(fd, buf, big) == (ssize_t)big, "temp file");
	close(fd);
	memset(&l, 0, sizeof(l));
	CHECK(manifest_parse_file(&l, path, "big.yaml", &local) == 0, "parse file");
	CHECK(l.n_errors == 1 && strstr(l.errors[0].message, "big.yaml: file is larger than"),
	      "big file on disk refused: %s", l.n_errors ? l.errors[0].message : "");
	manifest_list_free(&l);
	unlink(path);
	free(buf);
	/* nesting: 33 levels refused, 32 fine as far as depth goes */
	snprintf(deep, sizeof(deep), HEAD "metadata: {name: a}\nspec: {service: s}\nx: ");
	for (int i = 0; i < 31; i++)
		strcat(deep, "[");
	for (int i = 0; i < 31; i++)
		strcat(deep, "]");
	strcat(deep, "\n");
	parse(&l, deep);
	CHECK(l.n_errors == 1 && !strstr(l.errors[0].message, "deeper") &&
		  strstr(l.errors[0].message, "x: unknown field"),
	      "32 levels: depth ok: %s", l.n_errors ? l.errors[0].message : "");
	manifest_list_free(&l);
	snprintf(deep, sizeof(deep), HEAD "metadata: {name: a}\nspec: {service: s}\nx: ");
	for (int i = 0; i < 40; i++)
		strcat(deep, "[");
	for (int i = 0; i < 40; i++)
		strcat(deep, "]");
	strcat(deep, "\n");
	EXPECT_ERROR(deep, "t.yaml:", "nested deeper than 32 levels");
	EXPECT_ERROR(HEAD "metadata: {name: &n a}\nspec: {service: *n}\n", "t.yaml:", "aliases");
	memset(&l, 0, sizeof(l));
	manifest_parse_buffer(&l, "nul.yaml", "a: b\0c", 6, &local);
	CHECK(l.n_errors == 1 && strstr(l.errors[0].message, "nul.yaml: not a text file"),
	      "NUL bytes refused");
	manifest_list_free(&l);
	memset(&l, 0, sizeof(l));
	manifest_parse_file(&l, "/nonexistent/x.yaml", "x.yaml", &local);
	CHECK(l.n_errors == 1 && strstr(l.errors[0].message, "x.yaml: cannot read") &&
		  l.broken_files == 1,
	      "missing file: %s", l.n_errors ? l.errors[0].message : "");
	manifest_list_free(&l);
	memset(&l, 0, sizeof(l));
	manifest_parse_file(&l, "/tmp", "tmp.yaml", &local);
	CHECK(l.n_errors == 1 && strstr(l.errors[0].message, "not a regular file"), "directory: %s",
	      l.n_errors ? l.errors[0].message : "");
	manifest_list_free(&l);
}

/* The table's JSON reproduces the trigger; the proto carries every field. */
static void test_json_and_proto(void)
{
	struct manifest_list l;
	struct manifest_trigger back = {0};
	Traceprof__Control__V1__Trigger *p;
	char err[256], *json;

	parse(&l,
	      HEAD "metadata: {name: pay, namespace: shop}\n"
		   "spec: {service: \"pay \\\"svc\\\"\", targets: {pids: [7], cgroupPaths: [/a]},\n"
		   "  match: {minDuration: 1.5s, status: 5xx, route: /p*, method: GET},\n"
		   "  sampling: {frequencyHz: 42}, maxRequests: 3, timeout: 90s}\n");
	CHECK(l.n == 1, "parse: %s", l.n_errors ? l.errors[0].message : "");
	if (l.n != 1)
		goto out;
	json = manifest_spec_json(&l.items[0]);
	CHECK(json && manifest_spec_from_json(&back, "shop", "pay", json, &local, err,
					      sizeof(err)) == 0,
	      "round trip of %s: %s", json, err);
	CHECK(back.service && strcmp(back.service, "pay \"svc\"") == 0, "service back");
	CHECK(back.min_duration_us == 1500000 && back.timeout_ms == 90000 &&
		  back.frequency_hz == 42 && back.max_requests == 3 && back.n_pids == 1 &&
		  back.pids[0] == 7 && back.n_cgroup_paths == 1 && strcmp(back.status, "5xx") == 0,
	      "fields back from %s", json);
	free(json);
	manifest_trigger_clear(&back);
	CHECK(manifest_spec_from_json(&back, "shop", "pay", "{\"service\": \"s\", \"bogus\": 1}",
				      &local, err, sizeof(err)) == -EINVAL &&
		  strstr(err, "spec.bogus: unknown field"),
	      "bad JSON spec refused: %s", err);
	p = manifest_to_proto(&l.items[0], "shop/pay/0000abcd", 1234);
	CHECK(p && strcmp(p->id, "shop/pay/0000abcd") == 0 && strcmp(p->namespace_, "shop") == 0 &&
		  p->deadline_unix_ms == 1234 && p->frequency_hz == 42 && p->max_requests == 3,
	      "proto trigger");
	CHECK(p && p->criteria->min_duration_us == 1500000 && p->criteria->max_duration_us == 0 &&
		  strcmp(p->criteria->status, "5xx") == 0 &&
		  strcmp(p->criteria->method, "GET") == 0,
	      "proto criteria");
	CHECK(p && p->targets->n_services == 1 &&
		  strcmp(p->targets->services[0], "pay \"svc\"") == 0 && p->targets->n_pids == 1 &&
		  p->targets->n_cgroup_paths == 1,
	      "proto targets");
	if (p) {
		size_t len = traceprof__control__v1__trigger__get_packed_size(p);

		CHECK(len > 0, "packs");
	}
	manifest_proto_free(p);
out:
	manifest_list_free(&l);
}

#define SAMPLING(x) HEAD "metadata: {name: a}\nspec: {service: s, sampling: {" x "}}\n"

/* One valid manifest's off-CPU fields: parsed, as JSON, back, and in the proto. */
static void expect_offcpu(const char *text, bool on, uint32_t us, const char *json_has)
{
	struct manifest_list l;
	struct manifest_trigger back = {0};
	Traceprof__Control__V1__Trigger *p;
	char err[256] = "", *json;

	parse(&l, text);
	CHECK(l.n == 1, "refused: %s: %s", text, l.n_errors ? l.errors[0].message : "");
	if (l.n != 1)
		goto out;
	CHECK(l.items[0].offcpu == on && l.items[0].offcpu_threshold_us == us,
	      "%s: offcpu %d threshold %u us", text, l.items[0].offcpu,
	      l.items[0].offcpu_threshold_us);
	json = manifest_spec_json(&l.items[0]);
	CHECK(json && strstr(json, json_has), "JSON %s lacks %s", json ? json : "", json_has);
	CHECK(json && (on || !strstr(json, "offCPUThreshold")), "JSON %s has a threshold",
	      json ? json : "");
	CHECK(json &&
		  manifest_spec_from_json(&back, "default", "a", json, &local, err, sizeof(err)) ==
		      0 &&
		  back.offcpu == on && back.offcpu_threshold_us == us,
	      "round trip of %s: %s", json ? json : "", err);
	free(json);
	manifest_trigger_clear(&back);
	p = manifest_to_proto(&l.items[0], "default/a/00000001", 1);
	CHECK(p && !!p->offcpu == on && p->offcpu_threshold_us == us, "proto offcpu %d %u",
	      p ? p->offcpu : -1, p ? p->offcpu_threshold_us : 0);
	manifest_proto_free(p);
out:
	manifest_list_free(&l);
}

/* spec.sampling.offCPU and offCPUThreshold: values, bounds, and the threshold's condition. */
static void test_offcpu(void)
{
	expect_offcpu(HEAD "metadata: {name: a}\nspec: {service: s}\n", false, 1000,
		      "\"offCPU\": false, \"zeroCodeHTTP\"");
	expect_offcpu(SAMPLING("offCPU: true"), true, 1000,
		      "\"offCPU\": true, \"offCPUThreshold\": \"1ms\"");
	expect_offcpu(SAMPLING("offCPU: True, offCPUThreshold: 250us"), true, 250,
		      "\"offCPUThreshold\": \"250us\"");
	expect_offcpu(SAMPLING("offCPU: true, offCPUThreshold: 10us"), true, 10, "\"10us\"");
	expect_offcpu(SAMPLING("offCPU: true, offCPUThreshold: 10s"), true, 10000000, "\"10s\"");
	expect_offcpu(SAMPLING("offCPU: true, offCPUThreshold: 1.5ms"), true, 1500, "\"1500us\"");
	expect_offcpu(SAMPLING("offCPU: false"), false, 1000, "\"offCPU\": false");
	EXPECT_ERROR(SAMPLING("offCPU: true, offCPUThreshold: 9us"),
		     "t.yaml: spec.sampling.offCPUThreshold: must be at least 10us and at most "
		     "10s, got 9us");
	EXPECT_ERROR(SAMPLING("offCPU: true, offCPUThreshold: 10001ms"),
		     "spec.sampling.offCPUThreshold", "at most 10s, got 10001ms");
	EXPECT_ERROR(SAMPLING("offCPU: true, offCPUThreshold: \"0\""),
		     "spec.sampling.offCPUThreshold", "at least 10us");
	EXPECT_ERROR(SAMPLING("offCPU: true, offCPUThreshold: 5"), "spec.sampling.offCPUThreshold",
		     "must be a duration string");
	EXPECT_ERROR(SAMPLING("offCPU: true, offCPUThreshold: 5 ms"),
		     "spec.sampling.offCPUThreshold", "is not a duration");
	EXPECT_ERROR(SAMPLING("offCPUThreshold: 5ms"),
		     "t.yaml: spec.sampling.offCPUThreshold: set only with spec.sampling.offCPU: "
		     "true");
	EXPECT_ERROR(SAMPLING("offCPU: false, offCPUThreshold: 5ms"),
		     "spec.sampling.offCPUThreshold", "set only with spec.sampling.offCPU: true");
	EXPECT_ERROR(SAMPLING("offCPU: \"true\""),
		     "spec.sampling.offCPU: must be true or false, got a string (do not quote it)");
	EXPECT_ERROR(SAMPLING("offCPU: yes"), "spec.sampling.offCPU",
		     "must be true or false, got a string");
	EXPECT_ERROR(SAMPLING("offCPU: 1"), "spec.sampling.offCPU",
		     "must be true or false, got a number");
	EXPECT_ERROR(SAMPLING("offCpu: true"), "spec.sampling.offCpu: unknown field");
}

/* spec.sampling.zeroCodeHTTP: a boolean, in the spec JSON, its round trip and the proto. */
static void expect_zero_code(const char *text, bool on)
{
	struct manifest_list l = {0};
	struct manifest_trigger back = {0};
	Traceprof__Control__V1__Trigger *p;
	char err[256] = "", *json;
	const char *has = on ? "\"zeroCodeHTTP\": true" : "\"zeroCodeHTTP\": false";

	parse(&l, text);
	CHECK(l.n == 1, "refused: %s: %s", text, l.n_errors ? l.errors[0].message : "");
	if (l.n != 1)
		goto out;
	CHECK(l.items[0].zero_code_http == on, "%s: zero_code_http %d", text,
	      l.items[0].zero_code_http);
	json = manifest_spec_json(&l.items[0]);
	CHECK(json && strstr(json, has), "JSON %s lacks %s", json ? json : "", has);
	CHECK(json &&
		  manifest_spec_from_json(&back, "default", "a", json, &local, err, sizeof(err)) ==
		      0 &&
		  back.zero_code_http == on,
	      "round trip of %s: %s", json ? json : "", err);
	free(json);
	manifest_trigger_clear(&back);
	p = manifest_to_proto(&l.items[0], "default/a/00000001", 1);
	CHECK(p && !!p->zero_code_http == on, "proto zero_code_http %d",
	      p ? p->zero_code_http : -1);
	manifest_proto_free(p);
out:
	manifest_list_free(&l);
}

static void test_zero_code(void)
{
	expect_zero_code(HEAD "metadata: {name: a}\nspec: {service: s}\n", false);
	expect_zero_code(SAMPLING("zeroCodeHTTP: true"), true);
	expect_zero_code(SAMPLING("zeroCodeHTTP: false, offCPU: true"), false);
	EXPECT_ERROR(SAMPLING("zeroCodeHTTP: \"true\""),
		     "spec.sampling.zeroCodeHTTP: must be true or false, got a string");
	EXPECT_ERROR(SAMPLING("zeroCodeHTTP: 1"), "spec.sampling.zeroCodeHTTP",
		     "must be true or false, got a number");
	EXPECT_ERROR(SAMPLING("zeroCodeHttp: true"), "spec.sampling.zeroCodeHttp: unknown field");
}

/* Two definitions of one trigger: the first in file order counts. */
static void test_duplicates(void)
{
	const char *a = HEAD "metadata: {name: x}\nspec: {service: s}\n---\n" HEAD
			     "metadata: {name: y}\nspec: {service: s}\n";
	const char *b = HEAD "metadata: {name: x}\nspec: {service: t}\n";
	struct manifest_list l = {0};

	manifest_parse_buffer(&l, "a.yaml", a, strlen(a), &local);
	manifest_parse_buffer(&l, "b.yaml", b, strlen(b), &local);
	manifest_list_drop_duplicates(&l);
	CHECK(l.n == 2 && strcmp(l.items[0].name, "x") == 0 &&
		  strcmp(l.items[0].service, "s") == 0 && strcmp(l.items[1].name, "y") == 0,
	      "the first definition stays: n=%zu", l.n);
	CHECK(l.n_errors == 1 && strcmp(l.errors[0].message,
					"b.yaml: document 1: metadata.name: trigger "
					"default/x is already defined in a.yaml (document 1)") == 0,
	      "the second is an error: %s", l.n_errors ? l.errors[0].message : "");
	manifest_list_free(&l);
}

/* A selector is kept in the spec JSON (the table's column) and comes back. */
static void test_selector_json(void)
{
	const struct manifest_opts k8s = {.local = false};
	const char *text = HEAD "metadata: {name: a, namespace: shop}\n"
				"spec:\n  selector:\n    matchLabels: {app: pay, tier: \"\"}\n"
				"    matchExpressions:\n    - {key: zone, operator: In, values: "
				"[a, \"b\"]}\n    - {key: gpu, operator: Exists}\n";
	const char *want =
	    "{\"service\": null, \"selector\": {\"matchLabels\": {\"app\": \"pay\", \"tier\": "
	    "\"\"}, "
	    "\"matchExpressions\": [{\"key\": \"zone\", \"operator\": \"In\", \"values\": [\"a\", "
	    "\"b\"]}, {\"key\": \"gpu\", \"operator\": \"Exists\"}]}, \"sampling\": "
	    "{\"frequencyHz\": 99, \"offCPU\": false, \"zeroCodeHTTP\": false}, \"maxRequests\": "
	    "10, "
	    "\"timeout\": \"5m\"}";
	struct manifest_list l = {0};
	struct manifest_trigger back = {0};
	char err[256] = "", *json = NULL, *again = NULL;

	manifest_parse_buffer(&l, "k.yaml", text, strlen(text), &k8s);
	CHECK(l.n == 1, "selector manifest: %s", l.n_errors ? l.errors[0].message : "");
	if (l.n == 1)
		json = manifest_spec_json(&l.items[0]);
	CHECK(json && strcmp(json, want) == 0, "spec JSON: %s", json ? json : "(null)");
	CHECK(json &&
		  manifest_spec_from_json(&back, "shop", "a", json, &k8s, err, sizeof(err)) == 0,
	      "back: %s", err);
	again = manifest_spec_json(&back);
	CHECK(again && json && strcmp(again, json) == 0, "round trip: %s", again ? again : "");
	EXPECT_ERROR(HEAD "metadata: {name: a}\nspec: {service: s, selector: {matchExpressions: "
			  "[{key: k, operator: In, values: [[x]]}]}}\n",
		     "spec.selector.matchExpressions[0].values: must be a list of strings");
	free(json);
	free(again);
	manifest_trigger_clear(&back);
	manifest_list_free(&l);
}

/* What a message may quote of a manifest: short, escaped, one line of UTF-8. */
static void test_escape(void)
{
	char out[MANIFEST_ESCAPED_SIZE(MANIFEST_EXCERPT_MAX)], small[12];
	struct jsonbuf b = {0};
	char *json;

	manifest_escape(out, sizeof(out), "a\"b\\c\x01\n\xff\xc3\xa9", 60);
	CHECK(strcmp(out, "a\\\"b\\\\c\\x01\\x0a\\xff\xc3\xa9") == 0, "escaped: %s", out);
	/* C1 controls, U+2028, a surrogate, an overlong '/', a cut sequence */
	manifest_escape(out, sizeof(out), "\xc2\x85|\xe2\x80\xa8|\xed\xa0\x80|\xc0\xaf|\xe2\x82",
			60);
	CHECK(strcmp(out, "\\xc2\\x85|\\xe2\\x80\\xa8|\\xed\\xa0\\x80|\\xc0\\xaf|\\xe2\\x82") == 0,
	      "invalid and line-breaking sequences: %s", out);
	/* at most max_in bytes of input; a character is never split */
	manifest_escape(out, sizeof(out), "abcd\xc3\xa9z", 5);
	CHECK(strcmp(out, "abcd...") == 0, "cut before a 2-byte character: %s", out);
	manifest_escape(small, sizeof(small), "\x01\x02\x03\x04", 60);
	CHECK(strcmp(small, "\\x01\\x02...") == 0, "cut by the output size: %s", small);
	jsonbuf_str(&b, "n\xff\xc3\xa9\x01");
	json = jsonbuf_take(&b);
	CHECK(json && strcmp(json, "\"n\\ufffd\xc3\xa9\\u0001\"") == 0, "JSON of non-UTF-8: %s",
	      json ? json : "(null)");
	free(json);
}

/* A file that is not the user's own: parsed, but messages quote none of it. */
static void test_no_excerpts(void)
{
	const struct manifest_opts hidden = {.local = true, .no_excerpts = true};
	const char *text = HEAD "metadata: {name: a, secret-key-1: x}\nspec: {service: s}\n";
	const char *text2 = "apiVersion: hunter2-secret\nkind: TraceProfileTrigger\n";
	struct manifest_list l = {0};

	manifest_parse_buffer(&l, "x.yaml", text, strlen(text), &hidden);
	manifest_parse_buffer(&l, "y.yaml", text2, strlen(text2), &hidden);
	CHECK(l.n_errors == 2 && !strstr(l.errors[0].message, "secret") &&
		  strstr(l.errors[0].message, "x.yaml: metadata.(not shown): unknown field"),
	      "key not shown: %s", l.n_errors ? l.errors[0].message : "");
	CHECK(l.n_errors == 2 && !strstr(l.errors[1].message, "hunter2") &&
		  strstr(l.errors[1].message, "got (not shown)"),
	      "value not shown: %s", l.n_errors > 1 ? l.errors[1].message : "");
	manifest_list_free(&l);
}

/* Only regular files are read; links and FIFOs are refused without blocking. */
static void test_not_regular(void)
{
	char dir[] = "/tmp/test_manifest_dir_XXXXXX", path[256], link[256], fifo[256];
	struct manifest_list l = {0};
	struct timespec t0, t1;

	CHECK(mkdtemp(dir), "temp dir");
	snprintf(path, sizeof(path), "%s/real.yaml", dir);
	snprintf(link, sizeof(link), "%s/link.yaml", dir);
	snprintf(fifo, sizeof(fifo), "%s/fifo.yaml", dir);
	FILE *f = fopen(path, "w");

	CHECK(f && fputs(HEAD "metadata: {name: a}\nspec: {service: s}\n", f) >= 0, "write");
	if (f)
		fclose(f);
	CHECK(symlink(path, link) == 0 && mkfifo(fifo, 0644) == 0, "link and FIFO");
	clock_gettime(CLOCK_MONOTONIC, &t0);
	manifest_parse_file(&l, link, "link.yaml", &local);
	manifest_parse_file(&l, fifo, "fifo.yaml", &local);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	CHECK(l.n == 0 && l.n_errors == 2 && l.broken_files == 2, "refused: n=%zu errors=%zu", l.n,
	      l.n_errors);
	CHECK(l.n_errors == 2 &&
		  strcmp(l.errors[0].message,
			 "link.yaml: refused: a symbolic link, not a regular file (never read)") ==
		      0 &&
		  strcmp(l.errors[1].message,
			 "fifo.yaml: refused: a FIFO, not a regular file (never read)") == 0,
	      "messages: %s | %s", l.n_errors ? l.errors[0].message : "",
	      l.n_errors > 1 ? l.errors[1].message : "");
	CHECK(t1.tv_sec - t0.tv_sec < 2, "a FIFO does not block");
	manifest_list_free(&l);
	unlink(path);
	unlink(link);
	unlink(fifo);
	rmdir(dir);
}

/* The directory cache: unchanged files are not parsed again, changed ones are. */
static void test_dir_cache(void)
{
	char dir[] = "/tmp/test_manifest_dir_XXXXXX", path[256], other[256], hard[256];
	struct manifest_dir d = {0};
	struct manifest_list l = {0};
	FILE *f;

	CHECK(mkdtemp(dir), "temp dir");
	chmod(dir, 0755);
	snprintf(path, sizeof(path), "%s/a.yaml", dir);
	snprintf(other, sizeof(other), "%s/b.yaml", dir);
	snprintf(hard, sizeof(hard), "%s/c.yaml", dir);
	f = fopen(path, "w");
	CHECK(f && fputs(HEAD "metadata: {name: a}\nspec: {service: s}\n", f) >= 0, "write a");
	if (f)
		fclose(f);
	f = fopen(other, "w");
	CHECK(f && fputs("apiVersion: v0-private\n", f) >= 0, "write b");
	if (f)
		fclose(f);
	chmod(path, 0644);
	chmod(other, 0644);
	manifest_dir_scan(&d, dir, &l);
	CHECK(l.n == 1 && l.n_errors == 1 && d.stats.parsed_last == 2 && d.stats.files == 2,
	      "first pass: n=%zu errors=%zu parsed=%llu", l.n, l.n_errors,
	      (unsigned long long)d.stats.parsed_last);
	CHECK(l.n_errors == 1 && strstr(l.errors[0].message, "got \"v0-private\""),
	      "the user's own file is quoted: %s", l.n_errors ? l.errors[0].message : "");
	manifest_list_free(&l);
	manifest_dir_scan(&d, dir, &l);
	CHECK(l.n == 1 && l.n_errors == 1 && d.stats.parsed_last == 0,
	      "second pass from the cache: n=%zu errors=%zu parsed=%llu", l.n, l.n_errors,
	      (unsigned long long)d.stats.parsed_last);
	manifest_list_free(&l);
	/* a second link to b.yaml: b is no longer only the user's manifest */
	CHECK(link(other, hard) == 0, "hard link");
	manifest_dir_scan(&d, dir, &l);
	CHECK(d.stats.parsed_last == 2 && l.n_errors == 2 && !strstr(l.errors[0].message, "v0-") &&
		  !strstr(l.errors[1].message, "v0-"),
	      "a hard-linked file is parsed again and not quoted: %s",
	      l.n_errors ? l.errors[0].message : "");
	manifest_list_free(&l);
	manifest_dir_free(&d);
	unlink(path);
	unlink(other);
	unlink(hard);
	rmdir(dir);
}

/* The example users copy must stay valid. */
static void test_example(void)
{
	struct manifest_list l = {0};

	CHECK(manifest_parse_file(&l, EXAMPLE_MANIFEST, "slow-payments.yaml", &local) == 0, "read");
	CHECK(l.n == 1 && l.n_errors == 0, "example: %s", l.n_errors ? l.errors[0].message : "");
	CHECK(l.n == 1 && strcmp(l.items[0].service, "payment-svc") == 0 &&
		  strcmp(l.items[0].status, "5xx") == 0 && l.items[0].max_requests == 10,
	      "example fields");
	manifest_list_free(&l);
}

int main(void)
{
	test_example();
	test_valid_full();
	test_defaults();
	test_malformed_yaml();
	test_unknown_fields();
	test_wrong_types();
	test_out_of_range();
	test_min_max();
	test_durations();
	test_status_patterns();
	test_multi_document();
	test_local_mode();
	test_bounds();
	test_json_and_proto();
	test_offcpu();
	test_zero_code();
	test_selector_json();
	test_duplicates();
	test_escape();
	test_no_excerpts();
	test_not_regular();
	test_dir_cache();
	return check_done();
}
