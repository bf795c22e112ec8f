/*
 * fuzz_manifest.c - libFuzzer target for the manifest parser (lib/spec/):
 * the bytes are one manifest file as the controller reads it from a
 * triggers directory. Built with clang -fsanitize=fuzzer,address,undefined
 * (tests/fuzz/CMakeLists.txt), lib/spec compiled into it with the same
 * sanitizers, and run for a bounded time by run_fuzz_manifest.sh with the
 * example triggers as seeds and manifest.dict.
 *
 * Besides what the sanitizers find, each input checks:
 * - manifest_parse_buffer() returns 0 or -ENOMEM, and every error has a
 *   message;
 * - every valid trigger's canonical JSON parses back (manifest_spec_from_json)
 *   and renders to the same JSON, and turns into an AgentControl message.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "manifest.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The trigger's JSON round trip and its message; abort() on a mismatch. */
static void check_trigger(const struct manifest_trigger *t, const struct manifest_opts *o)
{
	struct manifest_trigger back;
	char *json = manifest_spec_json(t), *again, err[256];
	Traceprof__Control__V1__Trigger *p;

	if (!json)
		return;
	if (manifest_spec_from_json(&back, t->namespace_, t->name, json, o, err, sizeof(err)))
		abort();
	again = manifest_spec_json(&back);
	if (again && strcmp(json, again) != 0)
		abort();
	free(again);
	manifest_trigger_clear(&back);
	free(json);
	p = manifest_to_proto(t, "fuzz", 1);
	manifest_proto_free(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct manifest_opts modes[2] = {{.local = true}, {.no_excerpts = true}};

	for (int m = 0; m < 2; m++) {
		struct manifest_list l = {0};
		int rc =
		    manifest_parse_buffer(&l, "fuzz.yaml", (const char *)data, size, &modes[m]);

		if (rc != 0 && rc != -ENOMEM)
			abort();
		for (size_t i = 0; i < l.n_errors; i++)
			if (!l.errors[i].message || !l.errors[i].message[0])
				abort();
		for (size_t i = 0; i < l.n; i++)
			check_trigger(&l.items[i], &modes[m]);
		manifest_list_free(&l);
	}
	return 0;
}
