/*
 * test_sdk: the SDK writes what OTEP 4947 and OTEP 4719 readers expect.
 *
 * The thread record is read the way an agent reads it: through the
 * otel_thread_ctx_v1 symbol found in the shared library's dynamic symbols
 * (dlopen/dlsym of the built .so), then byte by byte at the address it holds.
 * The process context is found by scanning /proc/self/maps for the OTEL_CTX
 * mapping and read through /proc/self/mem, following the reading protocol,
 * and its protobuf payload is decoded by a small independent decoder.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "traceprof/sdk.h"

static void **tls_slot; /* this thread's otel_thread_ctx_v1, from dlsym */

static const uint8_t tid1[16] = {0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6,
				 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36};
static const uint8_t sid1[8] = {0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7};

static void test_traceparent(void)
{
	static const char *invalid[] = {
	    "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0",	 /* short */
	    "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-011",	 /* long, v00 */
	    "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x", /* v00 extra */
	    "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",	 /* upper case */
	    "00-4bf92f3577b34da6a3ce929d0e0e4736-00F067AA0BA902B7-01",	 /* upper case */
	    "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0A",	 /* upper flags */
	    "00-00000000000000000000000000000000-00f067aa0ba902b7-01",	 /* zero trace */
	    "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",	 /* zero span */
	    "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",	 /* version ff */
	    "0g-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",	 /* bad version */
	    "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",	 /* separator */
	    "00-4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7-01",	 /* separator */
	    "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7_01",	 /* separator */
	    "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",	 /* not hex */
	    "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902bz-01",	 /* not hex */
	    "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0z",	 /* not hex */
	    "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x",	 /* v01 no '-' */
	    "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",	 /* v01 short */
	    " 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",	 /* space */
	    "",
	};
	uint8_t tid[16], sid[8], flags = 0;
	char out[TP_SDK_TRACEPARENT_LEN + 1];
	const char *v00 = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
	const char *v01 = "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-09-what-the-future";

	CHECK(tp_sdk_traceparent_parse(v00, strlen(v00), tid, sid, &flags) == 0, "valid v00");
	CHECK(!memcmp(tid, tid1, 16) && !memcmp(sid, sid1, 8) && flags == 1, "v00 fields");
	CHECK(tp_sdk_traceparent_parse(v01, strlen(v01), tid, sid, &flags) == 0, "future version");
	CHECK(flags == 9 && !memcmp(tid, tid1, 16), "future version fields from the prefix");
	CHECK(tp_sdk_traceparent_parse(v01, TP_SDK_TRACEPARENT_LEN, tid, sid, &flags) == 0,
	      "future version of exactly 55 bytes");
	for (size_t i = 0; i < sizeof(invalid) / sizeof(invalid[0]); i++)
		CHECK(tp_sdk_traceparent_parse(invalid[i], strlen(invalid[i]), tid, sid, &flags) ==
			  -EINVAL,
		      "invalid #%zu: '%s'", i, invalid[i]);
	CHECK(tp_sdk_traceparent_parse(NULL, 55, tid, sid, &flags) == -EINVAL, "NULL text");

	CHECK(tp_sdk_traceparent_format(tid1, sid1, 1, out, sizeof(out)) == 0, "format");
	CHECK(!strcmp(out, v00), "formatted '%s'", out);
	CHECK(tp_sdk_traceparent_format(tid1, sid1, 1, out, sizeof(out) - 1) == -ENOSPC,
	      "short buffer");
	memset(tid, 0, sizeof(tid));
	CHECK(tp_sdk_traceparent_format(tid, sid1, 1, out, sizeof(out)) == -EINVAL, "zero id");
}

