/*
 * otlp_grpc_send.c - one OTLP/gRPC TraceService/Export call with the
 * bytes of a file as the request message, for end-to-end scripts: the
 * bytes are not decoded or checked here, so a script can send hostile
 * messages. With "gzip" the file must already hold gzip data: it is sent
 * as it is with the message's compressed flag set and "grpc-encoding:
 * gzip", as a client of the gRPC core sends a message it compressed (the
 * core sends a buffer made with grpc_raw_compressed_byte_buffer_create()
 * unchanged). Prints "code=N name=NAME ms=T details=..." and exits 0 when
 * the call was made (whatever its status), 2 on wrong usage.
 *
 * usage: otlp_grpc_send HOST:PORT FILE [gzip]
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <grpc/byte_buffer.h>
#include <grpc/compression.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/slice.h>
#include <grpc/support/time.h>

static const char *code_name(grpc_status_code c)
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

/* The whole file, malloc'ed (the caller frees); NULL on error. */
static char *read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	long n;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0) {
		buf = malloc((size_t)n + 1);
		if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
			free(buf);
			buf = NULL;
		}
		*len = (size_t)n;
	}
	fclose(f);
	return buf;
}

int main(int argc, char **argv)
{
	bool gzip = argc == 4 && strcmp(argv[3], "gzip") == 0;
	grpc_status_code code = GRPC_STATUS_INTERNAL;
	grpc_slice details = grpc_empty_slice(), s;
	grpc_metadata_array md0, md1;
	grpc_byte_buffer *req, *resp = NULL;
	grpc_channel_credentials *cr;
	grpc_completion_queue *cq;
	grpc_channel *ch;
	grpc_call *call;
	grpc_op ops[6];
	grpc_arg arg;
	grpc_channel_args args = {1, &arg};
	struct timespec t0, t1;
	size_t len;
	char *buf;

	if (argc < 3 || argc > 4 || (argc == 4 && !gzip)) {
		fprintf(stderr, "usage: otlp_grpc_send HOST:PORT FILE [gzip]\n");
		return 2;
	}
	buf = read_file(argv[2], &len);
	if (!buf) {
		fprintf(stderr, "otlp_grpc_send: cannot read %s\n", argv[2]);
		return 2;
	}
	grpc_init();
	cq = grpc_completion_queue_create_for_pluck(NULL);
	cr = grpc_insecure_credentials_create();
	memset(&arg, 0, sizeof(arg));
	arg.type = GRPC_ARG_INTEGER; /* makes the call send "grpc-encoding: gzip" */
	arg.key = GRPC_COMPRESSION_CHANNEL_DEFAULT_ALGORITHM;
	arg.value.integer = gzip ? GRPC_COMPRESS_GZIP : GRPC_COMPRESS_NONE;
	ch = grpc_channel_create(argv[1], cr, &args);
	grpc_channel_credentials_release(cr);
	s = grpc_slice_from_copied_buffer(buf, len);
	req = gzip ? grpc_raw_compressed_byte_buffer_create(&s, 1, GRPC_COMPRESS_GZIP)
		   : grpc_raw_byte_buffer_create(&s, 1);
	grpc_slice_unref(s);
	free(buf);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	call = grpc_channel_create_call(
	    ch, NULL, GRPC_PROPAGATE_DEFAULTS, cq,
	    grpc_slice_from_static_string(
		"/opentelemetry.proto.collector.trace.v1.TraceService/Export"),
	    NULL,
	    gpr_time_add(gpr_now(GPR_CLOCK_REALTIME), gpr_time_from_seconds(30, GPR_TIMESPAN)),
	    NULL);
	grpc_metadata_array_init(&md0);
	grpc_metadata_array_init(&md1);
	memset(ops, 0, sizeof(ops));
	ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
	ops[1].op = GRPC_OP_SEND_MESSAGE;
	ops[1].data.send_message.send_message = req;
	ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
	ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
	ops[3].data.recv_initial_metadata.recv_initial_metadata = &md0;
	ops[4].op = GRPC_OP_RECV_MESSAGE;
	ops[4].data.recv_message.recv_message = &resp;
	ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
	ops[5].data.recv_status_on_client.trailing_metadata = &md1;
	ops[5].data.recv_status_on_client.status = &code;
	ops[5].data.recv_status_on_client.status_details = &details;
	if (grpc_call_start_batch(call, ops, 6, (void *)1, NULL) == GRPC_CALL_OK)
		grpc_completion_queue_pluck(cq, (void *)1, gpr_inf_future(GPR_CLOCK_REALTIME),
					    NULL);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("code=%d name=%s ms=%ld details=%.*s\n", code, code_name(code),
	       (long)((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000),
	       (int)GRPC_SLICE_LENGTH(details), (const char *)GRPC_SLICE_START_PTR(details));
	if (resp)
		grpc_byte_buffer_destroy(resp);
	grpc_byte_buffer_destroy(req);
	grpc_slice_unref(details);
	grpc_metadata_array_destroy(&md0);
	grpc_metadata_array_destroy(&md1);
	grpc_call_unref(call);
	grpc_channel_destroy(ch);
	grpc_completion_queue_shutdown(cq);
	grpc_completion_queue_destroy(cq);
	grpc_shutdown();
	return 0;
}
