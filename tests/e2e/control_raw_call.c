/*
 * control_raw_call.c - one raw unary call to a running agent's control
 * port, for end-to-end scripts: the request message is given as hex bytes
 * (not decoded or checked here), so a script can send garbage, an empty
 * message or a valid one, with or without a bearer token, to any method.
 * Prints the gRPC status as "code=N name=NAME details=... ms=T" on stdout
 * (T: how long the call took) and exits 0 when the call was made
 * (whatever its status), 2 on wrong usage. With COUNT the call is made
 * COUNT times on one channel; the line is the last call's, followed by
 * "calls=COUNT same=K" (K: calls with the first call's status).
 *
 * usage: control_raw_call HOST:PORT METHOD HEX [TOKEN_FILE|- [COUNT]]
 *   METHOD: ApplyTriggers or GetStatus (of traceprof.control.v1.AgentControl),
 *           or a full "/package.Service/Method" name
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <grpc/grpc.h>

#include "grpc_unary.h"
#include "traceprof/hex.h"

/* The first line of path, blanks around it removed, as "Bearer <token>"; NULL on error. */
static char *read_bearer(const char *path)
{
	char line[4200], *s, *e, *out;
	FILE *f = fopen(path, "r");

	if (!f)
		return NULL;
	if (!fgets(line, sizeof(line), f))
		line[0] = 0;
	fclose(f);
	for (s = line; *s == ' ' || *s == '\t'; s++)
		;
	for (e = s + strlen(s); e > s && (e[-1] == '\n' || e[-1] == '\r' || e[-1] == ' ');)
		*--e = 0;
	out = malloc(strlen(s) + 8);
	if (out)
		sprintf(out, "Bearer %s", s);
	return out;
}

int main(int argc, char **argv)
{
	struct grpc_unary_answer ans;
	grpc_completion_queue *cq;
	grpc_channel *ch;
	char method[256], *auth = NULL;
	size_t hexlen, len;
	unsigned char *buf;
	long count = 1, same = 0;
	grpc_status_code first = GRPC_STATUS_OK;
	struct timespec t0, t1;

	if (argc < 4 || argc > 6 ||
	    (argv[2][0] != '/' && strcmp(argv[2], "ApplyTriggers") != 0 &&
	     strcmp(argv[2], "GetStatus") != 0)) {
		fprintf(stderr,
			"usage: control_raw_call HOST:PORT ApplyTriggers|GetStatus|/pkg.Svc/M "
			"HEX [TOKEN_FILE|- [COUNT]]\n");
		return 2;
	}
	if (argc == 6 && ((count = strtol(argv[5], NULL, 10)) < 1 || count > 1000000)) {
		fprintf(stderr, "control_raw_call: COUNT '%s' is not 1 to 1000000\n", argv[5]);
		return 2;
	}
	hexlen = strlen(argv[3]);
	len = hexlen / 2;
	buf = malloc(len ? len : 1);
	if (!buf || hexlen % 2 || tp_hex_decode(argv[3], buf, len, false) != 0) {
		fprintf(stderr, "control_raw_call: '%s' is not hex bytes\n", argv[3]);
		return 2;
	}
	if (argc >= 5 && strcmp(argv[4], "-") != 0 && !(auth = read_bearer(argv[4]))) {
		fprintf(stderr, "control_raw_call: cannot read token file %s\n", argv[4]);
		return 2;
	}
	if (argv[2][0] == '/')
		snprintf(method, sizeof(method), "%s", argv[2]);
	else
		snprintf(method, sizeof(method), "/traceprof.control.v1.AgentControl/%s", argv[2]);
	grpc_init();
	cq = grpc_completion_queue_create_for_pluck(NULL);
	ch = grpc_unary_insecure_channel(argv[1], false);
	for (long i = 0; i < count; i++) {
		clock_gettime(CLOCK_MONOTONIC, &t0);
		grpc_unary_call(ch, cq, method, auth, buf, len, 5000, &ans);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		if (i == 0)
			first = ans.code;
		same += ans.code == first;
		if (ans.resp)
			grpc_byte_buffer_destroy(ans.resp);
	}
	printf("code=%d name=%s details=%s ms=%.1f\n", ans.code, grpc_unary_code_name(ans.code),
	       ans.details, (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6);
	if (count > 1)
		printf("calls=%ld same=%ld\n", count, same);
	grpc_channel_destroy(ch);
	grpc_completion_queue_shutdown(cq);
	grpc_completion_queue_destroy(cq);
	grpc_shutdown();
	free(auth);
	free(buf);
	return 0;
}