/* The reference: a character's value as W3C allows it (lower case hex), or -1. */
static int ref_hex(unsigned char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/*
 * Every byte value at every hex position of a version 00 traceparent:
 * the parser accepts exactly the lower case hex digits there, and puts the
 * digit's value in the right nibble of the right field.
 */
static void test_traceparent_every_byte(void)
{
	static const char v00[] = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
	char text[TP_SDK_TRACEPARENT_LEN];
	uint8_t tid[16], sid[8], flags, want[25];
	size_t fails = 0;
	bool wrong;

	for (size_t pos = 3; pos < TP_SDK_TRACEPARENT_LEN; pos++) {
		size_t digit; /* index among the 50 hex digits of trace, span and flags */

		if (pos == 35 || pos == 52)
			continue;
		digit = pos - 3 - (pos > 35) - (pos > 52);
		for (int c = 0; c < 256; c++) {
			int v = ref_hex((unsigned char)c), rc;

			memcpy(text, v00, sizeof(text));
			text[pos] = (char)c;
			for (size_t i = 0; i < 25; i++) {
				size_t at = 3 + 2 * i + (i >= 16) + (i >= 24);

				want[i] = (uint8_t)(ref_hex((unsigned char)text[at]) << 4 |
						    (ref_hex((unsigned char)text[at + 1]) & 0x0f));
			}
			rc = tp_sdk_traceparent_parse(text, sizeof(text), tid, sid, &flags);
			/* one digit changed: the ids stay non-zero */
			wrong = v < 0 ? rc != -EINVAL
				      : rc != 0 || memcmp(tid, want, 16) ||
					    memcmp(sid, want + 16, 8) || flags != want[24];
			if (wrong && !fails++)
				CHECK(false, "first wrong: byte 0x%02x at %zu (hex digit %zu)", c,
				      pos, digit);
		}
	}
	CHECK(fails == 0, "every byte at every hex position: %zu wrong", fails);
}

static void test_ids(void)
{
	uint8_t a[16], b[16], s[8], t[8], z[16] = {0};
	char text[TP_SDK_TRACEPARENT_LEN + 1];
	uint8_t tid[16], sid[8], flags;

	tp_sdk_new_trace_id(a);
	tp_sdk_new_trace_id(b);
	tp_sdk_new_span_id(s);
	tp_sdk_new_span_id(t);
	CHECK(memcmp(a, z, 16) && memcmp(s, z, 8), "ids are not zero");
	CHECK(memcmp(a, b, 16) && memcmp(s, t, 8), "ids differ");
	CHECK(tp_sdk_traceparent_format(a, s, 3, text, sizeof(text)) == 0, "format random");
	CHECK(tp_sdk_traceparent_parse(text, strlen(text), tid, sid, &flags) == 0 &&
		  !memcmp(tid, a, 16) && !memcmp(sid, s, 8) && flags == 3,
	      "round trip");
}

/* The record bytes the spec defines, for comparison. */
static size_t expected_record(uint8_t *out, const uint8_t *tid, const uint8_t *sid, uint8_t valid,
			      uint8_t flags, const uint8_t *attrs, uint16_t attrs_size)
{
	memcpy(out, tid, 16);
	memcpy(out + 16, sid, 8);
	out[24] = valid;
	out[25] = flags;
	memcpy(out + 26, &attrs_size, 2); /* host endianness */
	memcpy(out + 28, attrs, attrs_size);
	return 28 + (size_t)attrs_size;
}

static void test_thread_record(int route, int method)
{
	struct tp_sdk_attr attrs[2] = {
	    {.key = (uint32_t)route, .value_len = 8, .value = "/cart/{id}"},
	    {.key = (uint32_t)method, .value_len = 4, .value = "POST"},
	};
	uint8_t want[TP_SDK_RECORD_SIZE], wattrs[64], zero[16] = {0};
	const uint8_t *rec;
	size_t n;
	char big[400];
	struct tp_sdk_attr many[3];

	CHECK(tp_sdk_attach(tid1, sid1, 1, attrs, 2) == 0, "attach");
	rec = *tls_slot;
	CHECK(rec != NULL, "otel_thread_ctx_v1 points at the record after attach");
	if (!rec)
		return;
	CHECK(((uintptr_t)rec & 1) == 0, "record aligned to 2 bytes");
	memcpy(wattrs, (uint8_t[]){(uint8_t)route, 8}, 2);
	memcpy(wattrs + 2, "/cart/{i", 8);
	memcpy(wattrs + 10, (uint8_t[]){(uint8_t)method, 4}, 2);
	memcpy(wattrs + 12, "POST", 4);
	n = expected_record(want, tid1, sid1, 1, 1, wattrs, 16);
	CHECK(!memcmp(rec, want, n), "record bytes as OTEP 4947 lays them out");

	CHECK(tp_sdk_detach() == 0, "detach");
	CHECK(*tls_slot == rec, "the pointer stays (valid-flag variant)");
	CHECK(rec[24] == 0, "detach clears valid");

	CHECK(tp_sdk_attach(sid1, zero, 0, NULL, 0) == -EINVAL, "zero span id refused");
	CHECK(tp_sdk_attach(zero, sid1, 0, NULL, 0) == -EINVAL, "zero trace id refused");
	CHECK(rec[24] == 0, "a refused attach changes nothing");
	attrs[1].key = 200;
	CHECK(tp_sdk_attach(tid1, sid1, 1, attrs, 2) == -EINVAL, "unregistered key refused");
	CHECK(rec[24] == 0, "a refused attach changes nothing");

	CHECK(tp_sdk_attach(tid1, sid1, 0, NULL, 0) == 0, "attach without attributes");
	n = expected_record(want, tid1, sid1, 1, 0, NULL, 0);
	CHECK(!memcmp(rec, want, n), "fixed part only, attrs-data-size 0");

	/* 300 bytes of 'x' then a 3-byte character cut by the 255-byte limit */
	memset(big, 'x', sizeof(big));
	memcpy(big + 253, "\xe2\x82\xac", 3);
	many[0] = (struct tp_sdk_attr){.key = (uint32_t)route, .value_len = 300, .value = big};
	CHECK(tp_sdk_attach(tid1, sid1, 1, many, 1) == 0, "long value");
	CHECK(rec[28 + 1] == 253 && rec[26] + (rec[27] << 8) == 255,
	      "value cut to 255 bytes at a character boundary (%d)", rec[29]);
	many[1] = many[0];
	many[2] = (struct tp_sdk_attr){.key = (uint32_t)method, .value_len = 3, .value = "GET"};
	many[1].value_len = 255 + 10;
	CHECK(tp_sdk_attach(tid1, sid1, 1, many, 3) == 0, "two long values and a short one");
	many[2].value_len = 3;
	many[0].value_len = 255;
	many[1].value_len = 255;
	{
		struct tp_sdk_attr four[4] = {many[0], many[1], many[0], many[2]};

		CHECK(tp_sdk_attach(tid1, sid1, 1, four, 4) == -ENOSPC, "too many: -ENOSPC");
		CHECK(rec[24] == 1, "still attached");
		CHECK(rec[26] + (rec[27] << 8) == 2 * 257 + 5, "what fits is kept (%d)",
		      rec[26] + (rec[27] << 8));
	}
	tp_sdk_detach();
}

/* Per-thread isolation: each thread sees its own record through the symbol. */
struct thread_arg {
	void *sym;	      /* dlsym handle of otel_thread_ctx_v1 lookup */
	uint8_t tid[16];      /* trace id this thread attaches */
	const uint8_t *rec;   /* the record this thread's pointer held */
	uint8_t seen[28];     /* its fixed part, read in the thread */
	bool registered;      /* register alone set the pointer, record not valid */
	pthread_barrier_t *b; /* both attached before either reads */
};

static void *thread_main(void *p)
{
	struct thread_arg *a = p;
	void *h = a->sym;
	void **slot = dlsym(h, "otel_thread_ctx_v1");

	tp_sdk_thread_register();
	tp_sdk_thread_register();
	a->registered = slot && *slot && ((const uint8_t *)*slot)[24] == 0;
	tp_sdk_attach(a->tid, sid1, 1, NULL, 0);
	pthread_barrier_wait(a->b);
	a->rec = slot ? *slot : NULL;
	if (a->rec)
		memcpy(a->seen, a->rec, sizeof(a->seen));
	pthread_barrier_wait(a->b);
	return NULL;
}

static void test_threads(void *h)
{
	pthread_barrier_t b;
	struct thread_arg a[2] = {{.sym = h, .b = &b}, {.sym = h, .b = &b}};
	pthread_t t[2];

	memcpy(a[0].tid, tid1, 16);
	memcpy(a[1].tid, tid1, 16);
	a[1].tid[0] ^= 0xff;
	pthread_barrier_init(&b, NULL, 2);
	for (int i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, thread_main, &a[i]);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	pthread_barrier_destroy(&b);
	CHECK(a[0].rec && a[1].rec && a[0].rec != a[1].rec, "one record per thread");
	CHECK(a[0].rec != *tls_slot && a[1].rec != *tls_slot, "not the main thread's");
	for (int i = 0; i < 2; i++)
		CHECK(a[i].registered, "thread %d: register sets the pointer to an invalid record",
		      i);
	for (int i = 0; i < 2; i++)
		CHECK(!memcmp(a[i].seen, a[i].tid, 16) && a[i].seen[24] == 1,
		      "thread %d sees its own trace id", i);
}

/* Finds the OTEL_CTX mapping in /proc/self/maps: its start, or 0; counts them. */
static uintptr_t find_ctx_mapping(int *count)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	uintptr_t found = 0;

	*count = 0;
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		const char *name = strchr(line, '/');

		if (!name)
			name = strchr(line, '[');
		if (!name)
			continue;
		if (!strncmp(name, "/memfd:OTEL_CTX", 15) ||
		    !strncmp(name, "[anon_shmem:OTEL_CTX]", 21)) {
			found = (uintptr_t)strtoull(line, NULL, 16);
			(*count)++;
		}
	}
	fclose(f);
	return found;
}

