/*
 * fuzz_otlp.c - libFuzzer target for the OTLP decoder (agent/otlp/otlp.c): the
 * bytes are an ExportTraceServiceRequest as a transport hands it over.
 * Built with clang -fsanitize=fuzzer,address (tests/CMakeLists.txt) and run
 * for a bounded time by run_fuzz_otlp.sh with otlp.dict, whose tokens are
 * the tags that nest (AnyValue's array and kvlist, ArrayValue and
 * KeyValueList values, KeyValue value, span attributes).
 *
 * Besides what AddressSanitizer finds, each input checks:
 * - otlp_decode() returns one of its documented codes, with a message
 *   when it fails, and a batch only on success;
 * - the depth walker refuses as malformed only what protobuf-c refuses
 *   too (checked on inputs up to 4 KiB, where protobuf-c's own recursion
 *   is shallow enough to run);
 * - otlp_inflate() of the same bytes never returns more than its limit.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "aggregate.h"
#include "opentelemetry/proto/collector/trace/v1/trace_service.pb-c.h"
#include "otlp.h"

#define INFLATE_LIMIT (256u << 10)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct otlp_decode_opts opts = {.kinds = OTLP_KIND_SERVER | OTLP_KIND_CLIENT,
					.node = "fuzz"};
	struct otlp_decoded d;
	char msg[256];
	uint8_t *raw;
	size_t rawlen;
	int rc;

	rc = otlp_decode(data, size, &opts, &d);
	if (rc != 0 && rc != -EBADMSG && rc != -ELOOP && rc != -E2BIG && rc != -ENOMEM)
		abort();
	if (rc != 0 && (d.batch || !d.message[0]))
		abort();
	agg_window_free(d.batch);

	if (size <= 4096 &&
	    otlp_check_depth(data, size, OTLP_MAX_DEPTH, msg, sizeof(msg)) == -EBADMSG) {
		Opentelemetry__Proto__Collector__Trace__V1__ExportTraceServiceRequest *req =
		    opentelemetry__proto__collector__trace__v1__export_trace_service_request__unpack(
			NULL, size, data);

		if (req) /* the walker refused what protobuf-c reads */
			abort();
	}

	rc = otlp_inflate(data, size, INFLATE_LIMIT, &raw, &rawlen);
	if (rc == 0 && rawlen > INFLATE_LIMIT)
		abort();
	if (rc != 0 && raw)
		abort();
	free(raw);
	return 0;
}
