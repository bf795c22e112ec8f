/*
 * obi_workload.c - a stand-in for OpenTelemetry eBPF Instrumentation's
 * trace map, for e2e_agent_obi. OBI itself cannot run here; this program
 * makes and fills a map of the layout OBI pins (an LRU hash named
 * traces_ctx_v1: key the thread's pid_tgid, tgid in the high 32 bits;
 * value 16 bytes of trace id then 8 of span id), as OBI does while a
 * thread serves a request.
 *
 *   obi_workload pin PATH [bad]   makes the map and pins it at PATH (bad:
 *                                 a 16-byte value, a layout the agent
 *                                 must refuse), then exits; the pin keeps it
 *   obi_workload run PATH N TAG   N requests on each of two threads: the
 *                                 thread's entry set, ~80 ms of CPU, the
 *                                 entry deleted, ~40 ms of CPU outside any
 *                                 request. Thread 2 also attaches an OTEP
 *                                 4947 context (the SDK) with another
 *                                 trace id during its requests: that one
 *                                 must win. Prints one line a request:
 *                                 "req obi=TRACE sdk=TRACE|-".
 *
 * Trace ids: byte 0 0x0b, byte 1 TAG, byte 2 the thread (1, 2), byte 3 1
 * for OBI's id and 2 for the SDK's, bytes 12-15 the request number.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "traceprof/sdk.h"

static int map_fd;
static int requests, tag;

static int64_t thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static volatile uint64_t sink;

static __attribute__((noinline)) void burn_ms(int ms)
{
	int64_t end = thread_cpu_ns() + (int64_t)ms * 1000000;
	uint64_t x = sink;

	while (thread_cpu_ns() < end)
		for (int i = 0; i < 10000; i++)
			x = x * 6364136223846793005ull + 1442695040888963407ull;
	sink = x;
}

static void make_id(uint8_t *id, int thread, int which, int req)
{
	memset(id, 0, 16);
	id[0] = 0x0b;
	id[1] = (uint8_t)tag;
	id[2] = (uint8_t)thread;
	id[3] = (uint8_t)which;
	id[12] = (uint8_t)(req >> 24);
	id[13] = (uint8_t)(req >> 16);
	id[14] = (uint8_t)(req >> 8);
	id[15] = (uint8_t)req;
}

static void hex(const uint8_t *b, char *out)
{
	for (int i = 0; i < 16; i++)
		sprintf(out + 2 * i, "%02x", b[i]);
}

static void *worker(void *arg)
{
	int thread = (int)(intptr_t)arg;
	uint64_t key = ((uint64_t)getpid() << 32) | (uint32_t)syscall(SYS_gettid);

	for (int r = 1; r <= requests; r++) {
		uint8_t value[24], sdk[16], span[8] = {0, 0, 0, 0, 0, 0, 0, 1};
		char a[33], b[33] = "-";

		make_id(value, thread, 1, r);
		memset(value + 16, 0, 8);
		value[23] = (uint8_t)r;
		/* thread 2: the SDK's context is attached whenever OBI's entry is there */
		if (thread == 2) {
			make_id(sdk, thread, 2, r);
			tp_sdk_attach(sdk, span, 1, NULL, 0);
			hex(sdk, b);
		}
		if (bpf_map_update_elem(map_fd, &key, value, BPF_ANY)) {
			perror("obi_workload: map update");
			exit(1);
		}
		burn_ms(80);
		bpf_map_delete_elem(map_fd, &key);
		if (thread == 2)
			tp_sdk_detach();
		hex(value, a);
		printf("req obi=%s sdk=%s\n", a, b);
		burn_ms(40);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t t[2];

	if (argc >= 3 && strcmp(argv[1], "pin") == 0) {
		int bad = argc > 3 && strcmp(argv[3], "bad") == 0;
		int fd = bpf_map_create(BPF_MAP_TYPE_LRU_HASH, "traces_ctx_v1", 8, bad ? 16 : 24,
					1 << 14, NULL);

		if (fd < 0 || bpf_obj_pin(fd, argv[2])) {
			fprintf(stderr, "obi_workload: cannot make and pin the map at %s: %s\n",
				argv[2], strerror(errno));
			return 1;
		}
		return 0;
	}
	if (argc != 5 || strcmp(argv[1], "run") != 0 || (requests = atoi(argv[3])) < 1 ||
	    requests > 10000 || (tag = atoi(argv[4])) < 0 || tag > 255) {
		fprintf(stderr, "usage: obi_workload pin PATH [bad] | run PATH REQUESTS TAG\n");
		return 2;
	}
	map_fd = bpf_obj_get(argv[2]);
	if (map_fd < 0) {
		fprintf(stderr, "obi_workload: no map pinned at %s: %s\n", argv[2],
			strerror(errno));
		return 1;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	burn_ms(2000); /* looked at (its thread context found), unwind tables built */
	for (int i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, worker, (void *)(intptr_t)(i + 1));
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	return 0;
}