struct header {
	char signature[8];	  /* "OTEL_CTX" */
	uint32_t version;	  /* 2 */
	uint32_t payload_size;	  /* bytes */
	uint64_t published_at_ns; /* 0 while updating */
	uint64_t payload;	  /* address of the payload */
};

/* Decoded Resource: string attributes and the one string array. */
struct resource {
	int n;		    /* string attributes */
	char key[16][64];   /* their keys */
	char val[16][64];   /* their values */
	unsigned field[16]; /* 1: in ProcessContext.resource, 2: in its attributes */
	unsigned arr_field; /* the same for the array attribute */
	int narr;	    /* strings in the array attribute */
	char arr_key[64];   /* its key */
	char arr[16][64];   /* its values */
};

static bool pb_varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
	*v = 0;
	for (int s = 0; *p < end && s < 64; s += 7) {
		uint8_t c = *(*p)++;

		*v |= (uint64_t)(c & 0x7f) << s;
		if (!(c & 0x80))
			return true;
	}
	return false;
}

/* Next length-delimited field in [*p, end); false at the end or on anything else. */
static bool pb_field(const uint8_t **p, const uint8_t *end, unsigned *num, const uint8_t **data,
		     size_t *len)
{
	uint64_t tag, l;

	if (*p >= end || !pb_varint(p, end, &tag) || (tag & 7) != 2 || !pb_varint(p, end, &l) ||
	    l > (uint64_t)(end - *p))
		return false;
	*num = (unsigned)(tag >> 3);
	*data = *p;
	*len = (size_t)l;
	*p += l;
	return true;
}

