/*
 * conn_flood.c - an attacker and a well-behaved exporter against one of the
 * agent's OTLP ports, at the same time (run_agent_conn_limits_test.sh).
 *
 *   conn_flood grpc PORT CONNS ADDRS SECONDS SERVICE
 *     CONNS idle TCP connections from 127.0.0.2 .. 127.0.0.(ADDRS+1) (ADDRS
 *     0: from 127.0.0.1, the exporter's own address, as in both modes), each
 *     reopened as soon as the agent closes it, for SECONDS; meanwhile, from
 *     127.0.0.1, an OTLP/gRPC exporter (the gRPC core's client, one
 *     channel opened once the flood is up) exports one server span of
 *     SERVICE every 200 ms with a 5 s deadline.
 *   conn_flood http PORT SLOW ADDRS SECONDS SERVICE
 *     SLOW slow senders from 127.0.0.2 .. 127.0.0.(ADDRS+1): half send a
 *     request's headers a few bytes a second, half send complete headers
 *     and a 1 MB body a few bytes a second; each reopens when closed;
 *     meanwhile, from 127.0.0.1, an exporter POSTs one span every 250 ms
 *     over one kept-alive connection (reopened only when the agent closes
 *     it between requests) and reads each answer within 5 s.
 *
 *   conn_flood burst PORT N
 *     N OTLP/gRPC exports at once from 127.0.0.1, each on a channel (and
 *     connection) of its own with a 10 s deadline, not retried; prints
 *     "exports=N ok=N" and the count of each other status.
 *
 * Both exporters retry as OTLP exporters do (gRPC UNAVAILABLE and
 * DEADLINE_EXCEEDED, HTTP 503 and lost connections; here at most twice,
 * 1 s apart). Prints "exports=N ok=N failed=N retried=N reopened=N
 * closed_by_agent=N" (the exporter's results, the attacker's connections
 * the agent closed) and
 * exits 0; the script judges. The attacker runs in child processes of at
 * most ATTACK_PER_PROC connections each, every one with its soft
 * RLIMIT_NOFILE raised to the hard one (which root without
 * CAP_SYS_RESOURCE cannot raise).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <grpc/grpc.h>
#include <grpc/grpc_security.h>

#include "otlp_build.h"
#include "otlp_grpc.h"

#define ATTACK_PER_PROC 8000

static int port, nconns, naddrs, seconds;
static const char *service;
static bool http_mode;
static atomic_bool done;
static uint64_t exports, ok, failed, reopened, retried;

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* A non-blocking connection to the port from 127.0.0.(2 + i % naddrs); -1 on failure. */
static int open_conn(int i)
{
	struct sockaddr_in src = {.sin_family = AF_INET}, dst = {.sin_family = AF_INET};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	src.sin_addr.s_addr =
	    htonl(naddrs ? 0x7f000002u + (uint32_t)(i % naddrs) : INADDR_LOOPBACK);
	dst.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	dst.sin_port = htons((uint16_t)port);
	if (bind(fd, (struct sockaddr *)&src, sizeof(src)) != 0 ||
	    (connect(fd, (struct sockaddr *)&dst, sizeof(dst)) != 0 && errno != EINPROGRESS)) {
		close(fd);
		return -1;
	}
	return fd;
}

