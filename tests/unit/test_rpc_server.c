/*
 * test_rpc_server.c - the unary gRPC server (lib/grpc/rpc_server.h)
 * with a real gRPC C core client: a start_on_connect server listens without
 * running any of the gRPC core (no gRPC thread in the process) until a
 * client connects, then answers calls on every connection; it stops cleanly
 * with no connection ever made, with idle connections open, and after a
 * bare TCP connection that never spoke; an address in use is refused;
 * a named address ("localhost:0") starts the core at once. A method the
 * server does not have is answered UNIMPLEMENTED at once (not at the
 * caller's deadline) and counted, and the server keeps answering. A
 * compressed message is refused (the server does not accept_compressed)
 * instead of being inflated by gRPC, and a message over the receive limit,
 * which the core refuses itself, is reported through on_unread. A message
 * flagged compressed without grpc-encoding and a unary call with two
 * messages are answered INTERNAL, counted, without the handler.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <grpc/byte_buffer.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>

#include "check.h"
#include "grpc_unary.h"
#include "rpc_server.h"

#define METHOD "/traceprof.test.Echo/Echo"

/* Echoes the request with "echo:" in front; INVALID_ARGUMENT for "bad". */
static void echo(void *ctx, const struct rpc_request *req, struct rpc_reply *rep)
{
	(void)ctx;
	if (req->unreadable)
		return; /* the server's INVALID_ARGUMENT stands */
	if (req->len == 3 && memcmp(req->data, "bad", 3) == 0) {
		rep->code = GRPC_STATUS_INVALID_ARGUMENT;
		snprintf(rep->message, sizeof(rep->message), "bad request");
		return;
	}
	rep->code = GRPC_STATUS_OK;
	rep->data = malloc(req->len + 5);
	if (!rep->data) {
		rep->code = GRPC_STATUS_RESOURCE_EXHAUSTED;
		return;
	}
	memcpy(rep->data, "echo:", 5);
	memcpy(rep->data + 5, req->data, req->len);
	rep->len = req->len + 5;
}

static volatile int unread; /* calls on_unread reported */

static void count_unread(void *ctx)
{
	(void)ctx;
	unread++;
}

static struct rpc_server *start(const char *addr, bool lazy)
{
	static const char *const methods[] = {METHOD};

	return rpc_server_start(&(struct rpc_server_opts){
	    .addr = addr,
	    .creds = grpc_insecure_server_credentials_create(),
	    .methods = methods,
	    .nmethods = 1,
	    .max_receive_bytes = 1 << 20,
	    .handler = echo,
	    .name = "test",
	    .start_on_connect = lazy,
	    .on_unread = count_unread,
	});
}

/* Threads of this process whose name says they belong to the gRPC core. */
static int grpc_threads(void)
{
	static const char *const names[] = {"grpc_global_tim", "timer_manager", "event_engine",
					    "default-executo", "resolver-execut"};
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)) != NULL) {
		char path[300], comm[32] = "";
		FILE *f;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (fgets(comm, sizeof(comm), f))
			comm[strcspn(comm, "\n")] = '\0';
		fclose(f);
		for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
			n += strncasecmp(comm, names[i], strlen(names[i])) == 0;
	}
	closedir(d);
	return n;
}

static int tcp_connect(int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + t.tv_nsec / 1e9;
}