static void copy_str(char *dst, const uint8_t *s, size_t len)
{
	len = len < 63 ? len : 63;
	memcpy(dst, s, len);
	dst[len] = '\0';
}

/* One KeyValue into r; field: 1 when in ProcessContext.resource, 2 in attributes. */
static bool decode_kv(const uint8_t *kv, size_t kvlen, unsigned field, struct resource *r)
{
	const uint8_t *f;
	size_t flen;
	unsigned num;
	char key[64] = "";

	for (const uint8_t *q = kv; q < kv + kvlen;) {
		if (!pb_field(&q, kv + kvlen, &num, &f, &flen))
			return false;
		if (num == 1) {
			copy_str(key, f, flen);
		} else if (num == 2) {
			const uint8_t *a = f, *v;
			size_t vlen;

			if (!pb_field(&a, f + flen, &num, &v, &vlen))
				return false;
			if (num == 1 && r->n < 16) { /* string_value */
				strcpy(r->key[r->n], key);
				r->field[r->n] = field;
				copy_str(r->val[r->n++], v, vlen);
			} else if (num == 5) { /* array_value */
				const uint8_t *e, *s;
				size_t elen, slen;

				strcpy(r->arr_key, key);
				r->arr_field = field;
				for (const uint8_t *w = v; w < v + vlen && r->narr < 16;) {
					if (!pb_field(&w, v + vlen, &num, &e, &elen) ||
					    !pb_field(&e, e + elen, &num, &s, &slen))
						return false;
					copy_str(r->arr[r->narr++], s, slen);
				}
			}
		}
	}
	return true;
}

