/*
 * test_cuda_ring - libtraceprof-cuda against the stand-in runtime: what
 * the agent relies on (docs/gpu.md).
 *
 *  - one marker call per launch call, with the launch's correlation id,
 *    whatever the API (runtime, Ex, driver, graph), none for a host
 *    function, once for the runtime's launch that calls the driver's;
 *  - one ring record per kernel that ran, with that id (a graph: all its
 *    kernels), its exact GPU time, device, stream and its name (C++ names
 *    demangled), a name stored once however often it runs;
 *  - a full ring drops and counts; a full names area counts and flags;
 *    TRACEPROF_CUDA=off does nothing; a forked child does not share the
 *    parent's ring.
 *
 * The marker is observed by defining it here: the library's call to its
 * exported marker goes to this executable's definition (the dynamic
 * linker's symbol interposition). The ring is read here with its own
 * reader, from include/traceprof/cuda_ring.h alone.
 *
 * usage: test_cuda_ring PATH_OF_THE_INJECTION_LIBRARY
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cupti_standin.h"
#include "standin_cuda.h"
#include "traceprof/cuda_ring.h"

static int failures;
#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			failures++;                                                                \
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                       \
			fprintf(stderr, __VA_ARGS__);                                              \
			fputc('\n', stderr);                                                       \
		}                                                                                  \
	} while (0)

#define MAX_MARKS 256
struct mark {
	uint32_t corr, device, api;
	uint64_t stream;
};
static struct mark marks[MAX_MARKS];
static unsigned nmarks;
static pthread_mutex_t marks_mu = PTHREAD_MUTEX_INITIALIZER;

void traceprof_cuda_launch(uint32_t correlation_id, uint32_t device, uint64_t stream, uint32_t api);
void traceprof_cuda_launch(uint32_t correlation_id, uint32_t device, uint64_t stream, uint32_t api)
{
	pthread_mutex_lock(&marks_mu);
	if (nmarks < MAX_MARKS)
		marks[nmarks++] = (struct mark){correlation_id, device, api, stream};
	pthread_mutex_unlock(&marks_mu);
}

/* The ring, found as the agent finds it: the memfd's mapping in our maps. */
static struct tp_cuda_ring_hdr *find_ring(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	void *found = NULL;

	while (f && fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;

		if (strstr(line, "/memfd:" TP_CUDA_RING_NAME) &&
		    sscanf(line, "%lx-%lx", &lo, &hi) == 2)
			found = (void *)lo;
	}
	if (f)
		fclose(f);
	return found;
}

static const struct tp_cuda_rec *rec_at(const struct tp_cuda_ring_hdr *h, uint64_t i)
{
	return (const struct tp_cuda_rec *)((const char *)h + h->recs_off) + (i & (h->nrecs - 1));
}

static int name_is(const struct tp_cuda_ring_hdr *h, const struct tp_cuda_rec *r, const char *want)
{
	const char *names = (const char *)h + h->names_off;

	return r->name_len == strlen(want) && r->name_off + r->name_len <= h->names_used &&
	       memcmp(names + r->name_off, want, r->name_len) == 0;
}

static const struct mark *mark_of(uint32_t corr)
{
	for (unsigned i = 0; i < nmarks; i++)
		if (marks[i].corr == corr)
			return &marks[i];
	return NULL;
}

static void host_fn(void *arg)
{
	(void)arg;
}