/* One call of method with len bytes; gzip: the client's gRPC core compresses the message. */
static grpc_status_code call_bytes(const char *target, const char *method, const void *msg,
				   size_t len, bool gzip, char *out, size_t outlen)
{
	grpc_channel_credentials *creds = grpc_insecure_credentials_create();
	grpc_channel *ch = gzip ? grpc_unary_insecure_channel(target, true)
				: grpc_unary_channel(target, creds, NULL);
	grpc_completion_queue *cq = grpc_completion_queue_create_for_pluck(NULL);
	struct grpc_unary_answer ans;

	grpc_channel_credentials_release(creds);
	grpc_unary_call(ch, cq, method, NULL, msg, len, 5000, &ans);
	out[0] = '\0';
	if (ans.resp) {
		grpc_slice all = grpc_unary_answer_take(&ans);
		size_t n =
		    GRPC_SLICE_LENGTH(all) < outlen - 1 ? GRPC_SLICE_LENGTH(all) : outlen - 1;

		memcpy(out, GRPC_SLICE_START_PTR(all), n);
		out[n] = '\0';
		grpc_slice_unref(all);
	} else if (ans.code != GRPC_STATUS_OK) {
		snprintf(out, outlen, "%s", ans.details);
	}
	grpc_channel_destroy(ch);
	grpc_completion_queue_shutdown(cq);
	while (
	    grpc_completion_queue_pluck(cq, NULL, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
	    GRPC_QUEUE_SHUTDOWN)
		;
	grpc_completion_queue_destroy(cq);
	return ans.code;
}

static grpc_status_code call(const char *target, const char *msg, char *out, size_t outlen)
{
	return call_bytes(target, METHOD, msg, strlen(msg), false, out, outlen);
}

/*
 * Methods the server does not have, with the 5 s deadline of call(): each
 * answered UNIMPLEMENTED well before it (without a generic call request
 * gRPC holds them until the deadline), counted; METHOD still answers.
 */
static void test_unknown_methods(struct rpc_server *s, const char *target)
{
	static const char *const unknown[] = {
	    "/traceprof.test.Echo/Nope",
	    "/opentelemetry.proto.collector.trace.v1.TraceService/Exporx",
	    "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"};
	char out[256];

	for (size_t i = 0; i < 3; i++) {
		double t0 = now_s(), took;
		grpc_status_code code =
		    call_bytes(target, unknown[i], "x", 1, false, out, sizeof(out));

		took = now_s() - t0;
		CHECK(code == GRPC_STATUS_UNIMPLEMENTED, "%s: status %d (%s), want UNIMPLEMENTED",
		      unknown[i], code, out);
		CHECK(took < 1.0, "%s answered after %.3f s", unknown[i], took);
		printf("unknown method %s: status %d in %.1f ms\n", unknown[i], code, took * 1e3);
	}
	CHECK(rpc_server_unimplemented(s) == 3, "unknown calls counted: %llu",
	      (unsigned long long)rpc_server_unimplemented(s));
	CHECK(call(target, "after", out, sizeof(out)) == GRPC_STATUS_OK &&
		  strcmp(out, "echo:after") == 0,
	      "the server answers after unknown methods: %s", out);
}

/*
 * A call that breaks gRPC's rules: nmsg messages of "x" (unary methods take one), or,
 * with flag_only, one plain message flagged compressed on a channel that sends no
 * grpc-encoding (as a raw compressed buffer is sent unchanged). The status and details.
 */
static grpc_status_code call_broken(const char *target, int nmsg, bool flag_only, char *out,
				    size_t outlen)
{
	grpc_channel_credentials *creds = grpc_insecure_credentials_create();
	grpc_channel *ch = grpc_unary_channel(target, creds, NULL);
	grpc_completion_queue *cq = grpc_completion_queue_create_for_pluck(NULL);
	grpc_slice sl = grpc_slice_from_static_string("x"), details = grpc_empty_slice();
	grpc_byte_buffer *msg =
	    flag_only ? grpc_raw_compressed_byte_buffer_create(&sl, 1, GRPC_COMPRESS_GZIP)
		      : grpc_raw_byte_buffer_create(&sl, 1);
	grpc_byte_buffer *resp = NULL;
	grpc_metadata_array md0, md1;
	grpc_status_code code = GRPC_STATUS_UNKNOWN;
	grpc_call *c = grpc_channel_create_call(
	    ch, NULL, GRPC_PROPAGATE_DEFAULTS, cq, grpc_slice_from_static_string(METHOD), NULL,
	    gpr_time_add(gpr_now(GPR_CLOCK_REALTIME), gpr_time_from_millis(5000, GPR_TIMESPAN)),
	    NULL);
	grpc_op ops[4];

	grpc_channel_credentials_release(creds);
	grpc_metadata_array_init(&md0);
	grpc_metadata_array_init(&md1);
	memset(ops, 0, sizeof(ops));
	ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
	ops[1].op = GRPC_OP_RECV_INITIAL_METADATA;
	ops[1].data.recv_initial_metadata.recv_initial_metadata = &md0;
	ops[2].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
	ops[2].data.recv_status_on_client.trailing_metadata = &md1;
	ops[2].data.recv_status_on_client.status = &code;
	ops[2].data.recv_status_on_client.status_details = &details;
	ops[3].op = GRPC_OP_RECV_MESSAGE; /* else an answer's message holds up its status */
	ops[3].data.recv_message.recv_message = &resp;
	grpc_call_start_batch(c, ops, 4, (void *)1, NULL);
	for (int i = 0; i < nmsg; i++) { /* one message per batch: the core sends each */
		memset(ops, 0, sizeof(ops));
		ops[0].op = GRPC_OP_SEND_MESSAGE;
		ops[0].data.send_message.send_message = msg;
		ops[1].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
		grpc_call_start_batch(c, ops, i == nmsg - 1 ? 2 : 1, (void *)2, NULL);
		grpc_completion_queue_pluck(cq, (void *)2, gpr_inf_future(GPR_CLOCK_REALTIME),
					    NULL);
	}
	grpc_completion_queue_pluck(cq, (void *)1, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
	snprintf(out, outlen, "%.*s", (int)GRPC_SLICE_LENGTH(details),
		 (const char *)GRPC_SLICE_START_PTR(details));
	grpc_slice_unref(details);
	grpc_metadata_array_destroy(&md0);
	grpc_metadata_array_destroy(&md1);
	grpc_byte_buffer_destroy(msg);
	if (resp)
		grpc_byte_buffer_destroy(resp);
	grpc_call_unref(c);
	grpc_channel_destroy(ch);
	grpc_completion_queue_shutdown(cq);
	while (
	    grpc_completion_queue_pluck(cq, NULL, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
	    GRPC_QUEUE_SHUTDOWN)
		;
	grpc_completion_queue_destroy(cq);
	return code;
}

/*
 * What the gRPC spec refuses, before the handler: a message flagged compressed
 * without grpc-encoding (INTERNAL), a unary call with two messages (INTERNAL,
 * as grpc-java and grpc-go answer); both counted, the server answers after.
 */
static void test_protocol_errors(struct rpc_server *s, const char *target)
{
	struct rpc_server_errors e;
	char out[256];
	grpc_status_code code;

	code = call_broken(target, 1, true, out, sizeof(out));
	CHECK(code == GRPC_STATUS_INTERNAL && strstr(out, "grpc-encoding"),
	      "compressed flag without grpc-encoding: status %d (%s), want INTERNAL", code, out);
	code = call_broken(target, 2, false, out, sizeof(out));
	CHECK(code == GRPC_STATUS_INTERNAL && strstr(out, "more than one"),
	      "unary call with two messages: status %d (%s), want INTERNAL", code, out);
	code = call_broken(target, 1, false, out, sizeof(out));
	CHECK(code == GRPC_STATUS_OK, "one message in its own batch: status %d (%s)", code, out);
	rpc_server_get_errors(s, &e);
	CHECK(e.no_encoding == 1 && e.extra_messages == 1,
	      "counted: no_encoding=%llu extra_messages=%llu", (unsigned long long)e.no_encoding,
	      (unsigned long long)e.extra_messages);
	CHECK(call(target, "after", out, sizeof(out)) == GRPC_STATUS_OK &&
		  strcmp(out, "echo:after") == 0,
	      "the server answers after protocol errors: %s", out);
}

int main(void)
{
	struct rpc_server *s, *busy, *named;
	char target[64], busy_addr[64], out[256];
	double t0;
	int port, fd, idle;

	/* never connected: no gRPC at all, and a quick stop */
	s = start("127.0.0.1:0", true);
	CHECK(s != NULL, "lazy server starts: %s", strerror(errno));
	if (!s)
		return check_done();
	CHECK(rpc_server_port(s) > 0, "a port is bound: %d", rpc_server_port(s));
	CHECK(!rpc_server_core_started(s), "no gRPC core before a connection");
	CHECK(grpc_threads() == 0, "no gRPC thread before a connection: %d", grpc_threads());
	t0 = now_s();
	rpc_server_stop(s);
	CHECK(now_s() - t0 < 1.0, "stop without a connection takes %.3f s", now_s() - t0);
	CHECK(grpc_threads() == 0, "still no gRPC thread after stop: %d", grpc_threads());

	/* a bare TCP connection starts the core; the connection's close harms nothing */
	s = start("127.0.0.1:0", true);
	CHECK(s != NULL, "lazy server starts again");
	if (!s)
		return check_done();
	port = rpc_server_port(s);
	snprintf(busy_addr, sizeof(busy_addr), "127.0.0.1:%d", port);
	busy = start(busy_addr, true);
	CHECK(busy == NULL && errno == EADDRINUSE, "the same port again is refused: errno %d",
	      errno);
	fd = tcp_connect(port);
	CHECK(fd >= 0, "tcp connect: %s", strerror(errno));
	for (int i = 0; i < 200 && !rpc_server_core_started(s); i++)
		usleep(10000);
	CHECK(rpc_server_core_started(s), "the first connection started the gRPC core");
	/* the core makes its threads as it starts: on a busy machine a little later */
	for (int i = 0; i < 200 && grpc_threads() == 0; i++)
		usleep(10000);
	CHECK(grpc_threads() > 0, "gRPC threads run now: %d", grpc_threads());
	if (fd >= 0)
		close(fd);

	/* real calls, each on a new connection, and an error status */
	grpc_init(); /* the client's own */
	snprintf(target, sizeof(target), "127.0.0.1:%d", port);
	for (int i = 0; i < 3; i++) {
		char msg[32];

		snprintf(msg, sizeof(msg), "hello %d", i);
		CHECK(call(target, msg, out, sizeof(out)) == GRPC_STATUS_OK, "call %d: %s", i, out);
		CHECK(strncmp(out, "echo:hello ", 11) == 0 && out[11] == '0' + i, "answer %d: %s",
		      i, out);
	}
	CHECK(call(target, "bad", out, sizeof(out)) == GRPC_STATUS_INVALID_ARGUMENT &&
		  strstr(out, "bad request"),
	      "error status through: %s", out);
	test_unknown_methods(s, target);
	test_protocol_errors(s, target);
	/* compressed: the handler never sees it, gRPC did not inflate it (4 KiB that gzip
	   shrinks: a client sends a message that would not shrink uncompressed) */
	{
		char *b = malloc(4096);

		if (!b)
			abort();
		memset(b, 'a', 4096);
		CHECK(call_bytes(target, METHOD, b, 4096, true, out, sizeof(out)) ==
			      GRPC_STATUS_INVALID_ARGUMENT &&
			  strstr(out, "compressed messages are not accepted"),
		      "compressed message refused: %.60s", out);
		free(b);
	}
	/* over the receive limit (1 MiB): refused by the core, reported as unread */
	{
		size_t big = (1 << 20) + 1;
		char *b = calloc(1, big);

		CHECK(b && call_bytes(target, METHOD, b, big, false, out, sizeof(out)) ==
			       GRPC_STATUS_RESOURCE_EXHAUSTED,
		      "over the receive limit: %s", out);
		for (int i = 0; i < 200 && unread < 1; i++)
			usleep(10000);
		CHECK(unread == 1, "on_unread reported %d calls", unread);
		free(b);
	}
	CHECK(call(target, "after", out, sizeof(out)) == GRPC_STATUS_OK &&
		  strcmp(out, "echo:after") == 0,
	      "a call after the refusals: %s", out);

	/* stop with an idle connection open */
	idle = tcp_connect(port);
	CHECK(idle >= 0, "idle connection");
	t0 = now_s();
	rpc_server_stop(s);
	CHECK(now_s() - t0 < 5.0, "stop with an idle connection takes %.3f s", now_s() - t0);
	CHECK(tcp_connect(port) < 0, "nothing listens after stop");
	if (idle >= 0)
		close(idle);

	/* a name: gRPC resolves and listens itself, the core runs from the start */
	named = start("localhost:0", true);
	CHECK(named != NULL, "named address starts");
	if (named) {
		CHECK(rpc_server_core_started(named), "named address: core started at once");
		snprintf(target, sizeof(target), "localhost:%d", rpc_server_port(named));
		CHECK(call(target, "x", out, sizeof(out)) == GRPC_STATUS_OK &&
			  strcmp(out, "echo:x") == 0,
		      "named address answers: %s", out);
		rpc_server_stop(named);
	}
	grpc_shutdown();
	return check_done();
}