/* ProcessContext { Resource resource = 1; repeated KeyValue attributes = 2 }. */
static bool decode_resource(const uint8_t *p, size_t size, struct resource *r)
{
	const uint8_t *end = p + size, *m, *kv;
	size_t mlen, kvlen;
	unsigned num;

	memset(r, 0, sizeof(*r));
	while (p < end) {
		if (!pb_field(&p, end, &num, &m, &mlen))
			return false;
		if (num == 2 && !decode_kv(m, mlen, 2, r))
			return false;
		if (num != 1)
			continue;
		for (const uint8_t *q = m; q < m + mlen;)
			if (!pb_field(&q, m + mlen, &num, &kv, &kvlen) || num != 1 ||
			    !decode_kv(kv, kvlen, 1, r))
				return false;
	}
	return true;
}

/* The field (1: resource, 2: attributes) that holds key, or 0. */
static unsigned attr_field(const struct resource *r, const char *key)
{
	for (int i = 0; i < r->n; i++)
		if (!strcmp(r->key[i], key))
			return r->field[i];
	return 0;
}

static const char *attr(const struct resource *r, const char *key)
{
	for (int i = 0; i < r->n; i++)
		if (!strcmp(r->key[i], key))
			return r->val[i];
	return NULL;
}

/* Reads the context as an external reader: header, payload, header again. */
static bool read_ctx(int mem, uintptr_t at, struct header *h, struct resource *r)
{
	uint8_t payload[4096];
	struct header again;

	if (pread(mem, h, sizeof(*h), (off_t)at) != sizeof(*h))
		return false;
	if (memcmp(h->signature, "OTEL_CTX", 8) || h->version != 2 || !h->published_at_ns ||
	    h->payload_size > sizeof(payload))
		return false;
	if (pread(mem, payload, h->payload_size, (off_t)(at + sizeof(*h))) != h->payload_size)
		return false;
	if (pread(mem, &again, sizeof(again), (off_t)at) != sizeof(again) ||
	    again.published_at_ns != h->published_at_ns)
		return false;
	return decode_resource(payload, h->payload_size, r);
}

