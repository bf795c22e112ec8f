/*
 * process_ctx.c - the process context of OTEP 4719 and the thread context
 * reference data of OTEP 4947 (schema version, attribute key map) in it.
 *
 * One mapping per process, named OTEL_CTX: a memfd (shown in
 * /proc/<pid>/maps as /memfd:OTEL_CTX), or a shared anonymous mapping named
 * with prctl (shown as [anon_shmem:OTEL_CTX]) where memfd is refused. It
 * holds a 32-byte header and, right after it, the payload: a protobuf
 * ProcessContext { Resource resource = 1; repeated KeyValue attributes = 2 }
 * with the caller's resource attributes in resource and the threadlocal.*
 * reference data in attributes. The signature is written last at creation;
 * an update zeroes monotonic_published_at_ns (CLOCK_BOOTTIME), rewrites
 * payload and size, then
 * writes a new, strictly larger timestamp, with full CPU fences between
 * (readers run concurrently on other CPUs). A payload that outgrows the
 * mapping gets a new mapping (the old one is unmapped first).
 *
 * Publication is rare (start-up, a new attribute key); everything here runs
 * under one mutex: the SDK is the single writer the specs require.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "sdk_internal.h"
#include "traceprof/sdk.h"

#ifndef PR_SET_VMA
#define PR_SET_VMA	     0x53564d41
#define PR_SET_VMA_ANON_NAME 0
#endif
#ifndef MFD_CLOEXEC
#define MFD_CLOEXEC 0x0001U
#endif
#ifndef MFD_NOEXEC_SEAL
#define MFD_NOEXEC_SEAL 0x0008U
#endif

#define CTX_NAME	  "OTEL_CTX"
#define CTX_VERSION	  2
#define SCHEMA_VERSION	  "tls_v1"
#define MAX_KEYS	  256
#define RESOURCE_ATTRS	  1 /* Resource.attributes */
#define PCTX_RESOURCE	  1 /* ProcessContext.resource */
#define PCTX_ATTRS	  2 /* ProcessContext.attributes */
#define KEYVALUE_KEY	  1 /* KeyValue.key */
#define KEYVALUE_VALUE	  2 /* KeyValue.value */
#define ANYVALUE_STRING	  1 /* AnyValue.string_value */
#define ANYVALUE_ARRAY	  5 /* AnyValue.array_value */
#define ARRAYVALUE_VALUES 1 /* ArrayValue.values */

/* The OTEP 4719 header, at the start of the mapping. */
struct ctx_header {
	char signature[8];		    /* "OTEL_CTX", written last */
	uint32_t version;		    /* CTX_VERSION */
	uint32_t payload_size;		    /* bytes of protobuf at payload */
	uint64_t monotonic_published_at_ns; /* CLOCK_BOOTTIME ns; 0 in updates */
	const uint8_t *payload;		    /* the payload: right after this header */
};
_Static_assert(sizeof(struct ctx_header) == 32, "header is 32 bytes on LP64");

/* A growable protobuf output buffer. */
struct pb {
	uint8_t *p;  /* bytes, malloc'd */
	size_t len;  /* bytes used */
	size_t cap;  /* bytes allocated */
	bool failed; /* an allocation failed: the buffer is incomplete */
};

_Atomic uint32_t tp_sdk_nkeys;

static pthread_mutex_t ctx_lock = PTHREAD_MUTEX_INITIALIZER;
static char *keys[MAX_KEYS];	   /* attribute key map, append-only; owned */
static struct pb resource;	   /* encoded user attributes (service.name first) */
static bool have_resource;	   /* tp_sdk_process_publish succeeded at least once */
static char *service_name_copy;	   /* the published service.name, or NULL; owned */
static struct ctx_header *mapping; /* the published mapping, or NULL */
static size_t mapping_size;	   /* bytes mapped */
static pid_t mapping_pid;	   /* process that created it (not inherited by a child) */
static uint64_t last_published_ns; /* timestamp last written */

static void pb_put(struct pb *b, const void *data, size_t n)
{
	if (b->failed)
		return;
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		uint8_t *p;

		while (cap < b->len + n)
			cap *= 2;
		p = realloc(b->p, cap);
		if (!p) {
			b->failed = true;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->len, data, n);
	b->len += n;
}

static void pb_varint(struct pb *b, uint64_t v)
{
	uint8_t buf[10];

	pb_put(b, buf, (size_t)(pb_put_varint(buf, v) - buf));
}

/* Tag and length of a length-delimited field (all field numbers here are < 16). */
static void pb_len_field(struct pb *b, unsigned field, size_t len)
{
	pb_varint(b, field << 3 | PB_WT_LEN);
	pb_varint(b, len);
}

/* Size of a length-delimited field holding len bytes. */
static size_t len_field_size(size_t len)
{
	return 1 + pb_varint_size(len) + len;
}