static void scenario_basic(void)
{
	struct standin_kernel gemm = {"standin_gemm", 100000};
	struct standin_kernel attn = {"_Z9attentionPKfS0_Pfi", 250000};
	struct standin_kernel soft = {"_ZN6layers7softmaxEv", 50000};
	struct standin_kernel gk[3] = {
	    {"graph_norm", 10000}, {"graph_proj", 20000}, {"graph_add", 0}};
	struct standin_graph g = {3, gk};
	struct tp_cuda_ring_hdr *h;
	const struct tp_cuda_rec *r;
	const struct mark *m;
	uint32_t want_api[5] = {TP_CUDA_API_RUNTIME, TP_CUDA_API_RUNTIME, TP_CUDA_API_DRIVER,
				TP_CUDA_API_GRAPH, TP_CUDA_API_RUNTIME};

	CHECK(cudaLaunchKernel(&gemm, 7) == 0, "launch");
	CHECK(cudaLaunchKernelExC(&attn, 7) == 0, "launch ex");
	CHECK(cuLaunchKernel(&soft, 9) == 0, "driver launch");
	CHECK(cudaGraphLaunch(&g, 7) == 0, "graph launch");
	CHECK(cudaLaunchHostFunc(7, host_fn, NULL) == 0, "host function");
	CHECK(cudaLaunchKernel(&gemm, 7) == 0, "launch again");
	cudaDeviceSynchronize();
	cuptiActivityFlushAll(1);

	CHECK(nmarks == 5, "marker calls: %u, want 5 (the host function and nested calls not)",
	      nmarks);
	for (unsigned i = 0; i < nmarks && i < 5; i++) {
		CHECK(marks[i].api == want_api[i], "marker %u: api %u, want %u", i, marks[i].api,
		      want_api[i]);
		CHECK(marks[i].device == 0, "marker %u: device %u", i, marks[i].device);
		for (unsigned j = 0; j < i; j++)
			CHECK(marks[i].corr != marks[j].corr, "markers %u and %u share an id", i,
			      j);
	}
	h = find_ring();
	CHECK(h != NULL, "no ring mapping");
	if (!h)
		return;
	CHECK(h->magic == TP_CUDA_RING_MAGIC && h->version == TP_CUDA_RING_VERSION, "header");
	CHECK(h->pid == (uint32_t)getpid(), "pid %u", h->pid);
	CHECK(h->rec_bytes == sizeof(struct tp_cuda_rec), "rec_bytes %u", h->rec_bytes);
	CHECK(h->head == 7 && h->records == 7, "records: head %" PRIu64 ", want 7 kernels",
	      h->head);
	CHECK(h->launches == 5, "launches counter %" PRIu64, h->launches);
	CHECK(h->nested_launches == 4, "nested launch calls %" PRIu64 ", want 4 (runtime->driver)",
	      h->nested_launches);
	CHECK(h->dropped_full == 0 && h->names_lost == 0 && h->cupti_dropped == 0, "no drops");
	if (h->head != 7 || nmarks != 5)
		return;
	/* Kernels run in launch order: gemm, attention, softmax, the graph's three, gemm. */
	struct {
		unsigned mark;
		const char *name;
		uint64_t ns, stream;
	} want[7] = {{0, "standin_gemm", 100000, 7},
		     {1, "attention(float const*, float const*, float*, int)", 250000, 7},
		     {2, "layers::softmax()", 50000, 9},
		     {3, "graph_norm", 10000, 7},
		     {3, "graph_proj", 20000, 7},
		     {3, "graph_add", 0, 7},
		     {4, "standin_gemm", 100000, 7}};
	for (unsigned i = 0; i < 7; i++) {
		unsigned mi = want[i].mark;

		r = rec_at(h, i);
		m = mark_of(r->correlation_id);
		CHECK(m == &marks[mi], "record %u: correlation id %u is not launch %u's", i,
		      r->correlation_id, mi);
		CHECK(name_is(h, r, want[i].name), "record %u: name, want %s", i, want[i].name);
		CHECK(r->end_ns - r->start_ns == want[i].ns,
		      "record %u: GPU time %" PRIu64 ", want %" PRIu64, i, r->end_ns - r->start_ns,
		      want[i].ns);
		CHECK(r->stream == want[i].stream && r->device == 0, "record %u: stream/device", i);
		CHECK(r->kind == TP_CUDA_REC_KERNEL && r->flags == 0, "record %u: kind/flags", i);
	}
	CHECK(rec_at(h, 0)->name_off == rec_at(h, 6)->name_off, "a name is stored once");
}

