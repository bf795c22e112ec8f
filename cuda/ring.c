/*
 * ring.c - the record ring of libtraceprof-cuda (include/traceprof/cuda_ring.h)
 * and the launch marker. No CUDA here: the stand-in runtime of the tests
 * drives the same code as the real CUPTI does.
 *
 * The ring lives in a memfd mapped once per process and never waits for
 * its reader: a full ring drops the record and counts it. The mapping is
 * not inherited by a child (MADV_DONTFORK): a forked child that uses
 * CUDA makes a ring of its own.
 */
#include "tpcuda.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* The name cache: the address CUPTI keeps a kernel's name at -> where it is in the ring. */
#define NAME_SLOTS 8192u
struct name_slot {
	const void *key;
	uint32_t off;
	uint32_t len;
};

static pthread_mutex_t ring_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t ring_once = PTHREAD_ONCE_INIT;
static struct tp_cuda_ring_hdr *ring_hdr;
static size_t ring_bytes;
static struct tp_cuda_rec *ring_recs;
static char *ring_names;
static struct name_slot names[NAME_SLOTS];
static char demangled[TPC_MAX_NAME + 1]; /* under ring_lock */

__attribute__((visibility("default"), noinline, noclone, used)) void
traceprof_cuda_launch(uint32_t correlation_id, uint32_t device, uint64_t stream, uint32_t api)
{
	/* The agent's uprobe reads the arguments from the registers here. */
#if defined(__x86_64__)
	/* The probe point: a 5-byte nop, each argument in its ABI register (cuda_ring.h). */
	__asm__ volatile(".globl " TP_CUDA_MARKER_PROBE "\n\t"
			 ".type " TP_CUDA_MARKER_PROBE ", @function\n" TP_CUDA_MARKER_PROBE ":\n\t"
			 ".byte 0x0f, 0x1f, 0x44, 0x00, 0x00\n\t"
			 ".size " TP_CUDA_MARKER_PROBE ", 5"
			 :
			 : "D"(correlation_id), "S"(device), "d"(stream), "c"(api)
			 : "memory");
#else
	__asm__ volatile("" : : "r"(correlation_id), "r"(device), "r"(stream), "r"(api) : "memory");
#endif
}

static uint64_t env_size(const char *name, uint64_t dflt, uint64_t lo, uint64_t hi)
{
	const char *s = getenv(name);
	char *end;
	unsigned long long v;

	if (!s || !*s)
		return dflt;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end || v < lo || v > hi)
		return dflt;
	return v;
}

static uint32_t pow2_at_least(uint64_t n)
{
	uint32_t p = 1;

	while (p < n)
		p <<= 1;
	return p;
}

static void forget_ring(void)
{
	/* In a forked child: the parent's mapping is not here (MADV_DONTFORK). */
	ring_hdr = NULL;
	ring_recs = NULL;
	ring_names = NULL;
	memset(names, 0, sizeof(names));
	ring_once = (pthread_once_t)PTHREAD_ONCE_INIT;
	pthread_mutex_init(&ring_lock, NULL);
}

static void make_ring(void)
{
	uint32_t nrecs = pow2_at_least(env_size("TRACEPROF_CUDA_RING_RECORDS", TPC_DEFAULT_RECORDS,
						TPC_MIN_RECORDS, TPC_MAX_RECORDS));
	uint32_t nbytes = (uint32_t)env_size("TRACEPROF_CUDA_NAMES_BYTES", TPC_DEFAULT_NAMES_BYTES,
					     4096, 64u << 20);
	size_t recs_off = TP_CUDA_HDR_BYTES;
	size_t names_off = recs_off + (size_t)nrecs * sizeof(struct tp_cuda_rec);
	size_t bytes = names_off + nbytes;
	struct tp_cuda_ring_hdr *h;
	void *p;
	int fd;

	fd = memfd_create(TP_CUDA_RING_NAME, MFD_CLOEXEC);
	if (fd < 0)
		return;
	if (ftruncate(fd, (off_t)bytes) != 0) {
		close(fd);
		return;
	}
	p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (p == MAP_FAILED)
		return;
	(void)madvise(p, bytes, MADV_DONTFORK);
	h = p;
	h->version = TP_CUDA_RING_VERSION;
	h->rec_bytes = sizeof(struct tp_cuda_rec);
	h->nrecs = nrecs;
	h->names_bytes = nbytes;
	h->recs_off = recs_off;
	h->names_off = names_off;
	h->pid = (uint32_t)getpid();
	ring_bytes = bytes;
	ring_recs = (struct tp_cuda_rec *)((char *)p + recs_off);
	ring_names = (char *)p + names_off;
	__atomic_store_n(&h->magic, TP_CUDA_RING_MAGIC, __ATOMIC_RELEASE);
	ring_hdr = h;
	pthread_atfork(NULL, NULL, forget_ring);
}

