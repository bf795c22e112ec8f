/*
 * otlp_grpc_send.c - one OTLP/gRPC TraceService/Export call with the
 * bytes of a file as the request message, for end-to-end scripts: the
 * bytes are not decoded or checked here, so a script can send hostile
 * messages. With "gzip" the file must already hold gzip data: it is sent
 * as it is with the message's compressed flag set and "grpc-encoding:
 * gzip", as a client of the gRPC core sends a message it compressed (the
 * core sends a buffer made with grpc_raw_compressed_byte_buffer_create()
 * unchanged). With "noenc" the bytes are sent as they are with the
 * compressed flag set but without grpc-encoding (a plain channel), which
 * the gRPC spec refuses. Prints "code=N name=NAME ms=T details=..." and
 * exits 0 when the call was made (whatever its status), 2 on wrong usage.
 *
 * usage: otlp_grpc_send HOST:PORT FILE [gzip|noenc]
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <grpc/byte_buffer.h>
#include <grpc/grpc.h>

#include "grpc_unary.h"

#define METHOD "/opentelemetry.proto.collector.trace.v1.TraceService/Export"

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
	bool gzip = argc == 4 && strcmp(argv[3], "gzip") == 0,
	     noenc = argc == 4 && strcmp(argv[3], "noenc") == 0;
	struct grpc_unary_answer ans;
	grpc_completion_queue *cq;
	grpc_channel *ch;
	struct timespec t0, t1;
	size_t len;
	char *buf;

	if (argc < 3 || argc > 4 || (argc == 4 && !gzip && !noenc)) {
		fprintf(stderr, "usage: otlp_grpc_send HOST:PORT FILE [gzip|noenc]\n");
		return 2;
	}
	buf = read_file(argv[2], &len);
	if (!buf) {
		fprintf(stderr, "otlp_grpc_send: cannot read %s\n", argv[2]);
		return 2;
	}
	grpc_init();
	cq = grpc_completion_queue_create_for_pluck(NULL);
	ch = grpc_unary_insecure_channel(argv[1], gzip);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (gzip || noenc) /* a plain channel (noenc) says no grpc-encoding */
		grpc_unary_call_gzipped(ch, cq, METHOD, NULL, buf, len, 30000, &ans);
	else
		grpc_unary_call(ch, cq, METHOD, NULL, buf, len, 30000, &ans);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	free(buf);
	printf("code=%d name=%s ms=%ld details=%s\n", ans.code, grpc_unary_code_name(ans.code),
	       (long)((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000),
	       ans.details);
	if (ans.resp)
		grpc_byte_buffer_destroy(ans.resp);
	grpc_channel_destroy(ch);
	grpc_completion_queue_shutdown(cq);
	grpc_completion_queue_destroy(cq);
	grpc_shutdown();
	return 0;
}