static void scenario_full(void)
{
	struct standin_kernel k = {"k", 0};
	struct tp_cuda_ring_hdr *h;

	for (int i = 0; i < 100; i++)
		cudaLaunchKernel(&k, 1);
	cudaDeviceSynchronize();
	cuptiActivityFlushAll(1);
	h = find_ring();
	CHECK(h && h->nrecs == 64, "ring of 64 records");
	if (!h)
		return;
	CHECK(h->records == 64 && h->dropped_full == 36,
	      "full ring: %" PRIu64 " kept, %" PRIu64 " dropped; want 64 and 36", h->records,
	      h->dropped_full);
	/* A reader takes them all: there is room again. */
	__atomic_store_n(&h->tail, h->head, __ATOMIC_RELEASE);
	for (int i = 0; i < 10; i++)
		cudaLaunchKernel(&k, 1);
	cudaDeviceSynchronize();
	cuptiActivityFlushAll(1);
	CHECK(h->records == 74 && h->dropped_full == 36, "after the reader: %" PRIu64 " kept",
	      h->records);
}

static void scenario_names(void)
{
	static char names[10][1001];
	struct standin_kernel k[10];
	struct tp_cuda_ring_hdr *h;
	unsigned lost = 0;

	for (int i = 0; i < 10; i++) {
		memset(names[i], 'a' + i, 1000);
		names[i][1000] = '\0';
		k[i] = (struct standin_kernel){names[i], 1};
		cudaLaunchKernel(&k[i], 1);
	}
	cudaDeviceSynchronize();
	cuptiActivityFlushAll(1);
	h = find_ring();
	CHECK(h && h->names_bytes == 4096, "names area of 4096 bytes");
	if (!h)
		return;
	CHECK(h->records == 10 && h->names_lost == 6, "names: %" PRIu64 " lost, want 6",
	      h->names_lost);
	for (unsigned i = 0; i < 10 && i < h->head; i++) {
		const struct tp_cuda_rec *r = rec_at(h, i);

		if (r->flags & TP_CUDA_REC_NAME_LOST) {
			lost++;
			CHECK(r->name_len == 0, "a lost name has no length");
		} else {
			CHECK(r->name_len == 1000 && name_is(h, r, names[i]), "name %u", i);
		}
	}
	CHECK(lost == 6, "records flagged: %u", lost);
}

static void scenario_off(void)
{
	struct standin_kernel k = {"k", 0};

	cudaLaunchKernel(&k, 1);
	cudaDeviceSynchronize();
	CHECK(nmarks == 0, "TRACEPROF_CUDA=off: %u marker calls", nmarks);
	CHECK(find_ring() == NULL, "TRACEPROF_CUDA=off: a ring");
}

static void scenario_fork(void)
{
	struct standin_kernel k = {"k", 0};
	pid_t pid;
	int st = 0;

	cudaLaunchKernel(&k, 1);
	cudaDeviceSynchronize();
	CHECK(find_ring() != NULL, "parent's ring");
	pid = fork();
	if (pid == 0)
		_exit(find_ring() == NULL ? 0 : 1);
	waitpid(pid, &st, 0);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the child maps the parent's ring");
}

static int run(const char *name, void (*fn)(void), const char *env)
{
	pid_t pid = fork();
	int st = 0;

	if (pid == 0) {
		if (env)
			putenv((char *)env);
		fn();
		_exit(failures ? 1 : 0);
	}
	waitpid(pid, &st, 0);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		fprintf(stderr, "scenario %s failed\n", name);
		return 1;
	}
	printf("ok %s\n", name);
	return 0;
}

int main(int argc, char **argv)
{
	int bad = 0;

	if (argc != 2) {
		fprintf(stderr, "usage: test_cuda_ring LIBRARY\n");
		return 2;
	}
	setenv("CUDA_INJECTION64_PATH", argv[1], 1);
	bad += run("basic", scenario_basic, NULL);
	bad += run("full", scenario_full, "TRACEPROF_CUDA_RING_RECORDS=64");
	bad += run("names", scenario_names, "TRACEPROF_CUDA_NAMES_BYTES=4096");
	bad += run("off", scenario_off, "TRACEPROF_CUDA=off");
	bad += run("fork", scenario_fork, NULL);
	return bad ? 1 : 0;
}