/* field (a repeated KeyValue) += KeyValue{key, AnyValue{string_value}}. */
static void pb_attr_string(struct pb *b, unsigned field, const char *key, const char *value)
{
	size_t klen = strlen(key), vlen = strlen(value);
	size_t any = len_field_size(vlen);
	size_t kv = len_field_size(klen) + len_field_size(any);

	pb_len_field(b, field, kv);
	pb_len_field(b, KEYVALUE_KEY, klen);
	pb_put(b, key, klen);
	pb_len_field(b, KEYVALUE_VALUE, any);
	pb_len_field(b, ANYVALUE_STRING, vlen);
	pb_put(b, value, vlen);
}

/* field += KeyValue{key, AnyValue{array_value{string_value...}}}. */
static void pb_attr_string_array(struct pb *b, unsigned field, const char *key, char *const *values,
				 size_t n)
{
	size_t klen = strlen(key), arr = 0, any, kv;

	for (size_t i = 0; i < n; i++)
		arr += len_field_size(len_field_size(strlen(values[i])));
	any = len_field_size(arr);
	kv = len_field_size(klen) + len_field_size(any);
	pb_len_field(b, field, kv);
	pb_len_field(b, KEYVALUE_KEY, klen);
	pb_put(b, key, klen);
	pb_len_field(b, KEYVALUE_VALUE, any);
	pb_len_field(b, ANYVALUE_ARRAY, arr);
	for (size_t i = 0; i < n; i++) {
		size_t vlen = strlen(values[i]);

		pb_len_field(b, ARRAYVALUE_VALUES, len_field_size(vlen));
		pb_len_field(b, ANYVALUE_STRING, vlen);
		pb_put(b, values[i], vlen);
	}
}