/* The slow sender i's next few bytes (http mode); its request is never complete. */
static void trickle(int fd, int i, size_t *sent)
{
	static const char head[] = "POST /v1/traces HTTP/1.1\r\nHost: agent\r\n"
				   "Content-Type: application/x-protobuf\r\n";
	static const char body_head[] = "POST /v1/traces HTTP/1.1\r\nHost: agent\r\n"
					"Content-Type: application/x-protobuf\r\n"
					"Content-Length: 1000000\r\n\r\n";
	char buf[sizeof(body_head)];
	size_t n;

	if (i % 2 == 0) { /* headers, 4 bytes at a time, then made-up header lines */
		n = *sent < sizeof(head) - 1 ? 4 : 0;
		if (n && *sent + n > sizeof(head) - 1)
			n = sizeof(head) - 1 - *sent;
		memcpy(buf, n ? head + *sent : "X-a:", n ? n : 4);
		n = n ? n : 4;
	} else if (*sent == 0) { /* complete headers at once, then the body 4 bytes at a time */
		n = sizeof(body_head) - 1;
		memcpy(buf, body_head, n);
	} else {
		n = 4;
		memset(buf, 'x', n);
	}
	if (send(fd, buf, n, MSG_NOSIGNAL | MSG_DONTWAIT) > 0)
		*sent += n;
}

/* The attacker: connections first..first+nconns-1, reopened when closed, until done. */
static uint64_t attack(int first)
{
	int ep = epoll_create1(EPOLL_CLOEXEC), *fds = calloc((size_t)nconns, sizeof(int));
	size_t *sent = calloc((size_t)nconns, sizeof(size_t));
	struct epoll_event evs[256];
	uint64_t closed = 0;
	double next_trickle = now_s();

	for (int i = 0; i < nconns; i++) {
		fds[i] = open_conn(first + i);
		if (fds[i] >= 0)
			epoll_ctl(ep, EPOLL_CTL_ADD, fds[i],
				  &(struct epoll_event){.events = EPOLLRDHUP | EPOLLIN,
							.data.u32 = (uint32_t)i});
	}
	fprintf(stderr, "conn_flood: %d connections opened from %d\n", nconns, first);
	while (!atomic_load(&done)) {
		int n = epoll_wait(ep, evs, 256, 100);

		for (int k = 0; k < n; k++) {
			int i = (int)evs[k].data.u32;
			char b[512];

			if (recv(fds[i], b, sizeof(b), MSG_DONTWAIT) > 0 &&
			    !(evs[k].events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)))
				continue; /* an answer (503) before the close */
			closed++;
			close(fds[i]);
			sent[i] = 0;
			fds[i] = open_conn(first + i);
			if (fds[i] >= 0)
				epoll_ctl(ep, EPOLL_CTL_ADD, fds[i],
					  &(struct epoll_event){.events = EPOLLRDHUP | EPOLLIN,
								.data.u32 = (uint32_t)i});
		}
		if (http_mode && now_s() >= next_trickle) {
			for (int i = 0; i < nconns; i++)
				if (fds[i] >= 0)
					trickle(fds[i], i, &sent[i]);
			next_trickle = now_s() + 1;
		}
	}
	for (int i = 0; i < nconns; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	close(ep);
	free(fds);
	free(sent);
	return closed;
}

static void on_term(int sig)
{
	(void)sig;
	atomic_store(&done, true);
}

/*
 * Starts the attacker processes, each writing the count of its connections
 * the agent closed to its pipe at SIGTERM. Returns how many (pids, pipes).
 */
static int start_attackers(int total, pid_t *pids, int *pipes)
{
	int n = 0;

	for (int first = 0; first < total; first += ATTACK_PER_PROC, n++) {
		int p[2];

		if (pipe(p) != 0)
			return -1;
		pids[n] = fork();
		if (pids[n] == 0) {
			uint64_t closed;

			close(p[0]);
			signal(SIGTERM, on_term);
			nconns = total - first < ATTACK_PER_PROC ? total - first : ATTACK_PER_PROC;
			closed = attack(first);
			if (write(p[1], &closed, sizeof(closed)) != sizeof(closed))
				_exit(1);
			_exit(0);
		}
		close(p[1]);
		pipes[n] = p[0];
	}
	return n;
}