static void test_process_context(void)
{
	struct tp_sdk_kv kv[] = {{"deployment.environment.name", "prod"},
				 {"service.instance.id", "7c1f"}};
	struct header h;
	struct resource *r = malloc(sizeof(*r));
	uintptr_t at;
	uint64_t first_ns, now_ns;
	struct timespec now;
	int count, mem = open("/proc/self/mem", O_RDONLY), status;
	pid_t pid;

	CHECK(find_ctx_mapping(&count) == 0, "no context before publishing");
	CHECK(tp_sdk_process_publish("", NULL, 0) == -EINVAL, "empty service.name refused");
	CHECK(tp_sdk_process_publish("checkout", kv, 2) == 0, "publish");
	at = find_ctx_mapping(&count);
	CHECK(at != 0 && count == 1, "one OTEL_CTX mapping in /proc/self/maps (%d)", count);
	CHECK(read_ctx(mem, at, &h, r), "header and payload read consistently");
	CHECK(h.payload == at + sizeof(h), "payload pointer right after the header");
	CHECK(attr(r, "service.name") && !strcmp(attr(r, "service.name"), "checkout"),
	      "service.name");
	CHECK(attr(r, "deployment.environment.name") &&
		  !strcmp(attr(r, "deployment.environment.name"), "prod"),
	      "custom attribute");
	CHECK(attr(r, "service.instance.id") && !strcmp(attr(r, "service.instance.id"), "7c1f"),
	      "custom attribute");
	CHECK(attr(r, "threadlocal.schema_version") &&
		  !strcmp(attr(r, "threadlocal.schema_version"), "tls_v1"),
	      "schema version");
	CHECK(attr_field(r, "service.name") == 1 && attr_field(r, "service.instance.id") == 1,
	      "resource attributes in ProcessContext.resource");
	CHECK(attr_field(r, "threadlocal.schema_version") == 2 && r->arr_field == 2,
	      "threadlocal.* in ProcessContext.attributes");
	clock_gettime(CLOCK_BOOTTIME, &now);
	now_ns = (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
	CHECK(h.published_at_ns <= now_ns && h.published_at_ns + 60000000000ull > now_ns,
	      "monotonic_published_at_ns on CLOCK_BOOTTIME");
	CHECK(!strcmp(r->arr_key, "threadlocal.attribute_key_map") && r->narr == 2 &&
		  !strcmp(r->arr[0], "http.route") && !strcmp(r->arr[1], "http.method"),
	      "key map in index order");
	first_ns = h.published_at_ns;

	CHECK(tp_sdk_key_register("user.tier") == 2, "a new key appends");
	CHECK(find_ctx_mapping(&count) == at && count == 1, "updated in place");
	CHECK(read_ctx(mem, at, &h, r) && h.published_at_ns > first_ns, "new timestamp");
	CHECK(r->narr == 3 && !strcmp(r->arr[2], "user.tier"), "key map updated");

	CHECK(tp_sdk_process_publish("cart", NULL, 0) == 0, "update");
	CHECK(read_ctx(mem, at, &h, r) && !strcmp(attr(r, "service.name"), "cart") &&
		  !attr(r, "deployment.environment.name") && r->narr == 3,
	      "updated attributes");

	pid = fork();
	if (pid == 0)
		_exit(find_ctx_mapping(&count) == 0 ? 0 : 1);
	CHECK(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
		  WEXITSTATUS(status) == 0,
	      "a forked child does not inherit the mapping");

	CHECK(tp_sdk_process_remove() == 0, "remove");
	CHECK(find_ctx_mapping(&count) == 0, "no mapping after remove");
	CHECK(tp_sdk_process_remove() == 0, "remove twice");
	close(mem);
	free(r);
}

int main(void)
{
	void *h = dlopen(TP_SDK_SO, RTLD_NOW | RTLD_NOLOAD);
	int route, method;

	CHECK(h != NULL, "the linked SDK is the built .so: %s", dlerror());
	if (!h)
		return check_done();
	tls_slot = dlsym(h, "otel_thread_ctx_v1");
	CHECK(tls_slot != NULL, "otel_thread_ctx_v1 in .dynsym");
	CHECK(dlsym(h, "tp_sdk_attach") == (void *)tp_sdk_attach, "same library instance");
	CHECK(dlsym(h, "tp_hex_decode") == NULL, "internal helpers are not exported");
	if (!tls_slot)
		return check_done();
	CHECK(*tls_slot == NULL, "no record before the first attach");

	test_traceparent();
	test_traceparent_every_byte();
	test_ids();
	route = tp_sdk_key_register("http.route");
	method = tp_sdk_key_register("http.method");
	CHECK(route == 0 && method == 1 && tp_sdk_key_register("http.route") == 0, "key indexes");
	test_thread_record(route, method);
	test_threads(h);
	test_process_context();
	dlclose(h);
	return check_done();
}