static uint64_t next_timestamp(void)
{
	struct timespec ts;
	uint64_t ns;

	/* boot time: monotonic across suspend, comparable between processes */
	clock_gettime(CLOCK_BOOTTIME, &ts);
	ns = (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
	/* readers compare timestamps to detect an update: never reuse one */
	if (ns <= last_published_ns)
		ns = last_published_ns + 1;
	last_published_ns = ns;
	return ns;
}

static int name_mapping(void *addr, size_t size)
{
	if (prctl(PR_SET_VMA, PR_SET_VMA_ANON_NAME, (unsigned long)addr, size,
		  (unsigned long)CTX_NAME))
		return -errno;
	return 0;
}

/* Forgets a mapping that a fork left behind (MADV_DONTFORK: the child has none). */
static void check_fork(void)
{
	if (mapping && mapping_pid != getpid()) {
		mapping = NULL;
		mapping_size = 0;
	}
}

static void unmap_locked(void)
{
	if (!mapping)
		return;
	*(volatile uint64_t *)&mapping->monotonic_published_at_ns = 0;
	atomic_thread_fence(memory_order_seq_cst);
	munmap(mapping, mapping_size);
	mapping = NULL;
	mapping_size = 0;
}

/* Creates the mapping and publishes payload in it (OTEP 4719 publication). */
static int create_locked(const struct pb *payload)
{
	long page = sysconf(_SC_PAGESIZE);
	size_t size =
	    (sizeof(struct ctx_header) + payload->len + (size_t)page - 1) & ~((size_t)page - 1);
	struct ctx_header *h;
	uint64_t sig;
	bool memfd = true;
	int fd, err;

	fd = memfd_create(CTX_NAME, MFD_CLOEXEC | MFD_NOEXEC_SEAL);
	if (fd < 0 && errno == EINVAL) /* a kernel before 6.3 knows no MFD_NOEXEC_SEAL */
		fd = memfd_create(CTX_NAME, MFD_CLOEXEC);
	if (fd >= 0 && ftruncate(fd, (off_t)size)) {
		close(fd);
		fd = -1;
	}
	if (fd >= 0) {
		h = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		close(fd);
		if (h == MAP_FAILED)
			return -errno;
	} else {
		memfd = false;
		h = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
		if (h == MAP_FAILED)
			return -errno;
	}
	if (madvise(h, size, MADV_DONTFORK)) {
		err = -errno;
		goto out_unmap;
	}
	memcpy(h + 1, payload->p, payload->len);
	h->version = CTX_VERSION;
	h->payload_size = (uint32_t)payload->len;
	h->payload = (const uint8_t *)(h + 1);
	h->monotonic_published_at_ns = next_timestamp();
	atomic_thread_fence(memory_order_seq_cst);
	memcpy(&sig, CTX_NAME, sizeof(sig));
	*(volatile uint64_t *)h->signature = sig;
	atomic_thread_fence(memory_order_seq_cst);
	err = name_mapping(h, size);
	if (err && !memfd)
		goto out_unmap; /* neither a memfd nor a name: no reader could find it */
	mapping = h;
	mapping_size = size;
	mapping_pid = getpid();
	return 0;

out_unmap:
	munmap(h, size);
	return err;
}

/* Replaces the published payload (OTEP 4719 updating protocol). */
static int update_locked(const struct pb *payload)
{
	struct ctx_header *h = mapping;

	if (sizeof(*h) + payload->len > mapping_size) {
		unmap_locked();
		return create_locked(payload);
	}
	*(volatile uint64_t *)&h->monotonic_published_at_ns = 0;
	atomic_thread_fence(memory_order_seq_cst);
	memcpy(h + 1, payload->p, payload->len);
	*(volatile uint32_t *)&h->payload_size = (uint32_t)payload->len;
	*(const uint8_t *volatile *)&h->payload = (const uint8_t *)(h + 1);
	atomic_thread_fence(memory_order_seq_cst);
	*(volatile uint64_t *)&h->monotonic_published_at_ns = next_timestamp();
	atomic_thread_fence(memory_order_seq_cst);
	name_mapping(h, mapping_size); /* unconditional, result ignored (see the spec) */
	return 0;
}

/* Publishes resource + thread context reference data, creating or updating. */
static int publish_locked(void)
{
	struct pb payload = {0};
	int err;

	pb_len_field(&payload, PCTX_RESOURCE, resource.len);
	pb_put(&payload, resource.p, resource.len);
	pb_attr_string(&payload, PCTX_ATTRS, "threadlocal.schema_version", SCHEMA_VERSION);
	pb_attr_string_array(&payload, PCTX_ATTRS, "threadlocal.attribute_key_map", keys,
			     atomic_load(&tp_sdk_nkeys));
	if (payload.failed) {
		free(payload.p);
		return -ENOMEM;
	}
	check_fork();
	err = mapping ? update_locked(&payload) : create_locked(&payload);
	free(payload.p);
	return err;
}

TP_SDK_EXPORT int tp_sdk_process_publish(const char *service_name, const struct tp_sdk_kv *attrs,
					 size_t n)
{
	struct pb enc = {0};
	char *name;
	int err;

	if (!service_name || !*service_name || (n && !attrs))
		return -EINVAL;
	for (size_t i = 0; i < n; i++)
		if (!attrs[i].key || !*attrs[i].key || !attrs[i].value)
			return -EINVAL;
	pb_attr_string(&enc, RESOURCE_ATTRS, "service.name", service_name);
	for (size_t i = 0; i < n; i++)
		pb_attr_string(&enc, RESOURCE_ATTRS, attrs[i].key, attrs[i].value);
	if (enc.failed) {
		free(enc.p);
		return -ENOMEM;
	}
	name = strdup(service_name);
	if (!name) {
		free(enc.p);
		return -ENOMEM;
	}
	pthread_mutex_lock(&ctx_lock);
	free(resource.p);
	resource = enc;
	have_resource = true;
	free(service_name_copy);
	service_name_copy = name;
	err = publish_locked();
	pthread_mutex_unlock(&ctx_lock);
	return err;
}

TP_SDK_EXPORT int tp_sdk_process_remove(void)
{
	pthread_mutex_lock(&ctx_lock);
	check_fork();
	unmap_locked();
	free(resource.p);
	memset(&resource, 0, sizeof(resource));
	have_resource = false;
	free(service_name_copy);
	service_name_copy = NULL;
	pthread_mutex_unlock(&ctx_lock);
	return 0;
}

TP_SDK_EXPORT int tp_sdk_key_register(const char *name)
{
	uint32_t n;
	int ret;

	if (!name || !*name)
		return -EINVAL;
	pthread_mutex_lock(&ctx_lock);
	n = atomic_load(&tp_sdk_nkeys);
	for (uint32_t i = 0; i < n; i++) {
		if (!strcmp(keys[i], name)) {
			ret = (int)i;
			goto out_unlock;
		}
	}
	if (n == MAX_KEYS) {
		ret = -ENOSPC;
		goto out_unlock;
	}
	keys[n] = strdup(name);
	if (!keys[n]) {
		ret = -ENOMEM;
		goto out_unlock;
	}
	atomic_store_explicit(&tp_sdk_nkeys, n + 1, memory_order_release);
	ret = (int)n;
	/*
	 * The index is assigned for good (the map is append-only). If the
	 * mapping cannot be updated now, the next publish carries the name.
	 */
	if (have_resource)
		publish_locked();
out_unlock:
	pthread_mutex_unlock(&ctx_lock);
	return ret;
}

int tp_sdk_published_service_name(char *out, size_t size)
{
	int ret = -ENOENT;

	pthread_mutex_lock(&ctx_lock);
	if (service_name_copy && size) {
		snprintf(out, size, "%s", service_name_copy);
		ret = 0;
	}
	pthread_mutex_unlock(&ctx_lock);
	return ret;
}