/* One export request: a server span of SERVICE with trace id derived from n. */
static uint8_t *export_body(uint32_t n, size_t *len)
{
	struct timespec t;
	struct tb_span sp;
	struct tb_resource res = {
	    .attrs = {{"service.name", service, 0}}, .spans = &sp, .nspans = 1};

	clock_gettime(CLOCK_REALTIME, &t);
	sp = tb_server_span(n, (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec);
	sp.attrs[0] = (struct tb_attr){"http.route", "/flood", 0};
	return tb_pack(&res, 1, len);
}

static void export_grpc(void)
{
	char target[64];
	grpc_channel_credentials *creds;
	grpc_completion_queue *cq;
	grpc_channel *ch;
	double end = now_s() + seconds;

	grpc_init();
	creds = grpc_insecure_credentials_create();
	cq = grpc_completion_queue_create_for_pluck(NULL);
	snprintf(target, sizeof(target), "127.0.0.1:%d", port);
	ch = grpc_channel_create(target, creds, NULL);
	for (uint32_t n = 1; now_s() < end; n++) {
		struct grpc_unary_answer ans;
		size_t len;
		uint8_t *buf = export_body(0x10000u + n, &len);

		/* as OTLP exporters do: UNAVAILABLE and DEADLINE_EXCEEDED are retried, here
		 * twice after 1 s (a refused connection leaves the channel failing for ~1 s) */
		for (int try = 0;; try++) {
			otlp_grpc_call(ch, cq, buf, len, 5, &ans);
			if (try == 2 || (ans.code != GRPC_STATUS_UNAVAILABLE &&
					 ans.code != GRPC_STATUS_DEADLINE_EXCEEDED))
				break;
			fprintf(stderr, "conn_flood: export %u: status %d %s; retried\n", n,
				ans.code, ans.details);
			if (ans.resp)
				grpc_byte_buffer_destroy(ans.resp);
			retried++;
			sleep(1);
		}
		free(buf);
		exports++;
		if (ans.code == GRPC_STATUS_OK) {
			ok++;
		} else {
			failed++;
			fprintf(stderr, "conn_flood: export %u: status %d %s\n", n, ans.code,
				ans.details);
		}
		if (ans.resp)
			grpc_byte_buffer_destroy(ans.resp);
		usleep(200000);
	}
	grpc_channel_destroy(ch);
	grpc_channel_credentials_release(creds);
	grpc_completion_queue_shutdown(cq);
	grpc_completion_queue_destroy(cq);
	grpc_shutdown();
}

/* An HTTP connection from 127.0.0.1 with 5 s send and receive timeouts. */
static int http_connect(void)
{
	struct sockaddr_in dst = {.sin_family = AF_INET};
	struct timeval tv = {5, 0};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	dst.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	dst.sin_port = htons((uint16_t)port);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&dst, sizeof(dst)) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* One POST on fd; the response's status, or -1 (the connection is unusable). */
static int http_post(int fd, const uint8_t *body, size_t len)
{
	char head[256], resp[4096];
	size_t got = 0;
	int n = snprintf(head, sizeof(head),
			 "POST /v1/traces HTTP/1.1\r\nHost: agent\r\n"
			 "Content-Type: application/x-protobuf\r\nContent-Length: %zu\r\n\r\n",
			 len),
	    status = -1;
	char *end;

	if (send(fd, head, (size_t)n, MSG_NOSIGNAL) != n ||
	    send(fd, body, len, MSG_NOSIGNAL) != (ssize_t)len)
		return -1;
	while (!(end = memmem(resp, got, "\r\n\r\n", 4))) { /* headers */
		ssize_t r = recv(fd, resp + got, sizeof(resp) - 1 - got, 0);

		if (r <= 0)
			return -1;
		got += (size_t)r;
	}
	resp[got] = '\0';
	if (sscanf(resp, "HTTP/1.1 %d", &status) != 1)
		return -1;
	{ /* the body, Content-Length bytes */
		char *cl = strcasestr(resp, "Content-Length:");
		size_t want = cl ? strtoul(cl + 15, NULL, 10) : 0,
		       have = got - (size_t)(end + 4 - resp);

		while (have < want) {
			ssize_t r = recv(fd, resp, sizeof(resp), 0);

			if (r <= 0)
				return -1;
			have += (size_t)r;
		}
	}
	return status;
}

static void export_http(void)
{
	double end = now_s() + seconds;
	int fd = -1;

	for (uint32_t n = 1; now_s() < end; n++) {
		size_t len;
		uint8_t *buf = export_body(0x20000u + n, &len);
		int status;

		/* a kept-alive connection the agent closed while idle: reopened, as clients do */
		if (fd >= 0) {
			struct pollfd p = {.fd = fd, .events = POLLIN | POLLRDHUP};

			if (poll(&p, 1, 0) > 0) {
				close(fd);
				fd = -1;
				reopened++;
			}
		}
		/* as OTLP exporters do: 503 and lost connections are retried, here twice after 1 s
		 */
		for (int try = 0;; try++) {
			if (fd < 0)
				fd = http_connect();
			status = fd >= 0 ? http_post(fd, buf, len) : -1;
			if (try == 2 || (status != 503 && status != -1))
				break;
			fprintf(stderr, "conn_flood: export %u: status %d; retried\n", n, status);
			if (fd >= 0)
				close(fd);
			fd = -1;
			retried++;
			sleep(1);
		}
		free(buf);
		exports++;
		if (status == 200) {
			ok++;
		} else {
			failed++;
			fprintf(stderr, "conn_flood: export %u: status %d\n", n, status);
			if (fd >= 0)
				close(fd);
			fd = -1;
		}
		usleep(250000);
	}
	if (fd >= 0)
		close(fd);
}

/* N exports at once, a channel each (no shared subchannel: a connection each). */
static int burst(int n)
{
	grpc_arg arg = {.type = GRPC_ARG_INTEGER,
			.key = (char *)GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL,
			.value.integer = 1};
	grpc_channel_args args = {1, &arg};
	grpc_channel_credentials *creds;
	grpc_completion_queue *cq;
	grpc_channel **ch = calloc((size_t)n, sizeof(*ch));
	grpc_call **calls = calloc((size_t)n, sizeof(*calls));
	grpc_status_code *code = calloc((size_t)n, sizeof(*code));
	grpc_metadata_array *md = calloc((size_t)n * 2, sizeof(*md));
	grpc_byte_buffer **resp = calloc((size_t)n, sizeof(*resp));
	grpc_slice *details = calloc((size_t)n, sizeof(*details));
	int counts[GRPC_STATUS_UNAUTHENTICATED + 1] = {0};
	char target[64];
	size_t len;
	uint8_t *buf = export_body(0x30000u, &len);
	grpc_slice sl = grpc_slice_from_copied_buffer((const char *)buf, len);
	grpc_byte_buffer *req = grpc_raw_byte_buffer_create(&sl, 1);

	grpc_init();
	creds = grpc_insecure_credentials_create();
	cq = grpc_completion_queue_create_for_next(NULL);
	snprintf(target, sizeof(target), "127.0.0.1:%d", port);
	for (int i = 0; i < n; i++) {
		grpc_op ops[6];

		ch[i] = grpc_channel_create(target, creds, &args);
		calls[i] = grpc_channel_create_call(
		    ch[i], NULL, GRPC_PROPAGATE_DEFAULTS, cq,
		    grpc_slice_from_static_string(OTLP_GRPC_METHOD), NULL,
		    gpr_time_add(gpr_now(GPR_CLOCK_REALTIME),
				 gpr_time_from_millis(10000, GPR_TIMESPAN)),
		    NULL);
		grpc_metadata_array_init(&md[2 * i]);
		grpc_metadata_array_init(&md[2 * i + 1]);
		memset(ops, 0, sizeof(ops));
		ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
		ops[1].op = GRPC_OP_SEND_MESSAGE;
		ops[1].data.send_message.send_message = req;
		ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
		ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
		ops[3].data.recv_initial_metadata.recv_initial_metadata = &md[2 * i];
		ops[4].op = GRPC_OP_RECV_MESSAGE;
		ops[4].data.recv_message.recv_message = &resp[i];
		ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
		ops[5].data.recv_status_on_client.trailing_metadata = &md[2 * i + 1];
		ops[5].data.recv_status_on_client.status = &code[i];
		ops[5].data.recv_status_on_client.status_details = &details[i];
		if (grpc_call_start_batch(calls[i], ops, 6, (void *)(intptr_t)(i + 1), NULL) !=
		    GRPC_CALL_OK)
			code[i] = GRPC_STATUS_INTERNAL;
	}
	for (int left = n; left > 0; left--)
		grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
	for (int i = 0; i < n; i++) {
		if (code[i] >= 0 && code[i] <= GRPC_STATUS_UNAUTHENTICATED)
			counts[code[i]]++;
		grpc_call_unref(calls[i]);
		grpc_channel_destroy(ch[i]);
	}
	printf("exports=%d ok=%d", n, counts[GRPC_STATUS_OK]);
	for (int c = 1; c <= GRPC_STATUS_UNAUTHENTICATED; c++)
		if (counts[c])
			printf(" %s=%d", grpc_unary_code_name((grpc_status_code)c), counts[c]);
	printf("\n");
	return 0; /* the rest is freed at exit */
}

int main(int argc, char **argv)
{
	struct rlimit rl;
	pid_t pids[16];
	int pipes[16], nproc;
	uint64_t closed = 0;

	if (argc == 4 && strcmp(argv[1], "burst") == 0) {
		port = atoi(argv[2]);
		service = "flood-burst";
		return port > 0 && atoi(argv[3]) > 0 ? burst(atoi(argv[3])) : 2;
	}
	if (argc != 7 || (strcmp(argv[1], "grpc") != 0 && strcmp(argv[1], "http") != 0)) {
		fprintf(stderr, "usage: conn_flood grpc|http PORT CONNS ADDRS SECONDS SERVICE\n"
				"       conn_flood burst PORT N\n");
		return 2;
	}
	http_mode = strcmp(argv[1], "http") == 0;
	port = atoi(argv[2]);
	nconns = atoi(argv[3]);
	naddrs = atoi(argv[4]);
	seconds = atoi(argv[5]);
	service = argv[6];
	if (port <= 0 || nconns <= 0 || nconns > 16 * ATTACK_PER_PROC || naddrs < 0 ||
	    naddrs > 250 || seconds <= 0) {
		fprintf(stderr, "conn_flood: bad arguments\n");
		return 2;
	}
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_max < ATTACK_PER_PROC + 64) {
		fprintf(stderr, "conn_flood: the open file limit is below %d\n",
			ATTACK_PER_PROC + 64);
		return 1;
	}
	rl.rlim_cur = rl.rlim_max;
	setrlimit(RLIMIT_NOFILE, &rl);
	nproc = start_attackers(nconns, pids, pipes);
	if (nproc < 0)
		return 1;
	sleep(2); /* the flood is up before the exporter connects */
	if (http_mode)
		export_http();
	else
		export_grpc();
	for (int i = 0; i < nproc; i++)
		kill(pids[i], SIGTERM);
	for (int i = 0; i < nproc; i++) {
		uint64_t c = 0;

		if (read(pipes[i], &c, sizeof(c)) == sizeof(c))
			closed += c;
		close(pipes[i]);
		waitpid(pids[i], NULL, 0);
	}
	printf("exports=%llu ok=%llu failed=%llu retried=%llu reopened=%llu closed_by_agent=%llu\n",
	       (unsigned long long)exports, (unsigned long long)ok, (unsigned long long)failed,
	       (unsigned long long)retried, (unsigned long long)reopened,
	       (unsigned long long)closed);
	return 0;
}