struct tp_cuda_ring_hdr *tpc_ring(void)
{
	pthread_once(&ring_once, make_ring);
	return ring_hdr;
}

void tpc_count(uint64_t *counter, uint64_t n)
{
	__atomic_fetch_add(counter, n, __ATOMIC_RELAXED);
}

/* Under ring_lock: the name's place in the names area, appended on first sight. */
static void intern_name(struct tp_cuda_ring_hdr *h, const void *key, const char *name,
			struct tp_cuda_rec *r)
{
	uint32_t i = (uint32_t)(((uintptr_t)key >> 4) * 2654435761u) & (NAME_SLOTS - 1);
	size_t len;
	uint64_t used;

	for (uint32_t n = 0; key && n < 16; n++, i = (i + 1) & (NAME_SLOTS - 1)) {
		if (names[i].key == key) {
			r->name_off = names[i].off;
			r->name_len = names[i].len;
			return;
		}
		if (!names[i].key)
			break;
	}
	/* First sight: demangled once (C++ kernels), then kept by its key. */
	name = tpc_demangle(name, demangled, sizeof(demangled));
	len = name ? strnlen(name, TPC_MAX_NAME) : 0;
	used = h->names_used;
	if (len == 0 || used + len > h->names_bytes) {
		r->flags |= len ? TP_CUDA_REC_NAME_LOST : 0;
		h->names_lost += len ? 1 : 0;
		return;
	}
	memcpy(ring_names + used, name, len);
	/* The bytes before the offset that says they are there. */
	__atomic_store_n(&h->names_used, used + len, __ATOMIC_RELEASE);
	r->name_off = (uint32_t)used;
	r->name_len = (uint32_t)len;
	if (key && !names[i].key)
		names[i] = (struct name_slot){.key = key, .off = r->name_off, .len = r->name_len};
}

int tpc_publish(uint64_t start_ns, uint64_t end_ns, uint64_t stream, uint32_t correlation_id,
		uint32_t device, const void *name_key, const char *name)
{
	struct tp_cuda_ring_hdr *h = tpc_ring();
	struct tp_cuda_rec r = {.start_ns = start_ns,
				.end_ns = end_ns,
				.stream = stream,
				.correlation_id = correlation_id,
				.device = device,
				.kind = TP_CUDA_REC_KERNEL};
	uint64_t head, tail;

	if (!h)
		return -1;
	pthread_mutex_lock(&ring_lock);
	head = h->head;
	tail = __atomic_load_n(&h->tail, __ATOMIC_ACQUIRE);
	if (head - tail >= h->nrecs) {
		h->dropped_full++;
		pthread_mutex_unlock(&ring_lock);
		return -1;
	}
	intern_name(h, name_key, name, &r);
	ring_recs[head & (h->nrecs - 1)] = r;
	__atomic_store_n(&h->head, head + 1, __ATOMIC_RELEASE);
	h->records++;
	pthread_mutex_unlock(&ring_lock);
	return 0;
}

typedef char *(*demangle_fn)(const char *, char *, size_t *, int *);

const char *tpc_demangle(const char *name, char *out, size_t size)
{
	static demangle_fn fn;
	static int looked;
	char *d;
	int status = -1;

	if (!name || name[0] != '_' || name[1] != 'Z' || size == 0)
		return name;
	if (!__atomic_load_n(&looked, __ATOMIC_ACQUIRE)) {
		/*
		 * The C++ runtime's demangler. In the global scope where the
		 * program links it; else from the copy a library loaded
		 * privately (Python's extensions are loaded RTLD_LOCAL, and
		 * with them libstdc++), or a new local one.
		 */
		fn = (demangle_fn)dlsym(RTLD_DEFAULT, "__cxa_demangle");
		if (!fn) {
			void *h = dlopen("libstdc++.so.6", RTLD_NOW | RTLD_LOCAL);

			fn = h ? (demangle_fn)dlsym(h, "__cxa_demangle") : NULL;
		}
		__atomic_store_n(&looked, 1, __ATOMIC_RELEASE);
	}
	if (!fn)
		return name;
	d = fn(name, NULL, NULL, &status);
	if (status != 0 || !d) {
		free(d);
		return name;
	}
	strncpy(out, d, size - 1);
	out[size - 1] = '\0';
	free(d);
	return out;
}
