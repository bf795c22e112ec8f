/*
 * grpc_unary.c - see grpc_unary.h.
 */
#include "grpc_unary.h"

#include <stdio.h>
#include <string.h>

#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/compression.h>
#include <grpc/grpc_security.h>
#include <grpc/slice.h>
#include <grpc/support/time.h>

/* The call of grpc_unary_call() with the message req, which it destroys. */
static void call_with(grpc_channel *ch, grpc_completion_queue *cq, const char *method,
		      const char *authorization, grpc_byte_buffer *req, int timeout_ms,
		      struct grpc_unary_answer *out)
{
	grpc_slice details = grpc_empty_slice();
	grpc_metadata_array md0, md1;
	grpc_metadata auth;
	grpc_call *call;
	grpc_op ops[6];

	memset(out, 0, sizeof(*out));
	out->code = GRPC_STATUS_INTERNAL;
	call = grpc_channel_create_call(
	    ch, NULL, GRPC_PROPAGATE_DEFAULTS, cq, grpc_slice_from_static_string(method), NULL,
	    gpr_time_add(gpr_now(GPR_CLOCK_REALTIME),
			 gpr_time_from_millis(timeout_ms, GPR_TIMESPAN)),
	    NULL);
	grpc_metadata_array_init(&md0);
	grpc_metadata_array_init(&md1);
	memset(ops, 0, sizeof(ops));
	memset(&auth, 0, sizeof(auth));
	ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
	if (authorization) {
		auth.key = grpc_slice_from_static_string("authorization");
		auth.value = grpc_slice_from_static_string(authorization);
		ops[0].data.send_initial_metadata.count = 1;
		ops[0].data.send_initial_metadata.metadata = &auth;
	}
	ops[1].op = GRPC_OP_SEND_MESSAGE;
	ops[1].data.send_message.send_message = req;
	ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
	ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
	ops[3].data.recv_initial_metadata.recv_initial_metadata = &md0;
	ops[4].op = GRPC_OP_RECV_MESSAGE;
	ops[4].data.recv_message.recv_message = &out->resp;
	ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
	ops[5].data.recv_status_on_client.trailing_metadata = &md1;
	ops[5].data.recv_status_on_client.status = &out->code;
	ops[5].data.recv_status_on_client.status_details = &details;
	if (grpc_call_start_batch(call, ops, 6, (void *)1, NULL) == GRPC_CALL_OK) {
		grpc_completion_queue_pluck(cq, (void *)1, gpr_inf_future(GPR_CLOCK_REALTIME),
					    NULL);
		snprintf(out->details, sizeof(out->details), "%.*s",
			 (int)GRPC_SLICE_LENGTH(details),
			 (const char *)GRPC_SLICE_START_PTR(details));
	} else {
		snprintf(out->details, sizeof(out->details), "cannot start the call");
	}
	grpc_slice_unref(details);
	grpc_metadata_array_destroy(&md0);
	grpc_metadata_array_destroy(&md1);
	grpc_byte_buffer_destroy(req);
	grpc_call_unref(call);
}

void grpc_unary_call(grpc_channel *ch, grpc_completion_queue *cq, const char *method,
		     const char *authorization, const void *buf, size_t len, int timeout_ms,
		     struct grpc_unary_answer *out)
{
	grpc_slice s = grpc_slice_from_copied_buffer(buf, len);
	grpc_byte_buffer *req = grpc_raw_byte_buffer_create(&s, 1);

	grpc_slice_unref(s);
	call_with(ch, cq, method, authorization, req, timeout_ms, out);
}

void grpc_unary_call_gzipped(grpc_channel *ch, grpc_completion_queue *cq, const char *method,
			     const char *authorization, const void *gz, size_t len, int timeout_ms,
			     struct grpc_unary_answer *out)
{
	grpc_slice s = grpc_slice_from_copied_buffer(gz, len);
	grpc_byte_buffer *req = grpc_raw_compressed_byte_buffer_create(&s, 1, GRPC_COMPRESS_GZIP);

	grpc_slice_unref(s);
	call_with(ch, cq, method, authorization, req, timeout_ms, out);
}

grpc_slice grpc_unary_answer_take(struct grpc_unary_answer *a)
{
	grpc_slice all = grpc_empty_slice();
	grpc_byte_buffer_reader rd;

	if (!a->resp)
		return all;
	if (grpc_byte_buffer_reader_init(&rd, a->resp)) {
		all = grpc_byte_buffer_reader_readall(&rd);
		grpc_byte_buffer_reader_destroy(&rd);
	}
	grpc_byte_buffer_destroy(a->resp);
	a->resp = NULL;
	return all;
}

const char *grpc_unary_code_name(grpc_status_code c)
{
	static const char *names[] = {"OK",
				      "CANCELLED",
				      "UNKNOWN",
				      "INVALID_ARGUMENT",
				      "DEADLINE_EXCEEDED",
				      "NOT_FOUND",
				      "ALREADY_EXISTS",
				      "PERMISSION_DENIED",
				      "RESOURCE_EXHAUSTED",
				      "FAILED_PRECONDITION",
				      "ABORTED",
				      "OUT_OF_RANGE",
				      "UNIMPLEMENTED",
				      "INTERNAL",
				      "UNAVAILABLE",
				      "DATA_LOSS",
				      "UNAUTHENTICATED"};

	return (unsigned)c < sizeof(names) / sizeof(names[0]) ? names[c] : "?";
}

grpc_channel *grpc_unary_insecure_channel(const char *target, bool gzip)
{
	grpc_arg arg = {.type = GRPC_ARG_INTEGER,
			.key = GRPC_COMPRESSION_CHANNEL_DEFAULT_ALGORITHM,
			.value.integer = GRPC_COMPRESS_GZIP};
	grpc_channel_args args = {1, &arg};
	grpc_channel_credentials *creds = grpc_insecure_credentials_create();
	grpc_channel *ch = grpc_channel_create(target, creds, gzip ? &args : NULL);

	grpc_channel_credentials_release(creds);
	return ch;
}

grpc_channel *grpc_unary_channel(const char *target, grpc_channel_credentials *creds,
				 const char *ssl_target_name)
{
	grpc_arg args[4];
	grpc_channel_args chargs = {0, args};
	static const struct {
		const char *key;
		int ms;
	} backoff[] = {{GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100},
		       {GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100},
		       {GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000}};

	memset(args, 0, sizeof(args));
	for (size_t i = 0; i < sizeof(backoff) / sizeof(backoff[0]); i++) {
		args[chargs.num_args].type = GRPC_ARG_INTEGER;
		args[chargs.num_args].key = (char *)backoff[i].key;
		args[chargs.num_args++].value.integer = backoff[i].ms;
	}
	if (ssl_target_name) {
		args[chargs.num_args].type = GRPC_ARG_STRING;
		args[chargs.num_args].key = GRPC_SSL_TARGET_NAME_OVERRIDE_ARG;
		args[chargs.num_args++].value.string = (char *)ssl_target_name;
	}
	return grpc_channel_create(target, creds, &chargs);
}
