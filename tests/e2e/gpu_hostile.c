/*
 * gpu_hostile - a process whose libtraceprof-cuda ring lies (docs/gpu.md,
 * "What the agent trusts of a ring"): the agent must count what it refuses and go
 * on. usage: gpu_hostile LIB [badmagic]
 *
 * It creates its ring (a memfd named as the library's) with a valid header
 * (or, with badmagic, a wrong magic), then loads LIB (libtraceprof-cuda,
 * whose marker it calls), and in phases PHASE_MS apart: publishes one good
 * record among bad ones (a wrong kind, a name out of the names area, a
 * name whose offset and length overflow, a name that is not UTF-8, an end
 * before the start), moves head 2^40 records ahead, then behind the tail,
 * then shrinks the file under the agent and publishes more.
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "traceprof/cuda_ring.h"

#define NRECS	 64
#define NAMES	 4096
#define PHASE_MS 700

static void phase(const char *what)
{
	printf("phase %s\n", what);
	fflush(stdout);
	usleep(PHASE_MS * 1000);
}

int main(int argc, char **argv)
{
	size_t bytes = TP_CUDA_HDR_BYTES + NRECS * sizeof(struct tp_cuda_rec) + NAMES;
	void (*marker)(uint32_t, uint32_t, uint64_t, uint32_t);
	struct tp_cuda_ring_hdr *h;
	struct tp_cuda_rec *r;
	char *names;
	void *lib;
	int fd;

	if (argc < 2)
		return 2;
	fd = memfd_create(TP_CUDA_RING_NAME, MFD_CLOEXEC);
	if (fd < 0 || ftruncate(fd, (off_t)bytes) != 0)
		return 1;
	h = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (h == MAP_FAILED)
		return 1;
	h->magic = argc > 2 && !strcmp(argv[2], "badmagic") ? 0x1234 : TP_CUDA_RING_MAGIC;
	h->version = TP_CUDA_RING_VERSION;
	h->rec_bytes = sizeof(struct tp_cuda_rec);
	h->nrecs = NRECS;
	h->names_bytes = NAMES;
	h->recs_off = TP_CUDA_HDR_BYTES;
	h->names_off = TP_CUDA_HDR_BYTES + NRECS * sizeof(struct tp_cuda_rec);
	h->pid = (uint32_t)getpid();
	r = (struct tp_cuda_rec *)((char *)h + h->recs_off);
	names = (char *)h + h->names_off;
	lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	marker = lib ? (void (*)(uint32_t, uint32_t, uint64_t, uint32_t))dlsym(lib, TP_CUDA_MARKER)
		     : NULL;
	if (!marker) {
		fprintf(stderr, "gpu_hostile: %s\n", dlerror());
		return 1;
	}
	printf("ready pid=%d\n", (int)getpid());
	phase("loaded");
	memcpy(names, "good_kernel", 11);
	memcpy(names + 16, "\xff\xfe bad", 5);
	__atomic_store_n(&h->names_used, 32, __ATOMIC_RELEASE);
	for (uint32_t i = 0; i < 6; i++) {
		r[i] = (struct tp_cuda_rec){.start_ns = 1000,
					    .end_ns = 3000,
					    .correlation_id = i + 1,
					    .kind = TP_CUDA_REC_KERNEL,
					    .name_len = 11};
		marker(i + 1, 0, 0, TP_CUDA_API_RUNTIME);
	}
	r[1].kind = 9;
	r[2].name_off = 4000, r[2].name_len = 500;
	r[3].name_off = 16, r[3].name_len = 5;
	r[4].end_ns = 10;
	r[5].name_off = 0xffffffffu, r[5].name_len = 0xffffffffu;
	__atomic_store_n(&h->head, 6, __ATOMIC_RELEASE);
	phase("records");
	__atomic_store_n(&h->head, (1ull << 40), __ATOMIC_RELEASE);
	phase("ahead");
	__atomic_store_n(&h->head, 1, __ATOMIC_RELEASE);
	phase("behind");
	if (ftruncate(fd, TP_CUDA_HDR_BYTES) != 0)
		return 1;
	__atomic_store_n(&h->head, __atomic_load_n(&h->tail, __ATOMIC_ACQUIRE) + 3,
			 __ATOMIC_RELEASE);
	phase("shrunk");
	return 0;
}
